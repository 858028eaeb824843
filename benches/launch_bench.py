"""Launch benchmarks; prints `BENCH <name> <value> <unit>` lines.

Host overhead (issue 18 item 3/4) is the time of a warm launch against *no-op device
libraries*: a ROCr (`libhsa-runtime64.so.1`) and an XRT (`libxrt_coreutil.so.2`) that this
benchmark builds from benches/noop/ (noop_libs.py) and selects the way a user selects an
installed ROCr or XRT (`AMD_NPU_ROCR_PATH`; `XILINX_XRT`, with our shim found next to the
package). They check nothing, take no lock and make no system call on the launch path: a
packet whose doorbell is rung, or a run that is started, completes at once without anything
computed, and buffers are plain host memory. So the figure is our launcher's cost, not a
stand-in's bookkeeping (the conformance harness's ROCr and XRT validate every call, and its
signals wake waiters with a system call). The kernels are still compiled by the harness's
stand-in tools, in the same processes.

Figures, per runtime:
* warm launch, host overhead: the launcher called directly with three 16-float tensors,
  min/median/max of the per-call time over rounds of calls (no-op device), and where that time
  goes: the same loop calling a Python function that does nothing, and the launcher with a
  grid that has a zero (every argument read and checked, nothing dispatched);
* scaling: the same for kernels with 1, 3, 8 and 16 tensor arguments (medians);
* the same figures for upstream's generated C++ launcher, when a C++ compiler is found
  (else a `SKIP` line says why): our model of it (benches/upstream_launcher/, built by
  upstream_model.py, which names the upstream commit and files it follows), compiled with g++
  and linked to the same no-op libraries, given our cache entry's hsaco or ELF as upstream's
  set_paths gets them, and called as Triton calls upstream's module (its Python wrapper, which
  hashes the kernel's IR on every call, is left out: the figure is the C++ launcher's alone);
  then ours / upstream as ratios of the medians. Every host-overhead figure is pooled over
  ALTERNATIONS processes of each side, run in turn (ours, upstream, ours, ...), so that load
  drifting on a shared machine moves both sides alike. Under HSA also ours with
  AMD_TRITON_NPU_HSA_TIMEOUT=0, in the same rotation: upstream's watchdog is off by default,
  ours is 60 s, which rings the doorbell from a helper thread;
* device time per call on the harness device (its software NPU computing the kernel);
* the same launch through Triton's `kernel[grid](...)` path (harness device);
* first launch in a new process with a warm cache (Triton's and ours): the backend's part is
  the first `kernel[grid](...)` after `warmup` (launcher, our cache, load, dispatch) minus the
  harness device's time for that dispatch (reported beside it: a design's first run costs the
  software device more than later ones), min/median/max over FIRST_LAUNCH_RUNS processes;
* cold first launch: the backend's part with an empty NPU cache (min/median/max over as many
  processes), and that part minus the device's time and the time the tools ran (the stand-in
  tools' wall time, start to exit, as the new cache entry's manifest records it for its
  build), per process.

Run through `make bench` (which builds the harness); the harness environment must be set.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import noop_libs
import upstream_model

ROUNDS = 9
# Ours and upstream's launches are timed in alternating processes, this many each, and every
# figure is taken over all their rounds: load that drifts between two processes would
# otherwise move a ratio of one process against one.
ALTERNATIONS = 3
CALLS = 2000
ARG_COUNTS = (1, 3, 8, 16)
# First launches (warm cache, cold cache) are timed once per process, in this many processes.
FIRST_LAUNCH_RUNS = 5


def scale_kernel(k: int) -> str:
    """A kernel with k pointer arguments: p0 += p1 + ... (k = 1: p0 += 1)."""
    params = ", ".join(f"p{i}" for i in range(k))
    body = ["    offs = tl.arange(0, BLOCK)", "    acc = tl.load(p0 + offs)"]
    body += [f"    acc = acc + tl.load(p{i} + offs)" for i in range(1, k)]
    if k == 1:
        body.append("    acc = acc + 1.0")
    body.append("    tl.store(p0 + offs, acc)")
    return f"@triton.jit\ndef scale_{k}({params}, BLOCK: tl.constexpr):\n" + "\n".join(body)


# Both workers time a launcher the same way: `launcher(*arguments)` in rounds of CALLS calls
# after 200 warm-up calls; the per-call time of each round, sorted.
TIMING = textwrap.dedent(
    f"""
    import time

    ROUNDS, CALLS = {ROUNDS}, {CALLS}

    def per_call_us(launcher, arguments):
        for _ in range(200):
            launcher(*arguments)
        rounds = []
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            for _ in range(CALLS):
                launcher(*arguments)
            rounds.append((time.perf_counter() - t0) / CALLS * 1e6)
        return sorted(rounds)

    def interleaved(calls):
        # Rounds of each (callable, arguments), taken in turn within every round, so that round
        # i of each is timed at the same moment: their differences hold when the machine's
        # speed drifts between rounds.
        for function, arguments in calls:
            for _ in range(200):
                function(*arguments)
        rounds = [[] for _ in calls]
        for _ in range(ROUNDS):
            for timed, (function, arguments) in zip(rounds, calls):
                t0 = time.perf_counter()
                for _ in range(CALLS):
                    function(*arguments)
                timed.append((time.perf_counter() - t0) / CALLS * 1e6)
        return rounds
    """
)

WORKER = (
    TIMING
    + textwrap.dedent(
        """
    import json, os, statistics, sys
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

    runtime, mode = sys.argv[1], sys.argv[2]

    triton.runtime.driver.set_active(NPUDriver(runtime))
    N = 16
    x, y, out = torch.rand(N), torch.rand(N), torch.empty(N)
    t0 = time.perf_counter()
    add_kernel.warmup(x, y, out, N, BLOCK=16, grid=(1,))  # Triton's part: frontend or its cache
    t1 = time.perf_counter()
    k = add_kernel[(1,)](x, y, out, N, BLOCK=16)  # ours: launcher, NPU cache, load, dispatch
    t2 = time.perf_counter()
    # The harness device's time for that first dispatch (its first run of a design costs it
    # more than later ones), as the runtime measured it: device time, not the backend's.
    result = {{"triton_first_ms": (t1 - t0) * 1e3, "backend_first_ms": (t2 - t1) * 1e3,
               "device_first_ms": native().last_dispatch()[1] * 1e3}}
    if mode == "cold":
        # The entry's manifest records its build's time and the part its tools took (the
        # stand-in tools' wall time, start to exit; triton-shared-opt ran in Triton's part).
        entry = os.path.dirname(k._run.npu_cache_dir.rstrip("/"))
        with open(os.path.join(entry, "manifest.json")) as f:
            build = json.load(f)["build"]
        result["tools_ms"] = build["tools_us"] / 1e3

    if mode in ("warm", "noop"):
        head = (1, 1, 1, None, k.function, k.packed_metadata, None, None, None)
        rounds = per_call_us(k._run, (*head, x, y, out, N, 16))
        result["launcher_us"] = rounds
        result["entries"] = {{"add": k._run.npu_cache_dir}}
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
        # Where a launch's host time goes: the same loop calling a Python function that does
        # nothing with the same arguments, and our launcher with a grid that has a zero (it
        # reads and checks every argument, then returns without dispatching, as Triton's
        # launchers do for an empty grid).
        def nothing(*arguments):
            pass

        arguments = (x, y, out, N, 16)
        call, checked, launched = interleaved(
            [
                (nothing, (*head, *arguments)),
                (k._run, (0, *head[1:], *arguments)),
                (k._run, (*head, *arguments)),
            ]
        )
        result["split_us"] = {{
            "call": call,
            "arguments": [c - n for n, c in zip(call, checked)],
            "dispatch": [done - c for c, done in zip(checked, launched)],
        }}
        scaling = {{}}
        for count in {ARG_COUNTS!r}:
            kernel = globals()[f"scale_{{count}}"]
            tensors = [torch.rand(N) for _ in range(count)]
            compiled = kernel[(1,)](*tensors, BLOCK=16)
            head = (1, 1, 1, None, compiled.function, compiled.packed_metadata, None, None, None)
            scaling[count] = per_call_us(compiled._run, (*head, *tensors, 16))
            result["entries"][count] = compiled._run.npu_cache_dir
        result["scaling_us"] = scaling
    else:
        torch.testing.assert_close(out, x + y)
    print(json.dumps(result))
    """
    )
)


UPSTREAM_WORKER = TIMING + textwrap.dedent(
    f"""
    import json, sys
    import torch
    sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
    import upstream_model

    with open(sys.argv[1]) as f:
        kernels = json.load(f)
    only = sys.argv[2:]  # kernel names to time; all when none
    result = {{}}
    for kernel in (k for k in kernels if not only or k["name"] in only):
        module = upstream_model.load(kernel["module"])
        module.set_paths(kernel["artifact"], kernel["kernel"])
        tensors = [torch.rand(16) for _ in range(kernel["tensors"])]
        # launch(gridX, gridY, gridZ, kernel_metadata, launch_metadata, enter_hook, exit_hook,
        # *signature arguments), as Triton's launch reaches upstream's module.
        arguments = (1, 1, 1, kernel["name"], None, None, None, *tensors, *kernel["trailing"])
        rounds = per_call_us(module.launch, arguments)
        result[kernel["name"]] = rounds
    print(json.dumps(result))
    """
)


def run(argv: list[str], env: dict) -> dict:
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark worker {argv[1:]} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def upstream_launcher(tmp: str, runtime: str, env: dict, entries: dict) -> list[str] | str:
    """The command that times the model of upstream's generated C++ launcher
    (upstream_model.py), built here against the no-op device libraries `env` selects, on the
    kernels ours ran (`entries`: kernel -> its cache entry), in a process of its own (the AIE
    agent allows one queue per process); or why it could not be built."""
    reason = upstream_model.missing(runtime)
    if reason is not None:
        return reason
    device = Path(env["AMD_NPU_ROCR_PATH"] if runtime == "hsa" else env["XILINX_XRT"])
    out = Path(tmp) / "upstream" / runtime
    kernels = []
    for name, entry in entries.items():
        # add_kernel(x, y, out, n: constexpr, BLOCK: constexpr); scale_k(p0.., BLOCK: constexpr)
        tensors, trailing = (3, [16, 16]) if name == "add" else (int(name), [16])
        module = upstream_model.build(runtime, tensors, len(trailing), device, out)
        artifact, kernel = upstream_model.artifacts(runtime, entry)
        kernels.append(
            {
                "name": name,
                "module": str(module),
                "artifact": artifact,
                "kernel": kernel,
                "tensors": tensors,
                "trailing": trailing,
            }
        )
    spec = out / "kernels.json"
    spec.write_text(json.dumps(kernels))
    script = out / "worker.py"
    script.write_text(UPSTREAM_WORKER)
    return [str(script), str(spec)]


def alternate(commands: list[tuple[list[str], dict]]) -> list[dict]:
    """Runs each (worker command, environment) in turn, ALTERNATIONS times over; for every
    command, each figure's rounds (a list of per-call times in its output, or a dict of
    them, flattened to the dict's keys) pooled over its runs and sorted."""
    pooled = [{} for _ in commands]
    for _ in range(ALTERNATIONS):
        for figures, (argv, env) in zip(pooled, commands, strict=True):
            for key, value in run(argv, env).items():
                rounds = value.items() if isinstance(value, dict) else [(key, value)]
                for name, got in rounds:
                    if isinstance(got, list):
                        figures.setdefault(str(name), []).extend(got)
    return [{k: sorted(v) for k, v in figures.items()} for figures in pooled]


