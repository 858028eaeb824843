//! The interpreter the software devices run: each launch once per program instance of its
//! grid, over the dispatch's buffers, in the precision the device computes (see
//! [`DType::round`] and the dot and reduce rules below).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::check::{Elem, Type, Types};
use crate::dot;
use crate::ops::{BinOp, CastOp, FPred, IPred, Op, UnOp, V};
use crate::padding::Padding;
use crate::{DType, Program, ProgramError};

/// A value at run time; its element type and shape are in the launch's [`Types`].
enum Val {
    Data(Vec<f64>),
    /// Element offsets into the pointer's buffer.
    Ptr(Vec<i64>),
}

impl Val {
    fn data(&self) -> &[f64] {
        match self {
            Val::Data(d) => d,
            Val::Ptr(_) => &[],
        }
    }

    fn ptr(&self) -> &[i64] {
        match self {
            Val::Ptr(p) => p,
            Val::Data(_) => &[],
        }
    }
}

pub fn execute(p: &Program, types: &[Types], args: &mut [&mut [u8]]) -> Result<(), ProgramError> {
    if args.len() != p.num_args as usize {
        return Err(ProgramError::Execute(format!(
            "the kernel takes {} buffer arguments, the dispatch passed {}",
            p.num_args,
            args.len()
        )));
    }
    for (launch, (ops, types)) in p
        .ops
        .split(|op| matches!(op, Op::Launch))
        .zip(types)
        .enumerate()
    {
        let grid = ops
            .iter()
            .find_map(|op| match op {
                Op::Grid(g) => Some(*g),
                _ => None,
            })
            .unwrap_or([1, 1, 1]);
        let padding = Padding::of(ops, types);
        let tiles: Vec<Tiles> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Tiling {
                    herd,
                    domain,
                    tiles,
                } => Some(Tiles {
                    herd: *herd,
                    domain,
                    tiles,
                }),
                _ => None,
            })
            .collect();
        let stored = StoredElements::new(&tiles);
        let dying = last_reads(ops);
        for z in 0..grid[2] {
            for y in 0..grid[1] {
                for x in 0..grid[0] {
                    let mut instance = Instance {
                        pid: [x, y, z],
                        grid,
                        bf16_emulation: p.bf16_emulation,
                        types,
                        padding: padding.as_ref(),
                        at: 0,
                        stored: &stored,
                        dying: &dying,
                    };
                    instance.run(ops, args).map_err(|why| {
                        ProgramError::Execute(format!(
                            "{}program ({x}, {y}, {z}): {why}",
                            if p.launches() > 1 {
                                format!("launch {launch}, ")
                            } else {
                                String::new()
                            }
                        ))
                    })?;
                }
            }
        }
    }
    Ok(())
}

struct Instance<'a> {
    pid: [u32; 3],
    grid: [u32; 3],
    bf16_emulation: bool,
    types: &'a Types,
    /// The launch's cut boundary tiles, when it has actual sizes.
    padding: Option<&'a Padding>,
    /// The index of the op being run, within the launch.
    at: usize,
    /// What the launch's herds (one `tiling` each) store.
    stored: &'a StoredElements<'a>,
    /// Per op of the launch, the values it is the last reader of.
    dying: &'a [Vec<V>],
}

/// Per op of a launch, the values no later op reads.
fn last_reads(ops: &[Op]) -> Vec<Vec<V>> {
    let mut last = HashMap::new();
    for (at, op) in ops.iter().enumerate() {
        for v in op.operands() {
            last.insert(v, at);
        }
    }
    let mut dying = vec![Vec::new(); ops.len()];
    for (v, at) in last {
        dying[at].push(v);
    }
    dying
}

/// The tiles a launch's herd computes (its `tiling` op): the herd's cores each compute one
/// tile of the block and write it back, so an element outside every core's tile is never
/// stored.
struct Tiles<'a> {
    herd: [u32; 2],
    domain: &'a [u32],
    tiles: &'a [u32],
}

