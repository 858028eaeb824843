//! Reading what an elementwise Triton kernel computes from the TTIR Triton's frontend prints.
//!
//! The analysis is demand-driven: starting from each `tt.store`, the stored value is followed
//! back through its SSA definitions. A `tt.load` whose pointer comes (through `tt.addptr`,
//! `tt.splat`, `tt.broadcast`, …) from pointer parameter K becomes `load argK`; float and
//! integer arithmetic on loaded values becomes program operations; constants become `const`;
//! type conversions pass the value through (the store converts); the store becomes
//! `store argK`. Pointer parameters are numbered among pointer parameters only, because only
//! buffers reach the NPU. Everything else reachable from a store — a reduction, a dot, a
//! scalar parameter in the arithmetic (the NPU never receives scalars), data-dependent
//! addresses — makes the kernel *not computable*, with the reason.
//!
//! Index arithmetic, masks and program ids are never reached from a stored value, so they are
//! ignored (the devices do not model masks).

use std::collections::HashMap;

use npu_harness_program::{BinOp, DType, Op, Program, REGISTERS, UnOp};

/// A kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// The SSA name, e.g. `%x_ptr` or `%arg0`.
    pub ssa: String,
    /// The type, e.g. `!tt.ptr<f32>` or `i32`.
    pub ty: String,
    /// The argument attributes, e.g. `{tt.divisibility = 16 : i32}`.
    pub attrs: Option<String>,
}

impl Param {
    /// The element type of a pointer parameter.
    pub fn pointee(&self) -> Option<&str> {
        self.ty
            .strip_prefix("!tt.ptr<")
            .and_then(|t| t.strip_suffix('>'))
            .map(|t| t.split(',').next().unwrap_or(t).trim())
    }
}

/// One value of the computation, in the order it must be computed.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanOp {
    /// A buffer read from pointer parameter `ptr` (index among pointer parameters).
    Load {
        v: usize,
        ptr: usize,
        elem: String,
    },
    Const {
        v: usize,
        value: f64,
        elem: String,
    },
    /// An `arith`/`math` operation on earlier values (`op` is the TTIR op name).
    Arith {
        v: usize,
        op: String,
        args: Vec<usize>,
        elem: String,
    },
    /// A type conversion (`arith.truncf`, `arith.sitofp`, …).
    Convert {
        v: usize,
        op: String,
        arg: usize,
        from: String,
        to: String,
    },
}

/// A `tt.store` of value `v` through pointer parameter `ptr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    pub ptr: usize,
    pub v: usize,
    pub elem: String,
}

/// An elementwise kernel: the harness program and the plan the Linalg emitter follows.
#[derive(Debug, Clone, PartialEq)]
pub struct Elementwise {
    pub program: Program,
    pub plan: Vec<PlanOp>,
    pub stores: Vec<Store>,
}

/// What the stand-in triton-shared-opt learned about a kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    /// The block size (`tt.make_range` length), for the shapes of the emitted IR.
    pub block: u64,
    /// The kernel's location definition (`#loc = loc("file":line:col)`), if printed.
    pub loc: Option<String>,
    /// The program, or why there is none.
    pub meaning: Result<Elementwise, String>,
}

impl Kernel {
    pub fn pointer_params(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| p.pointee().is_some())
    }
}

