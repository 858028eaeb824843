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
//!   refuses them with mlir-air's `air.segment` verifier message (AIRDialect.cpp:1752-1754);
//! * mlir-air's `air.herd` verifier (AIRDialect.cpp:2055-2059, `verifyAllocMemorySpace`
//!   :1641-1682 and `verifyComputeMemoryAccess` :1717-1750), checked when the pass ends as MLIR's
//!   pass manager verifies: every allocation inside a herd is in L1, and every direct access
//!   (the `vector.transfer_read`/`transfer_write` a vectorized compute op becomes) reads and
//!   writes L1 only. To know where each operand lives the model follows the data flow of the
//!   linalg ops (see [`super::payload`]) and the steps that stage operands: `structured.pad` +
//!   `bufferize_to_allocation`, `air.linalg_promote`, `structured.promote`,
//!   `structured.promote_tensor`, and the destinations `bufferize_to_allocation` gives.
//!
//! It also reports each herd's shape and the tiles its cores compute (from
//! `tile_using_forall`'s `num_threads`/`tile_sizes` over the tiled op's loop bounds), which the
//! stand-in records into the kernel's program so that the harness device runs per tile.

use std::collections::{HashMap, HashSet};

use super::payload::{self, Payload};
use super::{Error, Kind, Op, Script, Token};

/// Payload ops whose tensor result needs a buffer when the IR is bufferized.
const NEEDS_BUFFER: &[&str] = &[
    "linalg.generic",
    "linalg.fill",
    "linalg.matmul",
    "linalg.reduce",
    "linalg.transpose",
    "linalg.copy",
    "linalg.pack",
    "linalg.unpack",
    "tensor.pad",
];

/// mlir-air's memory spaces (AIR's MemorySpace enum: L3 = 0, L2 = 1, L1 = 2).
const L1: i64 = 2;

fn space_name(space: i64) -> Option<&'static str> {
    match space {
        0 => Some("L3"),
        1 => Some("L2"),
        2 => Some("L1"),
        _ => None,
    }
}

/// Whether the model keeps every payload op named `name` (so that a match finds them all).
fn tracked(name: &str) -> bool {
    matches!(
        name,
        "builtin.module"
            | "func.func"
            | "scf.forall"
            | "scf.for"
            | "scf.parallel"
            | "air.herd"
            | "tensor.pad"
            | payload::STORE
            | LOAD
    ) || (name.starts_with("linalg.") && name != "linalg.copy")
}

/// The op a loaded tensor comes from (triton-shared's `bufferization.to_tensor` of the buffer
/// a load copies into): kept so that `get_producer_of_operand` of an operand that reads a load
/// finds it, as MLIR's does (a producer is any defining op), and fusing it into a loop (which
/// MLIR does by cloning it for its use there) is followed.
const LOAD: &str = "bufferization.to_tensor";

/// Payload ops a vectorizer turns into vector transfers of their operands.
const COMPUTE: &[&str] = &[
    "linalg.generic",
    "linalg.fill",
    "linalg.matmul",
    "linalg.reduce",
    "linalg.transpose",
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
    "transform.get_parent_op",
    "transform.get_result",
    "transform.match.operation_name",
    "transform.merge_handles",
    "transform.param.constant",
    "transform.print",
    "transform.split_handle",
    "transform.structured.match",
    "transform.structured.rewrite_in_destination_passing_style",
    "transform.air.fold_unit_extent_dims",
    "transform.air.convert_memref_copy_to_linalg_copy",
    "transform.air.normalize_for_bounds",
];

/// Where an operand of a linalg op comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Src {
    /// The result of another payload op.
    Op(usize),
    /// A value the model does not follow as data flow: a load (`bufferization.to_tensor` of the
    /// `memref.alloc` a load copies into), a slice, a constant.
    Value(String),
    /// A `tensor.empty`: it gets a buffer only when the IR is bufferized.
    Empty,
}

/// The tiles a loop made by tiling runs: per loop dimension of the tiled op, the tile extent
/// (0: not tiled) and how many tiles there are.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LoopTiling {
    domain: Vec<u64>,
    tiles: Vec<u64>,
    counts: Vec<u64>,
    /// The same tiles over the tiled op's element space (its [`Elements`]), when it has one:
    /// (bounds, tile extent per element dimension).
    elements: Option<(Vec<u64>, Vec<u64>)>,
}

/// How a packed op's loops map onto the elements of the unpacked operation (`structured.pack`
/// makes a matmul's loops `[M/pm, N/pn, K/pk, pm, pn, pk]`): its outer loop `j` walks element
/// dimension `dims[j].0` in steps of `dims[j].1`; the loops after them stay inside a pack.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Elements {
    domain: Vec<u64>,
    dims: Vec<(usize, u64)>,
}

#[derive(Debug, Clone)]
struct PayloadOp {
    name: String,
    parent: Option<usize>,
    alive: bool,
    /// The memory space of the buffer given to its result before bufferization.
    buffer: Option<i64>,
    /// Where that buffer's `memref.alloc` is: the op's parent when it was allocated.
    alloc_at: Option<usize>,
    /// For `scf.forall`: it still has shared outputs (not bufferized).
    shared_outs: bool,
    attrs: HashSet<String>,
    /// For a `tensor.pad` made by `structured.pad`: (padded op, operand index).
    pad_of: Option<(usize, usize)>,
    ins: Vec<Src>,
    outs: Vec<Src>,
    /// The op's loop bounds (empty when unknown).
    domain: Vec<u64>,
    /// Operand index -> the memory space of the copy a promotion staged it in.
    promoted: HashMap<usize, i64>,
    /// Its parent before tiling put it in a loop: a tiled op's destination stays there.
    home: Option<usize>,
    /// It has become vector transfers (direct loads and stores).
    vectorized: bool,
    /// For a loop tiling made.
    tiling: Option<LoopTiling>,
    /// For a packed op (and the fill and unpack of a packed matmul's result): its loops in
    /// terms of the unpacked elements.
    elements: Option<Elements>,
    /// For a loop tiling made of ops the model does not keep (copies): it holds nothing the
    /// model follows.
    untracked_body: bool,
    /// For `linalg.reduce`: the reduced dimensions of its input.
    reduced: Vec<u64>,
    /// For `linalg.transpose`: result dimension j is input dimension `permutation[j]`.
    permutation: Vec<u64>,
}

