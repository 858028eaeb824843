//! The npu1 flow (xclbin + instruction stream, opcode 3) end to end through the XRT runtime
//! and the stand-in shim.

mod common;

use common::*;
use npu_harness_tools::attrs::Meaning;
use npu_runtime::{DispatchOptions, Runtime, RuntimeError};

#[test]
fn vector_add_runs_and_reuses_its_session() {
    let _g = serial();
    set_env("NPU_HARNESS_XRT_DEVICE", "NPU Phoenix");
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    assert_eq!(rt.device_name().unwrap(), "NPU Phoenix");
    let before = stats();
    let artifact = npu1_artifact(dir.path(), &add(3));
    let program = rt.load(&artifact).unwrap();
    let after_load = stats();
    assert_eq!(after_load.xclbins_registered, before.xclbins_registered + 1);
    assert_eq!(after_load.contexts_created, before.contexts_created + 1);

    for round in 0..3 {
        let k = round as f32;
        let (mut a, mut b, mut c) = (
            f32s(&[1.0, 2.0, 3.0]),
            f32s(&[10.0 * k, 20.0, 30.0]),
            f32s(&[0.0; 3]),
        );
        let report = rt
            .dispatch(
                &program,
                &[a.arg(), b.arg(), c.arg()],
                &DispatchOptions::default(),
            )
            .unwrap();
        assert_eq!(c.0, vec![1.0 + 10.0 * k, 22.0, 33.0], "round {round}");
        assert_eq!((report.staged, report.in_place), (3, 0));
    }
    let end = stats();
    assert_eq!(
        end.contexts_created, after_load.contexts_created,
        "no second context"
    );
    assert_eq!(end.runs_completed, after_load.runs_completed + 3);
    // Loading the same artifact again is served from the runtime's cache...
    rt.load(&artifact).unwrap();
    let again = stats();
    assert_eq!(again.xclbins_registered, end.xclbins_registered);
    assert_eq!(again.contexts_created, end.contexts_created);
    // ...until the file changes: then it is a new program.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let changed = npu1_artifact(dir.path(), &mul(1));
    let program = rt.load(&changed).unwrap();
    let (mut a, mut b, mut c) = (f32s(&[2.0]), f32s(&[3.0]), f32s(&[0.0]));
    rt.dispatch(
        &program,
        &[a.arg(), b.arg(), c.arg()],
        &DispatchOptions::default(),
    )
    .unwrap();
    assert_eq!(c.0, vec![6.0]);
    assert_eq!(stats().xclbins_registered, again.xclbins_registered + 1);
}

