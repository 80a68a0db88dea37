"""Top-k multiclass SVM trained by Prox-SDCA (Lapin, Hein, Schiele, "Top-k Multiclass SVM", NIPS 2015)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from . import persistence
from .validation import (
    ConvergenceWarning,
    check_array,
    check_choice,
    check_finite_fit,
    check_fitted,
    check_labels,
    check_n_features,
    check_precomputed_kernel,
    check_random_state,
    check_scalar,
    make_rng,
)
from .base import BaseEstimator, ClassifierMixin
from .kernels import check_fitted_gamma, kernel_block, resolve_kernel, row_norms_sq
from .sdca import block_violations, cs_fit, kernel_epoch, linear_epoch, objectives

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .validation import MatrixLike, RandomStateLike

# Shrinking schedule (tuned on letter, USPS, sector): after each exact duality-gap check, sweep over the
# examples whose block is not optimal until their largest step is INNER_DECREASE times the initial one,
# for at most MAX_INNER_SWEEPS sweeps and INNER_BUDGET * n block steps.
INNER_DECREASE = 0.01
MAX_INNER_SWEEPS = 100
INNER_BUDGET = 10
# k = 1, linear (Crammer-Singer, svmcore.sdca.cs_fit): at most CS_MAX_SWEEPS sweeps between exact gap checks.
CS_MAX_SWEEPS = 1000


def _csr_arrays(X):
    """CSR arrays (indptr int64, indices int64, data float64) and squared row norms (n,) of X, dense or sparse.
    Built directly for dense X: scipy's conversion costs about as much as a few sweeps on small dense sets."""
    if sp.issparse(X):
        Xc = sp.csr_matrix(X)
        return Xc.indptr.astype(np.int64), Xc.indices.astype(np.int64), Xc.data, row_norms_sq(Xc)
    X = np.ascontiguousarray(X, dtype=np.float64)
    mask = X != 0.0
    indptr = np.zeros(X.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.count_nonzero(mask, axis=1), out=indptr[1:])
    sq_norms = np.einsum("ij,ij->i", X, X)
    if indptr[-1] == X.size:  # no zeros
        return indptr, np.tile(np.arange(X.shape[1], dtype=np.int64), X.shape[0]), X.ravel(), sq_norms
    return indptr, np.nonzero(mask)[1].astype(np.int64), X[mask], sq_norms


def _append_constant(X, value):
    """X (n, d) dense or CSR with a column of ``value`` appended: (n, d + 1), same kind."""
    column = np.full((X.shape[0], 1), value)
    return sp.hstack([X, column], format="csr") if sp.issparse(X) else np.hstack([X, column])


