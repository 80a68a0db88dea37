"""Evaluation of face detectors (boxes on images) and of face/non-face classifiers (patches).

Boxes are ``(x, y, w, h)`` in pixels: top-left corner, width, height. Detections carry a fifth column,
the score (higher = more confident).

Image level (PASCAL VOC protocol, Everingham et al., IJCV 2010, sections 4.2 and 4.4):
detections are matched one-to-one to ground-truth boxes at IoU >= 0.5, greedily in order of descending
score; the detection rate, the number of false positives, the precision-recall curve and the average
precision follow from the matches. A ground-truth box flagged ``ignore`` (VOC "difficult") counts
neither as a hit nor as a miss, nor does a detection matched to it. The ROC of a detector on a set of images
(Viola and Jones, IJCV 2004, section 5.6) is its detection rate against the number of false positives over the
whole set as the score threshold sweeps the pooled detections (:func:`detection_roc`,
:func:`detection_rate_at_fp`, :func:`plot_roc`).

Patch level: ROC curve, its area, and the detection rate at a fixed false-positive rate (the CBCL test
set protocol of Osuna, Freund, Girosi 1997).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from .imageio import atomic_write, open_csv
from .merge import box_iou

if TYPE_CHECKING:
    from collections.abc import Mapping

    from numpy.typing import ArrayLike

_TRUE = {"1", "true", "yes"}
_FALSE = {"0", "false", "no", ""}


def iou(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Intersection over union of every box in ``a`` with every box in ``b``.

    ``a``: (n, 4), ``b``: (m, 4) boxes ``(x, y, w, h)`` (extra columns such as a score are ignored).
    Returns an (n, m) float64 array in [0, 1] (a box with itself: exactly 1); a pair whose union is empty has
    IoU 0.
    Raises ValueError for a wrong shape, NaN/inf or a negative width or height.
    """
    return box_iou(_check_boxes(a, "a"), _check_boxes(b, "b"))


