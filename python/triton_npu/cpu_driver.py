"""``CPUDriver``: upstream's CPU reference backend, through Triton's own interpreter.

Upstream's ``examples/benchmark.py`` imports ``CPUDriver`` from
``triton.backends.triton_shared.driver``, which only the triton-shared backend provides (upstream
builds it into its own triton wheel). When triton-shared is not installed,
``triton.backends.triton_shared.driver`` is this module (see ``triton_npu._triton_shared_names``),
so the import works; an installed triton-shared is never shadowed.

This ``CPUDriver`` runs kernels on the CPU with Triton's interpreter (what ``TRITON_INTERPRET=1``
selects): while it is the active driver (``triton.runtime.driver.set_active(CPUDriver())``,
per thread as with ``NPUDriver``), launching a ``@triton.jit`` kernel runs it through
``triton.runtime.interpreter.InterpretedFunction`` — the kernel's Python, block by block,
on numpy — instead of compiling it. Nothing is compiled, so no toolchain is needed; it is slow
(fine for reference results, not for timing). Kernel arguments are host tensors, as for the
NPU. The interpreter cannot compute bfloat16, so bfloat16 tensors reach it as float32
mirrors and results are rounded back (see ``_bf16_as_f32``): bf16 kernels compute in
float32. A kernel the interpreter cannot run raises Triton's ``InterpreterError``; for
triton-shared's compiled CPU backend (LLVM), install triton-shared into your triton.

Interpreted launches run one at a time, and never at the same time as a compiled launch in
another thread: the interpreter switches Triton to interpreter mode and patches
``triton.language`` process-wide for the duration of a launch.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from triton_npu._host_driver import HostMemoryDriver

__all__ = ["CPUDriver"]

# Marks our JITFunction.run hook and the interpreted function kept on a kernel, also across
# reloads of this module.
_MARK = "_triton_npu_cpu_driver"

_hook_lock = threading.Lock()


class _Launches:
    """Interpreted launches run alone: they switch Triton to interpreter mode and patch
    ``triton.language``, process-wide. Compiled launches (any thread, any backend) run
    together, but never while an interpreted one runs, so no compile sees that mode."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._compiled = 0
        self._interpreting: int | None = None  # the thread running an interpreted launch
        self._depth = 0

    @contextlib.contextmanager
    def compiled(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            while self._interpreting not in (None, me):
                self._cond.wait()
            self._compiled += 1
        try:
            yield
        finally:
            with self._cond:
                self._compiled -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def interpreted(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._interpreting != me:
                while self._interpreting is not None or self._compiled:
                    self._cond.wait()
                self._interpreting = me
            self._depth += 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if self._depth == 0:
                    self._interpreting = None
                    self._cond.notify_all()


_launches = _Launches()


class CPUDriver(HostMemoryDriver):
    """Runs kernels on the CPU through Triton's interpreter (upstream: triton-shared's
    ``CPUDriver``). Select it with ``triton.runtime.driver.set_active(CPUDriver())``."""

    DEVICE = "cpu"
    WHAT = "CPU driver"

    def __init__(self) -> None:
        from triton_npu._active_driver import make_active_driver_per_context

        make_active_driver_per_context()
        _install_run_hook()

    @staticmethod
    def is_active() -> bool:
        return False

    def time_ms(self, fn: Callable[[], Any]) -> float:
        """Wall-clock time (interpreted kernels run on the calling thread)."""
        started = time.perf_counter()
        fn()
        return (time.perf_counter() - started) * 1e3


class InterpretedKernel:
    """What a launch (or ``warmup``) returns under the CPU driver, in place of Triton's
    ``CompiledKernel``: the kernel ran in the interpreter, so nothing was compiled.

    Scripts written for triton-shared's CPU backend read the compiled kernel's ``asm`` (e.g.
    ``asm["ttsharedir"]``, as upstream's multi_drivers example does). ``asm`` and ``metadata``
    compile the kernel for those arguments on first use, as the NPU backend compiles it (TTIR,
    then the Linalg triton-shared-opt makes) without running it; so reading them needs
    triton-shared-opt, and running kernels on the CPU does not."""

    def __init__(self, jit_function: Any, args: tuple, kwargs: dict, grid: Any) -> None:
        self.function = jit_function
        self.name = jit_function.fn.__name__
        self._args = args
        self._kwargs = kwargs
        self._grid = grid
        self._compiled: Any = None

    def compiled(self) -> Any:
        """The kernel compiled by the NPU backend for these arguments (made once)."""
        if self._compiled is None:
            from triton.runtime.driver import driver as config

            from triton_npu.backend.driver import NPUDriver
            from triton_npu.config import config_context

            previous = config._active
            config.set_active(NPUDriver())
            try:
                with config_context(compile_only=True):
                    self._compiled = self.function.warmup(
                        *self._args, grid=self._grid, **self._kwargs
                    )
            finally:
                config._active = previous
        return self._compiled

    @property
    def asm(self) -> dict:
        return self.compiled().asm

    @property
    def metadata(self) -> Any:
        return self.compiled().metadata


def _cpu_driver_active() -> bool:
    from triton.runtime.driver import driver as config

    # `_active`, not `active`: reading `active` would create the default driver.
    return isinstance(getattr(config, "_active", None), CPUDriver)


def _interpreted(jit_function: Any) -> Any:
    """The interpreter's function for a ``JITFunction`` (made once, kept on it)."""
    found = getattr(jit_function, _MARK, None)
    if found is None:
        from triton.runtime.interpreter import InterpretedFunction

        found = InterpretedFunction(
            jit_function.fn,
            version=jit_function.version,
            do_not_specialize=jit_function.do_not_specialize,
            do_not_specialize_on_alignment=jit_function.do_not_specialize_on_alignment,
            debug=jit_function.debug,
            noinline=jit_function.noinline,
        )
        setattr(jit_function, _MARK, found)
    return found


def _call_interpreted(jit_function: Any, *args: Any, **kwargs: Any) -> Any:
    """A helper ``@triton.jit`` function called by an interpreted kernel. As the interpreter
    does for its own functions, ``triton.language`` as the helper's module sees it is patched
    for the call, but here the patch is undone when the call returns: the same modules serve
    compiled launches afterwards."""
    from triton.runtime.errors import InterpreterError
    from triton.runtime.interpreter import _patch_lang

    scope = _patch_lang(jit_function.fn)
    try:
        return _interpreted(jit_function).rewrite()(*args, **kwargs)
    except InterpreterError:
        raise
    except Exception as e:
        raise InterpreterError(repr(e)) from e
    finally:
        scope.restore()


def _bf16_as_f32(args: tuple, kwargs: dict) -> tuple[tuple, dict, Callable[[], None]]:
    """Triton's interpreter keeps bfloat16 as raw 16-bit patterns and computes on them
    (it "does not support operations on bfloat16": Triton's debugging guide; e.g.
    triton-lang/triton#11584), so a bfloat16 tensor argument is handed to it as a float32 mirror
    of its whole storage (same sizes, strides and offset; arguments sharing storage share the
    mirror). The kernel computes in float32; ``write_back`` rounds the mirrors back into the
    bfloat16 storage, as a store of float32 results to bfloat16 memory does."""
    mirrors: dict[int, tuple[Any, Any]] = {}

    def swap(value: Any) -> Any:
        import torch

        if not isinstance(value, torch.Tensor) or value.dtype != torch.bfloat16:
            return value
        storage = value.untyped_storage()
        key = storage.data_ptr()
        if key not in mirrors:
            whole = torch.empty(0, dtype=torch.bfloat16, device=value.device).set_(storage)
            mirrors[key] = (whole, whole.to(torch.float32))
        return mirrors[key][1].as_strided(value.size(), value.stride(), value.storage_offset())

    def write_back() -> None:
        for whole, mirror in mirrors.values():
            whole.copy_(mirror)

    return (
        tuple(swap(a) for a in args),
        {k: swap(v) for k, v in kwargs.items()},
        write_back,
    )


def _run_interpreted(jit_function: Any, args: tuple, grid: Any, warmup: bool, kwargs: dict) -> Any:
    from triton import knobs
    from triton.runtime.jit import JITFunction

    launch = InterpretedKernel(jit_function, args, kwargs, grid)
    if warmup:
        return launch  # nothing to run, and nothing compiles until asked
    interpreted = _interpreted(jit_function)
    for hook in getattr(jit_function, "pre_run_hooks", ()):
        if hook not in interpreted.pre_run_hooks:
            interpreted.add_pre_run_hook(hook)
    with _launches.interpreted():
        call = JITFunction.__call__
        interpret = knobs.runtime.interpret
        # As under TRITON_INTERPRET=1: helper @triton.jit functions the kernel calls run
        # interpreted too, and Triton's own code takes its interpreter paths.
        JITFunction.__call__ = _call_interpreted
        knobs.runtime.interpret = True
        try:
            run_args, run_kwargs, write_back = _bf16_as_f32(args, kwargs)
            interpreted.run(*run_args, grid=grid, warmup=False, **run_kwargs)
            write_back()
        finally:
            knobs.runtime.interpret = interpret
            JITFunction.__call__ = call
    return launch


def _install_run_hook() -> None:
    """Makes ``JITFunction.run`` (what ``kernel[grid](...)`` calls) run the interpreter while a
    ``CPUDriver`` is the calling thread's active driver; nothing changes otherwise."""
    from triton.runtime.jit import JITFunction

    with _hook_lock:
        if getattr(JITFunction.run, _MARK, False):
            return
        compiled_run = JITFunction.run

        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if _cpu_driver_active():
                return _run_interpreted(self, args, grid, warmup, kwargs)
            with _launches.compiled():
                return compiled_run(self, *args, grid=grid, warmup=warmup, **kwargs)

        run.__doc__ = compiled_run.__doc__
        setattr(run, _MARK, True)
        JITFunction.run = run
