"""Ctrl-C and SIGTERM for the ``facedet`` command: the press is recorded, so that one a library swallowed still
stops it; a press after the command's last output (:func:`finish`) is not an interruption.

llvmlite ignores exceptions raised in its ctypes callbacks, so a KeyboardInterrupt raised while numba loads a
kernel is lost and the command would run on to print its results. :func:`check`, called at every step the
command shows (progress, output, files written), raises it again. Nothing heavy is imported here: the handler
is installed before numpy, typer and numba load.
"""

from __future__ import annotations

TYPE_CHECKING = False  # (typing.TYPE_CHECKING without importing typing, which nothing here needs at run time)
if TYPE_CHECKING:
    from types import FrameType
    from typing import NoReturn

pressed = []
finished = []


def on_sigint(signum: int, frame: FrameType | None) -> None:
    """SIGINT handler: record the press and raise KeyboardInterrupt, unless the command has finished."""
    if finished:
        return
    pressed.append(signum)
    raise KeyboardInterrupt


def on_sigterm(signum: int, frame: FrameType | None) -> NoReturn:
    """SIGTERM handler: exit 143 (128 + SIGTERM) through Python's unwinding, so that files being written
    (:func:`svmcore.persistence.atomic_write`) remove their temporary files."""
    raise SystemExit(128 + signum)


def finish() -> None:
    """Mark the command's work and output as done: a later Ctrl-C no longer interrupts it."""
    finished.append(True)


def check() -> None:
    """Raise KeyboardInterrupt if Ctrl-C was pressed since the handler was installed."""
    if pressed:
        raise KeyboardInterrupt
