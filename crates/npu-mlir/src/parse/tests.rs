use super::*;

fn parse(text: &str) -> Module<'_> {
    Module::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn names<'a>(values: &[Value<'a>]) -> Vec<&'a str> {
    values.iter().map(|v| v.name).collect()
}

#[test]
fn modules_come_apart_with_their_aliases() {
    let text = "// header\n#map = affine_map<(d0) -> (d0)>\nmodule @m attributes {a.b = \"}\"} {\n  func.func private @ext(memref<4xf32>) loc(#loc)\n  func.func @k(%arg0: memref<*xf32> {tt.divisibility = 16 : i32} loc(#loc1), %arg1: i32) {\n    return\n  } loc(#loc)\n} loc(#loc)\n#loc = loc(\"x.py\":1:2)\n#loc1 = loc(callsite(#loc at #loc))\n";
    let m = parse(text);
    let aliases: Vec<(&str, &str)> = m.aliases.iter().map(|a| (a.name, a.value)).collect();
    assert_eq!(
        aliases,
        [
            ("#map", "affine_map<(d0) -> (d0)>"),
            ("#loc", "loc(\"x.py\":1:2)"),
            ("#loc1", "loc(callsite(#loc at #loc))")
        ]
    );
    assert_eq!(m.aliases[2].text, "#loc1 = loc(callsite(#loc at #loc))");
    assert!(m.explicit);
    assert_eq!(m.name, Some("@m"));
    assert_eq!(m.attributes, Some("{a.b = \"}\"}"));
    assert_eq!(m.location, Some("loc(#loc)"));
    assert_eq!(m.ops.len(), 2);

    let ext = m.ops[0].function().unwrap();
    assert_eq!(ext.signature.visibility, Some("private"));
    assert!(ext.body().is_none());
    assert_eq!(ext.params().len(), 1);
    assert_eq!(ext.params()[0].value, None);
    assert_eq!(ext.params()[0].ty, Type("memref<4xf32>"));
    assert_eq!(m.ops[0].location, Some("loc(#loc)"));

    let k = m.kernel().unwrap();
    assert_eq!(k.name(), "k");
    assert_eq!(m.function("k").unwrap().name(), "k");
    let p = k.params()[0];
    assert_eq!(p.value, Some("%arg0"));
    assert_eq!(p.ty, Type("memref<*xf32>"));
    assert_eq!(p.attributes, Some("{tt.divisibility = 16 : i32}"));
    assert_eq!(p.location, Some("loc(#loc1)"));
    assert!(k.params()[0].is_buffer() && !k.params()[1].is_buffer());
    assert_eq!(k.buffers().count(), 1);
    let body = k.body().unwrap();
    assert_eq!(text[body.inner.clone()].trim(), "return");
    assert_eq!(&text[body.span.clone()], "{\n    return\n  }");
    assert_eq!(body.blocks.len(), 1);
    assert_eq!(body.blocks[0].label, None);
    assert_eq!(body.blocks[0].ops[0].name, "return");
}

#[test]
fn implicit_modules_metadata_and_nested_modules() {
    let bare = parse("func.func @f() {\n  return\n}\n");
    assert!(!bare.explicit);
    assert_eq!(bare.ops.len(), 1);
    assert_eq!(bare.kernel().unwrap().name(), "f");

    let two = parse("module {\n}\nmodule {\n}\n");
    assert!(!two.explicit);
    assert_eq!(two.ops.iter().filter(|o| o.is_module()).count(), 2);

    let with_resources = parse(
        "module {\n}\n{-#\n  dialect_resources: {\n    builtin: {\n      blob: \"0x0400\"\n    }\n  }\n#-}\n",
    );
    assert!(with_resources.explicit);
    assert!(with_resources.metadata.unwrap().starts_with("{-#"));
    assert!(with_resources.metadata.unwrap().ends_with("#-}"));

    let empty = parse("module attributes {x} {\n}");
    assert!(empty.explicit && empty.ops.is_empty());
    assert_eq!(empty.attributes, Some("{x}"));
    assert_eq!(parse("").ops.len(), 0);
    assert_eq!(parse("module {\n}").kernel().map(|f| f.name()), None);
}

