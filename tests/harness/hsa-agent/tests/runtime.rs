//! The HSA runtime (`npu_runtime::hsa`) against the software agent. Each test has its own copy
//! of the agent library in a temporary ROCr prefix, hence its own agent, queue and counters,
//! so tests run in parallel in one process.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use npu_runtime::hsa::{CodeSource, HsaTargetProbe, Variable, doctor_report};
use npu_runtime::{Artifact, DispatchOptions, HostArg, Runtime, RuntimeError};
use npu_target::TargetProbe;
use support::elf32::{Instance, full_elf};
use support::*;

fn add_inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
    let b: Vec<f32> = (0..n).map(|i| 100.0 + (i * i) as f32).collect();
    (a, b)
}

/// Runs `program` as vadd over fresh inputs and checks the sums.
fn check_vadd(rt: &dyn Runtime, program: &npu_runtime::Program, n: usize) {
    check_vadd_with(rt, program, n, &DispatchOptions::default());
}

fn check_vadd_with(
    rt: &dyn Runtime,
    program: &npu_runtime::Program,
    n: usize,
    options: &DispatchOptions<'_>,
) {
    let (a, b) = add_inputs(n);
    let (mut a_buf, mut b_buf) = (f32_bytes(&a), f32_bytes(&b));
    let mut out = vec![0u8; 4 * n];
    rt.dispatch(
        program,
        &[arg(&mut a_buf), arg(&mut b_buf), arg(&mut out)],
        options,
    )
    .unwrap();
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(f32_values(&out), expected);
}

#[test]
fn loads_from_bytes_and_adds_vectors() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    assert_eq!(rt.agent_name(), "aie2p");
    assert_eq!(rt.device_name().unwrap(), "aie2p");
    assert_eq!(rt.columns(), Some(8));
    assert_eq!(rt.kind(), npu_target::RuntimeKind::HSA);
    let hsaco = pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(1000), 1)]);
    let program = rt.prepare_bytes(&hsaco, "vadd").unwrap();
    assert_eq!(program.num_args, Some(3));

    let (a, b) = add_inputs(1000);
    let (mut a_buf, mut b_buf) = (f32_bytes(&a), f32_bytes(&b));
    let mut out = vec![0u8; 4000];
    let report = rt
        .dispatch(
            &program,
            &[arg(&mut a_buf), arg(&mut b_buf), arg(&mut out)],
            &DispatchOptions::default(),
        )
        .unwrap();
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(f32_values(&out), expected);
    assert_eq!(f32_values(&a_buf), a, "inputs are not written back changed");
    assert_eq!((report.staged, report.in_place), (3, 0));
    let stats = prefix.stats();
    assert_eq!((stats.packets_completed, stats.breaches), (1, 0));
}

#[test]
fn loads_from_a_file_with_mixed_types_and_caches_the_program() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let path = prefix.path().join("k.hsaco");
    std::fs::write(
        &path,
        pdi_insts_hsaco("aie2p", &[("scale_sub", &scale_sub(257), 2)]),
    )
    .unwrap();
    let program = rt.prepare(&path, "scale_sub").unwrap();
    let again = rt.prepare(&path, "scale_sub").unwrap();
    let ko = |p: &npu_runtime::Program| {
        p.state::<npu_runtime::hsa::HsaKernel>()
            .unwrap()
            .kernel_object()
    };
    assert_eq!(
        ko(&program),
        ko(&again),
        "the second prepare is served from the cache"
    );
    assert_eq!(prefix.stats().live_executables, 1);

    let ints: Vec<i32> = (0..257).map(|i| i * 3 - 100).collect();
    let floats: Vec<f32> = (0..257).map(|i| i as f32 / 4.0).collect();
    let (mut x, mut y, mut out) = (i32_bytes(&ints), f32_bytes(&floats), vec![0u8; 257 * 4]);
    rt.dispatch(
        &program,
        &[arg(&mut x), arg(&mut y), arg(&mut out)],
        &DispatchOptions::default(),
    )
    .unwrap();
    let expected: Vec<f32> = ints
        .iter()
        .zip(&floats)
        .map(|(i, f)| *i as f32 * 2.0 - f)
        .collect();
    assert_eq!(f32_values(&out), expected);

    // The same bytes from memory hit the same cache entry (keyed by content, not path).
    let from_bytes = rt
        .prepare_bytes(&std::fs::read(&path).unwrap(), "scale_sub")
        .unwrap();
    assert_eq!(ko(&from_bytes), ko(&program));
    assert_eq!(prefix.stats().live_executables, 1);
}