impl PayloadOp {
    fn new(name: &str, parent: Option<usize>) -> PayloadOp {
        PayloadOp {
            name: name.into(),
            parent,
            alive: true,
            buffer: None,
            alloc_at: None,
            shared_outs: false,
            attrs: HashSet::new(),
            pad_of: None,
            ins: Vec::new(),
            outs: Vec::new(),
            domain: Vec::new(),
            promoted: HashMap::new(),
            home: None,
            vectorized: false,
            tiling: None,
            elements: None,
            untracked_body: false,
            reduced: Vec::new(),
            permutation: Vec::new(),
        }
    }

    fn operands(&self) -> usize {
        self.ins.len() + self.outs.len()
    }
}

#[derive(Debug, Clone)]
enum Handle {
    Ops(Vec<usize>),
    /// Operands of payload ops (`get_operand`): (op, operand index).
    Values(Vec<(usize, usize)>),
    /// Payload ops the model does not keep (copies): nothing it follows is among them.
    Untracked,
    /// Something the model does not follow.
    Opaque,
}

/// A herd the schedule made: its shape (columns, rows) and the tiles its cores compute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Herd {
    pub size: [u64; 2],
    /// The loop bounds of the op whose loop became the herd (empty when unknown).
    pub domain: Vec<u64>,
    /// The tile extent per loop dimension (0: the dimension is not split).
    pub tiles: Vec<u64>,
}

/// What running the script found out about the payload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Tensor results that one_shot_bufferize had to allocate in L3 (memory space 0).
    pub l3_allocations: Vec<String>,
    /// Whether the model followed every step (else no L3 or herd verdict is given).
    pub precise: bool,
    /// The herds, in the order the schedule made them.
    pub herds: Vec<Herd>,
    /// What mlir-air's `air.herd` verifier refuses in the result (precise runs only).
    pub herd_violation: Option<String>,
}

struct Interp<'a> {
    script: &'a Script,
    payload: Vec<PayloadOp>,
    /// The memory space of loaded values (`air-override-memref-memory-space` sets it).
    loads_space: i64,
    /// Allocations promotions made: (where, memory space, what).
    promotions: Vec<(usize, i64, String)>,
    herds: Vec<usize>,
    bufferized: bool,
    precise: bool,
    l3: Vec<String>,
    depth: usize,
    /// Loaded values and the model op (named [`LOAD`]) that defines each.
    loaded: HashMap<String, usize>,
}

/// The payload model of an input module: the module, its functions and their linalg ops with
/// where each operand comes from; and the ops that define its loaded values.
fn model(module: &str, loads_space: i64) -> (Vec<PayloadOp>, HashMap<String, usize>) {
    let Payload {
        ops: linalg,
        empties,
        reshapes,
        loads,
        funcs,
        ..
    } = payload::read(module);
    let mut ops = vec![PayloadOp::new("builtin.module", None)];
    for _ in 0..funcs {
        ops.push(PayloadOp::new("func.func", Some(0)));
    }
    let first = ops.len();
    let results: HashMap<&str, usize> = linalg
        .iter()
        .enumerate()
        .filter_map(|(k, l)| l.result.as_deref().map(|r| (r, first + k)))
        .collect();
    let src = |v: &String| {
        // A reshaped value is followed to what it reshapes.
        let mut v = v;
        for _ in 0..reshapes.len() {
            match reshapes.get(v) {
                Some(source) => v = source,
                None => break,
            }
        }
        match results.get(v.as_str()) {
            Some(&i) => Src::Op(i),
            None if empties.contains(v) => Src::Empty,
            None => Src::Value(v.clone()),
        }
    };
    for l in &linalg {
        let mut op = PayloadOp::new(&l.name, Some(l.func.map_or(0, |f| 1 + f)));
        op.ins = l.ins.iter().map(src).collect();
        op.outs = l.outs.iter().map(src).collect();
        op.domain = l.domain.clone();
        op.reduced = l.reduced.clone();
        op.permutation = l.permutation.clone();
        if l.on_memref {
            // It writes a buffer the kernel allocated (a load's, in the loads' space).
            op.buffer = Some(loads_space);
        }
        ops.push(op);
    }
    let mut loaded = HashMap::new();
    for (value, func) in loads {
        // Operands that read it stay `Src::Value`: where they live is the loads' space.
        ops.push(PayloadOp::new(LOAD, Some(func.map_or(0, |f| 1 + f))));
        loaded.insert(value, ops.len() - 1);
    }
    (ops, loaded)
}

