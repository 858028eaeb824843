//! npu-toolchain driving the stand-in toolchain end to end: discovery, the exact command lines
//! the tools receive, the artifacts, every error path, and concurrency.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Prefix, ctrl_text, is_gone, linalg_of};
use npu_harness_program::Program;
use npu_harness_tools::{artifacts, attrs};
use npu_target::{Config, NpuVersion, OutputFormat};
use npu_toolchain::{
    AirccOptions, Artifacts, CompileRequest, Compiler, SearchPaths, Toolchain, ToolchainError,
};

fn request(
    kernel: &str,
    linalg: String,
    target: NpuVersion,
    format: OutputFormat,
    out: &Path,
) -> CompileRequest {
    CompileRequest {
        kernel: kernel.into(),
        linalg: npu_toolchain::Linalg::read(linalg),
        grid: [4, 1, 1],
        actual_sizes: None,
        target,
        format,
        options: AirccOptions::default(),
        out_dir: out.to_path_buf(),
        debug_tag: None,
    }
}

fn compile(
    prefix: &Prefix,
    config: &Config,
    req: &CompileRequest,
) -> Result<npu_toolchain::CompileOutput, ToolchainError> {
    let toolchain = Toolchain::discover(config, &SearchPaths::default())?;
    assert_eq!(
        toolchain.aircc.path,
        prefix.path().join("mlir-air/bin/aircc")
    );
    Compiler::new(&toolchain, config).compile(req)
}

/// The program triton-shared-opt derives for `fixture`, run over `grid` (what air-opt's
/// `loop-bounds` make of it in the artifacts).
fn program_of(fixture: &str, grid: [u32; 3]) -> Program {
    let linalg = linalg_of(fixture);
    match attrs::meaning(&linalg) {
        attrs::Meaning::Program(mut p) => {
            p.set_grid(grid);
            p
        }
        other => panic!("{fixture}: {other:?}"),
    }
}

