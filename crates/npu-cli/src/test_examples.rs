//! `triton-npu test-examples`: runs upstream-style example scripts, one directory each, the way
//! upstream's `scripts/run_tests.py` does, and summarises.
//!
//! Each example directory's `*_inference.py` scripts run if it has any, else every `*.py`
//! in it. A script runs with the example directory as its working directory, with
//! `AIR_TRANSFORM_TILING_SCRIPT` pointing at `transform_<device>.mlir` when the directory has
//! one, through `npu-process` (its own process group, killed as a whole when it overruns the
//! timeout, when the run is interrupted, or when the runner dies). Exit status 0 is a pass, 77
//! a skip, anything else a failure; a failure is reported with its first error line (the
//! exception a Python traceback ends with).
//!
//! As upstream's runner: without `--select`, the examples of its default skip list are not run,
//! and an example with no `transform_<device>.mlir` runs scriptless unless upstream lists it as
//! unable to (`SCRIPTLESS_UNSUPPORTED`); either way the report shows it as skipped, with the
//! reason. A script that imports `transformers` (upstream's whole-model scripts) is skipped,
//! saying what to install, when the interpreter cannot find it (`model_scripts`).

use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use npu_process::text::tail_lines;
use npu_process::{Interrupted, Output, Quiet, RunError, ToolCommand};

use crate::Host;

/// The exit status with which an example says "this cannot run here" (automake's convention,
/// which upstream's runner follows).
pub const SKIP_STATUS: i32 = 77;

/// Lines of a failed script's log shown in the report.
const TAIL_LINES: usize = 20;

/// Lines at the end of a failed script's log searched for its error.
const ERROR_SEARCH_LINES: usize = 400;

/// Examples upstream's `scripts/run_tests.py` skips unless selected with `-t`
/// (`DEFAULT_SKIPPED_EXAMPLES`; reference/upstream-driver.md §10.2): they need hardware,
/// models or tools beyond one NPU. A name ending in `*` matches every name with that prefix,
/// one starting with `*` every name with that suffix.
pub const DEFAULT_SKIPPED: &[&str] = &[
    "layernorm",
    "load_2d_block",
    "multi_drivers",
    "gpt2",
    "qwen2_5",
    "llm_q4nx",
    "*_q4nx",
];

/// Examples that cannot run without a transform script on a device, with upstream's reason
/// (`SCRIPTLESS_UNSUPPORTED` in upstream's `scripts/run_tests.py`): when the example has no
/// `transform_<device>.mlir`, it is skipped with this reason instead of run scriptless.
pub const SCRIPTLESS_UNSUPPORTED: &[(Device, &str, &str)] = &[
    (
        Device::Aie2,
        "gelu",
        "non-matmul; built-in default transform fails to legalize on npu1",
    ),
    (
        Device::Aie2,
        "rms_norm",
        "non-matmul; built-in default transform fails to legalize on npu1",
    ),
    (
        Device::Aie2,
        "matmul_i8_m128_n64_k64",
        "aie.dma_bd length exceeds the npu1 tile maximum",
    ),
    (Device::Aie2, "gpt2", "npu2-only example"),
    (Device::Aie2, "qwen2_5", "npu2-only example"),
];

fn default_skipped(name: &str) -> bool {
    DEFAULT_SKIPPED.iter().any(|pattern| {
        if let Some(suffix) = pattern.strip_prefix('*') {
            name.ends_with(suffix)
        } else if let Some(prefix) = pattern.strip_suffix('*') {
            name.starts_with(prefix)
        } else {
            name == *pattern
        }
    })
}

fn scriptless_unsupported(device: Device, name: &str) -> Option<&'static str> {
    SCRIPTLESS_UNSUPPORTED
        .iter()
        .find(|(d, n, _)| *d == device && *n == name)
        .map(|(_, _, reason)| *reason)
}

