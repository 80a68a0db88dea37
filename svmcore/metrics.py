"""Evaluation measures for multiclass scores."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .validation import check_array, check_scalar

if TYPE_CHECKING:
    from collections.abc import Iterable

    from numpy.typing import ArrayLike


def _true_class_rank(scores, y):
    scores = check_array(scores, "scores")
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != scores.shape[0]:
        raise ValueError(f"y: expected {scores.shape[0]} class indices, got shape {y.shape}")
    if y.dtype.kind not in "iu":
        raise TypeError(f"y: expected integer class indices (columns of scores), got dtype {y.dtype}")
    if y.size and (y.min() < 0 or y.max() >= scores.shape[1]):
        raise ValueError(f"y: class indices must lie in [0, {scores.shape[1]}), got [{y.min()}, {y.max()}]")
    true = scores[np.arange(y.size), y][:, None]
    # other classes scoring at least as high as the true one: ties count against the prediction
    return (scores >= true).sum(axis=1) - 1


def top_k_accuracy(scores: ArrayLike, y: ArrayLike, k: int) -> float:
    """Fraction of rows whose true class is among the k highest scores.

    scores: (n, m) float array; y: (n,) integer class indices into the columns of ``scores``; k: int in [1, m].
    Ties are resolved against the true class (a constant score vector is never correct for k < m), so the
    measure cannot be inflated by degenerate scores. Returns a float in [0, 1]. Raises ValueError for NaN,
    mismatched lengths, out-of-range indices or k; TypeError for non-integer y.
    """
    rank = _true_class_rank(scores, y)
    check_scalar(k, "k", lo=1, hi=np.asarray(scores).shape[1], integer=True)
    return float(np.mean(rank < k))


def top_k_accuracies(scores: ArrayLike, y: ArrayLike, ks: Iterable[int]) -> dict[int, float]:
    """``{k: top_k_accuracy(scores, y, k)}`` for each k in ``ks`` (k > m is reported as 1.0), ranking once."""
    rank = _true_class_rank(scores, y)
    return {int(k): float(np.mean(rank < check_scalar(k, "k", lo=1, integer=True))) for k in ks}
