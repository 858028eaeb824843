//! The one mapping from Rust errors to Python exceptions.
//!
//! Each error's [`ErrorKind`] names a class of `triton_npu.errors` (its `KIND_CLASSES` table);
//! the exception carries the error's message unchanged. Nothing here looks at message text.

use npu_driver::{DriverError, ErrorKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

/// The name of a kind in `triton_npu.errors.KIND_CLASSES`.
pub fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Config => "config",
        ErrorKind::InvalidInput => "invalid_input",
        ErrorKind::ToolchainMissing => "toolchain_missing",
        ErrorKind::CompileFailed => "compile_failed",
        ErrorKind::RuntimeMissing => "runtime_missing",
        ErrorKind::DeviceNotFound => "device_not_found",
        ErrorKind::UnsupportedDevice => "unsupported_device",
        ErrorKind::HardwareContextsExhausted => "hardware_contexts_exhausted",
        ErrorKind::LaunchFailed => "launch_failed",
        ErrorKind::Timeout => "timeout",
        ErrorKind::Cache => "cache",
        ErrorKind::CachePermission => "cache_permission",
        ErrorKind::ResourcesExhausted => "resources_exhausted",
        ErrorKind::Interrupted => "interrupted",
    }
}

static KIND_CLASSES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// An exception of the class for `kind`, with `message`.
pub fn error_of_kind(kind: ErrorKind, message: String) -> PyErr {
    Python::attach(|py| {
        let classes = KIND_CLASSES.get_or_try_init(py, || -> PyResult<Py<PyDict>> {
            let table = py
                .import("triton_npu.errors")?
                .getattr("KIND_CLASSES")?
                .cast_into::<PyDict>()?;
            Ok(table.unbind())
        });
        let class = classes
            .ok()
            .and_then(|table| table.bind(py).get_item(kind_name(kind)).ok().flatten());
        match class {
            Some(class) => match class.call1((message.clone(),)) {
                Ok(exception) => PyErr::from_value(exception),
                Err(e) => e,
            },
            // The package is incomplete (its errors module cannot be imported): still raise,
            // with the message, as the base class of every NPU error.
            None => PyRuntimeError::new_err(message),
        }
    })
}

pub fn driver_error(e: DriverError) -> PyErr {
    error_of_kind(e.kind(), e.to_string())
}

pub fn config_error(e: npu_target::ConfigError) -> PyErr {
    error_of_kind(ErrorKind::Config, e.to_string())
}

/// The kind names the native core raises by, for a test that `KIND_CLASSES` covers them.
#[pyfunction]
fn error_kinds() -> Vec<&'static str> {
    ErrorKind::ALL.iter().map(|k| kind_name(*k)).collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(error_kinds, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_distinct_name() {
        let kinds = ErrorKind::ALL;
        let names: std::collections::BTreeSet<_> = kinds.iter().map(|k| kind_name(*k)).collect();
        assert_eq!(names.len(), kinds.len());
    }
}
