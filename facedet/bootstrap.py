"""Bootstrapping (Sung and Poggio 1994; Osuna, Freund, Girosi 1997, sec. 5).

From a detector trained by :func:`facedet.training.train_detector`, :func:`bootstrap` repeats: scan images that
contain no face (:func:`mine_negatives`), add the windows the detector accepts there (false positives, the hard
negatives) to the non-face patches, refit the classifier. Nothing else: bootstrapping is training plus scanning.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from svmcore.svc import warm_alpha
from svmcore.validation import check_scalar

from .detector import Detector, as_grey
from .imageio import read_grey
from .merge import merge_detections
from .preprocess import WINDOW

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from distributed import Client
    from numpy.typing import ArrayLike

    from .scoring import Classifier


def mine_negatives(
    detector: Detector,
    images: Sequence[np.ndarray | str | os.PathLike],
    max_per_image: int = 300,
    callback: Callable[[dict], None] | None = None,
    client: Client | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """False positives of ``detector`` on face-free grey images.

    Every window above the threshold is a false positive. The scan stays on the stride grid (no ``refine``):
    off-grid false positives are near-copies of grid ones, and refining around the thousands of windows an
    early-round detector accepts would make it a full stride-1 scan. ``images``: grey arrays, or paths (read
    where they are scanned). ``client``: a ``distributed.Client`` whose workers scan the images (the detector
    sent to each once; paths must be readable there); the result is the same as on this process.
    ValueError/TypeError unless max_per_image is an integer >= 0. Returns (windows (n, 19, 19) uint8: at most
    ``max_per_image`` of the highest-scoring ones per image, in image order, so one texture cannot flood the
    training set; false-positive windows per image (m,); false-positive detections per image after merging (m,)).
    """
    # a negative count sliced off the lowest windows silently ([:-1]); a float one failed only after the first scan
    check_scalar(max_per_image, "max_per_image", lo=0, integer=True)
    detector = detector.with_params(refine=None)
    if client is None:
        results = (_mine_image(g, detector, max_per_image) for g in images)
    else:  # the futures run at once on the workers; their results are taken in image order
        shared = client.scatter(detector, broadcast=True)
        futures = client.map(_mine_image, images, detector=shared, max_per_image=max_per_image, pure=False)
        results = (future.result() for future in futures)
    found, n_windows, n_dets = [], [], []
    for i, (win, n_win, n_det) in enumerate(results):
        found.append(win)
        n_windows.append(n_win)
        n_dets.append(n_det)
        if callback is not None:
            callback({"event": "scan", "image": i + 1, "n_images": len(images), "false_positives": n_win})
    windows = np.concatenate(found) if found else np.empty((0, 19, 19), np.uint8)
    return windows, np.array(n_windows, dtype=np.int64), np.array(n_dets, dtype=np.int64)


def _mine_image(image, detector, max_per_image):
    """(the image's max_per_image highest-scoring false-positive windows, windows above threshold, detections)."""
    g = read_grey(image) if isinstance(image, (str, os.PathLike)) else image
    boxes, win = detector.scan_windows(g, return_windows=True)
    n_dets = len(merge_detections(boxes, detector.merge_iou, detector.min_neighbors))
    return win[np.argsort(-boxes[:, 4])[:max_per_image]], len(boxes), n_dets


def keeps_training_rows(classifier: Classifier) -> bool:
    """Whether the classifier's support vectors are training rows (an SVC; not a PmSVM, nor an SVC reduced by
    :func:`svmcore.reduced.reduce_quadratic`, whose vectors are no windows: its ``support_`` is -1)."""
    support = getattr(classifier, "support_", None)
    return hasattr(classifier, "support_vectors_") and support is not None and bool((support >= 0).all())


def _seed_rows(clf, support, features, sample_weight, params):
    """The positions of ``clf``'s support vectors among the rows ``features`` where its alphas start the first refit
    feasibly (alpha seeding, DeCoste and Wagstaff 2000: 0 on the mined rows, which alone then violate the KKT
    conditions): a binary SVC fitted with ``params`` on these rows and bounds. Else None: refits from 0, the same
    optimum. (Later refits are fitted with ``params`` on the rows so far: their alphas always serve.)"""
    if not keeps_training_rows(clf) or len(getattr(clf, "classes_", ())) != 2 or support is None:
        return None
    same = {k: v for k, v in params.items() if k != "callback"} == {
        k: v for k, v in clf.get_params().items() if k != "callback"
    }
    if not same or params.get("class_weight") is not None or support.max(initial=-1) >= len(features):
        return None
    sv = clf.support_vectors_
    if not np.array_equal(features[support], sv.toarray() if sp.issparse(sv) else sv):
        return None
    bound = params["C"] * (1.0 if sample_weight is None else sample_weight[support])
    return support if (np.abs(np.ravel(clf.dual_coef_)) <= bound).all() else None


@dataclass
class Round:
    """One bootstrapping round: the detector trained on ``n_nonfaces`` non-face patches and its figures."""

    round: int
    n_nonfaces: int
    n_support: int  # support vectors (0 for a classifier without, e.g. PmSVM)
    fp_windows: int  # windows above threshold on the negative images
    fp_detections: int  # after merging (min_neighbors), on the negative images
    scores: dict = field(default_factory=dict)  # extra figures from ``evaluate`` (e.g. detection rates)


def bootstrap(
    detector: Detector,
    negative_images: Iterable[np.ndarray | str | os.PathLike],
    rounds: int,
    *,
    features: ArrayLike | None = None,
    labels: ArrayLike | None = None,
    sample_weight: ArrayLike | None = None,
    max_per_image: int = 300,
    evaluate: Callable[[Detector], dict] | None = None,
    callback: Callable[[dict], None] | None = None,
    classifier_params: dict | None = None,
    client: Client | None = None,
) -> tuple[Detector, np.ndarray, np.ndarray, list[Round]]:
    """Run ``rounds`` rounds of hard-negative mining from a trained detector.

    Each round scans the face-free images, adds every false positive (at most ``max_per_image`` per image) to the
    non-faces and refits the classifier (its own class and hyperparameters, updated by ``classifier_params``) on
    the set so far. The prefilter and the scanning parameters stay fixed.

    Parameters
    ----------
    detector : Detector
        The trained starting detector (round 0).
    negative_images : sequence of ndarray or path
        Face-free grey (or RGB) images, or their paths.
    rounds : int
        Refits, >= 0.
    features, labels : ndarray of shape (n, p) and (n,), or None
        The classifier's training set (rows of the detector's window features, 1 = face); None: an SVC's support
        vectors (the points that define it; Syed, Liu, Sung 1999). A PmSVM keeps no training rows and needs them.
    sample_weight : ndarray of shape (n,) or None
        Weights of those rows for the refits (row i's C is C * weight); mined rows get weight 1.
    max_per_image : int
        The highest-scoring false positives kept per image and round.
    evaluate : callable or None
        detector -> dict of figures recorded per round.
    callback : callable or None
        Progress events (``"scan"``, ``"round"``, and the solver's).
    classifier_params : dict or None
        Hyperparameters changed for the refits.
    client : distributed.Client or None
        Workers that scan the images (:func:`mine_negatives`; the same negatives).

    Returns
    -------
    detector : Detector
        The last round's detector.
    features, labels : ndarray
        The final training set.
    rounds : list of Round
        Round 0 is the starting detector.

    Raises
    ------
    ValueError
        Before any scanning: no training set for a classifier without support vectors, rounds < 0, features
        without labels or the reverse, rows that do not match the detector's features, labels other than 0/1,
        non-finite rows, a bad ``max_per_image``, weights that do not match the rows.
    TypeError, ValueError
        ``classifier_params`` the classifier's ``fit`` refuses, before any scanning.

    References
    ----------
    Sung and Poggio 1994 (bootstrapping); Osuna, Freund, Girosi 1997, sec. 5.
    """
    check_scalar(rounds, "rounds", lo=0, integer=True)
    negative_images = [g if isinstance(g, (str, os.PathLike)) else as_grey(g) for g in negative_images]
    clf = detector.classifier
    support = getattr(clf, "support_", None)  # the positions of clf's support vectors among the training rows
    if features is None:
        if labels is not None:
            raise ValueError("bootstrap: labels given without features")
        if not keeps_training_rows(clf):
            raise ValueError(
                f"bootstrap: this {type(clf).__name__} keeps no training rows (a PmSVM, or a reduced "
                "set); pass features and labels"
            )
        features = clf.support_vectors_  # CSR if the SVC was fitted on CSR rows (np.asarray: a 0-d object array)
        features = features.toarray() if sp.issparse(features) else np.asarray(features)
        labels = (np.ravel(clf.dual_coef_) > 0).astype(np.int64)
        support = np.arange(len(features))
    elif labels is None:
        raise ValueError("bootstrap: features given without labels")
    features, labels = np.asarray(features), np.asarray(labels)
    width = detector.window_features(np.zeros((1, WINDOW, WINDOW))).shape[1]
    if features.ndim != 2 or features.shape[1] != width or labels.shape != (len(features),):
        raise ValueError(
            f"bootstrap: expected features (n, {width}) and labels (n,), got {features.shape} and {labels.shape}"
        )
    # else the refit after the first scan fails (NaN rows), or learns a third class beside the mined 0s
    if not np.isin(labels, (0, 1)).all():
        raise ValueError(f"bootstrap: labels must be 0 (non-face) or 1 (face), got values {np.unique(labels)[:5]}")
    if features.dtype.kind not in "biuf" or not np.isfinite(features).all():
        raise ValueError("bootstrap: features must be finite real numbers")
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
        if sample_weight.shape != (len(labels),):
            raise ValueError(f"sample_weight: expected shape ({len(labels)},), got {sample_weight.shape}")
    params = {**clf.get_params(), **(classifier_params or {})}
    if "callback" in params:
        params["callback"] = callback
    type(clf)(**params).check_params()  # (fit's own checks, before the first scan rather than after it)
    support = _seed_rows(clf, support, features, sample_weight, params)
    table = []
    for r in range(rounds + 1):
        windows, n_windows, n_dets = mine_negatives(detector, negative_images, max_per_image, callback, client)
        n_support = getattr(detector.classifier, "support_", np.empty(0)).size
        table.append(
            Round(
                r,
                int((labels == 0).sum()),
                int(n_support),
                int(n_windows.sum()),
                int(n_dets.sum()),
                evaluate(detector) if evaluate else {},
            )
        )
        if callback is not None:
            callback({"event": "round", "round": table[-1], "detector": detector})
        if r == rounds or len(windows) == 0:
            break
        features = np.concatenate([features, detector.window_features(windows)])
        labels = np.concatenate([labels, np.zeros(len(windows), np.int64)])
        fit_kw = {}  # weights only when given: PmSVM.fit takes none
        if sample_weight is not None:
            sample_weight = np.concatenate([sample_weight, np.ones(len(windows))])
            fit_kw["sample_weight"] = sample_weight
        if support is not None:
            fit_kw["alpha_init"] = warm_alpha(detector.classifier, len(features), support)
        refit = type(clf)(**params).fit(features, labels, **fit_kw)
        support = getattr(refit, "support_", None)  # a binary SVC's (a PmSVM has none)
        detector = Detector(refit, detector.prefilter, features=detector.features, **detector.params())
    return detector, features, labels, table
