"""Start-up of a fresh install: the first ``facedet detect`` and the first fit of each svmcore estimator with an
empty numba cache (everything compiled on first use), and the same detect again with the cache filled.

    python scripts/bench_startup.py                          # the install this interpreter imports
    python scripts/bench_startup.py --python OTHER/bin/python    # another install (e.g. a wheel of an older version)

Each measurement is one new process started from an empty temporary folder (so that nothing is imported from the
repository unless the install points at it) with ``NUMBA_CACHE_DIR`` a new empty folder: ``facedet detect`` on
examples/astronaut.jpg timed whole (wall clock), then once more on the same cache ("warm"); each estimator fitted
once on 200 rows of 10 Gaussian features (the time of ``fit`` in that process, and the process's wall clock).
``--repeat`` rounds; every round is printed.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _script import positive_int

ASTRONAUT = Path(__file__).resolve().parents[1] / "examples" / "astronaut.jpg"

FIT = """
import sys, time, warnings
import numpy as np
import svmcore
warnings.simplefilter("ignore")  # the iteration cap of a tiny problem is not the point
rng = np.random.default_rng(0)
X = rng.normal(size=(200, 10))
y = (X[:, 0] > 0).astype(int)
fits = {
    "SVC": lambda: svmcore.SVC(kernel="rbf").fit(X, y),
    "OneClassSVM": lambda: svmcore.OneClassSVM().fit(X),
    "PmSVM": lambda: svmcore.PmSVM().fit(np.abs(X), y),
    "TopKSVM": lambda: svmcore.TopKSVM().fit(X, rng.integers(0, 4, 200)),
    "KernelSVMPlus": lambda: svmcore.KernelSVMPlus().fit(X, X[:, :3], y),
    "LinearSVMPlus": lambda: svmcore.LinearSVMPlus().fit(X, X[:, :3], y),
}
start = time.perf_counter()
fits[sys.argv[1]]()
print(time.perf_counter() - start)
"""
ESTIMATORS = ("SVC", "OneClassSVM", "PmSVM", "TopKSVM", "KernelSVMPlus", "LinearSVMPlus")


def timed(argv, cwd, cache):
    """(wall seconds, stdout) of one process with numba's cache in ``cache``; exits on a failed command."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return wall, done.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter of the install to measure (default: this one)"
    )
    parser.add_argument("--repeat", type=positive_int, default=1, help="rounds (default: 1)")
    args = parser.parse_args()
    python = args.python
    facedet = [python, "-m", "facedet", "detect", str(ASTRONAUT)]
    for round_ in range(1, args.repeat + 1):
        with tempfile.TemporaryDirectory() as cwd:
            cache = tempfile.mkdtemp(dir=cwd)
            cold, _ = timed(facedet, cwd, cache)
            warm, _ = timed(facedet, cwd, cache)
            print(f"round {round_}: facedet detect astronaut.jpg: first {cold:.2f} s, again {warm:.2f} s", flush=True)
            for name in ESTIMATORS:
                wall, out = timed([python, "-c", FIT, name], cwd, tempfile.mkdtemp(dir=cwd))
                print(f"round {round_}: first {name}.fit {float(out):.2f} s (process {wall:.2f} s)", flush=True)


if __name__ == "__main__":
    main()
