"""PmSVM: additive-kernel SVM trained by regression-approximated dual coordinate descent.

The estimator :class:`PmSVM` (Wu, TNNLS 2015), registered with :mod:`svmcore.persistence`: it checks its input,
lays the rows out and runs a solver (:mod:`svmcore.pmsvm.solver`), and scores through the lookup table
(:mod:`svmcore.pmsvm.table`), built from coef_ unless it would exceed ``TABLE_MAX_BYTES``. The kernel and its
approximation: :mod:`svmcore.pmsvm.kernel`.
"""

from __future__ import annotations

import numbers
import warnings
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from .. import persistence
from ..validation import (
    ConvergenceWarning,
    check_array,
    check_choice,
    check_class_weight,
    check_finite_fit,
    check_fitted,
    check_labels,
    check_n_features,
    check_random_state,
    check_scalar,
    make_rng,
    row_weights,
)
from ..base import BaseEstimator, ClassifierMixin
from ..multiclass import ovo_pairs, ovo_votes
from .kernel import check_nonnegative, check_p, explanatory_variables, pmsvm_anchors
from . import solver
from .solver import _column_max, _dcd, _sgd, _solver_layout
from .table import lut_decision

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..validation import ClassWeight, MatrixLike, RandomStateLike

# Larger lookup tables are not built (105 one-vs-rest models x 55,197 sector features x 1000 bins would take
# 43 GiB): decision values then come from coef_ through the same interpolation, n_anchors products per value
TABLE_MAX_BYTES = 256 * 2**20


