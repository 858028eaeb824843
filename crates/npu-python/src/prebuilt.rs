//! Prebuilt designs for `triton_npu.prebuilt`: an hsaco someone else built (for example
//! mlir-air's LLM decode, a full ELF with a `scratch-pad-ctrl` relocation) loaded on the
//! process's runtime with the external variables it needs, each variable writable from Python
//! as device-heap memory, dispatched with tensors or shared buffers as often as needed.
//!
//! ROCr flushes every external variable on each dispatch, so Python changes a parameter with
//! a plain store into the variable's array. Under XRT the runtime refuses an hsaco with a
//! clear error (XRT does not run hsaco designs).

use std::sync::{Arc, Mutex, PoisonError};

use npu_driver::runtimes;
use npu_runtime::hsa::HsaKernel;
use npu_runtime::{Artifact, DispatchOptions, HostArg, Program, Runtime};
use npu_target::{Config, RuntimeKind};
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::errors::{config_error, driver_error};
use crate::host::host_from;
use crate::launcher::host_arg;

fn runtime_error(e: npu_runtime::RuntimeError) -> PyErr {
    driver_error(e.into())
}

/// A loaded prebuilt kernel; `release()` (or the last reference going) unloads it once no
/// variable array is left.
#[pyclass(module = "triton_npu._native", name = "PrebuiltKernel", frozen)]
pub struct PrebuiltKernel {
    runtime: &'static dyn Runtime,
    kind: RuntimeKind,
    name: String,
    variables: Vec<(String, u64)>,
    program: Mutex<Option<Program>>,
}

impl PrebuiltKernel {
    fn program(&self) -> PyResult<Program> {
        self.program
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "prebuilt kernel {:?} was released; load it again",
                    self.name
                ))
            })
    }
}

#[pymethods]
impl PrebuiltKernel {
    /// The kernel's name in the code object (e.g. `main:sequence`).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The runtime it was loaded on: `hsa` or `xrt`.
    #[getter]
    fn runtime(&self) -> &'static str {
        self.kind.as_str()
    }

    /// The external variables it was loaded with, name → bytes.
    #[getter]
    fn variables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, size) in &self.variables {
            d.set_item(name, size)?;
        }
        Ok(d)
    }

    /// The device memory of external variable `name`, as an object with numpy's array
    /// interface (writable `uint8`); it keeps the kernel loaded while it lives.
    fn variable(&self, name: &str) -> PyResult<VariableMemory> {
        let program = self.program()?;
        let (ptr, len) = program
            .state::<HsaKernel>()
            .and_then(|k| k.variable(name))
            .ok_or_else(|| {
                PyKeyError::new_err(format!(
                    "prebuilt kernel {:?} has no external variable {name:?}; it was loaded with \
                     {:?}",
                    self.name,
                    self.variables.iter().map(|(n, _)| n).collect::<Vec<_>>()
                ))
            })?;
        Ok(VariableMemory {
            _program: program,
            address: ptr as usize,
            len,
            name: name.to_owned(),
        })
    }

    /// `dispatch(*buffers)`: runs the kernel once over the buffers (tensors, numpy arrays or
    /// shared buffers, in the kernel's argument order) and waits for it.
    #[pyo3(signature = (*args))]
    fn dispatch(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<()> {
        let program = self.program()?;
        let buffers: Vec<HostArg> = args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                host_arg(py, &a, &|| {
                    format!("argument {i} of prebuilt kernel {:?}", self.name)
                })
            })
            .collect::<PyResult<_>>()?;
        let runtime = self.runtime;
        crate::interrupt::detach_interruptible(py, || {
            runtime.dispatch(&program, &buffers, &DispatchOptions::default())
        })?
        .map_err(runtime_error)?;
        Ok(())
    }

    /// Unloads the kernel once no variable array is left; later calls raise.
    fn release(&self) {
        let program = self
            .program
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(program) = program {
            self.runtime.release(&program);
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "PrebuiltKernel(name={:?}, runtime={:?}, variables={:?})",
            self.name,
            self.kind.as_str(),
            self.variables
        )
    }
}

/// The device memory of one external variable; numpy keeps it as the array's `base`.
#[pyclass(module = "triton_npu._native", name = "VariableMemory", frozen)]
pub struct VariableMemory {
    _program: Program,
    address: usize,
    len: usize,
    name: String,
}

#[pymethods]
impl VariableMemory {
    #[getter]
    fn nbytes(&self) -> usize {
        self.len
    }

    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::shared::array_interface(py, self.address, self.len)
    }

    fn __repr__(&self) -> String {
        format!(
            "VariableMemory(name={:?}, address={:#x}, nbytes={})",
            self.name, self.address, self.len
        )
    }
}

/// `prebuilt_load(source, kernel, variables, runtime, host=None)`: loads `kernel` from an
/// hsaco (`bytes`, or a path) on the process's `runtime`, defining each external variable
/// (name → bytes) in device memory first.
#[pyfunction]
#[pyo3(signature = (source, kernel, variables, runtime, host = None))]
fn prebuilt_load(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    kernel: &str,
    variables: Vec<(String, u64)>,
    runtime: &str,
    host: Option<&Bound<'_, PyDict>>,
) -> PyResult<PrebuiltKernel> {
    let kind = RuntimeKind::parse_named(runtime, "the runtime argument").map_err(config_error)?;
    let bytes: Vec<u8> = if let Ok(b) = source.cast::<PyBytes>() {
        b.as_bytes().to_vec()
    } else if let Ok(path) = source.extract::<std::path::PathBuf>() {
        std::fs::read(&path).map_err(|e| {
            PyValueError::new_err(format!("cannot read the hsaco {}: {e}", path.display()))
        })?
    } else {
        return Err(PyTypeError::new_err(
            "the hsaco must be bytes or a path (str or os.PathLike)",
        ));
    };
    if let Some((name, _)) = variables.iter().find(|(_, size)| *size == 0) {
        return Err(PyValueError::new_err(format!(
            "external variable {name:?} has size 0; give each variable its size in bytes"
        )));
    }
    let host = host_from(host)?;
    let mut config = Config::current().map_err(config_error)?;
    config.runtime = kind;
    let rt = py
        .detach(|| runtimes::runtime(&config, &host))
        .map_err(driver_error)?;
    let artifact = Artifact::Hsaco {
        bytes: Arc::from(bytes),
        kernel_name: kernel.to_owned(),
        variables: variables.clone(),
    };
    let program = py.detach(|| rt.load(&artifact)).map_err(runtime_error)?;
    Ok(PrebuiltKernel {
        runtime: rt,
        kind,
        name: kernel.to_owned(),
        variables,
        program: Mutex::new(Some(program)),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PrebuiltKernel>()?;
    m.add_class::<VariableMemory>()?;
    m.add_function(wrap_pyfunction!(prebuilt_load, m)?)?;
    Ok(())
}
