//! The installation facts Python passes in (`triton_npu._host.facts()`), as the driver's
//! [`Host`].

use std::path::PathBuf;

use npu_driver::Host;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The driver's view of the installation from a facts dict; `None` gives an empty one.
pub(crate) fn host_from(facts: Option<&Bound<'_, PyDict>>) -> PyResult<Host> {
    let Some(facts) = facts else {
        return Ok(Host::default());
    };
    let paths = |key: &str| -> PyResult<Vec<PathBuf>> {
        Ok(match facts.get_item(key)? {
            Some(v) if !v.is_none() => v
                .extract::<Vec<String>>()?
                .into_iter()
                .map(PathBuf::from)
                .collect(),
            _ => Vec::new(),
        })
    };
    Ok(Host {
        site_packages: paths("site_packages")?,
        triton_dir: paths("triton_dir")?.into_iter().next(),
        shim_dirs: paths("shim_dirs")?,
    })
}
