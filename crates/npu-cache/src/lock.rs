//! Build locks: advisory file locks (`flock`) that the kernel releases when their holder dies.
//!
//! Every acquisition opens the lock file anew, so two threads of one process hold two open
//! file descriptions and exclude each other exactly as two processes do.
//!
//! Lock files may be deleted (when their entry is evicted). Deleting is done only while
//! holding the exclusive lock, and every acquirer checks after locking that the file it locked
//! is still the one at the path; if not, it starts over. So two parties can never believe they
//! hold conflicting locks on two different inodes of the same name.
//!
//! A lock file is refused unless it belongs to this user and only this user can write it: a
//! lock planted by someone else could stall every build of its key.
//!
//! The holder of a build lock writes `pid <pid> since <unix seconds>` into it, so a process
//! that has to wait can say whom it waits for.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{CacheError, io_err};
use crate::location::{check_private, inside_remedy};

/// A held exclusive lock; released on drop (or by the kernel if the process dies).
#[derive(Debug)]
pub(crate) struct FileLock {
    file: File,
    path: PathBuf,
}

/// Who holds a build lock, as its holder recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// When it took the lock (Unix seconds).
    pub since_unix: u64,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        write!(
            f,
            "process {} (building since {} s ago)",
            self.pid,
            now.saturating_sub(self.since_unix)
        )
    }
}

/// How long to wait for another process's build, and when to say so at info level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Patience {
    pub timeout: Duration,
    pub announce_after: Duration,
}

/// What waiting for a lock ended with.
pub(crate) enum Waited {
    Acquired(FileLock),
    /// The lock is still held after the whole timeout; the holder, if it said who it is.
    TimedOut(Option<Holder>),
}

impl FileLock {
    /// Takes the exclusive lock, waiting up to `patience.timeout` for its holder. Says at
    /// debug level at once whom it waits for, and at info level after
    /// `patience.announce_after`. Records this process as the holder once acquired.
    pub(crate) fn acquire(
        path: &Path,
        patience: Patience,
        what: &str,
    ) -> Result<Waited, CacheError> {
        let started = Instant::now();
        loop {
            let file = open(path)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    let holder = holder_once_recorded(&file);
                    let shown = holder
                        .as_ref()
                        .map_or_else(|| "another process".to_owned(), Holder::to_string);
                    tracing::debug!("waiting for {shown} to build {what}");
                    let remaining = patience.timeout.saturating_sub(started.elapsed());
                    match wait_in_background(file, path, remaining, patience, &shown, what)? {
                        Some(file) => {
                            if still_linked(&file, path)? {
                                return Ok(Waited::Acquired(FileLock::held(file, path)));
                            }
                            continue;
                        }
                        None => {
                            let holder = open(path).ok().and_then(|f| read_holder(&f)).or(holder);
                            return Ok(Waited::TimedOut(holder));
                        }
                    }
                }
                Err(TryLockError::Error(e)) => return Err(io_err("lock", path)(e)),
            }
            if still_linked(&file, path)? {
                return Ok(Waited::Acquired(FileLock::held(file, path)));
            }
        }
    }

    /// Takes the exclusive lock if nobody holds it.
    pub(crate) fn try_acquire(path: &Path) -> Result<Option<FileLock>, CacheError> {
        loop {
            let file = open(path)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => return Ok(None),
                Err(TryLockError::Error(e)) => return Err(io_err("lock", path)(e)),
            }
            if still_linked(&file, path)? {
                return Ok(Some(FileLock {
                    file,
                    path: path.to_owned(),
                }));
            }
        }
    }

    fn held(file: File, path: &Path) -> FileLock {
        let lock = FileLock {
            file,
            path: path.to_owned(),
        };
        lock.record_holder();
        lock
    }

    /// Writes `pid <pid> since <now>` into the lock file (best effort: only for messages).
    fn record_holder(&self) {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let text = format!("pid {} since {since}\n", std::process::id());
        let mut file = &self.file;
        let written = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(text.as_bytes()));
        if let Err(e) = written {
            tracing::debug!("cannot record the holder in {}: {e}", self.path.display());
        }
    }

    /// Removes the lock file while the lock is held.
    pub(crate) fn unlink(&self) {
        if let Err(e) = fs::remove_file(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::debug!("cannot remove lock file {}: {e}", self.path.display());
        }
    }
}

/// Blocks on the lock in a helper thread so the wait can end after `remaining`: `flock` has
/// no timeout. If the caller gives up, the helper still gets the lock once the holder lets go,
/// and drops it at once.
fn wait_in_background(
    file: File,
    path: &Path,
    remaining: Duration,
    patience: Patience,
    holder: &str,
    what: &str,
) -> Result<Option<File>, CacheError> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("npu-cache-wait".into())
        .spawn(move || {
            let result = file.lock().map(|()| file);
            let _ = tx.send(result);
        })
        .map_err(io_err("start a thread to wait for the lock", path))?;
    let announce = patience.announce_after.min(remaining);
    match rx.recv_timeout(announce) {
        Ok(result) => return result.map(Some).map_err(io_err("lock", path)),
        Err(mpsc::RecvTimeoutError::Timeout) => {}
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            return Err(io_err("lock", path)(io::Error::other(
                "the waiting thread died",
            )));
        }
    }
    if announce < remaining {
        tracing::info!(
            "still waiting for {holder} to build {what}; giving up after {} s in all \
             (AMD_TRITON_NPU_CACHE_WAIT_TIMEOUT)",
            patience.timeout.as_secs()
        );
    }
    match rx.recv_timeout(remaining - announce) {
        Ok(result) => result.map(Some).map_err(io_err("lock", path)),
        Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(io_err("lock", path)(io::Error::other(
            "the waiting thread died",
        ))),
    }
}

