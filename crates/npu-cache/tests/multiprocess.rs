//! Single flight and crash safety across real processes (the `npu-cache-probe` helper).

mod common;

use std::fs;

use common::*;
use npu_cache::Cache;

#[test]
fn eight_processes_on_a_cold_key_build_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cache");
    let log = tmp.path().join("build.log");
    let gate = tmp.path().join("gate");
    let key = probe_key("vec_add");
    let hold = ["--hold-build", gate.to_str().unwrap()];

    let children: Vec<_> = (0..8)
        .map(|_| spawn(probe(&root, "vec_add", &log, &hold)))
        .collect();
    // One process builds (and waits at the gate); the seven others must be blocked on the
    // build lock, not building and not reading a half-built entry.
    wait_until("one builder to start", || log_count(&log, "start") == 1);
    wait_until("seven waiters to block on the build lock", || {
        blocked_on(&build_lock(&root, &key)) == 7
    });
    fs::write(&gate, "").unwrap();

    let outputs: Vec<_> = children.into_iter().map(finish).collect();
    let entries: Vec<_> = outputs.iter().map(entry_of).collect();
    assert_eq!(log_count(&log, "start"), 1, "exactly one build");
    assert_eq!(log_count(&log, "done"), 1);
    assert!(entries.iter().all(|e| *e == entries[0]), "{entries:?}");
    // Each waiter said at once (debug level) whom it waits for: the builder's pid and since
    // when it builds.
    let builder = builder_pid(&log);
    let waiters = outputs
        .iter()
        .filter(|o| stderr(o).contains(&format!("waiting for process {builder} (building since")))
        .collect::<Vec<_>>();
    assert_eq!(waiters.len(), 7);
    for w in waiters {
        let err = stderr(w);
        assert!(
            err.contains("DEBUG") && err.contains(key.as_str()) && err.contains("kernel vec_add"),
            "{err}"
        );
    }
    let stats = Cache::at(&root).unwrap().stats().unwrap();
    assert_eq!(
        (stats.entries, stats.counters.misses, stats.counters.hits),
        (1, 1, 7)
    );
}

/// The pid in the build log's `start` line.
fn builder_pid(log: &std::path::Path) -> u32 {
    fs::read_to_string(log)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("start ").and_then(|p| p.trim().parse().ok()))
        .expect("a start line")
}

#[test]
fn a_waiter_says_whom_it_waits_for_and_gives_up_after_the_wait_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cache");
    let log = tmp.path().join("build.log");
    let gate = tmp.path().join("gate");
    let builder = spawn(probe(
        &root,
        "stuck",
        &log,
        &["--hold-build", gate.to_str().unwrap()],
    ));
    wait_until("the builder to start", || log_count(&log, "start") == 1);
    let pid = builder_pid(&log);
    let waiter = finish(spawn(probe(&root, "stuck", &log, &["--wait", "1.5"])));
    assert_eq!(waiter.status.code(), Some(1), "{}", stderr(&waiter));
    let err = stderr(&waiter);
    assert!(
        err.contains(&format!(
            "DEBUG npu_cache::lock: waiting for process {pid} (building since"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "INFO npu_cache::lock: still waiting for process {pid}"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "gave up waiting for process {pid} (building since"
        )) && err.contains(&format!("kill {pid}"))
            && err.contains("AMD_TRITON_NPU_CACHE_WAIT_TIMEOUT"),
        "{err}"
    );
    assert_eq!(log_count(&log, "start"), 1, "the waiter did not build");
    fs::write(&gate, "").unwrap();
    entry_of(&finish(builder));
}

#[test]
fn a_builder_killed_mid_build_does_not_block_others() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cache");
    let log = tmp.path().join("build.log");
    let never = tmp.path().join("never-created");
    let key = probe_key("relu");

    let mut doomed = spawn(probe(
        &root,
        "relu",
        &log,
        &["--hold-build", never.to_str().unwrap()],
    ));
    wait_until("the doomed builder to start", || {
        log_count(&log, "start") == 1
    });
    let waiters: Vec<_> = (0..2)
        .map(|_| spawn(probe(&root, "relu", &log, &[])))
        .collect();
    wait_until("two waiters to block", || {
        blocked_on(&build_lock(&root, &key)) == 2
    });
    doomed.kill().unwrap(); // SIGKILL: no destructor, no unwinding
    doomed.wait().unwrap();

    let entries: Vec<_> = waiters.into_iter().map(|c| entry_of(&finish(c))).collect();
    assert_eq!(entries[0], entries[1]);
    assert_eq!(
        log_count(&log, "start"),
        2,
        "the killed build and one rebuild"
    );
    assert_eq!(log_count(&log, "done"), 1);
    // The dead builder's staging directory was cleaned up by its successor.
    assert_eq!(fs::read_dir(root.join("staging")).unwrap().count(), 0);
    let verified = Cache::at(&root).unwrap().verify_all().unwrap();
    assert_eq!(verified.len(), 1);
    assert_eq!(verified[0].problem, None);
}

