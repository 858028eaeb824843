//! The tools aircc runs behind our back: `aiecc` (mlir-aie's compiler driver) and what aiecc
//! itself runs, `bootgen`, `aiebu-asm` and `xclbinutil`. We never start them, but a compile
//! fails inside aircc when one is missing, so `triton-npu doctor` looks for them the way they
//! are looked for (the steering repository's aircc.md §3.3 and §4.1, from mlir-air
//! `tools/aircc/aircc.cpp` at d0e522b and mlir-aie `tools/aiecc` `Actions.h`):
//!
//! * `aiecc`: aircc searches `PATH` only (`sys::findProgramByName`), then `aiecc.py`;
//! * `bootgen` (every NPU format: it writes the PDI), `aiebu-asm` (the full ELF of the `elf`
//!   format) and `xclbinutil` (the `xclbin` format): aiecc searches Peano's `bin/`, then
//!   `PATH`; for xclbinutil, `AIE_XCLBINUTIL` first. aiecc may have bootgen built in
//!   (`AIECC_HAS_BOOTGEN_LIBRARY`), so a missing bootgen binary is only a warning.
//!
//! Where a tool exists but aiecc would not look (the mlir-aie wheel's `mlir_aie/bin`, XRT's
//! `bin/`), the report says so: the fix is then to put that directory on `PATH`.

use std::path::PathBuf;

use npu_target::{Config, OutputFormat};

use crate::discovery::{self, SearchPaths, Tool};
use crate::error::{Candidate, MissingTool};

/// Finds `aiecc` where aircc does: `aiecc` on `PATH`, then `aiecc.py` on `PATH`.
pub fn find_aiecc(config: &Config, search: &SearchPaths) -> Result<Tool, MissingTool> {
    let mut places: Vec<(String, PathBuf)> = Vec::new();
    for name in ["aiecc", "aiecc.py"] {
        for dir in &config.locations.path {
            places.push(("PATH".into(), dir.join(name)));
        }
    }
    let found = discovery::pick_executable("aiecc", places, Vec::new());
    found.map_err(|mut missing| {
        missing.searched.extend(unsearched(
            "aiecc",
            config,
            search,
            "aircc looks for aiecc on PATH only",
        ));
        missing
    })
}

/// Finds a tool aiecc runs (`bootgen`, `aiebu-asm`, `xclbinutil`) where aiecc does:
/// `AIE_XCLBINUTIL` (xclbinutil only), Peano's `bin/`, then `PATH`.
pub fn find_aiecc_tool(
    name: &str,
    config: &Config,
    search: &SearchPaths,
    peano: Option<&Tool>,
) -> Result<Tool, MissingTool> {
    let mut places: Vec<(String, PathBuf)> = Vec::new();
    if name == "xclbinutil"
        && let Some(path) = &config.locations.aie_xclbinutil
    {
        places.push(("AIE_XCLBINUTIL".into(), path.clone()));
    }
    if let Some(peano) = peano {
        places.push(("Peano's bin/".into(), peano.path.join("bin").join(name)));
    }
    for dir in &config.locations.path {
        places.push(("PATH".into(), dir.join(name)));
    }
    discovery::pick_executable(name, places, Vec::new()).map_err(|mut missing| {
        missing.searched.extend(unsearched(
            name,
            config,
            search,
            "aiecc looks in Peano's bin/ and on PATH only",
        ));
        missing
    })
}

/// Places where `name` is commonly installed but that aircc/aiecc do not search: the
/// mlir-aie wheel's `bin/` and XRT's. A copy found there is reported with the fix.
fn unsearched(name: &str, config: &Config, search: &SearchPaths, rule: &str) -> Vec<Candidate> {
    let mut dirs: Vec<(String, PathBuf)> = search
        .site_packages
        .iter()
        .map(|site| {
            (
                format!("mlir-aie wheel in {}", site.display()),
                site.join("mlir_aie").join("bin"),
            )
        })
        .collect();
    for (origin, dir) in [
        ("AMD_TRITON_NPU_XRT_DIR", config.xrt_dir.clone()),
        ("XRT_DEV_DIR", config.locations.xrt_dev_dir.clone()),
        ("XILINX_XRT", config.locations.xilinx_xrt.clone()),
        (
            "XRT's default location",
            Some(PathBuf::from("/opt/xilinx/xrt")),
        ),
    ] {
        if let Some(dir) = dir {
            dirs.push((origin.to_owned(), dir.join("bin")));
        }
    }
    dirs.into_iter()
        .filter_map(|(origin, dir)| {
            let path = dir.join(name);
            path.is_file().then(|| Candidate {
                origin,
                rejected: Some(format!(
                    "it is here, but {rule}: add {} to PATH",
                    dir.display()
                )),
                path,
            })
        })
        .collect()
}

