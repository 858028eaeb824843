use super::*;

fn kernel(name: &str, elem: &str, buffers: usize) -> String {
    let params: Vec<String> = (0..buffers)
        .map(|i| format!("%arg{i}: memref<*x{elem}> {{tt.divisibility = 16 : i32}}"))
        .chain((buffers..buffers + 7).map(|i| format!("%arg{i}: i32")))
        .collect();
    format!(
        "#map = affine_map<(d0) -> (d0)>\nmodule {{\n  func.func @{name}({}) {{\n    return\n  }}\n}}\n",
        params.join(", ")
    )
}

fn input_reason(e: DriverError) -> String {
    match e {
        DriverError::ChainInput { reason, .. } => reason,
        other => panic!("expected a ChainInput error, got {other}"),
    }
}

#[test]
fn ops_are_checked_when_added() {
    let mut b = ChainBuilder::new("c").unwrap();
    b.add_op(
        &kernel("add", "f32", 3),
        [4, 1, 1],
        &[(0, 0), (1, 1), (2, 2)],
        None,
        None,
    )
    .unwrap();
    assert_eq!(b.ops()[0].kernel, "add");
    assert_eq!(b.ops()[0].arg_map, [0, 1, 2]);

    // The hand-off index must keep its element type.
    let bf16 = kernel("relu", "bf16", 2);
    let reason = input_reason(
        b.add_op(&bf16, [1, 1, 1], &[(0, 2), (1, 3)], None, None)
            .unwrap_err(),
    );
    assert!(
        reason.contains("conflicting element types for combined index 2")
            && reason.contains("op 0 (add) buffer 2 is memref<*xf32>")
            && reason.contains("op 1 (relu) buffer 0 is memref<*xbf16>"),
        "{reason}"
    );
    assert_eq!(b.ops().len(), 1, "a refused op is not added");

    let relu = kernel("relu", "f32", 2);
    let reason = input_reason(
        b.add_op(&relu, [1, 1, 1], &[(0, 2)], None, None)
            .unwrap_err(),
    );
    assert!(
        reason.contains("does not map buffer parameter(s) 1"),
        "{reason}"
    );
    let reason = input_reason(
        b.add_op(&relu, [1, 1, 1], &[(0, 2), (2, 3)], None, None)
            .unwrap_err(),
    );
    assert!(
        reason.contains("names buffer parameter 2, but the kernel has 2"),
        "{reason}"
    );
    let reason = input_reason(
        b.add_op(&relu, [1, 1, 1], &[(0, 2), (1, 16)], None, None)
            .unwrap_err(),
    );
    assert!(reason.contains("at most 16 buffers"), "{reason}");
    let reason = input_reason(
        b.add_op(&relu, [1, 0, 1], &[(0, 2), (1, 3)], None, None)
            .unwrap_err(),
    );
    assert!(reason.contains("empty dimension"), "{reason}");
    let reason = input_reason(
        b.add_op("module {\n}\n", [1, 1, 1], &[], None, None)
            .unwrap_err(),
    );
    assert!(reason.contains("no function with a body"), "{reason}");

    b.add_op(&relu, [1, 1, 1], &[(0, 2), (1, 3)], None, None)
        .unwrap();
    assert_eq!(b.combined_arg_types().unwrap(), vec!["memref<*xf32>"; 4]);
}

#[test]
fn combined_indices_must_be_dense_and_names_identifiers() {
    let mut b = ChainBuilder::new("gappy").unwrap();
    let reason = input_reason(b.combined_arg_types().unwrap_err());
    assert!(reason.contains("no ops yet"), "{reason}");
    b.add_op(
        &kernel("k", "f32", 2),
        [1, 1, 1],
        &[(0, 0), (1, 2)],
        None,
        None,
    )
    .unwrap();
    let reason = input_reason(b.combined_arg_types().unwrap_err());
    assert!(
        reason.contains("combined index 1 is used by no op"),
        "{reason}"
    );
    for bad in ["", "1chain", "with space", "a-b"] {
        assert!(ChainBuilder::new(bad).is_err(), "{bad:?}");
    }
    assert!(ChainBuilder::new("layer.0_attn$x").is_ok());
}

#[test]
fn cache_inputs_cover_every_op_property() {
    let config = Config::load(&|_| None, &Default::default()).unwrap();
    let host = Host::default();
    let pipeline = Pipeline {
        config: &config,
        host: &host,
        target: NpuVersion::Npu2,
        format: OutputFormat::Elf,
    };
    let key = |b: &ChainBuilder| b.cache_inputs(&pipeline).unwrap().key();
    let build = |grid: [u32; 3], map: &[(usize, usize)], sizes: Option<[u64; 3]>| {
        let mut b = ChainBuilder::new("c").unwrap();
        b.add_op(&kernel("k", "f32", 2), grid, map, None, sizes)
            .unwrap();
        b
    };
    let base = key(&build([2, 1, 1], &[(0, 0), (1, 1)], None));
    assert_eq!(base, key(&build([2, 1, 1], &[(0, 0), (1, 1)], None)));
    assert_ne!(base, key(&build([4, 1, 1], &[(0, 0), (1, 1)], None)));
    assert_ne!(base, key(&build([2, 1, 1], &[(0, 1), (1, 0)], None)));
    assert_ne!(
        base,
        key(&build([2, 1, 1], &[(0, 0), (1, 1)], Some([5, 5, 1])))
    );
    let mut renamed = ChainBuilder::new("d").unwrap();
    renamed
        .add_op(
            &kernel("k", "f32", 2),
            [2, 1, 1],
            &[(0, 0), (1, 1)],
            None,
            None,
        )
        .unwrap();
    assert_ne!(base, key(&renamed));
    // A per-op script is keyed by its contents; a missing one is an error that names it.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("t.mlir");
    std::fs::write(&script, "transform.named_sequence").unwrap();
    let mut scripted = ChainBuilder::new("c").unwrap();
    scripted
        .add_op(
            &kernel("k", "f32", 2),
            [2, 1, 1],
            &[(0, 0), (1, 1)],
            Some(script.clone()),
            None,
        )
        .unwrap();
    let with_script = key(&scripted);
    assert_ne!(base, with_script);
    std::fs::write(&script, "transform.named_sequence // changed").unwrap();
    assert_ne!(with_script, key(&scripted));
    std::fs::remove_file(&script).unwrap();
    let err = scripted.cache_inputs(&pipeline).unwrap_err();
    assert!(matches!(err, DriverError::TransformScript { .. }), "{err}");
}
