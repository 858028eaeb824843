//! The operations of a harness program. They mirror the TTIR operations Triton's frontend
//! prints (names are the `arith`/`math` op names without the dialect), so the stand-in
//! `triton-shared-opt` translates a kernel one op at a time and the device interprets the
//! same thing the kernel says.

use crate::DType;

/// A value: the index of the op that defined it within its launch (ops without a result, like
/// `store`, define none).
pub type V = u32;

/// A block shape; `[]` is a scalar.
pub type Shape = Vec<u32>;

/// Two-operand elementwise operations (also the combiners of `reduce`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    AddF,
    SubF,
    MulF,
    DivF,
    RemF,
    MaxNumF,
    MinNumF,
    MaximumF,
    MinimumF,
    AddI,
    SubI,
    MulI,
    DivSI,
    DivUI,
    RemSI,
    RemUI,
    MaxSI,
    MaxUI,
    MinSI,
    MinUI,
    AndI,
    OrI,
    XOrI,
    ShLI,
    ShRSI,
    ShRUI,
    CeilDivSI,
    FloorDivSI,
}

pub(crate) const BIN_OPS: [(BinOp, &str); 28] = [
    (BinOp::AddF, "addf"),
    (BinOp::SubF, "subf"),
    (BinOp::MulF, "mulf"),
    (BinOp::DivF, "divf"),
    (BinOp::RemF, "remf"),
    (BinOp::MaxNumF, "maxnumf"),
    (BinOp::MinNumF, "minnumf"),
    (BinOp::MaximumF, "maximumf"),
    (BinOp::MinimumF, "minimumf"),
    (BinOp::AddI, "addi"),
    (BinOp::SubI, "subi"),
    (BinOp::MulI, "muli"),
    (BinOp::DivSI, "divsi"),
    (BinOp::DivUI, "divui"),
    (BinOp::RemSI, "remsi"),
    (BinOp::RemUI, "remui"),
    (BinOp::MaxSI, "maxsi"),
    (BinOp::MaxUI, "maxui"),
    (BinOp::MinSI, "minsi"),
    (BinOp::MinUI, "minui"),
    (BinOp::AndI, "andi"),
    (BinOp::OrI, "ori"),
    (BinOp::XOrI, "xori"),
    (BinOp::ShLI, "shli"),
    (BinOp::ShRSI, "shrsi"),
    (BinOp::ShRUI, "shrui"),
    (BinOp::CeilDivSI, "ceildivsi"),
    (BinOp::FloorDivSI, "floordivsi"),
];

impl BinOp {
    pub fn name(self) -> &'static str {
        name_of(&BIN_OPS, self)
    }

    /// The op of an `arith` name (`"addf"`, `"maxsi"`, …).
    pub fn parse(name: &str) -> Option<BinOp> {
        parse_in(&BIN_OPS, name)
    }

    /// Whether it takes floats (else integers).
    pub fn is_float(self) -> bool {
        (self as usize) <= BinOp::MinimumF as usize
    }
}

/// One-operand elementwise operations (`arith.negf` and the `math` dialect).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    NegF,
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Erf,
    Tanh,
    AbsF,
    Floor,
    Ceil,
    Sin,
    Cos,
    RoundEven,
    Trunc,
    Log1p,
    ExpM1,
    AbsI,
}

pub(crate) const UN_OPS: [(UnOp, &str); 19] = [
    (UnOp::NegF, "negf"),
    (UnOp::Exp, "exp"),
    (UnOp::Exp2, "exp2"),
    (UnOp::Log, "log"),
    (UnOp::Log2, "log2"),
    (UnOp::Sqrt, "sqrt"),
    (UnOp::Rsqrt, "rsqrt"),
    (UnOp::Erf, "erf"),
    (UnOp::Tanh, "tanh"),
    (UnOp::AbsF, "absf"),
    (UnOp::Floor, "floor"),
    (UnOp::Ceil, "ceil"),
    (UnOp::Sin, "sin"),
    (UnOp::Cos, "cos"),
    (UnOp::RoundEven, "roundeven"),
    (UnOp::Trunc, "trunc"),
    (UnOp::Log1p, "log1p"),
    (UnOp::ExpM1, "expm1"),
    (UnOp::AbsI, "absi"),
];

impl UnOp {
    pub fn name(self) -> &'static str {
        name_of(&UN_OPS, self)
    }

    pub fn parse(name: &str) -> Option<UnOp> {
        parse_in(&UN_OPS, name)
    }

    pub fn is_float(self) -> bool {
        self != UnOp::AbsI
    }
}