/// Whether the tool is needed for `format` (`None`: any format).
pub fn needed_for(name: &str, format: Option<OutputFormat>) -> bool {
    match (name, format) {
        ("aiebu-asm", Some(f)) => f == OutputFormat::Elf,
        ("xclbinutil", Some(f)) => f == OutputFormat::Xclbin,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::tests::config;
    use std::path::Path;

    /// A tool that prints `version` for `--version`.
    fn tool(path: &Path, version: &str) {
        crate::discovery::tests::tool(path, &format!("echo '{version}'"));
    }

    #[test]
    fn aiecc_is_found_on_path_only_and_other_copies_are_named() {
        let t = tempfile::tempdir().unwrap();
        let site = t.path().join("site");
        tool(&site.join("mlir_aie/bin/aiecc"), "aiecc 1.4.2");
        let search = SearchPaths {
            site_packages: vec![site.clone()],
            triton_dir: None,
        };
        let path_dir = t.path().join("p");
        let cfg = config(&[("PATH", path_dir.display().to_string())]);
        let missing = find_aiecc(&cfg, &search).unwrap_err();
        let places: Vec<&PathBuf> = missing.searched.iter().map(|c| &c.path).collect();
        assert_eq!(
            places,
            [
                &path_dir.join("aiecc"),
                &path_dir.join("aiecc.py"),
                &site.join("mlir_aie/bin/aiecc")
            ]
        );
        let last = missing.searched.last().unwrap();
        assert!(
            last.rejected.as_deref().unwrap().contains(&format!(
                "aircc looks for aiecc on PATH only: add {} to PATH",
                site.join("mlir_aie/bin").display()
            )),
            "{last:?}"
        );
        // aiecc.py on PATH is enough.
        tool(&path_dir.join("aiecc.py"), "aiecc.py");
        let found = find_aiecc(&cfg, &search).unwrap();
        assert_eq!(found.path, path_dir.join("aiecc.py"));
    }

    #[test]
    fn aiecc_tools_follow_aieccs_search() {
        let t = tempfile::tempdir().unwrap();
        let peano = Tool {
            name: "peano".into(),
            path: t.path().join("peano"),
            origin: "PEANO_INSTALL_DIR".into(),
            identity: crate::ToolIdentity {
                version: None,
                sha256: None,
                size: 0,
            },
        };
        let path_dir = t.path().join("p");
        tool(&path_dir.join("bootgen"), "****** Bootgen v2024.2");
        tool(&peano.path.join("bin/bootgen"), "Bootgen from Peano");
        let xrt = t.path().join("xrt");
        tool(&xrt.join("bin/xclbinutil"), "XRT Build Version: 2.19.0");
        let explicit = t.path().join("my-xclbinutil");
        let cfg = config(&[
            ("PATH", path_dir.display().to_string()),
            ("XILINX_XRT", xrt.display().to_string()),
        ]);
        let search = SearchPaths::default();
        let b = find_aiecc_tool("bootgen", &cfg, &search, Some(&peano)).unwrap();
        assert_eq!(
            (b.path, b.origin.as_str()),
            (peano.path.join("bin/bootgen"), "Peano's bin/")
        );
        let b = find_aiecc_tool("bootgen", &cfg, &search, None).unwrap();
        assert_eq!(b.path, path_dir.join("bootgen"));
        assert_eq!(
            b.identity.version.as_deref(),
            Some("****** Bootgen v2024.2")
        );

        // XRT's xclbinutil is not on PATH: not found, and the report says where it is.
        let missing = find_aiecc_tool("xclbinutil", &cfg, &search, Some(&peano)).unwrap_err();
        let last = missing.searched.last().unwrap();
        assert_eq!(last.path, xrt.join("bin/xclbinutil"));
        assert!(
            last.rejected.as_deref().unwrap().contains("add "),
            "{last:?}"
        );
        // AIE_XCLBINUTIL wins.
        tool(&explicit, "XRT Build Version: 2.20.0");
        let cfg = config(&[
            ("PATH", path_dir.display().to_string()),
            ("AIE_XCLBINUTIL", explicit.display().to_string()),
        ]);
        let x = find_aiecc_tool("xclbinutil", &cfg, &search, None).unwrap();
        assert_eq!((x.path, x.origin.as_str()), (explicit, "AIE_XCLBINUTIL"));
    }

    #[test]
    fn what_each_format_needs() {
        assert!(needed_for("aiebu-asm", Some(OutputFormat::Elf)));
        assert!(!needed_for("aiebu-asm", Some(OutputFormat::Xclbin)));
        assert!(needed_for("xclbinutil", Some(OutputFormat::Xclbin)));
        assert!(!needed_for("xclbinutil", Some(OutputFormat::Pdi)));
        assert!(needed_for("bootgen", Some(OutputFormat::Pdi)));
        assert!(needed_for("xclbinutil", None));
    }
}
