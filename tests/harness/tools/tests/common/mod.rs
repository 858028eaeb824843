//! Shared plumbing of the stand-in toolchain tests: a private installation prefix per test.
#![allow(dead_code)]

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use npu_target::{Config, Overrides};

pub mod lowering;
pub mod values;

pub const AIR_OPT: &str = env!("CARGO_BIN_EXE_npu-harness-air-opt");
pub const AIRCC: &str = env!("CARGO_BIN_EXE_npu-harness-aircc");
pub const LLC: &str = env!("CARGO_BIN_EXE_npu-harness-llc");
pub const TRITON_SHARED_OPT: &str = env!("CARGO_BIN_EXE_npu-harness-triton-shared-opt");

pub fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A toolchain prefix laid out as `install.sh` lays it out. Each tool is a two-line shell
/// wrapper that sets this prefix's harness variables and execs the stand-in, so tests running
/// in parallel threads each get their own log and fault injection without touching the test
/// process's environment.
pub struct Prefix {
    pub dir: tempfile::TempDir,
    pub env: Vec<(String, String)>,
}

impl Prefix {
    pub fn new() -> Prefix {
        Prefix::with_env(&[])
    }

    /// `env`: extra variables for the tools, e.g. `("NPU_HARNESS_FAIL", "aircc")`.
    pub fn with_env(env: &[(&str, &str)]) -> Prefix {
        let dir = tempfile::tempdir().unwrap();
        let mut all: Vec<(String, String)> = vec![(
            "NPU_HARNESS_LOG".into(),
            dir.path().join("log.jsonl").display().to_string(),
        )];
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let p = Prefix { dir, env: all };
        p.install("mlir-air/bin/air-opt", AIR_OPT);
        p.install("mlir-air/bin/aircc", AIRCC);
        p.install("peano/bin/llc", LLC);
        p.install("bin/triton-shared-opt", TRITON_SHARED_OPT);
        p
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Installs `binary` at `rel` behind a wrapper that sets the harness variables.
    pub fn install(&self, rel: &str, binary: &str) {
        let mut body = String::from("#!/bin/sh\n");
        for (k, v) in &self.env {
            body.push_str(&format!("{k}='{v}'; export {k}\n"));
        }
        body.push_str(&format!("exec '{binary}' \"$@\"\n"));
        self.script(rel, &body);
    }

    /// Writes an executable script at `rel`.
    pub fn script(&self, rel: &str, body: &str) {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The configuration a user with this prefix installed would have.
    pub fn config(&self, extra: &[(&str, &str)]) -> Config {
        let mut map: HashMap<String, String> = HashMap::new();
        map.insert(
            "MLIR_AIR_INSTALL_DIR".into(),
            self.path().join("mlir-air").display().to_string(),
        );
        map.insert(
            "PEANO_INSTALL_DIR".into(),
            self.path().join("peano").display().to_string(),
        );
        map.insert(
            "TRITON_SHARED_OPT_PATH".into(),
            self.path()
                .join("bin/triton-shared-opt")
                .display()
                .to_string(),
        );
        // A private kernel cache of its own, where failed compiles keep their logs.
        map.insert(
            "AMD_TRITON_NPU_CACHE_DIR".into(),
            self.path().join("npu-cache").display().to_string(),
        );
        for (k, v) in extra {
            map.insert(k.to_string(), v.to_string());
        }
        Config::load(&|n| map.get(n).cloned(), &Overrides::default()).unwrap()
    }

    /// The JSON lines the tools logged, in order.
    pub fn log(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.path().join("log.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The argv (without argv[0]) of every logged run of `tool` that was not a `--version`
    /// probe.
    pub fn runs(&self, tool: &str) -> Vec<(Vec<String>, PathBuf)> {
        self.log()
            .into_iter()
            .filter(|l| l["tool"] == tool && l.get("argv").is_some())
            .map(|l| {
                let argv: Vec<String> = l["argv"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_owned())
                    .collect();
                (
                    argv[1..].to_vec(),
                    PathBuf::from(l["cwd"].as_str().unwrap()),
                )
            })
            .filter(|(args, _)| args != &["--version"])
            .collect()
    }
}

/// Runs the stand-in triton-shared-opt on a TTIR fixture: the Linalg a real frontend run would
/// hand to the driver.
pub fn linalg_of(ttir_fixture: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ttir");
    std::fs::write(&input, fixture(ttir_fixture)).unwrap();
    let out = Command::new(TRITON_SHARED_OPT)
        .arg("--triton-to-linalg-experimental")
        .arg(&input)
        .env_remove("NPU_HARNESS_LOG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Dead, or a zombie nobody has reaped yet (in containers pid 1 may not reap).
pub fn is_gone(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// `.ctrltext.0` of a full ELF (read with the section headers, independently of npu-hsaco).
pub fn ctrl_text(elf: &[u8]) -> Vec<u8> {
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) as usize;
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let (shoff, shnum, shstrndx) = (u32_at(32), u16_at(48), u16_at(50));
    let sh = |i: usize| shoff + 40 * i;
    let strtab = u32_at(sh(shstrndx) + 16);
    for i in 0..shnum {
        let name_at = strtab + u32_at(sh(i));
        let end = elf[name_at..].iter().position(|b| *b == 0).unwrap();
        if &elf[name_at..name_at + end] == b".ctrltext.0" {
            let (off, size) = (u32_at(sh(i) + 16), u32_at(sh(i) + 20));
            return elf[off..off + size].to_vec();
        }
    }
    panic!("no .ctrltext.0")
}