/// Analyses the first public `tt.func` (else the first `tt.func`) of a TTIR module.
pub fn analyse(ttir: &str) -> Result<Kernel, String> {
    let func_at = ttir
        .find("tt.func public @")
        .or_else(|| ttir.find("tt.func @"))
        .or_else(|| ttir.find("tt.func private @"))
        .ok_or("expected a Triton module (no tt.func found)")?;
    let header = &ttir[func_at..];
    let at = header.find('@').ok_or("malformed tt.func")?;
    let name: String = header[at + 1..]
        .chars()
        .take_while(|c| *c != '(' && !c.is_whitespace())
        .collect();
    let open = at
        + header[at..]
            .find('(')
            .ok_or("malformed tt.func signature")?;
    let close = matching(header, open).ok_or("unterminated tt.func signature")?;
    let params = split_top(&header[open + 1..close], ',')
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .map(parse_param)
        .collect::<Result<Vec<_>, _>>()?;
    let body = &header[close + 1..];
    let block = body
        .find("tt.make_range {end = ")
        .and_then(|i| {
            let rest = &body[i + "tt.make_range {end = ".len()..];
            let end: u64 = rest.split(' ').next()?.parse().ok()?;
            let start: u64 = rest
                .find("start = ")
                .and_then(|s| rest[s + 8..].split(' ').next()?.parse().ok())
                .unwrap_or(0);
            end.checked_sub(start).filter(|n| *n > 0)
        })
        .unwrap_or(1024);
    let loc = ttir
        .lines()
        .find(|l| l.starts_with("#loc = loc("))
        .map(|l| l.trim().to_owned());
    let (defs, stores) = parse_body(body);
    let meaning = Analysis {
        params: &params,
        defs: &defs,
        memo: HashMap::new(),
        touches: HashMap::new(),
        program: Vec::new(),
        plan: Vec::new(),
        next_reg: 0,
        next_v: 0,
    }
    .run(&stores);
    Ok(Kernel {
        name,
        params,
        block,
        loc,
        meaning,
    })
}

fn parse_param(text: &str) -> Result<Param, String> {
    let text = strip_loc(text.trim());
    let (ssa, rest) = text
        .split_once(':')
        .ok_or_else(|| format!("malformed parameter {text:?}"))?;
    let rest = rest.trim();
    let ty_end = top_level_space(rest).unwrap_or(rest.len());
    let attrs = rest[ty_end..].trim();
    Ok(Param {
        ssa: ssa.trim().to_owned(),
        ty: rest[..ty_end].to_owned(),
        attrs: (!attrs.is_empty()).then(|| attrs.to_owned()),
    })
}

/// An SSA definition.
#[derive(Debug, Clone)]
struct Def {
    op: String,
    operands: Vec<String>,
    /// The text after the operation name (attributes, operands, types).
    rest: String,
}

/// A `tt.store`: pointer and value operands.
struct StoreStmt {
    ptr: String,
    value: String,
}

fn parse_body(body: &str) -> (HashMap<String, Def>, Vec<StoreStmt>) {
    let mut defs = HashMap::new();
    let mut stores = Vec::new();
    for raw in body.lines() {
        let line = strip_loc(raw.trim());
        if line.starts_with('%') {
            let Some(eq) = line.find(" = ") else { continue };
            let (lhs, rhs) = (&line[..eq], line[eq + 3..].trim());
            let (op, rest) = op_name(rhs);
            let def = Def {
                op: op.to_owned(),
                operands: ssa_names(operand_text(rest)),
                rest: rest.to_owned(),
            };
            for name in result_names(lhs) {
                defs.insert(name, def.clone());
            }
        } else if let Some(rest) = line.strip_prefix("tt.store ") {
            let ops = ssa_names(operand_text(rest));
            if ops.len() >= 2 {
                stores.push(StoreStmt {
                    ptr: ops[0].clone(),
                    value: ops[1].clone(),
                });
            }
        }
    }
    (defs, stores)
}

/// `%a` → [%a]; `%a:2` → [%a#0, %a#1]; `%a, %b` → [%a, %b].
fn result_names(lhs: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in lhs.split(',') {
        let part = part.trim();
        match part.split_once(':') {
            Some((name, n)) => {
                let n: usize = n.trim().parse().unwrap_or(1);
                out.extend((0..n).map(|i| format!("{name}#{i}")));
                // `%a` alone also names result 0 in some printers.
                out.push(name.to_owned());
            }
            None => out.push(part.to_owned()),
        }
    }
    out
}

/// Splits `op rest` (or the generic `"op"(…)` form).
fn op_name(rhs: &str) -> (&str, &str) {
    if let Some(q) = rhs.strip_prefix('"')
        && let Some(end) = q.find('"')
    {
        return (&q[..end], &q[end + 1..]);
    }
    let end = rhs
        .find(|c: char| c.is_whitespace() || c == '(')
        .unwrap_or(rhs.len());
    (&rhs[..end], &rhs[end..])
}

