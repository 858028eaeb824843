//! The runner with real processes: shell scripts stand in for tools.
//!
//! Tests that need a process of their own (to be killed, to catch signals, to lower a limit)
//! run this test binary again with `ROLE` set; the child runs the role and exits.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use npu_process::interrupt::{self, Interrupted};
use npu_process::{Output, Quiet, RunError, StartProblem, ToolCommand};

const ROLE: &str = "NPU_PROCESS_TEST_ROLE";
const DIR: &str = "NPU_PROCESS_TEST_DIR";

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A tool that starts a helper in the background, records both pids in `pids` (atomically),
/// and never finishes.
fn hanging_tool(dir: &Path) -> PathBuf {
    let pids = dir.join("pids");
    script(
        dir,
        "hang.sh",
        &format!(
            "echo started; sleep 1000 & echo $! > {p}.tmp; echo $$ >> {p}.tmp; mv {p}.tmp {p}; \
             sleep 1000",
            p = pids.display()
        ),
    )
}

fn wait_for_pids(dir: &Path) -> Vec<i32> {
    let file = dir.join("pids");
    let until = Instant::now() + Duration::from_secs(30);
    while !file.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let text = std::fs::read_to_string(&file).expect("the tool recorded its pids");
    text.lines().map(|l| l.trim().parse().unwrap()).collect()
}

fn assert_all_gone(pids: &[i32]) {
    let until = Instant::now() + Duration::from_secs(10);
    while !pids.iter().all(|p| npu_process::group::has_ended(*p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    for pid in pids {
        assert!(
            npu_process::group::has_ended(*pid),
            "process {pid} of the tool survived"
        );
    }
}

/// Runs this test binary's test `test` as a child process with `role`.
fn child(test: &str, role: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(DIR, dir);
    cmd
}

fn role() -> Option<(String, PathBuf)> {
    Some((
        std::env::var(ROLE).ok()?,
        PathBuf::from(std::env::var_os(DIR)?),
    ))
}

#[test]
fn output_of_both_streams_lands_in_the_log_in_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let tool = script(
        dir.path(),
        "tool.sh",
        "echo \"out:$1|$2|$(pwd)|$EXTRA\"; echo err >&2; exit 3",
    );
    let log = dir.path().join("tool.log");
    let finished = ToolCommand::new("tool", &tool, Duration::from_secs(30))
        .args(["a b", "c"])
        .cwd(dir.path())
        .env("EXTRA", "x")
        .output(Output::Log(log.clone()))
        .run(&mut Quiet)
        .unwrap();
    assert!(!finished.success());
    assert_eq!(
        npu_process::text::describe_status(&finished.status),
        "exit status 3"
    );
    assert!(finished.output.is_none());
    let text = std::fs::read_to_string(log).unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    assert!(
        text.contains(&format!("out:a b|c|{}|x", cwd.display())),
        "{text}"
    );
    assert!(text.contains("err"), "{text}");
    assert_eq!(finished.tail().last().map(String::as_str), Some("err"));
}

#[test]
fn captured_output_comes_back_and_failures_show_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let tool = script(
        dir.path(),
        "tool.sh",
        "i=0; while [ $i -lt 50 ]; do echo line $i; i=$((i+1)); done; echo 'bad input' >&2; exit 1",
    );
    let command = ToolCommand::new("tool", &tool, Duration::from_secs(30)).arg("--flag");
    let finished = command.run(&mut Quiet).unwrap();
    assert!(finished.text().starts_with("line 0\n") && finished.text().contains("bad input"));
    let err = finished.require_success(&command).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("tool failed: exit status 1."), "{text}");
    assert!(
        text.contains(&format!("command: {} --flag", tool.display())),
        "{text}"
    );
    assert!(
        text.contains("last 40 lines") && text.contains("  | bad input"),
        "{text}"
    );
    assert!(!text.contains("line 10\n"), "only the tail: {text}");
}

