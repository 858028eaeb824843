//! The runtime error type.

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The runtime library could not be found or loaded; the message lists each place looked.
    #[error("{0}")]
    NotFound(String),
    /// The library loaded but has no usable NPU (no AIE agent, no device, init failed).
    #[error("{0}")]
    NoDevice(String),
    /// An artifact the runtime refused.
    #[error("cannot load kernel {kernel:?}: {reason}")]
    Load { kernel: String, reason: String },
    /// Arguments refused before anything was submitted.
    #[error("invalid arguments for kernel {kernel:?}: {reason}")]
    InvalidArguments { kernel: String, reason: String },
    /// The device reported an error for a dispatch.
    #[error("dispatch of kernel {kernel:?} failed: {reason}")]
    Dispatch { kernel: String, reason: String },
    /// The wait for completion ran out.
    #[error("kernel {kernel:?} did not complete within {seconds} s")]
    Timeout { kernel: String, seconds: f64 },
    /// Any other runtime call that failed, with the call named.
    #[error("{call} failed: {reason}")]
    Call { call: String, reason: String },
}
