//! ROCr discovery through real directories: upstream's order, every refusal with its reason,
//! pip's rocm-sdk-core layout and version, GPU-only ROCrs (no AIE extension), and Debian's real
//! (non-AIE) libhsa-runtime64.

mod support;

use std::path::{Path, PathBuf};

use npu_runtime::RuntimeError;
use npu_runtime::hsa::{HsaRuntime, doctor_report};
use support::*;

/// A copy of glibc's libm: a real shared library without any HSA function.
fn unrelated_library(dest: &Path) {
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib64/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .into_iter()
    .map(Path::new)
    .find(|p| p.exists())
    .expect("libm.so.6 in a standard library directory");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(libm, dest).unwrap();
}

#[test]
fn every_refused_place_is_listed_in_order_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let not_elf = dir.path().join("not-elf");
    std::fs::create_dir_all(not_elf.join("lib")).unwrap();
    std::fs::write(
        not_elf.join("lib/libhsa-runtime64.so"),
        b"#!/bin/sh\necho not a library\n",
    )
    .unwrap();
    let site = dir.path().join("site-packages");
    unrelated_library(&site.join("_rocm_sdk_core/lib/libhsa-runtime64.so.1"));
    let config = config_with(&[
        ("AMD_NPU_ROCR_PATH", &empty.display().to_string()),
        ("ROCM_PATH", &not_elf.display().to_string()),
    ]);
    let result = HsaRuntime::open(&config, std::slice::from_ref(&site));
    if Path::new("/opt/rocm").exists() {
        // A machine with a real ROCm: the places before it are still refused (checked below).
        let _ = result;
    } else {
        let err = result.unwrap_err();
        assert!(matches!(err, RuntimeError::NotFound(_)), "{err}");
        assert!(
            err.to_string().contains("/opt/rocm): does not exist"),
            "{err}"
        );
    }
    let report = doctor_report(&config, std::slice::from_ref(&site));
    let lines: Vec<String> = report.refused.iter().map(|r| r.to_string()).collect();
    assert!(lines.len() >= 4, "{lines:#?}");
    assert_eq!(
        lines[0],
        format!(
            "AMD_NPU_ROCR_PATH ({}): no libhsa-runtime64.so or libhsa-runtime64.so.1 in lib, lib64 or lib/x86_64-linux-gnu",
            empty.display()
        )
    );
    assert!(
        lines[1].starts_with(&format!(
            "ROCM_PATH ({}/lib/libhsa-runtime64.so): the dynamic loader refused it:",
            not_elf.display()
        )),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].contains("invalid ELF header") || lines[1].contains("too short"),
        "{}",
        lines[1]
    );
    assert_eq!(lines[2], "ROCM_HOME: not set");
    assert!(lines[3].starts_with("pip rocm-sdk-core ("), "{}", lines[3]);
    assert!(
        lines[3].contains("not a ROCr this driver can use: it lacks 30 of the HSA functions"),
        "{}",
        lines[3]
    );
    assert!(lines[3].contains("hsa_init"), "{}", lines[3]);
    if report.library.is_none() {
        let hint = report.agent.unwrap_err();
        assert!(
            hint.contains("rocm-sdk-core") && hint.contains("AMD_NPU_ROCR_PATH"),
            "{hint}"
        );
    }
}

#[test]
fn the_first_usable_place_wins() {
    // Both hold a usable library: AMD_NPU_ROCR_PATH comes first.
    let first = Prefix::new();
    let second = Prefix::new();
    let config = config_with(&[
        ("AMD_NPU_ROCR_PATH", &first.path().display().to_string()),
        ("ROCM_PATH", &second.path().display().to_string()),
    ]);
    let rt = HsaRuntime::open(&config, &[]).unwrap();
    assert_eq!(rt.library_source(), "AMD_NPU_ROCR_PATH");
    assert_eq!(rt.library_path(), first.library());
    assert_eq!(
        second.stats().init_refcount,
        0,
        "the second place is never initialised"
    );
}

