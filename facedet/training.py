"""Training a detector on 19x19 windows: the table of classifier kinds, the training set, the prefilter.

A kind (:data:`KINDS`) names the svmcore estimator, its hyperparameters for faces against non-faces and the
window features it reads; :func:`train_detector` fits the cascade prefilter on pixels and the kind's classifier on
the features, for any kind alike, so that a new classifier is one entry of the table.
:func:`facedet.bootstrap.bootstrap` then refits it on mined false positives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .detector import Detector, as_grey, check_params
from .features import get_features
from .patches import augment, check_both_classes, sample_windows
from .scoring import Prefilter

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from numpy.typing import ArrayLike

    from svmcore.pmsvm import PmSVM
    from svmcore.svc import SVC


@dataclass(frozen=True)
class ClassifierKind:
    """A classifier a detector can be trained with.

    Attributes
    ----------
    estimator : str
        The svmcore class (``"SVC"``, ``"PmSVM"``).
    defaults : dict
        Its hyperparameters for faces against non-faces; the user's override them.
    features : tuple of str
        The window features (:data:`facedet.features.FEATURES`) it can read, the default first.
    callback : bool
        Whether its ``fit`` reports progress to a ``callback`` hyperparameter.
    why_features : str
        Why it reads only those features, for the message that refuses others.
    """

    estimator: str
    defaults: dict
    features: tuple[str, ...]
    callback: bool = False
    why_features: str = ""

    def check_features(self, features: str) -> None:
        """ValueError unless the kind reads ``features``, naming the ones it reads and why."""
        if features not in self.features:
            why = f" ({self.why_features})" if self.why_features else ""
            raise ValueError(f"{self.estimator} reads {' or '.join(self.features)} features, not {features!r}{why}")

    def make(self, callback: Callable[[dict], None] | None = None, **params: Any) -> SVC | PmSVM:
        """The unfitted estimator: ``defaults`` overridden by ``params``; TypeError for an unknown name."""
        import svmcore

        extra = {"callback": callback} if self.callback else {}
        return getattr(svmcore, self.estimator)(**{**self.defaults, **params}, **extra)


KINDS = {
    # the polynomial kernel of degree 2 of Osuna et al. 1997 (gamma "auto" = 1 / 283 features)
    "svc": ClassifierKind(
        "SVC",
        {"C": 10.0, "kernel": "poly", "degree": 2, "gamma": "auto", "coef0": 1.0, "tol": 1e-3, "cache_size": 500},
        ("osuna",),
        callback=True,
    ),
    # the chi-square kernel (p = -1) on HOG cells, which are nonnegative as PmSVM needs; the face/non-face
    # problems need up to about 2,100 epochs to reach tol, and a fit stopped short depends on rounding
    "pmsvm": ClassifierKind(
        "PmSVM",
        {"C": 1.0, "p": -1.0, "max_iter": 3000, "random_state": 0},
        ("hog",),
        why_features="an additive kernel needs nonnegative features; osuna windows are centred",
    ),
}


def classifier_kind(kind: str) -> ClassifierKind:
    """The entry of :data:`KINDS` named ``kind``; ValueError naming the known kinds for another name."""
    if kind not in KINDS:
        raise ValueError(f"kind: unknown classifier {kind!r}; expected one of {', '.join(KINDS)}")
    return KINDS[kind]


def check_classifier_params(kind: str = "svc", **params: Any) -> None:
    """Check the hyperparameters the ``kind`` classifier would be fitted with (its defaults overridden by
    ``params``) by svmcore's own checks, the ones ``fit`` runs first, so that a bad value fails before any data
    are read.

    Raises
    ------
    TypeError
        An unknown hyperparameter name or a value of the wrong kind.
    ValueError
        An unknown kind, or a value out of range (``C <= 0``, ``p > 0``, ...).
    """
    classifier_kind(kind).make(**params).check_params()


def fit_classifier(
    features: ArrayLike,
    labels: ArrayLike,
    kind: str = "svc",
    callback: Callable[[dict], None] | None = None,
    sample_weight: ArrayLike | None = None,
    **params: Any,
) -> SVC | PmSVM:
    """The ``kind`` classifier fitted on feature rows ``features`` (n, p) with ``labels`` (n,), 1 = face.

    Parameters
    ----------
    features : ndarray of shape (n, p)
        Window features (:func:`facedet.features.get_features`); nonnegative for ``"pmsvm"``.
    labels : ndarray of shape (n,)
        1 for a face, 0 for a non-face.
    kind : str
        A key of :data:`KINDS`.
    callback : callable or None
        Progress events of the solver, for kinds that report them.
    sample_weight : ndarray of shape (n,) or None
        Row i gets the box constraint ``C * sample_weight[i]``.
    **params
        Hyperparameters overriding the kind's defaults.

    Raises
    ------
    TypeError, ValueError
        What the estimator's ``fit`` refuses.
    """
    return classifier_kind(kind).make(callback, **params).fit(features, labels, sample_weight=sample_weight)


def _check_patches(X, y):
    """(X, y) as arrays; ValueError unless windows (n, ...) come with labels (n,) in {0, 1}."""
    X, y = np.asarray(X), np.asarray(y)
    if X.ndim != 3 or y.ndim != 1 or len(X) != len(y) or not np.isin(y, (0, 1)).all():
        raise ValueError(f"expected windows (n, 19, 19) and labels (n,) in {{0, 1}}, got {X.shape}, {y.shape}")
    return X, y


def training_set(
    X: ArrayLike, y: ArrayLike, augmentation: dict | None = None, features: str = "osuna"
) -> tuple[np.ndarray, np.ndarray]:
    """Feature rows (n', p) and labels (n',) of windows X (n, 19, 19), y (n,) in {0, 1}: the faces augmented
    by ``facedet.patches.augment(**augmentation)`` (default: mirror images only), then the window features
    ``features`` (a name in :data:`facedet.features.FEATURES`). Raises ValueError for bad shapes, labels
    other than 0/1, or a set without both faces and non-faces."""
    X, y = _check_patches(X, y)
    check_both_classes(y)
    faces = augment(X[y == 1], **{"mirror": True, "shifts": 0, **(augmentation or {})})
    nonfaces = X[y == 0]
    F = get_features(features)(np.concatenate([faces, nonfaces]))
    return F, np.r_[np.ones(len(faces), np.int64), np.zeros(len(nonfaces), np.int64)]


def fit_prefilter(
    X: ArrayLike,
    y: ArrayLike,
    negative_images: Iterable[ArrayLike] = (),
    augmentation: dict | None = None,
    n_random: int = 1000,
    recall: float = 0.999,
    n_stages: int = 8,
    seed: int = 0,
) -> Prefilter:
    """Cascade prefilter on the faces (augmented like the classifier's: ``augment(**augmentation)``, default
    mirror) vs. the non-faces plus ``n_random`` random windows per face-free image (grey arrays); see
    :meth:`facedet.scoring.Prefilter.fit`. recall is per stage, on the augmented training faces. Raises
    ValueError for windows and labels as :func:`training_set` refuses them."""
    # labels of another coding (-1/1) or a list would select no non-faces here, silently or with a baffling shape
    X, y = _check_patches(X, y)
    rng = np.random.default_rng(seed)
    faces = augment(X[y == 1], **{"mirror": True, "shifts": 0, **(augmentation or {})})
    negs = [X[y == 0]] + [sample_windows(as_grey(g), n_random, rng) for g in negative_images]
    return Prefilter.fit(faces, np.concatenate(negs), recall=recall, n_stages=n_stages)


def train_detector(
    X: ArrayLike,
    y: ArrayLike,
    *,
    kind: str = "svc",
    features: str | None = None,
    negative_images: Iterable[ArrayLike] = (),
    augmentation: dict | None = None,
    callback: Callable[[dict], None] | None = None,
    classifier_params: dict | None = None,
    prefilter_params: dict | None = None,
    **detector_params: Any,
) -> tuple[Detector, np.ndarray, np.ndarray]:
    """A :class:`facedet.Detector` trained on windows ``X`` with labels ``y``.

    Parameters
    ----------
    X : ndarray of shape (n, 19, 19), uint8
        Face and non-face windows.
    y : ndarray of shape (n,)
        1 for a face, 0 for a non-face.
    kind : str
        The classifier, a key of :data:`KINDS`.
    features : str or None
        The window features; None for the kind's default.
    negative_images : sequence of ndarray
        Face-free grey images whose random windows help fit the prefilter.
    augmentation : dict or None
        Keyword arguments of :func:`facedet.patches.augment` for the faces (default: mirror images).
    callback : callable or None
        Progress events of the solver (SVC).
    classifier_params, prefilter_params : dict or None
        Hyperparameters of the classifier (over the kind's defaults) and of :func:`fit_prefilter`.
    **detector_params
        Scanning parameters of the detector (:func:`facedet.detector.check_params`).

    Returns
    -------
    detector : Detector
    features : ndarray of shape (n', p)
        The training set's feature rows (faces augmented), for :func:`facedet.bootstrap.bootstrap`.
    labels : ndarray of shape (n',)

    Raises
    ------
    TypeError, ValueError
        Bad windows or labels, features the kind cannot read, bad scanning parameters or hyperparameters (the
        parameters are checked before any fitting).
    """
    entry = classifier_kind(kind)
    features = features or entry.features[0]
    entry.check_features(features)
    check_params(**detector_params)
    check_classifier_params(kind, **(classifier_params or {}))
    F, labels = training_set(X, y, augmentation, features)
    prefilter = fit_prefilter(np.asarray(X), np.asarray(y), negative_images, augmentation, **(prefilter_params or {}))
    clf = fit_classifier(F, labels, kind, callback, **(classifier_params or {}))
    return Detector(clf, prefilter, features=features, **detector_params), F, labels