/// `arith.cmpf` predicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FPred {
    False,
    Oeq,
    Ogt,
    Oge,
    Olt,
    Ole,
    One,
    Ord,
    Ueq,
    Ugt,
    Uge,
    Ult,
    Ule,
    Une,
    Uno,
    True,
}

pub(crate) const F_PREDS: [(FPred, &str); 16] = [
    (FPred::False, "false"),
    (FPred::Oeq, "oeq"),
    (FPred::Ogt, "ogt"),
    (FPred::Oge, "oge"),
    (FPred::Olt, "olt"),
    (FPred::Ole, "ole"),
    (FPred::One, "one"),
    (FPred::Ord, "ord"),
    (FPred::Ueq, "ueq"),
    (FPred::Ugt, "ugt"),
    (FPred::Uge, "uge"),
    (FPred::Ult, "ult"),
    (FPred::Ule, "ule"),
    (FPred::Une, "une"),
    (FPred::Uno, "uno"),
    (FPred::True, "true"),
];

impl FPred {
    pub fn name(self) -> &'static str {
        name_of(&F_PREDS, self)
    }

    pub fn parse(name: &str) -> Option<FPred> {
        parse_in(&F_PREDS, name)
    }
}

/// `arith.cmpi` predicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IPred {
    Eq,
    Ne,
    Slt,
    Sle,
    Sgt,
    Sge,
    Ult,
    Ule,
    Ugt,
    Uge,
}

pub(crate) const I_PREDS: [(IPred, &str); 10] = [
    (IPred::Eq, "eq"),
    (IPred::Ne, "ne"),
    (IPred::Slt, "slt"),
    (IPred::Sle, "sle"),
    (IPred::Sgt, "sgt"),
    (IPred::Sge, "sge"),
    (IPred::Ult, "ult"),
    (IPred::Ule, "ule"),
    (IPred::Ugt, "ugt"),
    (IPred::Uge, "uge"),
];

impl IPred {
    pub fn name(self) -> &'static str {
        name_of(&I_PREDS, self)
    }

    pub fn parse(name: &str) -> Option<IPred> {
        parse_in(&I_PREDS, name)
    }
}

/// Type conversions (`arith` casts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CastOp {
    ExtF,
    TruncF,
    SIToFP,
    UIToFP,
    FPToSI,
    FPToUI,
    ExtSI,
    ExtUI,
    TruncI,
    Bitcast,
}

pub(crate) const CASTS: [(CastOp, &str); 10] = [
    (CastOp::ExtF, "extf"),
    (CastOp::TruncF, "truncf"),
    (CastOp::SIToFP, "sitofp"),
    (CastOp::UIToFP, "uitofp"),
    (CastOp::FPToSI, "fptosi"),
    (CastOp::FPToUI, "fptoui"),
    (CastOp::ExtSI, "extsi"),
    (CastOp::ExtUI, "extui"),
    (CastOp::TruncI, "trunci"),
    (CastOp::Bitcast, "bitcast"),
];

impl CastOp {
    pub fn name(self) -> &'static str {
        name_of(&CASTS, self)
    }

    pub fn parse(name: &str) -> Option<CastOp> {
        parse_in(&CASTS, name)
    }
}