/// Opens (creating if needed) a lock file and refuses one that is not private to this user.
fn open(path: &Path) -> Result<File, CacheError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                CacheError::Unsafe {
                    path: path.to_owned(),
                    problem: "it is a symlink".to_owned(),
                    remedy: inside_remedy(path),
                }
            } else {
                io_err("open lock file", path)(e)
            }
        })?;
    let meta = file.metadata().map_err(io_err("inspect lock file", path))?;
    check_private(path, &meta, &inside_remedy(path))?;
    Ok(file)
}

/// The holder a lock file names, if it names one.
fn read_holder(file: &File) -> Option<Holder> {
    let mut text = String::new();
    let mut reader = file;
    reader.seek(SeekFrom::Start(0)).ok()?;
    reader.take(256).read_to_string(&mut text).ok()?;
    let mut words = text.split_whitespace();
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("pid"), Some(pid), Some("since"), Some(since)) => Some(Holder {
            pid: pid.parse().ok()?,
            since_unix: since.parse().ok()?,
        }),
        _ => None,
    }
}

/// The holder of a lock that is held, giving it a moment to record itself: it takes the lock
/// first and writes its pid after, so a waiter that arrives in between would otherwise only
/// know that "another process" builds.
fn holder_once_recorded(file: &File) -> Option<Holder> {
    for _ in 0..50 {
        if let Some(holder) = read_holder(file) {
            return Some(holder);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    read_holder(file)
}

/// Whether `file` is still the file at `path` (not deleted or replaced since we opened it).
fn still_linked(file: &File, path: &Path) -> Result<bool, CacheError> {
    let held = file.metadata().map_err(io_err("inspect lock file", path))?;
    match fs::symlink_metadata(path) {
        Ok(now) => Ok(now.dev() == held.dev() && now.ino() == held.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err("inspect lock file", path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATIENT: Patience = Patience {
        timeout: Duration::from_secs(60),
        announce_after: Duration::from_secs(3),
    };

    fn acquired(w: Waited) -> FileLock {
        match w {
            Waited::Acquired(l) => l,
            Waited::TimedOut(h) => panic!("timed out waiting for {h:?}"),
        }
    }

    #[test]
    fn exclusive_excludes_within_one_process() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("k.lock");
        let held = acquired(FileLock::acquire(&path, PATIENT, "k").unwrap());
        assert!(FileLock::try_acquire(&path).unwrap().is_none());
        drop(held);
        assert!(FileLock::try_acquire(&path).unwrap().is_some());
    }

    #[test]
    fn unlinked_lock_is_not_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("k.lock");
        let first = acquired(FileLock::acquire(&path, PATIENT, "k").unwrap());
        first.unlink();
        // The name is free again: a new acquirer creates and locks a new file even though the
        // unlinked one is still locked.
        let second = FileLock::try_acquire(&path).unwrap();
        assert!(second.is_some());
        assert!(path.exists());
        drop(first);
    }

    #[test]
    fn the_holder_is_recorded_and_a_waiter_gives_up_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("k.lock");
        let _held = acquired(FileLock::acquire(&path, PATIENT, "k").unwrap());
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(&format!("pid {} since ", std::process::id())),
            "{text}"
        );
        let short = Patience {
            timeout: Duration::from_millis(200),
            announce_after: Duration::from_millis(50),
        };
        let started = Instant::now();
        match FileLock::acquire(&path, short, "k").unwrap() {
            Waited::TimedOut(Some(holder)) => assert_eq!(holder.pid, std::process::id()),
            Waited::TimedOut(None) => panic!("holder not read"),
            Waited::Acquired(_) => panic!("acquired a held lock"),
        }
        assert!(started.elapsed() >= Duration::from_millis(200));
    }

    #[test]
    fn a_waiter_gets_the_lock_when_the_holder_lets_go() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("k.lock");
        let held = acquired(FileLock::acquire(&path, PATIENT, "k").unwrap());
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || acquired(FileLock::acquire(&path, PATIENT, "k").unwrap()))
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        let _now_held = waiter.join().unwrap();
    }

    #[test]
    fn a_lock_file_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("k.lock");
        fs::write(&path, "").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
        let err = FileLock::try_acquire(&path).unwrap_err();
        assert!(matches!(err, CacheError::Unsafe { .. }), "{err}");
        assert!(err.to_string().contains("mode 0666"), "{err}");
        let link = tmp.path().join("l.lock");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let err = FileLock::try_acquire(&link).unwrap_err();
        assert!(err.to_string().contains("is a symlink"), "{err}");
    }
}
