"""The one decomposition solver of svmcore (Osuna, Freund, Girosi 1997; SMO steps after Fan, Chen, Lin 2005).

Solves   min_a  1/2 a'Qa + p'a   s.t.  y'a = Delta,  0 <= a_i <= C_i,   y_i in {+1, -1},
the common form of the C-SVC dual (p = -1), the one-class dual (p = 0, y = 1) and the l2-SVM+ dual.

Each iteration picks a working set B of up to ``working_set_size`` violating variables (the maximal
violator, then the best others by first- and second-order gain; see ``select_working_set``), solves the subproblem on B by SMO
pair steps with second-order pair selection (Fan et al. 2005, WSS2) on the dense Q_BB, and updates the
gradient of the active variables with the columns of the variables that moved. It stops when the maximal
KKT violation m(a) - M(a) = max_{I_up} -y_i G_i - min_{I_low} -y_i G_i is at most ``tol`` (LIBSVM's
rule). Shrinking drops bounded variables that cannot join a violating pair; at convergence on the active
set their gradients are reconstructed and all variables are checked again.

The iterations run in numba over an LRU column cache (``qmatrix.ColumnCache``); when a working set
needs columns that are not cached, control returns to Python, which asks the Q-matrix for all of them in
one block (BLAS) and stores them. Only the Q-matrix knows what Q is.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numba as nb
import numpy as np

from ._validation import ConvergenceWarning
from .qmatrix import ColumnCache, float32_columns_suffice

TAU = 1e-12
_CONVERGED, _NEED_COLUMNS, _BUDGET = 0, 1, 2
# LIBSVM's safeguard when no max_iter is given: at most max(10^7, 100 n) SMO pair steps
MAX_PAIR_STEPS, PAIR_STEPS_PER_ROW = 10_000_000, 100
# io slots shared with the numba loop
_N_ACTIVE, _CLOCK, _N_ITER, _N_INNER, _SINCE_SHRINK, _N_NEED, _HITS = range(7)


@dataclass
class SolverResult:
    """Solution of the dual: alpha (n,), gradient Qa + p (n,), rho (LIBSVM's offset: the decision value
    is sum_i alpha_i y_i K(x_i, x) - rho), objective 1/2 a'Qa + p'a, n_iter (working sets solved),
    n_inner (SMO pair steps), kkt_violation m(a) - M(a), cache_hit_rate (columns), seconds, converged."""
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


@nb.njit(cache=True, inline="always")
def _in_up(a, y, c):
    return (y > 0 and a < c) or (y < 0 and a > 0)


@nb.njit(cache=True, inline="always")
def _in_low(a, y, c):
    return (y > 0 and a > 0) or (y < 0 and a < c)


@nb.njit(cache=True)
def _push(vals, ids, count, h, v, t):
    """Keep the h largest v in vals (descending) with their ids; returns the new count."""
    if count == h and v <= vals[h - 1]:
        return count
    pos = count if count < h else h - 1
    while pos > 0 and vals[pos - 1] < v:
        vals[pos] = vals[pos - 1]
        ids[pos] = ids[pos - 1]
        pos -= 1
    vals[pos] = v
    ids[pos] = t
    return count + 1 if count < h else count


@nb.njit(cache=True, nogil=True)
def violation_extremes(G, alpha, y, C, active):
    """(i, m, M): i = argmax over I_up of -y_i G_i, m its value, M = min over I_low (Keerthi et al.)."""
    m = -np.inf
    M = np.inf
    i = -1
    for t in active:
        v = -y[t] * G[t]
        if v > m and _in_up(alpha[t], y[t], C[t]):
            m = v
            i = t
        if v < M and _in_low(alpha[t], y[t], C[t]):
            M = v
    return i, m, M


@nb.njit(cache=True)
def first_order_candidates(G, alpha, y, C, active, m, M, h):
    """The h/2 largest violators -y_t G_t > M of I_up and the h/2 smallest < m of I_low."""
    h2 = max(h // 2, 1)
    up_v = np.empty(h2)
    up_i = np.empty(h2, np.int64)
    low_v = np.empty(h2)
    low_i = np.empty(h2, np.int64)
    n_up = 0
    n_low = 0
    for t in active:
        v = -y[t] * G[t]
        if v > M and _in_up(alpha[t], y[t], C[t]):
            n_up = _push(up_v, up_i, n_up, h2, v, t)
        if v < m and _in_low(alpha[t], y[t], C[t]):
            n_low = _push(low_v, low_i, n_low, h2, -v, t)
    return np.unique(np.concatenate((up_i[:n_up], low_i[:n_low])))


@nb.njit(cache=True)
def select_working_set(G, alpha, y, C, diag, active, i, m, M, Qi, q):
    """Working set B (sorted) of up to q variables: the maximal violator i (in I_up), the next
    q/2 - 1 violators of I_up by first-order gain, and q/2 of I_low by the second-order gain
    (m + y_t G_t)^2 / (Q_ii + Q_tt - 2 y_i y_t Q_it) of the pair (i, t) (Fan et al. 2005, WSS2; with
    q = 2 this is exactly WSS2). ``Qi`` is Q's column i (signed, as Q)."""
    h_up = max(q // 2 - 1, 0)
    h_low = q - 1 - h_up
    up_v = np.empty(max(h_up, 1))
    up_i = np.empty(max(h_up, 1), np.int64)
    low_v = np.empty(h_low)
    low_i = np.empty(h_low, np.int64)
    n_up = 0
    n_low = 0
    for t in active:
        v = -y[t] * G[t]
        if h_up > 0 and v > M and t != i and _in_up(alpha[t], y[t], C[t]):
            n_up = _push(up_v, up_i, n_up, h_up, v, t)
        if v < m and _in_low(alpha[t], y[t], C[t]):
            quad = diag[i] + diag[t] - 2.0 * y[i] * y[t] * Qi[t]
            n_low = _push(low_v, low_i, n_low, h_low, (m - v) * (m - v) / (quad if quad > 0 else TAU), t)
    B = np.empty(1 + n_up + n_low, np.int64)
    B[0] = i
    B[1:1 + n_up] = up_i[:n_up]
    B[1 + n_up:] = low_i[:n_low]
    return np.unique(B)  # a free variable may rank in both halves


@nb.njit(cache=True)
def solve_subproblem(QBB, diag, G, alpha, y, C, eps, max_steps):
    """SMO on the working set: pair steps with WSS2 on the dense (q, q) Q_BB; G, alpha updated in place.

    Fan, Chen, Lin (2005), Algorithm 1 with working-set selection WSS2 (their Eq. 16-17) and the analytic
    two-variable update with clipping (as in LIBSVM's Solver::Solve). Returns the number of steps.
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
                obj = -(grad_diff * grad_diff) / (quad if quad > 0 else TAU)
                if obj <= best:
                    best = obj
                    j = t
        # The first step is always taken: B holds a violating pair even when its violation is below eps.
        if j < 0 or (steps > 0 and gmax + gmax2 < eps):
            break
        steps += 1
        ai = alpha[i]
        aj = alpha[j]
        Ci = C[i]
        Cj = C[j]
        if y[i] != y[j]:
            quad = diag[i] + diag[j] + 2.0 * QBB[i, j]
            delta = (-G[i] - G[j]) / (quad if quad > 0 else TAU)
            diff = ai - aj
            alpha[i] += delta
            alpha[j] += delta
            if diff > 0:
                if alpha[j] < 0:
                    alpha[j] = 0.0
                    alpha[i] = diff
            elif alpha[i] < 0:
                alpha[i] = 0.0
                alpha[j] = -diff
            if diff > Ci - Cj:
                if alpha[i] > Ci:
                    alpha[i] = Ci
                    alpha[j] = Ci - diff
            elif alpha[j] > Cj:
                alpha[j] = Cj
                alpha[i] = Cj + diff
        else:
            quad = diag[i] + diag[j] - 2.0 * QBB[i, j]
            delta = (G[i] - G[j]) / (quad if quad > 0 else TAU)
            s = ai + aj
            alpha[i] -= delta
            alpha[j] += delta
            if s > Ci:
                if alpha[i] > Ci:
                    alpha[i] = Ci
                    alpha[j] = s - Ci
            elif alpha[j] < 0:
                alpha[j] = 0.0
                alpha[i] = s
            if s > Cj:
                if alpha[j] > Cj:
                    alpha[j] = Cj
                    alpha[i] = s - Cj
            elif alpha[i] < 0:
                alpha[i] = 0.0
                alpha[j] = s
        di = alpha[i] - ai
        dj = alpha[j] - aj
        for t in range(q):
            G[t] += QBB[i, t] * di + QBB[j, t] * dj
    return steps


@nb.njit(cache=True)
def _shrink(G, alpha, y, C, active, n_active, m, M):
    """Compact active[:n_active] in place, dropping bounded variables that cannot join a violating pair
    (LIBSVM's be_shrunk); returns the new count."""
    k = 0
    for s in range(n_active):
        t = active[s]
        v = -y[t] * G[t]
        up = _in_up(alpha[t], y[t], C[t])
        low = _in_low(alpha[t], y[t], C[t])
        if not ((up and not low and v < M) or (low and not up and v > m)):
            active[k] = t
            k += 1
    return k


@nb.njit(cache=True, nogil=True)  # nogil: SVC(n_jobs) solves binary problems on threads at once
def _iterate(G, alpha, y, C, diag, active, io, fo, data, slot_of, last_used, q, tol, shrink_every, budget,
             need):
    """Run up to ``budget`` working-set iterations; see the module docstring. Returns _CONVERGED (on the
    active set), _NEED_COLUMNS (need[:io[_N_NEED]] must be cached first) or _BUDGET."""
    n_active = io[_N_ACTIVE]
    for _ in range(budget):
        i, m, M = violation_extremes(G, alpha, y, C, active[:n_active])
        fo[0] = m - M
        if m - M <= tol:
            return _CONVERGED
        io[_CLOCK] += 1
        if slot_of[i] < 0:
            # WSS2 needs column i; fetch with it the uncached first-order candidates, which the working
            # sets to come will likely want: one block of columns costs little more than one column.
            need[0] = i
            k = 1
            for b in first_order_candidates(G, alpha, y, C, active[:n_active], m, M, need.shape[0] - q):
                if slot_of[b] < 0 and b != i:
                    need[k] = b
                    k += 1
            io[_N_NEED] = k
            return _NEED_COLUMNS
        B = select_working_set(G, alpha, y, C, diag, active[:n_active], i, m, M, data[slot_of[i]], q)
        if B.shape[0] < 2:
            return _CONVERGED
        k = 0
        for b in B:
            s = slot_of[b]
            if s < 0:
                need[k] = b
                k += 1
            else:
                last_used[s] = io[_CLOCK]
        if k > 0:
            io[_N_NEED] = k
            return _NEED_COLUMNS
        qb = B.shape[0]
        io[_HITS] += qb
        QBB = np.empty((qb, qb))
        for a in range(qb):
            row = data[slot_of[B[a]]]
            for b in range(qb):
                QBB[a, b] = row[B[b]]
        aB = alpha[B]
        old = aB.copy()
        GB = G[B]
        io[_N_INNER] += solve_subproblem(QBB, diag[B], GB, aB, y[B], C[B], max(tol, 0.1 * (m - M)), 100 * qb)
        for a in range(qb):
            d = aB[a] - old[a]
            if d != 0.0:
                alpha[B[a]] = aB[a]
                row = data[slot_of[B[a]]]
                for s in range(n_active):
                    t = active[s]
                    G[t] += d * row[t]
        io[_N_ITER] += 1
        io[_SINCE_SHRINK] += 1
        if shrink_every > 0 and io[_SINCE_SHRINK] >= shrink_every:
            io[_SINCE_SHRINK] = 0
            n_active = _shrink(G, alpha, y, C, active, n_active, m, M)
            io[_N_ACTIVE] = n_active
    return _BUDGET


@nb.njit(cache=True, nogil=True)
def _add_rows(G, rows_of, block, coef):
    """G[rows_of] += coef @ block (block: (k, len(rows_of)) float32 or float64), accumulated in float64."""
    for r in range(coef.shape[0]):
        c = coef[r]
        for s in range(rows_of.shape[0]):
            G[rows_of[s]] += c * block[r, s]


@nb.njit(cache=True, nogil=True)
def _add_cached(G, rows_of, data, slots, coef):
    """G[rows_of] += sum_r coef[r] * data[slots[r], rows_of] (cached full columns, read in place)."""
    for r in range(coef.shape[0]):
        c = coef[r]
        row = data[slots[r]]
        for s in range(rows_of.shape[0]):
            G[rows_of[s]] += c * row[rows_of[s]]


def _gradient(Q, p, alpha, rows_of, cache=None, chunk=256):
    """p + Q alpha on the variables ``rows_of``, from the columns of the nonzero alpha: those cached on
    all variables are read from ``cache``, the others computed in blocks."""
    G = np.zeros(Q.n)
    G[rows_of] = p[rows_of]
    nz = np.flatnonzero(alpha)
    if cache is not None:
        slots = cache.slot_of[nz]
        hit = slots >= 0
        hit[hit] = cache.full[slots[hit]]
        _add_cached(G, rows_of, cache.data, slots[hit], alpha[nz[hit]])
        nz = nz[~hit]
    for s in range(0, len(nz), chunk):
        idx = nz[s:s + chunk]
        _add_rows(G, rows_of, np.ascontiguousarray(Q.rows(idx, rows_of)), alpha[idx])
    return G[rows_of]


def compute_rho(G, alpha, y, C):
    """LIBSVM's rho: mean of y_i G_i over free variables, else the middle of the feasible interval.

    Variables with C_i = 0 (rows of zero weight) are fixed at 0 and bound nothing: LIBSVM removes them before
    training. Counted at their upper bound, they narrowed the interval, or moved it beyond the optimal one."""
    yG = y * G
    free = (alpha > 0) & (alpha < C)
    if free.any():
        yG = yG[free]
        return float(yG.sum() / yG.size)  # the mean, without np.mean's overhead (~10 us, for every pair of classes)
    at_upper = alpha >= C
    fixed = C <= 0
    ub_mask = ((at_upper & (y < 0)) | (~at_upper & (y > 0))) & ~fixed
    lb_mask = ((at_upper & (y > 0)) | (~at_upper & (y < 0))) & ~fixed
    ub = yG[ub_mask].min() if ub_mask.any() else np.inf
    lb = yG[lb_mask].max() if lb_mask.any() else -np.inf
    if np.isinf(ub) or np.isinf(lb):
        return float(ub if np.isfinite(ub) else lb)
    return float((ub + lb) / 2)


def solve(Q, p, y, C, alpha0, *, tol=1e-3, working_set_size=None, cache_size=200.0, shrinking=True,
          max_iter=None, callback=None, verbose=False) -> SolverResult:
    """Minimise 1/2 a'Qa + p'a subject to y'a = y'alpha0 and 0 <= a <= C by working-set decomposition.

    Q: a Q-matrix (``qmatrix.KernelQ`` or ``qmatrix.PrecomputedQ``) with n variables; p, y, C, alpha0:
    (n,) float64, y in {+1, -1}, alpha0 feasible (0 <= alpha0 <= C). ``working_set_size`` q >= 2 (None:
    64); ``cache_size``: MB of cached columns (at least 2q + 64 columns are kept); ``tol``: stopping tolerance
    on the KKT violation m(a) - M(a); ``max_iter``: bound on iterations (working sets solved; None: LIBSVM's
    safeguard, at most max(10^7, 100 n) SMO pair steps; a svmcore.ConvergenceWarning is issued when either is reached);
    ``callback(info)`` is called about every 1000 iterations with a dict (n_iter, kkt_violation, n_active,
    seconds). Raises ValueError for an infeasible alpha0 or q < 2. Columns are stored in Q's dtype, or in
    float64 where float32 cannot reach ``tol`` (``qmatrix.float32_columns_suffice``: C max Q_ii eps32 >= tol, eps32
    raised to the Q-matrix's ``column_rel_error`` where its columns come from float32 products).
    """
    n = Q.n
    y = np.ascontiguousarray(y, dtype=np.float64)
    p = np.ascontiguousarray(p, dtype=np.float64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    alpha = np.array(alpha0, dtype=np.float64)
    if alpha.shape != (n,) or p.shape != (n,) or y.shape != (n,) or C.shape != (n,):
        raise ValueError(f"p, y, C and alpha0 must have shape ({n},)")
    if (alpha < 0).any() or (alpha > C).any():
        raise ValueError("alpha0 is not feasible: need 0 <= alpha0 <= C")
    q = min(64 if working_set_size is None else int(working_set_size), n)
    if q < 2:
        raise ValueError(f"working_set_size must be >= 2 (and n >= 2), got {working_set_size} with n={n}")
    start = time.perf_counter()
    if Q.dtype == np.float32 and not float32_columns_suffice(C.max(), np.abs(Q.diagonal).max(), tol,
                                                             getattr(Q, "column_rel_error", None)):
        Q = Q.float64()
    diag = np.ascontiguousarray(Q.diagonal, dtype=np.float64)
    need = np.empty(q + max(q, 32), dtype=np.int64)  # a working set's columns, or column i + prefetch
    cache = ColumnCache(n, cache_size, 2 * len(need), Q.dtype)  # room for a request beside the working set
    all_idx = np.arange(n, dtype=np.int64)
    G = _gradient(Q, p, alpha, all_idx) if alpha.any() else p.copy()  # (C-SVC starts from 0)
    active = all_idx.copy()
    act = all_idx  # the active set as handed to Q.rows; replaced when shrinking changes it
    io = np.zeros(7, dtype=np.int64)
    io[_N_ACTIVE] = n
    fo = np.zeros(1)
    shrink_every = max(1, 1000 // q) if shrinking else 0
    budget = 1000
    pair_step_cap = max(MAX_PAIR_STEPS, PAIR_STEPS_PER_ROW * n)  # a badly scaled problem warns, never hangs
    converged = False
    while True:
        left = budget if max_iter is None else min(budget, max_iter - int(io[_N_ITER]))
        if left <= 0 or (max_iter is None and io[_N_INNER] >= pair_step_cap):
            break
        status = _iterate(G, alpha, y, C, diag, active, io, fo, cache.data, cache.slot_of, cache.last_used,
                          q, tol, shrink_every, left, need)
        if io[_N_ACTIVE] != len(act):
            act = active[:io[_N_ACTIVE]].copy()
        if status == _NEED_COLUMNS:
            idx = need[:io[_N_NEED]].copy()
            cache.insert(idx, Q.rows(idx, act), act, io[_CLOCK])
            continue
        if status == _CONVERGED:
            if len(act) < n:
                # Converged on the active set: reconstruct the shrunk gradients and check everyone.
                inactive = np.setdiff1d(all_idx, act, assume_unique=True)
                G[inactive] = _gradient(Q, p, alpha, inactive, cache)
                active[:] = all_idx
                act = all_idx
                io[_N_ACTIVE] = n
                cache.drop_partial()
                Q.reset()
                if verbose:
                    print(f"[smo] iteration {io[_N_ITER]}: converged on the active set ({len(inactive)} of {n} "
                          "variables shrunk); reconstructing their gradients")
                continue
            converged = True
            break
        info = {"n_iter": int(io[_N_ITER]), "kkt_violation": float(fo[0]), "n_active": int(io[_N_ACTIVE]),
                "seconds": time.perf_counter() - start}
        if callback is not None:
            callback(info)
        if verbose:
            hits = io[_HITS]
            print(f"[smo] iteration {info['n_iter']}: violation {info['kkt_violation']:.4g}, objective "
                  f"{0.5 * float(alpha @ (G + p)):.8g}, active {info['n_active']}, "
                  f"cache hit rate {hits / max(hits + cache.misses, 1):.3f}")
    if not converged and len(act) < n:
        inactive = np.setdiff1d(all_idx, act, assume_unique=True)
        G[inactive] = _gradient(Q, p, alpha, inactive, cache)
    violation = fo[0]
    if not converged:
        _, m, M = violation_extremes(G, alpha, y, C, all_idx)
        violation = m - M
        where = (f"at max_iter={max_iter}" if max_iter is not None else
                 f"after {int(io[_N_INNER])} SMO steps (the cap without max_iter, max(10^7, 100 n) as LIBSVM's)")
        warnings.warn(f"solver stopped {where} with KKT violation {violation:.3g} > tol={tol}; scaling the "
                      "features may help", ConvergenceWarning, stacklevel=2)
    objective = 0.5 * float(alpha @ (G + p))
    hit_rate = io[_HITS] / max(io[_HITS] + cache.misses, 1)
    seconds = time.perf_counter() - start
    if verbose:
        print(f"[smo] done: {io[_N_ITER]} iterations ({io[_N_INNER]} pair steps), violation {violation:.3g}, "
              f"objective {objective:.10g}, cache hit rate {hit_rate:.3f}, {seconds:.2f} s")
    if callback is not None:
        callback({"n_iter": int(io[_N_ITER]), "kkt_violation": float(violation), "n_active": n,
                  "seconds": seconds})
    return SolverResult(alpha, G, compute_rho(G, alpha, y, C), objective, int(io[_N_ITER]), int(io[_N_INNER]),
                        float(max(violation, 0.0)), float(hit_rate), seconds, converged)
