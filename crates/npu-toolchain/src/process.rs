//! Running one external tool: its own process group, output into a log file, a deadline.
//!
//! The tool's stdout and stderr both go straight into one log file (appending, so the two
//! streams interleave as written). Nothing is piped, so a grandchild that keeps a descriptor
//! open can never block us. The tool leads its own process group; when it exits, or when the
//! deadline passes, the whole group is killed with SIGKILL before the leader is reaped, so no
//! helper it started survives and the group id cannot be reused under us.

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// One tool invocation.
pub(crate) struct ToolRun<'a> {
    pub program: &'a Path,
    pub args: &'a [OsString],
    pub cwd: &'a Path,
    /// Receives stdout and stderr.
    pub log: &'a Path,
    pub deadline: Instant,
}

/// How a run ended.
#[derive(Debug)]
pub(crate) enum RunOutcome {
    Finished(ExitStatus),
    /// The deadline passed; the process group was killed.
    TimedOut,
}

/// Called while the tool runs: with each new chunk of output (for streaming in debug mode) and
/// on every poll (for the progress line).
pub(crate) trait Observer {
    fn output(&mut self, _bytes: &[u8]) {}
    fn tick(&mut self) {}
}

/// An observer that does nothing.
pub(crate) struct Quiet;
impl Observer for Quiet {}

