"""How :mod:`triton_npu.shared` names devices (upstream's grammar) and which it can reach.

A device is named as ``torch.device`` spells one — ``"xrt:0"``, ``"hsa:0"``, ``"hip:0"``, a
bare kind meaning index 0 — or as a ``torch.device``, or as a ``(kind, index)`` pair. Kinds
are matched case-insensitively; ``cuda`` and ``rocm`` mean ``hip`` (torch calls the iGPU
``cuda`` even on a ROCm build).

What exists here: the NPU through XRT (device 0, the one this package's XRT runtime opens)
and through HSA (agent 0, the only AIE agent ROCr exposes). HIP is a kind upstream knows, so
it parses and ``is_shared_with("hip:0")`` answers ``False``; mapping a buffer into a GPU is
refused, because this package has no GPU runtime. XRT and HSA are the same NPU reached two
ways and neither maps the other's pages, so a buffer names one of them, never both.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

__all__ = [
    "DeviceKey",
    "SharedBufferError",
    "parse",
    "parse_all",
    "refuse_mix",
    "refuse_unreachable",
    "spec",
]

#: ``(kind, index)``: a device's identity, kind in upper case.
DeviceKey = tuple[str, int]

KINDS = ("HIP", "HSA", "XRT")
_ALIASES = {"CUDA": "HIP", "ROCM": "HIP"}
NPU_KINDS = ("HSA", "XRT")


class SharedBufferError(RuntimeError):
    """A shared buffer cannot be allocated, shared or reached (upstream's name)."""


def _is_torch_device(obj: Any) -> bool:
    # torch is imported only if it already is: a torch.device cannot exist without it.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.device)


def _kind(text: Any) -> str:
    name = str(text).upper()
    name = _ALIASES.get(name, name)
    if name not in KINDS:
        raise SharedBufferError(
            f"unknown device kind {text!r}; known kinds are {', '.join(KINDS)} "
            "(CUDA and ROCM also mean HIP)"
        )
    return name


def parse(device: Any) -> DeviceKey:
    """The ``(KIND, index)`` a device spec names; :class:`SharedBufferError` for anything
    malformed (a typo must not pass as a device that merely is not there)."""
    if isinstance(device, str):
        kind, sep, index_text = device.partition(":")
        if not sep:
            index: Any = None
        else:
            try:
                index = int(index_text)
            except ValueError:
                raise SharedBufferError(
                    f"device {device!r} has a non-numeric index; expected e.g. 'xrt:0'"
                ) from None
    elif _is_torch_device(device):
        kind, index = device.type, device.index
    elif isinstance(device, (tuple, list)) and len(device) == 2:
        kind, index = device
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
            raise SharedBufferError(
                f"device {tuple(device)!r}: the handle must be a device index; triton-npu owns "
                "its runtime's device handles, so a caller-opened handle (e.g. a "
                "pyxrt.device) cannot be used — name the device by index, e.g. ('XRT', 0)"
            )
    else:
        raise SharedBufferError(
            "device must be a device string like 'xrt:0', a torch.device, or a "
            f"(kind, index) pair, got {device!r}"
        )
    name = _kind(kind)
    index = 0 if index is None else index
    if index < 0:
        raise SharedBufferError(f"device index {index} of {name.lower()} is negative")
    return name, index


def parse_all(devices: Any) -> list[DeviceKey]:
    """The ``share=`` argument as a list of devices, duplicates dropped: one spec written
    bare (``"xrt:0"``, ``("HSA", 0)``, a ``torch.device``) or an iterable of specs."""
    if devices is None:
        return []
    if isinstance(devices, str) or _is_torch_device(devices):
        items: Iterable[Any] = [devices]
    elif (
        isinstance(devices, (tuple, list))
        and len(devices) == 2
        and isinstance(devices[0], str)
        and _ALIASES.get(devices[0].upper(), devices[0].upper()) in KINDS
        and not isinstance(devices[1], str)
    ):
        # ("HIP", 0) is one device, not the two specs "HIP" and 0.
        items = [tuple(devices)]
    else:
        try:
            items = list(devices)
        except TypeError:
            raise SharedBufferError(
                f"share must be a device spec or an iterable of them, got {devices!r}"
            ) from None
    out: list[DeviceKey] = []
    for item in items:
        key = parse(item)
        if key not in out:
            out.append(key)
    return out


def spec(key: DeviceKey) -> str:
    """A device written back as a string the grammar accepts (``"xrt:0"``)."""
    return f"{key[0].lower()}:{key[1]}"


def refuse_mix(keys: Iterable[DeviceKey]) -> None:
    """Refuses a device set naming both NPU runtimes, before anything is allocated."""
    kinds = {k for k, _ in keys}
    if set(NPU_KINDS) <= kinds:
        raise SharedBufferError(
            "a buffer cannot be shared with both XRT and HSA devices: they are the same NPU "
            "reached two ways, and neither runtime can map the other's pages; name the "
            "runtime you will dispatch on"
        )


def refuse_unreachable(key: DeviceKey) -> None:
    """Raises when this package cannot map a buffer into `key`'s device at all."""
    kind, index = key
    if kind == "HIP":
        raise SharedBufferError(
            f"cannot map a buffer into {spec(key)}: triton-npu drives the NPU only (through "
            "XRT or HSA) and has no GPU runtime, so no iGPU device exists for it. Use the "
            "buffer's CPU torch view (buf.torch()) and copy to the GPU with torch"
        )
    if index != 0:
        what = "AIE agent" if kind == "HSA" else "XRT device"
        raise SharedBufferError(
            f"{spec(key)} does not exist; the NPU is {what} 0 ({kind.lower()}:0), the only "
            f"one the {kind.lower()} runtime opens"
        )
