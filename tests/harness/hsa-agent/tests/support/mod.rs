//! Test support: the agent library laid out as a ROCr prefix, configurations pointing at it,
//! the agent's counters, and small builders for hsaco files carrying harness programs.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npu_harness_program::Program;
use npu_runtime::hsa::HsaRuntime;
use npu_target::{Config, Overrides};

pub mod elf32;

/// The agent library cargo built with this test: `target/<profile>/deps/` (where a test
/// build leaves it) or `target/<profile>/` (after `cargo build`), whichever is newer.
pub fn agent_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe
        .parent()
        .expect("test binaries live in target/<profile>/deps");
    let name = "libnpu_harness_hsa_agent.so";
    let candidates = [deps.join(name), deps.parent().unwrap_or(deps).join(name)];
    candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p.clone())))
        .max()
        .map(|(_, p)| p)
        .unwrap_or_else(|| {
            panic!(
                "{name} is in neither {} nor its parent; build it with `cargo build -p \
                 npu-harness-hsa-agent`",
                deps.display()
            )
        })
}

/// Puts the AIE extension header (`include/hsa/hsa_ext_amd_aie.h`) in `prefix`, as an
/// AIE-capable ROCr ships it; discovery refuses a prefix without it as GPU-only.
pub fn aie_header(prefix: &Path) {
    let dir = prefix.join("include/hsa");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("include/hsa/hsa_ext_amd_aie.h"),
        dir.join("hsa_ext_amd_aie.h"),
    )
    .unwrap();
}

/// A ROCr-shaped prefix holding a private copy of the agent: each copy is a separate library
/// instance in this process, with its own agent state (its own queue, pools and counters).
pub struct Prefix {
    pub dir: tempfile::TempDir,
}

impl Prefix {
    pub fn new() -> Prefix {
        Prefix::with_lib_dir("lib")
    }

    /// The library in `lib_dir` (`lib`, `lib64`, `lib/x86_64-linux-gnu`) as `.so`.
    pub fn with_lib_dir(lib_dir: &str) -> Prefix {
        Prefix::with_file(lib_dir, "libhsa-runtime64.so")
    }

