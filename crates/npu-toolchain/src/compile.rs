//! One compile: Linalg → AIR (`air-opt`) → NPU binaries (`aircc`), in a private work dir.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use npu_target::{Config, NpuVersion, OutputFormat};
use npu_transform::kernel::Linalg;
use npu_transform::{Schedule, ScheduleKind};

use crate::aircc::{self, AirccOptions, Artifacts};
use npu_process::{Echo, Output, RunError, ToolCommand};

use crate::discovery::{Tool, Toolchain};
use crate::error::{Result, TAIL_LINES, ToolFailure, ToolchainError};
use crate::lower;
use crate::progress::Progress;
use crate::workdir::WorkDir;

/// Lowering triton-shared's Linalg to AIR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowerRequest {
    /// The kernel's name (for messages and the debug directory).
    pub kernel: String,
    /// triton-shared's output (the `ttsharedir` stage): Linalg-on-tensors MLIR text, read once.
    pub linalg: Linalg,
    /// The launch grid (x, y, z), each ≥ 1.
    pub grid: [u32; 3],
    /// Upstream's `actual-sizes` padding hint, see [`lower::actual_sizes`].
    pub actual_sizes: Option<[u64; 3]>,
    /// The NPU the built-in schedules tile for (columns, MAC shape).
    pub target: NpuVersion,
    /// Names the debug directory (e.g. a short cache key) instead of a timestamp.
    pub debug_tag: Option<String>,
}

/// Building NPU binaries from an AIR module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildRequest {
    pub kernel: String,
    /// The AIR module (the lowering's output).
    pub air: String,
    pub target: NpuVersion,
    pub format: OutputFormat,
    /// `--bf16-emulation`; [`CompileRequest`] sets it from the configuration and the kernel.
    pub bf16_emulation: bool,
    pub options: AirccOptions,
    /// Receives the artifacts (created if missing; existing files of the same names are
    /// replaced).
    pub out_dir: PathBuf,
    pub debug_tag: Option<String>,
}

/// A whole compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileRequest {
    pub kernel: String,
    /// The kernel's Linalg, read once.
    pub linalg: Linalg,
    pub grid: [u32; 3],
    pub actual_sizes: Option<[u64; 3]>,
    pub target: NpuVersion,
    pub format: OutputFormat,
    pub options: AirccOptions,
    pub out_dir: PathBuf,
    pub debug_tag: Option<String>,
}

/// How long one step took.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepTime {
    pub step: String,
    pub seconds: f64,
}

/// The AIR module and how it was made.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Lowered {
    pub air: String,
    /// The transform script air-opt ran (expanded: what `transform.mlir` holds).
    pub transform: String,
    /// The generated matmul schedule before expansion (`auto_transform.mlir`), when the
    /// automatic matmul schedule was chosen.
    pub auto_transform: Option<String>,
    /// Which script it was: `user script <path>`, `automatic matmul schedule`,
    /// `default elementwise schedule`.
    pub schedule: String,
    pub steps: Vec<StepTime>,
    /// Where the IR was kept, when debugging.
    pub kept_dir: Option<PathBuf>,
}

/// aircc's artifacts, moved into the requested directory.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Built {
    pub artifacts: Artifacts,
    pub bf16_emulation: bool,
    pub steps: Vec<StepTime>,
    pub kept_dir: Option<PathBuf>,
}

/// The result of [`Compiler::compile`]: plain paths and facts, ready for a cache to store.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CompileOutput {
    pub kernel: String,
    pub target: NpuVersion,
    pub format: OutputFormat,
    pub artifacts: Artifacts,
    /// The AIR module aircc compiled, saved as `asm_air_output.mlir` in the output directory.
    pub air_mlir: PathBuf,
    /// The transform script air-opt ran, saved as `transform.mlir` in the output directory.
    pub transform_mlir: PathBuf,
    /// The generated matmul schedule before expansion, saved as `auto_transform.mlir` when
    /// the automatic matmul schedule was chosen.
    pub auto_transform_mlir: Option<PathBuf>,
    /// Which script it was (see [`Lowered::schedule`]).
    pub schedule: String,
    pub bf16_emulation: bool,
    pub steps: Vec<StepTime>,
    pub kept_dir: Option<PathBuf>,
}

