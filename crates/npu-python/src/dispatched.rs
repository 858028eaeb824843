//! Upstream's `_last_dispatched_module`: the kernel of the process's last NPU launch, as an
//! object whose `launch(gridX, gridY, gridZ, kernel_metadata, launch_metadata, enter_hook,
//! exit_hook, *args)` dispatches it again without going through Triton's JIT (upstream's
//! LLM examples cache it per shape for a fast path; reference/upstream-driver.md §6.2).
//!
//! It is the launcher Triton built for the kernel plus the compiled function Triton passed it,
//! so a launch through it takes the same path as Triton's own: the loaded kernel of that grid,
//! the same argument checks, the same errors.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::launcher::Launcher;

/// The launcher and compiled function of the process's last launch (upstream's is one
/// process-wide variable too).
static LAST: Mutex<Option<(Py<Launcher>, Py<PyAny>)>> = Mutex::new(None);

/// The addresses of `LAST`'s two objects, so that a launch of the same kernel again (the
/// common case) compares two words instead of taking the lock. `LAST` keeps both objects
/// alive, so no other object can have these addresses while they are recorded.
static LAST_ADDRESSES: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// Remembers `launcher` and `function` as the last launch; called with the GIL held at every
/// launch.
pub(crate) fn record(launcher: &Bound<'_, Launcher>, function: &Bound<'_, PyAny>) {
    let addresses = [launcher.as_ptr() as usize, function.as_ptr() as usize];
    let same = |recorded: &[AtomicUsize; 2]| {
        recorded
            .iter()
            .zip(addresses)
            .all(|(r, a)| r.load(Ordering::Acquire) == a)
    };
    if same(&LAST_ADDRESSES) {
        return;
    }
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    *last = Some((launcher.clone().unbind(), function.clone().unbind()));
    for (recorded, address) in LAST_ADDRESSES.iter().zip(addresses) {
        recorded.store(address, Ordering::Release);
    }
}

#[pyclass(module = "triton_npu._native", name = "DispatchedModule", frozen)]
pub struct DispatchedModule {
    launcher: Py<Launcher>,
    function: Py<PyAny>,
}

#[pymethods]
impl DispatchedModule {
    /// `launch(gridX, gridY, gridZ, kernel_metadata, launch_metadata, enter_hook, exit_hook,
    /// *args)`, upstream's signature: `args` are the kernel's arguments in signature order,
    /// constexprs included.
    #[pyo3(signature = (*args))]
    fn launch(&self, args: &Bound<'_, PyTuple>) -> PyResult<()> {
        const FIXED: usize = 7;
        if args.len() < FIXED {
            return Err(PyTypeError::new_err(format!(
                "launch expects (gridX, gridY, gridZ, kernel_metadata, launch_metadata, \
                 enter_hook, exit_hook, *args); got {} arguments",
                args.len()
            )));
        }
        let py = args.py();
        let mut full: Vec<Bound<'_, PyAny>> = Vec::with_capacity(args.len() + 2);
        full.extend(args.get_slice(0, 3).iter());
        // Triton's launcher also takes the stream (unused on the NPU) and the function.
        full.push(py.None().into_bound(py));
        full.push(self.function.bind(py).clone());
        full.extend(args.get_slice(3, args.len()).iter());
        self.launcher.bind(py).call1(PyTuple::new(py, full)?)?;
        Ok(())
    }

    /// The launcher Triton built for the kernel.
    #[getter]
    fn launcher(&self, py: Python<'_>) -> Py<Launcher> {
        self.launcher.clone_ref(py)
    }
}

/// The kernel of the process's last launch, or `None` before the first.
#[pyfunction]
fn last_dispatched_module(py: Python<'_>) -> Option<DispatchedModule> {
    let last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    last.as_ref().map(|(launcher, function)| DispatchedModule {
        launcher: launcher.clone_ref(py),
        function: function.clone_ref(py),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<DispatchedModule>()?;
    m.add_function(wrap_pyfunction!(last_dispatched_module, m)?)?;
    Ok(())
}
