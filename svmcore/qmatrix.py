"""The Q-matrix interface of the decomposition solver (:class:`QMatrix`), its kinds, and its one column cache.

The solver (``smo.solve``) never sees kernels, only a :class:`QMatrix`. Kinds:

- :class:`KernelQ`: Q_ij = y_i y_j K(x_i, x_j) (C-SVC) or K(x_i, x_j) (one-class, ``y=None``), computed
  block-wise through BLAS (``kernels.kernel_block``);
- :class:`PrecomputedQ`: an explicit (n, n) matrix (precomputed kernels, kernel SVM+ with Q = H + G);
- :class:`DenseQ`: a Q already held whole (a pair of classes cut from the Gram of a fit), which the solver serves
  from memory in one compiled call.

The solver keeps the columns it has fetched in one :class:`ColumnCache`, whatever the kind; a small Q it computes
whole first (:func:`in_memory_pays`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

import numba as nb
import numpy as np
import scipy.sparse as sp

from .validation import check_finite_fit
from .kernels import KernelSpec, centres, kernel_block, kernel_diagonal, row_norms_sq, shift_csr, sparse_centre

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import ArrayLike, DTypeLike

    from .gram import CentredGram, Gram


class QMatrix(Protocol):
    """What the solver asks of Q (n variables; Q symmetric).

    Attributes
    ----------
    n : int
        Variables.
    dtype : numpy.dtype
        Of the columns: float32 (as LIBSVM's Qfloat) or float64.
    diagonal : ndarray of shape (n,), float64
        Q_ii.
    whole : bool
        Q is held whole already: the solver serves it from memory, whatever its size.
    """

    n: int
    dtype: np.dtype
    diagonal: np.ndarray
    whole: bool

    def rows(self, idx: np.ndarray, active: np.ndarray) -> np.ndarray:
        """Q[idx][:, active] of ``dtype``, (len(idx), len(active)): the columns idx (Q is symmetric: stored as
        rows) restricted to the active variables, computed together."""

    def float64(self) -> QMatrix:
        """The same Q with float64 columns, which the solver asks for where float32 cannot reach its tolerance
        (:func:`float32_columns_suffice`)."""

    def rho_shift(self, alpha: np.ndarray) -> float:
        """What the solver's rho needs added where Q solves an equivalent, better conditioned problem (the
        centred linear C-SVC); 0.0 otherwise."""

    def reset(self) -> None:
        """Forget state kept between :meth:`rows` calls (the solver unshrinks: the active set grows back)."""


@nb.njit(cache=True, nogil=True)
def store_rows(data, slots, active, block):
    """data[slots[r], active] = block[r] (the cache keeps full-length columns)."""
    for r in range(slots.shape[0]):
        row = data[slots[r]]
        for s in range(active.shape[0]):
            row[active[s]] = block[r, s]


class CacheArrays(NamedTuple):
    """A :class:`ColumnCache`'s state as the solver's compiled loop reads and updates it, one structure:
    ``data`` (n_slots, n) the columns, ``slot_of`` (n,) int64, ``owner``, ``last_used`` (n_slots,) int64, ``full``
    (n_slots,) bool (their meaning: :class:`ColumnCache`). The arrays themselves, not copies."""

    data: np.ndarray
    slot_of: np.ndarray
    owner: np.ndarray
    last_used: np.ndarray
    full: np.ndarray


class ColumnCache:
    """Least-recently-used cache of Q columns, bounded in megabytes (LIBSVM's cache, filled block-wise).

    ``data[slot]`` holds column ``owner[slot]`` as a length-n row of ``dtype`` whose entries are valid on the
    active set it was computed for; shrinking only removes variables, so it stays valid until the solver
    reactivates all variables, when :meth:`drop_partial` forgets the columns not computed on all of
    them (``full[slot]`` is False). ``slot_of[i]`` is column i's slot or -1; ``last_used[slot]`` is the
    solver's clock at the slot's last use.
    """

    in_memory = False

    def __init__(self, n: int, cache_mb: float, min_columns: int, dtype: DTypeLike = np.float32) -> None:
        self.n_slots = max(min(_slots(n, cache_mb, dtype), n), min_columns)
        self.data = np.empty((self.n_slots, n), dtype=dtype)
        self.slot_of = np.full(n, -1, dtype=np.int64)
        self.owner = np.full(self.n_slots, -1, dtype=np.int64)
        self.last_used = np.zeros(self.n_slots, dtype=np.int64)
        self.full = np.zeros(self.n_slots, dtype=bool)
        self.misses = 0
        self.n_filled = 0  # slots [0, n_filled) have been used; the rest never were

    @classmethod
    def in_memory_cache(cls, block: np.ndarray) -> ColumnCache:
        """A cache over Q given whole, ``block`` (n, n) (column j as row j), for problems whose columns all fit
        (:func:`in_memory_pays`): slot j holds column j, and ``slot_of``, ``owner``, ``full`` and ``last_used`` record
        which columns count as cached, and on which active set, as :meth:`insert` would have left them had each
        request been computed (the solver's compiled loop marks them, ``smo._drive``; nothing is copied). So the
        solver takes the same steps as over a computed cache, where that one never evicts a column it still needs:
        never while its slots hold every column (``in_memory_pays``)."""
        self = cls.__new__(cls)
        n = block.shape[0]
        self.in_memory = True
        self.n_slots = n
        self.data = block
        self.slot_of = np.full(n, -1, dtype=np.int64)
        self.owner = np.full(n, -1, dtype=np.int64)
        self.last_used = np.zeros(n, dtype=np.int64)
        self.full = np.zeros(n, dtype=bool)
        self.misses = 0  # counted by the compiled loop (smo's io slot _MISSES)
        self.n_filled = n
        return self

    @property
    def arrays(self) -> CacheArrays:
        """The state the compiled loop shares (the same arrays)."""
        return CacheArrays(self.data, self.slot_of, self.owner, self.last_used, self.full)

    def drop_partial(self) -> None:
        """Forget columns computed only over the shrunk active set (they lack rows that unshrinking needs)."""
        partial = np.flatnonzero(~self.full & (self.owner >= 0))
        self.slot_of[self.owner[partial]] = -1
        self.owner[partial] = -1
        self.last_used[partial] = 0

    def insert(self, idx: np.ndarray, block: np.ndarray, active: np.ndarray, clock: int) -> None:
        """Store rows ``block`` (len(idx), len(active)) as columns ``idx``, evicting the least recently
        used slots not touched at ``clock`` (those hold the current working set)."""
        m = len(idx)
        self.misses += m
        if self.n_filled + m <= self.n_slots:  # never-used slots first: no search while the cache fills
            victims = np.arange(self.n_filled, self.n_filled + m)
            self.n_filled += m
        else:  # from now on the LRU search decides (never-used slots still rank first: last_used 0)
            self.n_filled = self.n_slots
            usage = np.where(self.last_used >= clock, np.iinfo(np.int64).max, self.last_used)
            victims = np.argpartition(usage, m - 1)[:m] if m < self.n_slots else np.arange(m)
        old = self.owner[victims]
        self.slot_of[old[old >= 0]] = -1
        self.owner[victims] = idx
        self.slot_of[idx] = victims
        self.last_used[victims] = clock
        self.full[victims] = len(active) == self.data.shape[1]
        if self.full[victims[0]]:
            self.data[victims] = block
        else:
            store_rows(self.data, victims, active, np.ascontiguousarray(block))


def _slots(n, cache_mb, dtype):
    """Columns of n entries of ``dtype`` that ``cache_mb`` megabytes hold."""
    return int(cache_mb * 2**20 // (np.dtype(dtype).itemsize * max(n, 1)))


def cache_holds(n: int, cache_mb: float, dtype: DTypeLike) -> bool:
    """Whether a :class:`ColumnCache` of ``cache_mb`` holds all n columns of an n-variable Q of ``dtype``: then it never
    evicts a column it still needs, and a Q given whole gives the same iterates (``ColumnCache.in_memory_cache``)."""
    return _slots(n, cache_mb, dtype) >= n


IN_MEMORY_ROWS = 256  # Q of up to this many variables is computed whole


def in_memory_pays(n: int, request: int, cache_mb: float, dtype: DTypeLike) -> bool:
    """Whether the solver computes an n-variable Q whole before it starts (:meth:`ColumnCache.in_memory_cache`):
    n <= IN_MEMORY_ROWS, where the first requests (``request`` columns each: the working set and its prefetch)
    take most columns anyway and Python's round trips per request cost more than the columns, and the cache
    holds all n columns (a smaller one would evict, and the iterates would be another order's). Where Q's entries
    are the same numbers in any block (CSR products, cuts of a Gram, precomputed) the iterates are those of the
    column-by-column solve to the bit; dense rows' BLAS products round an entry by the block's shape, so there
    they agree to the rounding of the products. Letter, 3,000 rows in 26 classes (pairs of ~230 rows, dense): 0.87x
    the fit's time of the column fetches."""
    return n <= max(IN_MEMORY_ROWS, request) and cache_holds(n, cache_mb, dtype)


EPS32 = float(np.finfo(np.float32).eps)  # once: np.finfo costs microseconds, and solve asks for every pair


def float32_columns_suffice(C_max: float, diag_max: float, tol: float, rel_error: float | None = None) -> bool:
    """Whether float32 columns can reach the stopping rule's ``tol``. A support vector at its bound C moves
    every gradient entry by C Q_ij, which float32 storage rounds by up to about C max_i Q_ii eps32 (eps32 =
    1.2e-7); from ``tol`` on, the solver would certify a violation it cannot see. Then the columns are float64
    (:meth:`KernelQ.float64`, :meth:`PrecomputedQ.float64`). In a sweep of 284 real-data fits (USPS, CBCL,
    pendigits; 300 rows; linear and poly; C 0.1-1e5) this rule took all 11 fits whose true KKT violation
    exceeded 2 tol, and 104 others.

    ``rel_error``: the columns' relative error where it exceeds float32 storage's (None: eps32), the Q-matrix's
    ``column_rel_error``: rbf columns from float32 products err by up to about 2 gamma max ||x - mean||^2 eps32
    (:class:`KernelQ`)."""
    eps = EPS32 if rel_error is None else max(float(rel_error), EPS32)
    return C_max * diag_max * eps < tol


# float32 products (sgemm, twice as fast) for rbf while gamma * max ||x - mean||^2 stays below this: their
# rounding, about 1e-7 of it, then moves an exponent by at most ~1e-5. poly and linear products are float64 (as
# LIBSVM's): a float32 <a, b> errs by about 1e-7 sqrt(d) |a| |b|, which C times the kernel's size turns into
# gradient errors above tol, and the rows of one column differ with the sgemm block they came from. On 300-row
# CBCL pixel problems (poly 2-3, C 1e2-1e5) the true KKT violation reached 60 tol and the objective 2e-4 off;
# a USPS poly-3 fit at C ~ 1e4 ended at a tenth of the optimum, all reported converged.
RBF_FLOAT32_MAX = 100.0


class KernelQ:
    """Q for a kernel SVM on samples X (n, d), float64 array or CSR; ``y`` (n,) of +-1 or None (one-class).

    X is centred where that leaves the problem unchanged (:func:`svmcore.kernels.centres`): for rbf, which sees only
    differences, and for the linear C-SVC, whose dual is unchanged because y'a = 0 (its rho moves by <mean, w>:
    :meth:`rho_shift`); CSR X only in the columns that hold an offset (:func:`svmcore.kernels.sparse_centre`; none
    for text data), so that it stays sparse. A large common offset would otherwise dwarf the differences the solver
    needs (||a||^2 + ||b||^2 - 2<a, b> cancels; float32 columns lose them): Q is then not PSD and SMO cycles.
    Inner products are float64 for poly and linear, for CSR rbf and for rbf on far-out points or very large
    gamma (above :data:`RBF_FLOAT32_MAX`); other rbf products are float32 (as exact as the float32 columns they
    fill, and twice as fast). ``dtype`` float64 gives float64 columns from float64 products throughout.

    With ``rows`` (sorted int indices), X is a :class:`svmcore.gram.Gram` and the problem is on its rows
    ``rows``, which the caller has checked need no centre (:func:`svmcore.kernels.centres` and ``Gram.shifts``): the
    inner products are cut from the Gram's, the same numbers as the rows' own product. Or X is a
    :class:`svmcore.gram.CentredGram` of a few CSR rows, centred as this class centres them, and the same numbers
    as on those rows.
    """

    whole = False

    def __init__(
        self,
        X: np.ndarray | sp.spmatrix | Gram | CentredGram,
        spec: KernelSpec,
        y: ArrayLike | None = None,
        dtype: DTypeLike = np.float32,
        rows: np.ndarray | None = None,
    ) -> None:
        self._args = (X, spec, y)
        self.dtype = np.dtype(dtype)
        self.centre = self.columns = None
        self.gram = self.index = None
        if rows is not None:
            self.gram, self.index, X = X, rows, None
        elif centres(spec, y is not None):
            if sp.issparse(X):  # shifted in the columns that hold an offset only, so that the rows stay sparse
                self.centre, self.columns = sparse_centre(X)
                if self.centre is not None:
                    X = shift_csr(X, self.centre, self.columns)
            else:
                self.centre = X.mean(axis=0)
                X = X - self.centre
        self.n = X.shape[0] if rows is None else len(rows)
        self.spec = spec
        self.y = None if y is None else np.asarray(y, dtype=np.float32)
        self.sq = row_norms_sq(X) if rows is None else self.gram.sq[rows]
        if spec.kind == "poly":
            with np.errstate(over="ignore"):
                self.diagonal = kernel_diagonal(self.sq, spec)
        else:
            self.diagonal = kernel_diagonal(self.sq, spec)
        # |K_ij| <= sqrt(K_ii K_jj): a diagonal within float32 keeps every float32 column finite; else SMO would run
        # on inf and NaN. Values below 3e38 are (the common case, checked without the cast's warning context)
        top = np.abs(self.diagonal).max(initial=0.0)
        if not top < 3e38:  # NaN too
            with np.errstate(over="ignore"):
                check_finite_fit(
                    self.diagonal.astype(np.float32),
                    what=f"the {spec.kind} kernel values on these features",
                    remedy="rescale the features (e.g. to [0, 1]) or lower degree / gamma / |coef0|",
                )
        exact = (
            spec.kind != "rbf"
            or rows is not None
            or sp.issparse(X)
            or self.dtype == np.float64
            or spec.gamma * self.sq.max(initial=0.0) > RBF_FLOAT32_MAX
        )  # a Gram holds CSR rows' products
        if rows is None:
            self.X = X.astype(np.float64, copy=False) if exact else X.astype(np.float32)
        # a float32 <a, b> errs by about eps32 |a| |b|, which moves rbf's exponent by up to 2 gamma eps32 max_i
        # ||x_i||^2 (|K_ij| <= 1): the columns' relative error, for smo.solve's float32_columns_suffice. CBCL, 800 rows,
        # gamma 0.05 (gamma max ||x||^2 = 4.4), C 1e3-8e3: columns up to 3.3e-6 off (float32 storage: 3e-8) and a true
        # KKT violation of 2-3.8 tol reported below tol
        self.column_rel_error = EPS32 if exact else EPS32 * max(1.0, 2.0 * spec.gamma * float(self.sq.max(initial=0.0)))
        self._active_key = None  # the row set _X_active was cut for

    def float64(self) -> KernelQ:
        """The same Q with float64 columns (see :func:`float32_columns_suffice`)."""
        return KernelQ(*self._args, dtype=np.float64, rows=self.index)

    def rho_shift(self, alpha: np.ndarray) -> float:
        """What rho of the uncentred problem adds to the solver's: <mean, w> with w = sum_i alpha_i y_i x_i
        over the original rows (0 where they were not centred; SVM decision value w'x - rho)."""
        if self.spec.kind != "linear":
            return 0.0
        if self.gram is not None:  # a gram.CentredGram holds <x_i - c, c> of its shifted rows; a Gram none
            offsets = self.gram.offsets
            return 0.0 if offsets is None else float((alpha * self.y) @ offsets[self.index])
        if self.centre is None:
            return 0.0
        # sum_i alpha_i y_i <x_i - mean, mean> over the centred rows it holds (linear products are float64): the
        # <mean, mean> sum_i alpha_i y_i it leaves out is 0 (y'a = 0) up to rounding, which a large common offset
        # turned into a wrong intercept (pendigits + 1e7)
        return float((alpha * self.y) @ (self.X @ self.centre))

    def rows(self, idx: np.ndarray, active: np.ndarray) -> np.ndarray:
        """Q[idx][:, active] as a (len(idx), len(active)) array of ``dtype``; ``active`` increasing indices."""
        key = self._active_key
        # keyed by the rows themselves, not their number: the solver also asks for the rows of the shrunk
        # variables (their gradient reconstruction), whose count can equal an earlier active set's, and the
        # stale rows then gave wrong kernel values and a wrong solution (O(n) to compare; a block costs O(n d))
        if key is None or len(key) != len(active) or not np.array_equal(key, active):
            full = len(active) == self.n
            if self.gram is None:
                self._X_active = self.X if full else self.X[active]
            else:
                self._X_active = self.index if full else self.index[active]  # rows of the Gram
            self._sq_active = self.sq if full else self.sq[active]
            self._y_active = None if self.y is None else self.y[active]
            self._active_key = np.array(active)  # a copy: the caller may reuse its array
        out = np.empty((len(idx), len(active)), dtype=self.dtype)
        if self.gram is None:
            kernel_block(self.X[idx], self._X_active, self.spec, self.sq[idx], self._sq_active, out=out)
        else:
            self.gram.kernel(self.index[idx], self._X_active, self.spec, out=out)
        if self.y is not None:
            out *= self.y[idx, None]
            out *= self._y_active[None, :]
        return out

    def reset(self) -> None:
        """Drop the cached active-set arrays (called when the solver unshrinks; :meth:`rows` checks its key anyway)."""
        self._active_key = None


class PrecomputedQ:
    """Q given as an explicit symmetric (n, n) matrix; with ``y``, Q_ij = y_i y_j M_ij.

    ``dtype``: how Q and the solver's cached columns are stored. float32 (LIBSVM's choice, half the memory and
    bandwidth) serves precomputed kernels; float64 serves Q whose entries far exceed the dual's scale, as in
    l2-SVM+ (rho = a'Qa can be 1e-7 of max|Q|, below float32's rounding of Q).
    """

    whole = False

    def __init__(self, M: ArrayLike, y: ArrayLike | None = None, dtype: DTypeLike = np.float32) -> None:
        self._args = (M, y)  # the caller's matrix, no copy
        M = np.asarray(M, dtype=np.float64)
        if M.ndim != 2 or M.shape[0] != M.shape[1]:
            raise ValueError(f"Q: expected a square matrix, got shape {M.shape}")
        if y is not None:
            y = np.asarray(y, dtype=np.float64)
            M = M * np.outer(y, y)
        self.dtype = np.dtype(dtype)
        self.Q = M.astype(self.dtype, copy=False)
        self.n = M.shape[0]
        self.diagonal = np.diag(M).copy()

    def float64(self) -> PrecomputedQ:
        """The same Q stored in float64 (see :func:`float32_columns_suffice`)."""
        return self if self.dtype == np.float64 else PrecomputedQ(*self._args, dtype=np.float64)

    def rows(self, idx: np.ndarray, active: np.ndarray) -> np.ndarray:
        """Q[idx][:, active] of ``dtype``, (len(idx), len(active)): the columns idx restricted to the active set."""
        if len(active) == self.n:
            return self.Q[idx]
        return self.Q[np.ix_(idx, active)]

    def rho_shift(self, alpha: np.ndarray) -> float:
        """0.0: the matrix is used as given (see :meth:`KernelQ.rho_shift`)."""
        return 0.0

    def reset(self) -> None:
        """Nothing to invalidate: Q is held whole."""


class DenseQ:
    """Q held whole: ``block`` (n, n) float32 or float64, Q's columns as its rows, with its ``diagonal`` (n,) float64
    as the Q-matrix it was cut from gives it, ``wide`` its float64 twin (or None: ``float64()`` converts) and that
    Q-matrix's ``rho_shift``. The solver runs it from memory in one compiled call, as it runs a small Q it computes
    whole, so the iterates are those of the Q it was cut from."""

    whole = True

    def __init__(
        self,
        block: np.ndarray,
        diagonal: np.ndarray,
        *,
        wide: np.ndarray | None = None,
        rho_shift: Callable[[np.ndarray], float] | None = None,
        column_rel_error: float = EPS32,
    ) -> None:
        self.block, self.wide = block, wide
        self.n, self.dtype = block.shape[0], block.dtype
        self.diagonal = diagonal
        self.column_rel_error = column_rel_error
        self._rho_shift = rho_shift

    def rows(self, idx: np.ndarray, active: np.ndarray) -> np.ndarray:
        """Q[idx][:, active] (the block itself where both are everything: no copy)."""
        if len(idx) == self.n and len(active) == self.n:
            return self.block
        return self.block[np.ix_(idx, active)]

    def float64(self) -> DenseQ:
        """The float64 twin given, else the block converted."""
        if self.dtype == np.float64:
            return self
        wide = self.block.astype(np.float64) if self.wide is None else self.wide
        return DenseQ(wide, self.diagonal, rho_shift=self._rho_shift, column_rel_error=self.column_rel_error)

    def rho_shift(self, alpha: np.ndarray) -> float:
        """The rho shift of the Q-matrix the block was cut from (0.0 without one)."""
        return 0.0 if self._rho_shift is None else self._rho_shift(alpha)

    def reset(self) -> None:
        """Nothing to invalidate: Q is held whole."""
