//! Finding and loading the shim (and, when it needs it, XRT's `libxrt_coreutil.so.2`).
//!
//! # Where the shim is looked for
//!
//! 1. `AMD_TRITON_NPU_XRT_SHIM` ([`Search::shim`]): an explicit path. This is how a custom or
//!    the conformance harness's stand-in shim is selected; if the file is missing, loading
//!    fails rather than falling back.
//! 2. `libtriton_npu_xrt.so` in each of [`Search::shim_dirs`], in order: the directories the
//!    installed package keeps it in (next to the Python extension module, the package's `lib/`),
//!    given by the caller.
//!
//! A build tree (`target/xrt-shim/`) is not a production location and is never searched.
//!
//! # When `libxrt_coreutil.so.2` is loaded
//!
//! The real shim is built without linking XRT (`make xrt-shim` runs where only headers exist),
//! so its XRT symbols are undefined until `libxrt_coreutil.so.2` is in the process's global
//! scope. The rule: **coreutil is loaded (with `RTLD_GLOBAL`, before the shim) exactly when the
//! shim's ELF needs it** — when its `DT_NEEDED` names `libxrt_coreutil`, or its dynamic symbol
//! table has undefined XRT symbols (C++ names in namespace `xrt`, or the C API's `xrt*`
//! functions). A shim that needs nothing from XRT (the harness stand-in) loads without it.
//!
//! Coreutil is looked for in each XRT root of [`Search::xrt_roots`] (`lib/`, then `lib64/`),
//! then by its SONAME through the system loader path. It stays loaded for the life of the
//! process: XRT keeps process-wide state and is not safe to unload.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::bindings::{self, TritonNpuXrt};
use crate::error::XrtSysError;

/// The shim's file name.
pub const SHIM_FILE: &str = "libtriton_npu_xrt.so";
/// The XRT library the real shim resolves its symbols against.
pub const COREUTIL_SONAME: &str = "libxrt_coreutil.so.2";
/// The environment variable that names the shim explicitly (read by `npu_target`).
pub const SHIM_ENV: &str = "AMD_TRITON_NPU_XRT_SHIM";

/// Where to look; built by the runtime from its configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Search {
    /// An explicit shim path (`AMD_TRITON_NPU_XRT_SHIM`).
    pub shim: Option<PathBuf>,
    /// Directories that may hold [`SHIM_FILE`], in order.
    pub shim_dirs: Vec<PathBuf>,
    /// XRT installation roots, in order, each with the setting that named it
    /// (e.g. `("XILINX_XRT", "/opt/xilinx/xrt")`).
    pub xrt_roots: Vec<(String, PathBuf)>,
}

/// A loaded shim: the library and its functions.
pub struct Shim {
    pub(crate) api: TritonNpuXrt,
    path: PathBuf,
    coreutil: Option<PathBuf>,
}

impl std::fmt::Debug for Shim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shim")
            .field("path", &self.path)
            .field("coreutil", &self.coreutil)
            .finish_non_exhaustive()
    }
}

impl Shim {
    /// The shim library's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where `libxrt_coreutil.so.2` was loaded from, when the shim needed it (a path, or the
    /// SONAME when the system loader found it).
    pub fn coreutil(&self) -> Option<&Path> {
        self.coreutil.as_deref()
    }
}

// Shims are loaded once per path and never unloaded (they may hold XRT objects' code).
static SHIMS: Mutex<Option<HashMap<PathBuf, Arc<Shim>>>> = Mutex::new(None);
// Coreutil, once loaded, for the life of the process.
static COREUTIL: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Finds the shim, loads what it needs, and checks its ABI version.
pub fn load(search: &Search) -> Result<Arc<Shim>, XrtSysError> {
    let path = locate_shim(search)?;
    let mut shims = SHIMS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(shim) = shims.get_or_insert_with(HashMap::new).get(&path) {
        return Ok(Arc::clone(shim));
    }
    let coreutil = if needs_coreutil(&path)? {
        Some(load_coreutil(search, &path)?)
    } else {
        None
    };
    let shim = Arc::new(open_shim(&path, coreutil)?);
    shims
        .get_or_insert_with(HashMap::new)
        .insert(path, Arc::clone(&shim));
    Ok(shim)
}

