//! Which NPU generation to compile for: `AMD_TRITON_NPU_TARGET`, else the device, asked through
//! a list of probes in upstream's order. The target is never guessed.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::config::{Config, RuntimeKind};
use crate::error::{Observation, TargetError};

/// An NPU generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NpuVersion {
    /// AIE2: Phoenix, Hawk Point.
    Npu1,
    /// AIE2P: Strix, Strix Halo, Krackan, Gorgon Point.
    Npu2,
}

/// Upstream's model table plus Gorgon Point: a device name containing any of these words (any
/// case) is that generation. Upstream's table (driver.py `NPU_MODELS`, mirrored from mlir-aie)
/// stops at Krackan; amdxdna names the npu4 family's newer revisions "NPU Gorgon Point 1/2/3"
/// (xdna-driver `src/driver/amdxdna/npu4_regs.c`, `npu4_rev_vbnv_tbl`), the same AIE2P array as
/// Strix, so a Gorgon Point laptop is npu2 here where upstream reports an unknown device.
/// A word that ends in a digit matches only where no digit follows: `RyzenAI-npu10` (an AIE4
/// device, `npu10_regs.c`) is not npu1.
pub const NPU_MODELS: [(NpuVersion, &[&str]); 2] = [
    (NpuVersion::Npu1, &["npu1", "Phoenix"]),
    (
        NpuVersion::Npu2,
        &[
            "npu4",
            "Strix",
            "npu5",
            "Strix Halo",
            "npu6",
            "Krackan",
            "Gorgon",
        ],
    ),
];

impl NpuVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            NpuVersion::Npu1 => "npu1",
            NpuVersion::Npu2 => "npu2",
        }
    }

    pub fn parse(value: &str) -> Option<NpuVersion> {
        match value.trim().to_ascii_lowercase().as_str() {
            "npu1" => Some(NpuVersion::Npu1),
            "npu2" => Some(NpuVersion::Npu2),
            _ => None,
        }
    }

    /// The AIE architecture name: the hsaco section name and the HSA agent name.
    pub fn arch(self) -> &'static str {
        match self {
            NpuVersion::Npu1 => "aie2",
            NpuVersion::Npu2 => "aie2p",
        }
    }

    /// The generation of an HSA agent name (`aie2`, `aie2p`); exact, case-insensitive.
    pub fn from_arch(name: &str) -> Option<NpuVersion> {
        match name.trim().to_ascii_lowercase().as_str() {
            "aie2" => Some(NpuVersion::Npu1),
            "aie2p" => Some(NpuVersion::Npu2),
            _ => None,
        }
    }

    /// The generation of a marketing or driver device name, by upstream's model table.
    pub fn from_device_name(name: &str) -> Option<NpuVersion> {
        let lower = name.to_ascii_lowercase();
        NPU_MODELS.iter().find_map(|(version, words)| {
            words
                .iter()
                .any(|w| names_model(&lower, &w.to_ascii_lowercase()))
                .then_some(*version)
        })
    }
}

/// Whether `name` (lower case) contains the model word `word` (lower case), not as the start of
/// a longer number: `npu1` is in `ryzenai-npu1` but not in `ryzenai-npu10`.
fn names_model(name: &str, word: &str) -> bool {
    name.match_indices(word).any(|(at, _)| {
        !word.ends_with(|c: char| c.is_ascii_digit())
            || !name[at + word.len()..].starts_with(|c: char| c.is_ascii_digit())
    })
}

impl std::fmt::Display for NpuVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a probe reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The probe reached a device and read this name.
    Device(String),
    /// The probe could not ask (library missing, no device, command failed): why.
    Unavailable(String),
}

/// One way of asking the machine which NPU it has.
pub trait TargetProbe: Send + Sync {
    /// A short name for messages, e.g. `"HSA agent"`.
    fn name(&self) -> &str;
    /// Whether a device name from this probe is an architecture name (`aie2p`) rather than a
    /// device model (`NPU Strix`).
    fn reports_arch(&self) -> bool {
        false
    }
    fn probe(&self) -> ProbeOutcome;
}

/// The detected target and how it was found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Detection {
    pub target: NpuVersion,
    /// e.g. `AMD_TRITON_NPU_TARGET` or `xrt-smi examine: "NPU Strix"`.
    pub source: String,
    pub observations: Vec<Observation>,
}

