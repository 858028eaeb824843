"""The active Triton driver, per thread and per asyncio context, as upstream makes it.

Stock Triton keeps one active driver per process (``triton.runtime.driver._active``), so a
``set_active`` in one thread changes what every other thread launches on. Upstream's NPU
driver, when constructed, changes the class of that one ``DriverConfig`` object so that
``_active`` lives in a ``ContextVar``; scripts written for it (one thread on the NPU, another
on a GPU) rely on that, so ``NPUDriver()`` does the same here.

The object stays the same (``from triton.runtime.driver import driver`` elsewhere keeps
working) and only ``_active`` changes meaning. A thread (or asyncio task) that has called
``set_active``/``reset_active`` has its own selection: no call in another thread changes it,
and its calls change no other thread's selection. A thread that never selected a driver uses
the main thread's selection, as every thread does with stock Triton, so the common script that
selects the NPU once at the top and launches from worker threads keeps working. ``default``
stays process-wide. Nothing changes for other backends.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

_UNSET: Any = object()
_ACTIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("triton_npu_active_driver")
_switch_lock = threading.Lock()
# Marks the class we made, also across reloads of this module.
_MARK = "_triton_npu_per_context_active"


def _get_active(config: Any) -> Any:
    value = _ACTIVE.get(_UNSET)
    if value is _UNSET:
        # No selection of its own: the main thread's (or what was active for everybody
        # before the switch, until the main thread selects).
        return vars(config).get("_active")
    return value


def _set_active(config: Any, value: Any) -> None:
    _ACTIVE.set(value)
    if threading.current_thread() is threading.main_thread():
        # The instance attribute, shadowed by the property, keeps the main thread's selection
        # for threads that have none.
        vars(config)["_active"] = value


def make_active_driver_per_context() -> None:
    """Switches ``triton.runtime.driver`` to a per-thread/per-context ``_active`` (once per
    process; later calls do nothing)."""
    # The module attribute, not `triton.runtime.driver`: the package re-exports the object
    # under the module's name.
    from triton.runtime.driver import driver as config

    with _switch_lock:
        cls = type(config)
        if getattr(cls, _MARK, False):
            return
        per_context = type(
            f"PerContext{cls.__name__}",
            (cls,),
            {
                "__doc__": cls.__doc__,
                "__module__": __name__,
                "_active": property(_get_active, _set_active),
                _MARK: True,
            },
        )
        config.__class__ = per_context
