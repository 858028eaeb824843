"""The kernel cache shared through Triton's remote-cache interface, on a real ``redis-server``.

Each test starts its own ``redis-server`` on 127.0.0.1 with a free port (Debian's
``redis-server``, installed by ``make test``), and uses Triton's own
``triton.runtime.cache:RedisRemoteCacheBackend`` unchanged. Triton's stages are shared through
Triton's ``RemoteCacheManager`` on the same Redis, as a team would set it up, so a process with
empty local caches runs no tool at all.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import harness_env
from test_launch import run_kernels

REDIS = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(
    REDIS is None, reason="redis-server is not installed (make test installs Debian's package)"
)

BODY = """
    x, y = torch.randn(N), torch.randn(N); out = torch.empty(N)
    add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
    torch.testing.assert_close(out, x + y)
    import json
    from triton_npu._loader import native
    print(json.dumps({}))
    """


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    def __init__(self, tmp: Path):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                REDIS,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(tmp),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        self.client = redis.Redis(host="127.0.0.1", port=self.port)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def redis_server(tmp_path: Path):
    server = Redis(tmp_path)
    yield server
    server.stop()


def team_env(root: Path, redis: Redis, log: Path, **extra: str) -> dict:
    """A process of the team: Triton's Redis backend for our cache and Triton's stages; an
    empty value in `extra` unsets that variable."""
    settings = {
        "NPU_HARNESS_LOG": str(log),
        "TRITON_REMOTE_CACHE_BACKEND": "triton.runtime.cache:RedisRemoteCacheBackend",
        "TRITON_CACHE_MANAGER": "triton.runtime.cache:RemoteCacheManager",
        "TRITON_REDIS_HOST": "127.0.0.1",
        "TRITON_REDIS_PORT": str(redis.port),
    }
    settings.update(extra)
    env = harness_env(root, **{k: v for k, v in settings.items() if v})
    for k, v in settings.items():
        if not v:
            env.pop(k, None)
    return env


def tools(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [json.loads(line)["tool"] for line in log.read_text().splitlines()]


def entry_keys(redis: Redis) -> list[bytes]:
    return [k for k in redis.client.keys("*") if k.endswith(b":triton-npu-entry")]


def stats(env: dict) -> str:
    out = subprocess.run(
        [str(Path(__file__).resolve().parents[2] / ".venv/bin/triton-npu"), "cache", "stats"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_a_new_machine_gets_a_kernel_another_built_without_running_a_tool(
    runtime: str, tmp_path: Path, redis_server: Redis
):
    first_log, second_log = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    run_kernels(BODY, runtime, team_env(tmp_path / "first", redis_server, first_log))
    assert {"air-opt", "aircc"} <= set(tools(first_log))
    assert len(entry_keys(redis_server)) == 1, redis_server.client.keys("*")

    second = team_env(tmp_path / "second", redis_server, second_log)
    run_kernels(BODY, runtime, second)
    assert tools(second_log) == [], "the second process ran tools"
    # The fetched entry is the built one, byte for byte, and verifies.
    first_root, second_root = tmp_path / "first/npu-cache", tmp_path / "second/npu-cache"
    first_entries = sorted((first_root / "entries").glob("*/*"))
    second_entries = sorted((second_root / "entries").glob("*/*"))
    assert [e.name for e in first_entries] == [e.name for e in second_entries]
    for a, b in zip(first_entries, second_entries, strict=True):
        for f in sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file()):
            assert (a / f).read_bytes() == (b / f).read_bytes(), f
    text = stats(second)
    assert "remote:   1 hits, 0 misses, 0 errors" in text, text


def damage_and_rebuild(tmp_path: Path, redis: Redis, damage) -> str:
    first_log, second_log = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    run_kernels(BODY, "hsa", team_env(tmp_path / "first", redis, first_log))
    (key,) = entry_keys(redis)
    redis.client.set(key, damage(redis.client.get(key)))
    second = team_env(tmp_path / "second", redis, second_log)
    proc_env = dict(second)
    run_kernels(BODY, "hsa", proc_env)
    assert "aircc" in tools(second_log), "built locally"
    return stats(second)


def test_a_corrupt_value_is_ignored_and_the_kernel_built_locally(
    tmp_path: Path, redis_server: Redis
):
    def flip(value: bytes) -> bytes:
        b = bytearray(value)
        b[-100] ^= 0x01
        return bytes(b)

    text = damage_and_rebuild(tmp_path, redis_server, flip)
    assert "remote:   0 hits, 0 misses, 1 errors" in text, text


def test_a_truncated_value_is_ignored(tmp_path: Path, redis_server: Redis):
    text = damage_and_rebuild(tmp_path, redis_server, lambda v: v[: len(v) // 2])
    assert "1 errors" in text, text


def test_an_oversized_value_is_ignored_and_an_oversized_entry_not_published(
    tmp_path: Path, redis_server: Redis
):
    log = tmp_path / "a.jsonl"
    run_kernels(
        BODY,
        "hsa",
        team_env(tmp_path / "a", redis_server, log, AMD_TRITON_NPU_REMOTE_CACHE_MAX_BYTES="1K"),
    )
    assert entry_keys(redis_server) == [], "an entry above the cap was published"
    run_kernels(BODY, "hsa", team_env(tmp_path / "b", redis_server, tmp_path / "b.jsonl"))
    assert len(entry_keys(redis_server)) == 1
    c_log = tmp_path / "c.jsonl"
    c = team_env(tmp_path / "c", redis_server, c_log, AMD_TRITON_NPU_REMOTE_CACHE_MAX_BYTES="1K")
    run_kernels(BODY, "hsa", c)
    assert "aircc" in tools(c_log)
    assert "1 errors" in stats(c)


def test_read_mode_publishes_nothing(tmp_path: Path, redis_server: Redis):
    env = team_env(
        tmp_path / "a", redis_server, tmp_path / "a.jsonl", AMD_TRITON_NPU_REMOTE_CACHE="read"
    )
    run_kernels(BODY, "hsa", env)
    assert entry_keys(redis_server) == []


def test_redis_stopped_mid_run_costs_one_timeout_and_the_kernels_still_run(
    tmp_path: Path, redis_server: Redis
):
    log = tmp_path / "tools.jsonl"
    env = team_env(
        tmp_path / "a",
        redis_server,
        log,
        AMD_TRITON_NPU_REMOTE_CACHE_TIMEOUT="2",
        TRITON_CACHE_MANAGER="",
    )
    body = f"""
        import time, subprocess
        x, y = torch.randn(N), torch.randn(N); out = torch.empty(N)
        add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        torch.testing.assert_close(out, x + y)
        # Redis dies mid-run.
        import os, signal
        os.kill({redis_server.proc.pid}, signal.SIGKILL)
        time.sleep(0.2)
        started = time.monotonic()
        relu_kernel[(N // 1024,)](x, out, N, BLOCK=1024)
        torch.testing.assert_close(out, torch.relu(x))
        sub_mul_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        torch.testing.assert_close(out, (x - y) * y)
        elapsed = time.monotonic() - started
        import json
        print(json.dumps({{"elapsed": elapsed}}))
        """
    result = run_kernels(body, "hsa", env)
    redis_server.proc.wait()
    # Two more kernels built locally; the dead remote was asked once (a refused connection
    # fails at once; a hung one would cost the 2 s timeout once), then never again.
    assert result["elapsed"] < 60
    text = stats(env)
    assert "1 errors" in text, text
