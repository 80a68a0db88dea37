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

Linear k = 1 (:func:`cs_fit`): the same block steps organised as LIBLINEAR's sequential dual method for the
Crammer-Singer SVM (Keerthi et al., KDD 2008), with shrinking of examples and of classes per example, stopped on
the same exact duality gap.
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
            knapsack_into(a[: m - 1], C / k, C, 1.0, x[: m - 1], buf)
        else:
            topk_simplex_into(a[: m - 1], k, C, 1.0, x[: m - 1], buf)
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
def _topk_loss(s, yi, k, beta, top):
    """Top-k hinge loss (alpha, eq. (3), or beta, eq. (5)) of one score vector s (m,); ``top`` is scratch (k,)."""
    sy = s[yi]
    top[:] = -np.inf
    for j in range(s.shape[0]):
        if j != yi:
            v = 1.0 + s[j] - sy
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
    return max(total / k, 0.0)


@nb.njit(cache=True)
def topk_losses(S, y, k, beta):
    """Per-example top-k hinge loss (alpha, eq. (3), or beta, eq. (5)) of scores S (n, m); returns (n,)."""
    n = S.shape[0]
    out = np.empty(n)
    top = np.empty(k)
    for i in range(n):
        out[i] = _topk_loss(S[i], y[i], k, beta, top)
    return out


def objectives(
    S: np.ndarray, A: np.ndarray, y: np.ndarray, k: int, C: float, beta: float, w_sq: float
) -> tuple[float, float, np.ndarray]:
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


@nb.njit(cache=True, error_model="numpy")
def _cs_sub_problem(B, Aii, yp, C, na, D, alpha_new):
    """Crammer-Singer block step on the na active classes of one example (k = 1; Keerthi et al., KDD 2008, Sec. 3).

    min_alpha sum_p Aii/2 alpha_p^2 + B_p alpha_p  s.t.  sum_p alpha_p = 0 (all classes; shrunk ones are fixed at
    their bound), alpha_p <= C if p == yp (the position of y_i, yp >= na if it is shrunk) else <= 0. The solution is
    alpha_p = min(bound_p, (beta - B_p) / Aii) where, with D_p = B_p (+ Aii C for yp), beta solves
    sum_p max(0, D_p - beta) = Aii C: the threshold of the projection onto the simplex (the k = 1 case of
    svmcore.projections). Found sort-free by Michelot's method (J. Optim. Theory Appl. 1986): beta over a set S is
    (sum_S D - Aii C) / |S|; drop the entries <= beta and repeat. beta only grows, so S shrinks to the answer in at
    most na passes, usually 2-4. ``D`` is scratch (m,).
    """
    # Two roundings kept out of beta, whose error becomes alpha's times 1 / Aii:
    # - D and beta are taken relative to top = max_{p != yp} B_p (the solution depends on differences only): on tiny
    #   x_i (Aii ~ 1e-18 against B ~ 1) Aii C is below the rounding of B_p ~ 1, every D_p came out <= beta, the set
    #   emptied and beta = total / 0 made the model NaN.
    # - While y_i is in S (alpha_y < C), the Aii C of D_y and of the sum cancel: they are left out, and D_y = B_y
    #   (y_i joins S iff Aii C > beta - B_y). On large x_i (Aii ~ 3e9, alpha ~ 1e-8 << C) their rounding, ulp(Aii C),
    #   moved every alpha by eps C: rows of A summed to 1e-16, 1e-8 of alpha, margins moved by 1e-16 ||x||^2 and the
    #   relative duality gap stalled near 1 for 1000 epochs (digits x 1e4) where Prox-SDCA converges in 78.
    top = -np.inf
    for p in range(na):
        if p != yp:
            top = max(top, B[p])
    y_in = yp < na
    d_y = B[yp] - top if y_in else 0.0
    n_s = 0
    for p in range(na):
        if p != yp:
            D[n_s] = B[p] - top
            n_s += 1
    while True:
        total = d_y if y_in else -Aii * C
        for q in range(n_s):
            total += D[q]
        beta = total / (n_s + (1 if y_in else 0))
        kept = 0
        for q in range(n_s):
            d = D[q]
            if d > beta:
                D[kept] = d
                kept += 1
        y_kept = y_in and Aii * C > beta - d_y
        if (kept == n_s and y_kept == y_in) or (kept == 0 and not y_kept):
            break  # the second: Aii C underflows against the differences; keep the last beta
        n_s = kept
        y_in = y_kept
    inv = 1.0 / Aii
    for p in range(na):
        alpha_new[p] = min(0.0, (beta - (B[p] - top)) * inv)
    if yp < na:
        alpha_new[yp] = min(C, (beta - d_y) * inv)


