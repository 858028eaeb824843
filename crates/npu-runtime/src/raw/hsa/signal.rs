//! Signals: a value ROCr changes when a packet completes, destroyed on drop.

use std::sync::Arc;

use hsa_sys::*;

use super::{Hsa, HsaError};

pub(crate) struct Signal {
    hsa: Arc<Hsa>,
    handle: hsa_signal_t,
}

impl Signal {
    /// A signal with `initial` as its value and no consumers.
    pub fn new(hsa: &Arc<Hsa>, initial: i64) -> Result<Signal, HsaError> {
        let mut handle = hsa_signal_t { handle: 0 };
        // SAFETY: a valid out pointer; no consumer list.
        let rc = unsafe {
            hsa.api()
                .hsa_signal_create(initial, 0, core::ptr::null(), &mut handle)
        };
        hsa.check("hsa_signal_create", rc)?;
        Ok(Signal {
            hsa: Arc::clone(hsa),
            handle,
        })
    }

    /// The handle a packet names as its completion signal.
    pub fn handle(&self) -> hsa_signal_t {
        self.handle
    }

    pub fn store_release(&self, value: i64) {
        // SAFETY: a live signal.
        unsafe {
            self.hsa
                .api()
                .hsa_signal_store_screlease(self.handle, value)
        }
    }

    /// The current value (no wait).
    pub fn load_acquire(&self) -> i64 {
        // SAFETY: a live signal.
        unsafe { self.hsa.api().hsa_signal_load_scacquire(self.handle) }
    }

    /// Waits until the value is below `bound` or about `ticks` timestamp ticks pass (a hint;
    /// ROCr may wake earlier); returns the value seen.
    pub fn wait_below(&self, bound: i64, ticks: u64) -> i64 {
        // SAFETY: a live signal.
        unsafe {
            self.hsa.api().hsa_signal_wait_scacquire(
                self.handle,
                HSA_SIGNAL_CONDITION_LT,
                bound,
                ticks,
                HSA_WAIT_STATE_BLOCKED,
            )
        }
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        // SAFETY: created by hsa_signal_create and destroyed only here.
        let rc = unsafe { self.hsa.api().hsa_signal_destroy(self.handle) };
        if let Err(e) = self.hsa.check("hsa_signal_destroy", rc) {
            tracing::warn!("{e}");
        }
    }
}