impl Tiles<'_> {
    /// The core (per split dimension, its tile index) that computes element `i` (row-major)
    /// of a stored block of `numel` elements: `Some(None)` when no core of the herd does.
    /// None when the block is not the tiled op's loop space (other sizes): the tiling does
    /// not describe it.
    fn core(&self, i: usize, numel: usize) -> Option<Option<Vec<usize>>> {
        // The block is the loop space without its trailing unsplit loops (a matmul's K).
        let rank = (1..=self.domain.len()).find(|&r| {
            self.domain[..r]
                .iter()
                .map(|d| *d as usize)
                .product::<usize>()
                == numel
                && self.tiles[r..].iter().all(|t| *t == 0)
        })?;
        let domain = &self.domain[..rank];
        let mut core = Vec::new();
        for ((bound, tile), stride) in domain.iter().zip(self.tiles).zip(strides(domain)) {
            if *tile == 0 {
                continue;
            }
            let index = (i / stride) % *bound as usize / *tile as usize;
            // Split dimensions map to the herd's columns, then rows.
            if let Some(cores) = self.herd.get(core.len())
                && index >= *cores as usize
            {
                return Some(None);
            }
            core.push(index);
        }
        // A herd of one row is row 0 of a two-dimensional one.
        core.resize(core.len().max(2), 0);
        Some(Some(core))
    }
}

/// Whether element `i` of a stored block of `numel` elements lands: a core of every herd that
/// describes the block computes it, and the same core in each (the herds of one launch, a
/// matmul's prologue, compute and epilogue, pass the element through that core's own L1
/// memory, so a herd that gives it to another core reads or writes what that core never had).
fn computed(herds: &[Tiles<'_>], i: usize, numel: usize) -> bool {
    let mut owner: Option<Vec<usize>> = None;
    for h in herds {
        match h.core(i, numel) {
            None => {}
            Some(None) => return false,
            Some(Some(core)) => match &owner {
                Some(o) if *o != core => return false,
                Some(_) => {}
                None => owner = Some(core),
            },
        }
    }
    true
}

/// Which elements of a stored block land ([`computed`] for each), per block size, worked
/// out once per launch rather than once per element of every program instance's store.
struct StoredElements<'a> {
    herds: &'a [Tiles<'a>],
    by_numel: RefCell<HashMap<usize, Rc<[bool]>>>,
}

impl<'a> StoredElements<'a> {
    fn new(herds: &'a [Tiles<'a>]) -> Self {
        StoredElements {
            herds,
            by_numel: RefCell::default(),
        }
    }

    /// Element `i` of a block of `numel` lands when `of(numel)[i]`.
    fn of(&self, numel: usize) -> Rc<[bool]> {
        Rc::clone(
            self.by_numel
                .borrow_mut()
                .entry(numel)
                .or_insert_with(|| (0..numel).map(|i| computed(self.herds, i, numel)).collect()),
        )
    }
}

fn strides(shape: &[u32]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1] as usize;
    }
    s
}

/// Maps each element of a block of `shape` to an index into a block laid out with
/// `source_strides` (one per dimension of `shape`). Built a dimension at a time (each index
/// of the block so far followed by its steps along the next dimension), which gives
/// row-major order without a division per element.
fn gather_indices(shape: &[u32], source_strides: &[usize]) -> Vec<usize> {
    let mut indices = vec![0usize];
    for (dim, stride) in shape.iter().zip(source_strides) {
        let dim = *dim as usize;
        let mut next = Vec::with_capacity(indices.len() * dim);
        for base in &indices {
            next.extend((0..dim).map(|j| base + j * stride));
        }
        indices = next;
    }
    indices
}

/// The block of `shape` whose element at each index is `x`'s at that index's offset under
/// `source_strides` ([`gather_indices`]): the last dimension a row at a time (a repeated
/// element for a broadcast one, a copied run for a contiguous one).
fn gather<T: Copy>(x: &[T], shape: &[u32], source_strides: &[usize]) -> Vec<T> {
    let Some((last, outer)) = shape.split_last() else {
        return vec![x[0]];
    };
    let (len, stride) = (*last as usize, source_strides[outer.len()]);
    let rows = gather_indices(outer, source_strides);
    let mut out = Vec::with_capacity(rows.len() * len);
    for base in rows {
        match stride {
            0 => out.extend(std::iter::repeat_n(x[base], len)),
            1 => out.extend_from_slice(&x[base..base + len]),
            _ => out.extend((0..len).map(|j| x[base + j * stride])),
        }
    }
    out
}