/// The operand part: everything before the top-level ` : ` that starts the types.
fn operand_text(rest: &str) -> &str {
    match find_top(rest, " : ") {
        Some(i) => &rest[..i],
        None => rest,
    }
}

/// The types part (after the top-level ` : `).
fn type_text(rest: &str) -> &str {
    match find_top(rest, " : ") {
        Some(i) => rest[i + 3..].trim(),
        None => "",
    }
}

fn ssa_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let start = i;
            i += 1;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || b"_.$-#".contains(&bytes[i]))
            {
                i += 1;
            }
            out.push(text[start..i].to_owned());
        } else {
            i += 1;
        }
    }
    out
}

/// Removes a trailing top-level `loc(...)`.
fn strip_loc(line: &str) -> &str {
    let mut cut = None;
    let mut from = 0;
    while let Some(i) = line[from..].find("loc(") {
        let at = from + i;
        if depth_at(line, at) == 0 {
            cut = Some(at);
        }
        from = at + 4;
    }
    match cut {
        Some(at) => line[..at].trim_end(),
        None => line,
    }
}

/// Bracket depth just before byte `at` (quotes respected; `->` is not a bracket).
fn depth_at(s: &str, at: usize) -> i32 {
    let mut depth = 0;
    let mut in_str = false;
    let mut prev = '\0';
    for (i, c) in s.char_indices() {
        if i >= at {
            break;
        }
        if in_str {
            if c == '"' && prev != '\\' {
                in_str = false;
            }
        } else {
            match c {
                '"' => in_str = true,
                '(' | '[' | '{' | '<' => depth += 1,
                '>' if prev == '-' => {}
                ')' | ']' | '}' | '>' => depth -= 1,
                _ => {}
            }
        }
        prev = c;
    }
    depth
}

fn find_top(s: &str, pat: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(pat) {
        let at = from + i;
        if depth_at(s, at) == 0 {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

fn top_level_space(s: &str) -> Option<usize> {
    s.char_indices()
        .find(|(i, c)| c.is_whitespace() && depth_at(s, *i) == 0)
        .map(|(i, _)| i)
}

fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, c) in s.char_indices() {
        if c == sep && depth_at(s, i) == 0 {
            parts.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&s[start..]);
    parts
}

/// The index of the bracket closing the one at `open`.
fn matching(s: &str, open: usize) -> Option<usize> {
    let target = depth_at(s, open);
    s.char_indices()
        .skip_while(|(i, _)| *i <= open)
        .find(|(i, c)| *c == ')' && depth_at(s, *i) == target + 1)
        .map(|(i, _)| i)
}

/// The element type of a type: `tensor<1024xf32>` → `f32`, `f16` → `f16`.
fn elem_of(ty: &str) -> String {
    let ty = ty.trim();
    match ty.strip_prefix("tensor<").and_then(|t| t.strip_suffix('>')) {
        Some(inner) => inner.rsplit('x').next().unwrap_or(inner).to_owned(),
        None => ty.to_owned(),
    }
}

fn dtype(elem: &str) -> Option<DType> {
    match elem {
        "f32" => Some(DType::F32),
        "f16" => Some(DType::F16),
        "bf16" => Some(DType::Bf16),
        "f64" => Some(DType::F64),
        "i8" => Some(DType::I8),
        "i16" => Some(DType::I16),
        "i32" => Some(DType::I32),
        "i64" => Some(DType::I64),
        _ => None,
    }
}

fn binop(op: &str) -> Option<BinOp> {
    Some(match op {
        "arith.addf" | "arith.addi" => BinOp::Add,
        "arith.subf" | "arith.subi" => BinOp::Sub,
        "arith.mulf" | "arith.muli" => BinOp::Mul,
        "arith.divf" | "arith.divsi" | "arith.divui" => BinOp::Div,
        "arith.maximumf" | "arith.maxnumf" | "arith.maxsi" | "arith.maxui" => BinOp::Max,
        "arith.minimumf" | "arith.minnumf" | "arith.minsi" | "arith.minui" => BinOp::Min,
        _ => return None,
    })
}

fn unop(op: &str) -> Option<UnOp> {
    Some(match op {
        "arith.negf" => UnOp::Neg,
        "math.exp" => UnOp::Exp,
        "math.absf" | "math.absi" => UnOp::Abs,
        _ => return None,
    })
}

const CONVERSIONS: &[&str] = &[
    "arith.truncf",
    "arith.extf",
    "arith.sitofp",
    "arith.uitofp",
    "arith.fptosi",
    "arith.fptoui",
    "arith.extsi",
    "arith.extui",
    "arith.trunci",
];

/// Ops that only change the shape of a value or pointer.
const SHAPE_OPS: &[&str] = &["tt.splat", "tt.broadcast", "tt.expand_dims", "tt.reshape"];

/// Why a few well-known operations are not elementwise.
fn not_elementwise(op: &str) -> Option<&'static str> {
    Some(match op {
        "tt.reduce" => "it reduces (tt.reduce), which is not elementwise",
        "tt.dot" => "it multiplies matrices (tt.dot), which is not elementwise",
        "tt.scan" => "it scans (tt.scan), which is not elementwise",
        "tt.trans" => "it transposes (tt.trans), which is not elementwise",
        "tt.histogram" => "it builds a histogram, which is not elementwise",
        "tt.call" => "it calls another function, which the harness does not follow",
        _ if op.starts_with("scf.") => {
            "it has control flow (scf), which the harness does not model"
        }
        _ => return None,
    })
}

#[derive(Debug, Clone)]
enum Val {
    Data { reg: u8, v: usize, elem: String },
    Const { value: f64, v: usize, elem: String },
}

struct Analysis<'a> {
    params: &'a [Param],
    defs: &'a HashMap<String, Def>,
    memo: HashMap<String, Val>,
    touches: HashMap<String, bool>,
    program: Vec<Op>,
    plan: Vec<PlanOp>,
    next_reg: usize,
    next_v: usize,
}