#[test]
fn function_types_with_arrows_results_and_attributes() {
    let text = "func.func private @g(%cb: (memref<2xf32, affine_map<(d0) -> (d0)>>) -> (i32) {a = \"->\"}, %n: i32) -> i32\n\
        func.func @f(%a: i32) -> (memref<2xf32, affine_map<(d0) -> (d0)>> {r.x}, i32) attributes {x = {y}, s = \"{\"} {\n  return %m, %a : memref<2xf32>, i32\n}\n\
        func.func nested @\"quoted name\"() -> memref<2xf32, affine_map<(d0) -> (d0)>> attributes {a}\n";
    let m = parse(text);
    let g = m.function("g").unwrap();
    assert_eq!(
        g.params()[0].ty,
        Type("(memref<2xf32, affine_map<(d0) -> (d0)>>) -> (i32)")
    );
    assert_eq!(g.params()[0].attributes, Some("{a = \"->\"}"));
    assert_eq!(g.params()[1].ty, Type("i32"));
    assert_eq!(g.signature.results.len(), 1);
    assert_eq!(g.signature.results[0].ty, Type("i32"));
    assert!(g.body().is_none());

    let f = m.function("f").unwrap();
    let results: Vec<Type<'_>> = f.signature.results.iter().map(|r| r.ty).collect();
    assert_eq!(
        results,
        [Type("memref<2xf32, affine_map<(d0) -> (d0)>>"), Type("i32")]
    );
    assert_eq!(f.signature.results[0].attributes, Some("{r.x}"));
    assert_eq!(f.signature.attributes, Some("{x = {y}, s = \"{\"}"));
    let ret = &f.body().unwrap().blocks[0].ops[0];
    assert_eq!(names(&ret.operands), ["%m", "%a"]);
    assert_eq!(ret.rest, "%m, %a : memref<2xf32>, i32");

    let q = m.function("quoted name").unwrap();
    assert_eq!(q.signature.visibility, Some("nested"));
    assert_eq!(
        q.signature.results[0].ty,
        Type("memref<2xf32, affine_map<(d0) -> (d0)>>")
    );
    assert_eq!(q.signature.attributes, Some("{a}"));
    assert!(q.body().is_none());
    // Only functions with a body can be the kernel.
    assert_eq!(m.kernel().unwrap().name(), "f");
}

