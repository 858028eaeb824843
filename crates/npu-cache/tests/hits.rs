//! A cache hit writes nothing to disk: no counter file, no access time, no lock left behind.
//! Counts are kept in memory and written when the handle goes (see `stats.rs`).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use npu_cache::{Cache, Inputs};

fn inputs(i: usize) -> Inputs {
    Inputs::new()
        .text("kernel_name", "axpy")
        .text("kernel_ir", format!("module {{ func.func @axpy{i}() }}"))
        .text("grid", "2,1,1")
}

/// Every path under `root` with what a write, a create, a delete, a rename or a chmod would
/// change: type, size, modification and status-change times.
fn snapshot(root: &Path) -> BTreeMap<String, (bool, u64, i64, i64, i64, i64)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let m = fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                todo.push(e.path());
            }
            let name = e.path().strip_prefix(root).unwrap().display().to_string();
            out.insert(
                name,
                (
                    m.is_dir(),
                    m.len(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec(),
                ),
            );
        }
    }
    let m = fs::metadata(root).unwrap();
    out.insert(
        ".".into(),
        (
            true,
            0,
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        ),
    );
    out
}

#[test]
fn a_cache_hit_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let builder = Cache::at(tmp.path()).unwrap();
        for i in 0..3 {
            builder
                .get_or_build(&inputs(i), |dir| {
                    fs::write(dir.join("aie.elf"), [i as u8; 64])
                })
                .unwrap();
        }
    }
    let cache = Cache::at(tmp.path()).unwrap();
    // A first hit may set up what the handle keeps for the process (it opens, never writes);
    // the clock then moves on, so that any later write shows in a time stamp.
    assert!(cache.lookup(&inputs(0)).unwrap().is_some());
    std::thread::sleep(std::time::Duration::from_millis(20));
    let before = snapshot(tmp.path());
    let mut others = Vec::new();
    for round in 0..50 {
        let entry = cache.lookup(&inputs(round % 3)).unwrap().expect("a hit");
        assert_eq!(
            fs::read(entry.file("aie.elf").unwrap()).unwrap(),
            [(round % 3) as u8; 64]
        );
        // A new handle's hit (another part of the program, or a new process) likewise.
        let other = Cache::at(tmp.path()).unwrap();
        assert!(other.lookup(&inputs(round % 3)).unwrap().is_some());
        others.push(other);
    }
    let after = snapshot(tmp.path());
    let changed: Vec<_> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .chain(before.keys().filter(|k| !after.contains_key(*k)).cloned())
        .collect();
    assert!(changed.is_empty(), "cache hits changed {changed:?}");
    // The counts were kept: they reach the file when the handle goes.
    drop(cache);
    drop(others);
    let stats = Cache::at(tmp.path()).unwrap().stats().unwrap();
    assert_eq!(stats.counters.hits, 101, "{:?}", stats.counters);
}
