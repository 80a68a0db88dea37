"""Kernel functions, evaluated block-wise through BLAS.

``kernel_block(A, B, spec)`` returns K(A, B) for row blocks A (m, d) and B (k, d): one matrix product
(BLAS) for the inner products, then an elementwise transform fused in numba. This is how a working set's
kernel columns are computed together (the decomposition solver asks for q columns at once).

Beside it: the kernel's hyperparameters (:class:`KernelSpec`, :func:`resolve_kernel`), whether sparse rows are
cheaper dense (:func:`densify_if_cheaper`), the centres that keep kernel values on far-off rows from cancelling
(:func:`centres`, :func:`sparse_centre`), decision values block by block (:func:`kernel_decision`), and numpy's
pairwise sum for compiled code (:func:`pairwise_sum`). The kernel values of a fit's rows computed once and cut per
problem (the Gram of a one-vs-one fit) are :mod:`svmcore.gram`'s.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numba as nb
import numpy as np
import scipy.sparse as sp

from .validation import check_choice, check_scalar

if TYPE_CHECKING:
    from typing import Literal, Protocol

    class _ShapeAndVariance(Protocol):
        """What :func:`resolve_kernel` reads of X besides arrays: its shape and the variance of its entries (a
        dask array's, from :class:`svmcore.cascade.CascadeSVC`)."""

        shape: tuple[int, ...]

        def var(self) -> float: ...


KERNELS = ("linear", "poly", "rbf", "precomputed")


@dataclass(frozen=True)
class KernelSpec:
    """A resolved kernel: ``kind`` in KERNELS, and numeric ``gamma``, ``degree``, ``coef0``.

    linear: <a, b>;  poly: (gamma <a, b> + coef0)^degree;  rbf: exp(-gamma ||a - b||^2).
    """

    kind: str
    gamma: float = 1.0
    degree: int = 3
    coef0: float = 0.0


def check_gamma(gamma: object, name: str = "gamma") -> float | Literal["scale", "auto"]:
    """Return a kernel width: "scale", "auto" or a real number > 0 (as a float). ValueError for another string
    or a number <= 0, TypeError for another kind of object; both name the allowed values."""
    if isinstance(gamma, str) and gamma in ("scale", "auto"):
        return gamma
    if isinstance(gamma, (str, bool)) or not isinstance(gamma, numbers.Real):
        raise (ValueError if isinstance(gamma, str) else TypeError)(
            f"{name}: expected 'scale', 'auto' or a number > 0, got {gamma!r}"
        )
    return check_scalar(gamma, name, lo=0, lo_open=True)


def check_fitted_gamma(
    kernel: str,
    gamma: float | str | None,
    gamma_: float,
    n_features: int | None,
    names: tuple[str, str] = ("gamma", "gamma_"),
    unused: float = 1.0,
) -> None:
    """Check a loaded model's learned kernel width ``gamma_`` against its hyperparameters ``kernel`` and ``gamma``,
    as fit resolves them (:func:`resolve_kernel`): a number gamma is gamma_ itself (to 1e-12, relative), "auto"
    is 1 / ``n_features`` (None: not known, unchecked), and a kernel without a width (linear, precomputed) has the
    value fit records for it, ``unused`` (KernelSpec's 1.0; SVM+ records 0.0). "scale" (and SVM+'s None)
    depend on the training rows: unchecked here (the caller checks gamma_ > 0).

    Scoring uses gamma_, so a header whose kernel or gamma was edited after fit would load as a model other
    than the one it states (poly -> linear scored the shipped detector's windows at ~390 for ~4), or state a gamma
    it does not use. Raises ValueError naming both values (``names``: the hyperparameter's and the learned
    attribute's)."""
    param, learned = names
    if kernel not in ("poly", "rbf"):
        if gamma_ != unused:
            raise ValueError(
                f"{learned} is {gamma_!r}, but the {kernel} kernel has no width (its fit records "
                f"{unused!r}): the arrays are of another kernel's model"
            )
        return
    if isinstance(gamma, str) or gamma is None:
        expected = 1.0 / n_features if gamma == "auto" and n_features else None
    else:
        expected = float(gamma)
    if expected is not None and not np.isclose(gamma_, expected, rtol=1e-12, atol=0.0):
        given = f"{param}={gamma!r}" + (f" (1/{n_features} = {expected!r})" if gamma == "auto" else "")
        raise ValueError(
            f"{learned} is {gamma_!r}, but {given}: the model does not have the kernel width its parameters state"
        )


def _sparse_variance(X):
    """The variance of all n d entries of a sparse X, zeros included, as numpy's X.var() of the dense copy: two
    passes, sum (x - mu)^2 over the stored entries plus mu^2 for each entry not stored. E[x^2] - E[x]^2 (scikit-learn's
    form) cancels: on pendigits + 1e8 as CSR it gave a variance <= 0, so gamma='scale' fell back to 1.0 (dense:
    0.52), and on + 1e7 gamma 0.5 for 0.52."""
    X = sp.csr_matrix(X)
    if not X.has_canonical_format:  # duplicate entries add up to one value
        X = X.copy()
        X.sum_duplicates()
    size = X.shape[0] * X.shape[1]
    data = X.data.astype(np.float64)
    mu = data.sum() / size
    dev = data - mu
    return float((dev @ dev + (size - data.size) * mu * mu) / size)


def resolve_kernel(
    kernel: str, X: np.ndarray | sp.spmatrix | _ShapeAndVariance, gamma: float | str, degree: int, coef0: float
) -> KernelSpec:
    """Check kernel hyperparameters and resolve ``gamma`` ("scale": 1/(d Var X), "auto": 1/d, or > 0).

    Raises ValueError for an unknown kernel, gamma <= 0 or another string, or degree < 1; TypeError for a
    non-number.
    """
    check_choice(kernel, "kernel", KERNELS)
    if kernel in ("linear", "precomputed"):
        return KernelSpec(kernel)
    d = X.shape[1]
    gamma = check_gamma(gamma)
    if gamma == "scale":
        if sp.issparse(X):
            var = _sparse_variance(X)
        else:
            var = X.var()
        g = 1.0 / (d * var) if var > 0 else 1.0
        if not (np.isfinite(g) and g > 0):  # features so large their variance overflows
            raise ValueError(
                f"gamma='scale': the features' variance ({var:g}) gives no kernel width; rescale "
                "the features or give gamma"
            )
    elif gamma == "auto":
        g = 1.0 / d
    else:
        g = gamma
    if kernel == "poly":
        check_scalar(degree, "degree", lo=1, integer=True)
        check_scalar(coef0, "coef0")
        return KernelSpec("poly", g, int(degree), float(coef0))
    return KernelSpec("rbf", g)


# Sparse rows stay sparse only where scipy's sparse product is cheaper than BLAS's dense one (float32, n d
# multiply-adds per kernel row). With p_j the share of rows where feature j is nonzero, a sparse kernel row
# costs n sum_j p_j^2 multiply-adds, which cost more where the columns are short (scattered updates): 29
# units each, plus 205 more times (1 - p_j), plus 260 per nonzero of the product row, whose expected count is
# n (1 - exp(-sum_j p_j^2)); one unit is one of BLAS's multiply-adds. Fitted on 25 kernel blocks (one
# thread; uniform random CSR at d = 123-8,315 and 0.5-10% nonzero, the same with 5-60 dense columns, a9a,
# w8a, reuters): it picks the faster path in all but a tie. Full fits: a9a 4.2x faster dense, reuters 11x
# faster sparse (docs/svc.md).
SPARSE_COST = (29.0, 205.0, 260.0)
DENSE_MAX_BYTES = 2**28  # the float64 copy's size beyond which sparse rows stay sparse (rbf fits hold ~2.5x that)


def surely_sparse(n: int, d: int, nnz: int) -> bool:
    """Whether :func:`densify_if_cheaper` keeps n CSR rows of d columns and nnz entries sparse, from a bound that
    needs no pass over the entries (its column counts are O(d): 0.1 ms for sector's 55,197 columns, on each of a
    one-vs-one fit's thousands of fold decisions): with sum_j p_j = nnz / n, p_j^2 <= p_j and p_j^2 (1 - p_j) <=
    p_j / 4, the sparse cost is at most (a + b / 4) nnz + c n. False means "maybe not": ask densify_if_cheaper."""
    a, b, c = SPARSE_COST
    return 8 * n * d > DENSE_MAX_BYTES or (a + b / 4) * nnz + c * n <= 0.99 * n * d  # 1% clear of its rounding


def densify_if_cheaper(X: np.ndarray | sp.spmatrix) -> np.ndarray | sp.spmatrix:
    """X.toarray() if X is a sparse matrix whose kernel products are cheaper dense (``SPARSE_COST``) and whose
    dense copy takes at most ``DENSE_MAX_BYTES``; else X itself. The kernel values are the same either way, up
    to the rounding of the products."""
    if not sp.issparse(X):
        return X
    X = X.tocsr()
    n, d = X.shape
    if surely_sparse(n, d, X.nnz):
        return X
    p = np.bincount(X.indices, minlength=d) / n
    p2 = p * p
    flops, scattered = p2.sum(), p2 @ (1.0 - p)
    a, b, c = SPARSE_COST
    sparse = n * (a * flops + b * scattered + c * (1.0 - np.exp(-flops)))
    return X.toarray() if sparse > n * d else X


@nb.njit(cache=True, nogil=True)
def _rbf_exponent(dot, sq_a, sq_b, gamma, out):
    m, k = dot.shape
    for i in range(m):
        for j in range(k):
            out[i, j] = -gamma * max(sq_a[i] + sq_b[j] - 2.0 * dot[i, j], 0.0)


@nb.njit(cache=True, nogil=True)
def _finish_poly(dot, gamma, coef0, degree, out):
    m, k = dot.shape
    for i in range(m):
        for j in range(k):
            b = gamma * dot[i, j] + coef0
            r = 1.0
            e = degree
            while e > 0:  # by squaring: log2(degree) products (the same ones as a loop for degree <= 3)
                if e & 1:
                    r *= b
                b *= b
                e >>= 1
            out[i, j] = r


@nb.njit(cache=True, nogil=True)
def _pairwise_leaf(a):
    """numpy's pairwise sum of a (n,) for n <= 128 (no split)."""
    n = a.shape[0]
    if n < 8:
        res = -0.0
        for i in range(n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[0], a[1], a[2], a[3]
    r4, r5, r6, r7 = a[4], a[5], a[6], a[7]
    i = 8
    while i < n - n % 8:
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[i]
        i += 1
    return res


@nb.njit(cache=True, nogil=True)
def pairwise_sum(a):
    """a[0] + ... + a[n - 1] of a contiguous float64 array a (n,) (pass a slice for part of one) summed as numpy
    sums it (``np.sum``, ``np.add.reduce``): numpy's pairwise summation (numpy/_core/src/umath/loops_utils.h.src),
    so that compiled code gets numpy's result to the bit: fewer than 8 terms in order from -0.0, up to 128 in 8
    interleaved partial sums combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)) plus the rest in order,
    more split in two halves (the first a multiple of 8) and the halves' sums added. ``np.add.reduceat`` gives
    a[lo] + pairwise_sum(a[lo + 1 : hi]) per segment. The halving runs on an explicit stack: numba's cache cannot
    reload a recursive function that other cached functions call (the process crashed). One argument, an array:
    integer constants in the call would compile a copy per constant (numba types them as literals)."""
    n = a.shape[0]
    if n <= 128:
        return _pairwise_leaf(a)
    seg_lo = np.empty(64, dtype=np.int64)
    seg_n = np.empty(64, dtype=np.int64)
    state = np.empty(64, dtype=np.int64)  # 1: its first half is being summed, 2: its second half
    first = np.empty(64)  # the first half's sum, while the second half is summed
    top = 0
    seg_lo[0] = 0
    seg_n[0] = n
    while True:
        m = seg_n[top]
        if m > 128:  # split: sum the first half first
            half = m // 2
            half -= half % 8
            state[top] = 1
            seg_lo[top + 1] = seg_lo[top]
            seg_n[top + 1] = half
            top += 1
            continue
        lo = seg_lo[top]
        val = _pairwise_leaf(a[lo : lo + m])
        top -= 1
        while top >= 0 and state[top] == 2:  # a second half done: its segment's sum is first + second
            val = first[top] + val
            top -= 1
        if top < 0:
            return val
        first[top] = val  # a first half done: now the second
        state[top] = 2
        half = seg_n[top] // 2
        half -= half % 8
        seg_lo[top + 1] = seg_lo[top] + half
        seg_n[top + 1] = seg_n[top] - half
        top += 1


def row_norms_sq(X: np.ndarray | sp.spmatrix) -> np.ndarray:
    """Squared Euclidean norm of each row, (n,) float64."""
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", X, X)


@nb.njit(cache=True, nogil=True)
def _csr_mean_sq_and_spread(indptr, indices, data, rows, d):
    """(||mean||^2, mean_i ||x_i - mean||^2) of the rows ``rows`` (at least one) of a canonical CSR matrix with d
    columns (its indptr, indices and data), in two passes over their entries: (x_ij - mean_j)^2 for the stored ones,
    mean_j^2 for each zero. O(their entries): only the columns they touch are zeroed."""
    n = rows.shape[0]
    sums = np.empty(d)
    count = np.empty(d, dtype=np.int64)
    for r in rows:
        for k in range(indptr[r], indptr[r + 1]):
            sums[indices[k]] = 0.0
            count[indices[k]] = 0
    for r in rows:
        for k in range(indptr[r], indptr[r + 1]):
            sums[indices[k]] += data[k]
            count[indices[k]] += 1
    dev = 0.0
    for r in rows:
        for k in range(indptr[r], indptr[r + 1]):
            v = data[k] - sums[indices[k]] / n
            dev += v * v
    total = 0.0
    for r in rows:
        for k in range(indptr[r], indptr[r + 1]):
            j = indices[k]
            if count[j] > 0:  # each column once
                m = sums[j] / n
                total += m * m
                dev += (n - count[j]) * m * m
                count[j] = 0
    return total, dev / n


def sparse_centre(X: np.ndarray | sp.spmatrix) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """A centre for CSR rows that leaves them sparse: (c, columns), c the mean of the rows X (n, d), dense or CSR,
    kept on the fewest columns (sorted) whose removal leaves at most the spread of the rows, sum_{j not kept}
    mean_j^2 <= mean_i ||x_i - mean||^2, and 0 elsewhere; (None, None) if no column needs it (text data, whose mean
    is small against the spread).

    rbf kernels and the linear C-SVC's sum_i coef_i <x, s_i> are the same on rows shifted by any c in exact
    arithmetic; shifted by this one, no squared norm or inner product exceeds a few times the spread, so that none
    cancels (a common offset such as pendigits + 1e7 as CSR: all columns; a single far-off column: that one).

    The spread is computed in two passes: mean_i ||x_i||^2 - ||mean||^2 cancels where the mean is large (400 reuters
    rows beside a column of 1e8 got 3,266 columns shifted, 1.3M entries instead of 17.7k, the rbf fit 50x slower,
    where that one column sufficed). For CSR X the work is O(nnz log nnz), none per column of d: one-vs-one fits
    call this for every pair and fold (sector: 55,197 columns, 5,460 pairs of classes)."""
    n, d = X.shape
    if sp.issparse(X):
        X = X if X.format == "csr" else sp.csr_matrix(X)  # canonical (check_array): one entry per (row, column)
        total, spread = _csr_mean_sq_and_spread(
            X.indptr, X.indices, X.data.astype(np.float64, copy=False), np.arange(n), d
        )
        if total == 0.0 or total <= spread:  # text data: ~10 us for a pair of sector classes (numpy's way: ~190 us)
            return None, None
        cols, inv = np.unique(X.indices, return_inverse=True)
        m = np.bincount(inv, weights=X.data, minlength=cols.size) / n
        dev = X.data - m[inv]
        spread = (dev @ dev + (n - np.bincount(inv, minlength=cols.size)) @ (m * m)) / n  # + the zeros' (0 - m_j)^2
    else:
        mean = X.mean(axis=0)
        cols = np.flatnonzero(mean)
        m = mean[cols]
        spread = 0.0
        for s in range(0, n, 1024):  # row blocks: no second copy of X
            block = X[s : s + 1024] - mean
            spread += float(np.einsum("ij,ij->", block, block))
        spread /= n
    c2 = m * m
    total = float(c2.sum())
    if total == 0.0 or total <= spread:  # text data
        return None, None
    order = np.argsort(c2, kind="stable")
    kept = np.sort(order[int(np.searchsorted(np.cumsum(c2[order]), spread, side="right")) :])
    c = np.zeros(d)
    c[cols[kept]] = m[kept]
    return c, cols[kept]


def shift_csr(X: sp.spmatrix, c: np.ndarray, columns: np.ndarray) -> sp.csr_matrix:
    """X - c for a CSR X (m, d) and c (d,) zero outside ``columns`` (sorted): a CSR matrix whose entries in those
    columns are x_ij - c_j, each rounded once (m * len(columns) more entries at most)."""
    m, k = X.shape[0], columns.size
    C = sp.csr_matrix((np.tile(c[columns], m), np.tile(columns, m), np.arange(0, m * k + 1, k)), shape=X.shape)
    return sp.csr_matrix(X - C)


def kernel_block(
    A: np.ndarray | sp.spmatrix,
    B: np.ndarray | sp.spmatrix,
    spec: KernelSpec,
    sq_a: np.ndarray | None = None,
    sq_b: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """K(A, B) as an (m, k) array (float64 unless ``out`` is given, e.g. float32).

    A (m, d) and B (k, d) are float64 arrays or CSR matrices; ``sq_a``/``sq_b`` are the squared row
    norms (rbf only), computed if not given.
    """
    dot = A @ B.T
    if sp.issparse(dot):
        dot = dot.toarray()
    if spec.kind == "rbf":
        sq_a = row_norms_sq(A) if sq_a is None else sq_a
        sq_b = row_norms_sq(B) if sq_b is None else sq_b
    return kernel_of_products(dot, spec, sq_a, sq_b, out)


def kernel_of_products(
    dot: np.ndarray,
    spec: KernelSpec,
    sq_a: np.ndarray | None = None,
    sq_b: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """K(A, B) (m, k) from the inner products dot = A B' (m, k) and, for rbf, the squared row norms sq_a (m,) and
    sq_b (k,) of A and B: float64 unless ``out`` is given."""
    dot = np.ascontiguousarray(dot)  # float32 inputs give a float32 product (sgemm); the finish is in float64
    if out is None:
        out = np.empty(dot.shape, dtype=np.float64)
    if spec.kind == "linear":
        out[...] = dot
    elif spec.kind == "poly":
        _finish_poly(dot, spec.gamma, spec.coef0, spec.degree, out)
    elif spec.kind == "rbf":
        _rbf_exponent(dot, sq_a, sq_b, spec.gamma, out)
        np.exp(out, out=out)  # numpy's SIMD exp: several times faster than a scalar loop
    else:
        raise ValueError(f"kernel_block: cannot evaluate kernel {spec.kind!r}")
    return out


def centres(spec: KernelSpec, c_svc: bool) -> bool:
    """Whether kernel values of ``spec`` are computed on centred rows: rbf, which sees only differences, and linear for
    a C-SVC (``c_svc``: dual coefficients that sum to 0, y'a = 0), whose decision values are unchanged by a shift
    (:class:`svmcore.qmatrix.KernelQ`, :func:`kernel_decision`)."""
    return spec.kind == "rbf" or (spec.kind == "linear" and bool(c_svc))


DECISION_CHUNK = 4096  # test rows per kernel block at prediction
BLOCK_ENTRIES = 2**24  # and at most this many kernel values (dense rows against CSR support vectors: row entries)


def kernel_decision(
    X: np.ndarray | sp.spmatrix, sv: np.ndarray | sp.spmatrix, coef: np.ndarray, spec: KernelSpec, coef_sum_zero: bool
) -> np.ndarray:
    """sum_i coef[i, m] K(sv_i, x) for each row x of X (n, d) and model m: (n, m) float64. X and the support vectors
    sv (n_sv, d) are arrays or CSR matrices; coef (n_sv, m); ``coef_sum_zero``: every column of coef sums to 0 (a
    C-SVC, y'a = 0; not OneClassSVM).

    Where :func:`centres` (rbf; linear where ``coef_sum_zero``), X and sv are shifted by the support vectors' mean
    c, as :class:`svmcore.qmatrix.KernelQ` centres the training rows. Unshifted, on features with a large common
    offset (pendigits + 1e7), ||x||^2 + ||s||^2 - 2<x, s> cancels for rbf (decision values 5.8 off, 6% of the
    predictions flipped), and so does sum_i coef_i <x, s_i> for a linear C-SVC (24% flipped): sum_i coef_i <x, s_i>
    = sum_i coef_i <x - c, s_i - c> + sum_i coef_i <c, s_i - c>. Any c gives these identities: where X or sv is CSR,
    c is the mean only in the columns that hold an offset (:func:`sparse_centre`; none for text data), so that the
    rows stay sparse.

    CSR support vectors (a model fitted on CSR rows) enter the products as CSR, unless fit's rule
    (:func:`densify_if_cheaper`) finds their products cheaper dense: rows that stayed sparse only by
    its memory cap. Measured on blocks of test rows, the CSR x CSR product took 0.12-0.15x (sector) and 0.6-0.7x
    (reuters) the time of CSR x dense, but 5x on a9a's rows (which fit trains dense, as that rule says; docs/svc.md,
    "Support vectors of sparse input"). Dense rows against CSR support vectors go through scipy's dense @ CSR
    product, which copies each block's transpose: blocks are cut to ``BLOCK_ENTRIES`` row entries as well as
    kernel values."""
    sv = densify_if_cheaper(sv)
    sq_sv, offset, centre, columns = None, 0.0, None, None
    step = block_rows(sv.shape[0])
    if sp.issparse(sv) and not sp.issparse(X):
        step = max(1, min(step, BLOCK_ENTRIES // X.shape[1]))
    if centres(spec, coef_sum_zero) and sv.shape[0]:
        if sp.issparse(X) or sp.issparse(sv):
            centre, columns = sparse_centre(sv)
            if columns is not None:  # a CSR block gains len(columns) entries a row
                step = max(1, min(step, 2**22 // columns.size))
        else:
            centre = sv.mean(axis=0)
        if centre is not None:
            sv = shift_csr(sv, centre, columns) if sp.issparse(sv) else sv - centre
            if spec.kind == "linear":
                offset = np.asarray(sv @ centre).ravel() @ coef
    if spec.kind == "rbf":
        sq_sv = row_norms_sq(sv)  # once, not per block
    out = np.empty((X.shape[0], coef.shape[1]))
    for s in range(0, X.shape[0], step):  # one kernel block serves all the binary models
        block = X[s : s + step]
        if centre is not None:
            block = shift_csr(block, centre, columns) if sp.issparse(block) else block - centre
        out[s : s + step] = kernel_block(block, sv, spec, sq_b=sq_sv) @ coef
    return out + offset


def block_rows(n_sv: int) -> int:
    """Test rows per kernel block against n_sv support vectors."""
    return max(1, min(DECISION_CHUNK, BLOCK_ENTRIES // max(n_sv, 1)))


def kernel_diagonal(sq: np.ndarray, spec: KernelSpec) -> np.ndarray:
    """K(x_i, x_i) for every row, (n,) float64, from the rows' squared norms sq (n,)."""
    if spec.kind == "rbf":
        return np.ones(sq.shape[0])
    if spec.kind == "linear":
        return sq
    return (spec.gamma * sq + spec.coef0) ** spec.degree


def pairwise_kernel(
    X: np.ndarray | sp.spmatrix,
    Y: np.ndarray | sp.spmatrix | None = None,
    kernel: str = "rbf",
    gamma: float | str = "scale",
    degree: int = 3,
    coef0: float = 0.0,
) -> np.ndarray:
    """Full kernel matrix K(X, Y), (n_x, n_y) float64; for small sets and tests (n_x * n_y memory)."""
    Y = X if Y is None else Y
    spec = resolve_kernel(kernel, X, gamma, degree, coef0)
    return kernel_block(X, Y, spec)