#[test]
fn a_released_program_is_destroyed_once_its_last_handle_goes() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let hsaco = pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(8), 1)]);
    let program = rt.prepare_bytes(&hsaco, "vadd").unwrap();
    assert_eq!(prefix.stats().live_executables, 1);
    rt.release(&program);
    assert_eq!(
        prefix.stats().live_executables,
        1,
        "the handle still holds it"
    );
    check_vadd(&rt, &program, 8);
    drop(program);
    assert_eq!(prefix.stats().live_executables, 0);
    let again = rt.prepare_bytes(&hsaco, "vadd").unwrap();
    assert_eq!(prefix.stats().live_executables, 1, "loaded afresh");
    check_vadd(&rt, &again, 8);
}

#[test]
fn two_kernels_of_one_hsaco_load_separately() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let hsaco = pdi_insts_hsaco(
        "aie2p",
        &[("vadd", &add_f32(64), 1), ("inc", &increment(3), 1)],
    );
    let vadd = rt.prepare_bytes(&hsaco, "vadd").unwrap();
    let inc = rt.prepare_bytes(&hsaco, "inc").unwrap();
    assert_eq!(prefix.stats().live_executables, 2);
    check_vadd(&rt, &vadd, 64);
    let mut v = f32_bytes(&[1.5, -2.0, 7.25]);
    rt.dispatch(&inc, &[arg(&mut v)], &DispatchOptions::default())
        .unwrap();
    assert_eq!(f32_values(&v), vec![2.5, -1.0, 8.25]);
}

#[test]
fn runtime_trait_loads_hsaco_artifacts_and_refuses_xrt_ones() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let artifact = Artifact::Hsaco {
        bytes: Arc::from(pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(33), 1)])),
        kernel_name: "vadd".into(),
        variables: vec![],
    };
    let program = Runtime::load(&rt, &artifact).unwrap();
    check_vadd(&rt, &program, 33);
    let err = Runtime::load(
        &rt,
        &Artifact::XclbinInsts {
            xclbin: PathBuf::from("aie.xclbin"),
            insts: PathBuf::from("insts.bin"),
        },
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("AMD_TRITON_NPU_RUNTIME=xrt"),
        "{err}"
    );
}

#[test]
fn full_elf_kernels_get_their_external_variables() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let elf = full_elf(&[
        Instance {
            name: "sequence",
            control: program(&add_f32(100)),
            args: 3,
            variables: &[("scratch-pad-ctrl", 64)],
        },
        Instance {
            name: "other",
            control: program(&increment(2)),
            args: 1,
            variables: &[],
        },
    ]);
    let hsaco = full_elf_hsaco(&elf, 8);

    // Without the variable, ROCr's loader refuses: the error says what is missing.
    let before = prefix.stats();
    let err = rt.prepare_bytes(&hsaco, "main:sequence").unwrap_err();
    assert!(matches!(err, RuntimeError::Load { .. }), "{err}");
    assert!(err.to_string().contains("external variable"), "{err}");
    assert!(
        prefix.last_error().contains("scratch-pad-ctrl"),
        "{}",
        prefix.last_error()
    );
    let after = prefix.stats();
    assert_eq!(
        (after.live_executables, after.live_allocations),
        (0, before.live_allocations),
        "a failed load leaves nothing behind"
    );

    let vars = [Variable {
        name: "scratch-pad-ctrl".into(),
        size: 64,
    }];
    let program = rt
        .prepare_with_variables(CodeSource::Bytes(&hsaco), "main:sequence", &vars)
        .unwrap();
    let (addr, len) = rt.variable(&program, "scratch-pad-ctrl").unwrap();
    assert!(!addr.is_null() && len == 64);
    check_vadd(&rt, &program, 100);

    // ROCr loads the whole code object, so every kernel of it needs the variable defined;
    // through the trait, variables come with the artifact.
    let other = Runtime::load(
        &rt,
        &Artifact::Hsaco {
            bytes: Arc::from(hsaco.clone()),
            kernel_name: "main:other".into(),
            variables: vec![("scratch-pad-ctrl".into(), 64)],
        },
    )
    .unwrap();
    let mut v = f32_bytes(&[0.0, 41.0]);
    rt.dispatch(&other, &[arg(&mut v)], &DispatchOptions::default())
        .unwrap();
    assert_eq!(f32_values(&v), vec![1.0, 42.0]);
}

