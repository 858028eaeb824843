//! `triton-npu test-examples`: runs upstream-style example scripts, one directory each, the way
//! upstream's `scripts/run_tests.py` does, and summarises.
//!
//! Each example directory's `*_inference.py` scripts run if it has any, else every `*.py`
//! in it. A script runs with the example directory as its working directory, with
//! `AIR_TRANSFORM_TILING_SCRIPT` pointing at `transform_<device>.mlir` when the directory has
//! one, through `npu-process` (its own process group, killed as a whole when it overruns the
//! timeout, when the run is interrupted, or when the runner dies). Exit status 0 is a pass, 77
//! a skip, anything else a failure.

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
    /// npu2 (Strix, Strix Halo, Krackan).
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
}

/// The example directories under `dir` (sorted by name; hidden directories and directories
/// without scripts are not examples), restricted to `select` when it is not empty.
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
        examples.push(Example {
            name,
            scripts,
            transform_script: transform.is_file().then_some(transform),
            dir: path,
        });
    }
    examples.sort_by(|a, b| a.name.cmp(&b.name));
    if examples.is_empty() {
        return Err(ExamplesError::NoExamples { dir });
    }
    if select.is_empty() {
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

/// How one script ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// Exit status 77; the last line the script printed, as the reason.
    Skipped(String),
    /// Any other exit: the status, described.
    Failed(String),
    TimedOut,
    /// The run was interrupted (SIGINT/SIGTERM) while this script ran.
    Interrupted(Interrupted),
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Passed => "PASS",
            Outcome::Skipped(_) => "SKIP",
            Outcome::Failed(_) => "FAIL",
            Outcome::TimedOut => "TIMEOUT",
            Outcome::Interrupted(_) => "INTERRUPTED",
        }
    }

    fn is_failure(&self) -> bool {
        matches!(
            self,
            Outcome::Failed(_) | Outcome::TimedOut | Outcome::Interrupted(_)
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
    let total: usize = examples.iter().map(|e| e.scripts.len()).sum();
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
            let outcome = run_script(&python, example, script, &log, timeout)?;
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
        Outcome::Failed(how) => println!("FAIL: {how} ({seconds:.1} s)"),
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
        println!(
            "{:<ew$}  {:<sw$}  {:<11}  {:>6.1} s",
            r.example,
            r.script,
            r.outcome.label(),
            r.elapsed.as_secs_f64()
        );
    }
    let count = |f: fn(&Outcome) -> bool| runs.iter().filter(|r| f(&r.outcome)).count();
    println!(
        "{} script(s): {} passed, {} skipped, {} failed, {} timed out",
        runs.len(),
        count(|o| *o == Outcome::Passed),
        count(|o| matches!(o, Outcome::Skipped(_))),
        count(|o| matches!(o, Outcome::Failed(_) | Outcome::Interrupted(_))),
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
        Some(code) => Outcome::Failed(format!("exit status {code}")),
        None => Outcome::Failed(match status.signal() {
            Some(sig) => format!("killed by signal {sig}"),
            None => "ended abnormally".to_owned(),
        }),
    }
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
        }
    }

    /// The scripts are shell scripts run by `sh` standing in for the interpreter: the runner
    /// only cares about exit statuses, working directory, environment and process groups.
    fn run_sh(dir: &Path, body: &str, transform: bool, timeout: Duration) -> (Outcome, String) {
        let ex = example(dir, body, transform);
        let log = dir.join("ex.log");
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
            Outcome::Failed("exit status 3".into())
        );
        assert_eq!(
            run_sh(dir.path(), "kill -SEGV $$", false, t).0,
            Outcome::Failed("killed by signal 11".into())
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
