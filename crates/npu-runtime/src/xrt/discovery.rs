//! Where the XRT runtime looks for the shim and for XRT itself, from the configuration.
//!
//! The shim: `AMD_TRITON_NPU_XRT_SHIM` (an explicit path: a custom build, or the conformance
//! harness's stand-in), else `libtriton_npu_xrt.so` in the directories the installed package
//! passes in (next to the Python extension module, the package's `lib/`). XRT's
//! `libxrt_coreutil.so.2`, when the shim needs it: under `AMD_TRITON_NPU_XRT_DIR`,
//! `XRT_DEV_DIR`, `XILINX_XRT`, `/opt/xilinx/xrt` (`lib/`, `lib64/`), then the system loader
//! path. See `xrt_sys::loader` for the rule that decides whether coreutil is needed.

use std::path::PathBuf;
use std::sync::Arc;

use npu_target::Config;
use npu_target::config::vars;
use xrt_sys::{Search, Shim};

use crate::RuntimeError;

/// XRT's default install root on Linux.
pub const DEFAULT_XRT_ROOT: &str = "/opt/xilinx/xrt";

/// The search for the shim and XRT that `config` describes.
pub fn search(config: &Config, shim_dirs: &[PathBuf]) -> Search {
    let roots = [
        ("AMD_TRITON_NPU_XRT_DIR", config.xrt_dir.clone()),
        (vars::XRT_DEV_DIR, config.locations.xrt_dev_dir.clone()),
        (vars::XILINX_XRT, config.locations.xilinx_xrt.clone()),
        ("default location", Some(PathBuf::from(DEFAULT_XRT_ROOT))),
    ];
    Search {
        shim: config.locations.xrt_shim.clone(),
        shim_dirs: shim_dirs.to_vec(),
        xrt_roots: roots
            .into_iter()
            .filter_map(|(name, dir)| dir.map(|d| (name.to_owned(), d)))
            .collect(),
    }
}

/// Loads the shim (and XRT's coreutil when it needs it).
pub fn load_shim(config: &Config, shim_dirs: &[PathBuf]) -> Result<Arc<Shim>, RuntimeError> {
    xrt_sys::load(&search(config, shim_dirs)).map_err(|e| RuntimeError::NotFound(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(pairs: &[(&str, &str)]) -> Config {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::load(&|k| map.get(k).cloned(), &Default::default()).unwrap()
    }

    #[test]
    fn roots_follow_the_documented_order() {
        let c = config(&[
            ("XILINX_XRT", "/x"),
            ("AMD_TRITON_NPU_XRT_DIR", "/a"),
            ("XRT_DEV_DIR", "/d"),
            ("AMD_TRITON_NPU_XRT_SHIM", "/s/libtriton_npu_xrt.so"),
        ]);
        let s = search(&c, &[PathBuf::from("/pkg")]);
        let roots: Vec<_> = s
            .xrt_roots
            .iter()
            .map(|(_, p)| p.to_str().unwrap())
            .collect();
        assert_eq!(roots, ["/a", "/d", "/x", DEFAULT_XRT_ROOT]);
        assert_eq!(s.shim, Some(PathBuf::from("/s/libtriton_npu_xrt.so")));
        assert_eq!(s.shim_dirs, [PathBuf::from("/pkg")]);
        let bare = search(&config(&[]), &[]);
        assert_eq!(bare.shim, None);
        assert_eq!(bare.xrt_roots.len(), 1, "only the default root");
    }

    #[test]
    fn no_shim_is_an_error_that_says_where_and_how() {
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("triton_npu");
        let err =
            super::super::XrtRuntime::open(&config(&[]), &[package.clone(), package.join("lib")])
                .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, RuntimeError::NotFound(_)), "{text}");
        assert!(text.contains("AMD_TRITON_NPU_XRT_SHIM: not set"), "{text}");
        for dir in [&package, &package.join("lib")] {
            let where_ = dir.join(xrt_sys::SHIM_FILE).display().to_string();
            assert!(text.contains(&where_), "{where_} missing: {text}");
        }
        assert!(
            text.contains("make xrt-shim") && text.contains("AMD_TRITON_NPU_RUNTIME=hsa"),
            "{text}"
        );
    }
}
