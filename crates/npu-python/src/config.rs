//! `npu_config` support: typed snapshots of the configuration and its programmatic values.

use std::collections::BTreeMap;

use npu_target::{Config, Overrides, Setting};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::config_error;

/// The resolved configuration (programmatic > environment > default) as a dict.
#[pyfunction]
fn config_snapshot<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
    let c = Config::current().map_err(config_error)?;
    let d = PyDict::new(py);
    let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
    d.set_item("runtime", c.runtime.as_str())?;
    d.set_item("target", c.target.map(|t| t.as_str()))?;
    d.set_item("output_format", c.output_format.map(|f| f.as_str()))?;
    d.set_item("compile_only", c.compile_only)?;
    d.set_item("bf16_emulation", c.bf16_emulation)?;
    d.set_item("transform_tiling_script", path(&c.transform_tiling_script))?;
    d.set_item("air_project_path", path(&c.air_project_path))?;
    d.set_item("debug", c.debug)?;
    d.set_item("xrt_dir", path(&c.xrt_dir))?;
    d.set_item("xrt_max_sessions", c.xrt_max_sessions)?;
    d.set_item("xrt_timeout", c.xrt_timeout.as_secs_f64())?;
    d.set_item("hsa_timeout", c.hsa_timeout.map(|t| t.as_secs_f64()))?;
    d.set_item("compile_timeout", c.compile_timeout.as_secs_f64())?;
    d.set_item("cache_max_bytes", c.cache_max_bytes)?;
    Ok(d)
}

/// Sets (or with `None`, resets) one programmatic value; invalid values raise `ValueError`.
#[pyfunction]
#[pyo3(signature = (name, value))]
fn config_set(name: &str, value: Option<&str>) -> PyResult<()> {
    let setting = Setting::from_name(name).map_err(config_error)?;
    npu_target::config::set_override(setting, value).map_err(config_error)
}

/// The programmatic values currently set, by property name.
#[pyfunction]
fn config_overrides() -> BTreeMap<&'static str, String> {
    let o = npu_target::config::overrides();
    Setting::ALL
        .into_iter()
        .filter_map(|s| o.get(s).map(|v| (s.name(), v.to_owned())))
        .collect()
}

/// Replaces all programmatic values (what `config_context` saved).
#[pyfunction]
fn config_restore(values: BTreeMap<String, String>) -> PyResult<()> {
    let mut o = Overrides::default();
    for (name, value) in &values {
        let setting = Setting::from_name(name).map_err(config_error)?;
        o.set(setting, Some(value)).map_err(config_error)?;
    }
    npu_target::config::replace_overrides(o);
    Ok(())
}

/// The table of environment variables (`npu_target::config::VARIABLES`), one dict per row:
/// `{"name", "property", "default", "meaning"}` (`property`/`default` may be `None`).
#[pyfunction]
fn variables(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    npu_target::config::VARIABLES
        .iter()
        .map(|v| {
            let d = PyDict::new(py);
            d.set_item("name", v.name)?;
            d.set_item("property", v.setting.map(Setting::name))?;
            d.set_item("default", (!v.default.is_empty()).then_some(v.default))?;
            d.set_item("meaning", v.meaning)?;
            Ok(d)
        })
        .collect()
}

/// The runtime names, in the order of the default first.
#[pyfunction]
fn runtime_names() -> Vec<&'static str> {
    npu_target::RuntimeKind::all()
        .into_iter()
        .map(npu_target::RuntimeKind::as_str)
        .collect()
}

/// `value` as a runtime name (lower case), or `NPUConfigError` naming `what` and the valid
/// names.
#[pyfunction]
fn parse_runtime(value: &str, what: &str) -> PyResult<&'static str> {
    npu_target::RuntimeKind::parse_named(value, what)
        .map(npu_target::RuntimeKind::as_str)
        .map_err(config_error)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(variables, m)?)?;
    m.add_function(wrap_pyfunction!(runtime_names, m)?)?;
    m.add_function(wrap_pyfunction!(parse_runtime, m)?)?;
    m.add_function(wrap_pyfunction!(config_snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(config_set, m)?)?;
    m.add_function(wrap_pyfunction!(config_overrides, m)?)?;
    m.add_function(wrap_pyfunction!(config_restore, m)?)?;
    Ok(())
}
