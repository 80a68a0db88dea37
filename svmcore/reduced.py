"""Exact reduced sets of quadratic-kernel SVMs (Burges, ICML 1996, sec. 3: for the degree-2 polynomial kernel
the reduced set is exact with at most d + 1 vectors).

With x~ = [x; 1] and w_i = [gamma s_i; coef0], K(s_i, x) = (gamma s_i'x + coef0)^2 = (w_i'x~)^2, so
f(x) = sum_i a_i K(s_i, x) + b = x~' M x~ + b with M = sum_i a_i w_i w_i' ((d + 1) x (d + 1)). The
eigenvectors u_k = [p_k; t_k] of M (eigenvalues l_k) give f(x) = sum_k l_k (u_k'x~)^2 + b, and each term is one
kernel expansion again: (u_k'x~)^2 = (t_k / coef0)^2 (gamma z_k'x + coef0)^2 with z_k = coef0 p_k / (gamma t_k).
A detector trained on 10^5 windows with 10^4-10^5 support vectors is stored in d + 1 of them.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import numpy as np

from .validation import check_fitted

if TYPE_CHECKING:
    from .svc import SVC


def reduce_quadratic(svc: SVC, rtol: float = 1e-12) -> SVC:
    """The same decision function as a binary ``svc`` (kernel "poly", degree 2, coef0 != 0) with at most d + 1
    support vectors (Burges 1996).

    Parameters
    ----------
    svc : svmcore.SVC
        Fitted, two classes, dense support vectors (n_SV, d) float64.
    rtol : float
        Eigenvalues of M below ``rtol`` times the largest in magnitude are dropped (terms below the float64
        rounding of the sum).

    Returns
    -------
    svmcore.SVC
        A copy whose ``support_vectors_`` (r, d) float64 are the reduced set (r <= d + 1), ``dual_coef_`` (1, r)
        their coefficients and ``support_`` all -1 (they are no training rows); the intercept, classes,
        hyperparameters and the fit's figures (objective_, n_iter_, ...) are the original's. Decision values agree
        to rounding (about 1e-12 relative to the largest term).

    Raises
    ------
    ValueError
        Another kernel, degree or coef0 = 0 (no constant column to absorb), more than two classes,
        ``probability=True`` (its sigmoid would still hold, but cross-validation folds do not), or sparse support
        vectors. :class:`svmcore.NotFittedError` before fit.
    """
    check_fitted(svc, "dual_coef_")
    kernel, degree, coef0 = svc._param("kernel"), svc._param("degree"), float(svc._param("coef0"))
    if kernel != "poly" or degree != 2 or coef0 == 0.0:
        raise ValueError(
            f"reduce_quadratic: needs kernel='poly', degree=2, coef0 != 0; got {kernel!r}, degree "
            f"{degree}, coef0 {coef0}"
        )
    if svc.dual_coef_.shape[0] != 1:
        raise ValueError("reduce_quadratic: needs a two-class SVC (one decision function)")
    if svc._param("probability"):
        raise ValueError("reduce_quadratic: not for probability=True models")
    sv = svc.support_vectors_
    if not isinstance(sv, np.ndarray):
        raise ValueError("reduce_quadratic: needs dense support vectors (fit on dense rows)")
    gamma = float(svc.gamma_)
    a = svc.dual_coef_[0].astype(np.float64)
    W = np.hstack([gamma * sv.astype(np.float64), np.full((len(sv), 1), coef0)])
    M = (W * a[:, None]).T @ W
    lam, U = np.linalg.eigh((M + M.T) / 2)
    keep = np.abs(lam) > rtol * np.abs(lam).max()
    lam, U = lam[keep], U[:, keep]
    t = U[-1]
    # an eigenvector with no constant part (t = 0) cannot be written as one kernel term; rotating within a
    # (numerically) repeated eigenvalue would fix it, and never needed for real data: say so instead
    if np.any(np.abs(t) < 1e-12):
        raise ValueError("reduce_quadratic: an eigenvector of M has no constant component; no exact reduced set")
    out = copy.deepcopy(svc)
    out.support_vectors_ = np.ascontiguousarray(coef0 * U[:-1] / (gamma * t)).T.copy()
    out.dual_coef_ = (lam * (t / coef0) ** 2)[None, :]
    out.support_ = np.full(len(lam), -1, dtype=np.int64)
    out._check_state()
    return out
