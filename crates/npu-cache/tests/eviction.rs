//! Least-recently-used eviction, `clear`, and the protection of entries in use.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use npu_cache::{Cache, Entry, Inputs, Key};

fn inputs(name: &str) -> Inputs {
    Inputs::new().text("kernel_name", name)
}

fn build(cache: &Cache, name: &str, size: usize) -> Entry {
    cache
        .get_or_build(&inputs(name), |dir| {
            fs::write(dir.join("aie.elf"), vec![1u8; size])
        })
        .unwrap()
}

fn key(name: &str) -> Key {
    inputs(name).key()
}

fn present(cache: &Cache) -> Vec<String> {
    let mut names: Vec<String> = cache
        .list()
        .unwrap()
        .iter()
        .map(|i| i.kernel_name().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn entry_bytes(cache: &Cache, name: &str) -> u64 {
    let k = key(name);
    cache
        .list()
        .unwrap()
        .into_iter()
        .find(|i| i.key == k)
        .unwrap()
        .bytes
}

/// The last use is the later of the manifest's access and modification times.
fn set_last_use(cache: &Cache, name: &str, when: SystemTime) {
    let manifest = cache.entry_path(&key(name)).join("manifest.json");
    fs::File::options()
        .write(true)
        .open(manifest)
        .unwrap()
        .set_times(fs::FileTimes::new().set_accessed(when).set_modified(when))
        .unwrap();
}

#[test]
fn least_recently_used_goes_first() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    for name in ["a", "b", "c"] {
        drop(build(&cache, name, 1000));
    }
    // Use `a` again: `b` is now the least recently used.
    drop(cache.lookup(&inputs("a")).unwrap().unwrap());
    let order: Vec<_> = cache.list().unwrap().into_iter().map(|i| i.key).collect();
    assert_eq!(order, [key("b"), key("c"), key("a")]);

    let total: u64 = cache.list().unwrap().iter().map(|i| i.bytes).sum();
    let report = cache.evict_to(total - 1).unwrap();
    assert_eq!(report.removed, [key("b")]);
    assert_eq!(report.freed_bytes, total - report.remaining_bytes);
    assert_eq!(present(&cache), ["a", "c"]);

    let report = cache.evict_to(0).unwrap();
    assert_eq!(report.removed, [key("c"), key("a")]);
    assert_eq!(report.remaining_bytes, 0);
    assert!(present(&cache).is_empty());
    // The lock files of removed entries are gone too.
    assert_eq!(fs::read_dir(tmp.path().join("locks")).unwrap().count(), 0);
    assert_eq!(cache.stats().unwrap().counters.removed, 3);
}

#[test]
fn an_entry_in_use_is_never_evicted() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    drop(build(&cache, "old", 1000));
    let held = build(&cache, "held", 1000);
    set_last_use(
        &cache,
        "held",
        SystemTime::now() - Duration::from_secs(3600),
    );

    let report = cache.evict_to(0).unwrap();
    assert_eq!(report.in_use, [key("held")]);
    assert_eq!(report.removed, [key("old")]);
    assert_eq!(report.remaining_bytes, entry_bytes(&cache, "held"));
    assert_eq!(
        fs::read(held.file("aie.elf").unwrap()).unwrap(),
        vec![1u8; 1000]
    );
    drop(held);
    assert_eq!(cache.evict_to(0).unwrap().removed, [key("held")]);
}

#[test]
fn the_size_cap_is_kept_after_each_build() {
    let tmp = tempfile::tempdir().unwrap();
    let probe = Cache::at(tmp.path().join("probe")).unwrap();
    drop(build(&probe, "x", 10_000));
    let one = entry_bytes(&probe, "x");

    // Room for two entries and not three: entries of the same files differ by a few bytes
    // (their manifests record how long each build took).
    let cache = Cache::at(tmp.path().join("capped"))
        .unwrap()
        .with_max_bytes(Some(2 * one + one / 2));
    for name in ["p", "q"] {
        drop(build(&cache, name, 10_000));
    }
    assert_eq!(present(&cache), ["p", "q"]);
    drop(cache.lookup(&inputs("p")).unwrap());
    let r = build(&cache, "r", 10_000);
    assert_eq!(present(&cache), ["p", "r"], "q was least recently used");
    assert!(r.file("aie.elf").unwrap().exists());
}

#[test]
fn clear_respects_age_and_use() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    for name in ["fresh", "stale", "stale_held"] {
        drop(build(&cache, name, 100));
    }
    let two_hours_ago = SystemTime::now() - Duration::from_secs(7200);
    set_last_use(&cache, "stale", two_hours_ago);
    let held = cache.lookup(&inputs("stale_held")).unwrap().unwrap();
    set_last_use(&cache, "stale_held", two_hours_ago);

    let report = cache.clear(Some(Duration::from_secs(3600))).unwrap();
    assert_eq!(report.removed, [key("stale")]);
    assert_eq!(report.in_use, [key("stale_held")]);
    assert_eq!(present(&cache), ["fresh", "stale_held"]);

    drop(held);
    let report = cache.clear(None).unwrap();
    assert_eq!(report.removed.len(), 2);
    assert!(present(&cache).is_empty());
}

#[test]
fn clear_sweeps_leftovers_of_dead_builders() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    let k = key("dead");
    let leftover = tmp
        .path()
        .join("staging")
        .join(format!("{k}.999999.abcdefgh"));
    fs::create_dir_all(leftover.join("data")).unwrap();
    let trash = tmp
        .path()
        .join("trash")
        .join(format!("{k}.999999.zzzzzzzz"));
    fs::create_dir_all(&trash).unwrap();
    // A lookup that misses leaves nothing behind; a failed build leaves its build lock.
    let locks = || fs::read_dir(tmp.path().join("locks")).unwrap().count();
    assert!(cache.lookup(&inputs("never-built")).unwrap().is_none());
    assert_eq!(locks(), 0);
    let failed = cache.get_or_build(&inputs("fails"), |_| Err("no"));
    assert!(failed.is_err());
    let kept = build(&cache, "kept", 10);
    assert_eq!(locks(), 2);

    let report = cache.clear(None).unwrap();
    assert_eq!(report.in_use, [kept.key().clone()]);
    assert!(!leftover.exists());
    assert!(!trash.exists());
    // Only the lock of the entry still in use remains.
    assert_eq!(locks(), 1);
    drop(kept);
}

#[test]
fn an_evicted_entry_is_rebuilt_on_demand() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    drop(build(&cache, "k", 10));
    cache.evict_to(0).unwrap();
    assert!(cache.lookup(&inputs("k")).unwrap().is_none());
    let entry = build(&cache, "k", 10);
    assert!(Path::new(&entry.file("aie.elf").unwrap()).exists());
}
