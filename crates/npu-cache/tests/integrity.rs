//! Damaged entries are never served: they are moved aside and rebuilt.

use std::cell::Cell;
use std::fs;
use std::path::Path;

use npu_cache::{Cache, CacheError, Inputs};

fn inputs() -> Inputs {
    Inputs::new()
        .text("kernel_name", "axpy")
        .text("kernel_ir", "module { func.func @axpy() }")
        .text("grid", "2,1,1")
}

/// A build that writes two known files and counts how often it ran.
fn build<'a>(runs: &'a Cell<usize>) -> impl FnOnce(&Path) -> std::io::Result<()> + 'a {
    move |dir| {
        runs.set(runs.get() + 1);
        fs::write(dir.join("aie.elf"), vec![7u8; 1000])?;
        fs::create_dir(dir.join("sub"))?;
        fs::write(dir.join("sub/insts.bin"), [1u8, 2, 3, 4])
    }
}

/// Builds the entry, damages it with `damage`, then asks a fresh handle (a new process's
/// view) for it: the build must run again and the original content come back.
fn rebuilt_after(damage: impl FnOnce(&Path, &Path)) {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Cell::new(0);
    let first = Cache::at(tmp.path()).unwrap();
    let entry = first.get_or_build(&inputs(), build(&runs)).unwrap();
    let entry_dir = entry.dir().parent().unwrap().to_owned();
    let data = entry.dir().to_owned();
    drop(entry);
    damage(&entry_dir, &data);

    let second = Cache::at(tmp.path()).unwrap();
    assert!(
        second.lookup(&inputs()).unwrap().is_none(),
        "damaged entry served"
    );
    let entry = second.get_or_build(&inputs(), build(&runs)).unwrap();
    assert_eq!(runs.get(), 2);
    assert_eq!(
        fs::read(entry.file("aie.elf").unwrap()).unwrap(),
        vec![7u8; 1000]
    );
    assert_eq!(
        fs::read(entry.file("sub/insts.bin").unwrap()).unwrap(),
        [1, 2, 3, 4]
    );
    assert_eq!(fs::read_dir(tmp.path().join("trash")).unwrap().count(), 0);
    assert_eq!(second.stats().unwrap().counters.damaged, 1);
    drop(entry);
    // And the rebuilt entry is served as is.
    let third = Cache::at(tmp.path()).unwrap();
    assert!(third.lookup(&inputs()).unwrap().is_some());
}

#[test]
fn truncated_file() {
    rebuilt_after(|_, data| {
        let f = fs::OpenOptions::new()
            .write(true)
            .open(data.join("aie.elf"))
            .unwrap();
        f.set_len(500).unwrap();
    });
}

#[test]
fn deleted_file() {
    rebuilt_after(|_, data| fs::remove_file(data.join("sub/insts.bin")).unwrap());
}

#[test]
fn flipped_byte() {
    rebuilt_after(|_, data| {
        let path = data.join("aie.elf");
        let mut bytes = fs::read(&path).unwrap();
        bytes[999] ^= 0x80;
        fs::write(&path, bytes).unwrap();
    });
}

#[test]
fn garbage_manifest() {
    rebuilt_after(|entry, _| fs::write(entry.join("manifest.json"), b"{\"schema\": 1, ").unwrap());
}

#[test]
fn missing_manifest() {
    rebuilt_after(|entry, _| fs::remove_file(entry.join("manifest.json")).unwrap());
}

#[test]
fn manifest_of_another_key() {
    rebuilt_after(|entry, _| {
        let path = entry.join("manifest.json");
        let text = fs::read_to_string(&path).unwrap();
        let key = entry.file_name().unwrap().to_str().unwrap();
        fs::write(&path, text.replace(key, &"0".repeat(64))).unwrap();
    });
}

