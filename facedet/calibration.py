"""Calibration of a trained detector on annotated photos, never on the test set.

:func:`calibrate_box` fits the window-to-face-box map, :func:`choose_threshold` the operating point (threshold and
minimum neighbours, against the false positives on face-free images) and :func:`calibrate_confidence` the
scores' confidence (Platt's sigmoid).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from svmcore.probability import fit_sigmoid
from svmcore.validation import check_scalar

from .detector import as_grey
from .merge import merge_detections
from .scan import scan

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from numpy.typing import ArrayLike

    from .detector import Detector


def best_windows(
    detector: Detector, items: Iterable[tuple[ArrayLike, ArrayLike]], sizes: tuple[float, float] = (0.5, 1.1)
) -> tuple[np.ndarray, np.ndarray]:
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


def calibrate_box(
    detector: Detector, items: Iterable[tuple[ArrayLike, ArrayLike]], sizes: tuple[float, float] = (0.5, 1.1)
) -> tuple[Detector, int]:
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


def scan_items(detector: Detector, items: Iterable[tuple[ArrayLike, ...]], threshold: float) -> list[np.ndarray]:
    """Every window above ``threshold`` of each image of ``items`` ((image, ...) tuples), unmerged:
    list of (k, 5) arrays (:meth:`Detector.scan_windows`). The scan's ``refine`` does not depend on the
    threshold, so the windows above any higher threshold are a subset: one scan serves
    :func:`choose_threshold` and :func:`calibrate_confidence` (their ``windows``)."""
    low = detector.with_params(threshold=float(threshold))
    return [low.scan_windows(as_grey(item[0])) for item in items]


def choose_threshold(
    detector: Detector,
    items: Iterable[tuple[ArrayLike, ArrayLike]],
    candidates: ArrayLike = np.round(np.arange(-1.0, 1.01, 0.1), 2),  # noqa: B008 (read only: np.sort copies it)
    neighbors: Iterable[int] = (1, 2, 3, 4),
    windows: Sequence[np.ndarray] | None = None,
) -> tuple[Detector, list[tuple[float, int, int, int]]]:
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


def calibrate_confidence(
    detector: Detector,
    items: Iterable[tuple[ArrayLike, ...]],
    threshold: float | None = None,
    iou_threshold: float = 0.5,
    windows: Sequence[np.ndarray] | None = None,
) -> tuple[Detector, np.ndarray, np.ndarray]:
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


def plateau_top(scores: np.ndarray) -> tuple[int, int]:
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
