"""LIBLINEAR's shrinking after a check of all coordinates at a fixed w, shared by the dual CD solvers of
:mod:`svmcore.dcd` (linear SVM+) and :mod:`svmcore.pmsvm`."""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, inline="always")
def keep_after_check(index, ids, G, at_lower, at_upper, pg_max, pg_min):
    """Write ``ids`` (n,) into ``index`` (at least n long), first those LIBLINEAR's rule keeps active, then, from the
    end, those it shrinks; return how many it keeps.

    The check measured every coordinate's gradient G (n,) and the projected gradients' extremes pg_max, pg_min. A
    coordinate at its lower bound (at_lower, (n,) bool) whose G exceeds pg_max > 0, or at its upper bound (at_upper)
    whose G lies below pg_min < 0, has PG = 0 there and stays so in the next epoch: it leaves, as LIBLINEAR's epoch
    after a full one would drop it.
    """
    hi = pg_max if pg_max > 0.0 else np.inf
    lo = pg_min if pg_min < 0.0 else -np.inf
    active = 0
    out = ids.shape[0]
    for s in range(ids.shape[0]):
        if (at_lower[s] and G[s] > hi) or (at_upper[s] and G[s] < lo):
            out -= 1
            index[out] = ids[s]
        else:
            index[active] = ids[s]
            active += 1
    return active
