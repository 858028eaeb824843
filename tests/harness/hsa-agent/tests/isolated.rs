//! Tests that need a process of their own: the agent reads `NPU_HARNESS_*` at `hsa_init`, and
//! the process-wide runtime reads the process's configuration. Each parent test re-runs this
//! binary for one ignored child test with the environment set (works under `cargo test` and
//! nextest alike).

mod support;

use std::time::Duration;

use npu_runtime::hsa::{HsaRuntime, doctor_report};
use npu_runtime::{DispatchOptions, ErrorKind, Runtime, RuntimeError};
use support::*;

/// The block vadd is compiled for: every dispatch of it passes this many elements.
const N: usize = 64;

fn vadd(rt: &HsaRuntime) -> npu_runtime::Program {
    rt.prepare_bytes(
        &pdi_insts_hsaco(rt.agent_name(), &[("vadd", &add_f32(N), 1)]),
        "vadd",
    )
    .unwrap()
}

/// Dispatches vadd over `n` elements; returns the outcome and the output buffer.
fn run_vadd(
    rt: &HsaRuntime,
    program: &npu_runtime::Program,
    n: usize,
    timeout: Option<Duration>,
) -> (
    Result<npu_runtime::DispatchReport, RuntimeError>,
    Vec<f32>,
    Vec<f32>,
) {
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 0.25 * i as f32 + 7.0).collect();
    let (mut ab, mut bb, mut out) = (f32_bytes(&a), f32_bytes(&b), vec![0u8; 4 * n]);
    let r = rt.dispatch(
        program,
        &[arg(&mut ab), arg(&mut bb), arg(&mut out)],
        &DispatchOptions {
            writeback: None,
            timeout,
            element_sizes: None,
        },
    );
    let expected = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    (r, f32_values(&out), expected)
}

#[test]
fn a_queue_error_is_reported_with_its_status_and_the_next_dispatch_works() {
    run_child(
        "child_fault_recovery",
        &[("NPU_HARNESS_FAULT", "queue_error")],
    );
}

#[test]
fn a_negative_completion_signal_is_reported_and_the_next_dispatch_works() {
    run_child(
        "child_fault_recovery",
        &[("NPU_HARNESS_FAULT", "signal_negative")],
    );
}

#[test]
fn a_hung_kernel_times_out_and_the_next_dispatch_works() {
    run_child("child_fault_recovery", &[("NPU_HARNESS_FAULT", "hang")]);
}

#[test]
fn a_fault_on_a_later_packet_hits_that_packet_only() {
    run_child(
        "child_fault_recovery",
        &[("NPU_HARNESS_FAULT", "queue_error:3")],
    );
}

/// With packets run inside the doorbell store, as ROCr's XDNA driver runs them (the store
/// returns only after the packet ended, on the doorbell thread): a negative completion
/// signal and a queue error are reported and recovered from as with an asynchronous doorbell.
#[test]
fn faults_inside_a_synchronous_doorbell_store_are_reported_and_recovered_from() {
    for fault in ["signal_negative", "queue_error:2"] {
        run_child(
            "child_fault_recovery",
            &[
                ("NPU_HARNESS_FAULT", fault),
                ("NPU_HARNESS_DOORBELL", "sync"),
            ],
        );
    }
}

#[test]
#[ignore = "child of the fault tests; run those instead"]
fn child_fault_recovery() {
    require_child("child_fault_recovery");
    let fault = std::env::var("NPU_HARNESS_FAULT").unwrap();
    let (kind, nth) = match fault.split_once(':') {
        Some((k, n)) => (k.to_owned(), n.parse::<usize>().unwrap()),
        None => (fault.clone(), 1),
    };
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let program = vadd(&rt);
    for _ in 1..nth {
        let (r, got, want) = run_vadd(&rt, &program, N, None);
        r.unwrap();
        assert_eq!(got, want);
    }
    let timeout = (kind == "hang").then(|| Duration::from_millis(300));
    let (r, got, _) = run_vadd(&rt, &program, N, timeout);
    let err = r.unwrap_err();
    let text = err.to_string();
    let expected_kind = if kind == "hang" {
        ErrorKind::Timeout
    } else {
        ErrorKind::LaunchFailed
    };
    assert_eq!(err.kind(), expected_kind, "{text}");
    match kind.as_str() {
        "queue_error" => {
            assert!(matches!(err, RuntimeError::Dispatch { .. }), "{text}");
            assert!(
                text.contains("\"vadd\"") && text.contains("HSA_STATUS_ERROR_EXCEPTION"),
                "{text}"
            );
            assert!(
                text.contains("hardware exception") || text.contains("exception"),
                "{text}"
            );
        }
        "signal_negative" => {
            assert!(
                text.contains("\"vadd\"") && text.contains("completion signal ended at -1"),
                "{text}"
            );
        }
        "hang" => match err {
            RuntimeError::Timeout {
                ref kernel,
                seconds,
            } => {
                assert_eq!(kernel, "vadd");
                assert!((seconds - 0.3).abs() < 1e-9, "{seconds}");
            }
            other => panic!("expected a timeout, got {other}"),
        },
        other => panic!("unknown fault {other}"),
    }
    assert!(
        got.iter().all(|v| *v == 0.0),
        "a failed dispatch copies nothing back"
    );
    for _ in 0..3 {
        let (r, got, want) = run_vadd(&rt, &program, N, None);
        r.unwrap_or_else(|e| panic!("the dispatch after the fault failed: {e}"));
        assert_eq!(got, want);
    }
    let s = prefix.stats();
    assert_eq!(
        (s.packets_failed, s.live_queues, s.breaches),
        (u64::from(kind != "hang"), 1, 0),
        "{s:?}"
    );
    drop(program);
    drop(rt);
    let s = prefix.stats();
    assert_eq!(
        (s.init_refcount, s.leaked_at_shutdown, s.live_allocations),
        (0, 0, 0),
        "{s:?}"
    );
}

