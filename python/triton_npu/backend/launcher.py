"""The launcher Triton calls at every kernel launch (native; see crates/npu-python)."""

from __future__ import annotations

from typing import Any


def make_launcher_cls(runtime: str) -> Any:
    """The class Triton instantiates as ``launcher_cls(src, metadata)`` for each kernel."""

    class NPULauncher:
        def __init__(self, src: Any, metadata: Any) -> None:
            self.src = src
            self.metadata = metadata
            self.runtime = runtime

        def __call__(self, *args: Any) -> None:
            raise NotImplementedError(
                "launching kernels on the NPU is not available in this build of triton-npu "
                "yet; compile-only use works (triton.compile / kernel.warmup)"
            )

    return NPULauncher


def do_bench(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("the NPU benchmarker is not available in this build yet")


class DeviceInterface:
    pass
