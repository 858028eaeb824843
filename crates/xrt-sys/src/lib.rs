//! triton-npu's way into XRT.
//!
//! XRT's NPU flows exist only in its C++ API, so a small C++ shim (`shim/triton_npu_xrt.cpp`,
//! built by `make xrt-shim` into `libtriton_npu_xrt.so`) exposes them through the C ABI of
//! `shim/triton_npu_xrt.h`. This crate holds:
//!
//! * [`bindings`]: bindgen's declarations of that header (regenerate with `regenerate.sh`);
//! * [`loader`]: finding the shim and loading it (and XRT's coreutil when it needs it) at run
//!   time, so nothing links against XRT and machines without it still start;
//! * [`api`]: owned wrappers around the shim's handles.
//!
//! Nothing here calls XRT until asked; `cargo test` never touches a real XRT (it can abort the
//! process when no device exists). The conformance harness implements the same ABI in software
//! (`tests/harness/xrt-standin`), selected through `AMD_TRITON_NPU_XRT_SHIM`.

#[allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    clippy::all,
    missing_docs
)]
pub mod bindings;

pub mod api;
pub mod bo;
pub mod error;
pub mod loader;
pub mod run;
pub mod state;

pub use api::{Context, Device, Elf, Kernel, Xclbin, XclbinKernel};
pub use bo::{Bo, BoFlags, BoKind, SyncDirection};
pub use error::XrtSysError;
pub use loader::{COREUTIL_SONAME, SHIM_ENV, SHIM_FILE, Search, Shim, load};
pub use run::{Run, WaitOutcome};
pub use state::CommandState;
