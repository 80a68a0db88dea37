"""svmcore: fast support vector machine solvers.

- :class:`SVC`, :class:`OneClassSVM`: kernel SVMs trained by working-set decomposition (Osuna et al. 1997)
  with SMO-type subproblem steps (Fan, Chen, Lin 2005), shrinking and a kernel-column cache.
- :class:`LinearSVMPlus`, :class:`KernelSVMPlus`: SVM+ with privileged information (Li et al. CVPR 2016).
- :class:`PmSVM`: additive-kernel SVM by regression-approximated dual coordinate descent (Wu, TNNLS).
- :class:`TopKSVM`: top-k multiclass SVM by Prox-SDCA (Lapin, Hein, Schiele, NIPS 2015).
- :func:`load`: read any model written by ``estimator.save(path)``; :class:`NotFittedError` is raised
  by a model used before ``fit``; :class:`ConvergenceWarning` (a RuntimeWarning) is issued by a solver
  stopped at its iteration cap.

Names are imported lazily so that ``import svmcore`` stays fast.
"""
from importlib import import_module

_EXPORTS = {
    "SVC": "svc",
    "OneClassSVM": "svc",
    "LinearSVMPlus": "svmplus",
    "KernelSVMPlus": "svmplus",
    "PmSVM": "pmsvm",
    "TopKSVM": "topk",
    "NotFittedError": "_validation",
    "ConvergenceWarning": "_validation",
}
__all__ = [*_EXPORTS, "load"]


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'svmcore' has no attribute {name!r}")


def load(path):
    """Load the fitted model (SVC, OneClassSVM, LinearSVMPlus, KernelSVMPlus, PmSVM or TopKSVM) that
    ``estimator.save(path)`` wrote to ``path`` (str or path-like); returns it as saved.

    Raises FileNotFoundError for a missing file and ValueError for a file that is not such a model or is
    inconsistent: every hyperparameter and learned array is checked (:func:`svmcore.persistence.load`).
    Never unpickles.
    """
    from . import persistence

    for module in set(_EXPORTS.values()) - {"_validation"}:
        try:
            import_module(f".{module}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{module}":
                raise
    return persistence.load(path)
