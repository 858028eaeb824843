//! XRT as a [`Backend`]: needs no preparation, loads aircc's files as they are.

use std::path::PathBuf;

use npu_target::xrt_smi::XrtSmiProbe;
use npu_target::{Config, OutputFormat, RuntimeKind, TargetProbe};

use super::{XrtRuntime, XrtTargetProbe, doctor_report};
use crate::backend::files::{ELF, INSTS, XCLBIN};
use crate::backend::{Backend, BuildFiles, Diagnosis, Host};
use crate::{Artifact, Runtime, RuntimeError};

/// The XRT runtime in the registry.
pub struct XrtBackend;

pub static BACKEND: XrtBackend = XrtBackend;

/// The process's runtime: XRT hardware contexts are rationed, so every launcher shares it.
static GLOBAL: crate::opener::ProcessWide<XrtRuntime> =
    crate::opener::ProcessWide::new(&crate::opener::XRT);

/// The process's runtime, opened on first use; a failed open is not remembered.
pub(crate) fn global(
    config: &Config,
    shim_dirs: &[PathBuf],
) -> Result<&'static XrtRuntime, RuntimeError> {
    GLOBAL.get_or_open(|| XrtRuntime::open(config, shim_dirs))
}

/// The process's runtime if it has been opened (in this process: one inherited across fork is
/// not this process's to use or release).
pub(crate) fn global_if_open() -> Option<&'static XrtRuntime> {
    GLOBAL.get()
}

/// What XRT loads from the build of `kernel` in `files` (by path: XRT reads its files).
pub(crate) fn artifact(
    files: &BuildFiles,
    format: OutputFormat,
    kernel: &str,
) -> Result<Artifact, RuntimeError> {
    match format {
        OutputFormat::Elf => Ok(Artifact::Elf {
            elf: files.path(ELF),
            kernel_name: kernel.to_owned(),
        }),
        OutputFormat::Xclbin => Ok(Artifact::XclbinInsts {
            xclbin: files.path(XCLBIN),
            insts: files.path(INSTS),
        }),
        OutputFormat::Pdi => Err(RuntimeError::Load {
            kernel: kernel.to_owned(),
            reason: npu_target::FormatError::NotAccepted {
                format,
                runtime: RuntimeKind::XRT,
                instead: None,
            }
            .to_string(),
        }),
    }
}

impl Backend for XrtBackend {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::XRT
    }

    fn artifact(
        &self,
        files: &BuildFiles,
        format: OutputFormat,
        kernel: &str,
    ) -> Result<Artifact, RuntimeError> {
        artifact(files, format, kernel)
    }

    fn open(&self, config: &Config, host: &Host) -> Result<&'static dyn Runtime, RuntimeError> {
        Ok(global(config, &host.shim_dirs)?)
    }

    fn opened(&self) -> Option<&'static dyn Runtime> {
        global_if_open().map(|rt| rt as &dyn Runtime)
    }

    /// The XRT device's name, then `xrt-smi examine`, whichever runtime is configured (upstream
    /// asks both after the HSA agent).
    fn probes(&self, config: &Config, host: &Host, selected: bool) -> Vec<Box<dyn TargetProbe>> {
        vec![
            Box::new(XrtTargetProbe::new(config, &host.shim_dirs, selected)),
            Box::new(XrtSmiProbe::from_config(config)),
        ]
    }

    fn diagnose(&self, config: &Config, host: &Host) -> Diagnosis {
        let report = doctor_report(config, &host.shim_dirs);
        Diagnosis {
            usable: report.usable(),
            detail: report.to_string().trim_end().replace('\n', "; "),
            fix: "install XRT ≥ 2.19 with the amdxdna driver (xrt-smi examine must list the NPU); \
                  needed only to run kernels with AMD_TRITON_NPU_RUNTIME=xrt"
                .to_owned(),
        }
    }
}
