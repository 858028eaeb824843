//! The environment the stand-in reads, at the moment each decision is made (so a test can
//! change it between calls).
//!
//! * `NPU_HARNESS_XRT_DEVICE`: the device name (default `NPU Strix`); `none` means there is no
//!   device, and opening one fails as XRT does.
//! * `NPU_HARNESS_FAULT`: `abort` (runs end in ERT_CMD_STATE_ABORT), `hang` (runs never
//!   complete, so a wait times out; the command stays on its hardware context, and later
//!   commands on that context hang behind it, until the context is destroyed).
//! * `NPU_HARNESS_MAX_HWCTX`: lowers the device's context limit (as amdxdna's `context_limit`
//!   module parameter does); see [`context_limit`].
//! * `NPU_HARNESS_NOOP_DEVICE=1`: a run that passes every check completes at once without
//!   running its program (benchmarks measure the host's part of a launch with it).

pub const DEVICE_VAR: &str = "NPU_HARNESS_XRT_DEVICE";
pub const FAULT_VAR: &str = "NPU_HARNESS_FAULT";
pub const MAX_HWCTX_VAR: &str = "NPU_HARNESS_MAX_HWCTX";
pub const NOOP_DEVICE_VAR: &str = "NPU_HARNESS_NOOP_DEVICE";
pub const DEFAULT_DEVICE: &str = "NPU Strix";

/// Contexts amdxdna allows on an npu1 (Phoenix, Hawk Point) device: 6 hardware, 6 in all
/// (xdna-driver `src/driver/amdxdna/npu1_regs.c`).
pub const NPU1_CONTEXT_LIMIT: usize = 6;
/// Contexts amdxdna allows on the npu4 family (Strix, Strix Halo, Krackan, Gorgon Point): 32
/// in all, of which 16 may be real-time hardware contexts (xdna-driver
/// `src/driver/amdxdna/npu4_family.h`). The stand-in makes only normal-priority contexts, so
/// the total is the limit it meets.
pub const NPU4_CONTEXT_LIMIT: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Hang,
    Abort,
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
        _ => None,
    }
}

/// Whether runs complete without running their program (`NPU_HARNESS_NOOP_DEVICE=1`).
pub fn noop_device() -> bool {
    std::env::var(NOOP_DEVICE_VAR).is_ok_and(|v| v.trim() == "1")
}

/// How many contexts may be open at once on the device called `device`: amdxdna's limit for
/// its generation (npu1 names: Phoenix, Hawk Point, npu1; anything else is taken as the npu4
/// family), lowered by `NPU_HARNESS_MAX_HWCTX`.
pub fn context_limit(device: &str) -> usize {
    let lower = device.to_ascii_lowercase();
    let npu1 = ["phoenix", "hawk", "npu1"]
        .iter()
        .any(|n| lower.contains(n));
    let limit = if npu1 {
        NPU1_CONTEXT_LIMIT
    } else {
        NPU4_CONTEXT_LIMIT
    };
    std::env::var(MAX_HWCTX_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(limit, |n| n.min(limit))
}
