//! The process-wide runtimes and the target probes they provide, through the registry of
//! runtimes (`npu_runtime::registry`).
//!
//! One runtime per kind per process: the AIE agent allows a single HSA queue, and XRT hardware
//! contexts are rationed, so every launcher shares these instances. A failed open is not
//! remembered: a later launch retries (after the user fixed the setup).

use npu_runtime::{Runtime, registry};
use npu_target::Config;
use npu_target::target::TargetProbe;

use crate::error::DriverError;

pub use npu_runtime::Host;

/// The runtime `config.runtime` names, opened on first use.
pub fn runtime(config: &Config, host: &Host) -> Result<&'static dyn Runtime, DriverError> {
    Ok(registry::open(config, host)?)
}

/// Target probes in upstream's order: the configured runtime's first (the HSA agent name under
/// hsa), then the others' (the XRT device name, then `xrt-smi examine`).
pub fn probes(config: &Config, host: &Host) -> Vec<Box<dyn TargetProbe>> {
    registry::probes(config, host)
}
