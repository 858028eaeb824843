//! The files of a compiled kernel inside a cache entry, and handing a build to its runtime.
//!
//! Names are upstream's: `aie.elf` + `elf_kernel_name.txt` (elf), `aie.xclbin` + `insts.bin`
//! (xclbin), `aie.pdi` + `insts.bin` (pdi), plus what the runtime's preparation adds
//! (`kernel.hsaco` under HSA). What a runtime prepares and loads is its own business
//! (`npu_runtime::Backend`); this module only finds its backend in the registry.

use std::path::{Path, PathBuf};

use npu_runtime::{Artifact, Backend, Build, BuildFiles, registry};
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
    /// What the runtime loads from: the bytes the cache checked against the entry's manifest
    /// (so nothing can swap a file between the check and the load), or for artifacts that did
    /// not come from the cache, the files in `dir`.
    pub files: BuildFiles,
}

impl Compiled {
    /// Artifacts found in `dir` (not through the cache): read from disk when loaded.
    pub fn at(dir: PathBuf, format: OutputFormat, symbol: String) -> Compiled {
        Compiled {
            files: BuildFiles::on_disk(&dir),
            dir,
            format,
            symbol,
        }
    }

    /// What a finished build left in a cache entry, taken from the bytes the cache checked.
    /// Anything the format or the runtime's preparation needs that the entry lacks is an error
    /// (a build that wrote too little).
    pub fn from_entry(
        entry: &npu_cache::Entry,
        format: OutputFormat,
        runtime: RuntimeKind,
        triton_name: &str,
    ) -> Result<Compiled, DriverError> {
        Compiled::from_entry_in(entry, "", format, runtime, triton_name)
    }

    /// [`Compiled::from_entry`] for a build that sits in the entry's folder `sub` (a chain
    /// compiled op by op keeps each op's build in `op<k>/`); `""` is the entry itself.
    pub fn from_entry_in(
        entry: &npu_cache::Entry,
        sub: &str,
        format: OutputFormat,
        runtime: RuntimeKind,
        triton_name: &str,
    ) -> Result<Compiled, DriverError> {
        let dir = entry.dir().join(sub);
        let dir = dir.as_path();
        let incomplete = |what: &str| DriverError::Incomplete {
            dir: dir.to_owned(),
            what: what.to_owned(),
        };
        let mut names: Vec<&str> = match format {
            OutputFormat::Elf => vec![ELF, ELF_KERNEL_NAME],
            OutputFormat::Xclbin => vec![XCLBIN, INSTS],
            OutputFormat::Pdi => vec![PDI, INSTS],
        };
        names.extend(registry::backend(runtime)?.prepared_files());
        let mut checked = Vec::with_capacity(names.len());
        for name in names {
            let path = if sub.is_empty() {
                name.to_owned()
            } else {
                format!("{sub}/{name}")
            };
            let bytes = entry.bytes(&path).ok_or_else(|| incomplete(name))?;
            checked.push((name.to_owned(), bytes));
        }
        let files = BuildFiles::checked(dir, checked);
        let symbol = match format {
            OutputFormat::Elf => {
                let name = files
                    .read(ELF_KERNEL_NAME)
                    .map_err(|_| incomplete(ELF_KERNEL_NAME))?;
                std::str::from_utf8(&name)
                    .map_err(|_| incomplete(ELF_KERNEL_NAME))?
                    .trim()
                    .to_owned()
            }
            OutputFormat::Xclbin | OutputFormat::Pdi => triton_name.to_owned(),
        };
        Ok(Compiled {
            dir: dir.to_owned(),
            format,
            symbol,
            files,
        })
    }

    /// What `runtime` loads (refused, with the format rules' message, when it does not load
    /// this format).
    pub fn artifact(&self, runtime: RuntimeKind) -> Result<Artifact, DriverError> {
        let backend: &dyn Backend = registry::backend(runtime)?;
        Ok(npu_runtime::backend::artifact(
            backend,
            &self.files,
            self.format,
            &self.symbol,
        )?)
    }
}
