//! Stand-in `air-opt` (tests only).
//!
//! Accepts the passes triton-npu's lowering uses, as `--pass-pipeline=…` or as individual
//! pass flags, and checks them as MLIR would: unknown passes and options, a function pass
//! outside `func.func`, a missing transform script. The output is the input module with one
//! comment line per pass run and, after `air-wrap-func-with-parallel{loop-bounds=X,Y,Z}`, an
//! `npu_harness.grid` module attribute; the `npu_harness.*` attributes pass through.
//! `air-par-to-launch` moves the kernel's body into an `air.launch` over that grid (see
//! `npu_harness_tools::launch`), which carries the kernel's meaning too.

use npu_harness_tools::cli::{self, flag, optional, value};
use npu_harness_tools::pipeline::{self, Element};
use npu_harness_tools::{attrs, harness, launch, transform};

const TOOL: &str = "air-opt";

/// Module attribute: the L3 allocations one_shot_bufferize made (air-transform to
/// air-par-to-launch).
const L3_ALLOCS: &str = "npu_harness.l3_allocations";

/// Passes the stand-in knows, their options, and whether they must run on `func.func`.
const PASSES: &[(&str, &[&str], bool)] = &[
    ("air-resolve-tensor-opoperand-conflicts", &[], false),
    (
        "air-override-memref-memory-space",
        &["scope", "memory-space"],
        false,
    ),
    ("air-transform", &["filename"], false),
    (
        "air-wrap-func-with-parallel",
        &["loop-bounds", "actual-sizes"],
        true,
    ),
    ("air-par-to-launch", &["depth", "has-air-segment"], false),
    ("air-copy-to-dma", &[], false),
    (
        "canonicalize",
        &[
            "top-down",
            "region-simplify",
            "max-iterations",
            "max-num-rewrites",
            "test-convergence",
            "disable-patterns",
            "enable-patterns",
        ],
        false,
    ),
    ("cse", &[], false),
];
const ANCHORS: &[&str] = &["builtin.module", "func.func"];

fn main() {
    let argv = harness::start(TOOL);
    let mut specs = vec![
        value("o"),
        value("pass-pipeline"),
        flag("mlir-print-debuginfo"),
        flag("allow-unregistered-dialect"),
        flag("split-input-file"),
        flag("verify-diagnostics"),
        flag("version"),
        flag("help"),
    ];
    specs.extend(PASSES.iter().map(|(name, _, _)| optional(name)));
    let args =
        cli::parse(TOOL, &argv[0], &argv[1..], &specs, 0..=1).unwrap_or_else(|e| harness::fail(&e));
    if args.flag("version") {
        print!("{}", harness::version_banner(TOOL));
        return;
    }
    if args.flag("help") {
        println!(
            "OVERVIEW: npu-harness stand-in for air-opt\n\nUSAGE: {TOOL} [options] <input file>"
        );
        return;
    }
    let individual: Vec<Element> = args
        .options
        .iter()
        .filter(|(name, _)| PASSES.iter().any(|(p, _, _)| p == name))
        .map(|(name, opts)| Element {
            name: (*name).to_owned(),
            options: opts
                .clone()
                .unwrap_or_default()
                .trim_matches('"')
                .to_owned(),
            nested: None,
            column: 1,
        })
        .collect();
    let passes = match args.value("pass-pipeline") {
        Some(_) if !individual.is_empty() => harness::fail(&format!(
            "{TOOL}: '--pass-pipeline' option can't be used with individual pass options"
        )),
        Some(text) => pipeline::parse(text).unwrap_or_else(|e| harness::fail(&e)),
        // Individual flags run on the module, with function passes nested as MLIR does.
        None => individual
            .into_iter()
            .map(|e| {
                let on_func = PASSES.iter().any(|(p, _, f)| *p == e.name && *f);
                if on_func {
                    Element {
                        name: "func.func".into(),
                        options: String::new(),
                        nested: Some(vec![e]),
                        column: 1,
                    }
                } else {
                    e
                }
            })
            .collect(),
    };

    let input = args.positionals.first().map(String::as_str).unwrap_or("-");
    let mut module = harness::read_input(input).unwrap_or_else(|e| {
        harness::fail(&format!("{TOOL}: could not open input file '{input}': {e}"))
    });
    let mut ran = Vec::new();
    run(&passes, None, &mut module, &mut ran);
    let mut out = String::new();
    for line in &ran {
        out.push_str(&format!("// npu-harness air-opt: {line}\n"));
    }
    out.push_str(&module);
    let output = args.value("o").unwrap_or("-");
    harness::write_output(output, out.as_bytes())
        .unwrap_or_else(|e| harness::fail(&format!("{TOOL}: cannot write '{output}': {e}")));
}

