//! Running external tools, for every part of triton-npu that starts one: `triton-shared-opt`,
//! `air-opt`, `aircc`, the `--version` probes, `xrt-smi`, the example scripts of
//! `triton-npu test-examples`.
//!
//! Each run ([`ToolCommand`]):
//!
//! * has a **finite timeout** (the constructor takes it; each caller documents its default);
//! * runs in a **process group of its own**, killed as a whole (SIGKILL) when the tool exits
//!   (helpers it left behind), when the timeout passes, and when the caller is
//!   **interrupted** ([`interrupt`]: Ctrl-C, SIGTERM);
//! * dies with its caller: a watchdog kills the group even when the caller is killed by
//!   SIGKILL, and the tool itself gets `PR_SET_PDEATHSIG` ([`group`] explains how);
//! * logs its command line at debug level (`tracing`), and reports failures with that command
//!   line, the exit status or signal, and the **tail of its output** ([`RunError`]);
//! * fails to start with a **clear error** ([`StartError`]): not found, missing `#!`
//!   interpreter, not executable, not a program for this machine, or a resource limit reached
//!   (errno, the limit and its value, what to do).
//!
//! Programs are never looked up through relative `PATH` entries ([`lookup`]).
//!
//! This crate depends on no other crate of the workspace.
//!
//! ```no_run
//! use std::time::Duration;
//! use npu_process::{Output, Quiet, ToolCommand};
//!
//! let finished = ToolCommand::new("xrt-smi", "/opt/xilinx/xrt/bin/xrt-smi", Duration::from_secs(20))
//!     .arg("examine")
//!     .output(Output::Capture)
//!     .run(&mut Quiet)?;
//! println!("{}", finished.text());
//! # Ok::<(), npu_process::RunError>(())
//! ```

pub mod group;
pub mod interrupt;
pub mod lookup;
mod run;
mod start;
pub mod text;

pub use interrupt::Interrupted;
pub use run::{
    CAPTURE_LIMIT, Echo, Failure, Finished, Observer, Output, Quiet, RunError, TAIL_LINES,
    ToolCommand, tool_time_on_this_thread,
};
pub use start::{
    Exhaustion, StartError, StartProblem, describe_io, exhaustion, set_open_file_limit,
};
