"""The ``amd_triton_npu`` backend package that Triton discovers through its ``triton.backends``
entry point. It must hold exactly one ``BaseBackend`` subclass in ``compiler`` and one
``DriverBase`` subclass in ``driver``, and importing it must never fail."""