#[test]
fn a_hung_tool_and_its_children_are_killed_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let tool = hanging_tool(dir.path());
    let started = Instant::now();
    let err = ToolCommand::new("hang", &tool, Duration::from_millis(700))
        .timeout_setting("SOME_TIMEOUT")
        .run(&mut Quiet)
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(20));
    let RunError::TimedOut { failure, timeout } = &err else {
        panic!("{err}")
    };
    assert_eq!(*timeout, Duration::from_millis(700));
    assert_eq!(failure.tail, vec!["started"]);
    let text = err.to_string();
    assert!(
        text.contains("within the timeout of 0.7 s (SOME_TIMEOUT)")
            && text.contains("process group"),
        "{text}"
    );
    let pids = wait_for_pids(dir.path());
    assert_eq!(pids.len(), 2);
    assert_all_gone(&pids);
}

#[test]
fn an_earlier_deadline_cuts_the_run_short() {
    let dir = tempfile::tempdir().unwrap();
    let tool = hanging_tool(dir.path());
    let started = Instant::now();
    let err = ToolCommand::new("hang", &tool, Duration::from_secs(3600))
        .deadline(Instant::now() + Duration::from_millis(300))
        .run(&mut Quiet)
        .unwrap_err();
    assert!(matches!(err, RunError::TimedOut { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(err.to_string().contains("3600 s"), "{err}");
}

#[test]
fn helpers_left_running_after_a_normal_exit_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("helper");
    let tool = script(
        dir.path(),
        "tool.sh",
        &format!("sleep 1000 & echo $! > {}; exit 0", pid_file.display()),
    );
    let finished = ToolCommand::new("tool", &tool, Duration::from_secs(30))
        .run(&mut Quiet)
        .unwrap();
    assert!(finished.success());
    let pid: i32 = std::fs::read_to_string(pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_all_gone(&[pid]);
}

#[test]
fn an_interrupted_wait_kills_the_group_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let tool = hanging_tool(dir.path());
    let pids_file = dir.path().join("pids");
    let started = Instant::now();
    let err = interrupt::with_check(
        move || {
            if pids_file.exists() {
                Err(Interrupted::by_signal(libc::SIGINT))
            } else {
                Ok(())
            }
        },
        || {
            ToolCommand::new("hang", &tool, Duration::from_secs(3600))
                .run(&mut Quiet)
                .unwrap_err()
        },
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    match &err {
        RunError::Interrupted { tool, cause } => {
            assert_eq!(tool, "hang");
            assert_eq!(cause.exit_code(), 130);
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("Ctrl-C"), "{err}");
    assert_all_gone(&wait_for_pids(dir.path()));
}

#[test]
fn an_interrupted_caller_starts_no_tool() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let tool = script(
        dir.path(),
        "tool.sh",
        &format!("touch {}", marker.display()),
    );
    let err = interrupt::with_check(
        || Err(Interrupted::by_caller()),
        || ToolCommand::new("tool", &tool, Duration::from_secs(30)).run(&mut Quiet),
    )
    .unwrap_err();
    assert!(matches!(err, RunError::Interrupted { .. }), "{err}");
    assert!(!marker.exists());
}

#[test]
fn tools_that_cannot_start_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let start = |program: &Path| match ToolCommand::new("t", program, Duration::from_secs(30))
        .run(&mut Quiet)
    {
        Err(RunError::Start(e)) => e,
        other => panic!("{other:?}"),
    };
    let e = start(&dir.path().join("missing"));
    assert_eq!(e.problem, StartProblem::NotFound);
    assert!(e.to_string().contains("does not exist"), "{e}");

    let plain = dir.path().join("plain");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let e = start(&plain);
    assert_eq!(e.problem, StartProblem::NotExecutable);

    let interp = dir.path().join("interp");
    std::fs::write(&interp, "#!/no/such/shell\n").unwrap();
    std::fs::set_permissions(&interp, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = start(&interp);
    assert_eq!(
        e.problem,
        StartProblem::MissingInterpreter("/no/such/shell".into())
    );

    let err = ToolCommand::new("t", "/bin/true", Duration::from_secs(30))
        .cwd(dir.path().join("no-such-dir"))
        .run(&mut Quiet)
        .unwrap_err();
    assert!(err.to_string().contains("working directory"), "{err}");
}

#[test]
fn running_out_of_file_descriptors_names_the_limit() {
    if let Some((role, _)) = role() {
        if role == "emfile" {
            // Leave no descriptor free: the output file cannot be opened.
            let mut held = Vec::new();
            npu_process::set_open_file_limit(0, 4096).unwrap();
            while let Ok(f) = std::fs::File::open("/dev/null") {
                held.push(f);
            }
            let err = ToolCommand::new("t", "/bin/true", Duration::from_secs(30))
                .run(&mut Quiet)
                .unwrap_err();
            drop(held);
            println!("ERROR: {err}");
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = child(
        "running_out_of_file_descriptors_names_the_limit",
        "emfile",
        dir.path(),
    )
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let at = text.find("ERROR: ").expect(&text);
    let line = text[at..].lines().next().unwrap();
    for want in [
        "cannot start t",
        "EMFILE",
        "RLIMIT_NOFILE",
        "`ulimit -n`: 0",
        "hard limit 4096",
    ] {
        assert!(line.contains(want), "{want:?} missing in {line}");
    }
}

/// The child of the two tests below: runs a hanging tool and reports how that ended.
fn run_hanging_tool_as_child(dir: &Path, install_flag: bool) {
    let flag = install_flag.then(interrupt::SignalFlag::install);
    let result =
        ToolCommand::new("hang", hanging_tool(dir), Duration::from_secs(3600)).run(&mut Quiet);
    match result {
        Err(RunError::Interrupted { cause, .. }) => {
            println!("INTERRUPTED {cause}");
            drop(flag);
            std::process::exit(cause.exit_code().into());
        }
        other => {
            println!("UNEXPECTED {other:?}");
            std::process::exit(1);
        }
    }
}

#[test]
fn a_builder_killed_with_sigkill_leaves_no_tool_behind() {
    if let Some((role, dir)) = role() {
        if role == "builder" {
            run_hanging_tool_as_child(&dir, false);
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut builder = child(
        "a_builder_killed_with_sigkill_leaves_no_tool_behind",
        "builder",
        dir.path(),
    )
    .stdout(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let pids = wait_for_pids(dir.path());
    builder.kill().unwrap(); // SIGKILL: no code of the builder runs
    builder.wait().unwrap();
    assert_all_gone(&pids);
}

#[test]
fn a_signal_flag_turns_sigint_and_sigterm_into_an_interruption() {
    if let Some((role, dir)) = role() {
        if role == "flagged" {
            run_hanging_tool_as_child(&dir, true);
        }
        return;
    }
    for (signal, code, name) in [
        (libc::SIGINT, 130, "SIGINT"),
        (libc::SIGTERM, 143, "SIGTERM"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let builder = child(
            "a_signal_flag_turns_sigint_and_sigterm_into_an_interruption",
            "flagged",
            dir.path(),
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
        let pids = wait_for_pids(dir.path());
        let started = Instant::now();
        signal_child(builder.id(), signal);
        let out = builder.wait_with_output().unwrap();
        assert!(started.elapsed() < Duration::from_secs(10));
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(code), "{text}");
        assert!(
            text.contains(&format!("INTERRUPTED interrupted by {name}")),
            "{text}"
        );
        assert_all_gone(&pids);
    }
}

/// Collects what `tracing` writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_command_line_is_logged_at_debug_level() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let dir = tempfile::tempdir().unwrap();
    tracing::subscriber::with_default(subscriber, || {
        ToolCommand::new("true", "/bin/true", Duration::from_secs(30))
            .args([OsString::from("it's"), OsString::from("x")])
            .cwd(dir.path())
            .run(&mut Quiet)
            .unwrap();
    });
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let want = format!("cd {} && /bin/true 'it'\\''s' x", dir.path().display());
    assert!(text.contains("DEBUG") && text.contains(&want), "{text}");
    assert!(text.contains("exit status 0"), "{text}");
}

/// Sends `signal` to our child `pid`.
fn signal_child(pid: u32, signal: i32) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    let signal = rustix::process::Signal::from_named_raw(signal).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
}