/// `p` without the herd tiling the schedule added (each kernel's own is checked elsewhere).
fn untiled(mut p: Program) -> Program {
    p.ops
        .retain(|op| !matches!(op, npu_harness_program::Op::Tiling { .. }));
    p
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn elf_for_npu2_with_upstreams_exact_command_line() {
    let prefix = Prefix::new();
    let config = prefix.config(&[]);
    let out = tempfile::tempdir().unwrap();
    let req = request(
        "add_kernel",
        linalg_of("add_n.ttir"),
        NpuVersion::Npu2,
        OutputFormat::Elf,
        out.path(),
    );
    let result = compile(&prefix, &config, &req).unwrap();

    let Artifacts::Elf { elf, kernel_name } = &result.artifacts else {
        panic!("{:?}", result.artifacts)
    };
    assert_eq!(elf, &out.path().join("aie.elf"));
    assert_eq!(kernel_name, "main:sequence");
    assert_eq!(result.air_mlir, out.path().join("asm_air_output.mlir"));

    let runs = prefix.runs("aircc");
    assert_eq!(runs.len(), 1, "{runs:?}");
    let (args, cwd) = &runs[0];
    let w = cwd.display().to_string();
    let peano = prefix.path().join("peano").display().to_string();
    assert_eq!(
        args,
        &strings(&[
            "--device",
            "npu2",
            "--no-xchesscc",
            "--no-xbridge",
            "--output-format",
            "elf",
            "--elf-name",
            &format!("{w}/aie.elf"),
            &format!("--peano={peano}"),
            "--air-runtime-loop-tiling-sizes=4",
            "--air-runtime-loop-tiling-sizes=4",
            "--stack-size",
            "2048",
            &format!("{w}/asm_air_output.mlir"),
        ])
    );
    // The private work directory is gone, and nothing landed in our own working directory.
    assert!(!cwd.exists(), "{} survived the compile", cwd.display());
    assert!(!Path::new("air_project").exists());

    // The full ELF carries the kernel's program as control code and one site per buffer.
    let bytes = std::fs::read(elf).unwrap();
    let kernels = npu_hsaco::kernels_from_full_elf(&bytes, Some(&["main:sequence"])).unwrap();
    assert_eq!(kernels[0].info.args, 3);
    assert_eq!(kernels[0].num_cols, Some(1));
    assert_eq!(kernels[0].info.pdis.len(), 1);
    let ctrl = ctrl_text(&bytes);
    // The default npu2 schedule splits the flattened block of 2 over 8 columns (one element
    // per core; six cores idle), and the program carries that herd.
    let mut expected = program_of("add_n.ttir", [4, 1, 1]);
    expected.set_tiling([8, 1], &[2], &[1]);
    assert_eq!(Program::decode(&ctrl).unwrap(), expected);
}

#[test]
fn xclbin_for_npu1_and_pdi_for_npu2() {
    let prefix = Prefix::new();
    let config = prefix.config(&[]);
    let out = tempfile::tempdir().unwrap();
    let relu = linalg_of("relu_n.ttir");

    let x = compile(
        &prefix,
        &config,
        &request(
            "relu_kernel",
            relu.clone(),
            NpuVersion::Npu1,
            OutputFormat::Xclbin,
            out.path(),
        ),
    )
    .unwrap();
    let Artifacts::Xclbin { xclbin, insts } = &x.artifacts else {
        panic!()
    };
    assert_eq!(
        (xclbin, insts),
        (
            &out.path().join("aie.xclbin"),
            &out.path().join("insts.bin")
        )
    );
    let bytes = std::fs::read(xclbin).unwrap();
    let part = npu_hsaco::xclbin::partition(&bytes).unwrap();
    assert_eq!(part.num_cols, 1);
    assert_eq!(&part.pdi[..16], &artifacts::PDI_SYNC);
    let xml = npu_hsaco::xclbin::sections(&bytes)
        .unwrap()
        .into_iter()
        .find(|(k, _)| *k == 2)
        .map(|(_, d)| String::from_utf8_lossy(d).into_owned())
        .unwrap();
    assert!(xml.contains("<kernel name=\"MLIR_AIE\""), "{xml}");
    let code = std::fs::read(insts).unwrap();
    assert_eq!(code.len() % 4, 0);
    // npu1's default schedule: the block of 2 over a herd of 4 columns.
    let mut expected = program_of("relu_n.ttir", [4, 1, 1]);
    expected.set_tiling([4, 1], &[2], &[1]);
    assert_eq!(Program::decode(&code).unwrap(), expected);

    let out2 = tempfile::tempdir().unwrap();
    let p = compile(
        &prefix,
        &config,
        &request(
            "relu_kernel",
            relu,
            NpuVersion::Npu2,
            OutputFormat::Pdi,
            out2.path(),
        ),
    )
    .unwrap();
    let Artifacts::Pdi { pdi, insts } = &p.artifacts else {
        panic!()
    };
    assert_eq!(&std::fs::read(pdi).unwrap()[..16], &artifacts::PDI_SYNC);
    // npu2's: over 8 columns.
    let mut expected = program_of("relu_n.ttir", [4, 1, 1]);
    expected.set_tiling([8, 1], &[2], &[1]);
    assert_eq!(
        Program::decode(&std::fs::read(insts).unwrap()).unwrap(),
        expected
    );

    let runs = prefix.runs("aircc");
    assert_eq!(runs.len(), 2);
    let peano = format!("--peano={}", prefix.path().join("peano").display());
    let (args, cwd) = &runs[0];
    let w = cwd.display().to_string();
    assert_eq!(
        args,
        &strings(&[
            "--device",
            "npu1",
            "--no-xchesscc",
            "--no-xbridge",
            "--output-format",
            "xclbin",
            "-i",
            &format!("{w}/insts.bin"),
            "-o",
            &format!("{w}/aie.xclbin"),
            &peano,
            "--air-runtime-loop-tiling-sizes=4",
            "--air-runtime-loop-tiling-sizes=4",
            "--stack-size",
            "2048",
            &format!("{w}/asm_air_output.mlir"),
        ])
    );
    let (args, cwd) = &runs[1];
    let w = cwd.display().to_string();
    assert_eq!(
        args,
        &strings(&[
            "--device",
            "npu2",
            "--no-xchesscc",
            "--no-xbridge",
            "--output-format",
            "pdi",
            "-i",
            &format!("{w}/insts.bin"),
            "--pdi-name",
            &format!("{w}/aie.pdi"),
            &peano,
            "--air-runtime-loop-tiling-sizes=4",
            "--air-runtime-loop-tiling-sizes=4",
            "--stack-size",
            "2048",
            &format!("{w}/asm_air_output.mlir"),
        ])
    );
    assert_ne!(
        runs[0].1, runs[1].1,
        "each compile gets its own work directory"
    );
}

#[test]
fn options_reach_aircc_in_upstreams_order() {
    let prefix = Prefix::new();
    let config = prefix.config(&[("AMD_TRITON_NPU_BF16_EMULATION", "1")]);
    let out = tempfile::tempdir().unwrap();
    let mut req = request(
        "add_kernel",
        linalg_of("add_n.ttir"),
        NpuVersion::Npu2,
        OutputFormat::Elf,
        out.path(),
    );
    req.options = AirccOptions {
        runtime_loop_tiling_sizes: vec![8, 2],
        stack_size: 4096,
        extra_args: vec!["--use-lock-race-condition-fix-v2".into()],
    };
    let r = compile(&prefix, &config, &req).unwrap();
    assert!(r.bf16_emulation);
    let (args, cwd) = &prefix.runs("aircc")[0];
    let tail: Vec<&str> = args[9..].iter().map(String::as_str).collect();
    assert_eq!(
        tail,
        [
            "--bf16-emulation",
            "--air-runtime-loop-tiling-sizes=8",
            "--air-runtime-loop-tiling-sizes=2",
            "--stack-size",
            "4096",
            "--use-lock-race-condition-fix-v2",
            &format!("{}/asm_air_output.mlir", cwd.display()),
        ]
    );
}

#[test]
fn f32_matmuls_get_bf16_emulation_without_asking() {
    let prefix = Prefix::new();
    let config = prefix.config(&[]);
    let out = tempfile::tempdir().unwrap();
    // The accumulator is a zero fill, as triton-shared emits for tl.dot (the automatic
    // schedule's prologue herd is made from that fill).
    let matmul = "module {\n  func.func @mm(%a: tensor<32x64xf32>, %b: tensor<64x32xf32>) -> tensor<32x32xf32> {\n    \
        %cst = arith.constant 0.000000e+00 : f32\n    \
        %e = tensor.empty() : tensor<32x32xf32>\n    \
        %c = linalg.fill ins(%cst : f32) outs(%e : tensor<32x32xf32>) -> tensor<32x32xf32>\n    \
        %0 = linalg.matmul ins(%a, %b : tensor<32x64xf32>, tensor<64x32xf32>) outs(%c : tensor<32x32xf32>) -> tensor<32x32xf32>\n    \
        return %0 : tensor<32x32xf32>\n  }\n}\n";
    let r = compile(
        &prefix,
        &config,
        &request(
            "mm",
            matmul.into(),
            NpuVersion::Npu2,
            OutputFormat::Elf,
            out.path(),
        ),
    )
    .unwrap();
    assert!(r.bf16_emulation);
    assert!(
        prefix.runs("aircc")[0]
            .0
            .contains(&"--bf16-emulation".to_owned())
    );
    // Not for an elementwise kernel.
    let prefix = Prefix::new();
    let r = compile(
        &prefix,
        &prefix.config(&[]),
        &request(
            "add_kernel",
            linalg_of("add_n.ttir"),
            NpuVersion::Npu2,
            OutputFormat::Elf,
            out.path(),
        ),
    )
    .unwrap();
    assert!(!r.bf16_emulation);
    assert!(
        !prefix.runs("aircc")[0]
            .0
            .contains(&"--bf16-emulation".to_owned())
    );
}

#[test]
fn lowering_runs_upstreams_three_steps() {
    let prefix = Prefix::new();
    let config = prefix.config(&[]);
    let out = tempfile::tempdir().unwrap();
    let mut req = request(
        "add_kernel",
        linalg_of("add_n.ttir"),
        NpuVersion::Npu2,
        OutputFormat::Elf,
        out.path(),
    );
    req.grid = [4, 2, 1];
    req.actual_sizes = Some([500, 300, 1]);
    let r = compile(&prefix, &config, &req).unwrap();
    let runs = prefix.runs("air-opt");
    let args: Vec<Vec<String>> = runs.iter().map(|(a, _)| a.clone()).collect();
    assert_eq!(
        args,
        vec![
            strings(&[
                "asm_src.mlir",
                "--pass-pipeline=builtin.module(air-resolve-tensor-opoperand-conflicts,air-override-memref-memory-space{scope=func memory-space=1})",
                "-o",
                "air_prepared.mlir"
            ]),
            strings(&[
                "air_prepared.mlir",
                "--pass-pipeline=builtin.module(air-transform{filename=transform.mlir})",
                "-o",
                "air_tiled.mlir"
            ]),
            strings(&[
                "air_tiled.mlir",
                "--pass-pipeline=builtin.module(func.func(air-wrap-func-with-parallel{loop-bounds=4,2,1 actual-sizes=500,300,1}),air-par-to-launch{depth=0 has-air-segment=true},canonicalize,cse,air-copy-to-dma)",
                "-o",
                "asm_air_output.mlir"
            ]),
        ]
    );
    // All three in the same private directory as aircc.
    let aircc_cwd = &prefix.runs("aircc")[0].1;
    assert!(runs.iter().all(|(_, cwd)| cwd == aircc_cwd));
    // The AIR module aircc compiled records the grid and still carries the program…
    let air = std::fs::read_to_string(&r.air_mlir).unwrap();
    assert!(
        air.contains("npu_harness.grid = array<i32: 4, 2, 1>"),
        "{air}"
    );
    // …and the actual sizes, which the devices apply (mlir-air's split-launch-for-padding),
    // and the herd the schedule made.
    assert!(
        air.contains("npu_harness.actual_sizes = array<i32: 500, 300, 1>"),
        "{air}"
    );
    assert!(air.contains("npu_harness.herd = \"8 1 [2] [1]\""), "{air}");
    let mut expected = program_of("add_n.ttir", [4, 2, 1]);
    expected.set_actual_sizes([500, 300, 1]);
    expected.set_tiling([8, 1], &[2], &[1]);
    assert_eq!(attrs::meaning(&air), attrs::Meaning::Program(expected));
    let steps: Vec<&str> = r.steps.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(
        steps,
        [
            "air-opt prepare",
            "air-opt transform",
            "air-opt launch",
            "aircc"
        ]
    );
}

#[test]
fn ir_and_logs_are_kept_under_the_air_project_path() {
    let prefix = Prefix::new();
    let project = tempfile::tempdir().unwrap();
    let script = project.path().join("my_transform.mlir");
    std::fs::write(&script, "module attributes {transform.with_named_sequence} {\n  // user schedule\n  transform.named_sequence @__transform_main(%m: !transform.any_op {transform.readonly}) {\n    transform.yield\n  }\n}\n").unwrap();
    let config = prefix.config(&[
        (
            "AMD_TRITON_NPU_AIR_PROJECT_PATH",
            &project.path().display().to_string(),
        ),
        ("AIR_TRANSFORM_TILING_SCRIPT", &script.display().to_string()),
    ]);
    let out = tempfile::tempdir().unwrap();
    let mut req = request(
        "add_kernel",
        linalg_of("add_n.ttir"),
        NpuVersion::Npu2,
        OutputFormat::Elf,
        out.path(),
    );
    req.debug_tag = Some("0123abcd".into());
    let r = compile(&prefix, &config, &req).unwrap();
    let kept = project.path().join("add_kernel-0123abcd");
    assert_eq!(r.kept_dir.as_deref(), Some(kept.as_path()));
    for f in [
        "asm_src.mlir",
        "air_prepared.mlir",
        "transform.mlir",
        "air_tiled.mlir",
        "asm_air_output.mlir",
        "air-opt-prepare.log",
        "air-opt-transform.log",
        "air-opt-launch.log",
        "aircc.log",
        "aie.elf",
        "air_project/full_elf_config.json",
    ] {
        assert!(kept.join(f).is_file(), "{f} was not kept");
    }
    assert_eq!(
        std::fs::read_to_string(kept.join("transform.mlir")).unwrap(),
        std::fs::read_to_string(&script).unwrap(),
        "the configured script is the one air-opt ran"
    );
}

#[test]
fn the_default_schedule_is_used_without_a_script() {
    let prefix = Prefix::new();
    let project = tempfile::tempdir().unwrap();
    let config = prefix.config(&[(
        "AMD_TRITON_NPU_AIR_PROJECT_PATH",
        &project.path().display().to_string(),
    )]);
    let out = tempfile::tempdir().unwrap();
    let linalg = linalg_of("add_n.ttir");
    let r = compile(
        &prefix,
        &config,
        &request(
            "add_kernel",
            linalg.clone(),
            NpuVersion::Npu2,
            OutputFormat::Elf,
            out.path(),
        ),
    )
    .unwrap();
    let kept = r.kept_dir.clone().unwrap();
    assert!(
        kept.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("add_kernel-")
    );
    // Our default elementwise schedule for this kernel and target, expanded, kept in the
    // debug directory and with the artifacts.
    let default = npu_toolchain::npu_transform::choose(
        None,
        &npu_toolchain::npu_transform::kernel::summarize(&linalg),
        NpuVersion::Npu2,
    )
    .unwrap();
    assert_eq!(
        default.kind,
        npu_toolchain::npu_transform::ScheduleKind::Default
    );
    assert_eq!(r.schedule, "default elementwise schedule");
    for dir in [kept.as_path(), out.path()] {
        assert_eq!(
            std::fs::read_to_string(dir.join("transform.mlir")).unwrap(),
            default.script()
        );
        assert!(!dir.join("auto_transform.mlir").exists());
    }
}

#[test]
fn a_missing_transform_script_is_named() {
    let prefix = Prefix::new();
    let config = prefix.config(&[("AIR_TRANSFORM_TILING_SCRIPT", "/nonexistent/tile.mlir")]);
    let out = tempfile::tempdir().unwrap();
    let err = compile(
        &prefix,
        &config,
        &request(
            "k",
            linalg_of("add_n.ttir"),
            NpuVersion::Npu2,
            OutputFormat::Elf,
            out.path(),
        ),
    )
    .unwrap_err();
    assert!(
        matches!(err, ToolchainError::TransformScript { .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("/nonexistent/tile.mlir") && text.contains("AIR_TRANSFORM_TILING_SCRIPT"),
        "{text}"
    );
    let cwd = std::env::current_dir().unwrap();
    assert!(
        text.contains(&format!("working directory: {}", cwd.display())),
        "{text}"
    );
    assert!(prefix.runs("air-opt").is_empty(), "nothing ran");
}

#[test]
fn missing_tools_are_all_named_with_the_places_looked() {
    let prefix = Prefix::new();
    std::fs::remove_file(prefix.path().join("mlir-air/bin/aircc")).unwrap();
    std::fs::remove_file(prefix.path().join("peano/bin/llc")).unwrap();
    let err = Toolchain::discover(&prefix.config(&[]), &SearchPaths::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("aircc, peano not found"), "{text}");
    assert!(
        text.contains(
            &prefix
                .path()
                .join("mlir-air/bin/aircc")
                .display()
                .to_string()
        ),
        "{text}"
    );
    assert!(
        text.contains(&prefix.path().join("peano").display().to_string()),
        "{text}"
    );
    assert!(text.contains("pip install"), "{text}");
}

#[test]
fn a_failing_tool_reports_command_status_tail_and_a_kept_log() {
    for (tool, step) in [("aircc", "aircc"), ("air-opt", "air-opt prepare")] {
        let prefix = Prefix::with_env(&[("NPU_HARNESS_FAIL", tool)]);
        let config = prefix.config(&[]);
        let out = tempfile::tempdir().unwrap();
        let err = compile(
            &prefix,
            &config,
            &request(
                "add_kernel",
                linalg_of("add_n.ttir"),
                NpuVersion::Npu2,
                OutputFormat::Elf,
                out.path(),
            ),
        )
        .unwrap_err();
        let ToolchainError::ToolFailed(f) = &err else {
            panic!("{err}")
        };
        assert_eq!(f.tool, tool);
        assert_eq!(f.step, step);
        assert_eq!(f.status, "exit status 1");
        assert!(!f.timed_out);
        let work = &prefix.runs(tool)[0].1;
        assert!(
            f.command.starts_with(&format!("cd {} && ", work.display())),
            "{}",
            f.command
        );
        assert!(
            f.command.contains(&format!("mlir-air/bin/{tool} ")),
            "{}",
            f.command
        );
        // The last 40 lines: progress lines 7 to 45 of the tool's 45, then its error.
        assert_eq!(f.tail.len(), 40);
        assert_eq!(f.tail[0], format!("{tool}: harness progress line 7"));
        assert!(f.tail[39].contains("injected failure"), "{:?}", f.tail);
        // The log outlives the work directory and holds everything.
        assert!(!work.exists());
        let log = std::fs::read_to_string(&f.log).unwrap();
        assert!(
            log.contains(&format!("{tool}: harness progress line 1\n")),
            "{log}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&f.log.display().to_string()) && text.contains("exit status 1"),
            "{text}"
        );
        std::fs::remove_dir_all(f.log.parent().unwrap()).unwrap();
    }
}

#[test]
fn a_hung_tool_is_killed_with_its_process_group_at_the_timeout() {
    let prefix = Prefix::with_env(&[("NPU_HARNESS_HANG", "aircc")]);
    let config = prefix.config(&[("AMD_TRITON_NPU_COMPILE_TIMEOUT", "1.5")]);
    let out = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let err = compile(
        &prefix,
        &config,
        &request(
            "add_kernel",
            linalg_of("add_n.ttir"),
            NpuVersion::Npu2,
            OutputFormat::Elf,
            out.path(),
        ),
    )
    .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(30));
    let ToolchainError::ToolFailed(f) = &err else {
        panic!("{err}")
    };
    assert!(f.timed_out);
    let text = err.to_string();
    assert!(
        text.contains("AMD_TRITON_NPU_COMPILE_TIMEOUT") && text.contains("1.5 s"),
        "{text}"
    );
    assert!(text.contains("process group"), "{text}");
    let log = prefix.log();
    let tool_pid = log
        .iter()
        .find(|l| l["tool"] == "aircc" && l["argv"][1] == "--device")
        .unwrap()["pid"]
        .as_u64()
        .unwrap();
    let helper_pid = log
        .iter()
        .find_map(|l| l["helper_pid"].as_u64())
        .expect("the hung aircc started a helper");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(is_gone(tool_pid) && is_gone(helper_pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(is_gone(tool_pid), "aircc {tool_pid} survived");
    assert!(is_gone(helper_pid), "aircc's helper {helper_pid} survived");
    std::fs::remove_dir_all(f.log.parent().unwrap()).unwrap();
}

/// An aircc that runs the stand-in, then replaces what it wrote with `after` (a shell line run
/// in aircc's working directory).
fn tampering_prefix(after: &str) -> Prefix {
    let prefix = Prefix::new();
    let env: String = prefix
        .env
        .iter()
        .map(|(k, v)| format!("{k}='{v}'; export {k}\n"))
        .collect();
    prefix.script(
        "mlir-air/bin/aircc",
        &format!(
            "#!/bin/sh\n{env}'{}' \"$@\" || exit $?\n{after}\n",
            common::AIRCC
        ),
    );
    prefix
}

#[test]
fn a_bad_full_elf_config_is_an_error_naming_it() {
    for (after, want) in [
        (
            "echo '{\"xrt-kernels\": []}' > air_project/full_elf_config.json",
            "the \"xrt-kernels\" list is empty",
        ),
        (
            "echo 'not json' > air_project/full_elf_config.json",
            "not valid JSON",
        ),
        (
            "rm air_project/full_elf_config.json",
            "was not written; looked at",
        ),
    ] {
        let prefix = tampering_prefix(after);
        let out = tempfile::tempdir().unwrap();
        let err = compile(
            &prefix,
            &prefix.config(&[]),
            &request(
                "k",
                linalg_of("add_n.ttir"),
                NpuVersion::Npu2,
                OutputFormat::Elf,
                out.path(),
            ),
        )
        .unwrap_err();
        let ToolchainError::BadOutput {
            tool, path, log, ..
        } = &err
        else {
            panic!("{err}")
        };
        assert_eq!(tool, "aircc");
        assert!(path.ends_with("full_elf_config.json"), "{}", path.display());
        let text = err.to_string();
        assert!(text.contains(want), "{text}");
        assert!(log.is_file(), "the aircc log is kept: {}", log.display());
        std::fs::remove_dir_all(log.parent().unwrap()).unwrap();
    }
}

#[test]
fn a_missing_artifact_is_an_error() {
    let prefix = tampering_prefix("rm \"$PWD/insts.bin\"");
    let out = tempfile::tempdir().unwrap();
    let err = compile(
        &prefix,
        &prefix.config(&[]),
        &request(
            "k",
            linalg_of("add_n.ttir"),
            NpuVersion::Npu1,
            OutputFormat::Xclbin,
            out.path(),
        ),
    )
    .unwrap_err();
    assert!(err.to_string().contains("insts.bin"), "{err}");
    assert!(
        err.to_string()
            .contains("an expected output file is missing"),
        "{err}"
    );
    if let ToolchainError::BadOutput { log, .. } = &err {
        std::fs::remove_dir_all(log.parent().unwrap()).unwrap();
    }
}

#[test]
fn elf_on_npu1_is_refused_before_any_tool_runs() {
    let prefix = Prefix::new();
    let out = tempfile::tempdir().unwrap();
    let err = compile(
        &prefix,
        &prefix.config(&[]),
        &request(
            "k",
            linalg_of("add_n.ttir"),
            NpuVersion::Npu1,
            OutputFormat::Elf,
            out.path(),
        ),
    )
    .unwrap_err();
    assert!(matches!(err, ToolchainError::Format(_)), "{err}");
    assert!(prefix.runs("air-opt").is_empty());
}

#[test]
fn two_kernels_compile_at_once_in_one_process() {
    let prefix = Prefix::new();
    let config = prefix.config(&[]);
    let toolchain = Toolchain::discover(&config, &SearchPaths::default()).unwrap();
    let outs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let jobs = [("add_kernel", "add_n.ttir"), ("relu_kernel", "relu_n.ttir")];
    let results: Vec<PathBuf> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .iter()
            .zip(&outs)
            .map(|((kernel, fixture), out)| {
                let (toolchain, config) = (&toolchain, &config);
                let linalg = linalg_of(fixture);
                s.spawn(move || {
                    let req = request(
                        kernel,
                        linalg,
                        NpuVersion::Npu1,
                        OutputFormat::Xclbin,
                        out.path(),
                    );
                    let r = Compiler::new(toolchain, config).compile(&req).unwrap();
                    match r.artifacts {
                        Artifacts::Xclbin { insts, .. } => insts,
                        other => panic!("{other:?}"),
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((_, fixture), insts) in jobs.iter().zip(results) {
        assert_eq!(
            untiled(Program::decode(&std::fs::read(insts).unwrap()).unwrap()),
            program_of(fixture, [4, 1, 1])
        );
    }
    let cwds: Vec<PathBuf> = prefix.runs("aircc").into_iter().map(|(_, c)| c).collect();
    assert_eq!(cwds.len(), 2);
    assert_ne!(cwds[0], cwds[1]);
}

const CHILD_SPEC: &str = "NPU_HARNESS_TEST_CHILD";

/// Run by `two_kernels_compile_at_once_in_two_processes` in a child process: compiles the
/// kernel described by `NPU_HARNESS_TEST_CHILD` (`prefix|fixture|kernel|out_dir`).
#[test]
#[ignore = "entry point of a child process; run by two_kernels_compile_at_once_in_two_processes"]
fn child_compile() {
    let spec = std::env::var(CHILD_SPEC).expect("only run as a child process");
    let parts: Vec<&str> = spec.split('|').collect();
    let map = |k: &str| -> Option<String> {
        match k {
            "MLIR_AIR_INSTALL_DIR" => Some(format!("{}/mlir-air", parts[0])),
            "PEANO_INSTALL_DIR" => Some(format!("{}/peano", parts[0])),
            _ => None,
        }
    };
    let config = Config::load(&map, &npu_target::Overrides::default()).unwrap();
    let toolchain = Toolchain::discover(&config, &SearchPaths::default()).unwrap();
    let req = request(
        parts[2],
        linalg_of(parts[1]),
        NpuVersion::Npu2,
        OutputFormat::Elf,
        Path::new(parts[3]),
    );
    Compiler::new(&toolchain, &config).compile(&req).unwrap();
}

#[test]
fn two_kernels_compile_at_once_in_two_processes() {
    let prefix = Prefix::new();
    let outs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let jobs = [("add_n.ttir", "add_kernel"), ("axpy_n.ttir", "axpy_kernel")];
    let children: Vec<_> = jobs
        .iter()
        .zip(&outs)
        .map(|((fixture, kernel), out)| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "child_compile",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(
                    CHILD_SPEC,
                    format!(
                        "{}|{fixture}|{kernel}|{}",
                        prefix.path().display(),
                        out.path().display()
                    ),
                )
                .output()
                .map(|o| (o, fixture))
        })
        .collect();
    for child in children {
        let (output, fixture) = child.unwrap();
        assert!(
            output.status.success(),
            "{fixture}: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("1 passed"),
            "the child ran the compile"
        );
    }
    for ((fixture, _), out) in jobs.iter().zip(&outs) {
        let elf = std::fs::read(out.path().join("aie.elf")).unwrap();
        assert_eq!(
            untiled(Program::decode(&ctrl_text(&elf)).unwrap()),
            program_of(fixture, [4, 1, 1])
        );
    }
    let runs = prefix.runs("aircc");
    assert_eq!(runs.len(), 2);
    assert_ne!(runs[0].1, runs[1].1);
}

#[test]
fn not_computable_kernels_still_compile() {
    let prefix = Prefix::new();
    let out = tempfile::tempdir().unwrap();
    // Softmax needs a schedule of its own: under the elementwise default its reductions would
    // be bufferized into L3, which the stand-in air-opt refuses as mlir-air does.
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/softmax_rows_in_l2.mlir")
        .display()
        .to_string();
    let r = compile(
        &prefix,
        &prefix.config(&[("AIR_TRANSFORM_TILING_SCRIPT", &script)]),
        &request(
            "softmax_kernel",
            linalg_of("softmax.ttir"),
            NpuVersion::Npu2,
            OutputFormat::Elf,
            out.path(),
        ),
    )
    .unwrap();
    let Artifacts::Elf { elf, kernel_name } = r.artifacts else {
        panic!()
    };
    let bytes = std::fs::read(elf).unwrap();
    let kernels = npu_hsaco::kernels_from_full_elf(&bytes, Some(&[&kernel_name])).unwrap();
    assert_eq!(kernels[0].info.args, 2);
    let code = ctrl_text(&bytes);
    let (args, reason) = artifacts::not_computable(&code).unwrap();
    assert_eq!(args, 2);
    assert!(reason.contains("%n_cols (i32)"), "{reason}");
    assert!(Program::decode(&code).is_err());
}

#[test]
fn work_and_failure_directories_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let record = tempfile::tempdir().unwrap();
    let mode_file = record.path().join("mode");
    let prefix = tampering_prefix(&format!("stat -c %a \"$PWD\" > '{}'", mode_file.display()));
    let out = tempfile::tempdir().unwrap();
    compile(
        &prefix,
        &prefix.config(&[]),
        &request(
            "k",
            linalg_of("add_n.ttir"),
            NpuVersion::Npu2,
            OutputFormat::Elf,
            out.path(),
        ),
    )
    .unwrap();
    assert_eq!(std::fs::read_to_string(&mode_file).unwrap().trim(), "700");

    let failing = Prefix::with_env(&[("NPU_HARNESS_FAIL", "aircc")]);
    let cache = failing.path().join("user-cache");
    let err = compile(
        &failing,
        &failing.config(&[("AMD_TRITON_NPU_CACHE_DIR", cache.to_str().unwrap())]),
        &request(
            "k",
            linalg_of("add_n.ttir"),
            NpuVersion::Npu2,
            OutputFormat::Elf,
            out.path(),
        ),
    )
    .unwrap_err();
    let ToolchainError::ToolFailed(f) = &err else {
        panic!("{err}")
    };
    // Under the user's own cache, not in a folder every user of the machine shares.
    let kept = f.log.parent().unwrap();
    assert!(kept.starts_with(cache.join("failed")), "{}", kept.display());
    assert!(
        !std::env::temp_dir()
            .join("triton-npu-failed")
            .join("k")
            .exists()
    );
    let listed = npu_cache::Cache::at(&cache)
        .unwrap()
        .failed_compiles()
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].path, kept);
    assert!(
        listed[0].files.iter().any(|f| f.ends_with(".log")),
        "{:?}",
        listed[0].files
    );
    assert_eq!(
        std::fs::metadata(kept).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert!(
        kept.join("asm_air_output.mlir").is_file(),
        "the failing step's input is kept"
    );
    std::fs::remove_dir_all(kept).unwrap();
}
