"""SVM+: learning using privileged information (Vapnik and Vashist 2009), by the fast algorithms of
Li, Dai, Tan, Xu, Van Gool, "Fast Algorithms for Linear and Kernel SVM+", CVPR 2016.

Each training sample i has main features x_i and privileged features x*_i (available at training time
only). SVM+ models the slack of sample i by a correcting function xi(x*_i) = w*'x*_i + b*, so the
privileged view tells the classifier f(x) = w'x + b how hard each sample is. Both estimators absorb the
biases into w and w* by a constant feature (Eq. 7), which removes the dual's equality constraints:

- :class:`LinearSVMPlus` solves the bound-constrained dual (8)/(9) by dual coordinate descent
  (Algorithm 1, :mod:`svmcore.dcd`), in O(nnz) per epoch, for dense or sparse features.
- :class:`KernelSVMPlus` solves the l2-loss SVM+ (18) through its dual (22), min 1/2 a'(H + G)a over the
  simplex, which is a one-class SVM dual (23) with nu = 1/n, by svmcore's SMO solver (Algorithm 2).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg

from . import persistence
from .validation import (
    ConvergenceWarning,
    check_array,
    check_choice,
    check_finite_fit,
    check_fitted,
    check_labels,
    check_n_features,
    check_random_state,
    check_scalar,
    make_rng,
)
from .base import BaseEstimator, ClassifierMixin
from .dcd import FIRST_PHASE_CAP, as_rows, dcd_svmplus
from .kernels import (
    KernelSpec,
    check_fitted_gamma,
    check_gamma,
    kernel_block,
    kernel_decision,
    resolve_kernel,
    row_norms_sq,
)

if TYPE_CHECKING:
    import scipy.sparse as sp
    from numpy.typing import ArrayLike

    from .validation import MatrixLike, RandomStateLike


def _check_fit_input(X, X_star, y):
    """Validate fit arguments; return X, X_star (float64 arrays or CSR), classes_ and y in {+1, -1}."""
    X = check_array(X, "X", allow_sparse=True)
    X_star = check_array(X_star, "X_star", allow_sparse=True)
    if X_star.shape[0] != X.shape[0]:
        raise ValueError(
            f"X_star: has {X_star.shape[0]} rows but X has {X.shape[0]}; "
            "each training sample needs its privileged features"
        )
    classes, y_index = check_labels(y, X.shape[0], min_classes=2, max_classes=2)
    return X, X_star, classes, np.where(y_index == 1, 1.0, -1.0)


def _check_predict_input(est, X, attribute):
    check_fitted(est, attribute)
    X = check_array(X, "X", allow_sparse=True)
    check_n_features(X, est.n_features_in_, owner=est)
    return X


class _Classifier(ClassifierMixin):
    """predict() from decision_function(): sign -> classes_[1] for > 0 (scikit-learn's convention)."""

    def predict(self, X):
        """Class labels (n,) with the dtype of the training labels: classes_[1] where f(x) > 0. Raises as
        :meth:`decision_function`."""
        f = self.decision_function(X)
        return self.classes_[(f > 0).astype(np.int64)]

    def _check_params(self):
        check_scalar(self.C, "C", lo=0, lo_open=True)
        check_scalar(self.gamma, "gamma", lo=0, lo_open=True)
        check_scalar(self.tol, "tol", lo=0, lo_open=True)


@persistence.register
class LinearSVMPlus(_Classifier, BaseEstimator):
    """Linear SVM+ trained by dual coordinate descent (Li et al. CVPR 2016, Section 3, Algorithm 1).

    Primal (biases absorbed, Eq. 7): min 1/2 ||w||^2 + gamma/2 ||w*||^2 + C sum_i w*'x~*_i subject to
    y_i w'x~_i >= 1 - w*'x~*_i and w*'x~*_i >= 0, with x~ = [x; 1], x~* = [x*; 1]. Its dual (8) over
    alpha, zeta >= 0 is solved by Algorithm 1 (:func:`svmcore.dcd.dcd_svmplus`).

    Parameters: ``C`` > 0 (loss weight), ``gamma`` > 0 (weight of ||w*||^2, the capacity of the
    correcting function), ``tol`` > 0 (stop when max - min projected gradient over all 2n coordinates, measured
    at the returned w and w*, is <= tol: LIBLINEAR's rule with its confirming epoch replaced by a check at a fixed
    w), ``max_iter`` (epochs, each check one; svmcore.ConvergenceWarning if reached), ``random_state``
    (seed of the coordinate order; None draws one).

    Learned: ``coef_`` (d,), ``intercept_`` (float): f(x) = coef_'x + intercept_; ``coef_star_`` (d*,),
    ``intercept_star_``: the correcting function xi(x*) = coef_star_'x* + intercept_star_;
    ``classes_`` (2,); ``objective_`` (value of the minimised dual (8)); ``n_iter_`` (epochs);
    ``n_passes_`` (coordinate gradients evaluated / 2n, the work in full passes: < n_iter_ once shrinking drops
    coordinates at their bound; after fit only, not saved, as PmSVM's); ``kkt_violation_`` (max PG - min PG over all
    coordinates at the returned point; if max_iter ran out, that of the last epoch's active set); ``n_features_in_``.
    """

    _state_arrays = ("coef_", "coef_star_", "classes_")
    _state_meta = ("intercept_", "intercept_star_", "objective_", "n_iter_", "kkt_violation_", "n_features_in_")

    def __init__(
        self,
        C: float = 1.0,
        gamma: float = 1.0,
        tol: float = 1e-2,
        max_iter: int = 1000,
        random_state: RandomStateLike = None,
    ) -> None:
        self.C = C
        self.gamma = gamma
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def _check_params(self):
        super()._check_params()
        check_scalar(self.max_iter, "max_iter", lo=1, integer=True)
        check_random_state(self.random_state)

    def fit(self, X: MatrixLike, X_star: MatrixLike, y: ArrayLike) -> LinearSVMPlus:
        """Train on X (n, d) and privileged X_star (n, d*), float arrays or scipy.sparse; y (n,) two classes.

        Raises ValueError for mismatched rows, NaN/inf, features whose squared norms overflow, a single class,
        C <= 0, gamma <= 0, tol <= 0, max_iter < 1; TypeError for non-numeric input. Returns self; a failed fit
        leaves an earlier fit's model unchanged.
        """
        self._check_params()
        X, Z, classes, ys = _check_fit_input(X, X_star, y)
        C, gamma = float(self.C), float(self.gamma)
        seed = int(make_rng(self.random_state).integers(2**31 - 1))
        n = X.shape[0]
        alpha = np.zeros(n)
        zeta = np.full(n, C)  # alpha + zeta - C = 0, so w = 0 and w* = 0 at the start
        w = np.zeros(X.shape[1] + 1)
        w_star = np.zeros(Z.shape[1] + 1)
        sq_x, sq_z = row_norms_sq(X), row_norms_sq(Z)
        check_finite_fit(sq_x, sq_z)  # the linear kernel's diagonal, which Algorithm 1 divides by
        n_iter, n_passes, violation, converged = dcd_svmplus(
            as_rows(X),
            as_rows(Z),
            ys,
            sq_x,
            sq_z,
            C,
            gamma,
            alpha,
            zeta,
            w,
            w_star,
            float(self.tol),
            int(self.max_iter),
            seed,
            FIRST_PHASE_CAP,
        )
        if not converged:
            warnings.warn(
                f"LinearSVMPlus: stopped after max_iter={self.max_iter} epochs before its "
                f"projected-gradient spread over all coordinates was checked <= tol={self.tol} "
                f"(last measured: {violation:.3g}); "
                "increase max_iter (convergence slows as gamma decreases)",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.coef_, self.intercept_ = w[:-1], float(w[-1])
        self.coef_star_, self.intercept_star_ = w_star[:-1], float(w_star[-1])
        self.classes_ = classes
        self.objective_ = float(0.5 * w @ w + 0.5 * gamma * w_star @ w_star - alpha.sum())
        self.n_iter_ = int(n_iter)
        self.n_passes_ = float(n_passes)
        self.kkt_violation_ = float(max(violation, 0.0))
        self.n_features_in_ = int(X.shape[1])
        self._freeze()
        return self

    def decision_function(self, X: MatrixLike) -> np.ndarray:
        """f(x) = coef_'x + intercept_ for X (m, d) dense or sparse; returns (m,) float64. Raises
        :class:`svmcore.NotFittedError` before fit and ValueError for a wrong number of features, NaN or inf."""
        X = _check_predict_input(self, X, "coef_")
        return np.asarray(X @ self.coef_).ravel() + self.intercept_

    def correcting_function(self, X_star: MatrixLike) -> np.ndarray:
        """The learned slack model xi(x*) = coef_star_'x* + intercept_star_ for X_star (m, d*); (m,) float64.
        Raises :class:`svmcore.NotFittedError` before fit and ValueError for a wrong number of features, NaN or
        inf."""
        check_fitted(self, "coef_star_")
        X_star = check_array(X_star, "X_star", allow_sparse=True)
        check_n_features(X_star, self.coef_star_.shape[0], "X_star")
        return np.asarray(X_star @ self.coef_star_).ravel() + self.intercept_star_

    def _check_state(self):
        super()._check_state()
        if self.coef_.ndim != 1 or self.coef_.shape[0] != self.n_features_in_:
            raise ValueError(f"coef_ has shape {self.coef_.shape}, expected ({self.n_features_in_},)")
        if self.coef_star_.ndim != 1:
            raise ValueError(f"coef_star_ has shape {self.coef_star_.shape}, expected 1-D")
        if self.classes_.shape != (2,):
            raise ValueError(f"classes_ has shape {self.classes_.shape}, expected (2,)")


def mean_distance_gamma(X: np.ndarray | sp.spmatrix) -> float:
    """1 / mean_{i,j} ||x_i - x_j||^2 over all n^2 pairs: the Gaussian-kernel width of Li et al.'s demo.

    Computed in O(nd) as 1 / (2 mean ||x_i||^2 - 2 ||mean x||^2). Returns 1.0 if all rows are equal.
    """
    mean = np.asarray(X.mean(axis=0)).ravel()
    msd = 2.0 * row_norms_sq(X).mean() - 2.0 * mean @ mean
    return 1.0 / msd if msd > 1e-12 else 1.0


def correcting_gram(K_star_aug: np.ndarray, C: float, gamma: float) -> np.ndarray:
    """G = (1/C)(I - (I + (C/gamma) K~*)^-1) of Eq. (22), for the bias-augmented K~* = K* + 1 (n, n).

    Computed as the equal form G = (gamma I + C K~*)^-1 K~* by one Cholesky factorisation of the
    positive definite gamma I + C K~* (eigenvalues >= gamma) and a triangular solve: no explicit
    inverse, and no I - (...) cancellation, which would lose all digits of G where C lam << gamma.
    ValueError if C / gamma is so large that the factorisation fails in floating point.
    """
    A = C * K_star_aug
    A[np.diag_indices_from(A)] += gamma
    try:
        factor = scipy.linalg.cho_factor(A, lower=True, overwrite_a=True, check_finite=False)
    except np.linalg.LinAlgError:  # rounding of C K~* (about C max|K~*| eps) swamps gamma: C max|K~*| / gamma ~ 1e15
        # (the kernel's scale counts as much as C / gamma: a linear K* of features ~ 1e8 fails at C = gamma)
        k_max = float(np.abs(np.diag(K_star_aug)).max())  # K~* is PSD: its largest entry is on the diagonal
        raise ValueError(
            f"C max(K* + 1) / gamma = {C * k_max / gamma:.3g} (C / gamma = {C / gamma:.3g}, "
            f"max(K* + 1) = {k_max:.3g}) is too large: gamma I + C (K* + 1) is not positive definite in "
            "floating point; lower C, raise gamma or scale the privileged features down"
        ) from None
    G = scipy.linalg.cho_solve(factor, K_star_aug, check_finite=False)
    return 0.5 * (G + G.T)


def l2_svmplus_q(K_aug: np.ndarray, K_star_aug: np.ndarray, y: np.ndarray, C: float, gamma: float) -> np.ndarray:
    """Q = H + G of the l2-SVM+ dual (22): H = K~ o yy' with K~ = K + 1, G from :func:`correcting_gram`."""
    return K_aug * np.outer(y, y) + correcting_gram(K_star_aug, C, gamma)


def _solve_relative(Q, tol):
    """Solve (23) by SMO until the KKT violation is at most ``tol`` times the margin rho = a'Qa.

    The dual's scale varies by orders of magnitude with C, gamma and n (rho = a'Qa over the simplex),
    so an absolute tolerance is either loose or unreachable: start from the bound rho <= mean(Q) (the
    value at a = 1/n) and tighten, warm-started, until the violation is small relative to rho.
    """
    from .qmatrix import PrecomputedQ
    from .smo import solve

    n = Q.shape[0]
    # float64: rho can be 1e-7 of max|Q| (raw pendigits, linear kernels), where float32's rounding of Q (6e-8
    # max|Q|) swamps the tolerance tol * rho: SMO then reported convergence up to 4% above the optimum
    Qm = PrecomputedQ(Q, dtype=np.float64)
    ones = np.ones(n)
    alpha = np.full(n, 1.0 / n)
    # Q is in memory, so a large working set costs no kernel evaluations; it covers the many free
    # support vectors of (23) in a few outer iterations (CBCL, n = 2000: 0.10 s at 1024 vs 1.1 s at 64)
    q = min(n, 1024)
    scale = float(Q.mean())
    # below this the violation is rounding: a degenerate problem (rho -> 0, e.g. contradictory duplicate rows at
    # large C) would otherwise chase an ever smaller tolerance without end
    floor = 1e3 * np.finfo(np.float64).eps * max(abs(float(Q.max())), abs(float(Q.min())))  # no n x n temporary
    n_iter = 0
    for _ in range(4):
        res = solve(Qm, np.zeros(n), ones, ones, alpha, tol=max(tol * scale, floor), working_set_size=q)
        n_iter += res.n_iter
        alpha = res.alpha
        scale = float(alpha @ res.gradient)  # = a'Qa = rho at the optimum
        if res.kkt_violation <= max(tol * scale, floor):
            break
    if tol * scale < floor and res.kkt_violation > tol * scale:
        if 1e-3 * scale < floor:  # even the default tol asks for less than rounding: rho itself is at that level
            why = (
                f"l2-SVM+ margin rho = a'Qa = {scale:.3g} is at rounding level: a degenerate problem "
                "(contradictory rows at this C?)"
            )
        else:  # rho is fine; only the requested tol is below what rounding of Q lets SMO certify
            why = (
                f"tol={tol:g} asks for a KKT violation of tol * rho = {tol * scale:.3g} (rho = a'Qa = "
                f"{scale:.3g}), below the rounding level of Q ({floor:.3g}): the solution is as accurate as "
                "rounding lets SMO certify"
            )
        warnings.warn(f"{why}; stopped at KKT violation {res.kkt_violation:.3g}", ConvergenceWarning, stacklevel=3)
    res.n_iter = n_iter
    return res


@persistence.register
class KernelSVMPlus(_Classifier, BaseEstimator):
    """Kernel l2-loss SVM+ trained as a one-class SVM by SMO (Li et al. CVPR 2016, Section 4, Algorithm 2).

    Model (18): min 1/2 (||w||^2 + gamma ||w*||^2) - rho + C/2 sum_i (w*'phi~*(x*_i))^2 subject to
    y_i w'phi~(x_i) >= rho - w*'phi~*(x*_i), biases absorbed (kernels K + 1). Dual (22):
    min_a 1/2 a'(H + G)a over a >= 0, 1'a = 1, with H = (K + 1) o yy' and
    G = (1/C)(I - (I + (C/gamma)(K* + 1))^-1); this is the one-class SVM dual (23) with nu = 1/n, solved
    by :func:`svmcore.smo.solve` on a :class:`svmcore.qmatrix.PrecomputedQ`.
    Decision: f(x) = sum_i a_i y_i (K(x_i, x) + 1) = sum_sv dual_coef_ K(sv, x) + intercept_.

    Parameters: ``C`` > 0, ``gamma`` > 0 (as in :class:`LinearSVMPlus`); ``kernel`` / ``kernel_star`` in
    {"rbf", "linear"} for the main and privileged features; ``kernel_gamma`` / ``kernel_star_gamma``:
    the rbf width exp(-g ||a - b||^2): a number > 0, "scale", "auto", or None for
    1 / (mean squared pairwise distance) of the training rows (the authors' demo);
    ``tol``: SMO stopping tolerance on the KKT violation, relative to the margin rho.
    Memory O(n^2) and time O(n^3) (the Cholesky factorisation for G): for n up to a few thousand.

    Learned: ``support_`` (n_sv,) int64 training indices, ``support_vectors_`` (n_sv, d) float64 (a CSR matrix
    with sorted indices if X was sparse, else an array), ``dual_coef_`` (n_sv,) = a_i y_i, ``intercept_`` =
    sum(dual_coef_), ``rho_`` (the margin rho of (18)),
    ``kernel_gamma_``, ``kernel_star_gamma_`` (resolved widths, 0 for linear), ``classes_``,
    ``objective_`` (1/2 a'Qa), ``n_iter_``, ``kkt_violation_``, ``n_features_in_``.
    """

    _state_arrays = ("support_", "support_vectors_", "dual_coef_", "classes_")
    _sparse_arrays = ("support_vectors_",)
    _state_meta = (
        "intercept_",
        "rho_",
        "kernel_gamma_",
        "kernel_star_gamma_",
        "objective_",
        "n_iter_",
        "kkt_violation_",
        "n_features_in_",
    )
    _kernels = ("rbf", "linear")

    def __init__(
        self,
        C: float = 1.0,
        gamma: float = 1.0,
        kernel: str = "rbf",
        kernel_gamma: float | str | None = None,
        kernel_star: str = "rbf",
        kernel_star_gamma: float | str | None = None,
        tol: float = 1e-3,
    ) -> None:
        self.C = C
        self.gamma = gamma
        self.kernel = kernel
        self.kernel_gamma = kernel_gamma
        self.kernel_star = kernel_star
        self.kernel_star_gamma = kernel_star_gamma
        self.tol = tol

    def _check_params(self):
        super()._check_params()
        for name in ("kernel", "kernel_star"):
            check_choice(getattr(self, name), name, self._kernels)
            g = getattr(self, f"{name}_gamma")
            if g is not None:  # None: the authors' mean-distance width
                check_gamma(g, f"{name}_gamma")

    @staticmethod
    def _resolve(kernel, X, g):
        if kernel == "rbf" and g is None:
            return KernelSpec("rbf", mean_distance_gamma(X))
        return resolve_kernel(kernel, X, g, 3, 0.0)

    def _spec(self):
        kernel = self._param("kernel")
        return KernelSpec(kernel, self.kernel_gamma_) if kernel == "rbf" else KernelSpec("linear")

    def fit(self, X: MatrixLike, X_star: MatrixLike, y: ArrayLike) -> KernelSVMPlus:
        """Train on X (n, d) and privileged X_star (n, d*), float arrays or scipy.sparse; y (n,) two classes.

        Raises ValueError for mismatched rows, NaN/inf, kernel values that overflow (features too large), a
        single class, C <= 0, gamma <= 0, C max(K* + 1) / gamma too large to factorise (about 1e15: a large C / gamma
        or large privileged features), tol <= 0, an unknown kernel or a kernel width <= 0; TypeError for non-numeric
        input. Returns self; a failed fit leaves an earlier fit's model unchanged.
        """
        self._check_params()
        X, Z, classes, ys = _check_fit_input(X, X_star, y)
        spec = self._resolve(self.kernel, X, self.kernel_gamma)
        spec_star = self._resolve(self.kernel_star, Z, self.kernel_star_gamma)
        K_aug = kernel_block(X, X, spec) + 1.0
        K_star_aug = kernel_block(Z, Z, spec_star) + 1.0
        Q = l2_svmplus_q(K_aug, K_star_aug, ys, float(self.C), float(self.gamma))
        res = _solve_relative(Q, float(self.tol))
        alpha = res.alpha
        check_finite_fit(alpha, res.rho)
        sv = np.flatnonzero(alpha > 0)
        self.support_ = sv.astype(np.int64)
        self.support_vectors_ = X[sv]  # CSR rows stay CSR (check_array made them canonical), as SVC's
        self.dual_coef_ = alpha[sv] * ys[sv]
        self.intercept_ = float(self.dual_coef_.sum())
        self.rho_ = float(res.rho)
        self.kernel_gamma_ = float(spec.gamma) if spec.kind == "rbf" else 0.0
        self.kernel_star_gamma_ = float(spec_star.gamma) if spec_star.kind == "rbf" else 0.0
        self.classes_ = classes
        self.objective_ = float(0.5 * alpha @ Q @ alpha)
        self.n_iter_ = int(res.n_iter)
        self.kkt_violation_ = float(res.kkt_violation)
        self.n_features_in_ = int(X.shape[1])
        self._freeze()
        return self

    def decision_function(self, X: MatrixLike) -> np.ndarray:
        """f(x) = sum_sv dual_coef_ K(sv, x) + intercept_ for X (m, d) dense or sparse; (m,) float64. Raises
        :class:`svmcore.NotFittedError` before fit and ValueError for a wrong number of features, NaN or inf."""
        X = _check_predict_input(self, X, "dual_coef_")
        # as SVC's (in blocks; rbf rows centred); the dual coefficients do not sum to 0, so linear rows are not centred
        f = kernel_decision(X, self.support_vectors_, self.dual_coef_[:, None], self._spec(), coef_sum_zero=False)
        return f[:, 0] + self.intercept_

    def _check_state(self):
        super()._check_state()
        n_sv = self.dual_coef_.shape[0] if self.dual_coef_.ndim == 1 else -1
        if n_sv < 0 or self.support_.shape != (n_sv,):
            raise ValueError(f"dual_coef_ {self.dual_coef_.shape} and support_ {self.support_.shape} disagree")
        if self.support_vectors_.shape != (n_sv, self.n_features_in_):
            raise ValueError(
                f"support_vectors_ has shape {self.support_vectors_.shape}, expected ({n_sv}, {self.n_features_in_})"
            )
        if self.classes_.shape != (2,):
            raise ValueError(f"classes_ has shape {self.classes_.shape}, expected (2,)")
        if self.kernel == "rbf" and not self.kernel_gamma_ > 0:
            raise ValueError(f"kernel_gamma_ must be > 0 for the rbf kernel, got {self.kernel_gamma_}")
        # (the privileged features' count is not kept: their "auto" width goes unchecked)
        for name, d in (("kernel", self.n_features_in_), ("kernel_star", None)):
            check_fitted_gamma(
                getattr(self, name),
                getattr(self, f"{name}_gamma"),
                getattr(self, f"{name}_gamma_"),
                d,
                names=(f"{name}_gamma", f"{name}_gamma_"),
                unused=0.0,
            )