#[test]
fn a_variable_changed_by_a_plain_store_is_what_the_next_dispatch_reads() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let n = 64;
    let hsaco = scratchpad_hsaco(n);
    let vars = [Variable {
        name: "scratch-pad-ctrl".into(),
        size: 4 * n as u64,
    }];
    let program = rt
        .prepare_with_variables(CodeSource::Bytes(&hsaco), "main:sequence", &vars)
        .unwrap();
    let (addr, len) = rt.variable(&program, "scratch-pad-ctrl").unwrap();
    assert_eq!(len, 4 * n);
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    for step in 0..5 {
        // The parameter changes with a plain store: no flush, no call into the runtime.
        let value = 1000.0 * step as f32 + 0.5;
        let scratch = unsafe { std::slice::from_raw_parts_mut(addr.cast::<f32>(), n) };
        scratch.fill(value);
        let mut a_buf = f32_bytes(&a);
        let mut out = vec![0u8; 4 * n];
        rt.dispatch(
            &program,
            &[arg(&mut a_buf), arg(&mut out)],
            &DispatchOptions::default(),
        )
        .unwrap();
        let expected: Vec<f32> = a.iter().map(|x| x + value).collect();
        assert_eq!(f32_values(&out), expected, "dispatch {step}");
    }
    assert_eq!(prefix.stats().breaches, 0);
}

/// The prebuilt design the Python tests load (`tests/fixtures/prebuilt/`): a full ELF whose
/// `main:sequence` computes `out = a + scratch-pad-ctrl` over 256 f32, packed into an hsaco.
/// `NPU_REGENERATE_FIXTURES=1` rewrites it; otherwise the committed file must be what this
/// builds.
#[test]
fn the_prebuilt_fixture_is_what_the_builders_make() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/prebuilt/scratchpad_add.hsaco");
    let built = scratchpad_hsaco(256);
    if std::env::var("NPU_REGENERATE_FIXTURES").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &built).unwrap();
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == built,
        "{} is stale; regenerate it with NPU_REGENERATE_FIXTURES=1",
        path.display()
    );
}

#[test]
fn unknown_kernels_wrong_arches_and_bad_files_are_clear_errors() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let hsaco = pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(4), 1)]);
    let err = rt.prepare_bytes(&hsaco, "vsub").unwrap_err().to_string();
    assert!(
        err.contains("\"vsub\"") && err.contains("no kernel named"),
        "{err}"
    );

    let npu1 = pdi_insts_hsaco("aie2", &[("vadd", &add_f32(4), 1)]);
    let err = rt.prepare_bytes(&npu1, "vadd").unwrap_err().to_string();
    assert!(err.contains("no code for this NPU (aie2p)"), "{err}");
    assert!(err.contains("INCOMPATIBLE_ARGUMENTS"), "{err}");

    let err = rt
        .prepare_bytes(b"definitely not an ELF file", "vadd")
        .unwrap_err()
        .to_string();
    assert!(err.contains("malformed"), "{err}");

    let err = rt
        .prepare(&prefix.path().join("missing.hsaco"), "vadd")
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.hsaco"), "{err}");

    // Nothing of the failed loads stays behind.
    assert_eq!(prefix.stats().live_executables, 0);
}

#[test]
fn the_agent_applies_rocr_load_rules() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let base = pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(4), 1)]);
    // (field of the kernel entry, value, what the agent must say)
    let cases: [(usize, u32, &str); 4] = [
        (6, 9, "needs 9 columns; this agent has 8"),
        (6, 0, "needs 0 columns"),
        (7, 2, "unknown kind 2"),
        (2, 6, "whole 32-bit words"),
    ];
    for (field, value, rule) in cases {
        let mut hsaco = base.clone();
        patch_entry(&mut hsaco, 0, field, value);
        let err = rt.prepare_bytes(&hsaco, "vadd").unwrap_err().to_string();
        assert!(err.contains("INVALID_CODE_OBJECT"), "{rule}: {err}");
        assert!(
            prefix.last_error().contains(rule),
            "{rule}: {}",
            prefix.last_error()
        );
    }
    // A PdiInsts kernel without a PDI.
    let mut no_pdi = base.clone();
    patch_entry(&mut no_pdi, 0, 3, 0);
    patch_entry(&mut no_pdi, 0, 4, 0);
    assert!(rt.prepare_bytes(&no_pdi, "vadd").is_err());
    assert!(
        prefix.last_error().contains("needs a PDI"),
        "{}",
        prefix.last_error()
    );
}