#[derive(Debug, clap::Args)]
pub struct TestExamplesArgs {
    /// The directory holding one subdirectory per example (upstream: `examples`).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The AIE generation: each example runs with its `transform_<device>.mlir`, if it has one.
    #[arg(long, value_enum, default_value_t = Device::Aie2)]
    pub device: Device,
    /// Run only this example (a subdirectory name); repeat to run several.
    #[arg(short = 't', long = "select", value_name = "NAME")]
    pub select: Vec<String>,
    /// Seconds a script may run before it and every process it started are killed.
    #[arg(long, value_name = "S", default_value_t = 450.0, value_parser = parse_timeout)]
    pub timeout: f64,
    /// Print every script's full output, not only the output of failures.
    #[arg(short, long)]
    pub verbose: bool,
}

/// The AIE generation an example run targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Device {
    /// npu1 (Phoenix, Hawk Point).
    Aie2,
    /// npu2 (Strix, Strix Halo, Krackan, Gorgon Point).
    Aie2p,
}

impl Device {
    pub fn as_str(self) -> &'static str {
        match self {
            Device::Aie2 => "aie2",
            Device::Aie2p => "aie2p",
        }
    }

    /// The transform script an example provides for this generation.
    pub fn transform_script_name(self) -> String {
        format!("transform_{}.mlir", self.as_str())
    }
}

fn parse_timeout(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 1e7 => Ok(s),
        _ => Err(format!(
            "{text:?} is not a number of seconds greater than 0 (e.g. 450 or 2.5)"
        )),
    }
}

/// Why the examples could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum ExamplesError {
    #[error("cannot read the examples directory {dir}: {source}")]
    ReadDir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{dir} holds no example directories (subdirectories with *.py scripts); pass the \
         directory that contains one directory per example"
    )]
    NoExamples { dir: PathBuf },
    #[error("no example named {names}; the examples in {dir} are: {available}")]
    UnknownSelection {
        names: String,
        dir: PathBuf,
        available: String,
    },
    #[error("cannot create a directory for the logs: {0}")]
    LogDir(#[source] io::Error),
    #[error(
        "cannot start the Python interpreter {python}: {reason}; put python3 in a directory \
         PATH names absolutely, or run `python -m triton_npu test-examples …` with the \
         interpreter that has triton-npu"
    )]
    Python { python: PathBuf, reason: String },
    #[error("cannot run {script}: {source}")]
    Run {
        script: PathBuf,
        #[source]
        source: RunError,
    },
    #[error(transparent)]
    Config(#[from] npu_target::ConfigError),
}

/// One example directory and what runs in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    pub name: String,
    pub dir: PathBuf,
    /// Absolute paths, sorted by name.
    pub scripts: Vec<PathBuf>,
    /// `transform_<device>.mlir` in the directory, if present.
    pub transform_script: Option<PathBuf>,
    /// Why the example is not run (upstream's default skip list, or no transform script where
    /// upstream cannot run it scriptless); `None`: it runs.
    pub skip: Option<String>,
}