SHORT_ROW = 32  # row length (nonzeros) from which the register-blocked loops beat plain ones (letter: 16, USPS: 104)


@nb.njit(cache=True, error_model="numpy")
def _gather_scores(indices, data, lo, hi, W, ai, na, G):
    """G[p] <- 1 + <W[:, ai[p]], x> for p < na, x = (indices, data)[lo:hi]: classes in groups of four register
    accumulators (independent FMA chains instead of a load-store chain through G per feature)."""
    p = 0
    while p + 4 <= na:
        c0, c1, c2, c3 = ai[p], ai[p + 1], ai[p + 2], ai[p + 3]
        g0 = g1 = g2 = g3 = 0.0
        for q in range(lo, hi):
            f = indices[q]
            v = data[q]
            g0 += W[f, c0] * v
            g1 += W[f, c1] * v
            g2 += W[f, c2] * v
            g3 += W[f, c3] * v
        G[p], G[p + 1], G[p + 2], G[p + 3] = g0 + 1.0, g1 + 1.0, g2 + 1.0, g3 + 1.0
        p += 4
    if p + 2 <= na:
        c0, c1 = ai[p], ai[p + 1]
        g0 = g1 = 0.0
        for q in range(lo, hi):
            f = indices[q]
            v = data[q]
            g0 += W[f, c0] * v
            g1 += W[f, c1] * v
        G[p], G[p + 1] = g0 + 1.0, g1 + 1.0
        p += 2
    if p < na:
        c0 = ai[p]
        g0 = g1 = 0.0  # two chains over alternate features
        q = lo
        while q + 1 < hi:
            g0 += W[indices[q], c0] * data[q]
            g1 += W[indices[q + 1], c0] * data[q + 1]
            q += 2
        if q < hi:
            g0 += W[indices[q], c0] * data[q]
        G[p] = g0 + g1 + 1.0


@nb.njit(cache=True, error_model="numpy")
def _scatter_update(indices, data, lo, hi, W, d_ind, d_val, nz):
    """W[:, d_ind[p]] += d_val[p] x for p < nz, x = (indices, data)[lo:hi]; classes in pairs held in registers."""
    p = 0
    while p + 2 <= nz:
        c0, c1 = d_ind[p], d_ind[p + 1]
        d0, d1 = d_val[p], d_val[p + 1]
        for q in range(lo, hi):
            f = indices[q]
            v = data[q]
            W[f, c0] += d0 * v
            W[f, c1] += d1 * v
        p += 2
    if p < nz:
        c0 = d_ind[p]
        d0 = d_val[p]
        for q in range(lo, hi):
            W[indices[q], c0] += d0 * data[q]


