//! The facts about a kernel's Linalg (triton-shared's output) that choosing and generating a
//! schedule needs: its linalg ops with their operand types, the tensors it loads and stores,
//! and which arith/math ops its bodies use.
//!
//! [`KernelSummary`] is deliberately small and plain, so that it can be filled from any MLIR
//! reader; [`summarize`] fills it from the text with this crate's tokenizer.

use std::collections::BTreeSet;

use crate::lex::Kind;
use crate::script::Script;

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
    pub line: u32,
}

/// What a schedule needs to know about a kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelSummary {
    /// The first `func.func`'s name.
    pub kernel: Option<String>,
    /// Every linalg op in order, except the region-only `linalg.yield` and `linalg.index`.
    pub linalg_ops: Vec<LinalgOp>,
    /// The types of the buffers loaded as tensors (`bufferization.to_tensor`), in order.
    pub loads: Vec<String>,
    /// The types of the tensors stored (`bufferization.materialize_in_destination`), in order.
    pub stores: Vec<String>,
    /// Every dotted op name that occurs (`arith.extf`, `math.exp`, `linalg.generic`, ...).
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

/// A ranked or unranked tensor/memref type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapedType {
    /// `tensor` or `memref`.
    pub container: String,
    /// `None` for an unranked type (`memref<*xf32>`); `Some(None)` entries are dynamic (`?`).
    pub dims: Option<Vec<Option<u64>>>,
    pub element: String,
}

impl ShapedType {
    /// Reads `tensor<32x64xf32>`, `memref<?xbf16, strided<[1], offset: ?>>`, `memref<*xi8>`.
    pub fn parse(text: &str) -> Option<ShapedType> {
        let text = text.trim();
        let open = text.find('<')?;
        let container = text[..open].trim().to_owned();
        if container != "tensor" && container != "memref" {
            return None;
        }
        let inner = text[open + 1..].strip_suffix('>')?;
        // The shape and element type come before any layout or memory space.
        let mut depth = 0i32;
        let shape_end = inner
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '<' | '[' | '(' => depth += 1,
                    '>' | ']' | ')' => depth -= 1,
                    ',' if depth == 0 => return true,
                    _ => {}
                }
                false
            })
            .map_or(inner.len(), |(i, _)| i);
        let shape = inner[..shape_end].trim();
        let parts: Vec<&str> = shape.split('x').collect();
        let is_dim = |p: &str| p == "?" || (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if parts.first() == Some(&"*") {
            return Some(ShapedType {
                container,
                dims: None,
                element: parts[1..].join("x"),
            });
        }
        let n = parts.iter().take_while(|p| is_dim(p)).count();
        let element = parts[n..].join("x");
        if element.is_empty() {
            return None;
        }
        let dims = parts[..n].iter().map(|p| p.parse().ok()).collect();
        Some(ShapedType {
            container,
            dims: Some(dims),
            element,
        })
    }

    /// The static sizes, when every dimension is static.
    pub fn static_dims(&self) -> Option<Vec<u64>> {
        self.dims.as_ref()?.iter().copied().collect()
    }
}

/// The element type of a shaped type's text (`f32` for `tensor<8xf32>`).
pub fn element_type(ty: &str) -> Option<String> {
    ShapedType::parse(ty).map(|t| t.element)
}

/// Summarizes triton-shared's Linalg text. Never fails: text that cannot be tokenized gives a
/// summary with [`KernelSummary::unreadable`] set.
pub fn summarize(linalg: &str) -> KernelSummary {
    let script = match Script::parse_at("kernel", linalg, 1, true) {
        Ok(s) => s,
        Err(e) => {
            return KernelSummary {
                unreadable: Some(e.to_string()),
                ..KernelSummary::default()
            };
        }
    };
    let mut summary = KernelSummary::default();
    let n = script.tokens.len();
    for i in 0..n {
        let t = script.tokens[i];
        if t.kind == Kind::Ident && t.text(&script.text) == "func.func" && summary.kernel.is_none()
        {
            summary.kernel = script
                .tokens
                .get(i + 1)
                .filter(|s| s.kind == Kind::Symbol)
                .map(|s| s.text(&script.text)[1..].trim_matches('"').to_owned());
        }
        if t.kind != Kind::Ident {
            continue;
        }
        let word = t.text(&script.text);
        if !word.contains('.') {
            continue;
        }
        summary.op_names.insert(word.to_owned());
        match word {
            "bufferization.to_tensor" => {
                if let Some(ty) = types_after_colon(&script, i).into_iter().next() {
                    summary.loads.push(ty);
                }
            }
            "bufferization.materialize_in_destination" => {
                if let Some(ty) = types_after_colon(&script, i).into_iter().next() {
                    summary.stores.push(ty);
                }
            }
            _ => {
                if let Some(name) = word.strip_prefix("linalg.")
                    && !matches!(name, "yield" | "index")
                {
                    let (inputs, outputs) = ins_outs(&script, i);
                    summary.linalg_ops.push(LinalgOp {
                        name: name.to_owned(),
                        inputs,
                        outputs,
                        line: t.line,
                    });
                }
            }
        }
    }
    summary
}

