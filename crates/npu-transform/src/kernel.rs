//! The facts about a kernel's Linalg (triton-shared's output) that choosing and generating a
//! schedule needs: its linalg ops with their operand types, the tensors it loads, the buffers
//! it writes, and which ops its bodies use. Read with npu-mlir, the project's MLIR reader.

use std::collections::BTreeSet;

use npu_mlir::{Module, ShapedKind, Type};

/// One linalg op: `linalg.matmul ins(%a, %b : tensor<32x64xf32>, tensor<64x32xf32>)
/// outs(%c : tensor<32x32xf32>)` is `{name: "matmul", inputs: [..], outputs: [..]}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinalgOp {
    /// Without the `linalg.` prefix.
    pub name: String,
    /// The `ins(...)` types as written.
    pub inputs: Vec<String>,
    /// The `outs(...)` types as written.
    pub outputs: Vec<String>,
}

/// What a schedule needs to know about a kernel. Plain data, so that tests (and other
/// readers) can build one directly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelSummary {
    /// The kernel function's name.
    pub kernel: Option<String>,
    /// Every linalg op in order, except the region-only `linalg.yield` and `linalg.index`.
    pub linalg_ops: Vec<LinalgOp>,
    /// The types of the loaded tensors (results of `bufferization.to_tensor`) that linalg ops
    /// take as inputs, in the order they are loaded.
    pub loads: Vec<String>,
    /// The types of the buffer parameters the kernel writes (`memref<*xf32>`), in order.
    pub stores: Vec<String>,
    /// Every op name that occurs, nested ones included (`arith.extf`, `math.exp`, ...).
    pub op_names: BTreeSet<String>,
    /// Set when the text could not be read; the other fields are then empty.
    pub unreadable: Option<String>,
}

impl KernelSummary {
    pub fn uses(&self, op: &str) -> bool {
        self.op_names.contains(op)
    }

    /// The ops that are not `linalg.generic` or `linalg.fill`.
    pub fn non_elementwise_ops(&self) -> Vec<&str> {
        self.linalg_ops
            .iter()
            .map(|o| o.name.as_str())
            .filter(|n| !matches!(*n, "generic" | "fill"))
            .collect()
    }
}

/// The element type of a tensor or memref type's text (`f32` for `tensor<8xf32>`).
pub fn element_type(ty: &str) -> Option<String> {
    Type(ty).element_type().map(str::to_owned)
}

/// The static shape of a tensor type's text (`[32, 64]` for `tensor<32x64xf32>`).
pub fn tensor_shape(ty: &str) -> Option<Vec<u64>> {
    Type(ty)
        .shaped()
        .filter(|s| s.kind == ShapedKind::Tensor)?
        .static_shape()
}

/// Summarizes triton-shared's Linalg text. Never fails: text that cannot be read gives a
/// summary with [`KernelSummary::unreadable`] set.
pub fn summarize(linalg: &str) -> KernelSummary {
    match Module::parse(linalg) {
        Ok(module) => from_module(&module),
        Err(e) => KernelSummary {
            unreadable: Some(e.to_string()),
            ..KernelSummary::default()
        },
    }
}

/// Summarizes a parsed module.
pub fn from_module(module: &Module<'_>) -> KernelSummary {
    let linalg_ops = module
        .linalg_ops()
        .into_iter()
        .filter_map(|op| {
            let name = op.name.strip_prefix("linalg.")?;
            (!matches!(name, "yield" | "index")).then(|| LinalgOp {
                name: name.to_owned(),
                inputs: op.inputs.iter().map(|t| t.0.to_owned()).collect(),
                outputs: op.outputs.iter().map(|t| t.0.to_owned()).collect(),
            })
        })
        .collect();
    // A loaded tensor's type, as the linalg op that computes with it declares it.
    let loads = module
        .walk()
        .filter(|op| op.name == "bufferization.to_tensor")
        .filter_map(|op| op.results.first().copied())
        .filter_map(|loaded| {
            module
                .walk()
                .flat_map(|op| op.ins.iter())
                .find(|operand| operand.value == loaded)
                .and_then(|operand| operand.ty)
                .map(|ty| ty.0.to_owned())
        })
        .collect();
    let stores = module
        .kernel()
        .map(|f| {
            let io = f.kernel_io();
            if !io.derived {
                return Vec::new();
            }
            f.buffers()
                .zip(io.written)
                .filter(|(_, written)| *written)
                .map(|(p, _)| p.ty.0.to_owned())
                .collect()
        })
        .unwrap_or_default();
    KernelSummary {
        kernel: module.kernel().map(|f| f.name().to_owned()),
        linalg_ops,
        loads,
        stores,
        op_names: module.walk().map(|op| op.name.to_owned()).collect(),
        unreadable: None,
    }
}

