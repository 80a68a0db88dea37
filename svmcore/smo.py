"""The one decomposition solver of svmcore (Osuna, Freund, Girosi 1997; SMO steps after Fan, Chen, Lin 2005).

Solves   min_a  1/2 a'Qa + p'a   s.t.  y'a = Delta,  0 <= a_i <= C_i,   y_i in {+1, -1},
the common form of the C-SVC dual (p = -1), the one-class dual (p = 0, y = 1) and the l2-SVM+ dual.

Each outer iteration picks a working set B of up to ``working_set_size`` most violating variables
(first-order ranking of -y_i G_i, half from I_up and half from I_low), fetches their Q columns in one
block (BLAS-computed, LRU-cached), solves the subproblem on B by SMO pair steps with second-order
working-pair selection (Fan et al. 2005, WSS2) on the small dense Q_BB, then updates the gradient of all
active variables with one block product. It stops when the maximal KKT violation
m(a) - M(a) = max_{I_up} -y_i G_i - min_{I_low} -y_i G_i is at most ``tol`` (Keerthi et al.; LIBSVM's
rule). Shrinking removes bounded variables that cannot enter a violating pair; at convergence on the
active set their gradient is reconstructed and all variables are checked again.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numba as nb
import numpy as np

TAU = 1e-12


@dataclass
class SolverResult:
    """Solution of the dual: alpha (n,), gradient Qa + p (n,), rho (LIBSVM's offset), objective,
    n_iter (outer iterations), n_inner (SMO pair steps), kkt_violation, cache_hit_rate, seconds."""
    alpha: np.ndarray
    gradient: np.ndarray
    rho: float
    objective: float
    n_iter: int
    n_inner: int
    kkt_violation: float
    cache_hit_rate: float
    seconds: float
    converged: bool


@nb.njit(cache=True)
def _in_up(a, y, c):
    return (y > 0 and a < c) or (y < 0 and a > 0)


@nb.njit(cache=True)
def _in_low(a, y, c):
    return (y > 0 and a > 0) or (y < 0 and a < c)


@nb.njit(cache=True)
def _push(vals, ids, count, h, v, t):
    """Keep the h largest v in vals (descending), with their ids; returns the new count."""
    if count == h and v <= vals[h - 1]:
        return count
    pos = count if count < h else h - 1
    while pos > 0 and vals[pos - 1] < v:
        if pos < h:
            vals[pos] = vals[pos - 1]
            ids[pos] = ids[pos - 1]
        pos -= 1
    vals[pos] = v
    ids[pos] = t
    return count + 1 if count < h else count


@nb.njit(cache=True)
def select_working_set(G, alpha, y, C, active, q):
    """Working set of up to q violating variables; returns (B, m, M) with m - M the KKT violation."""
    m = -np.inf
    M = np.inf
    for t in active:
        v = -y[t] * G[t]
        if _in_up(alpha[t], y[t], C[t]) and v > m:
            m = v
        if _in_low(alpha[t], y[t], C[t]) and v < M:
            M = v
    h = max(q // 2, 1)
    up_v = np.empty(h)
    up_i = np.empty(h, np.int64)
    low_v = np.empty(h)
    low_i = np.empty(h, np.int64)
    n_up = 0
    n_low = 0
    for t in active:
        v = -y[t] * G[t]
        if _in_up(alpha[t], y[t], C[t]) and v > M:
            n_up = _push(up_v, up_i, n_up, h, v, t)
        if _in_low(alpha[t], y[t], C[t]) and v < m:
            n_low = _push(low_v, low_i, n_low, h, -v, t)
    B = np.empty(n_up + n_low, np.int64)
    B[:n_up] = up_i[:n_up]
    B[n_up:] = low_i[:n_low]
    B = np.unique(B)  # a free variable may rank in both halves
    return B, m, M


@nb.njit(cache=True)
def solve_subproblem(QBB, diag, G, alpha, y, C, eps, max_steps):
    """SMO on the working set: pair steps with WSS2 on the dense (q, q) Q_BB; G, alpha updated in place.

    Fan, Chen, Lin (2005), Algorithm 1 with working-set selection WSS2 (their Eq. 16/17) and the
    analytic two-variable update with clipping (LIBSVM's Solver::Solve). Returns the number of steps.
    """
    q = alpha.shape[0]
    steps = 0
    while steps < max_steps:
        gmax = -np.inf
        i = -1
        for t in range(q):
            if _in_up(alpha[t], y[t], C[t]) and -y[t] * G[t] >= gmax:
                gmax = -y[t] * G[t]
                i = t
        if i < 0:
            break
        gmax2 = -np.inf
        j = -1
        best = np.inf
        for t in range(q):
            if not _in_low(alpha[t], y[t], C[t]):
                continue
            v = y[t] * G[t]
            if v >= gmax2:
                gmax2 = v
            grad_diff = gmax + v
            if grad_diff > 0:
                quad = diag[i] + diag[t] - 2.0 * y[i] * y[t] * QBB[i, t]
                if quad <= 0:
                    quad = TAU
                obj = -(grad_diff * grad_diff) / quad
                if obj <= best:
                    best = obj
                    j = t
        if gmax + gmax2 < eps or j < 0:
            break
        steps += 1
        ai = alpha[i]
        aj = alpha[j]
        Ci = C[i]
        Cj = C[j]
        if y[i] != y[j]:
            quad = diag[i] + diag[j] + 2.0 * QBB[i, j]
            if quad <= 0:
                quad = TAU
            delta = (-G[i] - G[j]) / quad
            diff = alpha[i] - alpha[j]
            alpha[i] += delta
            alpha[j] += delta
            if diff > 0:
                if alpha[j] < 0:
                    alpha[j] = 0.0
                    alpha[i] = diff
            else:
                if alpha[i] < 0:
                    alpha[i] = 0.0
                    alpha[j] = -diff
            if diff > Ci - Cj:
                if alpha[i] > Ci:
                    alpha[i] = Ci
                    alpha[j] = Ci - diff
            else:
                if alpha[j] > Cj:
                    alpha[j] = Cj
                    alpha[i] = Cj + diff
        else:
            quad = diag[i] + diag[j] - 2.0 * QBB[i, j]
            if quad <= 0:
                quad = TAU
            delta = (G[i] - G[j]) / quad
            s = alpha[i] + alpha[j]
            alpha[i] -= delta
            alpha[j] += delta
            if s > Ci:
                if alpha[i] > Ci:
                    alpha[i] = Ci
                    alpha[j] = s - Ci
            else:
                if alpha[j] < 0:
                    alpha[j] = 0.0
                    alpha[i] = s
            if s > Cj:
                if alpha[j] > Cj:
                    alpha[j] = Cj
                    alpha[i] = s - Cj
            else:
                if alpha[i] < 0:
                    alpha[i] = 0.0
                    alpha[j] = s
        di = alpha[i] - ai
        dj = alpha[j] - aj
        for t in range(q):
            G[t] += QBB[i, t] * di + QBB[j, t] * dj
    return steps


@nb.njit(cache=True, parallel=True)
def update_gradient(G, active, rows, delta):
    """G[active] += delta @ rows, accumulated in float64 (rows: (q, n_active) float32)."""
    q = delta.shape[0]
    for t in nb.prange(active.shape[0]):
        s = 0.0
        for r in range(q):
            s += delta[r] * rows[r, t]
        G[active[t]] += s


@nb.njit(cache=True)
def shrink(G, alpha, y, C, active, m, M):
    """Active variables minus those at a bound that cannot join a violating pair (LIBSVM's be_shrunk)."""
    keep = np.empty(active.shape[0], np.bool_)
    for k in range(active.shape[0]):
        t = active[k]
        v = -y[t] * G[t]
        up = _in_up(alpha[t], y[t], C[t])
        low = _in_low(alpha[t], y[t], C[t])
        keep[k] = not ((up and not low and v < M) or (low and not up and v > m))
    return active[keep]


def _accumulate(Q, G, p, alpha, rows_of, chunk):
    """G[rows_of] = p[rows_of] + sum_j alpha_j Q[j, rows_of], over the nonzero alpha, in column chunks."""
    G[rows_of] = p[rows_of]
    nz = np.flatnonzero(alpha)
    for s in range(0, len(nz), chunk):
        idx = nz[s:s + chunk]
        update_gradient(G, rows_of, Q.rows(idx, rows_of, use_cache=False), alpha[idx])


def compute_rho(G, alpha, y, C):
    """LIBSVM's rho: mean of y_i G_i over free variables, else the middle of the feasible interval."""
    yG = y * G
    free = (alpha > 0) & (alpha < C)
    if free.any():
        return float(yG[free].mean())
    at_upper = alpha >= C
    ub_mask = (at_upper & (y < 0)) | (~at_upper & (y > 0))
    lb_mask = (at_upper & (y > 0)) | (~at_upper & (y < 0))
    ub = yG[ub_mask].min() if ub_mask.any() else np.inf
    lb = yG[lb_mask].max() if lb_mask.any() else -np.inf
    if np.isinf(ub) or np.isinf(lb):
        return float(ub if np.isfinite(ub) else lb)
    return float((ub + lb) / 2)


def solve(Q, p, y, C, alpha0, *, tol=1e-3, working_set_size=None, shrinking=True, max_iter=None,
          callback=None, verbose=False) -> SolverResult:
    """Minimise 1/2 a'Qa + p'a subject to y'a = y'alpha0 and 0 <= a <= C by working-set decomposition.

    Q: a Q-matrix (``qmatrix.KernelQ`` or ``qmatrix.PrecomputedQ``) with n variables; p, y, C, alpha0:
    (n,) float64, y in {+1, -1}, alpha0 feasible (0 <= alpha0 <= C). ``working_set_size`` q >= 2 (None:
    64, at most n); ``tol``: stopping tolerance on the KKT violation m(a) - M(a); ``max_iter``: bound
    on outer iterations (None: no bound; a RuntimeWarning is issued when it is reached);
    ``callback(info)`` is called after every outer iteration with a dict (n_iter, kkt_violation,
    n_active, seconds). Raises ValueError for an infeasible alpha0 or a working-set size < 2.
    """
    n = Q.n
    y = np.asarray(y, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    alpha = np.array(alpha0, dtype=np.float64)
    if np.any(alpha < 0) or np.any(alpha > C):
        raise ValueError("alpha0 is not feasible: need 0 <= alpha0 <= C")
    q = min(64 if working_set_size is None else int(working_set_size), n)
    if q < 2:
        raise ValueError(f"working_set_size must be >= 2, got {working_set_size}")
    diag = np.asarray(Q.diagonal, dtype=np.float64)
    start = time.perf_counter()
    all_idx = np.arange(n, dtype=np.int64)
    G = np.empty(n)
    _accumulate(Q, G, p, alpha, all_idx, max(q, 256))
    active = all_idx
    shrink_every = max(2, 400 // q)
    n_iter = n_inner = 0
    since_shrink = 0
    converged = False
    violation = np.inf
    while max_iter is None or n_iter < max_iter:
        B, m, M = select_working_set(G, alpha, y, C, active, q)
        violation = m - M
        if violation <= tol or len(B) < 2:
            if len(active) < n:
                # Converged on the active set: reconstruct the shrunk gradients and check everyone.
                inactive = np.setdiff1d(all_idx, active, assume_unique=True)
                _accumulate(Q, G, p, alpha, inactive, max(q, 256))
                active = all_idx
                Q.reset()
                if verbose:
                    print(f"[smo] unshrink at iter {n_iter}: violation {violation:.3g} on the active set")
                continue
            converged = True
            break
        rows = Q.rows(B, active)
        pos = B if len(active) == n else np.searchsorted(active, B)
        QBB = np.ascontiguousarray(rows[:, pos], dtype=np.float64)
        aB = alpha[B]
        GB = G[B].copy()
        old = aB.copy()
        eps = max(tol, 0.1 * violation) if len(active) == n else tol
        n_inner += solve_subproblem(QBB, diag[B], GB, aB, y[B], C[B], eps, 100 * len(B))
        delta = aB - old
        changed = delta != 0
        if changed.any():
            alpha[B] = aB
            update_gradient(G, active, np.ascontiguousarray(rows[changed]), delta[changed])
        n_iter += 1
        since_shrink += 1
        if shrinking and since_shrink >= shrink_every:
            since_shrink = 0
            active = shrink(G, alpha, y, C, active, m, M)
        if callback is not None:
            callback({"n_iter": n_iter, "kkt_violation": violation, "n_active": len(active),
                      "seconds": time.perf_counter() - start})
        if verbose and n_iter % 100 == 0:
            obj = 0.5 * float(alpha @ (G + p))
            print(f"[smo] iter {n_iter}: violation {violation:.4g}, objective {obj:.6g}, active {len(active)}, "
                  f"cache hit rate {Q.hit_rate:.2f}")
    if not converged:
        if len(active) < n:
            inactive = np.setdiff1d(all_idx, active, assume_unique=True)
            _accumulate(Q, G, p, alpha, inactive, max(q, 256))
            _, m, M = select_working_set(G, alpha, y, C, all_idx, 2)
            violation = m - M
        warnings.warn(f"solver stopped at max_iter={max_iter} with KKT violation {violation:.3g} > tol={tol}",
                      RuntimeWarning, stacklevel=2)
    objective = 0.5 * float(alpha @ (G + p))
    seconds = time.perf_counter() - start
    if verbose:
        print(f"[smo] done: {n_iter} iterations ({n_inner} pair steps), violation {violation:.3g}, "
              f"objective {objective:.8g}, cache hit rate {Q.hit_rate:.2f}, {seconds:.2f} s")
    return SolverResult(alpha, G, compute_rho(G, alpha, y, C), objective, n_iter, n_inner,
                        float(max(violation, 0.0)), Q.hit_rate, seconds, converged)
