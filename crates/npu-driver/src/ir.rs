//! What the driver reads from the ttsharedir (Linalg) text: the kernel's buffer parameters and
//! which of them the kernel writes.
//!
//! Only pointer arguments reach the NPU, in signature order; after `triton-shared-opt` they
//! are the `memref<*x…>` parameters of the kernel function. A buffer is written when a store
//! lands in a view of it: `bufferization.materialize_in_destination … in writable %v`,
//! `memref.copy %a, %v`, `memref.store`/`affine.store … %v[…]`, or a `linalg` op with `%v` in
//! its `outs`, where `%v` is the parameter or a view derived from it (`reinterpret_cast`,
//! `subview`, `cast`, `expand_shape`, `collapse_shape`). When the text cannot be read that
//! way, every buffer counts as written: copying back too much is slow, too little is wrong.

use std::collections::HashMap;

/// The buffer parameters of a kernel and what it does with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelIo {
    /// The kernel function's name.
    pub name: String,
    /// One flag per buffer parameter, in order: whether the kernel writes it.
    pub written: Vec<bool>,
    /// Whether `written` was derived from the text (false: all set by default).
    pub derived: bool,
}

/// Reads the first `func.func` of `text`. `None` when there is none.
pub fn kernel_io(text: &str) -> Option<KernelIo> {
    let start = text.find("func.func")?;
    let rest = &text[start..];
    let at = rest.find('@')?;
    let name: String = rest[at + 1..]
        .chars()
        .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '.'))
        .collect();
    let open = rest.find('(')?;
    let params = top_level_params(&rest[open + 1..])?;
    // `%argN` name of every buffer parameter, in order.
    let buffers: Vec<String> = params
        .iter()
        .filter_map(|p| {
            let (value, ty) = p.split_once(':')?;
            ty.trim_start()
                .starts_with("memref<")
                .then(|| value.trim().to_owned())
        })
        .collect();
    let body = &rest[open..];
    let written = written_buffers(body, &buffers);
    Some(match written {
        Some(written) => KernelIo {
            name,
            written,
            derived: true,
        },
        None => KernelIo {
            name,
            written: vec![true; buffers.len()],
            derived: false,
        },
    })
}

/// Splits `a: T, b: U {attr}, …)` at top-level commas, up to the closing parenthesis.
fn top_level_params(text: &str) -> Option<Vec<String>> {
    let mut depth = 0i32;
    let mut current = String::new();
    let mut out = Vec::new();
    for c in text.chars() {
        match c {
            '(' | '<' | '[' | '{' => depth += 1,
            ')' if depth == 0 => {
                if !current.trim().is_empty() {
                    out.push(current.trim().to_owned());
                }
                return Some(out);
            }
            ')' | '>' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(current.trim().to_owned());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    None
}

const VIEW_OPS: [&str; 5] = [
    "memref.reinterpret_cast",
    "memref.subview",
    "memref.cast",
    "memref.expand_shape",
    "memref.collapse_shape",
];

/// Flags for each buffer; `None` when no buffer could be traced at all.
fn written_buffers(body: &str, buffers: &[String]) -> Option<Vec<bool>> {
    // value name → index of the buffer it views.
    let mut root: HashMap<String, usize> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| (b.clone(), i))
        .collect();
    let mut written = vec![false; buffers.len()];
    let mut any_store = false;
    for line in body.lines().map(str::trim) {
        if let Some((lhs, rhs)) = line.split_once(" = ") {
            if let Some(op) = VIEW_OPS.iter().find(|op| rhs.starts_with(*op)) {
                let source = first_value(&rhs[op.len()..]);
                if let Some(i) = source.and_then(|s| root.get(s).copied()) {
                    root.insert(lhs.trim().to_owned(), i);
                }
            }
            continue;
        }
        let target =
            if let Some(rest) = line.strip_prefix("bufferization.materialize_in_destination") {
                any_store = true;
                rest.split_once(" in writable ")
                    .and_then(|(_, t)| first_value(t))
            } else if let Some(rest) = line.strip_prefix("memref.copy") {
                any_store = true;
                rest.split(',').nth(1).and_then(first_value)
            } else if let Some(rest) = line
                .strip_prefix("memref.store")
                .or_else(|| line.strip_prefix("affine.store"))
            {
                any_store = true;
                rest.split(',').nth(1).and_then(first_value)
            } else if line.starts_with("linalg.") && line.contains(" outs(") {
                line.split_once(" outs(").and_then(|(_, t)| first_value(t))
            } else {
                None
            };
        if let Some(i) = target.and_then(|t| root.get(t).copied()) {
            written[i] = true;
        }
    }
    (any_store || written.iter().any(|w| *w)).then_some(written)
}

/// The first `%value` in `text`.
fn first_value(text: &str) -> Option<&str> {
    let start = text.find('%')?;
    let rest = &text[start..];
    let end = rest[1..]
        .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '#' | '.' | '$')))
        .map_or(rest.len(), |e| e + 1);
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    // Shaped like triton-shared's `--triton-to-linalg-experimental` output for
    // `out = exp(in)` with a masked store.
    const EXP: &str = r#"
