//! Stand-ins for the AIE toolchain (conformance harness; tests only, never shipped).
//!
//! `npu-harness-triton-shared-opt`, `npu-harness-air-opt`, `npu-harness-aircc` and
//! `npu-harness-llc` are installed as `triton-shared-opt`, `air-opt`, `aircc` and Peano's
//! `bin/llc` (see `install.sh`), so triton-npu finds them through the same variables a real
//! installation uses. Each checks its command line as the real tool does, writes structurally
//! valid outputs, logs its argv (`NPU_HARNESS_LOG`) and obeys fault injection
//! (`NPU_HARNESS_FAIL`, `NPU_HARNESS_HANG`). The meaning of a kernel travels from the TTIR to the
//! binaries as a harness program (`npu-harness-program`); see `tests/harness/README.md`.

pub mod artifacts;
pub mod attrs;
pub mod chain;
pub mod cli;
pub mod harness;
pub mod launch;
pub mod linalg;
pub mod meaning;
pub mod mlir;
pub mod pipeline;
pub mod placement;
pub mod transform;
pub mod ttir;