/// The shim file [`load`] would use, or the list of places looked.
pub fn locate_shim(search: &Search) -> Result<PathBuf, XrtSysError> {
    if let Some(explicit) = &search.shim {
        if explicit.is_file() {
            return Ok(absolute(explicit));
        }
        let why = if explicit.exists() {
            "not a file"
        } else {
            "does not exist"
        };
        return Err(XrtSysError::ShimNotFound {
            searched: vec![format!("{SHIM_ENV}={}: {why}", explicit.display())],
        });
    }
    let mut searched = vec![format!("{SHIM_ENV}: not set")];
    for dir in &search.shim_dirs {
        let candidate = dir.join(SHIM_FILE);
        if candidate.is_file() {
            return Ok(absolute(&candidate));
        }
        searched.push(format!("{}: not present", candidate.display()));
    }
    Err(XrtSysError::ShimNotFound { searched })
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Whether the shim at `path` needs `libxrt_coreutil.so.2` loaded first (see the module docs).
pub fn needs_coreutil(path: &Path) -> Result<bool, XrtSysError> {
    let bytes = std::fs::read(path).map_err(|e| XrtSysError::ShimLoad {
        path: path.to_path_buf(),
        reason: format!("cannot read it: {e}"),
    })?;
    let elf = goblin::elf::Elf::parse(&bytes).map_err(|e| XrtSysError::ShimLoad {
        path: path.to_path_buf(),
        reason: format!("not an ELF shared library: {e}"),
    })?;
    if elf
        .libraries
        .iter()
        .any(|lib| lib.starts_with("libxrt_coreutil"))
    {
        return Ok(true);
    }
    Ok(elf.dynsyms.iter().any(|sym| {
        sym.st_shndx == goblin::elf::section_header::SHN_UNDEF as usize
            && elf.dynstrtab.get_at(sym.st_name).is_some_and(is_xrt_symbol)
    }))
}

/// A symbol XRT's coreutil defines: C++ names in namespace `xrt` (functions, and the typeinfo,
/// vtables and type names of its classes), or the C API's `xrt*` functions.
fn is_xrt_symbol(name: &str) -> bool {
    let cxx = ["_ZN3xrt", "_ZNK3xrt", "_ZTIN3xrt", "_ZTVN3xrt", "_ZTSN3xrt"];
    if cxx.iter().any(|p| name.starts_with(p)) {
        return true;
    }
    name.strip_prefix("xrt")
        .and_then(|rest| rest.chars().next())
        .is_some_and(|c| c.is_ascii_uppercase())
}

fn load_coreutil(search: &Search, shim: &Path) -> Result<PathBuf, XrtSysError> {
    let mut loaded = COREUTIL.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(path) = loaded.as_ref() {
        return Ok(path.clone());
    }
    let mut tried = Vec::new();
    for (setting, root) in &search.xrt_roots {
        for lib in ["lib", "lib64"] {
            let candidate = root.join(lib).join(COREUTIL_SONAME);
            if !candidate.is_file() {
                tried.push(format!("{} ({setting}): not present", candidate.display()));
                continue;
            }
            match dlopen_global(candidate.as_os_str()) {
                Ok(()) => {
                    *loaded = Some(candidate.clone());
                    return Ok(candidate);
                }
                Err(e) => tried.push(format!("{} ({setting}): {e}", candidate.display())),
            }
        }
    }
    match dlopen_global(OsStr::new(COREUTIL_SONAME)) {
        Ok(()) => {
            let found = PathBuf::from(COREUTIL_SONAME);
            *loaded = Some(found.clone());
            Ok(found)
        }
        Err(e) => {
            tried.push(format!(
                "{COREUTIL_SONAME} through the system loader path: {e}"
            ));
            Err(XrtSysError::CoreutilNotFound {
                shim: shim.to_path_buf(),
                tried,
            })
        }
    }
}

/// dlopens a library into the global scope and keeps it loaded for the life of the process.
fn dlopen_global(name: &OsStr) -> Result<(), String> {
    // SAFETY: loading XRT runs its initialisers, which is what using XRT requires; the handle is
    // deliberately leaked so the library is never unloaded.
    let lib = unsafe {
        libloading::os::unix::Library::open(Some(name), libc::RTLD_NOW | libc::RTLD_GLOBAL)
    }
    .map_err(|e| e.to_string())?;
    std::mem::forget(lib);
    Ok(())
}

fn open_shim(path: &Path, coreutil: Option<PathBuf>) -> Result<Shim, XrtSysError> {
    // RTLD_NOW: an XRT symbol missing from the installed coreutil fails here, with a message,
    // instead of aborting the process at the first call.
    // SAFETY: the shim's initialisers are trivial (it holds no static C++ objects).
    let lib = unsafe {
        libloading::os::unix::Library::open(
            Some(path.as_os_str()),
            libc::RTLD_NOW | libc::RTLD_LOCAL,
        )
    }
    .map_err(|e| XrtSysError::ShimLoad {
        path: path.to_path_buf(),
        reason: match &coreutil {
            Some(c) => format!(
                "{e}; it was built against other XRT headers than the installed {} \
                 (loaded from {}): rebuild it with `make xrt-shim` against the installed XRT",
                COREUTIL_SONAME,
                c.display()
            ),
            None => e.to_string(),
        },
    })?;
    // SAFETY: the symbols are looked up by name with the types the header declares; the ABI
    // version is checked right after.
    let api = unsafe { TritonNpuXrt::from_library(lib) }.map_err(|e| XrtSysError::NotAShim {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    // SAFETY: a function without arguments that returns a constant.
    let found = unsafe { api.triton_npu_xrt_abi_version() };
    if found != bindings::TRITON_NPU_XRT_ABI_VERSION {
        return Err(XrtSysError::AbiMismatch {
            path: path.to_path_buf(),
            found,
            expected: bindings::TRITON_NPU_XRT_ABI_VERSION,
        });
    }
    Ok(Shim {
        api,
        path: path.to_path_buf(),
        coreutil,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xrt_symbols_are_recognised() {
        for name in [
            "_ZN3xrt6deviceC1Ej",
            "_ZNK3xrt3run5stateEv",
            "_ZTIN3xrt3run13command_errorE",
            "xrtDeviceOpen",
        ] {
            assert!(is_xrt_symbol(name), "{name}");
        }
        for name in [
            "_ZNSt6vectorIiE",
            "memcpy",
            "xrtfoo",
            "triton_npu_xrt_run_wait",
            "_ZN4xrtx3fooEv",
        ] {
            assert!(!is_xrt_symbol(name), "{name}");
        }
    }

    #[test]
    fn explicit_shim_path_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.so");
        let search = Search {
            shim: Some(missing.clone()),
            shim_dirs: vec![dir.path().to_path_buf()],
            ..Search::default()
        };
        let err = locate_shim(&search).unwrap_err().to_string();
        assert!(err.contains(SHIM_ENV), "{err}");
        assert!(err.contains(&missing.display().to_string()), "{err}");
        assert!(err.contains("does not exist"), "{err}");
        assert!(err.contains("make xrt-shim"), "{err}");
    }

    #[test]
    fn shim_dirs_are_searched_in_order() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(b.path().join(SHIM_FILE), b"x").unwrap();
        let search = Search {
            shim_dirs: vec![a.path().to_path_buf(), b.path().to_path_buf()],
            ..Search::default()
        };
        assert_eq!(
            locate_shim(&search).unwrap(),
            std::fs::canonicalize(b.path().join(SHIM_FILE)).unwrap()
        );
        std::fs::write(a.path().join(SHIM_FILE), b"x").unwrap();
        assert_eq!(
            locate_shim(&search).unwrap(),
            std::fs::canonicalize(a.path().join(SHIM_FILE)).unwrap()
        );
    }

    #[test]
    fn not_found_lists_every_place() {
        let dir = tempfile::tempdir().unwrap();
        let search = Search {
            shim_dirs: vec![dir.path().join("one"), dir.path().join("two")],
            ..Search::default()
        };
        let err = locate_shim(&search).unwrap_err().to_string();
        assert!(err.contains("AMD_TRITON_NPU_XRT_SHIM: not set"), "{err}");
        for d in ["one", "two"] {
            let p = dir.path().join(d).join(SHIM_FILE);
            assert!(err.contains(&p.display().to_string()), "{err}");
        }
        assert!(err.contains("AMD_TRITON_NPU_RUNTIME=hsa"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_elf_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SHIM_FILE);
        std::fs::write(&path, b"not an elf").unwrap();
        let err = needs_coreutil(&path).unwrap_err().to_string();
        assert!(err.contains("not an ELF shared library"), "{err}");
    }
}
