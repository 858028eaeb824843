//! Every environment variable the driver reads, resolved in one place.
//!
//! Precedence for each setting: a programmatic value (Python's `set_config`, held in
//! [`Overrides`]) beats the environment, which beats the default. Parsing is a pure function of
//! a lookup closure and the overrides, so every branch is testable without touching the
//! process environment.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use crate::error::ConfigError;
use crate::format::OutputFormat;
pub use crate::runtime::RuntimeKind;
use crate::target::NpuVersion;

/// The settings a program may set through `set_config` (upstream's `npu_config` properties).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Setting {
    Runtime,
    Target,
    OutputFormat,
    CompileOnly,
    Bf16Emulation,
    TransformTilingScript,
    AirProjectPath,
    Debug,
    XrtDir,
}

impl Setting {
    pub const ALL: [Setting; 9] = [
        Setting::Runtime,
        Setting::Target,
        Setting::OutputFormat,
        Setting::CompileOnly,
        Setting::Bf16Emulation,
        Setting::TransformTilingScript,
        Setting::AirProjectPath,
        Setting::Debug,
        Setting::XrtDir,
    ];

    /// The property name used by Python's `npu_config` and `set_config`.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Runtime => "runtime",
            Setting::Target => "target",
            Setting::OutputFormat => "output_format",
            Setting::CompileOnly => "compile_only",
            Setting::Bf16Emulation => "bf16_emulation",
            Setting::TransformTilingScript => "transform_tiling_script",
            Setting::AirProjectPath => "air_project_path",
            Setting::Debug => "debug",
            Setting::XrtDir => "xrt_dir",
        }
    }

    /// The environment variable the setting falls back to (its row of [`VARIABLES`]).
    pub fn env_var(self) -> &'static str {
        VARIABLES
            .iter()
            .find(|v| v.setting == Some(self))
            .map_or("", |v| v.name)
    }

    pub fn from_name(name: &str) -> Result<Setting, ConfigError> {
        Setting::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| ConfigError::UnknownSetting {
                name: name.to_owned(),
                valid: Setting::ALL
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// The name of every environment variable the driver reads, once.
pub mod vars {
    pub const RUNTIME: &str = "AMD_TRITON_NPU_RUNTIME";
    pub const TARGET: &str = "AMD_TRITON_NPU_TARGET";
    pub const OUTPUT_FORMAT: &str = "AMD_TRITON_NPU_OUTPUT_FORMAT";
    pub const COMPILE_ONLY: &str = "AMD_TRITON_NPU_COMPILE_ONLY";
    pub const BF16_EMULATION: &str = "AMD_TRITON_NPU_BF16_EMULATION";
    pub const TRANSFORM_TILING_SCRIPT: &str = "AIR_TRANSFORM_TILING_SCRIPT";
    pub const AIR_PROJECT_PATH: &str = "AMD_TRITON_NPU_AIR_PROJECT_PATH";
    pub const DEBUG: &str = "AMD_TRITON_NPU_DEBUG";
    pub const XRT_DIR: &str = "AMD_TRITON_NPU_XRT_DIR";
    pub const XRT_MAX_SESSIONS: &str = "AMD_TRITON_NPU_XRT_MAX_SESSIONS";
    pub const XRT_TIMEOUT: &str = "AMD_TRITON_NPU_XRT_TIMEOUT";
    pub const HSA_TIMEOUT: &str = "AMD_TRITON_NPU_HSA_TIMEOUT";
    pub const HSA_VERIFY_WRITEBACK: &str = "AMD_TRITON_NPU_HSA_VERIFY_WRITEBACK";
    pub const COMPILE_TIMEOUT: &str = "AMD_TRITON_NPU_COMPILE_TIMEOUT";
    pub const CACHE_DIR: &str = "AMD_TRITON_NPU_CACHE_DIR";
    pub const CACHE_MAX_BYTES: &str = "AMD_TRITON_NPU_CACHE_MAX_BYTES";
    pub const CACHE_WAIT_TIMEOUT: &str = "AMD_TRITON_NPU_CACHE_WAIT_TIMEOUT";
    pub const REMOTE_CACHE: &str = "AMD_TRITON_NPU_REMOTE_CACHE";
    pub const REMOTE_CACHE_MAX_BYTES: &str = "AMD_TRITON_NPU_REMOTE_CACHE_MAX_BYTES";
    pub const REMOTE_CACHE_TIMEOUT: &str = "AMD_TRITON_NPU_REMOTE_CACHE_TIMEOUT";
    pub const ROCR_PATH: &str = "AMD_NPU_ROCR_PATH";
    pub const ROCM_PATH: &str = "ROCM_PATH";
    pub const ROCM_HOME: &str = "ROCM_HOME";
    pub const MLIR_AIR_INSTALL_DIR: &str = "MLIR_AIR_INSTALL_DIR";
    pub const LLVM_BINARY_DIR: &str = "LLVM_BINARY_DIR";
    pub const PEANO_INSTALL_DIR: &str = "PEANO_INSTALL_DIR";
    pub const TRITON_SHARED_OPT_PATH: &str = "TRITON_SHARED_OPT_PATH";
    /// aiecc's override for the xclbinutil it runs (mlir-aie `aiecc.cpp`).
    pub const AIE_XCLBINUTIL: &str = "AIE_XCLBINUTIL";
    pub const XRT_DEV_DIR: &str = "XRT_DEV_DIR";
    pub const XILINX_XRT: &str = "XILINX_XRT";
    pub const XRT_SHIM: &str = "AMD_TRITON_NPU_XRT_SHIM";
    pub const TRITON_CACHE_DIR: &str = "TRITON_CACHE_DIR";
    pub const TRITON_HOME: &str = "TRITON_HOME";
    pub const HOME: &str = "HOME";
    pub const PATH: &str = "PATH";
}

/// One environment variable the driver reads: the table `triton-npu config`, Python's
/// `npu_config` and the README's configuration section are checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    pub name: &'static str,
    /// The `npu_config` property that overrides it, if any.
    pub setting: Option<Setting>,
    /// The value used when it is unset, as a user would write it (empty: no default).
    pub default: &'static str,
    /// What it does, in one line.
    pub meaning: &'static str,
}

const fn var(
    name: &'static str,
    setting: Option<Setting>,
    default: &'static str,
    meaning: &'static str,
) -> Variable {
    Variable {
        name,
        setting,
        default,
        meaning,
    }
}

/// Every environment variable the driver reads, in the order the README lists them.
pub const VARIABLES: &[Variable] = &[
    var(
        vars::RUNTIME,
        Some(Setting::Runtime),
        "xrt",
        "the runtime that dispatches kernels",
    ),
    var(
        vars::TARGET,
        Some(Setting::Target),
        "",
        "npu1 or npu2: skip device detection",
    ),
    var(
        vars::OUTPUT_FORMAT,
        Some(Setting::OutputFormat),
        "",
        "elf, xclbin or pdi; unset: elf on npu2, xclbin on npu1",
    ),
    var(
        vars::COMPILE_ONLY,
        Some(Setting::CompileOnly),
        "0",
        "1: build and cache, never dispatch",
    ),
    var(
        vars::BF16_EMULATION,
        Some(Setting::Bf16Emulation),
        "0",
        "1: pass --bf16-emulation to aircc",
    ),
    var(
        vars::TRANSFORM_TILING_SCRIPT,
        Some(Setting::TransformTilingScript),
        "",
        "the transform-dialect script that tiles kernels",
    ),
    var(
        vars::AIR_PROJECT_PATH,
        Some(Setting::AirProjectPath),
        "",
        "keep each compile's IR and tool logs here",
    ),
    var(
        vars::DEBUG,
        Some(Setting::Debug),
        "0",
        "1: debug logging, tool output streamed",
    ),
    var(
        vars::XRT_DIR,
        Some(Setting::XrtDir),
        "",
        "where XRT is (first choice)",
    ),
    var(vars::XRT_DEV_DIR, None, "", "where XRT is (second choice)"),
    var(vars::XILINX_XRT, None, "", "where XRT is (third choice)"),
    var(
        vars::XRT_MAX_SESSIONS,
        None,
        "8",
        "XRT hardware contexts this process keeps open",
    ),
    var(
        vars::XRT_TIMEOUT,
        None,
        "60",
        "seconds an XRT run may take; then it fails with a timeout and its hardware context is \
         torn down",
    ),
    var(
        vars::XRT_SHIM,
        None,
        "",
        "the XRT shim library (default: the package's lib/)",
    ),
    var(
        vars::ROCR_PATH,
        None,
        "",
        "where an AIE-capable ROCr is (first choice)",
    ),
    var(
        vars::ROCM_PATH,
        None,
        "",
        "where an AIE-capable ROCr is (second choice)",
    ),
    var(
        vars::ROCM_HOME,
        None,
        "",
        "where an AIE-capable ROCr is (third choice)",
    ),
    var(
        vars::HSA_TIMEOUT,
        None,
        "60",
        "seconds an HSA dispatch may take; then it fails with a timeout and the AIE queue is \
         recreated (0 or less: no limit, as upstream)",
    ),
    var(
        vars::HSA_VERIFY_WRITEBACK,
        None,
        "0",
        "1: check after each HSA dispatch that unwritten buffers were left alone",
    ),
    var(
        vars::COMPILE_TIMEOUT,
        None,
        "3600",
        "seconds a toolchain step may take",
    ),
    var(
        vars::CACHE_DIR,
        None,
        "",
        "the kernel cache (default: $TRITON_CACHE_DIR/npu)",
    ),
    var(
        vars::CACHE_MAX_BYTES,
        None,
        "",
        "the kernel cache's size cap (e.g. 10G)",
    ),
    var(
        vars::CACHE_WAIT_TIMEOUT,
        None,
        "7200",
        "seconds to wait for another process's build of the same kernel",
    ),
    var(
        vars::REMOTE_CACHE,
        None,
        "on",
        "on, read or off: use of Triton's remote cache (TRITON_REMOTE_CACHE_BACKEND)",
    ),
    var(
        vars::REMOTE_CACHE_MAX_BYTES,
        None,
        "64M",
        "the largest entry published to or taken from the remote cache",
    ),
    var(
        vars::REMOTE_CACHE_TIMEOUT,
        None,
        "5",
        "seconds one remote-cache call may take",
    ),
    var(
        vars::MLIR_AIR_INSTALL_DIR,
        None,
        "",
        "where mlir-air (air-opt, aircc) is",
    ),
    var(
        vars::PEANO_INSTALL_DIR,
        None,
        "",
        "where Peano (llvm-aie) is",
    ),
    var(
        vars::LLVM_BINARY_DIR,
        None,
        "",
        "where Peano's binaries are",
    ),
    var(
        vars::AIE_XCLBINUTIL,
        None,
        "",
        "the xclbinutil aiecc runs (aiecc's own variable)",
    ),
    var(
        vars::TRITON_SHARED_OPT_PATH,
        None,
        "",
        "triton-shared-opt, or its directory",
    ),
    var(
        vars::TRITON_CACHE_DIR,
        None,
        "",
        "Triton's cache; ours is its npu/ folder",
    ),
    var(
        vars::TRITON_HOME,
        None,
        "",
        "Triton's home; the cache falls back to it",
    ),
    var(
        vars::HOME,
        None,
        "",
        "the last fallback of the cache location",
    ),
    var(vars::PATH, None, "", "searched for tools"),
];

/// Default for `AMD_TRITON_NPU_COMPILE_TIMEOUT`: one hour, as long as a large aircc run may take.
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(3600);
/// Default for `AMD_TRITON_NPU_HSA_TIMEOUT`: the same finite limit as XRT's (a hung NPU must
/// not hang the caller forever: ROCr waits forever inside the doorbell store).
pub const DEFAULT_HSA_TIMEOUT: Duration = DEFAULT_XRT_TIMEOUT;
/// Default for `AMD_TRITON_NPU_CACHE_WAIT_TIMEOUT`: how long a process waits for another
/// process's build of the same kernel (two hours: two full-length tool runs).
pub const DEFAULT_CACHE_WAIT_TIMEOUT: Duration = Duration::from_secs(7200);
/// Default for `AMD_TRITON_NPU_REMOTE_CACHE_TIMEOUT`: one remote-cache call.
pub const DEFAULT_REMOTE_CACHE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default for `AMD_TRITON_NPU_REMOTE_CACHE_MAX_BYTES`: the largest entry published to (or
/// taken from) the remote cache.
pub const DEFAULT_REMOTE_CACHE_MAX_BYTES: u64 = 64 << 20;

/// `AMD_TRITON_NPU_REMOTE_CACHE`: how the kernel cache uses Triton's configured remote cache
/// (`TRITON_REMOTE_CACHE_BACKEND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoteCacheMode {
    /// Fetch entries missing locally, publish entries built locally (the default).
    #[default]
    On,
    /// Fetch, never publish (e.g. pull-request CI).
    Read,
    /// Never use the remote cache.
    Off,
}

impl RemoteCacheMode {
    pub fn parse(text: &str) -> Option<RemoteCacheMode> {
        match text.trim().to_ascii_lowercase().as_str() {
            "on" | "1" | "readwrite" | "rw" => Some(RemoteCacheMode::On),
            "read" | "readonly" | "ro" => Some(RemoteCacheMode::Read),
            "off" | "0" => Some(RemoteCacheMode::Off),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RemoteCacheMode::On => "on",
            RemoteCacheMode::Read => "read",
            RemoteCacheMode::Off => "off",
        }
    }
}
/// Default for `AMD_TRITON_NPU_XRT_TIMEOUT`: a run that has not finished after a minute is
/// taken as hung (NPU kernels take milliseconds to seconds).
pub const DEFAULT_XRT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default for `AMD_TRITON_NPU_XRT_MAX_SESSIONS` (upstream's value).
pub const DEFAULT_XRT_MAX_SESSIONS: usize = 8;

/// Places where external software may be installed, as the environment names them.
/// Discovery code (toolchain, ROCr, XRT, cache) reads these instead of `std::env`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Locations {
    pub rocr_path: Option<PathBuf>,
    pub rocm_path: Option<PathBuf>,
    pub rocm_home: Option<PathBuf>,
    pub mlir_air_install_dir: Option<PathBuf>,
    pub llvm_binary_dir: Option<PathBuf>,
    pub peano_install_dir: Option<PathBuf>,
    pub triton_shared_opt_path: Option<PathBuf>,
    /// `AIE_XCLBINUTIL`: the xclbinutil aiecc runs instead of searching for one.
    pub aie_xclbinutil: Option<PathBuf>,
    pub xrt_dev_dir: Option<PathBuf>,
    pub xilinx_xrt: Option<PathBuf>,
    /// `AMD_TRITON_NPU_XRT_SHIM`: an explicit path to the XRT shim library.
    pub xrt_shim: Option<PathBuf>,
    pub cache_dir: Option<PathBuf>,
    pub triton_cache_dir: Option<PathBuf>,
    pub triton_home: Option<PathBuf>,
    pub home: Option<PathBuf>,
    /// The absolute entries of `PATH`, in order. Empty, `.` and other relative entries mean
    /// "wherever the program happens to run" and are never searched for tools
    /// (`npu_process::lookup`).
    pub path: Vec<PathBuf>,
}

/// A resolved configuration snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Config {
    pub runtime: RuntimeKind,
    /// `None` means: detect the device.
    pub target: Option<NpuVersion>,
    /// `None` means: choose from the target.
    pub output_format: Option<OutputFormat>,
    pub compile_only: bool,
    pub bf16_emulation: bool,
    pub transform_tiling_script: Option<PathBuf>,
    /// Where IR and tool logs are kept for debugging; `None` keeps nothing.
    pub air_project_path: Option<PathBuf>,
    pub debug: bool,
    /// `AMD_TRITON_NPU_XRT_DIR`, the highest-priority XRT location.
    pub xrt_dir: Option<PathBuf>,
    pub xrt_max_sessions: usize,
    /// How long a dispatch under XRT waits for its run (always finite).
    pub xrt_timeout: Duration,
    /// How long a dispatch under HSA waits for its completion signal; `None` (only when the
    /// user sets 0 or less, upstream's way to turn its watchdog off) waits forever.
    pub hsa_timeout: Option<Duration>,
    pub hsa_verify_writeback: bool,
    pub compile_timeout: Duration,
    pub cache_max_bytes: Option<u64>,
    /// How long to wait for another process's build of the same cache entry.
    pub cache_wait_timeout: Duration,
    pub remote_cache: RemoteCacheMode,
    pub remote_cache_max_bytes: u64,
    pub remote_cache_timeout: Duration,
    pub locations: Locations,
}

