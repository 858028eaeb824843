//! The error type of this crate. Every message says what failed, with what input, and what to
//! do about it; tool failures carry the command line, the exit status, the end of the output
//! and where the full log was kept.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// One place discovery looked for a tool, and why it was not used (`None` = it was used).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Candidate {
    /// Where the candidate came from, e.g. `MLIR_AIR_INSTALL_DIR` or `PATH`.
    pub origin: String,
    pub path: PathBuf,
    /// Why the candidate was refused; `None` for the one that was chosen.
    pub rejected: Option<String>,
}

/// A tool that discovery could not find.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MissingTool {
    pub tool: String,
    /// Every place looked, in search order.
    pub searched: Vec<Candidate>,
    /// How to install it.
    pub install: String,
    /// A probe of a candidate (`--version`) could not even start because a limit was reached:
    /// the tool may well be there, and the error must say so instead of "not found".
    #[serde(skip)]
    pub exhausted: Option<Box<npu_process::Exhaustion>>,
}

impl fmt::Display for MissingTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(e) = &self.exhausted {
            return write!(
                f,
                "{} cannot be looked for: probing it ran out of a system resource: {e}",
                self.tool
            );
        }
        writeln!(f, "{} was not found. Places looked, in order:", self.tool)?;
        if self.searched.is_empty() {
            writeln!(f, "  (none: no location is configured and PATH is empty)")?;
        }
        for c in &self.searched {
            let why = c.rejected.as_deref().unwrap_or("accepted");
            writeln!(f, "  - {} ({}): {why}", c.path.display(), c.origin)?;
        }
        write!(f, "  To fix: {}", self.install)
    }
}

/// A tool that ran and failed, or was killed after the compile timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    pub tool: String,
    /// The compile step, e.g. `air-opt transform`.
    pub step: String,
    pub kernel: String,
    /// The command line, shell-quoted, as it could be pasted into a terminal (with `cd` to the
    /// working directory first).
    pub command: String,
    /// `exit status 1`, `killed by signal 9`, or the timeout.
    pub status: String,
    /// The last lines of the tool's output (stdout and stderr, interleaved as written).
    pub tail: Vec<String>,
    /// The full output; kept after the private work directory is deleted.
    pub log: PathBuf,
    /// Set when the tool was killed because the compile ran out of time.
    pub timed_out: bool,
}

/// How many lines of a failing tool's output an error shows.
pub const TAIL_LINES: usize = npu_process::TAIL_LINES;

impl fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.timed_out {
            writeln!(
                f,
                "{} (step {}) for kernel {} was killed with its whole process group: {}. Raise \
                 AMD_TRITON_NPU_COMPILE_TIMEOUT (seconds) if the kernel is expected to take \
                 longer, or look at the log for a hang.",
                self.tool, self.step, self.kernel, self.status
            )?;
        } else {
            writeln!(
                f,
                "{} failed (step {}) for kernel {}: {}.",
                self.tool, self.step, self.kernel, self.status
            )?;
        }
        writeln!(f, "command: {}", self.command)?;
        if self.tail.is_empty() {
            writeln!(f, "the tool printed nothing")?;
        } else {
            writeln!(f, "last {} lines of its output:", self.tail.len())?;
            for line in &self.tail {
                writeln!(f, "  | {line}")?;
            }
        }
        write!(f, "full log: {}", self.log.display())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error("{}", missing_text(.0))]
    ToolsMissing(Vec<MissingTool>),

    #[error(
        "the transform script {} (AIR_TRANSFORM_TILING_SCRIPT or npu_config.transform_tiling_script) \
         cannot be read: {source} (working directory: {}). Point the setting at an existing MLIR \
         transform-dialect file (an absolute path, or one relative to that directory), or unset it \
         to use triton-npu's own schedules",
        .path.display(),
        .cwd.display()
    )]
    TransformScript {
        path: PathBuf,
        cwd: PathBuf,
        source: io::Error,
    },

    /// The transform script cannot be turned into what air-opt gets (an unknown
    /// `transform.include`, recursion, bad nesting).
    #[error("{0}")]
    Transform(npu_transform::TransformError),

    #[error("invalid compile request: {0}")]
    InvalidRequest(String),

    #[error(transparent)]
    Format(#[from] npu_target::FormatError),

    #[error("cannot {what} {}: {}", .path.display(), npu_process::describe_io(.source))]
    Io {
        what: String,
        path: PathBuf,
        source: io::Error,
    },

    /// Finding the tools needed a process or file that a limit of the process or the system
    /// did not allow; the tools may be installed all right.
    #[error(
        "{during} ran out of a system resource, so the toolchain cannot be checked (the tools \
         may well be installed): {exhaustion}"
    )]
    Exhausted {
        during: String,
        exhaustion: npu_process::Exhaustion,
    },

    /// A tool could not be started (not found, not executable, a resource limit reached).
    #[error(transparent)]
    Start(Box<npu_process::StartError>),

    /// The caller was interrupted (Ctrl-C, SIGTERM) while a tool ran; the tool's process
    /// group was killed, and nothing of the compile is kept.
    #[error("{during} was {cause}; the tool and every process it started were killed")]
    Interrupted {
        /// What was running, e.g. `the compile of kernel add_kernel (step aircc)`.
        during: String,
        cause: npu_process::Interrupted,
    },

    #[error("{0}")]
    ToolFailed(Box<ToolFailure>),

    #[error(
        "{tool} exited successfully but its output is unusable: {reason} ({}). This is a \
         toolchain problem (a mismatched mlir-air/mlir-aie install?); the tool log is {}",
        .path.display(), .log.display()
    )]
    BadOutput {
        tool: String,
        path: PathBuf,
        reason: String,
        log: PathBuf,
    },
}

impl From<npu_transform::TransformError> for ToolchainError {
    fn from(e: npu_transform::TransformError) -> ToolchainError {
        match e {
            npu_transform::TransformError::ScriptRead { path, cwd, source } => {
                ToolchainError::TransformScript { path, cwd, source }
            }
            other => ToolchainError::Transform(other),
        }
    }
}

fn missing_text(missing: &[MissingTool]) -> String {
    let names: Vec<&str> = missing.iter().map(|m| m.tool.as_str()).collect();
    let mut text = format!(
        "the AIE toolchain is incomplete: {} not found.",
        names.join(", ")
    );
    for m in missing {
        text.push_str("\n\n");
        text.push_str(&m.to_string());
    }
    text
}

impl ToolchainError {
    pub(crate) fn io(what: impl Into<String>, path: impl Into<PathBuf>, source: io::Error) -> Self {
        ToolchainError::Io {
            what: what.into(),
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = ToolchainError> = std::result::Result<T, E>;
