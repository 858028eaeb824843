//! Single flight between threads of one process: each acquisition opens its own file
//! description, so `flock` excludes threads as it excludes processes.

mod common;

use std::fs;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use npu_cache::{Cache, CacheError, Inputs};

fn inputs() -> Inputs {
    Inputs::new()
        .text("kernel_name", "matmul")
        .text("kernel_ir", "module { func.func @matmul() }")
}

/// Runs `threads` callers of one key; the build waits until all other callers are blocked on
/// the build lock, then writes its file. Returns the entry dirs and the number of builds.
fn race(threads: usize, shared_handle: bool) -> (Vec<String>, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let builds = AtomicUsize::new(0);
    let key = inputs().key();
    let lock = build_lock(tmp.path(), &key);
    let shared = Cache::at(tmp.path()).unwrap();
    let dirs = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let own;
                    let cache = if shared_handle {
                        &shared
                    } else {
                        own = Cache::at(tmp.path()).unwrap();
                        &own
                    };
                    let entry = cache
                        .get_or_build(&inputs(), |dir| {
                            builds.fetch_add(1, Ordering::SeqCst);
                            wait_until("the other threads to block", || {
                                blocked_on(&lock) == threads - 1
                            });
                            fs::write(dir.join("aie.elf"), b"kernel")
                        })
                        .unwrap();
                    assert_eq!(fs::read(entry.file("aie.elf").unwrap()).unwrap(), b"kernel");
                    entry.dir().display().to_string()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    (dirs, builds.load(Ordering::SeqCst))
}

#[test]
fn eight_threads_sharing_a_handle_build_once() {
    let (dirs, builds) = race(8, true);
    assert_eq!(builds, 1);
    assert!(dirs.iter().all(|d| *d == dirs[0]));
}

#[test]
fn eight_threads_with_their_own_handles_build_once() {
    let (dirs, builds) = race(8, false);
    assert_eq!(builds, 1);
    assert!(dirs.iter().all(|d| *d == dirs[0]));
}

#[test]
fn when_the_builder_fails_a_waiting_thread_builds() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();
    let lock = build_lock(tmp.path(), &inputs().key());
    let builds = AtomicUsize::new(0);
    let results: Vec<Result<String, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    cache
                        .get_or_build(&inputs(), |dir| {
                            if builds.fetch_add(1, Ordering::SeqCst) == 0 {
                                // The first builder fails once the other thread waits.
                                wait_until("the other thread to block", || blocked_on(&lock) == 1);
                                return Err("first build fails");
                            }
                            fs::write(dir.join("aie.elf"), b"second").map_err(|_| "write")
                        })
                        .map(|e| e.dir().display().to_string())
                        .map_err(|e| match e {
                            CacheError::Build { source, .. } => source.to_owned(),
                            other => panic!("{other}"),
                        })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(builds.load(Ordering::SeqCst), 2);
    assert!(
        results.contains(&Err("first build fails".to_owned())),
        "{results:?}"
    );
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
}
