//! Transform scripts for triton-npu: what `air-opt`'s `air-transform` pass is given to tile a
//! kernel for the NPU.
//!
//! * [`library`]: our transform library, the named sequences upstream's scripts call with
//!   `transform.include` (same names, signatures and effects as amd/Triton-XDNA's
//!   `transform_library/`), embedded in the binary.
//! * [`expand()`]: resolves a script's library references the way upstream does before
//!   mlir-air sees it: includes expanded inline, `foreach_match` targets inserted. Unknown
//!   names, recursion and bad nesting are errors with the script's name and line.
//! * [`schedule`]: which script a kernel gets, in upstream's order: the user's
//!   (`AIR_TRANSFORM_TILING_SCRIPT`), else the automatic matmul schedule when the kernel is one
//!   plain matmul, else our default elementwise schedule; both generated schedules are built on
//!   the library and expanded like a user's script.
//! * [`kernel`]: the few facts about a kernel's Linalg the schedules need
//!   ([`kernel::KernelSummary`]), read with npu-mlir.
//! * [`script`]: transform scripts as the expansion reads them (npu-mlir's tokens; named
//!   sequences, includes, `foreach_match`).
//!
//! ```
//! use npu_transform::{expand, schedule};
//! use npu_target::NpuVersion;
//!
//! let script = "module attributes {transform.with_named_sequence} {
//!   transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
//!     transform.include @one_shot_bufferize failures(propagate) (%root)
//!         : (!transform.any_op) -> ()
//!     transform.yield
//!   }
//! }";
//! let out = expand(script, "mine.mlir", Some(NpuVersion::Npu2))?;
//! assert!(!out.text.contains("transform.include"));
//! assert!(out.text.contains("transform.bufferization.one_shot_bufferize"));
//!
//! let linalg = "func.func @k(%a: memref<*xf32>) { return }";
//! let kernel = npu_transform::kernel::Linalg::read(linalg.to_owned());
//! let chosen = schedule::choose(None, kernel.summary(), NpuVersion::Npu2)?;
//! assert_eq!(chosen.kind, schedule::ScheduleKind::Default);
//! # Ok::<(), npu_transform::TransformError>(())
//! ```

pub mod error;
pub mod expand;
pub mod kernel;
pub mod library;
pub mod schedule;
pub mod script;

pub use error::TransformError;
pub use expand::{Expansion, expand};
pub use library::Library;
pub use schedule::{Schedule, ScheduleKind, choose};

#[cfg(test)]
pub(crate) mod testing;
