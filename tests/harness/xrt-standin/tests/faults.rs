//! Failed runs raise (never return zeros), timeouts tear the run's hardware context down (no
//! abort: amdxdna has none), a missing device is a clear error; and the doctor report and
//! target probe through the stand-in.

mod common;

use std::time::{Duration, Instant};

use common::*;
use npu_runtime::xrt::{XrtRuntime, XrtTargetProbe, doctor_report};
use npu_runtime::{DispatchOptions, Runtime, RuntimeError};
use npu_target::{NpuVersion, ProbeOutcome, TargetProbe};

#[test]
fn an_aborted_run_raises_and_writes_nothing_back() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    for artifact in [
        npu1_artifact(&dir.path().join("1"), &add(1)),
        npu2_artifact(&dir.path().join("2"), &add(1)),
    ] {
        let program = rt.load(&artifact).unwrap();
        set_env("NPU_HARNESS_FAULT", "abort");
        let (mut a, mut b, mut c) = (f32s(&[1.0]), f32s(&[2.0]), f32s(&[-7.0]));
        let err = rt
            .dispatch(
                &program,
                &[a.arg(), b.arg(), c.arg()],
                &DispatchOptions::default(),
            )
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, RuntimeError::Dispatch { .. }), "{text}");
        assert!(text.contains("ERT_CMD_STATE_ABORT"), "{text}");
        assert_eq!(c.0, vec![-7.0], "the output is left alone, not zeroed");

        // The failed session was dropped; the next dispatch runs on a fresh context.
        set_env("NPU_HARNESS_FAULT", "");
        let created = stats().contexts_created;
        rt.dispatch(
            &program,
            &[a.arg(), b.arg(), c.arg()],
            &DispatchOptions::default(),
        )
        .unwrap();
        assert_eq!(c.0, vec![3.0]);
        assert_eq!(stats().contexts_created, created + 1);
    }
}

#[test]
fn a_hung_run_times_out_and_its_context_is_torn_down() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    for (i, artifact) in [
        npu1_artifact(&dir.path().join("1"), &add(1)),
        npu2_artifact(&dir.path().join("2"), &add(1)),
    ]
    .into_iter()
    .enumerate()
    {
        let program = rt.load(&artifact).unwrap();
        set_env("NPU_HARNESS_FAULT", "hang");
        let (mut a, mut b, mut c) = (f32s(&[1.0]), f32s(&[2.0]), f32s(&[-7.0]));
        let options = DispatchOptions {
            timeout: Some(Duration::from_millis(150)),
            ..Default::default()
        };
        let before = stats();
        let started = Instant::now();
        let err = rt
            .dispatch(&program, &[a.arg(), b.arg(), c.arg()], &options)
            .unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(150));
        match &err {
            RuntimeError::Timeout { kernel, seconds } => {
                if i == 1 {
                    assert!(kernel.contains("main:sequence"), "{err}");
                }
                assert!((seconds - 0.15).abs() < 1e-9, "{err}");
            }
            other => panic!("expected a timeout, got {other}"),
        }
        assert_eq!(c.0, vec![-7.0]);
        let after = stats();
        // amdxdna cannot abort a command, so the runtime does not ask; it destroys the
        // context instead, which cancels the hung command.
        assert_eq!(
            after.runs_aborted, before.runs_aborted,
            "abort() was not called"
        );
        assert_eq!(
            after.runs_cancelled,
            before.runs_cancelled + 1,
            "the hung run's context was torn down"
        );
        assert_eq!(after.contexts_alive, before.contexts_alive - 1);
        assert_eq!(rt.sessions_alive(), 0);

        // The next launch runs on a fresh context.
        set_env("NPU_HARNESS_FAULT", "");
        rt.dispatch(&program, &[a.arg(), b.arg(), c.arg()], &options)
            .unwrap();
        assert_eq!(c.0, vec![3.0]);
        assert_eq!(stats().contexts_created, after.contexts_created + 1);
        rt.release(&program);
    }
}

#[test]
fn runs_are_bounded_by_the_configured_timeout_by_default() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[("AMD_TRITON_NPU_XRT_TIMEOUT", "0.2")]);
    let program = rt.load(&npu2_artifact(dir.path(), &add(1))).unwrap();
    set_env("NPU_HARNESS_FAULT", "hang");
    let (mut a, mut b, mut c) = (f32s(&[1.0]), f32s(&[2.0]), f32s(&[0.0]));
    let err = rt
        .dispatch(
            &program,
            &[a.arg(), b.arg(), c.arg()],
            &DispatchOptions::default(),
        )
        .unwrap_err();
    match &err {
        RuntimeError::Timeout { seconds, .. } => assert!((seconds - 0.2).abs() < 1e-9, "{err}"),
        other => panic!("expected a timeout, got {other}"),
    }
    set_env("NPU_HARNESS_FAULT", "");
    rt.dispatch(
        &program,
        &[a.arg(), b.arg(), c.arg()],
        &DispatchOptions::default(),
    )
    .unwrap();
    assert_eq!(c.0, vec![3.0]);
}

