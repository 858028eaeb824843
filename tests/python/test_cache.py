"""triton_npu.cache: build once, share between threads and processes, never serve damage."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from triton_npu import cache

INPUTS = {"kernel_name": "add_kernel", "kernel_ir": "module { }", "grid": "4,1,1"}

# A child process that calls get_or_build on INPUTS; its build logs "start", waits for the
# gate file (at most 60 s, then logs "gave-up"), writes the artifact and logs "done".
CHILD = textwrap.dedent(
    """
    import os, pathlib, sys, time
    from triton_npu import cache
    log, gate = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    inputs = {"kernel_name": "add_kernel", "kernel_ir": "module { }", "grid": "4,1,1"}

    def build(d):
        with open(log, "a") as f:
            f.write(f"start {os.getpid()}\\n")
        deadline = time.monotonic() + 60
        while not gate.exists():
            if time.monotonic() > deadline:
                with open(log, "a") as f:
                    f.write("gave-up\\n")
                break
            time.sleep(0.005)
        (d / "aie.elf").write_bytes(b"ELF from " + inputs["kernel_name"].encode())
        with open(log, "a") as f:
            f.write(f"done {os.getpid()}\\n")

    print(cache.get_or_build(inputs, build))
    """
)

PATIENCE = 120.0


@pytest.fixture
def cache_root(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    root = tmp_path / "npu-cache"
    monkeypatch.setenv("AMD_TRITON_NPU_CACHE_DIR", str(root))
    return root


def wait_until(what: str, cond) -> None:
    deadline = time.monotonic() + PATIENCE
    while not cond():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.005)


def blocked_on(path: pathlib.Path) -> int:
    """Lock requests blocked on `path`, from /proc/locks."""
    try:
        inode = f":{path.stat().st_ino} "
    except FileNotFoundError:
        return 0
    with open("/proc/locks") as f:
        return sum(1 for line in f if "->" in line and inode in line)


def build_lock(root: pathlib.Path, inputs: dict) -> pathlib.Path:
    return root / "locks" / f"{cache.key(inputs)}.lock"


def log_lines(log: pathlib.Path, word: str) -> int:
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if line.split(" ")[0] == word)


def spawn_child(log: pathlib.Path, gate: pathlib.Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(log), str(gate)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def test_builds_once_then_hits(cache_root: pathlib.Path):
    calls = []

    def build(d: pathlib.Path) -> None:
        calls.append(d)
        assert isinstance(d, pathlib.Path)
        assert d.is_dir() and not any(d.iterdir())
        (d / "aie.elf").write_bytes(b"\x7fELF")
        (d / "sub").mkdir()
        (d / "sub" / "insts.bin").write_bytes(b"\x01\x02")

    first = cache.get_or_build(INPUTS, build)
    assert isinstance(first, pathlib.Path)
    assert len(calls) == 1
    assert (first / "aie.elf").read_bytes() == b"\x7fELF"
    assert (first / "sub" / "insts.bin").read_bytes() == b"\x01\x02"
    assert first.is_relative_to(cache.cache_dir())

    second = cache.get_or_build(INPUTS, build)
    assert second == first
    assert len(calls) == 1


def test_an_exception_in_build_propagates_as_itself(cache_root: pathlib.Path):
    class CompileFailed(Exception):
        pass

    raised = CompileFailed("aircc exited with status 1")

    def failing(d: pathlib.Path) -> None:
        (d / "aie.elf").write_bytes(b"half")
        raise raised

    with pytest.raises(CompileFailed) as info:
        cache.get_or_build(INPUTS, failing)
    assert info.value is raised

    # Nothing was published: the next call builds.
    calls = []
    path = cache.get_or_build(INPUTS, lambda d: calls.append((d / "aie.elf").write_bytes(b"ok")))
    assert len(calls) == 1
    assert (path / "aie.elf").read_bytes() == b"ok"


def test_inputs_are_checked(cache_root: pathlib.Path):
    def build(d: pathlib.Path) -> None:
        raise AssertionError("must not build")

    with pytest.raises(TypeError, match="must be str or bytes, got int"):
        cache.get_or_build({"grid": 4}, build)
    with pytest.raises(TypeError, match="names must be str"):
        cache.get_or_build({1: "x"}, build)
    with pytest.raises(TypeError, match="mapping"):
        cache.get_or_build([("grid", "4")], build)
    with pytest.raises(TypeError, match="build must be callable"):
        cache.get_or_build(INPUTS, "not callable")


def test_keys_depend_on_every_input():
    base = cache.key(INPUTS)
    assert len(base) == 64 and int(base, 16) >= 0
    assert cache.key(dict(reversed(list(INPUTS.items())))) == base
    assert cache.key({k: v.encode() for k, v in INPUTS.items()}) == base
    for name in INPUTS:
        changed = dict(INPUTS, **{name: INPUTS[name] + " "})
        assert cache.key(changed) != base, name
    assert cache.key(dict(INPUTS, extra="")) != base


def test_cache_dir_follows_the_environment(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    assert cache.cache_dir() == tmp_path / "triton" / "npu"
    monkeypatch.setenv("AMD_TRITON_NPU_CACHE_DIR", str(tmp_path / "own"))
    root = cache.cache_dir()
    assert root == tmp_path / "own"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_a_cache_writable_by_others_is_refused(cache_root: pathlib.Path):
    cache_root.mkdir()
    cache_root.chmod(0o777)
    with pytest.raises(PermissionError, match="refusing to use") as info:
        cache.get_or_build(INPUTS, lambda d: None)
    assert str(cache_root) in str(info.value)
    assert "chmod 700" in str(info.value)


def test_a_damaged_entry_is_rebuilt(cache_root: pathlib.Path):
    calls = []

    def build(d: pathlib.Path) -> None:
        calls.append(d)
        (d / "aie.elf").write_bytes(b"x" * 1000)

    path = cache.get_or_build(INPUTS, build)
    (path / "aie.elf").write_bytes(b"x" * 10)  # truncated
    again = cache.get_or_build(INPUTS, build)
    assert len(calls) == 2
    assert (again / "aie.elf").read_bytes() == b"x" * 1000


def test_threads_build_once(cache_root: pathlib.Path):
    lock = build_lock(cache_root, INPUTS)
    builds = []
    results = []

    def build(d: pathlib.Path) -> None:
        builds.append(threading.get_ident())
        # The other three threads wait on the lock, with the GIL released.
        wait_until("three waiting threads", lambda: blocked_on(lock) == 3)
        (d / "aie.elf").write_bytes(b"once")

    def worker() -> None:
        results.append(cache.get_or_build(INPUTS, build))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PATIENCE)
    assert len(builds) == 1
    assert len(results) == 4 and len(set(results)) == 1


def test_processes_build_once(cache_root: pathlib.Path, tmp_path: pathlib.Path):
    log, gate = tmp_path / "build.log", tmp_path / "gate"
    children = [spawn_child(log, gate) for _ in range(4)]
    wait_until("one build to start", lambda: log_lines(log, "start") == 1)
    wait_until("three waiters", lambda: blocked_on(build_lock(cache_root, INPUTS)) == 3)
    gate.touch()
    outputs = [c.communicate(timeout=PATIENCE) for c in children]
    for child, (_out, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
    paths = {out.strip() for out, _ in outputs}
    assert len(paths) == 1
    assert log_lines(log, "start") == 1
    assert "gave-up" not in log.read_text()
    assert (pathlib.Path(paths.pop()) / "aie.elf").read_bytes() == b"ELF from add_kernel"


def test_the_gil_is_released_while_waiting(cache_root: pathlib.Path, tmp_path: pathlib.Path):
    log, gate = tmp_path / "build.log", tmp_path / "gate"
    builder = spawn_child(log, gate)
    wait_until("the other process to start building", lambda: log_lines(log, "start") == 1)

    result = []
    waiter = threading.Thread(
        target=lambda: result.append(cache.get_or_build(INPUTS, lambda d: None))
    )
    waiter.start()
    # This loop runs Python while the waiter is blocked in the native call: it could not if
    # the waiter held the GIL (the builder would then give up after 60 s and say so).
    wait_until("the waiter to block", lambda: blocked_on(build_lock(cache_root, INPUTS)) == 1)
    gate.touch()
    waiter.join(PATIENCE)
    out, err = builder.communicate(timeout=PATIENCE)
    assert builder.returncode == 0, err
    assert "gave-up" not in log.read_text()
    assert result == [pathlib.Path(out.strip())]
