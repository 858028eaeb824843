//! The module's linalg ops, summarised for decisions such as upstream's automatic matmul
//! schedule (`_detect_matmul`).

use crate::parse::Module;
use crate::types::Type;

/// One linalg op: its name and the types of its `ins` and `outs` operands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinalgOp<'a> {
    /// `linalg.matmul`, `linalg.fill`, `linalg.generic`, `linalg.yield`, …
    pub name: &'a str,
    /// The `ins(…)` types, in order (operands printed without a type are left out).
    pub inputs: Vec<Type<'a>>,
    /// The `outs(…)` types, in order.
    pub outputs: Vec<Type<'a>>,
}

/// A single plain matmul: `ins(tensor<MxKxT>, tensor<KxNxT>) outs(tensor<MxNxU>)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Matmul<'a> {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// `T`, the element type of both inputs.
    pub input: &'a str,
    /// `U`, the element type of the output.
    pub output: &'a str,
}

impl<'a> Module<'a> {
    /// Every op named `linalg.*`, nested ones included (a generic's `linalg.yield` too), in
    /// textual order.
    pub fn linalg_ops(&self) -> Vec<LinalgOp<'a>> {
        self.walk()
            .filter(|op| op.name.starts_with("linalg."))
            .map(|op| LinalgOp {
                name: op.name,
                inputs: op.ins.iter().filter_map(|t| t.ty).collect(),
                outputs: op.outs.iter().filter_map(|t| t.ty).collect(),
            })
            .collect()
    }

    /// Upstream's `_detect_matmul` test: exactly one `linalg.matmul`, no linalg op other than
    /// `matmul` and `fill`, and static 2-D tensor operands whose shapes agree
    /// (`M×K · K×N → M×N`) with one input element type.
    pub fn single_matmul(&self) -> Option<Matmul<'a>> {
        let ops = self.linalg_ops();
        if ops
            .iter()
            .any(|op| !matches!(op.name, "linalg.matmul" | "linalg.fill"))
        {
            return None;
        }
        let mut matmuls = ops.iter().filter(|op| op.name == "linalg.matmul");
        let (Some(mm), None) = (matmuls.next(), matmuls.next()) else {
            return None;
        };
        let [a, b] = mm.inputs.as_slice() else {
            return None;
        };
        let [c] = mm.outputs.as_slice() else {
            return None;
        };
        let matrix = |t: &Type<'a>| {
            let s = t.shaped().filter(|s| s.kind == crate::ShapedKind::Tensor)?;
            match s.static_shape()?.as_slice() {
                [rows, cols] => Some((*rows, *cols, s.element)),
                _ => None,
            }
        };
        let ((m, k, input), (k2, n, input2), (m2, n2, output)) =
            (matrix(a)?, matrix(b)?, matrix(c)?);
        (k == k2 && m == m2 && n == n2 && input == input2).then_some(Matmul {
            m,
            n,
            k,
            input,
            output,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F32_MM: &str = "%0 = linalg.fill ins(%cst : f32) outs(%e : tensor<32x32xf32>) -> tensor<32x32xf32>\n\
        %1 = linalg.matmul ins(%a, %b : tensor<32x64xf32>, tensor<64x32xf32>) outs(%0 : tensor<32x32xf32>) -> tensor<32x32xf32>\n";

    fn matmul(text: &str) -> Option<Matmul<'_>> {
        Module::parse(text).unwrap().single_matmul()
    }

    #[test]
    fn linalg_ops_with_their_types() {
        let m = Module::parse(F32_MM).unwrap();
        let ops = m.linalg_ops();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0].name, "linalg.fill");
        assert_eq!(ops[0].inputs, [Type("f32")]);
        assert_eq!(ops[0].outputs, [Type("tensor<32x32xf32>")]);
        assert_eq!(
            ops[1].inputs,
            [Type("tensor<32x64xf32>"), Type("tensor<64x32xf32>")]
        );
    }

    #[test]
    fn upstream_matmul_detection() {
        assert_eq!(
            matmul(F32_MM),
            Some(Matmul {
                m: 32,
                n: 32,
                k: 64,
                input: "f32",
                output: "f32"
            })
        );
        let bf16 = F32_MM
            .replace("tensor<32x64xf32>", "tensor<32x64xbf16>")
            .replace("tensor<64x32xf32>", "tensor<64x32xbf16>");
        assert_eq!(
            matmul(&bf16).map(|m| (m.input, m.output)),
            Some(("bf16", "f32"))
        );
        // Anything else linalg turns it off: an epilogue, a second matmul, a transpose.
        let with_generic =
            format!("{F32_MM}%2 = linalg.generic {{}} ins(%1 : tensor<32x32xf32>)\n");
        assert_eq!(matmul(&with_generic), None);
        assert_eq!(matmul(&format!("{F32_MM}{F32_MM}")), None);
        assert_eq!(matmul("%1 = linalg.generic ins(%a : tensor<8xf32>)"), None);
        // Shapes must agree and be static 2-D tensors, inputs of one type.
        assert_eq!(
            matmul(&F32_MM.replace("tensor<64x32xf32>", "tensor<63x32xf32>")),
            None
        );
        assert_eq!(
            matmul(&F32_MM.replace("tensor<32x64xf32>", "tensor<?x64xf32>")),
            None
        );
        assert_eq!(
            matmul(&F32_MM.replace("tensor<64x32xf32>", "tensor<64x32xbf16>")),
            None
        );
        let memrefs = "linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)";
        assert_eq!(matmul(memrefs), None);
    }
}
