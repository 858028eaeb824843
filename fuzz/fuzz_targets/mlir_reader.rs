//! The MLIR reader on arbitrary text: it may refuse, never panic; an error's line and column
//! match its offset, and what it accepts holds together (spans inside the text, every
//! question answerable, token edits that change nothing give the text back).
#![no_main]

use libfuzzer_sys::fuzz_target;
use npu_mlir::{Module, edit, line_column};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();
    match Module::parse(text) {
        Err(e) => {
            assert!(e.offset <= text.len());
            assert_eq!(line_column(text, e.offset), (e.line, e.column), "{e}");
        }
        Ok(module) => {
            for op in module.walk() {
                assert_eq!(&text[op.span.clone()], op.text);
                for region in &op.regions {
                    assert!(op.span.start <= region.span.start && region.span.end <= op.span.end);
                    assert!(region.span.start < region.inner.start);
                }
                for v in op.operands.iter().chain(&op.bindings) {
                    assert_eq!(&text[v.offset..v.offset + v.name.len()], v.name);
                }
                for t in op.ins.iter().chain(&op.outs) {
                    if let Some(ty) = t.ty {
                        let _ = ty.shaped().map(|s| s.static_shape());
                    }
                }
            }
            for f in module.functions() {
                for p in f.params().iter().chain(&f.signature.results) {
                    let _ = p.ty.shaped();
                }
                let _ = f.kernel_io();
            }
            let _ = module.kernel_io();
            let _ = module.linalg_ops();
            let _ = module.single_matmul();
            // Text that parses also lexes for the token edits.
            assert_eq!(edit::rename(text, |_, _| None).unwrap(), text);
            let _ = edit::strip_locations(text).unwrap();
        }
    }
});
