//! Finding ROCr's `libhsa-runtime64` in upstream's order: `AMD_NPU_ROCR_PATH`, `ROCM_PATH`, the
//! pip package `rocm-sdk-core` (`_rocm_sdk_core` in a site-packages directory), `/opt/rocm`.
//!
//! A candidate is accepted when its library loads and exports every function the driver
//! calls; whether it can drive an NPU is decided later, by `hsa_init` and the agent list.
//! Environment values come only from [`npu_target::Config`].

use std::path::{Path, PathBuf};

use hsa_sys::{HsaLibrary, LoadError};
use npu_target::Config;

/// What to install when no usable ROCr was found.
pub const INSTALL_HINT: &str = "The HSA runtime needs the AIE-capable ROCr from TheRock's nightly \
     rocm-sdk-core wheels (a build from 2026-07-16 or later): `pip install --index-url \
     https://rocm.nightlies.amd.com/whl-multi-arch/ rocm-sdk-core`, or set AMD_NPU_ROCR_PATH to \
     the prefix of a ROCr built with AIE support. Stock ROCm releases (and Debian's ROCr) have \
     no AIE agent. To run without ROCr, use AMD_TRITON_NPU_RUNTIME=xrt.";

const LIB_DIRS: [&str; 3] = ["lib", "lib64", "lib/x86_64-linux-gnu"];
const LIB_NAMES: [&str; 2] = ["libhsa-runtime64.so", "libhsa-runtime64.so.1"];
/// The Python package `rocm-sdk-core` installs.
const PIP_PACKAGE_DIR: &str = "_rocm_sdk_core";

/// One place ROCr may be installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// How the place was named, e.g. `AMD_NPU_ROCR_PATH` or `pip rocm-sdk-core`.
    pub source: String,
    pub prefix: PathBuf,
    /// pip wheels ship only `lib/libhsa-runtime64.so.<N>`; other prefixes use the usual names.
    pip: bool,
}

/// A place that was looked at and not used.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refusal {
    pub source: String,
    /// The prefix or file looked at (empty when the source was not set).
    pub place: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.place.as_os_str().is_empty() {
            write!(f, "{}: {}", self.source, self.reason)
        } else {
            write!(
                f,
                "{} ({}): {}",
                self.source,
                self.place.display(),
                self.reason
            )
        }
    }
}

/// The outcome of a search.
pub struct Discovery {
    pub found: Option<(Candidate, HsaLibrary)>,
    /// Every place refused before the one found (or all of them).
    pub refused: Vec<Refusal>,
}

/// The places to look, in order, with a refusal for each source that names no place.
pub fn candidates(config: &Config, site_packages: &[PathBuf]) -> (Vec<Candidate>, Vec<Refusal>) {
    let mut out = Vec::new();
    let mut unset = Vec::new();
    let mut env = |var: &str, value: &Option<PathBuf>| match value {
        Some(p) => out.push(Candidate {
            source: var.to_owned(),
            prefix: p.clone(),
            pip: false,
        }),
        None => unset.push(Refusal {
            source: var.to_owned(),
            place: PathBuf::new(),
            reason: "not set".to_owned(),
        }),
    };
    env("AMD_NPU_ROCR_PATH", &config.locations.rocr_path);
    env("ROCM_PATH", &config.locations.rocm_path);
    let pip: Vec<PathBuf> = site_packages
        .iter()
        .map(|sp| sp.join(PIP_PACKAGE_DIR))
        .collect();
    let installed: Vec<&PathBuf> = pip.iter().filter(|p| p.is_dir()).collect();
    if installed.is_empty() {
        let reason = if site_packages.is_empty() {
            "no Python site-packages to look in (not running under Python)".to_owned()
        } else {
            format!(
                "not installed (no {PIP_PACKAGE_DIR} in {})",
                site_packages
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        unset.push(Refusal {
            source: "pip rocm-sdk-core".to_owned(),
            place: PathBuf::new(),
            reason,
        });
    }
    out.extend(installed.into_iter().map(|p| Candidate {
        source: "pip rocm-sdk-core".to_owned(),
        prefix: p.clone(),
        pip: true,
    }));
    out.push(Candidate {
        source: "/opt/rocm".to_owned(),
        prefix: PathBuf::from("/opt/rocm"),
        pip: false,
    });
    (out, unset)
}

/// The library files a candidate offers, best first.
fn library_files(candidate: &Candidate) -> Vec<PathBuf> {
    if candidate.pip {
        let dir = candidate.prefix.join("lib");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libhsa-runtime64.so"))
            })
            .collect();
        // Shortest name first: `.so`, then `.so.1`, then fully versioned names.
        files.sort_by_key(|p| (p.as_os_str().len(), p.clone()));
        return files;
    }
    LIB_DIRS
        .iter()
        .flat_map(|d| {
            LIB_NAMES
                .iter()
                .map(move |n| candidate.prefix.join(d).join(n))
        })
        .filter(|p| p.exists())
        .collect()
}