def read_annotations(csv_path: str | os.PathLike, split: str | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Read ground-truth face boxes from a CSV file.

    Columns (header row required, any order and case, extra columns ignored): ``image, x, y, w, h`` and optionally
    ``ignore`` (``0/1``, ``true/false``, ``yes/no``, empty = 0) and ``split`` (as in
    ``shared/data/scenes_annotated_dlib_voc/boxes.csv``). A row whose ``x, y, w, h`` are all empty lists
    an image that contains no face, so its detections all count as false positives.
    ``split``: keep only rows whose ``split`` column equals it. Image names are normalised
    (``os.path.normpath``: ``./a.jpg`` and ``a.jpg`` are one image).

    Returns ``{image: (boxes (m, 4) float64 xywh, ignore (m,) bool)}`` in file order.
    Raises FileNotFoundError for a missing file and ValueError naming the file (and line) for a folder or
    a file that is not UTF-8 text, no rows, a missing column, a non-numeric or non-finite coordinate, a
    width or height <= 0, a bad ``ignore`` value, an empty image name, a column named twice (in any case), a
    box listed twice for the same image (it would count as two faces), or a ``split`` that the file does not
    have.
    """
    path = Path(csv_path)
    rows: dict[str, list] = {}
    seen: dict[tuple, int] = {}
    with open_csv(path, "annotation CSV") as reader:
        columns = [c.strip().lower() for c in (reader.fieldnames or [])]
        missing = [c for c in ("image", "x", "y", "w", "h") if c not in columns]
        twice = sorted({c for c in columns if columns.count(c) > 1} & {"image", "x", "y", "w", "h", "ignore", "split"})
        if twice:  # names are read in any case: "x" and "X" would silently replace one another
            raise ValueError(f"{path}: column(s) {', '.join(twice)} given more than once (header names ignore case)")
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)} (header: {','.join(columns) or 'none'})")
        if split is not None and "split" not in columns:
            raise ValueError(f"{path}: split={split!r} requested but the file has no 'split' column")
        reader.fieldnames = columns
        splits = set()
        for row in reader:
            where = f"{path}, line {reader.line_num}"
            if None in row or any(v is None for v in row.values()):
                raise ValueError(f"{where}: expected {len(columns)} fields")
            if "split" in row:
                splits.add(row["split"].strip())
                if split is not None and row["split"].strip() != split:
                    continue
            name = row["image"].strip()
            if not name:
                raise ValueError(f"{where}: empty image name")
            name = os.path.normpath(name)  # ./a.jpg and a.jpg are one image
            fields = [row[c].strip() for c in ("x", "y", "w", "h")]
            boxes = rows.setdefault(name, [])
            if not any(fields):
                continue
            try:
                x, y, w, h = (float(v) for v in fields)
            except ValueError:
                raise ValueError(f"{where}: x, y, w, h must be numbers, got {','.join(fields)}") from None
            if not all(math.isfinite(v) for v in (x, y, w, h)):
                raise ValueError(f"{where}: x, y, w, h must be finite, got {','.join(fields)}")
            if w <= 0 or h <= 0:
                raise ValueError(f"{where}: box width and height must be > 0, got w={w:g} h={h:g}")
            flag = row.get("ignore", "").strip().lower()
            if flag not in _TRUE | _FALSE:
                raise ValueError(f"{where}: ignore must be 0/1, true/false or yes/no, got {row['ignore']!r}")
            # without a split filter every row lands on its image, so a box under two splits is listed twice
            key_split = row.get("split", "").strip() if split is not None else ""
            first = seen.setdefault((key_split, name, x, y, w, h), reader.line_num)
            if first != reader.line_num:
                raise ValueError(f"{where}: the box {','.join(fields)} of {name} is already on line {first}")
            boxes.append((x, y, w, h, flag in _TRUE))
    if split is not None and split not in splits:
        raise ValueError(f"{path}: no rows with split {split!r} (splits present: {', '.join(sorted(splits))})")
    if not rows:
        raise ValueError(f"{path}: no annotation rows")
    out = {}
    for name, boxes in rows.items():
        a = np.array(boxes, dtype=np.float64).reshape(-1, 5)
        out[name] = (np.ascontiguousarray(a[:, :4]), a[:, 4].astype(bool))
    return out


def read_image_sizes(csv_path: str | os.PathLike, split: str | None = None) -> dict[str, tuple[int, int]]:
    """The size each image had when it was annotated, from the optional ``img_width, img_height`` columns of an
    annotation CSV (as in ``shared/data/scenes_annotated_dlib_voc/boxes.csv``).

    Boxes are in the pixels of that size, so an image read at another size (a resized or rotated copy) cannot be
    scored against them. ``split`` and image names as in :func:`read_annotations`, which validates the rest of
    the file. Returns ``{image: (width, height)}`` in pixels, empty if the file lacks either column.
    Raises ValueError naming the file and line for a size that is not a positive whole number or that differs
    between rows of one image, or a box wholly outside the size given on its line.
    """
    path = Path(csv_path)
    sizes: dict[str, tuple[int, int]] = {}
    with open_csv(path, "annotation CSV") as reader:
        reader.fieldnames = [c.strip().lower() for c in (reader.fieldnames or [])]
        if not {"img_width", "img_height", "image"} <= set(reader.fieldnames):
            return sizes
        for row in reader:
            if split is not None and (row.get("split") or "").strip() != split:
                continue
            where = f"{path}, line {reader.line_num}"
            fields = [(row[c] or "").strip() for c in ("img_width", "img_height")]
            if not any(fields):
                continue
            if not all(v.isdigit() and int(v) > 0 for v in fields):
                raise ValueError(f"{where}: img_width, img_height must be whole numbers > 0, got {','.join(fields)}")
            name, size = os.path.normpath(row["image"].strip()), (int(fields[0]), int(fields[1]))
            if sizes.setdefault(name, size) != size:
                raise ValueError(
                    f"{where}: {name} is {size[0]}x{size[1]} here but "
                    f"{sizes[name][0]}x{sizes[name][1]} on an earlier line"
                )
            box = [(row.get(c) or "").strip() for c in ("x", "y", "w", "h")]
            try:
                x, y, w, h = (float(v) for v in box)
            except ValueError:  # (empty: a face-free image; not numbers: read_annotations refuses it)
                continue
            if x >= size[0] or y >= size[1] or x + w <= 0 or y + h <= 0:
                raise ValueError(
                    f"{where}: the box {','.join(box)} lies wholly outside the {size[0]}x{size[1]} image it annotates"
                )
    return sizes


def listed_images(csv_path: str | os.PathLike) -> set[str]:
    """The names of every image an annotation CSV lists, under any split, normalised as by
    :func:`read_annotations` (which validates the rest of the file). An image listed only under another split
    than the one evaluated is still listed: it is not a face-free image. Raises as ``open`` for a missing file,
    ValueError naming the file for one without an ``image`` column."""
    path = Path(csv_path)
    with open_csv(path, "annotation CSV") as reader:
        reader.fieldnames = [c.strip().lower() for c in (reader.fieldnames or [])]
        if "image" not in reader.fieldnames:
            raise ValueError(f"{path}: missing column image")
        return {os.path.normpath(name) for row in reader if (name := (row["image"] or "").strip())}


def match_detections(
    dets: ArrayLike, truth: ArrayLike, ignore: ArrayLike | None = None, iou_threshold: float = 0.5
) -> dict[str, np.ndarray]:
    """Match the detections of one image to its ground truth (PASCAL VOC / COCO style greedy matching).

    ``dets``: (k, 5) ``x, y, w, h, score``; ``truth``: (m, 4) boxes; ``ignore``: (m,) bool or None.
    Detections are taken in order of descending score (ties: input order). Each one is matched to the
    still unmatched, non-ignored truth box with the highest IoU >= ``iou_threshold`` (a true positive);
    failing that, to the ignored truth box with the highest IoU >= ``iou_threshold`` (the detection is
    then ignored; an ignored box can absorb several detections, like a VOC "difficult" object); failing
    that it is a false positive. So every non-ignored truth box is hit by at most one detection.

    Returns ``{"is_tp": (k,) bool, "is_ignored": (k,) bool, "matched": (k,) int64}`` in the input order
    of ``dets``; ``matched`` is the truth index or -1. A detection is a false positive iff
    ``~is_tp & ~is_ignored``. Raises ValueError for bad shapes or values, or a threshold outside (0, 1].
    """
    dets = _check_dets(dets, "dets")
    truth = _check_boxes(truth, "truth")
    ignore = _check_ignore(ignore, len(truth))
    if not 0.0 < iou_threshold <= 1.0:
        raise ValueError(f"iou_threshold must be in (0, 1], got {iou_threshold}")
    order = np.argsort(-dets[:, 4], kind="stable")
    matched = _greedy_match(order, iou(dets, truth), ignore, float(iou_threshold))
    hit = matched >= 0
    is_ignored = hit & ignore[np.maximum(matched, 0)] if len(truth) else np.zeros(len(dets), bool)
    return {"is_tp": hit & ~is_ignored, "is_ignored": is_ignored, "matched": matched}


@njit(cache=True)
def _greedy_match(order, overlaps, ignore, threshold):
    k, m = overlaps.shape
    matched = np.full(k, -1, np.int64)
    taken = np.zeros(m, np.bool_)
    for d in order:
        best, best_iou, best_ign, best_ign_iou = -1, 0.0, -1, 0.0
        for t in range(m):
            o = overlaps[d, t]
            if o < threshold:
                continue
            if ignore[t]:
                if best_ign < 0 or o > best_ign_iou:  # ties: the first truth box
                    best_ign, best_ign_iou = t, o
            elif not taken[t] and (best < 0 or o > best_iou):
                best, best_iou = t, o
        if best >= 0:
            taken[best] = True
            matched[d] = best
        else:
            matched[d] = best_ign
    return matched


@dataclass
class EvalResult:
    """Result of :func:`evaluate_detections`.

    ``detection_rate``: hits / ``n_truth`` over all detections given (the detector's operating point);
    ``false_positives``: detections matched to no truth box (ignored ones excluded);
    ``n_truth``: non-ignored truth boxes; ``n_images``; ``n_detections`` (ignored ones excluded);
    ``precision``, ``recall``, ``thresholds``: (p,) arrays, one point per distinct score, thresholds
    decreasing (detections with score >= thresholds[i] give precision[i], recall[i]);
    ``average_precision``: area under the interpolated precision-recall curve (VOC 2010+ style, see
    :func:`average_precision`); ``per_image``: name -> (hits, false positives, misses);
    ``tp_counts``, ``fp_counts``: (p,) int64, the hits and false positives among the detections with score
    >= thresholds[i] (cumulative, non-decreasing; the ROC of :func:`detection_roc`).
    """

    detection_rate: float
    false_positives: int
    n_truth: int
    n_images: int
    n_detections: int
    precision: np.ndarray
    recall: np.ndarray
    thresholds: np.ndarray
    average_precision: float
    iou_threshold: float = 0.5
    per_image: dict = field(default_factory=dict, repr=False)
    tp_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    fp_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)


def evaluate_detections(
    detections: Mapping[str, ArrayLike],
    annotations: Mapping[str, tuple[ArrayLike, ArrayLike | None]],
    iou_threshold: float = 0.5,
) -> EvalResult:
    """Detection rate, false positives, precision-recall curve and average precision over images.

    ``detections``: ``{image: (k, 5) x, y, w, h, score}``; ``annotations``: ``{image: (boxes (m, 4),
    ignore (m,) bool)}`` as returned by :func:`read_annotations`. Both must list the same images (pass
    an empty ``(0, 5)`` array for an image without detections; evaluate a subset by subsetting
    ``annotations``). Detections of all images are pooled and ranked by score for the curve.
    Raises ValueError if the image sets differ or any array is malformed.
    """
    extra = sorted(set(detections) - set(annotations))
    absent = sorted(set(annotations) - set(detections))
    if extra or absent:
        raise ValueError(
            "detections and annotations must cover the same images: "
            + (f"no annotations for {', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}; " if extra else "")
            + (
                f"no detections entry for {', '.join(absent[:5])}{' ...' if len(absent) > 5 else ''} "
                "(pass an empty (0, 5) array for an image without detections)"
                if absent
                else ""
            )
        )
    scores, hits, per_image = [], [], {}
    n_truth = 0
    for name, item in annotations.items():
        truth, ignore = _check_truth(item, f"annotations[{name!r}]")
        dets = _check_dets(detections[name], f"detections[{name!r}]")
        m = match_detections(dets, truth, ignore, iou_threshold)
        keep = ~m["is_ignored"]
        scores.append(dets[keep, 4])
        hits.append(m["is_tp"][keep])
        n_real = int((~_check_ignore(ignore, len(truth))).sum())
        n_truth += n_real
        n_tp = int(m["is_tp"].sum())
        per_image[name] = (n_tp, int(keep.sum()) - n_tp, n_real - n_tp)
    scores = np.concatenate(scores) if scores else np.zeros(0)
    hits = np.concatenate(hits) if hits else np.zeros(0, bool)
    precision, recall, thresholds, tp_counts, fp_counts = _pr_curve(scores, hits, n_truth)
    n_tp = int(hits.sum())
    return EvalResult(
        detection_rate=n_tp / n_truth if n_truth else float("nan"),
        false_positives=int(len(hits) - n_tp),
        n_truth=n_truth,
        n_images=len(annotations),
        n_detections=len(hits),
        precision=precision,
        recall=recall,
        thresholds=thresholds,
        average_precision=average_precision(precision, recall) if n_truth else float("nan"),
        iou_threshold=float(iou_threshold),
        per_image=per_image,
        tp_counts=tp_counts,
        fp_counts=fp_counts,
    )


def _pr_curve(scores, hits, n_truth):
    """Precision, recall, thresholds (decreasing), hits and false positives at each distinct score."""
    order = np.argsort(-scores, kind="stable")
    s, h = scores[order], hits[order]
    tp = np.cumsum(h, dtype=np.int64)
    fp = np.cumsum(~h, dtype=np.int64)
    # s[1:] != s[:-1], not np.diff(s) != 0: inf - inf is NaN, which split tied infinite scores into several points
    last = np.r_[np.flatnonzero(s[1:] != s[:-1]), len(s) - 1] if len(s) else np.zeros(0, np.int64)
    tp, fp = tp[last], fp[last]
    recall = tp / n_truth if n_truth else np.full(len(last), np.nan)
    return tp / (tp + fp), recall, s[last], tp, fp


def average_precision(precision: ArrayLike, recall: ArrayLike) -> float:
    """Area under the interpolated precision-recall curve (PASCAL VOC 2010+; Everingham et al. 2015, eq. 2).

    ``precision``, ``recall``: (p,) arrays with recall non-decreasing (as in :class:`EvalResult`).
    Precision is first made monotone, ``p_interp(r) = max_{r' >= r} p(r')``, then integrated exactly as a
    step function of recall from 0 to 1; recall never reached contributes zero. This is not the VOC 2007
    11-point average, and not scikit-learn's ``average_precision_score`` (which does not interpolate, so
    it is <= this value). Returns a float in [0, 1] (0 for an empty curve).
    """
    precision = np.asarray(precision, dtype=np.float64)
    recall = np.asarray(recall, dtype=np.float64)
    if precision.shape != recall.shape or precision.ndim != 1:
        raise ValueError(f"precision and recall must be 1-D of equal length, got {precision.shape}, {recall.shape}")
    if len(recall) and np.any(np.diff(recall) < 0):
        raise ValueError("recall must be non-decreasing")
    if not (np.all((precision >= 0) & (precision <= 1)) and np.all((recall >= 0) & (recall <= 1))):
        raise ValueError("precision and recall must lie in [0, 1] (NaN neither)")
    p_interp = np.maximum.accumulate(precision[::-1])[::-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * p_interp))


def detection_roc(result: EvalResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ROC of a detector over a set of images: detection rate against the number of false positives.

    ``result``: from :func:`evaluate_detections`. The threshold sweeps the pooled detection scores; detections
    with equal scores enter together (no threshold separates them). Returns ``(false_positives, detection_rate,
    thresholds)``, each (p + 1,) for p distinct scores, starting at (0, 0) for threshold +inf: keeping the
    detections with ``score >= thresholds[i]`` gives ``false_positives[i]`` (int64, non-decreasing) and
    ``detection_rate[i]`` (float64, non-decreasing; NaN without faces to find). The curve ends at the detections
    given: a detector run at its own threshold has no point beyond its operating point.
    Raises ValueError for a result without the counts (one not made by :func:`evaluate_detections`).
    """
    tp, fp = _counts(result)
    rate_ = tp / result.n_truth if result.n_truth else np.full(len(tp), np.nan)
    return fp, rate_, np.r_[np.inf, np.asarray(result.thresholds, dtype=np.float64)]


def detection_rate_at_fp(result: EvalResult, fp_points: ArrayLike) -> np.ndarray:
    """The highest detection rate reached with at most each given number of false positives over the set.

    ``result``: from :func:`evaluate_detections`; ``fp_points``: a count or an array of counts of false
    positives, >= 0 (``np.inf``: the whole curve). Over the points of :func:`detection_roc` (thresholds actually
    reachable: no interpolation between them, tied scores entering together), the detection rate of the last one
    with ``false_positives <= k``, for each ``k``. Where the detections end before ``k`` false positives (see
    ``result.false_positives``), that is the rate of all of them. Returns float64 of the shape of ``fp_points``
    ((q,) for q counts); NaN without faces to find. Raises ValueError for a count that is negative or NaN, and
    as :func:`detection_roc`.
    """
    k = np.asarray(fp_points, dtype=np.float64)
    if np.isnan(k).any() or (k < 0).any():
        raise ValueError(f"fp_points must be counts >= 0, got {k.ravel()[:7].tolist()}")
    fp, rate_, _ = detection_roc(result)
    # fp is non-decreasing and starts at 0, so the last point within k always exists
    return rate_[np.searchsorted(fp, k, side="right") - 1]


def _counts(result):
    """(tp, fp) of ``result`` with the (0, 0) of threshold +inf first, as int64 arrays."""
    tp = np.asarray(result.tp_counts, dtype=np.int64)
    fp = np.asarray(result.fp_counts, dtype=np.int64)
    if not tp.shape == fp.shape == np.shape(result.thresholds):
        raise ValueError(
            "result has no hit and false-positive counts per threshold (tp_counts, fp_counts); "
            "make it with evaluate_detections"
        )
    return np.r_[0, tp], np.r_[0, fp]


def rate(value: float) -> str:
    """A detection rate or precision for people: 3 decimals, or "-" when undefined (NaN: no faces to find)."""
    return "-" if np.isnan(value) else f"{value:.3f}"


def plural(n: int, noun: str) -> str:
    """ "1 image", "2 images"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def plot_precision_recall(
    result: EvalResult, png_path: str | os.PathLike, title: str | None = None, label: str | None = None
) -> Path:
    """Write the precision-recall curve of ``result`` (and its interpolation) to an image file, atomically.

    The format follows the suffix (:func:`plot_format`): .png or none, .pdf, .svg, .jpg, .tif, ... Uses
    matplotlib's Agg canvas directly (no pyplot state, no display needed). Returns the path; ValueError for a
    suffix matplotlib cannot write, OSError if the file cannot be written.
    """
    fmt = plot_format(png_path)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    r, p = result.recall, result.precision
    if len(r) and result.n_truth:  # without faces to find, recall is undefined: an empty plot
        ax.plot(np.r_[0.0, r], np.r_[p[0], p], drawstyle="steps-pre", color="0.6", lw=1, label="raw")
        p_interp = np.maximum.accumulate(p[::-1])[::-1]
        ax.plot(
            np.r_[0.0, r],
            np.r_[p_interp[0], p_interp],
            drawstyle="steps-pre",
            color="C0",
            lw=2,
            label=f"{label or 'interpolated'} (AP {result.average_precision:.3f})",
        )
        ax.legend(loc="lower left")
    ax.set_xlim(0, 1.0)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("recall (detection rate)")
    ax.set_ylabel("precision")
    return _save_plot(fig, ax, result, title, png_path, fmt)


def plot_roc(
    result: EvalResult,
    path: str | os.PathLike,
    fp_points: ArrayLike = (),
    title: str | None = None,
    label: str | None = None,
) -> Path:
    """Write the ROC of ``result`` (:func:`detection_roc`: detection rate against the number of false positives
    over the set) to an image file, atomically, with the detection rate at each count of ``fp_points`` marked.

    ``fp_points``: counts of false positives >= 0, as for :func:`detection_rate_at_fp`; the axis reaches 10%
    past the largest finite one (without any: the end of the curve). Format, errors and return value as
    :func:`plot_precision_recall`.
    """
    fmt = plot_format(path)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    points = np.asarray(fp_points, dtype=np.float64).ravel()
    marked = detection_rate_at_fp(result, points)
    fp, dr, _ = detection_roc(result)
    fig = Figure(figsize=(5, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    finite = points[np.isfinite(points)]
    # the counts asked for set the scale: a lowered threshold's thousands of false positives would squash them
    right = max(1.0, 1.1 * finite.max() if len(finite) else 1.03 * float(fp[-1]))
    if result.n_truth:  # without faces to find, the detection rate is undefined: an empty plot
        ax.plot(fp, dr, drawstyle="steps-post", color="C0", lw=2, label=label or "threshold swept")
        if len(points):
            ax.plot(np.minimum(points, right), marked, "o", color="C1", ms=4, label="at the false-positive counts")
        ax.legend(loc="lower right")
    ax.set_xlim(0, right)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("false positives (over the set)")
    ax.set_ylabel("detection rate")
    return _save_plot(fig, ax, result, title, path, fmt)


def plot_reliability(
    confidence: ArrayLike, is_face: ArrayLike, path: str | os.PathLike, bins: int = 10, title: str | None = None
) -> Path:
    """Write the reliability diagram of detections' ``confidence`` (n,) floats in [0, 1] against ``is_face`` (n,)
    bools (:func:`reliability_table`): the fraction of faces in each confidence bin against the bin's mean
    confidence, the diagonal (perfect calibration), and the detections per bin; atomically, to an image file
    (format, errors and return value as :func:`plot_precision_recall`; ValueError if the lengths differ)."""
    confidence, is_face = np.asarray(confidence, float).ravel(), np.asarray(is_face, bool).ravel()
    if confidence.shape != is_face.shape:
        raise ValueError(f"confidence and is_face differ in length: {confidence.size} and {is_face.size}")
    fmt = plot_format(path)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows, ece = reliability_table(confidence, is_face, bins)
    fig = Figure(figsize=(5, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], ":", color="grey", label="perfect calibration")
    if rows:
        low, high, n, conf, frac = (np.array(c) for c in zip(*rows, strict=True))
        ax.bar(
            (low + high) / 2,
            frac,
            width=high - low,
            color="C0",
            alpha=0.3,
            edgecolor="C0",
            label="fraction of faces per bin",
        )
        ax.plot(conf, frac, "o-", color="C1", label="at the bin's mean confidence")
        for x, y, k in zip((low + high) / 2, frac, n, strict=True):
            ax.annotate(str(k), (x, y), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("confidence")
    ax.set_ylabel("fraction of detections that are faces")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title or f"{confidence.size} detections, expected calibration error {ece:.3f}", fontsize=9)
    path = Path(path)
    with atomic_write(path) as f:
        fig.savefig(f, format=fmt)
    return path


def _save_plot(fig, ax, result, title, path, fmt):
    """Grid, a title with the set's figures (or ``title``), and the figure written atomically to ``path``."""
    ax.grid(alpha=0.3)
    ax.set_title(
        title
        or f"{plural(result.n_images, 'image')}, {plural(result.n_truth, 'face')}, IoU >= "
        f"{result.iou_threshold:g}: DR {rate(result.detection_rate)}, {result.false_positives} FP",
        fontsize=9,
    )
    path = Path(path)
    with atomic_write(path) as f:
        fig.savefig(f, format=fmt)
    return path


def plot_format(path: str | os.PathLike) -> str:
    """The image format a plot written to ``path`` takes from its suffix: "png" without one, else the suffix if
    matplotlib writes it (png, pdf, svg, jpg, tif, webp, eps, ...). Raises ValueError naming the formats, and
    ModuleNotFoundError saying how to install matplotlib (the ``plot`` extra) where it is missing."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "plots need matplotlib: pip install 'facedet-svm[plot]' (or matplotlib)", name=exc.name
        ) from None

    fmt = Path(path).suffix.lower().lstrip(".") or "png"
    supported = set(FigureCanvasAgg.get_supported_filetypes()) - {"pgf"}  # pgf needs a TeX installation
    if fmt not in supported:
        raise ValueError(
            f"{path}: cannot write a plot as .{fmt}; use one of {', '.join('.' + f for f in sorted(supported))}"
        )
    return fmt


def roc_curve(scores: ArrayLike, labels: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve of scores against binary labels (positives: label 1 / True; negatives 0, -1 or False).

    ``scores``, ``labels``: (n,) arrays. Returns ``(fpr, tpr, thresholds)``, each (p + 1,) with one point
    per distinct score in decreasing order, preceded by (0, 0) at threshold +inf: predicting positive for
    ``score >= thresholds[i]`` gives ``fpr[i], tpr[i]``. Same points as scikit-learn's ``roc_curve`` with
    ``drop_intermediate=False``. Raises ValueError for mismatched lengths, NaN/inf scores, labels outside
    {0, 1} / {-1, 1}, or only one class present.
    """
    scores, positive = _check_scores_labels(scores, labels)
    order = np.argsort(-scores, kind="stable")
    s, pos = scores[order], positive[order]
    last = np.r_[np.flatnonzero(np.diff(s) != 0), len(s) - 1]
    tp = np.cumsum(pos)[last]
    fp = (last + 1) - tp
    n_pos, n_neg = tp[-1], fp[-1]
    return np.r_[0.0, fp / n_neg], np.r_[0.0, tp / n_pos], np.r_[np.inf, s[last]]


def roc_auc(scores: ArrayLike, labels: ArrayLike) -> float:
    """Area under the ROC curve (trapezoids; equals the Mann-Whitney probability that a random positive
    scores above a random negative, ties counting one half). Arguments and errors as :func:`roc_curve`."""
    fpr, tpr, _ = roc_curve(scores, labels)
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))


