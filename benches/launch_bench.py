"""Launch benchmarks on the conformance harness; prints `BENCH <name> <value> <unit>` lines.

* warm launch, host side: the launcher called directly (argument marshalling + dispatch to
  the harness device + completion), three tensor arguments of 16 floats, per call;
* the same through Triton's `kernel[grid](...)` path, for comparison;
* first launch in a new process on a warm cache (Triton's and ours): the backend's part, i.e.
  the first `kernel[grid](...)` call, which finds everything cached and loads the program;
* cold first launch: empty caches, including the stand-in tools' (tiny) run time.

Run through `make bench` (which builds the harness); the harness environment must be set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

WORKER = textwrap.dedent(
    """
    import json, sys, time
    import torch, triton, triton.language as tl
    from triton_npu import NPUDriver

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    triton.runtime.driver.set_active(NPUDriver(sys.argv[1]))
    N = 16
    x, y, out = torch.rand(N), torch.rand(N), torch.empty(N)
    t0 = time.perf_counter()
    add_kernel.warmup(x, y, out, N, BLOCK=16, grid=(1,))  # Triton's part: frontend or its cache
    t1 = time.perf_counter()
    k = add_kernel[(1,)](x, y, out, N, BLOCK=16)  # ours: launcher, NPU cache, load, dispatch
    t2 = time.perf_counter()
    result = {"triton_first_ms": (t1 - t0) * 1e3, "backend_first_ms": (t2 - t1) * 1e3}
    if sys.argv[2] == "warm":
        launcher, fn, md = k._run, k.function, k.packed_metadata
        for _ in range(200):
            launcher(1, 1, 1, None, fn, md, None, None, None, x, y, out, N, 16)
        reps = 5000
        t0 = time.perf_counter()
        for _ in range(reps):
            launcher(1, 1, 1, None, fn, md, None, None, None, x, y, out, N, 16)
        result["launcher_us"] = (time.perf_counter() - t0) / reps * 1e6
        # The device time of each call, averaged over a separate loop (reading it costs time).
        from triton_npu._loader import native
        device = 0.0
        for _ in range(reps):
            launcher(1, 1, 1, None, fn, md, None, None, None, x, y, out, N, 16)
            device += native().last_dispatch()[1]
        result["device_us"] = device / reps * 1e6
        t0 = time.perf_counter()
        for _ in range(1000):
            add_kernel[(1,)](x, y, out, N, BLOCK=16)
        result["triton_path_us"] = (time.perf_counter() - t0) / 1000 * 1e6
    torch.testing.assert_close(out, x + y)
    print(json.dumps(result))
    """
)


def run(script: str, runtime: str, mode: str, env: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, script, runtime, mode], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        raise SystemExit(f"benchmark worker failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    if not os.environ.get("NPU_HARNESS_PREFIX"):
        raise SystemExit("source target/harness/env.sh first (make bench does)")
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        for runtime in ("hsa", "xrt"):
            env = dict(os.environ)
            env["AMD_TRITON_NPU_CACHE_DIR"] = os.path.join(tmp, runtime, "npu")
            env["TRITON_CACHE_DIR"] = os.path.join(tmp, runtime, "triton")
            cold = run(script, runtime, "cold", env)
            warm = run(script, runtime, "warm", env)
            host = warm["launcher_us"] - warm["device_us"]
            print(f"BENCH launch_warm_call_3args_{runtime} {warm['launcher_us']:.2f} us")
            print(f"BENCH launch_warm_device_time_{runtime} {warm['device_us']:.2f} us")
            print(f"BENCH launch_warm_host_overhead_3args_{runtime} {host:.2f} us")
            print(f"BENCH launch_warm_triton_jit_path_{runtime} {warm['triton_path_us']:.2f} us")
            print(
                f"BENCH first_launch_warm_cache_backend_{runtime} {warm['backend_first_ms']:.2f} ms"
            )
            print(
                f"BENCH first_launch_warm_cache_triton_{runtime} {warm['triton_first_ms']:.2f} ms"
            )
            print(
                f"BENCH first_launch_cold_backend_with_standin_tools_{runtime} "
                f"{cold['backend_first_ms']:.2f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
