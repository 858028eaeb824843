//! Static checking: every value gets a type (element and shape) and every op's operands must
//! fit it, so a malformed program is refused when it is decoded, not half-way through a
//! dispatch.

use crate::ops::{CastOp, Op, Shape, V};
use crate::{DType, Program, ProgramError};

/// What a value holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    Data(DType),
    /// Pointers into buffer argument `arg` whose elements are `DType`.
    Ptr {
        arg: u8,
        elem: DType,
    },
}

/// The type of a value: its elements and its block shape (`[]`: a scalar).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Type {
    pub elem: Elem,
    pub shape: Shape,
}

impl Type {
    fn data(&self) -> Option<DType> {
        match self.elem {
            Elem::Data(t) => Some(t),
            Elem::Ptr { .. } => None,
        }
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().map(|d| *d as usize).product()
    }
}

/// One launch's types, indexed by value.
pub type Types = Vec<Type>;

/// The largest block a program may hold (elements), so a corrupt shape cannot exhaust memory.
pub const MAX_BLOCK: usize = 1 << 24;

/// Checks the whole program; returns the types of each launch's values.
pub fn check(p: &Program) -> Result<Vec<Types>, ProgramError> {
    let mut launches = vec![Vec::new()];
    let mut grid_seen = false;
    let mut actual_seen = false;
    let mut ops_in_launch = 0;
    for (i, op) in p.ops.iter().enumerate() {
        let fail = |why: String| ProgramError::Format(format!("op {i} ({op:?}): {why}"));
        match op {
            Op::Launch => {
                launches.push(Vec::new());
                grid_seen = false;
                actual_seen = false;
                ops_in_launch = 0;
                continue;
            }
            Op::Actual(sizes) => {
                if !grid_seen || actual_seen || ops_in_launch > 0 {
                    return Err(fail("actual sizes follow the launch's grid, once".into()));
                }
                if sizes.contains(&0) {
                    return Err(fail("actual sizes must be positive".into()));
                }
                actual_seen = true;
                continue;
            }
            Op::Tiling {
                herd,
                domain,
                tiles,
            } => {
                // One per herd of the launch (a matmul's prologue, compute and epilogue).
                if ops_in_launch > 0 {
                    return Err(fail(
                        "a tiling comes before the launch's ops (after its grid)".into(),
                    ));
                }
                if herd.contains(&0) || herd.iter().any(|h| *h > 1 << 10) {
                    return Err(fail("herd sizes must be positive (at most 1024)".into()));
                }
                if tiles.len() != domain.len() {
                    return Err(fail("one tile extent per loop bound".into()));
                }
                continue;
            }
            Op::Grid(g) => {
                if grid_seen || ops_in_launch > 0 {
                    return Err(fail("a grid comes first in its launch, once".into()));
                }
                if g.contains(&0) || g.iter().map(|d| *d as u64).product::<u64>() > 1 << 20 {
                    return Err(fail(
                        "grid sizes must be positive (at most 2^20 instances)".into(),
                    ));
                }
                grid_seen = true;
                continue;
            }
            _ => {}
        }
        ops_in_launch += 1;
        let types = launches.last_mut().expect("one launch at least");
        let t = infer(p, types, op).map_err(fail)?;
        if let Some(t) = t {
            if t.numel() > MAX_BLOCK {
                return Err(fail(format!(
                    "a block of {} elements is too large",
                    t.numel()
                )));
            }
            types.push(t);
        }
    }
    Ok(launches)
}

fn scalar(elem: Elem) -> Type {
    Type {
        elem,
        shape: vec![],
    }
}