/// Looks for ROCr in order and loads the first library that has every function we need.
pub fn discover(config: &Config, site_packages: &[PathBuf]) -> Discovery {
    let (candidates, mut refused) = candidates(config, site_packages);
    let mut found = None;
    for candidate in candidates {
        match try_candidate(&candidate) {
            Ok(library) => {
                found = Some((candidate, library));
                break;
            }
            Err(mut why) => refused.append(&mut why),
        }
    }
    // Sources that name no place are listed where they fall in the order (the sort is stable).
    refused.sort_by_key(|r| order_of(&r.source));
    Discovery { found, refused }
}

fn order_of(source: &str) -> usize {
    match source {
        "AMD_NPU_ROCR_PATH" => 0,
        "ROCM_PATH" => 1,
        "pip rocm-sdk-core" => 2,
        _ => 3,
    }
}

/// Loads one library file directly (no search), for tools given an explicit path.
pub fn load_file(path: &Path) -> Result<HsaLibrary, Refusal> {
    crate::raw::hsa::open_library(path).map_err(|e| Refusal {
        source: "explicit library".to_owned(),
        place: path.to_owned(),
        reason: describe(&e),
    })
}

fn try_candidate(candidate: &Candidate) -> Result<HsaLibrary, Vec<Refusal>> {
    let refuse = |place: &Path, reason: String| Refusal {
        source: candidate.source.clone(),
        place: place.to_owned(),
        reason,
    };
    if !candidate.prefix.exists() {
        return Err(vec![refuse(&candidate.prefix, "does not exist".to_owned())]);
    }
    let files = library_files(candidate);
    if files.is_empty() {
        let looked = if candidate.pip {
            "no libhsa-runtime64.so* in lib".to_owned()
        } else {
            "no libhsa-runtime64.so or libhsa-runtime64.so.1 in lib, lib64 or \
             lib/x86_64-linux-gnu"
                .to_owned()
        };
        return Err(vec![refuse(&candidate.prefix, looked)]);
    }
    let mut refused = Vec::new();
    for file in files {
        match crate::raw::hsa::open_library(&file) {
            Ok(library) => return Ok(library),
            Err(e) => refused.push(refuse(&file, describe(&e))),
        }
    }
    Err(refused)
}

fn describe(e: &LoadError) -> String {
    match e {
        LoadError::Open { reason, .. } => format!("the dynamic loader refused it: {reason}"),
        LoadError::MissingSymbols { missing, .. } => format!(
            "not a ROCr this driver can use: it lacks {} of the HSA functions it calls ({})",
            missing.len(),
            if missing.len() > 6 {
                format!("{}, …", missing[..6].join(", "))
            } else {
                missing.join(", ")
            }
        ),
    }
}

