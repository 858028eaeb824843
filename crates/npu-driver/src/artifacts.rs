//! The files of a compiled kernel inside a cache entry, and handing a build to its runtime.
//!
//! Names are upstream's: `aie.elf` + `elf_kernel_name.txt` (elf), `aie.xclbin` + `insts.bin`
//! (xclbin), `aie.pdi` + `insts.bin` (pdi), plus what the runtime's preparation adds
//! (`kernel.hsaco` under HSA). What a runtime prepares and loads is its own business
//! (`npu_runtime::Backend`); this module only finds its backend in the registry.

use std::path::{Path, PathBuf};

use npu_runtime::{Artifact, Backend, Build, registry};
use npu_target::{NpuVersion, OutputFormat, RuntimeKind};
use npu_toolchain::Artifacts;

use crate::error::DriverError;

pub use npu_runtime::backend::files::{ELF, ELF_KERNEL_NAME, INSTS, PDI, XCLBIN};
pub use npu_runtime::hsa::HSACO;

/// The symbol the runtime looks up: a full ELF's `main:<instance>`, else the Triton name.
pub fn kernel_symbol(artifacts: &Artifacts, triton_name: &str) -> String {
    match artifacts {
        Artifacts::Elf { kernel_name, .. } => kernel_name.clone(),
        _ => triton_name.to_owned(),
    }
}

/// Runs `runtime`'s preparation over aircc's outputs in `dir` (HSA packs `kernel.hsaco` there)
/// for a kernel with `buffers` buffer arguments; returns the symbol the runtime will look up.
pub fn prepare(
    runtime: RuntimeKind,
    dir: &Path,
    built: &Artifacts,
    target: NpuVersion,
    triton_name: &str,
    buffers: usize,
) -> Result<String, DriverError> {
    let kernel = kernel_symbol(built, triton_name);
    registry::backend(runtime)?.prepare(&Build {
        dir: dir.to_owned(),
        target,
        format: built.format(),
        kernel: kernel.clone(),
        buffers,
    })?;
    Ok(kernel)
}

/// A compiled kernel as it sits in a cache entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    pub dir: PathBuf,
    pub format: OutputFormat,
    /// The symbol the runtime looks up.
    pub symbol: String,
}

impl Compiled {
    /// Reads what a finished build left in `dir`; anything missing is an error (the cache
    /// verified the files it lists, so this catches a build that wrote too little).
    pub fn read(
        dir: &Path,
        format: OutputFormat,
        runtime: RuntimeKind,
        triton_name: &str,
    ) -> Result<Compiled, DriverError> {
        let need = |name: &str| -> Result<PathBuf, DriverError> {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(DriverError::Incomplete {
                    dir: dir.to_owned(),
                    what: name.to_owned(),
                })
            }
        };
        let symbol = match format {
            OutputFormat::Elf => {
                need(ELF)?;
                let name = std::fs::read_to_string(need(ELF_KERNEL_NAME)?).map_err(|_| {
                    DriverError::Incomplete {
                        dir: dir.to_owned(),
                        what: ELF_KERNEL_NAME.into(),
                    }
                })?;
                name.trim().to_owned()
            }
            OutputFormat::Xclbin => {
                need(XCLBIN)?;
                need(INSTS)?;
                triton_name.to_owned()
            }
            OutputFormat::Pdi => {
                need(PDI)?;
                need(INSTS)?;
                triton_name.to_owned()
            }
        };
        for file in registry::backend(runtime)?.prepared_files() {
            need(file)?;
        }
        Ok(Compiled {
            dir: dir.to_owned(),
            format,
            symbol,
        })
    }

    /// What `runtime` loads (refused, with the format rules' message, when it does not load
    /// this format).
    pub fn artifact(&self, runtime: RuntimeKind) -> Result<Artifact, DriverError> {
        let backend: &dyn Backend = registry::backend(runtime)?;
        Ok(npu_runtime::backend::artifact(
            backend,
            &self.dir,
            self.format,
            &self.symbol,
        )?)
    }
}
