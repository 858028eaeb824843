//! The cache decides what runs on the NPU: it must be private to its user.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use common::*;
use npu_cache::{Cache, CacheError, Inputs};
use npu_target::{Config, Overrides};

/// uid/gid of `nobody` on Debian-like systems.
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn config(pairs: &[(&str, &str)]) -> Config {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::load(
        &|name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        },
        &Overrides::default(),
    )
    .unwrap()
}

#[test]
fn open_follows_the_configuration_and_creates_private_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let cache = Cache::open(&config(&[("HOME", home.to_str().unwrap())])).unwrap();
    let root = home.join(".triton/cache/npu");
    assert_eq!(cache.root(), root);
    assert_eq!(cache.max_bytes(), None);
    for dir in ["", "entries", "staging", "trash", "locks"] {
        assert_eq!(mode(&root.join(dir)), 0o700, "{dir}");
    }

    let triton = tmp.path().join("triton-cache");
    let cache = Cache::open(&config(&[
        ("HOME", home.to_str().unwrap()),
        ("TRITON_CACHE_DIR", triton.to_str().unwrap()),
        ("AMD_TRITON_NPU_CACHE_MAX_BYTES", "1M"),
    ]))
    .unwrap();
    assert_eq!(cache.root(), triton.join("npu"));
    assert_eq!(cache.max_bytes(), Some(1 << 20));

    let own = tmp.path().join("own");
    let cache = Cache::open(&config(&[
        ("TRITON_CACHE_DIR", triton.to_str().unwrap()),
        ("AMD_TRITON_NPU_CACHE_DIR", own.to_str().unwrap()),
    ]))
    .unwrap();
    assert_eq!(cache.root(), own);

    let err = Cache::open(&config(&[])).unwrap_err();
    assert!(matches!(err, CacheError::NoLocation), "{err}");
}

#[test]
fn entries_are_private() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path().join("c")).unwrap();
    let entry = cache
        .get_or_build(&Inputs::new().text("kernel_name", "k"), |dir| {
            // Builds often run with umask 002 and leave group-writable files.
            fs::write(dir.join("aie.elf"), b"elf")?;
            fs::set_permissions(dir.join("aie.elf"), fs::Permissions::from_mode(0o664))?;
            fs::write(dir.join("tool"), b"#!/bin/sh\n")?;
            fs::set_permissions(dir.join("tool"), fs::Permissions::from_mode(0o775))
        })
        .unwrap();
    assert_eq!(mode(&entry.file("aie.elf").unwrap()), 0o600);
    assert_eq!(mode(&entry.file("tool").unwrap()), 0o700);
    assert!(entry.manifest().file("tool").unwrap().executable);
    assert_eq!(mode(entry.dir()), 0o700);
    assert_eq!(mode(entry.dir().parent().unwrap()), 0o700);
}

#[test]
fn a_root_writable_by_others_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("c");
    fs::create_dir(&root).unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).unwrap();
    let err = Cache::at(&root).unwrap_err();
    assert!(matches!(err, CacheError::Unsafe { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(root.to_str().unwrap()), "{msg}");
    assert!(msg.contains("group and others (mode 0777)"), "{msg}");
    assert!(msg.contains("chmod 700"), "{msg}");
    assert!(err.is_permission());
}

#[test]
fn an_entry_writable_by_others_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    let inputs = Inputs::new().text("kernel_name", "k");
    let data = cache
        .get_or_build(&inputs, |dir| fs::write(dir.join("a"), b"a"))
        .unwrap()
        .dir()
        .to_owned();
    fs::set_permissions(data.join("a"), fs::Permissions::from_mode(0o666)).unwrap();
    let err = cache.lookup(&inputs).unwrap_err();
    assert!(matches!(err, CacheError::Unsafe { .. }), "{err:?}");
    assert!(err.to_string().contains("others (mode 0666)"), "{err}");
    // The advice names the entry to remove (the directory that holds data/).
    let entry = data.parent().unwrap();
    assert!(
        err.to_string()
            .contains(&format!("rm -r '{}'", entry.display())),
        "{err}"
    );
    // get_or_build refuses as well rather than silently replacing it.
    let err = cache
        .get_or_build(&inputs, |dir| fs::write(dir.join("a"), b"a"))
        .unwrap_err();
    assert!(matches!(err, CacheError::Unsafe { .. }), "{err:?}");
}