#[test]
fn a_submit_that_hangs_inside_rocr_is_bounded_and_recovered_from() {
    run_child(
        "child_sync_doorbell_hang",
        &[
            ("NPU_HARNESS_DOORBELL", "sync"),
            ("NPU_HARNESS_FAULT", "hang:2"),
            ("NPU_HARNESS_HANG_MS", "2000"),
        ],
    );
}

#[test]
#[ignore = "child of a_submit_that_hangs_inside_rocr_is_bounded_and_recovered_from"]
fn child_sync_doorbell_hang() {
    require_child("child_sync_doorbell_hang");
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let program = vadd(&rt);
    // Packets run inside the doorbell store here, as with ROCr's XDNA driver.
    let (r, got, want) = run_vadd(&rt, &program, N, None);
    r.unwrap();
    assert_eq!(got, want);
    // The second packet blocks the store for 2 s; the timeout still ends the call.
    let (r, _, _) = run_vadd(&rt, &program, N, Some(Duration::from_millis(150)));
    assert!(matches!(r, Err(RuntimeError::Timeout { .. })), "{r:?}");
    // The submit is still inside ROCr (so the call above did not wait for it): the queue
    // cannot be used, and saying so is an error, not a hang.
    let (r, _, _) = run_vadd(&rt, &program, N, None);
    let text = r.unwrap_err().to_string();
    assert!(
        text.contains("\"vadd\"") && text.contains("still inside ROCr's submit"),
        "{text}"
    );
    // Once the driver gives up on the command, the runtime rebuilds the queue.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (r, got, want) = run_vadd(&rt, &program, N, None);
        match r {
            Ok(_) => {
                assert_eq!(got, want);
                break;
            }
            Err(e)
                if e.to_string().contains("still inside")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("the queue did not recover: {e}"),
        }
    }
    drop(program);
    drop(rt);
    let s = prefix.stats();
    assert_eq!(
        (s.init_refcount, s.leaked_at_shutdown, s.live_allocations),
        (0, 0, 0),
        "{s:?}"
    );
}

#[test]
fn an_aie2_agent_has_four_columns_and_refuses_aie2p_code() {
    run_child("child_aie2_agent", &[("NPU_HARNESS_AGENT", "aie2")]);
}

#[test]
#[ignore = "child of an_aie2_agent_has_four_columns_and_refuses_aie2p_code"]
fn child_aie2_agent() {
    require_child("child_aie2_agent");
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    assert_eq!((rt.agent_name(), rt.columns()), ("aie2", Some(4)));
    let program = rt
        .prepare_bytes(
            &pdi_insts_hsaco("aie2", &[("vadd", &add_f32(N), 4)]),
            "vadd",
        )
        .unwrap();
    let (r, got, want) = run_vadd(&rt, &program, N, None);
    r.unwrap();
    assert_eq!(got, want);
    // No aie2 agent has 5 columns, so the packer refuses such a kernel: widen a packed one.
    let mut wide = pdi_insts_hsaco("aie2", &[("wide", &add_f32(N), 4)]);
    patch_entry(&mut wide, 0, 6, 5);
    let err = rt.prepare_bytes(&wide, "wide").unwrap_err();
    assert!(err.to_string().contains("INVALID_CODE_OBJECT"), "{err}");
    assert_eq!(err.kind(), ErrorKind::LoadRefused);
    assert!(
        prefix
            .last_error()
            .contains("needs 5 columns; this agent has 4"),
        "{}",
        prefix.last_error()
    );
    let err = rt
        .prepare_bytes(
            &pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(N), 1)]),
            "vadd",
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("no code for this NPU (aie2)"),
        "{err}"
    );
}

