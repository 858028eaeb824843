//! `triton-npu config` through the real binary.

use std::process::{Command, Output};

fn config(envs: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_triton-npu"));
    cmd.arg("config").args(args);
    for v in npu_target::config::VARIABLES {
        cmd.env_remove(v.name);
    }
    cmd.envs(envs.iter().copied())
        .output()
        .expect("run triton-npu")
}

#[test]
fn lists_every_variable_with_its_value_and_default() {
    let o = config(&[("AMD_TRITON_NPU_RUNTIME", "hsa")], &["--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = doc["variables"].as_array().unwrap();
    assert_eq!(rows.len(), npu_target::config::VARIABLES.len());
    let row = |name: &str| rows.iter().find(|r| r["name"] == name).unwrap().clone();
    assert_eq!(row("AMD_TRITON_NPU_RUNTIME")["value"], "hsa");
    assert_eq!(row("AMD_TRITON_NPU_RUNTIME")["property"], "runtime");
    assert_eq!(row("AMD_TRITON_NPU_XRT_MAX_SESSIONS")["default"], "8");
    assert!(row("AMD_TRITON_NPU_XRT_MAX_SESSIONS")["value"].is_null());
    assert!(doc["error"].is_null());
}

#[test]
fn an_invalid_value_is_named_and_fails() {
    let o = config(&[("AMD_TRITON_NPU_TARGET", "npu9")], &[]);
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("AMD_TRITON_NPU_TARGET") && stderr.contains("npu9"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("AMD_TRITON_NPU_TARGET ") && l.ends_with("= npu9")),
        "{stdout}"
    );
}
