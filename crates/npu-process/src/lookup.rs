//! Finding a program by name on `PATH` — only where the user said.
//!
//! To a shell, an empty `PATH` entry and `.` mean the current directory, and any other
//! relative entry is relative to it. A tool found there would be whatever file the directory
//! a program happens to run in holds (a checkout, a download folder), so such entries are
//! never searched: [`search_dirs`] keeps the absolute entries only, and every tool we start
//! by name is looked up in them by [`find_program`] (never by `execvp`, which would honour
//! the relative ones).

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The entries of a `PATH` value that may be searched, in order: the absolute ones.
pub fn search_dirs(path: &OsStr) -> Vec<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .collect()
}

/// The first file named `name` in `dirs` that is a regular file with an execute bit.
pub fn find_program(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter()
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
}

/// A regular file (after symlinks) with an execute bit.
pub fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_absolute_entries_are_searched() {
        let dirs = search_dirs(OsStr::new(":.:bin:./x:/usr/bin::/opt/t/bin:"));
        assert_eq!(
            dirs,
            vec![PathBuf::from("/usr/bin"), PathBuf::from("/opt/t/bin")]
        );
        assert!(search_dirs(OsStr::new("")).is_empty());
    }

    #[test]
    fn the_first_executable_file_wins() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::create_dir_all(a.join("tool")).unwrap(); // a directory, not a program
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(b.join("tool"), "#!/bin/sh\n").unwrap();
        assert_eq!(find_program("tool", &[a.clone(), b.clone()]), None);
        std::fs::set_permissions(b.join("tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find_program("tool", &[a, b.clone()]), Some(b.join("tool")));
        // A relative directory is never searched, even when handed in directly.
        assert_eq!(find_program("sh", &[PathBuf::from("bin")]), None);
    }
}
