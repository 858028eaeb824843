//! Toolchain discovery for the Python compiler stage (`triton-shared-opt`) and its cache key.

use std::path::PathBuf;

use npu_target::Config;
use npu_toolchain::discovery::{self, SearchPaths};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::config_error;

fn search(triton_dir: Option<String>) -> SearchPaths {
    SearchPaths {
        site_packages: Vec::new(),
        triton_dir: triton_dir.map(PathBuf::from),
    }
}

/// `{"path": str | None, "version": str | None, "error": str | None}`; the error names every
/// place looked and how to install the tool.
#[pyfunction]
#[pyo3(signature = (triton_dir=None))]
fn find_triton_shared_opt<'py>(
    py: Python<'py>,
    triton_dir: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let config = Config::current().map_err(config_error)?;
    let found = py.detach(|| discovery::find_triton_shared_opt(&config, &search(triton_dir)));
    let d = PyDict::new(py);
    match found {
        Ok(tool) => {
            d.set_item("path", tool.path.display().to_string())?;
            d.set_item("version", tool.identity.describe())?;
            d.set_item("error", py.None())?;
        }
        Err(missing) => {
            d.set_item("path", py.None())?;
            d.set_item("version", py.None())?;
            d.set_item("error", missing.to_string())?;
        }
    }
    Ok(d)
}

/// `path size mtime` of every `triton-shared-opt` that discovery could pick, for Triton's
/// cache key (`backend.hash()`, computed on every compile): installing, replacing or removing
/// the tool changes it, and nothing is run to compute it.
#[pyfunction]
#[pyo3(signature = (triton_dir=None))]
fn toolchain_fingerprint(triton_dir: Option<String>) -> PyResult<String> {
    let config = Config::current().map_err(config_error)?;
    let places = discovery::triton_shared_opt_places(&config, &search(triton_dir));
    Ok(discovery::file_stamps(
        places.iter().map(|(_, p)| p.as_path()),
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(find_triton_shared_opt, m)?)?;
    m.add_function(wrap_pyfunction!(toolchain_fingerprint, m)?)?;
    Ok(())
}
