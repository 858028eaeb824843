//! Which buffer parameters a kernel writes.
//!
//! Only pointer arguments reach the NPU, in signature order; after `triton-shared-opt` they
//! are the `memref` parameters of the kernel function. A buffer is written when a store lands
//! in a view of it: `bufferization.materialize_in_destination … in writable %v`,
//! `memref.copy %a, %v`, `memref.store`/`affine.store … %v[…]`, or a `linalg` op with `%v` in
//! its `outs`, where `%v` is the parameter or a view derived from it ([`VIEW_OPS`]). When
//! nothing can be traced that way, every buffer counts as written: copying back too much is
//! slow, too little is wrong.

use std::collections::HashMap;

use crate::parse::{Func, Module};

/// Ops whose first result views (part of) their first operand's memory.
pub const VIEW_OPS: [&str; 5] = [
    "memref.reinterpret_cast",
    "memref.subview",
    "memref.cast",
    "memref.expand_shape",
    "memref.collapse_shape",
];

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

impl Module<'_> {
    /// The kernel's ([`Module::kernel`]) buffer parameters and which it writes; `None` when
    /// the module defines no function.
    pub fn kernel_io(&self) -> Option<KernelIo> {
        self.kernel().map(|f| f.kernel_io())
    }
}

impl Func<'_, '_> {
    /// This function's buffer parameters and which it writes.
    pub fn kernel_io(&self) -> KernelIo {
        // value name → index of the buffer it views.
        let mut root: HashMap<&str, usize> = self
            .buffers()
            .enumerate()
            .filter_map(|(i, p)| Some((p.value?, i)))
            .collect();
        let count = self.buffers().count();
        let mut written = vec![false; count];
        let mut any_store = false;
        for op in self
            .body()
            .into_iter()
            .flat_map(|r| r.ops())
            .flat_map(|o| o.walk())
        {
            let operand = |k: usize| op.operands.get(k).map(|v| v.name);
            if VIEW_OPS.contains(&op.name) {
                if let (Some(result), Some(i)) = (
                    op.results.first(),
                    operand(0).and_then(|s| root.get(s).copied()),
                ) {
                    root.insert(result, i);
                }
                continue;
            }
            let targets: Vec<&str> = match op.name {
                "bufferization.materialize_in_destination"
                | "memref.copy"
                | "memref.store"
                | "affine.store" => {
                    any_store = true;
                    operand(1).into_iter().collect()
                }
                name if name.starts_with("linalg.") => op.outs.iter().map(|t| t.value).collect(),
                _ => Vec::new(),
            };
            for target in targets {
                if let Some(&i) = root.get(target) {
                    written[i] = true;
                }
            }
        }
        let derived = any_store || written.iter().any(|w| *w);
        if !derived {
            written = vec![true; count];
        }
        KernelIo {
            name: self.name().to_owned(),
            written,
            derived,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(text: &str) -> Option<KernelIo> {
        Module::parse(text).unwrap().kernel_io()
    }

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
        let io = io(EXP).unwrap();
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
        assert_eq!(io(text).unwrap().written, vec![false, true, true]);
    }

    #[test]
    fn unreadable_text_means_everything_is_written() {
        let text =
            "func.func @k(%a: memref<*xf32>, %b: memref<*xf32>) {\n  call @opaque(%a, %b)\n}\n";
        let io = io(text).unwrap();
        assert_eq!(io.written, vec![true, true]);
        assert!(!io.derived);
        assert_eq!(super::tests::io("module {\n}"), None);
    }

    #[test]
    fn scalar_and_tensor_parameters_are_not_buffers() {
        let text = "func.func public @k(%arg0: memref<*xbf16>, %arg1: i32, %arg2: memref<*xbf16> {tt.divisibility = 16 : i32}, %arg3: f32) {\n\
            %r = memref.reinterpret_cast %arg2 to offset: [0], sizes: [8], strides: [1] : memref<*xbf16> to memref<8xbf16>\n\
            bufferization.materialize_in_destination %t in writable %r : (tensor<8xbf16>, memref<8xbf16>) -> ()\n}\n";
        assert_eq!(io(text).unwrap().written, vec![false, true]);
    }

    #[test]
    fn linalg_outs_into_a_view_and_nested_stores_count() {
        // Memref-form linalg writing through expand/collapse views, and a store inside a
        // generic's region (triton-shared's form for stores through unstructured pointers).
        let text = "func.func @k(%a: memref<*xf32>, %b: memref<*xf32>, %c: memref<*xi32>) {\n\
            %0 = memref.reinterpret_cast %a to offset: [0], sizes: [16], strides: [1] : memref<*xf32> to memref<16xf32>\n\
            %1 = memref.expand_shape %0 [[0, 1]] output_shape [4, 4] : memref<16xf32> into memref<4x4xf32>\n\
            %2 = memref.collapse_shape %1 [[0, 1]] : memref<4x4xf32> into memref<16xf32>\n\
            linalg.fill ins(%cst : f32) outs(%2 : memref<16xf32>)\n\
            %3 = memref.cast %c : memref<*xi32> to memref<?xi32>\n\
            linalg.generic {indexing_maps = [#map], iterator_types = [\"parallel\"]} ins(%idx : tensor<4xindex>) {\n\
            ^bb0(%in: index):\n\
              memref.store %v, %3[%in] : memref<?xi32>\n\
              linalg.yield\n\
            }\n\
            return\n}\n";
        assert_eq!(io(text).unwrap().written, vec![true, false, true]);
    }
}
