//! The harness's kernel encoding (tests only; never shipped).
//!
//! No AIE toolchain or NPU exists on the development machines, so the stand-in toolchain
//! records what a Triton kernel computes as a *harness program* — a small tensor IR whose ops
//! mirror the TTIR Triton's frontend printed (ranges, splats, broadcasts, pointer arithmetic,
//! masked loads and stores, `arith`/`math`, `dot`, `reduce`, program ids) — and the software
//! devices (the HSA agent and the XRT stand-in) interpret it once per program instance of the
//! launch grid over the buffers a dispatch hands them. Results then depend on the data that
//! really flowed through the driver: a dropped argument, a wrong size, a wrong grid or a missed
//! write-back changes the output.
//!
//! A program has a text form (carried in IR files between the stand-in tools, see [`text`])
//! and a binary form (32-bit little-endian words, see [`binary`]; stored as `insts.bin` for
//! xclbin/pdi and as the `.ctrltext` control code of a full ELF). See
//! `tests/harness/README.md` for both and for every precision rule.

mod binary;
mod check;
mod dot;
mod dtype;
mod exec;
mod ops;
mod padding;
pub mod samples;
mod text;

pub use check::{Elem, MAX_BLOCK, Type};
pub use dtype::{DType, bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
pub use ops::{BinOp, CastOp, FPred, IPred, Op, Shape, UnOp, V};

/// `"NPUH"` read as a little-endian word.
pub const MAGIC: u32 = u32::from_le_bytes(*b"NPUH");
/// Version 2: the tensor IR (version 1 was a register program over whole buffers).
pub const VERSION: u32 = 2;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProgramError {
    #[error("not a harness program: {0}")]
    Format(String),
    #[error("harness program text, line {line}: {reason}")]
    Text { line: usize, reason: String },
    #[error("cannot execute: {0}")]
    Execute(String),
}

/// A kernel: how many buffer arguments it takes and what it computes.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub num_args: u8,
    /// aircc ran with `--bf16-emulation`: f32 `dot` inputs are rounded to bf16.
    pub bf16_emulation: bool,
    /// The ops of every launch, launches separated by [`Op::Launch`].
    pub ops: Vec<Op>,
}

impl Program {
    /// Checks types, shapes, value and argument references.
    pub fn validate(&self) -> Result<(), ProgramError> {
        check::check(self).map(|_| ())
    }

    /// The types of each launch's values (the program must be valid).
    pub fn types(&self) -> Result<Vec<Vec<Type>>, ProgramError> {
        check::check(self)
    }

    /// The arguments the program stores to, one flag per argument.
    pub fn written_args(&self) -> Vec<bool> {
        let mut written = vec![false; self.num_args as usize];
        let Ok(types) = check::check(self) else {
            return written;
        };
        for (ops, types) in self.ops.split(|op| matches!(op, Op::Launch)).zip(&types) {
            for op in ops {
                if let Op::Store { ptr, .. } = op
                    && let Some(Type {
                        elem: Elem::Ptr { arg, .. },
                        ..
                    }) = types.get(*ptr as usize)
                    && let Some(slot) = written.get_mut(*arg as usize)
                {
                    *slot = true;
                }
            }
        }
        written
    }

    /// How many launches the program has (1 for a plain kernel).
    pub fn launches(&self) -> usize {
        1 + self
            .ops
            .iter()
            .filter(|op| matches!(op, Op::Launch))
            .count()
    }

    /// Each launch's grid (`1 1 1` when it names none).
    pub fn grids(&self) -> Vec<[u32; 3]> {
        self.ops
            .split(|op| matches!(op, Op::Launch))
            .map(|ops| {
                ops.iter()
                    .find_map(|op| match op {
                        Op::Grid(g) => Some(*g),
                        _ => None,
                    })
                    .unwrap_or([1, 1, 1])
            })
            .collect()
    }

