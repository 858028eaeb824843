//! Runs `@__transform_main` once (or, without it, each top-level transform op, as mlir-air's
//! `AIRTransformInterpreter.cpp:29-52, 90-128` does) over a coarse model of the payload.
//!
//! The model knows, for the payload ops the rules need: the linalg ops triton-shared emitted
//! (fused or not), the `scf.forall` loops tiling made (and whether they still have shared
//! outputs), `scf.parallel`/`air.herd`, the padded copies of operands, whether the IR is
//! bufferized yet, and which tensor results were given an L2/L1 buffer
//! (`bufferize_to_allocation {memory_space = 1|2}`) before bufferization. Handles are lists of
//! model ops; an op the model does not follow yields an *opaque* handle, and the rules only
//! refuse what the model knows — the judge never refuses on a guess.
//!
//! Rules (real-toolchain-rules.md §4):
//! * `transform.loop.forall_to_parallel` (upstream MLIR `ForallToParallelOp::apply`,
//!   SCFTransformOps.cpp): exactly one payload op, an `scf.forall`, without shared outputs;
//! * `one_shot_bufferize` gives every tensor result that has no buffer yet a new
//!   `memref.alloc` in memory space 0 (L3); the model records them and `air-par-to-launch`
//!   refuses them with mlir-air's `air.segment` verifier message (AIRDialect.cpp:1752-1754).

use std::collections::{HashMap, HashSet};

use super::{Error, Kind, Op, Script};

/// Payload ops whose tensor result needs a buffer when the IR is bufferized.
const NEEDS_BUFFER: &[&str] = &[
    "linalg.generic",
    "linalg.fill",
    "linalg.matmul",
    "linalg.reduce",
    "linalg.transpose",
    "linalg.copy",
    "tensor.pad",
];

/// Transform ops that leave the payload's structure (as modelled) as it was.
const STRUCTURE_KEEPING: &[&str] = &[
    "transform.annotate",
    "transform.apply_cse",
    "transform.apply_dce",
    "transform.apply_licm",
    "transform.apply_patterns",
    "transform.cast",
    "transform.get_consumers_of_result",
    "transform.get_defining_op",
    "transform.get_operand",
    "transform.get_parent_op",
    "transform.get_result",
    "transform.match.operation_name",
    "transform.merge_handles",
    "transform.param.constant",
    "transform.print",
    "transform.split_handle",
    "transform.structured.flatten_elementwise",
    "transform.structured.match",
    "transform.structured.rewrite_in_destination_passing_style",
    "transform.air.fold_unit_extent_dims",
    "transform.air.convert_memref_copy_to_linalg_copy",
];

#[derive(Debug, Clone)]
struct PayloadOp {
    name: String,
    parent: Option<usize>,
    alive: bool,
    /// The memory space of the buffer given to its result before bufferization.
    buffer: Option<i64>,
    /// For `scf.forall`: it still has shared outputs (not bufferized).
    shared_outs: bool,
    attrs: HashSet<String>,
    /// For a `tensor.pad` made by `structured.pad`: (padded op, operand index).
    pad_of: Option<(usize, usize)>,
}

impl PayloadOp {
    fn new(name: &str, parent: Option<usize>) -> PayloadOp {
        PayloadOp {
            name: name.into(),
            parent,
            alive: true,
            buffer: None,
            shared_outs: false,
            attrs: HashSet::new(),
            pad_of: None,
        }
    }
}

#[derive(Debug, Clone)]
enum Handle {
    Ops(Vec<usize>),
    /// Something the model does not follow.
    Opaque,
}

/// What running the script found out about the payload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Tensor results that one_shot_bufferize had to allocate in L3 (memory space 0).
    pub l3_allocations: Vec<String>,
    /// Whether the model followed every step (else no L3 verdict is given).
    pub precise: bool,
}

struct Interp<'a> {
    script: &'a Script,
    payload: Vec<PayloadOp>,
    bufferized: bool,
    precise: bool,
    l3: Vec<String>,
    depth: usize,
}

