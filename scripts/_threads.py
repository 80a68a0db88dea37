"""Thread limits for the benchmark scripts, set before numpy, numba, OpenCV or BLAS load (they read them once).

``limit_threads()`` reads ``--threads N`` or ``--threads=N`` from the command line (default 1: one thread
each, a fair comparison with single-threaded references such as LIBSVM) and sets OMP, OpenBLAS, MKL and
numba's thread counts. Variables already set in the environment win only where ``override`` is False. The
script's own argparse still declares ``--threads`` so that ``--help`` lists it and bad values are errors.
"""
import os
import sys


def limit_threads(default="1", override=True):
    """Set the thread variables from --threads (or ``default``); returns the count as a string."""
    threads = default
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            threads = sys.argv[i + 1]
        elif arg.startswith("--threads="):
            threads = arg.split("=", 1)[1]
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        if override:
            os.environ[var] = threads
        else:
            os.environ.setdefault(var, threads)
    return threads