impl Instance<'_> {
    fn ty(&self, v: V) -> &Type {
        &self.types[v as usize]
    }

    fn dtype(&self, v: V) -> DType {
        match self.ty(v).elem {
            Elem::Data(t) | Elem::Ptr { elem: t, .. } => t,
        }
    }

    fn run(&mut self, ops: &[Op], args: &mut [&mut [u8]]) -> Result<(), String> {
        let mut vals: Vec<Val> = Vec::with_capacity(self.types.len());
        for (at, op) in ops.iter().enumerate() {
            if matches!(op, Op::Grid(_) | Op::Actual(_) | Op::Tiling { .. }) {
                continue;
            }
            self.at = at;
            let out = self.step(op, &vals, args)?;
            for v in &self.dying[at] {
                // Freed as soon as no later op reads it, so that the blocks of a large
                // program instance reuse each other's memory instead of all living to its end.
                vals[*v as usize] = Val::Data(Vec::new());
            }
            if let Some(v) = out {
                vals.push(v);
            }
        }
        Ok(())
    }

    /// The type the op being computed gets (the next value's).
    fn result_type(&self, defined: usize) -> &Type {
        &self.types[defined]
    }

    fn step(&self, op: &Op, vals: &[Val], args: &mut [&mut [u8]]) -> Result<Option<Val>, String> {
        let d = |v: &V| vals[*v as usize].data();
        let out_ty = || self.result_type(vals.len());
        let out_dtype = || match out_ty().elem {
            Elem::Data(t) | Elem::Ptr { elem: t, .. } => t,
        };
        Ok(Some(match op {
            Op::Launch | Op::Grid(_) | Op::Actual(_) | Op::Tiling { .. } => return Ok(None),
            Op::Ptr { .. } => Val::Ptr(vec![0]),
            Op::ProgramId(a) => Val::Data(vec![f64::from(self.pid[*a as usize])]),
            Op::NumPrograms(a) => Val::Data(vec![f64::from(self.grid[*a as usize])]),
            Op::Const { dtype, value, .. } => {
                Val::Data(vec![dtype.round(*value); out_ty().numel()])
            }
            Op::Range { start, end } => Val::Data((*start..*end).map(f64::from).collect()),
            Op::Splat { a, .. } => {
                let n = out_ty().numel();
                match &vals[*a as usize] {
                    Val::Data(x) => Val::Data(vec![x[0]; n]),
                    Val::Ptr(x) => Val::Ptr(vec![x[0]; n]),
                }
            }
            Op::Broadcast { a, shape } => {
                let from = &self.ty(*a).shape;
                let src = strides(from);
                let s: Vec<usize> = from
                    .iter()
                    .zip(&src)
                    .map(|(dim, st)| if *dim == 1 { 0 } else { *st })
                    .collect();
                self.reindex(&vals[*a as usize], shape, &s)
            }
            Op::ExpandDims { a, .. } | Op::Reshape { a, .. } => match &vals[*a as usize] {
                Val::Data(x) => Val::Data(x.clone()),
                Val::Ptr(x) => Val::Ptr(x.clone()),
            },
            Op::Trans { a, perm } => {
                let from = &self.ty(*a).shape;
                let src = strides(from);
                let shape: Vec<u32> = perm.iter().map(|p| from[*p as usize]).collect();
                let s: Vec<usize> = perm.iter().map(|p| src[*p as usize]).collect();
                self.reindex(&vals[*a as usize], &shape, &s)
            }
            Op::AddPtr { ptr, offset } => Val::Ptr(
                vals[*ptr as usize]
                    .ptr()
                    .iter()
                    .zip(d(offset))
                    .map(|(p, o)| p + *o as i64)
                    .collect(),
            ),
            Op::Load { ptr, mask, other } => {
                let Elem::Ptr { arg, elem } = self.ty(*ptr).elem else {
                    return Err("load through a non-pointer".into());
                };
                let buf = &args[arg as usize];
                let len = buf.len() / elem.size();
                let offsets = vals[*ptr as usize].ptr();
                let mut out = Vec::with_capacity(offsets.len());
                for (i, off) in offsets.iter().enumerate() {
                    if self.cut(*ptr, i) {
                        // Beyond the actual sizes: never read, the L2 tile holds zeros.
                        out.push(0.0);
                        continue;
                    }
                    if mask.is_some_and(|m| d(&m)[i] == 0.0) {
                        // Masked off: `other`, else what an uninitialised buffer gives back —
                        // NaN makes a kernel that uses such lanes visibly wrong.
                        out.push(match other {
                            Some(o) => d(o)[i],
                            None if elem.is_float() => f64::NAN,
                            None => 0.0,
                        });
                        continue;
                    }
                    let at = usize::try_from(*off)
                        .ok()
                        .filter(|o| *o < len)
                        .ok_or_else(|| {
                            format!(
                                "loads element {off} of argument {arg}, which holds {len} {} \
                             elements (out of bounds; mask the load)",
                                elem.name()
                            )
                        })?;
                    out.push(elem.read(&buf[at * elem.size()..]));
                }
                Val::Data(out)
            }
            Op::Store { ptr, value, mask } => {
                let Elem::Ptr { arg, elem } = self.ty(*ptr).elem else {
                    return Err("store through a non-pointer".into());
                };
                let buf = &mut args[arg as usize];
                let len = buf.len() / elem.size();
                let offsets = vals[*ptr as usize].ptr();
                let stored = self.stored.of(offsets.len());
                for (i, (off, v)) in offsets.iter().zip(d(value)).enumerate() {
                    if self.cut(*ptr, i) {
                        continue;
                    }
                    if mask.is_some_and(|m| d(&m)[i] == 0.0) {
                        continue;
                    }
                    let at = usize::try_from(*off)
                        .ok()
                        .filter(|o| *o < len)
                        .ok_or_else(|| {
                            format!(
                                "stores element {off} of argument {arg}, which holds {len} {} \
                             elements (out of bounds; mask the store)",
                                elem.name()
                            )
                        })?;
                    if stored[i] {
                        elem.write(*v, &mut buf[at * elem.size()..]);
                    }
                }
                return Ok(None);
            }
            Op::Bin { op, a, b } => {
                let t = self.dtype(*a);
                let out: Result<Vec<f64>, String> = d(a)
                    .iter()
                    .zip(d(b))
                    .map(|(x, y)| bin(*op, t, *x, *y).map(|r| t.round(r)))
                    .collect();
                Val::Data(out?)
            }
            Op::CmpF { pred, a, b } => Val::Data(
                d(a).iter()
                    .zip(d(b))
                    .map(|(x, y)| f64::from(u8::from(cmpf(*pred, *x, *y))))
                    .collect(),
            ),
            Op::CmpI { pred, a, b } => {
                let t = self.dtype(*a);
                Val::Data(
                    d(a).iter()
                        .zip(d(b))
                        .map(|(x, y)| f64::from(u8::from(cmpi(*pred, t, *x, *y))))
                        .collect(),
                )
            }
            Op::Select { cond, a, b } => {
                let c = d(cond);
                let uniform = c.len() == 1;
                Val::Data(
                    d(a).iter()
                        .zip(d(b))
                        .enumerate()
                        .map(|(i, (x, y))| {
                            if c[if uniform { 0 } else { i }] != 0.0 {
                                *x
                            } else {
                                *y
                            }
                        })
                        .collect(),
                )
            }
            Op::Un { op, a } => {
                let t = self.dtype(*a);
                Val::Data(d(a).iter().map(|x| t.round(un(*op, *x))).collect())
            }
            Op::Fma { a, b, c } => {
                let t = self.dtype(*a);
                Val::Data(
                    d(a).iter()
                        .zip(d(b))
                        .zip(d(c))
                        .map(|((x, y), z)| t.round(x.mul_add(*y, *z)))
                        .collect(),
                )
            }
            Op::Cast { op, a, to } => {
                let from = self.dtype(*a);
                Val::Data(d(a).iter().map(|x| cast(*op, from, *to, *x)).collect())
            }
            Op::Dot { a, b, acc } => {
                let (ashape, bshape) = (&self.ty(*a).shape, &self.ty(*b).shape);
                let operands = dot::Operands {
                    a: d(a),
                    b: d(b),
                    acc: d(acc),
                    m: ashape[0] as usize,
                    k: ashape[1] as usize,
                    n: bshape[1] as usize,
                };
                Val::Data(dot::dot(
                    &operands,
                    self.dtype(*a),
                    out_dtype(),
                    self.bf16_emulation,
                ))
            }
            Op::Reduce { op, a, axis } => {
                let t = self.dtype(*a);
                let shape = &self.ty(*a).shape;
                let ax = *axis as usize;
                let outer: usize = shape[..ax].iter().map(|x| *x as usize).product();
                let n = shape[ax] as usize;
                let inner: usize = shape[ax + 1..].iter().map(|x| *x as usize).product();
                let x = d(a);
                let mut out = Vec::with_capacity(outer * inner);
                for o in 0..outer {
                    for i in 0..inner {
                        // In order along the axis, rounding each step to the element type.
                        let mut acc = x[o * n * inner + i];
                        for k in 1..n {
                            acc = t.round(bin(*op, t, acc, x[(o * n + k) * inner + i])?);
                        }
                        out.push(acc);
                    }
                }
                Val::Data(out)
            }
        }))
    }

    /// Whether element `i` the current load or store moves through `ptr` lies beyond the
    /// launch's actual sizes (see [`Padding`]).
    fn cut(&self, ptr: V, i: usize) -> bool {
        self.padding
            .is_some_and(|p| p.cut(self.at, self.pid, &self.ty(ptr).shape, i))
    }

    fn reindex(&self, v: &Val, shape: &[u32], source_strides: &[usize]) -> Val {
        match v {
            Val::Data(x) => Val::Data(gather(x, shape, source_strides)),
            Val::Ptr(x) => Val::Ptr(gather(x, shape, source_strides)),
        }
    }
}

