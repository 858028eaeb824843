//! HSA's result layer and its safe types, over the raw bindings of `hsa-sys`.
//!
//! * the result layer: every `hsa_status_t` becomes an [`HsaError`] that names the call and
//!   carries the status as an [`HsaStatus`] a caller can match on;
//! * safe types that free themselves on drop: [`Hsa`] (an initialised ROCr; `hsa_shut_down`
//!   when the last object made through it is gone), [`Agent`] and [`Pool`] (handles only
//!   ROCr gave), [`PoolAllocation`], [`Signal`], [`AieQueue`] (the queue with its error
//!   callback, completion signal, kernarg blocks and [`Doorbell`]), [`CodeObjectReader`],
//!   [`Executable`] (agent variables, load, freeze, kernel symbols).
//!
//! Every object holds an `Arc<Hsa>`, so ROCr outlives everything made through it, and
//! children keep their parents alive (a reader the bytes it reads, a doorbell its queue).

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use hsa_sys::*;

mod agent;
mod code;
mod memory;
mod queue;
mod signal;

pub(crate) use agent::{Agent, AgentU32, DeviceType, Pool, PoolInfo};
pub(crate) use code::{CodeObjectReader, Executable};
pub(crate) use memory::{HsaSharedBuffer, PoolAllocation};
pub(crate) use queue::{AieQueue, Doorbell, SubmitError};
pub(crate) use signal::Signal;

/// The statuses the runtime reacts to, and any other by its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HsaStatus {
    /// `hsa_init` found no driver to use (the status ROCr gives without KFD or XDNA).
    OutOfResources,
    /// The code object has no section for this agent's architecture.
    IncompatibleArguments,
    /// The code object is malformed.
    InvalidCodeObject,
    /// No symbol of that name.
    InvalidSymbolName,
    /// The code relocates against a variable that was not defined.
    VariableUndefined,
    /// Anything else.
    Other(hsa_status_t),
}

impl HsaStatus {
    fn from_raw(status: hsa_status_t) -> HsaStatus {
        match status {
            HSA_STATUS_ERROR_OUT_OF_RESOURCES => HsaStatus::OutOfResources,
            HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS => HsaStatus::IncompatibleArguments,
            HSA_STATUS_ERROR_INVALID_CODE_OBJECT => HsaStatus::InvalidCodeObject,
            HSA_STATUS_ERROR_INVALID_SYMBOL_NAME => HsaStatus::InvalidSymbolName,
            HSA_STATUS_ERROR_VARIABLE_UNDEFINED => HsaStatus::VariableUndefined,
            other => HsaStatus::Other(other),
        }
    }
}

/// A failed HSA call: which call, the status, and ROCr's text for it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{call} failed: {text}")]
pub(crate) struct HsaError {
    pub call: Cow<'static, str>,
    pub status: HsaStatus,
    /// ROCr's text for the status (`HSA_STATUS_ERROR_…: …`), with its number.
    pub text: String,
}

impl From<HsaError> for crate::RuntimeError {
    fn from(e: HsaError) -> Self {
        crate::RuntimeError::Call {
            call: e.call.into_owned(),
            reason: e.text,
        }
    }
}

/// The status of a call as a `Result`, naming the call on failure.
fn check(
    lib: &HsaLibrary,
    call: impl Into<Cow<'static, str>>,
    status: hsa_status_t,
) -> Result<(), HsaError> {
    if status == HSA_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(HsaError {
            call: call.into(),
            status: HsaStatus::from_raw(status),
            text: lib.status_text(status),
        })
    }
}

/// Loads one `libhsa-runtime64` and resolves every function the driver calls.
pub(crate) fn open_library(path: &Path) -> Result<HsaLibrary, LoadError> {
    // SAFETY: loading ROCr runs its initialisers, which is what using it requires; the
    // candidates are ROCr builds found in ROCr's install locations.
    unsafe { HsaLibrary::open(path) }
}

/// An initialised ROCr. `hsa_shut_down` runs when the last `Arc` (held by every object made
/// through it) is dropped.
pub(crate) struct Hsa {
    lib: &'static HsaLibrary,
}

impl std::fmt::Debug for Hsa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hsa")
            .field("library", &self.lib.path())
            .finish()
    }
}

/// Why `hsa_init` failed.
#[derive(Debug)]
pub(crate) struct InitError {
    pub library: std::path::PathBuf,
    pub error: HsaError,
}

impl Hsa {
    /// Runs `hsa_init`. Once it has run, the library may own threads and state, so it stays
    /// loaded for the life of the process, as a linked ROCr would.
    pub fn init(lib: HsaLibrary) -> Result<Arc<Hsa>, InitError> {
        let lib: &'static HsaLibrary = Box::leak(Box::new(lib));
        // SAFETY: hsa_init takes no arguments and is reference-counted.
        let rc = unsafe { lib.api().hsa_init() };
        check(lib, "hsa_init", rc).map_err(|error| InitError {
            library: lib.path().to_owned(),
            error,
        })?;
        Ok(Arc::new(Hsa { lib }))
    }

    pub fn library_path(&self) -> &Path {
        self.lib.path()
    }

    /// ROCr's text for a status.
    pub fn status_text(&self, status: hsa_status_t) -> String {
        self.lib.status_text(status)
    }

    fn api(&self) -> &'static HsaApi {
        self.lib.api()
    }

    fn check(
        &self,
        call: impl Into<Cow<'static, str>>,
        status: hsa_status_t,
    ) -> Result<(), HsaError> {
        check(self.lib, call, status)
    }

    /// Ticks per second of signal-wait timeouts, when ROCr reports it.
    pub fn timestamp_frequency(&self) -> Option<u64> {
        let mut frequency = 0u64;
        // SAFETY: TIMESTAMP_FREQUENCY writes a uint64_t.
        let rc = unsafe {
            self.api().hsa_system_get_info(
                HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY,
                (&mut frequency as *mut u64).cast(),
            )
        };
        (rc == HSA_STATUS_SUCCESS && frequency > 0).then_some(frequency)
    }
}

impl Drop for Hsa {
    fn drop(&mut self) {
        // SAFETY: balances the hsa_init of `init`; every object made through ROCr holds an Arc
        // to this value, so none is left.
        unsafe { self.api().hsa_shut_down() };
    }
}