#[test]
fn every_library_directory_and_name_is_looked_in() {
    for (dir, name) in [
        ("lib", "libhsa-runtime64.so.1"),
        ("lib64", "libhsa-runtime64.so"),
        ("lib/x86_64-linux-gnu", "libhsa-runtime64.so.1"),
    ] {
        let prefix = Prefix::with_file(dir, name);
        let rt = prefix.runtime();
        assert_eq!(rt.library_path(), prefix.path().join(dir).join(name));
    }
}

#[test]
fn pip_rocm_sdk_core_is_found_in_site_packages() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("other-site");
    let site = dir.path().join("site-packages");
    let lib = site.join("_rocm_sdk_core/lib");
    std::fs::create_dir_all(&lib).unwrap();
    // The wheels ship only the versioned name.
    std::fs::copy(agent_library(), lib.join("libhsa-runtime64.so.1")).unwrap();
    aie_header(&site.join("_rocm_sdk_core"));
    let rt = HsaRuntime::open(&config_with(&[]), &[missing, site]).unwrap();
    assert_eq!(rt.library_source(), "pip rocm-sdk-core");
    assert_eq!(rt.library_path(), lib.join("libhsa-runtime64.so.1"));
}

#[test]
fn an_explicit_library_path_is_used_as_is() {
    let prefix = Prefix::new();
    let rt = HsaRuntime::open_library(&prefix.library(), &config_with(&[])).unwrap();
    assert_eq!(rt.agent_name(), "aie2p");
    let err =
        HsaRuntime::open_library(Path::new("/no/such/libhsa-runtime64.so"), &config_with(&[]))
            .unwrap_err();
    assert!(
        err.to_string().contains("/no/such/libhsa-runtime64.so"),
        "{err}"
    );
}

/// Debian's `libhsa-runtime64-1` (a real ROCr without AIE support), fetched from Debian by
/// `third_party/fetch-debian-headers.sh` into the git-ignored `third_party/debian/`.
fn debian_rocr() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let prefix = root.join("third_party/debian/libhsa-runtime64-1/usr");
    if !prefix
        .join("lib/x86_64-linux-gnu/libhsa-runtime64.so.1")
        .exists()
    {
        // One fetch at a time across test processes.
        let lock =
            std::fs::File::create(std::env::temp_dir().join("npu-hsa-debian-fetch.lock")).unwrap();
        lock.lock().unwrap();
        if !prefix
            .join("lib/x86_64-linux-gnu/libhsa-runtime64.so.1")
            .exists()
        {
            let status = std::process::Command::new("bash")
                .arg(root.join("third_party/fetch-debian-headers.sh"))
                .arg("libhsa-runtime64-1")
                .status()
                .expect("bash runs");
            assert!(
                status.success(),
                "fetching Debian's libhsa-runtime64-1 failed; run third_party/fetch-debian-headers.sh \
                 libhsa-runtime64-1 (needs access to Debian's package archive)"
            );
        }
    }
    prefix
}

#[test]
fn debians_rocr_is_refused_or_reports_no_npu_in_words() {
    let prefix = debian_rocr();
    let config = config_with(&[("ROCM_PATH", &prefix.display().to_string())]);
    let err = HsaRuntime::open(&config, &[]).unwrap_err();
    let text = err.to_string();
    match err {
        // On a newer machine it loads, and it has no AIE extension.
        RuntimeError::NotFound(_) if text.contains("no AIE extension") => {
            assert!(text.contains("GPU-only ROCr"), "{text}");
        }
        // Debian unstable's build needs a newer glibc/libstdc++ than this machine has: the
        // loader's own words say so.
        RuntimeError::NotFound(_) => {
            assert!(text.contains("ROCM_PATH ("), "{text}");
            assert!(text.contains("the dynamic loader refused it:"), "{text}");
            assert!(
                text.contains("not found"),
                "the loader names what is missing: {text}"
            );
        }

        other => panic!("unexpected error: {other}"),
    }
}

