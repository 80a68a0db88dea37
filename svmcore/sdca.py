"""Prox-SDCA for the top-k multiclass SVM (Lapin, Hein, Schiele, NIPS 2015, Algorithm 1), numba loops.

Problem (C = 1/(lambda n)), for n examples, m classes and scores s_i = W' x_i:

    primal  P(W) = 1/2 ||W||_F^2 + C sum_i loss(s_i, y_i)
    dual    D(A) = sum_i A[i, y_i] - 1/2 ||W||_F^2,          W = sum_i x_i A[i]'  (d, m)

with per-example dual variables A[i] in R^m: A[i, y_i] = sum_{j != y_i} x_j and A[i, j] = -x_j, where
x in Delta_k(C) (loss "alpha", eq. (3)) or x in {0 <= x <= C/k, <1, x> <= C} (loss "beta", eq. (5)).
The losses use the m-1 margins z_j = 1 + s_j - s_{y_i}, j != y_i:

    alpha: max(0, (1/k) sum of the k largest z_j)            beta: (1/k) sum of the k largest max(0, z_j)

Coordinate step on block i (maximise D over A[i] with the rest fixed; Proposition 4): with K_ii = <x_i, x_i>
and v = A[i] - (s_i - e_{y_i}) / K_ii, the new x is the biased projection (rho = 1) of
a = v_{y_i} 1 - v_{\\y_i} onto the feasible set. For k = 1 this is the Crammer-Singer multiclass SVM.
Linear models keep W and update it by the rank-1 step x_i dA'; kernel models use W' x_i = A' K[:, i].
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .projections import knapsack_into, topk_simplex_into


@nb.njit(cache=True)
def _block_step(s, Ai, yi, kii, k, C, beta, a, x, buf, delta):
    """Replace A[i] (``Ai``, in place) by its block maximiser; ``delta`` <- new - old. Returns max |delta|."""
    m = s.shape[0]
    if kii > 0.0:
        inv = 1.0 / kii
        vy = Ai[yi] - (s[yi] - 1.0) * inv
        p = 0
        for j in range(m):
            if j != yi:
                a[p] = vy - (Ai[j] - s[j] * inv)
                p += 1
        if beta:
            knapsack_into(a[:m - 1], C / k, C, 1.0, x[:m - 1], buf)
        else:
            topk_simplex_into(a[:m - 1], k, C, 1.0, x[:m - 1], buf)
    else:
        # x_i = 0 does not enter W: the dual term is A[i, y_i] alone, maximal on the face <1, x> = C
        for p in range(m - 1):
            x[p] = C / (m - 1)
    change = 0.0
    total = 0.0
    p = 0
    for j in range(m):
        if j != yi:
            new = -x[p]
            total += x[p]
            p += 1
            delta[j] = new - Ai[j]
            Ai[j] = new
    delta[yi] = total - Ai[yi]
    Ai[yi] = total
    for j in range(m):
        change = max(change, abs(delta[j]))
    return change


@nb.njit(cache=True)
def linear_epoch(indptr, indices, data, sq_norms, y, A, W, order, k, C, beta, steps):
    """One pass of Prox-SDCA over ``order`` for a linear model; X given as CSR arrays, W (d, m) updated.

    ``steps[p]`` <- max |change| of block order[p]; returns the largest.
    """
    m = W.shape[1]
    s = np.empty(m)
    a = np.empty(m)
    x = np.empty(m)
    buf = np.empty(2 * m)
    delta = np.empty(m)
    nz = np.empty(m, np.int64)
    change = 0.0
    for q_i in range(order.shape[0]):
        i = order[q_i]
        s[:] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            f = indices[p]
            v = data[p]
            for j in range(m):
                s[j] += v * W[f, j]
        step = _block_step(s, A[i], y[i], sq_norms[i], k, C, beta, a, x, buf, delta)
        steps[q_i] = step
        change = max(change, step)
        if step > 0.0:
            # a block step usually moves a few classes only: update those columns of W
            n_nz = 0
            for j in range(m):
                if delta[j] != 0.0:
                    nz[n_nz] = j
                    n_nz += 1
            for p in range(indptr[i], indptr[i + 1]):
                f = indices[p]
                v = data[p]
                for q in range(n_nz):
                    j = nz[q]
                    W[f, j] += v * delta[j]
    return change


@nb.njit(cache=True)
def kernel_epoch(K, y, A, active, order, k, C, beta, steps):
    """One pass of Prox-SDCA over ``order`` for a kernel model: s_i = A' K[i] summed over rows with A != 0.

    K (n, n) is the symmetric training Gram matrix; ``active[j]`` marks rows of A that are not zero;
    ``steps`` as in :func:`linear_epoch`. Returns the largest step.
    """
    n, m = A.shape
    s = np.empty(m)
    a = np.empty(m)
    x = np.empty(m)
    buf = np.empty(2 * m)
    delta = np.empty(m)
    change = 0.0
    for q_i in range(order.shape[0]):
        i = order[q_i]
        s[:] = 0.0
        Ki = K[i]
        for r in range(n):
            if active[r]:
                v = Ki[r]
                for j in range(m):
                    s[j] += v * A[r, j]
        step = _block_step(s, A[i], y[i], K[i, i], k, C, beta, a, x, buf, delta)
        steps[q_i] = step
        change = max(change, step)
        nz = False
        for j in range(m):
            if A[i, j] != 0.0:
                nz = True
        active[i] = nz
    return change


@nb.njit(cache=True)
def topk_losses(S, y, k, beta):
    """Per-example top-k hinge loss (alpha, eq. (3), or beta, eq. (5)) of scores S (n, m); returns (n,)."""
    n, m = S.shape
    out = np.empty(n)
    top = np.empty(k)
    for i in range(n):
        yi = y[i]
        sy = S[i, yi]
        top[:] = -np.inf
        for j in range(m):
            if j != yi:
                v = 1.0 + S[i, j] - sy
                if beta and v < 0.0:
                    v = 0.0
                if v > top[k - 1]:  # insert into the descending list of the k largest
                    p = k - 1
                    while p > 0 and top[p - 1] < v:
                        top[p] = top[p - 1]
                        p -= 1
                    top[p] = v
        total = 0.0
        for p in range(k):
            total += top[p]
        out[i] = max(total / k, 0.0)
    return out


def objectives(S, A, y, k, C, beta, w_sq):
    """Primal and dual objective values and per-example losses (n,), from scores S = X W (n, m), dual
    variables A (n, m) and w_sq = ||W||_F^2."""
    losses = topk_losses(S, y, k, beta)
    primal = 0.5 * w_sq + C * float(losses.sum())
    dual = float(A[np.arange(A.shape[0]), y].sum()) - 0.5 * w_sq
    return primal, dual, losses


@nb.njit(cache=True)
def block_violations(S, A, y, sq_norms, k, C, beta):
    """max |new - old| of each example's block step taken from scores S (n, m), without changing A; (n,)."""
    n, m = A.shape
    out = np.empty(n)
    a = np.empty(m)
    x = np.empty(m)
    buf = np.empty(2 * m)
    delta = np.empty(m)
    Ai = np.empty(m)
    for i in range(n):
        Ai[:] = A[i]
        out[i] = _block_step(S[i], Ai, y[i], sq_norms[i], k, C, beta, a, x, buf, delta)
    return out