#[test]
fn the_column_count_can_be_overridden() {
    run_child("child_columns", &[("NPU_HARNESS_COLUMNS", "2")]);
}

#[test]
#[ignore = "child of the_column_count_can_be_overridden"]
fn child_columns() {
    require_child("child_columns");
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    assert_eq!((rt.agent_name(), rt.columns()), ("aie2p", Some(2)));
    assert!(
        rt.prepare_bytes(&pdi_insts_hsaco("aie2p", &[("k", &add_f32(N), 2)]), "k")
            .is_ok()
    );
    assert!(
        rt.prepare_bytes(&pdi_insts_hsaco("aie2p", &[("k", &add_f32(N), 3)]), "k")
            .is_err()
    );
}

#[test]
fn a_rocr_without_an_aie_agent_or_failing_init_says_so() {
    run_child("child_no_agent", &[("NPU_HARNESS_AGENT", "none")]);
    run_child("child_init_fails", &[("NPU_HARNESS_AGENT", "gfx1100")]);
}

#[test]
#[ignore = "child of a_rocr_without_an_aie_agent_or_failing_init_says_so"]
fn child_no_agent() {
    require_child("child_no_agent");
    let prefix = Prefix::new();
    let err = HsaRuntime::open(&prefix.config(), &[]).unwrap_err();
    assert!(matches!(err, RuntimeError::NoDevice(_)), "{err}");
    assert_eq!(err.kind(), ErrorKind::NoDevice);
    let text = err.to_string();
    assert!(
        text.contains("reports no AIE agent") && text.contains("CPU \"Harness CPU\""),
        "{text}"
    );
    assert!(text.contains("rocm-sdk-core"), "{text}");
    assert_eq!(
        prefix.stats().init_refcount,
        0,
        "the failed open shut ROCr down again"
    );
    // A ROCr without an AIE agent is not accepted: the doctor lists it with the reason.
    let report = doctor_report(&prefix.config(), &[]);
    assert!(report.library.is_none());
    let skipped = report
        .refused
        .iter()
        .find(|r| r.source == "AMD_NPU_ROCR_PATH")
        .expect("the prefix is listed");
    assert_eq!(skipped.place, prefix.library());
    assert!(skipped.reason.contains("reports no AIE agent"), "{skipped}");
    assert!(report.to_string().contains("not used: AMD_NPU_ROCR_PATH ("));
    assert!(report.agent.unwrap_err().contains("no AIE agent"));
}

#[test]
#[ignore = "child of a_rocr_without_an_aie_agent_or_failing_init_says_so"]
fn child_init_fails() {
    require_child("child_init_fails");
    let prefix = Prefix::new();
    let err = HsaRuntime::open(&prefix.config(), &[]).unwrap_err();
    assert!(matches!(err, RuntimeError::NoDevice(_)), "{err}");
    assert_eq!(err.kind(), ErrorKind::NoDevice);
    let text = err.to_string();
    assert!(text.contains("could not initialise"), "{text}");
    assert!(
        text.contains("HSA_STATUS_ERROR_INVALID_ARGUMENT"),
        "the status in words: {text}"
    );
    assert!(text.contains("amdxdna"), "{text}");
}

#[test]
fn the_process_runtime_uses_the_process_configuration() {
    let prefix = Prefix::new();
    let rocr = prefix.path().display().to_string();
    run_child(
        "child_global_runtime",
        &[
            ("AMD_NPU_ROCR_PATH", rocr.as_str()),
            ("AMD_TRITON_NPU_HSA_TIMEOUT", "0.25"),
            ("NPU_HARNESS_FAULT", "hang"),
        ],
    );
}

#[test]
#[ignore = "child of the_process_runtime_uses_the_process_configuration"]
fn child_global_runtime() {
    require_child("child_global_runtime");
    assert!(HsaRuntime::global_if_open().is_none());
    let config = npu_target::Config::current().unwrap();
    let rt = HsaRuntime::global(&config, &[]).unwrap();
    let again = HsaRuntime::global(&npu_target::Config::current().unwrap(), &[]).unwrap();
    assert!(std::ptr::eq(rt, again), "one runtime per process");
    assert_eq!(rt.library_source(), "AMD_NPU_ROCR_PATH");
    let program = vadd(rt);
    // AMD_TRITON_NPU_HSA_TIMEOUT bounds the wait when the dispatch gives none.
    let (r, _, _) = run_vadd(rt, &program, N, None);
    match r.unwrap_err() {
        RuntimeError::Timeout { kernel, seconds } => {
            assert_eq!((kernel.as_str(), seconds), ("vadd", 0.25))
        }
        other => panic!("expected a timeout, got {other}"),
    }
    let (r, got, want) = run_vadd(rt, &program, N, None);
    r.unwrap();
    assert_eq!(got, want);
    // The doctor reports the open runtime rather than opening another.
    let report = doctor_report(&config, &[]);
    assert_eq!(report.agent.unwrap().name, "aie2p");
}