/// Detects the target: the configured value if any, else each probe in order. The first probe
/// that reads a device decides; an unknown device is an error, not a fall-through.
pub fn detect(config: &Config, probes: &[&dyn TargetProbe]) -> Result<Detection, TargetError> {
    if let Some(target) = config.target {
        return Ok(Detection {
            target,
            source: "AMD_TRITON_NPU_TARGET (or npu_config.target)".to_owned(),
            observations: Vec::new(),
        });
    }
    let mut observations = Vec::new();
    for probe in probes {
        let outcome = probe.probe();
        tracing::debug!(probe = probe.name(), ?outcome, "target detection");
        match outcome {
            ProbeOutcome::Unavailable(why) => observations.push(Observation {
                probe: probe.name().to_owned(),
                saw: why,
            }),
            ProbeOutcome::Device(device) => {
                let version = if probe.reports_arch() {
                    NpuVersion::from_arch(&device)
                } else {
                    NpuVersion::from_device_name(&device)
                };
                observations.push(Observation {
                    probe: probe.name().to_owned(),
                    saw: format!("device {device:?}"),
                });
                return match version {
                    Some(target) => Ok(Detection {
                        target,
                        source: format!("{}: {device:?}", probe.name()),
                        observations,
                    }),
                    None => Err(TargetError::Unsupported {
                        probe: probe.name().to_owned(),
                        device,
                        observations,
                    }),
                };
            }
        }
    }
    Err(TargetError::NotFound { observations })
}

type MemoKey = (RuntimeKind, Vec<String>, String);
static MEMO: Mutex<Option<HashMap<MemoKey, Detection>>> = Mutex::new(None);

