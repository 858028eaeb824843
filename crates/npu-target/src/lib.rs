//! The configuration of triton-npu and the rules that follow from it.
//!
//! * [`config`]: every environment variable the driver reads, with programmatic overrides.
//! * [`target`]: which NPU generation to compile for, detected through pluggable probes.
//! * [`runtime`]: the runtimes by name, and what each declares (the formats it loads).
//! * [`format`]: which artifact aircc produces for a target and runtime.
//! * [`xrt_smi`]: the `xrt-smi examine` probe and its parser.

pub mod config;
pub mod error;
pub mod format;
pub mod runtime;
pub mod target;
pub mod xrt_smi;

pub use config::{
    Config, DEFAULT_CACHE_WAIT_TIMEOUT, DEFAULT_REMOTE_CACHE_MAX_BYTES,
    DEFAULT_REMOTE_CACHE_TIMEOUT, Locations, Overrides, RemoteCacheMode, Setting,
};
pub use error::{ConfigError, FormatError, Observation, TargetError};
pub use format::OutputFormat;
pub use runtime::{Declaration, RuntimeKind};
pub use target::{Detection, NpuVersion, ProbeOutcome, TargetProbe};

/// The version of the triton-npu crates, part of every cache key and of `backend.hash()`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
