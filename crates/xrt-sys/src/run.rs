//! Runs (`xrt::run`): set the arguments, start, wait — and again: XRT lets a run be started
//! again once it has finished, keeping the arguments set before (`xrt::run` "can be re-used to
//! execute the same kernel again"), so a caller may keep one run per kernel and change only
//! the arguments that differ. Arguments must not change while the run is going.

use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use crate::api::{ERR_LEN, Kernel, log_release, with_err_buf};
use crate::bindings as b;
use crate::bo::Bo;
use crate::error::XrtSysError;
use crate::loader::Shim;
use crate::state::CommandState;

/// How a wait ended, when the run did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    Completed,
    /// The timeout passed; the run is still going (abort it).
    TimedOut,
}

/// Executions of a kernel (`xrt::run`); it keeps its kernel alive.
pub struct Run {
    kernel: Arc<Kernel>,
    raw: NonNull<b::triton_npu_xrt_run>,
    /// The [`Bo::id`] each argument was last set to (0: none), so that setting an argument
    /// to the buffer it already holds costs no shim call (a reused run's arguments persist).
    bound: Vec<u64>,
}

// SAFETY: as for the other handles (see `Device`): XRT's run objects may be used from any
// thread, one at a time, which `&mut self` on every state-changing call ensures.
unsafe impl Send for Run {}

impl Run {
    pub(crate) fn new(kernel: Arc<Kernel>, raw: NonNull<b::triton_npu_xrt_run>) -> Run {
        Run {
            kernel,
            raw,
            bound: Vec::new(),
        }
    }

    fn shim(&self) -> &Shim {
        self.kernel.shim()
    }

    /// Sets argument `index` to a buffer object.
    /// Already set to that very buffer (by its unique id, not its handle, which XRT reuses
    /// once a buffer is freed), nothing is called.
    pub fn set_arg_bo(&mut self, index: i32, bo: &Bo) -> Result<(), XrtSysError> {
        let slot = usize::try_from(index).ok();
        if slot.and_then(|i| self.bound.get(i)) == Some(&bo.id) {
            return Ok(());
        }
        let shim = self.shim();
        // SAFETY: live run and BO.
        let set = shim.call("triton_npu_xrt_run_set_arg_bo", |err, len| unsafe {
            shim.api.triton_npu_xrt_run_set_arg_bo(
                self.raw.as_ptr(),
                index,
                bo.raw.as_ptr(),
                err,
                len,
            )
        });
        if let Some(i) = slot {
            if self.bound.len() <= i {
                self.bound.resize(i + 1, 0);
            }
            // A failed set leaves the argument unknown: set it again next time.
            self.bound[i] = if set.is_ok() { bo.id } else { 0 };
        }
        set
    }

    /// Sets argument `index` to a scalar given as its bytes (the kernel's declared size).
    pub fn set_arg_scalar(&mut self, index: i32, value: &[u8]) -> Result<(), XrtSysError> {
        if let Some(bound) = usize::try_from(index)
            .ok()
            .and_then(|i| self.bound.get_mut(i))
        {
            *bound = 0;
        }
        let shim = self.shim();
        // SAFETY: live run; `value` is valid for its length.
        shim.call("triton_npu_xrt_run_set_arg_scalar", |err, len| unsafe {
            shim.api.triton_npu_xrt_run_set_arg_scalar(
                self.raw.as_ptr(),
                index,
                value.as_ptr().cast(),
                value.len(),
                err,
                len,
            )
        })
    }

    /// Starts the run: the first time after setting its arguments, again after a wait saw it
    /// finish.
    pub fn start(&mut self) -> Result<(), XrtSysError> {
        let shim = self.shim();
        // SAFETY: live run.
        shim.call("triton_npu_xrt_run_start", |err, len| unsafe {
            shim.api
                .triton_npu_xrt_run_start(self.raw.as_ptr(), err, len)
        })
    }

    /// Waits for the run; `None` waits without limit. A run that ends in any state but
    /// completed is an [`XrtSysError::Command`].
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<WaitOutcome, XrtSysError> {
        let ms = match timeout {
            None => 0,
            // 0 means "no limit" to XRT, so a sub-millisecond bound becomes 1 ms.
            Some(t) => u32::try_from(t.as_millis()).unwrap_or(u32::MAX).max(1),
        };
        let shim = self.shim();
        let mut state = 0;
        let (status, message) = with_err_buf(|err| {
            // SAFETY: live run, valid out pointer and buffer.
            let status = unsafe {
                shim.api.triton_npu_xrt_run_wait(
                    self.raw.as_ptr(),
                    ms,
                    &mut state,
                    err.as_mut_ptr(),
                    ERR_LEN,
                )
            };
            // A completed wait allocates nothing.
            let failed = status as u32 != b::TRITON_NPU_XRT_OK;
            (status, if failed { err.text() } else { String::new() })
        });
        match status as u32 {
            b::TRITON_NPU_XRT_OK if CommandState(state) == CommandState::TIMEOUT => {
                Ok(WaitOutcome::TimedOut)
            }
            b::TRITON_NPU_XRT_OK => Ok(WaitOutcome::Completed),
            b::TRITON_NPU_XRT_E_COMMAND => Err(XrtSysError::Command {
                state: CommandState(state),
                message,
            }),
            _ => Err(XrtSysError::Call {
                call: "triton_npu_xrt_run_wait",
                status,
                message,
            }),
        }
    }

    /// The run's current state.
    pub fn state(&self) -> Result<CommandState, XrtSysError> {
        let shim = self.shim();
        let mut state = 0;
        // SAFETY: live run, valid out pointer.
        shim.call("triton_npu_xrt_run_state", |err, len| unsafe {
            shim.api
                .triton_npu_xrt_run_state(self.raw.as_ptr(), &mut state, err, len)
        })?;
        Ok(CommandState(state))
    }

    /// Aborts the run and waits for the abort.
    pub fn abort(&mut self) -> Result<CommandState, XrtSysError> {
        let shim = self.shim();
        let mut state = 0;
        // SAFETY: live run, valid out pointer.
        shim.call("triton_npu_xrt_run_abort", |err, len| unsafe {
            shim.api
                .triton_npu_xrt_run_abort(self.raw.as_ptr(), &mut state, err, len)
        })?;
        Ok(CommandState(state))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let shim = self.shim();
        // SAFETY: sole owner of a live run.
        log_release(shim.call("triton_npu_xrt_run_free", |err, len| unsafe {
            shim.api
                .triton_npu_xrt_run_free(self.raw.as_ptr(), err, len)
        }));
    }
}