/// A kernel's Linalg text together with its [`KernelSummary`], made by one parse: the build
/// pipeline reads a kernel once and hands this to every step that needs its facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linalg {
    text: String,
    summary: KernelSummary,
}

impl Linalg {
    /// Parses `text` once: the summary, and whatever else `facts` reads from the same module.
    pub fn read_with<T>(
        text: String,
        facts: impl FnOnce(&Module<'_>) -> T,
    ) -> Result<(Linalg, T), npu_mlir::ParseError> {
        let (summary, extra) = {
            let module = Module::parse(&text)?;
            (from_module(&module), facts(&module))
        };
        Ok((Linalg { text, summary }, extra))
    }

    /// Text that cannot be parsed is kept, with [`KernelSummary::unreadable`] set: the tools
    /// then report what is wrong with it in their own words.
    pub fn read(text: String) -> Linalg {
        let summary = summarize(&text);
        Linalg { text, summary }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn summary(&self) -> &KernelSummary {
        &self.summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{axpy_linalg, matmul_linalg};

    #[test]
    fn matmul_kernel() {
        let s = summarize(&matmul_linalg(64, 32, 16, "bf16"));
        assert_eq!(s.unreadable, None);
        assert_eq!(s.kernel.as_deref(), Some("mm"));
        let names: Vec<&str> = s.linalg_ops.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["fill", "matmul"]);
        let mm = &s.linalg_ops[1];
        assert_eq!(mm.inputs, ["tensor<64x16xbf16>", "tensor<16x32xbf16>"]);
        assert_eq!(mm.outputs, ["tensor<64x32xf32>"]);
        assert_eq!(s.linalg_ops[0].inputs, ["f32"]);
        assert_eq!(s.loads, ["tensor<64x16xbf16>", "tensor<16x32xbf16>"]);
        assert_eq!(s.stores, ["memref<*xf32>"]);
        assert!(s.uses("arith.constant") && !s.uses("arith.extf"));
        assert_eq!(s.non_elementwise_ops(), ["matmul"]);
    }

    #[test]
    fn elementwise_kernel_with_masks_and_a_scalar() {
        let s = summarize(&axpy_linalg("f32"));
        assert_eq!(s.unreadable, None, "{:?}", s.unreadable);
        let names: Vec<&str> = s.linalg_ops.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["fill", "generic", "generic"]);
        // x and y; alpha is a scalar filled into a tensor, not a load.
        assert_eq!(s.loads, ["tensor<1024xf32>", "tensor<1024xf32>"]);
        assert_eq!(s.stores, ["memref<*xf32>"]);
        assert!(s.uses("arith.mulf") && s.uses("arith.addf") && s.uses("linalg.yield"));
        assert!(s.non_elementwise_ops().is_empty());
    }

    #[test]
    fn types() {
        assert_eq!(element_type("tensor<8xi32>").as_deref(), Some("i32"));
        assert_eq!(element_type("memref<*xbf16>").as_deref(), Some("bf16"));
        assert_eq!(element_type("f32"), None);
        assert_eq!(tensor_shape("tensor<32x64xf32>"), Some(vec![32, 64]));
        assert_eq!(tensor_shape("tensor<?xf32>"), None);
        assert_eq!(tensor_shape("memref<4xf32>"), None);
    }

    #[test]
    fn unreadable_text() {
        let s = summarize("module {\n  func.func @k() {\n");
        assert!(s.unreadable.is_some());
        assert!(s.linalg_ops.is_empty());
    }
}
