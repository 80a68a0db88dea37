"""svmcore: fast support vector machine solvers.

- :class:`SVC`, :class:`OneClassSVM`: kernel SVMs trained by working-set decomposition (Osuna et al. 1997)
  with SMO-type subproblem steps (Fan, Chen, Lin 2005), shrinking and a kernel-column cache.
- :class:`LinearSVMPlus`, :class:`KernelSVMPlus`: SVM+ with privileged information (Li et al. CVPR 2016).
- :class:`PmSVM`: additive-kernel SVM by regression-approximated dual coordinate descent (Wu, TNNLS).
- :class:`TopKSVM`: top-k multiclass SVM by Prox-SDCA (Lapin, Hein, Schiele, NIPS 2015).
- :func:`warmup`: compile every estimator's machine code into numba's cache once (containers, cluster workers).
- :func:`load`: read any model written by ``estimator.save(path)``; :class:`NotFittedError` is raised
  by a model used before ``fit``; :class:`ConvergenceWarning` (a RuntimeWarning) is issued by a solver
  stopped at its iteration cap.

Names are imported lazily so that ``import svmcore`` stays fast.
"""

from __future__ import annotations

from importlib import import_module

# typing.TYPE_CHECKING without importing typing, so that ``import svmcore`` stays fast
TYPE_CHECKING = False
if TYPE_CHECKING:
    import os

    from .base import BaseEstimator

_EXPORTS = {
    "SVC": "svc",
    "OneClassSVM": "svc",
    "LinearSVMPlus": "svmplus",
    "KernelSVMPlus": "svmplus",
    "PmSVM": "pmsvm",
    "TopKSVM": "topk",
    "CascadeSVC": "cascade",
    "NotFittedError": "validation",
    "ConvergenceWarning": "validation",
}
__all__ = [*_EXPORTS, "load", "warmup"]


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'svmcore' has no attribute {name!r}")


def load(path: str | os.PathLike) -> BaseEstimator:
    """Load the fitted model (SVC, OneClassSVM, LinearSVMPlus, KernelSVMPlus, PmSVM or TopKSVM) that
    ``estimator.save(path)`` wrote to ``path`` (str or path-like); returns it as saved.

    Raises FileNotFoundError for a missing file and ValueError for a file that is not such a model or is
    inconsistent: every hyperparameter and learned array is checked (:func:`svmcore.persistence.load`).
    Never unpickles.
    """
    from . import persistence

    for module in set(_EXPORTS.values()) - {"validation"}:
        try:
            import_module(f".{module}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{module}":
                raise
    return persistence.load(path)


def warmup() -> float:
    """Fit and use every estimator once on a small random problem, so that numba compiles their machine code
    into its on-disk cache (``NUMBA_CACHE_DIR``, else ``__pycache__`` beside the modules) and later processes
    start without compiling: the first ``fit`` of a fresh install otherwise pays for it (tens of seconds).
    Returns the seconds taken. Covers dense and CSR rows, two and three classes, ``probability=True``."""
    import time

    import numpy as np
    import scipy.sparse as sp

    t = time.perf_counter()
    rng = np.random.default_rng(0)
    X = rng.random((60, 5))
    y2, y3 = (X[:, 0] > 0.5).astype(int), np.arange(60) % 3
    svc, svmplus, pmsvm, topk = (import_module(f".{m}", __name__) for m in ("svc", "svmplus", "pmsvm", "topk"))
    for kernel in ("linear", "poly", "rbf"):
        for rows in (X, sp.csr_matrix(X)):
            for y in (y2, y3):
                svc.SVC(kernel=kernel).fit(rows, y).decision_function(rows)
    svc.SVC(probability=True, random_state=0).fit(X, y3).predict_proba(X)
    svc.OneClassSVM().fit(X).decision_function(X)
    pmsvm.PmSVM(max_iter=5, random_state=0).fit(X, y2).decision_function(X)
    topk.TopKSVM(k=2, max_epochs=5).fit(X, y3).decision_function(X)
    svmplus.LinearSVMPlus(max_iter=5).fit(X, X, y2).decision_function(X)
    svmplus.KernelSVMPlus().fit(X, X, y2).decision_function(X)
    return time.perf_counter() - t
