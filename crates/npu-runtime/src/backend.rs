//! The seam every runtime implements: [`Backend`], readable without opening the runtime.
//!
//! A backend says which runtime it is (its [`RuntimeKind`]: name, label, the output formats it
//! loads), how it prepares a finished build for loading (HSA packs `kernel.hsaco`; XRT needs
//! nothing), what it loads from a build, how its process-wide instance opens, which target
//! probes it offers and how `doctor` describes it. The opened instance is a
//! [`crate::Runtime`]: load, dispatch, release. The registry ([`crate::registry`]) lists the
//! backends; adding a runtime is one module implementing both traits plus one registry line.

use std::path::{Path, PathBuf};

use npu_target::{Config, FormatError, NpuVersion, OutputFormat, RuntimeKind, TargetProbe};

use crate::{Artifact, Runtime, RuntimeError};

/// The file names of a build, upstream's: `aie.elf` + `elf_kernel_name.txt` (elf),
/// `aie.xclbin` + `insts.bin` (xclbin), `aie.pdi` + `insts.bin` (pdi).
pub mod files {
    pub const ELF: &str = "aie.elf";
    pub const ELF_KERNEL_NAME: &str = "elf_kernel_name.txt";
    pub const XCLBIN: &str = "aie.xclbin";
    pub const PDI: &str = "aie.pdi";
    pub const INSTS: &str = "insts.bin";
}

/// Facts about the installation that Rust cannot learn by itself (Python passes them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Host {
    /// Python's site-packages dirs: pip-installed tools, ROCr (`rocm-sdk-core`).
    pub site_packages: Vec<PathBuf>,
    /// The installed `triton` package's directory.
    pub triton_dir: Option<PathBuf>,
    /// Directories that may hold our XRT shim `libtriton_npu_xrt.so` (the package's own).
    pub shim_dirs: Vec<PathBuf>,
}

/// A finished build, as a runtime's preparation reads it: aircc's files for `format` in `dir`
/// (named as in [`files`]), where the preparation writes its own files too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    pub dir: PathBuf,
    pub target: NpuVersion,
    pub format: OutputFormat,
    /// The symbol the runtime looks up: a full ELF's `main:<instance>`, else the Triton name.
    pub kernel: String,
    /// The number of buffer arguments the kernel takes.
    pub buffers: usize,
}

impl Build {
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// The files of a finished build as a runtime loads them: the bytes the kernel cache checked
/// against the entry's manifest when there are such (so nothing can swap a file between the
/// check and the load), else the files in the build's directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildFiles {
    dir: PathBuf,
    checked: std::collections::BTreeMap<String, std::sync::Arc<[u8]>>,
}

impl BuildFiles {
    /// A build read from `dir` as it is on disk.
    pub fn on_disk(dir: impl Into<PathBuf>) -> BuildFiles {
        BuildFiles {
            dir: dir.into(),
            checked: Default::default(),
        }
    }

    /// A build in `dir` whose `checked` files are served from these bytes.
    pub fn checked(
        dir: impl Into<PathBuf>,
        checked: impl IntoIterator<Item = (String, std::sync::Arc<[u8]>)>,
    ) -> BuildFiles {
        BuildFiles {
            dir: dir.into(),
            checked: checked.into_iter().collect(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `name` is (for runtimes that load by path).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The bytes of `name`: the checked ones, else the file's.
    pub fn read(&self, name: &str) -> std::io::Result<std::sync::Arc<[u8]>> {
        match self.checked.get(name) {
            Some(bytes) => Ok(bytes.clone()),
            None => std::fs::read(self.path(name)).map(std::sync::Arc::from),
        }
    }

    /// Forgets the checked bytes (once loaded, a program holds what it needs).
    pub fn release_checked(&mut self) {
        self.checked.clear();
    }
}

/// A preparation that failed (the build cannot be loaded by this runtime).
#[derive(Debug, thiserror::Error)]
#[error("cannot prepare kernel {kernel:?} for {runtime}: {reason}")]
pub struct PrepareError {
    /// The runtime's label.
    pub runtime: &'static str,
    pub kernel: String,
    pub reason: String,
}

/// What `doctor` says about a runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// Whether the runtime can run kernels here.
    pub usable: bool,
    /// Where it was found and what device it sees, or why not (one line).
    pub detail: String,
    /// What to do when it is not usable.
    pub fix: String,
}

/// One runtime, as the driver, the command line and `doctor` see it.
pub trait Backend: Send + Sync {
    /// Its name, label and the output formats it loads.
    fn kind(&self) -> RuntimeKind;

    /// The files its preparation writes into a build; a cached build is complete only with
    /// them.
    fn prepared_files(&self) -> &'static [&'static str] {
        &[]
    }

    /// Adds what loading needs to a finished build (in the build's own directory, so a cache
    /// keeps the result and a warm cache prepares nothing).
    fn prepare(&self, build: &Build) -> Result<(), PrepareError> {
        let _ = build;
        Ok(())
    }

    /// What [`Runtime::load`] takes for the build of `kernel` in `files`, in `format` (one
    /// the runtime declares; [`artifact`] checks that first).
    fn artifact(
        &self,
        files: &BuildFiles,
        format: OutputFormat,
        kernel: &str,
    ) -> Result<Artifact, RuntimeError>;

    /// The process's instance, opened on first use. A failed open is not remembered, so a
    /// later call succeeds once the setup is fixed.
    fn open(&self, config: &Config, host: &Host) -> Result<&'static dyn Runtime, RuntimeError>;

    /// The process's instance if [`Backend::open`] has opened it (never opens one).
    fn opened(&self) -> Option<&'static dyn Runtime> {
        None
    }

    /// Target probes this runtime offers, in order; `selected` when it is the configured
    /// runtime (a runtime may probe only then, e.g. to avoid initialising ROCr under XRT).
    fn probes(&self, config: &Config, host: &Host, selected: bool) -> Vec<Box<dyn TargetProbe>> {
        let _ = (config, host, selected);
        Vec::new()
    }

    /// Where the runtime is and what it sees, for `doctor`.
    fn diagnose(&self, config: &Config, host: &Host) -> Diagnosis;
}

/// What `backend` loads for a build, after checking that it declares the build's format (the
/// same refusal the format rules give before compiling).
pub fn artifact(
    backend: &dyn Backend,
    files: &BuildFiles,
    format: OutputFormat,
    kernel: &str,
) -> Result<Artifact, RuntimeError> {
    let runtime = backend.kind();
    if !runtime.accepts(format) {
        return Err(RuntimeError::Load {
            kernel: kernel.to_owned(),
            reason: FormatError::NotAccepted {
                format,
                runtime,
                instead: None,
            }
            .to_string(),
        });
    }
    backend.artifact(files, format, kernel)
}
