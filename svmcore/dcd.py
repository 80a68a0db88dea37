"""Dual coordinate descent for linear SVM+ (Li, Dai, Tan, Xu, Van Gool, CVPR 2016, Algorithm 1).

With the biases absorbed by a constant feature (Eq. 7: x~ = [x; 1], x~* = [x*; 1]) the SVM+ dual is
the bound-constrained QP (8)/(9) over beta = [alpha; zeta] >= 0::

    min  D(alpha, zeta) = 1/2 ||w||^2 + gamma/2 ||w*||^2 - 1'alpha
    w  = sum_i alpha_i y_i x~_i,     w* = (1/gamma) sum_i (alpha_i + zeta_i - C) x~*_i

Keeping w and w* up to date makes each coordinate's gradient an O(nnz of a row) inner product:
(13) dD/dalpha_i = y_i w'x~_i + w*'x~*_i - 1,   (14) dD/dzeta_i = w*'x~*_i,
and the exact one-variable minimiser clipped at 0 gives updates (15) and (16).  Coordinates are
visited in a fresh random order each epoch; LIBLINEAR's shrinking (Hsieh et al., ICML 2008) drops
coordinates at their bound whose gradient exceeds the previous epoch's largest projected gradient,
and the solver stops when max PG - min PG <= tol over all 2n coordinates, measured at one fixed (w, w*).

One loop serves dense and CSR data: a row is either a 2-D float64 array or a ``(data, indices,
indptr)`` tuple, and numba compiles one variant per combination of the two kinds.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import scipy.sparse as sp
from numba import types
from numba.extending import overload

from ._shrinking import keep_after_check


def as_rows(X: np.ndarray | sp.spmatrix) -> np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the argument :func:`dcd_svmplus` takes for ``X``: the array itself or a CSR tuple."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        return (np.ascontiguousarray(X.data, dtype=np.float64), X.indices.astype(np.int64), X.indptr.astype(np.int64))
    return np.ascontiguousarray(X, dtype=np.float64)


def _row_dot(X, i, w):
    """w[:d]'x_i + w[d]: inner product with the bias-augmented row x~_i."""


def _row_axpy(X, i, a, w):
    """w += a x~_i for the bias-augmented row x~_i."""


# reassociation lets LLVM vectorise the row loops (2.3x per epoch on CBCL, d* = 361); the inputs are
# checked finite, so it only changes rounding (no nnan/ninf assumptions)
_ROW_FLAGS = {"fastmath": {"reassoc", "contract"}}


@overload(_row_dot, jit_options=_ROW_FLAGS)
def _row_dot_impl(X, i, w):
    if isinstance(X, types.Array):

        def dense(X, i, w):
            d = X.shape[1]
            s = w[d]
            for k in range(d):
                s += X[i, k] * w[k]
            return s

        return dense

    def csr(X, i, w):
        data, indices, indptr = X
        s = w[w.shape[0] - 1]
        for k in range(indptr[i], indptr[i + 1]):
            s += data[k] * w[indices[k]]
        return s

    return csr


@overload(_row_axpy, jit_options=_ROW_FLAGS)
def _row_axpy_impl(X, i, a, w):
    if isinstance(X, types.Array):

        def dense(X, i, a, w):
            d = X.shape[1]
            for k in range(d):
                w[k] += a * X[i, k]
            w[d] += a

        return dense

    def csr(X, i, a, w):
        data, indices, indptr = X
        for k in range(indptr[i], indptr[i + 1]):
            w[indices[k]] += a * data[k]
        w[w.shape[0] - 1] += a

    return csr


@nb.njit(cache=True, inline="always")
def _check_all(X, Z, y, alpha, zeta, w, w_star, index, g_all):
    """Every coordinate's gradient g_all at the fixed (w, w*), in storage order (alpha_i and zeta_i share the
    w*'x~*_i product), with no step; returns the PG extremes (pg_max, pg_min) over all 2n and the new active
    count, index holding first the coordinates that LIBLINEAR's rule keeps with pg_max as the threshold (one at
    0 whose gradient exceeds it has PG = 0 and leaves), then the others."""
    n = y.shape[0]
    pg_max = -np.inf
    pg_min = np.inf
    for i in range(n):
        gz = _row_dot(Z, i, w_star)
        ga = y[i] * _row_dot(X, i, w) + gz - 1.0
        g_all[i] = ga
        g_all[n + i] = gz
        pa = min(ga, 0.0) if alpha[i] == 0.0 else ga
        pz = min(gz, 0.0) if zeta[i] == 0.0 else gz
        pg_max = max(pg_max, pa, pz)
        pg_min = min(pg_min, pa, pz)
    at_zero = np.concatenate((alpha == 0.0, zeta == 0.0))  # alpha and zeta have no upper bound
    active = keep_after_check(index, np.arange(2 * n), g_all, at_zero, np.zeros(2 * n, dtype=np.bool_), pg_max, pg_min)
    return pg_max, pg_min, active


