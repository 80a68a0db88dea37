"""What the scripts share: thread limits set before numpy, numba, OpenCV or BLAS load (they read them once),
``positive_int``, the argparse type of their counts, ``DATA``, the data folder, and ``svmlight_csr``, the reader
of the LIBSVM-format bench files.

``limit_threads()`` reads ``--threads N`` or ``--threads=N`` from the command line (default 1: one thread
each, a fair comparison with single-threaded references such as LIBSVM) and sets OMP, OpenBLAS, MKL and
numba's thread counts. Variables already set in the environment win over the default only where ``override``
is False. The script's own argparse still declares ``--threads`` so that ``--help`` lists it (all but
bench_svc.py, which takes its thread counts from the environment only).

``DATA`` is $FACEDET_DATA if set, else ../shared/data beside the repository; ``require_data(path)`` stops the
script with a usage error (exit 2) naming a missing data file or folder; ``require_files(base, files)`` does
the same for the files a run needs inside the data folder, before anything runs, and ``require_sets(names)``
for the files of named data sets (``DATA_FILES``, the one list of them); ``require_arrays(path, names, what)``
reads the arrays a script needs from an .npz given by --data, with a usage error for a file that is not one.
"""

import contextlib
import os
import sys
import warnings
from pathlib import Path

DATA = Path(os.environ.get("FACEDET_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def convergence_warnings():
    """The iteration-cap warning classes of svmcore and scikit-learn (imported at the call: after limit_threads)."""
    import svmcore
    from sklearn.exceptions import ConvergenceWarning

    return svmcore.ConvergenceWarning, ConvergenceWarning


@contextlib.contextmanager
def quiet_convergence():
    """Silence the solvers' iteration-cap notices only (grids and timing loops reach max_iter on purpose); every
    other warning still shows."""
    with warnings.catch_warnings():
        for category in convergence_warnings():
            warnings.simplefilter("ignore", category)
        yield


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
    if not _is_positive_int(threads):
        _usage_error(f"--threads: expected a positive integer, got {threads!r}")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        if override or given:
            os.environ[var] = threads
        else:
            os.environ.setdefault(var, threads)
    return os.environ["OMP_NUM_THREADS"]


def positive_int(text):
    """argparse type: an integer >= 1 (a count of runs or threads)."""
    import argparse

    if not _is_positive_int(text):
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def require_data(path=DATA, what="the shared/data folder"):
    """``path`` if it exists; otherwise a usage error (exit 2) naming it and where the scripts read their data."""
    if not path.exists():
        _usage_error(
            f"missing data {path} ({what}); the scripts read ../shared/data beside the repository, or "
            "the folder in $FACEDET_DATA"
        )
    return path


def require_files(base, files, what="the data files"):
    """Every path of ``files`` (relative to ``base``) as a file; otherwise a usage error (exit 2) naming the missing
    ones, before anything runs (a folder that exists but lacks them would otherwise fail deep in a loader)."""
    require_data(base)
    missing = [str(base / f) for f in files if not (base / f).is_file()]
    if missing:
        _usage_error(
            f"missing data file{'s' if len(missing) > 1 else ''} {', '.join(missing)} ({what}); the scripts "
            "read ../shared/data beside the repository, or the folder in $FACEDET_DATA"
        )


# the files each data set of the scripts reads, relative to the data folder
DATA_FILES = {
    "cbcl": ("cbcl_face_db1/cbcl_face_db1_19x19_uint8.npz",),
    "pendigits": ("bench/pendigits/pendigits.bz2", "bench/pendigits/pendigits.t.bz2"),
    "usps": ("bench/usps/usps.h5",),
    "letter": ("bench/letter/letter.scale.bz2", "bench/letter/letter.scale.t.bz2"),
    "sector": ("bench/sector/sector.scale.bz2", "bench/sector/sector.t.scale.bz2"),
    "reuters": ("bench/reuters_lasvm/reuters.trn.bz2", "bench/reuters_lasvm/reuters.tst.bz2"),
    "ijcnn1": ("bench/ijcnn1/ijcnn1.trn.bz2", "bench/ijcnn1/ijcnn1.tst.bz2"),
    "a9a": ("bench/a9a/a9a.trn.bz2", "bench/a9a/a9a.tst.bz2"),
}


def require_sets(names, base=DATA, what="the data sets"):
    """``require_files`` for the files of the data sets ``names`` (keys of :data:`DATA_FILES`)."""
    require_files(base, [f for name in dict.fromkeys(names) for f in DATA_FILES[name]], what)


def require_file(path, what):
    """``path`` if it is a file; otherwise a usage error (exit 2), as ``require_data``."""
    require_data(path, what)
    if not path.is_file():
        _usage_error(f"{path}: not a file ({what})")
    return path


def require_arrays(path, names, what):
    """The arrays ``names`` of the .npz file ``path`` as a dict; a usage error (exit 2), as ``require_file``, for
    a missing file, one that is not an .npz archive (or holds pickled objects) or one without those arrays,
    rather than a traceback from numpy."""
    import zipfile

    import numpy as np

    require_file(path, what)
    if not zipfile.is_zipfile(path):  # np.load would try it as a pickle and blame "pickled (object) data"
        _usage_error(f"{path}: not {what} (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [n for n in names if n not in archive.files]
            if missing:
                _usage_error(
                    f"{path}: not {what}: no array{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                    f"(it holds {', '.join(archive.files) or 'none'})"
                )
            return {n: archive[n] for n in names}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        _usage_error(f"{path}: not {what} (not a readable .npz archive: {exc})")


def svmlight_csr(path, n_features):
    """(X, y) of a LIBSVM-format file: X as CSR float64 with 32-bit indices (LIBLINEAR and scikit-learn's SVC
    reject the 64-bit ones ``load_svmlight_file`` returns), y float64."""
    import numpy as np
    import scipy.sparse as sp
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(path), n_features=n_features)
    return sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape), y


def _usage_error(message):
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    sys.exit(2)


def _is_positive_int(text):
    return text.isdigit() and int(text) >= 1