#[test]
fn a_kernel_without_a_harness_program_fails_on_the_device_and_the_queue_recovers() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    // Insts that are whole words but no harness program: loadable, not runnable here.
    let words = [0x5au8; 64];
    let kernels = [
        npu_hsaco::Kernel::pdi_insts("opaque", &words[..], PDI, 16, 1),
        npu_hsaco::Kernel::pdi_insts("vadd", program(&add_f32(10)), PDI, 48, 1),
    ];
    let hsaco = npu_hsaco::pack::pack(None, npu_hsaco::Arch::Aie2p, &kernels).unwrap();
    let opaque = rt.prepare_bytes(&hsaco, "opaque").unwrap();
    let mut buf = vec![1u8; 64];
    let err = rt
        .dispatch(&opaque, &[arg(&mut buf)], &DispatchOptions::default())
        .unwrap_err();
    assert!(matches!(err, RuntimeError::Dispatch { .. }), "{err}");
    assert!(
        err.to_string().contains("\"opaque\"") && err.to_string().contains("completion signal"),
        "{err}"
    );
    assert!(
        prefix.last_error().contains("not a harness program"),
        "{}",
        prefix.last_error()
    );
    let vadd = rt.prepare_bytes(&hsaco, "vadd").unwrap();
    check_vadd(&rt, &vadd, 10);
}

#[test]
fn a_kernel_marked_not_computable_fails_with_that_reason() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let code = npu_harness_tools::artifacts::kernel_code(
        &npu_harness_tools::attrs::Meaning::NotComputable {
            num_args: 2,
            reason: "the kernel reduces (tl.sum)".into(),
        },
    );
    let kernels = [npu_hsaco::Kernel::pdi_insts("softmax", code, PDI, 32, 1)];
    let hsaco = npu_hsaco::pack::pack(None, npu_hsaco::Arch::Aie2p, &kernels).unwrap();
    let program = rt.prepare_bytes(&hsaco, "softmax").unwrap();
    let (mut x, mut y) = (vec![3u8; 16], vec![0u8; 16]);
    let err = rt
        .dispatch(
            &program,
            &[arg(&mut x), arg(&mut y)],
            &DispatchOptions::default(),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("completion signal ended at -1"),
        "{err}"
    );
    assert!(y.iter().all(|b| *b == 0), "no numbers are produced");
    let recorded = prefix.last_error();
    assert!(
        recorded.contains("\"softmax\"")
            && recorded.contains("not computable")
            && recorded.contains("tl.sum"),
        "{recorded}"
    );
}

