//! The one build pipeline: how a kernel or a chain becomes the files a runtime loads.
//!
//! A first launch ([`crate::kernel::prepare`]), `triton-npu compile` and chains
//! ([`crate::chain`]) all run it, so they agree on every decision:
//!
//! * the target: `AMD_TRITON_NPU_TARGET`, else the registered runtimes' probes in upstream's
//!   order (the HSA agent under `hsa`, the XRT device, `xrt-smi examine`), memoised per
//!   process;
//! * the output format: the configured one checked against the target and the runtime's
//!   declaration, else the runtime's default for the target;
//! * the toolchain (found once per pipeline) and the compile (`air-opt`, `aircc`);
//! * the runtime's preparation of a build (`elf_kernel_name.txt`; HSA packs `kernel.hsaco`);
//! * what a cached build depends on (target, format, runtime, bf16 emulation, the tools'
//!   identities).
//!
//! A kernel's Linalg is read once, into a [`Kernel`], when it enters the pipeline.

use std::path::{Path, PathBuf};

use npu_cache::{Cache, Entry, Inputs, TOOL_INPUT_PREFIX};
use npu_mlir::KernelIo;
use npu_target::target::{self, TargetProbe};
use npu_target::{Config, NpuVersion, OutputFormat};
use npu_toolchain::{
    AirccOptions, Artifacts, CompileOutput, CompileRequest, Compiler, Linalg, SearchPaths,
    Toolchain,
};

use crate::artifacts;
use crate::error::DriverError;
use crate::runtimes::{self, Host};

/// A kernel's Linalg (triton-shared's output), read once: its text and the facts the
/// pipeline and the dispatches need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// The kernel function's name.
    pub name: String,
    /// The text and the facts the schedule is chosen by (npu-transform's summary).
    pub linalg: Linalg,
    /// Its buffer parameters: which it writes, their element sizes.
    pub io: KernelIo,
    pub grid: [u32; 3],
    /// Upstream's `actual-sizes` hint (see `npu_toolchain::lower::actual_sizes`).
    pub actual_sizes: Option<[u64; 3]>,
}

impl Kernel {
    /// Reads `ttsharedir`: the kernel is the function `name` when the text defines it with a
    /// body, else (Triton's case: the module holds one kernel) its first function with a body.
    pub fn read(
        name: &str,
        ttsharedir: String,
        grid: [u32; 3],
        actual_sizes: Option<[u64; 3]>,
    ) -> Result<Kernel, DriverError> {
        Kernel::read_as(name, false, ttsharedir, grid, actual_sizes)
    }

    /// Like [`Kernel::read`], but the text must define `name` with a body (what a user names
    /// on a command line); otherwise the error lists the functions it does define.
    pub fn read_named(
        name: &str,
        ttsharedir: String,
        grid: [u32; 3],
        actual_sizes: Option<[u64; 3]>,
    ) -> Result<Kernel, DriverError> {
        Kernel::read_as(name, true, ttsharedir, grid, actual_sizes)
    }

    fn read_as(
        name: &str,
        exact: bool,
        ttsharedir: String,
        grid: [u32; 3],
        actual_sizes: Option<[u64; 3]>,
    ) -> Result<Kernel, DriverError> {
        let (linalg, io) = Linalg::read_with(ttsharedir, |module| {
            let named = module.function(name).filter(|f| f.body().is_some());
            match named.or_else(|| if exact { None } else { module.kernel() }) {
                Some(func) => Ok(func.kernel_io()),
                None if exact => Err(DriverError::UnknownKernel {
                    name: name.to_owned(),
                    defined: module
                        .functions()
                        .filter(|f| f.body().is_some())
                        .map(|f| f.name().to_owned())
                        .collect(),
                }),
                None => Err(DriverError::NoKernel),
            }
        })?;
        Ok(Kernel {
            name: name.to_owned(),
            io: io?,
            linalg,
            grid,
            actual_sizes,
        })
    }

    /// The number of buffer arguments the kernel takes.
    pub fn buffers(&self) -> usize {
        self.io.written.len()
    }
}