def detection_rate_at_fpr(scores: ArrayLike, labels: ArrayLike, fpr: float = 0.01) -> float:
    """Highest true-positive rate over thresholds whose false-positive rate is <= ``fpr`` (no interpolation
    between ROC points: a threshold that is actually reachable). Arguments and errors as :func:`roc_curve`;
    ValueError if ``fpr`` is outside [0, 1]."""
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr must be in [0, 1], got {fpr}")
    f, t, _ = roc_curve(scores, labels)
    return float(t[f <= fpr].max())


def _check_boxes(a, name):
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 1 and a.size == 0:
        a = a.reshape(0, 4)
    if a.ndim != 2 or a.shape[1] < 4:
        raise ValueError(f"{name}: expected an (n, 4) array of x, y, w, h boxes, got shape {a.shape}")
    if not np.isfinite(a[:, :4]).all():
        raise ValueError(f"{name}: boxes contain NaN or infinity")
    if (a[:, 2:4] < 0).any():
        raise ValueError(f"{name}: box widths and heights must be >= 0")
    return a


def _check_truth(item, name):
    """(boxes, ignore) of one image as :func:`read_annotations` gives them, held to the same rules: boxes of width
    and height > 0, none listed twice (a duplicate would count as a face no detection can match)."""
    if not (isinstance(item, (tuple, list)) and len(item) == 2):
        raise ValueError(f"{name}: expected (boxes (m, 4), ignore (m,)), as read_annotations returns")
    truth = _check_boxes(item[0], name)
    if (truth[:, 2:4] <= 0).any():
        raise ValueError(f"{name}: face boxes need width and height > 0")
    if len(np.unique(truth[:, :4], axis=0)) != len(truth):
        raise ValueError(f"{name}: a face box is listed twice")
    return truth, item[1]


