"""Launch benchmarks; prints `BENCH <name> <value> <unit>` lines.

Host overhead (issue 18 item 3/4) is the time of a warm launch against *no-op device
libraries*: copies of the harness's ROCr (`libhsa-runtime64.so`) and XRT
(`libxrt_coreutil.so.2` over its device) that this benchmark lays out in a temporary prefix
and selects the way a user selects an installed ROCr or XRT (`AMD_NPU_ROCR_PATH`;
`XILINX_XRT`, with our shim found next to the package), run with
`NPU_HARNESS_NOOP_DEVICE=1` (a packet or run that passes every check completes at once,
without running its program) and, under HSA, `NPU_HARNESS_DOORBELL=sync` (the packet is
handled inside the doorbell store, as ROCr's XDNA driver does, instead of being handed to the
harness agent's worker thread, a ~50 µs hand-off that is the harness's and not ours). What it
still counts besides our code: the stand-in libraries' own bookkeeping per call (locks, handle
tables), as a real runtime has its own.

Figures, per runtime:
* warm launch, host overhead: the launcher called directly with three 16-float tensors,
  min/median/max of the per-call time over rounds of calls (no-op device);
* scaling: the same for kernels with 1, 3, 8 and 16 tensor arguments (medians);
* device time per call on the harness device (its software NPU computing the kernel);
* the same launch through Triton's `kernel[grid](...)` path (harness device);
* first launch in a new process with a warm cache (Triton's and ours): the backend's part is
  the first `kernel[grid](...)` after `warmup` (launcher, our cache, load, dispatch);
* cold first launch: the backend's part with empty caches, and that part minus the time the
  tools ran (the stand-in tools' wall time, from the driver's own log of each tool's end).

Run through `make bench` (which builds the harness); the harness environment must be set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

ROUNDS = 9
CALLS = 2000
ARG_COUNTS = (1, 3, 8, 16)


def scale_kernel(k: int) -> str:
    """A kernel with k pointer arguments: p0 += p1 + ... (k = 1: p0 += 1)."""
    params = ", ".join(f"p{i}" for i in range(k))
    body = ["    offs = tl.arange(0, BLOCK)", "    acc = tl.load(p0 + offs)"]
    body += [f"    acc = acc + tl.load(p{i} + offs)" for i in range(1, k)]
    if k == 1:
        body.append("    acc = acc + 1.0")
    body.append("    tl.store(p0 + offs, acc)")
    return f"@triton.jit\ndef scale_{k}({params}, BLOCK: tl.constexpr):\n" + "\n".join(body)


WORKER = (
    textwrap.dedent(
        """
    import json, logging, re, statistics, sys, time
    import torch, triton, triton.language as tl
    from triton_npu import NPUDriver
    from triton_npu._loader import native

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
    """
    )
    + "\n\n".join(scale_kernel(k) for k in ARG_COUNTS)
    + textwrap.dedent(
        f"""

    ROUNDS, CALLS = {ROUNDS}, {CALLS}
    runtime, mode = sys.argv[1], sys.argv[2]

    class ToolTime(logging.Handler):
        # The driver logs every tool's end at debug level with its wall time (elapsed_s=...).
        seconds = 0.0
        def emit(self, record):
            m = re.search(r"elapsed_s=([0-9.eE+-]+)", record.getMessage())
            if m:
                ToolTime.seconds += float(m.group(1))

    if mode == "cold":
        logging.getLogger("triton_npu").addHandler(ToolTime())
        logging.getLogger("triton_npu").setLevel(logging.DEBUG)
        native().set_log_level("debug")

    triton.runtime.driver.set_active(NPUDriver(runtime))
    N = 16
    x, y, out = torch.rand(N), torch.rand(N), torch.empty(N)
    t0 = time.perf_counter()
    add_kernel.warmup(x, y, out, N, BLOCK=16, grid=(1,))  # Triton's part: frontend or its cache
    t1 = time.perf_counter()
    ToolTime.seconds = 0.0  # triton-shared-opt ran in Triton's part; the backend's tools follow
    k = add_kernel[(1,)](x, y, out, N, BLOCK=16)  # ours: launcher, NPU cache, load, dispatch
    t2 = time.perf_counter()
    result = {{"triton_first_ms": (t1 - t0) * 1e3, "backend_first_ms": (t2 - t1) * 1e3,
               "tools_ms": ToolTime.seconds * 1e3}}

    def per_call_us(launcher, fn, md, args):
        for _ in range(200):
            launcher(1, 1, 1, None, fn, md, None, None, None, *args)
        rounds = []
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            for _ in range(CALLS):
                launcher(1, 1, 1, None, fn, md, None, None, None, *args)
            rounds.append((time.perf_counter() - t0) / CALLS * 1e6)
        return sorted(rounds)

    if mode in ("warm", "noop"):
        rounds = per_call_us(k._run, k.function, k.packed_metadata, (x, y, out, N, 16))
        result["launcher_us"] = [rounds[0], statistics.median(rounds), rounds[-1]]
    if mode == "warm":
        # The harness device's time per call, as the runtime measured it.
        device = 0.0
        for _ in range(CALLS):
            k._run(1, 1, 1, None, k.function, k.packed_metadata, None, None, None, x, y, out, N, 16)
            device += native().last_dispatch()[1]
        result["device_us"] = device / CALLS * 1e6
        t0 = time.perf_counter()
        for _ in range(1000):
            add_kernel[(1,)](x, y, out, N, BLOCK=16)
        result["triton_path_us"] = (time.perf_counter() - t0) / 1000 * 1e6
    if mode == "noop":
        scaling = {{}}
        for count in {ARG_COUNTS!r}:
            kernel = globals()[f"scale_{{count}}"]
            tensors = [torch.rand(N) for _ in range(count)]
            compiled = kernel[(1,)](*tensors, BLOCK=16)
            rounds = per_call_us(compiled._run, compiled.function, compiled.packed_metadata,
                                 (*tensors, 16))
            scaling[count] = statistics.median(rounds)
        result["scaling_us"] = scaling
    else:
        torch.testing.assert_close(out, x + y)
    print(json.dumps(result))
    """
    )
)


def run(script: str, runtime: str, mode: str, env: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, script, runtime, mode], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        raise SystemExit(f"benchmark worker ({runtime}, {mode}) failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def noop_environment(tmp: str, runtime: str, base: dict) -> dict:
    """The environment of a process whose runtime finds no-op device libraries, laid out here
    from the harness's as an installed ROCr or XRT is laid out."""
    prefix = os.environ["NPU_HARNESS_PREFIX"]
    env = dict(base)
    env["NPU_HARNESS_NOOP_DEVICE"] = "1"
    if runtime == "hsa":
        rocr = os.path.join(tmp, "noop", "rocr")
        if not os.path.isdir(rocr):
            shutil.copytree(os.path.join(prefix, "rocr"), rocr)
        env["AMD_NPU_ROCR_PATH"] = rocr
        env["NPU_HARNESS_DOORBELL"] = "sync"
    else:
        xrt = os.path.join(tmp, "noop", "xrt")
        if not os.path.isdir(xrt):
            shutil.copytree(os.path.join(prefix, "xrt-cxx", "lib"), os.path.join(xrt, "lib"))
        env["XILINX_XRT"] = xrt
        # Our shim as a user has it: next to the package (make develop puts it there).
        for var in ("AMD_TRITON_NPU_XRT_SHIM", "AMD_TRITON_NPU_XRT_DIR", "XRT_DEV_DIR"):
            env.pop(var, None)
    return env


