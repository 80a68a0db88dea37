"""Probability estimates from SVM decision values, LIBSVM's method (what scikit-learn's SVC(probability=True) runs).

- :func:`fit_sigmoid`: Platt's sigmoid P(y = +1 | f) = 1 / (1 + exp(A f + B)) fitted to decision values by
  the Newton method with backtracking line search of Lin, Lin, Weng, "A note on Platt's probabilistic outputs
  for support vector machines", Machine Learning 68 (2007), Algorithm 1 (LIBSVM's ``sigmoid_train``).
- :func:`sigmoid_predict`: the sigmoid itself, without overflow (LIBSVM's ``sigmoid_predict``).
- :func:`pairwise_coupling`: class probabilities from the pairwise ones r_ij = P(i | i or j, x) by method 2
  of Wu, Lin, Weng, "Probability estimates for multi-class classification by pairwise coupling", JMLR 5
  (2004) (LIBSVM's ``multiclass_probability``).

:class:`svmcore.SVC` fits the sigmoids on 5-fold cross-validated decision values of each binary model.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numba as nb
import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

MIN_PROB = 1e-7  # LIBSVM clips the pairwise probabilities to [MIN_PROB, 1 - MIN_PROB] before coupling


@nb.njit(cache=True, nogil=True)
def _platt_loss(f, t, A, B):
    """Platt's negative log-likelihood sum_i -(t_i log p_i + (1 - t_i) log(1 - p_i)), p_i = 1 / (1 + exp(A f_i
    + B)), written as (t_i - [z_i < 0]) z_i + log(1 + exp(-|z_i|)), z = A f + B, so that exp never overflows
    (Lin, Lin, Weng 2007's reformulation of Platt's code)."""
    total = 0.0
    for i in range(f.shape[0]):
        z = A * f[i] + B
        total += (t[i] - (1.0 if z < 0 else 0.0)) * z + math.log1p(math.exp(-abs(z)))
    return total


@nb.njit(cache=True, nogil=True)
def _fit_sigmoid(f, pos, max_iter, min_step, sigma, eps):
    """:func:`fit_sigmoid` on checked input (f (n,) float64, pos (n,) bool), compiled: a Newton step costs a
    pass over n values, where numpy's dozen calls on a fold's handful of values took ~0.12 ms a sigmoid (a
    one-vs-one fit with probability=True fits one per pair: 4,186 for 300 sector rows)."""
    n = f.shape[0]
    prior1 = 0.0
    for i in range(n):
        prior1 += pos[i]
    prior0 = n - prior1
    t = np.empty(n)
    for i in range(n):
        t[i] = (prior1 + 1.0) / (prior1 + 2.0) if pos[i] else 1.0 / (prior0 + 2.0)
    A, B = 0.0, math.log((prior0 + 1.0) / (prior1 + 1.0))
    fval = _platt_loss(f, t, A, B)
    for _ in range(max_iter):
        s11 = s22 = s21 = g1 = g2 = 0.0
        for i in range(n):
            z = A * f[i] + B
            e = math.exp(-abs(z))
            p = (e if z >= 0 else 1.0) / (1.0 + e)  # 1 / (1 + exp(z)), and q = 1 - p, without overflow
            q = (1.0 if z >= 0 else e) / (1.0 + e)
            d2 = p * q
            s11 += f[i] * f[i] * d2
            s22 += d2
            s21 += f[i] * d2
            d1 = t[i] - p
            g1 += f[i] * d1
            g2 += d1
        h11, h22, h21 = sigma + s11, sigma + s22, s21
        if abs(g1) < eps and abs(g2) < eps:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= min_step:
            new_A, new_B = A + step * dA, B + step * dB
            new_f = _platt_loss(f, t, new_A, new_B)
            if new_f < fval + 1e-4 * step * gd:
                A, B, fval = new_A, new_B, new_f
                break
            step /= 2.0
        if step < min_step:  # no decrease along the Newton direction: as good as it gets in floating point
            break
    return A, B


def fit_sigmoid(
    f: ArrayLike, y: ArrayLike, *, max_iter: int = 100, min_step: float = 1e-10, sigma: float = 1e-12, eps: float = 1e-5
) -> tuple[float, float]:
    """Fit P(y = +1 | f) = 1 / (1 + exp(A f + B)) to decision values; return (A, B) as floats.

    f: (n,) float decision values (out-of-sample ones, e.g. from cross-validation); y: (n,) labels, positive
    where y > 0 (bool or +-1). Minimises Platt's regularised negative log-likelihood: cross-entropy against
    the targets t_i = (N+ + 1) / (N+ + 2) for positives and 1 / (N- + 2) for negatives (Platt 1999, as
    restated by Lin, Lin, Weng 2007), from A = 0, B = log((N- + 1) / (N+ + 1)), by Newton steps on the Hessian plus
    sigma I with backtracking (sufficient decrease 1e-4, halving down to ``min_step``), until both gradient
    components are below ``eps`` or ``max_iter`` steps (Lin, Lin, Weng 2007, Algorithm 1; the constants are
    LIBSVM's). As in LIBSVM, a failed line search or max_iter end the iteration silently: the last iterate
    is returned. Compiled (numba): sums in sample order (as LIBSVM's loops), exp and log1p from the C library;
    a numpy evaluation, whose SIMD exp and pairwise sums round differently, gives the same sigmoids
    to 2.4e-11 relative at most (a nearly separable fold's A = 3052.3642447 -> 3052.3642446). Raises ValueError for
    mismatched or empty input or non-finite f.
    """
    f = np.ascontiguousarray(f, dtype=np.float64).ravel()
    pos = np.ascontiguousarray(np.asarray(y).ravel() > 0)
    if f.shape != pos.shape or f.size == 0:
        raise ValueError(f"fit_sigmoid: f and y must be non-empty and of equal length, got {f.shape} and {pos.shape}")
    if not np.isfinite(f).all():
        raise ValueError("fit_sigmoid: f contains NaN or infinity")
    A, B = _fit_sigmoid(f, pos, int(max_iter), float(min_step), float(sigma), float(eps))
    return float(A), float(B)


def sigmoid_predict(f: ArrayLike, A: ArrayLike, B: ArrayLike) -> np.ndarray | np.float64:
    """1 / (1 + exp(A f + B)) elementwise, float64 of the broadcast shape of f, A, B, computed from exp(-|A f + B|)
    so that it neither overflows nor cancels (LIBSVM's sigmoid_predict)."""
    z = np.asarray(f, dtype=np.float64) * A + B
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, e, 1.0) / (1.0 + e)


@nb.njit(cache=True)
def _couple(R, pairs, n_classes, eps, max_iter, out, n_iter):
    k = n_classes
    Q = np.empty((k, k))
    Qp = np.empty(k)
    for s in range(R.shape[0]):  # compiled: one small k x k problem per sample
        Q[:, :] = 0.0
        for e in range(pairs.shape[0]):
            a, b = pairs[e, 0], pairs[e, 1]
            r_ba = R[s, e]  # P(b | a or b)
            r_ab = 1.0 - r_ba
            Q[a, a] += r_ba * r_ba
            Q[b, b] += r_ab * r_ab
            Q[a, b] = -r_ab * r_ba
            Q[b, a] = Q[a, b]
        p = out[s]
        p[:] = 1.0 / k
        it = 0
        while it < max_iter:
            # the stopping test on a fresh Q p and p'Q p, for numerical accuracy (as LIBSVM)
            pQp = 0.0
            for t in range(k):
                acc = 0.0
                for j in range(k):
                    acc += Q[t, j] * p[j]
                Qp[t] = acc
                pQp += p[t] * acc
            max_error = 0.0
            for t in range(k):
                max_error = max(max_error, abs(Qp[t] - pQp))
            if max_error < eps:
                break
            for t in range(k):
                diff = (-Qp[t] + pQp) / Q[t, t]
                p[t] += diff
                pQp = (pQp + diff * (diff * Q[t, t] + 2.0 * Qp[t])) / (1.0 + diff) / (1.0 + diff)
                for j in range(k):
                    Qp[j] = (Qp[j] + diff * Q[t, j]) / (1.0 + diff)
                    p[j] /= 1.0 + diff
            it += 1
        n_iter[s] = it


def pairwise_coupling(
    R: ArrayLike,
    pairs: ArrayLike,
    n_classes: int,
    *,
    eps: float | None = None,
    max_iter: int | None = None,
    return_n_iter: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Class probabilities (n, n_classes) float64 from pairwise ones, Wu, Lin, Weng (2004), method 2.

    R: (n, m) float64 in (0, 1), R[s, e] = r_ba = P(class b | class a or b, x_s) for pair e = (a, b) of
    ``pairs`` (m, 2) int (every pair of the n_classes classes once, as :func:`svmcore.multiclass.ovo_pairs`);
    r_ab = 1 - r_ba. Solves, per sample, min_p p'Qp subject to sum(p) = 1, p >= 0, with Q_tt = sum_{s != t}
    r_st^2 and Q_ts = -r_st r_ts (Wu, Lin, Weng 2004, method 2: the minimiser of sum_t sum_{s != t}
    (r_st p_t - r_ts p_s)^2), whose optimality condition is Q p = (p'Qp) 1. Their fixed-point iteration
    from p = 1/k updates one coordinate at a time, p_t <- p_t + (p'Qp - (Qp)_t) / Q_tt, then renormalises,
    until max_t |(Qp)_t - p'Qp| < eps; eps = 0.005 / k and max_iter = max(100, k) by default (LIBSVM's
    multiclass_probability, whose operations this repeats one for one). Compiled with numba and looped over
    samples there. With ``return_n_iter`` also returns the iterations per sample, (n,) int64 (max_iter
    where it did not converge). Raises ValueError for mismatched shapes, pairs other than each (a, b), a < b,
    once, or values outside (0, 1).
    """
    R = np.ascontiguousarray(R, dtype=np.float64)
    pairs = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2)
    k = int(n_classes)
    if R.ndim != 2 or R.shape[1] != pairs.shape[0] or pairs.shape[0] != k * (k - 1) // 2 or k < 2:
        raise ValueError(
            f"pairwise_coupling: R {R.shape} must have one column per pair of {k} classes "
            f"({k * (k - 1) // 2}); got {pairs.shape[0]} pairs"
        )
    a, b = pairs[:, 0], pairs[:, 1]  # the compiled loop indexes with them unchecked
    if not ((0 <= a) & (a < b) & (b < k)).all() or len(np.unique(a * k + b)) != len(pairs):
        raise ValueError(f"pairwise_coupling: pairs must be every (a, b), 0 <= a < b < {k}, once each")
    if not ((R > 0) & (R < 1)).all():
        raise ValueError("pairwise_coupling: pairwise probabilities must lie in (0, 1); clip them first")
    eps = 0.005 / k if eps is None else float(eps)
    max_iter = max(100, k) if max_iter is None else int(max_iter)
    out = np.empty((R.shape[0], k))
    n_iter = np.empty(R.shape[0], dtype=np.int64)
    _couple(R, pairs, k, eps, max_iter, out, n_iter)
    return (out, n_iter) if return_n_iter else out