/// Programmatic values, one per [`Setting`], stored as validated strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    values: BTreeMap<Setting, String>,
}

impl Overrides {
    /// Sets a value after checking that it parses; `None` removes the override.
    pub fn set(&mut self, setting: Setting, value: Option<&str>) -> Result<(), ConfigError> {
        match value {
            None => {
                self.values.remove(&setting);
            }
            Some(v) => {
                validate(setting, v)?;
                self.values.insert(setting, v.to_owned());
            }
        }
        Ok(())
    }

    pub fn get(&self, setting: Setting) -> Option<&str> {
        self.values.get(&setting).map(String::as_str)
    }

    pub fn clear(&mut self) {
        self.values.clear();
    }
}

static OVERRIDES: RwLock<Overrides> = RwLock::new(Overrides {
    values: BTreeMap::new(),
});

/// Bumped on every change of the programmatic values, so hot paths can cache what they read
/// from the configuration and re-read it only after `set_config`/`config_context`.
static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The number of changes to the programmatic values so far in this process.
pub fn generation() -> u64 {
    GENERATION.load(std::sync::atomic::Ordering::Acquire)
}

/// A copy of the process-wide programmatic values.
pub fn overrides() -> Overrides {
    OVERRIDES
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// Replaces the process-wide programmatic values (used by `config_context` to restore).
pub fn replace_overrides(new: Overrides) {
    *OVERRIDES.write().unwrap_or_else(PoisonError::into_inner) = new;
    GENERATION.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
}

/// Sets one process-wide programmatic value; `None` resets it to environment/default.
pub fn set_override(setting: Setting, value: Option<&str>) -> Result<(), ConfigError> {
    let result = OVERRIDES
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .set(setting, value);
    GENERATION.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    result
}

fn validate(setting: Setting, value: &str) -> Result<(), ConfigError> {
    let source = Source::Programmatic(setting);
    match setting {
        Setting::Runtime => parse_runtime(value, source).map(drop),
        Setting::Target => parse_target(value, source).map(drop),
        Setting::OutputFormat => parse_format(value, source).map(drop),
        Setting::CompileOnly | Setting::Bf16Emulation | Setting::Debug => {
            parse_bool(value, source).map(drop)
        }
        Setting::TransformTilingScript | Setting::AirProjectPath | Setting::XrtDir => Ok(()),
    }
}

/// Where a raw value came from, for error messages.
#[derive(Debug, Clone, Copy)]
enum Source {
    Programmatic(Setting),
    Env(&'static str),
}

impl Source {
    fn describe(self) -> String {
        match self {
            Source::Programmatic(s) => format!("npu_config.{} ({})", s.name(), s.env_var()),
            Source::Env(var) => var.to_owned(),
        }
    }
}

fn invalid(source: Source, value: &str, expected: &str) -> ConfigError {
    ConfigError::InvalidValue {
        variable: source.describe(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    }
}

fn parse_runtime(value: &str, source: Source) -> Result<Option<RuntimeKind>, ConfigError> {
    if value.trim().is_empty() {
        return Ok(None);
    }
    RuntimeKind::parse(value)
        .map(Some)
        .ok_or_else(|| invalid(source, value, &format!("one of: {}", RuntimeKind::names())))
}

fn parse_target(value: &str, source: Source) -> Result<Option<NpuVersion>, ConfigError> {
    if value.trim().is_empty() {
        return Ok(None);
    }
    NpuVersion::parse(value)
        .map(Some)
        .ok_or_else(|| invalid(source, value, "one of: npu1 (AIE2), npu2 (AIE2P)"))
}

fn parse_format(value: &str, source: Source) -> Result<Option<OutputFormat>, ConfigError> {
    let v = value.trim();
    if v.is_empty() || v.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    OutputFormat::parse(v)
        .map(Some)
        .ok_or_else(|| invalid(source, value, "one of: elf, xclbin, pdi, auto (any case)"))
}

fn parse_bool(value: &str, source: Source) -> Result<Option<bool>, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "1" | "true" | "yes" | "on" => Ok(Some(true)),
        "0" | "false" | "no" | "off" => Ok(Some(false)),
        _ => Err(invalid(
            source,
            value,
            "1 or 0 (also true/false, yes/no, on/off)",
        )),
    }
}

fn parse_path(value: &str) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

/// Seconds as a float; `None` for "off" (≤ 0) when `zero_is_off`.
fn parse_seconds(value: &str, source: Source) -> Result<Option<Duration>, ConfigError> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    let secs: f64 = v
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite())
        .ok_or_else(|| invalid(source, value, "a number of seconds, e.g. 30 or 2.5"))?;
    if secs <= 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(secs)
        .map(Some)
        .map_err(|_| invalid(source, value, "a number of seconds that fits in a duration"))
}

