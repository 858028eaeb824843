//! The driver's error type: each variant carries the lower layer's message intact.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Config(#[from] npu_target::ConfigError),
    #[error(transparent)]
    Target(#[from] npu_target::TargetError),
    #[error(transparent)]
    Format(#[from] npu_target::FormatError),
    #[error(
        "the transform script {path} (AIR_TRANSFORM_TILING_SCRIPT) cannot be read: {source} \
         (working directory: {cwd}); fix the path (an absolute one, or relative to that \
         directory) or unset the variable to use triton-npu's own schedules"
    )]
    TransformScript {
        path: PathBuf,
        cwd: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Toolchain(#[from] npu_toolchain::ToolchainError),
    #[error(transparent)]
    Cache(#[from] npu_cache::CacheError),
    /// The runtime's preparation of a build failed (HSA: packing `kernel.hsaco`).
    #[error(transparent)]
    Prepare(#[from] npu_runtime::PrepareError),
    #[error("the cached entry {dir} lacks {what}; clear it with `triton-npu cache clear --yes`")]
    Incomplete { dir: PathBuf, what: String },
    #[error(transparent)]
    Runtime(#[from] npu_runtime::RuntimeError),
    #[error("the kernel's Linalg text has no func.func; cannot find the kernel")]
    NoKernel,
    #[error("the Linalg text defines no function @{name}; it defines: {}", list_or_none(.defined))]
    UnknownKernel { name: String, defined: Vec<String> },
    #[error("the kernel's Linalg text cannot be read: {0}")]
    Ir(#[from] npu_mlir::ParseError),
    #[error("compile-only mode (AMD_TRITON_NPU_COMPILE_ONLY=1): kernels are built, never run")]
    CompileOnly,
    /// A chain was given arguments it cannot use (Python: `ValueError`).
    #[error("chain {chain:?}: {reason}")]
    ChainInput { chain: String, reason: String },
    /// One op's IR cannot be stitched into the chain's module.
    #[error("chain {chain:?}: cannot stitch op {op} ({kernel}) into one module: {reason}")]
    ChainStitch {
        chain: String,
        op: usize,
        kernel: String,
        reason: String,
    },
}

/// What kind of failure an error is, for callers that react to failures by kind (the Python
/// binding raises one exception class per kind; the multi-launch code closes idle hardware
/// contexts on [`ErrorKind::HardwareContextsExhausted`]). Decided from the error's variants,
/// never from its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A configuration value (setting or environment variable) is invalid.
    Config,
    /// The caller passed something unusable (arguments, chain inputs).
    InvalidInput,
    /// A tool of the AIE toolchain (or a transform script) is missing.
    ToolchainMissing,
    /// A tool ran and failed, or its output is unusable.
    CompileFailed,
    /// ROCr or XRT cannot be found or loaded.
    RuntimeMissing,
    /// No NPU was found, or the one found is not supported.
    DeviceNotFound,
    /// The device reports a generation this backend does not know.
    UnsupportedDevice,
    /// Every hardware context of the device is in use.
    HardwareContextsExhausted,
    /// Loading or dispatching a kernel failed on the device.
    LaunchFailed,
    /// A wait ran out of time.
    Timeout,
    /// The kernel cache cannot be used.
    Cache,
    /// The cache refused a path that is not private to this user.
    CachePermission,
    /// A limit of the process or the system was reached (open files, processes, memory).
    ResourcesExhausted,
    /// The caller was interrupted (Ctrl-C, SIGTERM) while waiting.
    Interrupted,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 14] = [
        ErrorKind::Config,
        ErrorKind::InvalidInput,
        ErrorKind::ToolchainMissing,
        ErrorKind::CompileFailed,
        ErrorKind::RuntimeMissing,
        ErrorKind::DeviceNotFound,
        ErrorKind::UnsupportedDevice,
        ErrorKind::HardwareContextsExhausted,
        ErrorKind::LaunchFailed,
        ErrorKind::Timeout,
        ErrorKind::Cache,
        ErrorKind::CachePermission,
        ErrorKind::ResourcesExhausted,
        ErrorKind::Interrupted,
    ];
}

impl DriverError {
    /// The kind of this error (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        use npu_runtime::ErrorKind as R;
        use npu_toolchain::ToolchainError as T;
        match self {
            DriverError::Config(_) => ErrorKind::Config,
            DriverError::Format(_) => ErrorKind::Config,
            DriverError::Target(npu_target::TargetError::NotFound { .. }) => {
                ErrorKind::DeviceNotFound
            }
            DriverError::Target(npu_target::TargetError::Unsupported { .. }) => {
                ErrorKind::UnsupportedDevice
            }
            DriverError::TransformScript { .. } => ErrorKind::ToolchainMissing,
            DriverError::Toolchain(e) => match e {
                T::ToolsMissing(_) | T::TransformScript { .. } => ErrorKind::ToolchainMissing,
                T::Exhausted { .. } => ErrorKind::ResourcesExhausted,
                T::Io { source, .. } if npu_process::exhaustion(source).is_some() => {
                    ErrorKind::ResourcesExhausted
                }
                T::Start(start) => match start.problem {
                    npu_process::StartProblem::Exhausted(_) => ErrorKind::ResourcesExhausted,
                    _ => ErrorKind::ToolchainMissing,
                },
                T::Interrupted { .. } => ErrorKind::Interrupted,
                T::ToolFailed(failure) if failure.timed_out => ErrorKind::Timeout,
                T::Format(_) => ErrorKind::Config,
                T::InvalidRequest(_) => ErrorKind::InvalidInput,
                T::ToolFailed(_) | T::BadOutput { .. } | T::Io { .. } | T::Transform(_) => {
                    ErrorKind::CompileFailed
                }
            },
            DriverError::Cache(e) => cache_kind(e),
            DriverError::Prepare(_) | DriverError::Incomplete { .. } => ErrorKind::CompileFailed,
            DriverError::Runtime(e) => match e.kind() {
                R::RuntimeMissing => ErrorKind::RuntimeMissing,
                R::NoDevice => ErrorKind::DeviceNotFound,
                R::HardwareContextExhausted => ErrorKind::HardwareContextsExhausted,
                R::Timeout => ErrorKind::Timeout,
                R::Interrupted => ErrorKind::Interrupted,
                R::InvalidArguments => ErrorKind::InvalidInput,
                R::LoadRefused | R::LaunchFailed | R::CallFailed => ErrorKind::LaunchFailed,
                R::ResourcesExhausted => ErrorKind::ResourcesExhausted,
            },
            DriverError::NoKernel | DriverError::UnknownKernel { .. } | DriverError::Ir(_) => {
                ErrorKind::CompileFailed
            }
            DriverError::ChainInput { .. } => ErrorKind::InvalidInput,
            DriverError::CompileOnly => ErrorKind::Config,
            DriverError::ChainStitch { .. } => ErrorKind::CompileFailed,
        }
    }
}

/// The kind of a cache error (a build error inside it has already been unwrapped by the
/// driver).
pub fn cache_kind<B>(e: &npu_cache::CacheError<B>) -> ErrorKind {
    match e {
        npu_cache::CacheError::Unsafe { .. } => ErrorKind::CachePermission,
        npu_cache::CacheError::WaitTimeout { .. } => ErrorKind::Timeout,
        npu_cache::CacheError::Io { source, .. }
        | npu_cache::CacheError::Unusable { source, .. }
            if npu_process::exhaustion(source).is_some() =>
        {
            ErrorKind::ResourcesExhausted
        }
        _ => ErrorKind::Cache,
    }
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_exhaustion_is_its_own_kind_wherever_it_happens() {
        let emfile = || std::io::Error::from_raw_os_error(libc::EMFILE);
        let cache: npu_cache::CacheError = npu_cache::CacheError::Io {
            action: "open",
            path: "/c/x".into(),
            source: emfile(),
        };
        assert_eq!(cache_kind(&cache), ErrorKind::ResourcesExhausted);
        assert!(cache.to_string().contains("ulimit -n"), "{cache}");
        let full: npu_cache::CacheError = npu_cache::CacheError::Io {
            action: "write",
            path: "/c/x".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert_eq!(cache_kind(&full), ErrorKind::ResourcesExhausted);
        let other: npu_cache::CacheError = npu_cache::CacheError::Io {
            action: "open",
            path: "/c/x".into(),
            source: std::io::Error::from_raw_os_error(libc::EIO),
        };
        assert_eq!(cache_kind(&other), ErrorKind::Cache);
        let io = DriverError::Toolchain(npu_toolchain::ToolchainError::Io {
            what: "create".into(),
            path: "/w".into(),
            source: emfile(),
        });
        assert_eq!(io.kind(), ErrorKind::ResourcesExhausted);
        let probe = DriverError::Toolchain(npu_toolchain::ToolchainError::Exhausted {
            during: "toolchain discovery".into(),
            exhaustion: npu_process::exhaustion(&emfile()).unwrap(),
        });
        assert_eq!(probe.kind(), ErrorKind::ResourcesExhausted);
    }
}