/// Runs the script over `module`'s model and, when the model followed it, checks the herds.
pub fn run(script: &Script, module: &str) -> Result<Outcome, Error> {
    let loads_space = crate::attrs::int_attr(module, crate::attrs::LOADS_MEMORY_SPACE).unwrap_or(0);
    let (payload, loaded) = model(module, loads_space);
    let mut it = Interp {
        script,
        payload,
        loaded,
        loads_space,
        promotions: Vec::new(),
        herds: Vec::new(),
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
    let judged = it.precise;
    let herd_violation = if judged { it.verify_herds() } else { None };
    Ok(Outcome {
        herds: it.herd_shapes(),
        l3_allocations: if judged { it.l3 } else { Vec::new() },
        precise: judged,
        herd_violation,
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

    /// mlir-air's `transform.air.fuse_elementwise_linalg` on one function. mlir-air applies
    /// upstream MLIR's elementwise fusion patterns (`populateElementwiseOpsFusionPatterns`,
    /// AIRLinalgCodegen.cpp `FuseElementwiseLinalgOp::apply`): a generic absorbs the
    /// elementwise ops (generics, fills) that produce its operands, and a producer is erased
    /// once nothing else reads it. So an elementwise op whose readers are all generics goes;
    /// one that something else still reads (a reduction, a transpose, a store) stays, having
    /// absorbed its own producers in turn. Each generic that stays reads what its absorbed ops
    /// read from outside, once each, and writes where the first of them wrote.
    fn fuse_elementwise(&mut self, f: usize) {
        let elementwise = self.descendants(&[f], |p| {
            matches!(p.name.as_str(), "linalg.generic" | "linalg.fill")
        });
        let goes: HashSet<usize> = elementwise
            .iter()
            .copied()
            .filter(|&d| {
                let r = self.readers(d);
                !r.is_empty() && r.iter().all(|&u| self.payload[u].name == "linalg.generic")
            })
            .collect();
        // Each generic that stays and what it absorbs, computed on the unfused payload.
        let mut fused: Vec<(usize, Vec<Src>, Vec<Src>)> = Vec::new();
        for &keep in elementwise.iter().rev() {
            if goes.contains(&keep) || self.payload[keep].name != "linalg.generic" {
                continue;
            }
            let mut group = vec![keep];
            let mut at = 0;
            while at < group.len() {
                let g = &self.payload[group[at]];
                for s in g.ins.iter().chain(&g.outs) {
                    if let Src::Op(p) = s
                        && elementwise.contains(p)
                        && !group.contains(p)
                    {
                        group.push(*p);
                    }
                }
                at += 1;
            }
            let mut ins: Vec<Src> = Vec::new();
            for &i in &group {
                if self.payload[i].name == "linalg.fill" {
                    continue; // a scalar, folded into the body
                }
                for s in &self.payload[i].ins {
                    let inside = matches!(s, Src::Op(p) if group.contains(p));
                    if !inside && !ins.contains(s) {
                        ins.push(s.clone());
                    }
                }
            }
            let mut outs = self.payload[keep].outs.clone();
            for o in &mut outs {
                for _ in 0..group.len() {
                    match o.clone() {
                        Src::Op(p) if group.contains(&p) => {
                            *o = self.payload[p].outs.first().cloned().unwrap_or(Src::Empty);
                        }
                        _ => break,
                    }
                }
            }
            fused.push((keep, ins, outs));
        }
        for d in goes {
            self.payload[d].alive = false;
        }
        for (keep, ins, outs) in fused {
            let k = &mut self.payload[keep];
            k.ins = ins;
            k.outs = outs;
        }
    }

    /// upstream MLIR's `structured.pack` of a matmul by `[pm, pn, pk]` (LinalgTransformOps
    /// `PackOp`): A, B and C go through `linalg.pack` ops, the matmul becomes a generic over
    /// `[M/pm, N/pn, K/pk, pm, pn, pk]` and its result a `linalg.unpack` into C's old
    /// destination. A fill of C folds into the pack (canonicalization folds `pack(fill)`):
    /// the fill then writes the packed C. The new op, or None when the model cannot say.
    fn pack_matmul(&mut self, i: usize, sizes: &[i64]) -> Option<usize> {
        let op = &self.payload[i];
        let ([m, n, k], [pm, pn, pk]) = (op.domain.as_slice(), sizes) else {
            return None;
        };
        let (m, n, k) = (*m, *n, *k);
        let (pm, pn, pk) = (
            u64::try_from(*pm).ok()?,
            u64::try_from(*pn).ok()?,
            u64::try_from(*pk).ok()?,
        );
        if op.name != "linalg.matmul"
            || pm == 0
            || pn == 0
            || pk == 0
            || m % pm != 0
            || n % pn != 0
            || k % pk != 0
        {
            return None;
        }
        let (a, b, c) = (
            op.ins.first()?.clone(),
            op.ins.get(1)?.clone(),
            op.outs.first()?.clone(),
        );
        let parent = op.parent;
        let pack = |this: &mut Self, source: Src, domain: Vec<u64>| {
            let p = this.new_op("linalg.pack", parent);
            this.payload[p].ins = vec![source];
            this.payload[p].outs = vec![Src::Empty];
            this.payload[p].domain = domain;
            p
        };
        let pack_a = pack(self, a, vec![m / pm, k / pk, pm, pk]);
        let pack_b = pack(self, b, vec![k / pk, n / pn, pk, pn]);
        let pack_c = pack(self, c.clone(), vec![m / pm, n / pn, pm, pn]);
        let unpack = self.new_op("linalg.unpack", parent);
        self.payload[unpack].ins = vec![Src::Op(i)];
        self.payload[unpack].outs = vec![c.clone()];
        self.payload[unpack].domain = vec![m, n];
        self.payload[unpack].elements = Some(Elements {
            domain: vec![m, n],
            dims: vec![(0, 1), (1, 1)],
        });
        if let Src::Op(f) = c
            && self.payload[f].name == "linalg.fill"
        {
            let fill = &mut self.payload[f];
            let (buffer, alloc_at) = (fill.buffer.take(), fill.alloc_at.take());
            let old_outs = std::mem::replace(&mut fill.outs, vec![Src::Op(pack_c)]);
            fill.domain = vec![m / pm, n / pn, pm, pn];
            fill.elements = Some(Elements {
                domain: vec![m, n],
                dims: vec![(0, pm), (1, pn)],
            });
            // C's old buffer is now the unpack's destination.
            let u = &mut self.payload[unpack];
            u.outs = old_outs;
            u.buffer = buffer;
            u.alloc_at = alloc_at;
            self.payload[pack_c].ins.clear();
        }
        let mm = &mut self.payload[i];
        mm.name = "linalg.generic".into();
        mm.ins = vec![Src::Op(pack_a), Src::Op(pack_b)];
        mm.outs = vec![Src::Op(pack_c)];
        mm.domain = vec![m / pm, n / pn, k / pk, pm, pn, pk];
        mm.elements = Some(Elements {
            domain: vec![m, n, k],
            dims: vec![(0, pm), (1, pn), (2, pk)],
        });
        Some(i)
    }

    /// Permutes the outer loops of op `i` (a pack's `outer_perm`).
    fn permute_outer(&mut self, i: usize, perm: &[i64]) {
        let mut order: Vec<i64> = perm.to_vec();
        let len = self.payload[i].domain.len() as i64;
        order.extend(perm.len() as i64..len);
        self.interchange(i, &order);
    }

    /// `structured.interchange`: loop `j` of op `i` becomes its loop `order[j]`.
    fn interchange(&mut self, i: usize, order: &[i64]) {
        let p = &mut self.payload[i];
        let order: Option<Vec<usize>> = order.iter().map(|&o| usize::try_from(o).ok()).collect();
        let Some(order) = order.filter(|o| {
            o.len() == p.domain.len() && {
                let mut seen = o.clone();
                seen.sort_unstable();
                seen.iter().enumerate().all(|(k, v)| k == *v)
            }
        }) else {
            self.precise = false;
            return;
        };
        p.domain = order.iter().map(|&o| p.domain[o]).collect();
        if let Some(e) = &mut p.elements {
            let mapped: Vec<Option<(usize, u64)>> =
                order.iter().map(|&o| e.dims.get(o).copied()).collect();
            let outer = mapped.iter().take_while(|d| d.is_some()).count();
            if mapped[outer..].iter().any(Option::is_some) {
                // A pack-inner loop moved in front of an element loop: not followed.
                p.elements = None;
            } else {
                e.dims = mapped.into_iter().flatten().collect();
            }
        }
    }

    /// Operand `k` of op `i` gets a copy in memory space `space`, allocated next to the op.
    fn promote(&mut self, i: usize, k: usize, space: i64, by: &str) {
        self.payload[i].promoted.insert(k, space);
        if let Some(at) = self.payload[i].parent {
            self.promotions.push((
                at,
                space,
                format!("operand {k} of a {} ({by})", self.payload[i].name),
            ));
        }
    }

    /// The producer of operand `k` of op `o`: the pad `structured.pad` put there, else the
    /// linalg op whose result it is, else the load that defines it.
    fn producer(&self, o: usize, k: usize) -> Option<usize> {
        let pad = (0..self.payload.len())
            .find(|&p| self.payload[p].alive && self.payload[p].pad_of == Some((o, k)));
        if pad.is_some() {
            return pad;
        }
        let op = &self.payload[o];
        match op.ins.iter().chain(&op.outs).nth(k) {
            Some(Src::Op(p)) if self.payload[*p].alive => Some(*p),
            Some(Src::Value(v)) => self.loaded.get(v).copied(),
            _ => None,
        }
    }

    /// The memory space operand `k` of op `i` is read from or written to.
    fn operand_space(&self, i: usize, k: usize) -> i64 {
        let op = &self.payload[i];
        if let Some(&s) = op.promoted.get(&k) {
            return s;
        }
        if let Some(pad) = (0..self.payload.len())
            .find(|&p| self.payload[p].alive && self.payload[p].pad_of == Some((i, k)))
        {
            return self.payload[pad].buffer.unwrap_or(0);
        }
        let output = k >= op.ins.len();
        if output && let Some(s) = op.buffer {
            return s;
        }
        let src = if output {
            op.outs.get(k - op.ins.len())
        } else {
            op.ins.get(k)
        };
        src.map_or(L1, |s| self.space_of(s))
    }

    /// Whether `src` is (through destinations) the result of an op given a buffer.
    fn allocated(&self, src: &Src) -> bool {
        let mut src = src.clone();
        for _ in 0..self.payload.len() {
            match src {
                Src::Op(p) if self.payload[p].buffer.is_some() => return true,
                Src::Op(p) => match self.payload[p].outs.first() {
                    Some(o) => src = o.clone(),
                    None => return false,
                },
                _ => return false,
            }
        }
        false
    }

    fn space_of(&self, src: &Src) -> i64 {
        let mut src = src.clone();
        for _ in 0..self.payload.len() {
            match src {
                Src::Value(_) => return self.loads_space,
                Src::Empty => return 0,
                Src::Op(p) => match (&self.payload[p].buffer, self.payload[p].outs.first()) {
                    (Some(s), _) => return *s,
                    (None, Some(o)) => src = o.clone(),
                    (None, None) => return 0,
                },
            }
        }
        0
    }

    /// `air.transpose_reduce` on reduction `i` (mlir-air AIRLinalgCodegen.cpp
    /// `TransposeReduceOp::apply`): a reduction whose reduced dimensions are already the
    /// innermost ones is left as it is; any other gets a `linalg.transpose` of its input (into
    /// a `tensor.empty`) that puts the kept dimensions first and the reduced ones last, and a
    /// new reduce over it takes its place (same results, so the handle keeps pointing at it).
    /// The canonicalization every schedule runs next folds a transpose of a transpose into one
    /// (upstream MLIR LinalgOps.cpp `FoldTransposeWithTranspose`) and an identity transpose
    /// away (`TransposeOp::fold`): triton-shared feeds a reduction over the last axis through
    /// a transpose (`dimensions = [0]`), so there the two cancel and the reduce reads the
    /// untransposed value. The model applies that fold here.
    fn reduction_innermost(&mut self, i: usize) {
        let p = &self.payload[i];
        let rank = p.domain.len() as u64;
        let k = p.reduced.len() as u64;
        let mut sorted = p.reduced.clone();
        sorted.sort_unstable();
        if rank == 0
            || sorted
                .iter()
                .enumerate()
                .all(|(j, &d)| d == rank - k + j as u64)
        {
            return;
        }
        let kept = (0..rank).filter(|d| !p.reduced.contains(d));
        let order: Vec<u64> = kept.chain(p.reduced.iter().copied()).collect();
        let (Some(input), true) = (p.ins.first().cloned(), order.iter().all(|&d| d < rank)) else {
            self.precise = false;
            return;
        };
        let domain: Vec<u64> = order.iter().map(|&d| p.domain[d as usize]).collect();
        // The transpose of a transpose reads the first one's input, by the composed order.
        let (source, perm) = match input {
            Src::Op(t)
                if self.payload[t].name == "linalg.transpose"
                    && self.payload[t].permutation.len() == order.len()
                    && self.payload[t].ins.len() == 1 =>
            {
                let first = &self.payload[t].permutation;
                let composed: Vec<u64> = order.iter().map(|&o| first[o as usize]).collect();
                (self.payload[t].ins[0].clone(), composed)
            }
            other => (other, order),
        };
        let identity = perm.iter().enumerate().all(|(j, &d)| d == j as u64);
        let new_input = if identity {
            source
        } else {
            let t = self.new_op("linalg.transpose", self.payload[i].parent);
            let op = &mut self.payload[t];
            op.ins = vec![source];
            op.outs = vec![Src::Empty];
            op.domain = domain.clone();
            op.permutation = perm;
            Src::Op(t)
        };
        let old = std::mem::replace(&mut self.payload[i].ins[0], new_input);
        // The transpose triton-shared made is dead once nothing reads it.
        if let Src::Op(t) = old
            && self.payload[t].name == "linalg.transpose"
            && self.readers(t).is_empty()
        {
            self.payload[t].alive = false;
        }
        let p = &mut self.payload[i];
        p.domain = domain;
        p.reduced = (rank - k..rank).collect();
    }

    /// The live ops that read or write the result of op `p` (a load's readers read its value).
    fn readers(&self, p: usize) -> Vec<usize> {
        let loaded: Option<&String> = (self.payload[p].name == LOAD)
            .then(|| self.loaded.iter().find(|(_, i)| **i == p).map(|(v, _)| v))
            .flatten();
        (0..self.payload.len())
            .filter(|&u| {
                let o = &self.payload[u];
                o.alive
                    && o.ins.iter().chain(&o.outs).any(|s| match s {
                        Src::Op(q) => *q == p,
                        Src::Value(v) => loaded == Some(v),
                        Src::Empty => false,
                    })
            })
            .collect()
    }

    /// mlir-air's `air.herd` verifier (AIRDialect.cpp:2055-2059) on every herd: allocations
    /// in L1 (`verifyAllocMemorySpace`), then direct accesses in L1
    /// (`verifyComputeMemoryAccess`). Returns the first violation, in mlir-air's words.
    fn verify_herds(&self) -> Option<String> {
        for &h in &self.herds {
            if !self.payload[h].alive {
                continue;
            }
            let allocs = self
                .payload
                .iter()
                .filter(|p| p.alive && p.alloc_at.is_some_and(|a| self.within(a, h)))
                .filter_map(|p| p.buffer.map(|s| (s, format!("the buffer of a {}", p.name))))
                .chain(
                    self.promotions
                        .iter()
                        .filter(|(at, _, _)| self.within(*at, h))
                        .map(|(_, s, what)| (*s, what.clone())),
                );
            for (space, what) in allocs {
                if space < L1 {
                    let found = match space_name(space) {
                        Some(n) => format!("memory space {n}"),
                        None => format!("numeric memory space {space}"),
                    };
                    return Some(format!(
                        "<unknown>:0: error: 'memref.alloc' op memref.alloc inside air.herd must \
                         have memory space >= L1, but found {found}\n\
                         <unknown>:0: note: the allocation: {what}"
                    ));
                }
            }
            for i in self.descendants(&[h], |p| p.vectorized && COMPUTE.contains(&p.name.as_str()))
            {
                let op = &self.payload[i];
                // A fill's input is a scalar; only its output is memory.
                let first = if op.name == "linalg.fill" {
                    op.ins.len()
                } else {
                    0
                };
                for k in first..op.operands() {
                    let space = self.operand_space(i, k);
                    if space >= L1 {
                        continue;
                    }
                    let access = if k < op.ins.len() {
                        "vector.transfer_read"
                    } else {
                        "vector.transfer_write"
                    };
                    let name = space_name(space).map_or(space.to_string(), str::to_owned);
                    return Some(format!(
                        "<unknown>:0: error: '{access}' op inside 'air.herd' accesses memref with \
                         memory_space {name}; AIE core tiles can only access L1 or more local \
                         memory directly. Use air.dma_memcpy_nd to stage data first.\n\
                         <unknown>:0: note: operand {k} of the vectorized {} inside the herd",
                        op.name
                    ));
                }
            }
        }
        None
    }

    /// Each live herd's shape and tiles (herds whose tiling the model lost are left out).
    fn herd_shapes(&self) -> Vec<Herd> {
        self.herds
            .iter()
            .filter(|&&h| self.payload[h].alive)
            .filter_map(|&h| {
                let t = self.payload[h].tiling.as_ref()?;
                let counts: Vec<u64> = t.counts.iter().copied().filter(|c| *c > 0).collect();
                let size = [
                    counts.first().copied().unwrap_or(1),
                    counts.get(1).copied().unwrap_or(1),
                ];
                let (domain, tiles) = match &t.elements {
                    Some((domain, tiles)) => (domain.clone(), tiles.clone()),
                    None if self.payload[h].untracked_body => return None,
                    None => (
                        t.domain.clone(),
                        (0..t.domain.len())
                            .map(|j| t.tiles.get(j).copied().unwrap_or(0))
                            .collect(),
                    ),
                };
                Some(Herd {
                    size,
                    domain,
                    tiles,
                })
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
                // Ops the model does not keep (copies, stores, vector ops) would match
                // nothing here but exist in the payload.
                if names.is_empty() || !names.iter().all(|n| tracked(n)) {
                    // Only ops the model does not keep: what tiling them makes is followed.
                    if !names.is_empty() && !names.iter().any(|n| tracked(n)) {
                        return Ok(vec![Handle::Untracked; n]);
                    }
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
                    Handle::Untracked => vec![Handle::Untracked; n],
                    _ => opaque(n),
                });
            }
            "transform.merge_handles" => {
                let mut all = Vec::new();
                for k in 0..op.operands().len() {
                    match arg(k) {
                        Handle::Ops(v) => all.extend(v),
                        Handle::Values(_) | Handle::Untracked | Handle::Opaque => {
                            return Ok(opaque(n));
                        }
                    }
                }
                return Ok(vec![Handle::Ops(all)]);
            }
            "transform.air.fuse_elementwise_linalg" => {
                if let Handle::Ops(funcs) = &target {
                    for &f in funcs {
                        self.fuse_elementwise(f);
                    }
                }
                return Ok(vec![target; n]);
            }
            "transform.structured.flatten_elementwise" => {
                // The op keeps its identity; its loops collapse into one.
                if let Handle::Ops(v) = &target {
                    for &i in v {
                        let d = &mut self.payload[i].domain;
                        if !d.is_empty() {
                            *d = vec![d.iter().product()];
                        }
                    }
                }
                return Ok(vec![target; n]);
            }
            "transform.structured.bufferize_to_allocation" => {
                let space = op.int_attr("memory_space").unwrap_or(0);
                match &target {
                    // On bufferized IR there is no tensor destination left to allocate; the
                    // model gives no verdict on what it would do.
                    _ if self.bufferized => {}
                    Handle::Ops(v) => {
                        for &i in v {
                            self.payload[i].buffer = Some(space);
                            self.payload[i].alloc_at = self.payload[i].parent;
                        }
                    }
                    _ => self.precise = false,
                }
                return Ok(opaque(n));
            }
            "transform.structured.tile_using_forall" | "transform.structured.tile_using_for" => {
                let loop_name = if name.ends_with("forall") {
                    "scf.forall"
                } else {
                    "scf.for"
                };
                if let Handle::Untracked = target {
                    // Copies tiled into a loop (a matmul's L3->L2 streams): the loop is kept,
                    // so that it can be annotated, matched and fused with another.
                    let func =
                        usize::from(self.payload.len() > 1 && self.payload[1].name == "func.func");
                    let l = self.new_op(loop_name, Some(func));
                    self.payload[l].untracked_body = true;
                    let mut out = vec![Handle::Untracked, Handle::Ops(vec![l])];
                    out.resize(n.max(2), Handle::Opaque);
                    out.truncate(n);
                    return Ok(out);
                }
                let Handle::Ops(v) = &target else {
                    self.precise = false;
                    return Ok(opaque(n));
                };
                let mut loops = Vec::new();
                for &i in v {
                    let parent = self.payload[i].parent;
                    let l = self.new_op(loop_name, parent);
                    self.payload[l].shared_outs = loop_name == "scf.forall" && !self.bufferized;
                    let mut tiling = loop_tiling(op, &self.payload[i].domain);
                    if let Some(t) = &mut tiling {
                        t.elements = self.payload[i]
                            .elements
                            .as_ref()
                            // Unknown (empty) when the split loops do not map onto elements.
                            .map(|e| element_tiles(e, &t.tiles).unwrap_or_default());
                        // The op in the loop computes one tile.
                        let p = &mut self.payload[i];
                        for (d, &extent) in p.domain.iter_mut().zip(&t.tiles) {
                            if extent > 0 {
                                *d = extent;
                            }
                        }
                        if let (Some(e), Some((_, tiles))) = (&mut p.elements, &t.elements) {
                            for (d, &extent) in e.domain.iter_mut().zip(tiles) {
                                if extent > 0 {
                                    *d = (*d).min(extent);
                                }
                            }
                        }
                    }
                    self.payload[l].tiling = tiling;
                    if self.payload[i].home.is_none() {
                        self.payload[i].home = parent;
                    }
                    self.payload[i].parent = Some(l);
                    loops.push(l);
                }
                let mut out = vec![target.clone(), Handle::Ops(loops)];
                out.resize(n.max(2), Handle::Opaque);
                out.truncate(n);
                return Ok(out);
            }
            "transform.structured.fuse_into_containing_op" => {
                // The producers move into the loop; their destinations stay where they were.
                let (Handle::Ops(producers), Handle::Ops(loops)) = (&target, arg(1)) else {
                    self.precise = false;
                    return Ok(opaque(n));
                };
                let Some(&l) = loops.first() else {
                    return Ok(opaque(n));
                };
                // Upstream MLIR (LinalgTransformOps.cpp `FuseIntoContainingOp::apply`) fuses
                // the producers one at a time, each for a use inside the loop, retrying the
                // rest after every fusion; when none of those left is used inside the loop it
                // fails. The model refuses only producers whose readers it knows, all outside.
                let mut remaining: Vec<usize> = producers.clone();
                while !remaining.is_empty() {
                    let next = remaining
                        .iter()
                        .position(|&p| self.readers(p).iter().any(|&u| self.within(u, l)));
                    match next {
                        Some(at) => {
                            let p = remaining.remove(at);
                            self.payload[p].parent = Some(l);
                        }
                        None if self.precise
                            && remaining.iter().all(|&p| !self.readers(p).is_empty()) =>
                        {
                            return Err(super::Error::at(
                                op.loc,
                                "could not find next producer to fuse into container".to_owned(),
                            ));
                        }
                        None => {
                            // Readers the model does not know: not judged.
                            for p in remaining.drain(..) {
                                self.payload[p].parent = Some(l);
                            }
                        }
                    }
                }
                let mut out = vec![target.clone(), Handle::Ops(vec![l])];
                out.truncate(n);
                return Ok(out);
            }
            "transform.loop.fuse_sibling" => {
                // `fuse_sibling %target into %source`: one loop runs both bodies.
                let (Handle::Ops(t), Handle::Ops(src)) = (&target, arg(1)) else {
                    self.precise = false;
                    return Ok(opaque(n));
                };
                let ([t], [src]) = (t.as_slice(), src.as_slice()) else {
                    self.precise = false;
                    return Ok(opaque(n));
                };
                // A loop of copies the model does not keep brings nothing it follows.
                if !self.payload[*t].untracked_body
                    && self.payload[*t].tiling.as_ref().map(|x| &x.counts)
                        != self.payload[*src].tiling.as_ref().map(|x| &x.counts)
                {
                    // Loops of different bounds: what MLIR does is not modelled.
                    self.precise = false;
                }
                for p in &mut self.payload {
                    if p.parent == Some(*t) {
                        p.parent = Some(*src);
                    }
                }
                self.payload[*t].alive = false;
                return Ok(vec![Handle::Ops(vec![*src]); n]);
            }
            "transform.air.linalg_promote" | "transform.structured.promote" => {
                let Handle::Ops(v) = &target else {
                    self.precise = false;
                    return Ok(opaque(n));
                };
                let Some(space) = promote_space(op) else {
                    self.precise = false;
                    return Ok(vec![target; n]);
                };
                let listed = attr_ints(op, "operands_to_promote");
                let group = attr_ints(op, "group_size")
                    .first()
                    .map_or(1, |g| (*g).max(1) as usize);
                for chunk in v.chunks(group) {
                    // With group_size N, the indices count the operands of N ops in turn.
                    let mut slots = Vec::new();
                    for &i in chunk {
                        slots.extend((0..self.payload[i].operands()).map(|k| (i, k)));
                    }
                    let chosen: Vec<(usize, usize)> = if listed.is_empty() {
                        slots
                    } else {
                        listed
                            .iter()
                            .filter_map(|&k| usize::try_from(k).ok().and_then(|k| slots.get(k)))
                            .copied()
                            .collect()
                    };
                    for (i, k) in chosen {
                        self.promote(i, k, space, name);
                    }
                }
                return Ok(vec![target; n]);
            }
            "transform.structured.promote_tensor" => {
                // `promote_tensor to N %value`: the value gets a copy in memory space N.
                let space = op
                    .tokens
                    .windows(2)
                    .find(|w| w[0].text == "to" && w[1].kind == Kind::Number)
                    .and_then(|w| w[1].text.parse().ok())
                    .unwrap_or(0);
                match &target {
                    Handle::Values(v) => {
                        for &(i, k) in v {
                            self.promote(i, k, space, name);
                        }
                    }
                    _ => self.precise = false,
                }
                return Ok(opaque(n));
            }
            "transform.get_operand" => {
                let (Handle::Ops(v), Some(k)) = (&target, operand_index(op)) else {
                    return Ok(opaque(n));
                };
                return Ok(vec![Handle::Values(v.iter().map(|&i| (i, k)).collect())]);
            }
            "transform.air.herd_vectorize"
            | "transform.structured.vectorize"
            | "transform.structured.vectorize_children_and_apply_patterns" => {
                // What they vectorize reads and writes memory through vector transfers.
                if let Handle::Ops(v) = &target {
                    for i in self.descendants(v, |_| true) {
                        self.payload[i].vectorized = true;
                    }
                }
                return Ok(vec![target; n]);
            }
            "transform.structured.pack" => {
                let sizes = attr_ints(op, "packed_sizes");
                let packed = match &target {
                    Handle::Ops(v) => v
                        .iter()
                        .map(|&i| self.pack_matmul(i, &sizes))
                        .collect::<Option<Vec<usize>>>(),
                    _ => None,
                };
                let Some(packed) = packed else {
                    self.precise = false;
                    return Ok(opaque(n));
                };
                return Ok(vec![Handle::Ops(packed); n]);
            }
            "transform.structured.pack_transpose" => {
                let (Handle::Ops(packs), Handle::Ops(compute)) = (&target, arg(1)) else {
                    self.precise = false;
                    return Ok(opaque(n));
                };
                let ([pack], [compute]) = (packs.as_slice(), compute.as_slice()) else {
                    self.precise = false;
                    return Ok(opaque(n));
                };
                let outer = attr_ints(op, "outer_perm");
                let (pack_op, unpack) = match self.payload[*pack].name.as_str() {
                    "linalg.pack" => (*pack, None),
                    "linalg.unpack" => match self.payload[*compute].outs.first() {
                        Some(Src::Op(c)) if self.payload[*c].name == "linalg.pack" => {
                            (*c, Some(*pack))
                        }
                        _ => {
                            self.precise = false;
                            return Ok(opaque(n));
                        }
                    },
                    _ => {
                        self.precise = false;
                        return Ok(opaque(n));
                    }
                };
                if !outer.is_empty() {
                    self.permute_outer(pack_op, &outer);
                    // The fill the pack folded into walks the packed result's loops.
                    let fills: Vec<usize> =
                        self.descendants(&[0], |p| p.outs.first() == Some(&Src::Op(pack_op)));
                    for f in fills {
                        if self.payload[f].name == "linalg.fill" {
                            self.permute_outer(f, &outer);
                        }
                    }
                }
                let mut out = vec![
                    Handle::Ops(vec![*compute]),
                    Handle::Ops(vec![pack_op]),
                    unpack.map_or(Handle::Opaque, |u| Handle::Ops(vec![u])),
                ];
                out.truncate(n);
                return Ok(out);
            }
            "transform.get_consumers_of_result" => {
                if let Handle::Ops(v) = &target {
                    // Linalg consumers only: the model had no stores when the matmul schedules'
                    // handles were written against it (a store reads no packed result).
                    let consumers = self.descendants(&[0], |p| {
                        p.name != payload::STORE && v.iter().any(|&i| p.ins.contains(&Src::Op(i)))
                    });
                    if !consumers.is_empty() {
                        return Ok(vec![Handle::Ops(consumers); n]);
                    }
                }
                return Ok(opaque(n));
            }
            "transform.structured.generalize" => {
                if let Handle::Ops(v) = &target {
                    for &i in v {
                        let p = &mut self.payload[i];
                        if p.name == "linalg.fill" {
                            // The filled value is a scalar operand, not memory.
                            p.ins.clear();
                        }
                        p.name = "linalg.generic".into();
                    }
                    return Ok(vec![target; n]);
                }
                self.precise = false;
                return Ok(opaque(n));
            }
            "transform.structured.interchange" => {
                let order = attr_ints(op, "iterator_interchange");
                if let Handle::Ops(v) = &target {
                    for &i in v {
                        self.interchange(i, &order);
                    }
                    return Ok(vec![target; n]);
                }
                self.precise = false;
                return Ok(opaque(n));
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
                    // The pad structured.pad put in front of the operand, else its producer.
                    let found: Vec<usize> = v.iter().filter_map(|&o| self.producer(o, k)).collect();
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
                        // An op that writes into another op's allocated result works in place.
                        if self.payload[i]
                            .outs
                            .first()
                            .is_some_and(|o| self.allocated(o))
                        {
                            continue;
                        }
                        self.l3.push(format!(
                            "the result of a {} (one_shot_bufferize at line {})",
                            self.payload[i].name, op.loc.line
                        ));
                        // A tiled op's destination is allocated outside its loops.
                        let p = &mut self.payload[i];
                        p.buffer = Some(0);
                        p.alloc_at = p.home.or(p.parent);
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
            "transform.air.transpose_reduce" => {
                let Handle::Ops(v) = &target else {
                    self.precise = false;
                    return Ok(opaque(n));
                };
                for &i in v {
                    if self.payload[i].name != "linalg.reduce" {
                        return Err(super::Error::at(
                            op.loc,
                            "target must be a linalg.reduce operation".to_owned(),
                        ));
                    }
                    self.reduction_innermost(i);
                }
                return Ok(vec![target; n]);
            }
            "transform.air.par_to_herd" => {
                if let Handle::Ops(v) = &target {
                    for &i in v {
                        if self.payload[i].name == "scf.parallel" {
                            self.payload[i].name = "air.herd".into();
                            self.herds.push(i);
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

/// The integers of `key = [a, b]` / `key = a` / `"key"=[…]` in the op's attributes (empty when
/// absent or not all literal).
fn attr_ints(op: &Op, key: &str) -> Vec<i64> {
    let toks = &op.tokens;
    let Some(at) = toks
        .iter()
        .position(|t| t.text.trim_matches('"') == key && t.kind != Kind::Value)
    else {
        return Vec::new();
    };
    let mut rest = toks[at + 1..].iter().skip_while(|t| t.text == "=");
    list_ints(&mut rest)
}

/// Reads `[1, 2]` or `1` from the tokens.
fn list_ints<'t>(toks: &mut impl Iterator<Item = &'t Token>) -> Vec<i64> {
    let mut out = Vec::new();
    match toks.next() {
        Some(t) if t.text == "[" => {
            for t in toks.by_ref() {
                match t.text.as_str() {
                    "]" => return out,
                    "," => {}
                    _ => match t.text.parse() {
                        Ok(v) => out.push(v),
                        Err(_) => return Vec::new(),
                    },
                }
            }
            Vec::new()
        }
        Some(t) => t.text.parse().map(|v| vec![v]).unwrap_or_default(),
        None => out,
    }
}

/// The memory space a promotion copies into: `air.linalg_promote`'s `memory_space` is
/// `"L1"`/`"L2"`/`"L3"`, default L1 (AIRTransformOps.td, LinalgPromoteOp); upstream MLIR's
/// `structured.promote` takes an integer `memory_space`, default the default space (0).
/// None when the model cannot read it.
fn promote_space(op: &Op) -> Option<i64> {
    let Some(at) = op
        .tokens
        .iter()
        .position(|t| t.text.trim_matches('"') == "memory_space")
    else {
        return Some(if op.name == "transform.air.linalg_promote" {
            L1
        } else {
            0
        });
    };
    let value = op.tokens[at + 1..].iter().find(|t| t.text != "=")?;
    match value.kind {
        Kind::Str => match value.text.trim_matches('"') {
            "L1" => Some(2),
            "L2" => Some(1),
            "L3" => Some(0),
            _ => None,
        },
        Kind::Number => value.text.parse().ok(),
        _ => None,
    }
}

/// The tiles of `tile_using_forall`/`tile_using_for` over an op with loop bounds `domain`:
/// `num_threads [n]` makes n tiles of ceil(d/n), `tile_sizes [t]` ceil(d/t) tiles of t; 0 leaves
/// a dimension whole. None when the sizes are not literal or the bounds unknown.
fn loop_tiling(op: &Op, domain: &[u64]) -> Option<LoopTiling> {
    let by_threads = op.has("num_threads");
    let key = if by_threads {
        "num_threads"
    } else {
        "tile_sizes"
    };
    let list = attr_ints(op, key);
    if list.is_empty() || list.iter().any(|v| *v < 0) {
        return None;
    }
    let mut tiles = Vec::new();
    let mut counts = Vec::new();
    for (j, &v) in list.iter().enumerate() {
        let v = v as u64;
        let dim = domain.get(j).copied();
        if v == 0 {
            tiles.push(0);
            counts.push(0);
        } else if by_threads {
            counts.push(v);
            tiles.push(dim.map_or(0, |d| d.div_ceil(v)));
        } else {
            tiles.push(v);
            counts.push(dim?.div_ceil(v));
        }
    }
    Some(LoopTiling {
        domain: domain.to_vec(),
        tiles,
        counts,
        elements: None,
    })
}

/// The element space's bounds and tile extents of `tiles` (per loop) over an op whose loops
/// map to elements as `e` says. None when a loop inside a pack is split, or the split loops
/// walk the element dimensions out of order (the herd's columns would then be a later
/// dimension than its rows, which the device's `tiling` cannot say).
fn element_tiles(e: &Elements, tiles: &[u64]) -> Option<(Vec<u64>, Vec<u64>)> {
    let mut out = vec![0; e.domain.len()];
    let mut last: Option<usize> = None;
    for (j, &t) in tiles.iter().enumerate() {
        if t == 0 {
            continue;
        }
        let &(dim, factor) = e.dims.get(j)?;
        if last.is_some_and(|l| l >= dim) {
            return None;
        }
        last = Some(dim);
        out[dim] = t * factor;
    }
    Some((e.domain.clone(), out))
}