# The first phase of dcd_svmplus: the shrinking threshold is at most FIRST_PHASE_CAP, in the gradient's units (a
# margin's or a slack's, whatever tol is), until the PG spread falls to 10 FIRST_PHASE_CAP; 0: no first phase. As
# PmSVM's, whose 0.1 saved 1-6% more passes on CBCL but cost MNIST+ up to 20% more; figures: docs/svmplus.md,
# "Stopping rule".
FIRST_PHASE_CAP = 0.2


@nb.njit(cache=True)
def dcd_svmplus(X, Z, y, sq_x, sq_z, C, gamma, alpha, zeta, w, w_star, tol, max_iter, seed, phase_cap):
    """Run Algorithm 1 in place on ``alpha``, ``zeta``, ``w``, ``w_star``; return ``(n_epochs, n_passes,
    violation, converged)``.

    X (n, d) / Z (n, d*): main and privileged rows (float64 arrays or CSR tuples from :func:`as_rows`),
    without the constant feature, which is implicit. y (n,) float64 in {+1, -1}. sq_x, sq_z (n,):
    squared row norms of X and Z (without the constant). alpha, zeta (n,) >= 0 with w (d + 1,) and
    w_star (d* + 1,) consistent with them (see the module docstring).

    A first phase (phase_cap > 0; 0: none): until the active set's PG spread first falls to 10 phase_cap (or to
    tol), the shrinking threshold is at most phase_cap, so that coordinates at 0 with a gradient in (phase_cap,
    PGmax_old] leave from the first epochs rather than after LIBLINEAR's PGmax_old has come down.
    Where LIBLINEAR runs an epoch on all coordinates (the active set's PG spread is <= tol, or here the first phase
    is over), :func:`_check_all` computes all 2n gradients at the current (w, w*), with no step (as PmSVM's dual
    CD, docs/pmsvm-history.md). The solver stops if their PG spread is <= tol: the KKT conditions then hold to tol
    at the returned point, measured at once. Otherwise the coordinates at 0 whose gradient exceeds that pass's
    largest PG stay out, and CD goes on over the rest. ``n_epochs`` counts CD epochs (shrunk or not) and checks,
    one each, up to ``max_iter``; ``converged`` is True only when a check passed, so a fit whose epochs ran out,
    even with the active set's spread <= tol, is not taken for converged. ``n_passes`` is the coordinate gradients
    evaluated / 2n, the work in full passes (a check is one, at about half a CD pass's cost since alpha_i and
    zeta_i share w*'x~*_i). ``violation`` is the spread of the last check (<= tol) or, when ``max_iter`` ran
    out, of the last epoch's active set.
    """
    n = y.shape[0]
    inv_gamma = 1.0 / gamma
    q_alpha = np.empty(n)
    q_zeta = np.empty(n)
    for i in range(n):
        q_zeta[i] = (sq_z[i] + 1.0) * inv_gamma
        q_alpha[i] = sq_x[i] + 1.0 + q_zeta[i]
    # coordinate j < n is alpha_j, j >= n is zeta_{j - n}
    index = np.arange(2 * n)
    g_all = np.empty(2 * n)
    active = 2 * n
    pg_max_old = np.inf
    np.random.seed(seed)
    violation = np.inf
    converged = False
    first_phase = phase_cap > 0.0
    epoch = 0
    visits = 0
    while epoch < max_iter:
        shrink_hi = min(pg_max_old, phase_cap) if first_phase else pg_max_old
        epoch += 1
        visits += active
        for s in range(active):
            t = s + np.random.randint(active - s)
            index[s], index[t] = index[t], index[s]
        pg_max = -np.inf
        pg_min = np.inf
        s = 0
        while s < active:
            j = index[s]
            is_alpha = j < n
            i = j if is_alpha else j - n
            g = _row_dot(Z, i, w_star)
            if is_alpha:
                g += y[i] * _row_dot(X, i, w) - 1.0
                v = alpha[i]
            else:
                v = zeta[i]
            pg = g
            if v == 0.0:
                if g > shrink_hi:
                    active -= 1
                    index[s], index[active] = index[active], index[s]
                    continue
                if g > 0.0:
                    pg = 0.0
            pg_max = max(pg_max, pg)
            pg_min = min(pg_min, pg)
            if pg != 0.0:
                if is_alpha:
                    new = max(v - g / q_alpha[i], 0.0)
                    delta = new - v
                    alpha[i] = new
                    _row_axpy(X, i, delta * y[i], w)
                else:
                    new = max(v - g / q_zeta[i], 0.0)
                    delta = new - v
                    zeta[i] = new
                _row_axpy(Z, i, delta * inv_gamma, w_star)
            s += 1
        violation = pg_max - pg_min
        if violation <= tol or (first_phase and violation <= 10.0 * phase_cap):
            # converged on the active set, or the first phase is over: check all coordinates at this (w, w*)
            first_phase = False
            if epoch == max_iter:
                break
            pg_max, pg_min, active = _check_all(X, Z, y, alpha, zeta, w, w_star, index, g_all)
            epoch += 1
            visits += 2 * n
            violation = pg_max - pg_min
            if violation <= tol:
                converged = True
                break
        pg_max_old = pg_max if pg_max > 0.0 else np.inf
    return epoch, visits / (2 * n), violation, converged
