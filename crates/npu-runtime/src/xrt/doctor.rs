//! What `triton-npu doctor` reports about XRT, and target detection through XRT's device name.

use std::path::PathBuf;

use npu_target::{Config, NpuVersion, ProbeOutcome, TargetProbe};
use xrt_sys::Device;

use super::discovery;

/// The XRT part of the doctor's report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct XrtReport {
    /// The shim in use, or why none could be loaded (every place looked, what to do).
    pub shim: Result<PathBuf, String>,
    /// Where `libxrt_coreutil.so.2` was loaded from; `None` when the shim does not need it
    /// (the harness stand-in) or was not loaded.
    pub coreutil: Option<PathBuf>,
    /// XRT's version as the shim reads it.
    pub xrt_version: Option<Result<String, String>>,
    /// Device 0's name, or why it could not be opened.
    pub device: Option<Result<String, String>>,
    /// The NPU generation the device name implies.
    pub target: Option<NpuVersion>,
}

impl XrtReport {
    /// Whether XRT can run kernels here.
    pub fn usable(&self) -> bool {
        matches!(self.device, Some(Ok(_)))
    }
}

impl std::fmt::Display for XrtReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.shim {
            Ok(path) => writeln!(f, "XRT shim: {}", path.display())?,
            Err(why) => return writeln!(f, "XRT shim: not loaded: {why}"),
        }
        match &self.coreutil {
            Some(path) => writeln!(f, "XRT coreutil: {}", path.display())?,
            None => writeln!(f, "XRT coreutil: not needed by this shim")?,
        }
        match &self.xrt_version {
            Some(Ok(v)) => writeln!(f, "XRT version: {v}")?,
            Some(Err(why)) => writeln!(f, "XRT version: unknown ({why})")?,
            None => {}
        }
        match (&self.device, self.target) {
            // XRT's public API (xrt::info::device, 2.25) has no column count: amdxdna's
            // DRM_AMDXDNA_QUERY_AIE_METADATA reaches it only through XRT's internal queries.
            // The HSA agent does report it (doctor's HSA line).
            (Some(Ok(name)), Some(t)) => writeln!(
                f,
                "XRT device: {name} ({t}); columns: not reported by XRT's public API"
            ),
            (Some(Ok(name)), None) => {
                writeln!(f, "XRT device: {name} (not a known NPU generation)")
            }
            (Some(Err(why)), _) => writeln!(f, "XRT device: none: {why}"),
            (None, _) => Ok(()),
        }
    }
}

/// Loads the shim and asks XRT for its version and device 0's name. `shim_dirs` are the
/// installed package's directories that may hold `libtriton_npu_xrt.so`.
pub fn doctor_report(config: &Config, shim_dirs: &[PathBuf]) -> XrtReport {
    let shim = match xrt_sys::load(&discovery::search(config, shim_dirs)) {
        Ok(shim) => shim,
        Err(e) => {
            return XrtReport {
                shim: Err(e.to_string()),
                coreutil: None,
                xrt_version: None,
                device: None,
                target: None,
            };
        }
    };
    let device = Device::open(&shim, 0).and_then(|d| d.name());
    let target = device
        .as_ref()
        .ok()
        .and_then(|name| NpuVersion::from_device_name(name));
    XrtReport {
        shim: Ok(shim.path().to_path_buf()),
        coreutil: shim.coreutil().map(PathBuf::from),
        xrt_version: Some(shim.xrt_version().map_err(|e| e.to_string())),
        device: Some(device.map_err(|e| e.to_string())),
        target,
    }
}

/// Target detection through XRT: the name of device 0 (e.g. `NPU Strix`), a device model.
#[derive(Debug, Clone)]
pub struct XrtTargetProbe {
    config: Config,
    shim_dirs: Vec<PathBuf>,
    /// XRT is the configured runtime: a process that launches opens it anyway.
    selected: bool,
}

impl XrtTargetProbe {
    pub fn new(config: &Config, shim_dirs: &[PathBuf], selected: bool) -> XrtTargetProbe {
        XrtTargetProbe {
            config: config.clone(),
            shim_dirs: shim_dirs.to_vec(),
            selected,
        }
    }
}

impl TargetProbe for XrtTargetProbe {
    fn name(&self) -> &str {
        "XRT device"
    }

    /// From the process's runtime when it is open, or when XRT is the configured runtime of a
    /// process that launches (it opens the device anyway, so the device is opened once);
    /// otherwise from device 0 opened for the question.
    fn probe(&self) -> ProbeOutcome {
        let runtime = match super::backend::global_if_open() {
            Some(rt) => Some(rt),
            None if self.selected && !self.config.compile_only => {
                super::backend::global(&self.config, &self.shim_dirs).ok()
            }
            None => None,
        };
        if let Some(Ok(name)) = runtime.map(crate::Runtime::device_name) {
            return ProbeOutcome::Device(name);
        }
        let shim = match discovery::load_shim(&self.config, &self.shim_dirs) {
            Ok(shim) => shim,
            Err(e) => return ProbeOutcome::Unavailable(e.to_string()),
        };
        match Device::open(&shim, 0).and_then(|d| d.name()) {
            Ok(name) => ProbeOutcome::Device(name),
            Err(e) => ProbeOutcome::Unavailable(format!("XRT could not open device 0: {e}")),
        }
    }
}
