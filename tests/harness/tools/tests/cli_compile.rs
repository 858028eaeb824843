//! `triton-npu compile` through the stand-in toolchain, as a user runs it: each case runs the
//! real command-line entry point (`npu_cli::run`) in a child process whose environment names
//! the stand-in prefix, so clap parsing and the environment configuration are exercised too.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{Prefix, linalg_of};
use npu_harness_program::Program;

const CHILD_ARGS: &str = "NPU_HARNESS_TEST_CLI_ARGS";

/// Run by [`triton_npu`] in a child process: `triton-npu` with the arguments in
/// `NPU_HARNESS_TEST_CLI_ARGS` (a JSON list); the child exits with the command's status.
#[test]
#[ignore = "entry point of a child process; run by the other tests of this file"]
fn cli_child() {
    let args: Vec<String> =
        serde_json::from_str(&std::env::var(CHILD_ARGS).expect("only run as a child")).unwrap();
    let code = npu_cli::run(
        std::iter::once("triton-npu".to_owned()).chain(args),
        &npu_cli::Host::standalone(),
    );
    std::process::exit(i32::from(code));
}

/// Runs `triton-npu ARGS` with the prefix's tools configured and `env` set.
fn triton_npu(prefix: &Prefix, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(CHILD_TEST_ARGS);
    configure(&mut cmd, prefix, args, env);
    cmd.output().unwrap()
}

/// The libtest arguments that run only [`cli_child`].
const CHILD_TEST_ARGS: [&str; 5] = [
    "--exact",
    "cli_child",
    "--ignored",
    "--nocapture",
    "--test-threads=1",
];

