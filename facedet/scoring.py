"""Fast window scoring: the cascade's cheap linear first stage and the SVM's exact decision function.

- :class:`Prefilter`: a cascade of linear filters on :func:`facedet.features.normalized_pixels` (Fisher
  discriminants, thresholds set for a high face recall on the training faces). Because a filter is orthogonal
  to the brightness plane, the first one's response over a whole image is one correlation divided by a
  per-window norm from running sums over a band of 19 rows; :mod:`facedet.scan` evaluates it densely, the
  later stages on the windows it passes, and only windows passing every stage reach the SVM.
- :func:`make_scorer`: the SVM decision function of batches of feature rows. A polynomial kernel of
  degree <= 2, K(s, x) = (gamma s'x + coef0)^d, makes f(x) = sum_i alpha_i y_i K(s_i, x) + b a quadratic
  form x'Ax + v'x + c with A = gamma^2 S' diag(alpha y) S, v = 2 gamma coef0 S'(alpha y),
  c = coef0^2 sum(alpha y) + b (Osuna et al. 1997 use d = 2): two BLAS products per batch instead of a loop
  over support vectors. An additive-kernel svmcore.PmSVM becomes a :class:`LUTScorer`: its per-dimension
  lookup table, O(d) per window whatever the number of training samples (Wu, TNNLS 2015; Yang and Wu,
  ACML 2012). Other classifiers fall back to their own ``decision_function``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from svmcore.parallel import blas_single_thread

from .features import RAMP_X, RAMP_Y, normalized_pixels
from .preprocess import WINDOW

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol, TypeAlias

    from numpy.typing import ArrayLike

    class Classifier(Protocol):
        """A fitted binary classifier, as the detector scores with it: svmcore.SVC, svmcore.PmSVM or any estimator with
        ``decision_function`` (for type checkers only)."""

        def decision_function(self, X: np.ndarray) -> np.ndarray: ...

    # (feature rows (n, p), floor) -> scores (n,), exact above floor: what :func:`make_scorer` returns
    Scorer: TypeAlias = Callable[[np.ndarray, float], np.ndarray]


class QuadraticScorer:
    """f(x) = x'Ax + v'x + c for feature rows x; A (p, p) symmetric, v (p,), c float.

    Evaluated in float32 (single-precision BLAS, twice the speed; features are in [-1, 1], so scores carry
    an absolute error of about 1e-5, far below any threshold's resolution); returns float64.

    Called with a ``floor``, most rows are settled by an exact upper bound instead (``rank`` > 0). With
    A = U diag(lambda) U' and z = U'x, the ``rank`` largest and ``rank`` most negative eigenvalues give a
    partial sum P(x) = c + v'x + sum_kept lambda_i z_i^2; every left-out term is at most lambda_+ z_i^2,
    lambda_+ the largest left-out eigenvalue (>= 0), and the left-out z_i^2 sum to r^2 = |x|^2 - sum_kept
    z_i^2 (U is orthonormal), so f(x) <= P(x) + lambda_+ r^2. Rows whose bound is <= floor keep the bound
    as their score (it is <= floor, the caller only needs to know that); the rest get the exact f. On the
    CBCL-trained detector the bound settles ~97% of the windows a scan scores above the cascade, at 2 rank
    / p of the cost of the full form.
    """

    def __init__(self, A: ArrayLike, v: ArrayLike, c: float, rank: int = 32) -> None:
        A = np.asarray(A, dtype=np.float64)
        self.A = np.ascontiguousarray(A, dtype=np.float32)
        self.v = np.ascontiguousarray(v, dtype=np.float32)
        self.c = float(c)
        # on one thread: with another program on the cores, OpenBLAS's threads took 0.5-1.4 s on this size instead
        # of ~0.01 s (on idle cores they save ~3 ms)
        with blas_single_thread():
            lam, U = np.linalg.eigh((A + A.T) / 2)  # ascending
        k = min(rank, len(lam) // 2)
        keep = np.r_[np.arange(k), np.arange(len(lam) - k, len(lam))] if k else np.arange(0)
        self.U = np.ascontiguousarray(U[:, keep], dtype=np.float32)
        self.lam = lam[keep].astype(np.float32)
        left = np.delete(lam, keep)
        self.lam_plus = float(max(left.max(), 0.0)) if len(left) else 0.0

    def _exact(self, X):
        return np.einsum("ij,ij->i", X @ self.A, X, dtype=np.float64) + (X @ self.v).astype(np.float64) + self.c

    def __call__(self, X: ArrayLike, floor: float = -np.inf) -> np.ndarray:
        """Scores (n,) float64 of rows X (n, p); with ``floor``, exact only where they may exceed it."""
        X = np.asarray(X, dtype=np.float32)
        if not np.isfinite(floor) or len(self.lam) == 0 or len(X) == 0:
            return self._exact(X)
        Z = X @ self.U
        Z *= Z
        bound = Z @ self.lam + X @ self.v + self.c
        bound += self.lam_plus * np.maximum(np.einsum("ij,ij->i", X, X) - Z.sum(axis=1), 0.0)
        out = bound.astype(np.float64)
        need = np.flatnonzero(bound > floor - 1e-3)  # float32 rounding of the bound is ~1e-5
        out[need] = self._exact(X[need])
        return out


class DecisionScorer:
    """Any fitted classifier with ``decision_function``, applied in batches of ``batch`` rows."""

    def __init__(self, classifier: Classifier, batch: int = 4096) -> None:
        self.classifier = classifier
        self.batch = batch

    def __call__(self, X: ArrayLike, floor: float = -np.inf) -> np.ndarray:
        """Scores (n,) of rows X (n, p); ``floor`` is accepted for the common interface and ignored."""
        X = np.asarray(X, dtype=np.float64)
        if len(X) == 0:
            return np.empty(0)
        return np.concatenate(
            [np.ravel(self.classifier.decision_function(X[i : i + self.batch])) for i in range(0, len(X), self.batch)]
        )


class LUTScorer:
    """f(x) = intercept + sum_j T_j(x_j) for nonnegative feature rows x (n, d): a binary PmSVM's lookup table
    (``table_[0]``, (d, N)) with its feature units ``x_max_`` ((d,), or one number for all features), evaluated
    by :func:`svmcore.pmsvm.lut_decision`; equals the PmSVM's ``decision_function``. Features are passed as
    float32 when they arrive so (no copy); returns float64 (n,).
    """

    def __init__(self, table: ArrayLike, x_max: ArrayLike, intercept: float) -> None:
        from svmcore.pmsvm import check_x_max

        self.table = np.ascontiguousarray(table, dtype=np.float64)[None]
        # the feature units (d,): PmSVM.x_max_, or one number for all features as models of earlier versions had
        self.x_max = check_x_max(x_max, self.table.shape[1])
        self.intercept = np.array([float(intercept)])

    def __call__(self, X: ArrayLike, floor: float = -np.inf) -> np.ndarray:
        """Scores (n,) of rows X (n, d); ``floor`` is accepted for the common interface and ignored."""
        from svmcore.pmsvm import lut_decision

        X = np.asarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        return lut_decision(X, self.table, self.x_max, self.intercept)[:, 0]


def _fitted(clf, name):
    """Hyperparameter ``name`` as the fitted model uses it (svmcore keeps it through a later set_params); None
    for a classifier without it (a PmSVM has no kernel)."""
    if hasattr(clf, "fitted_params") and hasattr(clf, name):
        return clf.fitted_params()[name]
    return getattr(clf, name, None)


def _resolved_gamma(clf):
    for name in ("gamma_", "_gamma"):  # (scikit-learn's SVC keeps its resolved gamma as _gamma)
        g = getattr(clf, name, None)
        if isinstance(g, (int, float, np.floating)):
            return float(g)
    g = _fitted(clf, "gamma")
    if isinstance(g, str):
        raise ValueError(f"cannot resolve gamma={g!r} of {type(clf).__name__}; fit with a numeric gamma")
    return float(g)


def make_scorer(classifier: Classifier) -> QuadraticScorer | LUTScorer | DecisionScorer:
    """Scoring function (X (n, p), floor=-inf) -> (n,) for a fitted binary classifier (svmcore.SVC,
    svmcore.PmSVM or any estimator with ``decision_function``). A row's score is exact wherever it exceeds
    ``floor``; elsewhere it may be any value <= floor (the scan passes its lowest useful score).

    SVC with a linear or polynomial kernel of degree <= 2 becomes a :class:`QuadraticScorer`; a PmSVM with
    a lookup table (``lut_bins``) a :class:`LUTScorer`; anything else a :class:`DecisionScorer`. Positive
    scores mean ``classes_[1]`` (face). Raises ValueError for a PmSVM with more than two classes.
    """
    table = getattr(classifier, "table_", None)
    if table is not None and hasattr(classifier, "x_max_"):
        if table.shape[0] != 1:
            raise ValueError(f"classifier: expected a binary PmSVM, got {table.shape[0]} models")
        return LUTScorer(table[0], classifier.x_max_, classifier.intercept_[0])
    kernel, degree = _fitted(classifier, "kernel"), _fitted(classifier, "degree")
    if kernel == "linear" or (kernel == "poly" and degree in (1, 2)):
        S = classifier.support_vectors_  # CSR if the SVC was fitted on CSR rows, which np.asarray cannot convert
        S = S.toarray() if sp.issparse(S) else np.asarray(S, dtype=np.float64)
        a = np.asarray(classifier.dual_coef_, dtype=np.float64).ravel()
        b = float(np.ravel(classifier.intercept_)[0])
        p = S.shape[1]
        if kernel == "linear":
            return QuadraticScorer(np.zeros((p, p)), S.T @ a, b)
        g, c0 = _resolved_gamma(classifier), float(_fitted(classifier, "coef0"))
        if degree == 1:
            return QuadraticScorer(np.zeros((p, p)), g * (S.T @ a), c0 * a.sum() + b)
        A = g * g * (S.T * a) @ S
        return QuadraticScorer((A + A.T) / 2, 2 * g * c0 * (S.T @ a), c0 * c0 * a.sum() + b)
    return DecisionScorer(classifier)


class Prefilter:
    """Cascade of linear stages on normalized pixels: a window passes iff w_k'z > t_k for every stage k. A flat
    window (plane residual RMS below MIN_CONTRAST grey levels: no face, and no direction z) passes no stage,
    whatever the thresholds, as in the dense scan (its stage-0 score is -inf there).

    weights: (k, 19, 19) float64, each orthogonal to the plane basis (x, y, 1) and of unit norm;
    thresholds: (k,) float64. Stage 0 is evaluated densely over whole images (:func:`facedet.scan.prefilter_map`),
    the later stages only on the windows that passed (Viola and Jones 2001's attentional cascade, with
    Fisher discriminants instead of boosted features).
    """

    def __init__(self, weights: ArrayLike, thresholds: ArrayLike) -> None:
        weights, thresholds = np.asarray(weights), np.asarray(thresholds)
        if weights.dtype.kind not in "fiu" or thresholds.dtype.kind not in "fiu":
            raise ValueError(
                f"Prefilter: expected real weights and thresholds, got {weights.dtype} and {thresholds.dtype}"
            )
        w = weights.astype(np.float64).reshape(-1, WINDOW, WINDOW)
        self.weights = np.stack([_remove_plane(x) for x in w]) if len(w) else w
        self.thresholds = thresholds.astype(np.float64).reshape(-1)
        if len(self.thresholds) != len(self.weights) or len(self.weights) == 0:
            raise ValueError(f"Prefilter: {len(self.weights)} stages but {len(self.thresholds)} thresholds")
        # a NaN or all-zero stage would reject (or pass) every window: a model that silently finds nothing
        norms = np.linalg.norm(self.weights.reshape(len(self.weights), -1), axis=1)
        if not (np.isfinite(self.thresholds).all() and np.isfinite(norms).all() and np.all(norms > 1e-6)):
            raise ValueError("Prefilter: every stage needs finite, nonzero weights and a finite threshold")

    @property
    def threshold(self) -> float:
        """Threshold of the dense stage 0."""
        return float(self.thresholds[0])

    def scores(self, windows: ArrayLike) -> np.ndarray:
        """Stage scores w_k'z of (n, 19, 19) windows: (n, k) float64 (-inf rows for flat windows, as
        :func:`facedet.scan.prefilter_map` gives them: their z is zero, and a zero score would pass every stage
        of a cascade whose thresholds are all negative, such as a one-stage cascade of recall 0.995)."""
        z = normalized_pixels(windows)
        out = z @ self.weights.reshape(len(self.weights), -1).T
        out[~np.any(z, axis=1)] = -np.inf
        return out

    def accept(self, scores: np.ndarray) -> np.ndarray:
        """Bool (n,): rows of stage scores (n, k) above every stage's threshold."""
        return np.all(scores > self.thresholds, axis=1)

    @classmethod
    def fit(
        cls,
        faces: ArrayLike,
        nonfaces: ArrayLike,
        recall: float = 0.995,
        n_stages: int = 4,
        min_nonfaces: int = 200,
        shrinkage: float = 0.1,
    ) -> Prefilter:
        """Fit up to ``n_stages`` Fisher discriminants on normalized pixels of (n, 19, 19) windows.

        Stage k: w = (Sigma + shrinkage tr(Sigma)/p I)^-1 (mu_face - mu_nonface) over the faces and the
        non-faces that passed stages < k; its threshold keeps the fraction ``recall`` of the faces (Fisher 1936;
        shrinkage as in Ledoit and Wolf 2004). Stops early when fewer than ``min_nonfaces`` (at least 2)
        non-faces remain.
        Raises ValueError for empty classes or recall outside (0, 1].
        """
        if not 0 < recall <= 1:
            raise ValueError(f"recall: must be in (0, 1], got {recall!r}")
        zf, zn = normalized_pixels(faces), normalized_pixels(nonfaces)
        zf, zn = zf[np.any(zf != 0, axis=1)], zn[np.any(zn != 0, axis=1)]
        if len(zf) < 2 or len(zn) < 2:
            raise ValueError("Prefilter.fit: needs at least 2 face and 2 non-face windows with contrast")
        weights, thresholds = [], []
        for _ in range(n_stages):
            cov = (np.cov(zf, rowvar=False) * len(zf) + np.cov(zn, rowvar=False) * len(zn)) / (len(zf) + len(zn))
            p = cov.shape[0]
            cov += shrinkage * np.trace(cov) / p * np.eye(p)
            w = _remove_plane(np.linalg.solve(cov, zf.mean(axis=0) - zn.mean(axis=0)).reshape(WINDOW, WINDOW))
            w = (w / np.linalg.norm(w)).ravel()
            sf = zf @ w
            t = float(np.quantile(sf, 1 - recall))
            weights.append(w)
            thresholds.append(t)
            zf = zf[sf > t]
            zn = zn[zn @ w > t]
            if len(zn) < max(min_nonfaces, 2) or len(zf) < 2:  # a stage's covariance needs two of each
                break
        return cls(np.array(weights), np.array(thresholds))


def _remove_plane(w):
    """Project a (19, 19) filter onto the orthogonal complement of {x, y, 1} (orthogonal basis on the grid)."""
    w = w.copy()
    for basis in (RAMP_X, RAMP_Y, np.ones_like(RAMP_X)):
        w -= (w * basis).sum() / (basis * basis).sum() * basis
    return w
