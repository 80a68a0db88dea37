"""The one decomposition solver of svmcore (Osuna, Freund, Girosi 1997; SMO steps after Fan, Chen, Lin 2005).

Solves   min_a  1/2 a'Qa + p'a   s.t.  y'a = Delta,  0 <= a_i <= C_i,   y_i in {+1, -1},
the common form of the C-SVC dual (p = -1), the one-class dual (p = 0, y = 1) and the l2-SVM+ dual.

Each iteration picks a working set B of up to ``working_set_size`` violating variables (the maximal
violator, then the best others by first- and second-order gain; see ``select_working_set``), solves the subproblem on B
by SMO pair steps with second-order pair selection (Fan et al. 2005, WSS2) on the dense Q_BB, and updates the
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
from typing import TYPE_CHECKING, NamedTuple

import numba as nb
import numpy as np

from .validation import ConvergenceWarning
from .kernels import pairwise_sum
from .qmatrix import CacheArrays, ColumnCache, float32_columns_suffice, in_memory_pays

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import ArrayLike

    from .qmatrix import QMatrix

TAU = 1e-12
# what _iterate and _drive return: converged (on the active set / on all variables), columns to fetch, a budget of
# iterations spent (_drive: only where the caller reports progress), shrunk gradients to reconstruct with columns
# that are not cached, stopped by max_iter or the pair-step cap
_CONVERGED, _NEED_COLUMNS, _BUDGET, _NEED_GRADIENT, _STOPPED = range(5)
_CHUNK = 1000  # iterations between progress reports and checks of the pair-step cap
# LIBSVM's safeguard when no max_iter is given: at most max(10^7, 100 n) SMO pair steps
MAX_PAIR_STEPS, PAIR_STEPS_PER_ROW = 10_000_000, 100
# io slots shared with the numba loop (_MISSES: columns an in-memory cache took in, _UNSHRINKS: reconstructions)
_N_ACTIVE, _CLOCK, _N_ITER, _N_INNER, _SINCE_SHRINK, _N_NEED, _HITS, _MISSES, _UNSHRINKS = range(9)
_IO_SLOTS = 9


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
    # np.int64(0), not 0: a counter that starts as a constant is typed as a literal at first, which compiles a
    # second _push
    n_up = np.int64(0)
    n_low = np.int64(0)
    for t in active:
        v = -y[t] * G[t]
        if v > M and _in_up(alpha[t], y[t], C[t]):
            n_up = _push(up_v, up_i, n_up, h2, v, t)
        if v < m and _in_low(alpha[t], y[t], C[t]):
            n_low = _push(low_v, low_i, n_low, h2, -v, t)
    b = np.concatenate((up_i[:n_up], low_i[:n_low]))
    return b[: _sort_unique_into(b, b.shape[0])]  # at most 2 h/2 ids: numba's np.sort takes 3 s to compile


@nb.njit(cache=True, nogil=True)
def _sort_unique_into(b, k):
    """Sort b[:k] in place (insertion sort: k a few dozen) and drop repeats; returns the count kept."""
    for t in range(1, k):
        v = b[t]
        u = t
        while u > 0 and b[u - 1] > v:
            b[u] = b[u - 1]
            u -= 1
        b[u] = v
    kept = 0
    for t in range(k):
        if kept == 0 or b[t] != b[kept - 1]:
            b[kept] = b[t]
            kept += 1
    return kept


@nb.njit(cache=True, nogil=True)
def _select_into(G, alpha, y, C, diag, active, i, m, M, Qi, q, fwork, iwork):
    """:func:`select_working_set` into the loop's buffers fwork (2, q) float64 and iwork (3, q) int64, allocated
    once a solve (allocated every iteration, with the working set's other arrays, they cost ~13% of the solve on
    letter's pairs of ~80 rows); B is written to iwork[0] and its length returned."""
    h_up = max(q // 2 - 1, 0)
    h_low = q - 1 - h_up
    up_v, low_v = fwork[0], fwork[1]
    B, up_i, low_i = iwork[0], iwork[1], iwork[2]
    n_up = np.int64(0)  # (see first_order_candidates)
    n_low = np.int64(0)
    for t in active:
        v = -y[t] * G[t]
        if h_up > 0 and v > M and t != i and _in_up(alpha[t], y[t], C[t]):
            n_up = _push(up_v, up_i, n_up, h_up, v, t)
        if v < m and _in_low(alpha[t], y[t], C[t]):
            quad = diag[i] + diag[t] - 2.0 * y[i] * y[t] * Qi[t]
            n_low = _push(low_v, low_i, n_low, h_low, (m - v) * (m - v) / (quad if quad > 0 else TAU), t)
    B[0] = i
    # element loops, not slice copies: a slice copy compiles numba's shape-mismatch error message (~3 s)
    for t in range(n_up):
        B[1 + t] = up_i[t]
    for t in range(n_low):
        B[1 + n_up + t] = low_i[t]
    return _sort_unique_into(B, 1 + n_up + n_low)  # a free variable may rank in both halves


@nb.njit(cache=True)
def select_working_set(G, alpha, y, C, diag, active, i, m, M, Qi, q):
    """Working set B (sorted) of up to q variables: the maximal violator i (in I_up), the next
    q/2 - 1 violators of I_up by first-order gain, and q/2 of I_low by the second-order gain
    (m + y_t G_t)^2 / (Q_ii + Q_tt - 2 y_i y_t Q_it) of the pair (i, t) (Fan et al. 2005, WSS2; with
    q = 2 this is exactly WSS2). ``Qi`` is Q's column i (signed, as Q)."""
    iwork = np.empty((3, q), np.int64)
    k = _select_into(G, alpha, y, C, diag, active, i, m, M, Qi, q, np.empty((2, q)), iwork)
    return iwork[0, :k].copy()


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
def _iterate(G, alpha, y, C, diag, active, io, fo, cache, q, tol, shrink_every, budget, need, qbuf, vec, fwork, iwork):
    """Run up to ``budget`` working-set iterations; see the module docstring. Returns _CONVERGED (on the
    active set), _NEED_COLUMNS (need[:io[_N_NEED]] must be cached first) or _BUDGET."""
    data, slot_of, last_used = cache.data, cache.slot_of, cache.last_used
    n_active = io[_N_ACTIVE]
    for _ in range(budget):
        i, m, M = violation_extremes(G, alpha, y, C, active[:n_active])
        fo[0] = m - M
        # NaN (kernel values that overflowed) stops too: no maximal violator exists (i = -1), and the callers refuse
        # the NaN solution (check_finite_fit); reading on at index -1 looped without end over an in-memory cache
        if not m - M > tol:
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
        qb = _select_into(G, alpha, y, C, diag, active[:n_active], i, m, M, data[slot_of[i]], q, fwork, iwork)
        if qb < 2:
            return _CONVERGED
        B = iwork[0, :qb]
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
        io[_HITS] += qb
        QBB = qbuf[: qb * qb].reshape((qb, qb))
        aB, old, GB, dB, yB, CB = vec[0, :qb], vec[1, :qb], vec[2, :qb], vec[3, :qb], vec[4, :qb], vec[5, :qb]
        for a in range(qb):
            row = data[slot_of[B[a]]]
            for b in range(qb):
                QBB[a, b] = row[B[b]]
            t = B[a]
            aB[a] = old[a] = alpha[t]
            GB[a] = G[t]
            dB[a] = diag[t]
            yB[a] = y[t]
            CB[a] = C[t]
        io[_N_INNER] += solve_subproblem(QBB, dB, GB, aB, yB, CB, max(tol, 0.1 * (m - M)), 100 * qb)
        whole = n_active == alpha.shape[0]  # then active[s] == s: a loop the compiler vectorises
        for a in range(qb):
            d = aB[a] - old[a]
            if d != 0.0:
                alpha[B[a]] = aB[a]
                row = data[slot_of[B[a]]]
                if whole:
                    for t in range(n_active):
                        G[t] += d * row[t]
                else:
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
        idx = nz[s : s + chunk]
        _add_rows(G, rows_of, np.ascontiguousarray(Q.rows(idx, rows_of)), alpha[idx])
    return G[rows_of]


@nb.njit(cache=True, nogil=True)
def compute_rho(G, alpha, y, C):
    """LIBSVM's rho: mean of y_i G_i over free variables, else the middle of the feasible interval (float).

    Variables with C_i = 0 (rows of zero weight) are fixed at 0 and bound nothing: LIBSVM removes them before
    training. Counted at their upper bound, they narrowed the interval, or moved it beyond the optimal one.
    Compiled (the solver's in-memory callers need it; ~1 us against numpy's ~12 us, for every pair of classes); the
    mean is numpy's sum to the bit (:func:`svmcore.kernels.pairwise_sum`) over the free variables in order."""
    n = G.shape[0]
    free = np.empty(n)
    k = 0
    for t in range(n):
        if alpha[t] > 0 and alpha[t] < C[t]:
            free[k] = y[t] * G[t]
            k += 1
    if k > 0:
        return pairwise_sum(free[:k]) / k
    ub = np.inf
    lb = -np.inf
    for t in range(n):
        if C[t] <= 0:
            continue
        v = y[t] * G[t]
        at_upper = alpha[t] >= C[t]
        if (at_upper and y[t] < 0) or (not at_upper and y[t] > 0):
            ub = min(ub, v)
        if (at_upper and y[t] > 0) or (not at_upper and y[t] < 0):
            lb = max(lb, v)
    if np.isinf(ub) or np.isinf(lb):
        return ub if np.isfinite(ub) else lb
    return (ub + lb) / 2


@nb.njit(cache=True, nogil=True)
def _unshrink(G, alpha, p, active, io, cache, in_memory):
    """Reconstruct the gradients of the shrunk variables from the cached columns and make every variable active
    again; False (nothing changed) where a column of a nonzero alpha is not cached on all variables and the cache
    is not in memory (``_gradient`` then computes it). Sums as ``_gradient``: the columns cached on all variables
    first, then the others (an in-memory cache holds every column whole: its slot j is column j), each group in
    index order; then forgets the columns cached on the shrunk active set only (``ColumnCache.drop_partial``)."""
    data, slot_of, owner, last_used, full = cache
    n = alpha.shape[0]
    n_active = io[_N_ACTIVE]
    nz = np.flatnonzero(alpha)
    cached = np.zeros(nz.shape[0], dtype=np.bool_)
    for r in range(nz.shape[0]):
        s = slot_of[nz[r]]
        cached[r] = s >= 0 and full[s]
        if not cached[r] and not in_memory:
            return False
    mark = np.zeros(n, dtype=np.bool_)
    for s in range(n_active):
        mark[active[s]] = True
    inactive = np.flatnonzero(~mark)
    acc = np.zeros(n)
    for t in inactive:
        acc[t] = p[t]
    hit, miss = nz[cached], nz[~cached]
    _add_cached(acc, inactive, data, slot_of[hit], alpha[hit])
    _add_cached(acc, inactive, data, miss, alpha[miss])  # in memory: slot j holds column j (empty if all cached)
    for t in inactive:
        G[t] = acc[t]
    for t in range(n):
        active[t] = t
    io[_N_ACTIVE] = n
    io[_UNSHRINKS] += 1
    for s in range(owner.shape[0]):
        if owner[s] >= 0 and not full[s]:
            slot_of[owner[s]] = -1
            owner[s] = -1
            last_used[s] = 0
    return True


@nb.njit(cache=True, nogil=True)
def _drive(
    G,
    alpha,
    y,
    C,
    p,
    diag,
    active,
    io,
    fo,
    cache,
    in_memory,
    q,
    tol,
    shrink_every,
    max_iter,
    pair_step_cap,
    report,
    serve_unshrink,
    need,
    work,
):
    """The solver's outer loop (see :func:`solve`): _iterate in chunks of _CHUNK iterations, the stopping rules
    (``max_iter`` < 0: none, then the pair-step cap) and unshrinking, until it needs the caller. Returns
    _CONVERGED (on all variables), _STOPPED, _NEED_COLUMNS (need[:io[_N_NEED]] must be cached; never for an
    in-memory cache, whose columns it marks cached itself, as ``ColumnCache.insert`` would), _NEED_GRADIENT
    (unshrinking needs columns that are not cached, or ``serve_unshrink`` is False) or, where ``report``, _BUDGET
    after each chunk."""
    n = alpha.shape[0]
    while True:
        left = _CHUNK if max_iter < 0 else min(_CHUNK, max_iter - io[_N_ITER])
        if left <= 0 or (max_iter < 0 and io[_N_INNER] >= pair_step_cap):
            return _STOPPED
        status = _iterate(G, alpha, y, C, diag, active, io, fo, cache, q, tol, shrink_every, left, need, *work)
        if status == _NEED_COLUMNS:
            if not in_memory:
                return status
            whole = io[_N_ACTIVE] == n
            for r in range(io[_N_NEED]):
                j = need[r]
                cache.slot_of[j] = j
                cache.owner[j] = j
                cache.full[j] = whole
                cache.last_used[j] = io[_CLOCK]
            io[_MISSES] += io[_N_NEED]
        elif status == _CONVERGED:
            if io[_N_ACTIVE] == n:
                return status
            if not (serve_unshrink and _unshrink(G, alpha, p, active, io, cache, in_memory)):
                return _NEED_GRADIENT
        elif report:
            return status


@nb.njit(cache=True, nogil=True)
def _loop_state(n, q, shrinking):
    """The solver loop's buffers and settings for n variables and working sets of q, for :func:`solve` and
    :func:`solve_in_memory` alike: (need: a working set's columns, or column i + prefetch; active; io; fo;
    shrink_every: iterations between shrinking checks, 0 without shrinking; work: the working set's buffers, Q_BB
    flat (q * q,), its alpha, old alpha, G, diagonal, y, C (6, q), and the selection's (2, q) float64, (3, q)
    int64). The pair-step cap stays with the callers: compiled code would freeze MAX_PAIR_STEPS, which a test
    lowers."""
    need = np.empty(q + max(q, 32), dtype=np.int64)
    active = np.arange(n)
    io = np.zeros(_IO_SLOTS, dtype=np.int64)
    io[_N_ACTIVE] = n
    shrink_every = max(1, 1000 // q) if shrinking else 0
    work = (np.empty(q * q), np.empty((6, q)), np.empty((2, q)), np.empty((3, q), dtype=np.int64))
    return need, active, io, np.zeros(1), shrink_every, work


class SolverSettings(NamedTuple):
    """:func:`solve`'s settings as compiled callers of :func:`solve_in_memory` pass them on, one structure: ``tol``,
    ``working_set_size`` (q >= 2), ``shrinking``, ``max_iter`` (< 0 for none)."""

    tol: float
    working_set_size: int
    shrinking: bool
    max_iter: int

    @classmethod
    def of(cls, tol: float, working_set_size: int | None, shrinking: bool, max_iter: int | None) -> SolverSettings:
        """From :func:`solve`'s keywords (None: q = 64, no max_iter)."""
        q = 64 if working_set_size is None else int(working_set_size)
        return cls(float(tol), q, bool(shrinking), -1 if max_iter is None else int(max_iter))


@nb.njit(cache=True, nogil=True)
def solve_in_memory(Qmem, p, y, C, alpha, diag, settings):
    """The compiled core of :func:`solve` on Q held whole, also called by compiled callers (SVC's batch of pairs):
    Qmem (n, n) float32 or float64 (Q's columns as its rows), p, y, C, alpha (the start, updated in place: feasible,
    n >= 2), diag (n,) float64 Q_ii as the Q-matrix gives them; ``settings`` a :class:`SolverSettings`. The same
    iterates as :func:`solve` on a Q-matrix of those columns (its in-memory mode). Returns (G,
    converged, kkt_violation, n_iter, n_inner, hits, misses); rho is :func:`compute_rho` (G, alpha, y, C)."""
    tol, working_set_size, shrinking, max_iter = settings
    n = alpha.shape[0]
    q = min(working_set_size, n)
    G = p.copy()
    nz = np.flatnonzero(alpha)
    if nz.shape[0] > 0:
        _add_cached(G, np.arange(n), Qmem, nz, alpha[nz])
    need, active, io, fo, shrink_every, work = _loop_state(n, q, shrinking)
    cap = max(MAX_PAIR_STEPS, PAIR_STEPS_PER_ROW * n)
    cache = CacheArrays(
        Qmem,
        np.full(n, -1, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        np.zeros(n, dtype=np.bool_),
    )
    status = _drive(
        G,
        alpha,
        y,
        C,
        p,
        diag,
        active,
        io,
        fo,
        cache,
        np.bool_(True),  # flags as np.bool_: numba would type a bare constant as a literal and compile a second
        q,  # _drive for it (the column path passes plain bools)
        tol,
        shrink_every,
        max_iter,
        cap,
        np.bool_(False),
        np.bool_(True),
        need,
        work,
    )
    converged = status == _CONVERGED
    violation = fo[0]
    if not converged:
        if io[_N_ACTIVE] < n:
            _unshrink(G, alpha, p, active, io, cache, np.bool_(True))
        _, m, M = violation_extremes(G, alpha, y, C, np.arange(n))
        violation = m - M
    return G, converged, max(violation, 0.0), io[_N_ITER], io[_N_INNER], io[_HITS], io[_MISSES]


def _result(alpha, G, p, y, C, n_iter, n_inner, violation, hit_rate, start, converged) -> SolverResult:
    """What a finished solve returns, with rho and the objective 1/2 a'Qa + p'a = 1/2 a'(G + p) from the final
    gradient; ``start`` is the perf_counter its seconds count from."""
    return SolverResult(
        alpha,
        G,
        float(compute_rho(G, alpha, y, C)),
        0.5 * float(alpha @ (G + p)),
        int(n_iter),
        int(n_inner),
        float(max(violation, 0.0)),
        float(hit_rate),
        time.perf_counter() - start,
        bool(converged),
    )


def warn_not_converged(max_iter: int | None, n_inner: int, violation: float, tol: float, stacklevel: int = 3) -> None:
    """The ConvergenceWarning of a solve stopped by ``max_iter`` (None: by the pair-step cap after n_inner steps)."""
    where = (
        f"at max_iter={max_iter}"
        if max_iter is not None
        else f"after {int(n_inner)} SMO steps (the cap without max_iter, max(10^7, 100 n) as LIBSVM's)"
    )
    warnings.warn(
        f"solver stopped {where} with KKT violation {violation:.3g} > tol={tol}; scaling the features may help",
        ConvergenceWarning,
        stacklevel=stacklevel,
    )


def solve(
    Q: QMatrix,
    p: ArrayLike,
    y: ArrayLike,
    C: ArrayLike,
    alpha0: ArrayLike,
    *,
    tol: float = 1e-3,
    working_set_size: int | None = None,
    cache_size: float = 200.0,
    shrinking: bool = True,
    max_iter: int | None = None,
    callback: Callable[[dict], None] | None = None,
    verbose: bool = False,
) -> SolverResult:
    """Minimise 1/2 a'Qa + p'a subject to y'a = y'alpha0 and 0 <= a <= C by working-set decomposition.

    Q: a :class:`svmcore.qmatrix.QMatrix` (``KernelQ``, ``PrecomputedQ``, ``DenseQ``) with n variables; p, y, C, alpha0:
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
    if Q.dtype == np.float32 and not float32_columns_suffice(
        C.max(), np.abs(Q.diagonal).max(), tol, getattr(Q, "column_rel_error", None)
    ):
        Q = Q.float64()
    diag = np.ascontiguousarray(Q.diagonal, dtype=np.float64)
    need, active, io, fo, shrink_every, work = _loop_state(n, q, bool(shrinking))
    pair_step_cap = max(MAX_PAIR_STEPS, PAIR_STEPS_PER_ROW * n)  # a badly scaled problem warns, never hangs
    all_idx = np.arange(n, dtype=np.int64)
    if Q.whole or in_memory_pays(n, len(need), cache_size, Q.dtype):
        # a small Q (or one held whole): the iterations served from it in compiled code, the cache's state (which
        # columns, computed on which active set) kept as the fetches would have left it, so the iterates are those
        # of the column-by-column solve (to the rounding of dense products: in_memory_pays)
        block = np.ascontiguousarray(Q.rows(all_idx, all_idx))
        if not (callback is not None or verbose):  # one compiled call
            G, converged, violation, n_iter, n_inner, hits, misses = solve_in_memory(
                block, p, y, C, alpha, diag, SolverSettings.of(tol, q, shrinking, max_iter)
            )
            if not converged:
                warn_not_converged(max_iter, n_inner, violation, tol)
            hit_rate = hits / max(hits + misses, 1)
            return _result(alpha, G, p, y, C, n_iter, n_inner, violation, hit_rate, start, converged)
        cache = ColumnCache.in_memory_cache(block)  # the same iterates, with the reports
    else:
        cache = ColumnCache(n, cache_size, 2 * len(need), Q.dtype)  # room for a request beside the working set
    G = _gradient(Q, p, alpha, all_idx) if alpha.any() else p.copy()  # (C-SVC starts from 0)
    report = callback is not None or bool(verbose)
    while True:
        status = _drive(
            G,
            alpha,
            y,
            C,
            p,
            diag,
            active,
            io,
            fo,
            cache.arrays,
            cache.in_memory,
            q,
            tol,
            shrink_every,
            -1 if max_iter is None else max_iter,
            pair_step_cap,
            report,
            not verbose,
            need,
            work,
        )
        if status == _NEED_COLUMNS:
            idx = need[: io[_N_NEED]].copy()
            act = active[: io[_N_ACTIVE]].copy()  # Q.rows may keep it
            cache.insert(idx, Q.rows(idx, act), act, io[_CLOCK])
        elif status == _NEED_GRADIENT:
            # converged on the active set: reconstruct the shrunk gradients (computing the columns not cached) and
            # check everyone
            inactive = np.setdiff1d(all_idx, active[: io[_N_ACTIVE]], assume_unique=True)
            G[inactive] = _gradient(Q, p, alpha, inactive, cache)
            active[:] = all_idx
            io[_N_ACTIVE] = n
            cache.drop_partial()
            Q.reset()
            if verbose:
                print(
                    f"[smo] iteration {io[_N_ITER]}: converged on the active set ({len(inactive)} of {n} "
                    "variables shrunk); reconstructing their gradients"
                )
        elif status == _BUDGET:
            info = {
                "n_iter": int(io[_N_ITER]),
                "kkt_violation": float(fo[0]),
                "n_active": int(io[_N_ACTIVE]),
                "seconds": time.perf_counter() - start,
            }
            if callback is not None:
                callback(info)
            if verbose:
                hits = io[_HITS]
                print(
                    f"[smo] iteration {info['n_iter']}: violation {info['kkt_violation']:.4g}, objective "
                    f"{0.5 * float(alpha @ (G + p)):.8g}, active {info['n_active']}, "
                    f"cache hit rate {hits / max(hits + cache.misses + io[_MISSES], 1):.3f}"
                )
        else:
            break
    converged = status == _CONVERGED
    if not converged and io[_N_ACTIVE] < n:
        inactive = np.setdiff1d(all_idx, active[: io[_N_ACTIVE]], assume_unique=True)
        G[inactive] = _gradient(Q, p, alpha, inactive, cache)
    violation = fo[0]
    if not converged:
        _, m, M = violation_extremes(G, alpha, y, C, all_idx)
        violation = m - M
        warn_not_converged(max_iter, io[_N_INNER], violation, tol)
    hit_rate = io[_HITS] / max(io[_HITS] + cache.misses + io[_MISSES], 1)
    seconds = time.perf_counter() - start
    if verbose:
        objective = 0.5 * float(alpha @ (G + p))
        print(
            f"[smo] done: {io[_N_ITER]} iterations ({io[_N_INNER]} pair steps), violation {violation:.3g}, "
            f"objective {objective:.10g}, cache hit rate {hit_rate:.3f}, {seconds:.2f} s"
        )
    if callback is not None:
        callback({"n_iter": int(io[_N_ITER]), "kkt_violation": float(violation), "n_active": n, "seconds": seconds})
    return _result(alpha, G, p, y, C, io[_N_ITER], io[_N_INNER], violation, hit_rate, start, converged)