fn int(v: f64) -> i64 {
    v as i64
}

/// One binary op on elements of type `t` (before rounding to `t`).
fn bin(op: BinOp, t: DType, x: f64, y: f64) -> Result<f64, String> {
    let (a, b) = (int(x), int(y));
    let (ua, ub) = (t.unsigned(x), t.unsigned(y));
    let zero = || Err(format!("integer division by zero ({})", op.name()));
    Ok(match op {
        BinOp::AddF => x + y,
        BinOp::SubF => x - y,
        BinOp::MulF => x * y,
        BinOp::DivF => x / y,
        BinOp::RemF => x % y,
        BinOp::MaxNumF => x.max(y),
        BinOp::MinNumF => x.min(y),
        BinOp::MaximumF => {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.max(y)
            }
        }
        BinOp::MinimumF => {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.min(y)
            }
        }
        BinOp::AddI => a.wrapping_add(b) as f64,
        BinOp::SubI => a.wrapping_sub(b) as f64,
        BinOp::MulI => a.wrapping_mul(b) as f64,
        BinOp::DivSI => match b {
            0 => return zero(),
            _ => a.wrapping_div(b) as f64,
        },
        BinOp::RemSI => match b {
            0 => return zero(),
            _ => a.wrapping_rem(b) as f64,
        },
        BinOp::DivUI => match ub {
            0 => return zero(),
            _ => (ua / ub) as f64,
        },
        BinOp::RemUI => match ub {
            0 => return zero(),
            _ => (ua % ub) as f64,
        },
        BinOp::CeilDivSI => match b {
            0 => return zero(),
            _ => {
                let q = a.wrapping_div(b);
                (if a % b != 0 && ((a < 0) == (b < 0)) {
                    q + 1
                } else {
                    q
                }) as f64
            }
        },
        BinOp::FloorDivSI => match b {
            0 => return zero(),
            _ => a.div_euclid(b).min(a.wrapping_div(b)) as f64,
        },
        BinOp::MaxSI => a.max(b) as f64,
        BinOp::MinSI => a.min(b) as f64,
        BinOp::MaxUI => ua.max(ub) as f64,
        BinOp::MinUI => ua.min(ub) as f64,
        BinOp::AndI => (a & b) as f64,
        BinOp::OrI => (a | b) as f64,
        BinOp::XOrI => (a ^ b) as f64,
        BinOp::ShLI => {
            if ub >= u64::from(t.bits()) {
                0.0
            } else {
                a.wrapping_shl(ub as u32) as f64
            }
        }
        BinOp::ShRSI => {
            if ub >= u64::from(t.bits()) {
                if a < 0 { -1.0 } else { 0.0 }
            } else {
                (a >> ub) as f64
            }
        }
        BinOp::ShRUI => {
            if ub >= u64::from(t.bits()) {
                0.0
            } else {
                (ua >> ub) as f64
            }
        }
    })
}

