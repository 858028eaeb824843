//! Sessions: the LRU cap on live hardware contexts, the retry after the driver runs out of
//! them (`CREATE_HWCTX`), and releasing a program's context.

mod common;

use common::*;
use npu_runtime::xrt::XrtRuntime;
use npu_runtime::{Artifact, DispatchOptions, ErrorKind, Program, Runtime};

/// A harness program and what it computes.
type Case = (fn(usize) -> String, fn(f32, f32) -> f32);

const PROGRAMS: [Case; 3] = [
    (add, |a, b| a + b),
    (mul, |a, b| a * b),
    (sub, |a, b| a - b),
];

fn load_all(rt: &XrtRuntime, dir: &std::path::Path) -> Vec<Program> {
    PROGRAMS
        .iter()
        .enumerate()
        .map(|(i, (text, _))| {
            rt.load(&npu1_artifact(&dir.join(i.to_string()), &text(1)))
                .unwrap()
        })
        .collect()
}

fn check(rt: &XrtRuntime, program: &Program, f: fn(f32, f32) -> f32) {
    let (mut a, mut b, mut c) = (f32s(&[6.0]), f32s(&[3.0]), f32s(&[0.0]));
    rt.dispatch(
        program,
        &[a.arg(), b.arg(), c.arg()],
        &DispatchOptions::default(),
    )
    .unwrap();
    assert_eq!(c.0, vec![f(6.0, 3.0)]);
}

#[test]
fn least_recently_used_sessions_are_released_at_the_cap() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[("AMD_TRITON_NPU_XRT_MAX_SESSIONS", "2")]);
    let alive_before = stats().contexts_alive;
    let programs = load_all(&rt, dir.path());
    assert_eq!(rt.sessions_alive(), 2);
    assert_eq!(
        stats().contexts_alive,
        alive_before + 2,
        "the first program's context was released"
    );

    // Program 2 and 1 are resident; using 1 makes 2 the least recently used.
    let created = stats().contexts_created;
    check(&rt, &programs[1], PROGRAMS[1].1);
    assert_eq!(
        stats().contexts_created,
        created,
        "a resident session is reused"
    );
    // Program 0 comes back (a new context), evicting program 2, not program 1.
    check(&rt, &programs[0], PROGRAMS[0].1);
    assert_eq!(stats().contexts_created, created + 1);
    check(&rt, &programs[1], PROGRAMS[1].1);
    assert_eq!(
        stats().contexts_created,
        created + 1,
        "program 1 stayed resident"
    );
    check(&rt, &programs[2], PROGRAMS[2].1);
    assert_eq!(stats().contexts_created, created + 2);
    assert_eq!(rt.sessions_alive(), 2);
    drop(programs);
    drop(rt);
    assert_eq!(
        stats().contexts_alive,
        alive_before,
        "dropping the runtime releases everything"
    );
}

#[test]
fn context_exhaustion_releases_idle_sessions_and_retries() {
    let _g = serial();
    set_env("NPU_HARNESS_MAX_HWCTX", "2");
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]); // the default cap (8) is above the driver's 2
    assert_eq!(stats().contexts_alive, 0, "no other runtime holds contexts");
    let programs = load_all(&rt, dir.path());
    // The third context failed with CREATE_HWCTX; the two idle sessions were released and the
    // creation retried.
    assert_eq!(rt.sessions_alive(), 1);
    assert_eq!(stats().contexts_alive, 1);
    for (program, (_, f)) in programs.iter().zip(PROGRAMS) {
        check(&rt, program, f);
    }
    assert!(stats().contexts_alive <= 2);
}

#[test]
fn exhaustion_that_persists_is_reported_with_advice() {
    let _g = serial();
    set_env("NPU_HARNESS_MAX_HWCTX", "0");
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[("AMD_TRITON_NPU_XRT_MAX_SESSIONS", "3")]);
    let err = rt.load(&npu1_artifact(dir.path(), &add(1))).unwrap_err();
    // A kind the caller can act on (release contexts, retry), not a message to search.
    assert_eq!(err.kind(), ErrorKind::HardwareContextExhausted, "{err}");
    let err = err.to_string();
    assert!(err.contains("CREATE_HWCTX"), "{err}");
    assert!(
        err.contains("AMD_TRITON_NPU_XRT_MAX_SESSIONS (now 3)"),
        "{err}"
    );
    assert!(err.contains("other processes"), "{err}");
}

