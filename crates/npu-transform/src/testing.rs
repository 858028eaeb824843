//! Test helpers: the checks MLIR's parser and verifier would make on an expanded script that
//! matter for expansion (every value defined once and before its use within its sequence,
//! every symbol defined, no include left), and Linalg fixtures in triton-shared's shape.

use std::collections::HashSet;

use npu_mlir::lex::{Bracket, Kind};

use crate::script::Script;

/// Checks an expanded script; `Err` says what is wrong and where.
pub fn check_closed(text: &str) -> Result<(), String> {
    let script = Script::parse("expanded", text).map_err(|e| e.to_string())?;
    if let Some(inc) = script.includes.first() {
        return Err(format!(
            "line {}: transform.include @{} is left",
            inc.line, inc.callee
        ));
    }
    let defined: HashSet<&str> = script.sequences.iter().map(|s| s.name.as_str()).collect();
    for fm in &script.foreach_matches {
        for sym in &fm.symbols {
            if !defined.contains(sym.as_str()) {
                return Err(format!("line {}: @{sym} is not defined", fm.line));
            }
        }
    }
    for seq in &script.sequences {
        let Some((open, close)) = seq.body else {
            continue;
        };
        let mut known: HashSet<String> = seq.params.iter().map(|p| p.name.clone()).collect();
        let mut k = open + 1;
        while k < close {
            let t = script.tokens[k];
            // Block arguments: `^bb0(%a: type, ...)`.
            if t.kind == Kind::Block && script.is_open(k + 1, Bracket::Paren) {
                let end = script.partner(k + 1).unwrap_or(k + 1);
                for j in k + 2..end {
                    if script.tokens[j].kind == Kind::Value {
                        define(&mut known, script.tok(j), script.line(j))?;
                    }
                }
                k = end + 1;
                continue;
            }
            if t.kind == Kind::Value {
                let defs = result_list(&script, k);
                if defs.is_empty() {
                    if !known.contains(script.tok(k)) {
                        return Err(format!(
                            "line {}: {} is used in @{} but never defined before",
                            script.line(k),
                            script.tok(k),
                            seq.name
                        ));
                    }
                } else {
                    for &d in &defs {
                        define(&mut known, script.tok(d), script.line(d))?;
                    }
                    k = *defs.last().unwrap_or(&k);
                }
            }
            k += 1;
        }
    }
    Ok(())
}

fn define(known: &mut HashSet<String>, name: &str, line: u32) -> Result<(), String> {
    if !known.insert(name.to_owned()) {
        return Err(format!("line {line}: {name} is defined twice"));
    }
    Ok(())
}

/// If token `k` starts `%a, %b:2 = ...`, the value tokens it defines.
fn result_list(script: &Script, k: usize) -> Vec<usize> {
    let mut defs = Vec::new();
    let mut j = k;
    loop {
        if script.tokens.get(j).map(|t| t.kind) != Some(Kind::Value) {
            return Vec::new();
        }
        defs.push(j);
        j += 1;
        if script.tokens.get(j).is_some_and(|t| t.is_punct(b':'))
            && script
                .tokens
                .get(j + 1)
                .is_some_and(|t| t.kind == Kind::Number)
        {
            j += 2;
        }
        if script.tokens.get(j).is_some_and(|t| t.is_punct(b',')) {
            j += 1;
            continue;
        }
        break;
    }
    if script.tokens.get(j).is_some_and(|t| t.is_punct(b'=')) {
        defs
    } else {
        Vec::new()
    }
}

