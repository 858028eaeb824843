//! The environment the stand-in reads, at the moment each decision is made (so a test can
//! change it between calls).
//!
//! * `NPU_HARNESS_XRT_DEVICE`: the device name (default `NPU Strix`); `none` means there is no
//!   device, and opening one fails as XRT does.
//! * `NPU_HARNESS_FAULT`: `abort` (runs end in ERT_CMD_STATE_ABORT), `hang` (runs never
//!   complete, so a wait times out), `hwctx_exhausted` (creating a hardware context while
//!   `NPU_HARNESS_MAX_HWCTX` are open fails with the driver's CREATE_HWCTX error).
//! * `NPU_HARNESS_MAX_HWCTX`: that limit, default 32 (the NPU driver's context pool).

pub const DEVICE_VAR: &str = "NPU_HARNESS_XRT_DEVICE";
pub const FAULT_VAR: &str = "NPU_HARNESS_FAULT";
pub const MAX_HWCTX_VAR: &str = "NPU_HARNESS_MAX_HWCTX";
pub const DEFAULT_DEVICE: &str = "NPU Strix";
pub const DEFAULT_MAX_HWCTX: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Hang,
    Abort,
    HwctxExhausted,
}

/// The device name, or `None` for "no device".
pub fn device_name() -> Option<String> {
    match std::env::var(DEVICE_VAR) {
        Ok(v) if v == "none" => None,
        Ok(v) if !v.is_empty() => Some(v),
        _ => Some(DEFAULT_DEVICE.to_owned()),
    }
}

/// The injected fault, if any. Other values of the variable (faults of other harness parts,
/// e.g. the toolchain's) inject nothing here.
pub fn fault() -> Option<Fault> {
    match std::env::var(FAULT_VAR).ok()?.trim() {
        "hang" => Some(Fault::Hang),
        "abort" => Some(Fault::Abort),
        "hwctx_exhausted" => Some(Fault::HwctxExhausted),
        _ => None,
    }
}

pub fn max_hwctx() -> usize {
    std::env::var(MAX_HWCTX_VAR)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_MAX_HWCTX)
}