def three(name: str, figures: list, unit: str = "us") -> None:
    low, median, high = figures
    print(f"BENCH {name} {median:.2f} {unit} (min {low:.2f}, max {high:.2f})")


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
            noop = run(script, runtime, "noop", noop_environment(tmp, runtime, env))
            three(f"launch_host_overhead_3args_{runtime}", noop["launcher_us"])
            scaling = noop["scaling_us"]
            print(
                f"BENCH launch_host_overhead_scaling_{runtime} "
                + "/".join(f"{scaling[str(n)]:.2f}" for n in ARG_COUNTS)
                + f" us (medians for {'/'.join(map(str, ARG_COUNTS))} tensor arguments)"
            )
            three(f"launch_warm_call_3args_harness_device_{runtime}", warm["launcher_us"])
            print(f"BENCH launch_device_time_harness_{runtime} {warm['device_us']:.2f} us")
            print(f"BENCH launch_warm_triton_jit_path_{runtime} {warm['triton_path_us']:.2f} us")
            print(
                f"BENCH first_launch_warm_cache_backend_{runtime} {warm['backend_first_ms']:.2f} ms"
            )
            print(
                f"BENCH first_launch_warm_cache_triton_{runtime} {warm['triton_first_ms']:.2f} ms"
            )
            print(
                f"BENCH first_launch_cold_backend_{runtime} {cold['backend_first_ms']:.2f} ms "
                f"(stand-in tools {cold['tools_ms']:.2f} ms)"
            )
            print(
                f"BENCH first_launch_cold_backend_excluding_tools_{runtime} "
                f"{cold['backend_first_ms'] - cold['tools_ms']:.2f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
