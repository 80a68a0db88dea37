"""``facedet warmup``: machine code compiled ahead, for containers and cluster workers."""

from __future__ import annotations

import typer

from .common import app, emit, exit_codes, exit_with, load_detector, progress_bar


@app.command(epilog=exit_codes(failed="(no input files)", unusable="model"))
def warmup(
    estimators: bool = typer.Option(
        False,
        "--estimators",
        help="Also svmcore's estimators (SVC, OneClassSVM, "
        "PmSVM, TopKSVM, SVM+: what train and bootstrap "
        "use), about ten times longer.",
    ),
):
    """Compile the detector's machine code into numba's cache (NUMBA_CACHE_DIR, else beside the package), once,
    so that the first detect of a fresh install, container or cluster worker starts without compiling."""
    from ..api import warmup as run

    load_detector(None, notice=False)  # a missing or corrupt default model: exit 2 with the loader's message
    with progress_bar() as progress:
        progress.add_task("compiling", total=None, info="")
        seconds = run(estimators=estimators)
    emit(f"compiled in {seconds:.1f} s", markup=False, highlight=False)
    exit_with(0)
