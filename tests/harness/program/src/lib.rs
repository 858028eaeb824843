//! The harness's kernel encoding (tests only; never shipped).
//!
//! No AIE toolchain or NPU exists on the development machines, so the stand-in toolchain
//! records what an elementwise Triton kernel computes as a tiny register program, and the
//! software devices (the HSA agent and the XRT stand-in) execute it over the buffers a dispatch
//! hands them. Results then depend on the data that really flowed through the driver: a dropped
//! argument, a wrong size or a missed write-back changes the output.
//!
//! A program has a text form (carried in IR files between the stand-in tools) and a binary
//! form (32-bit little-endian words; stored as `insts.bin` for xclbin/pdi and as the `.ctrltext`
//! control code of a full ELF). See `tests/harness/README.md`.

use std::fmt;

/// `"NPUH"` read as a little-endian word.
pub const MAGIC: u32 = u32::from_le_bytes(*b"NPUH");
pub const VERSION: u32 = 1;
/// Registers available to a program.
pub const REGISTERS: usize = 16;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProgramError {
    #[error("not a harness program: {0}")]
    Format(String),
    #[error("harness program text, line {line}: {reason}")]
    Text { line: usize, reason: String },
    #[error("cannot execute: {0}")]
    Execute(String),
}

/// Element types a program loads and stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    Bf16,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
}

impl DType {
    const ALL: [DType; 9] = [
        DType::F32,
        DType::F16,
        DType::Bf16,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
        }
    }

    pub fn parse(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::F16 | DType::Bf16 | DType::I16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    fn code(self) -> u32 {
        DType::ALL.iter().position(|d| *d == self).unwrap_or(0) as u32
    }

    fn from_code(code: u32) -> Option<DType> {
        DType::ALL.get(code as usize).copied()
    }

    fn read(self, b: &[u8]) -> f64 {
        match self {
            DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::F16 => f16_to_f32(u16::from_le_bytes([b[0], b[1]])) as f64,
            DType::Bf16 => f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16) as f64,
            DType::F64 => f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])),
            DType::I8 => b[0] as i8 as f64,
            DType::I16 => i16::from_le_bytes([b[0], b[1]]) as f64,
            DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::I64 => i64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])) as f64,
            DType::U8 => b[0] as f64,
        }
    }

    fn write(self, v: f64, b: &mut [u8]) {
        match self {
            DType::F32 => b[..4].copy_from_slice(&(v as f32).to_le_bytes()),
            DType::F16 => b[..2].copy_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
            DType::Bf16 => b[..2].copy_from_slice(&f32_to_bf16(v as f32).to_le_bytes()),
            DType::F64 => b[..8].copy_from_slice(&v.to_le_bytes()),
            // `as` saturates, which is what the NPU's integer conversions do.
            DType::I8 => b[0] = v as i8 as u8,
            DType::I16 => b[..2].copy_from_slice(&(v as i16).to_le_bytes()),
            DType::I32 => b[..4].copy_from_slice(&(v as i32).to_le_bytes()),
            DType::I64 => b[..8].copy_from_slice(&(v as i64).to_le_bytes()),
            DType::U8 => b[0] = v as u8,
        }
    }
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) & 1) as u32;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign << 31,
        (0, f) => {
            // Subnormal: value = f × 2^-24.
            let v = f as f32 * 2f32.powi(-24);
            return if sign == 1 { -v } else { v };
        }
        (0x1f, f) => (sign << 31) | (0xff << 23) | (f << 13),
        (e, f) => (sign << 31) | ((e + 112) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}

