//! The registry of runtimes: each [`Backend`] by its [`RuntimeKind`].
//!
//! The built-in runtimes are the lines of [`BUILTIN`]; a program may add its own with
//! [`register`], which also declares its name to the configuration (`AMD_TRITON_NPU_RUNTIME`,
//! `set_config`). Everything that picks a runtime — opening it, target detection, `doctor`,
//! preparing and loading builds — goes through here.

use std::sync::{PoisonError, RwLock};

use npu_target::{Config, RuntimeKind, TargetProbe};

use crate::backend::{Backend, Host};
use crate::{Runtime, RuntimeError};

/// The runtimes every process has, the default first.
pub static BUILTIN: [&dyn Backend; 2] = [&crate::xrt::BACKEND, &crate::hsa::BACKEND];

/// Runtimes registered at run time.
static ADDED: RwLock<Vec<&'static dyn Backend>> = RwLock::new(Vec::new());

/// Why a runtime cannot be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Name(#[from] npu_target::runtime::DeclareError),
}

/// Adds a runtime and makes its name selectable. Registering the same backend again does
/// nothing.
pub fn register(backend: &'static dyn Backend) -> Result<(), RegistryError> {
    npu_target::runtime::declare(backend.kind())?;
    let mut added = ADDED.write().unwrap_or_else(PoisonError::into_inner);
    if !added.iter().any(|b| b.kind() == backend.kind()) {
        added.push(backend);
    }
    Ok(())
}

/// Every registered runtime, built-in first.
pub fn backends() -> Vec<&'static dyn Backend> {
    let mut all: Vec<&'static dyn Backend> = BUILTIN.to_vec();
    all.extend(ADDED.read().unwrap_or_else(PoisonError::into_inner).iter());
    all
}

/// The runtime of `kind`.
pub fn backend(kind: RuntimeKind) -> Result<&'static dyn Backend, RuntimeError> {
    backends()
        .into_iter()
        .find(|b| b.kind() == kind)
        .ok_or_else(|| {
            RuntimeError::NotFound(format!(
                "no runtime named {kind} is registered; registered runtimes: {}",
                backends()
                    .iter()
                    .map(|b| b.kind().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// The configured runtime's process-wide instance, opened on first use.
pub fn open(config: &Config, host: &Host) -> Result<&'static dyn Runtime, RuntimeError> {
    backend(config.runtime)?.open(config, host)
}

/// Lets every opened runtime release its programs and device state ([`Runtime::release_all`]);
/// for the end of the process.
pub fn release_all() {
    for backend in backends() {
        if let Some(runtime) = backend.opened() {
            runtime.release_all();
        }
    }
}

/// Target probes in order: the configured runtime's, then the other runtimes' (upstream: the
/// HSA agent name under hsa, the XRT device name, then `xrt-smi examine`).
pub fn probes(config: &Config, host: &Host) -> Vec<Box<dyn TargetProbe>> {
    let all = backends();
    let selected = all.iter().filter(|b| b.kind() == config.runtime);
    let others = all.iter().filter(|b| b.kind() != config.runtime);
    selected
        .map(|b| b.probes(config, host, true))
        .chain(others.map(|b| b.probes(config, host, false)))
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_runtimes_are_the_configurations_and_in_its_order() {
        let kinds: Vec<RuntimeKind> = BUILTIN.iter().map(|b| b.kind()).collect();
        assert_eq!(kinds, RuntimeKind::BUILTIN.to_vec());
        for kind in RuntimeKind::BUILTIN {
            assert_eq!(backend(kind).unwrap().kind(), kind);
        }
    }

    #[test]
    fn probes_put_the_configured_runtime_first() {
        let load = |runtime: &str| {
            Config::load(
                &|k| (k == "AMD_TRITON_NPU_RUNTIME").then(|| runtime.to_owned()),
                &Default::default(),
            )
            .unwrap()
        };
        let names = |config: &Config| -> Vec<String> {
            probes(config, &Host::default())
                .iter()
                .map(|p| p.name().to_owned())
                .collect()
        };
        assert_eq!(
            names(&load("hsa")),
            ["HSA agent", "XRT device", "xrt-smi examine"]
        );
        assert_eq!(names(&load("xrt")), ["XRT device", "xrt-smi examine"]);
    }
}
