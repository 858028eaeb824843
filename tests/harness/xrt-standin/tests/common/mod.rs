//! Shared test helpers: the stand-in cargo built, a configuration that selects it the way a
//! real installation selects a shim (`AMD_TRITON_NPU_XRT_SHIM` through `Config::load`), harness
//! artifacts written with the stand-in toolchain's own writers, and the stand-in's counters.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use npu_harness_program::{Program, samples};
use npu_harness_tools::artifacts;
use npu_harness_tools::attrs::Meaning;
use npu_runtime::xrt::XrtRuntime;
use npu_runtime::{Artifact, HostArg};
use npu_target::{Config, Overrides};

/// The cdylib cargo built for this test run. As a dependency of the integration tests it is
/// built into `target/<profile>/deps/`, next to the test binary (only a `cargo build` of the
/// crate itself copies it up to `target/<profile>/`, where it may be stale).
pub fn standin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("tests run from target/<profile>/deps");
    let lib = deps.join("libnpu_harness_xrt.so");
    assert!(
        lib.is_file(),
        "the stand-in was not built at {}",
        lib.display()
    );
    lib
}

/// The stand-in loaded as a shim, for tests that drive `xrt_sys` handles directly.
pub fn standin_shim() -> std::sync::Arc<xrt_sys::Shim> {
    xrt_sys::load(&xrt_sys::Search {
        shim: Some(standin()),
        ..Default::default()
    })
    .expect("the stand-in loads as a shim")
}

/// A configuration from these variables plus `AMD_TRITON_NPU_XRT_SHIM` = the stand-in.
pub fn config(vars: &[(&str, &str)]) -> Config {
    let mut map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.entry("AMD_TRITON_NPU_XRT_SHIM".into())
        .or_insert_with(|| standin().display().to_string());
    Config::load(&|k| map.get(k).cloned(), &Overrides::default()).expect("a valid configuration")
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Tests in one binary share the stand-in's state and the process environment: one at a time.
/// The stand-in's own variables are reset on entry.
pub fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    for var in [
        "NPU_HARNESS_FAULT",
        "NPU_HARNESS_MAX_HWCTX",
        "NPU_HARNESS_XRT_DEVICE",
    ] {
        // SAFETY: every test of this binary holds SERIAL, and nothing else runs meanwhile.
        unsafe { std::env::remove_var(var) };
    }
    guard
}

/// Sets a variable the stand-in reads; only under [`serial`].
pub fn set_env(var: &str, value: &str) {
    // SAFETY: callers hold SERIAL (see `serial`).
    unsafe { std::env::set_var(var, value) };
}

/// The stand-in's counters (the layout of its `Stats`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub devices_opened: u64,
    pub xclbins_registered: u64,
    pub contexts_created: u64,
    pub contexts_alive: u64,
    pub kernels_opened: u64,
    pub bos_allocated: u64,
    pub bos_alive: u64,
    pub runs_started: u64,
    pub runs_completed: u64,
    pub runs_aborted: u64,
    pub syncs_to_device: u64,
    pub syncs_from_device: u64,
    pub runs_created: u64,
    pub runs_cancelled: u64,
}

pub fn stats() -> Stats {
    // SAFETY: the stand-in exports this function with this signature; loading the same path
    // as the runtime gives the same (already loaded) library.
    unsafe {
        let lib = libloading::Library::new(standin()).expect("the stand-in loads");
        let f: libloading::Symbol<unsafe extern "C" fn(*mut Stats) -> i32> = lib
            .get(b"npu_harness_xrt_stats\0")
            .expect("npu_harness_xrt_stats");
        let mut s = Stats::default();
        assert_eq!(f(&mut s), 0);
        s
    }
}

/// Writes an npu1 xclbin and insts.bin for `program` (text form) into `dir`, as the stand-in
/// aircc does.
pub fn npu1_artifact(dir: &Path, program: &str) -> Artifact {
    let p = Program::parse_text(program).expect("a valid harness program");
    npu1_artifact_for(dir, &Meaning::Program(p))
}

pub fn npu1_artifact_for(dir: &Path, meaning: &Meaning) -> Artifact {
    std::fs::create_dir_all(dir).unwrap();
    let code = artifacts::kernel_code(meaning);
    let xclbin = dir.join("aie.xclbin");
    let insts = dir.join("insts.bin");
    let pdi = artifacts::pdi(&code);
    std::fs::write(
        &xclbin,
        artifacts::xclbin(&pdi, meaning.num_args(), artifacts::fingerprint(&code)),
    )
    .unwrap();
    std::fs::write(&insts, &code).unwrap();
    Artifact::XclbinInsts { xclbin, insts }
}

/// Writes an npu2 full ELF for `program` into `dir`.
pub fn npu2_artifact(dir: &Path, program: &str) -> Artifact {
    let p = Program::parse_text(program).expect("a valid harness program");
    npu2_artifact_for(dir, &Meaning::Program(p))
}

pub fn npu2_artifact_for(dir: &Path, meaning: &Meaning) -> Artifact {
    std::fs::create_dir_all(dir).unwrap();
    let code = artifacts::kernel_code(meaning);
    let elf = dir.join("aie.elf");
    std::fs::write(
        &elf,
        artifacts::full_elf(&code, meaning.num_args(), &artifacts::pdi(&code)),
    )
    .unwrap();
    Artifact::Elf {
        elf,
        kernel_name: format!("main:{}", artifacts::INSTANCE),
    }
}

/// `out = a + b` over `n` f32s (one program instance, one block of `n`).
pub fn add(n: usize) -> String {
    samples::add_f32(n)
}

/// `out = a * b`.
pub fn mul(n: usize) -> String {
    samples::binary_f32("mulf", n)
}

/// `out = a - b`.
pub fn sub(n: usize) -> String {
    samples::binary_f32("subf", n)
}

/// Host memory for one f32 argument.
pub struct F32s(pub Vec<f32>);

impl F32s {
    pub fn arg(&mut self) -> HostArg {
        // SAFETY: the vector outlives the dispatch it is passed to and is not touched meanwhile.
        unsafe { HostArg::from_raw(self.0.as_mut_ptr().cast(), self.0.len() * 4) }.unwrap()
    }
}

pub fn f32s(v: &[f32]) -> F32s {
    F32s(v.to_vec())
}

pub fn open(vars: &[(&str, &str)]) -> XrtRuntime {
    XrtRuntime::open(&config(vars), &[]).expect("the stand-in runtime opens")
}
