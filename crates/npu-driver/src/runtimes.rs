//! The process-wide runtimes and the target probes they provide.
//!
//! One runtime per kind per process: the AIE agent allows a single HSA queue, and XRT hardware
//! contexts are rationed, so every launcher shares these instances. A failed open is not
//! remembered: a later launch retries (after the user fixed the setup).

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, PoisonError};

use npu_runtime::Runtime;
use npu_runtime::hsa::{HsaRuntime, HsaTargetProbe};
use npu_runtime::xrt::{XrtRuntime, XrtTargetProbe};
use npu_target::target::TargetProbe;
use npu_target::xrt_smi::XrtSmiProbe;
use npu_target::{Config, RuntimeKind};

use crate::error::DriverError;

/// Facts about the installation that Rust cannot learn by itself (Python passes them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Host {
    /// Python's site-packages dirs: pip-installed tools, ROCr (`rocm-sdk-core`).
    pub site_packages: Vec<PathBuf>,
    /// The installed `triton` package's directory.
    pub triton_dir: Option<PathBuf>,
    /// Directories that may hold our XRT shim `libtriton_npu_xrt.so` (the package's own).
    pub shim_dirs: Vec<PathBuf>,
}

static XRT: OnceLock<XrtRuntime> = OnceLock::new();
static XRT_INIT: Mutex<()> = Mutex::new(());

/// The runtime `config.runtime` names, opened on first use.
pub fn runtime(config: &Config, host: &Host) -> Result<&'static dyn Runtime, DriverError> {
    match config.runtime {
        RuntimeKind::Hsa => Ok(HsaRuntime::global(config, &host.site_packages)?),
        RuntimeKind::Xrt => {
            if let Some(rt) = XRT.get() {
                return Ok(rt);
            }
            let _guard = XRT_INIT.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(rt) = XRT.get() {
                return Ok(rt);
            }
            let rt = XrtRuntime::open(config, &host.shim_dirs)?;
            Ok(XRT.get_or_init(|| rt))
        }
    }
}

/// Target probes in upstream's order: the HSA agent name (under hsa), the XRT device name,
/// then `xrt-smi examine`.
pub fn probes(config: &Config, host: &Host) -> Vec<Box<dyn TargetProbe>> {
    let mut probes: Vec<Box<dyn TargetProbe>> = Vec::new();
    if config.runtime == RuntimeKind::Hsa {
        probes.push(Box::new(HsaTargetProbe::new(config, &host.site_packages)));
    }
    probes.push(Box::new(XrtTargetProbe::new(config, &host.shim_dirs)));
    probes.push(Box::new(XrtSmiProbe::from_config(config)));
    probes
}