/// The example directories under `dir` (sorted by name; hidden directories and directories
/// without scripts are not examples), restricted to `select` when it is not empty. Without a
/// selection, the examples of upstream's default skip list are marked skipped; a selected one
/// runs. An example upstream cannot run scriptless on `device` is marked skipped when it has
/// no transform script for it, selected or not.
pub fn discover(
    dir: &Path,
    device: Device,
    select: &[String],
) -> Result<Vec<Example>, ExamplesError> {
    let read_err = |source| ExamplesError::ReadDir {
        dir: dir.to_owned(),
        source,
    };
    let dir = std::path::absolute(dir).map_err(read_err)?;
    let mut examples = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(read_err)? {
        let path = entry.map_err(read_err)?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if !path.is_dir() || name.starts_with('.') || name.starts_with("__") {
            continue;
        }
        let scripts = scripts_of(&path).map_err(read_err)?;
        if scripts.is_empty() {
            continue;
        }
        let transform = path.join(device.transform_script_name());
        let transform_script = transform.is_file().then_some(transform);
        let skip = match scriptless_unsupported(device, &name) {
            Some(reason) if transform_script.is_none() => Some(format!(
                "no {} and {reason}",
                device.transform_script_name()
            )),
            _ => None,
        };
        examples.push(Example {
            name,
            scripts,
            transform_script,
            skip,
            dir: path,
        });
    }
    examples.sort_by(|a, b| a.name.cmp(&b.name));
    if examples.is_empty() {
        return Err(ExamplesError::NoExamples { dir });
    }
    if select.is_empty() {
        for example in &mut examples {
            if example.skip.is_none() && default_skipped(&example.name) {
                example.skip = Some(format!(
                    "skipped by default, as upstream's runner does; select it with -t {}",
                    example.name
                ));
            }
        }
        return Ok(examples);
    }
    let unknown: Vec<&str> = select
        .iter()
        .filter(|s| !examples.iter().any(|e| &e.name == *s))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(ExamplesError::UnknownSelection {
            names: unknown.join(", "),
            available: examples
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            dir,
        });
    }
    examples.retain(|e| select.contains(&e.name));
    Ok(examples)
}

/// Upstream's rule: the `*_inference.py` scripts if there are any, else every `*.py`.
fn scripts_of(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_file() && path.extension().is_some_and(|e| e == "py") {
            all.push(path);
        }
    }
    all.sort();
    let inference: Vec<PathBuf> = all
        .iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("_inference.py"))
        })
        .cloned()
        .collect();
    Ok(if inference.is_empty() { all } else { inference })
}

/// The script column of an example that was skipped without running any of its scripts.
const SKIPPED_SCRIPTS: &str = "-";

/// How one script ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// Exit status 77; the last line the script printed, as the reason.
    Skipped(String),
    /// Any other exit: the status, described, and the first error line of its output.
    Failed {
        status: String,
        error: Option<String>,
    },
    TimedOut,
    /// The run was interrupted (SIGINT/SIGTERM) while this script ran.
    Interrupted(Interrupted),
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Passed => "PASS",
            Outcome::Skipped(_) => "SKIP",
            Outcome::Failed { .. } => "FAIL",
            Outcome::TimedOut => "TIMEOUT",
            Outcome::Interrupted(_) => "INTERRUPTED",
        }
    }

    fn is_failure(&self) -> bool {
        matches!(
            self,
            Outcome::Failed { .. } | Outcome::TimedOut | Outcome::Interrupted(_)
        )
    }
}

/// One script's run.
#[derive(Debug, Clone)]
pub struct ScriptRun {
    pub example: String,
    pub script: String,
    pub outcome: Outcome,
    pub elapsed: Duration,
    pub log: PathBuf,
}

/// The interpreter the scripts run with: the one running this command when it runs inside
/// Python, else `python3` from the absolute entries of `PATH` (`path`).
fn python_of(host: &Host, path: &[PathBuf]) -> Result<PathBuf, ExamplesError> {
    if let Some(own) = host
        .python
        .as_ref()
        .map(|p| p.executable.clone())
        .filter(|p| !p.as_os_str().is_empty())
    {
        return Ok(own);
    }
    npu_process::lookup::find_program("python3", path).ok_or_else(|| ExamplesError::Python {
        python: PathBuf::from("python3"),
        reason: format!(
            "not found in the absolute PATH entries ({})",
            std::env::join_paths(path)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default()
        ),
    })
}

/// Runs `test-examples`; returns the exit code (0 all passed or skipped, 1 a failure or
/// timeout, 2 bad input, 130 interrupted by SIGINT, 143 by SIGTERM).
pub fn run(args: &TestExamplesArgs, host: &Host) -> u8 {
    match run_all(args, host) {
        Ok(runs) => {
            if let Some(cause) = runs.iter().find_map(|r| match r.outcome {
                Outcome::Interrupted(cause) => Some(cause),
                _ => None,
            }) {
                cause.exit_code()
            } else if runs.iter().any(|r| r.outcome.is_failure()) {
                1
            } else {
                0
            }
        }
        Err(e) => {
            eprintln!("triton-npu test-examples: {e}");
            2
        }
    }
}

