//! Target detection through the HSA agent name (`aie2` → npu1, `aie2p` → npu2).

use std::path::PathBuf;

use npu_target::{Config, ProbeOutcome, TargetProbe};

use super::HsaRuntime;
use super::doctor::doctor_report;

/// Asks ROCr for the AIE agent's name; reports an arch name, not a device model.
#[derive(Debug, Clone)]
pub struct HsaTargetProbe {
    config: Config,
    site_packages: Vec<PathBuf>,
}

impl HsaTargetProbe {
    pub fn new(config: &Config, site_packages: &[PathBuf]) -> HsaTargetProbe {
        HsaTargetProbe {
            config: config.clone(),
            site_packages: site_packages.to_vec(),
        }
    }
}

impl TargetProbe for HsaTargetProbe {
    fn name(&self) -> &str {
        "HSA agent"
    }

    fn reports_arch(&self) -> bool {
        true
    }

    /// A process that launches opens the runtime anyway (it is the configured one: this probe
    /// exists only then), so the agent name comes from it and ROCr is initialised once; a real
    /// `hsa_init` walks the kernel driver's topology, which costs far more than asking twice.
    /// Compile-only processes never dispatch, so they ask ROCr without creating a queue.
    fn probe(&self) -> ProbeOutcome {
        let runtime = match HsaRuntime::global_if_open() {
            Some(rt) => Some(rt),
            None if !self.config.compile_only => {
                HsaRuntime::global(&self.config, &self.site_packages).ok()
            }
            None => None,
        };
        if let Some(rt) = runtime {
            return ProbeOutcome::Device(rt.agent_name().to_owned());
        }
        // Not open (or it cannot be): the doctor's report says why.
        let report = doctor_report(&self.config, &self.site_packages);
        match report.agent {
            Ok(agent) => ProbeOutcome::Device(agent.name),
            Err(why) => ProbeOutcome::Unavailable(why),
        }
    }
}
