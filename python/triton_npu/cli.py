"""The ``triton-npu`` console script: runs the Rust command line in this process."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from triton_npu._host import facts
    from triton_npu._loader import native

    args = ["triton-npu", *(sys.argv[1:] if argv is None else argv)]
    return native().cli_main(args, facts())


if __name__ == "__main__":
    sys.exit(main())
