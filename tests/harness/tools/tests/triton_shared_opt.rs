//! The stand-in triton-shared-opt on TTIR printed by Triton's real frontend (fixtures made by
//! `tests/fixtures/make_ttir.py` with triton 3.9.0).

mod common;

use std::process::{Command, Output};

use common::{TRITON_SHARED_OPT, fixture};
use npu_harness_program::Program;
use npu_harness_tools::attrs::{self, Meaning};

fn run(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Output {
    use std::io::Write;
    let mut cmd = Command::new(TRITON_SHARED_OPT);
    cmd.args(args).envs(env.iter().copied());
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    // A tool that fails before reading its input closes the pipe early: that is fine.
    match input.write_all(stdin.unwrap_or("").as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("{e}"),
        _ => {}
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn convert(name: &str) -> String {
    let out = run(
        &["--triton-to-linalg-experimental"],
        Some(&fixture(name)),
        &[],
    );
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn program(name: &str) -> Program {
    match attrs::meaning(&convert(name)) {
        Meaning::Program(p) => p,
        other => panic!("{name}: {other:?}"),
    }
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn elementwise_kernels_become_programs() {
    for (name, want) in [
        (
            "add.ttir",
            "args 3\nr0 = load arg0 f32\nr1 = load arg1 f32\nr2 = add r0 r1\nstore arg2 r2 f32\n",
        ),
        (
            "sub.ttir",
            "args 3\nr0 = load arg0 f32\nr1 = load arg1 f32\nr2 = sub r0 r1\nstore arg2 r2 f32\n",
        ),
        (
            "mul.ttir",
            "args 3\nr0 = load arg0 f32\nr1 = load arg1 f32\nr2 = mul r0 r1\nstore arg2 r2 f32\n",
        ),
        (
            "relu.ttir",
            "args 2\nr0 = load arg0 f32\nr1 = const 0.0\nr2 = max r0 r1\nstore arg1 r2 f32\n",
        ),
        (
            "axpy.ttir",
            "args 3\nr0 = load arg0 f32\nr1 = const 2.5\nr2 = mul r0 r1\nr3 = load arg1 f32\nr4 = add r2 r3\nstore arg2 r4 f32\n",
        ),
        (
            "add_bf16_divisibility.ttir",
            "args 3\nr0 = load arg0 bf16\nr1 = load arg1 bf16\nr2 = add r0 r1\nstore arg2 r2 bf16\n",
        ),
        (
            "exp_neg_f32_to_f16.ttir",
            "args 2\nr0 = load arg0 f32\nr1 = neg r0\nr2 = exp r1\nstore arg1 r2 f16\n",
        ),
    ] {
        assert_eq!(program(name).to_string(), want, "{name}");
    }
}

#[test]
fn the_programs_compute_what_the_kernels_compute() {
    let x = [1.5f32, -2.0, 3.25, 0.0];
    let y = [10.0f32, 20.0, -30.0, 0.5];
    for (name, expect) in [
        ("add.ttir", [11.5f32, 18.0, -26.75, 0.5]),
        ("sub.ttir", [-8.5, -22.0, 33.25, -0.5]),
        ("mul.ttir", [15.0, -40.0, -97.5, 0.0]),
        ("axpy.ttir", [13.75, 15.0, -21.875, 0.5]),
    ] {
        let p = program(name);
        let (mut a, mut b, mut c) = (f32s(&x), f32s(&y), vec![0u8; 16]);
        p.execute(&mut [&mut a, &mut b, &mut c]).unwrap();
        assert_eq!(read_f32s(&c), expect, "{name}");
    }
    let p = program("relu.ttir");
    let (mut a, mut out) = (f32s(&x), vec![0u8; 16]);
    p.execute(&mut [&mut a, &mut out]).unwrap();
    assert_eq!(read_f32s(&out), [1.5, 0.0, 3.25, 0.0]);
}

#[test]
fn non_elementwise_kernels_are_marked_with_the_reason() {
    for (name, why, pointers) in [
        ("softmax.ttir", "tt.reduce", 2),
        ("scale_scalar.ttir", "scalar parameter %alpha", 2),
    ] {
        let linalg = convert(name);
        match attrs::meaning(&linalg) {
            Meaning::NotComputable { num_args, reason } => {
                assert_eq!(num_args, pointers, "{name}");
                assert!(reason.contains(why), "{name}: {reason}");
            }
            other => panic!("{name}: {other:?}"),
        }
        assert!(!linalg.contains(attrs::PROGRAM), "{name}");
    }
}

/// The pointer parameters the Linalg writes, found as a driver would: each
/// `materialize_in_destination … in writable %x` where `%x = memref.reinterpret_cast %argK`.
fn written_pointer_params(linalg: &str) -> Vec<bool> {
    let sig_start = linalg.find("func.func @").unwrap();
    let sig = &linalg[sig_start..sig_start + linalg[sig_start..].find(") {").unwrap()];
    let params: Vec<&str> = sig[sig.find('(').unwrap() + 1..].split(", %").collect();
    let pointer_of_arg: Vec<Option<usize>> = {
        let mut n = 0;
        params
            .iter()
            .map(|p| {
                p.contains("memref<*x").then(|| {
                    n += 1;
                    n - 1
                })
            })
            .collect()
    };
    let mut written = vec![false; pointer_of_arg.iter().flatten().count()];
    for line in linalg.lines() {
        let Some(at) = line.find(" in writable ") else {
            continue;
        };
        let target = line[at + 13..].split_whitespace().next().unwrap();
        let def = linalg
            .lines()
            .find(|l| {
                l.trim_start()
                    .starts_with(&format!("{target} = memref.reinterpret_cast %arg"))
            })
            .unwrap_or_else(|| panic!("no cast defines {target}"));
        let arg: usize = def
            .split("%arg")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        written[pointer_of_arg[arg].expect("a pointer parameter")] = true;
    }
    written
}

#[test]
fn stores_are_visible_as_materialize_in_destination() {
    for name in [
        "add.ttir",
        "relu.ttir",
        "axpy.ttir",
        "exp_neg_f32_to_f16.ttir",
    ] {
        let linalg = convert(name);
        assert_eq!(
            written_pointer_params(&linalg),
            program(name).written_args(),
            "{name}"
        );
    }
    // The shape of triton-shared's output: unranked memrefs, six trailing i32s, one generic.
    let linalg = convert("add_bf16_divisibility.ttir");
    assert!(linalg.contains(
        "func.func @add_kernel(%arg0: memref<*xbf16> {tt.divisibility = 16 : i32}, %arg1: memref<*xbf16> {tt.divisibility = 16 : i32}, %arg2: memref<*xbf16> {tt.divisibility = 16 : i32}, %arg3: i32 {tt.divisibility = 16 : i32}, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32)"
    ), "{linalg}");
    assert!(
        linalg.contains("%0 = arith.muli %arg7, %c256_i32 : i32"),
        "program_id x is the 4th of the trailing six"
    );
    assert_eq!(linalg.matches("linalg.generic").count(), 1);
    assert_eq!(linalg.matches("memref.copy").count(), 2);
    assert!(linalg.contains("arith.addf %in, %in_0 : bf16"), "{linalg}");
}

#[test]
fn command_line_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("add.ttir");
    std::fs::write(&input, fixture("add.ttir")).unwrap();
    let output = dir.path().join("add.mlir");
    let log = dir.path().join("log.jsonl");
    let out = run(
        &[
            "--triton-to-linalg-experimental",
            "--mlir-print-debuginfo",
            "-o",
            output.to_str().unwrap(),
            input.to_str().unwrap(),
        ],
        None,
        &[("NPU_HARNESS_LOG", log.to_str().unwrap())],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let text = std::fs::read_to_string(&output).unwrap();
    assert!(
        text.starts_with("#loc = loc(\"") && text.contains("make_ttir.py"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("} loc(#loc)"), "{text}");
    let line: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    assert_eq!(line["tool"], "triton-shared-opt");
    assert_eq!(line["argv"][1], "--triton-to-linalg-experimental");
    assert_eq!(line["argv"][5], input.to_str().unwrap());

    // No pass: the module is copied as mlir-opt would.
    let out = run(&[], Some("module {\n}\n"), &[]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "module {\n}\n");

    for (args, stdin, want) in [
        (
            vec!["--bogus"],
            None,
            "triton-shared-opt: Unknown command line argument '--bogus'.  Try: '",
        ),
        (
            vec!["--triton-to-linalg-experimental", "/nonexistent.ttir"],
            None,
            "could not open input file '/nonexistent.ttir'",
        ),
        (
            vec!["--triton-to-linalg-experimental"],
            Some("module {\n}\n"),
            "expected a Triton module",
        ),
        (vec!["-o"], None, "for the -o option: requires a value!"),
    ] {
        let out = run(&args, stdin, &[]);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let out = run(
        &["--triton-to-linalg-experimental"],
        Some(&fixture("add.ttir")),
        &[("NPU_HARNESS_FAIL", "triton-shared-opt")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("injected failure"));
}