@nb.njit(cache=True, error_model="numpy")
def _cs_check(indptr, indices, data, sq_norms, y, A, W, C, alpha_index, active_size_i, y_pos, index, s_row, w_zero):
    """One exact pass over all examples: returns (P, D, number of active examples) and resets the shrinking state.
    ``w_zero``: W = 0, the scores are 0 and not computed.

    The scores W' x_i give the primal loss and, through G_p = <w_p, x_i> + [p != y_i], each example's active
    classes: all classes except those at their bound (0, or C for y_i) whose gradient is below min G over the classes
    free to decrease (LIBLINEAR's shrinking rule); examples with more than one active class are listed in ``index``.
    """
    n, m = A.shape
    loss = 0.0
    dual = 0.0
    n_active = 0
    top = np.empty(1)
    for i in range(n):
        yi = y[i]
        dual += A[i, yi]
        s_row[:] = 0.0
        if not w_zero:
            for q in range(indptr[i], indptr[i + 1]):
                f = indices[q]
                v = data[q]
                for j in range(m):
                    s_row[j] += W[f, j] * v
        sy = s_row[yi]
        loss += _topk_loss(s_row, yi, 1, False, top)
        if sq_norms[i] <= 0.0:
            continue
        Ai = A[i]
        minG = sy if Ai[yi] < C else np.inf
        for j in range(m):
            if j != yi and Ai[j] < 0.0 and s_row[j] + 1.0 < minG:
                minG = s_row[j] + 1.0
        ai = alpha_index[i]
        front = 0
        back = m
        for j in range(m):
            g = s_row[j] + (0.0 if j == yi else 1.0)
            if Ai[j] == (C if j == yi else 0.0) and g < minG:
                back -= 1
                ai[back] = j
                if j == yi:
                    y_pos[i] = back
            else:
                ai[front] = j
                if j == yi:
                    y_pos[i] = front
                front += 1
        active_size_i[i] = front
        if front > 1:
            index[n_active] = i
            n_active += 1
    w_sq = 0.0
    for f in range(W.shape[0]):
        for j in range(m):
            w_sq += W[f, j] * W[f, j]
    return 0.5 * w_sq + C * loss, dual - 0.5 * w_sq, n_active


