//! First launch of a (kernel, grid): cache lookup or build (through the one build
//! [`Pipeline`]), then load.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use npu_cache::{Inputs, KERNEL_NAME_INPUT};
use npu_mlir::KernelIo;
use npu_runtime::{Program, Runtime};
use npu_target::{Config, NpuVersion, RuntimeKind};

use crate::artifacts::Compiled;
use crate::error::DriverError;
use crate::pipeline::{Kernel, Pipeline, transform_script_input};
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
    /// The cache entry's data directory (`get_npu_cache_dir`).
    ///
    /// The entry itself is not held: once loaded, a kernel needs nothing on disk (ROCr got
    /// the hsaco's bytes; XRT holds the registered xclbin or the opened ELF and the
    /// instructions it read), so an eviction cannot break it, and holding each loaded
    /// kernel's entry open cost one file descriptor per kernel — a process with ~1,000
    /// kernels ran out of them. While it loads, the entry is held (in use, safe from eviction).
    cache_dir: PathBuf,
    pub compiled: Compiled,
    pub target: NpuVersion,
    pub runtime_kind: RuntimeKind,
    pub io: KernelIo,
    /// `None` under compile-only.
    pub loaded: Option<(Program, &'static dyn Runtime)>,
    /// When the kernel was last found or dispatched ([`crate::memo`]'s clock), so that the
    /// table of prepared kernels drops the least recently used one.
    last_used: AtomicU64,
}

impl Prepared {
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// The clock's value at the kernel's last use.
    pub fn last_used(&self) -> u64 {
        self.last_used.load(Ordering::Relaxed)
    }

    /// Records a use now.
    pub fn touch(&self) {
        self.last_used.store(crate::memo::tick(), Ordering::Relaxed);
    }
}

/// The cache inputs of a kernel: everything the artifacts depend on, known *before* lowering
/// (so a warm cache runs no tool at all).
pub fn cache_inputs(pipeline: &Pipeline<'_>, req: &KernelRequest) -> Result<Inputs, DriverError> {
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
            transform_script_input(pipeline.config.transform_tiling_script.as_deref())?,
        );
    Ok(pipeline.cache_inputs(inputs))
}

/// Gets the kernel's artifacts from the cache (building them at most once across processes)
/// and, unless compile-only, loads them into the runtime.
pub fn prepare(config: &Config, host: &Host, req: &KernelRequest) -> Result<Prepared, DriverError> {
    let kernel = Kernel::read(
        &req.name,
        req.ttsharedir.clone(),
        req.grid,
        req.actual_sizes,
    )?;
    let pipeline = Pipeline::new(config, host)?;
    let inputs = cache_inputs(&pipeline, req)?;
    let entry = pipeline.cached(&inputs, |dir| pipeline.build_kernel(&kernel, dir).map(drop))?;
    let mut compiled = Compiled::from_entry(&entry, pipeline.format, config.runtime, &req.name)?;
    let loaded = if config.compile_only {
        None
    } else {
        let runtime = runtimes::runtime(config, host)?;
        let program = runtime.load(&compiled.artifact(config.runtime)?)?;
        Some((program, runtime))
    };
    // Loaded (or, compile-only, built): the entry and its checked bytes are let go.
    compiled.files.release_checked();
    Ok(Prepared {
        cache_dir: entry.dir().to_owned(),
        compiled,
        target: pipeline.target,
        runtime_kind: config.runtime,
        io: kernel.io,
        loaded,
        last_used: AtomicU64::new(crate::memo::tick()),
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
        self.touch();
        let options = npu_runtime::DispatchOptions {
            writeback: Some(&self.io.written),
            timeout,
            element_sizes: self.io.element_sizes.as_deref(),
        };
        Ok(runtime.dispatch(program, args, &options)?)
    }
}
