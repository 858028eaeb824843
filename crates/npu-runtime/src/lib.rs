//! The runtimes: one seam every runtime implements, a registry of them, and the HSA (ROCr) and
//! XRT implementations.
//!
//! * [`backend::Backend`]: what a runtime declares and does without being opened — its
//!   [`npu_target::RuntimeKind`] (name, label, the output formats it loads), how it prepares
//!   a build for loading, what it loads from a build, how it opens, its target probes, its
//!   `doctor` line.
//! * [`Runtime`]: an opened runtime — load an [`Artifact`] into a [`Program`], dispatch it
//!   over host memory ([`HostArg`]s) or [`SharedBuffer`]s it allocated, release it.
//! * [`registry`]: the built-in runtimes (`xrt`, `hsa`) and those a program registers.
//! * [`launch`]: the one place a dispatch's arguments are checked, for every runtime.
//! * [`RuntimeError`] with [`ErrorKind`]s a caller can match on.
//! * [`raw`]: every `unsafe` operation of the crate (host memory, HSA's result layer and safe
//!   types); [`hsa`] and [`xrt`] are safe code over it and over `xrt-sys`.

pub mod backend;
pub mod error;
pub mod hsa;
pub mod launch;
mod opener;
pub mod raw;
pub mod registry;
pub mod runtime;
pub mod shared;
pub mod xrt;

pub use backend::{Backend, Build, BuildFiles, Diagnosis, Host, PrepareError};
pub use error::{ErrorKind, RuntimeError};
pub use launch::Launch;
pub use raw::host::{
    HostArg, HostBuffers, NotReadable, NotWritable, PageFault, Pages, ReadOnly, SharedBuffer,
};
pub use runtime::{Artifact, DispatchOptions, DispatchReport, Program, Runtime};
pub use shared::{Placement, SharedRegions};

/// Upstream's limit on kernel arguments (`TRITON_NPU_HSA_MAX_KERNARGS`).
pub const MAX_KERNEL_ARGS: usize = 16;