/// Runs compiles with one toolchain and configuration. Synchronous; `Send` and `Sync`, so it
/// may run on any thread (e.g. with Python's GIL released), several at a time.
#[derive(Debug, Clone, Copy)]
pub struct Compiler<'a> {
    toolchain: &'a Toolchain,
    config: &'a Config,
}

impl<'a> Compiler<'a> {
    pub fn new(toolchain: &'a Toolchain, config: &'a Config) -> Compiler<'a> {
        Compiler { toolchain, config }
    }

    /// Linalg → AIR. The compile timeout applies to the three `air-opt` runs together.
    pub fn lower(&self, req: &LowerRequest) -> Result<Lowered> {
        check_kernel(&req.kernel)?;
        let mut job = Job::new(self.config, &req.kernel, req.debug_tag.as_deref())?;
        let result = self.lower_in(&mut job, req);
        job.progress.finish(result.is_ok());
        let (air, schedule) = result?;
        Ok(Lowered {
            air,
            transform: schedule.expansion.text,
            auto_transform: auto_transform(&schedule.kind, schedule.generated),
            schedule: schedule.kind.describe(),
            kept_dir: job.dir.kept().map(Path::to_path_buf),
            steps: job.steps,
        })
    }

    /// AIR → NPU binaries in `req.out_dir`.
    pub fn build(&self, req: &BuildRequest) -> Result<Built> {
        check_kernel(&req.kernel)?;
        check_format(req.format, req.target)?;
        let mut job = Job::new(self.config, &req.kernel, req.debug_tag.as_deref())?;
        let result = job
            .dir
            .write(lower::AIR_OUTPUT, req.air.as_bytes())
            .and_then(|_| {
                self.build_in(
                    &mut job,
                    &BuildSpec {
                        target: req.target,
                        format: req.format,
                        bf16_emulation: req.bf16_emulation,
                        options: &req.options,
                        out_dir: &req.out_dir,
                    },
                )
            });
        job.progress.finish(result.is_ok());
        Ok(Built {
            artifacts: result?,
            bf16_emulation: req.bf16_emulation,
            kept_dir: job.dir.kept().map(Path::to_path_buf),
            steps: job.steps,
        })
    }

    /// Linalg → AIR → NPU binaries, in one private work directory and under one timeout.
    /// `--bf16-emulation` is used when the configuration asks for it or the kernel is an f32
    /// matmul (as upstream).
    pub fn compile(&self, req: &CompileRequest) -> Result<CompileOutput> {
        check_kernel(&req.kernel)?;
        check_format(req.format, req.target)?;
        let bf16_emulation = self.config.bf16_emulation || lower::is_f32_matmul(&req.linalg);
        let mut job = Job::new(self.config, &req.kernel, req.debug_tag.as_deref())?;
        let result = (|| -> Result<(Artifacts, PathBuf, Kept)> {
            let (air, schedule) = self.lower_in(
                &mut job,
                &LowerRequest {
                    kernel: req.kernel.clone(),
                    linalg: req.linalg.clone(),
                    grid: req.grid,
                    actual_sizes: req.actual_sizes,
                    target: req.target,
                    debug_tag: None,
                },
            )?;
            let artifacts = self.build_in(
                &mut job,
                &BuildSpec {
                    target: req.target,
                    format: req.format,
                    bf16_emulation,
                    options: &req.options,
                    out_dir: &req.out_dir,
                },
            )?;
            let air_mlir = req.out_dir.join(lower::AIR_OUTPUT);
            std::fs::write(&air_mlir, air)
                .map_err(|e| ToolchainError::io("write", &air_mlir, e))?;
            // The script air-opt ran goes with the artifacts (into the cache entry, or the
            // `-o` folder of `triton-npu compile`).
            let transform_mlir = req.out_dir.join(lower::TRANSFORM_SCRIPT);
            std::fs::write(&transform_mlir, &schedule.expansion.text)
                .map_err(|e| ToolchainError::io("write", &transform_mlir, e))?;
            let auto_transform_mlir = match auto_transform(&schedule.kind, schedule.generated) {
                Some(text) => {
                    let path = req.out_dir.join(lower::AUTO_TRANSFORM_SCRIPT);
                    std::fs::write(&path, text)
                        .map_err(|e| ToolchainError::io("write", &path, e))?;
                    Some(path)
                }
                None => None,
            };
            Ok((
                artifacts,
                air_mlir,
                Kept {
                    transform_mlir,
                    auto_transform_mlir,
                    schedule: schedule.kind.describe(),
                },
            ))
        })();
        job.progress.finish(result.is_ok());
        let (artifacts, air_mlir, kept) = result?;
        Ok(CompileOutput {
            kernel: req.kernel.clone(),
            target: req.target,
            format: req.format,
            artifacts,
            air_mlir,
            transform_mlir: kept.transform_mlir,
            auto_transform_mlir: kept.auto_transform_mlir,
            schedule: kept.schedule,
            bf16_emulation,
            kept_dir: job.dir.kept().map(Path::to_path_buf),
            steps: job.steps,
        })
    }

    /// Chooses the transform script (see [`npu_transform::schedule`]), writes it and runs the
    /// three `air-opt` steps; returns the AIR module and the schedule.
    fn lower_in(&self, job: &mut Job<'_>, req: &LowerRequest) -> Result<(String, Schedule)> {
        if req.grid.contains(&0) {
            return Err(ToolchainError::InvalidRequest(format!(
                "grid {:?} of kernel {} has an empty dimension; every grid size must be ≥ 1",
                req.grid, req.kernel
            )));
        }
        if req.linalg.text().trim().is_empty() {
            return Err(ToolchainError::InvalidRequest(format!(
                "the Linalg module of kernel {} is empty",
                req.kernel
            )));
        }
        let schedule = npu_transform::choose(
            self.config.transform_tiling_script.as_deref(),
            req.linalg.summary(),
            req.target,
        )?;
        tracing::debug!(kernel = %req.kernel, target = %req.target, "transform script: {}", schedule.kind.describe());
        job.dir.write(lower::SOURCE, req.linalg.text().as_bytes())?;
        job.dir
            .write(lower::TRANSFORM_SCRIPT, schedule.script().as_bytes())?;
        if let (ScheduleKind::Matmul, Some(generated)) = (&schedule.kind, &schedule.generated) {
            job.dir
                .write(lower::AUTO_TRANSFORM_SCRIPT, generated.as_bytes())?;
        }
        for step in lower::steps(req.grid, req.actual_sizes) {
            let log = format!("{}.log", step.name.replace(' ', "-"));
            job.run_tool(
                &self.toolchain.air_opt,
                step.name,
                &step.args(),
                &log,
                Some(step.input),
            )?;
            let out = job.dir.path().join(step.output);
            if !out.is_file() {
                return Err(job.bad_output(
                    "air-opt",
                    &out,
                    "the output file was not written",
                    &log,
                ));
            }
            job.dir.keep_copy(step.output);
        }
        let out = job.dir.path().join(lower::AIR_OUTPUT);
        let air = std::fs::read_to_string(&out).map_err(|e| ToolchainError::io("read", &out, e))?;
        Ok((air, schedule))
    }

    /// Runs aircc on `asm_air_output.mlir` in the work directory and moves the artifacts.
    fn build_in(&self, job: &mut Job<'_>, req: &BuildSpec<'_>) -> Result<Artifacts> {
        let project = job.dir.path().to_path_buf();
        let input = project.join(lower::AIR_OUTPUT);
        let args = aircc::command_line(
            req.format,
            req.target,
            &project,
            Some(&self.toolchain.peano.path),
            req.bf16_emulation,
            req.options,
            &input,
        );
        let log = "aircc.log";
        job.run_tool(
            &self.toolchain.aircc,
            "aircc",
            &args,
            log,
            Some(lower::AIR_OUTPUT),
        )?;

        for name in aircc::output_names(req.format) {
            let path = project.join(name);
            if !path.is_file() {
                return Err(job.bad_output(
                    "aircc",
                    &path,
                    "an expected output file is missing",
                    log,
                ));
            }
            job.dir.keep_copy(name);
        }
        let kernel_name = match req.format {
            OutputFormat::Elf => Some(self.elf_kernel_name(job, &project, log)?),
            _ => None,
        };
        std::fs::create_dir_all(req.out_dir)
            .map_err(|e| ToolchainError::io("create the output directory", req.out_dir, e))?;
        let mut moved = Vec::new();
        for name in aircc::output_names(req.format) {
            let to = req.out_dir.join(name);
            move_file(&project.join(name), &to)?;
            moved.push(to);
        }
        let mut moved = moved.into_iter();
        let mut next = || moved.next().unwrap_or_default();
        Ok(match req.format {
            OutputFormat::Elf => Artifacts::Elf {
                elf: next(),
                kernel_name: kernel_name.unwrap_or_default(),
            },
            OutputFormat::Xclbin => Artifacts::Xclbin {
                xclbin: next(),
                insts: next(),
            },
            OutputFormat::Pdi => Artifacts::Pdi {
                pdi: next(),
                insts: next(),
            },
        })
    }

    fn elf_kernel_name(&self, job: &Job<'_>, project: &Path, log: &str) -> Result<String> {
        let candidates = aircc::full_elf_config_candidates(project, project);
        let Some(path) = candidates.iter().find(|p| p.is_file()) else {
            let looked: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
            return Err(job.bad_output(
                "aircc",
                &candidates[1],
                &format!(
                    "{} (which names the kernel to dispatch) was not written; looked at {}",
                    aircc::FULL_ELF_CONFIG,
                    looked.join(" and ")
                ),
                log,
            ));
        };
        if let Ok(relative) = path.strip_prefix(project) {
            job.dir.keep_copy(&relative.to_string_lossy());
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| ToolchainError::io("read", path, e))?;
        aircc::elf_kernel_name(&text).map_err(|reason| {
            job.bad_output(
                "aircc",
                path,
                &format!("{} is malformed: {reason}", aircc::FULL_ELF_CONFIG),
                log,
            )
        })
    }
}