/// The child's working directory and environment: the prefix's tools, an empty `PATH` (plus
/// `extra_path`), no configuration inherited from the developer's shell, then `env`.
fn configure(cmd: &mut Command, prefix: &Prefix, args: &[&str], env: &[(&str, &str)]) {
    let empty_path = prefix.path().join("empty-path");
    std::fs::create_dir_all(&empty_path).unwrap();
    cmd.current_dir(prefix.path())
        .env(CHILD_ARGS, serde_json::to_string(args).unwrap())
        .env("MLIR_AIR_INSTALL_DIR", prefix.path().join("mlir-air"))
        .env("PEANO_INSTALL_DIR", prefix.path().join("peano"))
        .env("PATH", &empty_path);
    for var in [
        "AMD_TRITON_NPU_TARGET",
        "AMD_TRITON_NPU_RUNTIME",
        "AMD_TRITON_NPU_OUTPUT_FORMAT",
        "AIR_TRANSFORM_TILING_SCRIPT",
        "AMD_TRITON_NPU_AIR_PROJECT_PATH",
        "AMD_TRITON_NPU_DEBUG",
        "AMD_TRITON_NPU_BF16_EMULATION",
        "LLVM_BINARY_DIR",
        "AMD_TRITON_NPU_XRT_DIR",
        "XRT_DEV_DIR",
        "XILINX_XRT",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
}

fn json_of(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    // libtest prints `test cli_child ... ` before the command's own output.
    let line = stdout
        .lines()
        .find_map(|l| l.find("{\"").map(|at| &l[at..]))
        .unwrap_or_else(|| {
            panic!(
                "no JSON in:\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

struct Case {
    prefix: Prefix,
    input: String,
    out: String,
}

fn case(fixture: &str) -> Case {
    let prefix = Prefix::new();
    let input = prefix.path().join("kernel.mlir");
    std::fs::write(&input, linalg_of(fixture)).unwrap();
    let out = prefix.path().join("out");
    Case {
        input: input.display().to_string(),
        out: out.display().to_string(),
        prefix,
    }
}

fn hsaco_check(path: &str, arch: &str) -> u8 {
    npu_cli::run(
        [
            "triton-npu",
            "hsaco",
            "check",
            "--hsaco",
            path,
            "--arch",
            arch,
        ],
        &npu_cli::Host::standalone(),
    )
}

#[test]
fn npu1_xrt_gives_an_xclbin() {
    let c = case("add_n.ttir");
    let out = triton_npu(
        &c.prefix,
        &[
            "compile",
            &c.input,
            "--kernel",
            "add_kernel",
            "--grid",
            "4",
            "--target",
            "npu1",
            "--runtime",
            "xrt",
            "-o",
            &c.out,
            "--json",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json_of(&out);
    assert_eq!(
        (
            j["target"].as_str(),
            j["format"].as_str(),
            j["runtime"].as_str()
        ),
        (Some("npu1"), Some("xclbin"), Some("xrt"))
    );
    assert_eq!(j["grid"], serde_json::json!([4, 1, 1]));
    assert_eq!(j["files"]["xclbin"], format!("{}/aie.xclbin", c.out));
    assert!(j["files"].get("hsaco").is_none());
    let insts = std::fs::read(Path::new(&c.out).join("insts.bin")).unwrap();
    assert_eq!(Program::decode(&insts).unwrap().num_args, 3);
    let steps: Vec<&str> = j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        [
            "air-opt prepare",
            "air-opt transform",
            "air-opt launch",
            "aircc"
        ]
    );
    assert!(j["steps"][3]["seconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(
        c.prefix.runs("aircc")[0].0[..6],
        [
            "--device",
            "npu1",
            "--no-xchesscc",
            "--no-xbridge",
            "--output-format",
            "xclbin"
        ]
    );
}

#[test]
fn npu2_xrt_gives_a_full_elf() {
    let c = case("relu_n.ttir");
    let out = triton_npu(
        &c.prefix,
        &[
            "compile",
            &c.input,
            "--kernel",
            "relu_kernel",
            "--grid",
            "2,1,1",
            "--target",
            "npu2",
            "-o",
            &c.out,
            "--json",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json_of(&out);
    assert_eq!(j["format"], "elf");
    assert_eq!(j["elf_kernel_name"], "main:sequence");
    assert!(Path::new(j["files"]["elf"].as_str().unwrap()).is_file());
    assert!(Path::new(j["files"]["air_mlir"].as_str().unwrap()).is_file());
    // The script air-opt ran is kept in the output folder, expanded.
    let transform = Path::new(j["files"]["transform_mlir"].as_str().unwrap());
    assert_eq!(transform, Path::new(&c.out).join("transform.mlir"));
    let script = std::fs::read_to_string(transform).unwrap();
    assert!(script.contains("@__transform_main") && !script.contains("transform.include"));
    assert_eq!(j["schedule"], "default elementwise schedule");
    assert!(j["files"].get("auto_transform_mlir").is_none());
}

#[test]
fn hsa_runtime_packs_an_hsaco_that_rocr_would_load() {
    for (target, arch, fixture, kernel, name) in [
        ("npu2", "aie2p", "add_n.ttir", "add_kernel", "main:sequence"),
        ("npu1", "aie2", "axpy_n.ttir", "axpy_kernel", "axpy_kernel"),
    ] {
        let c = case(fixture);
        let out = triton_npu(
            &c.prefix,
            &[
                "compile",
                &c.input,
                "--kernel",
                kernel,
                "--grid",
                "4,1,1",
                "--target",
                target,
                "--runtime",
                "hsa",
                "-o",
                &c.out,
                "--json",
            ],
            &[],
        );
        assert!(out.status.success(), "{target}: {}", stderr(&out));
        let j = json_of(&out);
        let hsaco = j["files"]["hsaco"].as_str().unwrap().to_owned();
        assert_eq!(hsaco, format!("{}/kernel.hsaco", c.out));
        assert_eq!(j["hsaco_kernel_name"], name);
        assert_eq!(
            hsaco_check(&hsaco, arch),
            0,
            "{target}: triton-npu hsaco check refused it"
        );
        let bytes = std::fs::read(&hsaco).unwrap();
        let parsed = npu_hsaco::parse(&bytes).unwrap();
        let kernels = parsed
            .kernels(npu_hsaco::Arch::from_name(arch).unwrap())
            .unwrap();
        assert_eq!(kernels.len(), 1);
        assert_eq!(kernels[0].name_lossy(), name);
        // The packed code still carries the kernel's program.
        let program = Program::decode(kernels[0].insts).ok();
        if target == "npu1" {
            assert_eq!(program.unwrap().num_args, 3);
            assert_eq!(kernels[0].entry.kernarg_size, 48);
        }
    }
}

#[test]
fn the_target_comes_from_the_environment_or_the_device() {
    let c = case("add_n.ttir");
    let out = triton_npu(
        &c.prefix,
        &[
            "compile",
            &c.input,
            "--kernel",
            "add_kernel",
            "--grid",
            "1",
            "-o",
            &c.out,
            "--json",
        ],
        &[("AMD_TRITON_NPU_TARGET", "npu2")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json_of(&out)["format"], "elf");
    // No target anywhere and no device: detection's error, which says how to set one.
    let out = triton_npu(
        &c.prefix,
        &[
            "compile",
            &c.input,
            "--kernel",
            "add_kernel",
            "--grid",
            "1",
            "-o",
            &c.out,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("no NPU device found") && err.contains("AMD_TRITON_NPU_TARGET=npu1"),
        "{err}"
    );
    assert!(
        err.contains("xrt-smi"),
        "the probe's observation is shown: {err}"
    );
}

#[test]
fn refusals_say_what_to_do() {
    let c = case("add_n.ttir");
    for (extra, want) in [
        (
            vec!["--target", "npu2", "--runtime", "hsa", "--format", "pdi"],
            "pdi output format cannot run under HSA (AMD_TRITON_NPU_RUNTIME=hsa)",
        ),
        (
            vec!["--target", "npu2", "--runtime", "xrt", "--format", "pdi"],
            "pdi output format cannot run under XRT (AMD_TRITON_NPU_RUNTIME=xrt), which loads \
             elf or xclbin",
        ),
        (
            vec!["--target", "npu1", "--format", "elf"],
            "not supported on npu1",
        ),
        (
            vec![
                "--target",
                "npu2",
                "--transform-script",
                "/nonexistent/t.mlir",
            ],
            "/nonexistent/t.mlir",
        ),
    ] {
        let mut args = vec![
            "compile",
            c.input.as_str(),
            "--kernel",
            "add_kernel",
            "--grid",
            "1",
            "-o",
            c.out.as_str(),
        ];
        args.extend(extra.iter().copied());
        let out = triton_npu(&c.prefix, &args, &[]);
        assert_eq!(out.status.code(), Some(1), "{extra:?}");
        assert!(stderr(&out).contains(want), "{extra:?}: {}", stderr(&out));
    }
    let out = triton_npu(
        &c.prefix,
        &[
            "compile", &c.input, "--kernel", "addk", "--grid", "1", "--target", "npu2", "-o",
            &c.out,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("defines no function @addk; it defines: add_kernel"),
        "{}",
        stderr(&out)
    );
    let out = triton_npu(
        &c.prefix,
        &[
            "compile",
            &c.input,
            "--kernel",
            "add_kernel",
            "--grid",
            "0,1",
            "-o",
            &c.out,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        stderr(&out).contains("grid sizes are whole numbers"),
        "{}",
        stderr(&out)
    );
    // Missing tools: the toolchain's own report.
    std::fs::remove_file(c.prefix.path().join("mlir-air/bin/aircc")).unwrap();
    let out = triton_npu(
        &c.prefix,
        &[
            "compile",
            &c.input,
            "--kernel",
            "add_kernel",
            "--grid",
            "1",
            "--target",
            "npu2",
            "-o",
            &c.out,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("aircc not found"), "{}", stderr(&out));
}

#[test]
fn text_summary_lists_the_files() {
    let c = case("add_n.ttir");
    let out = triton_npu(
        &c.prefix,
        &[
            "compile",
            &c.input,
            "--kernel",
            "add_kernel",
            "--grid",
            "4",
            "--target",
            "npu2",
            "--runtime",
            "hsa",
            "-o",
            &c.out,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("compiled add_kernel for npu2 (elf, runtime hsa)"),
        "{text}"
    );
    assert!(text.contains(&format!("{}/aie.elf", c.out)), "{text}");
    assert!(text.contains("kernel to dispatch: main:sequence"), "{text}");
    assert!(
        text.contains(&format!("{}/kernel.hsaco (kernel main:sequence)", c.out)),
        "{text}"
    );
}

#[test]
fn debug_streams_tool_output_and_keeps_ir_in_air_project() {
    let c = case("add_n.ttir");
    // A failing aircc: its output is streamed live, the error then shows the last 40 lines.
    let prefix = &c.prefix;
    let failing = Prefix::with_env(&[("NPU_HARNESS_FAIL", "aircc")]);
    std::fs::copy(
        failing.path().join("mlir-air/bin/aircc"),
        prefix.path().join("mlir-air/bin/aircc"),
    )
    .unwrap();
    // Debug alone keeps the IR in ./air_project (the command runs in the prefix directory).
    let out = triton_npu(
        prefix,
        &[
            "compile",
            &c.input,
            "--kernel",
            "add_kernel",
            "--grid",
            "1",
            "--target",
            "npu2",
            "-o",
            &c.out,
        ],
        &[("AMD_TRITON_NPU_DEBUG", "1")],
    );
    let project = prefix.path().join("air_project");
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("aircc: harness progress line 1\n"),
        "the first lines were streamed: {err}"
    );
    assert!(
        err.contains("  | aircc: harness progress line 7\n"),
        "the error shows the tail: {err}"
    );
    assert!(
        !err.contains("  | aircc: harness progress line 6\n"),
        "{err}"
    );
    // The kept directory holds the IR of every step that ran and the failing log.
    let kept: Vec<_> = std::fs::read_dir(&project)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        kept[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("add_kernel-")
    );
    for f in [
        "asm_src.mlir",
        "transform.mlir",
        "asm_air_output.mlir",
        "aircc.log",
    ] {
        assert!(kept[0].join(f).is_file(), "{f} not kept");
    }
    assert!(
        err.contains(&format!(
            "full log: {}",
            kept[0].join("aircc.log").display()
        )),
        "{err}"
    );

    // With a project path, under it.
    let elsewhere = prefix.path().join("elsewhere");
    let out = triton_npu(
        prefix,
        &[
            "compile",
            &c.input,
            "--kernel",
            "add_kernel",
            "--grid",
            "1",
            "--target",
            "npu2",
            "-o",
            &c.out,
        ],
        &[(
            "AMD_TRITON_NPU_AIR_PROJECT_PATH",
            elsewhere.to_str().unwrap(),
        )],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        !stderr(&out).contains("aircc: harness progress line 1\n"),
        "not streamed without debug"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 1);
}

/// Runs `triton-npu ARGS` like [`triton_npu`], but with stderr on a pseudo-terminal (through
/// util-linux `script`), as a person at a terminal sees it. Returns everything the terminal
/// showed and the exit status.
fn triton_npu_on_a_terminal(prefix: &Prefix, args: &[&str], env: &[(&str, &str)]) -> (String, i32) {
    let child = format!(
        "{} {}",
        std::env::current_exe().unwrap().display(),
        CHILD_TEST_ARGS.join(" ")
    );
    let mut cmd = Command::new("/usr/bin/script");
    cmd.args(["-q", "-e", "-c", &child, "/dev/null"]);
    configure(&mut cmd, prefix, args, env);
    let out = cmd
        .output()
        .expect("util-linux `script` runs commands on a pseudo-terminal");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
fn a_compile_longer_than_a_second_shows_a_live_status_line_on_a_terminal() {
    let c = case("add_n.ttir");
    let args = [
        "compile",
        &c.input,
        "--kernel",
        "add_kernel",
        "--grid",
        "4",
        "--target",
        "npu2",
        "--runtime",
        "xrt",
        "-o",
        &c.out,
    ];
    let slow = [
        ("NPU_HARNESS_HANG", "aircc"),
        ("AMD_TRITON_NPU_COMPILE_TIMEOUT", "2.5"),
    ];
    let (screen, status) = triton_npu_on_a_terminal(&c.prefix, &args, &slow);
    assert_ne!(status, 0, "the hung aircc must time out:\n{screen}");
    // Redrawn in place with carriage returns: kernel, step and elapsed seconds.
    assert!(
        screen.contains("\r\x1b[K[triton-npu] compiling add_kernel: aircc "),
        "no live status line on the terminal:\n{screen:?}"
    );
    let redraws = screen
        .matches("[triton-npu] compiling add_kernel: aircc")
        .count();
    assert!(
        redraws >= 2,
        "the line is redrawn while the step runs:\n{screen:?}"
    );
    // Not on a terminal: no carriage-return redraws in the output (plain log lines instead).
    let out = triton_npu(&c.prefix, &args, &slow);
    assert!(!out.status.success());
    assert!(
        !stderr(&out).contains("\r\x1b[K[triton-npu]"),
        "{}",
        stderr(&out)
    );
}
