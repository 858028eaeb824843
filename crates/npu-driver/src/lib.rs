//! The driver: turns a kernel's ttsharedir text and launch grid into a loaded program
//! (through the cache, the toolchain and the hsaco packer) and dispatches it.
//!
//! * [`kernel::prepare`]: first launch of a (kernel, grid) — target and format, cache
//!   `get_or_build` keyed on the inputs *before* lowering (a warm cache runs no tool), build =
//!   lower + aircc (+ pack `kernel.hsaco` for HSA), then load into the process's runtime.
//! * What it reads from the Linalg text (buffer parameters, which are written) comes from
//!   `npu-mlir`, the one MLIR reader ([`npu_mlir::Module::kernel_io`]).
//! * [`artifacts`]: the files of an entry and hsaco packing.
//! * [`runtimes`]: the process-wide runtimes and target probes.
//! * [`chain`]: several kernels stitched into one module, compiled once, dispatched together.

pub mod artifacts;
pub mod chain;
pub mod error;
pub mod kernel;
pub mod runtimes;

pub use error::DriverError;
pub use kernel::{KernelRequest, Prepared, prepare};
pub use runtimes::Host;