/// One operation. Ops with a result define the next value of their launch.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Starts the next launch of a chain (several kernels stitched into one dispatch): the
    /// launches run in order over the same buffers, so what one stores the next one loads.
    Launch,
    /// The launch grid (`air-wrap-func-with-parallel{loop-bounds=X,Y,Z}`); the launch runs
    /// once per program instance. Defaults to `1 1 1`.
    Grid([u32; 3]),
    /// The launch's actual sizes `M N K` (`air-wrap-func-with-parallel{actual-sizes=M,N,K}`):
    /// mlir-air's `air-split-launch-for-padding` (run by aircc) cuts the boundary launch tiles
    /// of a matmul to them — see `exec::Padding`. Follows the grid.
    Actual([u32; 3]),
    /// The herd the transform schedule made and the tiles its cores compute
    /// (`tiling COLS ROWS [domain] [tiles]`): the launch's block, seen as the tiled op's loop
    /// bounds `domain`, is split into tiles of `tiles` (0: a dimension not split); the split
    /// dimensions map in order to the herd's columns and rows, and only the tiles a core of the
    /// herd computes are stored. Follows the grid; at most once per launch.
    Tiling {
        herd: [u32; 2],
        domain: Vec<u32>,
        tiles: Vec<u32>,
    },
    /// `%v = ptr argK T`: the pointer parameter K (counted among pointer parameters).
    Ptr {
        arg: u8,
        elem: DType,
    },
    /// `tt.get_program_id` (axis 0..2), an i32.
    ProgramId(u8),
    /// `tt.get_num_programs` (axis 0..2), an i32.
    NumPrograms(u8),
    /// A splat constant (`arith.constant dense<v>`); scalar when `shape` is empty.
    Const {
        dtype: DType,
        shape: Shape,
        value: f64,
    },
    /// `tt.make_range`: i32 `start..end`.
    Range {
        start: i32,
        end: i32,
    },
    Splat {
        a: V,
        shape: Shape,
    },
    Broadcast {
        a: V,
        shape: Shape,
    },
    ExpandDims {
        a: V,
        axis: u32,
    },
    Reshape {
        a: V,
        shape: Shape,
    },
    Trans {
        a: V,
        perm: Vec<u32>,
    },
    /// Pointer arithmetic in elements of the pointee.
    AddPtr {
        ptr: V,
        offset: V,
    },
    /// `tt.load`: masked-off elements take `other` (NaN for floats, 0 for integers without).
    Load {
        ptr: V,
        mask: Option<V>,
        other: Option<V>,
    },
    /// `tt.store`: masked-off elements are not written.
    Store {
        ptr: V,
        value: V,
        mask: Option<V>,
    },
    Bin {
        op: BinOp,
        a: V,
        b: V,
    },
    CmpF {
        pred: FPred,
        a: V,
        b: V,
    },
    CmpI {
        pred: IPred,
        a: V,
        b: V,
    },
    Select {
        cond: V,
        a: V,
        b: V,
    },
    Un {
        op: UnOp,
        a: V,
    },
    Fma {
        a: V,
        b: V,
        c: V,
    },
    Cast {
        op: CastOp,
        a: V,
        to: DType,
    },
    /// `tt.dot`: `acc + a·b` with `a` M×K, `b` K×N, `acc` M×N (the result has acc's type).
    Dot {
        a: V,
        b: V,
        acc: V,
    },
    /// `tt.reduce` with a single combiner op along `axis`.
    Reduce {
        op: BinOp,
        a: V,
        axis: u32,
    },
}

impl Op {
    /// Whether the op defines a value.
    pub fn has_result(&self) -> bool {
        !matches!(
            self,
            Op::Launch | Op::Grid(_) | Op::Actual(_) | Op::Tiling { .. } | Op::Store { .. }
        )
    }

    /// The values the op reads.
    pub fn operands(&self) -> Vec<V> {
        match self {
            Op::Launch
            | Op::Grid(_)
            | Op::Actual(_)
            | Op::Tiling { .. }
            | Op::Ptr { .. }
            | Op::ProgramId(_)
            | Op::NumPrograms(_)
            | Op::Const { .. }
            | Op::Range { .. } => vec![],
            Op::Splat { a, .. }
            | Op::Broadcast { a, .. }
            | Op::ExpandDims { a, .. }
            | Op::Reshape { a, .. }
            | Op::Trans { a, .. }
            | Op::Un { a, .. }
            | Op::Cast { a, .. }
            | Op::Reduce { a, .. } => vec![*a],
            Op::AddPtr { ptr, offset } => vec![*ptr, *offset],
            Op::Load { ptr, mask, other } => {
                let mut v = vec![*ptr];
                v.extend(mask);
                v.extend(other);
                v
            }
            Op::Store { ptr, value, mask } => {
                let mut v = vec![*ptr, *value];
                v.extend(mask);
                v
            }
            Op::Bin { a, b, .. } | Op::CmpF { a, b, .. } | Op::CmpI { a, b, .. } => vec![*a, *b],
            Op::Select { cond, a, b } => vec![*cond, *a, *b],
            Op::Fma { a, b, c } => vec![*a, *b, *c],
            Op::Dot { a, b, acc } => vec![*a, *b, *acc],
        }
    }
}

fn name_of<T: PartialEq + Copy>(table: &[(T, &'static str)], op: T) -> &'static str {
    table.iter().find(|(o, _)| *o == op).map_or("?", |(_, n)| n)
}

fn parse_in<T: Copy>(table: &[(T, &'static str)], name: &str) -> Option<T> {
    table.iter().find(|(_, n)| *n == name).map(|(o, _)| *o)
}

/// The index of `op` in `table` (its binary code).
pub(crate) fn index_of<T: PartialEq + Copy>(table: &[(T, &'static str)], op: T) -> u32 {
    table.iter().position(|(o, _)| *o == op).unwrap_or(0) as u32
}
