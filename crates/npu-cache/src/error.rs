//! The one error type of this crate.

use std::convert::Infallible;
use std::io;
use std::path::{Path, PathBuf};

use crate::key::Key;

/// What went wrong with the cache; `B` is the error type of a caller's build step
/// (only [`Cache::get_or_build`](crate::Cache::get_or_build) can produce [`CacheError::Build`]).
#[derive(Debug, thiserror::Error)]
pub enum CacheError<B = Infallible> {
    /// None of the variables that place the cache is set.
    #[error(
        "cannot place the kernel cache: none of AMD_TRITON_NPU_CACHE_DIR, TRITON_CACHE_DIR, \
         TRITON_HOME or HOME is set; set AMD_TRITON_NPU_CACHE_DIR to a private directory"
    )]
    NoLocation,

    /// The cache directory cannot be created or written.
    #[error(
        "cannot use {path} ({origin}) as the kernel cache directory: {}; set \
         AMD_TRITON_NPU_CACHE_DIR to a directory you can create and write",
        npu_process::describe_io(.source)
    )]
    Unusable {
        path: PathBuf,
        /// Which variable (or caller) chose this directory.
        origin: String,
        #[source]
        source: io::Error,
    },

    /// A directory or file of the cache belongs to someone else or can be written by others.
    #[error(
        "refusing to use {path}: {problem}. The kernel cache decides what code runs on the NPU, \
         so it must belong to you and be writable only by you; {remedy}"
    )]
    Unsafe {
        path: PathBuf,
        problem: String,
        remedy: String,
    },

    /// A file-system operation inside the cache failed.
    #[error("kernel cache: cannot {action} {path}: {}", npu_process::describe_io(.source))]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// The build step left something the cache will not store.
    #[error(
        "the build of cache entry {label} produced {path}, which {problem}; a build may only \
         create regular files and directories with UTF-8 names"
    )]
    BadOutput {
        label: String,
        path: PathBuf,
        problem: String,
    },

    /// Another process held the build of this entry for longer than the wait allows.
    #[error(
        "gave up waiting for {holder} to build cache entry {label} after {} s; if that process \
         is stuck, stop it{}, or raise AMD_TRITON_NPU_CACHE_WAIT_TIMEOUT (seconds)",
        waited.as_secs(),
        holder_pid.map(|pid| format!(" (kill {pid})")).unwrap_or_default()
    )]
    WaitTimeout {
        label: String,
        /// Who holds the build, as it recorded itself ("another process" if it did not).
        holder: String,
        holder_pid: Option<u32>,
        waited: std::time::Duration,
    },

    /// The caller's build step failed; nothing was published.
    #[error("building cache entry {label} failed: {source}")]
    Build {
        key: Key,
        /// The kernel name (if given) and the short key, for messages.
        label: String,
        source: B,
    },
}

impl CacheError {
    /// The same error, typed for a caller whose build step fails with `B`.
    pub fn widen<B>(self) -> CacheError<B> {
        match self.retype() {
            Ok(e) => e,
            Err(never) => match never {},
        }
    }
}

impl<B> CacheError<B> {
    /// Splits a build failure (the caller's own error, returned as `Ok`) from the cache's own
    /// errors (`Err`), so a caller can report each in its own terms.
    pub fn into_build_error(self) -> Result<B, CacheError> {
        match self.retype() {
            Ok(e) => Err(e),
            Err(build) => Ok(build),
        }
    }

    /// The cache's own errors retyped for another build error type; a build failure comes
    /// back as `Err` with the caller's error.
    fn retype<C>(self) -> Result<CacheError<C>, B> {
        Ok(match self {
            CacheError::Build { source, .. } => return Err(source),
            CacheError::NoLocation => CacheError::NoLocation,
            CacheError::Unusable {
                path,
                origin,
                source,
            } => CacheError::Unusable {
                path,
                origin,
                source,
            },
            CacheError::Unsafe {
                path,
                problem,
                remedy,
            } => CacheError::Unsafe {
                path,
                problem,
                remedy,
            },
            CacheError::Io {
                action,
                path,
                source,
            } => CacheError::Io {
                action,
                path,
                source,
            },
            CacheError::BadOutput {
                label,
                path,
                problem,
            } => CacheError::BadOutput {
                label,
                path,
                problem,
            },
            CacheError::WaitTimeout {
                label,
                holder,
                holder_pid,
                waited,
            } => CacheError::WaitTimeout {
                label,
                holder,
                holder_pid,
                waited,
            },
        })
    }

    /// Whether the error is about file-system access (permissions, ownership, I/O) rather than
    /// about the build; bindings map these to `OSError`.
    pub fn is_filesystem(&self) -> bool {
        !matches!(
            self,
            CacheError::Build { .. }
                | CacheError::BadOutput { .. }
                | CacheError::WaitTimeout { .. }
        )
    }

    /// Whether the error is a refusal or denial of access (maps to `PermissionError`).
    pub fn is_permission(&self) -> bool {
        match self {
            CacheError::Unsafe { .. } => true,
            CacheError::Unusable { source, .. } | CacheError::Io { source, .. } => {
                source.kind() == io::ErrorKind::PermissionDenied
                    || source.kind() == io::ErrorKind::ReadOnlyFilesystem
            }
            _ => false,
        }
    }
}

/// Shorthand for an [`CacheError::Io`] mapper. The path is copied only if there is an error:
/// a cache hit passes a dozen of these and fails none.
pub(crate) fn io_err<P: AsRef<Path>>(
    action: &'static str,
    path: P,
) -> impl FnOnce(io::Error) -> CacheError {
    move |source| CacheError::Io {
        action,
        path: path.as_ref().to_path_buf(),
        source,
    }
}
