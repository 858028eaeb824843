//! Cache lookup cost with 10,000 entries (and with 10, to show it does not grow).
//!
//! `cargo bench -p npu-cache --bench lookup` prints:
//! * `cache_hit_lookup_10k_entries`: a `get_or_build` hit whose checksums this handle has
//!   verified before (every launch after the first);
//! * `cache_first_hit_lookup_10k_entries`: the first hit of an entry through a handle, which
//!   also hashes its files (the first launch of a kernel in a new process);
//! * `cache_hit_lookup_10_entries`: the same as the first line, in a cache of 10 entries.

use std::fs;
use std::hint::black_box;
use std::time::Instant;

use npu_cache::{Cache, Inputs};

const ARTIFACT_BYTES: usize = 4096;

fn inputs(i: usize) -> Inputs {
    Inputs::new()
        .text("kernel_name", format!("kernel_{i}"))
        .text("kernel_ir", format!("module {{ func.func @kernel_{i}() }}"))
        .text("grid", "4,1,1")
}

fn populate(cache: &Cache, n: usize) {
    let artifact = vec![0x5au8; ARTIFACT_BYTES];
    for i in 0..n {
        cache
            .get_or_build(&inputs(i), |dir| {
                fs::write(dir.join("aie.elf"), &artifact)?;
                fs::write(dir.join("insts.bin"), [0u8; 64])
            })
            .expect("populate the cache");
    }
}

fn hit(cache: &Cache, i: usize) {
    let entry = cache
        .get_or_build(&inputs(i), |_| -> Result<(), std::io::Error> {
            panic!("benchmark key {i} missing: the lookup should have hit")
        })
        .expect("hit");
    black_box(entry.dir());
}

/// Median over rounds of the mean per-lookup time, in microseconds.
fn measure(cache: &Cache, keys: &[usize], rounds: usize) -> f64 {
    let mut per_round: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for &i in keys {
                hit(cache, i);
            }
            start.elapsed().as_secs_f64() * 1e6 / keys.len() as f64
        })
        .collect();
    per_round.sort_by(f64::total_cmp);
    per_round[per_round.len() / 2]
}

fn main() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let big_root = tmp.path().join("big");
    let big = Cache::at(&big_root).expect("open cache");
    let started = Instant::now();
    populate(&big, 10_000);
    eprintln!(
        "populated 10,000 entries in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // A spread of keys; the first pass through a fresh handle verifies checksums.
    let keys: Vec<usize> = (0..1000).map(|i| (i * 7919) % 10_000).collect();
    let fresh = Cache::at(&big_root).expect("open cache");
    let start = Instant::now();
    for &i in &keys {
        hit(&fresh, i);
    }
    let first = start.elapsed().as_secs_f64() * 1e6 / keys.len() as f64;
    let warm = measure(&fresh, &keys, 7);

    let small = Cache::at(tmp.path().join("small")).expect("open cache");
    populate(&small, 10);
    let small_keys: Vec<usize> = (0..1000).map(|i| i % 10).collect();
    let warm_small = measure(&small, &small_keys, 7);

    println!("BENCH cache_hit_lookup_10k_entries {warm:.2} us");
    println!("BENCH cache_first_hit_lookup_10k_entries {first:.2} us");
    println!("BENCH cache_hit_lookup_10_entries {warm_small:.2} us");
}
