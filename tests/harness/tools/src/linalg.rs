//! Linalg-on-tensors MLIR in the shape triton-shared's `--triton-to-linalg-experimental`
//! emits, for a kernel the TTIR analysis understood.
//!
//! The function takes one unranked memref per pointer parameter, the scalar parameters
//! unchanged, then six `i32`s (num_programs x, y, z, then program_id x, y, z). Each load is a
//! `memref.reinterpret_cast` of its parameter, copied into a `memref.alloc` and viewed as a
//! tensor; the arithmetic is one `linalg.generic`; each store is
//! `bufferization.materialize_in_destination %value in writable %reinterpret_cast_N` where
//! `%reinterpret_cast_N = memref.reinterpret_cast %argK …` — which is how a consumer tells the
//! written pointer parameters (the real tool emits the same form, possibly through a
//! `memref.subview` of the cast when the store is masked).
//!
//! The meaning travels as module attributes (see [`crate::attrs`]).

use std::fmt::Write;

use crate::attrs::{self, mlir_string};
use crate::ttir::{Elementwise, Kernel, PlanOp};

/// The emitted module. `debuginfo` adds location attributes (`--mlir-print-debuginfo`).
pub fn emit(kernel: &Kernel, debuginfo: bool) -> String {
    let mut out = String::new();
    let num_ptrs = kernel.pointer_params().count();
    let mut module_attrs = Vec::new();
    match &kernel.meaning {
        Ok(e) => module_attrs.push(format!(
            "{} = {}",
            attrs::PROGRAM,
            mlir_string(&e.program.to_string())
        )),
        Err(why) => module_attrs.push(format!("{} = {}", attrs::NOT_COMPUTABLE, mlir_string(why))),
    }
    module_attrs.push(format!("{} = {num_ptrs} : i32", attrs::POINTER_ARGS));
    module_attrs.sort();

    let loc = debuginfo.then(|| {
        kernel
            .loc
            .clone()
            .unwrap_or_else(|| "#loc = loc(unknown)".to_owned())
    });
    if let Some(loc) = &loc {
        let _ = writeln!(out, "{loc}");
    }
    if kernel.meaning.is_ok() {
        let _ = writeln!(out, "#map = affine_map<(d0) -> (d0)>");
    }
    let _ = writeln!(out, "module attributes {{{}}} {{", module_attrs.join(", "));

    // Parameters: pointers become unranked memrefs; then the six program-id/num-programs.
    let mut sig = Vec::new();
    let mut ptr_arg = Vec::new(); // pointer index → %argN
    for (i, p) in kernel.params.iter().enumerate() {
        let attrs = p
            .attrs
            .as_deref()
            .map(|a| format!(" {a}"))
            .unwrap_or_default();
        match p.pointee() {
            Some(elem) => {
                ptr_arg.push(i);
                sig.push(format!("%arg{i}: memref<*x{elem}>{attrs}"));
            }
            None => sig.push(format!("%arg{i}: {}{attrs}", p.ty)),
        }
    }
    let n = kernel.params.len();
    for i in n..n + 6 {
        sig.push(format!("%arg{i}: i32"));
    }
    let _ = writeln!(out, "  func.func @{}({}) {{", kernel.name, sig.join(", "));
    if let Ok(e) = &kernel.meaning {
        body(&mut out, kernel, e, &ptr_arg, n + 3);
    } else {
        let _ = writeln!(
            out,
            "    // npu-harness: not computable by the harness devices (see npu_harness.not_computable)"
        );
    }
    let _ = writeln!(out, "    return");
    let suffix = if loc.is_some() { " loc(#loc)" } else { "" };
    let _ = writeln!(out, "  }}{suffix}");
    let _ = writeln!(out, "}}{suffix}");
    out
}

fn strided(block: u64, elem: &str) -> String {
    format!("memref<{block}x{elem}, strided<[1], offset: ?>>")
}

