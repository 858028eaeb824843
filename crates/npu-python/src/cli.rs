//! Runs the `triton-npu` command line inside Python.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Runs `triton-npu` with `args` (program name first) and returns its exit code. `facts`
/// describes the Python environment (see `triton_npu.cli`). The GIL is released while the
/// command runs; a signal whose Python handler raises (Ctrl-C: `KeyboardInterrupt`) stops
/// the tool or script the command waits for, the command ends, and the exception is raised.
#[pyfunction]
fn cli_main(py: Python<'_>, args: Vec<String>, facts: &Bound<'_, PyDict>) -> PyResult<u8> {
    let get = |key: &str| -> PyResult<Option<String>> {
        match facts.get_item(key)? {
            Some(v) if !v.is_none() => Ok(Some(v.extract()?)),
            _ => Ok(None),
        }
    };
    let driver_host = crate::host::host_from(Some(facts))?;
    let host = npu_cli::Host {
        python: Some(npu_cli::PythonHost {
            executable: get("executable")?.map(PathBuf::from).unwrap_or_default(),
            version: get("version")?.unwrap_or_default(),
            triton_version: get("triton_version")?,
            triton_error: get("triton_error")?,
            triton_dir: driver_host.triton_dir,
            site_packages: driver_host.site_packages,
            shim_dirs: driver_host.shim_dirs,
        }),
    };
    crate::interrupt::detach_interruptible(py, || npu_cli::run(args, &host))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cli_main, m)?)
}
