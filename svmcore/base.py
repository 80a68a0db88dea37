"""Estimator base: scikit-learn style parameters, and the state that persistence saves and restores."""
from __future__ import annotations

import inspect

import numpy as np

from . import persistence


class BaseEstimator:
    """Hyperparameters are the ``__init__`` arguments; learned attributes end in ``_``.

    Subclasses list their learned arrays in ``_state_arrays`` and learned scalars (JSON-able) in
    ``_state_meta``; :meth:`save` stores exactly those, and ``svmcore.load`` restores them after
    calling ``_check_state``, which subclasses override to validate shapes.
    """

    _state_arrays: tuple[str, ...] = ()
    _state_meta: tuple[str, ...] = ()

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self" and sig.parameters[p].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]

    def get_params(self, deep=True):
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"{type(self).__name__}: unknown parameter {key!r}")
            setattr(self, key, value)
        return self

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if not callable(v))
        return f"{type(self).__name__}({args})"

    # --- persistence -----------------------------------------------------------------------------
    def _get_state(self):
        if not hasattr(self, self._state_arrays[0]):
            raise ValueError(f"this {type(self).__name__} is not fitted yet; nothing to save")
        params = {k: v for k, v in self.get_params().items() if not callable(v)}
        for k, v in params.items():
            if isinstance(v, np.generic):
                params[k] = v.item()
        meta = {}
        for k in self._state_meta:
            v = getattr(self, k)
            meta[k] = v.item() if isinstance(v, np.generic) else v
        arrays = {k: getattr(self, k) for k in self._state_arrays}
        return params, meta, arrays

    @classmethod
    def _from_state(cls, params, meta, arrays):
        unknown = set(params) - set(cls._param_names())
        if unknown:
            raise ValueError(f"unknown parameters {sorted(unknown)}")
        est = cls(**params)
        for k in cls._state_arrays:
            if k not in arrays:
                raise KeyError(f"missing array {k!r}")
            setattr(est, k, arrays[k])
        for k in cls._state_meta:
            if k not in meta:
                raise KeyError(f"missing value {k!r}")
            setattr(est, k, meta[k])
        est._check_state()
        return est

    def _check_state(self):
        """Validate restored learned attributes; raise ValueError if inconsistent."""
        for k in self._state_arrays:
            a = getattr(self, k)
            if a.dtype.kind in "fc" and not np.isfinite(a).all():
                raise ValueError(f"array {k!r} contains NaN or infinity")

    def save(self, path):
        """Save the fitted model to ``path`` (.npz arrays + JSON header, written atomically)."""
        return persistence.save(self, path)
