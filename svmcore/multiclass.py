"""One-vs-one multiclass: the pairs of classes and LIBSVM's voting, shared by SVC and PmSVM."""

from __future__ import annotations

import numpy as np


def ovo_pairs(n_classes: int) -> np.ndarray:
    """(n_classes (n_classes - 1) / 2, 2) int64 class indices (a, b), a < b, in LIBSVM's order; in each binary
    problem class b is the positive one."""
    return np.array([(a, b) for a in range(n_classes) for b in range(a + 1, n_classes)], dtype=np.int64).reshape(-1, 2)


def ovo_votes(F: np.ndarray, pairs: np.ndarray, n_classes: int) -> np.ndarray:
    """Class scores (n, n_classes) from pairwise decision values F (n, n_pairs), f > 0 voting for b: the votes
    plus the summed confidences squashed into (-1/3, 1/3), which only break ties (LIBSVM / scikit-learn's
    "ovr" shape of a one-vs-one decision function)."""
    votes = np.zeros((F.shape[0], n_classes))
    conf = np.zeros((F.shape[0], n_classes))
    for m, (a, b) in enumerate(pairs):  # a loop over pairs of classes, not samples
        win_b = F[:, m] > 0
        votes[:, b] += win_b
        votes[:, a] += ~win_b
        conf[:, b] += F[:, m]
        conf[:, a] -= F[:, m]
    return votes + conf / (3.0 * (np.abs(conf) + 1.0))
