//! The Python compiler stage's tool: finding `triton-shared-opt` (and its cache key) and
//! running it.

use std::path::PathBuf;

use npu_target::Config;
use npu_toolchain::discovery::{self, SearchPaths, Tool, ToolIdentity};
use npu_toolchain::ttshared;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::config_error;
use crate::interrupt::detach_interruptible;

fn search(triton_dir: Option<String>) -> SearchPaths {
    SearchPaths {
        site_packages: Vec::new(),
        triton_dir: triton_dir.map(PathBuf::from),
    }
}

/// `{"path": str | None, "version": str | None, "error": str | None}`; the error names every
/// place looked and how to install the tool. Raises `NPUResourceError` when the search could
/// not run its probes (a limit of the process or the system was reached).
#[pyfunction]
#[pyo3(signature = (triton_dir=None))]
fn find_triton_shared_opt<'py>(
    py: Python<'py>,
    triton_dir: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let config = Config::current().map_err(config_error)?;
    let found = detach_interruptible(py, || {
        discovery::find_triton_shared_opt(&config, &search(triton_dir))
    })?;
    let d = PyDict::new(py);
    match found {
        Ok(tool) => {
            d.set_item("path", tool.path.display().to_string())?;
            d.set_item("version", tool.identity.describe())?;
            d.set_item("error", py.None())?;
        }
        // Not knowing (a probe could not start for want of a resource) is not "missing".
        Err(missing) if missing.exhausted.is_some() => {
            return Err(crate::errors::error_of_kind(
                npu_driver::ErrorKind::ResourcesExhausted,
                missing.to_string(),
            ));
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

/// Runs `triton-shared-opt` (the path `find_triton_shared_opt` returned) on the TTIR of
/// `kernel` and returns the Linalg module it wrote, as bytes. Runs like every compile tool:
/// in a private work directory, under `AMD_TRITON_NPU_COMPILE_TIMEOUT`, killed with its
/// process group on timeout or Ctrl-C (which raises `KeyboardInterrupt`). A failure raises
/// `RuntimeError` with the command line, the exit status, the end of the tool's output and
/// where its log was kept.
#[pyfunction]
fn triton_to_linalg<'py>(
    py: Python<'py>,
    tool: PathBuf,
    ttir: &str,
    kernel: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let config = Config::current().map_err(config_error)?;
    let tool = Tool {
        name: "triton-shared-opt".into(),
        path: tool,
        origin: "the caller".into(),
        identity: ToolIdentity {
            version: None,
            sha256: None,
            size: 0,
        },
    };
    let linalg = detach_interruptible(py, || {
        ttshared::triton_to_linalg(&config, &tool, kernel, ttir)
    })?
    .map_err(|e| crate::errors::driver_error(e.into()))?;
    Ok(PyBytes::new(py, &linalg))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(find_triton_shared_opt, m)?)?;
    m.add_function(wrap_pyfunction!(triton_to_linalg, m)?)?;
    m.add_function(wrap_pyfunction!(toolchain_fingerprint, m)?)?;
    Ok(())
}