#[test]
fn releasing_a_program_frees_its_context_and_a_new_load_works() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    let alive = stats().contexts_alive;
    let program = rt.load(&npu1_artifact(dir.path(), &add(1))).unwrap();
    assert_eq!(stats().contexts_alive, alive + 1);
    rt.release(&program);
    assert_eq!(rt.sessions_alive(), 0);
    assert_eq!(
        stats().contexts_alive,
        alive,
        "the context went with the release"
    );
    let again = rt.load(&npu1_artifact(dir.path(), &add(1))).unwrap();
    assert!(!again.same(&program), "a released program is loaded afresh");
    check(&rt, &again, PROGRAMS[0].1);
}

#[test]
fn every_dispatch_of_a_session_starts_its_one_run_again() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    for (device, artifact) in [
        (
            "NPU Phoenix",
            npu1_artifact(&dir.path().join("npu1"), &add(2)),
        ),
        (
            "NPU Strix",
            npu2_artifact(&dir.path().join("npu2"), &add(2)),
        ),
    ] {
        set_env("NPU_HARNESS_XRT_DEVICE", device);
        let rt = open(&[]);
        let program = rt.load(&artifact).unwrap();
        let shared = rt.alloc_shared(8).unwrap();
        let before = stats();
        let rounds = 20;
        for round in 0..rounds {
            let k = round as f32;
            let (mut a, mut b, mut c) = (f32s(&[k, 1.0]), f32s(&[2.0, k]), f32s(&[0.0, 0.0]));
            // Odd rounds write the result into the shared buffer in place, even ones into a
            // staging buffer: a run that kept an old buffer argument would miss one of them.
            let out = if round % 2 == 1 {
                // SAFETY: the whole buffer, alive for the dispatch, not touched meanwhile.
                unsafe { npu_runtime::HostArg::from_raw(shared.as_ptr(), shared.len()) }.unwrap()
            } else {
                c.arg()
            };
            let report = rt
                .dispatch(
                    &program,
                    &[a.arg(), b.arg(), out],
                    &DispatchOptions::default(),
                )
                .unwrap();
            if round % 2 == 1 {
                assert_eq!(report.in_place, 1, "{device}");
                let mut got = [0f32; 2];
                // SAFETY: 8 readable bytes, no dispatch running.
                unsafe {
                    std::ptr::copy_nonoverlapping(shared.as_ptr(), got.as_mut_ptr().cast(), 8)
                };
                c.0 = got.to_vec();
            }
            assert_eq!(c.0, vec![k + 2.0, 1.0 + k], "{device}, round {round}");
        }
        let after = stats();
        assert_eq!(
            after.runs_created,
            before.runs_created + 1,
            "{device}: one run object for {rounds} dispatches"
        );
        assert_eq!(after.runs_started, before.runs_started + rounds, "{device}");
        assert_eq!(
            after.runs_completed,
            before.runs_completed + rounds,
            "{device}"
        );
    }
}

#[test]
fn a_dispatch_with_fewer_buffers_gets_a_run_without_the_old_ones() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    let program = rt.load(&npu2_artifact(dir.path(), &add(1))).unwrap();
    let (mut a, mut b, mut c) = (f32s(&[1.0]), f32s(&[2.0]), f32s(&[0.0]));
    rt.dispatch(
        &program,
        &[a.arg(), b.arg(), c.arg()],
        &DispatchOptions::default(),
    )
    .unwrap();
    assert_eq!(c.0, vec![3.0]);
    let created = stats().runs_created;
    // XRT cannot unset an argument: the reused run would still pass the third buffer and the
    // kernel would run. A new run passes exactly two, which this kernel refuses.
    let err = rt
        .dispatch(&program, &[a.arg(), b.arg()], &DispatchOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("passed 2"), "{err}");
    assert_eq!(stats().runs_created, created + 1);
}

