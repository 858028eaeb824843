//! The npu2 flow (full ELF → hardware context → ext kernel, ext buffers) end to end through the
//! XRT runtime and the stand-in shim.

mod common;

use common::*;
use npu_runtime::{Artifact, DispatchOptions, HostArg, Runtime, RuntimeError};

#[test]
fn elf_kernel_runs_and_reuses_its_session() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    assert_eq!(rt.device_name().unwrap(), "NPU Strix");
    let before = stats();
    let program = rt.load(&npu2_artifact(dir.path(), &sub(2))).unwrap();
    assert_eq!(
        program.kernel_name,
        format!("main:sequence ({})", dir.path().join("aie.elf").display())
    );
    for round in 0..3 {
        let k = round as f32;
        let (mut a, mut b, mut c) = (f32s(&[5.0, 6.0]), f32s(&[k, 1.0]), f32s(&[0.0, 0.0]));
        let report = rt
            .dispatch(
                &program,
                &[a.arg(), b.arg(), c.arg()],
                &DispatchOptions::default(),
            )
            .unwrap();
        assert_eq!(c.0, vec![5.0 - k, 5.0]);
        assert_eq!(report.staged, 3);
    }
    let after = stats();
    assert_eq!(
        after.contexts_created,
        before.contexts_created + 1,
        "one context for three runs"
    );
    assert_eq!(
        after.xclbins_registered, before.xclbins_registered,
        "no xclbin in this flow"
    );
    assert_eq!(after.runs_completed, before.runs_completed + 3);
}

#[test]
fn staging_buffers_grow_and_results_follow_the_sizes() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    // A kernel of one element: larger arguments pass (the kernel reads and writes its
    // first element only) and grow the staging buffers, which smaller ones then reuse.
    let program = rt.load(&npu2_artifact(dir.path(), &add(1))).unwrap();
    let n = 5000; // more than one staging page of f32s
    let (mut a, mut b, mut c) = (
        F32s((0..n).map(|i| i as f32 + 0.5).collect()),
        F32s(vec![1.0; n]),
        F32s(vec![-1.0; n]),
    );
    let before = stats();
    rt.dispatch(
        &program,
        &[a.arg(), b.arg(), c.arg()],
        &DispatchOptions::default(),
    )
    .unwrap();
    assert_eq!(c.0[0], 1.5);
    assert!(
        c.0[1..].iter().all(|v| *v == -1.0),
        "the rest comes back as it went"
    );
    let grown = stats();
    assert_eq!(grown.bos_allocated, before.bos_allocated + 3);
    // Smaller arguments reuse the grown buffers.
    let (mut a, mut b, mut c) = (f32s(&[1.0]), f32s(&[2.0]), f32s(&[0.0]));
    rt.dispatch(
        &program,
        &[a.arg(), b.arg(), c.arg()],
        &DispatchOptions::default(),
    )
    .unwrap();
    assert_eq!(c.0, vec![3.0]);
    assert_eq!(stats().bos_allocated, grown.bos_allocated);
}

#[test]
fn shared_ext_buffers_are_passed_in_place() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    let program = rt
        .load(&npu2_artifact(
            dir.path(),
            &npu_harness_program::samples::double_i32(2),
        ))
        .unwrap();
    let buf = rt.alloc_shared(8).unwrap();
    // SAFETY: 8 bytes, no dispatch running.
    unsafe { std::ptr::copy_nonoverlapping([21i32, -4].as_ptr().cast(), buf.as_ptr(), 8) };
    // SAFETY: the whole buffer, alive for the dispatch.
    let arg = unsafe { HostArg::from_raw(buf.as_ptr(), buf.len()) }.unwrap();
    let report = rt
        .dispatch(&program, &[arg], &DispatchOptions::default())
        .unwrap();
    assert_eq!((report.in_place, report.staged), (1, 0));
    let mut out = [0i32; 2];
    // SAFETY: 8 readable bytes.
    unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), out.as_mut_ptr().cast(), 8) };
    assert_eq!(out, [42, -8]);
    assert!(rt.alloc_shared(0).is_err(), "a zero-byte buffer is refused");
}

#[test]
fn unknown_instances_and_bad_elves_fail_at_load() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = open(&[]);
    let Artifact::Elf { elf, .. } = npu2_artifact(dir.path(), &add(1)) else {
        unreachable!()
    };
    let err = rt
        .load(&Artifact::Elf {
            elf: elf.clone(),
            kernel_name: "main:other".into(),
        })
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RuntimeError::Load { .. }), "{text}");
    assert!(
        text.contains("main:other") && text.contains("main:sequence"),
        "{text}"
    );

    let junk = dir.path().join("junk.elf");
    std::fs::write(&junk, b"\x7fELF\x02\x01 is an ELF64").unwrap();
    let err = rt
        .load(&Artifact::Elf {
            elf: junk,
            kernel_name: "main:sequence".into(),
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("ELF32"), "{err}");
    let err = rt
        .load(&Artifact::Elf {
            elf: dir.path().join("missing.elf"),
            kernel_name: "main:sequence".into(),
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.elf"), "{err}");
}
