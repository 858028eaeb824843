"""Drop-in for upstream scripts: `triton.backends.amd_triton_npu.*` import paths, upstream's
script-visible driver behaviours, and `triton-npu test-examples` on the conformance harness.

Everything that depends on import order or process-wide state runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO, harness_env, run_python

EXAMPLES = REPO / "tests" / "examples"
UPSTREAM = "triton.backends.amd_triton_npu"

# Names upstream scripts import from each module (upstream-driver.md §1, §9).
UPSTREAM_NAMES = {
    "driver": [
        "NPUDriver",
        "NPULauncher",
        "NPUUtils",
        "get_npu_cache_dir",
        "detect_npu_version",
        "get_npu_device_info",
        "npu_config",
        "UnsupportedNPUDeviceError",
        "context_releasers",
        "release_external_contexts",
    ],
    "driver_scope": ["driver_scope"],
    "compiler": ["NPUBackend"],
    "config": ["npu_config", "set_config", "config_context"],
    "multilaunch": ["NPUChain", "MultiLaunchBuilder", "MultiLaunchRunner"],
    "shared": [],
}


def _ours(module: str) -> str | None:
    """The triton_npu module an upstream submodule name must be, if it exists yet."""
    import importlib.util

    for name in (f"triton_npu.backend.{module}", f"triton_npu.{module}"):
        if importlib.util.find_spec(name) is not None:
            return name
    return None


def _json_run(code: str, env: dict | None = None, cwd: Path | None = None) -> dict:
    r = run_python(textwrap.dedent(code), env=env, cwd=cwd)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


# --- import paths -------------------------------------------------------------------------


@pytest.mark.parametrize("module", sorted(UPSTREAM_NAMES))
def test_upstream_module_is_the_same_module_object(module: str):
    ours = _ours(module)
    if ours is None:
        pytest.skip(f"triton_npu has no {module} module yet (another issue writes it)")
    result = _json_run(
        f"""
        import importlib, json
        upstream = importlib.import_module("{UPSTREAM}.{module}")
        ours = importlib.import_module("{ours}")
        names = {UPSTREAM_NAMES[module]!r}
        print(json.dumps({{
            "same": upstream is ours,
            "missing": [n for n in names if not hasattr(upstream, n)],
            "identical": all(getattr(upstream, n) is getattr(ours, n) for n in names
                             if hasattr(upstream, n)),
        }}))
        """
    )
    assert result == {"same": True, "missing": [], "identical": True}


def test_upstream_import_statements_as_scripts_write_them():
    result = _json_run(
        f"""
        import json
        import triton
        from {UPSTREAM}.driver import NPUDriver, NPULauncher, get_npu_cache_dir
        from {UPSTREAM}.config import npu_config, set_config, config_context
        from {UPSTREAM} import compiler, config
        import {UPSTREAM}.driver as upstream_driver
        import triton_npu, triton_npu.backend.driver, triton_npu.config, triton_npu._native
        pkg = triton.backends.amd_triton_npu
        print(json.dumps({{
            "driver_cls": NPUDriver is triton_npu.backend.driver.NPUDriver,
            "registered": triton.backends.backends["amd_triton_npu"].driver is NPUDriver,
            "launcher": NPULauncher is triton_npu._native.NPULauncher,
            "config": config is triton_npu.config and npu_config is triton_npu.config.npu_config,
            "attr_chain": pkg.driver is upstream_driver is triton_npu.backend.driver,
            "generic": pkg.cache is triton_npu.cache and pkg.launcher is triton_npu.backend.launcher,
            "package_attr": pkg.config is triton_npu.config,
            "compiler": compiler.NPUBackend is triton.backends.backends["amd_triton_npu"].compiler,
        }}))
        """
    )
    assert result == dict.fromkeys(result, True), result


def test_unknown_upstream_names_fail_like_missing_modules():
    result = _json_run(
        f"""
        import json
        out = {{}}
        try:
            import {UPSTREAM}.no_such_module
        except ModuleNotFoundError as e:
            out["import"] = str(e)
        try:
            from {UPSTREAM} import no_such_name
        except ImportError as e:
            out["from"] = str(e)
        import triton
        try:
            triton.backends.amd_triton_npu.no_such_attr
        except AttributeError as e:
            out["attr"] = str(e)
        print(json.dumps(out))
        """
    )
    assert f"No module named '{UPSTREAM}.no_such_module'" in result["import"]
    assert "no_such_name" in result["from"]
    assert "no_such_attr" in result["attr"] and UPSTREAM in result["attr"]


@pytest.mark.parametrize(
    "first_import",
    [
        "from triton_npu import NPUDriver",
        "import triton_npu.backend.compiler",
        f"import {UPSTREAM}.config",
        "import triton",
    ],
)
def test_any_first_import_registers_the_backend_once(first_import: str):
    result = _json_run(
        f"""
        {first_import}
        import json
        from importlib.metadata import entry_points
        import triton, triton_npu.backend.driver as d
        from {UPSTREAM}.driver import NPUDriver
        eps = [ep.value for ep in entry_points().select(group="triton.backends")
               if ep.name == "amd_triton_npu"]
        print(json.dumps({{
            "entry_points": eps,
            "registered": triton.backends.backends["amd_triton_npu"].driver is d.NPUDriver,
            "same": NPUDriver is d.NPUDriver,
        }}))
        """
    )
    assert result == {"entry_points": ["triton_npu.backend"], "registered": True, "same": True}


def test_nothing_is_written_into_tritons_package():
    import triton

    backends_dir = Path(triton.__file__).parent / "backends"
    assert not (backends_dir / "amd_triton_npu").exists()
    # Triton's in-tree mode loads only its own directories: no NPU backend, and no error.
    r = run_python(
        "import triton; print(sorted(triton.backends.backends))",
        env={"TRITON_BACKENDS_IN_TREE": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert "amd_triton_npu" not in r.stdout


# --- per-thread active driver -------------------------------------------------------------


def test_set_active_in_one_thread_does_not_change_another():
    result = _json_run(
        """
        import json, threading
        import triton
        from triton.runtime.driver import driver as config, DriverConfig
        from triton.backends.amd_triton_npu.driver import NPUDriver

        before = object()   # another backend's driver, active before the NPU driver exists
        config.set_active(before)
        npu_xrt = NPUDriver("xrt")   # switches to per-thread selection
        seen = {"main_after_switch": config.active is before,
                "same_object": triton.runtime.driver is config,
                "still_a_driver_config": isinstance(config, DriverConfig)}

        def in_thread(label, fn):
            t = threading.Thread(target=lambda: seen.__setitem__(label, fn()))
            t.start(); t.join()

        in_thread("worker_inherits_main", lambda: config.active is before)
        config.set_active(npu_xrt)
        in_thread("worker_follows_main", lambda: config.active is npu_xrt)

        own = threading.Event(); main_changed = threading.Event()
        def worker_with_its_own():
            hsa = NPUDriver("hsa")
            config.set_active(hsa)
            own.set(); main_changed.wait(30)
            seen["worker_keeps_its_own"] = config.active is hsa
        t = threading.Thread(target=worker_with_its_own); t.start()
        own.wait(30)
        seen["main_unchanged_by_worker"] = config.active is npu_xrt
        other = object()
        config.set_active(other)
        main_changed.set(); t.join()
        seen["main_sees_its_latest"] = config.active is other

        import asyncio
        async def task(driver):
            config.set_active(driver)
            await asyncio.sleep(0.01)
            return config.active is driver
        async def both():
            return await asyncio.gather(task(object()), task(object()))
        seen["tasks_isolated"] = all(asyncio.run(both()))
        print(json.dumps(seen))
        """
    )
    assert result == dict.fromkeys(result, True), result
    assert len(result) == 9


def test_other_backends_keep_working_after_the_switch():
    result = _json_run(
        """
        import json, threading, os
        import triton
        from triton.runtime.driver import driver as config
        from triton.backends.amd_triton_npu.driver import NPUDriver
        NPUDriver("xrt")
        NPUDriver("hsa")   # a second driver does not switch again
        # Triton's own default selection still works, per thread, through reset_active.
        os.environ["TRITON_DEFAULT_BACKEND"] = "amd_triton_npu"
        out = {"type": type(config).__name__, "bases": [c.__name__ for c in type(config).__mro__]}
        def worker():
            config.reset_active()
            out["worker_default"] = type(config.active).__name__
        t = threading.Thread(target=worker); t.start(); t.join()
        out["main_active_none"] = vars(config)["_active"] is None
        print(json.dumps(out))
        """
    )
    assert result["type"] == "PerContextDriverConfig"
    assert result["bases"][:2] == ["PerContextDriverConfig", "DriverConfig"]
    assert result["worker_default"] == "NPUDriver"
    assert result["main_active_none"] is True


# --- device facts -------------------------------------------------------------------------


def _device_facts(env: dict, runtime: str) -> dict:
    return _json_run(
        f"""
        import json, logging
        logging.basicConfig(level=logging.WARNING)
        from {UPSTREAM}.driver import detect_npu_version, get_npu_device_info
        out = {{"info": get_npu_device_info({runtime!r})}}
        try:
            out["version"] = detect_npu_version({runtime!r})
        except RuntimeError as e:
            out["error"] = str(e)
        print(json.dumps(out))
        """,
        env=env,
    )


@pytest.mark.parametrize(
    "runtime,extra,version,name,columns",
    [
        # The columns are the agent's HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT, not a table of ours.
        ("hsa", {}, "npu2", "aie2p", 8),
        ("hsa", {"NPU_HARNESS_AGENT": "aie2"}, "npu1", "aie2", 4),
        ("hsa", {"NPU_HARNESS_AGENT": "aie2p", "NPU_HARNESS_COLUMNS": "6"}, "npu2", "aie2p", 6),
        # XRT's public API reports no column count.
        ("xrt", {}, "npu2", "NPU Strix", None),
        ("xrt", {"NPU_HARNESS_XRT_DEVICE": "NPU Phoenix"}, "npu1", "NPU Phoenix", None),
        (
            "xrt",
            {"NPU_HARNESS_XRT_DEVICE": "NPU Gorgon Point 2"},
            "npu2",
            "NPU Gorgon Point 2",
            None,
        ),
    ],
)
def test_detect_npu_version_and_device_info(
    runtime: str, extra: dict, version: str, name: str, columns: int | None, tmp_path: Path
):
    result = _device_facts(harness_env(tmp_path, **extra), runtime)
    assert result["version"] == version
    (info,) = result["info"]
    assert info["name"] == name and info["target"] == version and info["runtime"] == runtime
    assert info["arch"] == {"npu1": "aie2", "npu2": "aie2p"}[version]
    assert "bdf" in info
    assert info["columns"] == columns


def test_no_device_is_an_empty_list_and_a_clear_error(tmp_path: Path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    env = harness_env(
        tmp_path,
        AMD_NPU_ROCR_PATH=str(empty),
        AMD_TRITON_NPU_XRT_SHIM=str(empty / "missing.so"),
        PATH=str(empty),
    )
    result = _device_facts(env, "hsa")
    assert result["info"] == []
    assert "AMD_TRITON_NPU_TARGET" in result["error"] and "HSA agent" in result["error"]
    # A configured target needs no device.
    env["AMD_TRITON_NPU_TARGET"] = "npu1"
    assert _device_facts(env, "hsa")["version"] == "npu1"


# --- get_npu_cache_dir and compile-only ---------------------------------------------------

KERNEL = textwrap.dedent(
    """
    import json, os, sys
    import torch, triton, triton.language as tl
    from triton.backends.amd_triton_npu.driver import NPUDriver, get_npu_cache_dir

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    triton.runtime.driver.set_active(NPUDriver(sys.argv[1]))
    N = 4096
    x, y = torch.randn(N), torch.randn(N)
    out = torch.zeros(N)
    """
)


def _run_kernel(tmp_path: Path, body: str, runtime: str, env: dict) -> dict:
    # Triton reads a @jit function's source, so the script must be a file.
    script = tmp_path / f"kernel_{len(list(tmp_path.glob('kernel_*.py')))}.py"
    script.write_text(KERNEL + textwrap.dedent(body))
    r = subprocess.run(
        [sys.executable, str(script), runtime],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_get_npu_cache_dir(runtime: str, tmp_path: Path):
    result = _run_kernel(
        tmp_path,
        """
        import functools
        k = add_kernel.warmup(x, y, out, N, BLOCK=1024, grid=(N // 1024,))
        before = get_npu_cache_dir(k)
        k = add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        torch.testing.assert_close(out, x + y)
        after = get_npu_cache_dir(k)
        k._run = functools.partial(print)   # what a kernel of another backend holds
        try:
            get_npu_cache_dir(k)
            error = None
        except TypeError as e:
            error = str(e)
        print(json.dumps({"before": before, "after": after, "files": sorted(os.listdir(after)),
                          "error": error}))
        """,
        runtime,
        harness_env(tmp_path),
    )
    assert result["before"] is None
    cache_root = Path(harness_env(tmp_path)["AMD_TRITON_NPU_CACHE_DIR"]).resolve()
    assert Path(result["after"]).resolve().is_relative_to(cache_root)
    assert "aie.elf" in result["files"]
    assert ("kernel.hsaco" in result["files"]) == (runtime == "hsa")
    # The transform script air-opt ran is kept in the entry (no matmul: no auto_transform).
    assert "transform.mlir" in result["files"]
    assert "auto_transform.mlir" not in result["files"]
    assert result["error"] and "not compiled for the NPU" in result["error"]


def test_compile_only_returns_none_and_fills_the_cache(tmp_path: Path):
    empty = tmp_path / "no-runtime"
    empty.mkdir()
    log = tmp_path / "tools.jsonl"
    compile_env = harness_env(
        tmp_path,
        AMD_TRITON_NPU_COMPILE_ONLY="1",
        AMD_TRITON_NPU_TARGET="npu2",
        AMD_NPU_ROCR_PATH=str(empty),
        AMD_TRITON_NPU_XRT_SHIM=str(empty / "missing.so"),
        NPU_HARNESS_LOG=str(log),
    )
    result = _run_kernel(
        tmp_path,
        """
        k = add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        returned = k._run(N // 1024, 1, 1, None, k.function, k.packed_metadata, None, None,
                          None, x, y, out, N, 1024)
        print(json.dumps({"returned_none": returned is None,
                          "untouched": int(torch.count_nonzero(out)) == 0,
                          "files": sorted(os.listdir(get_npu_cache_dir(k)))}))
        """,
        "hsa",
        compile_env,
    )
    assert result["returned_none"] and result["untouched"]
    assert {"aie.elf", "kernel.hsaco"} <= set(result["files"])
    compiled = len(log.read_text().splitlines())
    assert compiled > 0
    # The cache it built serves a process that runs the kernel: no tool runs again.
    run_env = harness_env(tmp_path, NPU_HARNESS_LOG=str(log))
    _run_kernel(
        tmp_path,
        """
        add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        torch.testing.assert_close(out, x + y)
        print(json.dumps({}))
        """,
        "hsa",
        run_env,
    )
    ran_again = [json.loads(line) for line in log.read_text().splitlines()[compiled:]]
    assert [t["tool"] for t in ran_again if t["tool"] != "triton-shared-opt"] == []


# --- upstream-style examples --------------------------------------------------------------


def _private_tmp(env: dict) -> dict:
    """`env` with TMPDIR inside the test's directory: the logs a failed run keeps stay there."""
    tmp = Path(env["AMD_TRITON_NPU_CACHE_DIR"]).parent / "tmp"
    tmp.mkdir(exist_ok=True)
    return {**env, "TMPDIR": str(tmp)}


def _test_examples(args: list[str], env: dict, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "triton_npu", "test-examples", *args],
        capture_output=True,
        text=True,
        env=_private_tmp(env),
        timeout=900,
        **kw,
    )


def _summary_rows(stdout: str) -> dict[str, str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("EXAMPLE "))
    rows = {}
    for line in lines[start + 1 :]:
        parts = line.split()
        if len(parts) < 3 or " script(s): " in line or line.startswith("logs:"):
            break
        rows[f"{parts[0]}/{parts[1]}"] = parts[2]
    return rows


def _transform_scripts_used(air_project: Path) -> dict[str, str]:
    """Kernel name → the transform script its lowering ran with (from the kept IR dirs)."""
    used = {}
    for script in air_project.glob("*/transform.mlir"):
        kernel = script.parent.name.split("-", 1)[0]  # <kernel>-<timestamp>-…
        assert used.setdefault(kernel, script.read_text()) == script.read_text()
    return used


# The four examples these tests pick; tests/python/test_examples.py runs the whole suite.
PICKED = ["-t", "vec-add", "-t", "relu", "-t", "axpy", "-t", "softmax"]


def test_examples_run_unchanged_under_xrt(tmp_path: Path):
    air_project = tmp_path / "air_project"
    env = harness_env(
        tmp_path, AMD_TRITON_NPU_AIR_PROJECT_PATH=str(air_project), AMD_TRITON_NPU_RUNTIME="xrt"
    )
    r = _test_examples([str(EXAMPLES), "--device", "aie2p", *PICKED], env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _summary_rows(r.stdout) == {
        "axpy/axpy.py": "PASS",
        "relu/relu.py": "PASS",
        "softmax/softmax.py": "PASS",
        "vec-add/vec-add.py": "PASS",
    }
    assert "4 script(s): 4 passed, 0 skipped, 0 failed, 0 timed out" in r.stdout

    # Each example's kernel was lowered with that example's transform script, as air-opt got
    # it: with the library sequences it includes expanded (`triton-npu transform expand`).
    def script(name: str) -> str:
        path = EXAMPLES / name / "transform_aie2p.mlir"
        expand = [sys.executable, "-m", "triton_npu", "transform", "expand", str(path)]
        r = subprocess.run([*expand, "--target", "npu2"], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert _transform_scripts_used(air_project) == {
        "add_kernel": script("vec-add"),
        "relu_kernel": script("relu"),
        "axpy_kernel": script("axpy"),
        "softmax_kernel": script("softmax"),
    }


def test_examples_run_unchanged_under_hsa(tmp_path: Path):
    env = harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME="hsa")
    r = _test_examples([str(EXAMPLES), "--device", "aie2p", *PICKED], env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _summary_rows(r.stdout) == {
        "axpy/axpy.py": "PASS",
        "relu/relu.py": "PASS",
        "softmax/softmax.py": "PASS",
        "vec-add/vec-add.py": "PASS",
    }
    assert "4 script(s): 4 passed, 0 skipped, 0 failed, 0 timed out" in r.stdout


def test_an_example_runs_from_its_directory_as_upstreams_runner_starts_it(tmp_path: Path):
    env = harness_env(tmp_path, AIR_TRANSFORM_TILING_SCRIPT="transform_aie2p.mlir")
    r = subprocess.run(
        [sys.executable, "vec-add.py"],
        cwd=EXAMPLES / "vec-add",
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "vec-add N=16384: ok" in r.stdout


def _copy_example(dest: Path, name: str) -> None:
    shutil.copytree(EXAMPLES / name, dest / name)


def test_a_failing_example_fails_the_run_and_shows_its_log(tmp_path: Path):
    examples = tmp_path / "examples"
    _copy_example(examples, "relu")
    wrong = examples / "wrong-reference"
    wrong.mkdir()
    # A real kernel checked against the wrong reference: the harness computes x + y.
    source = (EXAMPLES / "vec-add" / "vec-add.py").read_text()
    assert "out, x + y," in source
    (wrong / "wrong.py").write_text(source.replace("out, x + y,", "out, x * y,"))
    (examples / "skipper").mkdir()
    (examples / "skipper" / "skip.py").write_text(
        "import sys\nprint('needs a device with 16 columns')\nsys.exit(77)\n"
    )
    env = harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME="hsa")
    r = _test_examples([str(examples), "--device", "aie2p"], env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert _summary_rows(r.stdout) == {
        "relu/relu.py": "PASS",
        "skipper/skip.py": "SKIP",
        "wrong-reference/wrong.py": "FAIL",
    }
    assert "3 script(s): 1 passed, 1 skipped, 1 failed, 0 timed out" in r.stdout
    assert "SKIP" in r.stdout and "needs a device with 16 columns" in r.stdout
    assert "Mismatched elements" in r.stdout  # the tail of the failing script's log
    log_line = next(line for line in r.stdout.splitlines() if line.strip().startswith("log: "))
    log_file = Path(log_line.split("log: ", 1)[1])
    assert log_file.is_relative_to(tmp_path)
    assert "AssertionError" in log_file.read_text()


def _sleeper(examples: Path, marker: Path) -> None:
    """An example that starts a helper process, says so, and then never finishes."""
    (examples / "hang").mkdir(parents=True)
    (examples / "hang" / "hang.py").write_text(
        textwrap.dedent(
            f"""
            import os, subprocess, time
            helper = subprocess.Popen(["sleep", "1000"])
            tmp = {str(marker)!r} + ".tmp"
            with open(tmp, "w") as f:
                f.write(str(helper.pid))
            os.rename(tmp, {str(marker)!r})
            time.sleep(1000)
            """
        )
    )


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _gone(pid)


def test_an_example_that_overruns_is_killed_with_its_processes(tmp_path: Path):
    examples = tmp_path / "examples"
    marker = tmp_path / "helper.pid"
    _sleeper(examples, marker)
    (examples / "quick").mkdir()
    (examples / "quick" / "quick.py").write_text("print('done')\n")
    r = _test_examples([str(examples), "--timeout", "3"], harness_env(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert _summary_rows(r.stdout) == {"hang/hang.py": "TIMEOUT", "quick/quick.py": "PASS"}
    assert "1 passed, 0 skipped, 0 failed, 1 timed out" in r.stdout
    assert _wait_gone(int(marker.read_text())), "the example's helper survived the timeout"


def test_interrupting_the_run_kills_the_running_example(tmp_path: Path):
    examples = tmp_path / "examples"
    marker = tmp_path / "helper.pid"
    _sleeper(examples, marker)
    proc = subprocess.Popen(
        [sys.executable, "-m", "triton_npu", "test-examples", str(examples)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_private_tmp(harness_env(tmp_path)),
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the example never started"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert "INTERRUPTED" in out
    assert _wait_gone(int(marker.read_text())), "the example's helper survived the interrupt"


def test_bad_input_is_refused_with_exit_status_2(tmp_path: Path):
    env = harness_env(tmp_path)
    r = _test_examples([str(EXAMPLES), "-t", "no-such-example"], env)
    assert r.returncode == 2
    assert "no-such-example" in r.stderr and "vec-add" in r.stderr
    r = _test_examples([str(tmp_path)], env)
    assert r.returncode == 2 and "holds no example directories" in r.stderr
    r = _test_examples([str(EXAMPLES), "--timeout", "0"], env)
    assert r.returncode == 2 and "--timeout" in r.stderr
