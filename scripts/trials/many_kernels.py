"""Trial: one process loads and runs K distinct @triton.jit kernels end to end (each a new
constexpr, so a new build, a new cache entry and a new loaded program), under HSA and under
XRT. Before the bounded kernel table and runtime releases, the 1,016th kernel failed (one file
descriptor per loaded kernel; issue 15 item 4, issue 17 item 3).

It PASSes per runtime when every kernel computes right and the process stays bounded: open
file descriptors do not grow with K, and the harness device's own counters stay under the
device's limits (HSA: loaded executables and device-heap bytes; XRT: hardware contexts).
Usage: many_kernels.py [kernels]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from common import harness_env, last_json, python, report, script, work_dir

BODY = """
import ctypes, gc

def fds(): return len(os.listdir("/proc/self/fd"))

def device():
    # The harness devices' own counters (test-only exports).
    if os.environ["TRIAL_RUNTIME"] == "hsa":
        lib = ctypes.CDLL(os.path.join(os.environ["AMD_NPU_ROCR_PATH"], "lib",
                                       "libhsa-runtime64.so"))
        s = (ctypes.c_uint64 * 64)()  # room for later fields
        assert lib.npu_harness_hsa_stats(ctypes.byref(s)) == 0
        return {"executables": s[6], "heap": s[3], "queues": s[5]}
    lib = ctypes.CDLL(os.environ["NPU_HARNESS_XRT_DEVICE_LIB"])
    s = (ctypes.c_uint64 * 64)()
    assert lib.npu_harness_xrt_stats(ctypes.byref(s)) == 0
    return {"contexts": s[3], "bos": s[6]}

kernels = int(sys.argv[1])
x, y = torch.randn(N), torch.randn(N)
wrong, peak = [], {}
fd0 = None
for n in range(1, kernels + 1):
    o = torch.zeros(N)
    add_kernel[(1,)](x, y, o, n, BLOCK=4096)
    if not (torch.equal(o[:n], (x + y)[:n]) and not o[n:].any()):
        wrong.append(n)
    if n == 10:
        gc.collect()
        fd0 = fds()
    if n % 50 == 0:
        for k, v in device().items():
            peak[k] = max(peak.get(k, 0), v)
        print(f"{n} kernels", file=sys.stderr, flush=True)
gc.collect()
print(json.dumps({"fd0": fd0, "fd1": fds(), "peak": peak, "wrong": wrong[:10],
                  "n_wrong": len(wrong)}))
"""

# The limits the harness devices enforce as the hardware does (tests/harness/README.md).
HEAP_LIMIT = 64 * 2**20
CONTEXT_LIMIT = 32


def main() -> bool:
    kernels = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    ok = True
    for runtime in ("hsa", "xrt"):
        start = time.monotonic()
        with work_dir(f"many-kernels-{runtime}") as w:
            work = Path(w)
            env = harness_env(work, TRIAL_RUNTIME=runtime)
            p = python(script(work, BODY), env, str(kernels))
            out, err = p.communicate(timeout=7200)
            r = last_json(out)
        took = time.monotonic() - start
        trial = f"many_kernels_{runtime}"
        if p.returncode != 0 or r is None:
            ok &= report(trial, False, f"status {p.returncode}: {err.strip()[-400:]}", took)
            continue
        peak = r["peak"]
        bounded = r["fd1"] <= r["fd0"] + 4
        if runtime == "hsa":
            bounded &= peak["heap"] <= HEAP_LIMIT
            device = (
                f"device heap peak {peak['heap']:,} B of {HEAP_LIMIT:,}, "
                f"executables peak {peak['executables']}"
            )
        else:
            bounded &= peak["contexts"] <= CONTEXT_LIMIT
            device = f"hardware contexts peak {peak['contexts']} of {CONTEXT_LIMIT}"
        numbers = (
            f"{kernels} distinct kernels, {kernels - r['n_wrong']} right; fds {r['fd0']} -> "
            f"{r['fd1']}; {device}"
        )
        ok &= report(trial, bounded and r["n_wrong"] == 0, numbers, took)
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
