//! The process-wide runtimes and the target probes they provide, through the registry of
//! runtimes (`npu_runtime::registry`).
//!
//! One runtime per kind per process: the AIE agent allows a single HSA queue, and XRT hardware
//! contexts are rationed, so every launcher shares these instances. A failed open is not
//! remembered: a later launch retries (after the user fixed the setup).

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use npu_runtime::{Runtime, registry};
use npu_target::target::TargetProbe;
use npu_target::{Config, RuntimeKind};

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

/// Opens the runtime `config.runtime` names on a helper thread, once per runtime and process,
/// so that its start-up (loading ROCr or XRT, initialising it, the queue) overlaps the compile
/// that precedes a process's first launch instead of adding to it. The first launch then finds
/// it open, or waits for the open in progress (the runtimes serialise their opening). Nothing
/// happens under `compile_only` or when it is open already. A failure is only logged at debug
/// level and not remembered: the launch opens it again and reports why.
pub fn open_in_background(config: Config, host: Host) {
    static ATTEMPTED: Mutex<Option<HashSet<RuntimeKind>>> = Mutex::new(None);
    if config.compile_only {
        return;
    }
    let Ok(backend) = registry::backend(config.runtime) else {
        return;
    };
    if backend.opened().is_some() {
        return;
    }
    let first = ATTEMPTED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashSet::new)
        .insert(config.runtime);
    if !first {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("npu-runtime-open".into())
        .spawn(move || {
            if let Err(e) = runtime(&config, &host) {
                tracing::debug!(runtime = config.runtime.as_str(), error = %e, "opening the runtime ahead of the first launch failed; the launch will retry");
            }
        });
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "no helper thread to open the runtime ahead of time");
    }
}