#[test]
fn install_sh_lays_out_a_prefix_that_discovery_finds() {
    let bin_dir = agent_library().parent().unwrap().to_owned();
    let prefix = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
        .arg(prefix.path())
        .arg(&bin_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rocr = prefix.path().join("rocr");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("export AMD_NPU_ROCR_PATH=\"{}\"", rocr.display())
    );
    let rt = HsaRuntime::open(
        &config_with(&[("AMD_NPU_ROCR_PATH", &rocr.display().to_string())]),
        &[],
    )
    .unwrap();
    assert_eq!(rt.library_path(), rocr.join("lib/libhsa-runtime64.so"));

    let missing = std::process::Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
        .arg(prefix.path())
        .arg(prefix.path().join("no-build-here"))
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr)
            .contains("cargo build --release -p npu-harness-hsa-agent")
    );
}

#[test]
fn a_gpu_only_rocr_is_skipped_with_the_reason_and_rocm_home_is_searched() {
    // The agent's library without the AIE extension header: a ROCr built for GPUs only, as
    // torch-ROCm bundles it.
    let gpu_only = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(gpu_only.path().join("lib")).unwrap();
    std::fs::copy(
        agent_library(),
        gpu_only.path().join("lib/libhsa-runtime64.so"),
    )
    .unwrap();
    let aie = Prefix::new();
    let config = config_with(&[
        ("AMD_NPU_ROCR_PATH", &gpu_only.path().display().to_string()),
        ("ROCM_HOME", &aie.path().display().to_string()),
    ]);
    let rt = HsaRuntime::open(&config, &[]).unwrap();
    assert_eq!(rt.library_source(), "ROCM_HOME");
    assert_eq!(rt.library_path(), aie.library());
    drop(rt);

    let report = doctor_report(&config, &[]);
    assert_eq!(report.source.as_deref(), Some("ROCM_HOME"));
    let text = report.to_string();
    let expected = format!(
        "not used: AMD_NPU_ROCR_PATH ({}/lib/libhsa-runtime64.so): no AIE extension ({}/include/hsa/hsa_ext_amd_aie.h is missing): this is a GPU-only ROCr, such as a stock ROCm release or the one torch-ROCm bundles",
        gpu_only.path().display(),
        gpu_only.path().display()
    );
    assert!(text.contains(&expected), "{text}");
    assert!(text.contains("not used: ROCM_PATH: not set"), "{text}");

    // Alone, it is not used at all.
    let config = config_with(&[("AMD_NPU_ROCR_PATH", &gpu_only.path().display().to_string())]);
    let err = HsaRuntime::open(&config, &[]).unwrap_err();
    assert!(matches!(err, RuntimeError::NotFound(_)), "{err}");
    assert!(err.to_string().contains("no AIE extension"), "{err}");
}

#[test]
fn a_rocm_sdk_core_wheel_older_than_the_minimum_is_named_too_old() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site-packages");
    let lib = site.join("_rocm_sdk_core/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(agent_library(), lib.join("libhsa-runtime64.so.1")).unwrap();
    aie_header(&site.join("_rocm_sdk_core"));
    let old = site.join("rocm_sdk_core-10.3.0a20261001.dist-info");
    std::fs::create_dir_all(&old).unwrap();

    let err = HsaRuntime::open(&config_with(&[]), std::slice::from_ref(&site)).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RuntimeError::NotFound(_)), "{text}");
    assert!(
        text.contains(
            "too old: rocm-sdk-core 10.3.0a20261001; external variables and the PDI placement fix need rocm-sdk-core 10.3.0a20261027 or newer"
        ),
        "{text}"
    );
    assert!(!text.contains("malformed"), "{text}");

    std::fs::rename(&old, site.join("rocm_sdk_core-10.3.0a20261027.dist-info")).unwrap();
    let rt = HsaRuntime::open(&config_with(&[]), std::slice::from_ref(&site)).unwrap();
    assert_eq!(rt.library_source(), "pip rocm-sdk-core");
}
