"""Stopping compiles: Ctrl-C, SIGTERM, SIGKILL and timeouts while a tool runs.

Each case runs a kernel in a child Python process on the conformance harness, with one
stand-in tool hanging (`NPU_HARNESS_HANG`): it logs its pid and a helper's pid (a process in
its group) to `NPU_HARNESS_LOG` and sleeps forever. The test signals the child and checks how
it ended, that no tool process is left, and what the cache and the temporary directory hold.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import harness_env

# One kernel and its launch, on the runtime named by the script's argument (default xrt).
PRELUDE = textwrap.dedent(
    """
    import fcntl, glob, json, os, sys, time
    import torch
    import triton
    import triton.language as tl
    from triton_npu import NPUDriver

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    runtime = sys.argv[1] if len(sys.argv) > 1 else "xrt"
    triton.runtime.driver.set_active(NPUDriver(runtime))
    N = 4096
    x, y = torch.randn(N), torch.randn(N)

    def launch():
        out = torch.empty(N)
        add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        torch.testing.assert_close(out, x + y)

    def report(**facts):
        print("REPORT " + json.dumps(facts), flush=True)
    """
)

SCRIPT = PRELUDE + textwrap.dedent(
    """
    try:
        launch()
        report(outcome="finished")
    except KeyboardInterrupt:
        report(outcome="KeyboardInterrupt", at=time.monotonic())
    except Exception as e:
        report(outcome="error", at=time.monotonic(), type=type(e).__name__, message=str(e))
    else:
        sys.exit(0)

    # What the interrupted build left in the cache: no entry, no staging directory, no lock
    # held (flock conflicts between two open files even within one process).
    root = os.environ["AMD_TRITON_NPU_CACHE_DIR"]
    held = []
    for lock in glob.glob(os.path.join(root, "locks", "*")):
        with open(lock) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held.append(lock)
    report(
        manifests=glob.glob(os.path.join(root, "**", "manifest.json"), recursive=True),
        staging=os.listdir(os.path.join(root, "staging")) if os.path.isdir(os.path.join(root, "staging")) else [],
        held=held,
    )
    # The same kernel builds in this process once the tool behaves.
    os.environ.pop("NPU_HARNESS_HANG", None)
    os.environ.pop("AMD_TRITON_NPU_COMPILE_TIMEOUT", None)
    launch()
    report(outcome="rebuilt")
    """
)


def _start(tmp_path: Path, **extra: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "tools.jsonl"
    env = harness_env(tmp_path, NPU_HARNESS_LOG=str(log), **extra)
    script = tmp_path / "kernel.py"  # Triton reads a @jit function's source from its file
    script.write_text(SCRIPT)
    child = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    return child, log


def _hung(child: subprocess.Popen, log: Path, tool: str, timeout: float = 300) -> list[int]:
    """Waits until `tool` hangs; returns its pid and its helper's."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            out, err = child.communicate()
            raise AssertionError(f"the child ended before {tool} hung:\n{out}\n{err}")
        lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        runs = [
            e["pid"]
            for e in lines
            if e["tool"] == tool and "pid" in e and "--version" not in e["argv"]
        ]
        helpers = [e["helper_pid"] for e in lines if e["tool"] == tool and "helper_pid" in e]
        if runs and helpers:
            return [runs[-1], helpers[-1]]
        time.sleep(0.05)
    raise AssertionError(f"{tool} never hung; log: {log.read_text() if log.exists() else ''}")


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _assert_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in pids if not _gone(p)] == [], "tool processes survived"


def _reports(stdout: str) -> list[dict]:
    return [
        json.loads(line[len("REPORT ") :])
        for line in stdout.splitlines()
        if line.startswith("REPORT ")
    ]


