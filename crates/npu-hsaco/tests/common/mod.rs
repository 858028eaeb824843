//! Shared test support: the reference vectors and small builders for synthetic inputs.
#![allow(dead_code)]

pub mod elf_builder;

use std::path::{Path, PathBuf};

use npu_hsaco::spec::KernelSource;
use sha2::{Digest, Sha256};

/// The repository's test fixtures (`tests/fixtures`, provenance in its `PROVENANCE.md`).
/// Missing them is a test failure, not a skip: the vectors are what these tests check against.
pub fn fixtures_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    assert!(
        dir.join("hsaco-vectors/vectors.json").is_file(),
        "the test fixtures are missing: expected {}/hsaco-vectors/vectors.json",
        dir.display()
    );
    dir
}

pub fn vectors_dir() -> PathBuf {
    fixtures_dir().join("hsaco-vectors")
}

pub fn real_dir() -> PathBuf {
    fixtures_dir().join("hsaco-real/xdna_emu_npu1")
}

pub fn read(path: impl AsRef<Path>) -> Vec<u8> {
    let path = path.as_ref();
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("cannot read reference file {}: {e}", path.display()))
}

pub fn vectors_json() -> serde_json::Value {
    serde_json::from_slice(&read(vectors_dir().join("vectors.json"))).expect("vectors.json is JSON")
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Makes a source's relative paths relative to `dir` (the vector's working directory).
pub fn rebase(source: KernelSource, dir: &Path) -> KernelSource {
    match source {
        KernelSource::PdiInsts {
            name,
            insts,
            pdi,
            kernarg_size,
            num_cols,
        } => KernelSource::PdiInsts {
            name,
            insts: dir.join(insts),
            pdi: pdi.map(|p| dir.join(p)),
            kernarg_size,
            num_cols,
        },
        KernelSource::Xclbin {
            name,
            xclbin,
            insts,
            kernarg_size,
            num_cols,
        } => KernelSource::Xclbin {
            name,
            xclbin: dir.join(xclbin),
            insts: dir.join(insts),
            kernarg_size,
            num_cols,
        },
        KernelSource::FullElf {
            path,
            kernarg_size,
            num_cols,
        } => KernelSource::FullElf {
            path: dir.join(path),
            kernarg_size,
            num_cols,
        },
    }
}

/// A deterministic byte generator (xorshift) for synthetic blobs.
pub fn pseudo_random(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Asserts two byte strings are equal, reporting sizes and the first differing offset instead
/// of dumping both.
#[track_caller]
pub fn assert_bytes_eq(actual: &[u8], expected: &[u8], what: &str) {
    if actual != expected {
        let first = actual
            .iter()
            .zip(expected)
            .position(|(a, b)| a != b)
            .unwrap_or(actual.len().min(expected.len()));
        panic!(
            "{what}: {} bytes vs {} expected; first difference at offset {first:#x} ({:02x?} vs {:02x?})",
            actual.len(),
            expected.len(),
            actual.get(first),
            expected.get(first)
        );
    }
}
