//! First launch of a (kernel, grid): cache lookup or build, then load.

use std::path::{Path, PathBuf};

use npu_cache::{Cache, Entry, Inputs, KERNEL_NAME_INPUT, TOOL_INPUT_PREFIX};
use npu_mlir::{KernelIo, Module};
use npu_runtime::{Program, Runtime};
use npu_target::target::{self, TargetProbe};
use npu_target::{Config, NpuVersion, OutputFormat, RuntimeKind};
use npu_toolchain::{AirccOptions, CompileRequest, Compiler, SearchPaths, Toolchain};

use crate::artifacts::{self, Compiled};
use crate::error::DriverError;
use crate::runtimes::{self, Host};

/// What Triton hands the driver for one kernel and grid.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KernelRequest {
    /// The Triton kernel name (`metadata.name`).
    pub name: String,
    /// The `ttsharedir` stage's text.
    pub ttsharedir: String,
    pub grid: [u32; 3],
    /// Upstream's `actual-sizes` hint (see `npu_toolchain::lower::actual_sizes`).
    pub actual_sizes: Option<[u64; 3]>,
}

/// A kernel ready to dispatch (or, compile-only, just built and cached).
pub struct Prepared {
    /// The cache entry's data directory (`get_npu_cache_dir`). Holding the entry keeps it
    /// safe from eviction while this kernel is loaded.
    pub entry: Entry,
    pub compiled: Compiled,
    pub target: NpuVersion,
    pub runtime_kind: RuntimeKind,
    pub io: KernelIo,
    /// `None` under compile-only.
    pub loaded: Option<(Program, &'static dyn Runtime)>,
}

impl Prepared {
    pub fn cache_dir(&self) -> &Path {
        self.entry.dir()
    }
}

/// Detects the target for this configuration (memoised per process).
pub fn detect_target(config: &Config, host: &Host) -> Result<NpuVersion, DriverError> {
    let probes = runtimes::probes(config, host);
    let refs: Vec<&dyn TargetProbe> = probes.iter().map(|p| p.as_ref()).collect();
    Ok(target::detect_memoised(config, &refs)?.target)
}

/// The cache inputs of a kernel: everything the artifacts depend on, known *before* lowering
/// (so a warm cache runs no tool at all). Tools are identified by where they are and their
/// size and modification time (no tool runs to ask its version); the manifest records the
/// versions the build saw.
pub fn cache_inputs(
    config: &Config,
    host: &Host,
    req: &KernelRequest,
    target: NpuVersion,
    format: OutputFormat,
) -> Result<Inputs, DriverError> {
    let inputs = Inputs::new()
        .text(KERNEL_NAME_INPUT, &req.name)
        .text("ttsharedir", &req.ttsharedir)
        .text(
            "grid",
            format!("{},{},{}", req.grid[0], req.grid[1], req.grid[2]),
        )
        .text(
            "actual_sizes",
            req.actual_sizes
                .map(|s| format!("{},{},{}", s[0], s[1], s[2]))
                .unwrap_or_default(),
        )
        .bytes(
            "transform_script",
            transform_script(config.transform_tiling_script.as_deref())?,
        );
    Ok(build_inputs(inputs, config, host, target, format))
}

/// The contents of a transform script as a cache input (`default` for our own schedules),
/// with the transform library's digest: includes expand from the library, and the built-in
/// schedules are built on it.
pub(crate) fn transform_script(path: Option<&Path>) -> Result<Vec<u8>, DriverError> {
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

/// Adds what every build depends on besides its IR: target, format, runtime, bf16 emulation
/// and the tools' identities.
pub(crate) fn build_inputs(
    mut inputs: Inputs,
    config: &Config,
    host: &Host,
    target: NpuVersion,
    format: OutputFormat,
) -> Inputs {
    inputs = inputs
        .text("target", target.as_str())
        .text("format", format.as_str())
        .text("runtime", config.runtime.as_str())
        .text(
            "bf16_emulation",
            if config.bf16_emulation { "1" } else { "0" },
        );
    for (name, stamp) in tool_stamps(config, host) {
        inputs = inputs.text(format!("{TOOL_INPUT_PREFIX}{name}"), stamp);
    }
    inputs
}

/// `path size mtime` of every file that discovery could pick for each tool, in search order.
fn tool_stamps(config: &Config, host: &Host) -> Vec<(&'static str, String)> {
    npu_toolchain::discovery::candidate_files(config, &search_paths(host))
        .into_iter()
        .map(|(tool, paths)| {
            (
                tool,
                npu_toolchain::discovery::file_stamps(paths.iter().map(PathBuf::as_path)),
            )
        })
        .collect()
}

pub(crate) fn search_paths(host: &Host) -> SearchPaths {
    SearchPaths {
        site_packages: host.site_packages.clone(),
        triton_dir: host.triton_dir.clone(),
    }
}

/// Builds the artifacts of `req` into `dir` (a cache staging directory).
fn build(
    config: &Config,
    host: &Host,
    req: &KernelRequest,
    target: NpuVersion,
    format: OutputFormat,
    dir: &Path,
) -> Result<(), DriverError> {
    let toolchain = Toolchain::discover(config, &search_paths(host))?;
    let out = Compiler::new(&toolchain, config).compile(&CompileRequest {
        kernel: req.name.clone(),
        linalg: req.ttsharedir.clone(),
        grid: req.grid,
        actual_sizes: req.actual_sizes,
        target,
        format,
        options: AirccOptions::default(),
        out_dir: dir.to_owned(),
        debug_tag: None,
    })?;
    let buffers = Module::parse(&req.ttsharedir)?
        .kernel_io()
        .map_or(0, |io| io.written.len());
    store_runtime_files(config, dir, &out.artifacts, target, &req.name, buffers)
}

/// Writes what the runtime loads besides aircc's outputs: `elf_kernel_name.txt` (elf), then
/// whatever the configured runtime's preparation adds (HSA: `kernel.hsaco` with `buffers`
/// kernel arguments).
pub(crate) fn store_runtime_files(
    config: &Config,
    dir: &Path,
    built: &npu_toolchain::Artifacts,
    target: NpuVersion,
    triton_name: &str,
    buffers: usize,
) -> Result<(), DriverError> {
    let symbol = artifacts::kernel_symbol(built, triton_name);
    if matches!(built, npu_toolchain::Artifacts::Elf { .. }) {
        write(&dir.join(artifacts::ELF_KERNEL_NAME), symbol.as_bytes())?;
    }
    artifacts::prepare(config.runtime, dir, built, target, triton_name, buffers)?;
    Ok(())
}

/// The cache entry for `inputs`, built by `build` (in a private staging directory) unless a
/// complete entry exists; across processes the build runs once.
pub(crate) fn cached_build(
    config: &Config,
    inputs: &Inputs,
    build: impl FnOnce(&Path) -> Result<(), DriverError>,
) -> Result<Entry, DriverError> {
    let cache = Cache::shared(config)?;
    cache
        .get_or_build(inputs, build)
        .map_err(|e| match e.into_build_error() {
            Ok(build_error) => build_error,
            Err(cache_error) => DriverError::Cache(cache_error),
        })
}

pub(crate) fn write(path: &Path, bytes: &[u8]) -> Result<(), DriverError> {
    std::fs::write(path, bytes).map_err(|e| DriverError::Incomplete {
        dir: path.parent().map(PathBuf::from).unwrap_or_default(),
        what: format!("{} (cannot write it: {e})", path.display()),
    })
}

/// Gets the kernel's artifacts from the cache (building them at most once across processes)
/// and, unless compile-only, loads them into the runtime.
pub fn prepare(config: &Config, host: &Host, req: &KernelRequest) -> Result<Prepared, DriverError> {
    let io = Module::parse(&req.ttsharedir)?
        .kernel_io()
        .ok_or(DriverError::NoKernel)?;
    let target = detect_target(config, host)?;
    let format = OutputFormat::resolve(config.output_format, config.runtime, target)?;
    let inputs = cache_inputs(config, host, req, target, format)?;
    let mut entry = cached_build(config, &inputs, |dir| {
        build(config, host, req, target, format, dir)
    })?;
    let mut compiled = Compiled::from_entry(&entry, format, config.runtime, &req.name)?;
    let loaded = if config.compile_only {
        None
    } else {
        let runtime = runtimes::runtime(config, host)?;
        let program = runtime.load(&compiled.artifact(config.runtime)?)?;
        Some((program, runtime))
    };
    // Loaded: the entry stays in use (safe from eviction) without its bytes in memory.
    entry.release_contents();
    compiled.files.release_checked();
    Ok(Prepared {
        entry,
        compiled,
        target,
        runtime_kind: config.runtime,
        io,
        loaded,
    })
}

impl Prepared {
    /// Runs the loaded kernel over `args` (one per buffer parameter, in order), copying back
    /// only the buffers the kernel writes. The runtime's checks refuse a wrong argument count
    /// (against the kernel's signature) before anything is submitted.
    pub fn dispatch(
        &self,
        args: &[npu_runtime::HostArg],
        timeout: Option<std::time::Duration>,
    ) -> Result<npu_runtime::DispatchReport, DriverError> {
        let Some((program, runtime)) = &self.loaded else {
            return Err(DriverError::CompileOnly);
        };
        let options = npu_runtime::DispatchOptions {
            writeback: Some(&self.io.written),
            timeout,
            element_sizes: self.io.element_sizes.as_deref(),
        };
        Ok(runtime.dispatch(program, args, &options)?)
    }
}
