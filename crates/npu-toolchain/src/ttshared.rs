//! Triton's `ttsharedir` stage: TTIR → Linalg with `triton-shared-opt`, run like every other
//! compile tool (private work directory, `AMD_TRITON_NPU_COMPILE_TIMEOUT`, process group,
//! interruption, kept log on failure). Python's compiler stage calls it through the native
//! module.

use std::ffi::OsString;
use std::path::Path;

use npu_target::Config;

use crate::compile::Job;
use crate::discovery::Tool;
use crate::error::{Result, ToolchainError};

/// The TTIR, in the work directory.
pub const INPUT: &str = "tt.mlir";
/// triton-shared-opt's output, in the work directory.
pub const OUTPUT: &str = "ttshared.mlir";
const LOG: &str = "triton-shared-opt.log";
const STEP: &str = "triton-shared-opt";

/// `<input> --triton-to-linalg-experimental --mlir-print-debuginfo -o <output>`, upstream's
/// command line.
pub fn command_line(input: &Path, output: &Path) -> Vec<OsString> {
    vec![
        input.into(),
        "--triton-to-linalg-experimental".into(),
        "--mlir-print-debuginfo".into(),
        "-o".into(),
        output.into(),
    ]
}

/// Runs `tool` (see [`crate::discovery::find_triton_shared_opt`]) on the TTIR of `kernel` and
/// returns the Linalg module it wrote.
pub fn triton_to_linalg(config: &Config, tool: &Tool, kernel: &str, ttir: &str) -> Result<Vec<u8>> {
    let kernel = if kernel.trim().is_empty() {
        "kernel"
    } else {
        kernel
    };
    let mut job = Job::new(config, kernel, None)?;
    let result = (|| {
        let input = job.dir.write(INPUT, ttir.as_bytes())?;
        let output = job.dir.path().join(OUTPUT);
        job.run_tool(tool, STEP, &command_line(&input, &output), LOG, Some(INPUT))?;
        if !output.is_file() {
            return Err(job.bad_output(STEP, &output, "the output file was not written", LOG));
        }
        job.dir.keep_copy(OUTPUT);
        std::fs::read(&output).map_err(|e| ToolchainError::io("read", &output, e))
    })();
    job.progress.finish(result.is_ok());
    result
}
