//! The binary form: what the stand-in aircc writes as `insts.bin` / a full ELF's control code
//! and what the devices decode from the loaded code object.
//!
//! Little-endian 32-bit words: `"NPUH"`, version 2, the argument count, flags (bit 0: bf16
//! emulation), the op count; then per op a header word `opcode | (n << 16)` followed by its
//! `n` operand words. Trailing bytes after the last op are ignored (a program padded to an
//! instruction-stream size still decodes). Opcodes and operands: see `tests/harness/README.md`.

use crate::ops::{BIN_OPS, CASTS, F_PREDS, I_PREDS, Op, UN_OPS, V, index_of};
use crate::{DType, MAGIC, Program, ProgramError, VERSION};

const LAUNCH: u32 = 1;
const GRID: u32 = 2;
const PTR: u32 = 3;
const PROGRAM_ID: u32 = 4;
const NUM_PROGRAMS: u32 = 5;
const CONST: u32 = 6;
const RANGE: u32 = 7;
const SPLAT: u32 = 8;
const BROADCAST: u32 = 9;
const EXPAND_DIMS: u32 = 10;
const RESHAPE: u32 = 11;
const TRANS: u32 = 12;
const ADDPTR: u32 = 13;
const LOAD: u32 = 14;
const STORE: u32 = 15;
const CMPF: u32 = 16;
const CMPI: u32 = 17;
const SELECT: u32 = 18;
const FMA: u32 = 19;
const CAST: u32 = 20;
const DOT: u32 = 21;
const REDUCE: u32 = 22;
const ACTUAL: u32 = 23;
const TILING: u32 = 24;
/// `BIN + index` in the table of binary ops.
const BIN: u32 = 0x100;
/// `UN + index` in the table of unary ops.
const UN: u32 = 0x200;
/// An absent optional operand (a load without mask, …).
const NONE: u32 = u32::MAX;

/// Flag bit: aircc ran with `--bf16-emulation`.
const FLAG_BF16_EMULATION: u32 = 1;