#[test]
fn a_root_owned_by_another_user_is_refused() {
    if !is_root() {
        eprintln!("skipped: needs root to give a directory to another user");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("c");
    fs::create_dir(&root).unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&root, Some(NOBODY), Some(NOBODY)).unwrap();
    let err = Cache::at(&root).unwrap_err();
    assert!(matches!(err, CacheError::Unsafe { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("owned by uid {NOBODY}, not by you (uid 0)")),
        "{msg}"
    );
    assert!(msg.contains("AMD_TRITON_NPU_CACHE_DIR"), "{msg}");
}

#[test]
fn an_entry_owned_by_another_user_is_refused() {
    if !is_root() {
        eprintln!("skipped: needs root to give a directory to another user");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    let inputs = Inputs::new().text("kernel_name", "k");
    let data = cache
        .get_or_build(&inputs, |dir| fs::write(dir.join("a"), b"a"))
        .unwrap()
        .dir()
        .to_owned();
    std::os::unix::fs::chown(data.parent().unwrap(), Some(NOBODY), None).unwrap();
    let err = cache.lookup(&inputs).unwrap_err();
    assert!(err.to_string().contains("owned by uid 65534"), "{err}");
}

#[test]
fn a_read_only_root_gives_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ro");
    fs::create_dir(&root).unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o500)).unwrap();
    let message = if is_root() {
        // Root may write anywhere; run the probe as `nobody`, owner of a read-only root.
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(&root, Some(NOBODY), Some(NOBODY)).unwrap();
        let binary = probe_copy_in(tmp.path());
        let mut cmd = probe_at(&binary, &root, "k", &tmp.path().join("log"), &[]);
        std::os::unix::process::CommandExt::uid(&mut cmd, NOBODY);
        std::os::unix::process::CommandExt::gid(&mut cmd, NOBODY);
        let out = finish(spawn(cmd));
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        stderr(&out)
    } else {
        Cache::at(&root).unwrap_err().to_string()
    };
    assert!(message.contains(root.to_str().unwrap()), "{message}");
    assert!(message.contains("Permission denied"), "{message}");
    assert!(
        message.contains("set AMD_TRITON_NPU_CACHE_DIR"),
        "{message}"
    );
    assert_eq!(
        fs::read_dir(&root).unwrap().count(),
        0,
        "nothing was created"
    );
}

#[test]
fn a_root_that_is_a_file_gives_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("file");
    fs::write(&root, b"").unwrap();
    let err = Cache::at(&root).unwrap_err();
    assert!(matches!(err, CacheError::Unusable { .. }), "{err:?}");
    assert!(err.to_string().contains(root.to_str().unwrap()));
}

#[test]
fn lock_files_are_private() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    let inputs = Inputs::new();
    let _e = cache
        .get_or_build(&inputs, |dir| fs::write(dir.join("a"), b"a"))
        .unwrap();
    for item in fs::read_dir(tmp.path().join("locks")).unwrap() {
        let meta = item.unwrap().metadata().unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
    }
}

#[test]
fn a_symlinked_root_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let err = Cache::at(&link).unwrap_err();
    assert!(matches!(err, CacheError::Unsafe { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("it is a symlink (to "), "{msg}");
    assert!(
        msg.contains("set AMD_TRITON_NPU_CACHE_DIR to the real directory"),
        "{msg}"
    );
    assert_eq!(
        fs::read_dir(&real).unwrap().count(),
        0,
        "nothing created through the link"
    );
}

/// A shard (entries/<2 hex digits>) that is a symlink is refused by lookups and removed by
/// `clear` without following it: `clear` once deleted what such a link pointed to.
#[test]
fn a_symlinked_shard_is_refused_and_clear_never_follows_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path().join("c")).unwrap();
    let inputs = Inputs::new().text("kernel_name", "k");
    let key = inputs.key();
    // Outside the cache: a directory that looks like the shard, with an "entry" in it.
    let outside = tmp.path().join("outside");
    let victim = outside.join(key.as_str());
    fs::create_dir_all(victim.join("data")).unwrap();
    fs::write(victim.join("manifest.json"), b"{}").unwrap();
    fs::write(victim.join("data/precious"), b"keep me").unwrap();
    let shard = tmp.path().join("c/entries").join(&key.as_str()[..2]);
    std::os::unix::fs::symlink(&outside, &shard).unwrap();

    let err = cache.lookup(&inputs).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("it is a symlink"), "{msg}");
    assert!(msg.contains("triton-npu cache clear --yes"), "{msg}");
    let err = cache
        .get_or_build(&inputs, |dir| fs::write(dir.join("a"), b"a"))
        .unwrap_err();
    assert!(matches!(err, CacheError::Unsafe { .. }), "{err:?}");

    assert!(
        cache.list().unwrap().is_empty(),
        "nothing listed through the link"
    );
    let report = cache.clear(None).unwrap();
    assert_eq!(report.strays, std::slice::from_ref(&shard));
    assert!(report.removed.is_empty());
    assert!(fs::symlink_metadata(&shard).is_err(), "the link is gone");
    assert_eq!(fs::read(victim.join("data/precious")).unwrap(), b"keep me");
    // And the cache works again.
    cache
        .get_or_build(&inputs, |dir| fs::write(dir.join("a"), b"a"))
        .unwrap();
}