fn f32_to_f16(v: f32) -> u16 {
    let bits = v.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    if v.is_nan() {
        return sign | 0x7e00;
    }
    let a = v.abs();
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    if a < 2f32.powi(-24) * 0.5 {
        return sign;
    }
    if a < 2f32.powi(-14) {
        return sign | (a / 2f32.powi(-24)).round_ties_even() as u16;
    }
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mant = bits & 0x7f_ffff;
    let mut half = ((exp as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && half & 1 == 1) {
        half += 1;
    }
    sign | half as u16
}

fn f32_to_bf16(v: f32) -> u16 {
    if v.is_nan() {
        return 0x7fc0 | ((v.to_bits() >> 16) as u16 & 0x8000);
    }
    let bits = v.to_bits();
    let round = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

/// Elementwise operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Exp,
    Abs,
}

/// One instruction. Registers hold one value per element.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// `rD = load arg<A> : dtype`
    Load {
        dst: u8,
        arg: u8,
        dtype: DType,
    },
    /// `store arg<A>, rS : dtype`
    Store {
        arg: u8,
        src: u8,
        dtype: DType,
    },
    /// `rD = const <f32>` (constants fold into the code, as on the NPU)
    Const {
        dst: u8,
        value: f32,
    },
    Bin {
        op: BinOp,
        dst: u8,
        a: u8,
        b: u8,
    },
    Un {
        op: UnOp,
        dst: u8,
        a: u8,
    },
    /// Starts the next launch of a chain (several kernels stitched into one dispatch): the
    /// launches run in order over the same buffers, each with fresh registers and its own
    /// element count, so what one launch stores the next one loads.
    Launch,
}

/// A kernel: how many buffer arguments it takes and what it computes.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub num_args: u8,
    pub ops: Vec<Op>,
}

const BIN_OPS: [(BinOp, &str); 6] = [
    (BinOp::Add, "add"),
    (BinOp::Sub, "sub"),
    (BinOp::Mul, "mul"),
    (BinOp::Div, "div"),
    (BinOp::Max, "max"),
    (BinOp::Min, "min"),
];
const UN_OPS: [(UnOp, &str); 3] = [(UnOp::Neg, "neg"), (UnOp::Exp, "exp"), (UnOp::Abs, "abs")];

// Opcodes of the binary form.
const OP_LOAD: u32 = 1;
const OP_STORE: u32 = 2;
const OP_CONST: u32 = 3;
const OP_LAUNCH: u32 = 4;
const OP_BIN: u32 = 0x10; // + index in BIN_OPS
const OP_UN: u32 = 0x20; // + index in UN_OPS

impl Program {
    /// The arguments the program stores to, one flag per argument.
    pub fn written_args(&self) -> Vec<bool> {
        let mut w = vec![false; self.num_args as usize];
        for op in &self.ops {
            if let Op::Store { arg, .. } = op
                && let Some(slot) = w.get_mut(*arg as usize)
            {
                *slot = true;
            }
        }
        w
    }

    /// Checks register and argument indices.
    pub fn validate(&self) -> Result<(), ProgramError> {
        let reg = |r: u8| {
            if (r as usize) < REGISTERS {
                Ok(())
            } else {
                Err(ProgramError::Format(format!("register r{r} out of range")))
            }
        };
        let arg = |a: u8| {
            if a < self.num_args {
                Ok(())
            } else {
                Err(ProgramError::Format(format!(
                    "argument {a} out of range (the kernel has {})",
                    self.num_args
                )))
            }
        };
        for op in &self.ops {
            match *op {
                Op::Load { dst, arg: a, .. } => {
                    reg(dst)?;
                    arg(a)?
                }
                Op::Store { arg: a, src, .. } => {
                    reg(src)?;
                    arg(a)?
                }
                Op::Const { dst, .. } => reg(dst)?,
                Op::Bin { dst, a, b, .. } => {
                    reg(dst)?;
                    reg(a)?;
                    reg(b)?
                }
                Op::Un { dst, a, .. } => {
                    reg(dst)?;
                    reg(a)?
                }
                Op::Launch => {}
            }
        }
        Ok(())
    }

