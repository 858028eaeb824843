"""Upstream's import paths: ``triton.backends.amd_triton_npu.<module>`` is ``triton_npu``'s.

Scripts written for amd/Triton-XDNA import ``triton.backends.amd_triton_npu.driver``,
``.config``, ``.multilaunch``, ``.shared`` … A finder on ``sys.meta_path`` answers every name
under that prefix with this package's module of the same name — the very module object, never
a copy: ``<prefix>.driver`` and ``<prefix>.compiler`` are ``triton_npu.backend.driver`` and
``…compiler`` (what Triton registered), any other ``<prefix>.X`` is ``triton_npu.X``.
``<prefix>`` itself is a small alias package whose attributes are those modules.

Nothing is written into Triton's package directory (so ``pip install -U triton`` keeps it
working) and no second entry point exists (Triton registers the backend once). The finder is
installed when Triton's backend discovery imports ``triton_npu.backend``, which always happens
before Python looks for a ``triton.backends.*`` name, because importing one imports
``triton.backends`` first.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import Any

UPSTREAM_PACKAGE = "triton.backends.amd_triton_npu"
_BACKEND = "triton_npu.backend"
_PACKAGE = "triton_npu"
# Marks our finder on sys.meta_path, also across reloads of this module.
_MARK = "_triton_npu_upstream_names"

_install_lock = threading.Lock()


def _exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def real_name(fullname: str) -> str | None:
    """The ``triton_npu`` module an upstream name stands for, or ``None`` when it names
    nothing here (then importing it fails as any missing module does)."""
    if not fullname.startswith(UPSTREAM_PACKAGE + "."):
        return None
    first, dot, rest = fullname[len(UPSTREAM_PACKAGE) + 1 :].partition(".")
    if not first.isidentifier():
        return None
    for base in (_BACKEND, _PACKAGE):
        if _exists(f"{base}.{first}"):
            real = f"{base}.{first}{dot}{rest}"
            return real if not rest or _exists(real) else None
    return None


class _AliasPackage(types.ModuleType):
    """``triton.backends.amd_triton_npu``: its attributes are the aliased modules."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or real_name(f"{UPSTREAM_PACKAGE}.{name}") is None:
            raise AttributeError(f"module {UPSTREAM_PACKAGE!r} has no attribute {name!r}")
        return importlib.import_module(f"{UPSTREAM_PACKAGE}.{name}")


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, real: str | None) -> None:
        self.real = real  # None: the alias package itself

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        if self.real is None:
            return _AliasPackage(spec.name, __doc__)
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        if self.real is None:
            return
        # The import system returns whatever sys.modules holds for the name once this
        # returns, and binds that as the parent's attribute: the real module, unchanged.
        sys.modules[module.__name__] = importlib.import_module(self.real)


class _UpstreamNames(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == UPSTREAM_PACKAGE:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(None), is_package=True)
        if not fullname.startswith(UPSTREAM_PACKAGE + "."):
            return None
        real = real_name(fullname)
        if real is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real))


def install() -> None:
    """Puts the finder first on ``sys.meta_path`` (once per process): it must answer before
    the path finder, which would otherwise load a second copy of a module from our package
    directory, or an old upstream install left in ``triton/backends/``."""
    with _install_lock:
        if any(getattr(f, _MARK, False) for f in sys.meta_path):
            return
        finder = _UpstreamNames()
        setattr(finder, _MARK, True)
        sys.meta_path.insert(0, finder)
