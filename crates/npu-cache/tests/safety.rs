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
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
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