/// The error text when nothing usable was found.
pub fn not_found_message(refused: &[Refusal]) -> String {
    let mut text =
        String::from("no usable ROCr (libhsa-runtime64) found. Places looked, in order:");
    for r in refused {
        text.push_str("\n  - ");
        text.push_str(&r.to_string());
    }
    text.push('\n');
    text.push_str(INSTALL_HINT);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use npu_target::Overrides;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &Path)]) -> Config {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.display().to_string()))
            .collect();
        Config::load(&|k| map.get(k).cloned(), &Overrides::default()).unwrap()
    }

    #[test]
    fn candidates_follow_upstream_order() {
        let dir = tempfile::tempdir().unwrap();
        let sp = dir.path().join("site-packages");
        std::fs::create_dir_all(sp.join("_rocm_sdk_core/lib")).unwrap();
        let c = config(&[
            ("AMD_NPU_ROCR_PATH", Path::new("/a")),
            ("ROCM_PATH", Path::new("/b")),
        ]);
        let (found, unset) = candidates(&c, std::slice::from_ref(&sp));
        let order: Vec<(String, PathBuf)> =
            found.into_iter().map(|c| (c.source, c.prefix)).collect();
        assert_eq!(
            order,
            vec![
                ("AMD_NPU_ROCR_PATH".to_owned(), PathBuf::from("/a")),
                ("ROCM_PATH".to_owned(), PathBuf::from("/b")),
                ("pip rocm-sdk-core".to_owned(), sp.join("_rocm_sdk_core")),
                ("/opt/rocm".to_owned(), PathBuf::from("/opt/rocm")),
            ]
        );
        assert!(unset.is_empty());
    }

    #[test]
    fn unset_sources_are_reported_as_such() {
        let (found, unset) = candidates(&config(&[]), &[]);
        assert_eq!(found.len(), 1, "only /opt/rocm remains");
        let text: Vec<String> = unset.iter().map(|r| r.to_string()).collect();
        assert_eq!(
            text,
            vec![
                "AMD_NPU_ROCR_PATH: not set",
                "ROCM_PATH: not set",
                "pip rocm-sdk-core: no Python site-packages to look in (not running under Python)",
            ]
        );
    }

    #[test]
    fn refusals_name_the_reason_for_each_place() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let junk = dir.path().join("junk");
        std::fs::create_dir_all(junk.join("lib64")).unwrap();
        std::fs::write(junk.join("lib64/libhsa-runtime64.so.1"), b"not an ELF file").unwrap();
        let c = config(&[("AMD_NPU_ROCR_PATH", &empty), ("ROCM_PATH", &junk)]);
        let sp = dir.path().join("sp");
        std::fs::create_dir_all(&sp).unwrap();
        let d = discover(&c, std::slice::from_ref(&sp));
        if let Some((found, _)) = &d.found {
            // A machine with a real ROCr in /opt/rocm: everything before it is still refused.
            assert_eq!(found.source, "/opt/rocm");
        }
        let text = not_found_message(&d.refused);
        assert!(
            text.contains(&format!(
                "AMD_NPU_ROCR_PATH ({}): no libhsa-runtime64.so or libhsa-runtime64.so.1 in lib",
                empty.display()
            )),
            "{text}"
        );
        assert!(
            text.contains("libhsa-runtime64.so.1): the dynamic loader refused it:"),
            "{text}"
        );
        assert!(text.contains("pip rocm-sdk-core: not installed"), "{text}");
        assert!(text.contains("rocm-sdk-core"), "{text}");
        assert!(text.contains("AMD_TRITON_NPU_RUNTIME=xrt"), "{text}");
        let pos = |needle: &str| text.find(needle).unwrap();
        assert!(pos("AMD_NPU_ROCR_PATH (") < pos("ROCM_PATH ("));
        assert!(pos("ROCM_PATH (") < pos("pip rocm-sdk-core:"));
    }

    #[test]
    fn pip_wheels_offer_versioned_names_shortest_first() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("_rocm_sdk_core/lib");
        std::fs::create_dir_all(&lib).unwrap();
        for n in [
            "libhsa-runtime64.so.1.18.0",
            "libhsa-runtime64.so.1",
            "libother.so",
        ] {
            std::fs::write(lib.join(n), b"x").unwrap();
        }
        let c = Candidate {
            source: "pip rocm-sdk-core".into(),
            prefix: dir.path().join("_rocm_sdk_core"),
            pip: true,
        };
        assert_eq!(
            library_files(&c),
            vec![
                lib.join("libhsa-runtime64.so.1"),
                lib.join("libhsa-runtime64.so.1.18.0")
            ]
        );
    }
}
