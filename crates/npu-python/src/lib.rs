//! `triton_npu._native`.

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", npu_target::VERSION)?;
    Ok(())
}
