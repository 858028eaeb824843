use super::*;

// Shaped like mlir-air's output after `air-par-to-launch` + `air-copy-to-dma`: the launch and
// segment are isolated from above, and MLIR restarts value numbering inside them, so the
// launch's block arguments reuse the function's names (`%arg0` inside is not `%arg0` outside).
const ADD: &str = r#"#map = affine_map<()[s0] -> (s0 * 1024)>
#loc = loc("add.py":3:0)
module {
  air.channel @channel_0 [1, 1]
  func.func private @zero_f32(memref<1024xf32, 2>) attributes {link_with = "zero.o"} loc(#loc)
  func.func @add_kernel(%arg0: memref<*xf32> {tt.divisibility = 16 : i32} loc(#loc), %arg1: memref<*xf32> loc(#loc), %arg2: memref<*xf32> loc(#loc), %arg3: i32 loc(#loc), %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32) {
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    %0 = air.launch async (%arg0, %arg1) in (%arg2=%c4, %arg3=%c1) args(%arg4=%arg0, %arg5=%arg1, %arg6=%arg2) : memref<*xf32>, memref<*xf32>, memref<*xf32> attributes {id = 1 : i32} {
      %1 = air.segment @add_kernel_0 async  args(%arg7=%arg0, %arg8=%arg4, %arg9=%arg6) : index, memref<*xf32>, memref<*xf32> {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %2 = affine.apply #map()[%arg7]
        air.channel.put @channel_0[] (%arg8[%2] [%c0] [%c0]) : (memref<*xf32>)
        %3 = air.herd @herd_0 async  tile (%arg10, %arg11) in (%arg12=%c1, %arg13=%c1) args(%arg14=%arg9) : memref<*xf32> attributes {link_with = "zero.o"} {
          %alloc = memref.alloc() : memref<1024xf32, 2>
          func.call @zero_f32(%alloc) : (memref<1024xf32, 2>) -> ()
          air.channel.get @channel_0[] (%alloc[] [] []) : (memref<1024xf32, 2>)
        }
      }
    }
    air.wait_all [%0]
    return loc(#loc)
  } loc(#loc)
} loc(#loc)
"#;

// The second op: its own `#map`, `@channel_0`, `@herd_0` and segment, the same external.
const RELU: &str = r#"#map = affine_map<()[s0] -> (s0 * 512)>
module attributes {npu_harness.program = "args 2"} {
  air.channel @channel_0 [1, 1]
  func.func private @zero_f32(memref<1024xf32, 2>) attributes {link_with = "zero.o"}
  func.func @relu_kernel(%arg0: memref<*xf32>, %arg1: memref<*xf32>, %arg2: i32, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32) {
    %c2 = arith.constant 2 : index
    air.launch (%arg9) in (%arg10=%c2) args(%arg11=%arg0, %arg12=%arg1) : memref<*xf32>, memref<*xf32> {
      air.segment @relu_kernel_0  args(%arg13=%arg9, %arg14=%arg11) : index, memref<*xf32> {
        %0 = affine.apply #map()[%arg13]
        air.channel.put @channel_0[] (%arg14[%0] [] []) : (memref<*xf32>)
      }
    }
    return
  }
}
"#;

fn op<'a>(kernel: &'a str, arg_map: &'a [usize], air: &'a str) -> StitchOp<'a> {
    StitchOp {
        kernel,
        grid: [4, 1, 1],
        arg_map,
        air,
    }
}

fn body_of(module: &str) -> String {
    let m = Module::parse(module).unwrap();
    let chain = m.kernel().unwrap();
    module[chain.body().unwrap().inner.clone()].to_owned()
}

#[test]
fn two_ops_become_one_function_with_two_launches() {
    let out = stitch(
        "add_relu",
        &[
            op("add_kernel", &[0, 1, 2], ADD),
            op("relu_kernel", &[2, 3], RELU),
        ],
    )
    .unwrap();
    let m = Module::parse(&out).unwrap();
    // Aliases of both ops, renamed, before the module.
    let aliases: Vec<&str> = m.aliases.iter().map(|a| a.name).collect();
    assert_eq!(aliases, ["#op0_map", "#op0_loc", "#op1_map"]);
    assert!(
        out.contains("#op1_map = affine_map<()[s0] -> (s0 * 512)>"),
        "{out}"
    );
    // Module attributes of the ops are not carried over.
    assert_eq!(m.attributes, None);
    // The external kernel is declared once, under its own name; channels are per op.
    assert_eq!(
        out.matches("func.func private @zero_f32(").count(),
        1,
        "{out}"
    );
    assert!(out.contains("air.channel @op0_channel_0 [1, 1]"), "{out}");
    assert!(out.contains("air.channel @op1_channel_0 [1, 1]"), "{out}");
    // One function over the combined buffers.
    let chain = m.kernel().unwrap();
    assert_eq!(chain.name(), "add_relu");
    let params: Vec<&str> = chain.params().iter().map(|p| p.value.unwrap()).collect();
    assert_eq!(params, ["%arg0", "%arg1", "%arg2", "%arg3"]);
    assert!(chain.params().iter().all(|p| p.ty == Type("memref<*xf32>")));

    let body = body_of(&out);
    let launches = Module::parse(&body)
        .unwrap()
        .walk()
        .filter(|o| o.name == "air.launch")
        .count();
    assert_eq!(launches, 2);
    // op0: function-scope values prefixed; the launch binds the combined buffers; the names
    // the launch binds for its own region (reused %arg0…) are untouched.
    assert!(
        body.contains("%op0_c4 = arith.constant 4 : index"),
        "{body}"
    );
    assert!(
        body.contains(
            "%op0_0 = air.launch async (%arg0, %arg1) in (%arg2=%op0_c4, %arg3=%op0_c1) \
             args(%arg4=%arg0, %arg5=%arg1, %arg6=%arg2) :"
        ),
        "{body}"
    );
    assert!(body.contains("air.wait_all [%op0_0]"), "{body}");
    // Inside the regions: values as printed, symbols and aliases renamed, externals kept.
    assert!(
        body.contains(
            "%1 = air.segment @op0_add_kernel_0 async  args(%arg7=%arg0, %arg8=%arg4, %arg9=%arg6)"
        ),
        "{body}"
    );
    assert!(
        body.contains("%2 = affine.apply #op0_map()[%arg7]"),
        "{body}"
    );
    assert!(
        body.contains("air.channel.put @op0_channel_0[] (%arg8[%2]"),
        "{body}"
    );
    assert!(
        body.contains("air.herd @op0_herd_0 async  tile (%arg10, %arg11)"),
        "{body}"
    );
    assert!(body.contains("func.call @zero_f32(%alloc)"), "{body}");
    // op1 reads the hand-off buffer (combined 2) and writes combined 3.
    assert!(
        body.contains("air.launch (%arg9) in (%arg10=%op1_c2) args(%arg11=%arg2, %arg12=%arg3) :"),
        "{body}"
    );
    assert!(body.contains("air.segment @op1_relu_kernel_0  args(%arg13=%arg9, %arg14=%arg11)"));
    assert!(
        body.contains("%0 = affine.apply #op1_map()[%arg13]"),
        "{body}"
    );
    assert!(body.contains("// op1: relu_kernel grid (4, 1, 1), buffers 0->2, 1->3"));
    // In order, and only one return.
    assert!(body.find("@op0_add_kernel_0").unwrap() < body.find("@op1_relu_kernel_0").unwrap());
    assert_eq!(body.matches("return").count(), 1, "{body}");
    assert!(body.trim_end().ends_with("return"), "{body}");
    // Every symbol is defined once.
    for name in [
        "@op0_channel_0",
        "@op1_channel_0",
        "@op0_herd_0",
        "@add_relu",
    ] {
        let defs =
            out.matches(&format!(" {name} ")).count() + out.matches(&format!(" {name}(")).count();
        assert!(defs >= 1, "{name} missing in {out}");
    }
}

#[test]
fn the_same_kernel_twice_gets_distinct_symbols() {
    let out = stitch(
        "twice",
        &[
            op("relu_kernel", &[0, 1], RELU),
            op("relu_kernel", &[1, 2], RELU),
        ],
    )
    .unwrap();
    assert!(out.contains("@op0_relu_kernel_0") && out.contains("@op1_relu_kernel_0"));
    assert!(!out.contains("@relu_kernel_0"), "{out}");
    assert!(out.contains("args(%arg11=%arg0, %arg12=%arg1)"));
    assert!(out.contains("args(%arg11=%arg1, %arg12=%arg2)"));
}

#[test]
fn a_bare_herd_is_wrapped_in_a_launch_and_segment() {
    let air = "module {\n  func.func @k(%arg0: memref<*xf32>, %arg1: memref<*xf32>, %arg2: i32) {\n    %c1 = arith.constant 1 : index\n    air.herd @herd_0  tile (%x, %y) in (%sx=%c1, %sy=%c1) args(%a=%arg0, %b=%arg1) : memref<*xf32>, memref<*xf32> {\n      memref.copy %a, %b : memref<*xf32> to memref<*xf32>\n    }\n    return\n  }\n}\n";
    let out = stitch("wrapped", &[op("k", &[1, 0], air)]).unwrap();
    let body = body_of(&out);
    assert!(
        body.contains(
            "air.launch () in () args(%launch_arg0=%arg1, %launch_arg1=%arg0) : memref<*xf32>, memref<*xf32> {"
        ),
        "{body}"
    );
    assert!(
        body.contains(
            "air.segment @op0_k_seg  args(%segment_arg0=%launch_arg0, %segment_arg1=%launch_arg1)"
        ),
        "{body}"
    );
    // Inside the segment, the herd binds the segment's arguments; its own region is intact.
    assert!(body.contains("%c1 = arith.constant 1 : index"), "{body}");
    assert!(
        body.contains("air.herd @op0_herd_0  tile (%x, %y) in (%sx=%c1, %sy=%c1) args(%a=%segment_arg0, %b=%segment_arg1)"),
        "{body}"
    );
    assert!(body.contains("memref.copy %a, %b"), "{body}");
}

#[test]
fn refusals_name_the_op_and_the_reason() {
    let scalar = ADD.replace("air.wait_all [%0]", "%x = arith.addi %arg3, %arg3 : i32");
    let (op_index, reason) = stitch(
        "c",
        &[
            op("relu_kernel", &[0, 1], RELU),
            op("add_kernel", &[0, 1, 2], &scalar),
        ],
    )
    .unwrap_err();
    assert_eq!(op_index, 1);
    assert!(reason.contains("scalar parameter %arg3 (i32)"), "{reason}");

    let (_, reason) = stitch("c", &[op("nope", &[0, 1], RELU)]).unwrap_err();
    assert!(
        reason.contains("no function @nope") && reason.contains("@relu_kernel"),
        "{reason}"
    );

    let (_, reason) = stitch("c", &[op("relu_kernel", &[0], RELU)]).unwrap_err();
    assert!(
        reason.contains("2 buffer parameters after lowering, its arg_map maps 1"),
        "{reason}"
    );

    let bf16 = RELU.replace("memref<*xf32>", "memref<*xbf16>");
    let (op_index, reason) = stitch(
        "c",
        &[
            op("relu_kernel", &[0, 1], RELU),
            op("relu_kernel", &[1, 2], &bf16),
        ],
    )
    .unwrap_err();
    assert_eq!(op_index, 1);
    assert!(
        reason.contains("combined argument 1 is memref<*xf32> in op 0")
            && reason.contains("conflicting element types"),
        "{reason}"
    );

    let other_decl = RELU.replace(
        "@zero_f32(memref<1024xf32, 2>)",
        "@zero_f32(memref<512xf32, 2>)",
    );
    let (_, reason) = stitch(
        "c",
        &[
            op("add_kernel", &[0, 1, 2], ADD),
            op("relu_kernel", &[2, 3], &other_decl),
        ],
    )
    .unwrap_err();
    assert!(reason.contains("declares @zero_f32"), "{reason}");

    let blocks = RELU.replace("    return\n", "    cf.br ^bb1\n  ^bb1:\n    return\n");
    let (_, reason) = stitch("c", &[op("relu_kernel", &[0, 1], &blocks)]).unwrap_err();
    assert!(reason.contains("several blocks (^bb1)"), "{reason}");

    let returns = RELU.replace("    return\n", "    return %c2 : index\n");
    let (_, reason) = stitch("c", &[op("relu_kernel", &[0, 1], &returns)]).unwrap_err();
    assert!(reason.contains("returns `%c2 : index`"), "{reason}");

    let (_, reason) = stitch("c", &[op("relu_kernel", &[0, 2], RELU)]).unwrap_err();
    assert!(
        reason.contains("combined argument 1 is used by no op"),
        "{reason}"
    );
}
