//! Where the cache lives, and the checks that keep it private to its user.

use std::fs::{self, DirBuilder, Metadata};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use npu_target::Locations;

use crate::error::CacheError;

/// The cache root and the variable that chose it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub root: PathBuf,
    /// E.g. `AMD_TRITON_NPU_CACHE_DIR`, for messages.
    pub origin: &'static str,
}

/// `AMD_TRITON_NPU_CACHE_DIR`, else `TRITON_CACHE_DIR/npu`, else
/// `$TRITON_HOME/.triton/cache/npu`, else `$HOME/.triton/cache/npu`.
pub fn resolve(locations: &Locations) -> Result<Location, CacheError> {
    let found = if let Some(dir) = &locations.cache_dir {
        Location {
            root: dir.clone(),
            origin: "AMD_TRITON_NPU_CACHE_DIR",
        }
    } else if let Some(dir) = &locations.triton_cache_dir {
        Location {
            root: dir.join("npu"),
            origin: "TRITON_CACHE_DIR",
        }
    } else if let Some(home) = &locations.triton_home {
        Location {
            root: home.join(".triton").join("cache").join("npu"),
            origin: "TRITON_HOME",
        }
    } else if let Some(home) = &locations.home {
        Location {
            root: home.join(".triton").join("cache").join("npu"),
            origin: "HOME",
        }
    } else {
        return Err(CacheError::NoLocation);
    };
    Ok(found)
}

/// The effective user id of this process.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Creates `path` (and missing parents) with mode 0700; an existing directory is left as is.
pub(crate) fn create_private_dir_all(path: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(path)
}

/// Creates one directory with mode 0700; succeeds if it already exists.
pub(crate) fn create_private_dir(path: &Path) -> io::Result<()> {
    match DirBuilder::new().mode(0o700).create(path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// Why `meta` (of `path`) is not private to this user, if it is not.
pub(crate) fn ownership_problem(meta: &Metadata) -> Option<String> {
    owner_mode_problem(euid(), meta.uid(), meta.mode())
}

/// Why a file with this owner and mode is not private to `me` (the effective user id), if it
/// is not.
fn owner_mode_problem(me: u32, uid: u32, mode: u32) -> Option<String> {
    if uid != me {
        return Some(format!("it is owned by uid {uid}, not by you (uid {me})"));
    }
    let mode = mode & 0o7777;
    if mode & 0o022 != 0 {
        return Some(format!(
            "it can be written by {} (mode {mode:04o})",
            match (mode & 0o020 != 0, mode & 0o002 != 0) {
                (true, true) => "group and others",
                (true, false) => "its group",
                _ => "others",
            }
        ));
    }
    None
}

/// Refuses a file (described by its `fstat`) unless it belongs to `me` (this process's
/// effective user id, which a caller checking several files reads once) and only `me` can
/// write it. The advice is to remove `removable` (the entry or shard that holds it); it is
/// written out only for a refusal, since a cache hit checks half a dozen files.
pub(crate) fn check_private_stat(
    path: &Path,
    stat: &rustix::fs::Stat,
    me: u32,
    removable: &Path,
) -> Result<(), CacheError> {
    match owner_mode_problem(me, stat.st_uid, stat.st_mode) {
        None => Ok(()),
        Some(problem) => Err(CacheError::Unsafe {
            path: path.to_owned(),
            problem,
            remedy: inside_remedy(removable),
        }),
    }
}

/// Refuses `path` unless it belongs to this user and only this user can write it.
pub(crate) fn check_private(path: &Path, meta: &Metadata, remedy: &str) -> Result<(), CacheError> {
    match ownership_problem(meta) {
        None => Ok(()),
        Some(problem) => Err(CacheError::Unsafe {
            path: path.to_owned(),
            problem,
            remedy: remedy.to_owned(),
        }),
    }
}

/// Checks a directory inside the cache: a real directory (not a symlink), private to us.
pub(crate) fn check_private_dir(path: &Path) -> Result<(), CacheError> {
    let meta = fs::symlink_metadata(path).map_err(crate::error::io_err("inspect", path))?;
    if !meta.is_dir() {
        return Err(CacheError::Unsafe {
            path: path.to_owned(),
            problem: if meta.file_type().is_symlink() {
                "it is a symlink; every directory of the cache must be a real directory, so \
                 that nothing in it can point outside"
                    .into()
            } else {
                "it is not a directory (a file stands in its place)".into()
            },
            remedy: inside_remedy(path),
        });
    }
    check_private(path, &meta, &inside_remedy(path))
}

/// Advice for an unsafe path inside the cache.
pub(crate) fn inside_remedy(path: &Path) -> String {
    format!(
        "remove it (rm -r '{}') and it will be rebuilt, or set AMD_TRITON_NPU_CACHE_DIR to a \
         fresh directory",
        path.display()
    )
}

/// Advice for an unsafe cache root.
pub(crate) fn root_remedy(path: &Path, meta: &Metadata) -> String {
    if meta.uid() == euid() {
        format!("run chmod 700 '{}'", path.display())
    } else {
        "set AMD_TRITON_NPU_CACHE_DIR to a directory of your own".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locations() -> Locations {
        Locations {
            cache_dir: Some("/c/npu-cache".into()),
            triton_cache_dir: Some("/t/cache".into()),
            triton_home: Some("/th".into()),
            home: Some("/home/me".into()),
            ..Locations::default()
        }
    }

    #[test]
    fn precedence_follows_the_variables() {
        let mut l = locations();
        assert_eq!(
            resolve(&l).unwrap(),
            Location {
                root: "/c/npu-cache".into(),
                origin: "AMD_TRITON_NPU_CACHE_DIR"
            }
        );
        l.cache_dir = None;
        assert_eq!(resolve(&l).unwrap().root, PathBuf::from("/t/cache/npu"));
        l.triton_cache_dir = None;
        assert_eq!(
            resolve(&l).unwrap().root,
            PathBuf::from("/th/.triton/cache/npu")
        );
        l.triton_home = None;
        assert_eq!(
            resolve(&l).unwrap(),
            Location {
                root: "/home/me/.triton/cache/npu".into(),
                origin: "HOME"
            }
        );
        l.home = None;
        let err = resolve(&l).unwrap_err();
        assert!(matches!(err, CacheError::NoLocation));
        assert!(err.to_string().contains("AMD_TRITON_NPU_CACHE_DIR"));
    }

    #[test]
    fn created_dirs_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("a/b/c");
        create_private_dir_all(&deep).unwrap();
        for p in [tmp.path().join("a"), tmp.path().join("a/b"), deep.clone()] {
            let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", p.display());
        }
        create_private_dir(&deep).unwrap();
        check_private_dir(&deep).unwrap();
        fs::set_permissions(&deep, fs::Permissions::from_mode(0o770)).unwrap();
        let err = check_private_dir(&deep).unwrap_err();
        assert!(err.to_string().contains("its group (mode 0770)"), "{err}");
    }
}