def _check_dets(d, name):
    d = np.asarray(d, dtype=np.float64)
    if d.ndim == 1 and d.size == 0:
        d = d.reshape(0, 5)
    if d.ndim != 2 or d.shape[1] != 5:
        raise ValueError(f"{name}: expected a (k, 5) array of x, y, w, h, score, got shape {d.shape}")
    _check_boxes(d, name)
    if np.isnan(d[:, 4]).any():
        raise ValueError(f"{name}: scores contain NaN")
    return d


def _check_ignore(ignore, m):
    if ignore is None:
        return np.zeros(m, bool)
    ignore = np.asarray(ignore)
    if ignore.shape != (m,):
        raise ValueError(f"ignore: expected shape ({m},) to match the truth boxes, got {ignore.shape}")
    # astype(bool) would read "0", "false" or 0.4 as True and silently drop a real face
    if ignore.dtype != bool and not (ignore.dtype.kind in "iuf" and np.isin(ignore, (0, 1)).all()):
        raise ValueError(f"ignore: expected booleans or 0/1, got {ignore.dtype} values {np.unique(ignore)[:5]}")
    return ignore.astype(bool)


def _check_scores_labels(scores, labels):
    scores = np.asarray(scores, dtype=np.float64).ravel()
    labels = np.asarray(labels).ravel()
    if scores.shape != labels.shape:
        raise ValueError(f"scores and labels must have the same length, got {scores.size} and {labels.size}")
    if not np.isfinite(scores).all():
        raise ValueError("scores contain NaN or infinity")
    values = set(np.unique(labels).tolist())
    if not values <= {0, 1} and not values <= {-1, 1}:
        raise ValueError(f"labels must be 0/1, -1/+1 or bool, got values {sorted(values)[:5]}")
    positive = labels == 1
    if positive.all() or not positive.any():
        raise ValueError("labels contain only one class; a ROC curve needs positives and negatives")
    return scores, positive


def reliability_table(
    confidence: ArrayLike, is_face: ArrayLike, bins: int = 10
) -> tuple[list[tuple[float, float, int, float, float]], float]:
    """Confidence bins against the measured fraction of faces: rows (low, high, detections, mean confidence,
    fraction of faces) for the non-empty bins of [0, 1] split into ``bins`` equal parts, and the expected
    calibration error (the detection-weighted mean of |mean confidence - fraction of faces|; Naeini, Cooper,
    Hauskrecht 2015)."""
    confidence, is_face = np.asarray(confidence, float), np.asarray(is_face, bool)
    which = np.minimum((confidence * bins).astype(np.int64), bins - 1)
    rows, ece = [], 0.0
    for b in range(bins):
        sel = which == b
        if sel.any():
            conf, frac = float(confidence[sel].mean()), float(is_face[sel].mean())
            rows.append((b / bins, (b + 1) / bins, int(sel.sum()), conf, frac))
            ece += sel.sum() * abs(conf - frac)
    return rows, ece / max(len(confidence), 1)
