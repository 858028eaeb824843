//! Finding the external tools: `air-opt` and `aircc` (mlir-air), Peano (llvm-aie) and
//! `triton-shared-opt`.
//!
//! Locations come from [`npu_target::Config`] (`config.locations`), never from the process
//! environment directly, plus the Python facts Rust cannot learn by itself ([`SearchPaths`]).
//! Search orders:
//!
//! * `air-opt`, `aircc`: `$MLIR_AIR_INSTALL_DIR/bin`; for each site-packages directory, the
//!   directories named by `mlir-air.pth` with `../bin` appended (the layout of the mlir-air
//!   wheel), then `<site>/mlir_air/bin`; then `PATH`.
//! * Peano: the parent of `$LLVM_BINARY_DIR`, `$PEANO_INSTALL_DIR`, then `<site>/llvm-aie` for
//!   each site-packages directory. A root counts only if `bin/llc --version` lists `aie2`
//!   (a host LLVM would otherwise fail later with "unrecognized architecture").
//! * `triton-shared-opt`: `$TRITON_SHARED_OPT_PATH` (the binary, or a directory holding it),
//!   `PATH`, then `<triton package>/triton_shared/triton-shared-opt`.
//!
//! Each tool found carries a [`ToolIdentity`] for cache keys.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use npu_process::{Quiet, RunError, ToolCommand};
use npu_target::{Config, OutputFormat};
use sha2::{Digest, Sha256};

use crate::aie_tools;
use crate::error::{Candidate, MissingTool, Result, ToolchainError};

/// Where pip-installed tool packages may be; Rust cannot ask Python for `sys.path`, so the
/// caller (the Python module or the CLI run from Python) passes them in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchPaths {
    /// `site.getsitepackages()` plus the user site, in Python's order.
    pub site_packages: Vec<PathBuf>,
    /// The directory of the installed `triton` package.
    pub triton_dir: Option<PathBuf>,
}

/// What identifies a tool build in a cache key.
///
/// `version` is the first line of `<tool> --version` output that mentions a version (else its
/// first non-empty line). A tool without a working `--version` (non-zero exit, no output, or no
/// answer within 20 s) is identified by the SHA-256 of its binary instead. `size` is the size
/// of the binary in bytes, so that two builds reporting the same LLVM version still differ.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ToolIdentity {
    pub version: Option<String>,
    pub sha256: Option<String>,
    pub size: u64,
}

impl ToolIdentity {
    /// One line for cache keys and reports.
    pub fn describe(&self) -> String {
        match (&self.version, &self.sha256) {
            (Some(v), _) => format!("{v} ({} bytes)", self.size),
            (None, Some(h)) => format!("sha256:{h} ({} bytes)", self.size),
            (None, None) => format!("unknown ({} bytes)", self.size),
        }
    }
}

/// A tool that was found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Tool {
    /// `air-opt`, `aircc`, `peano` or `triton-shared-opt`.
    pub name: String,
    /// The executable; for Peano, the install root (the directory holding `bin/llc`).
    pub path: PathBuf,
    /// Which search location supplied it, e.g. `MLIR_AIR_INSTALL_DIR`.
    pub origin: String,
    pub identity: ToolIdentity,
}

/// The tools a compile needs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Toolchain {
    pub air_opt: Tool,
    pub aircc: Tool,
    /// The Peano (llvm-aie) root passed to aircc as `--peano=<root>`.
    pub peano: Tool,
}

impl Toolchain {
    /// Finds every tool a compile needs; when any is missing, one error names each missing
    /// tool, every place looked and how to install it.
    pub fn discover(config: &Config, search: &SearchPaths) -> Result<Toolchain> {
        let air_opt = find_air_tool("air-opt", config, search);
        let aircc = find_air_tool("aircc", config, search);
        let peano = find_peano(config, search);
        match (air_opt, aircc, peano) {
            (Ok(air_opt), Ok(aircc), Ok(peano)) => Ok(Toolchain {
                air_opt,
                aircc,
                peano,
            }),
            (a, b, c) => {
                // A probe stopped by Ctrl-C makes its tool look missing: say what happened.
                if let Err(cause) = npu_process::interrupt::check() {
                    return Err(ToolchainError::Interrupted {
                        during: "toolchain discovery (--version probes)".into(),
                        cause,
                    });
                }
                let missing: Vec<MissingTool> =
                    [a.err(), b.err(), c.err()].into_iter().flatten().collect();
                // A probe that could not start for want of a resource says nothing about
                // whether the tool is there: report the resource.
                if let Some((tool, exhaustion)) = missing
                    .iter()
                    .find_map(|m| Some((m.tool.clone(), *m.exhausted.clone()?)))
                {
                    return Err(ToolchainError::Exhausted {
                        during: format!("toolchain discovery (probing {tool} with --version)"),
                        exhaustion,
                    });
                }
                Err(ToolchainError::ToolsMissing(missing))
            }
        }
    }

    /// The identity of every tool, one `name=identity` entry per line, for cache keys.
    pub fn fingerprint(&self) -> String {
        [&self.air_opt, &self.aircc, &self.peano]
            .iter()
            .map(|t| format!("{}={}\n", t.name, t.identity.describe()))
            .collect()
    }
}

/// One line of `triton-npu doctor`: a tool, where it was found (or every place looked) and
/// its version.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ToolReport {
    pub tool: String,
    /// What needs it (`triton-shared-opt` is needed by the Python compiler stage).
    pub needed_for: String,
    /// Whether a compile for the chosen format fails without it (bootgen may be built into
    /// aiecc; aiebu-asm and xclbinutil serve one format each).
    pub required: bool,
    pub found: Option<Tool>,
    /// Every place looked, in order, with the reason each was refused.
    pub searched: Vec<Candidate>,
    pub install: String,
}