fn infer(p: &Program, types: &Types, op: &Op) -> Result<Option<Type>, String> {
    let ty = |v: V| -> Result<&Type, String> {
        types
            .get(v as usize)
            .ok_or_else(|| format!("%{v} is not defined before this op"))
    };
    let data = |v: V| -> Result<(DType, &Type), String> {
        let t = ty(v)?;
        t.data()
            .map(|d| (d, t))
            .ok_or_else(|| format!("%{v} is a pointer where data is expected"))
    };
    let same_shape = |a: &Type, b: &Type| {
        if a.shape == b.shape {
            Ok(())
        } else {
            Err(format!("shapes {:?} and {:?} differ", a.shape, b.shape))
        }
    };
    let numel = |s: &[u32]| s.iter().map(|d| *d as usize).product::<usize>();
    Ok(Some(match op {
        Op::Launch | Op::Grid(_) | Op::Actual(_) | Op::Tiling { .. } => return Ok(None),
        Op::Ptr { arg, elem } => {
            if *arg >= p.num_args {
                return Err(format!(
                    "argument {arg} out of range (the kernel has {})",
                    p.num_args
                ));
            }
            scalar(Elem::Ptr {
                arg: *arg,
                elem: *elem,
            })
        }
        Op::ProgramId(a) | Op::NumPrograms(a) => {
            if *a > 2 {
                return Err(format!("axis {a}"));
            }
            scalar(Elem::Data(DType::I32))
        }
        Op::Const { dtype, shape, .. } => Type {
            elem: Elem::Data(*dtype),
            shape: shape.clone(),
        },
        Op::Range { start, end } => {
            if end <= start {
                return Err("an empty range".into());
            }
            Type {
                elem: Elem::Data(DType::I32),
                shape: vec![(*end as i64 - *start as i64) as u32],
            }
        }
        Op::Splat { a, shape } => {
            let t = ty(*a)?;
            if !t.shape.is_empty() {
                return Err("splat takes a scalar".into());
            }
            Type {
                elem: t.elem,
                shape: shape.clone(),
            }
        }
        Op::Broadcast { a, shape } => {
            let t = ty(*a)?;
            if t.shape.len() != shape.len()
                || t.shape.iter().zip(shape).any(|(f, to)| f != to && *f != 1)
            {
                return Err(format!("cannot broadcast {:?} to {shape:?}", t.shape));
            }
            Type {
                elem: t.elem,
                shape: shape.clone(),
            }
        }
        Op::ExpandDims { a, axis } => {
            let t = ty(*a)?;
            if *axis as usize > t.shape.len() {
                return Err(format!("axis {axis} beyond rank {}", t.shape.len()));
            }
            let mut shape = t.shape.clone();
            shape.insert(*axis as usize, 1);
            Type {
                elem: t.elem,
                shape,
            }
        }
        Op::Reshape { a, shape } => {
            let t = ty(*a)?;
            if numel(shape) != t.numel() {
                return Err(format!("cannot reshape {:?} to {shape:?}", t.shape));
            }
            Type {
                elem: t.elem,
                shape: shape.clone(),
            }
        }
        Op::Trans { a, perm } => {
            let t = ty(*a)?;
            let mut seen = vec![false; t.shape.len()];
            for d in perm {
                match seen.get_mut(*d as usize) {
                    Some(s) if !*s => *s = true,
                    _ => return Err(format!("{perm:?} is not a permutation of {:?}", t.shape)),
                }
            }
            if perm.len() != t.shape.len() {
                return Err(format!("{perm:?} is not a permutation of {:?}", t.shape));
            }
            Type {
                elem: t.elem,
                shape: perm.iter().map(|d| t.shape[*d as usize]).collect(),
            }
        }
        Op::AddPtr { ptr, offset } => {
            let (p, (o, ot)) = (ty(*ptr)?, data(*offset)?);
            if !matches!(p.elem, Elem::Ptr { .. }) {
                return Err(format!("%{ptr} is not a pointer"));
            }
            if o.is_float() {
                return Err("pointer offsets are integers".into());
            }
            same_shape(p, ot)?;
            p.clone()
        }
        Op::Load { ptr, mask, other } => {
            let p = ty(*ptr)?;
            let Elem::Ptr { elem, .. } = p.elem else {
                return Err(format!("%{ptr} is not a pointer"));
            };
            if let Some(m) = mask {
                let (mt, m) = data(*m)?;
                if mt != DType::I1 {
                    return Err("a mask is i1".into());
                }
                same_shape(p, m)?;
            }
            if let Some(o) = other {
                let (ot, o) = data(*o)?;
                if ot != elem {
                    return Err(format!(
                        "`other` is {}, the pointee {}",
                        ot.name(),
                        elem.name()
                    ));
                }
                same_shape(p, o)?;
            }
            Type {
                elem: Elem::Data(elem),
                shape: p.shape.clone(),
            }
        }
        Op::Store { ptr, value, mask } => {
            let p = ty(*ptr)?;
            let Elem::Ptr { elem, .. } = p.elem else {
                return Err(format!("%{ptr} is not a pointer"));
            };
            let (vt, v) = data(*value)?;
            if vt != elem {
                return Err(format!(
                    "stores {} through a {} pointer",
                    vt.name(),
                    elem.name()
                ));
            }
            same_shape(p, v)?;
            if let Some(m) = mask {
                let (mt, m) = data(*m)?;
                if mt != DType::I1 {
                    return Err("a mask is i1".into());
                }
                same_shape(p, m)?;
            }
            return Ok(None);
        }
        Op::Bin { op, a, b } => {
            let ((at, a), (bt, b)) = (data(*a)?, data(*b)?);
            if at != bt {
                return Err(format!(
                    "operand types {} and {} differ",
                    at.name(),
                    bt.name()
                ));
            }
            same_shape(a, b)?;
            if op.is_float() != at.is_float() {
                return Err(format!("{} does not take {}", op.name(), at.name()));
            }
            a.clone()
        }
        Op::CmpF { a, b, .. } | Op::CmpI { a, b, .. } => {
            let ((at, a), (bt, b)) = (data(*a)?, data(*b)?);
            if at != bt {
                return Err(format!(
                    "operand types {} and {} differ",
                    at.name(),
                    bt.name()
                ));
            }
            same_shape(a, b)?;
            if matches!(op, Op::CmpF { .. }) != at.is_float() {
                return Err(format!("this comparison does not take {}", at.name()));
            }
            Type {
                elem: Elem::Data(DType::I1),
                shape: a.shape.clone(),
            }
        }
        Op::Select { cond, a, b } => {
            let ((ct, c), (at, a), (bt, b)) = (data(*cond)?, data(*a)?, data(*b)?);
            if ct != DType::I1 || at != bt {
                return Err("select takes an i1 condition and two values of one type".into());
            }
            same_shape(a, b)?;
            if !c.shape.is_empty() {
                same_shape(c, a)?;
            }
            a.clone()
        }
        Op::Un { op, a } => {
            let (at, a) = data(*a)?;
            if op.is_float() != at.is_float() {
                return Err(format!("{} does not take {}", op.name(), at.name()));
            }
            a.clone()
        }
        Op::Fma { a, b, c } => {
            let ((at, a), (bt, b), (ct, c)) = (data(*a)?, data(*b)?, data(*c)?);
            if at != bt || bt != ct || !at.is_float() {
                return Err("fma takes three floats of one type".into());
            }
            same_shape(a, b)?;
            same_shape(b, c)?;
            a.clone()
        }
        Op::Cast { op, a, to } => {
            let (from, a) = data(*a)?;
            let ok = match op {
                CastOp::ExtF | CastOp::TruncF => from.is_float() && to.is_float(),
                CastOp::SIToFP | CastOp::UIToFP => !from.is_float() && to.is_float(),
                CastOp::FPToSI | CastOp::FPToUI => from.is_float() && !to.is_float(),
                CastOp::ExtSI | CastOp::ExtUI | CastOp::TruncI => {
                    !from.is_float() && !to.is_float()
                }
                CastOp::Bitcast => from.size() == to.size() && from != DType::I1,
            };
            if !ok {
                return Err(format!(
                    "{} from {} to {}",
                    op.name(),
                    from.name(),
                    to.name()
                ));
            }
            Type {
                elem: Elem::Data(*to),
                shape: a.shape.clone(),
            }
        }
        Op::Dot { a, b, acc } => {
            let ((at, a), (bt, b), (_, c)) = (data(*a)?, data(*b)?, data(*acc)?);
            let ok = at == bt
                && a.shape.len() == 2
                && b.shape.len() == 2
                && c.shape.len() == 2
                && a.shape[1] == b.shape[0]
                && c.shape[0] == a.shape[0]
                && c.shape[1] == b.shape[1];
            if !ok {
                return Err(format!(
                    "dot of {:?}×{:?} into {:?} (or mixed input types)",
                    a.shape, b.shape, c.shape
                ));
            }
            c.clone()
        }
        Op::Reduce { op, a, axis } => {
            let (at, a) = data(*a)?;
            if op.is_float() != at.is_float() {
                return Err(format!("{} does not combine {}", op.name(), at.name()));
            }
            if *axis as usize >= a.shape.len() {
                return Err(format!("axis {axis} of a rank-{} block", a.shape.len()));
            }
            let mut shape = a.shape.clone();
            shape.remove(*axis as usize);
            Type {
                elem: a.elem,
                shape,
            }
        }
    }))
}