# Where the no-op device libraries are built; kept between runs (rebuilt when a source changes).
NOOP_LIBS = Path(__file__).resolve().parents[1] / "target" / "bench" / "noop"


def noop_environment(libs: dict, runtime: str, base: dict) -> dict:
    """The environment of a process whose runtime finds the no-op device libraries (`libs`,
    from noop_libs.build) as it would find an installed ROCr or XRT. No NPU_HARNESS_* variable
    is left: the no-op libraries read none, and the stand-in tools that compile the kernels
    are found through their own variables (MLIR_AIR_INSTALL_DIR, PEANO_INSTALL_DIR, ...)."""
    env = {k: v for k, v in base.items() if not k.startswith("NPU_HARNESS_")}
    if runtime == "hsa":
        env["AMD_NPU_ROCR_PATH"] = str(libs["rocr"])
    else:
        env["XILINX_XRT"] = str(libs["xrt"])
        # Our shim as a user has it: next to the package (make develop puts it there).
        for var in ("AMD_TRITON_NPU_XRT_SHIM", "AMD_TRITON_NPU_XRT_DIR", "XRT_DEV_DIR"):
            env.pop(var, None)
    return env


def host_overhead(tmp: str, script: str, runtime: str, noop_env: dict) -> None:
    """The host-overhead figures: ours on the no-op device libraries `noop_env` selects and the
    model of upstream's launcher on the same libraries, run in turn (ALTERNATIONS processes
    each, every figure pooled over them), and ours / upstream."""
    # A first run builds the kernels (whose cache entries upstream's model is given) and warms
    # the caches; its figures are not kept.
    first = run([script, runtime, "noop"], noop_env)
    ours = [([script, runtime, "noop"], noop_env)]
    if runtime == "hsa":
        # Upstream's watchdog is off unless AMD_TRITON_NPU_HSA_TIMEOUT is set; ours defaults
        # to 60 s, which rings the doorbell from a helper thread. Ours with the limit off,
        # like for like:
        ours.append(([script, runtime, "noop"], {**noop_env, "AMD_TRITON_NPU_HSA_TIMEOUT": "0"}))
    upstream = upstream_launcher(tmp, runtime, noop_env, first["entries"])
    contenders = ours if isinstance(upstream, str) else [*ours, (upstream, noop_env)]
    pooled = alternate(contenders)
    mine = ours_figures(pooled[0])
    three(f"launch_host_overhead_3args_{runtime}", mine["add"])
    call, arguments, dispatch = (
        statistics.median(mine[k]) for k in ("call", "arguments", "dispatch")
    )
    print(
        f"BENCH launch_host_overhead_3args_split_{runtime} {call:.2f} / {arguments:.2f}"
        f" / {dispatch:.2f} us (medians of per-round differences: the Python call itself /"
        " reading and checking the arguments, a grid with a zero, nothing dispatched / the"
        " dispatch)"
    )
    scaling(f"launch_host_overhead_scaling_{runtime}", mine)
    if isinstance(upstream, str):
        print(f"SKIP launch_host_overhead_upstream_cxx_{runtime}: {upstream}")
        return
    theirs = pooled[-1]
    print(f"# upstream's generated launcher, as modelled on {upstream_model.FOLLOWS[runtime]}")
    three(f"launch_host_overhead_3args_upstream_cxx_{runtime}", theirs["add"])
    scaling(f"launch_host_overhead_scaling_upstream_cxx_{runtime}", theirs)
    ratio = statistics.median(mine["add"]) / statistics.median(theirs["add"])
    print(
        f"BENCH launch_host_overhead_ratio_ours_to_upstream_cxx_{runtime} {ratio:.2f} x"
        f" (3 tensors; 1/3/8/16 tensors: "
        + "/".join(
            f"{statistics.median(mine[str(n)]) / statistics.median(theirs[str(n)]):.2f}"
            for n in ARG_COUNTS
        )
        + f"; medians of {len(mine['add'])} rounds each, {ALTERNATIONS} processes per side"
        " run in turn)"
    )
    if runtime == "hsa":
        untimed = ours_figures(pooled[1])
        three("launch_host_overhead_3args_hsa_timeout_off", untimed["add"])
        print(
            "BENCH launch_host_overhead_ratio_ours_timeout_off_to_upstream_cxx_hsa "
            f"{statistics.median(untimed['add']) / statistics.median(theirs['add']):.2f} x"
            " (3 tensors, medians of the alternating runs)"
        )