fn body(out: &mut String, kernel: &Kernel, e: &Elementwise, ptr_arg: &[usize], pid_arg: usize) {
    let b = kernel.block;
    let _ = writeln!(out, "    %c{b}_i32 = arith.constant {b} : i32");
    let _ = writeln!(out, "    %0 = arith.muli %arg{pid_arg}, %c{b}_i32 : i32");
    let _ = writeln!(out, "    %1 = arith.index_cast %0 : i32 to index");
    let mut next = 2;
    let mut casts = 0;
    let mut cast = |out: &mut String, arg: usize, elem: &str| -> String {
        let name = if casts == 0 {
            "%reinterpret_cast".to_owned()
        } else {
            format!("%reinterpret_cast_{}", casts - 1)
        };
        casts += 1;
        let _ = writeln!(
            out,
            "    {name} = memref.reinterpret_cast %arg{arg} to offset: [%1], sizes: [{b}], \
             strides: [1] : memref<*x{elem}> to {}",
            strided(b, elem)
        );
        name
    };

    // Loads: the generic's inputs, in order.
    let mut inputs = Vec::new(); // (tensor ssa, elem, plan value)
    for (i, op) in e.plan.iter().enumerate() {
        if let PlanOp::Load { v, ptr, elem } = op {
            let c = cast(out, ptr_arg[*ptr], elem);
            let alloc = if i == 0 && inputs.is_empty() {
                "%alloc".to_owned()
            } else {
                format!("%alloc_{}", inputs.len())
            };
            let _ = writeln!(out, "    {alloc} = memref.alloc() : memref<{b}x{elem}>");
            let _ = writeln!(
                out,
                "    memref.copy {c}, {alloc} : {} to memref<{b}x{elem}>",
                strided(b, elem)
            );
            let t = format!("%{next}");
            next += 1;
            let _ = writeln!(
                out,
                "    {t} = bufferization.to_tensor {alloc} restrict writable : memref<{b}x{elem}> \
                 to tensor<{b}x{elem}>"
            );
            inputs.push((t, elem.clone(), *v));
        }
    }
    // One output tensor per store.
    let mut outs = Vec::new();
    for s in &e.stores {
        let t = format!("%{next}");
        next += 1;
        let _ = writeln!(out, "    {t} = tensor.empty() : tensor<{b}x{}>", s.elem);
        outs.push((t, s.elem.clone()));
    }

    // The generic.
    let maps = vec!["#map"; inputs.len() + outs.len()].join(", ");
    let result = format!("%{next}");
    next += 1;
    let lhs = if outs.len() == 1 {
        result.clone()
    } else {
        format!("{result}:{}", outs.len())
    };
    let ins = if inputs.is_empty() {
        String::new()
    } else {
        format!(
            " ins({} : {})",
            inputs
                .iter()
                .map(|i| i.0.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            inputs
                .iter()
                .map(|i| format!("tensor<{b}x{}>", i.1))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let result_types: Vec<String> = outs
        .iter()
        .map(|o| format!("tensor<{b}x{}>", o.1))
        .collect();
    let _ = writeln!(
        out,
        "    {lhs} = linalg.generic {{indexing_maps = [{maps}], iterator_types = [\"parallel\"]}}{ins} outs({} : {}) {{",
        outs.iter()
            .map(|o| o.0.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        result_types.join(", ")
    );
    // Block arguments: %in, %in_0, … then %out, %out_N.
    let mut names: Vec<(usize, String, String)> = Vec::new(); // (plan value, ssa, elem)
    let mut block_args = Vec::new();
    // MLIR's printer numbers repeated names per base: %in, %in_0, %in_1, …
    let mut counts: Vec<(&str, usize)> = Vec::new();
    let mut fresh = |base: &'static str| {
        let slot = match counts.iter().position(|(b, _)| *b == base) {
            Some(i) => i,
            None => {
                counts.push((base, 0));
                counts.len() - 1
            }
        };
        let n = counts[slot].1;
        counts[slot].1 += 1;
        if n == 0 {
            format!("%{base}")
        } else {
            format!("%{base}_{}", n - 1)
        }
    };
    for (_, elem, v) in &inputs {
        let name = fresh("in");
        block_args.push(format!("{name}: {elem}"));
        names.push((*v, name, elem.clone()));
    }
    for (_, elem) in &outs {
        let name = fresh("out");
        block_args.push(format!("{name}: {elem}"));
    }
    let _ = writeln!(out, "    ^bb0({}):", block_args.join(", "));
    let lookup = |names: &[(usize, String, String)], v: usize| {
        names
            .iter()
            .find(|(pv, _, _)| *pv == v)
            .map(|(_, n, e)| (n.clone(), e.clone()))
            .unwrap_or_else(|| ("%undef".to_owned(), "f32".to_owned()))
    };
    for op in &e.plan {
        match op {
            PlanOp::Load { .. } => {}
            PlanOp::Const { v, value, elem } => {
                let name = format!("%cst_{v}");
                let _ = writeln!(
                    out,
                    "      {name} = arith.constant {} : {elem}",
                    literal(*value, elem)
                );
                names.push((*v, name, elem.clone()));
            }
            PlanOp::Arith { v, op, args, elem } => {
                let name = format!("%{next}");
                next += 1;
                let operands: Vec<String> = args.iter().map(|a| lookup(&names, *a).0).collect();
                let _ = writeln!(out, "      {name} = {op} {} : {elem}", operands.join(", "));
                names.push((*v, name, elem.clone()));
            }
            PlanOp::Convert {
                v,
                op,
                arg,
                from,
                to,
            } => {
                let name = format!("%{next}");
                next += 1;
                let (a, _) = lookup(&names, *arg);
                let _ = writeln!(out, "      {name} = {op} {a} : {from} to {to}");
                names.push((*v, name, to.clone()));
            }
        }
    }
    let mut yields = Vec::new();
    for s in &e.stores {
        let (name, elem) = lookup(&names, s.v);
        if elem == s.elem {
            yields.push((name, elem));
        } else {
            // The stored value's type differs from the buffer's: convert as the store would.
            let conv = format!("%{next}");
            next += 1;
            let _ = writeln!(
                out,
                "      {conv} = {} {name} : {elem} to {}",
                conversion(&elem, &s.elem),
                s.elem
            );
            yields.push((conv, s.elem.clone()));
        }
    }
    let _ = writeln!(
        out,
        "      linalg.yield {} : {}",
        yields
            .iter()
            .map(|y| y.0.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        yields
            .iter()
            .map(|y| y.1.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let arrow = if result_types.len() == 1 {
        result_types[0].clone()
    } else {
        format!("({})", result_types.join(", "))
    };
    let _ = writeln!(out, "    }} -> {arrow}");

    // Stores.
    for (i, s) in e.stores.iter().enumerate() {
        let c = cast(out, ptr_arg[s.ptr], &s.elem);
        let value = if outs.len() == 1 {
            result.clone()
        } else {
            format!("{result}#{i}")
        };
        let _ = writeln!(
            out,
            "    bufferization.materialize_in_destination {value} in writable {c} : \
             (tensor<{b}x{}>, {}) -> ()",
            s.elem,
            strided(b, &s.elem)
        );
    }
}

fn is_float(elem: &str) -> bool {
    matches!(elem, "f16" | "bf16" | "f32" | "f64")
}

fn float_width(elem: &str) -> u32 {
    match elem {
        "f16" | "bf16" => 16,
        "f64" => 64,
        _ => 32,
    }
}

fn int_width(elem: &str) -> u32 {
    elem.trim_start_matches('i').parse().unwrap_or(32)
}

/// The `arith` conversion from one element type to another.
fn conversion(from: &str, to: &str) -> &'static str {
    match (is_float(from), is_float(to)) {
        (true, true) if float_width(to) < float_width(from) => "arith.truncf",
        (true, true) => "arith.extf",
        (true, false) => "arith.fptosi",
        (false, true) => "arith.sitofp",
        (false, false) if int_width(to) < int_width(from) => "arith.trunci",
        (false, false) => "arith.extsi",
    }
}

/// An MLIR literal for a constant of the element type.
fn literal(value: f64, elem: &str) -> String {
    if !is_float(elem) {
        return format!("{}", value as i64);
    }
    if value.is_finite() {
        return format!("{value:.6e}");
    }
    // Infinities and NaNs have no decimal spelling: use the bit pattern.
    match elem {
        "f64" => format!("0x{:016X}", value.to_bits()),
        "f16" => {
            let bits: u16 = if value.is_nan() {
                0x7e00
            } else if value > 0.0 {
                0x7c00
            } else {
                0xfc00
            };
            format!("0x{bits:04X}")
        }
        "bf16" => format!("0x{:04X}", (value as f32).to_bits() >> 16),
        _ => format!("0x{:08X}", (value as f32).to_bits()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_conversions() {
        assert_eq!(literal(2.5, "f32"), "2.500000e0");
        assert_eq!(literal(0.0, "bf16"), "0.000000e0");
        assert_eq!(literal(3.0, "i32"), "3");
        assert_eq!(literal(f64::NEG_INFINITY, "f32"), "0xFF800000");
        assert_eq!(conversion("f32", "f16"), "arith.truncf");
        assert_eq!(conversion("bf16", "f32"), "arith.extf");
        assert_eq!(conversion("i32", "f32"), "arith.sitofp");
        assert_eq!(conversion("i32", "i8"), "arith.trunci");
    }
}
