//! Cache hit cost with 10,000 entries (and with 10, to show it does not grow).
//!
//! `cargo bench -p npu-cache --bench lookup` prints `BENCH` lines: the time of one
//! `get_or_build` that hits, per lookup, as min/median/max over rounds of 1,000 lookups of
//! keys spread over the cache. Every hit reads the manifest and the entry's files and checks
//! their sha256 (4 KiB + 64 bytes here, as Triton's benchmark in `benches/triton_cache_bench.py`
//! reads its files), so the first hit of an entry in a process costs the same as any other.
//! `make bench` prints Triton's FileCacheManager on the same shape of cache next to it.

use std::fs;
use std::hint::black_box;
use std::time::Instant;

use npu_cache::{Cache, Inputs};

const ARTIFACT_BYTES: usize = 4096;
const ENTRIES: usize = 10_000;
const ROUNDS: usize = 9;

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
    black_box(entry.bytes("aie.elf"));
}

/// Per-lookup microseconds of each round: (min, median, max) over rounds.
fn measure(cache: &Cache, keys: &[usize]) -> (f64, f64, f64) {
    let mut per_round: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for &i in keys {
                hit(cache, i);
            }
            start.elapsed().as_secs_f64() * 1e6 / keys.len() as f64
        })
        .collect();
    per_round.sort_by(f64::total_cmp);
    (
        per_round[0],
        per_round[per_round.len() / 2],
        per_round[per_round.len() - 1],
    )
}

fn print(name: &str, (min, median, max): (f64, f64, f64)) {
    println!("BENCH {name} {median:.2} us (min {min:.2}, max {max:.2})");
}

fn main() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let big_root = tmp.path().join("big");
    let big = Cache::at(&big_root).expect("open cache");
    let started = Instant::now();
    populate(&big, ENTRIES);
    eprintln!(
        "populated {ENTRIES} entries in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    drop(big);
    // Write the new entries out first: the kernel's write-back of 50 MB of fresh files would
    // otherwise run during the first rounds and be counted as lookup time (a real hit finds
    // entries written long before). Triton's benchmark does the same.
    rustix::fs::sync();

    // A spread of keys, through a handle that has seen none of them (a new process's view).
    let keys: Vec<usize> = (0..1000).map(|i| (i * 7919) % ENTRIES).collect();
    let fresh = Cache::at(&big_root).expect("open cache");
    let big_figures = measure(&fresh, &keys);

    let small = Cache::at(tmp.path().join("small")).expect("open cache");
    populate(&small, 10);
    let small_keys: Vec<usize> = (0..1000).map(|i| i % 10).collect();
    let small_figures = measure(&small, &small_keys);

    print("cache_hit_lookup_10k_entries", big_figures);
    print("cache_hit_lookup_10_entries", small_figures);
}
