"""Thread limits for the benchmark scripts, set before numpy, numba, OpenCV or BLAS load (they read them once),
and ``positive_int``, the argparse type of their counts (--repeat, --rounds of timing).

``limit_threads()`` reads ``--threads N`` or ``--threads=N`` from the command line (default 1: one thread
each, a fair comparison with single-threaded references such as LIBSVM) and sets OMP, OpenBLAS, MKL and
numba's thread counts. Variables already set in the environment win over the default only where ``override``
is False. The script's own argparse still declares ``--threads`` so that ``--help`` lists it.
"""
import os
import sys


def limit_threads(default="1", override=True):
    """Set the thread variables from --threads (or ``default``); returns the count in force as a string. An
    explicit --threads always wins; the default yields to variables already set unless ``override``. A value
    that is not a positive integer is a usage error (exit 2), before anything runs."""
    threads, given = default, False
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            threads, given = sys.argv[i + 1], True
        elif arg.startswith("--threads="):
            threads, given = arg.split("=", 1)[1], True
    if not (threads.isdigit() and int(threads) >= 1):
        print(f"{os.path.basename(sys.argv[0])}: error: --threads: expected a positive integer, got {threads!r}",
              file=sys.stderr)
        sys.exit(2)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        if override or given:
            os.environ[var] = threads
        else:
            os.environ.setdefault(var, threads)
    return os.environ["OMP_NUM_THREADS"]


def positive_int(text):
    """argparse type: an integer >= 1 (a count of runs or threads)."""
    import argparse

    if not (text.isdigit() and int(text) >= 1):
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)
