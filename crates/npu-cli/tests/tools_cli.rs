//! How `triton-npu compile` starts and stops tools, through the real binary, with shell
//! scripts standing in for the toolchain: Ctrl-C and SIGTERM stop a compile with its tools,
//! and tools are never taken from the current directory through `PATH`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KERNEL_IR: &str = "module {\n  func.func @k(%arg0: memref<*xf32>) {\n    return\n  }\n}\n";

fn script(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A toolchain whose `air-opt` answers `--version`, then on real work records that it ran,
/// starts a helper, writes both pids to `<root>/pids` and hangs.
fn hanging_toolchain(bin: &Path, root: &Path) {
    let body = format!(
        "[ \"$1\" = --version ] && {{ echo \"$0 version 1\"; exit 0; }}\n\
         touch {ran}\n\
         sleep 1000 & echo $! > {p}.tmp; echo $$ >> {p}.tmp; mv {p}.tmp {p}; sleep 1000",
        ran = root.join("ran").display(),
        p = root.join("pids").display()
    );
    script(&bin.join("air-opt"), &body);
    script(&bin.join("aircc"), &body);
}

fn peano(root: &Path) -> PathBuf {
    let dir = root.join("peano");
    script(
        &dir.join("bin/llc"),
        "echo 'LLVM version 20'; echo '  aie2 - AIE2'; echo '  aie2p - AIE2P'",
    );
    dir
}

/// `triton-npu compile` of a trivial kernel in `cwd`, with a clean environment plus `env`.
fn compile(root: &Path, cwd: &Path, env: &[(&str, String)]) -> Command {
    let input = root.join("k.mlir");
    std::fs::write(&input, KERNEL_IR).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_triton-npu"));
    cmd.args([
        "compile",
        input.to_str().unwrap(),
        "--kernel",
        "k",
        "--grid",
        "1",
    ])
    .args(["--target", "npu2", "--runtime", "xrt", "-o"])
    .arg(root.join("out"))
    .current_dir(cwd)
    .env_clear()
    .env("HOME", root)
    .env("TMPDIR", root)
    .env("PEANO_INSTALL_DIR", peano(root));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn wait_for(path: &Path) {
    let until = Instant::now() + Duration::from_secs(60);
    while !path.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(path.exists(), "{} never appeared", path.display());
}

#[test]
fn ctrl_c_and_sigterm_stop_a_compile_and_kill_its_tools() {
    for (signal, code, name) in [
        (libc::SIGINT, 130, "SIGINT"),
        (libc::SIGTERM, 143, "SIGTERM"),
    ] {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let bin = r.join("air/bin");
        hanging_toolchain(&bin, r);
        let child = compile(
            r,
            r,
            &[
                ("MLIR_AIR_INSTALL_DIR", r.join("air").display().to_string()),
                ("PATH", "/usr/bin:/bin".into()),
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        wait_for(&r.join("pids"));
        let started = Instant::now();
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        let signal = rustix::process::Signal::from_named_raw(signal).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name} took {:?}",
            started.elapsed()
        );
        assert_eq!(out.status.code(), Some(code), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("interrupted by {name}")),
            "{stderr}"
        );
        assert!(stderr.contains("kernel k"), "{stderr}");
        let pids: Vec<i32> = std::fs::read_to_string(r.join("pids"))
            .unwrap()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect();
        let until = Instant::now() + Duration::from_secs(10);
        while !pids.iter().all(|p| npu_process::group::has_ended(*p)) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        for pid in pids {
            assert!(
                npu_process::group::has_ended(pid),
                "{name}: tool process {pid} survived"
            );
        }
        // Nothing of the work directory is left behind.
        let left: Vec<_> = std::fs::read_dir(r)
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("triton-npu-work-")
            })
            .collect();
        assert!(left.is_empty(), "{name}: {left:?}");
    }
}

#[test]
fn tools_in_the_current_directory_are_never_run_through_path() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let cwd = r.join("checkout");
    hanging_toolchain(&cwd, r);
    hanging_toolchain(&cwd.join("bin"), r);
    // `.`, an empty entry and a relative one all name the directory the tools are in.
    for path in [".", "", "/usr/bin::/bin", "bin:/usr/bin"] {
        let out = compile(r, &cwd, &[("PATH", path.into())]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "PATH={path:?}: {stderr}");
        assert!(
            stderr.contains("air-opt, aircc not found"),
            "PATH={path:?}: {stderr}"
        );
        assert!(
            !r.join("ran").exists(),
            "PATH={path:?} ran a tool from {}",
            cwd.display()
        );
    }
}
