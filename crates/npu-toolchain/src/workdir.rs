//! Where a compile writes its files.
//!
//! Every compile runs in its own private directory (mode 0700, `<temp>/triton-npu-work-*`)
//! that is deleted afterwards: concurrent compiles never share upstream's `./air_project`.
//! aircc runs with that directory as its working directory, so its default `--tmpdir`
//! (`air_project`) lands inside too.
//!
//! A builder killed with SIGKILL cannot delete its directory, so the next compile does: each
//! directory holds `.owner`, a file its builder keeps locked (`flock`) while it lives, and the
//! kernel releases that lock when the builder dies, however it dies. Before making its own
//! directory, a compile removes every `triton-npu-work-*` directory of the same user whose
//! `.owner` it can lock (its builder is gone). A directory without `.owner` (its builder died
//! between creating it and locking) is removed once it is older than [`UNLOCKED_GRACE`]. A
//! builder makes `.owner` locked under another name and renames it into place, so that no
//! other compile ever sees a live directory's `.owner` unlocked.
//!
//! For debugging (`AMD_TRITON_NPU_AIR_PROJECT_PATH` set, or `AMD_TRITON_NPU_DEBUG=1`) the IR of
//! each step and the tool logs are also copied to
//! `<air project path or ./air_project>/<kernel>-<tag or timestamp>/`.
//!
//! A failing tool's log outlives the private directory: it is kept in that debug directory
//! when there is one, else in the user's own kernel cache, `<cache>/failed/<kernel>-<random>/`
//! (private to the user; `triton-npu cache failed` lists these folders and
//! `triton-npu cache clear --failed --yes` removes them).

use npu_cache::file_safe;
use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use npu_target::Config;

use crate::error::{Result, ToolchainError};

/// Names the work directories in the temporary directory.
const WORK_PREFIX: &str = "triton-npu-work-";
/// The file a builder keeps locked in its work directory.
const OWNER: &str = ".owner";
/// Where `.owner` is made and locked before it is renamed into place (see [`lock_owner`]).
const OWNER_STAGED: &str = ".owner-new";
/// How old a work directory without `.owner` must be before another compile removes it.
pub(crate) const UNLOCKED_GRACE: Duration = Duration::from_secs(600);

pub(crate) struct WorkDir {
    dir: tempfile::TempDir,
    /// Locked while we live (see the module docs); after `dir` so it outlives the deletion.
    _owner: File,
    keep: Option<PathBuf>,
    kernel: String,
    /// Where failed compiles are kept: the cache this configuration names.
    config: Config,
}

impl WorkDir {
    /// `tag` (e.g. a short cache key) names the debug directory; a timestamp otherwise.
    pub fn new(config: &Config, kernel: &str, tag: Option<&str>) -> Result<WorkDir> {
        let (dir, owner) = create_in(&std::env::temp_dir())?;
        let keep = if config.air_project_path.is_some() || config.debug {
            let base = config
                .air_project_path
                .clone()
                .unwrap_or_else(|| PathBuf::from("air_project"));
            let base = std::path::absolute(&base).unwrap_or(base);
            let leaf = format!(
                "{}-{}",
                file_safe(kernel),
                tag.map(file_safe).unwrap_or_else(timestamp)
            );
            let keep = base.join(leaf);
            std::fs::create_dir_all(&keep)
                .map_err(|e| ToolchainError::io("create the IR dump directory", &keep, e))?;
            tracing::info!(dir = %keep.display(), "keeping IR and tool logs of {kernel}");
            Some(keep)
        } else {
            None
        };
        Ok(WorkDir {
            dir,
            _owner: owner,
            keep,
            kernel: kernel.to_owned(),
            config: config.clone(),
        })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The debug directory, if IR is being kept.
    pub fn kept(&self) -> Option<&Path> {
        self.keep.as_deref()
    }

    /// Writes a file into the work directory (and the debug directory).
    pub fn write(&self, name: &str, contents: &[u8]) -> Result<PathBuf> {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).map_err(|e| ToolchainError::io("write", &path, e))?;
        self.keep_copy(name);
        Ok(path)
    }