impl Analysis<'_> {
    fn run(mut self, stores: &[StoreStmt]) -> Result<Elementwise, String> {
        if stores.is_empty() {
            return Err("it stores nothing (no tt.store)".into());
        }
        let num_args = self.params.iter().filter(|p| p.pointee().is_some()).count();
        let num_args = u8::try_from(num_args).map_err(|_| "more than 255 pointer parameters")?;
        let mut out = Vec::new();
        for s in stores {
            let ptr = self.pointer(&s.ptr)?;
            let elem = self.pointer_param(ptr).pointee().unwrap_or("").to_owned();
            let dt = dtype(&elem)
                .ok_or_else(|| format!("it stores {elem}, an element type the harness lacks"))?;
            let val = self.data(&s.value)?;
            let (reg, v) = self.in_register(val)?;
            self.program.push(Op::Store {
                arg: ptr as u8,
                src: reg,
                dtype: dt,
            });
            out.push(Store { ptr, v, elem });
        }
        let program = Program {
            num_args,
            ops: self.program,
        };
        program
            .validate()
            .map_err(|e| format!("the derived program is invalid: {e}"))?;
        Ok(Elementwise {
            program,
            plan: self.plan,
            stores: out,
        })
    }

    fn pointer_param(&self, index: usize) -> &Param {
        self.params
            .iter()
            .filter(|p| p.pointee().is_some())
            .nth(index)
            .unwrap_or(&self.params[0])
    }

    fn param(&self, ssa: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.ssa == ssa)
    }

    fn def(&self, ssa: &str) -> Result<&Def, String> {
        self.defs
            .get(ssa)
            .ok_or_else(|| format!("the value {ssa} is defined by nothing the harness can read"))
    }

    fn fresh_reg(&mut self) -> Result<u8, String> {
        if self.next_reg >= REGISTERS {
            return Err(format!(
                "it needs more than the harness's {REGISTERS} registers"
            ));
        }
        self.next_reg += 1;
        Ok((self.next_reg - 1) as u8)
    }

    fn fresh_v(&mut self) -> usize {
        self.next_v += 1;
        self.next_v - 1
    }

    /// The pointer parameter (index among pointer parameters) a pointer value comes from.
    fn pointer(&mut self, ssa: &str) -> Result<usize, String> {
        if let Some(p) = self.param(ssa) {
            return match p.pointee() {
                Some(_) => Ok(self
                    .params
                    .iter()
                    .filter(|q| q.pointee().is_some())
                    .position(|q| q.ssa == ssa)
                    .unwrap_or(0)),
                None => Err(format!("the scalar parameter {ssa} is used as a pointer")),
            };
        }
        let def = self.def(ssa)?.clone();
        match def.op.as_str() {
            "tt.addptr" => {
                if let Some(offset) = def.operands.get(1)
                    && self.touches_load(offset)
                {
                    return Err(
                        "it addresses memory with loaded data (gather/scatter), which is not \
                         elementwise"
                            .into(),
                    );
                }
                self.pointer(def.operands.first().ok_or("tt.addptr without operands")?)
            }
            "tt.advance" | "tt.make_tensor_ptr" => {
                self.pointer(def.operands.first().ok_or("pointer op without operands")?)
            }
            op if SHAPE_OPS.contains(&op) => {
                self.pointer(def.operands.first().ok_or("shape op without operands")?)
            }
            op => Err(format!(
                "a pointer is computed by {op}, which the harness does not follow"
            )),
        }
    }

    fn touches_load(&mut self, ssa: &str) -> bool {
        if let Some(t) = self.touches.get(ssa) {
            return *t;
        }
        self.touches.insert(ssa.to_owned(), false); // breaks cycles
        let t = match self.defs.get(ssa) {
            None => false,
            Some(def) if def.op == "tt.load" => true,
            Some(def) => {
                let operands = def.operands.clone();
                operands.iter().any(|o| self.touches_load(o))
            }
        };
        self.touches.insert(ssa.to_owned(), t);
        t
    }

    /// The value a data SSA name holds, emitting the operations that compute it.
    fn data(&mut self, ssa: &str) -> Result<Val, String> {
        if let Some(v) = self.memo.get(ssa) {
            return Ok(v.clone());
        }
        let val = self.compute(ssa)?;
        self.memo.insert(ssa.to_owned(), val.clone());
        Ok(val)
    }

    fn compute(&mut self, ssa: &str) -> Result<Val, String> {
        if let Some(p) = self.param(ssa) {
            return Err(match p.pointee() {
                Some(_) => format!("the pointer parameter {ssa} is used as data"),
                None => format!(
                    "the scalar parameter {ssa} is used in the arithmetic; the NPU receives only \
                     buffers, never scalars"
                ),
            });
        }
        let def = self.def(ssa)?.clone();
        let op = def.op.as_str();
        if let Some(why) = not_elementwise(op) {
            return Err(why.into());
        }
        let first = || {
            def.operands
                .first()
                .cloned()
                .ok_or_else(|| format!("{op} without operands"))
        };
        if op == "tt.load" {
            let ptr = self.pointer(&first()?)?;
            let elem = self.pointer_param(ptr).pointee().unwrap_or("").to_owned();
            let dt = dtype(&elem)
                .ok_or_else(|| format!("it loads {elem}, an element type the harness lacks"))?;
            let reg = self.fresh_reg()?;
            let v = self.fresh_v();
            self.program.push(Op::Load {
                dst: reg,
                arg: ptr as u8,
                dtype: dt,
            });
            self.plan.push(PlanOp::Load {
                v,
                ptr,
                elem: elem.clone(),
            });
            return Ok(Val::Data { reg, v, elem });
        }
        if op == "arith.constant" {
            let (value, elem) = constant(&def.rest)
                .ok_or_else(|| format!("unreadable constant {}", def.rest.trim()))?;
            let v = self.fresh_v();
            self.plan.push(PlanOp::Const {
                v,
                value,
                elem: elem.clone(),
            });
            return Ok(Val::Const { value, v, elem });
        }
        if SHAPE_OPS.contains(&op) {
            return self.data(&first()?);
        }
        if CONVERSIONS.contains(&op) {
            let arg = self.data(&first()?)?;
            let to = elem_of(
                type_text(&def.rest)
                    .split(" to ")
                    .nth(1)
                    .ok_or_else(|| format!("{op} without a result type"))?,
            );
            let (reg, a) = self.in_register(arg.clone())?;
            let from = match &arg {
                Val::Data { elem, .. } | Val::Const { elem, .. } => elem.clone(),
            };
            let v = self.fresh_v();
            self.plan.push(PlanOp::Convert {
                v,
                op: op.to_owned(),
                arg: a,
                from,
                to: to.clone(),
            });
            return Ok(Val::Data { reg, v, elem: to });
        }
        if let Some(bin) = binop(op) {
            let [a, b] = def.operands.as_slice() else {
                return Err(format!("{op} needs two operands"));
            };
            let (a, b) = (self.data(a)?, self.data(b)?);
            let elem = match &a {
                Val::Data { elem, .. } | Val::Const { elem, .. } => elem.clone(),
            };
            let (ra, va) = self.in_register(a)?;
            let (rb, vb) = self.in_register(b)?;
            let dst = self.fresh_reg()?;
            let v = self.fresh_v();
            self.program.push(Op::Bin {
                op: bin,
                dst,
                a: ra,
                b: rb,
            });
            self.plan.push(PlanOp::Arith {
                v,
                op: op.to_owned(),
                args: vec![va, vb],
                elem: elem.clone(),
            });
            return Ok(Val::Data { reg: dst, v, elem });
        }
        if let Some(un) = unop(op) {
            let a = self.data(&first()?)?;
            let elem = match &a {
                Val::Data { elem, .. } | Val::Const { elem, .. } => elem.clone(),
            };
            let (ra, va) = self.in_register(a)?;
            let dst = self.fresh_reg()?;
            let v = self.fresh_v();
            self.program.push(Op::Un { op: un, dst, a: ra });
            self.plan.push(PlanOp::Arith {
                v,
                op: op.to_owned(),
                args: vec![va],
                elem: elem.clone(),
            });
            return Ok(Val::Data { reg: dst, v, elem });
        }
        Err(format!(
            "it uses {op} on computed data, which the harness does not model"
        ))
    }

    /// A register holding the value (constants are materialised on first use).
    fn in_register(&mut self, val: Val) -> Result<(u8, usize), String> {
        match val {
            Val::Data { reg, v, .. } => Ok((reg, v)),
            Val::Const { value, v, .. } => {
                let dst = self.fresh_reg()?;
                self.program.push(Op::Const {
                    dst,
                    value: value as f32,
                });
                Ok((dst, v))
            }
        }
    }
}

