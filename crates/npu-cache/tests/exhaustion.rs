//! A cache that cannot open its files for want of file descriptors says so: the errno, the
//! limit and its value, and what to raise — not a bare OS error.

use std::path::Path;

use npu_cache::{Cache, Inputs};

/// Set in the child process: the cache root it uses.
const CHILD_ROOT: &str = "NPU_CACHE_TEST_EMFILE_ROOT";

fn inputs() -> Inputs {
    Inputs::new()
        .text("kernel_name", "axpy")
        .text("kernel_ir", "module { func.func @axpy() }")
        .text("grid", "2,1,1")
}

fn build(dir: &Path) -> std::io::Result<()> {
    std::fs::write(dir.join("aie.elf"), vec![7u8; 100])
}

#[test]
fn running_out_of_file_descriptors_names_the_limit() {
    if let Some(root) = std::env::var_os(CHILD_ROOT) {
        // The child: an existing entry, a new cache handle, and no descriptor left.
        npu_process::set_open_file_limit(0, 4096).unwrap();
        let looked_up = Cache::at(Path::new(&root)).and_then(|c| c.lookup(&inputs()).map(drop));
        match looked_up {
            Ok(()) => println!("\nLOOKED UP"),
            Err(e) => println!("\nERROR: {}", e.to_string().replace('\n', " ")),
        }
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    Cache::at(tmp.path())
        .unwrap()
        .get_or_build(&inputs(), build)
        .unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "running_out_of_file_descriptors_names_the_limit",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ROOT, tmp.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("ERROR: "))
        .unwrap_or_else(|| panic!("no error in:\n{text}"));
    for want in [
        "Too many open files",
        "EMFILE",
        "RLIMIT_NOFILE",
        "`ulimit -n`: 0",
        "ulimit -n 4096",
    ] {
        assert!(line.contains(want), "{want:?} missing in {line}");
    }
}
