//! Running one external tool to completion, to its deadline, or to an interruption.
//!
//! The tool's stdout and stderr both go into one file — a log the caller names, or an
//! anonymous temporary file whose contents the caller gets back — so the two streams
//! interleave as written and nothing is piped: a grandchild that keeps a descriptor open can
//! never block us. The tool runs in a process group of its own (see [`crate::group`]); when
//! it exits, when the deadline passes and when the wait is interrupted, the whole group is
//! killed with SIGKILL before the tool is reaped.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::group::{self, Watchdog};
use crate::interrupt::{self, Interrupted};
use crate::start::{StartError, exhaustion};
use crate::text;

/// Where a tool's output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Appended to this file (created if missing).
    Log(PathBuf),
    /// Kept in an anonymous temporary file and returned in [`Finished`] (at most
    /// [`CAPTURE_LIMIT`] bytes of it).
    Capture,
}

/// How much captured output [`Finished::output`] holds at most.
pub const CAPTURE_LIMIT: u64 = 8 * 1024 * 1024;

/// How many lines of output an error of this crate shows.
pub const TAIL_LINES: usize = 40;

/// The longest pause between two looks at a running tool (and two interruption checks).
const POLL: Duration = Duration::from_millis(50);

thread_local! {
    /// The wall time of every tool this thread has run (start to reaped exit).
    static TOOL_TIME: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// The wall time of all the tools the calling thread has run so far: the difference across a
/// piece of work is the part of it spent waiting for tools (builds record it).
pub fn tool_time_on_this_thread() -> Duration {
    TOOL_TIME.with(std::cell::Cell::get)
}

/// Called while a tool runs: with each new chunk of output (to stream it in debug mode) and
/// on every poll (to draw progress).
pub trait Observer {
    fn output(&mut self, _bytes: &[u8]) {}
    fn tick(&mut self) {}
}

/// An observer that does nothing.
pub struct Quiet;
impl Observer for Quiet {}

/// Copies output to our stderr as well (debug mode streams tool output, as upstream does).
pub struct Echo<'a, O: Observer> {
    pub inner: &'a mut O,
}

impl<O: Observer> Observer for Echo<'_, O> {
    fn output(&mut self, bytes: &[u8]) {
        self.inner.output(bytes);
        let mut err = io::stderr().lock();
        let _ = err.write_all(bytes);
        let _ = err.flush();
    }
    fn tick(&mut self) {
        self.inner.tick();
    }
}

/// One run of an external tool. Every run has a finite timeout: [`ToolCommand::new`] takes
/// it.
#[derive(Debug, Clone)]
pub struct ToolCommand {
    tool: String,
    program: PathBuf,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    output: Output,
    timeout: Duration,
    timeout_setting: Option<String>,
    deadline: Option<Instant>,
}

/// A tool that ran to its end (whatever its exit status).
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub elapsed: Duration,
    /// The output, with [`Output::Capture`].
    pub output: Option<Vec<u8>>,
    tail: Vec<String>,
}

impl Finished {
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// The captured output as text (lossy UTF-8); empty with [`Output::Log`].
    pub fn text(&self) -> String {
        self.output
            .as_deref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }

    /// The last [`TAIL_LINES`] lines of the output.
    pub fn tail(&self) -> &[String] {
        &self.tail
    }

    /// `self` if the tool succeeded, else [`RunError::Failed`].
    pub fn require_success(self, command: &ToolCommand) -> Result<Finished, RunError> {
        if self.success() {
            return Ok(self);
        }
        Err(RunError::Failed(Box::new(Failure {
            tool: command.tool.clone(),
            command: command.command_line(),
            status: text::describe_status(&self.status),
            tail: self.tail,
        })))
    }
}

/// A tool that failed or was stopped, and what it printed last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub tool: String,
    /// The command line, shell-quoted (with `cd DIR &&` when it ran elsewhere).
    pub command: String,
    /// `exit status 1`, `killed by signal 11 (…)`, or why it was stopped.
    pub status: String,
    /// The last [`TAIL_LINES`] lines of its output.
    pub tail: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "command: {}", self.command)?;
        if self.tail.is_empty() {
            write!(f, "the tool printed nothing")
        } else {
            write!(f, "last {} lines of its output:", self.tail.len())?;
            for line in &self.tail {
                write!(f, "\n  | {line}")?;
            }
            Ok(())
        }
    }
}

/// Why a run did not finish normally.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Start(Box<StartError>),
    #[error("{} failed: {}.\n{}", .0.tool, .0.status, .0)]
    Failed(Box<Failure>),
    /// The timeout passed; the tool's process group was killed.
    #[error(
        "{} was killed with its whole process group: {}.\n{}",
        .failure.tool, .failure.status, .failure
    )]
    TimedOut {
        failure: Box<Failure>,
        timeout: Duration,
    },
    /// The wait was interrupted; the tool's process group was killed.
    #[error("{} was stopped and its process group killed: {cause}", .tool)]
    Interrupted { tool: String, cause: Interrupted },
    #[error("cannot {what} for {tool}: {source}")]
    Io {
        tool: String,
        what: String,
        #[source]
        source: io::Error,
    },
}

