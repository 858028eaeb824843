//! HSA as a [`Backend`]: packs `kernel.hsaco` as its preparation and loads it.

use npu_target::{Config, OutputFormat, RuntimeKind, TargetProbe};

use super::{HsaRuntime, HsaTargetProbe, doctor_report, pack};
use crate::backend::{Backend, Build, BuildFiles, Diagnosis, Host, PrepareError};
use crate::{Artifact, Runtime, RuntimeError};

/// The HSA runtime in the registry.
pub struct HsaBackend;

pub static BACKEND: HsaBackend = HsaBackend;

impl Backend for HsaBackend {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::HSA
    }

    fn prepared_files(&self) -> &'static [&'static str] {
        &[pack::HSACO]
    }

    fn prepare(&self, build: &Build) -> Result<(), PrepareError> {
        pack::prepare(build)
    }

    fn artifact(
        &self,
        files: &BuildFiles,
        format: OutputFormat,
        kernel: &str,
    ) -> Result<Artifact, RuntimeError> {
        pack::artifact(files, format, kernel)
    }

    fn open(&self, config: &Config, host: &Host) -> Result<&'static dyn Runtime, RuntimeError> {
        Ok(HsaRuntime::global(config, &host.site_packages)?)
    }

    fn opened(&self) -> Option<&'static dyn Runtime> {
        HsaRuntime::global_if_open().map(|rt| rt as &dyn Runtime)
    }

    /// The agent name, only when HSA is the configured runtime: initialising ROCr is not
    /// free, and upstream asks it only then.
    fn probes(&self, config: &Config, host: &Host, selected: bool) -> Vec<Box<dyn TargetProbe>> {
        if selected {
            vec![Box::new(HsaTargetProbe::new(config, &host.site_packages))]
        } else {
            Vec::new()
        }
    }

    fn diagnose(&self, config: &Config, host: &Host) -> Diagnosis {
        let report = doctor_report(config, &host.site_packages);
        Diagnosis {
            usable: report.agent.is_ok(),
            detail: report.to_string().trim_end().replace('\n', "; "),
            fix: "install an AIE-capable ROCr (pip rocm-sdk-core from AMD's nightly index) and \
                  point AMD_NPU_ROCR_PATH at it; needed only to run kernels with \
                  AMD_TRITON_NPU_RUNTIME=hsa"
                .to_owned(),
        }
    }
}