def ours_figures(pooled: dict) -> dict:
    """Our worker's pooled rounds under the names upstream's worker uses: "add" for the
    3-tensor kernel, the tensor count for each scaling kernel."""
    return {"add": pooled["launcher_us"], **pooled}


def scaling(name: str, figures: dict) -> None:
    print(
        f"BENCH {name} "
        + "/".join(f"{statistics.median(figures[str(n)]):.2f}" for n in ARG_COUNTS)
        + f" us (medians for {'/'.join(map(str, ARG_COUNTS))} tensor arguments)"
    )


def three(name: str, rounds: list, unit: str = "us") -> None:
    low, median, high = rounds[0], statistics.median(rounds), rounds[-1]
    print(f"BENCH {name} {median:.2f} {unit} (min {low:.2f}, max {high:.2f})")


def main() -> int:
    if not os.environ.get("NPU_HARNESS_PREFIX"):
        raise SystemExit("source target/harness/env.sh first (make bench does)")
    no_libs = noop_libs.missing()
    libs = None if no_libs is not None else noop_libs.build(NOOP_LIBS)
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        for runtime in ("hsa", "xrt"):
            env = dict(os.environ)
            env["AMD_TRITON_NPU_CACHE_DIR"] = os.path.join(tmp, runtime, "npu")
            env["TRITON_CACHE_DIR"] = os.path.join(tmp, runtime, "triton")
            # First launches, each in a new process: warm ones on the cache the first cold
            # run filled; cold ones on an empty NPU cache each (Triton's own cache stays warm:
            # its part is not the backend's). The tools' wall time of a cold run is what its
            # cache entry's manifest records for the build, subtracted per run (tool times
            # vary too much between processes to subtract across them).
            run([script, runtime, "cold"], env)  # fills the cache the warm runs use
            warm = run([script, runtime, "warm"], env)
            firsts = {k: [] for k in ("warm", "warm-device", "cold", "tools", "ours")}
            for i in range(FIRST_LAUNCH_RUNS):
                got = run([script, runtime, "first"], env)
                firsts["warm"].append(got["backend_first_ms"] - got["device_first_ms"])
                firsts["warm-device"].append(got["device_first_ms"])
                fresh = {**env, "AMD_TRITON_NPU_CACHE_DIR": os.path.join(tmp, f"cold{i}")}
                got = run([script, runtime, "cold"], fresh)
                firsts["cold"].append(got["backend_first_ms"])
                firsts["tools"].append(got["tools_ms"])
                firsts["ours"].append(
                    got["backend_first_ms"] - got["tools_ms"] - got["device_first_ms"]
                )
            firsts = {k: sorted(v) for k, v in firsts.items()}
            if libs is None:
                print(f"SKIP launch_host_overhead_{runtime}: {no_libs}")
            else:
                host_overhead(tmp, script, runtime, noop_environment(libs, runtime, env))
            three(f"launch_warm_call_3args_harness_device_{runtime}", warm["launcher_us"])
            print(f"BENCH launch_device_time_harness_{runtime} {warm['device_us']:.2f} us")
            print(f"BENCH launch_warm_triton_jit_path_{runtime} {warm['triton_path_us']:.2f} us")
            three(f"first_launch_warm_cache_backend_{runtime}", firsts["warm"], "ms")
            three(f"first_launch_warm_cache_device_{runtime}", firsts["warm-device"], "ms")
            print(
                f"BENCH first_launch_warm_cache_triton_{runtime} {warm['triton_first_ms']:.2f} ms"
            )
            three(f"first_launch_cold_backend_{runtime}", firsts["cold"], "ms")
            three(f"first_launch_cold_stand_in_tools_{runtime}", firsts["tools"], "ms")
            three(f"first_launch_cold_backend_excluding_tools_{runtime}", firsts["ours"], "ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
