"""The Q-matrix interface of the decomposition solver, and its one column cache.

The solver (``smo.solve``) never sees kernels: it asks a Q-matrix for ``rows(idx, active)``, the block
Q[idx][:, active] as float32 (a working set's columns, stored as rows since Q is symmetric), and for its
``diagonal``. Kinds:

- :class:`KernelQ`: Q_ij = y_i y_j K(x_i, x_j) (C-SVC) or K(x_i, x_j) (one-class, ``y=None``); columns are
  computed a working set at a time through BLAS (``kernels.kernel_block``) and kept in a :class:`ColumnCache`.
- :class:`PrecomputedQ`: an explicit (n, n) matrix (precomputed kernels, kernel SVM+ with Q = H + G).
"""
from __future__ import annotations

import numpy as np

from .kernels import KernelSpec, kernel_block, kernel_diagonal, row_norms_sq


class ColumnCache:
    """Least-recently-used cache of Q columns, bounded in megabytes (LIBSVM's cache, block-wise).

    A column is stored as a length-n float32 row whose entries are valid on the active set it was
    computed for; as shrinking only removes variables, it stays valid until :meth:`clear` (called when
    the solver reactivates all variables). ``hits``/``misses`` count columns.
    """

    def __init__(self, n, cache_mb, min_columns):
        n_slots = int(cache_mb * 2**20 // (4 * max(n, 1)))
        self.n_slots = max(min(n_slots, n), min_columns)
        self.data = np.empty((self.n_slots, n), dtype=np.float32)
        self.slot_of = np.full(n, -1, dtype=np.int64)
        self.owner = np.full(self.n_slots, -1, dtype=np.int64)
        self.last_used = np.zeros(self.n_slots, dtype=np.int64)
        self.clock = 0
        self.hits = 0
        self.misses = 0

    def clear(self):
        self.slot_of[:] = -1
        self.owner[:] = -1
        self.last_used[:] = 0

    def lookup(self, idx):
        """Return (slots (q,), missing mask (q,)); assigns slots to missing columns, evicting LRU ones."""
        self.clock += 1
        slots = self.slot_of[idx]
        missing = slots < 0
        n_missing = int(missing.sum())
        self.hits += len(idx) - n_missing
        self.misses += n_missing
        if n_missing:
            usage = self.last_used.copy()
            usage[slots[~missing]] = np.iinfo(np.int64).max  # never evict what this request needs
            victims = np.argpartition(usage, n_missing - 1)[:n_missing] if n_missing < self.n_slots else np.arange(n_missing)
            old = self.owner[victims]
            self.slot_of[old[old >= 0]] = -1
            self.owner[victims] = idx[missing]
            self.slot_of[idx[missing]] = victims
            slots = slots.copy()
            slots[missing] = victims
        self.last_used[slots] = self.clock
        return slots, missing


class KernelQ:
    """Q for a kernel SVM on samples X (n, d), float64 array or CSR; ``y`` (n,) of +-1 or None (one-class)."""

    def __init__(self, X, spec: KernelSpec, y=None, cache_mb=200.0, max_working_set=2):
        self.X = X
        self.n = X.shape[0]
        self.spec = spec
        self.y = None if y is None else np.asarray(y, dtype=np.float32)
        self.sq = row_norms_sq(X)
        self.diagonal = kernel_diagonal(X, spec, self.sq)
        self.cache = ColumnCache(self.n, cache_mb, max_working_set)
        self._active = None
        self._X_active = X
        self._sq_active = self.sq

    def _compute(self, idx, active):
        if active is not self._active:  # shrinking changed the active set: gather its rows once
            full = len(active) == self.n
            self._X_active = self.X if full else self.X[active]
            self._sq_active = self.sq if full else self.sq[active]
            self._active = active
        out = np.empty((len(idx), len(active)), dtype=np.float32)
        kernel_block(self.X[idx], self._X_active, self.spec, self.sq[idx], self._sq_active, out=out)
        if self.y is not None:
            out *= self.y[idx, None]
            out *= self.y[None, active]
        return out

    def rows(self, idx, active, use_cache=True):
        """Q[idx][:, active] as (len(idx), len(active)) float32; ``active`` is an increasing index array."""
        if not use_cache:
            return self._compute(idx, active)
        slots, missing = self.cache.lookup(idx)
        full = len(active) == self.n
        if missing.any():
            block = self._compute(idx[missing], active)
            if full:
                self.cache.data[slots[missing]] = block
            else:
                self.cache.data[np.ix_(slots[missing], active)] = block
        return self.cache.data[slots] if full else self.cache.data[np.ix_(slots, active)]

    def reset(self):
        """Forget cached columns (they are valid only on the active set they were computed for)."""
        self.cache.clear()

    @property
    def hit_rate(self):
        total = self.cache.hits + self.cache.misses
        return self.cache.hits / total if total else 0.0


class PrecomputedQ:
    """Q given as an explicit symmetric (n, n) matrix (already in memory, so no cache)."""

    def __init__(self, Q, y=None):
        Q = np.asarray(Q, dtype=np.float64)
        if Q.ndim != 2 or Q.shape[0] != Q.shape[1]:
            raise ValueError(f"Q: expected a square matrix, got shape {Q.shape}")
        if y is not None:
            y = np.asarray(y, dtype=np.float64)
            Q = Q * np.outer(y, y)
        self.Q = Q.astype(np.float32)
        self.n = Q.shape[0]
        self.diagonal = np.diag(Q).copy()
        self.hit_rate = 1.0

    def rows(self, idx, active, use_cache=True):
        if len(active) == self.n:
            return self.Q[idx]
        return self.Q[np.ix_(idx, active)]

    def reset(self):
        pass
