//! Linalg-on-tensors MLIR in the shapes triton-shared's `--triton-to-linalg-experimental`
//! prints (real-toolchain-rules.md §3), emitted from the kernel's TTIR:
//!
//! * the function takes one unranked memref per pointer parameter, the scalar parameters
//!   unchanged, then six `i32`s (num_programs x, y, z, then program_id x, y, z);
//! * one `linalg.generic` per Triton elementwise op, unfused (`outs` reuse an input tensor of
//!   the result's type, else a `tensor.empty`); `math.*`/`arith.select` inside generics;
//! * splats and constants as `tensor.empty` + `linalg.fill`; `tl.dot` as `linalg.fill` +
//!   `linalg.matmul` (+ a generic for a non-zero accumulator, + `linalg.transpose` for a
//!   transposed operand); reductions as `linalg.fill` + `linalg.reduce`, over the last axis
//!   through `linalg.transpose` + `dimensions = [0]`;
//! * loads as `memref.reinterpret_cast` + `memref.alloc` + `memref.copy` +
//!   `bufferization.to_tensor … restrict writable` (masked: `linalg.fill` of `other`, then
//!   `memref.subview`s on both copy sides); stores as
//!   `bufferization.materialize_in_destination … in writable %cast` (masked: through
//!   `tensor.extract_slice` and a `memref.subview` of the cast); addresses that are not
//!   structured (gathers, scatters) as a `linalg.generic` of `memref.load`/`memref.store`;
//! * with `--mlir-print-debuginfo`, each op carries the location of the TTIR op it comes from
//!   and the TTIR's `#locN` aliases are printed around the module as Triton printed them.
//!
//! The meaning travels as module attributes (see [`crate::attrs`]); the IR itself only has to
//! have the right shapes, which is what the product and the transform scripts look at.

mod addr;
mod data;

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use npu_harness_program::Program;

use crate::attrs::{self, mlir_string};
use crate::ttir::{Kernel, TOp, TType};

/// The emitted module. `debuginfo` adds location attributes (`--mlir-print-debuginfo`).
pub fn emit(kernel: &Kernel, meaning: &Result<Program, String>, debuginfo: bool) -> String {
    let num_ptrs = kernel.pointer_params().count();
    let mut module_attrs = vec![match meaning {
        Ok(p) => format!("{} = {}", attrs::PROGRAM, mlir_string(&p.to_string())),
        Err(why) => format!("{} = {}", attrs::NOT_COMPUTABLE, mlir_string(why)),
    }];
    module_attrs.push(format!("{} = {num_ptrs} : i32", attrs::POINTER_ARGS));
    module_attrs.sort();

    let debuginfo = debuginfo
        && kernel
            .locs_before
            .iter()
            .chain(&kernel.locs_after)
            .any(|l| l.starts_with("#loc = "));
    let mut e = Emitter::new(kernel, debuginfo);
    let body = match e.body() {
        Ok(()) => std::mem::take(&mut e.out),
        Err(why) => {
            format!("    // npu-harness: the stand-in cannot print this kernel's Linalg ({why})\n")
        }
    };

    let mut out = String::new();
    if debuginfo {
        for l in &kernel.locs_before {
            let _ = writeln!(out, "{l}");
        }
    }
    for (i, m) in e.maps.iter().enumerate() {
        let _ = writeln!(out, "{} = {m}", map_alias(i));
    }
    let _ = writeln!(out, "module attributes {{{}}} {{", module_attrs.join(", "));
    let _ = writeln!(
        out,
        "  func.func @{}({}) {{",
        kernel.name,
        e.signature().join(", ")
    );
    out.push_str(&body);
    let suffix = if debuginfo { " loc(#loc)" } else { "" };
    let _ = writeln!(out, "    return{suffix}");
    let _ = writeln!(out, "  }}{suffix}");
    let _ = writeln!(out, "}}{suffix}");
    if debuginfo {
        for l in &kernel.locs_after {
            let _ = writeln!(out, "{l}");
        }
    }
    out
}

fn map_alias(i: usize) -> String {
    if i == 0 {
        "#map".to_owned()
    } else {
        format!("#map{i}")
    }
}

/// An emitted value: its SSA name and type (a scalar or a tensor).
#[derive(Debug, Clone, PartialEq)]
struct Val {
    name: String,
    ty: TType,
}

impl Val {
    fn mlir_type(&self) -> String {
        self.ty.tensor()
    }

    fn is_scalar(&self) -> bool {
        self.ty.shape.is_empty()
    }
}

