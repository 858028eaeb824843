//! `triton-npu cache …` through the real binary, on a cache in a temporary directory.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use npu_cache::{Cache, Inputs};

fn run(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_triton-npu"))
        .arg("cache")
        .args(args)
        .env("AMD_TRITON_NPU_CACHE_DIR", root)
        .env_remove("AMD_TRITON_NPU_CACHE_MAX_BYTES")
        .output()
        .expect("run triton-npu")
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn inputs(kernel: &str) -> Inputs {
    Inputs::new()
        .text("kernel_name", kernel)
        .text("kernel_ir", format!("module {{ func.func @{kernel}() }}"))
}

/// A cache with entries for `kernels` (2000 + 4 bytes each).
fn populated(kernels: &[&str]) -> (tempfile::TempDir, Cache) {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path().join("cache")).unwrap();
    for k in kernels {
        cache
            .get_or_build(&inputs(k), |dir| {
                fs::write(dir.join("aie.elf"), vec![9u8; 2000])?;
                fs::write(dir.join("insts.bin"), [0u8; 4])
            })
            .unwrap();
    }
    (tmp, cache)
}

#[test]
fn ls_shows_one_line_per_entry() {
    let (_tmp, cache) = populated(&["add_kernel", "relu_kernel"]);
    let o = run(cache.root(), &["ls"]);
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "header and two entries:\n{text}");
    assert!(lines[0].starts_with("KEY"));
    for kernel in ["add_kernel", "relu_kernel"] {
        let key = inputs(kernel).key();
        let line = lines.iter().find(|l| l.starts_with(key.as_str())).unwrap();
        assert!(line.contains(kernel), "{line}");
        assert!(line.contains("KiB"), "{line}");
        assert!(line.trim_end().ends_with('s'), "age in seconds: {line}");
    }
    assert!(err(&o).contains("2 entries"), "{}", err(&o));
}

#[test]
fn stats_counts_entries_hits_and_misses() {
    let (_tmp, cache) = populated(&["a", "b"]);
    cache.lookup(&inputs("a")).unwrap().unwrap();
    cache.lookup(&inputs("a")).unwrap().unwrap();
    cache.lookup(&inputs("c")).unwrap();
    // A handle counts hits in memory and writes them after a build, when dropped or at exit.
    cache.flush_counters();
    let o = run(cache.root(), &["stats"]);
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    assert!(text.contains("entries:  2\n"), "{text}");
    assert!(text.contains("hits:     2\n"), "{text}");
    assert!(
        text.contains("misses:   3\n"),
        "two builds and one failed lookup:\n{text}"
    );
    assert!(text.contains(&cache.root().display().to_string()), "{text}");
    assert!(text.contains("no limit"), "{text}");
}

#[test]
fn verify_reports_damaged_entries() {
    let (_tmp, cache) = populated(&["good", "bad"]);
    let o = run(cache.root(), &["verify"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", out(&o), err(&o));
    assert!(out(&o).contains("verified 2 entries: all sound"));

    let bad = inputs("bad").key();
    let elf = cache.entry_path(&bad).join("data/aie.elf");
    let mut bytes = fs::read(&elf).unwrap();
    bytes[0] ^= 1;
    fs::write(&elf, bytes).unwrap();

    let o = run(cache.root(), &["verify"]);
    assert_eq!(o.status.code(), Some(1));
    let text = out(&o);
    assert!(text.contains("1 of 2 entries are damaged"), "{text}");
    assert!(
        text.contains(&format!("{bad}: data/aie.elf does not match")),
        "{text}"
    );
    assert!(!text.contains(inputs("good").key().as_str()), "{text}");
}

#[test]
fn clear_needs_yes() {
    let (_tmp, cache) = populated(&["a", "b"]);
    let o = run(cache.root(), &["clear"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("without --yes"), "{}", err(&o));
    assert!(err(&o).contains("(2 entries"), "{}", err(&o));
    assert_eq!(cache.list().unwrap().len(), 2, "nothing removed");

    let o = run(cache.root(), &["clear", "--yes"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("removed 2 entries"), "{}", out(&o));
    assert!(cache.list().unwrap().is_empty());
}

#[test]
fn clear_older_than_keeps_recent_entries() {
    let (_tmp, cache) = populated(&["recent", "old"]);
    let manifest = cache.entry_path(&inputs("old").key()).join("manifest.json");
    fs::File::options()
        .write(true)
        .open(manifest)
        .unwrap()
        .set_times({
            let then = SystemTime::now() - Duration::from_secs(3 * 86_400);
            fs::FileTimes::new().set_accessed(then).set_modified(then)
        })
        .unwrap();

    let o = run(cache.root(), &["clear", "--older-than", "2d", "--yes"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("removed 1 entries"), "{}", out(&o));
    let left: Vec<_> = cache.list().unwrap().into_iter().map(|i| i.key).collect();
    assert_eq!(left, [inputs("recent").key()]);
}

#[test]
fn clear_keeps_entries_in_use() {
    let (_tmp, cache) = populated(&["held"]);
    let held = cache.lookup(&inputs("held")).unwrap().unwrap();
    let o = run(cache.root(), &["clear", "--yes"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("kept 1 entries in use"), "{}", out(&o));
    assert!(held.file("aie.elf").unwrap().exists());
}

#[test]
fn failed_compiles_are_listed_and_cleared() {
    let (_tmp, cache) = populated(&[]);
    let kept = cache.failed_dir("add_kernel").unwrap();
    fs::write(kept.join("aircc.log"), "error: boom").unwrap();
    let o = run(cache.root(), &["failed"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains(kept.to_str().unwrap()), "{}", out(&o));
    assert!(out(&o).contains("add_kernel") && out(&o).contains("aircc.log"));
    assert!(err(&o).contains("1 failed compiles kept"), "{}", err(&o));
    let o = run(cache.root(), &["clear", "--failed"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(kept.exists());
    let o = run(cache.root(), &["clear", "--failed", "--yes"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("removed the logs of 1 failed compiles"));
    assert!(!kept.exists());
}

#[test]
fn clear_removes_a_symlinked_shard_without_following_it() {
    let (tmp, cache) = populated(&["a"]);
    let outside = tmp.path().join("outside");
    fs::create_dir_all(outside.join("ffff")).unwrap();
    fs::write(outside.join("ffff/precious"), b"keep").unwrap();
    let link = cache.root().join("entries/ff");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let o = run(cache.root(), &["clear", "--yes"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("(not followed)"), "{}", out(&o));
    assert!(out(&o).contains("removed 1 entries"), "{}", out(&o));
    assert!(fs::symlink_metadata(&link).is_err());
    assert_eq!(fs::read(outside.join("ffff/precious")).unwrap(), b"keep");
}

#[test]
fn a_bad_duration_is_a_usage_error() {
    let (_tmp, cache) = populated(&[]);
    let o = run(cache.root(), &["clear", "--older-than", "2 weeks", "--yes"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("e.g. 30s, 10m, 2h, 7d"), "{}", err(&o));
}

#[test]
fn an_unsafe_cache_dir_is_reported() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("shared");
    fs::create_dir(&root).unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).unwrap();
    let o = run(&root, &["ls"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("refusing to use"), "{}", err(&o));
    assert!(err(&o).contains(root.to_str().unwrap()), "{}", err(&o));
}