/// The value and element type of an `arith.constant` (`dense<2.5> : tensor<4xf32>`,
/// `2.5 : f32`, `dense<0xFF800000> : tensor<4xf32>`, `true : i1`).
fn constant(rest: &str) -> Option<(f64, String)> {
    let ty = type_text(rest);
    let elem = elem_of(ty);
    let mut lit = operand_text(rest).trim();
    if let Some(inner) = lit.strip_prefix("dense<").and_then(|l| l.strip_suffix('>')) {
        lit = inner.trim();
    }
    let value = if let Some(hex) = lit.strip_prefix("0x") {
        let bits = u64::from_str_radix(hex, 16).ok()?;
        match elem.as_str() {
            "f64" => f64::from_bits(bits),
            "f32" => f32::from_bits(bits as u32) as f64,
            "bf16" => f32::from_bits((bits as u32) << 16) as f64,
            "f16" => half_to_f64(bits as u16),
            _ => return None,
        }
    } else {
        match lit {
            "true" => 1.0,
            "false" => 0.0,
            _ => lit.parse().ok()?,
        }
    };
    Some((value, elem))
}

fn half_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        0x1f if frac == 0.0 => f64::INFINITY,
        0x1f => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD: &str = r#"module {
  tt.func public @add_kernel(%arg0: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("x"(#loc)), %arg1: !tt.ptr<f32>, %arg2: !tt.ptr<f16>, %arg3: i32) attributes {noinline = false} {
    %c = arith.constant 1024 : i32 loc(#loc1)
    %pid = tt.get_program_id x : i32 loc(#loc2)
    %r = tt.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
    %p0 = tt.splat %arg0 : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %a0 = tt.addptr %p0, %r : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %x = tt.load %a0 : tensor<1024x!tt.ptr<f32>>
    %p1 = tt.splat %arg1 : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %a1 = tt.addptr %p1, %r : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %y = tt.load %a1 : tensor<1024x!tt.ptr<f32>>
    %s = arith.addf %x, %y : tensor<1024xf32>
    %t = arith.truncf %s : tensor<1024xf32> to tensor<1024xf16>
    %p2 = tt.splat %arg2 : !tt.ptr<f16> -> tensor<1024x!tt.ptr<f16>>
    %a2 = tt.addptr %p2, %r : tensor<1024x!tt.ptr<f16>>, tensor<1024xi32>
    tt.store %a2, %t : tensor<1024x!tt.ptr<f16>> loc(#loc3)
    tt.return
  }
}"#;

    #[test]
    fn add_with_conversion() {
        let k = analyse(ADD).unwrap();
        assert_eq!(k.name, "add_kernel");
        assert_eq!(k.params.len(), 4);
        assert_eq!(
            k.params[0].attrs.as_deref(),
            Some("{tt.divisibility = 16 : i32}")
        );
        assert_eq!(k.params[2].pointee(), Some("f16"));
        assert_eq!(k.block, 1024);
        let e = k.meaning.unwrap();
        assert_eq!(
            e.program.to_string(),
            "args 3\nr0 = load arg0 f32\nr1 = load arg1 f32\nr2 = add r0 r1\nstore arg2 r2 f16\n"
        );
        assert_eq!(
            e.stores,
            vec![Store {
                ptr: 2,
                v: 3,
                elem: "f16".into()
            }]
        );
    }

    #[test]
    fn scalars_in_arithmetic_are_not_computable() {
        let src = ADD.replace(
            "%s = arith.addf %x, %y",
            "%sp = tt.splat %arg3 : i32 -> tensor<1024xi32>\n    %s = arith.addf %x, %sp",
        );
        let why = analyse(&src).unwrap().meaning.unwrap_err();
        assert!(why.contains("scalar parameter %arg3"), "{why}");
    }

    #[test]
    fn gathers_are_not_computable() {
        let src = ADD.replace(
            "%a1 = tt.addptr %p1, %r",
            "%xi = arith.fptosi %x : tensor<1024xf32> to tensor<1024xi32>\n    %a1 = tt.addptr %p1, %xi",
        );
        let why = analyse(&src).unwrap().meaning.unwrap_err();
        assert!(why.contains("gather"), "{why}");
    }

    #[test]
    fn constants() {
        assert_eq!(
            constant(" dense<2.500000e+00> : tensor<1024xf32>"),
            Some((2.5, "f32".into()))
        );
        assert_eq!(constant(" 3 : i32"), Some((3.0, "i32".into())));
        assert_eq!(
            constant(" dense<0xFF800000> : tensor<8xf32>"),
            Some((f64::NEG_INFINITY, "f32".into()))
        );
        assert_eq!(
            constant(" dense<0x3F80> : tensor<8xbf16>"),
            Some((1.0, "bf16".into()))
        );
        assert_eq!(
            constant(" dense<0xBC00> : tensor<8xf16>"),
            Some((-1.0, "f16".into()))
        );
    }

    #[test]
    fn scanning_helpers() {
        assert_eq!(
            strip_loc(r#"%a = tt.load %b : t loc(#loc1)"#),
            "%a = tt.load %b : t"
        );
        assert_eq!(
            strip_loc(r#"%x: !tt.ptr<f32> loc("x"(#loc))"#),
            "%x: !tt.ptr<f32>"
        );
        assert_eq!(
            split_top("%a: f32 {x = 1 : i32, y = 2}, %b: i32", ','),
            ["%a: f32 {x = 1 : i32, y = 2}", " %b: i32"]
        );
        assert_eq!(find_top("(%a) <{axis = 0 : i32}> : f32", " : "), Some(23));
        assert_eq!(result_names("%a:2"), ["%a#0", "%a#1", "%a"]);
        assert_eq!(
            ssa_names("%x_5, %mask_0, %r#1"),
            ["%x_5", "%mask_0", "%r#1"]
        );
    }
}
