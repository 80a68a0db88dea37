"""Training and bootstrapping (Sung and Poggio 1994; Osuna, Freund, Girosi 1997, sec. 5).

:func:`train_detector` fits the cascade prefilter and the SVM on patches; :func:`bootstrap` then repeats:
scan images that contain no face, add the windows the detector accepts there (false positives) to the
non-face patches, retrain. Nothing else: bootstrapping is training plus scanning. On annotated training
images, :func:`calibrate_box` fits the window-to-face-box map, :func:`choose_threshold` the operating point and
:func:`calibrate_confidence` the scores' confidence.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from svmcore._validation import check_scalar
from svmcore.probability import fit_sigmoid

from .detector import Detector, as_grey, check_params
from .features import get_features
from .imageio import read_grey
from .merge import merge_detections
from .patches import augment, check_both_classes, sample_windows
from .preprocess import WINDOW
from .scan import scan
from .scoring import Prefilter

SVM_DEFAULTS = {"C": 10.0, "kernel": "poly", "degree": 2, "gamma": "auto", "coef0": 1.0, "tol": 1e-3, "cache_size": 500}


def fit_svm(features, y, callback=None, sample_weight=None, **svm_params):
    """svmcore.SVC fitted on feature rows (n, 283) (see :func:`facedet.features.window_features`), y (n,), 1 = face.

    svm_params override SVM_DEFAULTS (poly kernel of degree 2 as in Osuna et al.; gamma "auto" = 1/283).
    sample_weight: (n,) >= 0 or None; row i gets the box constraint C * sample_weight[i].
    """
    from svmcore import SVC

    params = {**SVM_DEFAULTS, **svm_params}
    return SVC(callback=callback, **params).fit(features, y, sample_weight=sample_weight)


def check_svm_params(**svm_params):
    """Check the SVC hyperparameters :func:`fit_svm` would fit with (SVM_DEFAULTS overridden by svm_params) by
    svmcore's own checks, the ones ``SVC.fit`` runs first, so that a bad value fails before any data are read.
    Raises TypeError for an unknown name or a non-number, ValueError for a value out of range (C <= 0, ...)."""
    from svmcore import SVC

    SVC(**{**SVM_DEFAULTS, **svm_params})._check_params()


def fit_prefilter(X, y, negative_images=(), augmentation=None, n_random=1000, recall=0.999, n_stages=8, seed=0):
    """Cascade prefilter on the faces (augmented like the SVM's: ``augment(**augmentation)``, default mirror)
    vs. the non-faces plus ``n_random`` random windows per face-free image (grey arrays); see
    :meth:`facedet.scoring.Prefilter.fit`. recall is per stage, on the augmented training faces. Raises
    ValueError for windows and labels as :func:`training_set` refuses them."""
    # labels of another coding (-1/1) or a list would select no non-faces here, silently or with a baffling shape
    X, y = _check_patches(X, y)
    rng = np.random.default_rng(seed)
    faces = augment(X[y == 1], **{"mirror": True, "shifts": 0, **(augmentation or {})})
    negs = [X[y == 0]] + [sample_windows(as_grey(g), n_random, rng) for g in negative_images]
    return Prefilter.fit(faces, np.concatenate(negs), recall=recall, n_stages=n_stages)


def _check_patches(X, y):
    """(X, y) as arrays; ValueError unless windows (n, ...) come with labels (n,) in {0, 1}."""
    X, y = np.asarray(X), np.asarray(y)
    if X.ndim != 3 or y.ndim != 1 or len(X) != len(y) or not np.isin(y, (0, 1)).all():
        raise ValueError(f"expected windows (n, 19, 19) and labels (n,) in {{0, 1}}, got {X.shape}, {y.shape}")
    return X, y


def training_set(X, y, augmentation=None, features="osuna"):
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


def train_detector(
    X,
    y,
    *,
    negative_images=(),
    augmentation=None,
    callback=None,
    svm_params=None,
    prefilter_params=None,
    **detector_params,
):
    """A :class:`Detector` trained on windows X (n, 19, 19) uint8, labels y (n,) in {0, 1}.

    augmentation: keyword arguments of :func:`facedet.patches.augment` for the faces (default: mirror).
    negative_images: face-free grey images whose random windows help fit the prefilter.
    Returns (detector, feature rows, labels) -- the training set, for :func:`bootstrap`.
    Raises ValueError for bad input (the detector parameters and svm_params are checked first).
    """
    check_params(**detector_params)
    check_svm_params(**(svm_params or {}))
    F, labels = training_set(X, y, augmentation)
    prefilter = fit_prefilter(np.asarray(X), np.asarray(y), negative_images, augmentation, **(prefilter_params or {}))
    clf = fit_svm(F, labels, callback=callback, **(svm_params or {}))
    return Detector(clf, prefilter, **detector_params), F, labels


def mine_negatives(detector, images, max_per_image=300, callback=None, client=None):
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


def keeps_training_rows(classifier):
    """Whether the classifier's support vectors are training rows (an SVC; not a PmSVM, nor an SVC reduced by
    :func:`svmcore.reduced.reduce_quadratic`, whose vectors are no windows: its ``support_`` is -1)."""
    support = getattr(classifier, "support_", None)
    return hasattr(classifier, "support_vectors_") and support is not None and bool((support >= 0).all())


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
    detector,
    negative_images,
    rounds,
    *,
    features=None,
    labels=None,
    sample_weight=None,
    max_per_image=300,
    evaluate=None,
    callback=None,
    svm_params=None,
    client=None,
):
    """Run ``rounds`` rounds of hard-negative mining from a trained detector.

    negative_images: face-free grey (or RGB) arrays, or paths. client: a ``distributed.Client`` whose workers scan
    them (:func:`mine_negatives`; the same negatives). features, labels: the classifier's training set (rows
    of the detector's window features, 1 = face); if None, an SVC's support vectors (the points that define
    it; Syed, Liu, Sung 1999) -- a PmSVM keeps no training rows, so it needs them. sample_weight: optional
    (n,) weights of those rows for the refits (row i's C is C * weight, SVC or PmSVM); mined rows get weight
    1. evaluate: optional detector -> dict of figures recorded per round. The prefilter and the scanning
    parameters stay fixed; each round the classifier (its own class and hyperparameters, updated by
    ``svm_params``) is refitted on the set plus every false positive so far. Returns (final detector, features, labels,
    list of :class:`Round`); round 0 is the starting detector. Raises ValueError without a training set for a
    classifier that has no support vectors, for rounds < 0, for features without labels, for rows that do not
    match the detector's features, labels other than 0/1, non-finite rows, a max_per_image that is not an
    integer >= 0, for weights that do not match the rows, and ValueError/TypeError for svm_params the classifier's
    fit refuses (all before any scanning).
    """
    check_scalar(rounds, "rounds", lo=0, integer=True)
    negative_images = [g if isinstance(g, (str, os.PathLike)) else as_grey(g) for g in negative_images]
    clf = detector.classifier
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
    params = {**clf.get_params(), **(svm_params or {})}
    if "callback" in params:
        params["callback"] = callback
    type(clf)(**params)._check_params()  # (fit's own checks, before the first scan rather than after it)
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
        detector = Detector(
            type(clf)(**params).fit(features, labels, **fit_kw),
            detector.prefilter,
            features=detector.features,
            **detector.params(),
        )
    return detector, features, labels, table


def best_windows(detector, items, sizes=(0.5, 1.1)):
    """The best-scoring window at every annotated face: the face as the SVM sees it best.

    items: iterable of (image, truth boxes (m, 4) xywh). For every truth box of side w, all windows of
    sides ``sizes[0]*w .. sizes[1]*w`` (pyramid step 1.05, stride 1) whose centre lies within w/4 of the box
    centre are scored by the SVM (every window, no prefilter, no threshold). Faces too small for a 19x19
    window are skipped. Returns (windows (k, 19, 19) uint8, rel (k, 3) float64): each face's best window and
    its map to the truth box, ((cx_t - x - s/2) / s, (cy_t - y - s/2) / s, w / s) for the window (x, y, s).
    """
    found, rel = [], []
    for img, truth in items:
        g = as_grey(img)
        for x, y, w, h in np.asarray(truth, dtype=np.float64).reshape(-1, 4):
            cx, cy = x + w / 2, y + h / 2
            half = sizes[1] * w / 2 + w / 4 + 1
            x0, y0 = int(max(cx - half, 0)), int(max(cy - half, 0))
            crop = g[y0 : int(cy + half) + 1, x0 : int(cx + half) + 1]
            lo = max(sizes[0] * w, 19.0)
            if min(crop.shape) < lo:
                continue
            boxes, win = scan(
                crop,
                detector.score_features,
                detector.window_features,
                None,
                scale_factor=1.05,
                stride=1,
                min_window=lo,
                max_window=sizes[1] * w,
                threshold=-np.inf,
                return_windows=True,
            )
            wx, wy = boxes[:, 0] + boxes[:, 2] / 2 + x0, boxes[:, 1] + boxes[:, 3] / 2 + y0
            near = np.flatnonzero((np.abs(wx - cx) <= w / 4) & (np.abs(wy - cy) <= w / 4))
            if len(near) == 0:
                continue
            i = near[np.argmax(boxes[near, 4])]
            s = boxes[i, 2]
            found.append(win[i])
            rel.append([(cx - boxes[i, 0] - x0 - s / 2) / s, (cy - boxes[i, 1] - y0 - s / 2) / s, w / s])
    if not found:
        return np.empty((0, 19, 19), np.uint8), np.empty((0, 3))
    return np.stack(found), np.array(rel)


def calibrate_box(detector, items, sizes=(0.5, 1.1)):
    """Fit the window-to-face-box map (dx, dy, scale) on annotated images; returns (detector, n faces used).

    The map is the median over the faces of the best windows' maps (:func:`best_windows`), so it does not
    depend on what the detector happens to find. Calibrate on training images only. Raises ValueError if
    no face is large enough to fit a window.
    """
    _, rel = best_windows(detector, items, sizes)
    if len(rel) == 0:
        raise ValueError("calibrate_box: no annotated face large enough for a 19x19 window")
    box = tuple(float(v) for v in np.median(rel, axis=0))
    return detector.with_params(box=box), len(rel)


def scan_items(detector, items, threshold):
    """Every window above ``threshold`` of each image of ``items`` ((image, ...) tuples), unmerged:
    list of (k, 5) arrays (:meth:`Detector.scan_windows`). The scan's ``refine`` does not depend on the
    threshold, so the windows above any higher threshold are a subset: one scan serves
    :func:`choose_threshold` and :func:`calibrate_confidence` (their ``windows``)."""
    low = detector.with_params(threshold=float(threshold))
    return [low.scan_windows(as_grey(item[0])) for item in items]


def choose_threshold(
    detector,
    items,
    candidates=np.round(np.arange(-1.0, 1.01, 0.1), 2),  # noqa: B008 (read only: np.sort copies it)
    neighbors=(1, 2, 3, 4),
    windows=None,
):
    """Pick the operating point (SVM threshold, min_neighbors) on annotated training images: the pair
    maximising F1 = 2 hits / (2 hits + false positives + misses) (IoU >= 0.5, one-to-one). A few training
    faces leave the maximum flat over a run of thresholds: the min_neighbors with the longest such run is
    chosen, at the run's highest threshold (:func:`plateau_top`). Within the run the training faces cannot
    tell the thresholds apart, and the negative images, bootstrapped on, under-count the false positives of
    new images, so the surest point is taken. Images without faces (truth (0, 4)) only add false positives.
    Returns (detector, rows (threshold, min_neighbors, hits, false positives)). Each image is scanned once,
    at the lowest candidate threshold (the scan's ``refine`` does not depend on it), unless ``windows`` gives
    those scans (:func:`scan_items` at a threshold at most the lowest candidate). items: an iterable of
    (image, truth boxes (m, 4) xywh). Raises ValueError, before any scan, for no images or no faces, a truth
    box that is not finite with width and height > 0, no candidates or a non-finite one, and no neighbors
    or one that is not an integer >= 1."""
    from .evaluate import _check_truth, match_detections

    # all checked before the scans: an empty or NaN candidate list, neighbors (0,) or a zero-width face box
    # failed (or gave NaN rows, or a face no detection can match) only after every image was scanned
    items = [(img, np.asarray(t, float).reshape(-1, 4)) for img, t in items]  # (any iterable, not only a list)
    if not items:
        raise ValueError("choose_threshold: no annotated images")
    for k, (_, t) in enumerate(items):
        _check_truth((t, None), f"choose_threshold: truth boxes of image {k}")
    if sum(len(t) for _, t in items) == 0:
        raise ValueError("choose_threshold: the images hold no annotated face")
    candidates = np.sort(np.asarray(candidates, dtype=np.float64).ravel())
    if not len(candidates) or not np.isfinite(candidates).all():
        raise ValueError(f"choose_threshold: candidates must be finite thresholds, at least one, got {candidates}")
    neighbors = tuple(neighbors)
    if not neighbors:
        raise ValueError("choose_threshold: neighbors must hold at least one min_neighbors value")
    for nb in neighbors:
        check_scalar(nb, "neighbors", lo=1, integer=True)
    windows = scan_items(detector, items, candidates[0]) if windows is None else windows
    raw = [(w, t) for w, (_, t) in zip(windows, items, strict=True)]
    n_truth = sum(len(t) for _, t in raw)
    rows = []
    for th in candidates:
        for nb in neighbors:
            hits = fps = 0
            for boxes, truth in raw:
                merged = merge_detections(boxes[boxes[:, 4] > th], detector.merge_iou, nb)
                dets = detector.windows_to_boxes(merged[:, :5])
                tp = int(match_detections(dets, truth)["is_tp"].sum())
                hits += tp
                fps += len(dets) - tp
            rows.append((float(th), int(nb), hits, fps))
    f1 = np.array([2 * h / max(h + f + n_truth, 1) for _, _, h, f in rows]).reshape(len(candidates), -1)
    i, j = plateau_top(f1)
    return detector.with_params(threshold=float(candidates[i]), min_neighbors=int(neighbors[j])), rows


def calibrate_confidence(detector, items, threshold=None, iou_threshold=0.5, windows=None):
    """Fit the detector's ``platt`` (A, B): the confidence of a detection, 1 / (1 + exp(A score + B)), is the
    fraction of detections of that score that are faces on held-out annotated images (Platt 1999, with the
    targets and Newton method of Lin, Lin, Weng 2007: :func:`svmcore.probability.fit_sigmoid`).

    items: iterable of (image, truth boxes (m, 4) xywh[, ignore (m,) bool]); images without faces add false
    positives. Each image is searched at ``threshold`` (default: the detector's; lower it to calibrate the
    scores users reach with a lower ``--threshold``) with the detector's min_neighbors; a detection matching a
    face one-to-one at IoU >= ``iou_threshold`` is a face, one matching only an ignored face is left out.
    ``windows``: the images' scans at a threshold at most ``threshold`` (:func:`scan_items`), else they are
    scanned. Returns (detector with ``platt`` set, scores (n,) float64, is_face (n,) bool): the detections it
    was fitted on, for :func:`facedet.evaluate.reliability_table`. Raises ValueError if the detections are not
    both faces and non-faces, or if the fitted sigmoid does not rise with the score.
    """
    from .evaluate import match_detections

    items = list(items)
    threshold = detector.threshold if threshold is None else float(threshold)
    windows = scan_items(detector, items, threshold) if windows is None else windows
    scores, is_face = [], []
    for w, (_img, truth, *ignore) in zip(windows, items, strict=True):
        merged = merge_detections(w[w[:, 4] > threshold], detector.merge_iou, detector.min_neighbors)
        dets = detector.windows_to_boxes(merged[:, :5])
        m = match_detections(
            dets, np.asarray(truth, float).reshape(-1, 4), ignore[0] if ignore else None, iou_threshold=iou_threshold
        )
        keep = ~m["is_ignored"]
        scores.append(dets[keep, 4])
        is_face.append(m["is_tp"][keep])
    scores, is_face = np.concatenate(scores), np.concatenate(is_face)
    if is_face.all() or not is_face.any():
        raise ValueError(
            f"calibrate_confidence: {len(scores)} detections, {int(is_face.sum())} of them faces: "
            "need both faces and false positives (lower the threshold or add face-free images)"
        )
    A, B = fit_sigmoid(scores, is_face)
    if A >= 0:
        raise ValueError(f"calibrate_confidence: the fitted confidence falls as the score rises (A = {A:.3g})")
    return detector.with_params(platt=(A, B)), scores, is_face


def plateau_top(scores):
    """(i, j) of an (n, m) table (rows: increasing thresholds; columns: settings): the last row of the longest
    run of consecutive rows at the table's maximum within one column; ties go to the lower column, then the
    earlier run."""
    top = np.isclose(scores, scores.max())
    best = None
    for j in range(top.shape[1]):
        i = 0
        while i < top.shape[0]:
            if not top[i, j]:
                i += 1
                continue
            k = i
            while k + 1 < top.shape[0] and top[k + 1, j]:
                k += 1
            if best is None or k - i + 1 > best[0]:
                best = (k - i + 1, i, j)
            i = k + 1
    length, start, j = best
    return start + length - 1, j