/// A file the manifest does not list is never handed out (neither `bytes` nor `file` know
/// it), so a lookup serves the entry; `verify` reports it.
#[test]
fn unlisted_file_is_never_served_and_verify_reports_it() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Cell::new(0);
    let cache = Cache::at(tmp.path()).unwrap();
    let data = cache
        .get_or_build(&inputs(), build(&runs))
        .unwrap()
        .dir()
        .to_owned();
    fs::write(data.join("intruder.so"), b"x").unwrap();
    let entry = cache.lookup(&inputs()).unwrap().unwrap();
    assert_eq!(entry.file("intruder.so"), None);
    assert_eq!(entry.bytes("intruder.so"), None);
    let report = cache.verify_all().unwrap();
    assert_eq!(
        report[0].problem.as_deref(),
        Some("data/intruder.so is not listed in the manifest")
    );
}

#[test]
fn a_file_where_the_entry_directory_should_be_is_repaired() {
    rebuilt_after(|entry, _| {
        fs::remove_dir_all(entry).unwrap();
        fs::write(entry, b"not a directory").unwrap();
    });
}

#[test]
fn a_symlink_where_the_entry_directory_should_be_is_repaired_without_following_it() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("keep"), b"precious").unwrap();
    let target = outside.path().to_owned();
    rebuilt_after(move |entry, _| {
        fs::remove_dir_all(entry).unwrap();
        std::os::unix::fs::symlink(&target, entry).unwrap();
    });
    assert_eq!(fs::read(outside.path().join("keep")).unwrap(), b"precious");
}

#[test]
fn checksums_are_checked_on_every_lookup_of_one_handle() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Cell::new(0);
    let cache = Cache::at(tmp.path()).unwrap();
    let data = cache
        .get_or_build(&inputs(), build(&runs))
        .unwrap()
        .dir()
        .to_owned();
    assert!(cache.lookup(&inputs()).unwrap().is_some());
    // Same size, one byte different: only the checksum can tell, and this handle has
    // checked the entry before.
    let mut bytes = fs::read(data.join("aie.elf")).unwrap();
    bytes[0] ^= 1;
    fs::write(data.join("aie.elf"), &bytes).unwrap();
    assert!(cache.lookup(&inputs()).unwrap().is_none());
    cache.get_or_build(&inputs(), build(&runs)).unwrap();
    assert_eq!(runs.get(), 2);
}

/// The bytes an entry hands out are the bytes that were checked, even if the file on disk
/// changes afterwards.
#[test]
fn served_bytes_are_the_checked_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Cell::new(0);
    let cache = Cache::at(tmp.path()).unwrap();
    drop(cache.get_or_build(&inputs(), build(&runs)).unwrap());
    let entry = cache.lookup(&inputs()).unwrap().unwrap();
    let path = entry.file("aie.elf").unwrap();
    fs::write(&path, vec![9u8; 1000]).unwrap();
    assert_eq!(&*entry.bytes("aie.elf").unwrap(), &vec![7u8; 1000][..]);
    assert_eq!(&*entry.bytes("sub/insts.bin").unwrap(), &[1, 2, 3, 4]);
    let mut entry = entry;
    entry.release_contents();
    assert_eq!(entry.bytes("aie.elf"), None);
    assert!(entry.file("aie.elf").is_some());
}

#[test]
fn missing_data_dir() {
    rebuilt_after(|_, data| fs::remove_dir_all(data).unwrap());
}

#[test]
fn sizes_are_checked_on_every_lookup_of_one_handle() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Cell::new(0);
    let cache = Cache::at(tmp.path()).unwrap();
    let data = cache
        .get_or_build(&inputs(), build(&runs))
        .unwrap()
        .dir()
        .to_owned();
    assert!(cache.lookup(&inputs()).unwrap().is_some());
    fs::write(data.join("aie.elf"), b"short").unwrap();
    assert!(cache.lookup(&inputs()).unwrap().is_none());
    cache.get_or_build(&inputs(), build(&runs)).unwrap();
    assert_eq!(runs.get(), 2);
}

