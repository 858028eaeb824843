"""Triton's own FileCacheManager on a 10,000-entry cache: the figure our cache hit is held to.

A hit is what ``triton.compiler.compile`` does when its cache has the kernel:
``get_cache_manager(key).get_group(metadata file)`` and then reading every file of the group
(``CompiledKernel`` reads the metadata JSON and every stage's bytes). Entries have the shape of
``crates/npu-cache/benches/lookup.rs``: a 4 KiB file, a 64-byte file and a small JSON file.

Prints ``BENCH triton_file_cache_hit_10k_entries <median> us (min …, max …)`` over rounds of
1,000 hits on keys spread over the cache. Run by ``make bench``.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import tempfile
import time

ENTRIES = 10_000
ROUNDS = 9
LOOKUPS = 1000


def key(i: int) -> str:
    return hashlib.sha256(f"kernel_{i}".encode()).hexdigest()


def populate(get_cache_manager, n: int) -> None:
    artifact = b"\x5a" * 4096
    for i in range(n):
        manager = get_cache_manager(key(i))
        paths = {
            "kernel.json": manager.put(
                json.dumps({"name": f"kernel_{i}"}), "kernel.json", binary=False
            ),
            "aie.elf": manager.put(artifact, "aie.elf"),
            "insts.bin": manager.put(bytes(64), "insts.bin"),
        }
        manager.put_group("kernel.json", paths)


def hit(get_cache_manager, i: int) -> int:
    group = get_cache_manager(key(i)).get_group("kernel.json")
    if group is None:
        raise SystemExit(f"benchmark key {i} missing: the lookup should have hit")
    total = 0
    for path in group.values():
        with open(path, "rb") as f:
            total += len(f.read())
    return total


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TRITON_CACHE_DIR"] = tmp
        os.environ.pop("TRITON_CACHE_MANAGER", None)
        from triton.runtime.cache import get_cache_manager

        started = time.perf_counter()
        populate(get_cache_manager, ENTRIES)
        print(
            f"populated {ENTRIES} entries in {time.perf_counter() - started:.1f} s", file=sys.stderr
        )
        # Write the new entries out first, as our lookup benchmark does: the kernel's write-back
        # of the fresh files would otherwise run during the first rounds.
        os.sync()
        keys = [(i * 7919) % ENTRIES for i in range(LOOKUPS)]
        per_round = []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            for i in keys:
                hit(get_cache_manager, i)
            per_round.append((time.perf_counter() - start) * 1e6 / len(keys))
        print(
            f"BENCH triton_file_cache_hit_10k_entries {statistics.median(per_round):.2f} us "
            f"(min {min(per_round):.2f}, max {max(per_round):.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
