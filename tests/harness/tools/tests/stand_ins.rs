//! The stand-in air-opt, aircc and llc check their command lines as the real tools do.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{AIR_OPT, AIRCC, LLC, linalg_of};
use npu_harness_tools::attrs::{self, Meaning};

fn run(tool: &str, cwd: &Path, args: &[&str]) -> Output {
    Command::new(tool)
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn llc_reports_the_aie_targets() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(LLC, dir.path(), &["--version"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("    aie2   - AIE2") && text.contains("    aie2p  - AIE2P"),
        "{text}"
    );
    let out = run(LLC, dir.path(), &["-O2", "x.ll"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Unknown command line argument '-O2'"));
}

fn air_input(dir: &Path) -> String {
    let path = dir.join("in.mlir");
    std::fs::write(&path, linalg_of("add_n.ttir")).unwrap();
    path.display().to_string()
}

#[test]
fn air_opt_runs_known_pipelines_and_records_the_grid() {
    let dir = tempfile::tempdir().unwrap();
    let input = air_input(dir.path());
    std::fs::write(
        dir.path().join("t.mlir"),
        "module attributes {transform.with_named_sequence} {\n  transform.named_sequence \
         @__transform_main(%m: !transform.any_op {transform.readonly}) {\n    \
         transform.yield\n  }\n}\n",
    )
    .unwrap();
    let out = run(
        AIR_OPT,
        dir.path(),
        &[
            &input,
            "--pass-pipeline=builtin.module(air-transform{filename=t.mlir},func.func(air-wrap-func-with-parallel{loop-bounds=2,3,1}),cse)",
            "-o",
            "out.mlir",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(dir.path().join("out.mlir")).unwrap();
    assert!(
        text.starts_with("// npu-harness air-opt: air-transform{filename=t.mlir}\n"),
        "{text}"
    );
    assert!(
        text.contains("npu_harness.grid = array<i32: 2, 3, 1>"),
        "{text}"
    );
    assert!(
        matches!(attrs::meaning(&text), Meaning::Program(_)),
        "the program survives"
    );
    // Individual pass flags, as mlir-opt also accepts them (stdout by default).
    let out = run(
        AIR_OPT,
        dir.path(),
        &[
            &input,
            "-air-wrap-func-with-parallel=loop-bounds=4,1,1",
            "--cse",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("npu_harness.grid = array<i32: 4, 1, 1>")
    );
}

#[test]
fn air_opt_refuses_what_mlir_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let input = air_input(dir.path());
    for (args, want) in [
        (
            vec![input.as_str(), "--frobnicate"],
            "air-opt: Unknown command line argument '--frobnicate'.",
        ),
        (
            vec![input.as_str(), "--pass-pipeline=builtin.module(air-bogus)"],
            "'air-bogus' does not refer to a registered pass or pass pipeline",
        ),
        (
            vec![
                input.as_str(),
                "--pass-pipeline=builtin.module(air-wrap-func-with-parallel{loop-bounds=1,1,1})",
            ],
            "can't run 'air-wrap-func-with-parallel' pass on 'builtin.module'",
        ),
        (
            vec![
                input.as_str(),
                "--pass-pipeline=builtin.module(func.func(air-wrap-func-with-parallel{loop-bounds=1,1}))",
            ],
            "needs loop-bounds=X,Y,Z",
        ),
        (
            vec![
                input.as_str(),
                "--pass-pipeline=builtin.module(air-par-to-launch{depth=0 bogus=1})",
            ],
            "no such option bogus",
        ),
        (
            vec![
                input.as_str(),
                "--pass-pipeline=builtin.module(air-transform{filename=missing.mlir})",
            ],
            "missing.mlir:0:0: error: failed to open transform file: missing.mlir",
        ),
        (
            vec![
                input.as_str(),
                "--pass-pipeline=builtin.module(cse)",
                "--cse",
            ],
            "'--pass-pipeline' option can't be used with individual pass options",
        ),
        (
            vec!["/nonexistent.mlir", "--cse"],
            "could not open input file '/nonexistent.mlir'",
        ),
    ] {
        let out = run(AIR_OPT, dir.path(), &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
}

fn peano(dir: &Path) -> String {
    let root = dir.join("peano");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy(LLC, root.join("bin/llc")).unwrap();
    format!("--peano={}", root.display())
}

#[test]
fn aircc_writes_upstreams_default_names_relative_to_its_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let input = air_input(dir.path());
    let p = peano(dir.path());
    let out = run(
        AIRCC,
        dir.path(),
        &[
            "--device",
            "npu1",
            "--no-xchesscc",
            "--no-xbridge",
            &p,
            &input,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    for f in [
        "aie.xclbin",
        "aie.insts.bin",
        "air_project/placed.in.mlir",
        "air_project/aie.in.mlir",
        "air_project/npu.in.mlir",
    ] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    let out = run(
        AIRCC,
        dir.path(),
        &["--device=npu2", "--output-format=elf", &p, &input],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(dir.path().join("aie.elf").is_file());
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("air_project/full_elf_config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(config["xrt-kernels"][0]["name"], "main");
    assert_eq!(config["xrt-kernels"][0]["instance"][0]["id"], "sequence");
    let pdi = config["xrt-kernels"][0]["PDIs"][0]["PDI_file"]
        .as_str()
        .unwrap();
    assert!(
        Path::new(pdi).is_absolute() && Path::new(pdi).is_file(),
        "{pdi}"
    );
    // -o without .xclbin and no -i: the instruction stream takes the same name, as in aircc.
    let out = run(
        AIRCC,
        dir.path(),
        &[
            "--device",
            "npu1",
            "-o",
            "k.bin",
            "--output-format",
            "pdi",
            "--pdi-name",
            "k.pdi",
            &p,
            &input,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(dir.path().join("k.pdi").is_file() && dir.path().join("k.bin").is_file());
}

#[test]
fn aircc_refuses_what_aircc_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let input = air_input(dir.path());
    let p = peano(dir.path());
    let fresh = || {
        let d = tempfile::tempdir().unwrap();
        (d.path().join("air_project").exists(), d)
    };
    for (args, want, creates_tmpdir) in [
        (
            vec!["--frob", input.as_str()],
            "aircc: Unknown command line argument '--frob'.  Try: '",
            false,
        ),
        (
            vec!["--output-format", "exe", input.as_str()],
            "aircc: for the --output-format option: Cannot find option named 'exe'!",
            false,
        ),
        (
            vec!["--device", "npu2", p.as_str(), "--peano"],
            "aircc: for the --peano option: requires a value!",
            false,
        ),
        // A value option swallows the input path when its value is missing.
        (
            vec!["--device", "npu2", "--peano", input.as_str()],
            "Not enough positional command line arguments specified!",
            false,
        ),
        (
            vec!["--stack-size", "big", input.as_str()],
            "'big' value invalid for uint argument!",
            false,
        ),
        (
            vec!["--device", "npu1", "--output-format", "elf", input.as_str()],
            "Error: --output-format=elf is not supported for --device=npu1. Use --output-format=xclbin (default) or --output-format=pdi for npu1.",
            true,
        ),
        (
            vec!["--device", "npu2", "/nonexistent/in.mlir"],
            "Error reading file /nonexistent/in.mlir: No such file or directory",
            true,
        ),
        (
            vec!["--device", "npu3", input.as_str()],
            "'func.func' op Invalid aie.device option",
            true,
        ),
        (
            vec![
                "--device",
                "npu2",
                "--peano=/nonexistent/peano",
                input.as_str(),
            ],
            "aiecc: --peano directory does not exist: /nonexistent/peano",
            true,
        ),
        (
            vec!["--tmpdir", "a/b", input.as_str()],
            "Error creating directory a/b: No such file or directory",
            false,
        ),
    ] {
        let (existed, d) = fresh();
        assert!(!existed);
        let out = run(AIRCC, d.path(), &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
        assert_eq!(
            d.path().join("air_project").is_dir(),
            creates_tmpdir,
            "{args:?}"
        );
        assert!(!d.path().join("aie.xclbin").exists() && !d.path().join("aie.elf").exists());
    }
    // A Peano root without bin/llc fails the way aiecc does.
    let empty = dir.path().join("empty-peano");
    std::fs::create_dir_all(&empty).unwrap();
    let out = run(
        AIRCC,
        dir.path(),
        &[
            "--device",
            "npu2",
            &format!("--peano={}", empty.display()),
            &input,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("tool 'llc' not found"),
        "{}",
        stderr(&out)
    );
}
