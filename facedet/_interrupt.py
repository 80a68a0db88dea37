"""Ctrl-C for the ``facedet`` command: the press is recorded, so that one a library swallowed still stops it.

llvmlite ignores exceptions raised in its ctypes callbacks, so a KeyboardInterrupt raised while numba loads a
kernel is lost and the command would run on to print its results. :func:`check`, called at every step the
command shows (progress, output, files written), raises it again. Nothing heavy is imported here: the handler
is installed before numpy, typer and numba load.
"""
pressed = []


def on_sigint(signum, frame):
    """SIGINT handler: record the press and raise KeyboardInterrupt."""
    pressed.append(signum)
    raise KeyboardInterrupt


def check():
    """Raise KeyboardInterrupt if Ctrl-C was pressed since the handler was installed."""
    if pressed:
        raise KeyboardInterrupt
