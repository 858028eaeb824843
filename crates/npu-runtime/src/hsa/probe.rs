//! Target detection through the HSA agent name (`aie2` → npu1, `aie2p` → npu2).

use std::path::PathBuf;

use npu_target::{Config, ProbeOutcome, TargetProbe};

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

    fn probe(&self) -> ProbeOutcome {
        let report = doctor_report(&self.config, &self.site_packages);
        match report.agent {
            Ok(agent) => ProbeOutcome::Device(agent.name),
            Err(why) => ProbeOutcome::Unavailable(why),
        }
    }
}
