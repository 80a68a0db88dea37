"""Input checks shared by every svmcore estimator.

Every check raises ``TypeError`` for a wrong kind of object or dtype and ``ValueError`` for a wrong
value (shape, NaN/inf, empty, a single class, out-of-range hyperparameter), naming the argument.
"""
from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp


def check_array(X, name="X", *, ndim=2, allow_sparse=False, dtype=np.float64, min_rows=1):
    """Return ``X`` as a C-contiguous float array (or CSR matrix if ``allow_sparse``).

    Raises TypeError for non-numeric data or sparse input where it is not supported, ValueError for a
    wrong number of dimensions, fewer than ``min_rows`` rows, zero columns, or NaN/inf entries.
    """
    if sp.issparse(X):
        if not allow_sparse:
            raise TypeError(f"{name}: sparse input is not supported here; pass a dense array")
        X = sp.csr_matrix(X)
        if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool) or np.issubdtype(X.dtype, np.complexfloating):
            raise TypeError(f"{name}: expected real numbers, got dtype {X.dtype}")
        X = X.astype(dtype)
        data = X.data
        shape = X.shape
    else:
        if X is None:
            raise TypeError(f"{name}: expected an array, got None")
        X = np.asarray(X)
        if X.dtype == object:  # e.g. from pandas: numbers stored as objects convert, anything else does not
            try:
                X = X.astype(np.float64)
            except (TypeError, ValueError, OverflowError) as exc:
                raise TypeError(f"{name}: expected real numbers, got dtype object ({exc})") from None
        if np.issubdtype(X.dtype, np.complexfloating):
            raise ValueError(f"{name}: Complex data not supported")
        if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool):
            raise TypeError(f"{name}: expected real numbers, got dtype {X.dtype}")
        if X.ndim != ndim:
            hint = ("; Reshape your data: X.reshape(-1, 1) for a single feature, X.reshape(1, -1) for a single "
                    "sample") if ndim == 2 and X.ndim == 1 else ""
            raise ValueError(f"{name}: expected a {ndim}-D array, got shape {X.shape}{hint}")
        X = np.ascontiguousarray(X, dtype=dtype)
        data = X
        shape = X.shape
    if shape[0] < min_rows:
        raise ValueError(f"{name}: expected at least {min_rows} sample(s), got {shape[0]} sample"
                         f"{'' if shape[0] == 1 else 's'} (shape {shape})")
    if ndim == 2 and shape[1] == 0:  # scikit-learn's wording
        raise ValueError(f"{name}: 0 feature(s) (shape=({shape[0]}, 0)) while a minimum of 1 is required.")
    if not np.isfinite(data).all():
        raise ValueError(f"{name}: contains NaN or infinity")
    return X


def check_n_features(X, n_features, name="X", owner=None):
    """Raise ValueError unless ``X`` has ``n_features`` columns (the number seen in fit by ``owner``)."""
    if X.shape[1] != n_features:
        who = type(owner).__name__ if owner is not None else "the model"
        raise ValueError(f"{name} has {X.shape[1]} features, but {who} is expecting {n_features} features as input")


def check_labels(y, n_samples, *, name="y", min_classes=2, max_classes=None):
    """Return ``(classes, y_index)``: sorted unique labels and each sample's class index (int64).

    Raises ValueError for a wrong length, NaN labels, fewer than ``min_classes`` distinct labels
    (for example a single class), or more than ``max_classes``.
    """
    if y is None:
        raise ValueError(f"{name}: this estimator requires y to be passed, but the target y is None")
    y = np.asarray(y)
    if y.ndim != 1:
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        else:
            raise ValueError(f"{name}: expected a 1-D array of labels, got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(f"{name}: has {y.shape[0]} labels for {n_samples} samples")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError(f"{name}: contains NaN or infinity")
    if y.dtype.kind == "f" and not np.array_equal(y, np.rint(y)):  # a regression target, not classes
        raise ValueError(f"{name}: Unknown label type: continuous (non-integer float labels); pass class labels")
    if y.dtype == object:  # pandas / CSV string columns arrive as object arrays of str
        if not all(isinstance(v, str) for v in y):
            raise ValueError(f"{name}: Unknown label type: labels must be numbers or strings, got objects")
        y = y.astype(str)
    classes, y_index = np.unique(y, return_inverse=True)
    if classes.size < min_classes:
        raise ValueError(f"{name}: needs at least {min_classes} classes, got {classes.size} class"
                         f"{'es' if classes.size != 1 else ''} ({classes.tolist()})")
    if max_classes is not None and classes.size > max_classes:
        raise ValueError(f"{name}: expected at most {max_classes} classes, got {classes.size}")
    return classes, y_index.astype(np.int64)


def check_sample_weight(sample_weight, n_samples):
    """Return per-sample weights as float64 (ones if None); ValueError if negative, non-finite or all zero."""
    if sample_weight is None:
        return np.ones(n_samples)
    w = check_array(sample_weight, "sample_weight", ndim=1)
    if w.shape[0] != n_samples:
        raise ValueError(f"sample_weight: has {w.shape[0]} entries for {n_samples} samples")
    if (w < 0).any():
        raise ValueError("sample_weight: must be >= 0")
    if not (w > 0).any():
        raise ValueError("sample_weight: all weights are zero")
    return w


def check_scalar(value, name, *, lo=None, hi=None, lo_open=False, hi_open=False, integer=False):
    """Return ``value`` after checking it is a real (or integer) number within the given bounds."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name}: expected {'an integer' if integer else 'a real number'}, got {value!r}")
    if not np.isfinite(value):
        raise ValueError(f"{name}: must be finite, got {value!r}")
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise ValueError(f"{name}: must be {'>' if lo_open else '>='} {lo}, got {value!r}")
    if hi is not None and (value >= hi if hi_open else value > hi):
        raise ValueError(f"{name}: must be {'<' if hi_open else '<='} {hi}, got {value!r}")
    return value


def check_choice(value, name, choices):
    """Return ``value`` if it is one of ``choices``; ValueError naming the allowed values otherwise."""
    if value not in choices:
        raise ValueError(f"{name}: unknown value {value!r}; expected one of {sorted(choices)}")
    return value


class NotFittedError(ValueError, AttributeError):
    """Raised when a model is used before ``fit``; a ValueError and an AttributeError, like scikit-learn's."""


def check_fitted(estimator, attribute):
    """Raise :class:`NotFittedError` if ``estimator`` has no learned ``attribute`` (has not been fitted)."""
    if not hasattr(estimator, attribute):
        raise NotFittedError(f"this {type(estimator).__name__} is not fitted yet; call fit first")
