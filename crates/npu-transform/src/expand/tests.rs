use super::*;
use crate::testing::check_closed;

/// A script in the style of upstream's examples, of our own.
fn main_with(body: &str) -> String {
    format!(
        "// A test script.\nmodule attributes {{transform.with_named_sequence}} {{\n  \
         transform.named_sequence @__transform_main(\n      \
         %arg1: !transform.any_op {{transform.readonly}}) {{\n{body}\n    transform.yield\n  }}\n}}\n"
    )
}

fn include(name: &str, arg: &str) -> String {
    format!(
        "    transform.include @{name} failures(propagate)\n        ({arg}) : (!transform.any_op) -> ()"
    )
}

fn expand_ok(text: &str) -> Expansion {
    let out = expand(text, "test.mlir", None).unwrap_or_else(|e| panic!("{e}\n{text}"));
    check_closed(&out.text).unwrap_or_else(|e| panic!("{e}\n{}", out.text));
    out
}

#[test]
fn a_script_without_includes_is_unchanged() {
    let text = main_with(
        "    %f = transform.structured.match ops{[\"func.func\"]} in %arg1 : (!transform.any_op) -> !transform.any_op",
    );
    let out = expand(&text, "t.mlir", Some(NpuVersion::Npu2)).unwrap();
    assert_eq!(out.text, text);
    assert!(out.expanded.is_empty() && out.inserted.is_empty());
    // Not even parsed: what air-opt makes of it is air-opt's business.
    assert_eq!(expand("not mlir;", "x", None).unwrap().text, "not mlir;");
}

#[test]
fn includes_are_inlined_with_the_argument_and_unique_names() {
    let text = main_with(
        &[
            include("canonicalize_with_cse", "%arg1"),
            include("one_shot_bufferize", "%arg1"),
            include("canonicalize_with_cse", "%arg1"),
        ]
        .join("\n"),
    );
    let out = expand_ok(&text);
    assert_eq!(
        out.expanded,
        ["canonicalize_with_cse", "one_shot_bufferize"]
    );
    let t = &out.text;
    assert!(!t.contains("transform.include"), "{t}");
    // The parameter became the include's operand, locals got one suffix per expansion.
    assert!(
        t.contains("%kernels_1 = transform.structured.match ops{[\"func.func\"]} in %arg1"),
        "{t}"
    );
    assert!(t.contains("%kernels_3 = transform.structured.match"), "{t}");
    assert!(
        t.contains("%bufferized_2 = transform.bufferization.one_shot_bufferize %kernels_2"),
        "{t}"
    );
    assert!(!t.contains("%root"), "{t}");
    // Each expansion says what it was and keeps the include's indentation.
    assert!(t.contains("    // @one_shot_bufferize (triton-npu transform library, bufferization.mlir), inlined:\n    %kernels_2"), "{t}");
    // The file's comment and the rest of the text are kept.
    assert!(t.starts_with("// A test script.\nmodule attributes"));
}

#[test]
fn the_yielded_value_is_bound_to_the_result() {
    let text = main_with(
        "    %vh = transform.include @air_herd_mapping_and_vectorize failures(propagate)\n        \
         (%arg1) : (!transform.any_op) -> !transform.any_op\n    \
         transform.annotate %vh \"done\" : !transform.any_op",
    );
    let out = expand_ok(&text);
    assert!(
        out.text
            .contains("%vh = transform.air.herd_vectorize %herd_1"),
        "{}",
        out.text
    );
    assert!(out.text.contains("transform.annotate %vh \"done\""));
}

#[test]
fn a_yielded_parameter_stands_for_the_argument() {
    // @match_cmpf yields its own parameter: the include's result is the argument itself.
    let text = main_with(
        "    %ops = transform.structured.match ops{[\"arith.cmpf\"]} in %arg1 : (!transform.any_op) -> !transform.any_op\n    \
         %m = transform.include @match_cmpf failures(propagate) (%ops) : (!transform.any_op) -> !transform.any_op\n    \
         transform.annotate %m \"cmp\" : !transform.any_op",
    );
    let out = expand_ok(&text);
    assert!(
        out.text
            .contains("transform.match.operation_name %ops [\"arith.cmpf\"]"),
        "{}",
        out.text
    );
    assert!(
        out.text.contains("transform.annotate %ops \"cmp\""),
        "{}",
        out.text
    );
    assert!(!out.text.contains("%m "), "{}", out.text);
}