/// SSA names as MLIR's printer makes them: `%0, %1, …` for plain results and, for named ones,
/// the name alone the first time and `name_N` after, N from one counter for all names.
#[derive(Default)]
struct Names {
    used: HashSet<String>,
    suffix: usize,
    next: usize,
}

impl Names {
    fn num(&mut self) -> String {
        self.next += 1;
        format!("%{}", self.next - 1)
    }

    fn named(&mut self, base: &str) -> String {
        if self.used.insert(base.to_owned()) {
            return format!("%{base}");
        }
        loop {
            let name = format!("{base}_{}", self.suffix);
            self.suffix += 1;
            if self.used.insert(name.clone()) {
                return format!("%{name}");
            }
        }
    }
}

struct Emitter<'a> {
    k: &'a Kernel,
    defs: HashMap<&'a str, &'a TOp>,
    debuginfo: bool,
    out: String,
    /// Extra indentation inside a region being printed.
    depth: usize,
    names: Names,
    maps: Vec<String>,
    /// TTIR value → its emitted data.
    data: HashMap<String, Val>,
    /// Memoised constants: (type, literal) → name.
    consts: HashMap<(String, String), String>,
    /// Memoised address analyses (see `addr`).
    idx: HashMap<String, Option<addr::Idx>>,
    ptrs: HashMap<String, Option<addr::Ptr>>,
    /// The location of the TTIR op being printed.
    loc: Option<String>,
}

