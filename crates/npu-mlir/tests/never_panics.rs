//! Any text gives a module or an error whose position matches its offset; never a panic.
//! (The cargo-fuzz target `mlir_reader` in fuzz/ explores further.)

use npu_mlir::{Module, edit, line_column};
use proptest::prelude::*;

/// Pieces of MLIR syntax, so that random texts reach deep into the parser.
const PIECES: &[&str] = &[
    "module",
    "func.func",
    "@k",
    "@\"q\"",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    "{-#",
    "#-}",
    "%arg0",
    "%0",
    ":",
    ",",
    "=",
    "->",
    ">=",
    "\n",
    " ",
    "memref<*xf32>",
    "tensor<4x?xf32>",
    "i32",
    "loc(",
    "\"a ) -> \\\" b\"",
    "#loc1",
    "!t",
    "^bb0",
    "ins(",
    "outs(",
    "attributes",
    "linalg.matmul",
    "linalg.fill",
    "memref.copy",
    "memref.subview",
    "return",
    "private",
    "in",
    "// c\n",
    "x",
    "*",
    "?",
    "0",
    "ü",
];

fn check(text: &str) {
    match Module::parse(text) {
        Err(e) => {
            assert!(e.offset <= text.len());
            assert_eq!(line_column(text, e.offset), (e.line, e.column));
        }
        Ok(m) => {
            for op in m.walk() {
                assert_eq!(&text[op.span.clone()], op.text);
            }
            let _ = (m.kernel_io(), m.linalg_ops(), m.single_matmul());
            assert_eq!(edit::rename(text, |_, _| None).unwrap(), text);
        }
    }
}

proptest! {
    #[test]
    fn syntax_soup(pieces in prop::collection::vec(prop::sample::select(PIECES), 0..60)) {
        check(&pieces.concat());
    }

    #[test]
    fn printable_noise(text in "[ -~\n]{0,300}") {
        check(&text);
    }
}
