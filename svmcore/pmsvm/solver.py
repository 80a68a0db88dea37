"""PmSVM's training: the rows of X in the solvers' layout and the two compiled solvers, dual coordinate descent with
shrinking (Wu's Algorithm 3, :func:`_dcd`) and Pegasos-style SGD (Algorithm 4, :func:`_sgd`), which prefetch the next
row through an LLVM intrinsic (:func:`_prefetch`).

Both solvers work on w_j = sum_i alpha_i y_i beta(x_ij), the weights of the regression approximation
g_j(q) ~ e(q)^T w_j of :mod:`svmcore.pmsvm.kernel` (Eq. 25-31, 40), and the rows hold e(x_ij) and s_j beta(x_ij)
(or their lookup-table rows, PmSVM-LUT). One coordinate step therefore costs O(nnz(x_i)) for the gradient (3
products per nonzero) and as much for the update of w.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import scipy.sparse as sp
from llvmlite import ir
from numba.core import cgutils
from numba.extending import intrinsic

from .._shrinking import keep_after_check
from .kernel import explanatory_variables, regression_weights


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
