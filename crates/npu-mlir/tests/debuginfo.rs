//! The reader on text shaped like `triton-shared-opt --triton-to-linalg-experimental
//! --mlir-print-debuginfo` output (tests/fixtures, see PROVENANCE.md there): locations on
//! every op and parameter, `loc("name"(#locN))`, `loc(fused[…])`, `loc(callsite(…))`, and
//! `#locN = loc(…)` aliases after the module, some with `)`, `->` and quotes in file paths.

use npu_mlir::edit::strip_locations;
use npu_mlir::{KernelIo, Module, Type};

const ADD: &str = include_str!("fixtures/add_kernel.debuginfo.mlir");
const MATMUL: &str = include_str!("fixtures/matmul.debuginfo.mlir");
const ROW_SUM: &str = include_str!("fixtures/row_sum.debuginfo.mlir");

fn parse(text: &str) -> Module<'_> {
    Module::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn vector_add_signature_locations_and_writes() {
    let m = parse(ADD);
    assert!(m.explicit);
    assert_eq!(m.location, Some("loc(#loc)"));
    let k = m.kernel().unwrap();
    assert_eq!(k.name(), "add_kernel");
    assert_eq!(k.params().len(), 10);
    assert_eq!(k.buffers().count(), 3);
    assert_eq!(k.params()[0].location, Some("loc(\"x_ptr\"(#loc))"));
    assert_eq!(
        k.params()[3].attributes,
        Some("{tt.divisibility = 16 : i32}")
    );
    assert_eq!(
        k.params()[9].location,
        Some(r#"loc("/home/user/my (v2) -> \"final\"/add.py":21:0)"#)
    );
    assert!(k.params()[4..].iter().all(|p| p.ty == Type("i32")));
    // Aliases: `#map` before the module, 23 location aliases after it.
    assert_eq!(m.aliases[0].name, "#map");
    let locs: Vec<&str> = m.aliases[1..].iter().map(|a| a.name).collect();
    assert_eq!(locs.len(), 23);
    assert_eq!((locs[0], locs[22]), ("#loc", "#loc22"));
    assert_eq!(
        m.aliases.iter().find(|a| a.name == "#loc21").unwrap().value,
        "loc(callsite(#loc11 at #loc13))"
    );
    assert_eq!(
        m.kernel_io(),
        Some(KernelIo {
            name: "add_kernel".into(),
            written: vec![false, false, true],
            derived: true
        })
    );
    let linalg: Vec<&str> = m.linalg_ops().iter().map(|o| o.name).collect();
    assert_eq!(linalg, ["linalg.generic", "linalg.yield"]);
    assert_eq!(m.single_matmul(), None);
    let generic = m.walk().find(|o| o.name == "linalg.generic").unwrap();
    assert_eq!(generic.location, Some("loc(#loc19)"));
    let args = &generic.regions[0].blocks[0].arguments;
    assert_eq!(args.len(), 3);
    assert_eq!(args[2].value, Some("%out"));
}

#[test]
fn matmul_is_detected_with_its_shapes() {
    let m = parse(MATMUL);
    // `#loc` stands before the module here, the other aliases after it.
    assert_eq!(m.aliases[0].name, "#loc");
    let mm = m.single_matmul().unwrap();
    assert_eq!((mm.m, mm.n, mm.k), (32, 32, 64));
    assert_eq!((mm.input, mm.output), ("f32", "f32"));
    let ops = m.linalg_ops();
    assert_eq!(ops[1].name, "linalg.matmul");
    assert_eq!(
        ops[1].inputs,
        [Type("tensor<32x64xf32>"), Type("tensor<64x32xf32>")]
    );
    assert_eq!(ops[1].outputs, [Type("tensor<32x32xf32>")]);
    assert_eq!(m.kernel_io().unwrap().written, [false, false, true]);
}

#[test]
fn reductions_bind_their_block_arguments() {
    let m = parse(ROW_SUM);
    let names: Vec<&str> = m.linalg_ops().iter().map(|o| o.name).collect();
    assert_eq!(
        names,
        [
            "linalg.transpose",
            "linalg.fill",
            "linalg.reduce",
            "linalg.yield"
        ]
    );
    assert_eq!(m.single_matmul(), None);
    let reduce = m.walk().find(|o| o.name == "linalg.reduce").unwrap();
    let bound: Vec<&str> = reduce.bindings.iter().map(|v| v.name).collect();
    assert_eq!(bound, ["%in", "%init"]);
    let used: Vec<&str> = reduce.operands.iter().map(|v| v.name).collect();
    assert_eq!(used, ["%transposed", "%3"]);
    assert_eq!(reduce.regions.len(), 1);
    assert_eq!(reduce.location, Some("loc(#loc8)"));
    assert_eq!(m.kernel_io().unwrap().written, [false, true]);
}

#[test]
fn locations_change_nothing_the_reader_reports() {
    for text in [ADD, MATMUL, ROW_SUM] {
        // Without the location aliases and every `loc(…)`.
        let no_aliases: String = text
            .lines()
            .filter(|l| !l.starts_with("#loc"))
            .map(|l| format!("{l}\n"))
            .collect();
        let bare = strip_locations(&no_aliases).unwrap();
        assert!(!bare.contains(" loc("), "{bare}");
        let (with, without) = (parse(text), parse(&bare));
        assert_eq!(with.kernel_io(), without.kernel_io());
        assert_eq!(with.linalg_ops(), without.linalg_ops());
        assert_eq!(with.single_matmul(), without.single_matmul());
        let shape = |m: &Module<'_>| -> Vec<(String, Vec<String>, Vec<String>, usize)> {
            m.walk()
                .map(|o| {
                    (
                        o.name.to_owned(),
                        o.results.iter().map(|r| r.to_string()).collect(),
                        o.operands.iter().map(|v| v.name.to_owned()).collect(),
                        o.regions.len(),
                    )
                })
                .collect()
        };
        assert_eq!(shape(&with), shape(&without));
        let types = |m: &Module<'_>| -> Vec<String> {
            m.kernel()
                .unwrap()
                .params()
                .iter()
                .map(|p| p.ty.to_string())
                .collect()
        };
        assert_eq!(types(&with), types(&without));
    }
}