fn run_all(args: &TestExamplesArgs, host: &Host) -> Result<Vec<ScriptRun>, ExamplesError> {
    let examples = discover(&args.dir, args.device, &args.select)?;
    let logs = tempfile::Builder::new()
        .prefix("triton-npu-examples-")
        .tempdir()
        .map_err(ExamplesError::LogDir)?;
    let config = npu_target::Config::current()?;
    let python = python_of(host, &config.locations.path)?;
    let timeout = Duration::from_secs_f64(args.timeout);
    let total: usize = examples
        .iter()
        .map(|e| if e.skip.is_some() { 1 } else { e.scripts.len() })
        .sum();
    println!(
        "running {total} script(s) of {} example(s) in {} for {} with {} (timeout {}s each)",
        examples.len(),
        args.dir.display(),
        args.device.as_str(),
        python.display(),
        args.timeout
    );
    let mut runs = Vec::with_capacity(total);
    'examples: for example in &examples {
        if let Some(reason) = &example.skip {
            println!(
                "[{}/{total}] {}/{SKIPPED_SCRIPTS} ... SKIP: {reason}",
                runs.len() + 1,
                example.name
            );
            runs.push(ScriptRun {
                example: example.name.clone(),
                script: SKIPPED_SCRIPTS.to_owned(),
                outcome: Outcome::Skipped(reason.clone()),
                elapsed: Duration::ZERO,
                log: PathBuf::new(),
            });
            continue;
        }
        for script in &example.scripts {
            let file_name = script
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let log = logs
                .path()
                .join(format!("{}__{file_name}.log", example.name));
            print!(
                "[{}/{total}] {}/{file_name} ... ",
                runs.len() + 1,
                example.name
            );
            let _ = io::stdout().flush();
            let started = Instant::now();
            let missing = crate::model_scripts::missing_dependency(&python, script, &example.dir)
                .map_err(|source| ExamplesError::Run {
                script: script.to_owned(),
                source,
            })?;
            let outcome = match missing {
                Some(reason) => Outcome::Skipped(reason.to_owned()),
                None => run_script(&python, example, script, &log, timeout)?,
            };
            let run = ScriptRun {
                example: example.name.clone(),
                script: file_name,
                outcome,
                elapsed: started.elapsed(),
                log,
            };
            report(&run, args.verbose);
            let interrupted = matches!(run.outcome, Outcome::Interrupted(_));
            runs.push(run);
            if interrupted {
                break 'examples;
            }
        }
    }
    summary(&runs);
    if runs.iter().any(|r| r.outcome.is_failure()) {
        let kept = logs.keep();
        println!("logs: {}", kept.display());
    }
    Ok(runs)
}

fn report(run: &ScriptRun, verbose: bool) {
    let seconds = run.elapsed.as_secs_f64();
    match &run.outcome {
        Outcome::Skipped(reason) if !reason.is_empty() => {
            println!("SKIP ({seconds:.1} s): {reason}")
        }
        Outcome::Failed { status, error } => match error {
            Some(error) => println!("FAIL: {status} ({seconds:.1} s): {error}"),
            None => println!("FAIL: {status} ({seconds:.1} s)"),
        },
        Outcome::TimedOut => {
            println!("TIMEOUT after {seconds:.1} s: the script and its processes were killed")
        }
        other => println!("{} ({seconds:.1} s)", other.label()),
    }
    if verbose {
        for line in tail_lines(&run.log, usize::MAX) {
            println!("    | {line}");
        }
    } else if run.outcome.is_failure() {
        println!("    log: {}", run.log.display());
        for line in tail_lines(&run.log, TAIL_LINES) {
            println!("    | {line}");
        }
    }
}