#[test]
fn foreach_match_targets_are_inserted_after_the_module_line() {
    let text = main_with(&format!(
        "    %vh = transform.include @air_herd_mapping_and_vectorize failures(propagate)\n        \
         (%arg1) : (!transform.any_op) -> !transform.any_op\n{}\n    \
         %h2 = transform.structured.match ops{{[\"air.herd\"]}} in %arg1 : (!transform.any_op) -> !transform.any_op\n{}",
        include("cast_bf16_only_ops", "%vh"),
        include("cast_cmpf_and_select_ops", "%h2"),
    ));
    let out = expand_ok(&text);
    assert_eq!(
        out.inserted,
        [
            "match_bf16_only_op",
            "action_cast_to_bf16",
            "match_cmpf",
            "action_cast_cmpf_to_bf16",
            "match_select",
            "action_cast_select_to_bf16"
        ]
    );
    let t = &out.text;
    let module = t
        .find("module attributes {transform.with_named_sequence} {")
        .unwrap();
    let inserted = t.find("// Inserted by triton-npu").unwrap();
    let main = t.find("@__transform_main").unwrap();
    assert!(module < inserted && inserted < main, "{t}");
    assert!(
        t.contains("  transform.named_sequence @match_cmpf(\n      %candidate"),
        "{t}"
    );
    assert!(t.contains("transform.foreach_match in %vh\n"), "{t}");
}

#[test]
fn a_script_defining_its_own_matchers_keeps_them() {
    let text = "module attributes {transform.with_named_sequence} {\n\
      transform.named_sequence @match_cmpf(%op: !transform.any_op {transform.readonly}) -> !transform.any_op {\n\
        transform.match.operation_name %op [\"arith.cmpf\"] : !transform.any_op\n\
        transform.yield %op : !transform.any_op\n}\n\
      transform.named_sequence @__transform_main(%arg1: !transform.any_op {transform.readonly}) {\n\
        transform.foreach_match in %arg1 @match_cmpf -> @action_cast_cmpf_to_bf16 : (!transform.any_op) -> !transform.any_op\n\
        transform.yield\n}\n}";
    let out = expand_ok(text);
    assert_eq!(out.inserted, ["action_cast_cmpf_to_bf16"]);
    assert_eq!(out.text.matches("@match_cmpf(").count(), 1);
}

#[test]
fn nested_includes_and_script_sequences_expand() {
    let text = "module attributes {transform.with_named_sequence} {\n\
      // Our own phase, built on the library.\n\
      transform.named_sequence @tile_and_bufferize(%m: !transform.any_op {transform.readonly}) -> !transform.any_op {\n\
        transform.include @flatten_tile_forall failures(propagate) (%m) : (!transform.any_op) -> ()\n\
        transform.include @bufferize_twice failures(propagate) (%m) : (!transform.any_op) -> ()\n\
        %h = transform.include @air_herd_mapping_and_vectorize failures(propagate) (%m) : (!transform.any_op) -> !transform.any_op\n\
        transform.yield %h : !transform.any_op\n\
      }\n\
      transform.named_sequence @bufferize_twice(%m: !transform.any_op {transform.readonly}) {\n\
        transform.include @one_shot_bufferize failures(propagate) (%m) : (!transform.any_op) -> ()\n\
        transform.include @post_bufferize_cleanup failures(propagate) (%m) : (!transform.any_op) -> ()\n\
        transform.yield\n\
      }\n\
      transform.named_sequence @__transform_main(%arg1: !transform.any_op {transform.readonly}) {\n\
        %first = transform.include @tile_and_bufferize failures(propagate) (%arg1) : (!transform.any_op) -> !transform.any_op\n\
        %second = transform.include @tile_and_bufferize failures(propagate) (%arg1) : (!transform.any_op) -> !transform.any_op\n\
        transform.include @cast_bf16_only_ops failures(propagate) (%second) : (!transform.any_op) -> ()\n\
        transform.yield\n\
      }\n}\n";
    let out = expand_ok(text);
    let t = &out.text;
    assert!(!t.contains("transform.include"), "{t}");
    assert!(t.contains("%first = transform.air.herd_vectorize"), "{t}");
    assert!(t.contains("%second = transform.air.herd_vectorize"), "{t}");
    assert!(t.contains("transform.foreach_match in %second"), "{t}");
    // The script's own sequences stay defined (and expanded) in the module.
    assert!(t.contains("transform.named_sequence @tile_and_bufferize("));
    assert_eq!(
        out.expanded,
        [
            "flatten_tile_forall",
            "one_shot_bufferize",
            "post_bufferize_cleanup",
            "bufferize_twice",
            "air_herd_mapping_and_vectorize",
            "tile_and_bufferize",
            "cast_bf16_only_ops"
        ]
    );
    assert_eq!(
        t.matches("transform.bufferization.one_shot_bufferize")
            .count(),
        4
    );
}