/// A kernel built by [`Pipeline::build_kernel`].
#[derive(Debug, Clone, PartialEq)]
pub struct KernelBuild {
    pub output: CompileOutput,
    /// The symbol the runtime looks up (a full ELF's `main:<instance>`, else the kernel's name).
    pub symbol: String,
    /// The files the runtime's preparation wrote (HSA: `kernel.hsaco`).
    pub prepared: Vec<PathBuf>,
}

/// The decisions every build of one configuration shares (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct Pipeline<'a> {
    pub config: &'a Config,
    pub host: &'a Host,
    pub target: NpuVersion,
    pub format: OutputFormat,
}

impl<'a> Pipeline<'a> {
    /// Detects the target and resolves the configured output format.
    pub fn new(config: &'a Config, host: &'a Host) -> Result<Pipeline<'a>, DriverError> {
        Pipeline::with_format(config, host, None)
    }

    /// Like [`Pipeline::new`], with `format` (when given) in place of the configured one.
    pub fn with_format(
        config: &'a Config,
        host: &'a Host,
        format: Option<OutputFormat>,
    ) -> Result<Pipeline<'a>, DriverError> {
        let target = detect_target(config, host)?;
        let format =
            OutputFormat::resolve(format.or(config.output_format), config.runtime, target)?;
        Ok(Pipeline {
            config,
            host,
            target,
            format,
        })
    }

    /// Where discovery looks besides the configured locations (the Python installation).
    pub fn search_paths(&self) -> SearchPaths {
        SearchPaths {
            site_packages: self.host.site_packages.clone(),
            triton_dir: self.host.triton_dir.clone(),
        }
    }

    pub fn toolchain(&self) -> Result<Toolchain, DriverError> {
        Ok(Toolchain::discover(self.config, &self.search_paths())?)
    }

    /// Compiles `kernel` into `dir` (created if missing) and prepares the result for the
    /// runtime: what a first launch caches and `triton-npu compile -o` writes.
    pub fn build_kernel(&self, kernel: &Kernel, dir: &Path) -> Result<KernelBuild, DriverError> {
        let toolchain = self.toolchain()?;
        let output = Compiler::new(&toolchain, self.config).compile(&CompileRequest {
            kernel: kernel.name.clone(),
            linalg: kernel.linalg.clone(),
            grid: kernel.grid,
            actual_sizes: kernel.actual_sizes,
            target: self.target,
            format: self.format,
            options: AirccOptions::default(),
            out_dir: dir.to_owned(),
            debug_tag: None,
        })?;
        let (symbol, prepared) =
            self.prepare_for_runtime(dir, &output.artifacts, &kernel.name, kernel.buffers())?;
        Ok(KernelBuild {
            output,
            symbol,
            prepared,
        })
    }

    /// What the runtime loads besides aircc's outputs in `dir`: `elf_kernel_name.txt` for a
    /// full ELF, then the runtime's own preparation (HSA: `kernel.hsaco` with `buffers`
    /// kernel arguments). Returns the symbol the runtime looks up and the files prepared.
    pub fn prepare_for_runtime(
        &self,
        dir: &Path,
        built: &Artifacts,
        name: &str,
        buffers: usize,
    ) -> Result<(String, Vec<PathBuf>), DriverError> {
        let symbol = artifacts::kernel_symbol(built, name);
        if matches!(built, Artifacts::Elf { .. }) {
            write(&dir.join(artifacts::ELF_KERNEL_NAME), symbol.as_bytes())?;
        }
        artifacts::prepare(self.config.runtime, dir, built, self.target, name, buffers)?;
        let prepared = npu_runtime::registry::backend(self.config.runtime)?
            .prepared_files()
            .iter()
            .map(|f| dir.join(f))
            .collect();
        Ok((symbol, prepared))
    }

    /// Adds what every build depends on besides its own sources to a build's cache inputs:
    /// target, format, runtime, bf16 emulation and the tools' identities (no tool runs to
    /// ask its version: discovery candidates are identified by path, size and modification
    /// time; the manifest records the versions the build saw).
    pub fn cache_inputs(&self, mut inputs: Inputs) -> Inputs {
        inputs = inputs
            .text("target", self.target.as_str())
            .text("format", self.format.as_str())
            .text("runtime", self.config.runtime.as_str())
            .text(
                "bf16_emulation",
                if self.config.bf16_emulation { "1" } else { "0" },
            );
        let search = self.search_paths();
        for (tool, paths) in npu_toolchain::discovery::candidate_files(self.config, &search) {
            let stamp = npu_toolchain::discovery::file_stamps(paths.iter().map(PathBuf::as_path));
            inputs = inputs.text(format!("{TOOL_INPUT_PREFIX}{tool}"), stamp);
        }
        inputs
    }

    /// The cache entry for `inputs`, built by `build` (in a private staging directory) unless
    /// a complete entry exists; across processes the build runs once.
    pub fn cached(
        &self,
        inputs: &Inputs,
        build: impl FnOnce(&Path) -> Result<(), DriverError>,
    ) -> Result<Entry, DriverError> {
        let cache = Cache::shared(self.config)?;
        cache
            .get_or_build(inputs, build)
            .map_err(|e| match e.into_build_error() {
                Ok(build_error) => build_error,
                Err(cache_error) => DriverError::Cache(cache_error),
            })
    }
}

