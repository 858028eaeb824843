//! Finding ROCr's `libhsa-runtime64` in upstream's order: `AMD_NPU_ROCR_PATH`, `ROCM_PATH`,
//! `ROCM_HOME`, the pip package `rocm-sdk-core` (`_rocm_sdk_core` in a site-packages directory),
//! `/opt/rocm`, then the system (`/usr`).
//!
//! A candidate is accepted when its library loads and exports every function the driver calls,
//! its prefix carries the AIE extension (`include/hsa/hsa_ext_amd_aie.h`, the header upstream
//! requires: a GPU-only ROCr such as a stock ROCm release or the one torch-ROCm bundles has
//! none), a pip wheel is not older than [`MIN_ROCM_SDK_CORE`], and — when the caller opens it —
//! it initialises and reports an AIE agent. Every candidate skipped says why.
//! Environment values come only from [`npu_target::Config`].

use std::path::{Path, PathBuf};

use hsa_sys::{HsaLibrary, LoadError};
use npu_target::Config;

/// What to install when no usable ROCr was found.
pub const INSTALL_HINT: &str = "The HSA runtime needs the AIE-capable ROCr from TheRock's nightly \
     rocm-sdk-core wheels (10.3.0a20261027 or later): `pip install --index-url \
     https://rocm.nightlies.amd.com/whl-multi-arch/ rocm-sdk-core`, or set AMD_NPU_ROCR_PATH to \
     the prefix of a ROCr built with AIE support. Stock ROCm releases (and Debian's ROCr) have \
     no AIE agent. To run without ROCr, use AMD_TRITON_NPU_RUNTIME=xrt.";

const LIB_DIRS: [&str; 3] = ["lib", "lib64", "lib/x86_64-linux-gnu"];
const LIB_NAMES: [&str; 2] = ["libhsa-runtime64.so", "libhsa-runtime64.so.1"];
/// The Python package `rocm-sdk-core` installs.
const PIP_PACKAGE_DIR: &str = "_rocm_sdk_core";
/// The pip distribution whose `.dist-info` names the wheel's version.
const PIP_DIST_PREFIX: &str = "rocm_sdk_core-";
/// The AIE extension header, relative to a ROCr prefix.
const AIE_HEADER: &str = "include/hsa/hsa_ext_amd_aie.h";
/// The first `rocm-sdk-core` nightly with external variables (rocm-systems #14004) and the PDI
/// placement fix (#13908); upstream pins it (real-toolchain-rules.md §5).
pub const MIN_ROCM_SDK_CORE: &str = "10.3.0a20261027";

/// One place ROCr may be installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// How the place was named, e.g. `AMD_NPU_ROCR_PATH` or `pip rocm-sdk-core`.
    pub source: String,
    pub prefix: PathBuf,
    /// pip wheels ship only `lib/libhsa-runtime64.so.<N>`; other prefixes use the usual names.
    pip: bool,
    /// The wheel's version (pip candidates whose `.dist-info` was found).
    version: Option<String>,
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

/// The outcome of a search: the accepted candidate and what opening it gave.
pub struct Discovery<T> {
    pub found: Option<(Candidate, T)>,
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
            version: None,
        }),
        None => unset.push(Refusal {
            source: var.to_owned(),
            place: PathBuf::new(),
            reason: "not set".to_owned(),
        }),
    };
    env("AMD_NPU_ROCR_PATH", &config.locations.rocr_path);
    env("ROCM_PATH", &config.locations.rocm_path);
    env("ROCM_HOME", &config.locations.rocm_home);
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
        version: p.parent().and_then(wheel_version),
        prefix: p.clone(),
        pip: true,
    }));
    for (source, prefix) in [("/opt/rocm", "/opt/rocm"), ("system", "/usr")] {
        out.push(Candidate {
            source: source.to_owned(),
            prefix: PathBuf::from(prefix),
            pip: false,
            version: None,
        });
    }
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

/// The version of the `rocm-sdk-core` wheel installed in `site_packages`, from its
/// `.dist-info` directory name.
fn wheel_version(site_packages: &Path) -> Option<String> {
    std::fs::read_dir(site_packages)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .find_map(|n| {
            n.strip_prefix(PIP_DIST_PREFIX)?
                .strip_suffix(".dist-info")
                .map(str::to_owned)
        })
}

/// A PEP 440 version of the shape nightlies use (`10.3.0a20261027`, `10.3.0rc1`, `10.3.0`) as
/// (release numbers, pre-release rank and number); `None` if it is not of that shape.
fn version_key(version: &str) -> Option<(Vec<u64>, u8, u64)> {
    let split = version
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(version.len());
    let (release, rest) = version.split_at(split);
    let numbers = release
        .split('.')
        .map(|n| n.parse::<u64>().ok())
        .collect::<Option<Vec<u64>>>()?;
    let (rank, tail) = if rest.is_empty() {
        (3, "0")
    } else if let Some(t) = rest.strip_prefix("rc") {
        (2, t)
    } else if let Some(t) = rest.strip_prefix('b') {
        (1, t)
    } else if let Some(t) = rest.strip_prefix('a') {
        (0, t)
    } else {
        return None;
    };
    let mut numbers = numbers;
    while numbers.len() > 1 && numbers.last() == Some(&0) {
        numbers.pop();
    }
    Some((numbers, rank, tail.parse().ok()?))
}

