"""Command line: ``facedet train | bootstrap | detect | evaluate | calibrate | warmup`` (typer). Argument handling only.

Exit codes (:func:`exit_codes`, stated by ``facedet --help`` and by every command's ``--help``): 0 success; 1 if
an input file failed (each bad file is reported on stderr and the other files are still processed) or an output
could not be written; 2 usage error (bad option, missing or unusable model, folder or CSV); 130 on Ctrl-C
(:mod:`facedet.__main__`).

Layout: :mod:`facedet.cli.common` holds the app, the consoles and what the commands share; one module per
command (train, bootstrap, detect, evaluate, calibrate, warmup) registers it on the app, in the order of the help.
"""

from __future__ import annotations

import warnings

# each module registers its command on the app; imported in the order --help lists them
from . import train  # noqa: F401
from . import bootstrap  # noqa: F401
from . import detect  # noqa: F401
from . import evaluate  # noqa: F401
from . import calibrate  # noqa: F401
from . import warmup  # noqa: F401
from .common import app, exit_codes

__all__ = ["app", "exit_codes", "main"]


def main(prog_name: str = "facedet") -> None:
    """Run the ``facedet`` command (typer app). The installed script enters through
    :func:`facedet.__main__.main`, which handles Ctrl-C (exit 130)."""
    # a solver's RuntimeWarning (e.g. max_iter reached) as one line, not Python's source excerpt
    warnings.formatwarning = lambda message, category, *args, **kwargs: f"warning: {message}\n"
    app(prog_name=prog_name)
