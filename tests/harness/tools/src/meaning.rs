//! What a kernel computes: its TTIR translated op by op into a harness program
//! (`npu-harness-program`), which the software devices run once per program instance.
//!
//! Only the ops a `tt.store` depends on (its pointer, value and mask, transitively) are
//! translated. The NPU receives only the pointer arguments — upstream's launcher parses every
//! other argument and drops it (upstream-driver.md §7.1) — so a store that depends on a scalar
//! parameter that is not `tl.constexpr` (a size in a mask, a stride, a scale) would be computed
//! by the real device with a value it never received: such a kernel is *not computable*, and
//! the reason names the parameter. Everything else Triton's frontend emits for upstream's
//! examples translates: program ids, ranges, splats, broadcasts, pointer arithmetic, masked
//! loads and stores, `arith`/`math` ops, casts, `tt.dot`, single-op `tt.reduce`.

use std::collections::{HashMap, HashSet};

use npu_harness_program::{BinOp, CastOp, DType, FPred, IPred, Op, Program, UnOp, V};

use crate::ttir::{Kernel, TOp, TType};

/// The harness program of `kernel`, or why there is none.
pub fn program(kernel: &Kernel) -> Result<Program, String> {
    let num_args = u8::try_from(kernel.pointer_params().count())
        .map_err(|_| "it has more than 255 pointer parameters".to_owned())?;
    let stores: Vec<&TOp> = kernel.ops.iter().filter(|o| o.name == "tt.store").collect();
    if stores.is_empty() {
        return Err("it stores nothing (no tt.store)".into());
    }
    let live = live_values(kernel);
    let scalars: Vec<String> = kernel
        .params
        .iter()
        .filter(|p| p.pointee().is_none() && live.contains(p.ssa.as_str()))
        .map(|p| format!("{} ({})", p.ssa, p.ty))
        .collect();
    if !scalars.is_empty() {
        return Err(format!(
            "its stores depend on the scalar parameter{} {}, which the NPU never receives: \
             upstream's launcher passes only pointer arguments and drops every other one, so \
             the device would compute with a value it does not have; declare {} `tl.constexpr`",
            if scalars.len() > 1 { "s" } else { "" },
            scalars.join(", "),
            if scalars.len() > 1 { "them" } else { "it" },
        ));
    }
    let mut t = Translator {
        kernel,
        values: HashMap::new(),
        ops: Vec::new(),
        next: 0,
    };
    for op in &kernel.ops {
        if op.name == "tt.store" || op.results.iter().any(|r| live.contains(r.as_str())) {
            t.op(op)?;
        }
    }
    let program = Program {
        num_args,
        bf16_emulation: false,
        ops: t.ops,
    };
    program
        .validate()
        .map_err(|e| format!("the derived program is invalid: {e}"))?;
    Ok(program)
}

/// The SSA names the kernel's stores depend on.
pub fn live_values(kernel: &Kernel) -> HashSet<&str> {
    let defs = kernel.defs();
    let mut live: HashSet<&str> = HashSet::new();
    let mut work: Vec<&str> = kernel
        .ops
        .iter()
        .filter(|o| o.name == "tt.store")
        .flat_map(|o| o.operands.iter().map(String::as_str))
        .collect();
    while let Some(v) = work.pop() {
        if !live.insert(v) {
            continue;
        }
        if let Some(def) = defs.get(v) {
            work.extend(def.operands.iter().map(String::as_str));
        }
    }
    live
}

fn dtype(elem: &str) -> Result<DType, String> {
    match elem {
        "f32" => Ok(DType::F32),
        "f16" => Ok(DType::F16),
        "bf16" => Ok(DType::Bf16),
        "f64" => Ok(DType::F64),
        "i8" => Ok(DType::I8),
        "i16" => Ok(DType::I16),
        "i32" => Ok(DType::I32),
        "i64" => Ok(DType::I64),
        "i1" => Ok(DType::I1),
        other => Err(format!(
            "it uses the element type {other}, which the harness lacks"
        )),
    }
}

/// Operations the harness does not model, with the reason a user sees.
fn unsupported(op: &str) -> Option<&'static str> {
    Some(match op {
        "tt.scan" => "it scans (tt.scan), which the harness does not model",
        "tt.histogram" => "it builds a histogram (tt.histogram), which the harness does not model",
        "tt.call" => "it calls another function (tt.call), which the harness does not follow",
        "tt.atomic_rmw" | "tt.atomic_cas" => {
            "it uses atomics, which the NPU lowering does not support"
        }
        "tt.gather" | "tt.join" | "tt.split" | "tt.cat" => {
            "it joins, splits or gathers tensors, which the harness does not model"
        }
        "tt.make_tensor_ptr" | "tt.advance" => {
            "it uses block pointers (tt.make_tensor_ptr), which Triton 3.9's frontend no longer \
             emits"
        }
        "tt.extern_elementwise" => {
            "it calls an external elementwise function (libdevice), which the NPU lacks"
        }
        _ if op.starts_with("scf.") => {
            "it has control flow (scf), which the harness does not model; unroll loops with \
             tl.static_range"
        }
        _ => return None,
    })
}

