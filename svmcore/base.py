"""Estimator base: scikit-learn style parameters, and the state that persistence saves and restores."""

from __future__ import annotations

import copy
import inspect
import numbers
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from . import persistence
from .validation import (
    check_fitted,
    check_sample_weight,
    class_sample_weight,
    class_weight_from_json,
    class_weight_to_json,
)

if TYPE_CHECKING:
    import os
    from pathlib import Path
    from typing import Any

    from numpy.typing import ArrayLike

    from .validation import MatrixLike


class BaseEstimator:
    """Hyperparameters are the ``__init__`` arguments; learned attributes end in ``_``.

    Subclasses list their learned arrays in ``_state_arrays`` and learned scalars (numbers) in
    ``_state_meta``; :meth:`save` stores exactly those, and ``svmcore.load`` restores them after
    calling ``_check_state``: the hyperparameter checks of ``fit`` (``_check_params``) plus the shape
    checks subclasses add. Arrays named in ``_sparse_arrays`` may be scipy.sparse CSR matrices, which files hold
    as their CSR parts, for every estimator alike (:func:`svmcore.persistence.split_sparse`), and so do the mostly-zero
    arrays named in ``_sparse_in_files``, which load dense. Works with
    scikit-learn's model selection (``clone``, ``GridSearchCV``, ``Pipeline``) without depending on it.

    A fitted model keeps the hyperparameters it was fitted with: a successful fit (and load) records them
    (``_freeze``), scoring reads them through ``_param`` and :meth:`save` writes them, so ``set_params`` after
    fit takes effect at the next fit and never turns a model into another (an rbf model scored with a linear
    kernel). ``_live_params`` names the exceptions that act on scoring at once (PmSVM's ``lut_bins``).
    """

    _state_arrays: tuple[str, ...] = ()
    _state_meta: tuple[str, ...] = ()
    _int_arrays: tuple[str, ...] = ("support_", "n_iter_")  # learned arrays of indices or counts; the rest are floats
    _sparse_arrays: tuple[str, ...] = ()  # learned arrays that may be CSR (load refuses sparse parts of others)
    # learned arrays held dense but written as CSR parts where under a tenth of their entries are nonzero (SVC's
    # one-vs-one dual_coef_: a pair's coefficients are nonzero on its two classes' support vectors only)
    _sparse_in_files: tuple[str, ...] = ()
    _estimator_type: str | None = None
    _sparse_input = True  # whether fit accepts scipy.sparse X (scikit-learn's input tag)
    _pairwise_input = False  # X is a kernel matrix: model selection must slice its rows and columns
    _positive_input = False  # X must be >= 0
    _params_added_later: dict = {}  # defaults for hyperparameters that files saved by earlier versions lack
    _live_params: tuple[str, ...] = ()  # hyperparameters that change scoring at once, not at the next fit

    def __sklearn_tags__(self):
        # called only by scikit-learn (>= 1.6), so importing it here adds no runtime dependency
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        classifier = self._estimator_type == "classifier"
        return Tags(
            estimator_type=self._estimator_type,
            target_tags=TargetTags(required=classifier),
            classifier_tags=ClassifierTags() if classifier else None,
            input_tags=InputTags(
                sparse=self._sparse_input, pairwise=self._pairwise_input, positive_only=self._positive_input
            ),
        )

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [
            p
            for p in sig.parameters
            if p != "self" and sig.parameters[p].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD
        ]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The hyperparameters as a dict {name: value} (``deep`` is accepted for scikit-learn)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> BaseEstimator:
        """Set hyperparameters by name and return self; ValueError for an unknown name. Takes effect at the
        next ``fit``: a fitted model goes on scoring (and saving) with the values it was fitted with."""
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"{type(self).__name__}: unknown parameter {key!r}")
            setattr(self, key, value)
        return self

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if not callable(v))
        return f"{type(self).__name__}({args})"

    def _freeze(self):
        """Record the hyperparameters of the model just fitted (or loaded); called last, once it succeeded."""
        self._fit_params = {k: copy.deepcopy(v) for k, v in self.get_params().items() if not callable(v)}

    def _param(self, name):
        """Hyperparameter ``name`` as the fitted model uses it (see the class docstring)."""
        fitted = self.__dict__.get("_fit_params")
        if fitted is None or name not in fitted or name in self._live_params:
            return getattr(self, name)
        return fitted[name]

    def fitted_params(self) -> dict:
        """The hyperparameters the fitted model uses: those of its last successful ``fit`` (or of its file), which
        a later ``set_params`` does not change until the next ``fit``; the current ones before any fit."""
        return {k: self._param(k) for k in self.get_params()}

    def check_params(self) -> None:
        """Check the hyperparameters without fitting, as ``fit`` does first.

        Raises
        ------
        TypeError
            A hyperparameter of the wrong kind (a string for ``C``).
        ValueError
            A hyperparameter out of its range (``C <= 0``, an unknown ``kernel``).
        """
        self._check_params()

    # --- persistence -----------------------------------------------------------------------------
    def _get_state(self):
        """(params, meta, arrays) that save writes, checked by building the model load would build from them."""
        params, meta, arrays = self._state()
        for k in self._sparse_in_files:
            a = arrays[k]
            if isinstance(a, np.ndarray) and a.ndim == 2 and np.count_nonzero(a) < 0.1 * a.size:
                arrays[k] = sp.csr_matrix(a)
        arrays = persistence.split_sparse(arrays)  # what files hold: numeric arrays only
        type(self)._from_state(dict(params), dict(meta), dict(arrays))  # never write a file that load would refuse
        return params, meta, arrays

    def _state(self):
        check_fitted(self, self._state_arrays[0])
        params = {k: self._param(k) for k, v in self.get_params().items() if not callable(v)}
        for k, v in params.items():
            if isinstance(v, np.generic):
                params[k] = v.item()
            elif isinstance(v, numbers.Real) and not isinstance(v, (bool, int, float)):
                params[k] = float(v)  # a Fraction: the solvers used it as a float, and JSON has no fractions
        if isinstance(params.get("random_state"), (np.random.Generator, np.random.RandomState)):
            params["random_state"] = None  # it only seeded fit; a generator's state is not a hyperparameter
        if "class_weight" in params:
            params["class_weight"] = class_weight_to_json(params["class_weight"])
        meta = {}
        for k in self._state_meta:
            v = getattr(self, k)
            meta[k] = v.item() if isinstance(v, np.generic) else v
        arrays = {k: getattr(self, k) for k in self._state_arrays}
        return params, meta, arrays

    @classmethod
    def _file_arrays(cls) -> list[str]:
        """The array names a file of this class may hold: the learned arrays, and the CSR parts (``<name>.data``,
        ...) of those that may be stored sparse; a file holding others is refused before any array is read."""
        sparse = cls._sparse_arrays + cls._sparse_in_files
        return list(cls._state_arrays) + [f"{k}.{part}" for k in sparse for part in persistence.SPARSE_PARTS]

    @classmethod
    def _from_state(cls, params, meta, arrays):
        arrays = persistence.join_sparse(arrays, cls._sparse_arrays + cls._sparse_in_files)
        arrays.update({k: arrays[k].toarray() for k in cls._sparse_in_files if sp.issparse(arrays.get(k))})
        params = cls._upgrade_params({**cls._params_added_later, **params})
        if "class_weight" in params:
            params["class_weight"] = class_weight_from_json(params["class_weight"])
        unknown = set(params) - set(cls._param_names())
        if unknown:
            raise ValueError(f"unknown parameters {sorted(unknown)}")
        missing = set(cls._param_names()) - set(params) - {"callback"}  # callables are never saved
        if missing:  # a default would silently change the model (another kernel, degree, ...)
            raise ValueError(f"missing parameters {sorted(missing)}")
        for kind, given, known in (("arrays", arrays, cls._state_arrays), ("values", meta, cls._state_meta)):
            if set(given) - set(known):  # not part of this model: a foreign or edited file
                raise ValueError(f"unknown {kind} {sorted(set(given) - set(known))}")
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
        est._freeze()
        return est

    @classmethod
    def _upgrade_params(cls, params):
        """Hyperparameters of a file written by an earlier version, as this version names what that model is."""
        return params

    def _check_params(self):
        """Check the hyperparameters (TypeError / ValueError); subclasses extend this."""

    def _check_state(self):
        """Validate restored hyperparameters and learned attributes; raise ValueError if inconsistent."""
        self._check_params()
        for k in self._state_arrays:
            a = getattr(self, k)
            # classes_ may hold any labels (bool, numbers, str or bytes); indices and counts are integers; every
            # other array is a learned float: a bool or int one (an edited file) would score as another model
            # or fail in numpy's arithmetic (-bool)
            kinds = "biufUS" if k == "classes_" else "iu" if k in self._int_arrays else "f"
            if a.dtype.kind not in kinds:
                what = "or strings" if k == "classes_" else "(integers)" if kinds == "iu" else "(floats)"
                raise ValueError(f"array {k!r} has dtype {a.dtype}; expected numbers {what}")
            if a.dtype.kind == "f" and not np.isfinite(a.data if sp.issparse(a) else a).all():
                raise ValueError(f"array {k!r} contains NaN or infinity")
        if "classes_" in self._state_arrays:  # what predict indexes: one label per class, each once
            c = self.classes_
            if c.ndim != 1 or np.unique(c).size != c.size:
                raise ValueError(f"classes_ must be a 1-D array of distinct labels, got shape {c.shape}")
        for k in self._state_meta:
            v = getattr(self, k)
            # (an int is finite; np.isfinite refuses one beyond int64 with a TypeError)
            if (
                isinstance(v, bool)
                or not isinstance(v, numbers.Real)
                or not (isinstance(v, numbers.Integral) or np.isfinite(v))
            ):
                raise ValueError(f"{k} must be a finite number, got {v!r}")
            if k.startswith("n_"):  # counts
                if not (isinstance(v, numbers.Integral) and v >= 0):
                    raise ValueError(f"{k} must be a count (an integer >= 0), got {v!r}")
            else:  # a learned real: JSON gives an int for 10**30, which numba's kernels cannot type
                try:
                    setattr(self, k, float(v))
                except OverflowError:
                    raise ValueError(f"{k} must be a finite number, got {v!r}") from None
        if getattr(self, "class_weight", None) is not None and hasattr(self, "classes_"):
            class_sample_weight(self.class_weight, self.classes_, np.zeros(0, dtype=np.int64))  # labels are classes

    def save(self, path: str | os.PathLike) -> Path:
        """Save the fitted model to ``path`` (.npz arrays + JSON header, written atomically); returns the
        path as a ``pathlib.Path``.

        Raises :class:`svmcore.NotFittedError` (a ValueError) if the model is not fitted, TypeError if a
        hyperparameter cannot be stored in JSON, OSError if the folder is not writable (an existing file at
        ``path`` is then left intact).
        """
        return persistence.save(self, path)


class ClassifierMixin:
    """scikit-learn's classifier protocol: ``_estimator_type`` and :meth:`score` (mean accuracy)."""

    _estimator_type = "classifier"

    def score(self, X: MatrixLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Mean accuracy of ``predict(X)`` against labels y (n,) (or (n, 1), as fit takes); a float in [0, 1],
        weighted by sample_weight (n,) >= 0 if given (scikit-learn's signature). ValueError if y does not hold
        one label per row of X, or as fit for sample_weight (wrong length, negative, all zero)."""
        pred = self.predict(X)
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.shape != pred.shape:
            raise ValueError(f"y: expected {pred.shape[0]} labels, one per row of X, got shape {y.shape}")
        return float(np.average(pred == y, weights=check_sample_weight(sample_weight, len(y))))