    /// The binary form: `MAGIC, VERSION, num_args, num_ops`, then four words per op.
    pub fn encode(&self) -> Vec<u8> {
        let mut words = vec![MAGIC, VERSION, self.num_args as u32, self.ops.len() as u32];
        for op in &self.ops {
            let w: [u32; 4] = match *op {
                Op::Load { dst, arg, dtype } => [OP_LOAD, dst as u32, arg as u32, dtype.code()],
                Op::Store { arg, src, dtype } => [OP_STORE, arg as u32, src as u32, dtype.code()],
                Op::Const { dst, value } => [OP_CONST, dst as u32, value.to_bits(), 0],
                Op::Bin { op, dst, a, b } => {
                    let i = BIN_OPS.iter().position(|(o, _)| *o == op).unwrap_or(0) as u32;
                    [OP_BIN + i, dst as u32, a as u32, b as u32]
                }
                Op::Un { op, dst, a } => {
                    let i = UN_OPS.iter().position(|(o, _)| *o == op).unwrap_or(0) as u32;
                    [OP_UN + i, dst as u32, a as u32, 0]
                }
                Op::Launch => [OP_LAUNCH, 0, 0, 0],
            };
            words.extend_from_slice(&w);
        }
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// Reads the binary form from the start of `bytes` (trailing bytes are ignored, so a
    /// program padded to an instruction-stream size still decodes).
    pub fn decode(bytes: &[u8]) -> Result<Program, ProgramError> {
        let word = |i: usize| -> Result<u32, ProgramError> {
            bytes
                .get(i * 4..i * 4 + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or_else(|| ProgramError::Format(format!("truncated at word {i}")))
        };
        if word(0)? != MAGIC {
            return Err(ProgramError::Format("missing NPUH magic".into()));
        }
        if word(1)? != VERSION {
            return Err(ProgramError::Format(format!(
                "unknown version {}",
                word(1)?
            )));
        }
        let num_args = u8::try_from(word(2)?)
            .map_err(|_| ProgramError::Format("argument count too large".into()))?;
        let count = word(3)? as usize;
        if count > bytes.len() / 16 {
            return Err(ProgramError::Format(format!("{count} ops do not fit")));
        }
        let small = |v: u32| {
            u8::try_from(v).map_err(|_| ProgramError::Format(format!("index {v} too large")))
        };
        let dtype = |v: u32| {
            DType::from_code(v).ok_or_else(|| ProgramError::Format(format!("dtype code {v}")))
        };
        let mut ops = Vec::with_capacity(count);
        for i in 0..count {
            let base = 4 + i * 4;
            let (code, x, y, z) = (
                word(base)?,
                word(base + 1)?,
                word(base + 2)?,
                word(base + 3)?,
            );
            let op = match code {
                OP_LOAD => Op::Load {
                    dst: small(x)?,
                    arg: small(y)?,
                    dtype: dtype(z)?,
                },
                OP_STORE => Op::Store {
                    arg: small(x)?,
                    src: small(y)?,
                    dtype: dtype(z)?,
                },
                OP_CONST => Op::Const {
                    dst: small(x)?,
                    value: f32::from_bits(y),
                },
                OP_LAUNCH => Op::Launch,
                c if (OP_BIN..OP_BIN + BIN_OPS.len() as u32).contains(&c) => Op::Bin {
                    op: BIN_OPS[(c - OP_BIN) as usize].0,
                    dst: small(x)?,
                    a: small(y)?,
                    b: small(z)?,
                },
                c if (OP_UN..OP_UN + UN_OPS.len() as u32).contains(&c) => Op::Un {
                    op: UN_OPS[(c - OP_UN) as usize].0,
                    dst: small(x)?,
                    a: small(y)?,
                },
                c => return Err(ProgramError::Format(format!("unknown opcode {c:#x}"))),
            };
            ops.push(op);
        }
        let program = Program { num_args, ops };
        program.validate()?;
        Ok(program)
    }

    /// Parses the text form (see [`fmt::Display`]): a first line `args <N>`, then one
    /// instruction per line, e.g. `r0 = load arg0 f32`, `r2 = add r0 r1`, `store arg2 r2 f32`,
    /// `r3 = const 0.5`, `r4 = neg r3`, and `launch` between the launches of a chain.
    pub fn parse_text(text: &str) -> Result<Program, ProgramError> {
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty());
        let err = |line: usize, reason: &str| ProgramError::Text {
            line,
            reason: reason.to_owned(),
        };
        let (n, first) = lines.next().ok_or_else(|| err(1, "empty program"))?;
        let num_args = first
            .strip_prefix("args ")
            .and_then(|v| v.trim().parse::<u8>().ok())
            .ok_or_else(|| err(n, "expected `args <N>`"))?;
        let reg = |line: usize, s: &str| -> Result<u8, ProgramError> {
            s.strip_prefix('r')
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| err(line, &format!("expected a register, got {s:?}")))
        };
        let arg = |line: usize, s: &str| -> Result<u8, ProgramError> {
            s.strip_prefix("arg")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| err(line, &format!("expected an argument, got {s:?}")))
        };
        let dtype = |line: usize, s: &str| {
            DType::parse(s).ok_or_else(|| err(line, &format!("unknown dtype {s:?}")))
        };
        let mut ops = Vec::new();
        for (n, line) in lines {
            let words: Vec<&str> = line.split_whitespace().collect();
            let op = match words.as_slice() {
                ["launch"] => Op::Launch,
                ["store", a, r, t] => Op::Store {
                    arg: arg(n, a)?,
                    src: reg(n, r)?,
                    dtype: dtype(n, t)?,
                },
                [d, "=", "load", a, t] => Op::Load {
                    dst: reg(n, d)?,
                    arg: arg(n, a)?,
                    dtype: dtype(n, t)?,
                },
                [d, "=", "const", v] => Op::Const {
                    dst: reg(n, d)?,
                    value: v.parse().map_err(|_| err(n, "bad constant"))?,
                },
                [d, "=", name, a, b] => Op::Bin {
                    op: BIN_OPS
                        .iter()
                        .find(|(_, s)| s == name)
                        .map(|(o, _)| *o)
                        .ok_or_else(|| err(n, &format!("unknown operation {name:?}")))?,
                    dst: reg(n, d)?,
                    a: reg(n, a)?,
                    b: reg(n, b)?,
                },
                [d, "=", name, a] => Op::Un {
                    op: UN_OPS
                        .iter()
                        .find(|(_, s)| s == name)
                        .map(|(o, _)| *o)
                        .ok_or_else(|| err(n, &format!("unknown operation {name:?}")))?,
                    dst: reg(n, d)?,
                    a: reg(n, a)?,
                },
                _ => return Err(err(n, &format!("cannot read {line:?}"))),
            };
            ops.push(op);
        }
        let program = Program { num_args, ops };
        program.validate()?;
        Ok(program)
    }

    /// Runs the program over `args` (one byte buffer per kernel argument, in order). The
    /// element count is the smallest count any loaded or stored buffer holds; the real kernels'
    /// `offsets < n` masks are not modelled. A chain's launches (separated by [`Op::Launch`])
    /// run one after the other, each with its own element count and fresh registers.
    pub fn execute(&self, args: &mut [&mut [u8]]) -> Result<(), ProgramError> {
        if args.len() != self.num_args as usize {
            return Err(ProgramError::Execute(format!(
                "the kernel takes {} buffer arguments, the dispatch passed {}",
                self.num_args,
                args.len()
            )));
        }
        for launch in self.ops.split(|op| matches!(op, Op::Launch)) {
            execute_launch(launch, args);
        }
        Ok(())
    }

    /// How many launches the program has (1 for a plain kernel).
    pub fn launches(&self) -> usize {
        1 + self
            .ops
            .iter()
            .filter(|op| matches!(op, Op::Launch))
            .count()
    }
}

