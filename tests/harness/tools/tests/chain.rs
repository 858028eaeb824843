//! triton-npu's chains through the stand-in toolchain: every op lowered by air-opt on its own,
//! the launches stitched into one module, aircc run once, and the full ELF carrying one
//! program that runs the ops in order over the combined buffers.

mod common;

use common::{Prefix, ctrl_text, linalg_of};
use npu_driver::chain::{ChainBuilder, MULTILAUNCH};
use npu_driver::{DriverError, Host};
use npu_harness_program::Program;
use npu_harness_tools::chain;

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `tmp = x + y` then `out = tmp * y`: buffers x=0, y=1, tmp=2, out=3.
fn add_then_mul() -> ChainBuilder {
    let mut b = ChainBuilder::new("add_mul").unwrap();
    b.add_op(
        &linalg_of("add_n.ttir"),
        [4, 1, 1],
        &[(0, 0), (1, 1), (2, 2)],
        None,
        None,
    )
    .unwrap();
    b.add_op(
        &linalg_of("mul_n.ttir"),
        [2, 1, 1],
        &[(0, 2), (1, 1), (2, 3)],
        None,
        None,
    )
    .unwrap();
    b
}

fn config(prefix: &Prefix, runtime: &str, target: &str) -> npu_target::Config {
    let cache = prefix.path().join("cache");
    prefix.config(&[
        ("AMD_TRITON_NPU_TARGET", target),
        ("AMD_TRITON_NPU_RUNTIME", runtime),
        ("AMD_TRITON_NPU_CACHE_DIR", cache.to_str().unwrap()),
    ])
}

#[test]
fn a_chain_compiles_once_into_one_program_over_the_combined_buffers() {
    let prefix = Prefix::new();
    let config = config(&prefix, "xrt", "npu2");
    let chain = add_then_mul();
    assert_eq!(
        chain.combined_arg_types().unwrap(),
        vec!["memref<*xf32>"; 4]
    );
    let compiled = chain.compile(&config, &Host::default(), None).unwrap();
    assert_eq!(compiled.num_args, 4);
    assert_eq!(compiled.compiled.symbol, "main:sequence");

    // Each op lowered with its own grid; one aircc, for a full ELF, on the stitched module.
    let launches: Vec<String> = prefix
        .runs("air-opt")
        .into_iter()
        .map(|(args, _)| args[1].clone())
        .filter(|p| p.contains("loop-bounds"))
        .collect();
    assert_eq!(launches.len(), 2, "{launches:?}");
    assert!(launches[0].contains("loop-bounds=4,1,1") && launches[1].contains("loop-bounds=2,1,1"));
    let aircc = prefix.runs("aircc");
    assert_eq!(aircc.len(), 1);
    assert!(
        aircc[0]
            .0
            .windows(2)
            .any(|w| w == ["--output-format", "elf"])
    );

    // Each op's transform script (its default elementwise schedule, expanded) is kept.
    for k in 0..2 {
        let script =
            std::fs::read_to_string(compiled.compiled.dir.join(format!("op{k}.transform.mlir")))
                .unwrap();
        assert!(script.contains("@__transform_main") && !script.contains("transform.include"));
        assert!(
            !compiled
                .compiled
                .dir
                .join(format!("op{k}.auto_transform.mlir"))
                .exists()
        );
    }

    // The stitched module: one function, two launches, carrying the program aircc compiled.
    let module = std::fs::read_to_string(compiled.module_path()).unwrap();
    assert!(module.contains("func.func @add_mul(%arg0: memref<*xf32>, %arg1: memref<*xf32>, %arg2: memref<*xf32>, %arg3: memref<*xf32>) {"), "{module}");
    assert_eq!(module.matches("air.launch (").count(), 2, "{module}");
    assert!(module.contains("@op0_add_kernel_0") && module.contains("@op1_mul_kernel_0"));
    let elf = std::fs::read(compiled.elf_path()).unwrap();
    let program = Program::decode(&ctrl_text(&elf)).unwrap();
    assert_eq!(
        chain::meaning(&module),
        npu_harness_tools::attrs::Meaning::Program(program.clone())
    );
    // Two launches, each over the grid its op was lowered with, over the combined buffers.
    assert_eq!(program.num_args, 4);
    assert_eq!(program.grids(), [[4, 1, 1], [2, 1, 1]]);
    assert_eq!(program.written_args(), [false, false, true, true]);
    let kernels = npu_hsaco::kernels_from_full_elf(&elf, Some(&["main:sequence"])).unwrap();
    assert_eq!(kernels[0].info.args, 4);

    // What the devices will compute: the hand-off flows through buffer 2 (6 elements, the
    // kernels' constexpr n_elements; the grids cover 8 and the masks keep 6).
    let x = [1.0, -2.0, 3.0, 0.5, 8.0, -4.0];
    let y = [0.5, 4.0, -1.0, 2.0, 0.25, 1.0];
    let (mut xb, mut yb, mut tmp, mut out) = (f32s(&x), f32s(&y), vec![0u8; 24], vec![0u8; 24]);
    program
        .execute(&mut [&mut xb, &mut yb, &mut tmp, &mut out])
        .unwrap();
    let sum: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    assert_eq!(floats(&tmp), sum);
    let prod: Vec<f32> = sum.iter().zip(&y).map(|(a, b)| a * b).collect();
    assert_eq!(floats(&out), prod);

    // Compiled again (another process would do the same): a cache hit runs no tool at all.
    let before = prefix.log().len();
    let again = chain.compile(&config, &Host::default(), None).unwrap();
    assert_eq!(again.compiled.dir, compiled.compiled.dir);
    assert_eq!(prefix.log().len(), before, "a warm cache ran tools");
    // A different wiring is a different chain.
    let mut rewired = ChainBuilder::new("add_mul").unwrap();
    rewired
        .add_op(
            &linalg_of("add_n.ttir"),
            [4, 1, 1],
            &[(0, 1), (1, 0), (2, 2)],
            None,
            None,
        )
        .unwrap();
    rewired
        .add_op(
            &linalg_of("mul_n.ttir"),
            [2, 1, 1],
            &[(0, 2), (1, 1), (2, 3)],
            None,
            None,
        )
        .unwrap();
    let other = rewired.compile(&config, &Host::default(), None).unwrap();
    assert_ne!(other.compiled.dir, compiled.compiled.dir);
}