    pub fn with_file(lib_dir: &str, name: &str) -> Prefix {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let lib = dir.path().join(lib_dir);
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::copy(agent_library(), lib.join(name)).unwrap();
        aie_header(dir.path());
        Prefix { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn library(&self) -> PathBuf {
        for d in ["lib", "lib64", "lib/x86_64-linux-gnu"] {
            for n in ["libhsa-runtime64.so", "libhsa-runtime64.so.1"] {
                let p = self.path().join(d).join(n);
                if p.exists() {
                    return p;
                }
            }
        }
        panic!("no library in {}", self.path().display())
    }

    /// A configuration whose only ROCr location is this prefix.
    pub fn config(&self) -> Config {
        config_with(&[("AMD_NPU_ROCR_PATH", &self.path().display().to_string())])
    }

    pub fn runtime(&self) -> HsaRuntime {
        HsaRuntime::open(&self.config(), &[]).expect("the software agent opens")
    }

    pub fn stats(&self) -> Stats {
        stats_of(&self.library())
    }

    pub fn last_error(&self) -> String {
        last_error_of(&self.library())
    }
}

/// A configuration from explicit variables only (the process environment is not read).
pub fn config_with(vars: &[(&str, &str)]) -> Config {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::load(&|k| map.get(k).cloned(), &Overrides::default()).expect("a valid configuration")
}

/// The agent's counters (`npu_harness_hsa_stats`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub init_refcount: u64,
    pub live_allocations: u64,
    pub live_bytes: u64,
    pub dev_heap_bytes: u64,
    pub live_signals: u64,
    pub live_queues: u64,
    pub live_executables: u64,
    pub packets_completed: u64,
    pub packets_failed: u64,
    pub breaches: u64,
    pub leaked_at_shutdown: u64,
    pub initialisations: u64,
}

fn open_same(path: &Path) -> libloading::Library {
    // Opening the same path again yields the instance the runtime loaded.
    unsafe { libloading::Library::new(path) }.expect("the agent library loads")
}

pub fn stats_of(path: &Path) -> Stats {
    let lib = open_same(path);
    let f: libloading::Symbol<unsafe extern "C" fn(*mut Stats) -> i32> =
        unsafe { lib.get(b"npu_harness_hsa_stats\0") }.unwrap();
    let mut s = Stats::default();
    assert_eq!(unsafe { f(&mut s) }, 0);
    s
}

pub fn last_error_of(path: &Path) -> String {
    let lib = open_same(path);
    let f: libloading::Symbol<unsafe extern "C" fn(*mut std::ffi::c_char, usize) -> usize> =
        unsafe { lib.get(b"npu_harness_hsa_last_error\0") }.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = unsafe { f(buf.as_mut_ptr().cast(), buf.len()) };
    String::from_utf8_lossy(&buf[..n.min(buf.len() - 1)]).into_owned()
}

/// The binary form of a harness program written in its text form.
pub fn program(text: &str) -> Vec<u8> {
    Program::parse_text(text)
        .expect("a valid harness program")
        .encode()
}

// Each test binary uses some of them.
#[allow(unused_imports)]
pub use npu_harness_program::samples::{add_and_clobber, add_f32, increment, scale_sub};

/// A PDI-looking blob (the sync pattern real PDIs start with).
pub const PDI: &[u8] = &[
    0xdd, 0, 0, 0, 0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55, 0xcc, 0xbb, 0xaa, 0x99, 1, 2, 3,
    4,
];

/// An hsaco with PdiInsts kernels `(name, program text, columns)`; kernarg = 16 × args.
pub fn pdi_insts_hsaco(arch: &str, kernels: &[(&str, &str, u32)]) -> Vec<u8> {
    let blobs: Vec<(String, Vec<u8>, u32, u32)> = kernels
        .iter()
        .map(|(name, text, cols)| {
            let p = Program::parse_text(text).unwrap();
            (
                name.to_string(),
                p.encode(),
                16 * u32::from(p.num_args),
                *cols,
            )
        })
        .collect();
    let ks: Vec<npu_hsaco::Kernel<'_>> = blobs
        .iter()
        .map(|(n, insts, kernarg, cols)| {
            npu_hsaco::Kernel::pdi_insts(n.as_str(), insts.as_slice(), PDI, *kernarg, *cols)
        })
        .collect();
    let arch = npu_hsaco::Arch::from_name(arch).expect("aie2 or aie2p");
    npu_hsaco::pack::pack(None, arch, &ks).expect("the kernels pack")
}

/// An aie2p hsaco holding every instance of `elf` (a full ELF), 8 columns.
pub fn full_elf_hsaco(elf: &[u8], num_cols: u32) -> Vec<u8> {
    let kernels = npu_hsaco::kernels_from_full_elf(elf, None).expect("a readable full ELF");
    let ks: Vec<npu_hsaco::Kernel<'_>> = kernels
        .iter()
        .map(|k| {
            k.to_kernel(None, Some(num_cols))
                .expect("a packable kernel")
        })
        .collect();
    npu_hsaco::pack::pack(None, npu_hsaco::Arch::Aie2p, &ks).expect("the kernels pack")
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn f32_values(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A host buffer as a dispatch argument.
pub fn arg(buf: &mut [u8]) -> npu_runtime::HostArg {
    // SAFETY: the buffer outlives the dispatch in every test.
    unsafe { npu_runtime::HostArg::from_raw(buf.as_mut_ptr(), buf.len()) }.expect("non-null")
}

/// Runs the ignored test `name` of this binary in a child process with `env` set, and
/// returns its output. Tests that need their own process (agent faults and names, the
/// process-wide runtime) run this way under both `cargo test` and nextest.
pub fn run_child(name: &str, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().unwrap();
    let mut command = Command::new(exe);
    command.args([
        name,
        "--exact",
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    // The child sees only the settings its parent chose.
    for var in [
        "AMD_NPU_ROCR_PATH",
        "ROCM_PATH",
        "AMD_TRITON_NPU_HSA_TIMEOUT",
        "AMD_TRITON_NPU_HSA_VERIFY_WRITEBACK",
        "NPU_HARNESS_AGENT",
        "NPU_HARNESS_COLUMNS",
        "NPU_HARNESS_FAULT",
        "NPU_HARNESS_DOORBELL",
        "NPU_HARNESS_HANG_MS",
    ] {
        command.env_remove(var);
    }
    let out = command
        .env("NPU_HSA_TEST_CHILD", name)
        .envs(env.iter().copied())
        .output()
        .expect("the test binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "child test {name} failed:\n{text}"
    );
    out
}

/// Refuses to run a child test outside `run_child` (its environment would be missing).
pub fn require_child(name: &str) {
    assert_eq!(
        std::env::var("NPU_HSA_TEST_CHILD").ok().as_deref(),
        Some(name),
        "this test runs in a child process started by its parent test; run the parent instead"
    );
}

/// Sets field `field` (u32 index within the 44-byte entry) of kernel entry `entry` of the
/// first AIEK section in `hsaco`, to build code objects ROCr refuses.
pub fn patch_entry(hsaco: &mut [u8], entry: usize, field: usize, value: u32) {
    let start = hsaco
        .windows(4)
        .position(|w| w == b"AIEK")
        .expect("an AIEK section");
    let header_size = u32::from_le_bytes(hsaco[start + 8..start + 12].try_into().unwrap()) as usize;
    let entry_size = u32::from_le_bytes(hsaco[start + 16..start + 20].try_into().unwrap()) as usize;
    let at = start + header_size + entry * entry_size + 4 * field;
    hsaco[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// `out = a + scratch` over `n` f32: arguments a (0) and out (1); the scratchpad, an external
/// variable, is the third pointer the harness program reads.
fn add_scratchpad(n: usize) -> String {
    let pointers = |arg: u8, first: usize| {
        format!(
            "%{p} = ptr arg{arg} f32\n%{s} = splat %{p} [{n}]\n%{a} = addptr %{s} %0\n",
            p = first,
            s = first + 1,
            a = first + 2
        )
    };
    format!(
        "args 3\n%0 = range 0 {n}\n{}%4 = load %3\n{}%8 = load %7\n%9 = addf %4 %8\n{}store %12 %9\n",
        pointers(0, 1),
        pointers(2, 5),
        pointers(1, 10)
    )
}

/// An aie2p hsaco whose full-ELF `main:sequence` computes `out = a + scratch-pad-ctrl` over `n`
/// f32 (arguments a, out; the variable is `4 n` bytes).
pub fn scratchpad_hsaco(n: usize) -> Vec<u8> {
    let elf = elf32::full_elf(&[elf32::Instance {
        name: "sequence",
        control: program(&add_scratchpad(n)),
        args: 2,
        variables: &[("scratch-pad-ctrl", 4 * n as u32)],
    }]);
    full_elf_hsaco(&elf, 8)
}
