//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Liveness guard only: a test that needs longer than this is hung, not slow.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// Polls `cond` until it holds; panics (naming `what`) if it never does.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// How many lock requests are blocked on the file at `path` (from /proc/locks).
pub fn blocked_on(path: &Path) -> usize {
    let Ok(meta) = fs::metadata(path) else {
        return 0;
    };
    let inode = format!(":{} ", meta.ino());
    fs::read_to_string("/proc/locks")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("->") && l.contains(&inode))
        .count()
}

/// The build lock file of a key.
pub fn build_lock(root: &Path, key: &npu_cache::Key) -> PathBuf {
    root.join("locks").join(format!("{key}.lock"))
}

/// The key the probe uses for `kernel`.
pub fn probe_key(kernel: &str) -> npu_cache::Key {
    probe_inputs(kernel).key()
}

/// The inputs the probe uses for `kernel` (kept in step with src/bin/npu-cache-probe.rs).
pub fn probe_inputs(kernel: &str) -> npu_cache::Inputs {
    npu_cache::Inputs::new()
        .text("kernel_name", kernel)
        .text("kernel_ir", format!("module {{ func.func @{kernel}() }}"))
        .text("grid", "1,1,1")
}

pub fn probe(root: &Path, kernel: &str, log: &Path, extra: &[&str]) -> Command {
    probe_at(
        Path::new(env!("CARGO_BIN_EXE_npu-cache-probe")),
        root,
        kernel,
        log,
        extra,
    )
}

/// A copy of the probe binary inside `dir`, for a probe that runs as another user: the build
/// directory may lie in a folder only we can enter (a clone in `mktemp -d`), so that user could
/// not execute the original.
pub fn probe_copy_in(dir: &Path) -> std::path::PathBuf {
    let copy = dir.join("npu-cache-probe");
    std::fs::copy(env!("CARGO_BIN_EXE_npu-cache-probe"), &copy).expect("copy the probe binary");
    copy
}

pub fn probe_at(binary: &Path, root: &Path, kernel: &str, log: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(binary);
    cmd.arg(root).arg(kernel).arg(log).args(extra);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

pub fn spawn(mut cmd: Command) -> Child {
    cmd.spawn().expect("spawn npu-cache-probe")
}

/// Waits for a child without hanging the test run forever.
pub fn finish(mut child: Child) -> Output {
    wait_until("a probe process to exit", || {
        child.try_wait().expect("try_wait").is_some()
    });
    child.wait_with_output().expect("collect probe output")
}

/// Lines of the build log starting with `what` ("start" or "done").
pub fn log_count(log: &Path, what: &str) -> usize {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split(' ').next() == Some(what))
        .count()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns (entry dir, digest) printed by the probe.
pub fn entry_of(o: &Output) -> (String, String) {
    assert!(
        o.status.success(),
        "probe failed: {:?}\nstdout: {}\nstderr: {}",
        o.status,
        stdout(o),
        stderr(o)
    );
    let line = stdout(o);
    let (dir, digest) = line.trim_end().split_once('\t').expect("probe output");
    (dir.to_owned(), digest.to_owned())
}
