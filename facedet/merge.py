"""Merging of overlapping detections.

A face fires many neighbouring windows (shifts and scales). Greedily by score, each strongest remaining box
collects every remaining box overlapping it with IoU >= ``iou``; the group becomes one detection: the
mean box with the group's best score (like non-maximum suppression, but averaging the box,
and like Rowley et al. 1998's overlap elimination, groups with fewer than ``min_neighbors`` windows are dropped).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from svmcore.validation import check_scalar

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def box_iou(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """IoU of boxes a (n, 4) with boxes b (m, 4), xywh (extra columns ignored): (n, m) float64 in [0, 1], 0
    where the union is empty; a (4,) gives (m,). No input checks (see :func:`facedet.evaluate.iou`).

    Each area comes from the same corners as the intersection, so that a box's IoU with itself is exactly 1
    (w * h and ((x + w) - x) * h differ in the last bit, which made IoU 1 + 1e-16 and failed a threshold of 1)."""
    a2, b = np.atleast_2d(np.asarray(a, np.float64)), np.asarray(b, np.float64)
    ax0, ay0, ax1, ay1 = a2[:, 0, None], a2[:, 1, None], (a2[:, 0] + a2[:, 2])[:, None], (a2[:, 1] + a2[:, 3])[:, None]
    bx0, by0, bx1, by1 = b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]
    inter = np.clip(np.minimum(ax1, bx1) - np.maximum(ax0, bx0), 0.0, None) * np.clip(
        np.minimum(ay1, by1) - np.maximum(ay0, by0), 0.0, None
    )
    union = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter
    out = np.zeros(inter.shape)
    np.divide(inter, union, out=out, where=union > 0)
    np.minimum(out, 1.0, out=out)
    return out[0] if np.ndim(a) == 1 else out


def merge_detections(dets: ArrayLike, iou: float = 0.3, min_neighbors: int = 1) -> np.ndarray:
    """Group overlapping detections (k, 5) [x, y, w, h, score] -> (g, 6) [x, y, w, h, score, n_windows].

    Groups are formed greedily from the highest score; the loop runs once per output group, not per window.
    Groups of fewer than ``min_neighbors`` windows are dropped. Raises ValueError for a wrong shape, NaN/inf,
    a width or height <= 0, iou outside (0, 1] or min_neighbors < 1; TypeError for a non-integer min_neighbors.
    """
    dets = np.asarray(dets, dtype=np.float64)
    if dets.size == 0:
        dets = dets.reshape(0, 5)
    if dets.ndim != 2 or dets.shape[1] != 5:
        raise ValueError(f"dets: expected shape (k, 5), got {dets.shape}")
    if not np.isfinite(dets[:, :4]).all() or (dets[:, 2:4] <= 0).any():
        raise ValueError("dets: boxes must be finite with width and height > 0")
    if np.isnan(dets[:, 4]).any():  # a NaN score would fall out of the greedy order unnoticed
        raise ValueError("dets: scores must not be NaN")
    check_scalar(iou, "iou", lo=0, hi=1, lo_open=True)
    check_scalar(min_neighbors, "min_neighbors", lo=1, integer=True)
    order = np.argsort(-dets[:, 4], kind="stable")
    rest = dets[order]
    if len(rest) == 0:
        return np.empty((0, 6))
    boxes = np.ascontiguousarray(rest[:, :4])
    # the candidates of each box, found by numpy (numba's sort and search take 6 s to compile): the boxes whose
    # left edge lies in [x0 - reach w, x1), reach w the widest box that can reach the IoU
    by_x = np.argsort(boxes[:, 0], kind="stable")
    x_sorted = boxes[by_x, 0]
    lo = np.searchsorted(x_sorted, boxes[:, 0] - 1.1 / np.sqrt(iou) * boxes[:, 2])
    hi = np.searchsorted(x_sorted, boxes[:, 0] + boxes[:, 2])
    group = _greedy_groups(boxes, by_x, lo, hi, float(iou))
    counts = np.bincount(group)
    idx = np.argsort(group, kind="stable")  # each group's members together, in score order
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    out = np.c_[np.add.reduceat(rest[idx, :4], starts, axis=0) / counts[:, None], rest[idx[starts], 4], counts]
    return out[counts >= min_neighbors].reshape(-1, 6)


@njit(cache=True)
def _greedy_groups(boxes, by_x, lo, hi, iou):
    """Group index of each box (n, 4) xywh, sorted by descending score: each box not yet taken starts a group
    and takes every later untaken box with IoU >= iou against it (box_iou's arithmetic). Compiled, and only
    boxes that can reach the IoU are tried: IoU >= iou needs the smaller area to be at least iou times the
    larger, so a box of width bw <= w / sqrt(iou) (w the leader's; squares, as windows are; 10% spare for
    rectangles) with its left edge within bw of the leader's: an early bootstrapping round has tens of
    thousands of windows an image. by_x: the boxes' order by left edge; box i's candidates are
    by_x[lo[i]:hi[i]]."""
    n = boxes.shape[0]
    group = np.empty(n, np.int64)
    for i in range(n):
        group[i] = -1
    g = 0
    for i in range(n):
        if group[i] >= 0:
            continue
        group[i] = g
        ax0, ay0 = boxes[i, 0], boxes[i, 1]
        ax1, ay1 = ax0 + boxes[i, 2], ay0 + boxes[i, 3]
        for k in range(lo[i], hi[i]):
            j = by_x[k]
            if group[j] >= 0:
                continue
            bx0, by0 = boxes[j, 0], boxes[j, 1]
            bx1, by1 = bx0 + boxes[j, 2], by0 + boxes[j, 3]
            inter = max(min(ax1, bx1) - max(ax0, bx0), 0.0) * max(min(ay1, by1) - max(ay0, by0), 0.0)
            union = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter
            if union > 0 and min(inter / union, 1.0) >= iou:
                group[j] = g
        g += 1
    return group
