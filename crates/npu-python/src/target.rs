//! Which NPU this machine has: the native half of upstream's `detect_npu_version(runtime)` and
//! `get_npu_device_info()`.
//!
//! Both ask the same probes, in the same order, as a kernel launch does (the HSA agent under
//! `hsa`, the XRT device, `xrt-smi examine`), so what they report is what a launch would use.

use npu_driver::runtimes;
use npu_target::{Config, NpuVersion, ProbeOutcome, RuntimeKind};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{config_error, driver_error};
use crate::host::host_from;

/// The configuration of this process, with `runtime` (if given) in place of the configured one.
fn config_for(runtime: Option<&str>) -> PyResult<Config> {
    let mut config = Config::current().map_err(config_error)?;
    if let Some(name) = runtime {
        config.runtime =
            RuntimeKind::parse_named(name, "the runtime argument").map_err(config_error)?;
    }
    Ok(config)
}

/// `"npu1"` or `"npu2"`: `AMD_TRITON_NPU_TARGET` (or `npu_config.target`) if set, else the
/// device, asked in upstream's order. Raises `RuntimeError` listing every probe and what it
/// saw when no supported NPU is found; never guesses. Remembered per process and runtime.
#[pyfunction]
#[pyo3(signature = (runtime=None, host=None))]
fn detect_npu_version(
    py: Python<'_>,
    runtime: Option<&str>,
    host: Option<&Bound<'_, PyDict>>,
) -> PyResult<&'static str> {
    let config = config_for(runtime)?;
    let host = host_from(host)?;
    let target = crate::interrupt::detach_interruptible(py, || {
        npu_driver::pipeline::detect_target(&config, &host)
    })?
    .map_err(driver_error)?;
    Ok(target.as_str())
}

/// The artifact format kernels are built in under `config` (upstream's `_get_output_format`):
/// `npu_config.output_format` (`AMD_TRITON_NPU_OUTPUT_FORMAT`) if set and allowed, else
/// `elf` on npu2 and `xclbin` on npu1, for the target a launch would use.
pub(crate) fn output_format_under(
    py: Python<'_>,
    config: &Config,
    host: &npu_driver::Host,
) -> PyResult<&'static str> {
    let target = crate::interrupt::detach_interruptible(py, || {
        npu_driver::pipeline::detect_target(config, host)
    })?
    .map_err(driver_error)?;
    let format = npu_target::OutputFormat::resolve(config.output_format, config.runtime, target)
        .map_err(|e| driver_error(e.into()))?;
    Ok(format.as_str())
}

/// `"elf"`, `"xclbin"` or `"pdi"`: the format kernels launched under `runtime` (default:
/// the configured one) are built in; see `output_format_under`.
#[pyfunction]
#[pyo3(signature = (runtime=None, host=None))]
fn output_format(
    py: Python<'_>,
    runtime: Option<&str>,
    host: Option<&Bound<'_, PyDict>>,
) -> PyResult<&'static str> {
    output_format_under(py, &config_for(runtime)?, &host_from(host)?)
}

/// What the first probe that reaches a device reports.
struct FoundDevice {
    probe: String,
    name: String,
    target: Option<NpuVersion>,
    columns: Option<u32>,
}

/// Asks the probes in order; the first that reads a device decides. `Err` lists what each
/// probe saw.
fn find_device(config: &Config, host: &npu_driver::Host) -> Result<FoundDevice, String> {
    let mut unavailable = Vec::new();
    for probe in runtimes::probes(config, host) {
        match probe.probe() {
            ProbeOutcome::Unavailable(why) => {
                unavailable.push(format!("\n  - {}: {why}", probe.name()))
            }
            ProbeOutcome::Device(name) => {
                let (target, columns) = if probe.reports_arch() {
                    // Only ROCr reports columns; ask it again for them (the probe keeps the
                    // name only). The process's runtime answers if it is already open.
                    let columns = npu_runtime::hsa::doctor_report(config, &host.site_packages)
                        .agent
                        .ok()
                        .and_then(|agent| agent.columns);
                    (NpuVersion::from_arch(&name), columns)
                } else {
                    (NpuVersion::from_device_name(&name), None)
                };
                return Ok(FoundDevice {
                    probe: probe.name().to_owned(),
                    name,
                    target,
                    columns,
                });
            }
        }
    }
    Err(unavailable.concat())
}

/// Opens `runtime` (default: the configured one) on a helper thread ahead of the first launch
/// (`npu_driver::runtimes::open_in_background`); never raises and returns at once.
#[pyfunction]
#[pyo3(signature = (runtime=None, host=None))]
fn open_runtime_in_background(runtime: Option<&str>, host: Option<&Bound<'_, PyDict>>) {
    if let (Ok(config), Ok(host)) = (config_for(runtime), host_from(host)) {
        npu_driver::runtimes::open_in_background(config, host);
    }
}

/// `{"runtime", "name", "target", "arch", "columns", "probe", "error"}` for the NPU the
/// probes find. `name` is `None` when no device was found, and `error` then says what each
/// probe saw; `target`/`arch` are `None` for a device upstream's model table does not know.
#[pyfunction]
#[pyo3(signature = (runtime=None, host=None))]
fn npu_device_info<'py>(
    py: Python<'py>,
    runtime: Option<&str>,
    host: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let config = config_for(runtime)?;
    let host = host_from(host)?;
    let found = crate::interrupt::detach_interruptible(py, || find_device(&config, &host))?;
    let info = PyDict::new(py);
    info.set_item("runtime", config.runtime.as_str())?;
    match found {
        Ok(device) => {
            info.set_item("name", device.name)?;
            info.set_item("target", device.target.map(NpuVersion::as_str))?;
            info.set_item("arch", device.target.map(NpuVersion::arch))?;
            info.set_item("columns", device.columns)?;
            info.set_item("probe", device.probe)?;
            info.set_item("error", py.None())?;
        }
        Err(why) => {
            for key in ["name", "target", "arch", "columns", "probe"] {
                info.set_item(key, py.None())?;
            }
            info.set_item(
                "error",
                format!("no NPU device found. What each probe saw:{why}"),
            )?;
        }
    }
    Ok(info)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(detect_npu_version, m)?)?;
    m.add_function(wrap_pyfunction!(output_format, m)?)?;
    m.add_function(wrap_pyfunction!(npu_device_info, m)?)?;
    m.add_function(wrap_pyfunction!(open_runtime_in_background, m)?)?;
    Ok(())
}
