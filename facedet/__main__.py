"""The ``facedet`` command's entry point: the ``facedet`` script and ``python -m facedet``.

It imports nothing heavy before it takes over Ctrl-C, so that any Ctrl-C ends the command with
"interrupted" and exit code 130:
- while typer, numpy and numba load (a traceback before);
- inside a numba kernel, where the KeyboardInterrupt surfaces as SystemErrors chained to it;
- where numba's loader swallows it: llvmlite ignores exceptions raised in its ctypes callbacks, and the
  command then ran on to print its results; the press is recorded (:mod:`facedet._interrupt`) and the
  command stops at its next step (a progress update, an output).
A Ctrl-C after the command's last output changes nothing. SIGTERM ends the command with exit code 143, its
temporary files removed.
"""

from __future__ import annotations

import signal
import sys

from . import _interrupt

TYPE_CHECKING = False  # (typing.TYPE_CHECKING without importing typing, which nothing here needs at run time)
if TYPE_CHECKING:
    from typing import NoReturn


def _caused_by_interrupt(exc):
    for _ in range(20):
        if exc is None or isinstance(exc, KeyboardInterrupt):
            return exc is not None
        exc = exc.__cause__ or exc.__context__
    return False


def _handle(signum, handler):
    """Install ``handler`` for ``signum`` unless the caller ignores that signal (a background job, nohup: it stays
    ignored, as Python itself leaves it); returns the disposition to restore."""
    previous = signal.getsignal(signum)
    if previous is not signal.SIG_IGN:
        signal.signal(signum, handler)
    return previous


def main() -> NoReturn:
    """Run :func:`facedet.cli.main`; exit 130 if Ctrl-C was pressed at any point."""
    pressed = _interrupt.pressed  # empty: the handler is ours only inside this call, which clears it
    previous = _handle(signal.SIGINT, _interrupt.on_sigint)
    previous_term = _handle(signal.SIGTERM, _interrupt.on_sigterm)
    code = 0
    try:
        from .cli import main as cli_main

        cli_main()
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:  # noqa: B036  (KeyboardInterrupt, or numba's SystemErrors chained to it)
        if not (pressed or _caused_by_interrupt(exc)):
            raise
        pressed.append(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
        interrupted = bool(pressed)
        pressed.clear()  # a later command in the same process (tests) starts unpressed
        _interrupt.finished.clear()
    if interrupted:
        print("interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