fn summary(runs: &[ScriptRun]) {
    let width = |f: fn(&ScriptRun) -> usize, header: &str| {
        runs.iter().map(f).max().unwrap_or(0).max(header.len())
    };
    let ew = width(|r| r.example.len(), "EXAMPLE");
    let sw = width(|r| r.script.len(), "SCRIPT");
    println!();
    println!(
        "{:<ew$}  {:<sw$}  {:<11}  {:>8}",
        "EXAMPLE", "SCRIPT", "RESULT", "TIME"
    );
    for r in runs {
        let why = match &r.outcome {
            Outcome::Skipped(reason) => reason.as_str(),
            Outcome::Failed {
                error: Some(error), ..
            } => error.as_str(),
            _ => "",
        };
        let row = format!(
            "{:<ew$}  {:<sw$}  {:<11}  {:>6.1} s  {why}",
            r.example,
            r.script,
            r.outcome.label(),
            r.elapsed.as_secs_f64()
        );
        println!("{}", row.trim_end());
    }
    let count = |f: fn(&Outcome) -> bool| runs.iter().filter(|r| f(&r.outcome)).count();
    println!(
        "{} script(s): {} passed, {} skipped, {} failed, {} timed out",
        runs.len(),
        count(|o| *o == Outcome::Passed),
        count(|o| matches!(o, Outcome::Skipped(_))),
        count(|o| matches!(o, Outcome::Failed { .. } | Outcome::Interrupted(_))),
        count(|o| *o == Outcome::TimedOut),
    );
}

/// Runs one script to completion, to the deadline or to an interruption, its output into
/// `log`.
fn run_script(
    python: &Path,
    example: &Example,
    script: &Path,
    log: &Path,
    timeout: Duration,
) -> Result<Outcome, ExamplesError> {
    let mut command = ToolCommand::new("the example script", python, timeout)
        .arg(script)
        .cwd(&example.dir)
        // Output reaches the log in the order it was written.
        .env("PYTHONUNBUFFERED", "1")
        .output(Output::Log(log.to_owned()));
    if let Some(transform) = &example.transform_script {
        command = command.env("AIR_TRANSFORM_TILING_SCRIPT", transform);
    }
    match command.run(&mut Quiet) {
        Ok(finished) => Ok(outcome_of(finished.status, log)),
        Err(RunError::TimedOut { .. }) => Ok(Outcome::TimedOut),
        Err(RunError::Interrupted { cause, .. }) => Ok(Outcome::Interrupted(cause)),
        Err(RunError::Start(e)) => Err(ExamplesError::Python {
            python: python.to_owned(),
            reason: e.problem.to_string(),
        }),
        Err(source) => Err(ExamplesError::Run {
            script: script.to_owned(),
            source,
        }),
    }
}

fn outcome_of(status: ExitStatus, log: &Path) -> Outcome {
    match status.code() {
        Some(0) => Outcome::Passed,
        Some(SKIP_STATUS) => Outcome::Skipped(tail_lines(log, 1).pop().unwrap_or_default()),
        Some(code) => Outcome::Failed {
            status: format!("exit status {code}"),
            error: first_error_line(&tail_lines(log, ERROR_SEARCH_LINES)),
        },
        None => Outcome::Failed {
            status: match status.signal() {
                Some(sig) => format!("killed by signal {sig}"),
                None => "ended abnormally".to_owned(),
            },
            error: first_error_line(&tail_lines(log, ERROR_SEARCH_LINES)),
        },
    }
}