# --- the estimator ---------------------------------------------------------------------------------
@persistence.register
class PmSVM(ClassifierMixin, BaseEstimator):
    """Power mean SVM (Wu, TNNLS 2015): additive-kernel C-SVM on nonnegative features, O(d) prediction.

    Minimises the L1-loss (hinge) SVM dual 1/2 a^T Q a - 1^T a, 0 <= a_i <= C, with
    Q_il = y_i y_l (k(x_i, x_l) + 1) (the +1 is a regularised bias, as in LIBLINEAR), by dual coordinate
    descent whose gradients use the regression approximation of Eq. (25-31) (Algorithm 3); see the
    docstring of :mod:`svmcore.pmsvm.kernel`. Multiclass problems are split into binary ones, one-vs-rest (default) or
    one-vs-one (as LIBSVM; one table per pair of classes).

    Parameters
    ----------
    C : float > 0, the hinge-loss weight.
    p : float, -inf <= p <= 0; the power mean kernel M_p (-1 chi-square, -8 ~ intersection, 0 Hellinger).
    n_anchors : int 2..10; 3 uses the paper's anchors (0.01, 0.06, 0.75), others Chebyshev nodes (Eq. 41).
    lut_bins : int >= 2 or None. PmSVM-LUT: feature j is rounded to N = lut_bins nodes of [0, x_max_[j]] in
        training and scored by linear interpolation between them (:func:`lut_decision` with ``table_``);
        None trains and scores with the exact explanatory variables e(x) (no table). The table follows
        the current lut_bins: set after fit, it changes the scoring resolution, not the trained weights.
    tol : float > 0; DCD stops when the projected-gradient spread max PG - min PG <= tol (LIBLINEAR's
        criterion, 0.1 there); SGD stops when an epoch changes w by less than tol relative to |w|.
    max_iter : int >= 1, maximum number of epochs per binary problem (DCD: LIBLINEAR's iterations, epochs over the
        active set, which shrinking makes cheaper than passes over the data, each check of all samples counting
        as one; SGD: epochs over all samples); a fit in which any binary problem reaches it warns once
        (svmcore.ConvergenceWarning, with their count).
    random_state : None, int >= 0, numpy Generator or RandomState; seeds the order of coordinates / samples.
    solver : "dcd" (Algorithm 3, dual coordinate descent) or "sgd" (Algorithm 4, stochastic gradient
        descent with step 1/(lambda t), lambda = 1/(C n)).
    multi_class : "ovr" (one binary problem per class, argmax of the decision values) or "ovo" (one per
        pair of classes, majority vote; more accurate on USPS and pendigits, see docs/pmsvm.md).
    loss : "hinge" (L1-loss SVM, 0 <= alpha <= C) or "squared_hinge" (L2-loss, LIBLINEAR's D_ii = 1/(2C); solver
        "dcd" only).
    class_weight : None, "balanced" or {label: weight >= 0}: row i's C becomes C * class_weight[y_i] in
        every binary problem (as LIBSVM's -wi; "balanced": n / (n_classes * count of the class)). Unlike
        LIBLINEAR's one-vs-rest, the weight applies whether the class is the positive or a negative side.

    Learned attributes
    ------------------
    classes_ : (n_classes,) labels. coef_ : (n_models, d, n_anchors) float64, the regression weights
    s w_j in feature units (n_models = 1 for two classes, else n_classes for "ovr" and
    n_classes (n_classes - 1) / 2 for "ovo", pairs (a, b), a < b, in lexicographic order, b positive).
    intercept_ : (n_models,) float64.
    x_max_ : (d,) float64, the feature units s_j (feature j's largest training value, 1.0 if it is never
    positive in training; files saved with one unit for all features load with it repeated).
    table_ : (n_models, d, lut_bins) float64
    if lut_bins, the per-dimension lookup table, built from coef_ at first use (scoring or reading it) and
    neither built by fit nor saved, unless it would exceed ``TABLE_MAX_BYTES`` (256 MiB): then there is no
    ``table_`` and decision values come from coef_ with the same interpolation.
    n_iter_ : (n_models,) int64 epochs used (LIBLINEAR's iteration count: an epoch over the shrunk active set
    counts as one).
    n_passes_ : (n_models,) float64, gradient evaluations / samples of the binary problem, the work in
    full-data passes (DCD: < n_iter_ once shrinking removes bounded variables; SGD: = n_iter_).
    alpha_ : (n_models, n_samples) dual variables. n_passes_ and alpha_ exist after fit only (not saved).

    Raises ValueError for negative, NaN or infinite features, p > 0, a single class, or bad
    hyperparameters; TypeError for non-numeric input.

    Notes
    -----
    Memory bound: for a dense float64 X and the default n_anchors=3, fit holds at most about 3 X.nbytes beyond X
    itself (tests/test_pmsvm.py holds it to 3 X.nbytes + 48 MiB in both layouts). The rows in the solvers' layout are
    built in place from X and take 24 bytes per nonzero entry (CSR positions: feature, t, float32 s_j beta) or, when
    at least ``DENSE_FROM`` (35%) of the entries are nonzero, 8 n_anchors bytes per entry of the n x d matrix (float32
    rows of e and s_j beta, at most ``ROWS_MAX_BYTES``, 1 GiB). With another n_anchors the CSR positions take 8 bytes
    per nonzero entry (16 beyond 2^31 of them), 8 + 16 n_anchors without a table (lut_bins=None). Add to this a copy
    of X if it is not a C-contiguous float64 array (sparse input is always copied, as canonical CSR; the copy is
    freed before the solver runs), O(n_models (n + d n_anchors)) floats for the labels, dual variables and weights,
    and without a table about 40 MB of blocks in which e and beta are computed.
    """

    _state_arrays = ("coef_", "intercept_", "classes_", "n_iter_", "x_max_")
    _state_meta = ()
    _live_params = ("lut_bins",)  # the scoring resolution: the table follows it at once
    _positive_input = True
    _params_added_later = {"class_weight": None}

    @property
    def n_features_in_(self) -> int:
        """Number of features seen in fit (from ``coef_``). Raises :class:`svmcore.NotFittedError` (also an
        AttributeError: ``hasattr`` is False, as scikit-learn expects) before fit."""
        check_fitted(self, "coef_")
        return self.coef_.shape[1]

    def __init__(
        self,
        C: float = 1.0,
        p: float = -1.0,
        n_anchors: int = 3,
        lut_bins: int | None = 1000,
        tol: float = 0.1,
        max_iter: int = 100,
        random_state: RandomStateLike = None,
        solver: str = "dcd",
        multi_class: str = "ovr",
        loss: str = "hinge",
        class_weight: ClassWeight = None,
    ) -> None:
        self.C = C
        self.p = p
        self.n_anchors = n_anchors
        self.lut_bins = lut_bins
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.solver = solver
        self.multi_class = multi_class
        self.loss = loss
        self.class_weight = class_weight

    @classmethod
    def _from_state(cls, params, meta, arrays):
        if "x_max_" in meta and "x_max_" not in arrays:
            # files written before per-feature units hold one unit for all features, a JSON number in the header;
            # the same model has that unit in every dimension (the check below refuses a bad one)
            meta, arrays = dict(meta), dict(arrays)
            v = meta.pop("x_max_")
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise ValueError(f"x_max_ must be a positive number, got {v!r}")
            coef = arrays.get("coef_")
            d = coef.shape[1] if isinstance(coef, np.ndarray) and coef.ndim == 3 else 1
            arrays["x_max_"] = np.full(d, float(v))
        return super()._from_state(params, meta, arrays)

    @classmethod
    def _upgrade_params(cls, params):
        # earlier versions accepted two settings they did not honour: SGD ignored loss (the model is a hinge
        # model), and p within 1e-9 of 0 computed M_p as the minimum (the model is p = -inf's)
        params = dict(params)
        if params.get("solver") == "sgd" and params.get("loss") != "hinge":
            params["loss"] = "hinge"
        if isinstance(params.get("p"), float) and -1e-9 < params["p"] < 0:
            params["p"] = -np.inf
        return params

    def _check_params(self):
        check_scalar(self.C, "C", lo=0, lo_open=True)
        check_p(self.p)
        anchors = pmsvm_anchors(self.n_anchors)
        if self.lut_bins is not None:
            check_scalar(self.lut_bins, "lut_bins", lo=2, hi=2**20, integer=True)
        check_scalar(self.tol, "tol", lo=0, lo_open=True)
        check_scalar(self.max_iter, "max_iter", lo=1, integer=True)
        check_random_state(self.random_state)
        check_choice(self.solver, "solver", ("dcd", "sgd"))
        check_choice(self.multi_class, "multi_class", ("ovr", "ovo"))
        check_choice(self.loss, "loss", ("hinge", "squared_hinge"))
        if self.solver == "sgd" and self.loss != "hinge":
            raise ValueError(
                f"loss={self.loss!r} needs solver='dcd': the SGD solver (Algorithm 4) minimises the hinge loss"
            )
        check_class_weight(self.class_weight)
        return anchors

    def _pairs(self, k=None, multi_class=None):
        """(n_models, 2) class indices (a, b) of each binary problem for k classes and multi_class (default:
        the fitted model's); b is the positive class."""
        k = len(self.classes_) if k is None else k
        multi_class = multi_class or self._param("multi_class")
        if k == 2:
            return np.array([[0, 1]])
        if multi_class == "ovr":
            return np.stack([np.full(k, -1), np.arange(k)], axis=1)  # -1: all other classes
        return ovo_pairs(k)

    def _check_X(self, X, name="X"):
        X = check_array(X, name, allow_sparse=True)
        check_nonnegative(X, name)
        return X

    def fit(self, X: MatrixLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> PmSVM:
        """Train on X (n, d) nonnegative float array or CSR matrix and labels y (n,); returns self.

        sample_weight: (n,) >= 0 or None; row i's loss weighs C * class_weight[y_i] * sample_weight[i] (its
        box constraint in the dual) in every binary problem it belongs to; rows of weight 0 are left out.
        Raises ValueError for negative features, NaN/inf, all-zero X, a single class (also among the rows
        of positive weight), wrong shapes, bad hyperparameters (p > 0, C <= 0, ...) or features so large that the
        solution overflows; TypeError for non-numeric input. A failed fit leaves an earlier fit's model
        unchanged. Warns (svmcore.ConvergenceWarning) once if binary problems stop at max_iter epochs, saying how
        many.
        """
        anchors = self._check_params()
        X = self._check_X(X)
        classes, y_index = check_labels(y, X.shape[0])
        row_weight = row_weights(sample_weight, self.class_weight, classes, y_index)
        n, d = X.shape
        n_basis = len(anchors)
        if sp.issparse(X):  # check_array's copy, canonical
            X.eliminate_zeros()  # k(0, x) = 0: a zero feature adds nothing to a gradient or an update
            nnz = X.nnz
            indptr, indices, values = X.indptr, X.indices, X.data
        else:
            nnz = np.count_nonzero(X)
            indptr, indices, values = np.arange(0, n * d + 1, d), np.empty(0, np.int32), X.ravel()
        if not nnz:
            raise ValueError("X: all features are zero; nothing to learn")
        kept = row_weight > 0
        if sp.issparse(X) or not kept.all():  # rows of weight 0 are left out: they set no feature's unit either
            x_max = _column_max(indptr, indices, values, d, kept)  # X >= 0: 0 if never positive
        else:
            x_max = X.max(axis=0).astype(np.float64)
        del indptr, indices, values
        x_max[x_max <= 0] = 1.0
        indptr, indices, codes, t_pos, ev, beta, k_diag = _solver_layout(X, nnz, x_max, anchors, self.p, self.lut_bins)
        del X  # a copy made by check_array (always for sparse input) is not needed in the solver
        pairs = self._pairs(len(classes), self.multi_class)
        n_models = len(pairs)
        pos = y_index[None, :] == pairs[:, 1:2]
        neg = (y_index[None, :] == pairs[:, 0:1]) | (pairs[:, 0:1] < 0)
        Y = np.where(pos, 1.0, np.where(neg, -1.0, 0.0))
        Y[:, row_weight == 0] = 0.0  # a row without weight is in no problem
        rng = make_rng(self.random_state)
        seeds = rng.integers(1, 2**62, size=n_models, dtype=np.int64)
        W = np.zeros((n_models, d * n_basis))
        bias = np.zeros(n_models)
        n_iter = np.zeros(n_models, dtype=np.int64)
        if self.solver == "dcd":
            C_i = float(self.C) * row_weight  # (a Fraction would make an object array)
            with np.errstate(divide="ignore"):  # rows of weight 0 take no step (Y = 0)
                upper, diag = (
                    (C_i, np.zeros(n))
                    if self.loss == "hinge"
                    else (np.full(n, np.inf), np.where(C_i > 0, 0.5 / C_i, 0.0))
                )
            qdiag = k_diag + 1.0 + diag  # +1 for the bias
            alpha = np.zeros((n_models, n))
            n_passes = np.zeros(n_models)
            _dcd(
                indptr,
                indices,
                codes,
                t_pos,
                ev,
                beta,
                x_max,
                qdiag,
                Y,
                upper,
                diag,
                float(self.tol),
                solver.FIRST_PHASE_CAP,
                int(self.max_iter),
                seeds,
                W,
                bias,
                alpha,
                n_iter,
                n_passes,
            )
        else:
            _sgd(
                indptr,
                indices,
                codes,
                t_pos,
                ev,
                beta,
                x_max,
                Y,
                float(self.C),
                row_weight,
                float(self.tol),
                int(self.max_iter),
                seeds,
                W,
                bias,
                n_iter,
            )
            alpha, n_passes = None, n_iter.astype(np.float64)  # every SGD epoch visits every sample
        check_finite_fit(W, bias, what="the features' kernel values", remedy="rescale the features, e.g. to [0, 1]")
        if alpha is not None:
            self.alpha_ = alpha
        elif hasattr(self, "alpha_"):
            del self.alpha_  # from an earlier dual fit
        self.n_passes_ = n_passes
        stopped = int(np.count_nonzero(n_iter >= self.max_iter))
        if stopped:  # one warning for all the binary problems, as LIBLINEAR's "reaching max number of iterations"
            warnings.warn(
                f"PmSVM: {stopped} of {n_models} binary problems stopped at max_iter={self.max_iter} epochs "
                f"before converging to tol={self.tol}; increase max_iter",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.classes_ = classes
        self.x_max_ = x_max
        self.coef_ = W.reshape(n_models, d, n_basis)
        self.intercept_ = bias
        self.n_iter_ = n_iter
        # the table is a scoring cache derived from coef_ (8 ms for reuters, a third of its fit), built at first use;
        # the cache is a dict made here, so that scoring fills it without changing the estimator's own attributes
        self._cache = {}
        self._freeze()
        return self

    @property
    def table_(self) -> np.ndarray:
        """The lookup table (n_models, d, lut_bins) float64 for the current lut_bins, built from coef_ at the first
        access and cached; AttributeError if there is none (not fitted, lut_bins None, or beyond TABLE_MAX_BYTES)."""
        check_fitted(self, "coef_")
        table = self._build_table(self.lut_bins)
        if table is None:
            raise AttributeError("no lookup table: lut_bins is None or the table would exceed TABLE_MAX_BYTES")
        return table

    def _build_table(self, lut_bins):
        """The table for ``lut_bins`` (the current value, read once by the caller: another thread may set it) from
        coef_ (cached), or None (lut_bins None or beyond TABLE_MAX_BYTES). Scoring calls this, so it never uses a
        stale table."""
        m, d, n_basis = self.coef_.shape
        if lut_bins is not None:  # it may have been set after fit
            # a Python int: as an int16, m * d * lut_bins below would overflow
            lut_bins = check_scalar(lut_bins, "lut_bins", lo=2, hi=2**20, integer=True)
        cache = self.__dict__.setdefault("_cache", {})  # made by fit or load; a model assembled by hand gets one here
        if lut_bins is None or m * d * lut_bins * 8 > TABLE_MAX_BYTES:
            cache.pop("table", None)
            return None
        table = cache.get("table")
        if table is None or table.shape != (m, d, lut_bins):
            table = self.coef_.reshape(-1, n_basis) @ self._node_e(lut_bins).T
            table = cache["table"] = table.reshape(m, d, lut_bins)
        return table

    def _node_e(self, lut_bins):
        """e at the lut_bins nodes of [0, 1] (in each feature's unit x_max_[j]): (lut_bins, n_anchors), the rows both
        scoring paths interpolate."""
        return explanatory_variables(np.linspace(0.0, 1.0, lut_bins), self.coef_.shape[2])

    def _expanded(self, X, lut_bins):
        """E(X), the CSR (n, d * n_anchors) matrix with e(x_ij / x_max_[j]) at columns j * n_anchors + b for the
        nonzero x_ij, so that decision values are E(X) @ coef_.reshape(n_models, -1).T + intercept_. With
        lut_bins, e is interpolated between the table's nodes and clamped at x_max_[j], as :func:`lut_decision`
        does with ``table_`` (the table is linear in e), so the two agree to rounding."""
        X = sp.csr_matrix(X)
        n_basis = self.coef_.shape[2]
        u = X.data / self.x_max_[X.indices]
        if lut_bins is None:
            e = explanatory_variables(u, n_basis)
        else:
            s = np.minimum(u, 1.0) * (lut_bins - 1)
            k = np.minimum(s.astype(np.int64), lut_bins - 2)
            nodes = self._node_e(lut_bins)
            e = nodes[k] + (s - k)[:, None] * (nodes[k + 1] - nodes[k])
        indices = (X.indices.astype(np.int64)[:, None] * n_basis + np.arange(n_basis)).ravel()
        return sp.csr_matrix(
            (e.ravel(), indices, X.indptr.astype(np.int64) * n_basis), shape=(X.shape[0], X.shape[1] * n_basis)
        )

    def decision_function(self, X: MatrixLike) -> np.ndarray:
        """Decision values: (n,) for two classes (> 0 means classes_[1]), else (n, n_classes).

        Multiclass "ovr": the per-class decision values; "ovo": votes per class plus the summed pairwise
        decision values squashed into (-1/3, 1/3) to break ties (LIBSVM / scikit-learn convention).

        With ``table_`` this is :func:`lut_decision` (O(d) per sample); otherwise the regression
        f_m(x) = intercept_m + sum_{j: x_j > 0} e(x_j / x_max_[j])^T coef_[m, j] (Eq. 40 with the learned w; e
        interpolated between the table's nodes if lut_bins), one sparse product for all models.
        X: (n, d) nonnegative array or CSR matrix with the training number of features. Raises
        :class:`svmcore.NotFittedError` before fit, ValueError for negative features, NaN/inf or a wrong
        number of features.
        """
        check_fitted(self, "coef_")
        X = self._check_X(X)
        check_n_features(X, self.coef_.shape[1], owner=self)
        lut_bins = self.lut_bins  # once: a set_params from another thread must not mix two resolutions
        table = self._build_table(lut_bins)
        if table is not None:
            out = lut_decision(X, table, self.x_max_, self.intercept_)
        else:
            out = self._expanded(X, lut_bins) @ self.coef_.reshape(len(self.coef_), -1).T + self.intercept_
        if out.shape[1] == 1:
            return out[:, 0]
        return out if self._param("multi_class") == "ovr" else ovo_votes(out, self._pairs(), len(self.classes_))

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Predicted labels (n,) with the dtype of ``classes_``; errors as :meth:`decision_function`."""
        f = self.decision_function(X)
        if f.ndim == 1:
            return self.classes_[(f > 0).astype(np.int64)]
        return self.classes_[np.argmax(f, axis=1)]

    def _check_state(self):
        super()._check_state()
        m, d, b = self.coef_.shape if self.coef_.ndim == 3 else (None, None, None)
        if m is None or b != len(pmsvm_anchors(self.n_anchors)):
            raise ValueError(f"coef_ has shape {self.coef_.shape}; expected (n_models, d, {self.n_anchors})")
        n_classes = len(self.classes_)
        if n_classes < 2 or m != len(self._pairs()):
            raise ValueError(f"coef_ holds {m} models for {n_classes} classes")
        if self.intercept_.shape != (m,) or self.n_iter_.shape != (m,):
            raise ValueError("intercept_ and n_iter_ must have one entry per model")
        if self.x_max_.shape != (d,) or self.x_max_.dtype.kind != "f":
            raise ValueError(
                f"x_max_ must be a ({d},) float array (one unit per feature), got {self.x_max_.dtype} "
                f"of shape {self.x_max_.shape}"
            )
        if not (self.x_max_ > 0).all():  # NaN and infinity are refused by the base class's check
            raise ValueError(f"x_max_ must hold positive numbers (the feature units), found {self.x_max_.min()!r}")
        self.x_max_ = self.x_max_.astype(np.float64)
        self.__dict__.setdefault("_cache", {})