/// The payload model of an input module: the module, its functions and their linalg ops.
fn model(module: &str) -> Vec<PayloadOp> {
    let op = PayloadOp::new;
    let mut ops = vec![op("builtin.module", None)];
    let mut func = 0;
    let bytes = module.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'"' {
            i = crate::mlir::skip_string(bytes, i);
            continue;
        }
        let word_start = i == 0 || !crate::mlir::is_ident(bytes[i - 1]);
        if word_start && bytes[i].is_ascii_alphabetic() {
            let end = (i..bytes.len())
                .find(|&j| !crate::mlir::is_ident(bytes[j]))
                .unwrap_or(bytes.len());
            let word = &module[i..end];
            if word == "func.func" {
                ops.push(op("func.func", Some(0)));
                func = ops.len() - 1;
            } else if let Some(kind) = word.strip_prefix("linalg.")
                && !matches!(kind, "yield" | "index")
            {
                let parent = if func == 0 { 0 } else { func };
                ops.push(op(word, Some(parent)));
            }
            i = end;
            continue;
        }
        i += 1;
    }
    ops
}

/// Runs the script over `module`'s model.
pub fn run(script: &Script, module: &str) -> Result<Outcome, Error> {
    let mut it = Interp {
        script,
        payload: model(module),
        bufferized: false,
        precise: true,
        l3: Vec::new(),
        depth: 0,
    };
    let root = Handle::Ops(vec![0]);
    if let Some(main) = script.sequence("__transform_main") {
        it.call(main, vec![root])?;
    } else {
        for op in &script.top {
            if op.name == "transform.named_sequence" || op.name == "builtin.module" {
                continue;
            }
            it.apply_top(op, &root)?;
        }
    }
    Ok(Outcome {
        l3_allocations: it.l3,
        precise: it.precise,
    })
}