/// Looks for every tool and reports each, found or not. Never fails.
pub fn report(config: &Config, search: &SearchPaths) -> Vec<ToolReport> {
    report_for(config, search, None)
}

/// Looks for every tool a compile to `format` needs (`None`: any format), in the order they
/// run: `air-opt`, `aircc`, what aircc runs (`aiecc`) and what aiecc runs (`bootgen`,
/// `aiebu-asm` for elf, `xclbinutil` for xclbin, Peano), and `triton-shared-opt`. Never fails.
pub fn report_for(
    config: &Config,
    search: &SearchPaths,
    format: Option<OutputFormat>,
) -> Vec<ToolReport> {
    let entry = |tool: &str,
                 needed_for: &str,
                 required: bool,
                 result: std::result::Result<Tool, MissingTool>| {
        let (found, searched, install) = match result {
            Ok(tool) => {
                let searched = vec![Candidate {
                    origin: tool.origin.clone(),
                    path: tool.path.clone(),
                    rejected: None,
                }];
                let install = install_hint(&tool.name);
                (Some(tool), searched, install)
            }
            Err(m) => (None, m.searched, m.install),
        };
        ToolReport {
            tool: tool.to_owned(),
            needed_for: needed_for.to_owned(),
            required,
            found,
            searched,
            install,
        }
    };
    let peano = find_peano(config, search);
    let aiecc_tool =
        |name: &str| aie_tools::find_aiecc_tool(name, config, search, peano.as_ref().ok());
    let format_note = |name: &str, what: &str| match format {
        Some(f) if !aie_tools::needed_for(name, Some(f)) => {
            format!("{what} (not needed for the {f} format)")
        }
        _ => what.to_owned(),
    };
    vec![
        entry(
            "air-opt",
            "lowering Linalg to AIR",
            true,
            find_air_tool("air-opt", config, search),
        ),
        entry(
            "aircc",
            "building NPU binaries",
            true,
            find_air_tool("aircc", config, search),
        ),
        entry(
            "aiecc",
            "aircc's AIE compiler driver (mlir-aie)",
            true,
            aie_tools::find_aiecc(config, search),
        ),
        entry(
            "bootgen",
            "aiecc's PDI step (not needed when aiecc has bootgen built in)",
            false,
            aiecc_tool("bootgen"),
        ),
        entry(
            "aiebu-asm",
            &format_note("aiebu-asm", "aiecc's full ELF (elf format)"),
            aie_tools::needed_for("aiebu-asm", format),
            aiecc_tool("aiebu-asm"),
        ),
        entry(
            "xclbinutil",
            &format_note("xclbinutil", "aiecc's xclbin packaging (xclbin format)"),
            aie_tools::needed_for("xclbinutil", format),
            aiecc_tool("xclbinutil"),
        ),
        entry(
            "peano",
            "aircc's AIE core compiler (llvm-aie)",
            true,
            peano.clone(),
        ),
        entry(
            "triton-shared-opt",
            "Triton's ttsharedir stage (TTIR to Linalg)",
            true,
            find_triton_shared_opt(config, search),
        ),
    ]
}

/// The mlir-air build triton-npu's transform library and schedules are written for:
/// amd/Triton-XDNA's pin (utils/mlir-air-hash.txt: commit d0e522b, timestamp 2026081604,
/// version 0.0.1; installed by its CI as below, .github/workflows/build.yml). The assembly
/// format of the `transform.air.*` ops changes between mlir-air versions.
pub const MLIR_AIR_WHEEL: &str = "mlir_air[aie]==0.0.1.2026081604+d0e522b.no.rtti";
/// The mlir-aie that mlir-air build requires (mlir-air utils/clone-mlir-aie.sh at d0e522b),
/// installed with it through the `[aie]` extra as `mlir_aie_no_rtti`.
pub const MLIR_AIE_VERSION: &str = "1.4.2.dev14+gc84915b";
/// Where those wheels are published.
pub const WHEEL_INDEXES: [&str; 3] = [
    "https://github.com/Xilinx/mlir-air/releases/expanded_assets/latest-air-wheels-no-rtti",
    "https://github.com/Xilinx/mlir-aie/releases/expanded_assets/latest-wheels-no-rtti-2",
    "https://github.com/Xilinx/llvm-aie/releases/expanded_assets/nightly",
];

/// The pip command that installs the pinned toolchain.
pub fn toolchain_pip_command() -> String {
    let indexes: Vec<String> = WHEEL_INDEXES.iter().map(|u| format!("-f {u}")).collect();
    format!("pip install \"{MLIR_AIR_WHEEL}\" {}", indexes.join(" "))
}

/// How to install a tool, by name.
pub fn install_hint(tool: &str) -> String {
    let pip = toolchain_pip_command();
    match tool {
        "air-opt" | "aircc" => format!(
            "install mlir-air d0e522b (with mlir-aie {MLIR_AIE_VERSION} and llvm-aie), the \
             version triton-npu's transform scripts are written for, into the Python \
             environment that runs Triton: {pip} — or set MLIR_AIR_INSTALL_DIR to an mlir-air \
             install prefix whose bin/ holds air-opt and aircc"
        ),
        "aiecc" | "bootgen" => format!(
            "{tool} comes with mlir-aie ({MLIR_AIE_VERSION}, installed with mlir-air by: {pip}); \
             {}: put the directory holding it (the environment's bin/, or \
             <site-packages>/mlir_aie/bin) on PATH",
            if tool == "aiecc" {
                "aircc looks for it on PATH only"
            } else {
                "aiecc looks for it in Peano's bin/ and on PATH only"
            }
        ),
        "aiebu-asm" | "xclbinutil" => format!(
            "{tool} comes with XRT (≥ 2.19, /opt/xilinx/xrt/bin): aiecc looks for it in Peano's \
             bin/ and on PATH, so `source /opt/xilinx/xrt/setup.sh` or add XRT's bin/ to PATH{}",
            if tool == "xclbinutil" {
                " (or set AIE_XCLBINUTIL to the binary)"
            } else {
                ""
            }
        ),
        "peano" => "install Peano (llvm-aie): pip install llvm-aie \
             -f https://github.com/Xilinx/llvm-aie/releases/expanded_assets/nightly \
             — or set PEANO_INSTALL_DIR to its root (the directory whose bin/llc --version \
             lists aie2), or LLVM_BINARY_DIR to that root's bin/"
            .to_owned(),
        "triton-shared-opt" => TRITON_SHARED_OPT_HINT.to_owned(),
        other => format!("install {other}"),
    }
}