/// A byte count, optionally with a binary suffix: `K`, `M`, `G`, `T` (also `KiB`, `MB` …).
pub fn parse_byte_size(value: &str) -> Option<u64> {
    let v = value.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, suffix) = v.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

impl Config {
    /// The configuration of this process: programmatic values, then `std::env`.
    pub fn current() -> Result<Config, ConfigError> {
        Config::load(&|name| std::env::var(name).ok(), &overrides())
    }

    /// Resolves a configuration from an environment lookup and programmatic values.
    pub fn load(
        env: &dyn Fn(&str) -> Option<String>,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        // A programmatic value wins; otherwise the environment, where empty means unset.
        let raw = |setting: Setting| -> Option<(String, Source)> {
            if let Some(v) = overrides.get(setting) {
                return Some((v.to_owned(), Source::Programmatic(setting)));
            }
            env(setting.env_var()).map(|v| (v, Source::Env(setting.env_var())))
        };
        let env_only = |var: &'static str| env(var).filter(|v| !v.is_empty());
        let path_var = |var: &'static str| env_only(var).and_then(|v| parse_path(&v));

        let runtime = match raw(Setting::Runtime) {
            Some((v, src)) => parse_runtime(&v, src)?,
            None => None,
        }
        .unwrap_or(RuntimeKind::XRT);
        let target = match raw(Setting::Target) {
            Some((v, src)) => parse_target(&v, src)?,
            None => None,
        };
        let output_format = match raw(Setting::OutputFormat) {
            Some((v, src)) => parse_format(&v, src)?,
            None => None,
        };
        let flag = |setting: Setting| -> Result<bool, ConfigError> {
            Ok(match raw(setting) {
                Some((v, src)) => parse_bool(&v, src)?.unwrap_or(false),
                None => false,
            })
        };
        let path_setting = |setting: Setting| raw(setting).and_then(|(v, _)| parse_path(&v));

        let xrt_max_sessions = match env_only(vars::XRT_MAX_SESSIONS) {
            None => DEFAULT_XRT_MAX_SESSIONS,
            Some(v) => v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    invalid(
                        Source::Env(vars::XRT_MAX_SESSIONS),
                        &v,
                        "a whole number ≥ 1",
                    )
                })?,
        };
        let compile_timeout = match env_only(vars::COMPILE_TIMEOUT) {
            None => DEFAULT_COMPILE_TIMEOUT,
            Some(v) => parse_seconds(&v, Source::Env(vars::COMPILE_TIMEOUT))?.ok_or_else(|| {
                invalid(
                    Source::Env(vars::COMPILE_TIMEOUT),
                    &v,
                    "a positive number of seconds",
                )
            })?,
        };
        let hsa_verify_writeback = match env_only(vars::HSA_VERIFY_WRITEBACK) {
            None => false,
            Some(v) => parse_bool(&v, Source::Env(vars::HSA_VERIFY_WRITEBACK))?.unwrap_or(false),
        };
        let cache_max_bytes = match env_only(vars::CACHE_MAX_BYTES) {
            None => None,
            Some(v) => Some(parse_byte_size(&v).ok_or_else(|| {
                invalid(
                    Source::Env(vars::CACHE_MAX_BYTES),
                    &v,
                    "a byte count, optionally with K, M, G or T (e.g. 10G)",
                )
            })?),
        };

        let positive_seconds = |var: &'static str, default: Duration| match env_only(var) {
            None => Ok(default),
            Some(v) => parse_seconds(&v, Source::Env(var))?
                .ok_or_else(|| invalid(Source::Env(var), &v, "a positive number of seconds")),
        };
        let cache_wait_timeout =
            positive_seconds(vars::CACHE_WAIT_TIMEOUT, DEFAULT_CACHE_WAIT_TIMEOUT)?;
        let remote_cache_timeout =
            positive_seconds(vars::REMOTE_CACHE_TIMEOUT, DEFAULT_REMOTE_CACHE_TIMEOUT)?;
        let xrt_timeout = positive_seconds(vars::XRT_TIMEOUT, DEFAULT_XRT_TIMEOUT)?;
        let hsa_timeout = match env_only(vars::HSA_TIMEOUT) {
            None => Some(DEFAULT_HSA_TIMEOUT),
            Some(v) => parse_seconds(&v, Source::Env(vars::HSA_TIMEOUT))?,
        };
        let remote_cache = match env_only(vars::REMOTE_CACHE) {
            None => RemoteCacheMode::default(),
            Some(v) => RemoteCacheMode::parse(&v).ok_or_else(|| {
                invalid(
                    Source::Env(vars::REMOTE_CACHE),
                    &v,
                    "on (fetch and publish), read (fetch only) or off",
                )
            })?,
        };
        let remote_cache_max_bytes = match env_only(vars::REMOTE_CACHE_MAX_BYTES) {
            None => DEFAULT_REMOTE_CACHE_MAX_BYTES,
            Some(v) => parse_byte_size(&v).ok_or_else(|| {
                invalid(
                    Source::Env(vars::REMOTE_CACHE_MAX_BYTES),
                    &v,
                    "a byte count, optionally with K, M, G or T (e.g. 64M)",
                )
            })?,
        };

        let locations = Locations {
            rocr_path: path_var(vars::ROCR_PATH),
            rocm_path: path_var(vars::ROCM_PATH),
            rocm_home: path_var(vars::ROCM_HOME),
            mlir_air_install_dir: path_var(vars::MLIR_AIR_INSTALL_DIR),
            llvm_binary_dir: path_var(vars::LLVM_BINARY_DIR),
            peano_install_dir: path_var(vars::PEANO_INSTALL_DIR),
            triton_shared_opt_path: path_var(vars::TRITON_SHARED_OPT_PATH),
            aie_xclbinutil: path_var(vars::AIE_XCLBINUTIL),
            xrt_dev_dir: path_var(vars::XRT_DEV_DIR),
            xilinx_xrt: path_var(vars::XILINX_XRT),
            xrt_shim: path_var(vars::XRT_SHIM),
            cache_dir: path_var(vars::CACHE_DIR),
            triton_cache_dir: path_var(vars::TRITON_CACHE_DIR),
            triton_home: path_var(vars::TRITON_HOME),
            home: path_var(vars::HOME),
            path: env_only(vars::PATH)
                .map(|p| npu_process::lookup::search_dirs(p.as_ref()))
                .unwrap_or_default(),
        };

        Ok(Config {
            runtime,
            target,
            output_format,
            compile_only: flag(Setting::CompileOnly)?,
            bf16_emulation: flag(Setting::Bf16Emulation)?,
            transform_tiling_script: path_setting(Setting::TransformTilingScript),
            air_project_path: path_setting(Setting::AirProjectPath),
            debug: flag(Setting::Debug)?,
            xrt_dir: path_setting(Setting::XrtDir),
            xrt_max_sessions,
            xrt_timeout,
            hsa_timeout,
            hsa_verify_writeback,
            compile_timeout,
            cache_max_bytes,
            cache_wait_timeout,
            remote_cache,
            remote_cache_max_bytes,
            remote_cache_timeout,
            locations,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        load_with(pairs, &Overrides::default())
    }

    fn load_with(pairs: &[(&str, &str)], o: &Overrides) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::load(&|name| map.get(name).cloned(), o)
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        let c = load(&[]).unwrap();
        assert_eq!(c.runtime, RuntimeKind::XRT);
        assert_eq!(c.target, None);
        assert_eq!(c.output_format, None);
        assert!(!c.compile_only && !c.bf16_emulation && !c.debug && !c.hsa_verify_writeback);
        assert_eq!(c.transform_tiling_script, None);
        assert_eq!(c.air_project_path, None);
        assert_eq!(c.xrt_max_sessions, 8);
        assert_eq!(c.xrt_timeout, Duration::from_secs(60));
        assert_eq!(c.hsa_timeout, Some(Duration::from_secs(60)), "as XRT's");
        assert_eq!(c.compile_timeout, Duration::from_secs(3600));
        assert_eq!(c.cache_max_bytes, None);
    }

    #[test]
    fn runtime_parsing() {
        assert_eq!(
            load(&[("AMD_TRITON_NPU_RUNTIME", "hsa")]).unwrap().runtime,
            RuntimeKind::HSA
        );
        assert_eq!(
            load(&[("AMD_TRITON_NPU_RUNTIME", " XRT ")])
                .unwrap()
                .runtime,
            RuntimeKind::XRT
        );
        assert_eq!(
            load(&[("AMD_TRITON_NPU_RUNTIME", "")]).unwrap().runtime,
            RuntimeKind::XRT
        );
        let err = load(&[("AMD_TRITON_NPU_RUNTIME", "cuda")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("AMD_TRITON_NPU_RUNTIME") && err.contains("cuda"),
            "{err}"
        );
        assert!(err.contains("xrt, hsa"), "{err}");
    }

    #[test]
    fn target_parsing() {
        assert_eq!(
            load(&[("AMD_TRITON_NPU_TARGET", "npu1")]).unwrap().target,
            Some(NpuVersion::Npu1)
        );
        assert_eq!(
            load(&[("AMD_TRITON_NPU_TARGET", "NPU2")]).unwrap().target,
            Some(NpuVersion::Npu2)
        );
        let err = load(&[("AMD_TRITON_NPU_TARGET", "npu3")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("AMD_TRITON_NPU_TARGET") && err.contains("npu3"),
            "{err}"
        );
    }

    #[test]
    fn output_format_parsing() {
        for (raw, want) in [
            ("elf", Some(OutputFormat::Elf)),
            ("XCLBIN", Some(OutputFormat::Xclbin)),
            ("Pdi", Some(OutputFormat::Pdi)),
            ("", None),
            ("auto", None),
        ] {
            assert_eq!(
                load(&[("AMD_TRITON_NPU_OUTPUT_FORMAT", raw)])
                    .unwrap()
                    .output_format,
                want,
                "{raw}"
            );
        }
        let err = load(&[("AMD_TRITON_NPU_OUTPUT_FORMAT", "hsaco")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("AMD_TRITON_NPU_OUTPUT_FORMAT"), "{err}");
    }

    #[test]
    fn boolean_flags() {
        for (raw, want) in [
            ("1", true),
            ("true", true),
            ("ON", true),
            ("0", false),
            ("no", false),
        ] {
            let c = load(&[
                ("AMD_TRITON_NPU_COMPILE_ONLY", raw),
                ("AMD_TRITON_NPU_BF16_EMULATION", raw),
                ("AMD_TRITON_NPU_DEBUG", raw),
                ("AMD_TRITON_NPU_HSA_VERIFY_WRITEBACK", raw),
            ])
            .unwrap();
            assert_eq!(
                (
                    c.compile_only,
                    c.bf16_emulation,
                    c.debug,
                    c.hsa_verify_writeback
                ),
                (want, want, want, want),
                "{raw}"
            );
        }
        let err = load(&[("AMD_TRITON_NPU_DEBUG", "maybe")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("AMD_TRITON_NPU_DEBUG") && err.contains("maybe"),
            "{err}"
        );
    }

    #[test]
    fn paths() {
        let c = load(&[
            ("AIR_TRANSFORM_TILING_SCRIPT", "transform_aie2p.mlir"),
            ("AMD_TRITON_NPU_AIR_PROJECT_PATH", "/tmp/ap"),
            ("AMD_TRITON_NPU_XRT_DIR", "/opt/xrt"),
            // Empty, `.` and relative entries name the current directory: never searched.
            ("PATH", ":/a::.:bin:./x:/b:"),
            ("AMD_NPU_ROCR_PATH", ""),
        ])
        .unwrap();
        assert_eq!(
            c.transform_tiling_script,
            Some(PathBuf::from("transform_aie2p.mlir"))
        );
        assert_eq!(c.air_project_path, Some(PathBuf::from("/tmp/ap")));
        assert_eq!(c.xrt_dir, Some(PathBuf::from("/opt/xrt")));
        assert_eq!(
            c.locations.path,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert_eq!(c.locations.rocr_path, None, "empty means unset");
    }

    #[test]
    fn numeric_variables() {
        let c = load(&[
            ("AMD_TRITON_NPU_XRT_MAX_SESSIONS", "3"),
            ("AMD_TRITON_NPU_HSA_TIMEOUT", "2.5"),
            ("AMD_TRITON_NPU_COMPILE_TIMEOUT", "10"),
            ("AMD_TRITON_NPU_CACHE_MAX_BYTES", "10G"),
            ("AMD_TRITON_NPU_XRT_TIMEOUT", "0.25"),
        ])
        .unwrap();
        assert_eq!(c.xrt_max_sessions, 3);
        assert_eq!(c.xrt_timeout, Duration::from_millis(250));
        assert_eq!(c.hsa_timeout, Some(Duration::from_millis(2500)));
        assert_eq!(c.compile_timeout, Duration::from_secs(10));
        assert_eq!(c.cache_max_bytes, Some(10 << 30));
        // Upstream: a non-positive HSA timeout turns the watchdog off (only when asked for).
        assert_eq!(
            load(&[("AMD_TRITON_NPU_HSA_TIMEOUT", "0")])
                .unwrap()
                .hsa_timeout,
            None
        );
        for (var, bad) in [
            ("AMD_TRITON_NPU_XRT_MAX_SESSIONS", "0"),
            ("AMD_TRITON_NPU_XRT_MAX_SESSIONS", "many"),
            ("AMD_TRITON_NPU_HSA_TIMEOUT", "soon"),
            ("AMD_TRITON_NPU_HSA_TIMEOUT", "inf"),
            ("AMD_TRITON_NPU_COMPILE_TIMEOUT", "0"),
            // XRT runs always have a finite limit: 0 does not mean "forever".
            ("AMD_TRITON_NPU_XRT_TIMEOUT", "0"),
            ("AMD_TRITON_NPU_XRT_TIMEOUT", "inf"),
            ("AMD_TRITON_NPU_CACHE_MAX_BYTES", "10Q"),
        ] {
            let err = load(&[(var, bad)]).unwrap_err().to_string();
            assert!(err.contains(var) && err.contains(bad), "{var}={bad}: {err}");
        }
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_byte_size("0"), Some(0));
        assert_eq!(parse_byte_size("1024"), Some(1024));
        assert_eq!(parse_byte_size("4k"), Some(4096));
        assert_eq!(parse_byte_size("2 MiB"), Some(2 << 20));
        assert_eq!(parse_byte_size("1T"), Some(1 << 40));
        assert_eq!(parse_byte_size("G"), None);
        assert_eq!(parse_byte_size("99999999999999999999"), None);
        assert_eq!(parse_byte_size("18446744073709551615T"), None);
    }

    #[test]
    fn programmatic_values_beat_the_environment() {
        let mut o = Overrides::default();
        o.set(Setting::Runtime, Some("hsa")).unwrap();
        o.set(Setting::CompileOnly, Some("1")).unwrap();
        o.set(Setting::Target, Some("npu1")).unwrap();
        let c = load_with(
            &[
                ("AMD_TRITON_NPU_RUNTIME", "xrt"),
                ("AMD_TRITON_NPU_COMPILE_ONLY", "0"),
                ("AMD_TRITON_NPU_TARGET", "npu2"),
            ],
            &o,
        )
        .unwrap();
        assert_eq!(c.runtime, RuntimeKind::HSA);
        assert!(c.compile_only);
        assert_eq!(c.target, Some(NpuVersion::Npu1));
        // A programmatic value also shadows a broken environment value.
        assert!(load_with(&[("AMD_TRITON_NPU_RUNTIME", "bogus")], &o).is_ok());
        // Resetting falls back to the environment.
        o.set(Setting::Runtime, None).unwrap();
        let c = load_with(&[("AMD_TRITON_NPU_RUNTIME", "xrt")], &o).unwrap();
        assert_eq!(c.runtime, RuntimeKind::XRT);
    }

    #[test]
    fn programmatic_values_are_validated() {
        let mut o = Overrides::default();
        let err = o
            .set(Setting::Runtime, Some("cuda"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("npu_config.runtime") && err.contains("cuda"),
            "{err}"
        );
        assert!(o.set(Setting::OutputFormat, Some("exe")).is_err());
        assert!(o.set(Setting::Debug, Some("perhaps")).is_err());
        assert_eq!(o, Overrides::default(), "a refused value changes nothing");
    }

    #[test]
    fn setting_names_round_trip() {
        for s in Setting::ALL {
            assert_eq!(Setting::from_name(s.name()).unwrap(), s);
        }
        let err = Setting::from_name("runtim").unwrap_err().to_string();
        assert!(err.contains("runtim") && err.contains("runtime"), "{err}");
    }

    #[test]
    fn the_variable_table_names_each_variable_once_and_each_setting_once() {
        let mut names: Vec<&str> = VARIABLES.iter().map(|v| v.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), VARIABLES.len());
        for setting in Setting::ALL {
            let rows = VARIABLES
                .iter()
                .filter(|v| v.setting == Some(setting))
                .count();
            assert_eq!(rows, 1, "{setting:?}");
            assert!(!setting.env_var().is_empty());
        }
    }

    #[test]
    fn the_table_defaults_are_what_an_empty_environment_gives() {
        let c = load(&[]).unwrap();
        let default_of = |name: &str| VARIABLES.iter().find(|v| v.name == name).unwrap().default;
        assert_eq!(default_of(vars::RUNTIME), c.runtime.as_str());
        assert_eq!(
            default_of(vars::XRT_MAX_SESSIONS),
            c.xrt_max_sessions.to_string()
        );
        assert_eq!(
            default_of(vars::COMPILE_TIMEOUT),
            c.compile_timeout.as_secs().to_string()
        );
        let flag = |b: bool| if b { "1" } else { "0" };
        assert_eq!(default_of(vars::COMPILE_ONLY), flag(c.compile_only));
        assert_eq!(default_of(vars::BF16_EMULATION), flag(c.bf16_emulation));
        assert_eq!(default_of(vars::DEBUG), flag(c.debug));
        assert_eq!(
            default_of(vars::HSA_VERIFY_WRITEBACK),
            flag(c.hsa_verify_writeback)
        );
        assert!(c.target.is_none() && default_of(vars::TARGET).is_empty());
        assert!(c.output_format.is_none() && default_of(vars::OUTPUT_FORMAT).is_empty());
    }

    #[test]
    fn every_name_in_vars_has_a_row_in_the_table() {
        // `vars` is the one list of names; a name without a row would be read but never shown
        // by `triton-npu config`, Python or the README check below.
        let source = include_str!("config.rs");
        let block = &source[source.find("pub mod vars {").unwrap()..];
        let block = &block[..block.find("\n}").unwrap()];
        let names: Vec<&str> = block
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub const "))
            .filter_map(|l| l.split('"').nth(1))
            .collect();
        assert!(names.len() > 20);
        for name in names {
            assert!(
                VARIABLES.iter().any(|v| v.name == name),
                "{name} is in vars but not in VARIABLES"
            );
        }
    }

    #[test]
    fn the_readme_documents_every_variable() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
                .unwrap();
        for v in VARIABLES {
            assert!(
                readme.contains(&format!("`{}`", v.name)),
                "README.md does not document {}",
                v.name
            );
        }
    }
}
