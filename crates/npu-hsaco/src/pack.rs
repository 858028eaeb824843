//! Packing: from in-memory kernels to hsaco bytes, and from input files to an hsaco file.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::arch::Arch;
use crate::check::check_bytes;
use crate::container;
use crate::error::{ContainerError, Error, Result, Rule, Violation};
use crate::full_elf::{ExternalVariable, kernels_from_full_elf};
use crate::section::{Kernel, build_section};
use crate::spec::KernelSource;
use crate::xclbin;

/// Packs `kernels` as `arch`'s section into `existing` (or a new container), refusing anything
/// [`crate::check()`] refuses for an agent of `arch` with the most columns such agents have.
/// No file is touched.
pub fn pack(existing: Option<&[u8]>, arch: Arch, kernels: &[Kernel<'_>]) -> Result<Vec<u8>> {
    let section = build_section(arch, kernels)?;
    let bytes = container::with_section(existing, arch, &section)?;
    loadable(&bytes, arch)?;
    Ok(bytes)
}

/// Refuses a packed file the loader check refuses. The section itself was checked when it was
/// built, so what remains are faults of the existing file it went into (a section ROCr's ELF
/// reader crashes on, a broken program header table, ...), which the packer keeps as they are.
fn loadable(bytes: &[u8], arch: Arch) -> Result<()> {
    match check_bytes(bytes, arch, arch.default_agent_columns()).verdict {
        Ok(_) => Ok(()),
        Err(r) if r.violation.kernel.is_some() => Err(Error::Refused(r.violation)),
        Err(r) => Err(ContainerError::NotLoadable(r.violation.rule).into()),
    }
}

/// The input files of a set of kernel sources, each read once.
#[derive(Debug, Default)]
pub struct Inputs {
    files: HashMap<PathBuf, Vec<u8>>,
}

impl Inputs {
    /// Reads every file `sources` name.
    pub fn read(sources: &[KernelSource]) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        for source in sources {
            let paths: Vec<&PathBuf> = match source {
                KernelSource::PdiInsts { insts, pdi, .. } => {
                    std::iter::once(insts).chain(pdi).collect()
                }
                KernelSource::Xclbin { xclbin, insts, .. } => vec![xclbin, insts],
                KernelSource::FullElf { path, .. } => vec![path],
            };
            for path in paths {
                if !inputs.files.contains_key(path) {
                    let bytes = fs::read(path).map_err(|source| Error::Io {
                        path: path.clone(),
                        source,
                    })?;
                    inputs.files.insert(path.clone(), bytes);
                }
            }
        }
        Ok(inputs)
    }

    fn get(&self, path: &Path) -> &[u8] {
        self.files
            .get(path)
            .map(Vec::as_slice)
            .expect("Inputs::read read every path")
    }
}

/// A kernel to pack, with the external variables its control code needs (FullElf only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedKernel<'a> {
    /// The table entry.
    pub kernel: Kernel<'a>,
    /// Symbols the runtime must define before loading (e.g. `scratch-pad-ctrl`).
    pub external_variables: Vec<ExternalVariable>,
}

/// Turns sources into kernels in table order, deriving PDIs, column counts and kernarg sizes
/// from xclbins and full ELFs; a user value that disagrees with the file is refused.
pub fn resolve<'a>(
    inputs: &'a Inputs,
    sources: &[KernelSource],
) -> Result<Vec<ResolvedKernel<'a>>> {
    let mut out = Vec::new();
    for source in sources {
        match source {
            KernelSource::PdiInsts {
                name,
                insts,
                pdi,
                kernarg_size,
                num_cols,
            } => {
                let kernel = Kernel {
                    name: name.clone().into(),
                    kind: crate::section::KernelKind::PdiInsts,
                    insts: inputs.get(insts).into(),
                    pdi: pdi.as_ref().map(|p| inputs.get(p).into()),
                    kernarg_size: kernarg_size.unwrap_or(0),
                    num_cols: num_cols.unwrap_or(1),
                };
                out.push(ResolvedKernel {
                    kernel,
                    external_variables: Vec::new(),
                });
            }
            KernelSource::Xclbin {
                name,
                xclbin,
                insts,
                kernarg_size,
                num_cols,
            } => {
                let partition = xclbin::partition(inputs.get(xclbin))
                    .map_err(|e| Error::from(e).in_file(xclbin))?;
                if let Some(given) = num_cols.filter(|&c| c != partition.num_cols) {
                    let rule = Rule::ColumnsMismatch {
                        given,
                        derived: partition.num_cols,
                        source_kind: "xclbin's AIE_PARTITION column_width",
                    };
                    return Err(
                        Error::from(Violation::new(rule).kernel(name.as_str())).in_file(xclbin)
                    );
                }
                let kernel = Kernel::pdi_insts(
                    name.clone(),
                    inputs.get(insts),
                    partition.pdi,
                    kernarg_size.unwrap_or(0),
                    partition.num_cols,
                );
                out.push(ResolvedKernel {
                    kernel,
                    external_variables: Vec::new(),
                });
            }
            KernelSource::FullElf {
                path,
                kernarg_size,
                num_cols,
            } => {
                let kernels =
                    kernels_from_full_elf(inputs.get(path), None).map_err(|e| e.in_file(path))?;
                for k in kernels {
                    let kernel = k
                        .to_kernel(*kernarg_size, *num_cols)
                        .map_err(|e| e.in_file(path))?;
                    out.push(ResolvedKernel {
                        kernel,
                        external_variables: k.info.external_variables,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// What [`pack_file`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackOutcome {
    /// Kernel names in table order with their external variables.
    pub kernels: Vec<(String, Vec<ExternalVariable>)>,
    /// Size of the AIE section.
    pub section_size: usize,
    /// Size of the file written.
    pub file_size: usize,
}

/// Packs `sources` as `arch`'s section into the hsaco at `path` (created if missing, otherwise
/// its other sections are kept). Nothing is written unless everything succeeds, and the file is
/// replaced atomically.
pub fn pack_file(path: &Path, arch: Arch, sources: &[KernelSource]) -> Result<PackOutcome> {
    let inputs = Inputs::read(sources)?;
    let resolved = resolve(&inputs, sources)?;
    let kernels: Vec<Kernel<'_>> = resolved.iter().map(|r| r.kernel.clone()).collect();
    let section = build_section(arch, &kernels)?;
    let existing = match fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(Error::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let bytes = container::with_section(existing.as_deref(), arch, &section)
        .and_then(|bytes| loadable(&bytes, arch).map(|()| bytes))
        .map_err(|e| e.in_file(path))?;
    write_atomically(path, &bytes)?;
    Ok(PackOutcome {
        kernels: resolved
            .into_iter()
            .map(|r| (r.kernel.name.into_owned(), r.external_variables))
            .collect(),
        section_size: section.len(),
        file_size: bytes.len(),
    })
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so a
/// failure leaves neither a partial file nor a changed one. An existing file's permissions are
/// kept; a new file gets `0666` less the umask.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut builder = tempfile::Builder::new();
    let prefix = format!(".{file_name}.");
    builder.prefix(&prefix).suffix(".tmp");
    let existing = fs::metadata(path).ok().map(|m| m.permissions());
    #[cfg(unix)]
    let new_permissions = <fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o666);
    #[cfg(unix)]
    if existing.is_none() {
        builder.permissions(new_permissions);
    }
    let mut tmp = builder.tempfile_in(dir).map_err(io)?;
    tmp.write_all(bytes).map_err(io)?;
    if let Some(permissions) = existing {
        tmp.as_file().set_permissions(permissions).map_err(io)?;
    }
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}
