//! Errors of this crate; each names what was wrong and what to do about it.

use crate::format::OutputFormat;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{variable}={value:?} is not valid: expected {expected}")]
    InvalidValue {
        variable: String,
        value: String,
        expected: String,
    },
    #[error("unknown configuration key {name:?}; valid keys: {valid}")]
    UnknownSetting { name: String, valid: String },
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum FormatError {
    #[error(
        "the elf output format is not supported on npu1 (AIE2) devices; use xclbin \
         (unset AMD_TRITON_NPU_OUTPUT_FORMAT to get it by default)"
    )]
    ElfOnNpu1,
    #[error(
        "the pdi output format cannot run under AMD_TRITON_NPU_RUNTIME=hsa: ROCr loads kernels \
         from an hsaco, which is packed from an elf or an xclbin; use \
         AMD_TRITON_NPU_OUTPUT_FORMAT={instead} (the default for this target) or run pdi under xrt"
    )]
    PdiUnderHsa { instead: OutputFormat },
}

/// What one probe saw while looking for the NPU.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Observation {
    pub probe: String,
    pub saw: String,
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TargetError {
    #[error(
        "no NPU device found, and no target was given. Set AMD_TRITON_NPU_TARGET=npu1 (Phoenix, \
         Hawk Point) or npu2 (Strix, Strix Halo, Krackan) to compile without a device. \
         What each probe saw:{}",
        list(.observations)
    )]
    NotFound { observations: Vec<Observation> },
    #[error(
        "unsupported NPU device {device:?} reported by {probe}; known devices: npu1 = Phoenix \
         (npu1), npu2 = Strix, Strix Halo, Krackan (npu4, npu5, npu6). The target is not guessed, \
         because a wrong guess wedges the device; set AMD_TRITON_NPU_TARGET if you know it. \
         What each probe saw:{}",
        list(.observations)
    )]
    Unsupported {
        probe: String,
        device: String,
        observations: Vec<Observation>,
    },
}

fn list(observations: &[Observation]) -> String {
    if observations.is_empty() {
        return " (no probe ran)".to_owned();
    }
    observations
        .iter()
        .map(|o| format!("\n  - {}: {}", o.probe, o.saw))
        .collect()
}
