"""PmSVM-LUT: the O(d) scoring of a trained PmSVM through its per-dimension lookup table (:func:`lut_decision`).

Source: H. Yang, J. Wu, "Practical Large Scale Classification with Additive Kernels", ACML 2012.

PmSVM-LUT replaces e(x) and beta(x) by two tables over N = ``lut_bins`` equally spaced nodes of [0, s_j]
(values are rounded to the nearest node in training). A trained model scores through the per-dimension table
``table_[m, j, k] = e(node_k / s_j)^T coef_[m, j]`` (coef_[m, j] = s_j w_j, in feature units) plus
``intercept_[m]``: O(d) per sample, independent of the number of training samples (:func:`lut_decision`);
a table beyond ``TABLE_MAX_BYTES`` (:mod:`svmcore.pmsvm.estimator`) is not built, and the same interpolation is
computed from coef_.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba as nb
import numpy as np
import scipy.sparse as sp

from .kernel import check_x_max

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..validation import MatrixLike


# --- the O(d) evaluation with lookup tables --------------------------------------------------------
@nb.njit(cache=True, fastmath=True, inline="always")
def _lut_add(out, i, table, j, s):
    """out[i] += T_j at table position s (linear interpolation; 0 below the first node, clamped at the last)."""
    top = table.shape[2] - 1
    if s <= 0.0:
        return  # every table row starts at g_j(0) = 0
    if s >= top:
        for m in range(table.shape[0]):
            out[i, m] += table[m, j, top]
        return
    k = int(s)
    w = s - k
    for m in range(table.shape[0]):
        out[i, m] += table[m, j, k] + w * (table[m, j, k + 1] - table[m, j, k])


@nb.njit(cache=True, parallel=True, fastmath=True, nogil=True)
def _lut_dense(X, table, inv_step, intercept, out):
    n, d = X.shape
    n_models = table.shape[0]
    for i in nb.prange(n):
        for m in range(n_models):
            out[i, m] = intercept[m]
        for j in range(d):
            _lut_add(out, i, table, j, X[i, j] * inv_step[j])


@nb.njit(cache=True, parallel=True, fastmath=True, nogil=True)
def _lut_csr(indptr, indices, data, table, inv_step, intercept, out):
    n = indptr.shape[0] - 1
    n_models = table.shape[0]
    for i in nb.prange(n):
        for m in range(n_models):
            out[i, m] = intercept[m]
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            _lut_add(out, i, table, j, data[q] * inv_step[j])


def lut_decision(X: MatrixLike, table: ArrayLike, x_max: ArrayLike, intercept: ArrayLike) -> np.ndarray:
    """Score feature vectors with a PmSVM lookup table in O(d) per vector: (n, n_models) float64.

    For each model m: f_m(x) = intercept[m] + sum_j T_m,j(x_j), where T_m,j linearly interpolates the
    table row ``table[m, j, :]`` over the N = table.shape[2] equally spaced nodes 0, h_j, ..., s_j of feature j
    (s_j = x_max[j], h_j = s_j / (N - 1)): with s = x_j / h_j, k = floor(s), w = s - k,
    T_m,j(x_j) = table[m, j, k] + w (table[m, j, k+1] - table[m, j, k]); x_j >= s_j gives
    table[m, j, N-1] (no extrapolation) and x_j <= 0 gives 0 (table[m, j, 0] is 0 by construction).

    X: (n, d) float32/float64 array or CSR matrix of finite nonnegative features (not checked here: this
    is the detector's hot path; negative values score 0). table: (n_models, d, N) float32 or float64,
    e.g. ``PmSVM.table_``; x_max: the feature units, a (d,) array (``PmSVM.x_max_``) or one positive number
    for all features (the unit of models saved before per-feature units); intercept: (n_models,),
    ``PmSVM.intercept_``. For a
    binary PmSVM the positive class ``classes_[1]`` scores > 0; for a one-vs-one model the columns are
    the pairwise values (``PmSVM.decision_function`` turns them into votes). Raises ValueError for
    mismatched shapes or an x_max that is not a positive number or a (d,) array of them.
    """
    table = np.asarray(table)
    if table.dtype not in (np.float32, np.float64):
        table = table.astype(np.float64)
    intercept = np.ascontiguousarray(intercept, dtype=np.float64)
    if table.ndim != 3 or table.shape[2] < 2 or intercept.shape != (table.shape[0],):
        raise ValueError(
            f"lut_decision: table must be (n_models, d, N>=2) with intercept (n_models,); got "
            f"{table.shape} and {intercept.shape}"
        )
    x_max = check_x_max(x_max, table.shape[1], "lut_decision: x_max")
    if not sp.issparse(X):
        X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != table.shape[1]:
        raise ValueError(f"lut_decision: X has shape {X.shape}, the table expects {table.shape[1]} features")
    inv_step = (table.shape[2] - 1) / x_max  # (d,): table positions per feature unit
    out = np.empty((X.shape[0], table.shape[0]))
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if not X.has_canonical_format:  # duplicate entries count summed, as scipy and decision_function read them
            X = X.copy()
            X.sum_duplicates()
        _lut_csr(X.indptr, X.indices, X.data, table, inv_step, intercept, out)
    else:
        X = np.ascontiguousarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        _lut_dense(X, table, inv_step, intercept, out)
    return out
