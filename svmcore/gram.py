"""The kernel values of a fit's rows computed once and cut per problem.

One-vs-one fits solve many problems on subsets of the same rows (the pairs of classes and their cross-validation
folds). :class:`Gram` holds the inner products and squared norms of all rows of X, computed once, from which each
problem's kernel block is cut (:func:`cut_block`) where its rows need no centre of their own (:func:`gram_shifts`: the
screen of :func:`svmcore.kernels.sparse_centre`, read off the Gram). :class:`CentredGram` gives the kernel inputs of a
few CSR rows, shifted or not, in compiled code: to the bit the numbers scipy computes on the cut and shifted rows. The
kernel functions themselves are in :mod:`svmcore.kernels`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numba as nb
import numpy as np
import scipy.sparse as sp

from .kernels import _csr_mean_sq_and_spread, kernel_of_products, pairwise_sum, row_norms_sq

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, DTypeLike

    from .kernels import KernelSpec


class Gram:
    """The inner products X X' (n, n) float64 and squared row norms ``sq`` (n,) of all rows of X (n, d), computed
    once for the many problems on subsets of X's rows that one-vs-one fits solve (the pairs of classes and their
    cross-validation folds).

    - X a canonical CSR matrix: sector, 700 rows of 55,197 tf-idf features in 104 classes, solved 5,356 pairs of ~13
      rows, and cutting each pair's rows out of X and multiplying the cuts was most of its time. Each entry is, to
      the bit, what the product of the cut rows gives: scipy's sparse product sums <a, b> over a's entries in their
      stored order, whichever other rows take part; so are the row norms. Only rows that :func:`sparse_centre`
      leaves unshifted can use it (:meth:`shifts`).
    - X a dense float64 array: one BLAS product of the rows, centred on their mean where ``centre`` (for rbf, which
      sees only differences; a pair's own KernelQ centres on the pair's mean, the same kernel values to rounding).
      Letter, 3,000 rows in 26 classes: 325 pairs of ~230 rows, each of which cut, centred and multiplied its rows
      (float32 products) in Python. Rows never shift (:meth:`shifts` is False)."""

    offsets = None  # unshifted rows (see CentredGram)
    column_of = None  # where column j of the products is stored: j, or (dense rows with groups) its place by group

    # sparse_centre leaves rows unshifted where ||mean||^2 <= mean_i ||x_i - mean||^2 = mean_i ||x_i||^2 - ||mean||^2,
    # i.e. 2 sum_ij <x_i, x_j> / n <= sum_i ||x_i||^2, which its screen decides from the rows' entries (20-40 us for a
    # sector pair). For up to SMALL rows the Gram gives both sides in a few us. Their rounding, and the screen's, stays
    # within about (entries + n^2) eps of sum_i ||x_i||^2 (Cauchy-Schwarz bounds every term by it), so MARGIN below
    # the boundary the screen's answer is known; nearer, beyond it, or for more rows, the screen decides.
    MARGIN, SMALL = 0.01, 64

    def __init__(self, X: np.ndarray | sp.spmatrix, centre: bool = False, groups: np.ndarray | None = None) -> None:
        self.X = X
        self.sparse = sp.issparse(X)
        n = X.shape[0]
        if not self.sparse:
            if centre:
                X = X - X.mean(axis=0)
            self.sq = row_norms_sq(X)
            if groups is None:
                self.dot = X @ X.T
            else:
                # columns stored by group (a class's rows side by side), so that a pair of classes' block reads two
                # runs of each row, not entries scattered over it: letter, 3,000 rows, a 72 MB Gram, 4 -> ~1 ns an entry
                self.order = np.argsort(groups, kind="stable")
                self.dot = X @ X[self.order].T
                self.column_of = np.empty(n, dtype=np.int64)
                self.column_of[self.order] = np.arange(n)
            return
        self.sq = row_norms_sq(X)
        self.dot = np.empty((n, n))
        step = max(1, 2**22 // n)  # row blocks: the sparse product's entries (12 bytes each) stay within ~50 MB
        for s in range(0, n, step):
            self.dot[s : s + step] = (X[s : s + step] @ X.T).toarray()
        self._data = X.data.astype(np.float64, copy=False)

    def shifts(self, rows: ArrayLike) -> bool:
        """Whether :func:`sparse_centre` may shift the rows ``rows`` (int array): False for text data and dense rows."""
        return self.sparse and gram_shifts(self.shift_test(), np.asarray(rows, dtype=np.int64))

    def shift_test(self) -> ShiftTest:
        """What :func:`gram_shifts` reads, for compiled callers: the products, the norms and X's CSR parts (empty
        arrays for dense rows)."""
        if not self.sparse:
            empty = np.empty(0, dtype=np.int32)
            return ShiftTest(self.dot, self.sq, empty, empty, np.empty(0), self.X.shape[1], self.MARGIN, self.SMALL)
        X = self.X
        return ShiftTest(self.dot, self.sq, X.indptr, X.indices, self._data, X.shape[1], self.MARGIN, self.SMALL)

    def kernel(self, a: np.ndarray, b: np.ndarray, spec: KernelSpec, out: np.ndarray | None = None) -> np.ndarray:
        """K(X[a], X[b]) (len(a), len(b)) for index arrays a and b, as :func:`kernel_block` of those rows gives it."""
        cols = np.asarray(b, dtype=np.int64) if self.column_of is None else self.column_of[b]
        return kernel_of_products(
            cut_block(self.dot, np.asarray(a, dtype=np.int64), cols), spec, self.sq[a], self.sq[b], out
        )

    def kernel_all(self, spec: KernelSpec, dtype: DTypeLike) -> np.ndarray:
        """K(X, X) (n, n) of ``dtype``, stored as the products are: K(x_i, x_j) at [i, column_of[j]] (j where
        column_of is None). Each entry is the number :meth:`kernel` gives for (i, j), without its cut."""
        sq_b = self.sq if self.column_of is None else self.sq[self.order]
        return kernel_of_products(self.dot, spec, self.sq, sq_b, np.empty(self.dot.shape, dtype=dtype))


@nb.njit(cache=True, nogil=True)
def cut_block(M, a, b):
    """M[a][:, b] (len(a), len(b)) of M's dtype, for int64 index arrays a and b: numpy's M[a[:, None], b] took ~9 ns
    an entry (letter's pairs of 230 rows on a 3,000-row Gram)."""
    out = np.empty((a.shape[0], b.shape[0]), dtype=M.dtype)
    for r in range(a.shape[0]):
        row = M[a[r]]
        for c in range(b.shape[0]):
            out[r, c] = row[b[c]]
    return out


class ShiftTest(NamedTuple):
    """A :class:`Gram`'s arrays that decide whether rows shift (:func:`gram_shifts`): its products ``dot`` (n, n) and
    norms ``sq`` (n,) float64, X's CSR ``indptr``, ``indices``, ``data`` (float64) and ``d`` columns, and the screen's
    ``margin`` and ``small`` (Gram.MARGIN, Gram.SMALL)."""

    dot: np.ndarray
    sq: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    d: int
    margin: float
    small: int


@nb.njit(cache=True, nogil=True)
def gram_shifts(test, rows):
    """:meth:`Gram.shifts` on its :class:`ShiftTest` ``test``, compiled for the callers that cut many problems from one
    Gram. The first screen's sums run in another order than numpy's would: it only decides whether the exact screen
    runs, ``margin`` clear of the boundary, so the answer is the same."""
    dot, sq, indptr, indices, data, d, margin, small = test
    n = rows.shape[0]
    if n == 0:
        return False
    if n <= small:
        products = 0.0
        norms = 0.0
        for a in rows:
            norms += sq[a]
            for b in rows:
                products += dot[a, b]
        if 2.0 * products / n <= (1.0 - margin) * norms:
            return False
    total, spread = _csr_mean_sq_and_spread(indptr, indices, data, rows, d)
    return not (total == 0.0 or total <= spread)


@nb.njit(cache=True, nogil=True)
def _sparse_centre_of_rows(indptr, indices, data, d, rows):
    """:func:`sparse_centre` of the rows ``rows`` of a canonical CSR matrix (indptr, indices, data as float64, d
    columns), compiled for a few rows: (columns, values), the centre's kept columns (sorted) and its values there,
    both empty where it returns (None, None). Its operations in its order, so the same centre to the bit: the
    means by column in the rows' entry order (np.bincount), the spread's two dot products through BLAS (as numpy's
    ``@``), the total as numpy's pairwise sum, a stable argsort and a running sum."""
    n = rows.shape[0]
    none = (np.empty(0, dtype=np.int64), np.empty(0))
    if n == 0:
        return none
    total, spread = _csr_mean_sq_and_spread(indptr, indices, data, rows, d)
    if total == 0.0 or total <= spread:
        return none
    nnz = 0
    for r in rows:
        nnz += indptr[r + 1] - indptr[r]
    entry_col = np.empty(nnz, dtype=np.int64)
    entry_val = np.empty(nnz)
    k = 0
    for r in rows:
        for e in range(indptr[r], indptr[r + 1]):
            entry_col[k] = indices[e]
            entry_val[k] = data[e]
            k += 1
    cols = np.unique(entry_col)
    inv = np.searchsorted(cols, entry_col)
    sums = np.zeros(cols.shape[0])
    counts = np.zeros(cols.shape[0], dtype=np.int64)
    for e in range(nnz):
        sums[inv[e]] += entry_val[e]
        counts[inv[e]] += 1
    m = sums / n
    dev = entry_val - m[inv]
    spread = (np.dot(dev, dev) + np.dot((n - counts).astype(np.float64), m * m)) / n
    c2 = m * m
    total = pairwise_sum(c2)
    if total == 0.0 or total <= spread:
        return none
    order = np.argsort(c2, kind="mergesort")  # stable, as numpy's kind="stable"
    first = np.searchsorted(np.cumsum(c2[order]), spread, side="right")
    kept = np.sort(order[first:])
    return cols[kept], m[kept]


@nb.njit(cache=True, nogil=True)
def _centred_products(indptr, indices, data, d, rows, centre_rows):
    """Inner products, squared norms and offsets of the rows ``rows`` of a canonical CSR matrix (indptr, indices, data
    as float64, d columns), shifted by :func:`sparse_centre` of its rows ``centre_rows`` (empty: no shift) as
    :func:`shift_csr` shifts them: (dot (n, n), sq (n,), offsets (n,) = <shifted row, centre>, shifted). Each number
    as scipy computes it on the shifted CSR rows, to the bit: an entry x_ij - c_j rounded once (zeros dropped),
    <a, b> summed over a's entries in column order from 0 (scipy's sparse product), ||a||^2 as the first square plus
    numpy's pairwise sum of the others (``X.multiply(X).sum(axis=1)``: np.add.reduceat), the offset over a's
    entries in order (scipy's product with a vector). For a few rows: O(n^2) merges of their entries."""
    cols, vals = _sparse_centre_of_rows(indptr, indices, data, d, centre_rows)
    shifted = cols.shape[0] > 0
    n = rows.shape[0]
    length = 0
    for r in rows:
        length += indptr[r + 1] - indptr[r] + cols.shape[0]
    ptr = np.zeros(n + 1, dtype=np.int64)
    col = np.empty(length, dtype=np.int64)
    val = np.empty(length)
    k = 0
    for a in range(n):  # X - C (scipy's canonical binop): both, the row's only, the centre's only; zeros dropped
        r = rows[a]
        e, end, c = indptr[r], indptr[r + 1], 0
        while e < end or c < cols.shape[0]:
            if c == cols.shape[0] or (e < end and indices[e] < cols[c]):
                j, v = indices[e], data[e] - 0.0
                e += 1
            elif e == end or cols[c] < indices[e]:
                j, v = cols[c], 0.0 - vals[c]
                c += 1
            else:
                j, v = indices[e], data[e] - vals[c]
                e += 1
                c += 1
            if v != 0:
                col[k] = j
                val[k] = v
                k += 1
        ptr[a + 1] = k
    sq = np.zeros(n)
    offsets = np.zeros(n)
    squares = np.empty(k)
    for a in range(n):
        m = 0
        for e in range(ptr[a], ptr[a + 1]):
            v = val[e] * val[e]
            if v != 0:  # scipy's elementwise product drops zeros
                squares[m] = v
                m += 1
        if m > 0:
            sq[a] = squares[0] + pairwise_sum(squares[1:m])
        if shifted:
            total, c = 0.0, 0
            for e in range(ptr[a], ptr[a + 1]):  # the centre is 0 off its columns: those terms add 0
                while c < cols.shape[0] and cols[c] < col[e]:
                    c += 1
                if c < cols.shape[0] and cols[c] == col[e]:
                    total += val[e] * vals[c]
            offsets[a] = total
    dot = np.zeros((n, n))
    for a in range(n):
        for b in range(a, n):
            total = 0.0
            e, f = ptr[a], ptr[b]
            while e < ptr[a + 1] and f < ptr[b + 1]:
                if col[e] < col[f]:
                    e += 1
                elif col[f] < col[e]:
                    f += 1
                else:
                    total += val[e] * val[f]
                    e += 1
                    f += 1
            dot[a, b] = total
            dot[b, a] = total
    return dot, sq, offsets, shifted


class CentredGram:
    """The kernel inputs of a few CSR rows as :class:`svmcore.qmatrix.KernelQ` (or :func:`kernel_decision`) computes
    them on the cut rows: shifted by :func:`sparse_centre` of the rows ``centre_rows`` (none: unshifted), their inner
    products ``dot`` (n, n), squared norms ``sq`` (n,) and, where shifted, ``offsets`` (n,) = <shifted row, centre>
    (the linear C-SVC's rho shift and decision offset; None unshifted). The same numbers to the bit as scipy's on the
    cut and shifted rows (:func:`_centred_products`), without scipy's cuts, shifts and products, whose overhead was a
    small problem's time: 0.5-0.8 ms for the 2-3 row folds of a one-vs-one probability fit on sector, in which two
    similar documents' mean outweighs their spread, so that they shift, against ~0.05 ms. The interface of
    :class:`Gram` (``kernel``, ``shifts``) for ``KernelQ(centred, spec, y, rows=...)``. X: canonical CSR (n_X, d);
    rows, centre_rows: int arrays."""

    def __init__(self, X: sp.csr_matrix, rows: ArrayLike, centre_rows: ArrayLike) -> None:
        data = X.data.astype(np.float64, copy=False)
        self.dot, self.sq, offsets, shifted = _centred_products(
            X.indptr,
            X.indices,
            data,
            X.shape[1],
            np.asarray(rows, dtype=np.int64),
            np.asarray(centre_rows, dtype=np.int64),
        )
        self.offsets = offsets if shifted else None

    def shifts(self, rows: ArrayLike) -> bool:
        """False: the rows are centred already."""
        return False

    column_of = None
    kernel = Gram.kernel