fn un(op: UnOp, x: f64) -> f64 {
    match op {
        UnOp::NegF => -x,
        UnOp::Exp => x.exp(),
        UnOp::Exp2 => x.exp2(),
        UnOp::Log => x.ln(),
        UnOp::Log2 => x.log2(),
        UnOp::Sqrt => x.sqrt(),
        UnOp::Rsqrt => 1.0 / x.sqrt(),
        UnOp::Erf => libm::erf(x),
        UnOp::Tanh => x.tanh(),
        UnOp::AbsF | UnOp::AbsI => x.abs(),
        UnOp::Floor => x.floor(),
        UnOp::Ceil => x.ceil(),
        UnOp::Sin => x.sin(),
        UnOp::Cos => x.cos(),
        UnOp::RoundEven => x.round_ties_even(),
        UnOp::Trunc => x.trunc(),
        UnOp::Log1p => x.ln_1p(),
        UnOp::ExpM1 => x.exp_m1(),
    }
}

fn cmpf(p: FPred, x: f64, y: f64) -> bool {
    let unordered = x.is_nan() || y.is_nan();
    let ordered = |r: bool| !unordered && r;
    let or_unordered = |r: bool| unordered || r;
    match p {
        FPred::False => false,
        FPred::True => true,
        FPred::Oeq => ordered(x == y),
        FPred::Ogt => ordered(x > y),
        FPred::Oge => ordered(x >= y),
        FPred::Olt => ordered(x < y),
        FPred::Ole => ordered(x <= y),
        FPred::One => ordered(x != y),
        FPred::Ord => !unordered,
        FPred::Ueq => or_unordered(x == y),
        FPred::Ugt => or_unordered(x > y),
        FPred::Uge => or_unordered(x >= y),
        FPred::Ult => or_unordered(x < y),
        FPred::Ule => or_unordered(x <= y),
        FPred::Une => or_unordered(x != y),
        FPred::Uno => unordered,
    }
}