#[test]
fn only_written_arguments_come_back() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    // Writes arg1 (a copy of arg0) and arg2 (arg0 doubled).
    let program = rt
        .load(&npu1_artifact(
            dir.path(),
            &npu_harness_program::samples::copy_and_double(2),
        ))
        .unwrap();
    let (mut a, mut b, mut c) = (f32s(&[1.0, 2.0]), f32s(&[-1.0, -1.0]), f32s(&[0.0, 0.0]));
    let mask = [false, false, true];
    let opts = DispatchOptions {
        writeback: Some(&mask),
        ..Default::default()
    };
    let before = stats();
    rt.dispatch(&program, &[a.arg(), b.arg(), c.arg()], &opts)
        .unwrap();
    assert_eq!(c.0, vec![2.0, 4.0]);
    assert_eq!(b.0, vec![-1.0, -1.0], "arg1 is not in the write-back mask");
    assert_eq!(stats().syncs_from_device, before.syncs_from_device + 1);

    rt.dispatch(
        &program,
        &[a.arg(), b.arg(), c.arg()],
        &DispatchOptions::default(),
    )
    .unwrap();
    assert_eq!(b.0, vec![1.0, 2.0], "without a mask everything comes back");

    let short = [true];
    let err = rt
        .dispatch(
            &program,
            &[a.arg(), b.arg(), c.arg()],
            &DispatchOptions {
                writeback: Some(&short),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(
        matches!(err, RuntimeError::InvalidArguments { .. }),
        "{err}"
    );
}

#[test]
fn shared_buffers_are_passed_in_place() {
    let _g = serial();
    set_env("NPU_HARNESS_XRT_DEVICE", "NPU Phoenix");
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    let program = rt.load(&npu1_artifact(dir.path(), &add(2))).unwrap();
    let bufs: Vec<_> = (0..3).map(|_| rt.alloc_shared(16).unwrap()).collect();
    let write = |i: usize, v: [f32; 4]| {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        // SAFETY: the buffer holds 16 bytes and no dispatch is running.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), bufs[i].as_ptr(), 16) };
    };
    // The kernel adds the first two elements; the rest of the output keeps its 9s.
    write(0, [1.0, 2.0, 3.0, 4.0]);
    write(1, [0.5, 0.5, 0.5, 0.5]);
    write(2, [9.0; 4]);
    // SAFETY: each buffer is 16 bytes, alive for the dispatch.
    let args: Vec<_> = bufs
        .iter()
        .map(|b| unsafe { npu_runtime::HostArg::from_raw(b.as_ptr(), b.len()) }.unwrap())
        .collect();
    let report = rt
        .dispatch(&program, &args, &DispatchOptions::default())
        .unwrap();
    assert_eq!((report.in_place, report.staged), (3, 0));
    let mut out = [0f32; 4];
    // SAFETY: 16 readable bytes.
    unsafe { std::ptr::copy_nonoverlapping(bufs[2].as_ptr(), out.as_mut_ptr().cast(), 16) };
    assert_eq!(out, [1.5, 2.5, 9.0, 9.0]);

    // A range that is only part of a shared buffer is staged (copied) instead.
    // SAFETY: the first 8 bytes of each buffer.
    let halves: Vec<_> = bufs
        .iter()
        .map(|b| unsafe { npu_runtime::HostArg::from_raw(b.as_ptr(), 8) }.unwrap())
        .collect();
    let report = rt
        .dispatch(&program, &halves, &DispatchOptions::default())
        .unwrap();
    assert_eq!((report.in_place, report.staged), (0, 3));
}

#[test]
fn argument_count_and_artifacts_are_checked() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    let program = rt.load(&npu1_artifact(dir.path(), &add(1))).unwrap();
    // The stand-in toolchain's xclbin declares five buffer slots, as aiecc's do.
    let mut v: Vec<_> = (0..6).map(|_| f32s(&[0.0])).collect();
    let args: Vec<_> = v.iter_mut().map(F32s::arg).collect();
    let err = rt
        .dispatch(&program, &args, &DispatchOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("6 buffer arguments") && err.contains("declares 5"),
        "{err}"
    );
    // Too few for the program: the device refuses the run, and nothing comes back.
    let (mut a, mut b) = (f32s(&[1.0]), f32s(&[7.0]));
    let err = rt
        .dispatch(&program, &[a.arg(), b.arg()], &DispatchOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ERT_CMD_STATE_ERROR") && err.contains("passed 2"),
        "{err}"
    );
    assert_eq!(b.0, vec![7.0]);

    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    let npu_runtime::Artifact::XclbinInsts { xclbin, insts } = npu1_artifact(&bad, &add(1)) else {
        unreachable!()
    };
    std::fs::write(&insts, [1u8, 2, 3]).unwrap();
    let err = rt
        .load(&npu_runtime::Artifact::XclbinInsts {
            xclbin: xclbin.clone(),
            insts,
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("32-bit words"), "{err}");
    std::fs::write(&xclbin, b"xclbin2\0 but nothing else").unwrap();
    let err = rt
        .load(&npu_runtime::Artifact::XclbinInsts {
            xclbin,
            insts: dir.path().join("insts.bin"),
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("truncated"), "{err}");
    let err = rt
        .load(&npu_runtime::Artifact::Hsaco {
            bytes: vec![0u8; 4].into(),
            kernel_name: "k".into(),
            variables: vec![],
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("AMD_TRITON_NPU_RUNTIME=hsa"), "{err}");
}

#[test]
fn a_kernel_the_harness_cannot_compute_raises() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    let program = rt
        .load(&npu1_artifact_for(
            dir.path(),
            &Meaning::NotComputable {
                num_args: 2,
                reason: "tl.dot has no harness program".into(),
            },
        ))
        .unwrap();
    let (mut a, mut b) = (f32s(&[1.0]), f32s(&[5.0]));
    let err = rt
        .dispatch(&program, &[a.arg(), b.arg()], &DispatchOptions::default())
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RuntimeError::Dispatch { .. }), "{text}");
    assert!(text.contains("ERT_CMD_STATE_ERROR"), "{text}");
    assert!(
        text.contains("not computable") && text.contains("tl.dot"),
        "{text}"
    );
    assert_eq!(b.0, vec![5.0], "a failed run writes nothing back");
}
