"""``triton.backends.triton_shared`` and its ``.driver`` when triton-shared is not installed.

Upstream's ``examples/benchmark.py`` does ``from triton.backends.triton_shared.driver import
CPUDriver``; only the triton-shared backend provides that module. A finder placed *last* on
``sys.meta_path`` answers the two names (``.driver`` is ``triton_npu.cpu_driver``), so Python's
own finders, which come first, find an installed triton-shared and it is never shadowed.
Installed when Triton's backend discovery imports ``triton_npu.backend``; importing this
module imports nothing of Triton.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
import types
from typing import Any

SHARED_PACKAGE = "triton.backends.triton_shared"
_DRIVER = "triton_npu.cpu_driver"
_PACKAGE_DOC = (
    "triton-npu's stand-in for triton-shared (not installed): only its driver's CPUDriver, "
    "which runs kernels through Triton's interpreter (see triton_npu.cpu_driver)."
)
# Marks our finder on sys.meta_path, also across reloads of this module.
_MARK = "_triton_npu_triton_shared_names"

_install_lock = threading.Lock()


class _StandInLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        if spec.name == SHARED_PACKAGE:
            module = types.ModuleType(spec.name, _PACKAGE_DOC)
            module.__path__ = []  # a package: `.driver` is imported through it
            return module
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ == SHARED_PACKAGE:
            return
        # `.driver` is triton_npu.cpu_driver itself (the import system binds what sys.modules
        # holds for the name once this returns).
        sys.modules[module.__name__] = importlib.import_module(_DRIVER)


class _TritonSharedStandIn(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == SHARED_PACKAGE:
            return importlib.machinery.ModuleSpec(fullname, _StandInLoader(), is_package=True)
        if fullname == SHARED_PACKAGE + ".driver":
            parent = sys.modules.get(SHARED_PACKAGE)
            if parent is None or getattr(parent, "__path__", None) != []:
                return None  # a real triton-shared: never answered for it
            return importlib.machinery.ModuleSpec(fullname, _StandInLoader())
        return None


def install() -> None:
    """Appends the stand-in finder to ``sys.meta_path`` (once per process): last, so that
    Python's own finders find an installed triton-shared first."""
    with _install_lock:
        if any(getattr(f, _MARK, False) for f in sys.meta_path):
            return
        finder = _TritonSharedStandIn()
        setattr(finder, _MARK, True)
        sys.meta_path.append(finder)