#[test]
fn under_hsa_the_chain_is_packed_into_kernel_hsaco() {
    let prefix = Prefix::new();
    let compiled = add_then_mul()
        .compile(&config(&prefix, "hsa", "npu2"), &Host::default(), None)
        .unwrap();
    let hsaco = std::fs::read(compiled.compiled.dir.join("kernel.hsaco")).unwrap();
    let dump = npu_hsaco::dump(&npu_hsaco::parse(&hsaco).unwrap());
    assert!(dump.errors.is_empty(), "{:?}", dump.errors);
    assert!(
        dump.stdout.contains("arch section: aie2p")
            && dump.stdout.contains("kernel main:sequence: kind=FullElf")
            && dump.stdout.contains("kernarg=64"),
        "{}",
        dump.stdout
    );
}

#[test]
fn npu1_and_other_formats_are_refused_before_any_tool_runs() {
    let prefix = Prefix::new();
    let err = add_then_mul()
        .compile(&config(&prefix, "xrt", "npu1"), &Host::default(), None)
        .err()
        .unwrap();
    assert!(matches!(err, DriverError::ChainTarget { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("targets npu1") && message.contains("chains need npu2"),
        "{message}"
    );
    let err = add_then_mul()
        .compile(
            &config(&prefix, "xrt", "npu2"),
            &Host::default(),
            Some(npu_target::OutputFormat::Xclbin),
        )
        .err()
        .unwrap();
    assert!(
        matches!(&err, DriverError::ChainInput { reason, .. } if reason.contains("one full ELF")),
        "{err}"
    );
    assert!(prefix.runs("air-opt").is_empty() && prefix.runs("aircc").is_empty());
}

#[test]
fn the_stitched_module_is_what_build_module_text_returns() {
    let prefix = Prefix::new();
    let config = config(&prefix, "xrt", "npu2");
    let chain = add_then_mul();
    let text = chain.build_module_text(&config, &Host::default()).unwrap();
    assert!(prefix.runs("aircc").is_empty());
    let compiled = chain.compile(&config, &Host::default(), None).unwrap();
    assert_eq!(
        std::fs::read_to_string(compiled.compiled.dir.join(MULTILAUNCH)).unwrap(),
        text
    );
}