/// triton-shared's output for `c = a @ b` (64x16 · 16x32, f32 accumulator), in its real
/// shape: fill + matmul on tensors, loads as reinterpret_cast/alloc/copy/to_tensor, the store
/// as materialize_in_destination, debuginfo locations. `ELEM` stands for the input type.
pub const MATMUL_TEMPLATE: &str = r#"#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @mm(%arg0: memref<*xELEM> {tt.divisibility = 16 : i32}, %arg1: memref<*xELEM>, %arg2: memref<*xACC>, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32) {
    %cst = arith.constant 0 : ACC loc(#loc1)
    %0 = tensor.empty() : tensor<MxNxACC> loc(#loc1)
    %1 = linalg.fill ins(%cst : ACC) outs(%0 : tensor<MxNxACC>) -> tensor<MxNxACC> loc(#loc1)
    %reinterpret_cast = memref.reinterpret_cast %arg0 to offset: [0], sizes: [M, K], strides: [K, 1] : memref<*xELEM> to memref<MxKxELEM, strided<[K, 1]>> loc(#loc2)
    %alloc = memref.alloc() : memref<MxKxELEM> loc(#loc2)
    memref.copy %reinterpret_cast, %alloc : memref<MxKxELEM, strided<[K, 1]>> to memref<MxKxELEM> loc(#loc2)
    %2 = bufferization.to_tensor %alloc restrict writable : memref<MxKxELEM> to tensor<MxKxELEM> loc(#loc2)
    %reinterpret_cast_0 = memref.reinterpret_cast %arg1 to offset: [0], sizes: [K, N], strides: [N, 1] : memref<*xELEM> to memref<KxNxELEM, strided<[N, 1]>> loc(#loc3)
    %alloc_1 = memref.alloc() : memref<KxNxELEM> loc(#loc3)
    memref.copy %reinterpret_cast_0, %alloc_1 : memref<KxNxELEM, strided<[N, 1]>> to memref<KxNxELEM> loc(#loc3)
    %3 = bufferization.to_tensor %alloc_1 restrict writable : memref<KxNxELEM> to tensor<KxNxELEM> loc(#loc3)
    %4 = linalg.matmul ins(%2, %3 : tensor<MxKxELEM>, tensor<KxNxELEM>) outs(%1 : tensor<MxNxACC>) -> tensor<MxNxACC> loc(#loc4)
    %reinterpret_cast_2 = memref.reinterpret_cast %arg2 to offset: [0], sizes: [M, N], strides: [N, 1] : memref<*xACC> to memref<MxNxACC, strided<[N, 1]>> loc(#loc5)
    bufferization.materialize_in_destination %4 in writable %reinterpret_cast_2 : (tensor<MxNxACC>, memref<MxNxACC, strided<[N, 1]>>) -> () loc(#loc5)
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

/// [`MATMUL_TEMPLATE`] for sizes and an input type (the accumulator follows upstream's rule:
/// i32 for i8, f32 otherwise).
pub fn matmul_linalg(m: u64, n: u64, k: u64, elem: &str) -> String {
    let (acc, zero) = if elem == "i8" {
        ("i32", "0")
    } else {
        ("f32", "0.000000e+00")
    };
    MATMUL_TEMPLATE
        .replace("constant 0 :", &format!("constant {zero} :"))
        .replace("MxNx", &format!("{m}x{n}x"))
        .replace("MxKx", &format!("{m}x{k}x"))
        .replace("KxNx", &format!("{k}x{n}x"))
        .replace("[M, K]", &format!("[{m}, {k}]"))
        .replace("[K, N]", &format!("[{k}, {n}]"))
        .replace("[M, N]", &format!("[{m}, {n}]"))
        .replace("[K, 1]", &format!("[{k}, 1]"))
        .replace("[N, 1]", &format!("[{n}, 1]"))
        .replace("ELEM", elem)
        .replace("ACC", acc)
}

/// triton-shared's unfused output for `out = x * alpha + y` over one masked 1024-block: a
/// splat fill for the scalar, one generic per operation, masked loads and store.
pub fn axpy_linalg(elem: &str) -> String {
    let (mul, add) = if elem.starts_with('i') {
        ("arith.muli", "arith.addi")
    } else {
        ("arith.mulf", "arith.addf")
    };
    AXPY_TEMPLATE
        .replace("ELEM", elem)
        .replace("MUL", mul)
        .replace("ADD", add)
}

const AXPY_TEMPLATE: &str = r#"#map = affine_map<(d0) -> (d0)>
module {
  func.func @axpy(%arg0: memref<*xELEM> {tt.divisibility = 16 : i32}, %arg1: memref<*xELEM> {tt.divisibility = 16 : i32}, %arg2: memref<*xELEM> {tt.divisibility = 16 : i32}, %arg3: ELEM, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32, %arg10: i32) {
    %c1024 = arith.constant 1024 : index loc(#loc1)
    %c1024_i32 = arith.constant 1024 : i32 loc(#loc1)
    %0 = tensor.empty() : tensor<1024xELEM> loc(#loc2)
    %1 = linalg.fill ins(%arg3 : ELEM) outs(%0 : tensor<1024xELEM>) -> tensor<1024xELEM> loc(#loc2)
    %2 = arith.muli %arg8, %c1024_i32 : i32 loc(#loc1)
    %3 = arith.index_cast %2 : i32 to index loc(#loc1)
    %4 = arith.addi %3, %c1024 : index loc(#loc3)
    %5 = arith.index_cast %arg4 : i32 to index loc(#loc3)
    %6 = arith.minsi %4, %5 : index loc(#loc3)
    %7 = arith.subi %6, %3 : index loc(#loc3)
    %reinterpret_cast = memref.reinterpret_cast %arg0 to offset: [%3], sizes: [1024], strides: [1] : memref<*xELEM> to memref<1024xELEM, strided<[1], offset: ?>> loc(#loc3)
    %alloc = memref.alloc() : memref<1024xELEM> loc(#loc3)
    %subview = memref.subview %reinterpret_cast[0] [%7] [1] : memref<1024xELEM, strided<[1], offset: ?>> to memref<?xELEM, strided<[1], offset: ?>> loc(#loc3)
    %subview_0 = memref.subview %alloc[0] [%7] [1] : memref<1024xELEM> to memref<?xELEM, strided<[1]>> loc(#loc3)
    memref.copy %subview, %subview_0 : memref<?xELEM, strided<[1], offset: ?>> to memref<?xELEM, strided<[1]>> loc(#loc3)
    %8 = bufferization.to_tensor %alloc restrict writable : memref<1024xELEM> to tensor<1024xELEM> loc(#loc3)
    %9 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%8, %1 : tensor<1024xELEM>, tensor<1024xELEM>) outs(%8 : tensor<1024xELEM>) {
    ^bb0(%in: ELEM, %in_5: ELEM, %out: ELEM):
      %15 = MUL %in, %in_5 : ELEM loc(#loc4)
      linalg.yield %15 : ELEM loc(#loc4)
    } -> tensor<1024xELEM> loc(#loc4)
    %reinterpret_cast_1 = memref.reinterpret_cast %arg1 to offset: [%3], sizes: [1024], strides: [1] : memref<*xELEM> to memref<1024xELEM, strided<[1], offset: ?>> loc(#loc5)
    %alloc_2 = memref.alloc() : memref<1024xELEM> loc(#loc5)
    %subview_3 = memref.subview %reinterpret_cast_1[0] [%7] [1] : memref<1024xELEM, strided<[1], offset: ?>> to memref<?xELEM, strided<[1], offset: ?>> loc(#loc5)
    %subview_4 = memref.subview %alloc_2[0] [%7] [1] : memref<1024xELEM> to memref<?xELEM, strided<[1]>> loc(#loc5)
    memref.copy %subview_3, %subview_4 : memref<?xELEM, strided<[1], offset: ?>> to memref<?xELEM, strided<[1]>> loc(#loc5)
    %10 = bufferization.to_tensor %alloc_2 restrict writable : memref<1024xELEM> to tensor<1024xELEM> loc(#loc5)
    %11 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%9, %10 : tensor<1024xELEM>, tensor<1024xELEM>) outs(%9 : tensor<1024xELEM>) {
    ^bb0(%in: ELEM, %in_5: ELEM, %out: ELEM):
      %15 = ADD %in, %in_5 : ELEM loc(#loc6)
      linalg.yield %15 : ELEM loc(#loc6)
    } -> tensor<1024xELEM> loc(#loc6)
    %reinterpret_cast_6 = memref.reinterpret_cast %arg2 to offset: [%3], sizes: [1024], strides: [1] : memref<*xELEM> to memref<1024xELEM, strided<[1], offset: ?>> loc(#loc7)
    %extracted_slice = tensor.extract_slice %11[0] [%7] [1] : tensor<1024xELEM> to tensor<?xELEM> loc(#loc7)
    %subview_7 = memref.subview %reinterpret_cast_6[0] [%7] [1] : memref<1024xELEM, strided<[1], offset: ?>> to memref<?xELEM, strided<[1], offset: ?>> loc(#loc7)
    bufferization.materialize_in_destination %extracted_slice in writable %subview_7 : (tensor<?xELEM>, memref<?xELEM, strided<[1], offset: ?>>) -> () loc(#loc7)
    return loc(#loc8)
  } loc(#loc)
} loc(#loc)
#loc = loc("/home/u/axpy.py":8:0)
#loc1 = loc("/home/u/axpy.py":9:24)
#loc2 = loc("alpha"("/home/u/axpy.py":12:18))
#loc3 = loc("/home/u/axpy.py":11:16)
#loc4 = loc("/home/u/axpy.py":12:18)
#loc5 = loc("/home/u/axpy.py":11:40)
#loc6 = loc("/home/u/axpy.py":12:26)
#loc7 = loc("/home/u/axpy.py":13:4)
#loc8 = loc("/home/u/axpy.py":13:0)
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checker_catches_what_it_should() {
        let ok = "module attributes {transform.with_named_sequence} {\n\
          transform.named_sequence @m(%c: !transform.any_op {transform.readonly}) -> !transform.any_op {\n\
            transform.yield %c : !transform.any_op\n}\n\
          transform.named_sequence @__transform_main(%r: !transform.any_op) {\n\
            %a, %b:1 = transform.structured.tile_using_for %r tile_sizes [4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n\
            transform.foreach_match in %a @m -> @m : (!transform.any_op) -> !transform.any_op\n\
            transform.yield\n}\n}";
        check_closed(ok).unwrap();
        let e = check_closed(&ok.replace("in %a @m", "in %z @m")).unwrap_err();
        assert!(e.contains("%z is used"), "{e}");
        let e = check_closed(&ok.replace("%a, %b:1", "%r, %b:1")).unwrap_err();
        assert!(e.contains("%r is defined twice"), "{e}");
        let e = check_closed(&ok.replace("@m -> @m", "@m -> @gone")).unwrap_err();
        assert!(e.contains("@gone"), "{e}");
    }
}
