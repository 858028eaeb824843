//! Advisory file locks (`flock`) that the kernel releases when their holder dies.
//!
//! Every acquisition opens the lock file anew, so two threads of one process hold two open
//! file descriptions and exclude each other exactly as two processes do.
//!
//! Lock files may be deleted (when their entry is evicted). Deleting is done only while
//! holding the exclusive lock, and every acquirer checks after locking that the file it locked
//! is still the one at the path; if not, it starts over. So two parties can never believe they
//! hold conflicting locks on two different inodes of the same name.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{CacheError, io_err};

/// Shared (many holders) or exclusive (one holder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockKind {
    Shared,
    Exclusive,
}

/// A held lock; released on drop (or by the kernel if the process dies).
#[derive(Debug)]
pub(crate) struct FileLock {
    /// Held only for the lock on its open file description.
    _file: File,
    path: PathBuf,
}

impl FileLock {
    /// Waits for the lock; `on_wait` runs once, before blocking, if someone else holds it.
    pub(crate) fn acquire(
        path: &Path,
        kind: LockKind,
        mut on_wait: impl FnMut(),
    ) -> Result<FileLock, CacheError> {
        let mut announced = false;
        loop {
            let file = open(path)?;
            match try_lock(&file, kind) {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    if !announced {
                        on_wait();
                        announced = true;
                    }
                    lock(&file, kind).map_err(io_err("lock", path))?;
                }
                Err(TryLockError::Error(e)) => return Err(io_err("lock", path)(e)),
            }
            if still_linked(&file, path)? {
                return Ok(FileLock {
                    _file: file,
                    path: path.to_owned(),
                });
            }
        }
    }

    /// Takes the lock if nobody else holds a conflicting one.
    pub(crate) fn try_acquire(path: &Path, kind: LockKind) -> Result<Option<FileLock>, CacheError> {
        loop {
            let file = open(path)?;
            match try_lock(&file, kind) {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => return Ok(None),
                Err(TryLockError::Error(e)) => return Err(io_err("lock", path)(e)),
            }
            if still_linked(&file, path)? {
                return Ok(Some(FileLock {
                    _file: file,
                    path: path.to_owned(),
                }));
            }
        }
    }

    /// Removes the lock file while the lock is held (exclusive holders only).
    pub(crate) fn unlink(&self) {
        if let Err(e) = fs::remove_file(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::debug!("cannot remove lock file {}: {e}", self.path.display());
        }
    }
}

fn open(path: &Path) -> Result<File, CacheError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(io_err("open lock file", path))
}

fn try_lock(file: &File, kind: LockKind) -> Result<(), TryLockError> {
    match kind {
        LockKind::Shared => file.try_lock_shared(),
        LockKind::Exclusive => file.try_lock(),
    }
}

fn lock(file: &File, kind: LockKind) -> io::Result<()> {
    match kind {
        LockKind::Shared => file.lock_shared(),
        LockKind::Exclusive => file.lock(),
    }
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

    #[test]
    fn exclusive_excludes_within_one_process() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("k.lock");
        let held = FileLock::acquire(&path, LockKind::Exclusive, || {}).unwrap();
        assert!(
            FileLock::try_acquire(&path, LockKind::Exclusive)
                .unwrap()
                .is_none()
        );
        assert!(
            FileLock::try_acquire(&path, LockKind::Shared)
                .unwrap()
                .is_none()
        );
        drop(held);
        assert!(
            FileLock::try_acquire(&path, LockKind::Exclusive)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn shared_locks_coexist_and_block_exclusive() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("k.lock");
        let a = FileLock::acquire(&path, LockKind::Shared, || {}).unwrap();
        let b = FileLock::try_acquire(&path, LockKind::Shared).unwrap();
        assert!(b.is_some());
        assert!(
            FileLock::try_acquire(&path, LockKind::Exclusive)
                .unwrap()
                .is_none()
        );
        drop((a, b));
        assert!(
            FileLock::try_acquire(&path, LockKind::Exclusive)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn unlinked_lock_is_not_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("k.lock");
        let first = FileLock::acquire(&path, LockKind::Exclusive, || {}).unwrap();
        first.unlink();
        // The name is free again: a new acquirer creates and locks a new file even though the
        // unlinked one is still locked.
        let second = FileLock::try_acquire(&path, LockKind::Exclusive).unwrap();
        assert!(second.is_some());
        assert!(path.exists());
        drop(first);
    }

    #[test]
    fn waiting_is_announced_once() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("k.lock");
        let held = FileLock::acquire(&path, LockKind::Exclusive, || {}).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut announcements = 0;
                let lock = FileLock::acquire(&path, LockKind::Exclusive, || {
                    announcements += 1;
                    tx.send(()).unwrap();
                })
                .unwrap();
                drop(lock);
                announcements
            })
        };
        rx.recv().unwrap();
        drop(held);
        assert_eq!(waiter.join().unwrap(), 1);
    }
}