impl Interp<'_> {
    fn apply_top(&mut self, op: &Op, root: &Handle) -> Result<(), Error> {
        // `transform.sequence %root … { ^bb0(%arg): … }` and its kind: the body on the root.
        let mut env = HashMap::new();
        if let Some(region) = op.regions.first() {
            for a in &region.args {
                env.insert(a.clone(), root.clone());
            }
            self.body(&region.ops, &mut env)?;
            Ok(())
        } else {
            self.apply(op, &mut env).map(|_| ())
        }
    }

    fn call(&mut self, seq: &Op, args: Vec<Handle>) -> Result<Vec<Handle>, Error> {
        self.depth += 1;
        if self.depth > 64 {
            return Err(super::Error::at(
                seq.loc,
                "transform.include nesting too deep (recursive sequences?)",
            ));
        }
        let mut env: HashMap<String, Handle> =
            seq.signature_args.iter().cloned().zip(args).collect();
        let r = match seq.regions.first() {
            Some(region) => self.body(&region.ops, &mut env),
            None => Ok(Vec::new()),
        };
        self.depth -= 1;
        r
    }

    /// Runs a block; returns what its `transform.yield` yields.
    fn body(
        &mut self,
        ops: &[Op],
        env: &mut HashMap<String, Handle>,
    ) -> Result<Vec<Handle>, Error> {
        for op in ops {
            if op.name == "transform.yield" {
                return Ok(op
                    .operands()
                    .iter()
                    .map(|(n, _)| env.get(n).cloned().unwrap_or(Handle::Opaque))
                    .collect());
            }
            let results = self.apply(op, env)?;
            for (k, r) in op.results.iter().enumerate() {
                env.insert(r.clone(), results.get(k).cloned().unwrap_or(Handle::Opaque));
            }
        }
        Ok(Vec::new())
    }

    fn new_op(&mut self, name: &str, parent: Option<usize>) -> usize {
        self.payload.push(PayloadOp::new(name, parent));
        self.payload.len() - 1
    }

    /// Whether `op` is `ancestor` or nested in it.
    fn within(&self, mut op: usize, ancestor: usize) -> bool {
        loop {
            if op == ancestor {
                return true;
            }
            match self.payload[op].parent {
                Some(p) => op = p,
                None => return false,
            }
        }
    }

    fn descendants(&self, roots: &[usize], pred: impl Fn(&PayloadOp) -> bool) -> Vec<usize> {
        (0..self.payload.len())
            .filter(|&i| {
                self.payload[i].alive
                    && pred(&self.payload[i])
                    && roots.iter().any(|&r| self.within(i, r))
            })
            .collect()
    }

    fn apply(&mut self, op: &Op, env: &mut HashMap<String, Handle>) -> Result<Vec<Handle>, Error> {
        let arg = |k: usize| -> Handle {
            op.operand(k)
                // A result of a multi-result op `%x:2` is bound as `%x#k`.
                .and_then(|n| env.get(&n).cloned())
                .unwrap_or(Handle::Opaque)
        };
        let target = arg(0);
        let n = op.results.len();
        let opaque = |n: usize| vec![Handle::Opaque; n];
        let name = op.name.as_str();
        match name {
            "transform.include" => {
                let callee = op
                    .symbols()
                    .first()
                    .map(|(s, _)| s.clone())
                    .unwrap_or_default();
                let Some(seq) = self.script.sequence(&callee) else {
                    return Ok(opaque(n));
                };
                let args: Vec<Handle> = (0..seq.signature_args.len()).map(arg).collect();
                return self.call(seq, args);
            }
            "transform.structured.match" => {
                // Once the model has lost track of the payload, so have its matches.
                let Handle::Ops(roots) = target else {
                    return Ok(opaque(n));
                };
                if !self.precise {
                    return Ok(opaque(n));
                }
                let names = op.strings_after("ops");
                let wanted_attrs: Vec<String> = if op.has("attributes") {
                    let at = op
                        .tokens
                        .iter()
                        .position(|t| t.text == "attributes")
                        .unwrap_or(0);
                    op.tokens[at + 1..]
                        .iter()
                        .take_while(|t| t.text != "in")
                        .filter(|t| t.kind == Kind::Ident)
                        .map(|t| t.text.clone())
                        .collect()
                } else {
                    Vec::new()
                };
                if names.is_empty() {
                    return Ok(opaque(n));
                }
                let found = self.descendants(&roots, |p| {
                    names.contains(&p.name) && wanted_attrs.iter().all(|a| p.attrs.contains(a))
                });
                return Ok(vec![Handle::Ops(found)]);
            }
            "transform.annotate" => {
                if let (Handle::Ops(v), Some(attr)) =
                    (&target, op.tokens.iter().find(|t| t.kind == Kind::Str))
                {
                    for &i in v {
                        self.payload[i]
                            .attrs
                            .insert(attr.text.trim_matches('"').to_owned());
                    }
                }
                return Ok(Vec::new());
            }
            "transform.split_handle" => {
                return Ok(match target {
                    Handle::Ops(v) if v.len() == n => {
                        v.into_iter().map(|i| Handle::Ops(vec![i])).collect()
                    }
                    _ => opaque(n),
                });
            }
            "transform.merge_handles" => {
                let mut all = Vec::new();
                for k in 0..op.operands().len() {
                    match arg(k) {
                        Handle::Ops(v) => all.extend(v),
                        Handle::Opaque => return Ok(opaque(n)),
                    }
                }
                return Ok(vec![Handle::Ops(all)]);
            }
            "transform.air.fuse_elementwise_linalg" => {
                if let Handle::Ops(funcs) = &target {
                    for &f in funcs {
                        let elementwise = self.descendants(&[f], |p| {
                            matches!(p.name.as_str(), "linalg.generic" | "linalg.fill")
                        });
                        // Producers fuse into their consumers: the last generic stays.
                        if let Some(&keep) = elementwise
                            .iter()
                            .rev()
                            .find(|&&i| self.payload[i].name == "linalg.generic")
                        {
                            for &i in &elementwise {
                                if i != keep {
                                    self.payload[i].alive = false;
                                }
                            }
                        }
                    }
                }
                return Ok(vec![target; n]);
            }
            "transform.structured.bufferize_to_allocation" => {
                let space = op.int_attr("memory_space").unwrap_or(0);
                if let Handle::Ops(v) = &target {
                    for &i in v {
                        self.payload[i].buffer = Some(space);
                    }
                }
                return Ok(opaque(n));
            }
            "transform.structured.tile_using_forall" | "transform.structured.tile_using_for" => {
                let Handle::Ops(v) = &target else {
                    return Ok(opaque(n));
                };
                let loop_name = if name.ends_with("forall") {
                    "scf.forall"
                } else {
                    "scf.for"
                };
                let mut loops = Vec::new();
                for &i in v {
                    let parent = self.payload[i].parent;
                    let l = self.new_op(loop_name, parent);
                    self.payload[l].shared_outs = loop_name == "scf.forall" && !self.bufferized;
                    self.payload[i].parent = Some(l);
                    loops.push(l);
                }
                let mut out = vec![target.clone(), Handle::Ops(loops)];
                out.resize(n.max(2), Handle::Opaque);
                out.truncate(n);
                return Ok(out);
            }
            "transform.structured.pad" => {
                let Handle::Ops(v) = &target else {
                    self.precise = false;
                    return Ok(opaque(n));
                };
                let operands = padding_values(op);
                let mut pads = Vec::new();
                for &i in v {
                    let parent = self.payload[i].parent;
                    for k in 0..operands {
                        let p = self.new_op("tensor.pad", parent);
                        self.payload[p].pad_of = Some((i, k));
                        pads.push(p);
                    }
                }
                let mut out = vec![target.clone(), Handle::Ops(pads), Handle::Opaque];
                out.truncate(n);
                return Ok(out);
            }
            "transform.get_producer_of_operand" => {
                let index = operand_index(op);
                if let (Handle::Ops(v), Some(k)) = (&target, index) {
                    let found: Vec<usize> = (0..self.payload.len())
                        .filter(|&p| {
                            self.payload[p].alive
                                && self.payload[p]
                                    .pad_of
                                    .is_some_and(|(o, j)| j == k && v.contains(&o))
                        })
                        .collect();
                    if found.len() == v.len() {
                        return Ok(vec![Handle::Ops(found)]);
                    }
                }
                return Ok(opaque(n));
            }
            "transform.bufferization.one_shot_bufferize" => {
                if !self.bufferized && self.precise {
                    let unbuffered = self.descendants(&[0], |p| {
                        NEEDS_BUFFER.contains(&p.name.as_str()) && p.buffer.is_none()
                    });
                    for i in unbuffered {
                        self.l3.push(format!(
                            "the result of a {} (one_shot_bufferize at line {})",
                            self.payload[i].name, op.loc.line
                        ));
                    }
                }
                self.bufferized = true;
                for p in &mut self.payload {
                    p.shared_outs = false;
                }
                return Ok(vec![target; n]);
            }
            "transform.loop.forall_to_parallel" => {
                let Handle::Ops(v) = &target else {
                    return Ok(opaque(n));
                };
                let fail = |m: &str| Err(super::Error::at(op.loc, m.to_owned()));
                if v.len() != 1 {
                    return fail("expected a single payload op");
                }
                let forall = v[0];
                if self.payload[forall].name != "scf.forall" {
                    return fail("expected the payload to be scf.forall");
                }
                if self.payload[forall].shared_outs {
                    return fail("unsupported shared outputs (didn't bufferize?)");
                }
                if n != 1 {
                    return fail("op expects one result");
                }
                self.payload[forall].name = "scf.parallel".into();
                return Ok(vec![Handle::Ops(vec![forall])]);
            }
            "transform.air.par_to_herd" => {
                if let Handle::Ops(v) = &target {
                    for &i in v {
                        if self.payload[i].name == "scf.parallel" {
                            self.payload[i].name = "air.herd".into();
                        }
                    }
                }
                return Ok(vec![target; n]);
            }
            _ => {}
        }
        if STRUCTURE_KEEPING.contains(&name) {
            // Same ops in, same ops out (for one-to-one ops); anything else is opaque.
            return Ok(if n == 1 && op.operands().len() == 1 {
                vec![target]
            } else {
                opaque(n)
            });
        }
        if !self.bufferized {
            // An op the model does not follow may have made or removed tensor producers.
            self.precise = false;
        }
        Ok(opaque(n))
    }
}

/// How many padding values `structured.pad` lists (one per operand).
fn padding_values(op: &Op) -> usize {
    let Some(at) = op.tokens.iter().position(|t| t.text == "padding_values") else {
        return 0;
    };
    let mut depth = 0;
    let mut count = 0;
    for t in &op.tokens[at + 1..] {
        match t.text.as_str() {
            "[" => depth += 1,
            "]" => {
                depth -= 1;
                if depth == 0 {
                    return count + 1;
                }
            }
            "," if depth == 1 => count += 1,
            _ => {}
        }
    }
    0
}

/// `k` of `get_producer_of_operand %h[k]`.
fn operand_index(op: &Op) -> Option<usize> {
    let at = op.tokens.iter().position(|t| t.text == "[")?;
    op.tokens.get(at + 1)?.text.parse().ok()
}
