//! Lowering a payload with a transform script through the stand-in air-opt and placing it
//! with the stand-in aircc, as the driver does: the kernel's program with its herds' tilings.

use std::path::Path;
use std::process::Command;

use npu_harness_program::{Op, Program};

use super::{AIR_OPT, AIRCC, LLC};

pub const OVERRIDE: &str = "builtin.module(air-resolve-tensor-opoperand-conflicts, \
                        air-override-memref-memory-space{scope=func memory-space=1})";
pub const TRANSFORM: &str = "builtin.module(air-transform{filename=t.mlir})";
pub const LAUNCH: &str = "builtin.module(func.func(air-wrap-func-with-parallel{loop-bounds=2,1,1}),\
                      air-par-to-launch{depth=0 has-air-segment=true})";

/// Lowers `payload` with `script` and compiles it with aircc for `device`: the kernel's
/// program, or the stderr of the step that refused it.
pub fn compile(payload: &str, script: &str, device: &str) -> Result<Program, String> {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("in.mlir"), payload).unwrap();
    std::fs::write(d.join("t.mlir"), script).unwrap();
    let peano = d.join("peano");
    std::fs::create_dir_all(peano.join("bin")).unwrap();
    std::fs::copy(LLC, peano.join("bin/llc")).unwrap();
    for (input, pipeline, output) in [
        ("in.mlir", OVERRIDE, "l2.mlir"),
        ("l2.mlir", TRANSFORM, "tiled.mlir"),
        ("tiled.mlir", LAUNCH, "air.mlir"),
    ] {
        let out = Command::new(AIR_OPT)
            .args([input, &format!("--pass-pipeline={pipeline}"), "-o", output])
            .current_dir(d)
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
    }
    let out = Command::new(AIRCC)
        .args([
            "--device",
            device,
            "--no-xchesscc",
            "--no-xbridge",
            &format!("--peano={}", peano.display()),
            "air.mlir",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let insts = std::fs::read(Path::new(d).join("aie.insts.bin")).unwrap();
    Ok(Program::decode(&insts).unwrap())
}

/// The program's first tiling.
pub fn tiling(p: &Program) -> Option<Op> {
    p.ops
        .iter()
        .find(|op| matches!(op, Op::Tiling { .. }))
        .cloned()
}

/// The program without its tilings: the kernel run whole, as if by one core.
pub fn without_tilings(p: &Program) -> Program {
    let mut whole = p.clone();
    whole.ops.retain(|op| !matches!(op, Op::Tiling { .. }));
    whole
}

/// Every tiling of the program, in order.
pub fn tilings(p: &Program) -> Vec<Op> {
    p.ops
        .iter()
        .filter(|op| matches!(op, Op::Tiling { .. }))
        .cloned()
        .collect()
}

/// A script with `body` as `@__transform_main`'s body (its argument is `%m`).
pub fn main_of(body: &str) -> String {
    format!(
        "module attributes {{transform.with_named_sequence}} {{\n  \
         transform.named_sequence @__transform_main(\n      \
         %m: !transform.any_op {{transform.readonly}}) {{\n{body}    transform.yield\n  }}\n}}\n"
    )
}
