"""Merging of overlapping detections.

A face fires many neighbouring windows (shifts and scales). Greedily by score, each strongest remaining box
collects every remaining box overlapping it with IoU >= ``iou``; the group becomes one detection: the
mean box with the group's best score (like non-maximum suppression, but averaging the box,
and like Rowley et al. 1998's overlap elimination, groups with fewer than ``min_neighbors`` windows are dropped).
"""
from __future__ import annotations

import numpy as np

from svmcore._validation import check_scalar


def box_iou(a, b):
    """IoU of boxes a (n, 4) with boxes b (m, 4), xywh (extra columns ignored): (n, m) float64 in [0, 1], 0
    where the union is empty; a (4,) gives (m,). No input checks (see :func:`facedet.evaluate.iou`).

    Each area comes from the same corners as the intersection, so that a box's IoU with itself is exactly 1
    (w * h and ((x + w) - x) * h differ in the last bit, which made IoU 1 + 1e-16 and failed a threshold of 1)."""
    a2, b = np.atleast_2d(np.asarray(a, np.float64)), np.asarray(b, np.float64)
    ax0, ay0, ax1, ay1 = a2[:, 0, None], a2[:, 1, None], (a2[:, 0] + a2[:, 2])[:, None], (a2[:, 1] + a2[:, 3])[:, None]
    bx0, by0, bx1, by1 = b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]
    inter = (np.clip(np.minimum(ax1, bx1) - np.maximum(ax0, bx0), 0.0, None)
             * np.clip(np.minimum(ay1, by1) - np.maximum(ay0, by0), 0.0, None))
    union = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter
    out = np.zeros(inter.shape)
    np.divide(inter, union, out=out, where=union > 0)
    np.minimum(out, 1.0, out=out)
    return out[0] if np.ndim(a) == 1 else out


def merge_detections(dets, iou=0.3, min_neighbors=1):
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
    out = []
    while len(rest):
        member = box_iou(rest[0], rest) >= iou
        member[0] = True
        group = rest[member]
        box = group[:, :4].mean(axis=0)
        if member.sum() >= min_neighbors:
            out.append([*box, group[0, 4], member.sum()])
        rest = rest[~member]
    return np.array(out, dtype=np.float64).reshape(-1, 6)
