"""The Python entry point of the ``triton-npu`` commands: runs the Rust command line in this
process. It is ``python -m triton_npu`` and the console script ``triton-npu-python``, to which
the installed ``triton-npu`` binary hands doctor, compile, run and test-examples (they need
this interpreter's facts and, for the remote kernel cache, its objects)."""

from __future__ import annotations

import signal
import sys
import threading


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Runs ``triton-npu`` with ``argv`` and returns its exit status. Ctrl-C and SIGTERM stop
    the tool or script a command waits for (with every process it started); the status is
    then 130 (SIGINT) or 143 (SIGTERM), as for the standalone binary."""
    from triton_npu._host import facts
    from triton_npu._loader import native

    args = ["triton-npu", *(sys.argv[1:] if argv is None else argv)]
    # Only doctor reports whether triton imports; every other command finds it without
    # importing it, so that it starts in milliseconds.
    host = facts(import_triton="doctor" in args[1:2])
    # SIGTERM's default would end the process at once, before the command can stop its
    # tools and report; a handler that raises lets the native wait notice it. A handler the
    # program installed is left alone.
    own_sigterm = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    )
    if own_sigterm:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return native().cli_main(args, host)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    finally:
        if own_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main())
