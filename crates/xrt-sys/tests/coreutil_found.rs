//! A shim that needs XRT resolves its XRT symbols against the libxrt_coreutil.so.2 found under
//! an XRT root, loaded globally before the shim. (Its own process: the load is process-wide.)

mod fixtures;

use xrt_sys::{Search, XrtSysError};

#[test]
fn coreutil_from_an_xrt_root_is_loaded_before_the_shim() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("xrt");
    let coreutil = fixtures::shared_object(
        "unsigned int xrtVersionCode(void) { return (2u << 16) + 25u; }\n",
        &root.join("lib64/libxrt_coreutil.so.2"),
    );
    let shim = fixtures::shared_object(
        fixtures::NEEDS_XRT,
        &dir.path().join("shim/libtriton_npu_xrt.so"),
    );
    let search = Search {
        shim: Some(shim),
        shim_dirs: vec![],
        xrt_roots: vec![("AMD_TRITON_NPU_XRT_DIR".to_owned(), root)],
    };
    // The fixture's xrtVersionCode resolved (dlopen with RTLD_NOW succeeded), so the refusal is
    // about the missing shim functions, not an undefined symbol.
    let err = xrt_sys::load(&search).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, XrtSysError::NotAShim { .. }), "{text}");
    assert!(
        text.contains("triton_npu_xrt_state_name") && !text.contains("xrtVersionCode"),
        "{text}"
    );
    // The loader remembers where coreutil came from for the rest of the process.
    let again = xrt_sys::load(&search).unwrap_err().to_string();
    assert_eq!(again, text);
    assert!(coreutil.is_file());
}
