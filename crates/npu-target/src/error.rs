//! Errors of this crate; each names what was wrong and what to do about it.

use crate::format::OutputFormat;
use crate::runtime::RuntimeKind;
use crate::target::NpuVersion;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{variable}={value:?} is not valid: expected {expected}")]
    InvalidValue {
        variable: String,
        value: String,
        expected: String,
    },
    /// A runtime name that no runtime declares.
    #[error("unknown NPU runtime {value:?} (from {given_by}): expected one of: {known}")]
    UnknownRuntime {
        value: String,
        given_by: String,
        known: String,
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
    /// The runtime's declaration does not list the format: the one refusal doctor, compile
    /// and launch all give.
    #[error(
        "the {format} output format cannot run under {} (AMD_TRITON_NPU_RUNTIME={runtime}), \
         which loads {}: {}. {}",
        runtime.label(),
        or_list(runtime.declaration().formats),
        runtime.declaration().loads,
        match instead {
            Some(f) => format!(
                "Use AMD_TRITON_NPU_OUTPUT_FORMAT={f} (the default for this target) or unset it"
            ),
            None => "Unset AMD_TRITON_NPU_OUTPUT_FORMAT or choose another runtime".to_owned(),
        }
    )]
    NotAccepted {
        format: OutputFormat,
        runtime: RuntimeKind,
        instead: Option<OutputFormat>,
    },
    #[error(
        "{} (AMD_TRITON_NPU_RUNTIME={runtime}) loads {}, and none of them exists for {target}; \
         choose another runtime or target",
        runtime.label(),
        or_list(runtime.declaration().formats)
    )]
    NoFormat {
        runtime: RuntimeKind,
        target: NpuVersion,
    },
}

fn or_list(formats: &[OutputFormat]) -> String {
    let names: Vec<&str> = formats.iter().map(|f| f.as_str()).collect();
    match names.split_last() {
        None => "no format".to_owned(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
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
         Hawk Point) or npu2 (Strix, Strix Halo, Krackan, Gorgon Point) to compile without a device. \
         What each probe saw:{}",
        list(.observations)
    )]
    NotFound { observations: Vec<Observation> },
    #[error(
        "unsupported NPU device {device:?} reported by {probe}; known devices: npu1 = Phoenix \
         (npu1), npu2 = Strix, Strix Halo, Krackan, Gorgon Point (npu4, npu5, npu6). The target is not guessed, \
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
