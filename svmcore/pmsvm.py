"""PmSVM: additive-kernel SVM trained by regression-approximated dual coordinate descent.

Source: J. Wu, "Power Mean SVM for Large Scale Visual Classification", CVPR 2012, and J. Wu, H. Yang,
"Linear Regression-Based Efficient SVM Learning for Large-Scale Classification", IEEE TNNLS 26(10), 2015
(equation numbers below refer to the TNNLS paper); PmSVM-LUT: H. Yang, J. Wu, "Practical Large Scale
Classification with Additive Kernels", ACML 2012.

Kernel: the power mean kernel k(x, y) = sum_j M_p(x_j, y_j) on nonnegative features, with
M_p(a, b) = ((a^p + b^p) / 2)^(1/p) for p < 0 (p = -1: chi-square 2ab/(a+b); p -> -inf: min(a, b),
the histogram intersection; p = -8 is close to it), M_0(a, b) = sqrt(ab) (Hellinger), and M_p(a, 0) = 0.
Note M_p(a, a) = a, so k(x, x) = sum_j x_j.

Dual coordinate descent (Hsieh et al. 2008) needs the gradient y_i f(x_i) - 1 with
f(q) = sum_j g_j(q_j), g_j(q) = sum_i alpha_i y_i M_p(q, x_ij). PmSVM approximates each g_j by a
regression on the explanatory variables e(q) = (1, t, t^2, ...), t = ln(q/s + b), fitted to the exact
values of g_j at anchors c_k (Eq. 25-31): because the fit is linear in the anchor values, it is
g_j(q) ~ e(q)^T w_j with w_j = sum_i alpha_i y_i beta(x_ij), beta(x) = pinv(E) m(x),
E_kl = e(c_k)_l, m(x)_k = M_p(c_k, x). One coordinate step therefore costs O(nnz(x_i)) for the
gradient (3 products per nonzero) and as much for the update of w. This is the non-symmetric kernel
approximation of Eq. (40): k~(q, x) = sum_j [q_j > 0] e(q_j)^T beta(x_j) (exact zero for q_j = 0).
Each feature j is measured in its own unit s_j = ``x_max_[j]`` (its largest training value; 1 for a feature
never positive in training), so the anchors (0.01, 0.06, 0.75) and b = 0.05 of the paper apply to [0, 1] in
every dimension; with more than 3 anchors the basis has n_anchors terms and the anchors are Chebyshev nodes in
t over [0, 1] (Eq. 41). This is exact: each term of the kernel is homogeneous of degree 1 in its own dimension,
M_p(a, b) = s_j M_p(a/s_j, b/s_j), so the model is the same additive kernel's; only the approximation (and the
lookup table's nodes) follow each feature's range, and one large value or feature leaves the others' alone.

PmSVM-LUT replaces e(x) and beta(x) by two tables over N = ``lut_bins`` equally spaced nodes of [0, s_j]
(values are rounded to the nearest node in training). A trained model scores through the per-dimension table
``table_[m, j, k] = e(node_k / s_j)^T coef_[m, j]`` (coef_[m, j] = s_j w_j, in feature units) plus
``intercept_[m]``: O(d) per sample, independent of the number of training samples (:func:`lut_decision`);
a table beyond ``TABLE_MAX_BYTES`` is not built, and the same interpolation is computed from coef_.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import TYPE_CHECKING

import numba as nb
import numpy as np
import scipy.sparse as sp
from llvmlite import ir
from numba.core import cgutils
from numba.extending import intrinsic

from . import persistence
from ._shrinking import keep_after_check
from .validation import (
    ConvergenceWarning,
    check_array,
    check_choice,
    check_class_weight,
    check_finite_fit,
    check_fitted,
    check_labels,
    check_n_features,
    check_random_state,
    check_scalar,
    make_rng,
    row_weights,
)
from .base import BaseEstimator, ClassifierMixin
from .multiclass import ovo_pairs, ovo_votes

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .validation import ClassWeight, MatrixLike, RandomStateLike

PAPER_ANCHORS = (0.01, 0.06, 0.75)  # Eq. (31), in units of x_max (each feature's own)
OFFSET_B = 0.05  # b in e(q) = (1, ln(q + b), ln^2(q + b)), Eq. (25)
MAX_ANCHORS = 10  # beyond this the polynomial basis in t is ill-conditioned and gains nothing
# Larger lookup tables are not built (105 one-vs-rest models x 55,197 sector features x 1000 bins would take
# 43 GiB): decision values then come from coef_ through the same interpolation, n_anchors products per value
TABLE_MAX_BYTES = 256 * 2**20


# --- power means and the exact kernel ------------------------------------------------------------
def check_p(p: object) -> float:
    """Return ``p`` as float if it is a supported power-mean exponent: -inf <= p <= 0.

    Raises TypeError for a non-number and ValueError for NaN or p > 0 (for p > 0 the power mean is not
    a positive definite kernel, e.g. p = 1 gives (a + b)/2, and M_p(a, 0) would not vanish), and for
    -1e-9 < p < 0, where x^p rounds to 1 and M_p would come out as the minimum instead of near M_0.
    """
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"p: expected a real number, got {p!r}")
    try:
        p = float(p)
    except OverflowError:  # an int beyond the float range: -10**400 is as good as -inf (the intersection kernel)
        p = -math.inf if p < 0 else math.inf
    if np.isnan(p):
        raise ValueError("p: must not be NaN")
    if p > 0:
        raise ValueError(
            f"p: power mean kernels need p <= 0 (p=-1 chi-square, p=0 Hellinger, "
            f"p=-inf intersection); p={p} > 0 is not positive definite and not supported"
        )
    if -1e-9 < p < 0:
        raise ValueError(f"p: {p} is too close to 0 for floating point; use p=0 (its limit, the Hellinger kernel)")
    return p


def check_nonnegative(X: np.ndarray | sp.spmatrix, name: str = "X") -> None:
    """Raise ValueError unless every entry of ``X`` (array or CSR matrix) is >= 0."""
    data = X.data if sp.issparse(X) else X
    if data.size and data.min() < 0:
        raise ValueError(
            f"{name}: Negative values in data passed to an additive (power mean) kernel: features "
            f"must be >= 0, found {data.min():g}"
        )


def power_mean(a: ArrayLike, c: ArrayLike, p: float) -> np.ndarray:
    """Elementwise power mean M_p(a, c) of nonnegative arrays (broadcast), float64; 0 where a or c is 0."""
    a, c = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(c, dtype=np.float64))
    out = np.zeros(a.shape)
    pos = (a > 0) & (c > 0)
    ap, cp = a[pos], c[pos]
    if p == -np.inf:
        out[pos] = np.minimum(ap, cp)
    elif p == 0:
        with np.errstate(over="ignore", under="ignore"):
            g = ap * cp
        far = ~((g > 1e-300) & (g < 1e300))  # the product under- or overflows: the square roots' product does not
        g = np.sqrt(g)
        g[far] = np.sqrt(ap[far]) * np.sqrt(cp[far])
        out[pos] = g
    else:  # min * ((1 + (max/min)^p) / 2)^(1/p): (max/min)^p <= 1 cannot overflow for any p < 0
        lo, hi = np.minimum(ap, cp), np.maximum(ap, cp)
        out[pos] = lo * ((1.0 + (hi / lo) ** p) / 2.0) ** (1.0 / p)
    return out


@nb.njit(cache=True, inline="always")
def _pm(a, c, p):
    """M_p(a, c) for a, c > 0 and p < 0 (the overflow-free form of :func:`power_mean`)."""
    if p == -1.0 and 1e-150 < a < 1e150 and 1e-150 < c < 1e150:  # 2ac neither overflows nor underflows
        return 2.0 * a * c / (a + c)
    if p == -np.inf:
        return min(a, c)
    lo = min(a, c)
    return lo * (0.5 * (1.0 + (max(a, c) / lo) ** p)) ** (1.0 / p)


@nb.njit(cache=True, parallel=True)
def _power_mean_kernel(X, Y, p, out):
    n, d = X.shape
    m = Y.shape[0]
    for i in nb.prange(n):
        for j in range(m):
            s = 0.0
            for k in range(d):
                a = X[i, k]
                c = Y[j, k]
                if a > 0.0 and c > 0.0:
                    s += _pm(a, c, p)
            out[i, j] = s


@nb.njit(cache=True, parallel=True)
def _power_mean_kernel_sparse(x_ptr, x_ind, x_val, y_ptr, y_ind, y_val, p, out):
    # X by rows (CSR), Y by columns (CSC): row i meets, per nonzero feature k, only the rows of Y that have k,
    # O(sum_k df_X(k) df_Y(k)) in all. Sorted feature indices add the terms in the dense kernel's order.
    for i in nb.prange(x_ptr.shape[0] - 1):
        o = out[i]
        for q in range(x_ptr[i], x_ptr[i + 1]):
            k = x_ind[q]
            a = x_val[q]
            if a > 0.0:
                for r in range(y_ptr[k], y_ptr[k + 1]):
                    c = y_val[r]
                    if c > 0.0:
                        o[y_ind[r]] += _pm(a, c, p)


def power_mean_kernel(X: MatrixLike, Y: MatrixLike | None = None, p: float = -1.0) -> np.ndarray:
    """Exact additive power mean kernel K[i, j] = sum_k M_p(X[i, k], Y[j, k]), (n_x, n_y) float64.

    X (n_x, d) and Y (n_y, d): nonnegative arrays or sparse matrices. Dense input costs O(n_x n_y d), the
    reference for small sets and the exact-kernel baseline; if either is sparse, both are taken as sparse and
    only features nonzero in both rows meet (O(sum_k df_X(k) df_Y(k)), df the number of rows with feature
    k: seconds for the 6,412 x 55,197 sector tf-idf matrix, which would take 2.8 GB densified), with the same
    result to the last bit for p < 0. p as in :func:`check_p`; p = 0 uses one matrix product of the square roots
    (dense or sparse, equal to rounding).
    Raises ValueError for negative or non-finite entries, different numbers of columns, or p > 0.
    """
    p = check_p(p)
    X = check_array(X, "X", allow_sparse=True)
    Y = X if Y is None else check_array(Y, "Y", allow_sparse=True)
    check_nonnegative(X, "X")
    check_nonnegative(Y, "Y")
    check_n_features(Y, X.shape[1], "Y", other="X")
    if sp.issparse(X) or sp.issparse(Y):
        X, Y = sp.csr_matrix(X, dtype=np.float64), sp.csc_matrix(Y, dtype=np.float64)
        if p == 0:
            return (X.sqrt() @ Y.sqrt().T).toarray()
        out = np.zeros((X.shape[0], Y.shape[0]))
        _power_mean_kernel_sparse(X.indptr, X.indices, X.data, Y.indptr, Y.indices, Y.data, p, out)
        return out
    if p == 0:
        return np.sqrt(X) @ np.sqrt(Y).T
    out = np.empty((X.shape[0], Y.shape[0]))
    _power_mean_kernel(np.ascontiguousarray(X), np.ascontiguousarray(Y), p, out)
    return out


# --- the regression approximation (Eq. 25-31, 40, 41) ---------------------------------------------
def pmsvm_anchors(n_anchors: int = 3) -> np.ndarray:
    """Anchor points c_k in units of x_max, (n_anchors,) float64.

    n_anchors = 3: the paper's (0.01, 0.06, 0.75) (Eq. 31). Otherwise (2..10): Chebyshev nodes of the
    first kind in t = ln(q + b) over q in [0, 1], mapped back to q (our reading of Eq. 41). Raises
    ValueError outside 2..10.
    """
    n_anchors = check_scalar(n_anchors, "n_anchors", lo=2, hi=MAX_ANCHORS, integer=True)
    if n_anchors == 3:
        return np.array(PAPER_ANCHORS)
    lo, hi = np.log(OFFSET_B), np.log(1.0 + OFFSET_B)
    k = np.arange(1, n_anchors + 1)
    t = 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.cos((2 * k - 1) * np.pi / (2 * n_anchors))
    return np.sort(np.exp(t) - OFFSET_B)


def explanatory_variables(u: ArrayLike, n_basis: int) -> np.ndarray:
    """e(u) = (1, t, ..., t^(n_basis-1)), t = ln(u + b): (..., n_basis) float64 for u in units of x_max.

    Eq. (25) with n_basis = 3. Zeros of u map to a zero row (k(0, x) = 0 exactly, no regression there).
    """
    u = np.asarray(u, dtype=np.float64)
    t = np.log(u + OFFSET_B)
    e = np.empty(u.shape + (n_basis,))
    e[..., 0] = 1.0
    e[..., 1] = t
    # powers by products, not t ** k: 16x faster (a fit without a table spent 0.55 s of 0.85 s here on CBCL HOG),
    # and t * t is what the solver's CSR margin computes from t
    for k in range(2, n_basis):
        np.multiply(e[..., k - 1], t, out=e[..., k])
    e[u <= 0] = 0.0
    return e


def regression_weights(u: ArrayLike, anchors: np.ndarray, p: float) -> np.ndarray:
    """beta(u) = pinv(E) m(u), m(u)_k = M_p(c_k, u): (..., n_basis) float64 (Eq. 28-30).

    The regression of k(., u) on e(.) fitted at the anchors; k~(q, u) = e(q)^T beta(u). Zeros map to 0.
    """
    E = explanatory_variables(anchors, len(anchors))
    m = power_mean(np.asarray(u, dtype=np.float64)[..., None], anchors, check_p(p))  # (a float: PmSVM keeps p as given)
    return m @ np.linalg.pinv(E).T


def check_x_max(x_max: ArrayLike, d: int, name: str = "x_max") -> np.ndarray:
    """The feature units as a (d,) float64 array: ``x_max`` is a positive number (one unit for all features, as
    models before per-feature units had) or a (d,) array of them. Raises ValueError for another shape, NaN,
    infinity or a unit <= 0, TypeError for non-numbers."""
    if isinstance(x_max, (bool, np.bool_, str, bytes)):
        raise TypeError(f"{name}: expected a positive number or a ({d},) array of them, got {x_max!r}")
    a = np.asarray(x_max)
    if a.dtype.kind not in "iuf":
        raise TypeError(f"{name}: expected a positive number or a ({d},) array of them, got dtype {a.dtype}")
    a = a.astype(np.float64)
    if a.ndim == 0:
        a = np.full(d, float(a))
    if a.shape != (d,):
        raise ValueError(f"{name}: expected a number or one unit per feature, shape ({d},); got shape {a.shape}")
    if not (np.isfinite(a).all() and (a > 0).all()):
        bad = a[~(np.isfinite(a) & (a > 0))][0] if a.size else None
        raise ValueError(f"{name} must hold positive finite numbers (the feature units, PmSVM.x_max_); found {bad!r}")
    return a


def approx_kernel(
    Q: MatrixLike, X: MatrixLike, p: float = -1.0, n_anchors: int = 3, x_max: ArrayLike = 1.0
) -> np.ndarray:
    """Non-symmetric PmSVM kernel approximation of Eq. (40), (n_q, n_x) float64.

    K~[i, j] = sum_k s_k e(Q[i, k] / s_k)^T beta(X[j, k] / s_k), s = x_max: the first argument is the
    regressed (query) one, the second enters through the anchor values M_p(c, x). Q (n_q, d), X (n_x, d)
    nonnegative arrays (or CSR, densified); x_max a positive number (one unit for all features) or a (d,)
    array of per-feature units, e.g. ``PmSVM.x_max_``; features above their unit are extrapolated. Raises
    ValueError for negative or non-finite entries, p > 0, a unit <= 0 or not finite, x_max of another shape,
    or n_anchors outside 2..10.
    """
    p = check_p(p)
    anchors = pmsvm_anchors(n_anchors)
    Q = check_array(Q, "Q", allow_sparse=True)
    X = check_array(X, "X", allow_sparse=True)
    check_nonnegative(Q, "Q")
    check_nonnegative(X, "X")
    check_n_features(X, Q.shape[1], "X", other="Q")
    x_max = check_x_max(x_max, Q.shape[1])
    Q = Q.toarray() if sp.issparse(Q) else Q
    X = X.toarray() if sp.issparse(X) else X
    e = explanatory_variables(Q / x_max, len(anchors))  # (n_q, d, B)
    beta = regression_weights(X / x_max, anchors, p) * x_max[:, None]  # (n_x, d, B), in feature units
    return np.einsum("idb,jdb->ij", e, beta)


def approximation_error(p: float = -1.0, n_anchors: int = 3, step: float = 0.01) -> dict[str, float]:
    """Relative deviation of the per-dimension approximation k~(a, c) from M_p(a, c) on a grid of (0, 1]^2.

    The grid holds a, c in {step, 2 step, ..., 1}, step in [0.001, 0.5]. Returns a dict: ``mean_relative`` = mean of
    |k~ - k| / k, ``sum_relative`` = sum |k~ - k| / sum k, ``max_relative``, ``median_relative`` (all
    fractions, not percent). The paper reports about 1.94% average relative deviation for chi-square
    (p = -1) with the default anchors (TNNLS Sec. V).
    """
    step = float(check_scalar(step, "step", lo=1e-3, hi=0.5))  # a step^-2 grid: 10^6 points at most
    g = np.arange(1, int(round(1.0 / step)) + 1) * step
    k = power_mean(g[:, None], g[None, :], check_p(p))
    anchors = pmsvm_anchors(n_anchors)
    kt = explanatory_variables(g, len(anchors)) @ regression_weights(g, anchors, p).T
    rel = np.abs(kt - k) / k
    return {
        "mean_relative": float(rel.mean()),
        "sum_relative": float(np.abs(kt - k).sum() / k.sum()),
        "max_relative": float(rel.max()),
        "median_relative": float(np.median(rel)),
    }


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


# --- solvers ---------------------------------------------------------------------------------------
@nb.njit(cache=True)
def _xorshift(state):
    state ^= (state << np.uint64(13)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    state ^= state >> np.uint64(7)
    state ^= (state << np.uint64(17)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    return state


@nb.njit(cache=True)
def _shuffle(index, size, state):
    for s in range(size - 1, 0, -1):
        state = _xorshift(state)
        r = np.int64(state % np.uint64(s + 1))
        index[s], index[r] = index[r], index[s]
    return state


# Rows reach the solvers in one of two layouts. Sparse data come as (indptr, indices, codes): CSR positions,
# each coding its e(x) / beta(x) row in ev / beta (a table row, or the value's own row without a table). With the
# paper's basis e = (1, t, t^2), t_pos holds each position's t, and the margin reads it in place of the table row:
# one load that depends on another (code, then ev) is one fewer per position, 1.4x on the margin over sector's
# positions, to the same bits (ev is built as 1, t, t * t).
# Mostly nonzero data come as dense rows instead (``codes`` empty): ev[i] and beta[i] hold e(x_ij) and
# s_j beta(x_ij) for all d features, flat (d n_basis,) float32, zero where x_ij = 0. A coordinate step is then
# one contiguous dot product and one axpy, which SIMD does (fastmath reassoc and contract: a different order
# of the same finite sums, no assumption about NaN or inf): the solver runs 2x faster than on table codes on
# pendigits (87% nonzero) and CBCL HOG (98%), 1.4x faster than CSR on USPS (41%). float32 halves the memory
# traffic (float64 rows gain 1.3x on CBCL HOG and lose on USPS); its rounding (relative 6e-8) is far below
# the approximation's own error (2%) and the table's step.
DENSE_FROM = 0.35  # nonzero fraction from which fit uses dense rows (break-even: 0.3 on USPS, 0.45 on CBCL HOG)
ROWS_MAX_BYTES = 1 << 30  # larger dense rows (n d n_basis x 8 bytes) stay CSR


# Building the layouts: the kernels below read X's rows as CSR (indptr, indices, values) and write the solver's arrays
# at their final size, one pass each and in parallel over rows. A dense X is read in place as the CSR of all its
# entries with indices empty (feature j = q - indptr[i]): no CSR copy of X, no codes or u array per entry (with them
# fit took up to 5 times a dense X's bytes beyond X; PmSVM's Notes state the bound).
CHUNK_VALUES = 1 << 19  # positions x n_basis per block of the regression without a table: ~40 MB of numpy temporaries


@nb.njit(cache=True, inline="always")
def _feature(q, i, indptr, indices):
    """The feature of position q of row i: indices[q], or q - indptr[i] for a dense X (indices empty)."""
    return q - indptr[i] if indices.shape[0] == 0 else indices[q]


@nb.njit(cache=True, inline="always")
def _code(v, s, top):
    """The table row of value v of a feature of unit s: rint(v / s (lut_bins - 1)), at most top = lut_bins - 1."""
    return int(min(np.rint(v / s * top), top))


@nb.njit(cache=True, inline="always")
def _kept(v, s, ev, top):
    """Whether a nonzero value v (feature unit s) keeps its CSR position with the paper's basis: e(v / s) is not 0,
    i.e. v does not round to the table's node 0 (top = lut_bins - 1) or, without a table (top < 0), v / s does not
    underflow to 0 (explanatory_variables' zero row)."""
    if top < 0:
        return v / s > 0.0
    return ev[_code(v, s, top), 0] != 0.0


@nb.njit(cache=True)
def _row_sums(indptr, values):
    """Each row's sum of values, in position order: the same bits whether zeros are positions or not."""
    out = np.zeros(indptr.shape[0] - 1)
    for i in range(out.shape[0]):
        for q in range(indptr[i], indptr[i + 1]):
            out[i] += values[q]
    return out


@nb.njit(cache=True)
def _column_max(indptr, indices, values, d, rows):
    """Each feature's largest value over the rows i with rows[i] (0 where it never occurs): (d,) float64, one pass
    instead of scipy's conversion to CSC (2 ms on reuters) or a copy of the rows kept."""
    out = np.zeros(d)
    for i in range(indptr.shape[0] - 1):
        if rows[i]:
            for q in range(indptr[i], indptr[i + 1]):
                j = _feature(q, i, indptr, indices)
                out[j] = max(out[j], values[q])
    return out


@nb.njit(cache=True, parallel=True)
def _count_positions(indptr, indices, values, unit, ev, lut_bins, paper):
    """Row pointers (n + 1,) int64 of the solver's CSR positions: each row's nonzero values, less, with the paper's
    basis, those that :func:`_kept` drops (e and beta are 0 there: they add nothing). lut_bins = 0: no table."""
    n = indptr.shape[0] - 1
    ptr = np.zeros(n + 1, dtype=np.int64)
    top = lut_bins - 1
    for i in nb.prange(n):
        c = 0
        for q in range(indptr[i], indptr[i + 1]):
            v = values[q]
            if v != 0.0 and (not paper or _kept(v, unit[_feature(q, i, indptr, indices)], ev, top)):
                c += 1
        ptr[i + 1] = c
    for i in range(n):
        ptr[i + 1] += ptr[i]
    return ptr


@nb.njit(cache=True, parallel=True)
def _fill_positions(
    indptr, indices, values, unit, ev, beta, lut_bins, paper, ptr, out_indices, out_codes, t_pos, s_beta
):
    """The CSR streams of the rows of (indptr, indices, values), row i's positions from ptr[i] on (ptr from
    :func:`_count_positions`): out_indices the feature j; with the paper's basis t_pos = ev[c, 1] (the margin's
    e = (1, t, t^2)) and s_beta = unit[j] beta[c] (the update's, float32: half the stream, rounding 6e-8), else
    out_codes = c. c: the table row of the value (:func:`_code`), or without a table (lut_bins = 0) its own row q of
    ev and beta, the row of the position in the output as its code."""
    top = lut_bins - 1
    for i in nb.prange(indptr.shape[0] - 1):
        o = ptr[i]
        for q in range(indptr[i], indptr[i + 1]):
            v = values[q]
            if v == 0.0:
                continue
            j = _feature(q, i, indptr, indices)
            s = unit[j]
            if paper and not _kept(v, s, ev, top):
                continue
            c = _code(v, s, top) if lut_bins else q
            out_indices[o] = j
            if paper:
                t_pos[o] = ev[c, 1]
                for b in range(3):
                    s_beta[o, b] = s * beta[c, b]
            else:
                out_codes[o] = c if lut_bins else o
            o += 1


@nb.njit(cache=True, parallel=True)
def _fill_dense_rows(indptr, indices, values, unit, ev, beta, lut_bins, rows_e, rows_b):
    """The dense-row layout of the rows of (indptr, indices, values) into rows_e, rows_b (zeros on entry): e(x_ij)
    and s_j beta(x_ij), float32, at j n_basis + b, from the table rows of the values (:func:`_code`), or without a
    table (lut_bins = 0) from row q of ev and beta."""
    n_basis, top = ev.shape[1], lut_bins - 1
    for i in nb.prange(indptr.shape[0] - 1):
        for q in range(indptr[i], indptr[i + 1]):
            j = _feature(q, i, indptr, indices)
            c = _code(values[q], unit[j], top) if lut_bins else q
            for b in range(n_basis):
                rows_e[i, j * n_basis + b] = ev[c, b]
                rows_b[i, j * n_basis + b] = beta[c, b] * unit[j]


def _row_blocks(ptr, size):
    """Row ranges [r0, r1) covering ptr's rows (ptr: row pointers), each of about ``size`` positions (at least half,
    at most 1.5 size and a row); all rows in one if there are fewer than 2 size. With at least size / 2 positions a
    block's product m @ pinv(E).T in regression_weights stays a matrix product, which gives each position the bits of
    the product over all positions at once (a single position would be BLAS's vector product, to other bits)."""
    n, total = len(ptr) - 1, int(ptr[-1])
    if total < 2 * size:
        return [(0, n)]
    bounds = [0]
    for r in np.searchsorted(ptr, np.arange(size, total, size)):
        if ptr[r] - ptr[bounds[-1]] >= size // 2 and total - ptr[r] >= size // 2:
            bounds.append(int(r))
    bounds.append(n)
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _solver_layout(X, nnz, x_max, anchors, p, lut_bins):
    """The rows of X (C-contiguous float64 array or canonical CSR without stored zeros, nnz nonzero values) in the
    solvers' layout: (indptr, indices, codes, t_pos, ev, beta, k_diag); see the comment above DENSE_FROM."""
    n, d = X.shape
    n_basis = len(anchors)
    if sp.issparse(X):
        indptr, indices, values = X.indptr, X.indices, X.data
    else:
        indptr, indices, values = np.arange(0, n * d + 1, d), np.empty(0, np.int32), X.ravel()
    k_diag = _row_sums(indptr, values)  # k(x, x) = sum_j x_j
    dense_rows = nnz >= DENSE_FROM * n * d and n * d * n_basis * 8 <= ROWS_MAX_BYTES
    # 32-bit indices and codes when they fit: less memory traffic per coordinate step (1.1x on CBCL HOG)
    itype = np.int32 if max(n * d if dense_rows and not sp.issparse(X) else nnz, d) < 2**31 else np.int64
    paper = n_basis == 3 and not dense_rows
    # each feature in its own unit, x / x_max_j: the anchors' [0, 1]. beta stays in units of each feature: the layouts
    # multiply it by s_j (k(q, x) = s_j k(q/s_j, x/s_j) in dimension j), so that one table of lut_bins rows serves all
    if lut_bins is not None:
        nodes = np.linspace(0.0, 1.0, lut_bins)
        ev, beta = explanatory_variables(nodes, n_basis), regression_weights(nodes, anchors, p)
        blocks = None
    else:  # e and beta of every value: computed by blocks of rows, so that numpy's temporaries stay small
        ev = beta = None
        lut_bins = 0
        if sp.issparse(X) or dense_rows:
            block_ptr = indptr
        else:
            block_ptr = _count_positions(indptr, indices, values, x_max, np.zeros((1, 1)), 0, False)
        blocks = _row_blocks(block_ptr, max(CHUNK_VALUES // n_basis, 4))

    def block(r0, r1):
        # rows r0:r1 as CSR of their positions (a dense X's nonzeros, or all its entries for dense rows), with e and
        # beta of each position's value in its row of ev, beta
        if sp.issparse(X):
            a, b = indptr[r0], indptr[r1]
            bp, bi, bv = indptr[r0 : r1 + 1] - a, indices[a:b], values[a:b]
            u = bv / x_max[bi]
        elif dense_rows:
            bp, bi, bv = np.arange(0, (r1 - r0) * d + 1, d), indices, X[r0:r1].ravel()
            u = (X[r0:r1] / x_max).ravel()
        else:
            Xb = sp.csr_matrix(X[r0:r1])
            bp, bi, bv = Xb.indptr, Xb.indices, Xb.data
            u = bv / x_max[bi]
        return bp, bi, bv, explanatory_variables(u, n_basis), regression_weights(u, anchors, p)

    if dense_rows:
        rows_e = np.zeros((n, d * n_basis), dtype=np.float32)
        rows_b = np.zeros((n, d * n_basis), dtype=np.float32)
        if blocks is None:
            _fill_dense_rows(indptr, indices, values, x_max, ev, beta, lut_bins, rows_e, rows_b)
        else:
            for r0, r1 in blocks:
                bp, bi, bv, bev, bbeta = block(r0, r1)
                _fill_dense_rows(bp, bi, bv, x_max, bev, bbeta, 0, rows_e[r0:r1], rows_b[r0:r1])
        # indptr: read (not used) by the solvers' prefetch; indices: not read
        return np.zeros(n + 1, itype), np.empty(0, itype), np.empty(0, itype), np.empty(0), rows_e, rows_b, k_diag
    ptr = _count_positions(indptr, indices, values, x_max, ev if ev is not None else np.zeros((1, 1)), lut_bins, paper)
    m = int(ptr[-1])
    out_indices = np.empty(m, itype)
    if paper:
        # codes: not read with t_pos, only non-empty (an empty one means dense rows); ev: only its width is read
        codes, t_pos, s_beta = np.zeros(1, itype), np.empty(m), np.empty((m, 3), dtype=np.float32)
        if blocks is None:
            _fill_positions(
                indptr, indices, values, x_max, ev, beta, lut_bins, True, ptr, out_indices, codes, t_pos, s_beta
            )
        else:
            for r0, r1 in blocks:
                bp, bi, bv, bev, bbeta = block(r0, r1)
                _fill_positions(bp, bi, bv, x_max, bev, bbeta, 0, True, ptr[r0:r1], out_indices, codes, t_pos, s_beta)
            ev = np.zeros((0, 3))
        return ptr.astype(itype), out_indices, codes, t_pos, ev, s_beta, k_diag
    codes = np.empty(m, itype)
    if blocks is None:
        _fill_positions(
            indptr,
            indices,
            values,
            x_max,
            ev,
            beta,
            lut_bins,
            False,
            ptr,
            out_indices,
            codes,
            np.empty(0),
            np.empty((0, 3), dtype=np.float32),
        )
    else:  # every nonzero value is a position and its own row of ev and beta, in storage order
        ev, beta = np.empty((m, n_basis)), np.empty((m, n_basis))
        for r0, r1 in blocks:
            bp, bi, bv, bev, bbeta = block(r0, r1)
            _fill_positions(
                bp,
                bi,
                bv,
                x_max,
                bev,
                bbeta,
                0,
                False,
                ptr[r0:r1],
                out_indices,
                codes,
                np.empty(0),
                np.empty((0, 3), dtype=np.float32),
            )
            ev[ptr[r0] : ptr[r1]], beta[ptr[r0] : ptr[r1]] = bev, bbeta
    return ptr.astype(itype), out_indices, codes, np.empty(0), ev, beta, k_diag


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _dot_row(e, w):
    """e . w over one dense row (float32 e, float64 w); reassociated so that it vectorises."""
    f = 0.0
    for t in range(e.shape[0]):
        f += e[t] * w[t]
    return f


@nb.njit(cache=True, fastmath={"contract"})
def _axpy_row(b, w, step):
    """w += step * b over one dense row."""
    for t in range(b.shape[0]):
        w[t] += step * b[t]


@intrinsic
def _prefetch(typingctx, arr, q):
    """Ask the CPU to bring the cache line of arr[q] in (LLVM's prefetch: a read, kept close); no result, no fault.
    arr: a 1-D array; q: an integer index."""
    if not (isinstance(arr, nb.types.Array) and arr.ndim == 1 and isinstance(q, nb.types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, signature.args[0], ary, [args[1]], wraparound=False)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0i8"
        )
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return nb.types.void(arr, q), codegen


@nb.njit(cache=True, inline="always")
def _prefetch_row(i, indptr, indices, codes, t_pos):
    """Prefetch the CSR positions of row i, which the solver visits next. The rows come in random order, so the
    hardware's stream prefetcher starts each one cold: on sector the margin pass took 1.5x as long in random order
    as in storage order."""
    start, end = indptr[i], indptr[i + 1]
    if codes.shape[0] == 0 or start == end:
        return
    # a line's worth of positions apart, and the last one too: a row need not start at a line's start
    if t_pos.shape[0]:
        for q in range(start, end, 64 // t_pos.itemsize):
            _prefetch(t_pos, q)
        _prefetch(t_pos, end - 1)
    else:
        for q in range(start, end, 64 // codes.itemsize):
            _prefetch(codes, q)
        _prefetch(codes, end - 1)
    for q in range(start, end, 64 // indices.itemsize):
        _prefetch(indices, q)
    _prefetch(indices, end - 1)


@nb.njit(cache=True, inline="always")
def _margin(i, indptr, indices, codes, t_pos, ev, w, bias_w):
    """e(x_i)^T w + bias_w: over all d features for dense rows (w flat, (d n_basis,)), else over the CSR
    positions q of row i, feature j = indices[q] and e(x_q) = (1, t_pos[q], t_pos[q]^2) with the paper's basis
    (t_pos not empty), else ev[codes[q]]."""
    if codes.shape[0] == 0:
        return _dot_row(ev[i], w) + bias_w
    nb_ = ev.shape[1]
    f = 0.0
    if t_pos.shape[0]:  # the paper's basis written out (1.2-1.4x faster than the loop on USPS / CBCL HOG in CSR)
        g = 0.0  # two partial sums, so that consecutive positions' adds need not wait on each other (1.07x on reuters)
        q = indptr[i]
        end = indptr[i + 1]
        while q + 1 < end:
            t = t_pos[q]
            o = 3 * indices[q]
            f += w[o] + t * w[o + 1] + (t * t) * w[o + 2]
            t = t_pos[q + 1]
            o = 3 * indices[q + 1]
            g += w[o] + t * w[o + 1] + (t * t) * w[o + 2]
            q += 2
        if q < end:
            t = t_pos[q]
            o = 3 * indices[q]
            f += w[o] + t * w[o + 1] + (t * t) * w[o + 2]
        f += g
    else:
        for q in range(indptr[i], indptr[i + 1]):
            c = codes[q]
            o = nb_ * indices[q]
            for b in range(nb_):
                f += ev[c, b] * w[o + b]
    return f + bias_w


@nb.njit(cache=True, inline="always")
def _add_row(i, indptr, indices, codes, t_pos, beta, unit, w, step):
    """w += step * s_j beta(x_ij) over row i's features, as in :func:`_margin`. Dense rows and, with the paper's
    basis (t_pos not empty), CSR positions already hold s_j beta (float32; beta[i], beta[q]); otherwise the CSR
    positions scale the table's beta, in units of feature j, by unit[j] = s_j."""
    if codes.shape[0] == 0:
        _axpy_row(beta[i], w, step)
        return
    nb_ = beta.shape[1]
    if t_pos.shape[0]:
        # one sequential stream per position, in place of a table row through the code and unit[j] from anywhere in
        # a (d,) array: 0.9x the margin-and-update time on sector (docs/pmsvm-history.md, "s_j β per CSR position")
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            w[3 * j] += step * beta[q, 0]
            w[3 * j + 1] += step * beta[q, 1]
            w[3 * j + 2] += step * beta[q, 2]
    else:
        for q in range(indptr[i], indptr[i + 1]):
            c = codes[q]
            j = indices[q]
            t = step * unit[j]
            for b in range(nb_):
                w[nb_ * j + b] += t * beta[c, b]


@nb.njit(cache=True, inline="always")
def _check_all(members, index, G, y, a, w, bias_w, upper, diag, indptr, indices, codes, t_pos, ev):
    """The gradient G of every sample in members (sorted), at a fixed w, in storage order; returns the PG extremes
    (pg_max, pg_min) over all of them and the new active count, index holding first the samples that LIBLINEAR's
    rule keeps with those extremes as the thresholds (a sample at a bound whose G lies beyond them has PG = 0 and
    leaves), then the others."""
    pg_max = -np.inf
    pg_min = np.inf
    for s in range(members.shape[0]):
        i = members[s]
        G[s] = y[i] * _margin(i, indptr, indices, codes, t_pos, ev, w, bias_w) - 1.0 + diag[i] * a[i]
        pg = G[s]
        if a[i] == 0.0:
            pg = min(pg, 0.0)
        elif a[i] == upper[i]:
            pg = max(pg, 0.0)
        pg_max = max(pg_max, pg)
        pg_min = min(pg_min, pg)
    a_m = a[members]
    active = keep_after_check(index, members, G, a_m == 0.0, a_m == upper[members], pg_max, pg_min)
    return pg_max, pg_min, active


# Dual CD's first phase (see _dcd): the shrinking threshold is bounded by FIRST_PHASE_CAP, in the units of the gradient
# y f(x) - 1 (the margin's, whatever tol is), until the PG spread falls to 10 FIRST_PHASE_CAP. 0: no first phase
# (LIBLINEAR's shrinking). 16-35% fewer full-data passes on the five benchmark sets, the same test accuracy to 0.05
# points; figures and the variants that failed: docs/pmsvm-history.md, "A first phase of shrinking".
FIRST_PHASE_CAP = 0.1


@nb.njit(cache=True, parallel=True)
def _dcd(
    indptr,
    indices,
    codes,
    t_pos,
    ev,
    beta,
    unit,
    qdiag,
    Y,
    upper,
    diag,
    tol,
    phase_cap,
    max_iter,
    seeds,
    W,
    bias,
    alpha,
    n_iter,
    n_passes,
):
    """Dual CD with shrinking (Hsieh et al. 2008; Wu's Algorithm 3) for each row of Y (one binary problem).

    LIBLINEAR's form (solve_l2r_l1l2_svc), with row i's box constraint C_i: hinge loss upper_i = C_i,
    diag_i = 0; squared hinge upper_i = inf, diag_i = 1/(2 C_i). Shrinking: a variable at a bound whose
    gradient lies beyond the previous epoch's PG extreme (PGmax_old / PGmin_old) leaves the active set.
    Two changes to LIBLINEAR's rule (docs/pmsvm-history.md):
    - A first phase: until the spread first falls to 10 phase_cap (or to tol), the threshold is at most
      phase_cap (min(PGmax_old, phase_cap), max(PGmin_old, -phase_cap); phase_cap = 0: no first phase).
      LIBLINEAR's PGmax_old stays near 0.5-1 for the first epochs, so that the easy negatives of a one-vs-rest
      problem (G in [0, 1] at alpha = 0, 85% of sector's samples) are visited in about five full epochs. Kept to
      the end, the bound would make the solver converge on a set shrunk too far, verify, and converge again
      (USPS: twice the epochs).
    - Where LIBLINEAR runs an epoch on all samples (the active set's PG spread is <= tol, or here the first phase
      is over), :func:`_check_all` computes every sample's gradient at the current w, in storage order, with no
      step. The solver stops if their PG spread is <= tol: the KKT conditions hold to tol at the w returned,
      measured at once (LIBLINEAR measures each sample while the epoch's steps move w). Otherwise the samples
      beyond that pass's PG extremes stay out, as LIBLINEAR's epoch after a full one would shrink them, so the
      full pass is made once, not twice.
    n_iter[m] counts epochs (LIBLINEAR's #iter, shrunk or not), each check one; n_passes[m] counts gradient
    evaluations divided by the number of samples of the problem, i.e. the work in full-data passes. W is
    (n_models, d n_basis): w_j is W[m, j n_basis:(j + 1) n_basis].
    """
    n_models = Y.shape[0]
    for m in nb.prange(n_models):
        y = Y[m]
        a = alpha[m]
        w = W[m]
        members = np.nonzero(y)[0]  # y = 0: the sample is not in this (one-vs-one) problem
        index = members.copy()
        n = index.shape[0]
        G_all = np.empty(n)
        state = np.uint64(seeds[m])
        active = n
        pg_max_old = np.inf
        pg_min_old = -np.inf
        first_phase = phase_cap > 0.0  # shrinking beyond phase_cap (see above)
        it = 0
        visits = 0
        while it < max_iter:
            pg_max = -np.inf
            pg_min = np.inf
            shrink_hi = min(pg_max_old, phase_cap) if first_phase else pg_max_old
            shrink_lo = max(pg_min_old, -phase_cap) if first_phase else pg_min_old
            visits += active
            state = _shuffle(index, active, state)
            s = 0
            while s < active:
                i = index[s]
                if s + 1 < active:
                    _prefetch_row(index[s + 1], indptr, indices, codes, t_pos)
                G = y[i] * _margin(i, indptr, indices, codes, t_pos, ev, w, bias[m]) - 1.0 + diag[i] * a[i]
                pg = 0.0
                if a[i] == 0.0:
                    if G > shrink_hi:
                        active -= 1
                        index[s], index[active] = index[active], index[s]
                        continue
                    if G < 0.0:
                        pg = G
                elif a[i] == upper[i]:
                    if G < shrink_lo:
                        active -= 1
                        index[s], index[active] = index[active], index[s]
                        continue
                    if G > 0.0:
                        pg = G
                else:
                    pg = G
                pg_max = max(pg_max, pg)
                pg_min = min(pg_min, pg)
                if abs(pg) > 1e-12:
                    old = a[i]
                    a[i] = min(max(old - G / qdiag[i], 0.0), upper[i])
                    delta = (a[i] - old) * y[i]
                    _add_row(i, indptr, indices, codes, t_pos, beta, unit, w, delta)
                    bias[m] += delta
                s += 1
            it += 1
            spread = pg_max - pg_min
            if spread <= tol or (first_phase and spread <= 10.0 * phase_cap):
                # converged on the shrunk set, or the first phase is over: check all samples at this w
                first_phase = False
                if it == max_iter:
                    break
                pg_max, pg_min, active = _check_all(
                    members, index, G_all, y, a, w, bias[m], upper, diag, indptr, indices, codes, t_pos, ev
                )
                it += 1
                visits += n
                if pg_max - pg_min <= tol:
                    break
            pg_max_old = pg_max if pg_max > 0.0 else np.inf
            pg_min_old = pg_min if pg_min < 0.0 else -np.inf
        n_iter[m] = it
        n_passes[m] = visits / max(n, 1)


@nb.njit(cache=True, parallel=True)
def _sgd(indptr, indices, codes, t_pos, ev, beta, unit, Y, C, row_weight, tol, max_iter, seeds, W, bias, n_iter):
    """Pegasos-style SGD on w = sum_i alpha_i y_i beta(x_i) (Wu's Algorithm 4), lambda = 1 / (C n); row i's
    hinge loss weighs row_weight[i].

    w is stored as scale * v so that the shrink (1 - eta lambda) w costs O(1). Stops when an epoch changes
    w by less than tol relative to its norm.
    """
    n_models = Y.shape[0]
    for m in nb.prange(n_models):
        y = Y[m]
        v = W[m]
        vb = 0.0
        scale = 1.0
        index = np.nonzero(y)[0]
        n = index.shape[0]
        lam = 1.0 / (C * n)
        state = np.uint64(seeds[m])
        prev = v.copy()
        prev_b = 0.0
        t = 1
        it = 0
        while it < max_iter:
            state = _shuffle(index, n, state)
            for s in range(n):
                i = index[s]
                if s + 1 < n:
                    _prefetch_row(index[s + 1], indptr, indices, codes, t_pos)
                eta = 1.0 / (lam * (t + 1))  # t + 1 keeps the first shrink factor 1 - 1/(t+1) > 0
                f = scale * (_margin(i, indptr, indices, codes, t_pos, ev, v, 0.0) + vb)
                scale *= 1.0 - 1.0 / (t + 1)
                if y[i] * f < 1.0:
                    step = eta * row_weight[i] * y[i] / scale
                    _add_row(i, indptr, indices, codes, t_pos, beta, unit, v, step)
                    vb += step
                if scale < 1e-9:  # fold the scale back into v before it underflows
                    v *= scale
                    vb *= scale
                    scale = 1.0
                t += 1
            it += 1
            v *= scale
            vb *= scale
            scale = 1.0
            diff = 0.0
            norm = 0.0
            for k in range(v.shape[0]):
                diff += (v[k] - prev[k]) ** 2
                norm += v[k] ** 2
                prev[k] = v[k]
            diff += (vb - prev_b) ** 2
            norm += vb**2
            prev_b = vb
            if diff <= tol * tol * norm:
                break
        bias[m] = vb
        n_iter[m] = it


# --- the estimator ---------------------------------------------------------------------------------
@persistence.register
class PmSVM(ClassifierMixin, BaseEstimator):
    """Power mean SVM (Wu, TNNLS 2015): additive-kernel C-SVM on nonnegative features, O(d) prediction.

    Minimises the L1-loss (hinge) SVM dual 1/2 a^T Q a - 1^T a, 0 <= a_i <= C, with
    Q_il = y_i y_l (k(x_i, x_l) + 1) (the +1 is a regularised bias, as in LIBLINEAR), by dual coordinate
    descent whose gradients use the regression approximation of Eq. (25-31) (Algorithm 3); see the
    module docstring. Multiclass problems are split into binary ones, one-vs-rest (default) or
    one-vs-one (as LIBSVM; one table per pair of classes).

    Parameters
    ----------
    C : float > 0, the hinge-loss weight.
    p : float, -inf <= p <= 0; the power mean kernel M_p (-1 chi-square, -8 ~ intersection, 0 Hellinger).
    n_anchors : int 2..10; 3 uses the paper's anchors (0.01, 0.06, 0.75), others Chebyshev nodes (Eq. 41).
    lut_bins : int >= 2 or None. PmSVM-LUT: feature j is rounded to N = lut_bins nodes of [0, x_max_[j]] in
        training and scored by linear interpolation between them (:func:`lut_decision` with ``table_``);
        None trains and scores with the exact explanatory variables e(x) (no table). The table follows
        the current lut_bins: set after fit, it changes the scoring resolution, not the trained weights.
    tol : float > 0; DCD stops when the projected-gradient spread max PG - min PG <= tol (LIBLINEAR's
        criterion, 0.1 there); SGD stops when an epoch changes w by less than tol relative to |w|.
    max_iter : int >= 1, maximum number of epochs per binary problem (DCD: LIBLINEAR's iterations, epochs over the
        active set, which shrinking makes cheaper than passes over the data, each check of all samples counting
        as one; SGD: epochs over all samples); a fit in which any binary problem reaches it warns once
        (svmcore.ConvergenceWarning, with their count).
    random_state : None, int >= 0, numpy Generator or RandomState; seeds the order of coordinates / samples.
    solver : "dcd" (Algorithm 3, dual coordinate descent) or "sgd" (Algorithm 4, stochastic gradient
        descent with step 1/(lambda t), lambda = 1/(C n)).
    multi_class : "ovr" (one binary problem per class, argmax of the decision values) or "ovo" (one per
        pair of classes, majority vote; more accurate on USPS and pendigits, see docs/pmsvm.md).
    loss : "hinge" (L1-loss SVM, 0 <= alpha <= C) or "squared_hinge" (L2-loss, LIBLINEAR's D_ii = 1/(2C); solver
        "dcd" only).
    class_weight : None, "balanced" or {label: weight >= 0}: row i's C becomes C * class_weight[y_i] in
        every binary problem (as LIBSVM's -wi; "balanced": n / (n_classes * count of the class)). Unlike
        LIBLINEAR's one-vs-rest, the weight applies whether the class is the positive or a negative side.

    Learned attributes
    ------------------
    classes_ : (n_classes,) labels. coef_ : (n_models, d, n_anchors) float64, the regression weights
    s w_j in feature units (n_models = 1 for two classes, else n_classes for "ovr" and
    n_classes (n_classes - 1) / 2 for "ovo", pairs (a, b), a < b, in lexicographic order, b positive).
    intercept_ : (n_models,) float64.
    x_max_ : (d,) float64, the feature units s_j (feature j's largest training value, 1.0 if it is never
    positive in training; files saved with one unit for all features load with it repeated).
    table_ : (n_models, d, lut_bins) float64
    if lut_bins, the per-dimension lookup table, built from coef_ at first use (scoring or reading it) and
    neither built by fit nor saved, unless it would exceed ``TABLE_MAX_BYTES`` (256 MiB): then there is no
    ``table_`` and decision values come from coef_ with the same interpolation.
    n_iter_ : (n_models,) int64 epochs used (LIBLINEAR's iteration count: an epoch over the shrunk active set
    counts as one).
    n_passes_ : (n_models,) float64, gradient evaluations / samples of the binary problem, the work in
    full-data passes (DCD: < n_iter_ once shrinking removes bounded variables; SGD: = n_iter_).
    alpha_ : (n_models, n_samples) dual variables. n_passes_ and alpha_ exist after fit only (not saved).

    Raises ValueError for negative, NaN or infinite features, p > 0, a single class, or bad
    hyperparameters; TypeError for non-numeric input.

    Notes
    -----
    Memory bound: for a dense float64 X and the default n_anchors=3, fit holds at most about 3 X.nbytes beyond X
    itself (tests/test_pmsvm.py holds it to 3 X.nbytes + 48 MiB in both layouts). The rows in the solvers' layout are
    built in place from X and take 24 bytes per nonzero entry (CSR positions: feature, t, float32 s_j beta) or, when
    at least ``DENSE_FROM`` (35%) of the entries are nonzero, 8 n_anchors bytes per entry of the n x d matrix (float32
    rows of e and s_j beta, at most ``ROWS_MAX_BYTES``, 1 GiB). With another n_anchors the CSR positions take 8 bytes
    per nonzero entry (16 beyond 2^31 of them), 8 + 16 n_anchors without a table (lut_bins=None). Add to this a copy
    of X if it is not a C-contiguous float64 array (sparse input is always copied, as canonical CSR; the copy is
    freed before the solver runs), O(n_models (n + d n_anchors)) floats for the labels, dual variables and weights,
    and without a table about 40 MB of blocks in which e and beta are computed.
    """

    _state_arrays = ("coef_", "intercept_", "classes_", "n_iter_", "x_max_")
    _state_meta = ()
    _live_params = ("lut_bins",)  # the scoring resolution: the table follows it at once
    _positive_input = True
    _params_added_later = {"class_weight": None}

    @property
    def n_features_in_(self) -> int:
        """Number of features seen in fit (from ``coef_``). Raises :class:`svmcore.NotFittedError` (also an
        AttributeError: ``hasattr`` is False, as scikit-learn expects) before fit."""
        check_fitted(self, "coef_")
        return self.coef_.shape[1]

    def __init__(
        self,
        C: float = 1.0,
        p: float = -1.0,
        n_anchors: int = 3,
        lut_bins: int | None = 1000,
        tol: float = 0.1,
        max_iter: int = 100,
        random_state: RandomStateLike = None,
        solver: str = "dcd",
        multi_class: str = "ovr",
        loss: str = "hinge",
        class_weight: ClassWeight = None,
    ) -> None:
        self.C = C
        self.p = p
        self.n_anchors = n_anchors
        self.lut_bins = lut_bins
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.solver = solver
        self.multi_class = multi_class
        self.loss = loss
        self.class_weight = class_weight

    @classmethod
    def _from_state(cls, params, meta, arrays):
        if "x_max_" in meta and "x_max_" not in arrays:
            # files written before per-feature units hold one unit for all features, a JSON number in the header;
            # the same model has that unit in every dimension (the check below refuses a bad one)
            meta, arrays = dict(meta), dict(arrays)
            v = meta.pop("x_max_")
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise ValueError(f"x_max_ must be a positive number, got {v!r}")
            coef = arrays.get("coef_")
            d = coef.shape[1] if isinstance(coef, np.ndarray) and coef.ndim == 3 else 1
            arrays["x_max_"] = np.full(d, float(v))
        return super()._from_state(params, meta, arrays)

    @classmethod
    def _upgrade_params(cls, params):
        # earlier versions accepted two settings they did not honour: SGD ignored loss (the model is a hinge
        # model), and p within 1e-9 of 0 computed M_p as the minimum (the model is p = -inf's)
        params = dict(params)
        if params.get("solver") == "sgd" and params.get("loss") != "hinge":
            params["loss"] = "hinge"
        if isinstance(params.get("p"), float) and -1e-9 < params["p"] < 0:
            params["p"] = -np.inf
        return params

    def _check_params(self):
        check_scalar(self.C, "C", lo=0, lo_open=True)
        check_p(self.p)
        anchors = pmsvm_anchors(self.n_anchors)
        if self.lut_bins is not None:
            check_scalar(self.lut_bins, "lut_bins", lo=2, hi=2**20, integer=True)
        check_scalar(self.tol, "tol", lo=0, lo_open=True)
        check_scalar(self.max_iter, "max_iter", lo=1, integer=True)
        check_random_state(self.random_state)
        check_choice(self.solver, "solver", ("dcd", "sgd"))
        check_choice(self.multi_class, "multi_class", ("ovr", "ovo"))
        check_choice(self.loss, "loss", ("hinge", "squared_hinge"))
        if self.solver == "sgd" and self.loss != "hinge":
            raise ValueError(
                f"loss={self.loss!r} needs solver='dcd': the SGD solver (Algorithm 4) minimises the hinge loss"
            )
        check_class_weight(self.class_weight)
        return anchors

    def _pairs(self, k=None, multi_class=None):
        """(n_models, 2) class indices (a, b) of each binary problem for k classes and multi_class (default:
        the fitted model's); b is the positive class."""
        k = len(self.classes_) if k is None else k
        multi_class = multi_class or self._param("multi_class")
        if k == 2:
            return np.array([[0, 1]])
        if multi_class == "ovr":
            return np.stack([np.full(k, -1), np.arange(k)], axis=1)  # -1: all other classes
        return ovo_pairs(k)

    def _check_X(self, X, name="X"):
        X = check_array(X, name, allow_sparse=True)
        check_nonnegative(X, name)
        return X

    def fit(self, X: MatrixLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> PmSVM:
        """Train on X (n, d) nonnegative float array or CSR matrix and labels y (n,); returns self.

        sample_weight: (n,) >= 0 or None; row i's loss weighs C * class_weight[y_i] * sample_weight[i] (its
        box constraint in the dual) in every binary problem it belongs to; rows of weight 0 are left out.
        Raises ValueError for negative features, NaN/inf, all-zero X, a single class (also among the rows
        of positive weight), wrong shapes, bad hyperparameters (p > 0, C <= 0, ...) or features so large that the
        solution overflows; TypeError for non-numeric input. A failed fit leaves an earlier fit's model
        unchanged. Warns (svmcore.ConvergenceWarning) once if binary problems stop at max_iter epochs, saying how
        many.
        """
        anchors = self._check_params()
        X = self._check_X(X)
        classes, y_index = check_labels(y, X.shape[0])
        row_weight = row_weights(sample_weight, self.class_weight, classes, y_index)
        n, d = X.shape
        n_basis = len(anchors)
        if sp.issparse(X):  # check_array's copy, canonical
            X.eliminate_zeros()  # k(0, x) = 0: a zero feature adds nothing to a gradient or an update
            nnz = X.nnz
            indptr, indices, values = X.indptr, X.indices, X.data
        else:
            nnz = np.count_nonzero(X)
            indptr, indices, values = np.arange(0, n * d + 1, d), np.empty(0, np.int32), X.ravel()
        if not nnz:
            raise ValueError("X: all features are zero; nothing to learn")
        kept = row_weight > 0
        if sp.issparse(X) or not kept.all():  # rows of weight 0 are left out: they set no feature's unit either
            x_max = _column_max(indptr, indices, values, d, kept)  # X >= 0: 0 if never positive
        else:
            x_max = X.max(axis=0).astype(np.float64)
        del indptr, indices, values
        x_max[x_max <= 0] = 1.0
        indptr, indices, codes, t_pos, ev, beta, k_diag = _solver_layout(X, nnz, x_max, anchors, self.p, self.lut_bins)
        del X  # a copy made by check_array (always for sparse input) is not needed in the solver
        pairs = self._pairs(len(classes), self.multi_class)
        n_models = len(pairs)
        pos = y_index[None, :] == pairs[:, 1:2]
        neg = (y_index[None, :] == pairs[:, 0:1]) | (pairs[:, 0:1] < 0)
        Y = np.where(pos, 1.0, np.where(neg, -1.0, 0.0))
        Y[:, row_weight == 0] = 0.0  # a row without weight is in no problem
        rng = make_rng(self.random_state)
        seeds = rng.integers(1, 2**62, size=n_models, dtype=np.int64)
        W = np.zeros((n_models, d * n_basis))
        bias = np.zeros(n_models)
        n_iter = np.zeros(n_models, dtype=np.int64)
        if self.solver == "dcd":
            C_i = float(self.C) * row_weight  # (a Fraction would make an object array)
            with np.errstate(divide="ignore"):  # rows of weight 0 take no step (Y = 0)
                upper, diag = (
                    (C_i, np.zeros(n))
                    if self.loss == "hinge"
                    else (np.full(n, np.inf), np.where(C_i > 0, 0.5 / C_i, 0.0))
                )
            qdiag = k_diag + 1.0 + diag  # +1 for the bias
            alpha = np.zeros((n_models, n))
            n_passes = np.zeros(n_models)
            _dcd(
                indptr,
                indices,
                codes,
                t_pos,
                ev,
                beta,
                x_max,
                qdiag,
                Y,
                upper,
                diag,
                float(self.tol),
                FIRST_PHASE_CAP,
                int(self.max_iter),
                seeds,
                W,
                bias,
                alpha,
                n_iter,
                n_passes,
            )
        else:
            _sgd(
                indptr,
                indices,
                codes,
                t_pos,
                ev,
                beta,
                x_max,
                Y,
                float(self.C),
                row_weight,
                float(self.tol),
                int(self.max_iter),
                seeds,
                W,
                bias,
                n_iter,
            )
            alpha, n_passes = None, n_iter.astype(np.float64)  # every SGD epoch visits every sample
        check_finite_fit(W, bias, what="the features' kernel values", remedy="rescale the features, e.g. to [0, 1]")
        if alpha is not None:
            self.alpha_ = alpha
        elif hasattr(self, "alpha_"):
            del self.alpha_  # from an earlier dual fit
        self.n_passes_ = n_passes
        stopped = int(np.count_nonzero(n_iter >= self.max_iter))
        if stopped:  # one warning for all the binary problems, as LIBLINEAR's "reaching max number of iterations"
            warnings.warn(
                f"PmSVM: {stopped} of {n_models} binary problems stopped at max_iter={self.max_iter} epochs "
                f"before converging to tol={self.tol}; increase max_iter",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.classes_ = classes
        self.x_max_ = x_max
        self.coef_ = W.reshape(n_models, d, n_basis)
        self.intercept_ = bias
        self.n_iter_ = n_iter
        # the table is a scoring cache derived from coef_ (8 ms for reuters, a third of its fit), built at first use;
        # the cache is a dict made here, so that scoring fills it without changing the estimator's own attributes
        self._cache = {}
        self._freeze()
        return self

    @property
    def table_(self) -> np.ndarray:
        """The lookup table (n_models, d, lut_bins) float64 for the current lut_bins, built from coef_ at the first
        access and cached; AttributeError if there is none (not fitted, lut_bins None, or beyond TABLE_MAX_BYTES)."""
        check_fitted(self, "coef_")
        table = self._build_table(self.lut_bins)
        if table is None:
            raise AttributeError("no lookup table: lut_bins is None or the table would exceed TABLE_MAX_BYTES")
        return table

    def _build_table(self, lut_bins):
        """The table for ``lut_bins`` (the current value, read once by the caller: another thread may set it) from
        coef_ (cached), or None (lut_bins None or beyond TABLE_MAX_BYTES). Scoring calls this, so it never uses a
        stale table."""
        m, d, n_basis = self.coef_.shape
        if lut_bins is not None:  # it may have been set after fit
            # a Python int: as an int16, m * d * lut_bins below would overflow
            lut_bins = check_scalar(lut_bins, "lut_bins", lo=2, hi=2**20, integer=True)
        cache = self.__dict__.setdefault("_cache", {})  # made by fit or load; a model assembled by hand gets one here
        if lut_bins is None or m * d * lut_bins * 8 > TABLE_MAX_BYTES:
            cache.pop("table", None)
            return None
        table = cache.get("table")
        if table is None or table.shape != (m, d, lut_bins):
            table = self.coef_.reshape(-1, n_basis) @ self._node_e(lut_bins).T
            table = cache["table"] = table.reshape(m, d, lut_bins)
        return table

    def _node_e(self, lut_bins):
        """e at the lut_bins nodes of [0, 1] (in each feature's unit x_max_[j]): (lut_bins, n_anchors), the rows both
        scoring paths interpolate."""
        return explanatory_variables(np.linspace(0.0, 1.0, lut_bins), self.coef_.shape[2])

    def _expanded(self, X, lut_bins):
        """E(X), the CSR (n, d * n_anchors) matrix with e(x_ij / x_max_[j]) at columns j * n_anchors + b for the
        nonzero x_ij, so that decision values are E(X) @ coef_.reshape(n_models, -1).T + intercept_. With
        lut_bins, e is interpolated between the table's nodes and clamped at x_max_[j], as :func:`lut_decision`
        does with ``table_`` (the table is linear in e), so the two agree to rounding."""
        X = sp.csr_matrix(X)
        n_basis = self.coef_.shape[2]
        u = X.data / self.x_max_[X.indices]
        if lut_bins is None:
            e = explanatory_variables(u, n_basis)
        else:
            s = np.minimum(u, 1.0) * (lut_bins - 1)
            k = np.minimum(s.astype(np.int64), lut_bins - 2)
            nodes = self._node_e(lut_bins)
            e = nodes[k] + (s - k)[:, None] * (nodes[k + 1] - nodes[k])
        indices = (X.indices.astype(np.int64)[:, None] * n_basis + np.arange(n_basis)).ravel()
        return sp.csr_matrix(
            (e.ravel(), indices, X.indptr.astype(np.int64) * n_basis), shape=(X.shape[0], X.shape[1] * n_basis)
        )

    def decision_function(self, X: MatrixLike) -> np.ndarray:
        """Decision values: (n,) for two classes (> 0 means classes_[1]), else (n, n_classes).

        Multiclass "ovr": the per-class decision values; "ovo": votes per class plus the summed pairwise
        decision values squashed into (-1/3, 1/3) to break ties (LIBSVM / scikit-learn convention).

        With ``table_`` this is :func:`lut_decision` (O(d) per sample); otherwise the regression
        f_m(x) = intercept_m + sum_{j: x_j > 0} e(x_j / x_max_[j])^T coef_[m, j] (Eq. 40 with the learned w; e
        interpolated between the table's nodes if lut_bins), one sparse product for all models.
        X: (n, d) nonnegative array or CSR matrix with the training number of features. Raises
        :class:`svmcore.NotFittedError` before fit, ValueError for negative features, NaN/inf or a wrong
        number of features.
        """
        check_fitted(self, "coef_")
        X = self._check_X(X)
        check_n_features(X, self.coef_.shape[1], owner=self)
        lut_bins = self.lut_bins  # once: a set_params from another thread must not mix two resolutions
        table = self._build_table(lut_bins)
        if table is not None:
            out = lut_decision(X, table, self.x_max_, self.intercept_)
        else:
            out = self._expanded(X, lut_bins) @ self.coef_.reshape(len(self.coef_), -1).T + self.intercept_
        if out.shape[1] == 1:
            return out[:, 0]
        return out if self._param("multi_class") == "ovr" else ovo_votes(out, self._pairs(), len(self.classes_))

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Predicted labels (n,) with the dtype of ``classes_``; errors as :meth:`decision_function`."""
        f = self.decision_function(X)
        if f.ndim == 1:
            return self.classes_[(f > 0).astype(np.int64)]
        return self.classes_[np.argmax(f, axis=1)]

    def _check_state(self):
        super()._check_state()
        m, d, b = self.coef_.shape if self.coef_.ndim == 3 else (None, None, None)
        if m is None or b != len(pmsvm_anchors(self.n_anchors)):
            raise ValueError(f"coef_ has shape {self.coef_.shape}; expected (n_models, d, {self.n_anchors})")
        n_classes = len(self.classes_)
        if n_classes < 2 or m != len(self._pairs()):
            raise ValueError(f"coef_ holds {m} models for {n_classes} classes")
        if self.intercept_.shape != (m,) or self.n_iter_.shape != (m,):
            raise ValueError("intercept_ and n_iter_ must have one entry per model")
        if self.x_max_.shape != (d,) or self.x_max_.dtype.kind != "f":
            raise ValueError(
                f"x_max_ must be a ({d},) float array (one unit per feature), got {self.x_max_.dtype} "
                f"of shape {self.x_max_.shape}"
            )
        if not (self.x_max_ > 0).all():  # NaN and infinity are refused by the base class's check
            raise ValueError(f"x_max_ must hold positive numbers (the feature units), found {self.x_max_.min()!r}")
        self.x_max_ = self.x_max_.astype(np.float64)
        self.__dict__.setdefault("_cache", {})
