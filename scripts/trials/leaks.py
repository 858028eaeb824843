"""Trial: resource leaks over many launches.

Launches one loaded kernel N times and a handful of kernels on new grids, measuring this
process's open file descriptors and resident memory after a warm-up and at the end. PASS when
no descriptor is left behind and memory grows by less than 16 MiB.
Usage: leaks.py [launches]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from common import harness_env, last_json, python, report, script, work_dir

BODY = """
import gc, os
def fds(): return len(os.listdir("/proc/self/fd"))
def rss():
    with open("/proc/self/statm") as f: return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
launches = int(sys.argv[1])
x, y, out = torch.randn(N), torch.randn(N), torch.zeros(N)
for block in (256, 512, 1024, 2048):
    assert add(block, x, y)
for _ in range(200):
    add_kernel[(4,)](x, y, out, N, BLOCK=1024)
gc.collect()
fd0, rss0 = fds(), rss()
for i in range(launches):
    add_kernel[(4,)](x, y, out, N, BLOCK=1024)
right = bool(torch.equal(out, x + y))
for block in (256, 512, 1024, 2048):
    right &= add(block, x, y)
gc.collect()
print(json.dumps({"fd0": fd0, "fd1": fds(), "rss0": rss0, "rss1": rss(), "right": right}))
"""


def main() -> bool:
    launches = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    start = time.monotonic()
    with work_dir("leaks") as w:
        work = Path(w)
        p = python(script(work, BODY), harness_env(work), str(launches))
        out, err = p.communicate(timeout=1800)
        r = last_json(out)
    if p.returncode != 0 or r is None:
        return report("leaks", False, f"status {p.returncode}: {err.strip()[-400:]}", 0)
    grown = (r["rss1"] - r["rss0"]) / 2**20
    ok = r["fd1"] <= r["fd0"] and grown < 16 and r["right"]
    numbers = (
        f"{launches} launches: fds {r['fd0']} -> {r['fd1']}, RSS {r['rss0'] / 2**20:.1f} -> "
        f"{r['rss1'] / 2**20:.1f} MiB ({grown:+.1f}), results right: {r['right']}"
    )
    return report("leaks", ok, numbers, time.monotonic() - start)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
