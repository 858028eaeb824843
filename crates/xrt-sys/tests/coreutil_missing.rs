//! A shim that needs XRT, on a machine without it: the error names libxrt_coreutil.so.2 and
//! every XRT directory tried. (Its own process: loading coreutil is process-wide.)

mod fixtures;

use xrt_sys::{Search, XrtSysError, loader};

#[test]
fn the_coreutil_rule_reads_the_shims_symbols() {
    let dir = tempfile::tempdir().unwrap();
    let needs = fixtures::shared_object(
        fixtures::NEEDS_XRT,
        &dir.path().join("a/libtriton_npu_xrt.so"),
    );
    let alone = fixtures::shared_object(
        fixtures::SELF_CONTAINED,
        &dir.path().join("b/libtriton_npu_xrt.so"),
    );
    assert!(loader::needs_coreutil(&needs).unwrap());
    assert!(!loader::needs_coreutil(&alone).unwrap());
}

#[test]
fn missing_coreutil_names_the_library_and_the_dirs_tried() {
    let dir = tempfile::tempdir().unwrap();
    let shim = fixtures::shared_object(
        fixtures::NEEDS_XRT,
        &dir.path().join("shim/libtriton_npu_xrt.so"),
    );
    let xrt = dir.path().join("xrt");
    let search = Search {
        shim: Some(shim.clone()),
        shim_dirs: vec![],
        xrt_roots: vec![
            ("XILINX_XRT".to_owned(), xrt.clone()),
            ("default location".to_owned(), "/opt/xilinx/xrt".into()),
        ],
    };
    let result = xrt_sys::load(&search);
    if fixtures::system_has_coreutil() {
        // A machine with XRT installed finds it through the system loader; the fixture then
        // loads (its symbol resolved) and is refused only for not being a whole shim.
        assert!(
            matches!(result, Err(XrtSysError::NotAShim { .. })),
            "{result:?}"
        );
        return;
    }
    let err = result.unwrap_err();
    assert!(matches!(err, XrtSysError::CoreutilNotFound { .. }), "{err}");
    let text = err.to_string();
    for needle in [
        "libxrt_coreutil.so.2".to_owned(),
        shim.display().to_string(),
        xrt.join("lib/libxrt_coreutil.so.2").display().to_string(),
        xrt.join("lib64/libxrt_coreutil.so.2").display().to_string(),
        "(XILINX_XRT)".to_owned(),
        "/opt/xilinx/xrt/lib/libxrt_coreutil.so.2".to_owned(),
        "system loader path".to_owned(),
        "AMD_TRITON_NPU_XRT_DIR".to_owned(),
    ] {
        assert!(text.contains(&needle), "{needle:?} missing from: {text}");
    }
}

#[test]
fn a_library_without_the_shims_functions_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixtures::shared_object(
        fixtures::SELF_CONTAINED,
        &dir.path().join("libtriton_npu_xrt.so"),
    );
    let err = xrt_sys::load(&Search {
        shim: Some(lib),
        ..Search::default()
    })
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, XrtSysError::NotAShim { .. }), "{text}");
    assert!(text.contains("triton_npu_xrt_state_name"), "{text}");
}