/// Whether token `k` begins another statement: `%x =`, `%x, %y =` or an op name.
fn starts_statement(script: &Script, k: usize) -> bool {
    let t = script.tokens[k];
    match t.kind {
        Kind::Value => {
            let mut j = k + 1;
            while script.tokens.get(j).is_some_and(|t| t.is_punct(b','))
                && script
                    .tokens
                    .get(j + 1)
                    .is_some_and(|t| t.kind == Kind::Value)
            {
                j += 2;
            }
            script.tokens.get(j).is_some_and(|t| t.is_punct(b'='))
        }
        Kind::Punct(b'}') => true,
        _ => false,
    }
}

/// The types after the first top-level `:` of the statement at `op`: one type, or the
/// parenthesized list of a functional type.
fn types_after_colon(script: &Script, op: usize) -> Vec<String> {
    let mut k = op + 1;
    while k < script.tokens.len() {
        let t = script.tokens[k];
        if starts_statement(script, k) {
            return Vec::new();
        }
        match t.kind {
            Kind::Punct(b':') => break,
            Kind::Punct(b'(' | b'[' | b'{') => k = script.partner(k).unwrap_or(k),
            _ => {}
        }
        k += 1;
    }
    k += 1;
    let Some(t) = script.tokens.get(k) else {
        return Vec::new();
    };
    if t.is_punct(b'(') {
        let close = script.partner(k).unwrap_or(k);
        return split_types(script, k + 1, close);
    }
    type_at(script, k)
        .map(|(text, _)| vec![text])
        .unwrap_or_default()
}

/// The `ins(...)` and `outs(...)` types of the linalg op at `op`.
fn ins_outs(script: &Script, op: usize) -> (Vec<String>, Vec<String>) {
    let mut ins = Vec::new();
    let mut outs = Vec::new();
    let mut k = op + 1;
    while k < script.tokens.len() {
        if starts_statement(script, k) {
            break;
        }
        let t = script.tokens[k];
        let word = (t.kind == Kind::Ident).then(|| t.text(&script.text));
        match (word, script.tokens.get(k + 1)) {
            (Some("ins"), Some(next)) if next.is_punct(b'(') => {
                let close = script.partner(k + 1).unwrap_or(k + 1);
                ins = group_types(script, k + 2, close);
                k = close;
            }
            (Some("outs"), Some(next)) if next.is_punct(b'(') => {
                let close = script.partner(k + 1).unwrap_or(k + 1);
                outs = group_types(script, k + 2, close);
                break;
            }
            _ => {
                if matches!(t.kind, Kind::Punct(b'(' | b'[' | b'{')) {
                    k = script.partner(k).unwrap_or(k);
                } else if t.kind == Kind::Ident && t.text(&script.text).contains('.') {
                    // The next op (in a region or after a terminator-less statement).
                    break;
                }
            }
        }
        k += 1;
    }
    (ins, outs)
}

/// In `%a, %b : T1, T2` (tokens `from..to`), the types after the top-level `:`.
fn group_types(script: &Script, from: usize, to: usize) -> Vec<String> {
    let mut k = from;
    while k < to {
        let t = script.tokens[k];
        if t.is_punct(b':') {
            return split_types(script, k + 1, to);
        }
        if matches!(t.kind, Kind::Punct(b'(' | b'[' | b'{')) {
            k = script.partner(k).unwrap_or(k);
        }
        k += 1;
    }
    Vec::new()
}