#[test]
fn a_failing_build_publishes_nothing_and_a_waiter_takes_over() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cache");
    let log = tmp.path().join("build.log");
    let gate = tmp.path().join("gate");
    let key = probe_key("silu");

    let failing = spawn(probe(
        &root,
        "silu",
        &log,
        &["--fail", "--hold-build", gate.to_str().unwrap()],
    ));
    wait_until("the failing builder to start", || {
        log_count(&log, "start") == 1
    });
    let waiter = spawn(probe(&root, "silu", &log, &[]));
    wait_until("the waiter to block", || {
        blocked_on(&build_lock(&root, &key)) == 1
    });
    fs::write(&gate, "").unwrap();

    let failed = finish(failing);
    assert_eq!(failed.status.code(), Some(3), "{}", stderr(&failed));
    assert!(stderr(&failed).contains("injected build failure"));
    let (dir, _) = entry_of(&finish(waiter));
    assert_eq!(log_count(&log, "start"), 2);
    assert!(fs::read(format!("{dir}/aie.elf")).is_ok());
}

#[test]
fn builds_of_different_keys_run_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cache");
    let (log_a, log_b) = (tmp.path().join("a.log"), tmp.path().join("b.log"));
    let gate = tmp.path().join("gate");
    let hold = ["--hold-build", gate.to_str().unwrap()];

    let a = spawn(probe(&root, "kernel_a", &log_a, &hold));
    let b = spawn(probe(&root, "kernel_b", &log_b, &hold));
    // Both are inside their builds at the same time: neither waits for the other.
    wait_until("both builds to be running", || {
        log_count(&log_a, "start") == 1 && log_count(&log_b, "start") == 1
    });
    fs::write(&gate, "").unwrap();
    let (dir_a, sum_a) = entry_of(&finish(a));
    let (dir_b, sum_b) = entry_of(&finish(b));
    assert_ne!(dir_a, dir_b);
    assert_ne!(sum_a, sum_b);
    assert_eq!(Cache::at(&root).unwrap().list().unwrap().len(), 2);
}

#[test]
fn a_damaged_entry_is_rebuilt_by_the_next_process_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cache");
    let log = tmp.path().join("build.log");
    let (dir, sum) = entry_of(&finish(spawn(probe(&root, "gelu", &log, &[]))));

    // Same size, one byte different: only the checksum can tell.
    let elf = format!("{dir}/aie.elf");
    let mut bytes = fs::read(&elf).unwrap();
    bytes[100] ^= 0x01;
    fs::write(&elf, &bytes).unwrap();

    let out = finish(spawn(probe(&root, "gelu", &log, &[])));
    let (dir2, sum2) = entry_of(&out);
    assert_eq!(
        (dir2, sum2),
        (dir, sum),
        "the rebuilt entry has the original bytes"
    );
    assert_eq!(log_count(&log, "start"), 2);
    let err = stderr(&out);
    assert!(err.contains("WARN") && err.contains("is damaged"), "{err}");
    assert!(err.contains("aie.elf does not match its sha256"), "{err}");
    assert_eq!(fs::read_dir(root.join("trash")).unwrap().count(), 0);
}

#[test]
fn an_entry_in_use_by_another_process_is_not_evicted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cache");
    let log = tmp.path().join("build.log");
    let release = tmp.path().join("release");
    let key = probe_key("softmax");

    let mut holder = spawn(probe(
        &root,
        "softmax",
        &log,
        &["--hold-entry", release.to_str().unwrap()],
    ));
    // The probe prints its entry once it holds it.
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.contains('\t'), "{line}");

    let cache = Cache::at(&root).unwrap();
    let report = cache.evict_to(0).unwrap();
    assert_eq!(report.in_use, vec![key.clone()]);
    assert!(report.removed.is_empty());
    assert!(cache.entry_path(&key).exists());

    fs::write(&release, "").unwrap();
    assert!(finish(holder).status.success());
    let report = cache.evict_to(0).unwrap();
    assert_eq!(report.removed, vec![key.clone()]);
    assert!(!cache.entry_path(&key).exists());
}
