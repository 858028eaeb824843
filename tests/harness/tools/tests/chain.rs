//! triton-npu's chains through the stand-in toolchain: every op lowered by air-opt on its own,
//! the launches stitched into one module, aircc run once, and the full ELF carrying one
//! program that runs the ops in order over the combined buffers.

mod common;

use common::{Prefix, ctrl_text, linalg_of};
use npu_driver::chain::{ChainBuilder, Launches, MULTILAUNCH};
use npu_driver::{DriverError, Host};
use npu_harness_program::Program;
use npu_harness_tools::chain;
use npu_target::{FormatError, OutputFormat};

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
    let Launches::Stitched(whole) = &compiled.launches else {
        panic!("an ELF chain is one program");
    };
    assert_eq!(whole.symbol, "main:sequence");

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
            std::fs::read_to_string(compiled.dir().join(format!("op{k}.transform.mlir"))).unwrap();
        assert!(script.contains("@__transform_main") && !script.contains("transform.include"));
        assert!(
            !compiled
                .dir()
                .join(format!("op{k}.auto_transform.mlir"))
                .exists()
        );
    }

    // The stitched module: one function, two launches, carrying the program aircc compiled.
    let module = std::fs::read_to_string(compiled.module_path().unwrap()).unwrap();
    assert!(module.contains("func.func @add_mul(%arg0: memref<*xf32>, %arg1: memref<*xf32>, %arg2: memref<*xf32>, %arg3: memref<*xf32>) {"), "{module}");
    assert_eq!(module.matches("air.launch (").count(), 2, "{module}");
    assert!(module.contains("@op0_add_kernel_0") && module.contains("@op1_mul_kernel_0"));
    let elf = std::fs::read(compiled.elf_path().unwrap()).unwrap();
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
    assert_eq!(again.dir(), compiled.dir());
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
    assert_ne!(other.dir(), compiled.dir());
}

#[test]
fn under_hsa_the_chain_is_packed_into_kernel_hsaco() {
    let prefix = Prefix::new();
    let compiled = add_then_mul()
        .compile(&config(&prefix, "hsa", "npu2"), &Host::default(), None)
        .unwrap();
    let hsaco = std::fs::read(compiled.dir().join("kernel.hsaco")).unwrap();
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
fn an_elf_on_npu1_and_a_format_the_runtime_does_not_load_are_refused_before_any_tool_runs() {
    let prefix = Prefix::new();
    let err = add_then_mul()
        .compile(
            &config(&prefix, "xrt", "npu1"),
            &Host::default(),
            Some(OutputFormat::Elf),
        )
        .err()
        .unwrap();
    assert!(
        matches!(err, DriverError::Format(FormatError::ElfOnNpu1)),
        "{err}"
    );
    for runtime in ["xrt", "hsa"] {
        let err = add_then_mul()
            .compile(
                &config(&prefix, runtime, "npu2"),
                &Host::default(),
                Some(OutputFormat::Pdi),
            )
            .err()
            .unwrap();
        assert!(
            matches!(err, DriverError::Format(FormatError::NotAccepted { .. })),
            "{err}"
        );
    }
    assert!(prefix.runs("air-opt").is_empty() && prefix.runs("aircc").is_empty());
}

/// On npu1 (xclbin) each op is compiled on its own, as a kernel is, and runs as its own
/// dispatch; the ops' builds sit in `op<k>/` of one cache entry, described by `chain.json`.
#[test]
fn an_xclbin_chain_compiles_each_op_on_its_own() {
    for runtime in ["xrt", "hsa"] {
        let prefix = Prefix::new();
        let config = config(&prefix, runtime, "npu1");
        let chain = add_then_mul();
        let compiled = chain.compile(&config, &Host::default(), None).unwrap();
        assert_eq!(compiled.format, OutputFormat::Xclbin);
        let Launches::PerOp(ops) = &compiled.launches else {
            panic!("an xclbin chain runs op by op");
        };
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0].arg_map, [0, 1, 2]);
        assert_eq!(ops[1].arg_map, [2, 1, 3]);
        assert_eq!(ops[0].compiled.symbol, "add_kernel");
        assert_eq!(ops[1].compiled.symbol, "mul_kernel");
        assert!(compiled.elf_path().is_none() && compiled.module_path().is_none());
        assert!(!compiled.dir().join(MULTILAUNCH).exists());

        // Two aircc runs, each an xclbin of one op's own module (one launch, its own grid).
        let aircc = prefix.runs("aircc");
        assert_eq!(aircc.len(), 2, "{aircc:?}");
        let grids = [[4, 1, 1], [2, 1, 1]];
        for (k, (args, _)) in aircc.iter().enumerate() {
            assert!(
                args.windows(2).any(|w| w == ["--output-format", "xclbin"]),
                "{args:?}"
            );
            assert!(
                args.windows(2).any(|w| w == ["--device", "npu1"]),
                "{args:?}"
            );
            let (xclbin, insts) = &compiled.op_files()[k];
            let code = std::fs::read(insts).unwrap();
            let program = Program::decode(&code).unwrap();
            assert_eq!(program.num_args, 3);
            assert_eq!(program.grids(), [grids[k]]);
            assert!(std::fs::read(xclbin).unwrap().starts_with(b"xclbin2"));
            if runtime == "hsa" {
                let hsaco = std::fs::read(xclbin.with_file_name("kernel.hsaco")).unwrap();
                let dump = npu_hsaco::dump(&npu_hsaco::parse(&hsaco).unwrap());
                assert!(
                    dump.errors.is_empty()
                        && dump.stdout.contains("arch section: aie2")
                        && dump.stdout.contains("kind=PdiInsts"),
                    "{}",
                    dump.stdout
                );
            }
        }

        // What each op computes, run in order over the combined buffers: the hand-off flows
        // through buffer 2.
        let x = [1.0, -2.0, 3.0, 0.5, 8.0, -4.0];
        let y = [0.5, 4.0, -1.0, 2.0, 0.25, 1.0];
        let mut buffers = [f32s(&x), f32s(&y), vec![0u8; 24], vec![0u8; 24]];
        for (op, (_, insts)) in ops.iter().zip(compiled.op_files()) {
            let program = Program::decode(&std::fs::read(insts).unwrap()).unwrap();
            let mut mine: Vec<Vec<u8>> = op.arg_map.iter().map(|&c| buffers[c].clone()).collect();
            let mut views: Vec<&mut [u8]> = mine.iter_mut().map(Vec::as_mut_slice).collect();
            program.execute(&mut views).unwrap();
            for (&c, bytes) in op.arg_map.iter().zip(mine) {
                buffers[c] = bytes;
            }
        }
        let sum: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
        let prod: Vec<f32> = sum.iter().zip(&y).map(|(a, b)| a * b).collect();
        assert_eq!(floats(&buffers[3]), prod);

        // The files alone describe the chain; a warm cache runs no tool.
        let (from_files, num_args) = npu_driver::chain::ops_from_dir(compiled.dir()).unwrap();
        assert_eq!(num_args, 4);
        assert_eq!(
            from_files
                .iter()
                .map(|o| o.arg_map.clone())
                .collect::<Vec<_>>(),
            ops.iter().map(|o| o.arg_map.clone()).collect::<Vec<_>>()
        );
        let before = prefix.log().len();
        let again = chain.compile(&config, &Host::default(), None).unwrap();
        assert_eq!(again.dir(), compiled.dir());
        assert_eq!(prefix.log().len(), before, "a warm cache ran tools");
    }
}

