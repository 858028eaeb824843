"""The kernel cache's remote: Triton's configured remote-cache backend, shared by a team.

Triton defines how compiled artifacts are shared: ``TRITON_REMOTE_CACHE_BACKEND=module:Class``
names a ``triton.runtime.cache.RemoteCacheBackend`` (Triton's own
``triton.runtime.cache:RedisRemoteCacheBackend`` with ``TRITON_REDIS_HOST``,
``TRITON_REDIS_PORT`` and ``TRITON_REDIS_KEY_FORMAT``, or a class of your own). When it is set,
the kernel cache asks that backend for a kernel it does not have before building it, and
publishes every kernel it builds: the whole entry as one value, under the entry's key (the
backend is created as ``Class(key)`` and the value is its file ``triton-npu-entry``). A value is
used only if every file matches the entry's manifest; anything else is ignored with a warning.

Trust: a shared cache decides what runs on every NPU that uses it, so using one means trusting
everyone who can write to it. ``AMD_TRITON_NPU_REMOTE_CACHE=read`` fetches but never publishes
(e.g. for pull-request CI), ``off`` never uses it. A remote that fails or does not answer within
``AMD_TRITON_NPU_REMOTE_CACHE_TIMEOUT`` seconds (default 5) is not asked again by the process.

The native cache calls ``_describe``, ``_get`` and ``_put`` (taking the GIL for them only).
"""

from __future__ import annotations

import os
import threading

__all__ = ["FILENAME", "backend_class", "describe"]

#: The file name under which an entry is stored in the backend.
FILENAME = "triton-npu-entry"

_ENV = "TRITON_REMOTE_CACHE_BACKEND"


def _knobs():
    from triton import knobs

    # triton 3.9's RedisRemoteCacheBackend reads ``knobs.cache.redis``, which 3.9 never
    # defines (its Redis settings are ``knobs.redis``): without this alias Triton's own backend
    # fails with AttributeError before connecting.
    if not hasattr(knobs.cache, "redis") and hasattr(knobs, "redis"):
        knobs.cache.redis = knobs.redis
    return knobs


def backend_class():
    """The backend class ``TRITON_REMOTE_CACHE_BACKEND`` names, or ``None`` when unset."""
    if not os.environ.get(_ENV):
        return None
    return _knobs().cache.remote_manager_class


def describe() -> str | None:
    """What the configured remote is (``None`` when none is configured)."""
    cls = backend_class()
    if cls is None:
        return None
    text = f"{cls.__module__}:{cls.__qualname__}"
    if any(c.__name__ == "RedisRemoteCacheBackend" for c in cls.mro()):
        redis = _knobs().redis
        text += f" (redis {redis.host}:{redis.port}, keys {redis.key_format})"
    return text


def _describe() -> str | None:
    return describe()


def _backend(key: str):
    cls = backend_class()
    if cls is None:
        raise RuntimeError(f"{_ENV} is not set")
    return cls(key)


def _with_timeout(call, timeout: float):
    """Runs `call` on a daemon thread and waits at most `timeout` seconds for it: a backend
    may block for long (redis-py retries a refused connection with back-off), and a daemon
    thread left behind never keeps the process from exiting."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the caller as is
            outcome["error"] = e

    worker = threading.Thread(target=run, name="triton-npu-remote-cache", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"no answer within {timeout:.1f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _get(key: str, timeout: float) -> bytes | None:
    def call():
        found = _backend(key).get([FILENAME])
        return found.get(FILENAME) if found else None

    value = _with_timeout(call, timeout)
    if value is None:
        return None
    if isinstance(value, str):
        value = value.encode("latin-1")
    return bytes(value)


def _put(key: str, value: bytes, timeout: float) -> None:
    _with_timeout(lambda: _backend(key).put(FILENAME, value), timeout)
