//! One reader of MLIR text for triton-npu.
//!
//! Parse a module once ([`Module::parse`]) and ask it what the backend needs:
//!
//! * its top-level items and functions ([`Module::functions`], [`Module::kernel`]): name,
//!   visibility, parameters (SSA name, [`Type`], attribute dictionary, location) and result
//!   types;
//! * the ops of a function body in order, with their results, name, operands, `ins`/`outs`
//!   operands and types, and nested regions ([`Op`], [`Module::walk`]); tensor and memref
//!   types taken apart into shape and element type ([`Type::shaped`]);
//! * the linalg ops and their operand types ([`Module::linalg_ops`]) and upstream's single
//!   matmul test ([`Module::single_matmul`]);
//! * which buffer parameters the kernel writes ([`Module::kernel_io`]);
//! * token-level edits that skip strings and comments ([`edit`]), for chain stitching.
//!
//! It reads printed MLIR — what `mlir-opt`-style tools emit, `--mlir-print-debuginfo`
//! included — not every text MLIR's own parser would accept: one operation per line (see
//! [`parse`]). Quoted strings are single tokens wherever they occur, so a location such as
//! `loc("path/with ) and -> and \" quotes":1:2)` never disturbs the structure. Any input gives
//! a module or a [`ParseError`] that says where (line:column) and what; nothing panics.

pub mod edit;
mod error;
pub mod lex;
mod linalg;
pub mod parse;
mod types;
mod writes;

pub use error::{ParseError, line_column};
pub use linalg::{LinalgOp, Matmul};
pub use parse::{AliasDef, Block, Func, Module, Op, Param, Region, Signature, Typed, Value};
pub use types::{Dim, Shaped, ShapedKind, Type};
pub use writes::{KernelIo, VIEW_OPS};