#[test]
fn the_writeback_mask_copies_back_only_what_it_names() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let program = rt
        .prepare_bytes(
            &pdi_insts_hsaco("aie2p", &[("k", &add_and_clobber(50), 1)]),
            "k",
        )
        .unwrap();
    let (a, b) = add_inputs(50);
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();

    let (mut a_buf, mut b_buf, mut out) = (f32_bytes(&a), f32_bytes(&b), vec![0u8; 200]);
    let mask = [false, false, true];
    rt.dispatch(
        &program,
        &[arg(&mut a_buf), arg(&mut b_buf), arg(&mut out)],
        &DispatchOptions {
            writeback: Some(&mask),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(f32_values(&out), expected);
    assert_eq!(
        f32_values(&a_buf),
        a,
        "arg0 is outside the mask: its host copy is untouched"
    );

    // Without a mask everything comes back, including what the kernel clobbered.
    let mut out2 = vec![0u8; 200];
    rt.dispatch(
        &program,
        &[arg(&mut a_buf), arg(&mut b_buf), arg(&mut out2)],
        &DispatchOptions::default(),
    )
    .unwrap();
    assert_eq!(f32_values(&out2), expected);
    assert!(f32_values(&a_buf).iter().all(|v| *v == 0.0));
}

#[test]
fn verify_writeback_reports_a_kernel_writing_a_masked_argument() {
    let prefix = Prefix::new();
    let config = config_with(&[
        ("AMD_NPU_ROCR_PATH", &prefix.path().display().to_string()),
        ("AMD_TRITON_NPU_HSA_VERIFY_WRITEBACK", "1"),
    ]);
    let rt = npu_runtime::hsa::HsaRuntime::open(&config, &[]).unwrap();
    let program = rt
        .prepare_bytes(
            &pdi_insts_hsaco("aie2p", &[("k", &add_and_clobber(8), 1)]),
            "k",
        )
        .unwrap();
    let (mut a, mut b, mut out) = (f32_bytes(&[1.0; 8]), f32_bytes(&[2.0; 8]), vec![0u8; 32]);
    let err = rt
        .dispatch(
            &program,
            &[arg(&mut a), arg(&mut b), arg(&mut out)],
            &DispatchOptions {
                writeback: Some(&[false, false, true]),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("argument 0") && err.contains("read-only"),
        "{err}"
    );
}

#[test]
fn shared_buffers_are_used_in_place_without_copies() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let program = rt
        .prepare_bytes(
            &pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(256), 1)]),
            "vadd",
        )
        .unwrap();
    let n = 256;
    let (a, b) = add_inputs(n);
    let sa = rt.alloc_shared(4 * n).unwrap();
    let sb = rt.alloc_shared(4 * n).unwrap();
    let sout = rt.alloc_shared(4 * n).unwrap();
    let view = |s: &dyn npu_runtime::SharedBuffer| unsafe {
        std::slice::from_raw_parts_mut(s.as_ptr(), s.len())
    };
    view(sa.as_ref()).copy_from_slice(&f32_bytes(&a));
    view(sb.as_ref()).copy_from_slice(&f32_bytes(&b));
    let shared = |s: &dyn npu_runtime::SharedBuffer| {
        unsafe { HostArg::from_raw(s.as_ptr(), s.len()) }.unwrap()
    };
    let report = rt
        .dispatch(
            &program,
            &[
                shared(sa.as_ref()),
                shared(sb.as_ref()),
                shared(sout.as_ref()),
            ],
            &DispatchOptions::default(),
        )
        .unwrap();
    assert_eq!((report.in_place, report.staged), (3, 0));
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(f32_values(view(sout.as_ref())), expected);

    // Mixed: a host output is staged, the shared inputs are not.
    let mut out = vec![0u8; 4 * n];
    let report = rt
        .dispatch(
            &program,
            &[shared(sa.as_ref()), shared(sb.as_ref()), arg(&mut out)],
            &DispatchOptions::default(),
        )
        .unwrap();
    assert_eq!((report.in_place, report.staged), (2, 1));
    assert_eq!(f32_values(&out), expected);

    // An interior range is fine; one that runs past the buffer's end is refused.
    let half = unsafe { HostArg::from_raw(sa.as_ptr().add(4 * n / 2), 4 * n / 2) }.unwrap();
    let past = unsafe { HostArg::from_raw(sb.as_ptr().add(4), 4 * n) }.unwrap();
    let err = rt
        .dispatch(
            &program,
            &[half, past, shared(sout.as_ref())],
            &DispatchOptions::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("argument 1") && err.contains("past its end"),
        "{err}"
    );
    let before = prefix.stats().live_allocations;
    drop((sa, sb, sout));
    assert_eq!(
        prefix.stats().live_allocations,
        before - 3,
        "dropping a shared buffer frees it"
    );
}

