"""Several Triton kernels as one NPU dispatch (upstream's ``multilaunch``).

A chain stitches the AIR of several ops into one module with one ``air.launch`` per op,
compiles it once into one full ELF (npu2: the array is reloaded between launches) and
dispatches it once per :meth:`NPUChain.run` over one set of buffers. On npu1, or with the
``xclbin``/``pdi`` format, each op is compiled on its own and the ops are dispatched one
after another over the same buffers. Ops
hand data to each other through a buffer they share (the same *combined index* in their
``arg_map``): it stays in device memory and is never copied back.

* :class:`MultiLaunchBuilder` — add ops (ttsharedir text), get the combined argument types,
  the stitched module text, and the compiled ELF (cached like kernels: a warm cache runs no
  tool).
* :class:`MultiLaunchRunner` — dispatch a compiled chain over persistent buffers per
  ``bo_key``.
* :class:`NPUChain` — the model-facing wrapper: ``add`` Triton kernels, ``run`` numpy arrays.

Everything but capturing kernels and handing arrays over runs in the native core
(``crates/npu-driver/src/chain.rs``).

Extension over upstream: both runtimes run chains (HSA through ``kernel.hsaco``); the runtime
is ``npu_config.runtime`` unless given, and :class:`NPUChain` follows an active
``NPUDriver``'s runtime.
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from triton_npu._host import facts
from triton_npu._loader import native
from triton_npu.errors import HardwareContextsExhaustedError

__all__ = ["ChainOp", "MultiLaunchBuilder", "MultiLaunchRunner", "NPUChain"]


class ChainOp(NamedTuple):
    """One op of a :class:`MultiLaunchBuilder` (see :attr:`MultiLaunchBuilder.ops`)."""

    prefix: str
    kernel: str
    asm_src: str
    grid: list[int]
    arg_map: dict[int, int]
    arg_types: list[str]
    transform_script: str | None
    actual_sizes: list[int] | None


class MultiLaunchBuilder:
    """Accumulates ops and compiles them into one multi-launch ELF.

    ``arg_map`` maps each op's buffer parameter (its pointer arguments, counted from 0) to a
    combined index; giving a producer's output and a consumer's input the same combined index
    wires the hand-off. A combined index has one element type (a conflict is a
    ``ValueError``), and combined indices must be ``0..N-1``.
    """

    def __init__(
        self, name: str, air_project_path: Any = None, *, runtime: str | None = None
    ) -> None:
        self.name = name
        self.air_project_path = air_project_path
        self._native = native().ChainBuilder(
            name,
            runtime=runtime,
            host=facts(),
            air_project_path=None if air_project_path is None else str(air_project_path),
        )
        self._module_text: str | None = None
        self.compiled: Any = None

    def add_op(
        self,
        asm_src: str | bytes,
        grid: Sequence[int] | int,
        arg_map: Mapping[int, int],
        transform_script: Any = None,
        actual_sizes: Any = None,
    ) -> None:
        """Registers the next op: its ttsharedir text, grid, ``arg_map``, and optionally its
        own transform script (a path) and actual sizes (``"M,N,1"``). Nothing compiles yet."""
        self._native.add_op(
            asm_src,
            grid,
            dict(arg_map),
            None if transform_script is None else str(transform_script),
            actual_sizes,
        )
        self._module_text = None
        self.compiled = None

    @property
    def ops(self) -> list[ChainOp]:
        """The ops added so far, in order (upstream's ``ops``): each a :class:`ChainOp` with
        its ``prefix`` (``op<k>``, its names' prefix in the stitched module), ``kernel``
        name, ``asm_src`` (ttsharedir), ``grid``, ``arg_map``, ``arg_types`` (its buffer
        parameters' types), ``transform_script`` and ``actual_sizes``. Ops are lowered when
        the chain is built, so an op holds its ttsharedir, not upstream's ``air_text``."""
        ops = []
        for op in self._native.ops:
            script = op.pop("transform_script")
            ops.append(ChainOp(**op, transform_script=None if script is None else str(script)))
        return ops

    def cache_key(
        self, output_format: str | None = None, npu_version: str | None = None, text: Any = None
    ) -> str:
        """The key of the cache entry :meth:`compile` uses for ``output_format`` on
        ``npu_version`` (``"npu1"``/``"npu2"``; both default to what :meth:`compile` would
        pick). Computed from what the artifacts depend on — every op's IR, grid, ``arg_map``,
        sizes and transform script, and the configuration — without running any tool; the
        stitched ``text`` follows from those, so upstream's ``text`` argument changes
        nothing."""
        return self._native.cache_key(output_format, npu_version)

    def combined_arg_types(self) -> list[str]:
        """The combined arguments' types (``memref<*xf32>``…), by combined index."""
        return self._native.combined_arg_types()

    def build_module_text(self) -> str:
        """The stitched AIR module aircc compiles (lowers every op with ``air-opt``)."""
        if self._module_text is None:
            self._module_text = self._native.build_module_text()
        return self._module_text

    def compile(self, output_format: str | None = None) -> tuple[Any, Any]:
        """Compiles the chain (or finds it in the cache).

        * ``"elf"`` (npu2's default): the stitched module as one full ELF, one dispatch per run;
          returns ``(elf_path, kernel_name)`` as upstream.
        * ``"xclbin"`` (npu1's default) or ``"pdi"``: each holds one device configuration, and
          every launch of a stitched module is its own device, so each op is compiled on its
          own and the ops are dispatched in order; returns ``(bin_paths, insts_paths)``, one
          ``aie.xclbin``/``aie.pdi`` and one ``insts.bin`` per op, in order (upstream returns
          the one pair aircc writes for the stitched module). ``pdi`` needs a runtime that loads
          bare PDIs (neither ``xrt`` nor ``hsa`` does).

        Either result can be handed to :class:`MultiLaunchRunner`."""
        self.compiled = self._native.compile(output_format)
        if self.compiled.elf_path is not None:
            return self.compiled.elf_path, self.compiled.kernel_name
        return self.compiled.bin_paths, self.compiled.insts_paths


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _byte_view(obj: Any, what: str, writable: bool) -> np.ndarray:
    """A flat ``uint8`` numpy view of `obj`'s memory (a copy only for a non-contiguous
    read-only input)."""
    if hasattr(obj, "numpy") and type(obj).__name__ in ("SharedBuffer", "BufferObject"):
        obj = obj.numpy()  # a shared buffer, or its XRT buffer object (`buf.bo`)
    if _is_torch(obj):
        if obj.device.type != "cpu":
            raise ValueError(f"{what} is on {obj.device}; the NPU reads host (CPU) tensors")
        if not obj.is_contiguous():
            if writable:
                raise ValueError(f"{what} is not contiguous; pass a contiguous tensor")
            obj = obj.contiguous()
        import torch

        return obj.detach().reshape(-1).view(torch.uint8).numpy()
    if isinstance(obj, (bytes, bytearray, memoryview)):
        array = np.frombuffer(obj, dtype=np.uint8)
    elif isinstance(obj, np.ndarray):
        array = obj
    else:
        raise TypeError(
            f"{what} must be a numpy array, a CPU torch tensor or a triton_npu.shared buffer, "
            f"got {type(obj).__name__}"
        )
    if not array.flags.c_contiguous:
        if writable:
            raise ValueError(f"{what} is not C-contiguous; pass np.ascontiguousarray(...)")
        array = np.ascontiguousarray(array)
    return array.reshape(-1).view(np.uint8)


def _empty_like(template: Any) -> Any:
    """A new array shaped and typed like `template`, of its kind (torch or numpy)."""
    if _is_torch(template):
        import torch

        return torch.empty(template.shape, dtype=template.dtype)
    if hasattr(template, "numpy") and type(template).__name__ == "SharedBuffer":
        template = template.numpy()
    if isinstance(template, np.ndarray):
        return np.empty(template.shape, dtype=template.dtype)
    return np.empty(len(memoryview(template).cast("B")), dtype=np.uint8)


def _indices(values: Iterable[Any], what: str, n: int) -> list[int]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{what} must hold ints, got {v!r}")
        if not 0 <= int(v) < n:
            raise ValueError(f"{what} index {v} is out of range for {n} combined arguments")
        out.append(int(v))
    return sorted(set(out))


class MultiLaunchRunner:
    """Dispatches a compiled chain: one dispatch per :meth:`run` over persistent buffers.

    ``MultiLaunchRunner(elf_path, kernel_name)`` or ``MultiLaunchRunner(bin_paths,
    insts_paths)`` takes what :meth:`MultiLaunchBuilder.compile` returned (a compiled chain's
    ``aie.elf``, under HSA with its ``kernel.hsaco`` beside it; or each op's files).
    """

    def __init__(self, elf_path: Any, kernel_name: Any = None, *, runtime=None) -> None:
        if type(elf_path).__name__ == "CompiledChain":
            source = elf_path
        elif isinstance(elf_path, (list, tuple)):
            source = [str(p) for p in elf_path]
            kernel_name = None if kernel_name is None else [str(p) for p in kernel_name]
        else:
            source = str(elf_path)
        self._native = native().ChainRunner(source, kernel_name, runtime=runtime, host=facts())
        #: What the last dispatch did: ``{"in_place", "staged", "device_time"}``.
        self.last_dispatch: dict | None = None

    def run(
        self,
        inputs: Sequence[Any],
        *,
        bo_key: str,
        static_indices: Iterable[int] = (),
        intermediate_indices: Iterable[int] = (),
        output_indices: Iterable[int] | None = None,
        bound_buffers: Mapping[int, Any] | None = None,
    ) -> dict[int, Any]:
        """Runs the chain once. ``inputs``: one array per combined argument, in order (an
        intermediate's may be a placeholder of the right size; a bound index's may be
        ``None``). Statics are written on the first run of a ``bo_key`` only, intermediates
        never (zeroed once, never read back), other inputs on every run. ``bound_buffers``
        ``{index: array}`` are used in place of the runner's own buffers. Returns
        ``{index: array}`` for ``output_indices`` (default: the last argument) — new arrays
        of the inputs' kind, or the bound array itself."""
        inputs = list(inputs)
        n = len(inputs)
        if n == 0:
            raise ValueError("a chain run needs its inputs (one array per combined argument)")
        bound = dict(bound_buffers or {})
        _indices(bound, "bound_buffers", n)
        outputs = [n - 1] if output_indices is None else _indices(output_indices, "output", n)
        statics = _indices(static_indices, "static", n)
        intermediates = _indices(intermediate_indices, "intermediate", n)
        views = [
            None if a is None else _byte_view(a, f"input {i}", writable=False)
            for i, a in enumerate(inputs)
        ]
        bound_views = [
            (i, _byte_view(b, f"bound buffer {i}", writable=True)) for i, b in bound.items()
        ]
        results: dict[int, Any] = {}
        destinations = []
        for i in outputs:
            if i in bound:
                results[i] = bound[i]
                destinations.append((i, None))
                continue
            if inputs[i] is None:
                raise ValueError(f"output {i} has no input to take its shape and type from")
            results[i] = _empty_like(inputs[i])
            destinations.append((i, _byte_view(results[i], f"output {i}", writable=True)))
        self.last_dispatch = self._native.run(
            views, str(bo_key), statics, intermediates, destinations, bound_views
        )
        return results

    @property
    def buffer_sets(self) -> int:
        """Buffer sets alive (one per ``bo_key`` used)."""
        return self._native.buffer_sets

    def unload(self) -> None:
        """Frees the buffers and the loaded chain. Idempotent."""
        self._native.close()

    close = unload


class NPUChain:
    """Declare a chain of Triton kernels, dispatch it as one ELF (npu2) or op by op (npu1).

    ``add`` captures each kernel's ttsharedir (through ``kernel.warmup`` in compile-only mode
    with an ``NPUDriver`` active — the caller's active driver is restored exactly); the first
    :meth:`run` builds (or finds in the cache) and loads the chain; later runs reuse it.

    At most ``max_open`` chains are loaded at a time in the process: opening another closes
    the least recently run one, which reopens from its compiled ELF on its next run.
    """

    #: Chains loaded at once, process-wide.
    max_open = 20
    #: id → weak reference of each loaded chain, least recently run first.
    _open: collections.OrderedDict = collections.OrderedDict()

    def __init__(
        self, name: str, air_project_path: Any = None, *, runtime: str | None = None
    ) -> None:
        self.name = name
        self.air_project_path = air_project_path
        self.runtime = runtime
        self._specs: list[tuple] = []
        self._builder: MultiLaunchBuilder | None = None
        self._compiled: Any = None
        self._runner: MultiLaunchRunner | None = None

    def add(
        self,
        kernel: Any,
        grid: Sequence[int] | int,
        arg_map: Mapping[int, int],
        *,
        args: Sequence[Any],
        constexprs: Mapping[str, Any] | None = None,
        transform_script: Any = None,
        actual_sizes: Any = None,
    ) -> NPUChain:
        """Registers a ``@triton.jit`` kernel (or its ttsharedir as ``str``/``bytes``) as the
        next launch. ``args``/``constexprs`` drive the warmup compile only; data goes to
        :meth:`run`."""
        g = (grid,) if isinstance(grid, int) else tuple(grid)
        g = g + (1,) * (3 - len(g))
        self._specs.append(
            (
                kernel,
                g,
                dict(arg_map),
                transform_script,
                tuple(args),
                dict(constexprs or {}),
                actual_sizes,
            )
        )
        self._builder = None
        self._compiled = None
        return self

    def _runtime(self) -> str | None:
        if self.runtime is not None:
            return self.runtime
        import triton

        from triton_npu.backend.driver import NPUDriver

        active = getattr(triton.runtime.driver, "_active", None)
        return active.runtime if isinstance(active, NPUDriver) else None

    def _capture(self, kernel: Any, grid: tuple, args: tuple, constexprs: dict) -> Any:
        """The kernel's ttsharedir, compiled (not run) with an NPU driver active."""
        if isinstance(kernel, (str, bytes)):
            return kernel
        import triton

        from triton_npu.backend.driver import NPUDriver
        from triton_npu.config import config_context

        npu = NPUDriver(self._runtime())
        previous = getattr(triton.runtime.driver, "_active", None)
        triton.runtime.driver.set_active(npu)
        try:
            with config_context(compile_only=True):
                compiled = kernel.warmup(*args, grid=grid, **constexprs)
        finally:
            triton.runtime.driver._active = previous
        return compiled.asm["ttsharedir"]

    def _build(self) -> None:
        if not self._specs:
            raise ValueError(f"chain {self.name!r} has no ops; add one with add()")
        builder = MultiLaunchBuilder(
            self.name, air_project_path=self.air_project_path, runtime=self._runtime()
        )
        for kernel, grid, arg_map, script, args, constexprs, sizes in self._specs:
            source = self._capture(kernel, grid, args, constexprs)
            builder.add_op(source, grid, arg_map, transform_script=script, actual_sizes=sizes)
        builder.compile()
        self._builder = builder
        self._compiled = builder.compiled

    @staticmethod
    def _close_stalest() -> bool:
        while NPUChain._open:
            _, ref = NPUChain._open.popitem(last=False)
            stale = ref()
            if stale is not None and stale._runner is not None:
                stale.close()
                return True
        return False

    def _open_runner(self) -> None:
        while len(NPUChain._open) >= NPUChain.max_open and NPUChain._close_stalest():
            pass
        if self._compiled is None:
            self._build()
        released_external = False
        while True:
            try:
                self._runner = MultiLaunchRunner(self._compiled, runtime=self._runtime())
                break
            except HardwareContextsExhaustedError:
                # The device ran out of hardware contexts: make room and try again — first
                # with what the application registered (upstream's order), then by closing
                # our least recently run chains.
                if not released_external:
                    released_external = True
                    from triton_npu.backend.driver import release_external_contexts

                    if release_external_contexts():
                        continue
                if not NPUChain._close_stalest():
                    raise
        NPUChain._open[id(self)] = weakref.ref(self)

    def run(
        self,
        inputs: Sequence[Any],
        *,
        bo_key: str | None = None,
        static_indices: Iterable[int] = (),
        intermediate_indices: Iterable[int] = (),
        output_indices: Iterable[int] | None = None,
        bound_buffers: Mapping[int, Any] | None = None,
    ) -> dict[int, Any]:
        """Builds (first run) and dispatches the chain; see :meth:`MultiLaunchRunner.run`.
        In compile-only mode (``AMD_TRITON_NPU_COMPILE_ONLY=1``) it builds the chain (into the
        cache: ``cache_dir``) and returns ``{}`` without dispatching, as kernel launches do."""
        from triton_npu.config import npu_config

        if npu_config.compile_only:
            if self._compiled is None:
                self._build()
            return {}
        if self._runner is None:
            self._open_runner()
        elif id(self) in NPUChain._open:
            NPUChain._open.move_to_end(id(self))
        assert self._runner is not None
        return self._runner.run(
            inputs,
            bo_key=bo_key or self.name,
            static_indices=static_indices,
            intermediate_indices=intermediate_indices,
            output_indices=output_indices,
            bound_buffers=bound_buffers,
        )

    @property
    def last_dispatch(self) -> dict | None:
        """What the last run's dispatch did (``in_place``, ``staged``, ``device_time``)."""
        return None if self._runner is None else self._runner.last_dispatch

    @property
    def cache_dir(self) -> str | None:
        """The cache entry holding the compiled chain, once built."""
        return None if self._compiled is None else self._compiled.cache_dir

    def close(self) -> None:
        """Releases the loaded chain and its buffers (it reopens on the next run)."""
        if self._runner is not None:
            self._runner.unload()
            self._runner = None
        NPUChain._open.pop(id(self), None)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
