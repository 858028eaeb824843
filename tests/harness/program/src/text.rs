//! The text form: what travels in the `npu_harness.program` attribute of the IR files.
//!
//! ```text
//! args 3
//! grid 4 1 1
//! %0 = ptr arg0 f32
//! %1 = program_id 0
//! %2 = const i32 [] 1024
//! %3 = muli %1 %2
//! %4 = range 0 1024
//! %5 = splat %3 [1024]
//! %6 = addi %5 %4
//! %7 = splat %0 [1024]
//! %8 = addptr %7 %6
//! %9 = load %8
//! …
//! store %14 %13 mask %12
//! ```
//!
//! A first line `args N`, an optional `bf16-emulation` line, then one op per line. Each
//! launch (a chain's launches are separated by `launch`) numbers its values from `%0`, one per
//! op with a result, in order; the text names them so it reads like the TTIR it came from.

use std::fmt;

use crate::ops::{BinOp, CastOp, FPred, IPred, Op, UnOp, V};
use crate::{DType, Program, ProgramError};

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "args {}", self.num_args)?;
        if self.bf16_emulation {
            writeln!(f, "bf16-emulation")?;
        }
        let mut next = 0u32;
        for op in &self.ops {
            if matches!(op, Op::Launch) {
                next = 0;
            }
            if op.has_result() {
                write!(f, "%{next} = ")?;
                next += 1;
            }
            writeln!(f, "{}", OpText(op))?;
        }
        Ok(())
    }
}

fn shape(s: &[u32]) -> String {
    let dims: Vec<String> = s.iter().map(u32::to_string).collect();
    format!("[{}]", dims.join(","))
}

struct OpText<'a>(&'a Op);

impl fmt::Display for OpText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = |x: &V| format!("%{x}");
        match self.0 {
            Op::Launch => write!(f, "launch"),
            Op::Grid([x, y, z]) => write!(f, "grid {x} {y} {z}"),
            Op::Actual([m, n, k]) => write!(f, "actual {m} {n} {k}"),
            Op::Tiling {
                herd: [c, r],
                domain,
                tiles,
            } => write!(f, "tiling {c} {r} {} {}", shape(domain), shape(tiles)),
            Op::Ptr { arg, elem } => write!(f, "ptr arg{arg} {}", elem.name()),
            Op::ProgramId(a) => write!(f, "program_id {a}"),
            Op::NumPrograms(a) => write!(f, "num_programs {a}"),
            Op::Const {
                dtype,
                shape: s,
                value,
            } if dtype.is_float() => write!(f, "const {} {} {value:?}", dtype.name(), shape(s)),
            Op::Const {
                dtype,
                shape: s,
                value,
            } => write!(f, "const {} {} {}", dtype.name(), shape(s), *value as i64),
            Op::Range { start, end } => write!(f, "range {start} {end}"),
            Op::Splat { a, shape: s } => write!(f, "splat {} {}", v(a), shape(s)),
            Op::Broadcast { a, shape: s } => write!(f, "broadcast {} {}", v(a), shape(s)),
            Op::ExpandDims { a, axis } => write!(f, "expand_dims {} {axis}", v(a)),
            Op::Reshape { a, shape: s } => write!(f, "reshape {} {}", v(a), shape(s)),
            Op::Trans { a, perm } => write!(f, "trans {} {}", v(a), shape(perm)),
            Op::AddPtr { ptr, offset } => write!(f, "addptr {} {}", v(ptr), v(offset)),
            Op::Load { ptr, mask, other } => {
                write!(f, "load {}", v(ptr))?;
                if let Some(m) = mask {
                    write!(f, " mask {}", v(m))?;
                }
                if let Some(o) = other {
                    write!(f, " other {}", v(o))?;
                }
                Ok(())
            }
            Op::Store { ptr, value, mask } => {
                write!(f, "store {} {}", v(ptr), v(value))?;
                if let Some(m) = mask {
                    write!(f, " mask {}", v(m))?;
                }
                Ok(())
            }
            Op::Bin { op, a, b } => write!(f, "{} {} {}", op.name(), v(a), v(b)),
            Op::CmpF { pred, a, b } => write!(f, "cmpf {} {} {}", pred.name(), v(a), v(b)),
            Op::CmpI { pred, a, b } => write!(f, "cmpi {} {} {}", pred.name(), v(a), v(b)),
            Op::Select { cond, a, b } => write!(f, "select {} {} {}", v(cond), v(a), v(b)),
            Op::Un { op, a } => write!(f, "{} {}", op.name(), v(a)),
            Op::Fma { a, b, c } => write!(f, "fma {} {} {}", v(a), v(b), v(c)),
            Op::Cast { op, a, to } => write!(f, "{} {} {}", op.name(), v(a), to.name()),
            Op::Dot { a, b, acc } => write!(f, "dot {} {} {}", v(a), v(b), v(acc)),
            Op::Reduce { op, a, axis } => write!(f, "reduce {} {} {axis}", op.name(), v(a)),
        }
    }
}