    /// Copies a work-directory file to the debug directory, if there is one. Best effort:
    /// debugging aids never fail a compile.
    pub fn keep_copy(&self, name: &str) {
        if let Some(keep) = &self.keep {
            let from = self.dir.path().join(name);
            let to = keep.join(name);
            if from.is_file() {
                if let Some(parent) = to.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                if let Err(e) = std::fs::copy(&from, &to) {
                    tracing::warn!("cannot keep {} in {}: {e}", from.display(), keep.display());
                }
            }
        }
    }

    /// Makes a failing tool's log (and the step's input) outlive the work directory; returns
    /// where the log now is.
    pub fn preserve_failure(&self, log_name: &str, input_name: Option<&str>) -> PathBuf {
        let log = self.dir.path().join(log_name);
        let target_dir = match &self.keep {
            Some(keep) => Some(keep.clone()),
            None => failed_dir(&self.config, &self.kernel),
        };
        let Some(target_dir) = target_dir else {
            return log;
        };
        for name in std::iter::once(log_name).chain(input_name) {
            let from = self.dir.path().join(name);
            if from.is_file() {
                let _ = std::fs::copy(&from, target_dir.join(name));
            }
        }
        let kept = target_dir.join(log_name);
        if kept.is_file() { kept } else { log }
    }
}

/// Makes a private work directory in `temp` holding a locked `.owner`, after clearing away the
/// directories of builders that are gone.
fn create_in(temp: &Path) -> Result<(tempfile::TempDir, File)> {
    remove_stale(temp);
    let dir = tempfile::Builder::new()
        .prefix(WORK_PREFIX)
        .permissions(private())
        .tempdir_in(temp)
        .map_err(|e| ToolchainError::io("create a private work directory in", temp, e))?;
    let owner = lock_owner(dir.path())?;
    Ok((dir, owner))
}

/// Puts a locked `.owner` into the new directory `dir`. It is made and locked under another
/// name and only then renamed: another compile's [`remove_stale`] that found `.owner` unlocked
/// for an instant would take the lock itself, judge the directory abandoned and delete it under
/// its builder, whose own lock would then fail. Until the rename the directory has no `.owner`
/// and is young, which `remove_stale` leaves alone.
fn lock_owner(dir: &Path) -> Result<File> {
    let staged = dir.join(OWNER_STAGED);
    let owner = File::create(&staged)
        .and_then(|f| f.try_lock().map(|()| f).map_err(std::io::Error::from))
        .map_err(|e| ToolchainError::io("lock", &staged, e))?;
    let owner_path = dir.join(OWNER);
    std::fs::rename(&staged, &owner_path)
        .map_err(|e| ToolchainError::io("publish the lock file", &owner_path, e))?;
    Ok(owner)
}

/// Removes the work directories in `temp` whose builders are gone (see the module docs).
/// Best effort: a directory that cannot be removed is left for the next compile.
pub(crate) fn remove_stale(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(WORK_PREFIX) {
            continue;
        }
        let path = entry.path();
        // Ours alone: a real directory (not a symlink to elsewhere) of this user.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me {
            continue;
        }
        let owner = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path.join(OWNER));
        let stale = match &owner {
            Ok(file) => match file.try_lock() {
                Ok(()) => true,
                Err(TryLockError::WouldBlock) => false,
                Err(TryLockError::Error(_)) => false,
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => meta
                .modified()
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= UNLOCKED_GRACE),
            Err(_) => false,
        };
        if stale {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => tracing::debug!(
                    dir = %path.display(),
                    "removed the work directory of a compile whose process is gone"
                ),
                Err(e) => tracing::debug!("cannot remove stale {}: {e}", path.display()),
            }
        }
    }
}

/// A fresh private folder under the user's kernel cache (`<cache>/failed/`); `None` (the log
/// stays where it is, and is lost with the work directory) if the cache cannot be used.
fn failed_dir(config: &Config, kernel: &str) -> Option<PathBuf> {
    let made = npu_cache::Cache::shared(config).and_then(|cache| cache.failed_dir(kernel));
    match made {
        Ok(dir) => Some(dir),
        Err(e) => {
            tracing::warn!("cannot keep the logs of the failed compile of {kernel}: {e}");
            None
        }
    }
}