#[test]
fn views_at_addresses_the_dma_cannot_start_at_are_staged_with_exact_sizes() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let n = 64;
    let program = rt
        .prepare_bytes(
            &pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(n), 1)]),
            "vadd",
        )
        .unwrap();
    let (a, b) = add_inputs(n);
    // Each view starts 2 bytes into its shared buffer: inside ROCr's allocation, but not on
    // the 4-byte boundary the shim DMAs need.
    let buffers: Vec<_> = (0..3)
        .map(|_| rt.alloc_shared(4 * n + 8).unwrap())
        .collect();
    let bytes = |s: &dyn npu_runtime::SharedBuffer| unsafe {
        std::slice::from_raw_parts_mut(s.as_ptr(), s.len())
    };
    bytes(buffers[0].as_ref())[2..2 + 4 * n].copy_from_slice(&f32_bytes(&a));
    bytes(buffers[1].as_ref())[2..2 + 4 * n].copy_from_slice(&f32_bytes(&b));
    bytes(buffers[2].as_ref()).fill(0xEE);
    let view = |s: &dyn npu_runtime::SharedBuffer| {
        unsafe { HostArg::from_raw(s.as_ptr().add(2), 4 * n) }.unwrap()
    };
    let report = rt
        .dispatch(
            &program,
            &[
                view(buffers[0].as_ref()),
                view(buffers[1].as_ref()),
                view(buffers[2].as_ref()),
            ],
            &DispatchOptions::default(),
        )
        .unwrap();
    assert_eq!((report.in_place, report.staged), (0, 3));
    let out = bytes(buffers[2].as_ref());
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(f32_values(&out[2..2 + 4 * n]), expected);
    assert_eq!(
        &out[..2],
        &[0xEE, 0xEE],
        "the bytes before the view are untouched"
    );
    assert!(
        out[2 + 4 * n..].iter().all(|b| *b == 0xEE),
        "the bytes after the view are untouched"
    );
    // An aligned view into the same buffers still goes in place.
    let aligned = |s: &dyn npu_runtime::SharedBuffer| {
        unsafe { HostArg::from_raw(s.as_ptr().add(4), 4 * n) }.unwrap()
    };
    let report = rt
        .dispatch(
            &program,
            &[
                aligned(buffers[0].as_ref()),
                aligned(buffers[1].as_ref()),
                aligned(buffers[2].as_ref()),
            ],
            &DispatchOptions::default(),
        )
        .unwrap();
    assert_eq!((report.in_place, report.staged), (3, 0));
    assert_eq!(prefix.stats().breaches, 0);
}

#[test]
fn more_than_32_pdis_recycle_the_queue_transparently() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    // 40 code objects, each loaded with its own PDI; the queue's hardware context caches 32.
    let programs: Vec<_> = (1..=40)
        .map(|n| {
            rt.prepare_bytes(
                &pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(n), 1)]),
                "vadd",
            )
            .unwrap()
        })
        .collect();
    for (n, program) in (1..=40).zip(&programs) {
        check_vadd(&rt, program, n);
    }
    let stats = prefix.stats();
    assert_eq!(
        (
            stats.packets_completed,
            stats.packets_failed,
            stats.breaches
        ),
        (40, 1, 0),
        "the 33rd PDI was refused once, then ran on a fresh queue"
    );
    assert!(prefix.last_error().contains("already caches 32"));
}

#[test]
fn bad_arguments_are_refused_before_anything_is_submitted() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let program = rt
        .prepare_bytes(
            &pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(4), 1)]),
            "vadd",
        )
        .unwrap();
    let mut bufs: Vec<Vec<u8>> = (0..17).map(|_| vec![0u8; 16]).collect();
    let args: Vec<HostArg> = bufs.iter_mut().map(|b| arg(b)).collect();
    let check = |args: &[HostArg], mask: Option<&[bool]>, needle: &str| {
        let err = rt
            .dispatch(
                &program,
                args,
                &DispatchOptions {
                    writeback: mask,
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert!(
            matches!(err, RuntimeError::InvalidArguments { .. }),
            "{err}"
        );
        assert!(err.to_string().contains(needle), "{needle}: {err}");
    };
    check(&args, None, "at most 16");
    check(&args[..2], None, "takes 3 buffer arguments");
    let mut empty = [0u8; 0];
    let zero = unsafe { HostArg::from_raw(empty.as_mut_ptr(), 0) }.unwrap();
    check(&[args[0], zero, args[2]], None, "argument 1 is empty");
    check(
        &args[..3],
        Some(&[true, false]),
        "2 entries for 3 arguments",
    );
    assert!(
        unsafe { HostArg::from_raw(std::ptr::null_mut(), 4) }.is_none(),
        "a null pointer is not an argument"
    );

    let other = Prefix::new().runtime();
    let foreign = other
        .prepare_bytes(
            &pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(4), 1)]),
            "vadd",
        )
        .unwrap();
    check_err_contains(
        rt.dispatch(&foreign, &args[..3], &DispatchOptions::default()),
        "another HSA runtime",
    );
    let stats = prefix.stats();
    assert_eq!(
        stats.packets_completed + stats.packets_failed,
        0,
        "nothing reached the queue"
    );
}

fn check_err_contains<T: std::fmt::Debug>(r: Result<T, RuntimeError>, needle: &str) {
    let err = r.unwrap_err().to_string();
    assert!(err.contains(needle), "{needle}: {err}");
}