/// Parses the text form; the result is checked ([`Program::validate`]).
pub fn parse(text: &str) -> Result<Program, ProgramError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let (n, first) = lines.next().ok_or_else(|| err(1, "empty program"))?;
    let num_args = first
        .strip_prefix("args ")
        .and_then(|v| v.trim().parse::<u8>().ok())
        .ok_or_else(|| err(n, "expected `args <N>`"))?;
    let mut program = Program {
        num_args,
        bf16_emulation: false,
        ops: Vec::new(),
    };
    let mut next = 0u32;
    for (n, line) in lines {
        if line == "bf16-emulation" && program.ops.is_empty() {
            program.bf16_emulation = true;
            continue;
        }
        let (result, body) = match line.split_once(" = ") {
            Some((lhs, rhs)) if lhs.starts_with('%') => (Some(lhs.trim()), rhs.trim()),
            _ => (None, line),
        };
        let op = parse_op(n, body)?;
        if matches!(op, Op::Launch) {
            next = 0;
        }
        match (result, op.has_result()) {
            (Some(name), true) => {
                if name != format!("%{next}") {
                    return Err(err(
                        n,
                        &format!("expected the result to be named %{next}, got {name}"),
                    ));
                }
                next += 1;
            }
            (None, false) => {}
            (Some(_), false) => return Err(err(n, "this operation has no result")),
            (None, true) => return Err(err(n, "this operation needs a result (`%N = …`)")),
        }
        program.ops.push(op);
    }
    program.validate()?;
    Ok(program)
}

fn err(line: usize, reason: &str) -> ProgramError {
    ProgramError::Text {
        line,
        reason: reason.to_owned(),
    }
}