/// The line of a failed script's output that says what went wrong: the exception line of the
/// last Python traceback (`AssertionError: Tensor-likes are not close!`), else the first line
/// that mentions an error, else the last line printed.
pub fn first_error_line(lines: &[String]) -> Option<String> {
    let tracebacks = lines.iter().rposition(|l| {
        l.trim_start()
            .starts_with("Traceback (most recent call last)")
    });
    if let Some(start) = tracebacks {
        let exception = lines[start + 1..]
            .iter()
            .find(|l| !l.is_empty() && !l.starts_with(char::is_whitespace));
        if let Some(line) = exception {
            return Some(line.trim().to_owned());
        }
    }
    let nonempty = || lines.iter().map(|l| l.trim()).filter(|l| !l.is_empty());
    nonempty()
        .find(|l| {
            let lower = l.to_ascii_lowercase();
            lower.contains("error") || lower.starts_with("fail")
        })
        .or_else(|| nonempty().next_back())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn names(scripts: &[PathBuf]) -> Vec<String> {
        scripts
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn discovery_follows_upstreams_rules() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(&r.join("b-plain/b.py"), "");
        write(&r.join("b-plain/a_helper.py"), "");
        write(&r.join("b-plain/transform_aie2p.mlir"), "");
        write(&r.join("a-llm/model.py"), "");
        write(&r.join("a-llm/model_inference.py"), "");
        write(&r.join("a-llm/transform_aie2.mlir"), "");
        write(&r.join("no-scripts/README.md"), "");
        write(&r.join(".hidden/x.py"), "");
        write(&r.join("__pycache__/x.py"), "");
        write(&r.join("top_level.py"), "");

        let found = discover(r, Device::Aie2p, &[]).unwrap();
        let got: Vec<(&str, Vec<String>, bool)> = found
            .iter()
            .map(|e| {
                (
                    e.name.as_str(),
                    names(&e.scripts),
                    e.transform_script.is_some(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a-llm", vec!["model_inference.py".to_owned()], false),
                (
                    "b-plain",
                    vec!["a_helper.py".to_owned(), "b.py".to_owned()],
                    true
                ),
            ]
        );
        let aie2 = discover(r, Device::Aie2, &[]).unwrap();
        assert_eq!(
            aie2[0].transform_script.as_deref(),
            Some(r.join("a-llm/transform_aie2.mlir").as_path())
        );
        assert!(aie2[1].transform_script.is_none());
        assert!(found.iter().all(|e| e.dir.is_absolute()));
    }

    fn skips(found: &[Example]) -> Vec<(&str, Option<&str>)> {
        found
            .iter()
            .map(|e| (e.name.as_str(), e.skip.as_deref()))
            .collect()
    }

    #[test]
    fn upstreams_default_skip_list_applies_unless_selected() {
        let root = tempfile::tempdir().unwrap();
        for name in ["layernorm", "gpt2", "llama_q4nx", "relu", "multi_drivers"] {
            write(&root.path().join(name).join("x.py"), "");
        }
        let all = discover(root.path(), Device::Aie2p, &[]).unwrap();
        let got = skips(&all);
        assert_eq!(got.len(), 5);
        for (name, skip) in got {
            if name == "relu" {
                assert_eq!(skip, None);
            } else {
                let skip = skip.unwrap_or_else(|| panic!("{name} is not skipped"));
                assert!(skip.contains("skipped by default"), "{skip}");
                assert!(skip.contains(&format!("-t {name}")), "{skip}");
            }
        }
        let picked = discover(root.path(), Device::Aie2p, &["layernorm".into()]).unwrap();
        assert_eq!(skips(&picked), [("layernorm", None)]);
    }

    #[test]
    fn examples_upstream_cannot_run_scriptless_are_skipped_without_their_script() {
        let root = tempfile::tempdir().unwrap();
        write(&root.path().join("gelu/gelu.py"), "");
        write(&root.path().join("rms_norm/rms_norm.py"), "");
        write(&root.path().join("rms_norm/transform_aie2.mlir"), "");
        write(&root.path().join("relu/relu.py"), "");
        let npu1 = discover(root.path(), Device::Aie2, &[]).unwrap();
        let got = skips(&npu1);
        assert_eq!(got[0].0, "gelu");
        let reason = got[0].1.unwrap();
        assert!(
            reason.starts_with("no transform_aie2.mlir and non-matmul"),
            "{reason}"
        );
        // With its script it runs; other examples run scriptless; on npu2 nothing is listed.
        assert_eq!(got[1..], [("relu", None), ("rms_norm", None)]);
        let selected = discover(root.path(), Device::Aie2, &["gelu".into()]).unwrap();
        assert!(selected[0].skip.is_some());
        let npu2 = discover(root.path(), Device::Aie2p, &[]).unwrap();
        assert!(npu2.iter().all(|e| e.skip.is_none()));
    }

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn the_first_error_line_is_the_exception_a_traceback_ends_with() {
        let log = lines(
            "loading\n\
             Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    \
             boom()\nValueError: first\n\nDuring handling of the above exception, another \
             exception occurred:\n\nTraceback (most recent call last):\n  File \"a.py\", \
             line 5\n    check()\nAssertionError: Tensor-likes are not close!\n\n\
             Mismatched elements: 3 / 1024 (0.3%)\n",
        );
        assert_eq!(
            first_error_line(&log).as_deref(),
            Some("AssertionError: Tensor-likes are not close!")
        );
        let plain = lines("step 1\nerror: the kernel produced zeros\nbye\n");
        assert_eq!(
            first_error_line(&plain).as_deref(),
            Some("error: the kernel produced zeros")
        );
        assert_eq!(
            first_error_line(&lines("a\nlast words\n\n")).as_deref(),
            Some("last words")
        );
        assert_eq!(first_error_line(&[]), None);
    }

    #[test]
    fn a_failure_reports_its_first_error_line() {
        let dir = tempfile::tempdir().unwrap();
        let body = "echo 'Traceback (most recent call last):'; echo '  File x'; \
                    echo 'RuntimeError: no NPU'; exit 1";
        let (outcome, _) = run_sh(dir.path(), body, false, Duration::from_secs(30));
        assert_eq!(
            outcome,
            Outcome::Failed {
                status: "exit status 1".into(),
                error: Some("RuntimeError: no NPU".into())
            }
        );
    }

    #[test]
    fn selection_keeps_named_examples_and_refuses_unknown_names() {
        let root = tempfile::tempdir().unwrap();
        for name in ["relu", "vec-add", "axpy"] {
            write(&root.path().join(name).join(format!("{name}.py")), "");
        }
        let picked = discover(
            root.path(),
            Device::Aie2,
            &["vec-add".into(), "axpy".into()],
        )
        .unwrap();
        assert_eq!(
            picked.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["axpy", "vec-add"]
        );
        let err = discover(root.path(), Device::Aie2, &["gelu".into(), "relu".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("no example named gelu;"), "{err}");
        assert!(err.contains("axpy, relu, vec-add"), "{err}");
    }

    #[test]
    fn an_empty_or_missing_directory_is_a_clear_error() {
        let root = tempfile::tempdir().unwrap();
        let err = discover(root.path(), Device::Aie2, &[]).unwrap_err();
        assert!(matches!(err, ExamplesError::NoExamples { .. }), "{err}");
        let missing = root.path().join("nope");
        let err = discover(&missing, Device::Aie2, &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("nope"), "{err}");
    }

    fn example(dir: &Path, body: &str, transform: bool) -> Example {
        let script = dir.join("ex.py");
        write(&script, body);
        let transform_script = dir.join("transform_aie2.mlir");
        if transform {
            std::fs::write(&transform_script, "").unwrap();
        }
        Example {
            name: "ex".into(),
            dir: dir.to_owned(),
            scripts: vec![script],
            transform_script: transform.then_some(transform_script),
            skip: None,
        }
    }

    /// The scripts are shell scripts run by `sh` standing in for the interpreter: the runner
    /// only cares about exit statuses, working directory, environment and process groups.
    fn run_sh(dir: &Path, body: &str, transform: bool, timeout: Duration) -> (Outcome, String) {
        let ex = example(dir, body, transform);
        let log = dir.join("ex.log");
        let _ = std::fs::remove_file(&log);
        let outcome = run_script(Path::new("/bin/sh"), &ex, &ex.scripts[0], &log, timeout).unwrap();
        (outcome, std::fs::read_to_string(log).unwrap())
    }

    #[test]
    fn exit_statuses_map_to_outcomes() {
        let dir = tempfile::tempdir().unwrap();
        let t = Duration::from_secs(30);
        assert_eq!(run_sh(dir.path(), "exit 0", false, t).0, Outcome::Passed);
        assert_eq!(
            run_sh(
                dir.path(),
                "echo; echo 'no reductions here'; exit 77",
                false,
                t
            )
            .0,
            Outcome::Skipped("no reductions here".into())
        );
        assert_eq!(
            run_sh(dir.path(), "exit 3", false, t).0,
            Outcome::Failed {
                status: "exit status 3".into(),
                error: None
            }
        );
        assert_eq!(
            run_sh(dir.path(), "kill -SEGV $$", false, t).0,
            Outcome::Failed {
                status: "killed by signal 11".into(),
                error: None
            }
        );
    }

    #[test]
    fn scripts_run_in_their_directory_with_the_transform_script() {
        let dir = tempfile::tempdir().unwrap();
        let body = "echo \"cwd=$(pwd)\"; echo \"script=${AIR_TRANSFORM_TILING_SCRIPT-unset}\" >&2";
        let (outcome, log) = run_sh(dir.path(), body, true, Duration::from_secs(30));
        assert_eq!(outcome, Outcome::Passed);
        let cwd = dir.path().canonicalize().unwrap();
        assert!(log.contains(&format!("cwd={}", cwd.display())), "{log}");
        let expected = dir.path().join("transform_aie2.mlir");
        assert!(
            log.contains(&format!("script={}", expected.display())),
            "{log}"
        );
    }

    #[test]
    fn a_script_that_overruns_is_killed_with_its_helpers() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("helper.pid");
        let body = format!(
            "sleep 1000 & echo $! > {p}.tmp; mv {p}.tmp {p}; sleep 1000",
            p = pid_file.display()
        );
        let started = Instant::now();
        let (outcome, _) = run_sh(dir.path(), &body, false, Duration::from_millis(600));
        assert_eq!(outcome, Outcome::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(20));
        let helper: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        while !npu_process::group::has_ended(helper) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            npu_process::group::has_ended(helper),
            "the helper {helper} survived the timeout"
        );
    }

    #[test]
    fn a_missing_interpreter_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let ex = example(dir.path(), "", false);
        let err = run_script(
            Path::new("/nonexistent/python3"),
            &ex,
            &ex.scripts[0],
            &dir.path().join("log"),
            Duration::from_secs(5),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("/nonexistent/python3") && err.contains("PATH"),
            "{err}"
        );
    }

    #[test]
    fn timeouts_must_be_positive_seconds() {
        assert_eq!(parse_timeout("2.5"), Ok(2.5));
        for bad in ["0", "-1", "abc", "inf", "NaN", ""] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_interpreter_is_pythons_own_inside_python_else_python3_from_absolute_path_entries() {
        let dir = tempfile::tempdir().unwrap();
        let python3 = dir.path().join("python3");
        write(&python3, "#!/bin/sh\n");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&python3, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = vec![dir.path().to_path_buf()];
        assert_eq!(python_of(&Host::standalone(), &path).unwrap(), python3);
        let err = python_of(&Host::standalone(), &[PathBuf::from("relative")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("python3") && err.contains("PATH"), "{err}");
        let mut host = Host::standalone();
        host.python = Some(crate::PythonHost {
            executable: PathBuf::from("/venv/bin/python"),
            ..Default::default()
        });
        assert_eq!(
            python_of(&host, &[]).unwrap(),
            PathBuf::from("/venv/bin/python")
        );
    }
}
