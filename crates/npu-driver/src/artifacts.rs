//! The files of a compiled kernel inside a cache entry, and packing `kernel.hsaco`.
//!
//! Names are upstream's: `aie.elf` + `elf_kernel_name.txt` (elf), `aie.xclbin` + `insts.bin`
//! (xclbin), `aie.pdi` + `insts.bin` (pdi), and `kernel.hsaco` under the HSA runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use npu_hsaco::Arch;
use npu_runtime::Artifact;
use npu_target::{NpuVersion, OutputFormat, RuntimeKind};
use npu_toolchain::Artifacts;

use crate::error::DriverError;

pub const ELF: &str = "aie.elf";
pub const ELF_KERNEL_NAME: &str = "elf_kernel_name.txt";
pub const XCLBIN: &str = "aie.xclbin";
pub const PDI: &str = "aie.pdi";
pub const INSTS: &str = "insts.bin";
pub const HSACO: &str = "kernel.hsaco";

/// The hsaco section name of a target.
pub fn arch(target: NpuVersion) -> Arch {
    match target {
        NpuVersion::Npu1 => Arch::Aie2,
        NpuVersion::Npu2 => Arch::Aie2p,
    }
}

/// The symbol the runtime looks up: a full ELF's `main:<instance>`, else the Triton name.
pub fn kernel_symbol(artifacts: &Artifacts, triton_name: &str) -> String {
    match artifacts {
        Artifacts::Elf { kernel_name, .. } => kernel_name.clone(),
        _ => triton_name.to_owned(),
    }
}

/// Packs the artifacts into an hsaco (upstream's `_pack_hsaco`), in memory: a full ELF becomes
/// one FullElf kernel named `symbol` (`main:<instance>`), an xclbin + instructions one PdiInsts
/// kernel named after the Triton kernel, with ROCr's kernarg layout of 16 bytes per buffer
/// (an address and a size each).
pub fn pack_hsaco(
    artifacts: &Artifacts,
    target: NpuVersion,
    symbol: &str,
    num_buffers: usize,
) -> Result<Vec<u8>, DriverError> {
    let fail = |reason: String| DriverError::Hsaco {
        kernel: symbol.to_owned(),
        reason,
    };
    let read =
        |p: &Path| std::fs::read(p).map_err(|e| fail(format!("cannot read {}: {e}", p.display())));
    match artifacts {
        Artifacts::Elf { elf, .. } => {
            let bytes = read(elf)?;
            let kernels = npu_hsaco::kernels_from_full_elf(&bytes, Some(&[symbol]))
                .map_err(|e| fail(e.to_string()))?;
            let entries = kernels
                .iter()
                .map(|k| k.to_kernel(None, None))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| fail(e.to_string()))?;
            npu_hsaco::pack::pack(None, arch(target), &entries).map_err(|e| fail(e.to_string()))
        }
        Artifacts::Xclbin { xclbin, insts } => {
            let xclbin_bytes = read(xclbin)?;
            let insts_bytes = read(insts)?;
            let part =
                npu_hsaco::xclbin::partition(&xclbin_bytes).map_err(|e| fail(e.to_string()))?;
            let kernarg = u32::try_from(16 * num_buffers)
                .map_err(|_| fail(format!("{num_buffers} buffers do not fit a kernarg size")))?;
            let entry = npu_hsaco::Kernel::pdi_insts(
                symbol,
                &insts_bytes[..],
                part.pdi,
                kernarg,
                part.num_cols,
            );
            npu_hsaco::pack::pack(None, arch(target), &[entry]).map_err(|e| fail(e.to_string()))
        }
        Artifacts::Pdi { .. } => Err(fail(
            "the pdi format cannot be packed into an hsaco; use elf or xclbin".into(),
        )),
    }
}

/// The external variables (name, size in bytes) the control code relocates against.
fn external_variables(kernels: &[npu_hsaco::FullElfKernel<'_>]) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    for v in kernels.iter().flat_map(|k| k.external_variables()) {
        if !out.iter().any(|(name, _)| *name == v.name) {
            out.push((v.name.clone(), u64::from(v.size)));
        }
    }
    out
}

