//! The stand-in `air-par-to-launch`: gives the kernel function the shape real AIR has after
//! `air-wrap-func-with-parallel` and `air-par-to-launch{has-air-segment=true}` — the body moves
//! into an `air.launch` over the grid with an `air.segment` inside, both isolated from above,
//! and the function keeps only the grid constants, the launch and `return`:
//!
//! ```text
//! func.func @k(%arg0: memref<*xf32>, …, %arg9: i32) {
//!   %c4 = arith.constant 4 : index
//!   %c1 = arith.constant 1 : index
//!   air.launch (%arg10, %arg11, %arg12) in (%arg13=%c4, %arg14=%c1, %arg15=%c1)
//!       args(%arg16=%arg0, %arg17=%arg1, %arg18=%arg2) : memref<*xf32>, …
//!       attributes {npu_harness.program = "…"} {
//!     air.segment @k_0  args(%arg19=%arg10, …) : index, …, memref<*xf32>, … {
//!       <the body, reading the segment's arguments>
//!     }
//!   }
//!   return
//! }
//! ```
//!
//! The launch's operands are the pointer parameters in order (then any other scalar parameter
//! the body reads), so the program's `argK` is the launch's operand K. The launch carries the
//! kernel's `npu_harness.program` (or `npu_harness.not_computable`) as its own attribute: a
//! tool that stitches several kernels' launches into one function (triton-npu's chains) keeps
//! each launch's meaning and, through its operands, which buffers it reads and writes.

use std::collections::HashMap;
use std::fmt::Write;

use crate::attrs::{self, mlir_string};
use crate::mlir;

/// Triton's trailing `num_programs` x, y, z and `program_id` x, y, z parameters.
const GRID_PARAMS: usize = 6;

/// The herds air-opt's `air-transform` recorded (`npu_harness.herd`), if any.
pub fn herds(module: &str) -> Option<Vec<crate::transform::interp::Herd>> {
    attrs::string_attr(module, attrs::HERD).and_then(|t| attrs::parse_herds(&t))
}

/// The module with its first function's body moved into a launch (unchanged when it already
/// has one, or has no function).
pub fn par_to_launch(module: &str) -> String {
    let Some(func) = mlir::functions(module).into_iter().next() else {
        return module.to_owned();
    };
    let body = &module[func.body.clone()];
    if body.contains("air.launch") {
        return module.to_owned();
    }
    let grid = grid(module);
    let mut fresh = Fresh::new(func.params.len(), body);

    let scalars: Vec<usize> = (0..func.params.len())
        .filter(|&i| !func.params[i].1.starts_with("memref<"))
        .collect();
    let grid_params: &[usize] = if scalars.len() >= GRID_PARAMS
        && scalars[scalars.len() - GRID_PARAMS..]
            .iter()
            .all(|&i| func.params[i].1 == "i32")
    {
        &scalars[scalars.len() - GRID_PARAMS..]
    } else {
        &[]
    };
    // Launch operands: every pointer parameter in order, then scalars the body reads.
    let operands: Vec<usize> = (0..func.params.len())
        .filter(|&i| func.params[i].1.starts_with("memref<"))
        .chain(
            scalars
                .iter()
                .copied()
                .filter(|i| !grid_params.contains(i) && mlir::uses_value(body, &func.params[*i].0)),
        )
        .collect();

    let ivs: Vec<String> = (0..3).map(|_| fresh.next()).collect();
    let sizes: Vec<String> = (0..3).map(|_| fresh.next()).collect();
    let launch_args: Vec<String> = operands.iter().map(|_| fresh.next()).collect();
    let seg_ivs: Vec<String> = (0..3).map(|_| fresh.next()).collect();
    let seg_sizes: Vec<String> = (0..3).map(|_| fresh.next()).collect();
    let seg_args: Vec<String> = operands.iter().map(|_| fresh.next()).collect();

    let mut constants: Vec<u32> = grid.to_vec();
    constants.sort_unstable();
    constants.dedup();
    let constant = |v: u32| format!("%c{v}");

    let mut out = String::new();
    out.push_str(&module[..func.body.start]);
    out.push('\n');
    for v in &constants {
        let _ = writeln!(out, "    {} = arith.constant {v} : index", constant(*v));
    }
    let types: Vec<&str> = operands
        .iter()
        .map(|&i| func.params[i].1.as_str())
        .collect();
    let bindings = |names: &[String], values: Vec<String>| -> String {
        names
            .iter()
            .zip(values)
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let meaning = match (
        attrs::string_attr(module, attrs::PROGRAM),
        attrs::string_attr(module, attrs::NOT_COMPUTABLE),
    ) {
        // The launch's program runs over the launch's own grid (a chain keeps one per op).
        (Some(p), _) => {
            let text = match npu_harness_program::Program::parse_text(&p) {
                Ok(mut program) => {
                    program.set_grid(grid);
                    if let Some(sizes) = attrs::actual_sizes(module) {
                        program.set_actual_sizes(sizes);
                    }
                    // The herd the schedule made decides which tiles the device computes.
                    attrs::set_herd_tiling(&mut program, module);
                    program.to_string()
                }
                Err(_) => p,
            };
            format!(
                " attributes {{{} = {}}}",
                attrs::PROGRAM,
                mlir_string(&text)
            )
        }
        (None, Some(r)) => format!(
            " attributes {{{} = {}}}",
            attrs::NOT_COMPUTABLE,
            mlir_string(&r)
        ),
        (None, None) => String::new(),
    };
    let _ = writeln!(
        out,
        "    air.launch ({}) in ({}) args({}) : {}{meaning} {{",
        ivs.join(", "),
        bindings(&sizes, grid.iter().map(|v| constant(*v)).collect()),
        bindings(
            &launch_args,
            operands.iter().map(|&i| func.params[i].0.clone()).collect()
        ),
        types.join(", ")
    );
    let seg_values: Vec<String> = ivs
        .iter()
        .chain(&sizes)
        .chain(&launch_args)
        .cloned()
        .collect();
    let seg_names: Vec<String> = seg_ivs
        .iter()
        .chain(&seg_sizes)
        .chain(&seg_args)
        .cloned()
        .collect();
    let seg_types: Vec<&str> = std::iter::repeat_n("index", 6).chain(types).collect();
    let _ = writeln!(
        out,
        "      air.segment @{}_0  args({}) : {} {{",
        func.name,
        bindings(&seg_names, seg_values),
        seg_types.join(", ")
    );
    // The body reads the segment's arguments; program ids and counts become index casts.
    let mut rename: HashMap<String, String> = operands
        .iter()
        .zip(&seg_args)
        .map(|(&i, a)| (func.params[i].0.clone(), a.clone()))
        .collect();
    let grid_values = seg_sizes.iter().chain(&seg_ivs);
    for (&p, value) in grid_params.iter().zip(grid_values) {
        let name = &func.params[p].0;
        if mlir::uses_value(body, name) {
            let cast = fresh.next();
            let _ = writeln!(
                out,
                "        {cast} = arith.index_cast {value} : index to i32"
            );
            rename.insert(name.clone(), cast);
        }
    }
    let body = mlir::rename_values(body, &rename);
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        if line.trim_start().starts_with("return") {
            continue;
        }
        let _ = writeln!(out, "    {line}");
    }
    out.push_str("      }\n    }\n    return\n  ");
    out.push_str(&module[func.body.end..]);
    out
}