/// The generated matmul schedule, which is kept as `auto_transform.mlir`.
fn auto_transform(kind: &ScheduleKind, generated: Option<String>) -> Option<String> {
    match kind {
        ScheduleKind::Matmul => generated,
        _ => None,
    }
}

/// The transform files a compile keeps beside its artifacts.
struct Kept {
    transform_mlir: PathBuf,
    auto_transform_mlir: Option<PathBuf>,
    schedule: String,
}

/// What aircc is asked for (the AIR module is already in the work directory).
struct BuildSpec<'r> {
    target: NpuVersion,
    format: OutputFormat,
    bf16_emulation: bool,
    options: &'r AirccOptions,
    out_dir: &'r Path,
}

fn check_kernel(kernel: &str) -> Result<()> {
    if kernel.trim().is_empty() {
        return Err(ToolchainError::InvalidRequest(
            "the kernel name is empty".into(),
        ));
    }
    Ok(())
}

fn check_format(format: OutputFormat, target: NpuVersion) -> Result<()> {
    // aircc refuses elf for npu1 only after creating its work dir; say so before running it.
    if format == OutputFormat::Elf && target == NpuVersion::Npu1 {
        return Err(npu_target::FormatError::ElfOnNpu1.into());
    }
    Ok(())
}

/// Moves a file, copying when the two paths are on different file systems.
fn move_file(from: &Path, to: &Path) -> Result<()> {
    if std::fs::rename(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to).map_err(|e| ToolchainError::io("copy an artifact to", to, e))?;
    let _ = std::fs::remove_file(from);
    Ok(())
}