#[test]
fn locations_anywhere_never_disturb_the_structure() {
    let text = r#"func.func @k(%arg0: memref<*xf32> loc("path/with ) and -> and \" quotes":1:2), %arg1: i32 loc(fused[#loc1, "x)"])) {
  %0 = arith.addi %arg1, %arg1 : i32 loc("name"(#loc1))
  %1 = "x.op"(%0) ({
  ^bb0(%in: f32 loc("a)b"(#loc2)), %out: f32 loc(#loc3)):
    x.yield %in : f32 loc(callsite("f(" at #loc4))
  }) {s = "}) loc("} : (i32) -> i32 loc(#loc5)
  return loc(unknown)
} loc(#loc)
"#;
    let m = parse(text);
    let k = m.kernel().unwrap();
    assert_eq!(k.params().len(), 2);
    assert_eq!(
        k.params()[0].location,
        Some(r#"loc("path/with ) and -> and \" quotes":1:2)"#)
    );
    assert_eq!(k.params()[1].location, Some(r#"loc(fused[#loc1, "x)"])"#));
    assert_eq!(k.op.location, Some("loc(#loc)"));
    let ops = &k.body().unwrap().blocks[0].ops;
    assert_eq!(ops.len(), 3);
    assert_eq!(ops[0].location, Some(r#"loc("name"(#loc1))"#));
    assert_eq!(ops[0].rest, "%arg1, %arg1 : i32");
    let generic = &ops[1];
    assert_eq!(generic.name, "x.op");
    assert_eq!(names(&generic.operands), ["%0"]);
    assert_eq!(generic.location, Some("loc(#loc5)"));
    let block = &generic.regions[0].blocks[0];
    assert_eq!(block.label, Some("^bb0"));
    assert_eq!(block.arguments[0].location, Some(r#"loc("a)b"(#loc2))"#));
    assert_eq!(block.arguments[1].ty, Type("f32"));
    assert_eq!(block.ops[0].name, "x.yield");
    assert_eq!(ops[2].name, "return");
    assert_eq!(ops[2].location, Some("loc(unknown)"));
    assert_eq!(ops[2].rest, "");
}

#[test]
fn ops_results_operands_bindings_and_regions() {
    let text = "func.func @k(%arg0: memref<*xf32>, %n: index) {\n\
        %c0 = arith.constant 0 : index\n\
        %0:2 = \"x.pair\"() : () -> (i32, i32)\n\
        %a, %b = x.two %0#1 : i32\n\
        %sum = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init) -> (f32) {\n\
          %v = memref.load %buf[%i] : memref<?xf32>\n\
          scf.yield %v : f32\n\
        }\n\
        %t = air.launch async [%dep] (%x, %y) in (%sx=%c1, %sy=%c1) args(%p=%arg0) : memref<*xf32> attributes {id = 1 : i32} {\n\
          air.launch_terminator\n\
        }\n\
        %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = [\"parallel\"]} ins(%in0, %in1 : tensor<4x?xf32>, tensor<*xbf16>) outs(%o : tensor<4x?xf32>) {\n\
        ^bb0(%i0: f32, %i1: bf16, %out: f32):\n\
          linalg.yield %i0 : f32\n\
        } -> tensor<4x?xf32>\n\
        cf.br ^bb1\n\
      ^bb1:\n\
        return\n\
      }\n";
    let m = parse(text);
    let body = m.kernel().unwrap().body().unwrap();
    assert_eq!(body.blocks.len(), 2);
    assert_eq!(body.blocks[1].label, Some("^bb1"));
    assert_eq!(body.blocks[1].ops[0].name, "return");
    let ops = &body.blocks[0].ops;
    let op_names: Vec<&str> = ops.iter().map(|o| o.name).collect();
    assert_eq!(
        op_names,
        [
            "arith.constant",
            "x.pair",
            "x.two",
            "scf.for",
            "air.launch",
            "linalg.generic",
            "cf.br"
        ]
    );
    assert_eq!(ops[1].results, ["%0"]);
    assert_eq!(ops[2].results, ["%a", "%b"]);
    assert_eq!(names(&ops[2].operands), ["%0"]);

    let for_op = &ops[3];
    assert_eq!(names(&for_op.bindings), ["%i", "%acc"]);
    assert_eq!(names(&for_op.operands), ["%c0", "%n", "%c1", "%init"]);
    assert_eq!(for_op.regions.len(), 1);
    let load = &for_op.regions[0].blocks[0].ops[0];
    assert_eq!(names(&load.operands), ["%buf", "%i"]);

    let launch = &ops[4];
    assert_eq!(names(&launch.bindings), ["%x", "%y", "%sx", "%sy", "%p"]);
    assert_eq!(names(&launch.operands), ["%dep", "%c1", "%c1", "%arg0"]);
    assert_eq!(
        launch.regions.len(),
        1,
        "the attribute dictionary is no region"
    );
    let at = launch.bindings[4].offset;
    assert_eq!(&text[at..at + 2], "%p");

    let generic = &ops[5];
    let ins: Vec<(&str, Option<&str>)> = generic
        .ins
        .iter()
        .map(|t| (t.value, t.ty.map(|t| t.text())))
        .collect();
    assert_eq!(
        ins,
        [
            ("%in0", Some("tensor<4x?xf32>")),
            ("%in1", Some("tensor<*xbf16>"))
        ]
    );
    assert_eq!(generic.outs[0].value, "%o");
    assert_eq!(names(&generic.operands), ["%in0", "%in1", "%o"]);
    let shaped = generic.ins[0].ty.unwrap().shaped().unwrap();
    assert_eq!(
        shaped.shape,
        Some(vec![crate::Dim::Static(4), crate::Dim::Dynamic])
    );
    assert_eq!(generic.ins[1].ty.unwrap().shaped().unwrap().shape, None);
    assert_eq!(generic.regions[0].blocks[0].arguments.len(), 3);

    // The walk visits nested ops in textual order.
    let walked: Vec<&str> = m.walk().map(|o| o.name).collect();
    assert_eq!(
        walked,
        [
            "func.func",
            "arith.constant",
            "x.pair",
            "x.two",
            "scf.for",
            "memref.load",
            "scf.yield",
            "air.launch",
            "air.launch_terminator",
            "linalg.generic",
            "linalg.yield",
            "cf.br",
            "return"
        ]
    );
}

#[test]
fn continuation_lines_and_empty_regions() {
    // A hand-wrapped op whose later lines start with `ins`-less punctuation continues.
    let m = parse("%0 = x.op %a\n    : i32\n    -> i32\n%1 = x.region {\n}\n%2 = x.dict {}\n");
    assert_eq!(m.ops.len(), 3);
    assert_eq!(m.ops[0].rest, "%a\n    : i32\n    -> i32");
    assert_eq!(m.ops[1].regions.len(), 1);
    assert!(m.ops[1].regions[0].blocks.is_empty());
    assert!(m.ops[2].regions.is_empty());
}

#[test]
fn errors_say_where_and_what() {
    let e = Module::parse("module {\n  func.func k(%a: i32) {\n  }\n}\n").unwrap_err();
    assert_eq!((e.line, e.column), (2, 13));
    assert!(e.message.contains("expected the function's @name"), "{e}");
    let e = Module::parse("%x\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "1:3: expected `=` after the operation's results"
    );
    let e = Module::parse("%x = : i32\n").unwrap_err();
    assert_eq!(e.to_string(), "1:6: expected an operation name");
    let e = Module::parse("func.func @f(%a: ) {\n}\n").unwrap_err();
    assert!(e.message.contains("expected a type"), "{e}");
    let e = Module::parse("x.op {\n^bb0(%a: i32)\n}\n").unwrap_err();
    assert_eq!(
        (e.line, e.message.as_str()),
        (2, "expected `:` after the block label")
    );
    let e = Module::parse("func.func @f() -> {\n}\n").unwrap_err();
    assert!(e.message.contains("expected result types"), "{e}");
    let e = Module::parse("func.func @f() oops\n").unwrap_err();
    assert!(e.message.contains("unexpected `oops`"), "{e}");
    let e = Module::parse("#map =\n").unwrap_err();
    assert!(e.message.contains("expected a value"), "{e}");
    let e = Module::parse("module {\n}\n{-# a #-} x\n").unwrap_err();
    assert!(e.message.contains("after `#-}`"), "{e}");
}
