//! Failed runs raise (never return zeros), timeouts abort the run, a missing device is a
//! clear error; and the doctor report and target probe through the stand-in.

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
fn a_hung_run_times_out_and_is_aborted() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    let program = rt.load(&npu2_artifact(dir.path(), &add(1))).unwrap();
    set_env("NPU_HARNESS_FAULT", "hang");
    let (mut a, mut b, mut c) = (f32s(&[1.0]), f32s(&[2.0]), f32s(&[-7.0]));
    let options = DispatchOptions {
        timeout: Some(Duration::from_millis(150)),
        ..Default::default()
    };
    let aborted = stats().runs_aborted;
    let started = Instant::now();
    let err = rt
        .dispatch(&program, &[a.arg(), b.arg(), c.arg()], &options)
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(150));
    match &err {
        RuntimeError::Timeout { kernel, seconds } => {
            assert!(kernel.contains("main:sequence"), "{err}");
            assert!((seconds - 0.15).abs() < 1e-9, "{err}");
        }
        other => panic!("expected a timeout, got {other}"),
    }
    assert_eq!(c.0, vec![-7.0]);
    assert_eq!(
        stats().runs_aborted,
        aborted + 1,
        "the timed-out run was aborted"
    );
    // The session was replaced: the next run works.
    set_env("NPU_HARNESS_FAULT", "");
    rt.dispatch(&program, &[a.arg(), b.arg(), c.arg()], &options)
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
    let probe = XrtTargetProbe::new(&config(&[]), &[]);
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
    let probe = XrtTargetProbe::new(&config, &[]);
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
