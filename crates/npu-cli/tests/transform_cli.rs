//! `triton-npu transform list|expand` through the built binary, with the transform fixtures of
//! the repository (`tests/fixtures/transform`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/transform")
        .join(rel)
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_triton-npu"));
    cmd.arg("transform").args(args);
    for var in ["AMD_TRITON_NPU_TARGET", "AIR_TRANSFORM_TILING_SCRIPT"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[test]
fn list_prints_one_line_per_sequence_with_its_signature() {
    let out = run(&["list"], &[]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 25);
    for name in [
        "canonicalize_with_cse",
        "pad_and_promote_binary_f32in_bf16out",
        "air_herd_mapping_and_vectorize",
        "cast_cmpf_and_select_ops",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("@{name}(%"))),
            "{name} missing:\n{stdout}"
        );
    }
    assert!(
        stdout.contains(
            "@air_herd_mapping_and_vectorize(%root: !transform.any_op {transform.readonly}) -> \
             !transform.any_op"
        ),
        "{stdout}"
    );
    let doc = text(&run(&["list", "--doc"], &[]).stdout);
    assert!(
        doc.contains("Use it once, after every intermediate"),
        "{doc}"
    );
}

#[test]
fn expand_prints_exactly_what_air_opt_gets() {
    let script = fixture("scripts/relu_bf16_nested_aie2p.mlir");
    let out = run(
        &["expand", script.to_str().unwrap(), "--target", "npu2"],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let source = std::fs::read_to_string(&script).unwrap();
    let expected = npu_transform::expand(&source, script.to_str().unwrap(), None).unwrap();
    assert_eq!(text(&out.stdout), expected.text);
    assert!(!expected.text.contains("transform.include"));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    // Written for npu2: a warning, not an error, on npu1.
    let out = run(
        &["expand", script.to_str().unwrap(), "--target", "npu1"],
        &[],
    );
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("npu1 has 4"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn scripts_that_cannot_be_expanded_exit_2() {
    for (name, line, what) in [
        (
            "unknown_include.mlir",
            7,
            "no named sequence @tile_for_the_moon",
        ),
        ("recursive.mlir", 8, "@ping -> @pong -> @ping"),
        ("bad_nesting.mlir", 8, "bad nesting"),
    ] {
        let path = fixture(&format!("errors/{name}"));
        let out = run(&["expand", path.to_str().unwrap()], &[]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(out.stdout.is_empty());
        let err = text(&out.stderr);
        assert!(
            err.starts_with(&format!(
                "triton-npu transform expand: {}:{line}:",
                path.display()
            )) && err.contains(what),
            "{name}: {err}"
        );
    }
    let missing = run(&["expand", "/no/such/script.mlir"], &[]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("working directory"));
}

#[test]
fn expand_a_kernel_prints_the_schedule_its_compile_uses() {
    let kernel = fixture("kernels/matmul_i8.mlir");
    let k = kernel.to_str().unwrap();
    let out = run(&["expand", "--kernel", k], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--target"),
        "{}",
        text(&out.stderr)
    );

    let out = run(
        &["expand", "--kernel", k],
        &[("AMD_TRITON_NPU_TARGET", "npu1")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("automatic matmul schedule"));
    assert!(text(&out.stdout).contains("packed_sizes = [4, 8, 8]"));

    let relu = fixture("kernels/relu_bf16.mlir");
    let out = run(
        &[
            "expand",
            "--kernel",
            relu.to_str().unwrap(),
            "--target",
            "npu2",
        ],
        &[],
    );
    assert!(out.status.success());
    assert!(text(&out.stderr).contains("default elementwise schedule"));
    assert!(text(&out.stdout).contains("num_threads [8]"));

    // AIR_TRANSFORM_TILING_SCRIPT wins, as in a compile.
    let mine = fixture("scripts/vec_add_f32_aie2p.mlir");
    let out = run(
        &["expand", "--kernel", k, "--target", "npu2"],
        &[("AIR_TRANSFORM_TILING_SCRIPT", mine.to_str().unwrap())],
    );
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("user script"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("tile_sizes [32]"));
}
