//! What the stand-in aircc compiles when a module holds several launches: triton-npu's chains
//! stitch the AIR of several kernels into one function with one `air.launch` per kernel, whose
//! operands are that function's (combined) buffer parameters.
//!
//! Each launch still carries its kernel's `npu_harness.program` (see [`crate::launch`]), whose
//! `argK` is the launch's operand K. The chain's program is the launches' programs in order,
//! separated by `launch`, with every `argK` renumbered to the position of operand K among the
//! function's buffer parameters — so the data really flows through the buffers the stitching
//! wired, and a wrong operand, a dropped hand-off or a misordered launch changes the result.
//!
//! A module whose own attributes carry the meaning (a single kernel) is read as before.

use npu_harness_program::{Op, Program};

use crate::attrs::{self, Meaning};
use crate::mlir;

/// The meaning of a module aircc compiles: the module attribute's, or the chain's.
pub fn meaning(module: &str) -> Meaning {
    if module_header(module).is_some_and(|h| {
        h.contains(&format!("{} = ", attrs::PROGRAM))
            || h.contains(&format!("{} = ", attrs::NOT_COMPUTABLE))
    }) {
        return attrs::meaning(module);
    }
    chain_meaning(module).unwrap_or_else(|| attrs::meaning(module))
}

/// The first line of the `module` operation.
fn module_header(module: &str) -> Option<&str> {
    module
        .lines()
        .find(|l| l.trim_start().starts_with("module"))
}

/// One `air.launch` as the stand-in reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Launch {
    at: usize,
    /// The values bound by `args(…)`, in order.
    operands: Vec<String>,
    program: Option<String>,
    not_computable: Option<String>,
}

/// How many `air.launch` operations `module` holds (each becomes its own `aie.device`).
pub fn launch_count(module: &str) -> usize {
    launches(module).len()
}

/// The `air.launch` operations of `module`, in order.
fn launches(module: &str) -> Vec<Launch> {
    let b = module.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            i = mlir::skip_string(b, i);
            continue;
        }
        let word = b[i..].starts_with(b"air.launch")
            && !b
                .get(i + "air.launch".len())
                .copied()
                .is_some_and(mlir::is_ident)
            && (i == 0 || !mlir::is_ident(b[i - 1]));
        if !word {
            i += 1;
            continue;
        }
        let header_end = region_open(module, i).unwrap_or(b.len());
        let header = &module[i..header_end];
        let operands = header
            .find("args(")
            .and_then(|a| {
                let open = i + a + "args".len();
                let close = mlir::matching(module, open)?;
                Some(
                    mlir::split_top_level(&module[open + 1..close], b',')
                        .into_iter()
                        .map(|binding| {
                            binding
                                .split_once('=')
                                .map_or(binding, |(_, v)| v)
                                .trim()
                                .to_owned()
                        })
                        .collect(),
                )
            })
            .unwrap_or_default();
        out.push(Launch {
            at: i,
            operands,
            program: attrs::string_attr(header, attrs::PROGRAM),
            not_computable: attrs::string_attr(header, attrs::NOT_COMPUTABLE),
        });
        i = header_end;
    }
    out
}

/// The `{` that opens the region of the operation starting at `at`: the first brace outside
/// parentheses, brackets, strings and an `attributes {…}` dictionary.
fn region_open(module: &str, at: usize) -> Option<usize> {
    let b = module.as_bytes();
    let mut i = at;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = mlir::skip_string(b, i);
                continue;
            }
            b'(' | b'[' => i = mlir::matching(module, i)?,
            b'{' if module[at..i].trim_end().ends_with("attributes") => {
                i = mlir::matching(module, i)?
            }
            b'{' => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The chain's meaning, or `None` when no launch carries one.
fn chain_meaning(module: &str) -> Option<Meaning> {
    let launches = launches(module);
    if launches
        .iter()
        .all(|l| l.program.is_none() && l.not_computable.is_none())
    {
        return None;
    }
    let funcs = mlir::functions(module);
    let func = funcs.iter().find(|f| f.body.contains(&launches[0].at))?;
    let buffers: Vec<&str> = func
        .params
        .iter()
        .filter(|(_, ty)| ty.starts_with("memref<"))
        .map(|(v, _)| v.as_str())
        .collect();
    let num_args = u8::try_from(buffers.len()).unwrap_or(u8::MAX);
    let not_computable = |reason: String| Meaning::NotComputable { num_args, reason };
    let mut ops = Vec::new();
    for (k, launch) in launches.iter().enumerate() {
        let program = match (&launch.program, &launch.not_computable) {
            (Some(text), _) => match Program::parse_text(text) {
                Ok(p) => p,
                Err(e) => {
                    return Some(not_computable(format!(
                        "launch {k}: its {} is unreadable: {e}",
                        attrs::PROGRAM
                    )));
                }
            },
            (None, Some(reason)) => return Some(not_computable(format!("launch {k}: {reason}"))),
            (None, None) => {
                return Some(not_computable(format!(
                    "launch {k} carries no {} (it was not lowered by the harness's air-opt)",
                    attrs::PROGRAM
                )));
            }
        };
        // Launch operand K → position among the function's buffer parameters.
        let mut combined = Vec::with_capacity(launch.operands.len());
        for (i, operand) in launch.operands.iter().enumerate() {
            combined.push(buffers.iter().position(|b| b == operand).ok_or(i));
        }
        let arg = |a: u8| -> Result<u8, String> {
            match combined.get(a as usize) {
                Some(Ok(c)) => Ok(*c as u8),
                Some(Err(i)) => Err(format!(
                    "launch {k}: operand {i} ({}) is not a buffer parameter of @{}",
                    launch.operands[*i], func.name
                )),
                None => Err(format!(
                    "launch {k}: its program uses arg{a}, the launch has {} operands",
                    launch.operands.len()
                )),
            }
        };
        if k > 0 {
            ops.push(Op::Launch);
        }
        for op in program.ops {
            let mapped = match op {
                Op::Ptr { arg: a, elem } => arg(a).map(|a| Op::Ptr { arg: a, elem }),
                other => Ok(other),
            };
            match mapped {
                Ok(op) => ops.push(op),
                Err(reason) => return Some(not_computable(reason)),
            }
        }
    }
    let program = Program {
        num_args,
        bf16_emulation: false,
        ops,
    };
    Some(match program.validate() {
        Ok(()) => Meaning::Program(program),
        Err(e) => not_computable(format!("the chain's program is invalid: {e}")),
    })
}