@persistence.register
class TopKSVM(ClassifierMixin, BaseEstimator):
    """Top-k multiclass SVM: minimise 1/2 ||W||^2 + C sum_i loss_k(W' x_i, y_i) by Prox-SDCA.

    Parameters
    ----------
    k : int, 1 <= k < n_classes. k = 1 is the Crammer-Singer multiclass SVM (without bias, unless fit_intercept).
    C : float > 0, C = 1/(lambda n) in the paper's notation.
    loss : "alpha" (top-k hinge, eq. (3): max(0, mean of the k largest margins 1 + s_j - s_y, j != y)) or
        "beta" (eq. (5): mean of the k largest hinge terms max(0, 1 + s_j - s_y)). Both equal
        Crammer-Singer for k = 1; beta >= alpha.
    kernel : "linear" (W kept explicitly, sparse CSR input allowed), "rbf" (exp(-gamma ||a - b||^2)) or
        "precomputed" (X is the (n, n) training Gram matrix in fit, (n_test, n_train) in prediction).
    gamma : "scale", "auto" or float > 0, rbf only (see svmcore.kernels.resolve_kernel).
    tol : float > 0, stop when the relative duality gap (P - D) / P <= tol, computed exactly over all
        examples at the start of every epoch.
    max_epochs : int >= 1, outer iterations. Each: the exact duality gap, then random-order sweeps over the
        examples whose block step is nonzero (shrinking; see INNER_DECREASE, MAX_INNER_SWEEPS, INNER_BUDGET).
        For k = 1 with kernel="linear" (Crammer-Singer) the sweeps are those of LIBLINEAR's sequential dual
        method, with shrinking of examples and of classes per example (Keerthi et al., KDD 2008; see
        svmcore.sdca.cs_fit); the same objectives and the same exact stopping rule.
    random_state : None, int >= 0, numpy Generator or RandomState; seeds the sweep orders.
    fit_intercept : bool (default False, as the paper and LIBLINEAR). True: a bias per class, regularised like
        the weights (LIBLINEAR's -B): linear models see a constant feature ``intercept_scaling`` appended to
        every row, kernel models the kernel K + intercept_scaling^2; the objective includes the bias's square.
    intercept_scaling : float > 0, that constant (LIBLINEAR's B; default 1). A larger value regularises the
        bias less.

    Learned attributes: ``classes_`` (m,), ``coef_`` (m, d) for linear models (empty (m, 0) otherwise),
    ``intercept_`` (m,) float64 added to the class scores (zeros without fit_intercept),
    ``support_`` (n_sv,) int64 training indices with nonzero dual variables, ``support_vectors_`` (n_sv, d)
    (rbf), ``dual_coef_`` (n_sv, m) rows of A (kernel models), ``primal_objective_``, ``dual_objective_``,
    ``duality_gap_`` = P - D (absolute; the stopping rule is duality_gap_ <= tol * primal_objective_),
    ``n_iter_`` (epochs run), ``gamma_``, ``n_features_in_``.

    Source: Prox-SDCA, Algorithm 1 of the paper; the per-example step is the biased projection of
    Proposition 4 (svmcore.projections), the duality gap its stopping criterion. Memory: the kernel models
    hold the (n, n) float64 Gram matrix during fit.
    """

    _state_arrays = ("classes_", "coef_", "intercept_", "support_", "support_vectors_", "dual_coef_")
    # files written before the intercept existed: no bias, intercept_ zero (filled in by _from_state)
    _params_added_later = {"fit_intercept": False, "intercept_scaling": 1.0}
    _state_meta = ("n_features_in_", "gamma_", "primal_objective_", "dual_objective_", "duality_gap_", "n_iter_")

    def __init__(
        self,
        k: int = 1,
        C: float = 1.0,
        loss: str = "alpha",
        kernel: str = "linear",
        gamma: float | str = "scale",
        tol: float = 1e-3,
        max_epochs: int = 1000,
        random_state: RandomStateLike = None,
        fit_intercept: bool = False,
        intercept_scaling: float = 1.0,
    ) -> None:
        self.k = k
        self.C = C
        self.loss = loss
        self.kernel = kernel
        self.gamma = gamma
        self.tol = tol
        self.max_epochs = max_epochs
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling

    # --- checks ----------------------------------------------------------------------------------------------
    def _check_params(self):
        check_scalar(self.k, "k", lo=1, integer=True)
        check_scalar(self.C, "C", lo=0.0, lo_open=True)
        check_choice(self.loss, "loss", ("alpha", "beta"))
        check_choice(self.kernel, "kernel", ("linear", "rbf", "precomputed"))
        check_scalar(self.tol, "tol", lo=0.0, lo_open=True)
        check_scalar(self.max_epochs, "max_epochs", lo=1, integer=True)
        check_random_state(self.random_state)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise TypeError(f"fit_intercept: expected a bool, got {self.fit_intercept!r}")
        # its square is a kernel term
        check_scalar(self.intercept_scaling, "intercept_scaling", lo=0.0, lo_open=True, hi=1e150)

    @property
    def _sparse_input(self):
        return self.kernel == "linear"

    @property
    def _pairwise_input(self):
        return self.kernel == "precomputed"

    def _check_X(self, X, name="X"):
        return check_array(X, name, allow_sparse=self._sparse_input)

    @staticmethod
    def _labels(y, n, classes):
        if classes is None:
            return check_labels(y, n)
        if np.ndim(classes) != 1:
            raise ValueError(f"classes: expected a 1-D list of the class labels, got {classes!r}")
        classes, _ = check_labels(classes, len(classes), name="classes")
        if len(np.asarray(y).ravel()) != n:
            raise ValueError(f"y: has {len(np.asarray(y).ravel())} labels for {n} samples")
        y_arr, y_index = check_labels(y, n, min_classes=1)
        unknown = np.setdiff1d(y_arr, classes)
        if unknown.size:
            raise ValueError(f"y: labels {unknown.tolist()} are not in classes")
        empty = np.setdiff1d(classes, y_arr)
        if empty.size:
            raise ValueError(f"classes: {empty.tolist()} have no training samples; every class needs at least one")
        return classes, y_index

    # --- training --------------------------------------------------------------------------------------------
    def fit(self, X: MatrixLike, y: ArrayLike, classes: ArrayLike | None = None) -> TopKSVM:
        """Train on X (n, d) float array (or CSR for kernel="linear"; (n, n) Gram matrix for "precomputed").

        y: (n,) labels. classes: optional list of all class labels; every one must occur in y.
        Raises ValueError for NaN/inf, fewer than 2 classes, a class without samples, k >= n_classes,
        a non-square precomputed kernel or bad hyperparameters; TypeError for non-numeric input.
        Warns (svmcore.ConvergenceWarning) if max_epochs ends before the relative duality gap reaches tol.
        """
        self._check_params()
        X = self._check_X(X)
        n = X.shape[0]
        classes, y_index = self._labels(y, n, classes)
        m = classes.size
        if self.k >= m:
            raise ValueError(f"k: must be smaller than the number of classes ({m}), got {self.k}")
        if self.kernel == "precomputed":
            check_precomputed_kernel(X)
        k, C, beta = int(self.k), float(self.C), self.loss == "beta"
        rng = make_rng(self.random_state)
        A = np.zeros((n, m))
        spec = resolve_kernel(self.kernel, X, self.gamma, 3, 0.0)
        bias = float(self.intercept_scaling) if self.fit_intercept else 0.0
        if self.kernel == "linear":
            Xb = _append_constant(X, bias) if bias else X
            indptr, indices, data, sq_norms = _csr_arrays(Xb)
            W = np.zeros((Xb.shape[1], m))
        else:
            K = X if self.kernel == "precomputed" else kernel_block(X, X, spec)
            K = np.array(K, dtype=np.float64) + bias * bias if bias else np.ascontiguousarray(K, dtype=np.float64)
            active = np.zeros(n, dtype=np.bool_)
        diag = sq_norms if self.kernel == "linear" else np.ascontiguousarray(np.diag(K))
        if self.kernel == "linear" and k == 1:
            primal, dual, epoch = self._fit_crammer_singer(indptr, indices, data, sq_norms, y_index, A, W, C, rng)
            return self._store(X, classes, spec, primal, dual, epoch, W, A, bias)
        epoch = 0
        while True:
            epoch += 1
            if self.kernel == "linear":
                S = np.asarray(Xb @ W)
                w_sq = float(np.vdot(W, W))
            else:
                S = K @ A
                w_sq = float(np.vdot(A, S))
            primal, dual, _ = objectives(S, A, y_index, k, C, beta, w_sq)
            if primal - dual <= self.tol * abs(primal):
                break
            if epoch > self.max_epochs:
                self._warn_max_epochs(primal, dual, stacklevel=3)
                break
            # Shrinking: only blocks whose step from the current point is nonzero can change the objective;
            # sweep over them (random order) until their largest step falls well below the starting one.
            violation = block_violations(S, A, y_index, diag, k, C, beta)
            working = np.flatnonzero(violation > 0.0)
            target = INNER_DECREASE * violation.max()
            budget = INNER_BUDGET * n
            for _ in range(MAX_INNER_SWEEPS):
                order = rng.permutation(working)
                budget -= order.size
                steps = np.empty(order.size)
                if self.kernel == "linear":
                    change = linear_epoch(indptr, indices, data, sq_norms, y_index, A, W, order, k, C, beta, steps)
                else:
                    change = kernel_epoch(K, y_index, A, active, order, k, C, beta, steps)
                working = order[steps > 0.0]
                if change <= target or working.size == 0 or budget <= 0:
                    break
        return self._store(X, classes, spec, primal, dual, epoch - 1, W if self.kernel == "linear" else None, A, bias)

    def _warn_max_epochs(self, primal, dual, stacklevel):
        warnings.warn(
            f"TopKSVM: relative duality gap {(primal - dual) / abs(primal):.2e} > tol={self.tol} "
            f"after max_epochs={self.max_epochs}",
            ConvergenceWarning,
            stacklevel=stacklevel,
        )

    def _fit_crammer_singer(self, indptr, indices, data, sq_norms, y_index, A, W, C, rng):
        """k = 1, linear (Crammer-Singer): LIBLINEAR's sequential dual method with shrinking, stopped on the exact
        relative duality gap (svmcore.sdca.cs_fit). Returns (primal, dual, epochs)."""
        m = A.shape[1]
        zero = sq_norms <= 0.0  # x_i = 0 does not enter W: its block is optimal on the face sum x = C
        A[zero] = -C / (m - 1)
        A[zero, y_index[zero]] = C
        primal, dual, epoch, converged = cs_fit(
            indptr,
            indices,
            data,
            sq_norms,
            y_index,
            A,
            W,
            C,
            float(self.tol),
            int(self.max_epochs),
            CS_MAX_SWEEPS,
            int(rng.integers(2**62)),
        )
        if not converged:
            self._warn_max_epochs(primal, dual, stacklevel=4)
        return primal, dual, epoch

    def _store(self, X, classes, spec, primal, dual, epoch, W, A, bias):
        """Set the learned attributes; with a bias, W's last row (linear) or bias^2 sum_i A_i (kernels) is
        the intercept."""
        check_finite_fit(primal, dual, A, *([] if W is None else [W]))
        m = classes.size
        self.classes_ = classes
        self.n_features_in_ = int(X.shape[1])
        self.gamma_ = float(spec.gamma)
        self.primal_objective_, self.dual_objective_ = primal, dual
        self.duality_gap_ = primal - dual
        self.n_iter_ = epoch
        if not bias:
            self.intercept_ = np.zeros(m)
        elif self.kernel == "linear":
            self.intercept_, W = bias * W[-1], W[:-1]
        else:
            self.intercept_ = bias * bias * A.sum(axis=0)
        if self.kernel == "linear":
            self.coef_ = np.ascontiguousarray(W.T)
            self.support_ = np.zeros(0, dtype=np.int64)
            self.dual_coef_ = np.zeros((0, m))
            self.support_vectors_ = np.zeros((0, X.shape[1]))
        else:
            self.coef_ = np.zeros((m, 0))
            self.support_ = np.flatnonzero(np.any(A != 0.0, axis=1)).astype(np.int64)
            self.dual_coef_ = A[self.support_]
            self.support_vectors_ = X[self.support_] if self.kernel == "rbf" else np.zeros((0, X.shape[1]))
        self._freeze()
        return self

    # --- prediction ------------------------------------------------------------------------------------------
    def class_scores(self, X: MatrixLike) -> np.ndarray:
        """Class scores W' x + intercept_, (n, m) float64; X as in fit ((n_test, n_train) kernel for "precomputed").
        Raises :class:`svmcore.NotFittedError` before fit and ValueError for a wrong number of features."""
        check_fitted(self, "classes_")
        kernel = self._param("kernel")
        X = check_array(X, "X", allow_sparse=kernel == "linear")
        check_n_features(X, self.n_features_in_, owner=self)
        if kernel == "linear":
            scores = np.asarray(X @ self.coef_.T)
        elif kernel == "precomputed":
            scores = X[:, self.support_] @ self.dual_coef_
        else:
            spec = resolve_kernel("rbf", X, self.gamma_, 3, 0.0)
            scores = kernel_block(X, self.support_vectors_, spec) @ self.dual_coef_
        return scores + self.intercept_

    def decision_function(self, X: MatrixLike) -> np.ndarray:
        """:meth:`class_scores` (n, m); for two classes, scikit-learn's (n,) form: score of classes_[1] minus
        score of classes_[0] (> 0 means classes_[1]). Raises as :meth:`class_scores`."""
        scores = self.class_scores(X)
        return scores[:, 1] - scores[:, 0] if scores.shape[1] == 2 else scores

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Top-1 class label per row, (n,) with the dtype of ``classes_``. Raises as :meth:`class_scores`."""
        scores = self.class_scores(X)  # first: it raises NotFittedError before classes_ is read
        return self.classes_[np.argmax(scores, axis=1)]

    def predict_top_k(self, X: MatrixLike, k: int) -> np.ndarray:
        """The k highest-scoring labels per row, best first: (n, k). Raises ValueError unless 1 <= k <= m."""
        check_fitted(self, "classes_")
        check_scalar(k, "k", lo=1, hi=self.classes_.size, integer=True)
        top = np.argsort(-self.class_scores(X), axis=1, kind="stable")[:, :k]
        return self.classes_[top]

    # --- persistence -----------------------------------------------------------------------------------------
    @classmethod
    def _from_state(cls, params, meta, arrays):
        if "intercept_" not in arrays and not params.get("fit_intercept", False) and "classes_" in arrays:
            arrays = {**arrays, "intercept_": np.zeros(len(arrays["classes_"]))}  # a file from before the bias
        return super()._from_state(params, meta, arrays)

    def _check_state(self):
        super()._check_state()
        m, d = self.classes_.size, self.n_features_in_
        if m < 2 or self.k >= m:
            raise ValueError(f"classes_ has {m} entries for k={self.k}")
        if self.support_.ndim != 1 or self.support_.dtype.kind not in "iu":
            raise ValueError(f"support_ must be a 1-D integer array, got {self.support_.dtype} {self.support_.shape}")
        if self.kernel == "rbf" and not self.gamma_ > 0:
            raise ValueError(f"gamma_ must be > 0 for the rbf kernel, got {self.gamma_}")
        check_fitted_gamma(self.kernel, self.gamma, self.gamma_, d)
        if self.intercept_.shape != (m,):
            raise ValueError(f"intercept_ has shape {self.intercept_.shape}, expected {(m,)}")
        if not self.fit_intercept and np.any(self.intercept_ != 0):
            raise ValueError("intercept_ is nonzero in a model fitted with fit_intercept=False")
        n_sv = self.support_.shape[0]
        if self.kernel == "linear":
            if self.coef_.shape != (m, d):
                raise ValueError(f"coef_ has shape {self.coef_.shape}, expected {(m, d)}")
        elif self.coef_.shape != (m, 0):  # a kernel model has no primal weights
            raise ValueError(f"coef_ has shape {self.coef_.shape}, expected {(m, 0)} for the {self.kernel} kernel")
        elif self.dual_coef_.shape != (n_sv, m) or self.support_.ndim != 1:
            raise ValueError(f"dual_coef_ has shape {self.dual_coef_.shape}, expected {(n_sv, m)}")
        if self.kernel == "rbf" and self.support_vectors_.shape != (n_sv, d):
            raise ValueError(f"support_vectors_ has shape {self.support_vectors_.shape}, expected {(n_sv, d)}")
        if self.kernel == "precomputed" and n_sv and (self.support_.min() < 0 or self.support_.max() >= d):
            raise ValueError("support_ indexes outside the training kernel")