impl<'a> Emitter<'a> {
    fn new(k: &'a Kernel, debuginfo: bool) -> Emitter<'a> {
        Emitter {
            k,
            defs: k.defs(),
            debuginfo,
            out: String::new(),
            depth: 0,
            names: Names::default(),
            maps: Vec::new(),
            data: HashMap::new(),
            consts: HashMap::new(),
            idx: HashMap::new(),
            ptrs: HashMap::new(),
            loc: None,
        }
    }

    /// `%argN: type {attrs} loc(…)` for each parameter, then the six grid `i32`s.
    fn signature(&self) -> Vec<String> {
        let mut sig = Vec::new();
        for (i, p) in self.k.params.iter().enumerate() {
            let attrs = p
                .attrs
                .as_deref()
                .map(|a| format!(" {a}"))
                .unwrap_or_default();
            let ty = match p.pointee() {
                Some(elem) => format!("memref<*x{elem}>"),
                None => p.ty.clone(),
            };
            let loc = match (&self.k.param_locs.get(i), self.debuginfo) {
                (Some(Some(l)), true) => format!(" {l}"),
                _ => String::new(),
            };
            sig.push(format!("%arg{i}: {ty}{attrs}{loc}"));
        }
        let n = self.k.params.len();
        let loc = if self.debuginfo { " loc(#loc)" } else { "" };
        for i in n..n + 6 {
            sig.push(format!("%arg{i}: i32{loc}"));
        }
        sig
    }

    /// The function argument holding `tt.get_program_id` (or `tt.get_num_programs`) of `axis`.
    fn grid_arg(&self, program_id: bool, axis: usize) -> String {
        let base = self.k.params.len() + if program_id { 3 } else { 0 };
        format!("%arg{}", base + axis)
    }

    /// Writes one line at the current depth, with the current location at top level.
    fn line(&mut self, text: &str) {
        let indent = "    ".to_owned() + &"  ".repeat(self.depth);
        let loc = match (&self.loc, self.debuginfo, self.depth) {
            (Some(l), true, 0) => format!(" {l}"),
            _ => String::new(),
        };
        let _ = writeln!(self.out, "{indent}{text}{loc}");
    }

    /// Writes a line without a location (block headers, region closers inside).
    fn raw(&mut self, text: &str) {
        let indent = "    ".to_owned() + &"  ".repeat(self.depth);
        let _ = writeln!(self.out, "{indent}{text}");
    }

    /// The alias of an affine map over `rank` dims with the given results.
    fn map(&mut self, rank: usize, results: &[String]) -> String {
        let dims: Vec<String> = (0..rank).map(|d| format!("d{d}")).collect();
        let text = format!(
            "affine_map<({}) -> ({})>",
            dims.join(", "),
            results.join(", ")
        );
        let i = match self.maps.iter().position(|m| *m == text) {
            Some(i) => i,
            None => {
                self.maps.push(text);
                self.maps.len() - 1
            }
        };
        map_alias(i)
    }

    fn identity_map(&mut self, rank: usize) -> String {
        let dims: Vec<String> = (0..rank).map(|d| format!("d{d}")).collect();
        self.map(rank, &dims)
    }

    /// Emits every store (and, on demand, what it depends on) in TTIR order.
    fn body(&mut self) -> Result<(), String> {
        let k = self.k;
        for op in &k.ops {
            if op.name == "tt.store" {
                self.loc = op.loc.clone();
                self.store(op)?;
            }
        }
        self.loc = None;
        Ok(())
    }

    /// A constant of MLIR type `ty` (a scalar type) with literal `lit`, named as MLIR names
    /// them (`%c1024_i32`, `%c0`, `%cst`).
    fn constant(&mut self, ty: &str, lit: &str) -> String {
        let key = (ty.to_owned(), lit.to_owned());
        if let Some(name) = self.consts.get(&key) {
            return name.clone();
        }
        let base = if ty == "index" {
            format!("c{}", lit.replace('-', "_neg"))
        } else if ty.starts_with('i') && lit.parse::<i64>().is_ok() {
            format!("c{}_{ty}", lit.replace('-', "_neg"))
        } else if ty == "i1" {
            lit.to_owned()
        } else {
            "cst".to_owned()
        };
        let name = self.names.named(&base);
        // Constants are hoisted to the top of the body, as MLIR's canonical form has them.
        let saved_out = std::mem::take(&mut self.out);
        let saved_depth = std::mem::replace(&mut self.depth, 0);
        self.line(&format!("{name} = arith.constant {lit} : {ty}"));
        let line = std::mem::replace(&mut self.out, saved_out);
        self.depth = saved_depth;
        self.out.insert_str(0, &line);
        self.consts.insert(key, name.clone());
        name
    }

    fn index_const(&mut self, v: i64) -> String {
        self.constant("index", &v.to_string())
    }

    fn data_of_param(&self, ssa: &str) -> Option<Result<Val, String>> {
        let i = self.k.params.iter().position(|p| p.ssa == ssa)?;
        let p = &self.k.params[i];
        Some(match p.pointee() {
            Some(_) => Err(format!("the pointer parameter {ssa} is used as data")),
            None => TType::parse(&p.ty)
                .map(|ty| Val {
                    name: format!("%arg{i}"),
                    ty,
                })
                .ok_or_else(|| format!("parameter type {}", p.ty)),
        })
    }
}

/// The element type's MLIR literal for `v` (`0.000000e+00`, `0xFF800000`, `-3`).
fn literal(v: f64, elem: &str) -> String {
    if !is_float(elem) {
        return format!("{}", v as i64);
    }
    if v.is_finite() {
        let s = format!("{v:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_owned()
        } else {
            format!("{mantissa}.0")
        };
        return format!("{mantissa}e{exp}");
    }
    // Infinities and NaNs have no decimal spelling: the bit pattern.
    match elem {
        "f64" => format!("0x{:016X}", v.to_bits()),
        "f16" => format!(
            "0x{:04X}",
            if v.is_nan() {
                0x7e00u16
            } else if v > 0.0 {
                0x7c00
            } else {
                0xfc00
            }
        ),
        "bf16" => format!("0x{:04X}", (v as f32).to_bits() >> 16),
        _ => format!("0x{:08X}", (v as f32).to_bits()),
    }
}

fn is_float(elem: &str) -> bool {
    matches!(elem, "f16" | "bf16" | "f32" | "f64")
}

fn scalar_type(elem: &str) -> TType {
    TType {
        shape: vec![],
        elem: elem.to_owned(),
        pointer: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(literal(2.5, "f32"), "2.5e0");
        assert_eq!(literal(1.0, "bf16"), "1.0e0");
        assert_eq!(literal(-0.001, "f32"), "-1.0e-3");
        assert_eq!(literal(3.0, "i32"), "3");
        assert_eq!(literal(f64::NEG_INFINITY, "f32"), "0xFF800000");
        assert_eq!(literal(f64::NEG_INFINITY, "bf16"), "0xFF80");
    }

    #[test]
    fn names_follow_mlir() {
        let mut n = Names::default();
        assert_eq!(n.named("alloc"), "%alloc");
        assert_eq!(n.named("reinterpret_cast"), "%reinterpret_cast");
        assert_eq!(n.named("reinterpret_cast"), "%reinterpret_cast_0");
        assert_eq!(n.named("alloc"), "%alloc_1");
        assert_eq!(n.num(), "%0");
        assert_eq!(n.num(), "%1");
    }
}