/// [`detect`], remembered per process for each runtime, probe list and set of install
/// locations: probing can cost tens of milliseconds (`xrt-smi`), and the device does not
/// change under a running process. Only a detected device is remembered: after a failure,
/// the next call probes again (the user may have fixed the setup). A configured target is
/// never memoised, so `set_config(target=…)` takes effect at once.
pub fn detect_memoised(
    config: &Config,
    probes: &[&dyn TargetProbe],
) -> Result<Detection, TargetError> {
    if config.target.is_some() {
        return detect(config, probes);
    }
    let key = (
        config.runtime,
        probes.iter().map(|p| p.name().to_owned()).collect(),
        format!("{:?}{:?}", config.locations, config.xrt_dir),
    );
    if let Some(hit) = MEMO
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|m| m.get(&key))
    {
        return Ok(hit.clone());
    }
    // Probe without holding the lock: a slow probe must not block other runtimes' lookups.
    let detection = detect(config, probes)?;
    MEMO.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_insert(detection.clone());
    Ok(detection)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Overrides;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Fixed {
        name: &'static str,
        arch: bool,
        outcome: ProbeOutcome,
        calls: AtomicUsize,
    }

    impl Fixed {
        fn new(name: &'static str, arch: bool, outcome: ProbeOutcome) -> Fixed {
            Fixed {
                name,
                arch,
                outcome,
                calls: AtomicUsize::new(0),
            }
        }
    }

    impl TargetProbe for Fixed {
        fn name(&self) -> &str {
            self.name
        }
        fn reports_arch(&self) -> bool {
            self.arch
        }
        fn probe(&self) -> ProbeOutcome {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.outcome.clone()
        }
    }

    fn config(pairs: &[(&str, &str)]) -> Config {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        Config::load(
            &|n| pairs.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()),
            &Overrides::default(),
        )
        .unwrap()
    }

    #[test]
    fn model_table() {
        for (name, want) in [
            ("NPU Phoenix", Some(NpuVersion::Npu1)),
            ("RyzenAI-npu1", Some(NpuVersion::Npu1)),
            ("NPU Strix", Some(NpuVersion::Npu2)),
            ("NPU Strix Halo", Some(NpuVersion::Npu2)),
            ("RyzenAI-npu4", Some(NpuVersion::Npu2)),
            ("RyzenAI-npu5", Some(NpuVersion::Npu2)),
            ("NPU Krackan", Some(NpuVersion::Npu2)),
            ("RyzenAI-npu6", Some(NpuVersion::Npu2)),
            ("NPU Krackan 1", Some(NpuVersion::Npu2)),
            ("NPU Krackan 2", Some(NpuVersion::Npu2)),
            ("NPU Gorgon Point 1", Some(NpuVersion::Npu2)),
            ("NPU Gorgon Point 3", Some(NpuVersion::Npu2)),
            // AIE4 devices (npu7-npu10 in amdxdna) are neither generation.
            ("RyzenAI-npu10", None),
            ("RyzenAI-npu7", None),
            ("RyzenAI-npu1 rev 2", Some(NpuVersion::Npu1)),
            ("NPU Medusa", None),
            ("", None),
        ] {
            assert_eq!(NpuVersion::from_device_name(name), want, "{name}");
        }
        assert_eq!(NpuVersion::from_arch("AIE2P"), Some(NpuVersion::Npu2));
        assert_eq!(NpuVersion::from_arch("aie2"), Some(NpuVersion::Npu1));
        assert_eq!(NpuVersion::from_arch("aie2ps"), None);
        assert_eq!(NpuVersion::Npu1.arch(), "aie2");
        assert_eq!(NpuVersion::Npu2.arch(), "aie2p");
    }

    #[test]
    fn override_skips_probes() {
        let probe = Fixed::new("HSA agent", true, ProbeOutcome::Device("aie2".into()));
        let d = detect(&config(&[("AMD_TRITON_NPU_TARGET", "npu2")]), &[&probe]).unwrap();
        assert_eq!(d.target, NpuVersion::Npu2);
        assert!(d.source.contains("AMD_TRITON_NPU_TARGET"));
        assert_eq!(probe.calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn first_probe_that_sees_a_device_decides() {
        let hsa = Fixed::new(
            "HSA agent",
            true,
            ProbeOutcome::Unavailable("no ROCr".into()),
        );
        let xrt = Fixed::new(
            "XRT device",
            false,
            ProbeOutcome::Device("NPU Strix".into()),
        );
        let smi = Fixed::new("xrt-smi", false, ProbeOutcome::Device("NPU Phoenix".into()));
        let d = detect(&config(&[]), &[&hsa, &xrt, &smi]).unwrap();
        assert_eq!(d.target, NpuVersion::Npu2);
        assert_eq!(d.source, "XRT device: \"NPU Strix\"");
        assert_eq!(d.observations.len(), 2);
        assert_eq!(smi.calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn arch_probes_map_agent_names() {
        let hsa = Fixed::new("HSA agent", true, ProbeOutcome::Device("aie2".into()));
        assert_eq!(
            detect(&config(&[]), &[&hsa]).unwrap().target,
            NpuVersion::Npu1
        );
    }

    #[test]
    fn unknown_device_is_an_error_not_a_fallthrough() {
        let hsa = Fixed::new("HSA agent", true, ProbeOutcome::Device("aie4".into()));
        let smi = Fixed::new("xrt-smi", false, ProbeOutcome::Device("NPU Strix".into()));
        let err = detect(&config(&[]), &[&hsa, &smi]).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, TargetError::Unsupported { .. }));
        assert!(
            text.contains("aie4") && text.contains("AMD_TRITON_NPU_TARGET"),
            "{text}"
        );
        assert_eq!(smi.calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn nothing_found_lists_every_probe() {
        let a = Fixed::new(
            "HSA agent",
            true,
            ProbeOutcome::Unavailable("libhsa not found".into()),
        );
        let b = Fixed::new(
            "xrt-smi",
            false,
            ProbeOutcome::Unavailable("not on PATH".into()),
        );
        let text = detect(&config(&[]), &[&a, &b]).unwrap_err().to_string();
        assert!(text.contains("HSA agent: libhsa not found"), "{text}");
        assert!(text.contains("xrt-smi: not on PATH"), "{text}");
        assert!(text.contains("AMD_TRITON_NPU_TARGET=npu1"), "{text}");
    }

    #[test]
    fn failures_are_not_memoised() {
        let p = Fixed::new(
            "memo-failure-probe",
            false,
            ProbeOutcome::Unavailable("no device yet".into()),
        );
        let c = config(&[("AMD_TRITON_NPU_RUNTIME", "xrt")]);
        for _ in 0..2 {
            assert!(detect_memoised(&c, &[&p]).is_err());
        }
        assert_eq!(
            p.calls.load(Ordering::SeqCst),
            2,
            "a failure is probed again"
        );
        // Other install locations are another key.
        let q = Fixed::new(
            "memo-location-probe",
            false,
            ProbeOutcome::Device("NPU Strix".into()),
        );
        let a = config(&[("AMD_TRITON_NPU_RUNTIME", "xrt"), ("XILINX_XRT", "/opt/a")]);
        let b = config(&[("AMD_TRITON_NPU_RUNTIME", "xrt"), ("XILINX_XRT", "/opt/b")]);
        detect_memoised(&a, &[&q]).unwrap();
        detect_memoised(&a, &[&q]).unwrap();
        detect_memoised(&b, &[&q]).unwrap();
        assert_eq!(q.calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn memoised_per_runtime_and_probe_list() {
        let p = Fixed::new(
            "memo-test-probe",
            false,
            ProbeOutcome::Device("NPU Krackan".into()),
        );
        let c = config(&[("AMD_TRITON_NPU_RUNTIME", "hsa")]);
        for _ in 0..3 {
            assert_eq!(detect_memoised(&c, &[&p]).unwrap().target, NpuVersion::Npu2);
        }
        assert_eq!(p.calls.load(Ordering::SeqCst), 1);
        let with_target = config(&[
            ("AMD_TRITON_NPU_RUNTIME", "hsa"),
            ("AMD_TRITON_NPU_TARGET", "npu1"),
        ]);
        assert_eq!(
            detect_memoised(&with_target, &[&p]).unwrap().target,
            NpuVersion::Npu1
        );
    }
}
