//! The installed binary hands doctor, compile, run and test-examples to the console script
//! beside it (`triton-npu-python`) and runs every other command itself; checked with the real
//! binary linked into a folder beside a shell script standing in for the console script.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A `bin/` holding the binary and, when `script` is given, a `triton-npu-python` with that
/// body. The binary is hard-linked (copied across file systems): a symlink would resolve back
/// to cargo's target folder, where no script is.
fn install(root: &Path, script: Option<&str>) -> PathBuf {
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("triton-npu");
    let built = env!("CARGO_BIN_EXE_triton-npu");
    if std::fs::hard_link(built, &exe).is_err() {
        std::fs::copy(built, &exe).unwrap();
    }
    if let Some(body) = script {
        let path = bin.join("triton-npu-python");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    exe
}

fn run(exe: &Path, args: &[&str], root: &Path) -> Output {
    Command::new(exe)
        .args(args)
        .env("TRITON_CACHE_DIR", root.join("cache"))
        .output()
        .unwrap()
}

/// Records its arguments, one a line, and exits 7.
fn recording_script(root: &Path) -> String {
    format!(
        "for a; do echo \"$a\"; done > {}\nexit 7",
        root.join("args").display()
    )
}

#[test]
fn doctor_and_test_examples_are_handed_over_with_their_arguments_and_status() {
    let t = tempfile::tempdir().unwrap();
    let exe = install(t.path(), Some(&recording_script(t.path())));
    for args in [
        &["doctor", "--json"][..],
        &["test-examples", "some dir", "-v"],
    ] {
        let out = run(&exe, args, t.path());
        assert_eq!(out.status.code(), Some(7), "{args:?}");
        let got = std::fs::read_to_string(t.path().join("args")).unwrap();
        assert_eq!(got.lines().collect::<Vec<_>>(), args);
    }
}

#[test]
fn commands_without_python_never_start_the_script() {
    let t = tempfile::tempdir().unwrap();
    let exe = install(t.path(), Some(&recording_script(t.path())));
    for args in [
        &["--version"][..],
        &["hsaco", "--help"],
        &["cache", "stats"],
        &["transform", "list"],
        &["doctor", "--help"],
    ] {
        let out = run(&exe, args, t.path());
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(!t.path().join("args").exists(), "{args:?} ran the script");
    }
    // A usage error is the binary's own (clap's exit code 2), not the script's.
    let out = run(&exe, &["compile", "k.mlir"], t.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(!t.path().join("args").exists());
}

#[test]
fn without_the_script_the_binary_runs_doctor_itself() {
    let t = tempfile::tempdir().unwrap();
    let exe = install(t.path(), None);
    let out = run(&exe, &["doctor", "--json"], t.path());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let python = report["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["component"] == "python")
        .unwrap();
    assert_eq!(python["status"], "warn", "{python}");
}

#[test]
fn a_script_that_cannot_start_is_reported_and_the_binary_runs_the_command() {
    let t = tempfile::tempdir().unwrap();
    let exe = install(t.path(), None);
    // An interpreter that does not exist: exec fails with ENOENT.
    let script = t.path().join("bin/triton-npu-python");
    std::fs::write(&script, "#!/nonexistent/python\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run(&exe, &["doctor", "--json"], t.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot start"), "{stderr}");
    assert!(
        stderr.contains("running the command without Python"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["version"], env!("CARGO_PKG_VERSION"));
}