/// How a user of stock PyPI triton gets a `triton-shared-opt` that reads its TTIR: PyPI
/// triton does not ship one (amd/Triton-XDNA builds it into its own triton wheel: setup.py
/// `_add_triton_shared_opt` copies `build/cmake.*/third_party/triton_shared/tools/
/// triton-shared-opt/triton-shared-opt` into `triton/triton_shared/`). It has to be built with
/// the same Triton it reads: microsoft/triton-shared builds as a Triton plugin
/// (`TRITON_PLUGIN_DIRS`, its README).
pub const TRITON_SHARED_OPT_HINT: &str = "PyPI's triton does not include triton-shared-opt; \
    build it as a plugin of the same triton release you run (its TTIR must match): \
    git clone https://github.com/microsoft/triton-shared triton_shared && \
    git clone https://github.com/triton-lang/triton && cd triton && \
    git checkout v$(python -c 'import triton; print(triton.__version__)') && \
    TRITON_PLUGIN_DIRS=$PWD/../triton_shared pip wheel --no-deps --no-build-isolation -w /tmp/tw . \
    (in a scratch virtualenv with ninja, cmake, pybind11 and setuptools; use a triton_shared \
    commit whose triton-hash.txt is on that release's branch), then set \
    TRITON_SHARED_OPT_PATH to build/cmake.*/third_party/triton_shared/tools/triton-shared-opt/\
    triton-shared-opt (or copy that binary to <triton package>/triton_shared/, where \
    amd/Triton-XDNA's wheel puts it)";

/// Finds `air-opt` or `aircc`.
pub fn find_air_tool(
    name: &str,
    config: &Config,
    search: &SearchPaths,
) -> std::result::Result<Tool, MissingTool> {
    let (places, searched) = air_tool_places(name, config, search);
    pick_executable(name, places, searched)
}

/// Where `air-opt`/`aircc` may be, in search order, plus the site directories whose
/// `mlir-air.pth` is missing (reported as places looked).
fn air_tool_places(
    name: &str,
    config: &Config,
    search: &SearchPaths,
) -> (Vec<(String, PathBuf)>, Vec<Candidate>) {
    let mut places: Vec<(String, PathBuf)> = Vec::new();
    let mut searched = Vec::new();
    if let Some(dir) = &config.locations.mlir_air_install_dir {
        places.push(("MLIR_AIR_INSTALL_DIR".into(), dir.join("bin").join(name)));
    }
    for site in &search.site_packages {
        let pth = site.join("mlir-air.pth");
        match std::fs::read_to_string(&pth) {
            Ok(text) => {
                for dir in pth_dirs(site, &text) {
                    let bin = dir.parent().unwrap_or(&dir).join("bin").join(name);
                    places.push((format!("{}", pth.display()), bin));
                }
            }
            Err(_) => searched.push(Candidate {
                origin: "mlir-air wheel".into(),
                path: pth.clone(),
                rejected: Some("no mlir-air.pth here (mlir-air not installed in this site)".into()),
            }),
        }
        places.push((
            format!("mlir_air package in {}", site.display()),
            site.join("mlir_air").join("bin").join(name),
        ));
    }
    for dir in &config.locations.path {
        places.push(("PATH".into(), dir.join(name)));
    }
    (places, searched)
}

/// Every file discovery could pick for each tool a compile runs (`air-opt`, `aircc`, and
/// Peano's `bin/llc`), in search order, absolute, whether or not it exists. Nothing is run:
/// this is cheap enough for every kernel launch, e.g. to stamp a cache key with the sizes and
/// modification times of the files (a changed installation then changes the key).
pub fn candidate_files(config: &Config, search: &SearchPaths) -> Vec<(&'static str, Vec<PathBuf>)> {
    let air = |name| {
        air_tool_places(name, config, search)
            .0
            .into_iter()
            .map(|(_, p)| absolute(p))
            .collect()
    };
    let llc = peano_roots(config, search)
        .into_iter()
        .map(|(_, root)| absolute(root).join("bin").join("llc"))
        .collect();
    vec![
        ("air-opt", air("air-opt")),
        ("aircc", air("aircc")),
        ("peano", llc),
    ]
}

/// The directories a `.pth` file adds to `sys.path` (relative lines are relative to the site
/// directory; `import` lines and comments add nothing).
fn pth_dirs(site: &Path, text: &str) -> Vec<PathBuf> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("import "))
        .map(|l| {
            let p = PathBuf::from(l);
            if p.is_absolute() { p } else { site.join(p) }
        })
        .collect()
}

