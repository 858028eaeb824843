"""The ``amd_triton_npu`` backend package that Triton discovers through its ``triton.backends``
entry point. It must hold exactly one ``BaseBackend`` subclass in ``compiler`` and one
``DriverBase`` subclass in ``driver``, and importing it must never fail."""

# Upstream scripts import this package as `triton.backends.amd_triton_npu` (see
# triton_npu/_upstream_names.py); Triton's discovery imports it before any such name is looked up.
from triton_npu._triton_shared_names import install as _install_triton_shared_names
from triton_npu._upstream_names import install as _install_upstream_names

_install_upstream_names()
# `triton.backends.triton_shared.driver.CPUDriver` (upstream's benchmark.py imports it) when
# triton-shared is not installed; see triton_npu/_triton_shared_names.py.
_install_triton_shared_names()

# Triton before our submodules: its backend discovery imports `compiler` and `driver`, and must
# not find them half-imported (`from triton_npu import NPUDriver` as a script's first import
# would otherwise make `import triton` fail with "Found 0 concrete subclasses").
import os as _os  # noqa: E402

import triton  # noqa: E402, F401

# Triton's own Redis backend needs an alias in triton 3.9's knobs before Triton (or our cache)
# first creates one; see triton_npu.remote_cache.
if _os.environ.get("TRITON_REMOTE_CACHE_BACKEND"):
    from triton_npu import remote_cache as _remote_cache

    _remote_cache.backend_class()