    /// Gives every launch that names no grid `grid` (the stand-in air-opt's
    /// `air-wrap-func-with-parallel{loop-bounds=…}` decides it); launches that name one keep it.
    pub fn set_grid(&mut self, grid: [u32; 3]) {
        let mut out = Vec::with_capacity(self.ops.len() + 1);
        let mut launch_start = true;
        for op in self.ops.drain(..) {
            if launch_start && !matches!(op, Op::Grid(_)) {
                out.push(Op::Grid(grid));
            }
            launch_start = matches!(op, Op::Launch);
            out.push(op);
        }
        if launch_start {
            out.push(Op::Grid(grid));
        }
        self.ops = out;
    }

    /// Gives every launch `sizes` as its actual sizes, right after its grid (the stand-in
    /// air-opt's `air-wrap-func-with-parallel{actual-sizes=M,N,K}`); call after
    /// [`Program::set_grid`]. A launch that has actual sizes keeps them.
    pub fn set_actual_sizes(&mut self, sizes: [u32; 3]) {
        let mut out = Vec::with_capacity(self.ops.len() + 1);
        let mut ops = std::mem::take(&mut self.ops).into_iter().peekable();
        while let Some(op) = ops.next() {
            let after_grid = matches!(op, Op::Grid(_));
            out.push(op);
            if after_grid && !matches!(ops.peek(), Some(Op::Actual(_))) {
                out.push(Op::Actual(sizes));
            }
        }
        self.ops = out;
    }

    /// The binary form (see [`binary`]).
    pub fn encode(&self) -> Vec<u8> {
        binary::encode(self)
    }

    /// Reads the binary form from the start of `bytes` and checks it.
    pub fn decode(bytes: &[u8]) -> Result<Program, ProgramError> {
        binary::decode(bytes)
    }

    /// Parses the text form (see [`text`]) and checks it.
    pub fn parse_text(text: &str) -> Result<Program, ProgramError> {
        text::parse(text)
    }

    /// Runs every launch once per program instance of its grid over `args` (one byte buffer
    /// per kernel argument, in order). A launch with a `tiling` stores only the elements of
    /// the tiles its herd's cores compute.
    pub fn execute(&self, args: &mut [&mut [u8]]) -> Result<(), ProgramError> {
        let types = check::check(self)?;
        exec::execute(self, &types, args)
    }

    /// Gives every launch that has none the herd and tiles of the transform schedule (the
    /// stand-in air-opt's `air-transform` decides them), right after its grid.
    pub fn set_tiling(&mut self, herd: [u32; 2], domain: &[u32], tiles: &[u32]) {
        self.set_tilings(&[(herd, domain.to_vec(), tiles.to_vec())]);
    }

    /// [`Program::set_tiling`] for a schedule of several herds (`(herd, domain, tiles)` each,
    /// in the order the schedule made them): every one describes the launch.
    pub fn set_tilings(&mut self, herds: &[([u32; 2], Vec<u32>, Vec<u32>)]) {
        let tilings: Vec<Op> = herds
            .iter()
            .map(|(herd, domain, tiles)| Op::Tiling {
                herd: *herd,
                domain: domain.clone(),
                tiles: tiles.clone(),
            })
            .collect();
        let mut out = Vec::with_capacity(self.ops.len() + 2);
        let mut launches: Vec<Vec<Op>> = self
            .ops
            .drain(..)
            .collect::<Vec<_>>()
            .split(|op| matches!(op, Op::Launch))
            .map(<[Op]>::to_vec)
            .collect();
        let count = launches.len();
        for (k, launch) in launches.iter_mut().enumerate() {
            if !launch.iter().any(|op| matches!(op, Op::Tiling { .. })) {
                let at = usize::from(matches!(launch.first(), Some(Op::Grid(_))));
                launch.splice(at..at, tilings.iter().cloned());
            }
            out.append(launch);
            if k + 1 < count {
                out.push(Op::Launch);
            }
        }
        self.ops = out;
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod dot_tests;
