//! Memory the NPU reads in place, for `triton_npu.shared`.
//!
//! `shared_alloc` asks the process-wide runtime for a shared buffer (HSA shared region, XRT
//! buffer object) and hands it to Python as a `SharedAllocation`, which owns it. The
//! allocation exposes `__array_interface__`, so numpy arrays made from it keep it alive through
//! their `base`; the memory is freed when the allocation and every view of it are gone.
//!
//! A runtime that cannot be opened (no ROCr, no XRT, no device) raises `RuntimeNotFoundError`
//! or a `DeviceError` (`triton_npu.errors`), and a failure of an open runtime to allocate
//! raises `RuntimeError`; the Python side reports each as a `SharedBufferError` carrying it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use npu_driver::runtimes;
use npu_runtime::SharedBuffer;
use npu_target::{Config, RuntimeKind};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{config_error, driver_error};
use crate::host::host_from;

/// One shared buffer, owned by Python; dropping the last reference frees it.
#[pyclass(module = "triton_npu._native", name = "SharedAllocation", frozen)]
pub struct SharedAllocation {
    buffer: Box<dyn SharedBuffer>,
    runtime: RuntimeKind,
}

#[pymethods]
impl SharedAllocation {
    /// The address of the first byte in this process.
    #[getter]
    fn address(&self) -> usize {
        self.buffer.as_ptr() as usize
    }

    #[getter]
    fn nbytes(&self) -> usize {
        self.buffer.len()
    }

    /// The runtime that allocated it: `hsa` or `xrt`.
    #[getter]
    fn runtime(&self) -> &'static str {
        self.runtime.as_str()
    }

    /// numpy's array interface (version 3): the bytes, writable, as a flat `uint8` array.
    /// numpy keeps this object as the array's `base`, which keeps the memory alive.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        array_interface(py, self.address(), self.buffer.len())
    }

    fn __repr__(&self) -> String {
        format!(
            "SharedAllocation(runtime={:?}, address={:#x}, nbytes={})",
            self.runtime.as_str(),
            self.address(),
            self.buffer.len()
        )
    }
}

/// numpy's array interface (version 3) for `len` writable bytes at `address`, as a flat
/// `uint8` array; the object exposing it must keep the memory alive.
pub(crate) fn array_interface(
    py: Python<'_>,
    address: usize,
    len: usize,
) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", 3)?;
    d.set_item("shape", (len,))?;
    d.set_item("typestr", "|u1")?;
    d.set_item("data", (address, false))?;
    Ok(d)
}

/// `shared_alloc(nbytes, runtime, host)`: a shared buffer of `nbytes` from the process-wide
/// `runtime` (opened on first use with the current configuration and the `host` facts).
#[pyfunction]
#[pyo3(signature = (nbytes, runtime, host = None))]
fn shared_alloc(
    py: Python<'_>,
    nbytes: usize,
    runtime: &str,
    host: Option<&Bound<'_, PyDict>>,
) -> PyResult<SharedAllocation> {
    let kind = RuntimeKind::parse_named(runtime, "the runtime argument").map_err(config_error)?;
    if nbytes == 0 {
        return Err(PyValueError::new_err(
            "a shared buffer needs at least one byte; allocate zero-size arrays in host memory",
        ));
    }
    let host = host_from(host)?;
    let mut config = Config::current().map_err(config_error)?;
    config.runtime = kind;
    let opened = py.detach(|| runtimes::runtime(&config, &host));
    let rt = opened.map_err(driver_error)?;
    let buffer = py.detach(|| rt.alloc_shared(nbytes)).map_err(|e| {
        PyRuntimeError::new_err(format!(
            "the {} runtime cannot allocate a {nbytes}-byte shared buffer: {e}",
            kind.as_str()
        ))
    })?;
    Ok(SharedAllocation {
        buffer,
        runtime: kind,
    })
}

/// Buffer arguments of this process's dispatches, per runtime: `(in_place, staged)`.
/// Per runtime because upstream's `hsa_dispatch_counts` counts HSA dispatches only. Counted
/// with atomics, as every launch counts: a slot per runtime, claimed by its first dispatch.
struct Counted {
    runtime: OnceLock<&'static str>,
    in_place: AtomicU64,
    staged: AtomicU64,
}

/// More slots than there are runtime kinds (three are declared).
static DISPATCHED: [Counted; 8] = [const {
    Counted {
        runtime: OnceLock::new(),
        in_place: AtomicU64::new(0),
        staged: AtomicU64::new(0),
    }
}; 8];

/// Counts one dispatch's buffer arguments under the runtime that ran it.
pub(crate) fn record_dispatch(runtime: RuntimeKind, in_place: u64, staged: u64) {
    let name = runtime.as_str();
    // The first slot that is this runtime's or nobody's (which this claims).
    if let Some(slot) = DISPATCHED
        .iter()
        .find(|slot| *slot.runtime.get_or_init(|| name) == name)
    {
        slot.in_place.fetch_add(in_place, Ordering::Relaxed);
        slot.staged.fetch_add(staged, Ordering::Relaxed);
    }
}

/// `dispatch_counts(runtime=None)` → `(in_place, staged)`: buffer arguments of this process's
/// kernel launches that the runtime passed in place (inside a shared buffer) and that it
/// copied through staging memory; of every runtime, or of the one named.
#[pyfunction]
#[pyo3(signature = (runtime = None))]
fn dispatch_counts(runtime: Option<&str>) -> PyResult<(u64, u64)> {
    let kind = runtime
        .map(|r| RuntimeKind::parse_named(r, "the runtime argument").map_err(config_error))
        .transpose()?;
    Ok(DISPATCHED
        .iter()
        .filter(|slot| {
            slot.runtime
                .get()
                .is_some_and(|name| kind.is_none_or(|k| k.as_str() == *name))
        })
        .fold((0, 0), |(i, s), slot| {
            (
                i + slot.in_place.load(Ordering::Relaxed),
                s + slot.staged.load(Ordering::Relaxed),
            )
        }))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SharedAllocation>()?;
    m.add_function(wrap_pyfunction!(shared_alloc, m)?)?;
    m.add_function(wrap_pyfunction!(dispatch_counts, m)?)?;
    Ok(())
}
