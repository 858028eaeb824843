//! What the Python compiler stage reads from triton-shared's output, through the one MLIR
//! reader (`npu-mlir`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The kernel's name: the first function with a body in the Linalg `text` (triton-shared
/// emits one). `ValueError` when the text cannot be read (saying where) or defines none.
#[pyfunction]
fn kernel_name(py: Python<'_>, text: &str) -> PyResult<String> {
    let found = py.detach(|| {
        let module = npu_mlir::Module::parse(text)
            .map_err(|e| format!("the Linalg text cannot be read: {e}"))?;
        module
            .kernel()
            .map(|f| f.name().to_owned())
            .ok_or_else(|| "the Linalg text defines no func.func with a body".to_owned())
    });
    found.map_err(PyValueError::new_err)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kernel_name, m)?)?;
    Ok(())
}