/// Finds the Peano (llvm-aie) root.
pub fn find_peano(config: &Config, search: &SearchPaths) -> std::result::Result<Tool, MissingTool> {
    let roots = peano_roots(config, search);
    let mut searched = Vec::new();
    let mut exhausted = None;
    for (origin, root) in roots {
        let root = absolute(root);
        let llc = root.join("bin").join("llc");
        if let Err(why) = executable(&llc) {
            searched.push(Candidate {
                origin,
                path: root,
                rejected: Some(format!("bin/llc {why}")),
            });
            continue;
        }
        let probe = version_output(&llc);
        match probe {
            Ok(out) if out.contains("aie2") => {
                let identity = identity_from(&llc, Some(out));
                return Ok(Tool {
                    name: "peano".into(),
                    path: root,
                    origin,
                    identity,
                });
            }
            Ok(out) => searched.push(Candidate {
                origin,
                path: root,
                rejected: Some(format!(
                    "bin/llc --version lists no aie2 target (not Peano/llvm-aie: {})",
                    version_line(&out).unwrap_or_else(|| "no version printed".into())
                )),
            }),
            Err(why) => {
                if let ProbeError::Exhausted(e) = &why {
                    exhausted.get_or_insert_with(|| Box::new(e.clone()));
                }
                searched.push(Candidate {
                    origin,
                    path: root,
                    rejected: Some(format!("bin/llc --version failed: {why}")),
                })
            }
        }
    }
    Err(MissingTool {
        tool: "peano".into(),
        searched,
        install: install_hint("peano"),
        exhausted,
    })
}

/// `path size mtime mode` of each file of `paths` (candidates in search order) that exists, one
/// per line, up to the first executable file — the one discovery picks: later candidates
/// cannot be picked while it stays, so a launch need not look at them. Identifies installed
/// tools for cache keys without running them: installing one earlier in the order, replacing,
/// removing or making executable the one picked (or one before it) changes the stamp.
pub fn file_stamps<'a>(paths: impl IntoIterator<Item = &'a Path>) -> String {
    let mut out = String::new();
    for path in paths {
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let mode = meta.permissions().mode();
        out.push_str(&format!(
            "{} {} {mtime} {mode:o}\n",
            path.display(),
            meta.len()
        ));
        if meta.is_file() && mode & 0o111 != 0 {
            break;
        }
    }
    out
}

/// Candidate Peano roots, in search order.
fn peano_roots(config: &Config, search: &SearchPaths) -> Vec<(String, PathBuf)> {
    let mut roots: Vec<(String, PathBuf)> = Vec::new();
    if let Some(bin) = &config.locations.llvm_binary_dir {
        let root = bin
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| bin.clone());
        roots.push(("LLVM_BINARY_DIR (its parent)".into(), root));
    }
    if let Some(root) = &config.locations.peano_install_dir {
        roots.push(("PEANO_INSTALL_DIR".into(), root.clone()));
    }
    for site in &search.site_packages {
        roots.push((
            format!("llvm-aie package in {}", site.display()),
            site.join("llvm-aie"),
        ));
    }
    roots
}

/// Where `triton-shared-opt` may be, in search order: `TRITON_SHARED_OPT_PATH` (the binary
/// or its directory), `PATH`, then next to the triton package. Runs nothing, so Triton's
/// cache key (`backend.hash()`) can be built from these files' metadata on every compile.
pub fn triton_shared_opt_places(config: &Config, search: &SearchPaths) -> Vec<(String, PathBuf)> {
    const NAME: &str = "triton-shared-opt";
    let mut places: Vec<(String, PathBuf)> = Vec::new();
    if let Some(p) = &config.locations.triton_shared_opt_path {
        let path = if p.is_dir() { p.join(NAME) } else { p.clone() };
        places.push(("TRITON_SHARED_OPT_PATH".into(), path));
    }
    for dir in &config.locations.path {
        places.push(("PATH".into(), dir.join(NAME)));
    }
    if let Some(triton) = &search.triton_dir {
        places.push((
            "triton package".into(),
            triton.join("triton_shared").join(NAME),
        ));
    }
    places
}

/// Finds `triton-shared-opt`.
pub fn find_triton_shared_opt(
    config: &Config,
    search: &SearchPaths,
) -> std::result::Result<Tool, MissingTool> {
    const NAME: &str = "triton-shared-opt";
    pick_executable(NAME, triton_shared_opt_places(config, search), Vec::new())
}

pub(crate) fn pick_executable(
    name: &str,
    places: Vec<(String, PathBuf)>,
    mut searched: Vec<Candidate>,
) -> std::result::Result<Tool, MissingTool> {
    for (origin, path) in places {
        let path = absolute(path);
        match executable(&path) {
            Ok(()) => {
                let version = match version_output(&path) {
                    Ok(out) => Some(out),
                    // Identified by its hash instead would change cache keys; and nothing
                    // else will start either: report the resource.
                    Err(ProbeError::Exhausted(x)) => {
                        return Err(MissingTool {
                            tool: name.to_owned(),
                            searched,
                            install: install_hint(name),
                            exhausted: Some(Box::new(x)),
                        });
                    }
                    Err(ProbeError::Failed(_)) => None,
                };
                let identity = identity_from(&path, version);
                return Ok(Tool {
                    name: name.to_owned(),
                    path,
                    origin,
                    identity,
                });
            }
            Err(why) => searched.push(Candidate {
                origin,
                path,
                rejected: Some(why),
            }),
        }
    }
    Err(MissingTool {
        tool: name.to_owned(),
        searched,
        install: install_hint(name),
        exhausted: None,
    })
}

/// Tools run in a private working directory, so a relative location from the environment is
/// made absolute against ours first.
fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

/// `Ok` for a regular file with an execute bit; otherwise why not.
fn executable(path: &Path) -> std::result::Result<(), String> {
    match std::fs::metadata(path) {
        Err(_) => Err("does not exist".into()),
        Ok(m) if !m.is_file() => Err("is not a file".into()),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Err("is not executable".into()),
        Ok(_) => Ok(()),
    }
}

/// How long a `--version` probe may take before the tool is identified by its hash instead.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a `--version` probe gave no answer.
#[derive(Debug)]
enum ProbeError {
    /// The probe could not start or capture its output: a limit was reached. Nothing is
    /// known about the tool.
    Exhausted(npu_process::Exhaustion),
    /// The tool ran (or could not run) and gave no usable answer.
    Failed(String),
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::Exhausted(e) => write!(f, "cannot run it: {e}"),
            ProbeError::Failed(why) => f.write_str(why),
        }
    }
}

