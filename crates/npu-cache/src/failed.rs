//! Folders of failed compiles: a failing tool's log and input, kept for the user under their
//! own cache (`<root>/failed/<kernel>-<random>/`), private like the rest of it.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::cache::Cache;
use crate::error::{CacheError, io_err};
use crate::location::{check_private_dir, create_private_dir};

pub(crate) const FAILED: &str = "failed";

/// One kept failed compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedCompile {
    pub path: PathBuf,
    /// The kernel name, as far as the folder name tells it.
    pub kernel: String,
    /// When the compile failed (the folder's modification time).
    pub when: SystemTime,
    /// The files kept (logs, the failing step's input), by name.
    pub files: Vec<String>,
}

impl Cache {
    /// Creates a fresh private folder for the logs of a failed compile of `kernel`.
    pub fn failed_dir(&self, kernel: &str) -> Result<PathBuf, CacheError> {
        let root = self.root.join(FAILED);
        create_private_dir(&root).map_err(io_err("create", &root))?;
        check_private_dir(&root)?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-", crate::file_safe(kernel)))
            .rand_bytes(6)
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&root)
            .map_err(io_err("create a folder in", &root))?;
        Ok(dir.keep())
    }

    /// The kept failed compiles, oldest first.
    pub fn failed_compiles(&self) -> Result<Vec<FailedCompile>, CacheError> {
        let root = self.root.join(FAILED);
        let items = match fs::read_dir(&root) {
            Ok(items) => items,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("list", &root)(e)),
        };
        check_private_dir(&root)?;
        let mut found = Vec::new();
        for item in items.flatten() {
            let Ok(meta) = fs::symlink_metadata(item.path()) else {
                continue;
            };
            if !meta.is_dir() {
                continue;
            }
            let name = item.file_name().to_string_lossy().into_owned();
            let kernel = name
                .rsplit_once('-')
                .map_or(name.as_str(), |(k, _)| k)
                .to_owned();
            let mut files: Vec<String> = fs::read_dir(item.path())
                .map(|d| {
                    d.flatten()
                        .map(|f| f.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            files.sort();
            found.push(FailedCompile {
                path: item.path(),
                kernel,
                when: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                files,
            });
        }
        found.sort_by(|a, b| a.when.cmp(&b.when).then(a.path.cmp(&b.path)));
        Ok(found)
    }

    /// Removes the kept failed compiles (all, or those older than `older_than`); returns the
    /// folders removed.
    pub fn clear_failed(&self, older_than: Option<Duration>) -> Result<Vec<PathBuf>, CacheError> {
        let now = SystemTime::now();
        let mut removed = Vec::new();
        for failed in self.failed_compiles()? {
            let age = now.duration_since(failed.when).unwrap_or_default();
            if older_than.is_some_and(|limit| age < limit) {
                continue;
            }
            // remove_dir_all never follows symlinks.
            fs::remove_dir_all(&failed.path).map_err(io_err("remove", &failed.path))?;
            removed.push(failed.path);
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_folders_are_private_listed_and_cleared() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::at(tmp.path().join("c")).unwrap();
        assert!(cache.failed_compiles().unwrap().is_empty());
        let a = cache.failed_dir("add-kernel/../x").unwrap();
        assert!(a.starts_with(tmp.path().join("c/failed")));
        let mode = fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        fs::write(a.join("aircc.log"), "error").unwrap();
        let b = cache.failed_dir("relu").unwrap();
        let listed = cache.failed_compiles().unwrap();
        assert_eq!(listed.len(), 2);
        let first = listed.iter().find(|f| f.path == a).unwrap();
        assert_eq!(first.kernel, "add-kernel_.._x");
        assert_eq!(first.files, ["aircc.log"]);
        assert!(
            cache
                .clear_failed(Some(Duration::from_secs(3600)))
                .unwrap()
                .is_empty()
        );
        let removed = cache.clear_failed(None).unwrap();
        assert_eq!(removed.len(), 2);
        assert!(!a.exists() && !b.exists());
    }
}