/// Hardware contexts the device gives before it refuses one, and the refusal's text.
fn contexts_until_refused(device_name: &str) -> (usize, String) {
    set_env("NPU_HARNESS_XRT_DEVICE", device_name);
    let dir = tempfile::tempdir().unwrap();
    let Artifact::XclbinInsts { xclbin, .. } = npu1_artifact(dir.path(), &add(1)) else {
        unreachable!("npu1 artifacts are an xclbin and its instructions")
    };
    let shim = standin_shim();
    let device = xrt_sys::Device::open(&shim, 0).unwrap();
    let registered = device.register_xclbin(&xclbin).unwrap();
    let mut contexts = Vec::new();
    loop {
        match device.context_from_xclbin(&registered) {
            Ok(context) => contexts.push(context),
            Err(e) => {
                assert!(e.is_context_refused(), "{e}");
                return (contexts.len(), e.to_string());
            }
        }
        assert!(contexts.len() <= 64, "the device never refused a context");
    }
}

#[test]
fn the_device_limits_contexts_as_amdxdna_does() {
    let _g = serial();
    for (name, limit) in [
        ("NPU Phoenix", 6),
        ("NPU Strix", 32),
        ("NPU Strix Halo", 32),
        ("NPU Krackan", 32),
    ] {
        let (made, refusal) = contexts_until_refused(name);
        assert_eq!(made, limit, "{name}");
        assert!(
            refusal.contains(&format!("Not allow more than {limit} context(s)")),
            "{refusal}"
        );
        assert!(refusal.contains("CREATE_HWCTX"), "{refusal}");
    }
    // amdxdna's module parameter lowers the limit, never raises it.
    set_env("NPU_HARNESS_MAX_HWCTX", "3");
    assert_eq!(contexts_until_refused("NPU Strix").0, 3);
    set_env("NPU_HARNESS_MAX_HWCTX", "100");
    assert_eq!(contexts_until_refused("NPU Phoenix").0, 6);
}

#[test]
fn more_programs_than_an_npu1_has_contexts_still_run() {
    // The default session cap (8) is above npu1's 6 contexts: the 7th load is refused by the
    // driver, idle sessions are released and the load retried.
    let _g = serial();
    set_env("NPU_HARNESS_XRT_DEVICE", "NPU Phoenix");
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    let programs: Vec<_> = (0..9)
        .map(|i| {
            rt.load(&npu1_artifact(&dir.path().join(i.to_string()), &add(1)))
                .unwrap()
        })
        .collect();
    assert!(stats().contexts_alive <= 6);
    for program in programs.iter().rev() {
        check(&rt, program, PROGRAMS[0].1);
        assert!(stats().contexts_alive <= 6);
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

#[test]
fn two_thousand_distinct_kernels_load_and_run_with_bounded_fds_and_contexts() {
    // Like the driver's table of prepared kernels, at most `KEEP` programs are held; the
    // oldest is released. Each program is its own xclbin and instruction stream.
    const KEEP: usize = 32;
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    let fds_before = open_fds();
    let before = stats();
    let mut peak_contexts = before.contexts_alive;
    let mut held = std::collections::VecDeque::new();
    for i in 0..2_000usize {
        let (text, f) = PROGRAMS[i % PROGRAMS.len()];
        let program = rt
            .load(&npu1_artifact(&dir.path().join(i.to_string()), &text(1)))
            .unwrap_or_else(|e| panic!("kernel {i}: {e}"));
        check(&rt, &program, f);
        peak_contexts = peak_contexts.max(stats().contexts_alive);
        held.push_back(program);
        if held.len() > KEEP
            && let Some(old) = held.pop_front()
        {
            rt.release(&old);
        }
    }
    let (fds_after, after) = (open_fds(), stats());
    println!(
        "2000 kernels (xrt): fds {fds_before} -> {fds_after}, hardware contexts {} -> {}, \
         peak {peak_contexts}, buffer objects {} -> {}",
        before.contexts_alive, after.contexts_alive, before.bos_alive, after.bos_alive
    );
    assert!(after.bos_alive <= before.bos_alive + 4 * (KEEP as u64 + 1));
    assert!(fds_after <= fds_before + 4, "{fds_before} -> {fds_after}");
    assert!(peak_contexts <= 16, "{peak_contexts}");
}
