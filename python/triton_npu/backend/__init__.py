"""The ``amd_triton_npu`` backend package that Triton discovers through its ``triton.backends``
entry point. It must hold exactly one ``BaseBackend`` subclass in ``compiler`` and one
``DriverBase`` subclass in ``driver``, and importing it must never fail."""

# Upstream scripts import this package as `triton.backends.amd_triton_npu` (see
# triton_npu/_upstream_names.py); Triton's discovery imports it before any such name is looked up.
from triton_npu._upstream_names import install as _install_upstream_names

_install_upstream_names()

# Triton before our submodules: its backend discovery imports `compiler` and `driver`, and must
# not find them half-imported (`from triton_npu import NPUDriver` as a script's first import
# would otherwise make `import triton` fail with "Found 0 concrete subclasses").
import triton  # noqa: E402, F401