/// A compiled kernel as it sits in a cache entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    pub dir: PathBuf,
    pub format: OutputFormat,
    /// The symbol the runtime looks up.
    pub symbol: String,
    /// The bytes the HSA runtime loads, exactly as the cache checked them against the entry's
    /// manifest (so nothing can swap the files between the check and the load); `None` for
    /// artifacts that did not come from the cache, which are read from `dir`.
    pub checked: Option<CheckedFiles>,
}

/// Files of a cache entry, as checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckedFiles {
    pub hsaco: Option<Arc<[u8]>>,
    pub elf: Option<Arc<[u8]>>,
}

impl Compiled {
    /// Artifacts found in `dir` (not through the cache): read from disk when loaded.
    pub fn at(dir: PathBuf, format: OutputFormat, symbol: String) -> Compiled {
        Compiled {
            dir,
            format,
            symbol,
            checked: None,
        }
    }

    /// What a finished build left in a cache entry, taken from the bytes the cache checked.
    /// Anything the format needs that the entry lacks is an error (a build that wrote too
    /// little).
    pub fn from_entry(
        entry: &npu_cache::Entry,
        format: OutputFormat,
        runtime: RuntimeKind,
        triton_name: &str,
    ) -> Result<Compiled, DriverError> {
        let dir = entry.dir();
        let need = |name: &str| -> Result<Arc<[u8]>, DriverError> {
            entry.bytes(name).ok_or_else(|| DriverError::Incomplete {
                dir: dir.to_owned(),
                what: name.to_owned(),
            })
        };
        let symbol = match format {
            OutputFormat::Elf => {
                need(ELF)?;
                let name = need(ELF_KERNEL_NAME)?;
                std::str::from_utf8(&name)
                    .map_err(|_| DriverError::Incomplete {
                        dir: dir.to_owned(),
                        what: ELF_KERNEL_NAME.into(),
                    })?
                    .trim()
                    .to_owned()
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
        let hsaco = if runtime == RuntimeKind::Hsa {
            Some(need(HSACO)?)
        } else {
            None
        };
        Ok(Compiled {
            dir: dir.to_owned(),
            format,
            symbol,
            checked: Some(CheckedFiles {
                hsaco,
                elf: entry.bytes(ELF),
            }),
        })
    }

    /// What the runtime loads.
    pub fn artifact(&self, runtime: RuntimeKind) -> Result<Artifact, DriverError> {
        match (runtime, self.format) {
            (RuntimeKind::Hsa, _) => {
                let checked = self.checked.clone().unwrap_or_default();
                let read = |name: &str, checked: Option<Arc<[u8]>>| match checked {
                    Some(bytes) => Ok(bytes),
                    None => {
                        let path = self.dir.join(name);
                        std::fs::read(&path)
                            .map(Arc::from)
                            .map_err(|e| DriverError::Hsaco {
                                kernel: self.symbol.clone(),
                                reason: format!("cannot read {}: {e}", path.display()),
                            })
                    }
                };
                let bytes = read(HSACO, checked.hsaco)?;
                // The variables are read from the packed file's full ELF, so they always
                // match what ROCr will ask for.
                let variables = match self.format {
                    OutputFormat::Elf => {
                        let elf = read(ELF, checked.elf)?;
                        let kernels =
                            npu_hsaco::kernels_from_full_elf(&elf, Some(&[self.symbol.as_str()]))
                                .map_err(|e| DriverError::Hsaco {
                                kernel: self.symbol.clone(),
                                reason: e.to_string(),
                            })?;
                        external_variables(&kernels)
                    }
                    _ => Vec::new(),
                };
                Ok(Artifact::Hsaco {
                    bytes,
                    kernel_name: self.symbol.clone(),
                    variables,
                })
            }
            (RuntimeKind::Xrt, OutputFormat::Elf) => Ok(Artifact::Elf {
                elf: self.dir.join(ELF),
                kernel_name: self.symbol.clone(),
            }),
            (RuntimeKind::Xrt, OutputFormat::Xclbin) => Ok(Artifact::XclbinInsts {
                xclbin: self.dir.join(XCLBIN),
                insts: self.dir.join(INSTS),
            }),
            (RuntimeKind::Xrt, OutputFormat::Pdi) => Err(DriverError::Hsaco {
                kernel: self.symbol.clone(),
                reason: "a pdi build targets an XRT-less consumer; XRT runs elf or xclbin".into(),
            }),
        }
    }
}
