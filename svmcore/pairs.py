"""One-vs-one pairs of classes cut from the Gram and solved in compiled code: the pair block, its folds for Platt's
sigmoid, the batch of tiny pairs.

A one-vs-one :class:`svmcore.svc.SVC` fit computes the :class:`svmcore.gram.Gram` of its rows where that pays
(:func:`gram_pays`). Each pair of classes whose rows need no centre of their own (:func:`uses_gram`) then takes its Q
from one cut of it, :class:`PairBlock`, on which every problem of the pair is a further cut: its fit and, with
probability=True, the cross-validation folds whose decision values Platt's sigmoid is fitted to
(:func:`fold_decisions`). The pairs such a block would serve are solved together in one compiled call
(:func:`solve_pairs`): Python's work around each pair was most of a small pair's time. The numbers are those of the
pair-by-pair path (``KernelQ`` and :func:`svmcore.smo.solve`), to the bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba as nb
import numpy as np
import scipy.sparse as sp

from .gram import cut_block, gram_shifts
from .kernels import centres
from .probability import _fit_sigmoid
from .qmatrix import EPS32, IN_MEMORY_ROWS, DenseQ, KernelQ, cache_holds, float32_columns_suffice
from .smo import compute_rho, solve_in_memory

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, DTypeLike

    from .gram import Gram
    from .kernels import KernelSpec

# pairs of classes of up to this many rows, on a Gram, are solved from their kernel block, cut once (PairBlock)
BLOCK_PAIR_ROWS = 1024
# what fold_decisions leaves to Python: the fold's fit (its training rows shift: KernelQ centres them), its decision
# (its support vectors shift: kernel_decision centres them)
FOLD_DONE, FOLD_FIT, FOLD_DECIDE = 0, 1, 2


class PairBlock:
    """One pair of classes' Q, cut from the fit's :class:`Gram` once (``KernelQ`` on its rows, unshifted: checked by
    the caller): ``Q`` the Q-matrix, ``Q32`` its (n, n) float32 block, ``Q64`` the float64 block where float32
    columns cannot reach ``tol`` (:func:`svmcore.qmatrix.float32_columns_suffice`), else (0, 0), ``K`` the (n, n)
    float64 kernel values (the fold decisions'; None without probability). Every problem on a subset of the rows
    (the full fit, the cross-validation folds) is a cut of it: the same numbers as a ``KernelQ`` on those rows."""

    def __init__(
        self,
        gram: Gram,
        spec: KernelSpec,
        rows: np.ndarray,
        ys: np.ndarray,
        C: np.ndarray,
        tol: float,
        probability: bool,
    ) -> None:
        self.Q = KernelQ(gram, spec, ys, rows=rows)
        every = np.arange(len(rows))
        self.wide = not float32_columns_suffice(C.max(), np.abs(self.Q.diagonal).max(), tol, self.Q.column_rel_error)
        self.Q32 = self.Q.rows(every, every)
        self.Q64 = self.Q.float64().rows(every, every) if self.wide else np.empty((0, 0))
        self.K = gram.kernel(rows, rows, spec) if probability else None

    def dense_q(self) -> DenseQ:
        """The pair's Q held whole (:class:`svmcore.qmatrix.DenseQ`), with the float64 twin where it is needed."""
        return DenseQ(
            self.Q32,
            self.Q.diagonal,
            wide=self.Q64 if self.wide else None,
            rho_shift=self.Q.rho_shift,
            column_rel_error=self.Q.column_rel_error,
        )


@nb.njit(cache=True, nogil=True)
def _solve_cut(Q, train, y, C, diag, settings):
    """Solve the C-SVC dual on the rows ``train`` of the pair's whole Q (float32 or float64 (n, n)): alpha, G,
    converged, KKT violation, pair steps (:func:`svmcore.smo.solve_in_memory`; y, C, diag are the cut's)."""
    m = train.shape[0]
    alpha = np.zeros(m)
    G, converged, violation, _, n_inner, _, _ = solve_in_memory(
        cut_block(Q, train, train), np.full(m, -1.0), y, C, alpha, diag, settings
    )
    return alpha, G, converged, violation, n_inner


@nb.njit(cache=True, nogil=True)
def _signed_cut(K, r, cols, y):
    """Q = y_a y_b K[r_a, cols_b] (n, n) of K's dtype, for the rows r of a kernel matrix K stored as
    ``Gram.kernel_all`` gives it (row r[b]'s column at cols[b]), signed as ``KernelQ.rows`` signs it (exactly: y is
    +-1)."""
    out = cut_block(K, r, cols)
    for a in range(r.shape[0]):
        for b in range(r.shape[0]):
            out[a, b] *= y[a] * y[b]
    return out


@nb.njit(cache=True, nogil=True)
def solve_pairs(
    K32,
    K64,
    column_of,
    diag,
    starts,
    rows,
    ys,
    C,
    wide,
    perm_starts,
    perms,
    n_folds,
    held32,
    held64,
    settings,
    centred,
    shift,
    alpha,
    G,
    counts,
    values,
):
    """The pairs of classes of a fit in one compiled call, each as :meth:`SVC._fit_binary` solves it from its
    :class:`PairBlock` (the same Q, solver and settings) and, with ``n_folds`` > 0, as
    :meth:`SVC._cross_val_decision` and :func:`svmcore.probability.fit_sigmoid` give its sigmoid: pair m on
    rows[starts[m]:starts[m + 1]] of the Gram's kernel matrices K32 (float32) and K64 (float64; used where
    ``wide[m]``, float32 columns cannot reach tol, and for the folds' decision values; (0, 0) where neither needs
    it), column j stored at column_of[j] (``Gram.kernel_all``), with labels ys and bounds C over the same positions,
    the folds' permutation perms[perm_starts[m]:perm_starts[m + 1]], diag the kernel's diagonal over all rows.

    A pair is left to the caller (counts[m, 0] = 0) where :meth:`SVC._pair_block` gives no block (more rows than the
    cache holds, held32 / held64 the most it holds, or rows that shift: ``centred``,
    :func:`svmcore.gram.gram_shifts` on the Gram's :class:`svmcore.gram.ShiftTest` ``shift``), and
    where its folds need the caller: a fold that shifts, one that stops unconverged (its warning), decision values
    that are not finite (fit_sigmoid's error). Writes alpha and G (per position), counts[m] = (solved, converged,
    iterations, pair steps, cache hits, misses) and values[m] = (KKT violation, rho, A, B)."""
    for m in range(starts.shape[0] - 1):
        s, e = starts[m], starts[m + 1]
        r, y, c = rows[s:e], ys[s:e], C[s:e]
        dg = diag[r]
        if e - s > (held64 if wide[m] else held32) or (centred and gram_shifts(shift, r)):
            continue
        cols = column_of[r]
        Q32 = _signed_cut(K32, r, cols, y)
        Q64 = _signed_cut(K64, r, cols, y) if wide[m] else np.empty((0, 0))
        if n_folds > 0:
            kept = np.flatnonzero(c > 0)
            f = np.zeros(kept.shape[0])
            folds = np.zeros((4, n_folds), dtype=np.int64)
            left, unconverged = fold_decisions(
                Q32,
                Q64,
                cut_block(K64, r, cols),
                dg,
                y,
                c,
                kept,
                perms[perm_starts[m] : perm_starts[m + 1]],
                n_folds,
                EPS32,
                settings,
                centred,
                shift,
                r,
                f,
                folds,
                np.zeros((2, n_folds)),
                np.zeros((n_folds, kept.shape[0])),
            )
            if left > 0 or unconverged > 0 or not np.all(np.isfinite(f)):
                continue
            values[m, 2], values[m, 3] = _fit_sigmoid(f, y[kept] > 0, 100, 1e-10, 1e-12, 1e-5)  # fit_sigmoid's
        a = np.zeros(e - s)
        if wide[m]:
            g, conv, viol, n_iter, n_inner, hits, misses = solve_in_memory(
                Q64, np.full(e - s, -1.0), y, c, a, dg, settings
            )
        else:
            g, conv, viol, n_iter, n_inner, hits, misses = solve_in_memory(
                Q32, np.full(e - s, -1.0), y, c, a, dg, settings
            )
        alpha[s:e] = a
        G[s:e] = g
        counts[m, 0], counts[m, 1], counts[m, 2], counts[m, 3], counts[m, 4], counts[m, 5] = (
            1,
            conv,
            n_iter,
            n_inner,
            hits,
            misses,
        )
        values[m, 0], values[m, 1] = viol, compute_rho(g, a, y, c) + 0.0  # + KernelQ.rho_shift: 0 on a Gram


@nb.njit(cache=True, nogil=True)
def fold_decisions(
    Q32,
    Q64,
    K,
    diag,
    ys,
    C,
    kept,
    perm,
    n_folds,
    eps,
    settings,
    centred,
    shift,
    rows,
    f,
    folds,
    fold_values,
    fold_alpha,
):
    """:meth:`SVC._cross_val_decision` on a pair's block (:class:`PairBlock`: Q32, Q64, K, diag; ys, C over the
    pair's rows; ``kept`` the positions of positive weight, ``perm`` a permutation of range(len(kept))), in one
    compiled call: each fold's problem is the cut of the block on its training rows, solved in memory, and its
    decision values the kernel values' product with the fold's coefficients, the operations of the per-fold code in
    the same order (BLAS's product as numpy calls it), so the same numbers. Writes f (len(kept),) and, per fold i,
    folds[:, i] = (state, solved, converged, pair steps) (int64 (4, n_folds)), fold_values[:, i] = (KKT violation,
    rho) (float64 (2, n_folds)); state FOLD_DONE, or FOLD_FIT / FOLD_DECIDE where the fold's training rows /
    support vectors shift (:func:`svmcore.gram.gram_shifts` on the Gram's :class:`svmcore.gram.ShiftTest` ``shift``
    and the pair's global ``rows``, where ``centred``), left to the caller, with fold_alpha[i] (float64
    (n_folds, len(kept))) on the kept positions and the rho for FOLD_DECIDE. Returns (folds left to the caller,
    folds solved without converging)."""
    n = kept.shape[0]
    left = unconverged = 0
    for i in range(n_folds):
        begin = i * n // n_folds
        end = (i + 1) * n // n_folds
        if begin == end:
            continue
        test = perm[begin:end]
        train = np.sort(np.concatenate((perm[:begin], perm[end:])))
        n_pos = 0
        for t in train:
            n_pos += ys[kept[t]] > 0
        if n_pos == 0 or n_pos == train.shape[0]:
            for t in test:
                f[t] = 1.0 if n_pos else (-1.0 if train.shape[0] else 0.0)
            continue
        tr = kept[train]
        if centred and gram_shifts(shift, rows[tr]):
            folds[0, i] = FOLD_FIT
            left += 1
            continue
        y, c, dg = ys[tr], C[tr], diag[tr]
        if c.max() * np.abs(dg).max() * eps < settings.tol:  # float32_columns_suffice
            alpha, G, converged, violation, n_inner = _solve_cut(Q32, tr, y, c, dg, settings)
        else:
            alpha, G, converged, violation, n_inner = _solve_cut(Q64, tr, y, c, dg, settings)
        folds[1, i], folds[2, i], folds[3, i], fold_values[0, i] = 1, converged, n_inner, violation
        unconverged += not converged
        rho = compute_rho(G, alpha, y, c) + 0.0  # + KernelQ.rho_shift: 0 for rows cut from a Gram
        coef = alpha * y
        sv = np.flatnonzero(coef != 0)
        if centred and gram_shifts(shift, rows[tr[sv]]):
            folds[0, i] = FOLD_DECIDE
            left += 1
            fold_alpha[i, train] = alpha
            fold_values[1, i] = rho
            continue
        block = np.empty((test.shape[0], sv.shape[0]))
        for a in range(test.shape[0]):
            for b in range(sv.shape[0]):
                block[a, b] = K[kept[test[a]], tr[sv[b]]]
        weights = coef[sv]
        if sv.shape[0] == 0:
            for t in test:
                f[t] = 0.0 + -rho
        elif test.shape[0] == 1:  # numpy's (1, k) @ (k, 1) is BLAS's dot, not its gemv
            f[test[0]] = np.dot(block[0], weights) + -rho
        else:
            values = np.dot(block, weights)
            for a in range(test.shape[0]):
                f[test[a]] = values[a] + -rho
    return left, unconverged


def gram_pays(
    X: np.ndarray | sp.spmatrix, spec: KernelSpec, n_classes: int, cache_mb: float, probability: bool
) -> bool:
    """Whether a one-vs-one fit on X computes its :class:`Gram` first: more than two classes, whose n^2 float64
    products fit in the kernel cache's budget. CSR rows: always (the pairs' blocks cover the Gram, most entries more
    than once, and small pairs compute all their columns anyway). Dense rows, rbf or poly (whose pairs need no
    centre of their own, as linear's rho does): where the pairs are computed whole, at most IN_MEMORY_ROWS rows on
    average (2n / k), or with probability, at most BLOCK_PAIR_ROWS (each pair then solves six problems on its rows
    and decides its folds, all cut from its block, compiled). Measured (docs/svc.md,
    "Small dense problems"): letter 1,000 rows 0.069 -> 0.058 s, with probability 0.44 -> 0.24 s; usps 3,000 rows with
    probability 0.63 -> 0.35 s; but without probability pendigits 3,000 rows (pairs of ~600) 0.053 -> 0.079 s, where
    shrinking spares most columns."""
    if n_classes <= 2 or 8.0 * X.shape[0] ** 2 > cache_mb * 2**20:
        return False
    if sp.issparse(X):
        return True
    pair_rows = 2 * X.shape[0] / n_classes
    return spec.kind in ("rbf", "poly") and pair_rows <= (BLOCK_PAIR_ROWS if probability else IN_MEMORY_ROWS)


def most_held(cache_mb: float, dtype: DTypeLike) -> int:
    """The most variables n <= BLOCK_PAIR_ROWS whose n columns a cache of cache_mb holds (:func:`cache_holds`)."""
    n = BLOCK_PAIR_ROWS
    while n > 0 and not cache_holds(n, cache_mb, dtype):
        n -= 1
    return n


def uses_gram(gram: Gram | None, spec: KernelSpec, rows: ArrayLike) -> bool:
    """Whether a problem (or a model's support vectors) on X's rows ``rows`` takes its kernel values from X's
    :class:`Gram`: there is one, and its centring (:func:`svmcore.kernels.centres`) leaves the rows unshifted."""
    return gram is not None and not (centres(spec, True) and gram.shifts(rows))