#[test]
fn a_shard_writable_by_others_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    let inputs = Inputs::new().text("kernel_name", "k");
    let data = cache
        .get_or_build(&inputs, |dir| fs::write(dir.join("a"), b"a"))
        .unwrap()
        .dir()
        .to_owned();
    let shard = data.parent().unwrap().parent().unwrap().to_owned();
    assert_eq!(mode(&shard), 0o700, "shards are created private");
    fs::set_permissions(&shard, fs::Permissions::from_mode(0o777)).unwrap();
    let err = cache.lookup(&inputs).unwrap_err();
    assert!(matches!(err, CacheError::Unsafe { .. }), "{err:?}");
    assert!(
        err.to_string().contains("group and others (mode 0777)"),
        "{err}"
    );
    assert!(err.to_string().contains(shard.to_str().unwrap()), "{err}");
}

#[test]
fn a_lock_file_others_can_write_or_that_belongs_to_another_user_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    let inputs = Inputs::new().text("kernel_name", "k");
    let lock = tmp
        .path()
        .join("locks")
        .join(format!("{}.lock", inputs.key()));
    fs::write(&lock, b"").unwrap();
    fs::set_permissions(&lock, fs::Permissions::from_mode(0o646)).unwrap();
    let err = cache
        .get_or_build(&inputs, |dir| fs::write(dir.join("a"), b"a"))
        .unwrap_err();
    assert!(matches!(err, CacheError::Unsafe { .. }), "{err:?}");
    assert!(err.to_string().contains("others (mode 0646)"), "{err}");
    if is_root() {
        fs::set_permissions(&lock, fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&lock, Some(NOBODY), Some(NOBODY)).unwrap();
        let err = cache
            .get_or_build(&inputs, |dir| fs::write(dir.join("a"), b"a"))
            .unwrap_err();
        assert!(err.to_string().contains("owned by uid 65534"), "{err}");
    }
}

/// Every file and directory of the cache, with what a write would change.
fn snapshot(root: &Path) -> Vec<(std::path::PathBuf, i64, i64, i64, i64, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let m = fs::symlink_metadata(&path).unwrap();
        out.push((
            path.clone(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
            m.size(),
        ));
        if m.is_dir() {
            for item in fs::read_dir(&path).unwrap() {
                stack.push(item.unwrap().path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_cache_hit_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("c");
    let inputs = Inputs::new().text("kernel_name", "k");
    {
        let cache = Cache::at(&root).unwrap();
        drop(
            cache
                .get_or_build(&inputs, |dir| fs::write(dir.join("aie.elf"), b"elf"))
                .unwrap(),
        );
    }
    // Let the clock move on, so that any write would show in a time stamp.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let before = snapshot(&root);
    let cache = Cache::at(&root).unwrap();
    for _ in 0..3 {
        let hit = cache
            .get_or_build(&inputs, |_| -> std::io::Result<()> { panic!("must hit") })
            .unwrap();
        assert_eq!(&*hit.bytes("aie.elf").unwrap(), b"elf");
        assert!(cache.lookup(&inputs).unwrap().is_some());
    }
    assert_eq!(snapshot(&root), before, "a hit changed the cache on disk");
    // The hits are counted in memory, and written when the handle goes.
    assert_eq!(cache.stats().unwrap().counters.hits, 6);
    drop(cache);
    assert_eq!(Cache::at(&root).unwrap().stats().unwrap().counters.hits, 6);
}