/// The comma-separated types of tokens `from..to`.
fn split_types(script: &Script, from: usize, to: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut k = from;
    while k < to {
        match type_at(script, k) {
            Some((text, end)) => {
                out.push(text);
                k = end + 1;
            }
            None => k += 1,
        }
        while k < to && script.tokens[k].is_punct(b',') {
            k += 1;
        }
    }
    out
}

/// The type starting at token `k` (a word with optional `<...>`): its text and last token.
fn type_at(script: &Script, k: usize) -> Option<(String, usize)> {
    let t = script.tokens.get(k)?;
    if !matches!(t.kind, Kind::Ident | Kind::Bang) {
        return None;
    }
    let mut end = k;
    if script.tokens.get(k + 1).is_some_and(|n| n.is_punct(b'<')) {
        let mut depth = 0i32;
        for j in k + 1..script.tokens.len() {
            match script.tokens[j].kind {
                Kind::Punct(b'<') => depth += 1,
                Kind::Punct(b'>') => {
                    depth -= 1;
                    if depth == 0 {
                        end = j;
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    Some((script.text[t.start..script.tokens[end].end].to_owned(), end))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of triton-shared's output for `c = a @ b` (after `--triton-to-linalg-experimental
    /// --mlir-print-debuginfo`), written for this test.
    pub(crate) const MATMUL: &str = r#"#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @mm(%arg0: memref<*xbf16> {tt.divisibility = 16 : i32}, %arg1: memref<*xbf16>, %arg2: memref<*xf32>, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32) {
    %cst = arith.constant 0.000000e+00 : f32 loc(#loc1)
    %0 = tensor.empty() : tensor<64x32xf32> loc(#loc1)
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<64x32xf32>) -> tensor<64x32xf32> loc(#loc1)
    %reinterpret_cast = memref.reinterpret_cast %arg0 to offset: [0], sizes: [64, 16], strides: [16, 1] : memref<*xbf16> to memref<64x16xbf16, strided<[16, 1]>> loc(#loc2)
    %alloc = memref.alloc() : memref<64x16xbf16> loc(#loc2)
    memref.copy %reinterpret_cast, %alloc : memref<64x16xbf16, strided<[16, 1]>> to memref<64x16xbf16> loc(#loc2)
    %2 = bufferization.to_tensor %alloc restrict writable : memref<64x16xbf16> to tensor<64x16xbf16> loc(#loc2)
    %reinterpret_cast_0 = memref.reinterpret_cast %arg1 to offset: [0], sizes: [16, 32], strides: [32, 1] : memref<*xbf16> to memref<16x32xbf16, strided<[32, 1]>> loc(#loc3)
    %alloc_1 = memref.alloc() : memref<16x32xbf16> loc(#loc3)
    memref.copy %reinterpret_cast_0, %alloc_1 : memref<16x32xbf16, strided<[32, 1]>> to memref<16x32xbf16> loc(#loc3)
    %3 = bufferization.to_tensor %alloc_1 restrict writable : memref<16x32xbf16> to tensor<16x32xbf16> loc(#loc3)
    %4 = linalg.matmul ins(%2, %3 : tensor<64x16xbf16>, tensor<16x32xbf16>) outs(%1 : tensor<64x32xf32>) -> tensor<64x32xf32> loc(#loc4)
    %reinterpret_cast_2 = memref.reinterpret_cast %arg2 to offset: [0], sizes: [64, 32], strides: [32, 1] : memref<*xf32> to memref<64x32xf32, strided<[32, 1]>> loc(#loc5)
    bufferization.materialize_in_destination %4 in writable %reinterpret_cast_2 : (tensor<64x32xf32>, memref<64x32xf32, strided<[32, 1]>>) -> () loc(#loc5)
    return loc(#loc6)
  } loc(#loc)
} loc(#loc)
#loc = loc("/home/u/mm.py":10:0)
#loc1 = loc("acc"("/home/u/mm.py":14:20))
#loc2 = loc(fused["/home/u/mm.py":15:16, "a)->b"])
#loc3 = loc("/home/u/mm.py":16:16)
#loc4 = loc("/home/u/mm.py":17:18)
#loc5 = loc("/home/u/mm.py":18:4)
#loc6 = loc("/home/u/mm.py":18:0)
"#;

    #[test]
    fn matmul_kernel() {
        let s = summarize(MATMUL);
        assert_eq!(s.unreadable, None);
        assert_eq!(s.kernel.as_deref(), Some("mm"));
        let names: Vec<&str> = s.linalg_ops.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["fill", "matmul"]);
        let mm = &s.linalg_ops[1];
        assert_eq!(mm.inputs, ["tensor<64x16xbf16>", "tensor<16x32xbf16>"]);
        assert_eq!(mm.outputs, ["tensor<64x32xf32>"]);
        assert_eq!(mm.line, 15);
        assert_eq!(s.linalg_ops[0].inputs, ["f32"]);
        assert_eq!(s.loads, ["memref<64x16xbf16>", "memref<16x32xbf16>"]);
        assert_eq!(s.stores, ["tensor<64x32xf32>"]);
        assert!(s.uses("arith.constant") && !s.uses("arith.extf"));
        assert!(s.non_elementwise_ops() == ["matmul"]);
    }

    #[test]
    fn elementwise_kernel_with_generics_and_masks() {
        let text = r#"#map = affine_map<(d0) -> (d0)>
module {
  func.func @add(%arg0: memref<*xf32>, %arg1: memref<*xf32>, %arg2: memref<*xf32>, %arg3: i32) {
    %alloc = memref.alloc() : memref<1024xf32>
    %subview = memref.subview %rc[0] [%8] [1] : memref<1024xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
    %0 = bufferization.to_tensor %alloc restrict writable : memref<1024xf32> to tensor<1024xf32>
    %1 = bufferization.to_tensor %alloc_0 restrict writable : memref<1024xf32>
    %2 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%0, %1 : tensor<1024xf32>, tensor<1024xf32>) outs(%0 : tensor<1024xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %3 = arith.addf %in, %in_1 : f32
      linalg.yield %3 : f32
    } -> tensor<1024xf32>
    %extracted_slice = tensor.extract_slice %2[0] [%8] [1] : tensor<1024xf32> to tensor<?xf32>
    bufferization.materialize_in_destination %extracted_slice in writable %subview_2 : (tensor<?xf32>, memref<?xf32, strided<[1], offset: ?>>) -> ()
    return
  }
}
"#;
        let s = summarize(text);
        assert_eq!(s.linalg_ops.len(), 1);
        assert_eq!(s.linalg_ops[0].name, "generic");
        assert_eq!(s.linalg_ops[0].inputs.len(), 2);
        assert_eq!(s.linalg_ops[0].outputs, ["tensor<1024xf32>"]);
        assert_eq!(s.loads.len(), 2);
        assert_eq!(s.stores, ["tensor<?xf32>"]);
        assert!(s.uses("arith.addf") && s.uses("linalg.yield"));
        assert!(s.non_elementwise_ops().is_empty());
    }

    #[test]
    fn shaped_types() {
        let t = ShapedType::parse("tensor<32x64xf32>").unwrap();
        assert_eq!(
            (t.container.as_str(), t.dims.clone(), t.element.as_str()),
            ("tensor", Some(vec![Some(32), Some(64)]), "f32")
        );
        assert_eq!(t.static_dims(), Some(vec![32, 64]));
        let t = ShapedType::parse("memref<?xbf16, strided<[1], offset: ?>>").unwrap();
        assert_eq!((t.dims, t.element.as_str()), (Some(vec![None]), "bf16"));
        let t = ShapedType::parse("memref<*xi8>").unwrap();
        assert_eq!((t.dims, t.element.as_str()), (None, "i8"));
        let t = ShapedType::parse("tensor<f32>").unwrap();
        assert_eq!(t.static_dims(), Some(vec![]));
        assert_eq!(ShapedType::parse("vector<4xf32>"), None);
        assert_eq!(ShapedType::parse("tensor<32x>"), None);
        assert_eq!(element_type("tensor<8xi32>").as_deref(), Some("i32"));
    }

    #[test]
    fn unreadable_text() {
        let s = summarize("this is; not MLIR");
        assert!(s.unreadable.is_some());
        assert!(s.linalg_ops.is_empty());
    }
}