/// What a file was when its `--version` was asked: device, inode, size, modification and
/// change times. A tool replaced or rebuilt in place shows another stamp.
type FileStamp = (u64, u64, u64, i64, i64, i64, i64);

/// A remembered answer: the tool file, its stamp, its output or why it gave none.
type Answer = (PathBuf, FileStamp, std::result::Result<String, String>);

fn file_stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// `--version` answers already asked in this process, per tool file as it was then.
/// Discovery runs at every build, and a process that compiles a hundred kernels would
/// otherwise start each tool a hundred more times just to ask (aircc is a Python program:
/// each answer costs an interpreter start).
static VERSIONS: std::sync::Mutex<Vec<Answer>> = std::sync::Mutex::new(Vec::new());

/// Runs `<tool> --version` and returns its output (stdout and stderr), or why that failed;
/// once per tool file and process (see [`VERSIONS`]). A probe that could not start for want
/// of a resource is not remembered.
fn version_output(tool: &Path) -> std::result::Result<String, ProbeError> {
    let stamp = file_stamp(tool);
    let known = |versions: &[Answer]| {
        versions
            .iter()
            .find(|(p, s, _)| p == tool && Some(*s) == stamp)
            .map(|(_, _, answer)| answer.clone())
    };
    let lock = || {
        VERSIONS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some(answer) = known(&lock()) {
        return answer.map_err(ProbeError::Failed);
    }
    let answer = ask_version(tool);
    let remembered = match &answer {
        Ok(out) => Some(Ok(out.clone())),
        Err(ProbeError::Failed(why)) => Some(Err(why.clone())),
        Err(ProbeError::Exhausted(_)) => None,
    };
    // The file must be the one asked: a tool replaced during the probe is asked again.
    if let (Some(remembered), Some(stamp)) = (remembered, stamp)
        && file_stamp(tool) == Some(stamp)
    {
        let mut versions = lock();
        if known(&versions).is_none() {
            versions.push((tool.to_owned(), stamp, remembered));
        }
    }
    answer
}

/// Runs `<tool> --version` and returns its output (stdout and stderr), or why that failed.
fn ask_version(tool: &Path) -> std::result::Result<String, ProbeError> {
    let name = tool
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let command = ToolCommand::new(name, tool, VERSION_TIMEOUT).arg("--version");
    match command.run(&mut Quiet) {
        Ok(finished) if finished.success() => Ok(finished.text()),
        Ok(finished) => Err(ProbeError::Failed(npu_process::text::describe_status(
            &finished.status,
        ))),
        Err(RunError::TimedOut { .. }) => Err(ProbeError::Failed(format!(
            "no answer within {} s",
            VERSION_TIMEOUT.as_secs()
        ))),
        Err(e) => Err(match e.exhaustion() {
            Some(x) => ProbeError::Exhausted(x),
            None => ProbeError::Failed(format!("cannot run it: {e}")),
        }),
    }
}

/// The line of `--version` output that names the version (see [`ToolIdentity`]).
pub fn version_line(output: &str) -> Option<String> {
    let lines = || output.lines().map(str::trim).filter(|l| !l.is_empty());
    lines()
        .find(|l| l.to_ascii_lowercase().contains("version"))
        .or_else(|| lines().next())
        .map(str::to_owned)
}

fn identity_from(binary: &Path, version_out: Option<String>) -> ToolIdentity {
    let size = std::fs::metadata(binary).map(|m| m.len()).unwrap_or(0);
    let version = version_out.as_deref().and_then(version_line);
    let sha256 = if version.is_none() {
        sha256_file(binary)
    } else {
        None
    };
    ToolIdentity {
        version,
        sha256,
        size,
    }
}

fn sha256_file(path: &Path) -> Option<String> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).ok()?;
    Some(
        hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use npu_target::Overrides;

    /// A configuration made of these variables only.
    pub(crate) fn config(pairs: &[(&str, String)]) -> Config {
        let pairs = pairs.to_vec();
        Config::load(
            &move |n| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone()),
            &Overrides::default(),
        )
        .unwrap()
    }

    /// An executable shell script at `path` running `body`.
    pub(crate) fn tool(path: &Path, body: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn llc(root: &Path, targets: &str) {
        tool(
            &root.join("bin/llc"),
            &format!(
                "echo 'LLVM (http://llvm.org/):'; echo '  LLVM version 19.0.0 {}'; \
                 echo '  Registered Targets:'; for t in {targets}; do echo \"    $t - target\"; done",
                root.display()
            ),
        );
    }

    #[test]
    fn air_tools_search_order() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let install = root.join("install");
        let site = root.join("site");
        let pathdir = root.join("pathdir");
        let v = "echo \"aircc version $0\"";
        // The same tool in every location: the first location wins, then the next, …
        tool(&install.join("bin/aircc"), v);
        std::fs::create_dir_all(&site).unwrap();
        std::fs::write(
            site.join("mlir-air.pth"),
            "# comment\nimport os\nwheel/python\n",
        )
        .unwrap();
        tool(&site.join("wheel/bin/aircc"), v);
        tool(&site.join("mlir_air/bin/aircc"), v);
        tool(&pathdir.join("aircc"), v);
        let search = SearchPaths {
            site_packages: vec![site.clone()],
            triton_dir: None,
        };
        let all = config(&[
            ("MLIR_AIR_INSTALL_DIR", install.display().to_string()),
            ("PATH", pathdir.display().to_string()),
        ]);
        let found = find_air_tool("aircc", &all, &search).unwrap();
        assert_eq!(found.path, install.join("bin/aircc"));
        assert_eq!(found.origin, "MLIR_AIR_INSTALL_DIR");
        assert_eq!(
            found.identity.version.as_deref(),
            Some(format!("aircc version {}", install.join("bin/aircc").display()).as_str())
        );

        let no_env = config(&[("PATH", pathdir.display().to_string())]);
        let found = find_air_tool("aircc", &no_env, &search).unwrap();
        assert_eq!(found.path, site.join("wheel/bin/aircc"));
        assert!(found.origin.ends_with("mlir-air.pth"), "{}", found.origin);
        std::fs::remove_file(site.join("mlir-air.pth")).unwrap();
        let found = find_air_tool("aircc", &no_env, &search).unwrap();
        assert_eq!(found.path, site.join("mlir_air/bin/aircc"));

        let found = find_air_tool("aircc", &no_env, &SearchPaths::default()).unwrap();
        assert_eq!(found.path, pathdir.join("aircc"));
        assert_eq!(found.origin, "PATH");

        // A non-executable file in the first place is skipped and reported.
        std::fs::set_permissions(
            install.join("bin/aircc"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let found = find_air_tool("aircc", &all, &SearchPaths::default()).unwrap();
        assert_eq!(found.path, pathdir.join("aircc"));
    }

    /// Set in the child of the test below: the folder of its toolchain.
    const EMFILE_CHILD: &str = "NPU_TOOLCHAIN_TEST_EMFILE_DIR";

    #[test]
    fn running_out_of_file_descriptors_is_reported_as_such_not_as_a_missing_tool() {
        let toolchain_config = |dir: &Path| {
            config(&[
                (
                    "MLIR_AIR_INSTALL_DIR",
                    dir.join("air").display().to_string(),
                ),
                ("PEANO_INSTALL_DIR", dir.join("peano").display().to_string()),
            ])
        };
        if let Some(dir) = std::env::var_os(EMFILE_CHILD) {
            // The child: every tool is installed, and no file descriptor is left.
            let cfg = toolchain_config(Path::new(&dir));
            let search = SearchPaths::default();
            npu_process::set_open_file_limit(0, 4096).unwrap();
            let results = [
                Toolchain::discover(&cfg, &search).map_err(|e| e.to_string()),
                find_peano(&cfg, &search)
                    .map(|_| Toolchain::discover(&cfg, &search).unwrap())
                    .map_err(|m| m.to_string()),
            ];
            for result in results {
                match result {
                    Ok(_) => println!("\nFOUND"),
                    Err(e) => println!("\nERROR: {}", e.replace('\n', " ")),
                }
            }
            return;
        }
        let t = tempfile::tempdir().unwrap();
        for name in ["air-opt", "aircc"] {
            tool(&t.path().join("air/bin").join(name), "echo 'version 1.0'");
        }
        llc(&t.path().join("peano"), "aie2 aie2p");
        // With descriptors to spare, everything is found.
        Toolchain::discover(&toolchain_config(t.path()), &SearchPaths::default()).unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "discovery::tests::running_out_of_file_descriptors_is_reported_as_such_not_as_a_missing_tool",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(EMFILE_CHILD, t.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("ERROR: ")).collect();
        assert_eq!(errors.len(), 2, "{text}");
        for line in errors {
            for want in [
                "EMFILE",
                "RLIMIT_NOFILE",
                "`ulimit -n`: 0",
                "ulimit -n 4096",
            ] {
                assert!(line.contains(want), "{want:?} missing in {line}");
            }
            assert!(!line.contains("not found"), "{line}");
        }
    }

    #[test]
    fn missing_tools_list_every_place_and_the_fix() {
        let t = tempfile::tempdir().unwrap();
        let site = t.path().join("site");
        std::fs::create_dir_all(&site).unwrap();
        let cfg = config(&[
            (
                "MLIR_AIR_INSTALL_DIR",
                t.path().join("air").display().to_string(),
            ),
            (
                "PEANO_INSTALL_DIR",
                t.path().join("peano").display().to_string(),
            ),
            ("PATH", t.path().join("p1").display().to_string()),
        ]);
        let search = SearchPaths {
            site_packages: vec![site.clone()],
            triton_dir: None,
        };
        let err = Toolchain::discover(&cfg, &search).unwrap_err();
        let ToolchainError::ToolsMissing(missing) = &err else {
            panic!("{err}")
        };
        let names: Vec<&str> = missing.iter().map(|m| m.tool.as_str()).collect();
        assert_eq!(names, ["air-opt", "aircc", "peano"]);
        let text = err.to_string();
        for want in [
            "air-opt, aircc, peano not found",
            &format!("{}", t.path().join("air/bin/aircc").display()),
            &format!("{}", site.join("mlir-air.pth").display()),
            &format!("{}", site.join("mlir_air/bin/air-opt").display()),
            &format!("{}", t.path().join("p1/aircc").display()),
            &format!("{}", t.path().join("peano").display()),
            &format!("{}", site.join("llvm-aie").display()),
            "pip install \"mlir_air[aie]==0.0.1.2026081604+d0e522b.no.rtti\"",
            "pip install llvm-aie",
            "MLIR_AIR_INSTALL_DIR",
            "PEANO_INSTALL_DIR",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
    }

    #[test]
    fn peano_search_order_and_aie_check() {
        let t = tempfile::tempdir().unwrap();
        let llvm = t.path().join("llvm");
        let peano = t.path().join("peano");
        let site = t.path().join("site");
        llc(&llvm, "x86-64 aie2 aie2p");
        llc(&peano, "aie2 aie2p");
        llc(&site.join("llvm-aie"), "aie2p");
        let search = SearchPaths {
            site_packages: vec![site.clone()],
            triton_dir: None,
        };
        let both = config(&[
            ("LLVM_BINARY_DIR", llvm.join("bin").display().to_string()),
            ("PEANO_INSTALL_DIR", peano.display().to_string()),
        ]);
        let found = find_peano(&both, &search).unwrap();
        assert_eq!(found.path, llvm);
        assert!(
            found
                .identity
                .version
                .as_deref()
                .unwrap()
                .contains("LLVM version 19.0.0")
        );

        let only_peano = config(&[("PEANO_INSTALL_DIR", peano.display().to_string())]);
        assert_eq!(find_peano(&only_peano, &search).unwrap().path, peano);
        assert_eq!(
            find_peano(&config(&[]), &search).unwrap().path,
            site.join("llvm-aie")
        );

        // A host LLVM (no aie2 target) is refused with the reason, and the search goes on.
        llc(&llvm, "x86-64 aarch64");
        let found = find_peano(&both, &search).unwrap();
        assert_eq!(found.path, peano);
        let err = find_peano(
            &config(&[("LLVM_BINARY_DIR", llvm.join("bin").display().to_string())]),
            &SearchPaths::default(),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("lists no aie2 target"), "{text}");
    }

    #[test]
    fn triton_shared_opt_search_order() {
        let t = tempfile::tempdir().unwrap();
        let explicit = t.path().join("explicit");
        let pathdir = t.path().join("pathdir");
        let triton = t.path().join("triton");
        tool(&explicit.join("triton-shared-opt"), "echo v1");
        tool(&pathdir.join("triton-shared-opt"), "echo v2");
        tool(&triton.join("triton_shared/triton-shared-opt"), "echo v3");
        let search = SearchPaths {
            site_packages: vec![],
            triton_dir: Some(triton.clone()),
        };
        let p = pathdir.display().to_string();
        // A directory or the file itself.
        for value in [explicit.clone(), explicit.join("triton-shared-opt")] {
            let cfg = config(&[
                ("TRITON_SHARED_OPT_PATH", value.display().to_string()),
                ("PATH", p.clone()),
            ]);
            let found = find_triton_shared_opt(&cfg, &search).unwrap();
            assert_eq!(found.path, explicit.join("triton-shared-opt"));
        }
        let found = find_triton_shared_opt(&config(&[("PATH", p)]), &search).unwrap();
        assert_eq!(found.path, pathdir.join("triton-shared-opt"));
        let found = find_triton_shared_opt(&config(&[]), &search).unwrap();
        assert_eq!(found.path, triton.join("triton_shared/triton-shared-opt"));
        assert_eq!(found.identity.version.as_deref(), Some("v3"));
    }

    #[test]
    fn a_tool_is_asked_its_version_once_per_process_until_the_file_changes() {
        let t = tempfile::tempdir().unwrap();
        let asked = t.path().join("asked");
        let p = t.path().join("bin/air-opt");
        let script = |version: &str| {
            format!(
                "echo x >> '{}'; echo 'air-opt version {version}'",
                asked.display()
            )
        };
        tool(&p, &script("1"));
        let cfg = config(&[("PATH", t.path().join("bin").display().to_string())]);
        let times_asked = || {
            std::fs::read_to_string(&asked)
                .unwrap_or_default()
                .lines()
                .count()
        };
        for _ in 0..3 {
            let found = find_air_tool("air-opt", &cfg, &SearchPaths::default()).unwrap();
            assert_eq!(found.identity.version.as_deref(), Some("air-opt version 1"));
        }
        assert_eq!(times_asked(), 1);
        // Replaced by another build: asked again, and its answer is the new one.
        std::fs::remove_file(&p).unwrap();
        tool(&p, &script("2"));
        let found = find_air_tool("air-opt", &cfg, &SearchPaths::default()).unwrap();
        assert_eq!(found.identity.version.as_deref(), Some("air-opt version 2"));
        assert_eq!(times_asked(), 2);
    }

    #[test]
    fn identity_falls_back_to_sha256_without_a_version_flag() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("bin/air-opt");
        tool(&p, "echo 'Unknown command line argument' >&2; exit 1");
        let cfg = config(&[("PATH", t.path().join("bin").display().to_string())]);
        let found = find_air_tool("air-opt", &cfg, &SearchPaths::default()).unwrap();
        assert_eq!(found.identity.version, None);
        let want: String = Sha256::digest(std::fs::read(&p).unwrap())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(found.identity.sha256.as_deref(), Some(want.as_str()));
        assert!(found.identity.describe().starts_with("sha256:"));
    }

    #[test]
    fn relative_locations_become_absolute() {
        let t = tempfile::tempdir_in(".").unwrap();
        let rel = t
            .path()
            .strip_prefix(std::env::current_dir().unwrap())
            .unwrap()
            .to_path_buf();
        tool(&t.path().join("bin/air-opt"), "echo 'air-opt version 1'");
        llc(t.path(), "aie2");
        let cfg = config(&[
            ("MLIR_AIR_INSTALL_DIR", rel.display().to_string()),
            ("PEANO_INSTALL_DIR", rel.display().to_string()),
        ]);
        let found = find_air_tool("air-opt", &cfg, &SearchPaths::default()).unwrap();
        assert!(found.path.is_absolute(), "{}", found.path.display());
        assert!(found.path.ends_with(rel.join("bin/air-opt")));
        let peano = find_peano(&cfg, &SearchPaths::default()).unwrap();
        assert!(peano.path.is_absolute(), "{}", peano.path.display());
    }

    #[test]
    fn relative_path_entries_are_never_searched() {
        // The tools exist in a directory PATH names relative to our working directory, as
        // `.`, an empty entry or `bin` would: none of them is used.
        let t = tempfile::tempdir_in(".").unwrap();
        let rel = t
            .path()
            .strip_prefix(std::env::current_dir().unwrap())
            .unwrap()
            .join("bin");
        for name in ["air-opt", "aircc", "triton-shared-opt"] {
            tool(&t.path().join("bin").join(name), "echo 'version 1'");
        }
        let relative = config(&[("PATH", format!("{}:./{0}:", rel.display()))]);
        assert!(relative.locations.path.is_empty());
        let search = SearchPaths::default();
        let err = find_air_tool("aircc", &relative, &search).unwrap_err();
        assert!(err.searched.is_empty(), "{err}");
        assert!(find_air_tool("air-opt", &relative, &search).is_err());
        assert!(find_triton_shared_opt(&relative, &search).is_err());
        // The same directory named absolutely is searched.
        let absolute = config(&[("PATH", t.path().join("bin").display().to_string())]);
        assert!(find_air_tool("aircc", &absolute, &search).is_ok());
        assert!(find_triton_shared_opt(&absolute, &search).is_ok());
    }

    #[test]
    fn stamps_stop_at_the_candidate_discovery_picks() {
        let t = tempfile::tempdir().unwrap();
        let [missing, plain, picked, later] =
            ["missing", "plain", "picked", "later"].map(|n| t.path().join(n).join("air-opt"));
        std::fs::create_dir_all(plain.parent().unwrap()).unwrap();
        std::fs::write(&plain, "not a program").unwrap();
        tool(&picked, "echo 'version 1'");
        tool(&later, "echo 'version 2'");
        let order = [&missing, &plain, &picked, &later];
        let stamp = || file_stamps(order.iter().map(|p| p.as_path()));
        let before = stamp();
        // The non-executable file before the pick and the pick are stamped; nothing after it.
        assert!(
            before.contains(&format!("{} ", plain.display())),
            "{before}"
        );
        assert!(
            before.contains(&format!("{} ", picked.display())),
            "{before}"
        );
        assert!(!before.contains(&later.display().to_string()), "{before}");
        assert!(!before.contains(&missing.display().to_string()), "{before}");
        // A change after the pick changes nothing; making an earlier file executable does
        // (discovery would pick it now).
        std::fs::write(&later, "#!/bin/sh\necho 'version 3'\n").unwrap();
        assert_eq!(stamp(), before);
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o755)).unwrap();
        let after = stamp();
        assert_ne!(after, before);
        assert!(!after.contains(&picked.display().to_string()), "{after}");
    }

    #[test]
    fn candidate_files_follow_the_search_order() {
        let t = tempfile::tempdir().unwrap();
        let site = t.path().join("site");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::write(site.join("mlir-air.pth"), "wheel/python\n").unwrap();
        let cfg = config(&[
            (
                "MLIR_AIR_INSTALL_DIR",
                t.path().join("air").display().to_string(),
            ),
            (
                "LLVM_BINARY_DIR",
                t.path().join("llvm/bin").display().to_string(),
            ),
            (
                "PEANO_INSTALL_DIR",
                t.path().join("peano").display().to_string(),
            ),
            ("PATH", t.path().join("p").display().to_string()),
        ]);
        let search = SearchPaths {
            site_packages: vec![site.clone()],
            triton_dir: None,
        };
        let files = candidate_files(&cfg, &search);
        let names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["air-opt", "aircc", "peano"]);
        assert_eq!(
            files[1].1,
            vec![
                t.path().join("air/bin/aircc"),
                site.join("wheel/bin/aircc"),
                site.join("mlir_air/bin/aircc"),
                t.path().join("p/aircc"),
            ]
        );
        assert_eq!(
            files[2].1,
            vec![
                t.path().join("llvm/bin/llc"),
                t.path().join("peano/bin/llc"),
                site.join("llvm-aie/bin/llc"),
            ]
        );
    }

    #[test]
    fn version_lines() {
        assert_eq!(
            version_line("LLVM (http://llvm.org/):\n  LLVM version 20.1.0\n  Optimized build.\n")
                .as_deref(),
            Some("LLVM version 20.1.0")
        );
        assert_eq!(version_line("\n aircc 1.2\n").as_deref(), Some("aircc 1.2"));
        assert_eq!(version_line(""), None);
    }

    #[test]
    fn report_covers_every_tool() {
        let t = tempfile::tempdir().unwrap();
        tool(&t.path().join("bin/air-opt"), "echo 'air-opt version 1'");
        let cfg = config(&[("PATH", t.path().join("bin").display().to_string())]);
        let r = report(&cfg, &SearchPaths::default());
        let names: Vec<&str> = r.iter().map(|e| e.tool.as_str()).collect();
        assert_eq!(
            names,
            [
                "air-opt",
                "aircc",
                "aiecc",
                "bootgen",
                "aiebu-asm",
                "xclbinutil",
                "peano",
                "triton-shared-opt"
            ]
        );
        assert_eq!(
            r[0].found.as_ref().unwrap().identity.version.as_deref(),
            Some("air-opt version 1")
        );
        assert!(r[1].found.is_none());
        assert_eq!(r[1].searched[0].path, t.path().join("bin/aircc"));
        assert!(r[6].install.contains("llvm-aie"));
        assert!(r[0].install.contains(MLIR_AIR_WHEEL) && r[2].install.contains(MLIR_AIE_VERSION));
        assert!(r[7].install.contains("TRITON_PLUGIN_DIRS"));
        // What each format needs.
        let required = |format| {
            report_for(&cfg, &SearchPaths::default(), format)
                .into_iter()
                .filter(|e| e.required)
                .map(|e| e.tool)
                .collect::<Vec<_>>()
        };
        let common = ["air-opt", "aircc", "aiecc", "peano", "triton-shared-opt"];
        let with = |extra: &str| {
            let mut v: Vec<String> = common.iter().map(|s| s.to_string()).collect();
            v.insert(3, extra.to_owned());
            v
        };
        assert_eq!(required(Some(OutputFormat::Elf)), with("aiebu-asm"));
        assert_eq!(required(Some(OutputFormat::Xclbin)), with("xclbinutil"));
        assert_eq!(required(Some(OutputFormat::Pdi)), common);
    }
}