/// A `chain.json` that is damaged, or names a folder outside its entry or a buffer the chain
/// does not have, is refused by a runner opened from the files.
#[test]
fn a_damaged_chain_manifest_is_refused() {
    let prefix = Prefix::new();
    let compiled = add_then_mul()
        .compile(&config(&prefix, "xrt", "npu1"), &Host::default(), None)
        .unwrap();
    // A copy: the cache entry itself stays sound.
    let copy = prefix.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    let text = std::fs::read_to_string(compiled.dir().join("chain.json")).unwrap();
    for (damaged, what) in [
        ("{".to_owned(), "a readable chain.json"),
        (
            text.replace("\"op1\"", "\"../op1\""),
            "op folders inside the entry",
        ),
        (
            text.replace("\"num_args\": 4", "\"num_args\": 3"),
            "arg maps within num_args",
        ),
        (text.replace("\"xclbin\"", "\"zip\""), "a known format"),
    ] {
        std::fs::write(copy.join("chain.json"), &damaged).unwrap();
        let err = npu_driver::chain::ops_from_dir(&copy).err().unwrap();
        assert!(
            matches!(&err, DriverError::Incomplete { .. }) && err.to_string().contains(what),
            "{err}"
        );
    }
    std::fs::remove_file(copy.join("chain.json")).unwrap();
    let err = npu_driver::chain::ops_from_dir(&copy).err().unwrap();
    assert!(err.to_string().contains("chain.json"), "{err}");
}

/// The stand-in aircc refuses a stitched (several-launch) module as xclbin or pdi: each launch
/// is its own aie.device, and those formats hold one; the ELF of the same module is made.
#[test]
fn aircc_refuses_several_launches_as_one_xclbin_or_pdi() {
    let prefix = Prefix::new();
    let config = config(&prefix, "xrt", "npu2");
    let text = add_then_mul()
        .build_module_text(&config, &Host::default())
        .unwrap();
    let input = prefix.path().join("add_mul_multilaunch.mlir");
    std::fs::write(&input, &text).unwrap();
    let aircc = prefix.path().join("mlir-air/bin/aircc");
    let run = |format: &str| {
        std::process::Command::new(&aircc)
            .current_dir(prefix.path())
            .args(["--device", "npu2", "--output-format", format])
            .arg(&input)
            .output()
            .unwrap()
    };
    for format in ["xclbin", "pdi"] {
        let out = run(format);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{format}");
        assert!(
            stderr.contains("2 air.launch operations lower to 2 aie.device operations")
                && stderr.contains(&format!("--output-format={format} holds one device")),
            "{stderr}"
        );
    }
    let out = run("elf");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
        std::fs::read_to_string(compiled.dir().join(MULTILAUNCH)).unwrap(),
        text
    );
}