/// Runs the tool to completion or to the deadline. `Err` only when it could not be started.
pub(crate) fn run(run: &ToolRun<'_>, observer: &mut dyn Observer) -> io::Result<RunOutcome> {
    let log = OpenOptions::new().create(true).append(true).open(run.log)?;
    let mut follow = File::open(run.log)?;
    follow.seek(SeekFrom::End(0))?;
    let mut child = Command::new(run.program)
        .args(run.args)
        .current_dir(run.cwd)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()?;
    let pgid = child.id() as libc::pid_t;

    let mut pause = Duration::from_millis(1);
    let timed_out = loop {
        match exited_unreaped(pgid) {
            Ok(true) => break false,
            Ok(false) => {}
            // Cannot observe the child (should not happen): fall back to a blocking wait.
            Err(_) => break false,
        }
        if Instant::now() >= run.deadline {
            kill_group(pgid);
            break true;
        }
        forward(&mut follow, observer);
        observer.tick();
        std::thread::sleep(pause.min(run.deadline.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(Duration::from_millis(50));
    };
    // Whatever the tool left behind in its group goes too.
    kill_group(pgid);
    let status = child.wait()?;
    forward(&mut follow, observer);
    Ok(if timed_out {
        RunOutcome::TimedOut
    } else {
        RunOutcome::Finished(status)
    })
}

/// Whether the process has exited, without reaping it (so its pid, which is also the group id,
/// stays reserved until we have killed the group).
pub fn exited_unreaped(pid: libc::pid_t) -> io::Result<bool> {
    loop {
        // SAFETY: siginfo_t is plain data; waitid only writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own child; WNOWAIT leaves it waitable for `Child::wait`.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            // SAFETY: waitid filled the structure (or left it zeroed when nothing changed).
            return Ok(unsafe { info.si_pid() } != 0);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Kills every process of group `pgid` (nothing for `pgid` ≤ 0). Async-signal-safe.
pub fn kill_group(pgid: libc::pid_t) {
    if pgid > 0 {
        // SAFETY: plain syscall; a group that is already gone gives ESRCH, which is fine.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

fn forward(follow: &mut File, observer: &mut dyn Observer) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = follow.read(&mut buf) {
        if n == 0 {
            break;
        }
        observer.output(&buf[..n]);
    }
}

/// Describes an exit status for people: `exit status 1`, `killed by signal 9 (SIGKILL)`.
pub(crate) fn describe_status(status: &ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit status {code}");
    }
    match status.signal() {
        Some(sig) => format!("killed by signal {sig}{}", signal_name(sig)),
        None => "ended abnormally".to_owned(),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGSEGV => " (SIGSEGV: the tool crashed)",
        libc::SIGABRT => " (SIGABRT: an assertion failed in the tool)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGBUS => " (SIGBUS)",
        _ => "",
    }
}

/// The last `n` lines of a log file (lossy UTF-8, `\r` progress updates folded); the whole
/// file for `n == usize::MAX`, else only its last 256 KiB are read.
pub fn tail_lines(path: &Path, n: usize) -> Vec<String> {
    const WINDOW: u64 = 256 * 1024;
    let Ok(mut file) = File::open(path) else {
        return Vec::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = if n == usize::MAX {
        0
    } else {
        len.saturating_sub(WINDOW)
    };
    if file.seek(SeekFrom::Start(start)).is_err() {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<String> = text
        .lines()
        // A progress line rewritten with `\r` shows its final state only.
        .map(|l| l.rsplit('\r').next().unwrap_or(l).trim_end().to_owned())
        .collect();
    if start > 0 && !lines.is_empty() {
        lines.remove(0); // cut mid-line
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let skip = lines.len().saturating_sub(n);
    lines.split_off(skip)
}

/// A command line as it could be pasted into a POSIX shell.
pub(crate) fn shell_line(program: &Path, args: &[OsString]) -> String {
    std::iter::once(program.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn shell_quote(arg: &OsStr) -> String {
    let s = arg.to_string_lossy();
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./=:,+-@%".contains(c));
    if safe {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Copies output to our stderr (debug mode streams tool output as upstream does).
pub(crate) struct Echo<'a, O: Observer> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn run_script(dir: &Path, body: &str, timeout: Duration) -> (RunOutcome, std::path::PathBuf) {
        let program = script(dir, "tool.sh", body);
        let log = dir.join("tool.log");
        let outcome = run(
            &ToolRun {
                program: &program,
                args: &[OsString::from("a b"), OsString::from("c")],
                cwd: dir,
                log: &log,
                deadline: Instant::now() + timeout,
            },
            &mut Quiet,
        )
        .unwrap();
        (outcome, log)
    }

    /// Dead, or a zombie nobody has reaped yet (in containers pid 1 may not reap).
    fn is_gone(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X'])),
        }
    }

    #[test]
    fn output_of_both_streams_lands_in_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let (outcome, log) = run_script(
            dir.path(),
            "echo \"out:$1|$2|$(pwd)\"; echo err >&2; exit 3",
            Duration::from_secs(30),
        );
        match outcome {
            RunOutcome::Finished(s) => assert_eq!(describe_status(&s), "exit status 3"),
            other => panic!("{other:?}"),
        }
        let text = std::fs::read_to_string(log).unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        assert!(
            text.contains(&format!("out:a b|c|{}", cwd.display())),
            "{text}"
        );
        assert!(text.contains("err"), "{text}");
    }

    #[test]
    fn a_hung_tool_and_its_children_are_killed_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        let body = format!(
            "sleep 1000 & echo $! > {p}.tmp; echo $$ >> {p}.tmp; mv {p}.tmp {p}; sleep 1000",
            p = pids.display()
        );
        let started = Instant::now();
        let (outcome, _) = run_script(dir.path(), &body, Duration::from_millis(700));
        assert!(matches!(outcome, RunOutcome::TimedOut), "{outcome:?}");
        assert!(started.elapsed() < Duration::from_secs(20));
        let text = std::fs::read_to_string(&pids).expect("the script recorded its pids");
        let pids: Vec<i32> = text.lines().map(|l| l.trim().parse().unwrap()).collect();
        assert_eq!(pids.len(), 2, "{text}");
        // Give init a moment to reap the orphaned grandchild.
        let wait_until = Instant::now() + Duration::from_secs(5);
        while !pids.iter().all(|p| is_gone(*p)) && Instant::now() < wait_until {
            std::thread::sleep(Duration::from_millis(20));
        }
        for pid in pids {
            assert!(is_gone(pid), "process {pid} of the hung tool survived");
        }
    }

    #[test]
    fn helpers_left_running_after_a_normal_exit_are_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("helper");
        let body = format!("sleep 1000 & echo $! > {}; exit 0", pid_file.display());
        let (outcome, _) = run_script(dir.path(), &body, Duration::from_secs(30));
        assert!(matches!(outcome, RunOutcome::Finished(s) if s.success()));
        let pid: i32 = std::fs::read_to_string(pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let wait_until = Instant::now() + Duration::from_secs(5);
        while !is_gone(pid) && Instant::now() < wait_until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(is_gone(pid));
    }

    #[test]
    fn signals_are_described() {
        let dir = tempfile::tempdir().unwrap();
        let (outcome, _) = run_script(dir.path(), "kill -SEGV $$", Duration::from_secs(30));
        match outcome {
            RunOutcome::Finished(s) => {
                let d = describe_status(&s);
                assert!(d.contains("signal 11") && d.contains("crashed"), "{d}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tail_keeps_the_last_lines_and_folds_carriage_returns() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("l");
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str("progress 10%\rprogress 100%\n\n");
        std::fs::write(&log, text).unwrap();
        let tail = tail_lines(&log, 3);
        assert_eq!(tail, vec!["line 98", "line 99", "progress 100%"]);
        assert!(tail_lines(&dir.path().join("missing"), 3).is_empty());
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote(OsStr::new("--peano=/opt/p")), "--peano=/opt/p");
        assert_eq!(shell_quote(OsStr::new("a b")), "'a b'");
        assert_eq!(shell_quote(OsStr::new("")), "''");
        assert_eq!(shell_quote(OsStr::new("it's")), r"'it'\''s'");
        assert_eq!(
            shell_line(
                Path::new("/bin/x"),
                &[OsString::from("builtin.module(cse)")]
            ),
            "/bin/x 'builtin.module(cse)'"
        );
    }
}