def _finish(child: subprocess.Popen, timeout: float = 300) -> tuple[str, str]:
    try:
        return child.communicate(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()


@pytest.mark.parametrize("tool", ["triton-shared-opt", "air-opt", "aircc"])
def test_ctrl_c_stops_a_compile_with_its_tool_and_leaves_the_cache_consistent(
    tool: str, tmp_path: Path
):
    child, log = _start(tmp_path, NPU_HARNESS_HANG=tool)
    pids = _hung(child, log, tool)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = _finish(child)
    assert child.returncode == 0, out + err
    stopped, cache, rebuilt = _reports(out)
    assert stopped["outcome"] == "KeyboardInterrupt", stopped
    assert stopped["at"] - sent < 5, f"KeyboardInterrupt came {stopped['at'] - sent:.1f} s late"
    _assert_gone(pids)
    assert cache == {"manifests": [], "staging": [], "held": []}
    assert rebuilt == {"outcome": "rebuilt"}


def test_sigterm_ends_a_compiling_python_and_its_tool(tmp_path: Path):
    # Python's default for SIGTERM is to die at once; the tool's group dies with it.
    child, log = _start(tmp_path, NPU_HARNESS_HANG="aircc")
    pids = _hung(child, log, "aircc")
    child.send_signal(signal.SIGTERM)
    _finish(child, timeout=30)
    assert child.returncode == -signal.SIGTERM
    _assert_gone(pids)


def test_a_builder_killed_with_sigkill_leaves_no_tool_and_the_next_compile_cleans_up(
    tmp_path: Path,
):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    child, log = _start(tmp_path, NPU_HARNESS_HANG="aircc", TMPDIR=str(tmp))
    pids = _hung(child, log, "aircc")
    child.kill()
    _finish(child, timeout=30)
    _assert_gone(pids)
    left = sorted(p.name for p in tmp.glob("triton-npu-work-*"))
    assert left, "the killed builder's work directory is the case under test"
    # The next compile (another process) takes over the build and removes the dead
    # builder's work directory.
    child, _ = _start(tmp_path, TMPDIR=str(tmp))
    out, err = _finish(child)
    assert child.returncode == 0, out + err
    assert _reports(out) == [{"outcome": "finished"}]
    assert [p for p in left if (tmp / p).exists()] == []


def test_a_hung_triton_shared_opt_is_killed_at_the_compile_timeout(tmp_path: Path):
    child, log = _start(
        tmp_path, NPU_HARNESS_HANG="triton-shared-opt", AMD_TRITON_NPU_COMPILE_TIMEOUT="2"
    )
    pids = _hung(child, log, "triton-shared-opt")
    out, err = _finish(child, timeout=120)
    stopped = _reports(out)[0]
    assert stopped["outcome"] == "error", out + err
    message = stopped["message"]
    for want in ["triton-shared-opt", "process group", "2 s", "AMD_TRITON_NPU_COMPILE_TIMEOUT"]:
        assert want in message, message
    _assert_gone(pids)


def _hanging_example(examples: Path, marker: Path) -> None:
    (examples / "hang").mkdir(parents=True)
    (examples / "hang" / "hang.py").write_text(
        textwrap.dedent(
            f"""
            import os, subprocess, time
            helper = subprocess.Popen(["sleep", "1000"])
            with open({str(marker)!r} + ".tmp", "w") as f:
                f.write(f"{{os.getpid()}} {{helper.pid}}")
            os.rename({str(marker)!r} + ".tmp", {str(marker)!r})
            time.sleep(1000)
            """
        )
    )


@pytest.mark.parametrize(
    "entry",
    # `python -m triton_npu`, and the installed native binary, which hands test-examples to
    # the Python entry point beside it.
    [[sys.executable, "-m", "triton_npu"], [str(Path(sys.executable).parent / "triton-npu")]],
    ids=["module", "installed"],
)
@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["TERM", "INT"]
)
def test_a_signal_stops_test_examples_with_its_status(
    tmp_path: Path, entry: list[str], signum: int, status: int
):
    examples = tmp_path / "examples"
    marker = tmp_path / "pids"
    _hanging_example(examples, marker)
    env = harness_env(tmp_path, TMPDIR=str(tmp_path))
    child = subprocess.Popen(
        [*entry, "test-examples", str(examples)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the example never started"
    child.send_signal(signum)
    out, _ = _finish(child, timeout=60)
    assert child.returncode == status, out
    assert "INTERRUPTED" in out
    _assert_gone([int(p) for p in marker.read_text().split()])


def test_the_cli_ignores_tools_in_the_current_directory(tmp_path: Path):
    # `PATH=.` names the directory we run in; a tool there is never picked.
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    ran = tmp_path / "ran"
    for name in ("air-opt", "aircc", "triton-shared-opt"):
        tool = cwd / name
        tool.write_text(f"#!/bin/sh\ntouch {ran}\necho '{name} version 1'\n")
        tool.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLIR_AIR", "TRITON_SHARED"))}
    env["PATH"] = ".:"
    r = subprocess.run(
        [sys.executable, "-m", "triton_npu", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )
    components = {c["component"]: c for c in json.loads(r.stdout)["components"]}
    for name in ("air-opt", "aircc", "triton-shared-opt"):
        assert components[name]["status"] == "error", components[name]
    assert not ran.exists()


DEVICE_SCRIPT = PRELUDE + textwrap.dedent(
    """
    launch()  # built, loaded and run once: the next launch only waits on the device
    if runtime == "xrt":
        os.environ["NPU_HARNESS_FAULT"] = "hang"  # the stand-in's runs never complete
    report(outcome="ready")
    try:
        launch()
        report(outcome="finished")
    except KeyboardInterrupt:
        report(outcome="KeyboardInterrupt", at=time.monotonic())
    except Exception as e:
        report(outcome="error", type=type(e).__name__, message=str(e))
    os.environ.pop("NPU_HARNESS_FAULT", None)
    launch()
    report(outcome="again")
    """
)


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_ctrl_c_stops_a_launch_waiting_on_a_hung_device(runtime: str, tmp_path: Path):
    # Long device timeouts: only Ctrl-C can end the wait in time. Under HSA the agent hangs
    # the second packet (the first launch's is the first).
    env = harness_env(
        tmp_path,
        AMD_TRITON_NPU_HSA_TIMEOUT="600",
        AMD_TRITON_NPU_XRT_TIMEOUT="600",
        **({"NPU_HARNESS_FAULT": "hang:2"} if runtime == "hsa" else {}),
    )
    script = tmp_path / "kernel.py"
    script.write_text(DEVICE_SCRIPT)
    child = subprocess.Popen(
        [sys.executable, str(script), runtime],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        first = child.stdout.readline()
        assert first.startswith("REPORT "), first + child.stderr.read()
        assert json.loads(first[len("REPORT ") :]) == {"outcome": "ready"}
        time.sleep(1.0)  # the launch is now waiting on the device
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = _finish(child, timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, out + err
    stopped, again = _reports(out)
    assert stopped["outcome"] == "KeyboardInterrupt", stopped
    assert stopped["at"] - sent < 5, f"KeyboardInterrupt came {stopped['at'] - sent:.1f} s late"
    # The device side was reset (HSA: a new queue; XRT: a new hardware context).
    assert again == {"outcome": "again"}