/// Checks and "runs" a pipeline level; `anchor` is the enclosing op anchor.
fn run(elements: &[Element], anchor: Option<&str>, module: &mut String, ran: &mut Vec<String>) {
    for e in elements {
        if let Some(nested) = &e.nested {
            if !ANCHORS.contains(&e.name.as_str()) {
                harness::fail(&format!(
                    "MLIR Textual PassPipeline Parser:1:{}: error: '{}' is not an operation \
                     this pipeline can nest on",
                    e.column, e.name
                ));
            }
            run(nested, Some(&e.name), module, ran);
            continue;
        }
        let Some((_, allowed, on_func)) = PASSES.iter().find(|(p, _, _)| *p == e.name) else {
            harness::fail(&format!(
                "MLIR Textual PassPipeline Parser:1:{}: error: '{}' does not refer to a \
                 registered pass or pass pipeline",
                e.column, e.name
            ));
        };
        if *on_func && anchor != Some("func.func") {
            harness::fail(&format!(
                "<unknown>:0: error: can't run '{}' pass on '{}' op: it runs on 'func.func'; \
                 nest it as func.func({})",
                e.name,
                anchor.unwrap_or("builtin.module"),
                e.name
            ));
        }
        let opts = pipeline::options(&e.options);
        for (k, _) in &opts {
            if !allowed.contains(&k.as_str()) {
                harness::fail(&format!(
                    "<Pass-Options-Parser>: no such option {k}\n{TOOL}: failed to add `{}` with \
                     options `{}`",
                    e.name, e.options
                ));
            }
        }
        let get = |k: &str| opts.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        match e.name.as_str() {
            "air-transform" => {
                let file = get("filename").unwrap_or("");
                if file.is_empty() {
                    harness::fail("<unknown>:0: error: no transform file name specified");
                }
                let Ok(text) = std::fs::read_to_string(file) else {
                    harness::fail(&format!(
                        "{file}:0:0: error: failed to open transform file: {file}"
                    ))
                };
                // Parse and verify the script, then run @__transform_main once over the
                // payload's model (see npu_harness_tools::transform).
                let outcome = transform::parse(&text)
                    .and_then(|script| transform::interp::run(&script, module))
                    .unwrap_or_else(|e| harness::fail(&e.render(file)));
                // mlir-air's air.herd verifier runs when the pass ends (the pass manager
                // verifies the module): L1-only allocations and accesses inside each herd.
                if let Some(violation) = &outcome.herd_violation {
                    harness::fail(violation);
                }
                if !outcome.herds.is_empty() {
                    *module = attrs::set_module_attr(
                        module,
                        attrs::HERD,
                        &attrs::mlir_string(&attrs::herds_text(&outcome.herds)),
                    );
                }
                if outcome.precise && !outcome.l3_allocations.is_empty() {
                    *module = attrs::set_module_attr(
                        module,
                        L3_ALLOCS,
                        &attrs::mlir_string(&outcome.l3_allocations.join("; ")),
                    );
                }
            }
            "air-override-memref-memory-space" => {
                // The buffers the kernel's loads copy into now live in this memory space
                // (default 0: mlir-air Passes.td:1828, AIROverrideMemRefMemorySpace).
                let space: i64 = get("memory-space")
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                *module = attrs::set_module_attr(
                    module,
                    attrs::LOADS_MEMORY_SPACE,
                    &format!("{space} : i32"),
                );
            }
            "air-wrap-func-with-parallel" => {
                let bounds: Vec<i64> = get("loop-bounds")
                    .unwrap_or("")
                    .split(',')
                    .filter_map(|v| v.trim().parse().ok())
                    .collect();
                if bounds.len() != 3 || bounds.iter().any(|b| *b < 1) {
                    harness::fail(&format!(
                        "<unknown>:0: error: air-wrap-func-with-parallel needs \
                         loop-bounds=X,Y,Z with three positive sizes, got {:?}",
                        get("loop-bounds").unwrap_or("")
                    ));
                }
                *module = attrs::set_module_attr(
                    module,
                    attrs::GRID,
                    &format!("array<i32: {}, {}, {}>", bounds[0], bounds[1], bounds[2]),
                );
                if let Some(given) = get("actual-sizes") {
                    let sizes: Vec<u32> = given
                        .split(',')
                        .filter_map(|v| v.trim().parse().ok())
                        .collect();
                    if sizes.len() != 3 || sizes.contains(&0) {
                        harness::fail(&format!(
                            "<unknown>:0: error: air-wrap-func-with-parallel needs \
                             actual-sizes=M,N,K with three positive sizes, got {given:?}"
                        ));
                    }
                    *module = attrs::set_module_attr(
                        module,
                        attrs::ACTUAL_SIZES,
                        &format!("array<i32: {}, {}, {}>", sizes[0], sizes[1], sizes[2]),
                    );
                }
            }
            "air-par-to-launch" => {
                // mlir-air's air.segment verifier (AIRDialect.cpp:1752-1754, via
                // verifyAllocMemorySpace :1640-1681): the segment made here may not hold an
                // allocation in L3, such as one one_shot_bufferize made for a result that had
                // no L2/L1 buffer yet.
                if get("has-air-segment") == Some("true")
                    && let Some(what) = attrs::string_attr(module, L3_ALLOCS)
                {
                    harness::fail(&format!(
                        "<unknown>:0: error: 'memref.alloc' op memref.alloc inside air.segment \
                         must have memory space >= L2, but found memory space L3\n\
                         <unknown>:0: note: the allocation: {what}"
                    ));
                }
                *module = launch::par_to_launch(module)
            }
            _ => {}
        }
        ran.push(if e.options.is_empty() {
            e.name.clone()
        } else {
            format!("{}{{{}}}", e.name, e.options)
        });
    }
}