/// Detects the target for this configuration (memoised per process): the configured one, else
/// the registered runtimes' probes.
pub fn detect_target(config: &Config, host: &Host) -> Result<NpuVersion, DriverError> {
    let probes = runtimes::probes(config, host);
    let refs: Vec<&dyn TargetProbe> = probes.iter().map(|p| p.as_ref()).collect();
    Ok(target::detect_memoised(config, &refs)?.target)
}

/// The contents of a transform script as a cache input (`default` for our own schedules),
/// with the transform library's digest: includes expand from the library, and the built-in
/// schedules are built on it.
pub fn transform_script_input(path: Option<&Path>) -> Result<Vec<u8>, DriverError> {
    let mut input = match path {
        Some(path) => std::fs::read(path).map_err(|source| DriverError::TransformScript {
            path: path.to_owned(),
            cwd: std::env::current_dir().unwrap_or_default(),
            source,
        })?,
        None => b"default".to_vec(),
    };
    input.extend_from_slice(b"\ntransform library ");
    input.extend_from_slice(npu_toolchain::npu_transform::library::digest().as_bytes());
    Ok(input)
}

pub(crate) fn write(path: &Path, bytes: &[u8]) -> Result<(), DriverError> {
    std::fs::write(path, bytes).map_err(|e| DriverError::Incomplete {
        dir: path.parent().map(PathBuf::from).unwrap_or_default(),
        what: format!("{} (cannot write it: {e})", path.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_KERNELS: &str = "module {\n  func.func @add(%arg0: memref<*xf32> {tt.divisibility = 16 : i32}, %arg1: memref<*xbf16>, %arg2: i32) {\n    return\n  }\n  func.func @other() {\n  }\n  func.func private @decl(i32)\n}";

    #[test]
    fn a_named_kernel_must_be_defined_with_a_body() {
        let read = |name: &str| Kernel::read_named(name, TWO_KERNELS.to_owned(), [1, 1, 1], None);
        let add = read("add").unwrap();
        assert_eq!(add.name, "add");
        assert_eq!(add.buffers(), 2);
        assert_eq!(add.linalg.summary().kernel.as_deref(), Some("add"));
        // A declaration is no kernel.
        assert!(matches!(
            read("decl"),
            Err(DriverError::UnknownKernel { .. })
        ));
        let e = read("ad").unwrap_err().to_string();
        assert!(
            e.contains("no function @ad") && e.contains("it defines: add, other"),
            "{e}"
        );
    }

    #[test]
    fn triton_kernels_fall_back_to_the_first_function_with_a_body() {
        let k = Kernel::read("whatever", TWO_KERNELS.to_owned(), [2, 1, 1], None).unwrap();
        assert_eq!(
            (k.name.as_str(), k.buffers(), k.grid),
            ("whatever", 2, [2, 1, 1])
        );
        let e = Kernel::read("k", "module {\n}".to_owned(), [1, 1, 1], None).unwrap_err();
        assert!(matches!(e, DriverError::NoKernel), "{e}");
        let e = Kernel::read("k", "module {\n  func.func @k(".to_owned(), [1, 1, 1], None);
        assert!(matches!(e, Err(DriverError::Ir(_))), "{e:?}");
    }
}