pub fn encode(p: &Program) -> Vec<u8> {
    let flags = if p.bf16_emulation {
        FLAG_BF16_EMULATION
    } else {
        0
    };
    let mut words = vec![
        MAGIC,
        VERSION,
        u32::from(p.num_args),
        flags,
        p.ops.len() as u32,
    ];
    for op in &p.ops {
        let (code, operands) = op_words(op);
        words.push(code | ((operands.len() as u32) << 16));
        words.extend(operands);
    }
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn opt(v: &Option<V>) -> u32 {
    v.unwrap_or(NONE)
}

fn op_words(op: &Op) -> (u32, Vec<u32>) {
    match op {
        Op::Launch => (LAUNCH, vec![]),
        Op::Grid(g) => (GRID, g.to_vec()),
        Op::Actual(s) => (ACTUAL, s.to_vec()),
        Op::Tiling {
            herd,
            domain,
            tiles,
        } => {
            // herd columns, rows, rank, the bounds, then the tile extents.
            let mut w = vec![herd[0], herd[1], domain.len() as u32];
            w.extend(domain);
            w.extend(tiles);
            (TILING, w)
        }
        Op::Ptr { arg, elem } => (PTR, vec![u32::from(*arg), elem.code()]),
        Op::ProgramId(a) => (PROGRAM_ID, vec![u32::from(*a)]),
        Op::NumPrograms(a) => (NUM_PROGRAMS, vec![u32::from(*a)]),
        Op::Const {
            dtype,
            shape,
            value,
        } => {
            let bits = value.to_bits();
            let mut w = vec![dtype.code(), bits as u32, (bits >> 32) as u32];
            w.extend(shape);
            (CONST, w)
        }
        Op::Range { start, end } => (RANGE, vec![*start as u32, *end as u32]),
        Op::Splat { a, shape } => (SPLAT, [vec![*a], shape.clone()].concat()),
        Op::Broadcast { a, shape } => (BROADCAST, [vec![*a], shape.clone()].concat()),
        Op::ExpandDims { a, axis } => (EXPAND_DIMS, vec![*a, *axis]),
        Op::Reshape { a, shape } => (RESHAPE, [vec![*a], shape.clone()].concat()),
        Op::Trans { a, perm } => (TRANS, [vec![*a], perm.clone()].concat()),
        Op::AddPtr { ptr, offset } => (ADDPTR, vec![*ptr, *offset]),
        Op::Load { ptr, mask, other } => (LOAD, vec![*ptr, opt(mask), opt(other)]),
        Op::Store { ptr, value, mask } => (STORE, vec![*ptr, *value, opt(mask)]),
        Op::CmpF { pred, a, b } => (CMPF, vec![index_of(&F_PREDS, *pred), *a, *b]),
        Op::CmpI { pred, a, b } => (CMPI, vec![index_of(&I_PREDS, *pred), *a, *b]),
        Op::Select { cond, a, b } => (SELECT, vec![*cond, *a, *b]),
        Op::Fma { a, b, c } => (FMA, vec![*a, *b, *c]),
        Op::Cast { op, a, to } => (CAST, vec![index_of(&CASTS, *op), *a, to.code()]),
        Op::Dot { a, b, acc } => (DOT, vec![*a, *b, *acc]),
        Op::Reduce { op, a, axis } => (REDUCE, vec![index_of(&BIN_OPS, *op), *a, *axis]),
        Op::Bin { op, a, b } => (BIN + index_of(&BIN_OPS, *op), vec![*a, *b]),
        Op::Un { op, a } => (UN + index_of(&UN_OPS, *op), vec![*a]),
    }
}

fn format(what: String) -> ProgramError {
    ProgramError::Format(what)
}

pub fn decode(bytes: &[u8]) -> Result<Program, ProgramError> {
    let word = |i: usize| -> Result<u32, ProgramError> {
        bytes
            .get(i * 4..i * 4 + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| format(format!("truncated at word {i}")))
    };
    if word(0)? != MAGIC {
        return Err(format("missing NPUH magic".into()));
    }
    if word(1)? != VERSION {
        return Err(format(format!(
            "unknown version {} (this device reads version {VERSION})",
            word(1)?
        )));
    }
    let num_args = u8::try_from(word(2)?).map_err(|_| format("argument count too large".into()))?;
    let flags = word(3)?;
    let count = word(4)? as usize;
    if count > bytes.len() / 4 {
        return Err(format(format!("{count} ops do not fit")));
    }
    let mut ops = Vec::with_capacity(count);
    let mut at = 5;
    for i in 0..count {
        let header = word(at)?;
        let (code, n) = (header & 0xffff, (header >> 16) as usize);
        let w: Vec<u32> = (at + 1..at + 1 + n).map(&word).collect::<Result<_, _>>()?;
        ops.push(decode_op(code, &w).map_err(|e| format(format!("op {i}: {e}")))?);
        at += 1 + n;
    }
    let program = Program {
        num_args,
        bf16_emulation: flags & FLAG_BF16_EMULATION != 0,
        ops,
    };
    program.validate()?;
    Ok(program)
}

fn decode_op(code: u32, w: &[u32]) -> Result<Op, String> {
    let arity = |n: usize| {
        if w.len() == n {
            Ok(())
        } else {
            Err(format!(
                "opcode {code:#x} takes {n} operand words, got {}",
                w.len()
            ))
        }
    };
    let at_least = |n: usize| {
        if w.len() >= n {
            Ok(())
        } else {
            Err(format!(
                "opcode {code:#x} takes at least {n} operand words, got {}",
                w.len()
            ))
        }
    };
    let dtype = |c: u32| DType::from_code(c).ok_or_else(|| format!("dtype code {c}"));
    let opt = |c: u32| (c != NONE).then_some(c);
    let axis = |c: u32| {
        u8::try_from(c)
            .ok()
            .filter(|a| *a < 3)
            .ok_or_else(|| format!("axis {c}"))
    };
    let from = |table_len: usize, i: u32, what: &str| {
        if (i as usize) < table_len {
            Ok(i as usize)
        } else {
            Err(format!("{what} code {i}"))
        }
    };
    Ok(match code {
        LAUNCH => {
            arity(0)?;
            Op::Launch
        }
        GRID => {
            arity(3)?;
            Op::Grid([w[0], w[1], w[2]])
        }
        ACTUAL => {
            arity(3)?;
            Op::Actual([w[0], w[1], w[2]])
        }
        TILING => {
            at_least(3)?;
            let rank = w[2] as usize;
            if w.len() != 3 + 2 * rank {
                return Err(format!(
                    "tiling of rank {rank} takes {} operand words, got {}",
                    3 + 2 * rank,
                    w.len()
                ));
            }
            Op::Tiling {
                herd: [w[0], w[1]],
                domain: w[3..3 + rank].to_vec(),
                tiles: w[3 + rank..].to_vec(),
            }
        }
        PTR => {
            arity(2)?;
            Op::Ptr {
                arg: u8::try_from(w[0]).map_err(|_| format!("argument {}", w[0]))?,
                elem: dtype(w[1])?,
            }
        }
        PROGRAM_ID => {
            arity(1)?;
            Op::ProgramId(axis(w[0])?)
        }
        NUM_PROGRAMS => {
            arity(1)?;
            Op::NumPrograms(axis(w[0])?)
        }
        CONST => {
            at_least(3)?;
            Op::Const {
                dtype: dtype(w[0])?,
                value: f64::from_bits(u64::from(w[1]) | (u64::from(w[2]) << 32)),
                shape: w[3..].to_vec(),
            }
        }
        RANGE => {
            arity(2)?;
            Op::Range {
                start: w[0] as i32,
                end: w[1] as i32,
            }
        }
        SPLAT | BROADCAST | RESHAPE | TRANS => {
            at_least(1)?;
            let (a, rest) = (w[0], w[1..].to_vec());
            match code {
                SPLAT => Op::Splat { a, shape: rest },
                BROADCAST => Op::Broadcast { a, shape: rest },
                RESHAPE => Op::Reshape { a, shape: rest },
                _ => Op::Trans { a, perm: rest },
            }
        }
        EXPAND_DIMS => {
            arity(2)?;
            Op::ExpandDims {
                a: w[0],
                axis: w[1],
            }
        }
        ADDPTR => {
            arity(2)?;
            Op::AddPtr {
                ptr: w[0],
                offset: w[1],
            }
        }
        LOAD => {
            arity(3)?;
            Op::Load {
                ptr: w[0],
                mask: opt(w[1]),
                other: opt(w[2]),
            }
        }
        STORE => {
            arity(3)?;
            Op::Store {
                ptr: w[0],
                value: w[1],
                mask: opt(w[2]),
            }
        }
        CMPF => {
            arity(3)?;
            Op::CmpF {
                pred: F_PREDS[from(F_PREDS.len(), w[0], "cmpf predicate")?].0,
                a: w[1],
                b: w[2],
            }
        }
        CMPI => {
            arity(3)?;
            Op::CmpI {
                pred: I_PREDS[from(I_PREDS.len(), w[0], "cmpi predicate")?].0,
                a: w[1],
                b: w[2],
            }
        }
        SELECT => {
            arity(3)?;
            Op::Select {
                cond: w[0],
                a: w[1],
                b: w[2],
            }
        }
        FMA => {
            arity(3)?;
            Op::Fma {
                a: w[0],
                b: w[1],
                c: w[2],
            }
        }
        CAST => {
            arity(3)?;
            Op::Cast {
                op: CASTS[from(CASTS.len(), w[0], "cast")?].0,
                a: w[1],
                to: dtype(w[2])?,
            }
        }
        DOT => {
            arity(3)?;
            Op::Dot {
                a: w[0],
                b: w[1],
                acc: w[2],
            }
        }
        REDUCE => {
            arity(3)?;
            Op::Reduce {
                op: BIN_OPS[from(BIN_OPS.len(), w[0], "combiner")?].0,
                a: w[1],
                axis: w[2],
            }
        }
        c if (BIN..BIN + BIN_OPS.len() as u32).contains(&c) => {
            arity(2)?;
            Op::Bin {
                op: BIN_OPS[(c - BIN) as usize].0,
                a: w[0],
                b: w[1],
            }
        }
        c if (UN..UN + UN_OPS.len() as u32).contains(&c) => {
            arity(1)?;
            Op::Un {
                op: UN_OPS[(c - UN) as usize].0,
                a: w[0],
            }
        }
        c => return Err(format!("unknown opcode {c:#x}")),
    })
}
