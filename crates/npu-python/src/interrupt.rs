//! Ctrl-C while native code waits with the GIL released.
//!
//! Python's C-level signal handler only records a signal; its Python-level handler (the one
//! that raises `KeyboardInterrupt`, or the program's own) runs when someone holding the GIL
//! calls `PyErr_CheckSignals`. [`detach_interruptible`] releases the GIL like `py.detach` and
//! installs an `npu_process::interrupt` check that re-takes the GIL and calls
//! `Python::check_signals`: every wait of `npu-process` (and of any crate that calls
//! `npu_process::interrupt::check`, e.g. device waits) then stops within ~50 ms, killing the
//! tool it waited for. The exception the handler raised is kept and raised by
//! [`detach_interruptible`] in place of whatever error the interrupted call returns, so Python
//! sees exactly what its handler raised (`KeyboardInterrupt` for Ctrl-C).
//!
//! Only Python's main thread runs signal handlers: a call made on another thread is never
//! interrupted, as Python code there never sees `KeyboardInterrupt` either.
//!
//! Because the check takes the GIL, the wrapped call must not hold, while it waits, a lock
//! that code holding the GIL may block on (the launcher's tables are only locked briefly, never
//! across a compile).

use std::sync::{Arc, Mutex, PoisonError};

use npu_process::Interrupted;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;

/// `py.detach(f)`, interruptible by the signals Python handles (see the module docs).
pub fn detach_interruptible<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    let raised: Arc<Mutex<Option<PyErr>>> = Arc::default();
    let stash = raised.clone();
    let out = py.detach(move || {
        npu_process::interrupt::with_check(
            move || {
                Python::attach(|py| {
                    py.check_signals().map_err(|e| {
                        let cause = if e.is_instance_of::<PyKeyboardInterrupt>(py) {
                            Interrupted::by_signal(libc::SIGINT)
                        } else {
                            Interrupted::by_caller()
                        };
                        *stash.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                        cause
                    })
                })
            },
            f,
        )
    });
    let raised = raised.lock().unwrap_or_else(PoisonError::into_inner).take();
    match raised {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