/// Every library sequence, alone, through the expansion.
#[test]
fn every_library_sequence_alone() {
    let lib = Library::get().unwrap();
    for e in lib.entries() {
        let (_, seq) = lib.lookup(&e.name).unwrap();
        let consumes = seq.params[0].effect.as_deref() == Some("transform.consumed");
        let mut body = String::new();
        let arg = if consumes {
            body.push_str("    %h = transform.structured.match ops{[\"air.herd\"]} in %arg1 : (!transform.any_op) -> !transform.any_op\n");
            "%h"
        } else {
            "%arg1"
        };
        if seq.results.is_empty() {
            body.push_str(&include(&e.name, arg));
        } else {
            body.push_str(&format!(
                "    %out = transform.include @{} failures(propagate) ({arg}) : (!transform.any_op) -> !transform.any_op\n    \
                 transform.annotate %out \"seen\" : !transform.any_op",
                e.name
            ));
        }
        let out = expand_ok(&main_with(&body));
        assert_eq!(out.expanded, std::slice::from_ref(&e.name));
        if out.inserted.is_empty() {
            // The callee's terminator went with it.
            assert!(
                !out.text.contains("transform.yield %"),
                "{}: {}",
                e.name,
                out.text
            );
        }
    }
}

#[test]
fn unknown_include_names_the_sequence_the_file_the_line_and_the_library() {
    let text = main_with(
        &[
            include("canonicalize_with_cse", "%arg1"),
            include("tile_everything", "%arg1"),
        ]
        .join("\n"),
    );
    let e = expand(&text, "/tmp/mine.mlir", None).unwrap_err();
    let TransformError::UnknownSequence {
        line, name, known, ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!((*line, name.as_str()), (7, "tile_everything"));
    assert_eq!(known.len(), 25);
    let msg = e.to_string();
    assert!(
        msg.starts_with("/tmp/mine.mlir:7: transform.include @tile_everything"),
        "{msg}"
    );
    assert!(
        msg.contains("one_shot_bufferize") && msg.contains("triton-npu transform list"),
        "{msg}"
    );
}

#[test]
fn recursion_is_an_error_not_a_hang() {
    let text = "module attributes {transform.with_named_sequence} {\n\
      transform.named_sequence @a(%m: !transform.any_op {transform.readonly}) {\n\
        transform.include @b failures(propagate) (%m) : (!transform.any_op) -> ()\n\
        transform.yield\n}\n\
      transform.named_sequence @b(%m: !transform.any_op {transform.readonly}) {\n\
        transform.include @canonicalize_with_cse failures(propagate) (%m) : (!transform.any_op) -> ()\n\
        transform.include @a failures(propagate) (%m) : (!transform.any_op) -> ()\n\
        transform.yield\n}\n\
      transform.named_sequence @__transform_main(%arg1: !transform.any_op {transform.readonly}) {\n\
        transform.include @a failures(propagate) (%arg1) : (!transform.any_op) -> ()\n\
        transform.yield\n}\n}";
    let e = expand(text, "r.mlir", None).unwrap_err();
    let msg = e.to_string();
    // Found first while expanding @a's own definition (line 3 includes @b, whose line 8
    // includes @a again).
    assert!(
        matches!(&e, TransformError::Recursion { chain, .. } if chain == &["a", "b", "a"]),
        "{msg}"
    );
    assert!(
        msg.contains("r.mlir:8") && msg.contains("@a -> @b -> @a"),
        "{msg}"
    );
    let selfish = "module attributes {transform.with_named_sequence} {\n\
      transform.named_sequence @__transform_main(%arg1: !transform.any_op {transform.readonly}) {\n\
        transform.include @__transform_main failures(propagate) (%arg1) : (!transform.any_op) -> ()\n\
        transform.yield\n}\n}";
    let e = expand(selfish, "s.mlir", None).unwrap_err().to_string();
    assert!(e.contains("recursive") && e.contains("s.mlir:3"), "{e}");
}

#[test]
fn bad_nesting_and_malformed_includes() {
    let unclosed = main_with(&include("one_shot_bufferize", "%arg1"))
        .replace("transform.yield\n  }", "transform.yield\n");
    let e = expand(&unclosed, "u.mlir", None).unwrap_err().to_string();
    assert!(
        e.starts_with("u.mlir:") && e.contains("never closed"),
        "{e}"
    );
    let crossed =
        main_with(&include("one_shot_bufferize", "%arg1")).replace("(%arg1) :", "(%arg1] :");
    let e = expand(&crossed, "c.mlir", None).unwrap_err().to_string();
    assert!(e.contains("bad nesting"), "{e}");
    let e = expand(
        "transform.include @one_shot_bufferize failures(propagate) (%x) : (!transform.any_op) -> ()",
        "top.mlir",
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("top.mlir:1") && e.contains("outside any sequence body"),
        "{e}"
    );
}

#[test]
fn signatures_must_match() {
    let two_args = main_with(
        "    transform.include @one_shot_bufferize failures(propagate) (%arg1, %arg1) : (!transform.any_op, !transform.any_op) -> ()",
    );
    let e = expand(&two_args, "a.mlir", None).unwrap_err().to_string();
    assert!(
        e.contains("passes 2 handle(s), the sequence takes 1"),
        "{e}"
    );
    assert!(
        e.contains("@one_shot_bufferize(%root: !transform.any_op {transform.readonly})"),
        "{e}"
    );
    let two_results = main_with(
        "    %a, %b = transform.include @air_herd_mapping_and_vectorize failures(propagate) (%arg1) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)",
    );
    let e = expand(&two_results, "a.mlir", None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("binds 2 result(s), the sequence yields 1"),
        "{e}"
    );
    // A result may be left unbound, as upstream's scripts sometimes do.
    expand_ok(&main_with(&include(
        "air_herd_mapping_and_vectorize",
        "%arg1",
    )));
}

#[test]
fn foreach_match_needs_known_symbols_and_a_module() {
    let unknown = main_with(
        "    transform.foreach_match in %arg1 @match_cmpf -> @action_nobody_wrote : (!transform.any_op) -> !transform.any_op",
    );
    let e = expand(&unknown, "f.mlir", None).unwrap_err().to_string();
    assert!(
        e.contains("f.mlir:5") && e.contains("@action_nobody_wrote"),
        "{e}"
    );
    let no_module = "transform.named_sequence @__transform_main(%arg1: !transform.any_op {transform.readonly}) {\n\
        transform.foreach_match in %arg1 @match_cmpf -> @action_cast_cmpf_to_bf16 : (!transform.any_op) -> !transform.any_op\n\
        transform.yield\n}";
    let e = expand(no_module, "n.mlir", None).unwrap_err().to_string();
    assert!(
        e.contains("n.mlir:2") && e.contains("no such module"),
        "{e}"
    );
}

#[test]
fn fresh_names_avoid_the_scripts_own() {
    let text = main_with(&format!(
        "    %kernels_1 = transform.structured.match ops{{[\"func.func\"]}} in %arg1 : (!transform.any_op) -> !transform.any_op\n{}",
        include("canonicalize_with_cse", "%kernels_1")
    ));
    let out = expand_ok(&text);
    assert!(
        out.text.contains(
            "%kernels_1_1 = transform.structured.match ops{[\"func.func\"]} in %kernels_1"
        ),
        "{}",
        out.text
    );
}

#[test]
fn sequences_for_the_other_npu_are_flagged() {
    let text = main_with(&include("flatten_tile_forall_aie2p", "%arg1"));
    let out = expand(&text, "w.mlir", Some(NpuVersion::Npu1)).unwrap();
    assert_eq!(out.warnings.len(), 1);
    assert!(out.warnings[0].contains("npu1 has 4"));
    assert!(
        expand(&text, "w.mlir", Some(NpuVersion::Npu2))
            .unwrap()
            .warnings
            .is_empty()
    );
}

#[test]
fn includes_in_comments_and_strings_are_text() {
    let text = main_with(&format!(
        "    // transform.include @not_a_sequence failures(propagate) (%arg1) : (!transform.any_op) -> ()\n    \
         transform.annotate %arg1 \"transform.include @x\" : !transform.any_op\n{}",
        include("one_shot_bufferize", "%arg1")
    ));
    let out = expand_ok(&text);
    assert!(out.text.contains("// transform.include @not_a_sequence"));
    assert!(out.text.contains("\"transform.include @x\""));
}