/// Whether `version` is older than [`MIN_ROCM_SDK_CORE`]; an unreadable version is not.
fn too_old(version: &str) -> bool {
    match (version_key(version), version_key(MIN_ROCM_SDK_CORE)) {
        (Some(v), Some(min)) => v < min,
        _ => false,
    }
}

/// Looks for ROCr in order and loads the first library that has every function we need and
/// the AIE extension (for tools that only need the library).
pub fn discover(config: &Config, site_packages: &[PathBuf]) -> Discovery<HsaLibrary> {
    discover_with(config, site_packages, |_, library| Ok(library))
}

/// Like [`discover`], then `open`s each accepted library; a candidate whose `open` fails (it
/// does not initialise or reports no AIE agent) is refused with that reason and the search
/// goes on.
pub fn discover_with<T>(
    config: &Config,
    site_packages: &[PathBuf],
    mut open: impl FnMut(&Candidate, HsaLibrary) -> Result<T, String>,
) -> Discovery<T> {
    let (candidates, mut refused) = candidates(config, site_packages);
    let mut found = None;
    for candidate in candidates {
        let opened = try_candidate(&candidate).and_then(|(file, library)| {
            open(&candidate, library).map_err(|reason| {
                vec![Refusal {
                    source: candidate.source.clone(),
                    place: file,
                    reason,
                }]
            })
        });
        match opened {
            Ok(value) => {
                found = Some((candidate, value));
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
        "ROCM_HOME" => 2,
        "pip rocm-sdk-core" => 3,
        "/opt/rocm" => 4,
        _ => 5,
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

/// The first library file of `candidate` that loads, if the candidate is an AIE-capable ROCr
/// new enough for this driver; else why not, for each file looked at.
fn try_candidate(candidate: &Candidate) -> Result<(PathBuf, HsaLibrary), Vec<Refusal>> {
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
        let library = match crate::raw::hsa::open_library(&file) {
            Ok(library) => library,
            Err(e) => {
                refused.push(refuse(&file, describe(&e)));
                continue;
            }
        };
        let header = candidate.prefix.join(AIE_HEADER);
        if !header.is_file() {
            refused.push(refuse(
                &file,
                format!(
                    "no AIE extension ({} is missing): this is a GPU-only ROCr, such as a stock \
                     ROCm release or the one torch-ROCm bundles",
                    header.display()
                ),
            ));
            continue;
        }
        if let Some(version) = candidate.version.as_deref().filter(|v| too_old(v)) {
            refused.push(refuse(
                &file,
                format!(
                    "too old: rocm-sdk-core {version}; external variables and the PDI placement \
                     fix need rocm-sdk-core {MIN_ROCM_SDK_CORE} or newer"
                ),
            ));
            continue;
        }
        return Ok((file, library));
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
            ("ROCM_HOME", Path::new("/c")),
        ]);
        let (found, unset) = candidates(&c, std::slice::from_ref(&sp));
        let order: Vec<(String, PathBuf)> =
            found.into_iter().map(|c| (c.source, c.prefix)).collect();
        assert_eq!(
            order,
            vec![
                ("AMD_NPU_ROCR_PATH".to_owned(), PathBuf::from("/a")),
                ("ROCM_PATH".to_owned(), PathBuf::from("/b")),
                ("ROCM_HOME".to_owned(), PathBuf::from("/c")),
                ("pip rocm-sdk-core".to_owned(), sp.join("_rocm_sdk_core")),
                ("/opt/rocm".to_owned(), PathBuf::from("/opt/rocm")),
                ("system".to_owned(), PathBuf::from("/usr")),
            ]
        );
        assert!(unset.is_empty());
    }

    #[test]
    fn unset_sources_are_reported_as_such() {
        let (found, unset) = candidates(&config(&[]), &[]);
        assert_eq!(found.len(), 2, "only /opt/rocm and the system remain");
        let text: Vec<String> = unset.iter().map(|r| r.to_string()).collect();
        assert_eq!(
            text,
            vec![
                "AMD_NPU_ROCR_PATH: not set",
                "ROCM_PATH: not set",
                "ROCM_HOME: not set",
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
            // A machine with a real AIE ROCr: everything before it is still refused.
            assert!(["/opt/rocm", "system"].contains(&found.source.as_str()));
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
            version: None,
        };
        assert_eq!(
            library_files(&c),
            vec![
                lib.join("libhsa-runtime64.so.1"),
                lib.join("libhsa-runtime64.so.1.18.0")
            ]
        );
    }

    #[test]
    fn wheel_versions_compare_as_pep_440() {
        assert!(too_old("10.3.0a20261026"));
        assert!(too_old("10.2.0"));
        assert!(too_old("7.0.0rc1"));
        assert!(!too_old(MIN_ROCM_SDK_CORE));
        assert!(!too_old("10.3.0a20261103"));
        assert!(
            !too_old("10.3.0rc1"),
            "a release candidate comes after the alphas"
        );
        assert!(!too_old("10.3"), "10.3 is 10.3.0, a final release");
        assert!(!too_old("11.0.0"));
        assert!(!too_old("nightly"), "an unreadable version is not judged");
    }

    #[test]
    fn the_wheel_version_comes_from_its_dist_info() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(wheel_version(dir.path()), None);
        std::fs::create_dir_all(dir.path().join("rocm_sdk_core-10.3.0a20261027.dist-info"))
            .unwrap();
        std::fs::create_dir_all(dir.path().join("rocm_sdk-10.3.0a20261027.dist-info")).unwrap();
        assert_eq!(
            wheel_version(dir.path()).as_deref(),
            Some("10.3.0a20261027")
        );
    }
}