/// One launch: `ops` holds no [`Op::Launch`]; arguments were checked by `validate`.
fn execute_launch(ops: &[Op], args: &mut [&mut [u8]]) {
    let mut n = usize::MAX;
    for op in ops {
        if let Op::Load { arg, dtype, .. } | Op::Store { arg, dtype, .. } = *op {
            n = n.min(args[arg as usize].len() / dtype.size());
        }
    }
    if n == usize::MAX {
        return;
    }
    let mut regs = vec![vec![0f64; n]; REGISTERS];
    for op in ops {
        match *op {
            Op::Load { dst, arg, dtype } => {
                let buf = &args[arg as usize];
                for (i, r) in regs[dst as usize].iter_mut().enumerate() {
                    *r = dtype.read(&buf[i * dtype.size()..]);
                }
            }
            Op::Store { arg, src, dtype } => {
                let buf = &mut args[arg as usize];
                for (i, v) in regs[src as usize].iter().enumerate() {
                    dtype.write(*v, &mut buf[i * dtype.size()..]);
                }
            }
            Op::Const { dst, value } => regs[dst as usize].fill(value as f64),
            Op::Bin { op, dst, a, b } => {
                let out: Vec<f64> = regs[a as usize]
                    .iter()
                    .zip(&regs[b as usize])
                    .map(|(x, y)| match op {
                        BinOp::Add => x + y,
                        BinOp::Sub => x - y,
                        BinOp::Mul => x * y,
                        BinOp::Div => x / y,
                        BinOp::Max => x.max(*y),
                        BinOp::Min => x.min(*y),
                    })
                    .collect();
                regs[dst as usize] = out;
            }
            Op::Un { op, dst, a } => {
                let out: Vec<f64> = regs[a as usize]
                    .iter()
                    .map(|x| match op {
                        UnOp::Neg => -x,
                        UnOp::Exp => x.exp(),
                        UnOp::Abs => x.abs(),
                    })
                    .collect();
                regs[dst as usize] = out;
            }
            Op::Launch => {}
        }
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "args {}", self.num_args)?;
        for op in &self.ops {
            match *op {
                Op::Load { dst, arg, dtype } => {
                    writeln!(f, "r{dst} = load arg{arg} {}", dtype.name())?
                }
                Op::Store { arg, src, dtype } => {
                    writeln!(f, "store arg{arg} r{src} {}", dtype.name())?
                }
                Op::Const { dst, value } => writeln!(f, "r{dst} = const {value:?}")?,
                Op::Bin { op, dst, a, b } => {
                    let name = BIN_OPS
                        .iter()
                        .find(|(o, _)| *o == op)
                        .map_or("?", |(_, s)| s);
                    writeln!(f, "r{dst} = {name} r{a} r{b}")?
                }
                Op::Un { op, dst, a } => {
                    let name = UN_OPS
                        .iter()
                        .find(|(o, _)| *o == op)
                        .map_or("?", |(_, s)| s);
                    writeln!(f, "r{dst} = {name} r{a}")?
                }
                Op::Launch => writeln!(f, "launch")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD: &str =
        "args 3\nr0 = load arg0 f32\nr1 = load arg1 f32\nr2 = add r0 r1\nstore arg2 r2 f32\n";

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn text_binary_round_trip() {
        let p = Program::parse_text(ADD).unwrap();
        assert_eq!(p.to_string(), ADD);
        let bytes = p.encode();
        assert_eq!(bytes.len() % 4, 0);
        assert_eq!(Program::decode(&bytes).unwrap(), p);
        let mut padded = bytes.clone();
        padded.extend_from_slice(&[0; 64]);
        assert_eq!(Program::decode(&padded).unwrap(), p);
        assert_eq!(p.written_args(), vec![false, false, true]);
    }

    #[test]
    fn executes_vector_add() {
        let p = Program::parse_text(ADD).unwrap();
        let (mut a, mut b, mut c) = (
            f32s(&[1.0, 2.0, 3.0]),
            f32s(&[10.0, 20.0, 30.0]),
            f32s(&[0.0; 3]),
        );
        p.execute(&mut [&mut a, &mut b, &mut c]).unwrap();
        assert_eq!(c, f32s(&[11.0, 22.0, 33.0]));
        let err = p.execute(&mut [&mut a, &mut b]).unwrap_err().to_string();
        assert!(
            err.contains("3 buffer arguments") && err.contains("passed 2"),
            "{err}"
        );
    }

    #[test]
    fn relu_with_const_and_dtypes() {
        let p = Program::parse_text(
            "args 2\nr0 = load arg0 bf16\nr1 = const 0.0\nr2 = max r0 r1\nstore arg1 r2 f16\n",
        )
        .unwrap();
        let mut x: Vec<u8> = [-2.0f32, 0.5, 3.0]
            .iter()
            .flat_map(|v| f32_to_bf16(*v).to_le_bytes())
            .collect();
        let mut y = vec![0u8; 6];
        p.execute(&mut [&mut x, &mut y]).unwrap();
        let got: Vec<f32> = y
            .chunks(2)
            .map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
            .collect();
        assert_eq!(got, vec![0.0, 0.5, 3.0]);
    }

    #[test]
    fn refuses_malformed_input() {
        assert!(Program::decode(b"nope").is_err());
        assert!(Program::decode(&[0u8; 3]).is_err());
        let mut bytes = Program::parse_text(ADD).unwrap().encode();
        bytes[16] = 0x7f; // first opcode
        assert!(Program::decode(&bytes).is_err());
        assert!(Program::parse_text("args 1\nr0 = load arg3 f32\n").is_err());
        assert!(Program::parse_text("args 1\nr99 = const 1\n").is_err());
        assert!(Program::parse_text("r0 = const 1\n").is_err());
        assert!(Program::parse_text("args 1\nr0 = frobnicate r1 r2\n").is_err());
    }

    #[test]
    fn chained_launches_hand_off_through_a_buffer() {
        // tmp = x + y; out = tmp * y — the second launch reads what the first stored.
        let text = "args 4\nr0 = load arg0 f32\nr1 = load arg1 f32\nr2 = add r0 r1\n\
                    store arg2 r2 f32\nlaunch\nr0 = load arg2 f32\nr1 = load arg1 f32\n\
                    r2 = mul r0 r1\nstore arg3 r2 f32\n";
        let p = Program::parse_text(text).unwrap();
        assert_eq!(p.to_string(), text);
        assert_eq!(p.launches(), 2);
        assert_eq!(Program::decode(&p.encode()).unwrap(), p);
        assert_eq!(p.written_args(), vec![false, false, true, true]);
        let (mut x, mut y, mut tmp, mut out) = (
            f32s(&[1.0, 2.0]),
            f32s(&[10.0, 20.0]),
            f32s(&[0.0; 2]),
            f32s(&[0.0; 2]),
        );
        p.execute(&mut [&mut x, &mut y, &mut tmp, &mut out])
            .unwrap();
        assert_eq!(tmp, f32s(&[11.0, 22.0]));
        assert_eq!(out, f32s(&[110.0, 440.0]));
    }

    #[test]
    fn each_launch_has_its_own_element_count() {
        // The first launch covers 3 elements, the second only the 1 its buffers hold.
        let p = Program::parse_text(
            "args 3\nr0 = load arg0 f32\nstore arg1 r0 f32\nlaunch\nr5 = load arg0 f32\nr6 = neg r5\nstore arg2 r6 f32\n",
        )
        .unwrap();
        let (mut a, mut b, mut c) = (f32s(&[1.0, 2.0, 3.0]), f32s(&[0.0; 3]), f32s(&[0.0]));
        p.execute(&mut [&mut a, &mut b, &mut c]).unwrap();
        assert_eq!(b, f32s(&[1.0, 2.0, 3.0]));
        assert_eq!(c, f32s(&[-1.0]));
    }

    #[test]
    fn half_precision_conversions() {
        for v in [0.0f32, 1.0, -2.5, 65504.0, 6.1035156e-5, 5.9604645e-8] {
            assert_eq!(f16_to_f32(f32_to_f16(v)), v, "{v}");
        }
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
    }
}