@nb.njit(cache=True, error_model="numpy")
def cs_fit(indptr, indices, data, sq_norms, y, A, W, C, tol, max_epochs, max_sweeps, seed):
    """Crammer-Singer SVM (k = 1) by the sequential dual method with shrinking of LIBLINEAR's Solver_MCSVM_CS
    (Keerthi, Sundararajan, Chang, Hsieh, Lin, KDD 2008, Algorithm 3 and Sec. 4), stopped on the exact duality gap.

    Epoch: an exact pass (:func:`_cs_check`) computes P, D and every example's active classes; stop if
    P - D <= tol P. Otherwise random-order sweeps over the active examples, scoring and moving only their active
    classes and shrinking further (LIBLINEAR's rule), until a sweep's largest violation max G - min G is below
    eps_shrink (or after ``max_sweeps`` sweeps); eps_shrink starts at 1 and halves each epoch as in LIBLINEAR.
    LIBLINEAR confirms convergence by a full sweep of block steps; the exact pass replaces it, costs O(nnz m)
    without any block step, and certifies the gap. X is given as CSR arrays; A (n, m) (A[i, y_i] = alpha_i^{y_i},
    rows with x_i = 0 preset by the caller) and W (d, m) are updated in place.
    Returns (P, D, epochs with sweeps, converged).
    """
    n, m = A.shape
    state = np.uint64(seed)
    alpha_index = np.empty((n, m), np.int32)
    active_size_i = np.empty(n, np.int64)
    y_pos = np.empty(n, np.int64)
    index = np.empty(n, np.int32)
    G = np.empty(m)
    cls = np.empty(m, np.int64)
    al = np.empty(m)
    s_row = np.empty(m)
    B = np.empty(m)
    D = np.empty(m)
    alpha_new = np.empty(m)
    d_ind = np.empty(m, np.int64)
    d_val = np.empty(m)
    eps_shrink = 1.0
    epoch = 0
    while True:
        primal, dual, active_size = _cs_check(
            indptr,
            indices,
            data,
            sq_norms,
            y,
            A,
            W,
            C,
            alpha_index,
            active_size_i,
            y_pos,
            index,
            s_row,
            epoch == 0 and not np.any(W),
        )
        if primal - dual <= tol * abs(primal):
            return primal, dual, epoch, True
        if epoch >= max_epochs:
            return primal, dual, epoch, False
        epoch += 1
        for _sweep in range(max_sweeps):
            stopping = 0.0
            for s in range(active_size):
                # Fisher-Yates; 64-bit LCG (Knuth's MMIX constants), top 32 bits scaled to [0, n) by multiply-shift
                state = state * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
                j = s + np.int64(((state >> np.uint64(32)) * np.uint64(active_size - s)) >> np.uint64(32))
                index[s], index[j] = index[j], index[s]
            s = 0
            while s < active_size:
                i = index[s]
                Aii = sq_norms[i]
                na = active_size_i[i]
                na0 = na
                yp = y_pos[i]
                for p in range(na):  # local copies: no array views (reference counting) per example
                    c = alpha_index[i, p]
                    cls[p] = c
                    al[p] = A[i, c]
                lo, hi = indptr[i], indptr[i + 1]
                if 2 * na >= m:
                    # most classes active: whole rows of W are contiguous (SIMD), gather afterwards
                    s_row[:] = 0.0
                    for q in range(lo, hi):
                        f = indices[q]
                        v = data[q]
                        for j in range(m):
                            s_row[j] += W[f, j] * v
                    for p in range(na):
                        G[p] = s_row[cls[p]] + 1.0
                elif hi - lo >= SHORT_ROW:
                    _gather_scores(indices, data, lo, hi, W, cls, na, G)
                else:
                    for p in range(na):
                        G[p] = 1.0
                    for q in range(lo, hi):
                        f = indices[q]
                        v = data[q]
                        for p in range(na):
                            G[p] += W[f, cls[p]] * v
                if yp < na:
                    G[yp] -= 1.0
                minG = np.inf
                maxG = -np.inf
                for p in range(na):
                    if al[p] < 0.0 and G[p] < minG:
                        minG = G[p]
                    maxG = max(maxG, G[p])
                if yp < na and al[yp] < C and G[yp] < minG:
                    minG = G[yp]
                # shrink the classes at their bound whose gradient says they stay there
                p = 0
                while p < na:
                    if al[p] == (C if p == yp else 0.0) and G[p] < minG:
                        na -= 1
                        cls[p], cls[na] = cls[na], cls[p]
                        al[p], al[na] = al[na], al[p]
                        G[p], G[na] = G[na], G[p]
                        if yp == na:
                            yp = p
                        elif yp == p:
                            yp = na
                    else:
                        p += 1
                if na < na0:
                    for p in range(na0):
                        alpha_index[i, p] = cls[p]
                active_size_i[i] = na
                y_pos[i] = yp
                if na <= 1:
                    active_size -= 1
                    index[s], index[active_size] = index[active_size], index[s]
                    continue
                s += 1
                if maxG - minG <= 1e-12:
                    continue
                stopping = max(stopping, maxG - minG)
                for p in range(na):
                    B[p] = G[p] - Aii * al[p]
                _cs_sub_problem(B, Aii, yp, C, na, D, alpha_new)
                nz = np.int64(0)  # not 0: a counter that starts as a constant compiles a literal _scatter_update too
                for p in range(na):
                    d = alpha_new[p] - al[p]
                    A[i, cls[p]] = alpha_new[p]
                    # every change reaches W: LIBLINEAR drops |d| < 1e-12, which for rows of norm > 1e6 (each
                    # step ~ 1/||x||^2) left W at zero while A moved
                    if d != 0.0:
                        d_ind[nz] = cls[p]
                        d_val[nz] = d
                        nz += 1
                if hi - lo >= SHORT_ROW:
                    _scatter_update(indices, data, lo, hi, W, d_ind, d_val, nz)
                else:
                    for q in range(lo, hi):
                        f = indices[q]
                        v = data[q]
                        for p in range(nz):
                            W[f, d_ind[p]] += d_val[p] * v
            if stopping < eps_shrink:
                break
        eps_shrink *= 0.5  # as LIBLINEAR at each reactivation (gentler or steeper schedules were not faster)