/// The state of one compile: its directory, progress display, deadline and timings.
pub(crate) struct Job<'c> {
    config: &'c Config,
    kernel: String,
    pub(crate) dir: WorkDir,
    pub(crate) progress: Progress,
    deadline: Instant,
    pub(crate) steps: Vec<StepTime>,
}

impl<'c> Job<'c> {
    pub(crate) fn new(config: &'c Config, kernel: &str, tag: Option<&str>) -> Result<Job<'c>> {
        Ok(Job {
            config,
            kernel: kernel.to_owned(),
            dir: WorkDir::new(config, kernel, tag)?,
            progress: Progress::new(kernel),
            deadline: Instant::now() + config.compile_timeout,
            steps: Vec::new(),
        })
    }

    /// Runs a tool in the work directory; a failure keeps the log and the step's input.
    pub(crate) fn run_tool(
        &mut self,
        tool: &Tool,
        step: &str,
        args: &[OsString],
        log_name: &str,
        input_name: Option<&str>,
    ) -> Result<()> {
        self.progress.step(step);
        let log = self.dir.path().join(log_name);
        let started = Instant::now();
        let command = ToolCommand::new(&tool.name, &tool.path, self.config.compile_timeout)
            .timeout_setting(npu_target::config::vars::COMPILE_TIMEOUT)
            .deadline(self.deadline)
            .args(args)
            .cwd(self.dir.path())
            .output(Output::Log(log.clone()));
        let outcome = if self.config.debug {
            command.run(&mut Echo {
                inner: &mut self.progress,
            })
        } else {
            command.run(&mut self.progress)
        };
        self.steps.push(StepTime {
            step: step.to_owned(),
            seconds: started.elapsed().as_secs_f64(),
        });
        self.dir.keep_copy(log_name);
        let (status, timed_out) = match outcome {
            Ok(finished) if finished.success() => return Ok(()),
            Ok(finished) => (npu_process::text::describe_status(&finished.status), false),
            Err(RunError::TimedOut { failure, .. }) => (failure.status, true),
            Err(RunError::Interrupted { cause, .. }) => {
                return Err(ToolchainError::Interrupted {
                    during: format!("the compile of kernel {} (step {step})", self.kernel),
                    cause,
                });
            }
            Err(RunError::Start(e)) => return Err(ToolchainError::Start(e)),
            Err(RunError::Io { what, source, .. }) => {
                return Err(ToolchainError::io(what, &log, source));
            }
            Err(RunError::Failed(f)) => (f.status, false),
        };
        let tail = npu_process::text::tail_lines(&log, TAIL_LINES);
        let kept_log = self.dir.preserve_failure(log_name, input_name);
        Err(ToolchainError::ToolFailed(Box::new(ToolFailure {
            tool: tool.name.clone(),
            step: step.to_owned(),
            kernel: self.kernel.clone(),
            command: command.command_line(),
            status,
            tail,
            log: kept_log,
            timed_out,
        })))
    }

    pub(crate) fn bad_output(
        &self,
        tool: &str,
        path: &Path,
        reason: &str,
        log_name: &str,
    ) -> ToolchainError {
        let log = self.dir.preserve_failure(log_name, None);
        ToolchainError::BadOutput {
            tool: tool.to_owned(),
            path: path.to_path_buf(),
            reason: reason.to_owned(),
            log,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn api_types_cross_threads() {
        assert_send_sync::<Compiler<'static>>();
        assert_send_sync::<CompileRequest>();
        assert_send_sync::<CompileOutput>();
        assert_send_sync::<ToolchainError>();
        assert_send_sync::<Toolchain>();
    }
}