struct Translator<'a> {
    kernel: &'a Kernel,
    /// TTIR SSA name → program value.
    values: HashMap<String, V>,
    ops: Vec<Op>,
    next: V,
}

impl Translator<'_> {
    fn push(&mut self, op: Op) -> V {
        self.ops.push(op);
        self.next += 1;
        self.next - 1
    }

    fn bind(&mut self, op: &TOp, v: V) {
        if let Some(r) = op.results.first() {
            self.values.insert(r.clone(), v);
        }
    }

    /// The program value of a TTIR operand; a pointer parameter becomes `ptr argK` on first
    /// use; a scalar parameter is refused.
    fn value(&mut self, ssa: &str) -> Result<V, String> {
        if let Some(v) = self.values.get(ssa) {
            return Ok(*v);
        }
        let kernel = self.kernel;
        if let Some(p) = kernel.params.iter().find(|p| p.ssa == ssa) {
            return match p.pointee() {
                Some(elem) => {
                    let arg = kernel
                        .pointer_params()
                        .position(|q| q.ssa == ssa)
                        .unwrap_or(0) as u8;
                    let v = self.push(Op::Ptr {
                        arg,
                        elem: dtype(elem)?,
                    });
                    self.values.insert(ssa.to_owned(), v);
                    Ok(v)
                }
                None => Err(format!(
                    "the scalar parameter {ssa} is read where the harness cannot follow it"
                )),
            };
        }
        Err(format!(
            "the value {ssa} is defined by nothing the harness can read"
        ))
    }

    fn operand(&mut self, op: &TOp, i: usize) -> Result<V, String> {
        let name = op
            .operands
            .get(i)
            .ok_or_else(|| format!("{} lacks operand {i}", op.name))?
            .clone();
        self.value(&name)
    }

    fn result(op: &TOp) -> Result<TType, String> {
        op.result_type()
            .ok_or_else(|| format!("{} has no readable result type ({})", op.name, op.types))
    }

    fn op(&mut self, op: &TOp) -> Result<(), String> {
        let name = op.name.as_str();
        if let Some(why) = unsupported(name) {
            return Err(why.into());
        }
        let arith = name.strip_prefix("arith.");
        let math = name.strip_prefix("math.");
        let v = match name {
            "tt.return" => return Ok(()),
            "tt.get_program_id" | "tt.get_num_programs" => {
                let axis = match op.body.trim() {
                    "x" => 0,
                    "y" => 1,
                    "z" => 2,
                    other => return Err(format!("{name} of axis {other:?}")),
                };
                self.push(if name == "tt.get_program_id" {
                    Op::ProgramId(axis)
                } else {
                    Op::NumPrograms(axis)
                })
            }
            "arith.constant" => {
                let t = Self::result(op)?;
                let value = constant(&op.body, &t.elem)
                    .ok_or_else(|| format!("unreadable constant {}", op.body))?;
                self.push(Op::Const {
                    dtype: dtype(&t.elem)?,
                    shape: t.shape,
                    value,
                })
            }
            "tt.make_range" => {
                let (start, end) = (op.int_attr("start").unwrap_or(0), op.int_attr("end"));
                let end = end.ok_or("tt.make_range without an end")?;
                self.push(Op::Range {
                    start: start as i32,
                    end: end as i32,
                })
            }
            "tt.splat" | "tt.broadcast" | "tt.reshape" => {
                let a = self.operand(op, 0)?;
                let shape = Self::result(op)?.shape;
                self.push(match name {
                    "tt.splat" => Op::Splat { a, shape },
                    "tt.broadcast" => Op::Broadcast { a, shape },
                    _ => Op::Reshape { a, shape },
                })
            }
            "tt.expand_dims" => {
                let a = self.operand(op, 0)?;
                let axis = op
                    .int_attr("axis")
                    .ok_or("tt.expand_dims without an axis")?;
                self.push(Op::ExpandDims {
                    a,
                    axis: axis as u32,
                })
            }
            "tt.trans" => {
                let a = self.operand(op, 0)?;
                let perm = op.array_attr("order").ok_or("tt.trans without an order")?;
                self.push(Op::Trans { a, perm })
            }
            "tt.addptr" => {
                let (ptr, offset) = (self.operand(op, 0)?, self.operand(op, 1)?);
                self.push(Op::AddPtr { ptr, offset })
            }
            "tt.load" => {
                let ptr = self.operand(op, 0)?;
                let mask = (op.operands.len() > 1)
                    .then(|| self.operand(op, 1))
                    .transpose()?;
                let other = (op.operands.len() > 2)
                    .then(|| self.operand(op, 2))
                    .transpose()?;
                self.push(Op::Load { ptr, mask, other })
            }
            "tt.store" => {
                let (ptr, value) = (self.operand(op, 0)?, self.operand(op, 1)?);
                let mask = (op.operands.len() > 2)
                    .then(|| self.operand(op, 2))
                    .transpose()?;
                self.ops.push(Op::Store { ptr, value, mask });
                return Ok(());
            }
            "arith.cmpf" | "arith.cmpi" => {
                let pred = op.body.split(',').next().unwrap_or("").trim();
                let (a, b) = (self.operand(op, 0)?, self.operand(op, 1)?);
                self.push(if name == "arith.cmpf" {
                    Op::CmpF {
                        pred: FPred::parse(pred)
                            .ok_or_else(|| format!("cmpf predicate {pred:?}"))?,
                        a,
                        b,
                    }
                } else {
                    Op::CmpI {
                        pred: IPred::parse(pred)
                            .ok_or_else(|| format!("cmpi predicate {pred:?}"))?,
                        a,
                        b,
                    }
                })
            }
            "arith.select" => {
                let (cond, a, b) = (
                    self.operand(op, 0)?,
                    self.operand(op, 1)?,
                    self.operand(op, 2)?,
                );
                self.push(Op::Select { cond, a, b })
            }
            "math.fma" => {
                let (a, b, c) = (
                    self.operand(op, 0)?,
                    self.operand(op, 1)?,
                    self.operand(op, 2)?,
                );
                self.push(Op::Fma { a, b, c })
            }
            "tt.precise_sqrt" => {
                let a = self.operand(op, 0)?;
                self.push(Op::Un { op: UnOp::Sqrt, a })
            }
            "tt.precise_divf" => {
                let (a, b) = (self.operand(op, 0)?, self.operand(op, 1)?);
                self.push(Op::Bin {
                    op: BinOp::DivF,
                    a,
                    b,
                })
            }
            "tt.fp_to_fp" | "tt.bitcast" => {
                let a = self.operand(op, 0)?;
                let to = Self::result(op)?;
                let from = op
                    .operand_types()
                    .first()
                    .cloned()
                    .ok_or_else(|| format!("{name} without an operand type"))?;
                let cast = if name == "tt.bitcast" {
                    CastOp::Bitcast
                } else if width(&to.elem) < width(&from.elem) {
                    CastOp::TruncF
                } else {
                    CastOp::ExtF
                };
                self.push(Op::Cast {
                    op: cast,
                    a,
                    to: dtype(&to.elem)?,
                })
            }
            "tt.dot" => {
                let (a, b, acc) = (
                    self.operand(op, 0)?,
                    self.operand(op, 1)?,
                    self.operand(op, 2)?,
                );
                if Self::result(op)?.shape.len() != 2 {
                    return Err(
                        "it multiplies batched (3-D) blocks, which the harness does \
                                not model"
                            .into(),
                    );
                }
                self.push(Op::Dot { a, b, acc })
            }
            "tt.reduce" => self.reduce(op)?,
            _ => {
                if let Some(cast) = arith.and_then(CastOp::parse) {
                    let a = self.operand(op, 0)?;
                    let to = dtype(&Self::result(op)?.elem)?;
                    self.push(Op::Cast { op: cast, a, to })
                } else if let Some(bin) = arith.and_then(BinOp::parse) {
                    let (a, b) = (self.operand(op, 0)?, self.operand(op, 1)?);
                    self.push(Op::Bin { op: bin, a, b })
                } else if let Some(un) = arith.or(math).and_then(UnOp::parse) {
                    let a = self.operand(op, 0)?;
                    self.push(Op::Un { op: un, a })
                } else {
                    return Err(format!("it uses {name}, which the harness does not model"));
                }
            }
        };
        self.bind(op, v);
        Ok(())
    }

    /// `tt.reduce` whose combiner is one `arith` op on the two block arguments.
    fn reduce(&mut self, op: &TOp) -> Result<V, String> {
        if op.operands.len() != 1 || op.results.len() != 1 {
            return Err(
                "it reduces several tensors at once (e.g. argmax), which the harness \
                        does not model"
                    .into(),
            );
        }
        let region = op.region.as_deref().unwrap_or(&[]);
        let combiners: Vec<&TOp> = region
            .iter()
            .filter(|o| o.name != "tt.reduce.return")
            .collect();
        let [combiner] = combiners.as_slice() else {
            return Err(format!(
                "its reduction combines with {} operations; the harness models one arith op",
                combiners.len()
            ));
        };
        let bin = combiner
            .name
            .strip_prefix("arith.")
            .and_then(BinOp::parse)
            .ok_or_else(|| {
                format!(
                    "its reduction combines with {}, which the harness does not model",
                    combiner.name
                )
            })?;
        let a = self.operand(op, 0)?;
        let axis = op.int_attr("axis").ok_or("tt.reduce without an axis")?;
        Ok(self.push(Op::Reduce {
            op: bin,
            a,
            axis: axis as u32,
        }))
    }
}