/// A symbol defined twice (`func.func`, `air.segment`, `air.herd`, `air.channel`), as MLIR's
/// verifier reports it: `redefinition of symbol named '<name>'`.
pub fn duplicate_symbol(module: &str) -> Option<String> {
    let b = module.as_bytes();
    let mut seen = std::collections::HashSet::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            i = mlir::skip_string(b, i);
            continue;
        }
        let keyword = ["func.func", "air.segment", "air.herd", "air.channel"]
            .into_iter()
            .find(|k| {
                b[i..].starts_with(k.as_bytes())
                    && (i == 0 || !mlir::is_ident(b[i - 1]))
                    && b.get(i + k.len()) == Some(&b' ')
            });
        let Some(keyword) = keyword else {
            i += 1;
            continue;
        };
        i += keyword.len();
        let line_end = module[i..].find('\n').map_or(b.len(), |n| n + i);
        let Some(at) = module[i..line_end].find('@').map(|a| a + i) else {
            continue;
        };
        let end = (at + 1..b.len())
            .find(|&j| !mlir::is_ident(b[j]))
            .unwrap_or(b.len());
        let name = &module[at + 1..end];
        if !seen.insert(name.to_owned()) {
            return Some(name.to_owned());
        }
        i = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(program: &str, operands: &str, segment: &str) -> String {
        format!(
            "    air.launch (%a, %b, %c) in (%d=%c1, %e=%c1, %f=%c1) args({operands}) : memref<*xf32>, memref<*xf32>, memref<*xf32> attributes {{npu_harness.program = {}}} {{\n      air.segment @{segment}  args(%g=%a) : index {{\n      }}\n    }}\n",
            attrs::mlir_string(program)
        )
    }

    const ADD: &str = "args 3\ngrid 2 1 1\n%0 = ptr arg0 f32\n%1 = load %0\n%2 = ptr arg1 f32\n\
                       %3 = load %2\n%4 = addf %1 %3\n%5 = ptr arg2 f32\nstore %5 %4\n";
    const MUL: &str = "args 3\n%0 = ptr arg0 f32\n%1 = load %0\n%2 = ptr arg1 f32\n%3 = load %2\n\
                       %4 = mulf %1 %3\n%5 = ptr arg2 f32\nstore %5 %4\n";

    fn chain(ops: &[(&str, &str, &str)]) -> String {
        let mut m = String::from(
            "module {\n  func.func @chain(%arg0: memref<*xf32>, %arg1: memref<*xf32>, %arg2: memref<*xf32>, %arg3: memref<*xf32>) {\n",
        );
        for (p, o, s) in ops {
            m.push_str(&launch(p, o, s));
        }
        m.push_str("    return\n  }\n}\n");
        m
    }

    #[test]
    fn launches_become_one_program_over_the_combined_buffers() {
        let m = chain(&[
            (ADD, "%x=%arg0, %y=%arg1, %z=%arg2", "op0_add_0"),
            (MUL, "%x=%arg2, %y=%arg1, %z=%arg3", "op1_mul_0"),
        ]);
        let Meaning::Program(p) = meaning(&m) else {
            panic!("{:?}", meaning(&m));
        };
        assert_eq!(
            p.to_string(),
            "args 4\ngrid 2 1 1\n%0 = ptr arg0 f32\n%1 = load %0\n%2 = ptr arg1 f32\n%3 = load %2\n\
             %4 = addf %1 %3\n%5 = ptr arg2 f32\nstore %5 %4\nlaunch\n%0 = ptr arg2 f32\n\
             %1 = load %0\n%2 = ptr arg1 f32\n%3 = load %2\n%4 = mulf %1 %3\n%5 = ptr arg3 f32\n\
             store %5 %4\n"
        );
        assert_eq!(duplicate_symbol(&m), None);
    }

    #[test]
    fn a_launch_operand_that_is_no_buffer_parameter_is_refused() {
        let m = chain(&[(ADD, "%x=%arg0, %y=%arg1, %z=%op0_tmp", "s")]);
        match meaning(&m) {
            Meaning::NotComputable { num_args, reason } => {
                assert_eq!(num_args, 4);
                assert!(reason.contains("operand 2 (%op0_tmp)"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn module_attributes_still_decide_for_single_kernels() {
        let m = format!(
            "module attributes {{npu_harness.program = {}}} {{\n{}}}\n",
            attrs::mlir_string(MUL),
            chain(&[(ADD, "%x=%arg0, %y=%arg1, %z=%arg2", "s")])
        );
        assert!(
            matches!(meaning(&m), Meaning::Program(p) if p.ops[2] == Program::parse_text(MUL).unwrap().ops[2])
        );
    }

    #[test]
    fn finds_redefined_symbols() {
        let m = chain(&[
            (ADD, "%x=%arg0, %y=%arg1, %z=%arg2", "add_0"),
            (MUL, "%x=%arg2, %y=%arg1, %z=%arg3", "add_0"),
        ]);
        assert_eq!(duplicate_symbol(&m).as_deref(), Some("add_0"));
    }
}