fn parse_op(n: usize, body: &str) -> Result<Op, ProgramError> {
    let words: Vec<&str> = body.split_whitespace().collect();
    let v = |s: &str| -> Result<V, ProgramError> {
        s.strip_prefix('%')
            .and_then(|x| x.parse().ok())
            .ok_or_else(|| err(n, &format!("expected a value (%N), got {s:?}")))
    };
    let int = |s: &str| -> Result<i64, ProgramError> {
        s.parse()
            .map_err(|_| err(n, &format!("expected an integer, got {s:?}")))
    };
    let small = |s: &str| -> Result<u32, ProgramError> {
        s.parse()
            .map_err(|_| err(n, &format!("expected a small integer, got {s:?}")))
    };
    let dtype = |s: &str| DType::parse(s).ok_or_else(|| err(n, &format!("unknown type {s:?}")));
    let list = |s: &str| -> Result<Vec<u32>, ProgramError> {
        let inner = s
            .strip_prefix('[')
            .and_then(|x| x.strip_suffix(']'))
            .ok_or_else(|| err(n, &format!("expected a list like [4,64], got {s:?}")))?;
        if inner.is_empty() {
            return Ok(vec![]);
        }
        inner.split(',').map(|d| small(d.trim())).collect()
    };
    let axis = |s: &str| -> Result<u8, ProgramError> {
        s.parse::<u8>()
            .ok()
            .filter(|a| *a < 3)
            .ok_or_else(|| err(n, &format!("expected an axis 0, 1 or 2, got {s:?}")))
    };
    let op = match words.as_slice() {
        ["launch"] => Op::Launch,
        ["grid", x, y, z] => Op::Grid([small(x)?, small(y)?, small(z)?]),
        ["actual", m, n, k] => Op::Actual([small(m)?, small(n)?, small(k)?]),
        ["tiling", c, r, d, t] => Op::Tiling {
            herd: [small(c)?, small(r)?],
            domain: list(d)?,
            tiles: list(t)?,
        },
        ["ptr", a, t] => Op::Ptr {
            arg: a
                .strip_prefix("arg")
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| err(n, &format!("expected an argument, got {a:?}")))?,
            elem: dtype(t)?,
        },
        ["program_id", a] => Op::ProgramId(axis(a)?),
        ["num_programs", a] => Op::NumPrograms(axis(a)?),
        ["const", t, s, value] => Op::Const {
            dtype: dtype(t)?,
            shape: list(s)?,
            value: value
                .parse()
                .map_err(|_| err(n, &format!("bad constant {value:?}")))?,
        },
        ["range", s, e] => Op::Range {
            start: i32::try_from(int(s)?).map_err(|_| err(n, "range start out of i32"))?,
            end: i32::try_from(int(e)?).map_err(|_| err(n, "range end out of i32"))?,
        },
        ["splat", a, s] => Op::Splat {
            a: v(a)?,
            shape: list(s)?,
        },
        ["broadcast", a, s] => Op::Broadcast {
            a: v(a)?,
            shape: list(s)?,
        },
        ["expand_dims", a, x] => Op::ExpandDims {
            a: v(a)?,
            axis: small(x)?,
        },
        ["reshape", a, s] => Op::Reshape {
            a: v(a)?,
            shape: list(s)?,
        },
        ["trans", a, p] => Op::Trans {
            a: v(a)?,
            perm: list(p)?,
        },
        ["addptr", p, o] => Op::AddPtr {
            ptr: v(p)?,
            offset: v(o)?,
        },
        ["load", p, rest @ ..] => {
            let (mut mask, mut other) = (None, None);
            for pair in rest.chunks(2) {
                match pair {
                    ["mask", m] => mask = Some(v(m)?),
                    ["other", o] => other = Some(v(o)?),
                    _ => return Err(err(n, "load takes `mask %M` and `other %O`")),
                }
            }
            Op::Load {
                ptr: v(p)?,
                mask,
                other,
            }
        }
        ["store", p, x] => Op::Store {
            ptr: v(p)?,
            value: v(x)?,
            mask: None,
        },
        ["store", p, x, "mask", m] => Op::Store {
            ptr: v(p)?,
            value: v(x)?,
            mask: Some(v(m)?),
        },
        ["cmpf", pred, a, b] => Op::CmpF {
            pred: FPred::parse(pred)
                .ok_or_else(|| err(n, &format!("unknown cmpf predicate {pred:?}")))?,
            a: v(a)?,
            b: v(b)?,
        },
        ["cmpi", pred, a, b] => Op::CmpI {
            pred: IPred::parse(pred)
                .ok_or_else(|| err(n, &format!("unknown cmpi predicate {pred:?}")))?,
            a: v(a)?,
            b: v(b)?,
        },
        ["select", c, a, b] => Op::Select {
            cond: v(c)?,
            a: v(a)?,
            b: v(b)?,
        },
        ["fma", a, b, c] => Op::Fma {
            a: v(a)?,
            b: v(b)?,
            c: v(c)?,
        },
        ["dot", a, b, c] => Op::Dot {
            a: v(a)?,
            b: v(b)?,
            acc: v(c)?,
        },
        ["reduce", name, a, x] => Op::Reduce {
            op: BinOp::parse(name).ok_or_else(|| err(n, &format!("unknown combiner {name:?}")))?,
            a: v(a)?,
            axis: small(x)?,
        },
        [name, a, t] if CastOp::parse(name).is_some() => Op::Cast {
            op: CastOp::parse(name).unwrap_or(CastOp::ExtF),
            a: v(a)?,
            to: dtype(t)?,
        },
        [name, a, b] if BinOp::parse(name).is_some() => Op::Bin {
            op: BinOp::parse(name).unwrap_or(BinOp::AddF),
            a: v(a)?,
            b: v(b)?,
        },
        [name, a] if UnOp::parse(name).is_some() => Op::Un {
            op: UnOp::parse(name).unwrap_or(UnOp::NegF),
            a: v(a)?,
        },
        _ => return Err(err(n, &format!("cannot read {body:?}"))),
    };
    Ok(op)
}
