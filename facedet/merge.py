"""Merging of overlapping detections.

A face fires many neighbouring windows (shifts and scales). Greedily by score, each strongest remaining box
collects every remaining box overlapping it with IoU >= ``iou``; the group becomes one detection: the
mean box with the group's best score (like non-maximum suppression, but averaging the box,
and like Rowley et al. 1998's overlap elimination, groups with fewer than ``min_neighbors`` windows are dropped).
"""
from __future__ import annotations

import numpy as np

from svmcore._validation import check_scalar


def box_iou(box, boxes):
    """IoU of one box (4,) against boxes (n, 4), all xywh; (n,) float64."""
    x1 = np.maximum(box[0], boxes[:, 0])
    y1 = np.maximum(box[1], boxes[:, 1])
    x2 = np.minimum(box[0] + box[2], boxes[:, 0] + boxes[:, 2])
    y2 = np.minimum(box[1] + box[3], boxes[:, 1] + boxes[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    union = box[2] * box[3] + boxes[:, 2] * boxes[:, 3] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


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
    if not 0 < iou <= 1:
        raise ValueError(f"iou: must be in (0, 1], got {iou!r}")
    check_scalar(min_neighbors, "min_neighbors", lo=1, integer=True)
    order = np.argsort(-dets[:, 4], kind="stable")
    rest = dets[order]
    out = []
    while len(rest):
        member = box_iou(rest[0, :4], rest[:, :4]) >= iou
        member[0] = True
        group = rest[member]
        box = group[:, :4].mean(axis=0)
        if member.sum() >= min_neighbors:
            out.append([*box, group[0, 4], member.sum()])
        rest = rest[~member]
    return np.array(out, dtype=np.float64).reshape(-1, 6)