#[test]
fn dispatches_from_many_threads_are_serialised_and_all_correct() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let program = rt
        .prepare_bytes(
            &pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(48), 1)]),
            "vadd",
        )
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (rt, program) = (&rt, &program);
            s.spawn(move || {
                for round in 0..25 {
                    // One kernel, one block of 48; the data differs per thread and round.
                    let n = 48;
                    let a: Vec<f32> = (0..n).map(|i| (i + t * 1000) as f32).collect();
                    let b: Vec<f32> = (0..n).map(|i| (round * 3 + i) as f32).collect();
                    let (mut ab, mut bb, mut out) =
                        (f32_bytes(&a), f32_bytes(&b), vec![0u8; 4 * n]);
                    rt.dispatch(
                        program,
                        &[arg(&mut ab), arg(&mut bb), arg(&mut out)],
                        &DispatchOptions::default(),
                    )
                    .unwrap();
                    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
                    assert_eq!(f32_values(&out), expected, "thread {t} round {round}");
                }
            });
        }
    });
    assert_eq!(prefix.stats().packets_completed, 100);
    assert_eq!(prefix.stats().breaches, 0);
}

#[test]
fn loads_run_concurrently_and_share_the_cache() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let hsaco = pdi_insts_hsaco(
        "aie2p",
        &[("vadd", &add_f32(12), 1), ("inc", &increment(3), 1)],
    );
    let objects: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let (rt, hsaco) = (&rt, &hsaco);
                s.spawn(move || {
                    let name = if i % 2 == 0 { "vadd" } else { "inc" };
                    let p = rt.prepare_bytes(hsaco, name).unwrap();
                    p.state::<npu_runtime::hsa::HsaKernel>()
                        .unwrap()
                        .kernel_object()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        objects.iter().step_by(2).all(|o| *o == objects[0]),
        "one vadd program for all"
    );
    assert!(
        objects.iter().skip(1).step_by(2).all(|o| *o == objects[1]),
        "one inc program for all"
    );
    let vadd = rt.prepare_bytes(&hsaco, "vadd").unwrap();
    check_vadd(&rt, &vadd, 12);
}

#[test]
fn dropping_the_runtime_releases_everything_on_the_device() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let program = rt
        .prepare_bytes(
            &pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(1000), 1)]),
            "vadd",
        )
        .unwrap();
    let shared = rt.alloc_shared(1024).unwrap();
    check_vadd(&rt, &program, 1000);
    let busy = prefix.stats();
    assert!(
        busy.live_allocations >= 4 && busy.live_queues == 1 && busy.live_executables == 1,
        "{busy:?}"
    );
    drop(shared);
    drop(rt);
    // The program still holds the ROCr session: nothing is shut down under it.
    assert_eq!(prefix.stats().init_refcount, 1);
    drop(program);
    let done = prefix.stats();
    assert_eq!(done.init_refcount, 0, "hsa_shut_down ran");
    assert_eq!(
        done.leaked_at_shutdown, 0,
        "nothing was left for hsa_shut_down to reclaim: {done:?}"
    );
    assert_eq!(
        (
            done.live_allocations,
            done.live_queues,
            done.live_executables,
            done.live_signals
        ),
        (0, 0, 0, 0)
    );
}

/// With a timeout the doorbell is rung from the doorbell thread, which keeps the queue's
/// doorbell between launches: releasing the device state must still destroy the queue (and
/// ROCr's hardware context with it) at once, and the next launch must ring the new queue.
#[test]
fn a_queue_rung_from_the_doorbell_thread_is_destroyed_when_the_device_state_is_released() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    let program = rt
        .prepare_bytes(
            &pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(64), 1)]),
            "vadd",
        )
        .unwrap();
    let with_timeout = DispatchOptions {
        timeout: Some(std::time::Duration::from_secs(30)),
        ..DispatchOptions::default()
    };
    let launch = || check_vadd_with(&rt, &program, 64, &with_timeout);
    launch();
    launch();
    assert_eq!(prefix.stats().live_queues, 1);
    rt.release_all();
    assert_eq!(
        prefix.stats().live_queues,
        0,
        "the doorbell thread let go of the released queue"
    );
    launch();
    assert_eq!(prefix.stats().live_queues, 1);
}