#[test]
fn no_device_is_a_clear_error() {
    let _g = serial();
    set_env("NPU_HARNESS_XRT_DEVICE", "none");
    let err = XrtRuntime::open(&config(&[]), &[]).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RuntimeError::NoDevice(_)), "{text}");
    assert!(
        text.contains("Could not open device with index '0'"),
        "{text}"
    );
    assert!(text.contains(&standin().display().to_string()), "{text}");

    let report = doctor_report(&config(&[]), &[]);
    assert!(!report.usable());
    assert!(report.to_string().contains("XRT device: none"), "{report}");
    let probe = XrtTargetProbe::new(&config(&[]), &[], false);
    assert!(matches!(probe.probe(), ProbeOutcome::Unavailable(why) if why.contains("device 0")));
}

#[test]
fn doctor_and_probe_report_the_device() {
    let _g = serial();
    let report = doctor_report(&config(&[]), &[]);
    assert_eq!(
        report.shim.as_deref().ok(),
        Some(std::fs::canonicalize(standin()).unwrap().as_path())
    );
    assert_eq!(
        report.coreutil, None,
        "the stand-in needs no libxrt_coreutil"
    );
    assert_eq!(
        report.xrt_version,
        Some(Ok("2.25.0 (npu-harness-xrt software stand-in)".to_owned()))
    );
    assert_eq!(report.device, Some(Ok("NPU Strix".to_owned())));
    assert_eq!(report.target, Some(NpuVersion::Npu2));
    assert!(report.usable());
    let text = report.to_string();
    assert!(text.contains("XRT device: NPU Strix (npu2)"), "{text}");
    assert!(text.contains("not needed by this shim"), "{text}");

    set_env("NPU_HARNESS_XRT_DEVICE", "NPU Phoenix");
    let config = config(&[]);
    let probe = XrtTargetProbe::new(&config, &[], false);
    assert_eq!(probe.probe(), ProbeOutcome::Device("NPU Phoenix".into()));
    let found = npu_target::target::detect(&config, &[&probe]).unwrap();
    assert_eq!(found.target, NpuVersion::Npu1);
}

#[test]
fn a_missing_shim_says_where_it_looked() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("libtriton_npu_xrt.so");
    let explicit = config(&[("AMD_TRITON_NPU_XRT_SHIM", missing.to_str().unwrap())]);
    let err = XrtRuntime::open(&explicit, &[]).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RuntimeError::NotFound(_)), "{text}");
    assert!(
        text.contains(&missing.display().to_string()) && text.contains("does not exist"),
        "{text}"
    );
    assert!(text.contains("make xrt-shim"), "{text}");

    let report = doctor_report(&explicit, &[]);
    assert!(report.shim.is_err() && report.device.is_none());
    assert!(
        report.to_string().starts_with("XRT shim: not loaded"),
        "{report}"
    );
}

#[test]
fn abort_is_refused_as_amdxdna_refuses_it_and_only_the_context_ends_a_hung_run() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let npu_runtime::Artifact::Elf { elf, kernel_name } = npu2_artifact(dir.path(), &add(1)) else {
        unreachable!("npu2 artifacts are a full ELF")
    };
    let shim = standin_shim();
    let device = xrt_sys::Device::open(&shim, 0).unwrap();
    let elf = xrt_sys::Elf::open(&shim, &elf).unwrap();
    let context = device.context_from_elf(&elf).unwrap();
    let kernel = std::sync::Arc::new(context.ext_kernel(&kernel_name).unwrap());
    let bos: Vec<_> = (0..3)
        .map(|_| {
            let bo = device.alloc_ext_bo(4).unwrap();
            bo.sync(xrt_sys::SyncDirection::ToDevice, 4, 0).unwrap();
            bo
        })
        .collect();
    // A run over the buffers, started, that a short wait sees time out.
    let timed_out_run = || {
        let mut run = kernel.run().unwrap();
        for (i, bo) in bos.iter().enumerate() {
            run.set_arg_bo(i as i32, bo).unwrap();
        }
        run.start().unwrap();
        assert_eq!(
            run.wait(Some(Duration::from_millis(50))).unwrap(),
            xrt_sys::WaitOutcome::TimedOut
        );
        run
    };
    let before = stats();
    set_env("NPU_HARNESS_FAULT", "hang");
    let mut run = timed_out_run();
    let err = run.abort().unwrap_err().to_string();
    assert!(
        err.contains("err=-95") && err.contains("Unsupported op"),
        "{err}"
    );
    assert_eq!(
        run.state().unwrap(),
        xrt_sys::CommandState(3),
        "still running"
    );

    // Once the fault is gone, a new run on the same context still hangs behind the first.
    set_env("NPU_HARNESS_FAULT", "");
    let second = timed_out_run();

    // Destroying the context (runs, kernel, then the context) cancels both.
    drop((run, second, bos, kernel, context));
    let after = stats();
    assert_eq!(after.runs_cancelled, before.runs_cancelled + 2);
    assert_eq!(after.contexts_alive, before.contexts_alive - 1);
}