fn cmpi(p: IPred, t: DType, x: f64, y: f64) -> bool {
    let (a, b) = (int(x), int(y));
    let (ua, ub) = (t.unsigned(x), t.unsigned(y));
    match p {
        IPred::Eq => a == b,
        IPred::Ne => a != b,
        IPred::Slt => a < b,
        IPred::Sle => a <= b,
        IPred::Sgt => a > b,
        IPred::Sge => a >= b,
        IPred::Ult => ua < ub,
        IPred::Ule => ua <= ub,
        IPred::Ugt => ua > ub,
        IPred::Uge => ua >= ub,
    }
}

/// A conversion; float-to-integer conversions truncate toward zero and saturate.
fn cast(op: CastOp, from: DType, to: DType, x: f64) -> f64 {
    let saturate = |lo: f64, hi: f64| {
        if x.is_nan() {
            0.0
        } else {
            x.trunc().clamp(lo, hi)
        }
    };
    match op {
        CastOp::ExtF | CastOp::TruncF | CastOp::SIToFP | CastOp::ExtSI | CastOp::TruncI => {
            to.round(x)
        }
        CastOp::UIToFP | CastOp::ExtUI => to.round(from.unsigned(x) as f64),
        CastOp::FPToSI => {
            let bits = to.bits();
            let hi = 2f64.powi(bits as i32 - 1);
            to.round(saturate(-hi, hi - 1.0))
        }
        CastOp::FPToUI => to.round(saturate(0.0, 2f64.powi(to.bits() as i32) - 1.0)),
        CastOp::Bitcast => {
            let mut bytes = [0u8; 8];
            from.write(x, &mut bytes);
            to.read(&bytes)
        }
    }
}