#[test]
fn doctor_and_target_probe_report_the_agent() {
    let prefix = Prefix::with_file("lib64", "libhsa-runtime64.so.1");
    let empty = tempfile::tempdir().unwrap();
    let config = config_with(&[
        ("AMD_NPU_ROCR_PATH", &empty.path().display().to_string()),
        ("ROCM_PATH", &prefix.path().display().to_string()),
    ]);
    let report = doctor_report(&config, &[]);
    assert_eq!(
        report.library.as_deref(),
        Some(prefix.path().join("lib64/libhsa-runtime64.so.1").as_path())
    );
    assert_eq!(report.source.as_deref(), Some("ROCM_PATH"));
    let agent = report.agent.as_ref().unwrap();
    assert_eq!(
        (agent.name.as_str(), agent.columns, agent.device_heap),
        ("aie2p", Some(8), true)
    );
    let text = report.to_string();
    assert!(text.contains("AIE agent: aie2p (8 columns)"), "{text}");
    assert!(
        text.contains("AMD_NPU_ROCR_PATH") && text.contains("no libhsa-runtime64.so"),
        "{text}"
    );
    assert_eq!(
        prefix.stats().init_refcount,
        0,
        "the doctor shuts its session down"
    );

    let probe = HsaTargetProbe::new(&config, &[]);
    assert!(probe.reports_arch());
    assert_eq!(
        probe.probe(),
        npu_target::ProbeOutcome::Device("aie2p".into())
    );
    let detected = npu_target::target::detect(&config, &[&probe]).unwrap();
    assert_eq!(detected.target, npu_target::NpuVersion::Npu2);
}

#[test]
fn a_full_device_heap_is_a_resource_error_and_releasing_programs_frees_it() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    // Each program holds a 40 MiB device-heap variable: two do not fit in the 64 MiB heap.
    let load = |n: usize| {
        rt.load(&Artifact::Hsaco {
            bytes: pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(n), 1)]).into(),
            kernel_name: "vadd".into(),
            variables: vec![("big".into(), 40 << 20)],
        })
    };
    let first = load(4).unwrap();
    check_vadd(&rt, &first, 4);
    let err = load(5).unwrap_err();
    assert_eq!(
        err.kind(),
        npu_runtime::ErrorKind::HardwareContextExhausted,
        "{err}"
    );
    assert!(err.to_string().contains("device heap"), "{err}");
    // Once no handle holds the first program, its heap is free and the second loads.
    rt.release(&first);
    drop(first);
    let second = load(5).unwrap();
    check_vadd(&rt, &second, 5);
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

#[test]
fn two_thousand_distinct_kernels_load_and_run_with_bounded_fds_and_heap() {
    let prefix = Prefix::new();
    let rt = prefix.runtime();
    // Each kernel holds a 1 MiB device-heap variable: all 2,000 would need 2,000 MiB of a
    // 64 MiB heap. Like the driver's table, at most `KEEP` are held; the oldest is released.
    const KEEP: usize = 32;
    let fds_before = open_fds();
    let heap_before = prefix.stats().dev_heap_bytes;
    let mut held = std::collections::VecDeque::new();
    let mut heap_peak = heap_before;
    for i in 0..2_000usize {
        let n = 1 + i % 64;
        let mut hsaco = pdi_insts_hsaco("aie2p", &[("vadd", &add_f32(n), 1)]);
        // Distinct bytes (a trailing tag): a distinct program for the runtime's cache.
        hsaco.extend_from_slice(&(i as u32).to_le_bytes());
        let program = rt
            .load(&Artifact::Hsaco {
                bytes: hsaco.into(),
                kernel_name: "vadd".into(),
                variables: vec![("big".into(), 1 << 20)],
            })
            .unwrap_or_else(|e| panic!("kernel {i}: {e}"));
        check_vadd(&rt, &program, n);
        heap_peak = heap_peak.max(prefix.stats().dev_heap_bytes);
        held.push_back(program);
        if held.len() > KEEP
            && let Some(old) = held.pop_front()
        {
            rt.release(&old);
        }
    }
    let (fds_after, heap_after) = (open_fds(), prefix.stats().dev_heap_bytes);
    println!(
        "2000 kernels (hsa): fds {fds_before} -> {fds_after}, device heap {heap_before} -> \
         {heap_after} bytes, peak {heap_peak}"
    );
    assert!(fds_after <= fds_before + 4, "{fds_before} -> {fds_after}");
    assert!(heap_peak <= 64 << 20);
    assert!(heap_after <= heap_before + (KEEP as u64 + 1) * (2 << 20));
    assert_eq!(prefix.stats().breaches, 0);
}
