//! The AIE toolchain as triton-npu drives it.
//!
//! * [`discovery`]: finds `air-opt`, `aircc`, Peano and `triton-shared-opt` through the same
//!   locations upstream uses (taken from [`npu_target::Config`]), records each tool's identity
//!   for cache keys, and reports every place looked when something is missing
//!   ([`discovery::report`] feeds `triton-npu doctor`).
//! * [`lower`]: triton-shared's Linalg → AIR with `air-opt` (upstream's three pass steps, as
//!   command-line pipelines), with the transform script [`npu_transform::choose`] picks (the
//!   configured one, else the automatic matmul schedule, else the default elementwise one),
//!   expanded; it is kept as `transform.mlir` with the artifacts.
//! * [`aircc`]: upstream's aircc command line per output format, and reading
//!   `full_elf_config.json`.
//! * [`Compiler`]: runs a compile in a private work directory (removed afterwards, or by the
//!   next compile when its builder was killed) with a progress line; each tool runs through
//!   `npu-process` (its own process group, killed on timeout, on Ctrl-C/SIGTERM and when the
//!   builder dies), and errors carry the command line, the exit status, the end of the output
//!   and the kept log.
//! * [`ttshared`]: Triton's `ttsharedir` stage (`triton-shared-opt`), run the same way for
//!   Python's compiler stage.
//!
//! Nothing here caches: a compile returns plain paths and facts ([`CompileOutput`]) for the
//! caller to store.
//!
//! ```no_run
//! use npu_toolchain::{AirccOptions, CompileRequest, Compiler, Linalg, SearchPaths, Toolchain};
//! use npu_target::{Config, NpuVersion, OutputFormat};
//!
//! let config = Config::current()?;
//! let toolchain = Toolchain::discover(&config, &SearchPaths::default())?;
//! let out = Compiler::new(&toolchain, &config).compile(&CompileRequest {
//!     kernel: "add_kernel".into(),
//!     linalg: Linalg::read(std::fs::read_to_string("add.ttshared.mlir")?),
//!     grid: [4, 1, 1],
//!     actual_sizes: None,
//!     target: NpuVersion::Npu2,
//!     format: OutputFormat::Elf,
//!     options: AirccOptions::default(),
//!     out_dir: "out".into(),
//!     debug_tag: None,
//! })?;
//! println!("{:?}", out.artifacts);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod aie_tools;
pub mod aircc;
mod compile;
pub mod discovery;
pub mod error;
pub mod lower;
mod progress;
pub mod ttshared;
mod workdir;

pub use aircc::{AirccOptions, Artifacts};
pub use compile::{
    BuildRequest, Built, CompileOutput, CompileRequest, Compiler, LowerRequest, Lowered, StepTime,
};
pub use discovery::{SearchPaths, Tool, ToolIdentity, ToolReport, Toolchain};
pub use error::{Candidate, MissingTool, ToolFailure, ToolchainError};
/// The transform library and schedules (re-exported for the driver and the command line).
pub use npu_transform;
pub use npu_transform::kernel::Linalg;
