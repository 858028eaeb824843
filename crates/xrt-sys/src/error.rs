//! The error type of this crate.

use std::path::PathBuf;

use crate::state::CommandState;

/// How to get a shim, repeated in every "not found" message.
pub const HOW_TO_GET_THE_SHIM: &str = "The XRT runtime needs triton-npu's XRT shim \
     (libtriton_npu_xrt.so), built against XRT >= 2.19: install a triton-npu wheel built with \
     XRT support, or build it from a source checkout with `make xrt-shim` on a machine with XRT \
     headers and point AMD_TRITON_NPU_XRT_SHIM at target/xrt-shim/libtriton_npu_xrt.so. To run \
     without XRT, use AMD_TRITON_NPU_RUNTIME=hsa.";

#[derive(Debug, thiserror::Error)]
pub enum XrtSysError {
    /// No shim library at any place looked.
    #[error("triton-npu's XRT shim was not found. Looked at:{}\n{HOW_TO_GET_THE_SHIM}", bullets(.searched))]
    ShimNotFound { searched: Vec<String> },

    /// The shim needs XRT's coreutil library and none could be loaded.
    #[error(
        "the XRT shim {} needs libxrt_coreutil.so.2 (XRT >= 2.19 with the amdxdna plugin), and \
         it could not be loaded. Tried:{}\nInstall XRT, or point AMD_TRITON_NPU_XRT_DIR (or \
         XILINX_XRT) at the XRT root that has lib/libxrt_coreutil.so.2.",
        shim.display(),
        bullets(.tried)
    )]
    CoreutilNotFound { shim: PathBuf, tried: Vec<String> },

    /// dlopen of the shim failed.
    #[error("cannot load the XRT shim {}: {reason}", path.display())]
    ShimLoad { path: PathBuf, reason: String },

    /// The library loaded but lacks the shim's functions.
    #[error(
        "{} is not a triton-npu XRT shim: {reason}. Rebuild it with `make xrt-shim` or unset \
         AMD_TRITON_NPU_XRT_SHIM.",
        path.display()
    )]
    NotAShim { path: PathBuf, reason: String },

    /// The shim was built for another version of the C ABI.
    #[error(
        "the XRT shim {} implements ABI version {found}, this triton-npu needs version \
         {expected}; rebuild the shim from this source tree with `make xrt-shim`",
        path.display()
    )]
    AbiMismatch {
        path: PathBuf,
        found: u32,
        expected: u32,
    },

    /// An argument that cannot cross the C ABI (e.g. a path with a NUL byte).
    #[error("{what}: {reason}")]
    InvalidInput { what: String, reason: String },

    /// A shim call returned an error status.
    #[error("{call} failed: {message}")]
    Call {
        call: &'static str,
        status: i32,
        message: String,
    },

    /// Making a hardware context failed: the NPU driver refused it (with amdxdna, the
    /// `DRM_IOCTL_AMDXDNA_CREATE_HWCTX` ioctl; usually because none is left). Releasing
    /// contexts and retrying may help.
    #[error("{call} failed: {message}")]
    ContextRefused { call: &'static str, message: String },

    /// A run ended in a state other than completed.
    #[error("the run ended in {state}: {message}")]
    Command {
        state: CommandState,
        message: String,
    },
}

impl XrtSysError {
    /// Whether the driver refused a hardware context (see [`XrtSysError::ContextRefused`]).
    pub fn is_context_refused(&self) -> bool {
        matches!(self, XrtSysError::ContextRefused { .. })
    }
}

fn bullets(items: &[String]) -> String {
    if items.is_empty() {
        return " (nowhere: no location was configured)".to_owned();
    }
    items.iter().map(|i| format!("\n  - {i}")).collect()
}
