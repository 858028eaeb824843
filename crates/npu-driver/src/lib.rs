//! The driver: turns a kernel's ttsharedir text and launch grid into a loaded program
//! (through the cache, the toolchain and the runtime's preparation) and dispatches it.
//!
//! * [`pipeline`]: the one build pipeline that a first launch, `triton-npu compile` and chains
//!   share — target detection through the runtimes' probes, the format rules of the runtime's
//!   declaration, the toolchain, the runtime's preparation (HSA packs `kernel.hsaco`), the
//!   cache inputs; a kernel's Linalg is read once, into a [`Kernel`].
//! * [`kernel::prepare`]: first launch of a (kernel, grid) — cache `get_or_build` keyed on the
//!   inputs *before* lowering (a warm cache runs no tool), built by the pipeline, then loaded
//!   into the process's runtime. Dispatches go through the runtime's shared argument checks.
//! * What it reads from the Linalg text (buffer parameters, which are written) comes from
//!   `npu-mlir`, the one MLIR reader ([`npu_mlir::Module::kernel_io`]).
//! * [`artifacts`]: the files of an entry, and handing a build to its runtime's backend.
//! * [`runtimes`]: the process-wide runtimes and target probes, through the registry of
//!   runtimes (`npu_runtime::registry`).
//! * [`memo`]: kernels prepared in this process, shared by every launcher of a kernel.
//! * [`chain`]: several kernels stitched into one module, compiled once, dispatched together.

pub mod artifacts;
pub mod chain;
pub mod error;
pub mod kernel;
pub mod memo;
pub mod pipeline;
pub mod runtimes;

pub use error::{DriverError, ErrorKind};
pub use kernel::{KernelRequest, Prepared, prepare};
pub use pipeline::{Kernel, KernelBuild, Pipeline};
pub use runtimes::Host;
