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

use std::cell::RefCell;

use npu_process::Interrupted;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;

thread_local! {
    /// What Python's signal handler raised during this thread's interruptible call. The check
    /// runs on the thread that waits (the one that released the GIL), so a thread-local holds
    /// it without the allocation a shared cell would cost on every launch.
    static RAISED: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// Takes the GIL and runs Python's signal handlers; an exception they raise is kept in
/// `RAISED` and stops the wait.
fn check_python_signals() -> Result<(), Interrupted> {
    Python::attach(|py| {
        py.check_signals().map_err(|e| {
            let cause = if e.is_instance_of::<PyKeyboardInterrupt>(py) {
                Interrupted::by_signal(libc::SIGINT)
            } else {
                Interrupted::by_caller()
            };
            RAISED.with(|r| *r.borrow_mut() = Some(e));
            cause
        })
    })
}

/// `py.detach(f)`, interruptible by the signals Python handles (see the module docs).
pub fn detach_interruptible<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    // A call nested in another's (a check's handler that launches) keeps the outer one's.
    let outer = RAISED.with(|r| r.borrow_mut().take());
    let out = py.detach(move || npu_process::interrupt::with_check_fn(check_python_signals, f));
    let raised = RAISED.with(|r| std::mem::replace(&mut *r.borrow_mut(), outer));
    match raised {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