#map = affine_map<(d0) -> (d0)>
module {
  func.func @exp_kernel(%arg0: memref<*xf32> {tt.divisibility = 16 : i32}, %arg1: memref<*xf32> {tt.divisibility = 16 : i32}, %arg2: i32, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32) {
    %c1024 = arith.constant 1024 : index
    %0 = arith.muli %arg6, %c1024_i32 : i32
    %1 = arith.index_cast %0 : i32 to index
    %reinterpret_cast = memref.reinterpret_cast %arg1 to offset: [%1], sizes: [1024], strides: [1] : memref<*xf32> to memref<1024xf32, strided<[1], offset: ?>>
    %alloc = memref.alloc() : memref<1024xf32>
    memref.copy %reinterpret_cast, %alloc : memref<1024xf32, strided<[1], offset: ?>> to memref<1024xf32>
    %2 = bufferization.to_tensor %alloc restrict writable : memref<1024xf32>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%2 : tensor<1024xf32>) outs(%2 : tensor<1024xf32>) {
    ^bb0(%in: f32, %out: f32):
      %6 = math.exp %in : f32
      linalg.yield %6 : f32
    } -> tensor<1024xf32>
    %reinterpret_cast_0 = memref.reinterpret_cast %arg0 to offset: [%1], sizes: [1024], strides: [1] : memref<*xf32> to memref<1024xf32, strided<[1], offset: ?>>
    %extracted_slice = tensor.extract_slice %3[0] [%5] [1] : tensor<1024xf32> to tensor<?xf32>
    %subview = memref.subview %reinterpret_cast_0[0] [%5] [1] : memref<1024xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
    bufferization.materialize_in_destination %extracted_slice in writable %subview : (tensor<?xf32>, memref<?xf32, strided<[1], offset: ?>>) -> ()
    return
  }
}
"#;

    #[test]
    fn finds_the_written_buffer_through_views() {
        let io = kernel_io(EXP).unwrap();
        assert_eq!(io.name, "exp_kernel");
        assert_eq!(io.written, vec![true, false]);
        assert!(io.derived);
    }

    #[test]
    fn copies_and_stores_count_as_writes() {
        let text = "func.func @k(%a: memref<*xi32>, %b: memref<*xi32>, %c: memref<*xi32>, %n: i32) {\n\
            %rc = memref.reinterpret_cast %c to offset: [0], sizes: [4], strides: [1] : memref<*xi32> to memref<4xi32>\n\
            %rb = memref.reinterpret_cast %b to offset: [0], sizes: [4], strides: [1] : memref<*xi32> to memref<4xi32>\n\
            memref.copy %alloc, %rc : memref<4xi32> to memref<4xi32>\n\
            memref.store %v, %rb[%i] : memref<4xi32>\n\
            return\n}\n";
        assert_eq!(kernel_io(text).unwrap().written, vec![false, true, true]);
    }

    #[test]
    fn unreadable_text_means_everything_is_written() {
        let text =
            "func.func @k(%a: memref<*xf32>, %b: memref<*xf32>) {\n  call @opaque(%a, %b)\n}\n";
        let io = kernel_io(text).unwrap();
        assert_eq!(io.written, vec![true, true]);
        assert!(!io.derived);
        assert_eq!(kernel_io("module {}"), None);
    }

    #[test]
    fn scalar_and_tensor_parameters_are_not_buffers() {
        let text = "func.func public @k(%arg0: memref<*xbf16>, %arg1: i32, %arg2: memref<*xbf16> {tt.divisibility = 16 : i32}, %arg3: f32) {\n\
            %r = memref.reinterpret_cast %arg2 to offset: [0], sizes: [8], strides: [1] : memref<*xbf16> to memref<8xbf16>\n\
            bufferization.materialize_in_destination %t in writable %r : (tensor<8xbf16>, memref<8xbf16>) -> ()\n}\n";
        let io = kernel_io(text).unwrap();
        assert_eq!(io.written, vec![false, true]);
    }
}