fn width(elem: &str) -> u32 {
    elem.trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .unwrap_or(32)
}

/// The value of an `arith.constant` body (`dense<2.5>`, `2.5`, `dense<0xFF800000>`, `true`).
pub fn constant(body: &str, elem: &str) -> Option<f64> {
    let mut lit = body.trim();
    if let Some(inner) = lit.strip_prefix("dense<").and_then(|l| l.strip_suffix('>')) {
        lit = inner.trim();
    }
    if let Some(hex) = lit.strip_prefix("0x") {
        let bits = u64::from_str_radix(hex, 16).ok()?;
        return Some(match elem {
            "f64" => f64::from_bits(bits),
            "f32" => f32::from_bits(bits as u32) as f64,
            "bf16" => f32::from_bits((bits as u32) << 16) as f64,
            "f16" => npu_harness_program::f16_to_f32(bits as u16) as f64,
            _ => bits as i64 as f64,
        });
    }
    match lit {
        "true" => Some(1.0),
        "false" => Some(0.0),
        _ => lit.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ttir;

    #[test]
    fn constants() {
        assert_eq!(constant("dense<2.500000e+00>", "f32"), Some(2.5));
        assert_eq!(constant("3", "i32"), Some(3.0));
        assert_eq!(
            constant("dense<0xFF800000>", "f32"),
            Some(f64::NEG_INFINITY)
        );
        assert_eq!(constant("dense<0x3F80>", "bf16"), Some(1.0));
        assert_eq!(constant("dense<0xBC00>", "f16"), Some(-1.0));
        assert_eq!(constant("dense<true>", "i1"), Some(1.0));
        assert_eq!(constant("dense<[1, 2]>", "i32"), None);
    }

    const SCALAR: &str = r#"module {
  tt.func public @k(%x: !tt.ptr<f32>, %alpha: f32, %unused: i32) {
    %r = tt.make_range {end = 4 : i32, start = 0 : i32} : tensor<4xi32>
    %p = tt.splat %x : !tt.ptr<f32> -> tensor<4x!tt.ptr<f32>>
    %a = tt.addptr %p, %r : tensor<4x!tt.ptr<f32>>, tensor<4xi32>
    %v = tt.load %a : tensor<4x!tt.ptr<f32>>
    %s = tt.splat %alpha : f32 -> tensor<4xf32>
    %d = tt.splat %unused : i32 -> tensor<4xi32>
    %m = arith.mulf %v, %s : tensor<4xf32>
    tt.store %a, %m : tensor<4x!tt.ptr<f32>>
    tt.return
  }
}"#;

    #[test]
    fn a_store_that_depends_on_a_dropped_scalar_is_refused() {
        let why = program(&ttir::parse(SCALAR).unwrap()).unwrap_err();
        assert!(
            why.contains("scalar parameter %alpha (f32)") && why.contains("tl.constexpr"),
            "{why}"
        );
        // A scalar no store depends on is fine.
        let ok = SCALAR.replace("%m = arith.mulf %v, %s", "%m = arith.addf %v, %v");
        let p = program(&ttir::parse(&ok).unwrap()).unwrap();
        assert_eq!(p.written_args(), [true]);
        // The splat of %unused is dead: not translated.
        assert_eq!(p.ops.len(), 7, "{p}");
    }

    #[test]
    fn control_flow_is_refused_with_a_hint() {
        let looped = SCALAR.replace(
            "%m = arith.mulf %v, %s : tensor<4xf32>",
            "%m = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %v) -> (tensor<4xf32>) : i32 {\n      scf.yield %acc : tensor<4xf32>\n    }",
        );
        let k = ttir::parse(&looped).unwrap();
        assert_eq!(k.ops[6].name, "scf.for");
        let why = program(&k).unwrap_err();
        assert!(
            why.contains("control flow") && why.contains("static_range"),
            "{why}"
        );
    }
}