/// `npu_harness.grid`, or 1, 1, 1.
fn grid(module: &str) -> [u32; 3] {
    attrs::grid(module).unwrap_or([1, 1, 1])
}

/// `%argN` names the body does not use yet, numbered on from the parameters as MLIR prints.
struct Fresh<'a> {
    next: usize,
    body: &'a str,
}

impl<'a> Fresh<'a> {
    fn new(first: usize, body: &'a str) -> Fresh<'a> {
        Fresh { next: first, body }
    }

    fn next(&mut self) -> String {
        loop {
            let name = format!("%arg{}", self.next);
            self.next += 1;
            if !mlir::uses_value(self.body, &name) {
                return name;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "module attributes {npu_harness.grid = array<i32: 4, 1, 1>, npu_harness.program = \"args 2\\n%0 = ptr arg0 f32\\n%1 = load %0\\n%2 = ptr arg1 f32\\nstore %2 %1\\n\"} {\n  func.func @copy(%arg0: memref<*xf32>, %arg1: memref<*xf32>, %arg2: i32, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32) {\n    %0 = arith.muli %arg6, %c1024_i32 : i32\n    %rc = memref.reinterpret_cast %arg0 to offset: [%0] : memref<*xf32> to memref<1024xf32>\n    memref.copy %rc, %arg1 : memref<1024xf32> to memref<*xf32>\n    return\n  } loc(#loc)\n}\n";

    #[test]
    fn moves_the_body_into_a_launch_over_the_grid() {
        let out = par_to_launch(KERNEL);
        let func = &mlir::functions(&out)[0];
        let body = &out[func.body.clone()];
        assert!(
            body.contains("%c1 = arith.constant 1 : index\n    %c4 = arith.constant 4 : index"),
            "{out}"
        );
        assert!(
            body.contains(
                "air.launch (%arg9, %arg10, %arg11) in (%arg12=%c4, %arg13=%c1, %arg14=%c1) \
                 args(%arg15=%arg0, %arg16=%arg1) : memref<*xf32>, memref<*xf32> \
                 attributes {npu_harness.program = \"args 2\\ngrid 4 1 1\\n%0 = ptr arg0 f32\\n%1 = load %0\\n%2 = ptr arg1 f32\\nstore %2 %1\\n\"} {"
            ),
            "{out}"
        );
        assert!(body.contains("air.segment @copy_0  args(%arg17=%arg9, %arg18=%arg10, %arg19=%arg11, %arg20=%arg12, %arg21=%arg13, %arg22=%arg14, %arg23=%arg15, %arg24=%arg16) : index, index, index, index, index, index, memref<*xf32>, memref<*xf32> {"), "{out}");
        // program_id x is the segment's first index, cast to i32; buffers are segment args.
        assert!(
            body.contains("%arg25 = arith.index_cast %arg17 : index to i32"),
            "{out}"
        );
        assert!(body.contains("%0 = arith.muli %arg25, %c1024_i32"), "{out}");
        assert!(body.contains("memref.reinterpret_cast %arg23 to"), "{out}");
        assert!(body.contains("memref.copy %rc, %arg24"), "{out}");
        assert!(
            body.trim_end().ends_with("}\n    }\n    return")
                || body.trim_end().ends_with("return"),
            "{out}"
        );
        assert!(out.ends_with("  } loc(#loc)\n}\n"), "{out}");
        // Idempotent, and the module attributes stay.
        assert_eq!(par_to_launch(&out), out);
        assert!(out.starts_with("module attributes {npu_harness.grid"));
    }
}