/// Owner-only access: IR and logs describe the user's kernels.
fn private() -> std::fs::Permissions {
    std::fs::Permissions::from_mode(0o700)
}

/// `20260314T101500Z-<pid>-<n>`: sortable, and unique among this process's compiles.
fn timestamp() -> String {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z-{}-{}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    fn work_dir(temp: &Path, name: &str, owner: bool) -> PathBuf {
        let dir = temp.join(format!("{WORK_PREFIX}{name}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("aircc.log"), "partial output").unwrap();
        if owner {
            File::create(dir.join(OWNER)).unwrap();
        }
        dir
    }

    #[test]
    fn stale_work_directories_of_dead_builders_are_removed() {
        let temp = tempfile::tempdir().unwrap();
        let t = temp.path();
        // A live builder holds its lock (another open file description, as another process).
        let alive = work_dir(t, "alive", true);
        let held = File::open(alive.join(OWNER)).unwrap();
        held.lock().unwrap();
        // A dead builder's lock was released by the kernel.
        let dead = work_dir(t, "dead", true);
        // A builder that died before locking: removed only after the grace period.
        let young = work_dir(t, "young", false);
        let old = work_dir(t, "old", false);
        File::open(&old)
            .unwrap()
            .set_modified(SystemTime::now() - UNLOCKED_GRACE - Duration::from_secs(1))
            .unwrap();
        // Not ours to judge: another name, a symlink to a directory.
        let other = t.join("triton-npu-failed");
        std::fs::create_dir(&other).unwrap();
        let target = t.join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        File::create(target.join(OWNER)).unwrap();
        let link = t.join(format!("{WORK_PREFIX}link"));
        std::os::unix::fs::symlink(&target, &link).unwrap();

        remove_stale(t);
        assert!(
            alive.join("aircc.log").is_file(),
            "a live builder's directory was removed"
        );
        assert!(!dead.exists() && !old.exists());
        assert!(young.is_dir() && other.is_dir() && link.exists());
        drop(held);
        remove_stale(t);
        assert!(!alive.exists());
        assert!(target.join(OWNER).is_file(), "a symlink was followed");
    }

    #[test]
    fn a_work_directory_is_locked_while_it_is_used_and_removed_after() {
        let config = Config::load(&|_| None, &npu_target::Overrides::default()).unwrap();
        let work = WorkDir::new(&config, "k", None).unwrap();
        let path = work.path().to_path_buf();
        assert!(
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(WORK_PREFIX)
        );
        remove_stale(path.parent().unwrap());
        assert!(
            path.is_dir(),
            "another compile removed a live work directory"
        );
        drop(work);
        assert!(!path.exists());
    }

    /// Compiles on other threads (or processes) clear stale directories while this one makes
    /// its own: none of them may take the new directory for an abandoned one, remove it, or
    /// hold its `.owner` lock so that its builder cannot take it.
    #[test]
    fn a_new_work_directory_is_never_taken_for_an_abandoned_one() {
        use std::sync::atomic::AtomicBool;
        let temp = tempfile::tempdir().unwrap();
        let t = temp.path();
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    remove_stale(t);
                }
            });
            let mut failures = Vec::new();
            for _ in 0..2000 {
                match create_in(t) {
                    Ok((dir, _owner)) => {
                        if !dir.path().join(OWNER).is_file() {
                            failures.push(format!("removed while live: {}", dir.path().display()));
                        }
                    }
                    Err(e) => failures.push(e.to_string()),
                }
            }
            done.store(true, Ordering::Relaxed);
            assert!(
                failures.is_empty(),
                "{} failed: {failures:?}",
                failures.len()
            );
        });
    }

    #[test]
    fn safe_names() {
        assert_eq!(file_safe("add_kernel"), "add_kernel");
        assert_eq!(file_safe("../../etc"), "_.._etc");
        assert_eq!(file_safe("main:seq"), "main_seq");
        assert_eq!(file_safe(""), "kernel");
    }
}