#[test]
fn a_failed_build_publishes_nothing_and_returns_its_error() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    let err = cache
        .get_or_build(&inputs(), |dir| {
            fs::write(dir.join("aie.elf"), b"half").unwrap();
            Err("aircc exited with status 1")
        })
        .unwrap_err();
    match &err {
        CacheError::Build { source, label, .. } => {
            assert_eq!(*source, "aircc exited with status 1");
            assert!(label.contains("kernel axpy"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("aircc exited with status 1"));
    assert!(cache.lookup(&inputs()).unwrap().is_none());
    assert!(cache.list().unwrap().is_empty());
    assert_eq!(fs::read_dir(tmp.path().join("staging")).unwrap().count(), 0);
}

#[test]
fn a_panicking_build_leaves_nothing_published_and_the_next_build_succeeds() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = cache.get_or_build(&inputs(), |_dir| -> Result<(), String> {
            panic!("build step bug")
        });
    }));
    assert!(panicked.is_err());
    assert!(cache.lookup(&inputs()).unwrap().is_none());
    let runs = Cell::new(0);
    cache.get_or_build(&inputs(), build(&runs)).unwrap();
    assert_eq!(runs.get(), 1);
}

#[test]
fn symlinks_in_the_output_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path().join("c")).unwrap();
    let err = cache
        .get_or_build(&inputs(), |dir| {
            std::os::unix::fs::symlink("/etc/passwd", dir.join("aie.elf"))
        })
        .unwrap_err();
    assert!(matches!(err, CacheError::BadOutput { .. }), "{err:?}");
    assert!(err.to_string().contains("symlink"), "{err}");
    assert!(cache.list().unwrap().is_empty());
}

#[test]
fn the_manifest_records_files_inputs_and_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    let runs = Cell::new(0);
    let inputs = inputs().text("tool.aircc", "aircc 0.0.1+d0e522b");
    let entry = cache.get_or_build(&inputs, build(&runs)).unwrap();
    let m = entry.manifest();
    assert_eq!(m.key, entry.key().as_str());
    assert_eq!(m.kernel_name(), Some("axpy"));
    assert_eq!(m.input_preview("grid"), Some("2,1,1"));
    assert_eq!(m.tools["aircc"], "aircc 0.0.1+d0e522b");
    let paths: Vec<_> = m.files.iter().map(|f| (f.path.as_str(), f.size)).collect();
    assert_eq!(paths, [("aie.elf", 1000), ("sub/insts.bin", 4)]);
    assert_eq!(m.writer_version, npu_target::VERSION);
    // What is on disk is what the handle returned.
    let on_disk: npu_cache::Manifest = serde_json::from_slice(
        &fs::read(entry.dir().parent().unwrap().join("manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(&on_disk, m);
    assert_eq!(entry.file("nope"), None);
}

#[test]
fn one_handle_keeps_working_when_a_shard_directory_is_removed_and_made_anew() {
    // A shard directory removed under a live handle (by hand, or by another tool) must not
    // leave the handle looking into the removed directory (as a handle that kept the shards
    // it opened would).
    let tmp = tempfile::tempdir().unwrap();
    let runs = Cell::new(0);
    let cache = Cache::at(tmp.path()).unwrap();
    let entry = cache.get_or_build(&inputs(), build(&runs)).unwrap();
    let shard = entry.dir().parent().unwrap().parent().unwrap().to_owned();
    drop(entry);
    assert!(cache.lookup(&inputs()).unwrap().is_some());

    fs::remove_dir_all(&shard).unwrap();
    assert!(cache.lookup(&inputs()).unwrap().is_none());
    let entry = cache.get_or_build(&inputs(), build(&runs)).unwrap();
    assert_eq!(runs.get(), 2, "the removed entry is built again");
    assert!(entry.dir().starts_with(&shard), "into the shard made anew");
    drop(entry);
    let found = cache
        .lookup(&inputs())
        .unwrap()
        .expect("a hit in the new shard");
    assert_eq!(found.bytes("aie.elf").unwrap().as_ref(), &[7u8; 1000][..]);

    // A shard removed and made again before the handle looks: the new one is used.
    let entry_dir = found.dir().parent().unwrap().to_owned();
    drop(found);
    let moved = tmp.path().join("moved");
    fs::create_dir(&moved).unwrap();
    fs::rename(&entry_dir, moved.join("entry")).unwrap();
    fs::remove_dir(&shard).unwrap();
    fs::create_dir(&shard).unwrap();
    fs::rename(moved.join("entry"), &entry_dir).unwrap();
    assert!(cache.lookup(&inputs()).unwrap().is_some());
}