impl RunError {
    /// What ran out, when the tool could not be started or its output captured because a
    /// limit of the process or the system was reached.
    pub fn exhaustion(&self) -> Option<crate::Exhaustion> {
        match self {
            RunError::Start(e) => match &e.problem {
                crate::StartProblem::Exhausted(x) => Some(x.clone()),
                _ => None,
            },
            RunError::Io { source, .. } => crate::exhaustion(source),
            _ => None,
        }
    }
}

impl From<StartError> for RunError {
    fn from(e: StartError) -> Self {
        RunError::Start(Box::new(e))
    }
}

enum Ended {
    Exited,
    TimedOut,
    Interrupted(Interrupted),
}

impl ToolCommand {
    /// `tool` names it in messages (e.g. `aircc`); `program` is the path to run (absolute, or
    /// relative to the working directory — never looked up on `PATH`: see
    /// [`crate::lookup`]); the run is killed after `timeout`.
    pub fn new(tool: impl Into<String>, program: impl Into<PathBuf>, timeout: Duration) -> Self {
        ToolCommand {
            tool: tool.into(),
            program: program.into(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            output: Output::Capture,
            timeout,
            timeout_setting: None,
            deadline: None,
        }
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I: IntoIterator<Item = A>, A: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// The working directory (default: ours).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Adds a variable to the tool's environment (which is otherwise ours).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Where the output goes (default: [`Output::Capture`]).
    pub fn output(mut self, output: Output) -> Self {
        self.output = output;
        self
    }

    /// The setting that controls the timeout (e.g. `AMD_TRITON_NPU_COMPILE_TIMEOUT`), named
    /// in the timeout error.
    pub fn timeout_setting(mut self, setting: impl Into<String>) -> Self {
        self.timeout_setting = Some(setting.into());
        self
    }

    /// Stops the run at `deadline` if that comes before the timeout (several steps sharing one
    /// budget); the error still names the timeout.
    pub fn deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    pub fn tool(&self) -> &str {
        &self.tool
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The command line as it could be pasted into a shell, with `cd DIR &&` first when the
    /// tool runs in another directory.
    pub fn command_line(&self) -> String {
        let line = text::shell_line(&self.program, &self.args);
        match &self.cwd {
            Some(dir) => format!("cd {} && {line}", text::shell_quote(dir.as_os_str())),
            None => line,
        }
    }

    /// Runs the tool until it exits (any status is `Ok`), its deadline passes or the wait is
    /// interrupted ([`crate::interrupt::check`]); in every case its process group is killed
    /// before this returns.
    pub fn run(&self, observer: &mut dyn Observer) -> Result<Finished, RunError> {
        if let Err(cause) = interrupt::check() {
            return Err(self.interrupted(cause));
        }
        let started = Instant::now();
        let far = started + Duration::from_secs(100 * 365 * 86_400);
        let mut deadline = started.checked_add(self.timeout).unwrap_or(far).min(far);
        if let Some(d) = self.deadline {
            deadline = deadline.min(d);
        }
        let sink = self.open_sink()?;
        let mut offset = sink.metadata().map(|m| m.len()).unwrap_or(0);
        let first = offset;
        tracing::debug!(
            tool = %self.tool,
            command = %self.command_line(),
            timeout_s = self.timeout.as_secs_f64(),
            "running {}",
            self.tool
        );

        let watchdog = match Watchdog::start() {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::debug!(
                    "no watchdog for {} ({e}); a builder killed by SIGKILL may leave it running",
                    self.tool
                );
                None
            }
        };
        let mut child = match self.spawn(&sink, watchdog.as_ref()) {
            Ok(child) => child,
            Err(e) => {
                if let Some(w) = watchdog {
                    w.finish();
                }
                return Err(e);
            }
        };
        let pid = child.id() as libc::pid_t;
        let pgid = watchdog.as_ref().map_or(pid, Watchdog::pgid);
        let exited = group::exit_notifier(pid);

        let mut pause = Duration::from_millis(1);
        let ended = loop {
            match group::exited_unreaped(pid) {
                // Err: cannot observe the child (should not happen); `wait` below blocks.
                Ok(true) | Err(_) => break Ended::Exited,
                Ok(false) => {}
            }
            if let Err(cause) = interrupt::check() {
                break Ended::Interrupted(cause);
            }
            let now = Instant::now();
            if now >= deadline {
                break Ended::TimedOut;
            }
            forward(&sink, &mut offset, observer);
            observer.tick();
            group::wait_exit(exited.as_ref(), pause.min(deadline - now));
            pause = (pause * 2).min(POLL);
        };
        // Whatever is left in the group goes too: helpers of a tool that exited, or the whole
        // tool. Its leader is still unreaped here, so the group id cannot have been reused.
        group::kill_group(pgid);
        if let Some(w) = watchdog {
            w.finish();
        }
        let status = child.wait().map_err(|source| RunError::Io {
            tool: self.tool.clone(),
            what: "wait for the process".into(),
            source,
        });
        forward(&sink, &mut offset, observer);
        let tail = tail_of(&sink, first, offset, TAIL_LINES);
        let elapsed = started.elapsed();
        TOOL_TIME.with(|t| t.set(t.get() + elapsed));
        tracing::debug!(
            tool = %self.tool,
            elapsed_s = elapsed.as_secs_f64(),
            "{} ended: {}",
            self.tool,
            match (&ended, &status) {
                (Ended::Exited, Ok(s)) => text::describe_status(s),
                (Ended::TimedOut, _) => "timed out".to_owned(),
                (Ended::Interrupted(cause), _) => cause.to_string(),
                (_, Err(e)) => e.to_string(),
            }
        );
        match ended {
            Ended::Interrupted(cause) => Err(self.interrupted(cause)),
            Ended::TimedOut => Err(RunError::TimedOut {
                failure: Box::new(Failure {
                    tool: self.tool.clone(),
                    command: self.command_line(),
                    status: self.timeout_text(),
                    tail,
                }),
                timeout: self.timeout,
            }),
            Ended::Exited => Ok(Finished {
                status: status?,
                elapsed,
                output: match self.output {
                    Output::Capture => Some(read_range(&sink, first, offset, CAPTURE_LIMIT)),
                    Output::Log(_) => None,
                },
                tail,
            }),
        }
    }

    /// "it did not finish within the timeout of 20 s (SETTING)".
    pub fn timeout_text(&self) -> String {
        let setting = self
            .timeout_setting
            .as_deref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        format!(
            "it did not finish within the timeout of {}{setting}",
            text::seconds(self.timeout)
        )
    }

    fn interrupted(&self, cause: Interrupted) -> RunError {
        RunError::Interrupted {
            tool: self.tool.clone(),
            cause,
        }
    }

    fn open_sink(&self) -> Result<File, RunError> {
        let opened = match &self.output {
            Output::Log(path) => OpenOptions::new()
                .create(true)
                .append(true)
                .read(true)
                .open(path),
            Output::Capture => tempfile::tempfile(),
        };
        opened.map_err(|e| self.setup_error("open its output file", e))
    }

    fn spawn(
        &self,
        sink: &File,
        watchdog: Option<&Watchdog>,
    ) -> Result<std::process::Child, RunError> {
        let out = sink
            .try_clone()
            .and_then(|out| Ok((out.try_clone()?, out)))
            .map_err(|e| self.setup_error("duplicate its output file", e))?;
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(out.0)
            .stderr(out.1)
            .process_group(watchdog.map_or(0, Watchdog::pgid));
        if let Some(dir) = &self.cwd {
            command.current_dir(dir);
        }
        for (k, v) in &self.env {
            command.env(k, v);
        }
        command.spawn().map_err(|e| {
            if let Some(dir) = self.cwd.as_deref().filter(|d| !d.is_dir()) {
                return RunError::Io {
                    tool: self.tool.clone(),
                    what: format!("enter the working directory {}", dir.display()),
                    source: e,
                };
            }
            StartError::new(&self.tool, &self.program, e).into()
        })
    }

    /// Resource exhaustion reads as such; anything else is plain I/O.
    fn setup_error(&self, what: &str, e: io::Error) -> RunError {
        if exhaustion(&e).is_some() {
            return StartError::new(&self.tool, &self.program, e).into();
        }
        RunError::Io {
            tool: self.tool.clone(),
            what: what.to_owned(),
            source: e,
        }
    }
}

/// Hands the observer what the tool wrote since `offset`.
fn forward(sink: &File, offset: &mut u64, observer: &mut dyn Observer) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = sink.read_at(&mut buf, *offset) {
        if n == 0 {
            break;
        }
        *offset += n as u64;
        observer.output(&buf[..n]);
    }
}

/// At most `limit` bytes of `sink` from `start` to `end`, the last ones when there are more.
fn read_range(sink: &File, start: u64, end: u64, limit: u64) -> Vec<u8> {
    let from = start.max(end.saturating_sub(limit));
    let mut bytes = vec![0u8; usize::try_from(end - from).unwrap_or(0)];
    let mut filled = 0;
    while filled < bytes.len() {
        match sink.read_at(&mut bytes[filled..], from + filled as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => filled += n,
        }
    }
    bytes.truncate(filled);
    bytes
}

fn tail_of(sink: &File, start: u64, end: u64, n: usize) -> Vec<String> {
    const WINDOW: u64 = 256 * 1024;
    let bytes = read_range(sink, start, end, WINDOW);
    text::last_lines(&bytes, n, end - start > WINDOW)
}