#[test]
fn triton_npu_run_dispatches_one_kernel_from_files() {
    let prefix = Prefix::new();
    let rocr = prefix.path().display().to_string();
    let out = run_child("child_cli_run", &[("AMD_NPU_ROCR_PATH", rocr.as_str())]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("ran vadd on aie2p"), "{stdout}");
    let (first, second) = stdout.split_once("ran inc").expect("both runs printed");
    assert!(first.contains("wrote arg2 (400 bytes) to"), "{stdout}");
    assert!(
        !first.contains("wrote arg0"),
        "inputs are not written: {stdout}"
    );
    assert!(
        second.contains("wrote arg0 (400 bytes) to"),
        "inout is: {stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("triton-npu run: ") && stderr.contains("no kernel named \"nope\""),
        "{stderr}"
    );
    assert!(stderr.contains("cannot read /no/such/file"), "{stderr}");
}

#[test]
#[ignore = "child of triton_npu_run_dispatches_one_kernel_from_files"]
fn child_cli_run() {
    require_child("child_cli_run");
    let dir = tempfile::tempdir().unwrap();
    let hsaco = dir.path().join("k.hsaco");
    std::fs::write(
        &hsaco,
        pdi_insts_hsaco(
            "aie2p",
            &[("vadd", &add_f32(100), 1), ("inc", &increment(100), 1)],
        ),
    )
    .unwrap();
    let a: Vec<f32> = (0..100).map(|i| i as f32 * 1.5).collect();
    let b: Vec<f32> = (0..100).map(|i| 1000.0 - i as f32).collect();
    std::fs::write(dir.path().join("a.bin"), f32_bytes(&a)).unwrap();
    std::fs::write(dir.path().join("b.bin"), f32_bytes(&b)).unwrap();
    let out_dir = dir.path().join("out");
    let p = |name: &str| dir.path().join(name).display().to_string();
    let host = npu_cli::Host::standalone();
    let code = npu_cli::run(
        [
            "triton-npu",
            "run",
            "--hsaco",
            &p("k.hsaco"),
            "--kernel",
            "vadd",
            "--arg",
            &format!("in:{}", p("a.bin")),
            "--arg",
            &format!("in:{}", p("b.bin")),
            "--arg",
            "out:400",
            "--out-dir",
            &out_dir.display().to_string(),
        ],
        &host,
    );
    assert_eq!(code, 0);
    let got = f32_values(&std::fs::read(out_dir.join("arg2.bin")).unwrap());
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(got, want);
    assert!(!out_dir.join("arg0.bin").exists());

    // inout: read, then written back.
    let code = npu_cli::run(
        [
            "triton-npu",
            "run",
            "--hsaco",
            &p("k.hsaco"),
            "--kernel",
            "inc",
            "--arg",
            &format!("inout:{}", p("a.bin")),
            "--out-dir",
            &out_dir.display().to_string(),
        ],
        &host,
    );
    assert_eq!(code, 0);
    let got = f32_values(&std::fs::read(out_dir.join("arg0.bin")).unwrap());
    assert_eq!(got, a.iter().map(|x| x + 1.0).collect::<Vec<_>>());

    // Failures are exit code 1 with a message, not a panic.
    let bad = |args: &[&str]| {
        let mut argv = vec!["triton-npu", "run"];
        argv.extend_from_slice(args);
        npu_cli::run(argv, &host)
    };
    assert_eq!(
        bad(&[
            "--hsaco",
            &p("k.hsaco"),
            "--kernel",
            "nope",
            "--arg",
            "out:4"
        ]),
        1
    );
    assert_eq!(
        bad(&[
            "--hsaco",
            &p("k.hsaco"),
            "--kernel",
            "vadd",
            "--arg",
            "in:/no/such/file",
            "--arg",
            "out:4",
            "--arg",
            "out:4"
        ]),
        1
    );
    assert_eq!(
        bad(&[
            "--hsaco",
            &p("k.hsaco"),
            "--kernel",
            "vadd",
            "--arg",
            "sideways:1"
        ]),
        2
    );
}
