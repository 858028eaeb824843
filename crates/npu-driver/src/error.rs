//! The driver's error type: each variant carries the lower layer's message intact.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Config(#[from] npu_target::ConfigError),
    #[error(transparent)]
    Target(#[from] npu_target::TargetError),
    #[error(transparent)]
    Format(#[from] npu_target::FormatError),
    #[error(
        "the transform script {path} (AIR_TRANSFORM_TILING_SCRIPT) cannot be read: {source} \
         (working directory: {cwd}); fix the path (an absolute one, or relative to that \
         directory) or unset the variable to use triton-npu's own schedules"
    )]
    TransformScript {
        path: PathBuf,
        cwd: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Toolchain(#[from] npu_toolchain::ToolchainError),
    #[error(transparent)]
    Cache(#[from] npu_cache::CacheError),
    #[error("cannot pack kernel.hsaco for kernel {kernel:?}: {reason}")]
    Hsaco { kernel: String, reason: String },
    #[error("the cached entry {dir} lacks {what}; clear it with `triton-npu cache clear --yes`")]
    Incomplete { dir: PathBuf, what: String },
    #[error(transparent)]
    Runtime(#[from] npu_runtime::RuntimeError),
    #[error("the kernel's Linalg text has no func.func; cannot find the kernel")]
    NoKernel,
    #[error("the kernel's Linalg text cannot be read: {0}")]
    Ir(#[from] npu_mlir::ParseError),
    #[error("kernel {kernel:?} takes {expected} tensor arguments, the launch passed {got}")]
    ArgumentCount {
        kernel: String,
        expected: usize,
        got: usize,
    },
    #[error("compile-only mode (AMD_TRITON_NPU_COMPILE_ONLY=1): kernels are built, never run")]
    CompileOnly,
    /// A chain was given arguments it cannot use (Python: `ValueError`).
    #[error("chain {chain:?}: {reason}")]
    ChainInput { chain: String, reason: String },
    /// One op's IR cannot be stitched into the chain's module.
    #[error("chain {chain:?}: cannot stitch op {op} ({kernel}) into one module: {reason}")]
    ChainStitch {
        chain: String,
        op: usize,
        kernel: String,
        reason: String,
    },
    #[error(
        "chain {chain:?} targets {target}, but chains need npu2 (AIE2P: Strix, Strix Halo, \
         Krackan): the whole chain is one full ELF that reloads the array between launches \
         (load_pdi), which npu1 cannot run; launch the kernels one by one on npu1, or set \
         AMD_TRITON_NPU_TARGET=npu2 to build for an npu2"
    )]
    ChainTarget {
        chain: String,
        target: npu_target::NpuVersion,
    },
}
