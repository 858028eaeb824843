//! The runtime error type and its kinds.
//!
//! Every variant keeps the actionable text of the layer that failed; [`RuntimeError::kind`]
//! says what failed in a form a caller can match on (the Python bindings map it to exception
//! classes) without reading the message.

/// What went wrong, for callers that react differently (retry, fall back, report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The runtime's library (ROCr, the XRT shim or XRT) is not installed or cannot be used,
    /// or no runtime of that name is registered.
    RuntimeMissing,
    /// The runtime loaded but has no NPU it can drive (no AIE agent, no device, init failed).
    NoDevice,
    /// The NPU driver refused a hardware context (usually: none left).
    HardwareContextExhausted,
    /// The runtime refused a compiled kernel.
    LoadRefused,
    /// The arguments of a dispatch were refused before anything was submitted.
    InvalidArguments,
    /// The device or the runtime reported an error for a dispatch.
    LaunchFailed,
    /// A dispatch did not complete in time.
    Timeout,
    /// The user stopped a dispatch's wait (Ctrl-C, SIGTERM).
    Interrupted,
    /// Any other runtime call that failed (e.g. an allocation).
    CallFailed,
    /// A limit of the process or the system ran out (open files, memory): not a fault of the
    /// kernel or the device.
    ResourcesExhausted,
}

impl ErrorKind {
    /// A stable name for the kind (`hardware_context_exhausted`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::RuntimeMissing => "runtime_missing",
            ErrorKind::NoDevice => "no_device",
            ErrorKind::HardwareContextExhausted => "hardware_context_exhausted",
            ErrorKind::LoadRefused => "load_refused",
            ErrorKind::InvalidArguments => "invalid_arguments",
            ErrorKind::LaunchFailed => "launch_failed",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::CallFailed => "call_failed",
            ErrorKind::ResourcesExhausted => "resources_exhausted",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The runtime library could not be found or loaded; the message lists each place looked.
    #[error("{0}")]
    NotFound(String),
    /// The library loaded but has no usable NPU (no AIE agent, no device, init failed).
    #[error("{0}")]
    NoDevice(String),
    /// The NPU driver refused a hardware context for the kernel, even after this process
    /// released what it could.
    #[error("cannot make a hardware context for kernel {kernel:?}: {reason}")]
    HardwareContext { kernel: String, reason: String },
    /// An artifact the runtime refused.
    #[error("cannot load kernel {kernel:?}: {reason}")]
    Load { kernel: String, reason: String },
    /// Arguments refused before anything was submitted.
    #[error("invalid arguments for kernel {kernel:?}: {reason}")]
    InvalidArguments { kernel: String, reason: String },
    /// An argument the kernel writes cannot be written (read-only or unmapped memory);
    /// `index` counts the buffer arguments of the dispatch, so callers can name it.
    #[error(
        "invalid arguments for kernel {kernel:?}: buffer argument {index} is written by the \
         kernel, but {reason}; pass writable memory (e.g. a copy)"
    )]
    NotWritable {
        kernel: String,
        index: usize,
        reason: crate::NotWritable,
    },
    /// An argument the kernel reads cannot be read (its memory is not mapped, or not
    /// readable); `index` counts the buffer arguments of the dispatch.
    #[error(
        "invalid arguments for kernel {kernel:?}: buffer argument {index} is read by the \
         kernel, but {reason}; pass a live tensor"
    )]
    NotReadable {
        kernel: String,
        index: usize,
        reason: crate::NotReadable,
    },
    /// The device reported an error for a dispatch.
    #[error("dispatch of kernel {kernel:?} failed: {reason}")]
    Dispatch { kernel: String, reason: String },
    /// The wait for completion ran out.
    #[error("kernel {kernel:?} did not complete within {seconds} s")]
    Timeout { kernel: String, seconds: f64 },
    /// The wait for completion was stopped by the user; the device side was reset (HSA: the
    /// queue is rebuilt; XRT: the run's hardware context is torn down), so the next dispatch
    /// starts clean.
    #[error(
        "the wait for kernel {kernel:?} was {cause}; the kernel's results were not copied back"
    )]
    Interrupted {
        kernel: String,
        cause: npu_process::Interrupted,
    },
    /// Any other runtime call that failed, with the call named.
    #[error("{call} failed: {reason}")]
    Call { call: String, reason: String },
    /// Loading ran out of a limit of the process or the system (`detail` names the errno, the
    /// limit and what to raise).
    #[error("cannot load kernel {kernel:?}: {detail}")]
    Exhausted { kernel: String, detail: String },
}

impl RuntimeError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            RuntimeError::NotFound(_) => ErrorKind::RuntimeMissing,
            RuntimeError::NoDevice(_) => ErrorKind::NoDevice,
            RuntimeError::HardwareContext { .. } => ErrorKind::HardwareContextExhausted,
            RuntimeError::Load { .. } => ErrorKind::LoadRefused,
            RuntimeError::InvalidArguments { .. }
            | RuntimeError::NotWritable { .. }
            | RuntimeError::NotReadable { .. } => ErrorKind::InvalidArguments,
            RuntimeError::Dispatch { .. } => ErrorKind::LaunchFailed,
            RuntimeError::Timeout { .. } => ErrorKind::Timeout,
            RuntimeError::Interrupted { .. } => ErrorKind::Interrupted,
            RuntimeError::Call { .. } => ErrorKind::CallFailed,
            RuntimeError::Exhausted { .. } => ErrorKind::ResourcesExhausted,
        }
    }

    /// Reading `path`, a file of kernel `kernel`, failed with `e`: resource exhaustion (too
    /// many open files, no memory) is reported as such, with the limit and what to raise;
    /// anything else is a load refusal.
    pub fn reading(kernel: &str, path: &std::path::Path, e: &std::io::Error) -> RuntimeError {
        let detail = format!(
            "cannot read {}: {}",
            path.display(),
            npu_process::describe_io(e)
        );
        match npu_process::exhaustion(e) {
            Some(_) => RuntimeError::Exhausted {
                kernel: kernel.to_owned(),
                detail,
            },
            None => RuntimeError::Load {
                kernel: kernel.to_owned(),
                reason: detail,
            },
        }
    }
}
