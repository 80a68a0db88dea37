"""Input checks shared by every svmcore estimator.

Every check raises ``TypeError`` for a wrong kind of object or dtype and ``ValueError`` for a wrong
value (shape, NaN/inf, empty, a single class, out-of-range hyperparameter), naming the argument.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Any, Literal, TypeAlias

    from numpy.typing import ArrayLike, DTypeLike

    # the estimators' X: an array-like, or a scipy.sparse matrix or array (read as CSR)
    MatrixLike: TypeAlias = ArrayLike | sp.spmatrix | sp.sparray
    # random_state: None, a seed (an int >= 0), a numpy Generator or a RandomState
    RandomStateLike: TypeAlias = int | np.random.Generator | np.random.RandomState | None
    # class_weight: None, "balanced" or {label: weight >= 0}
    ClassWeight: TypeAlias = dict[Any, float] | Literal["balanced"] | None


def check_array(
    X: MatrixLike,
    name: str = "X",
    *,
    ndim: int = 2,
    allow_sparse: bool = False,
    dtype: DTypeLike = np.float64,
    min_rows: int = 1,
) -> np.ndarray | sp.csr_matrix:
    """Return ``X`` as a C-contiguous float array (or, if ``allow_sparse``, a CSR matrix in canonical format:
    sorted indices, duplicate entries summed, as scipy reads them; always a copy of a sparse input).

    Raises TypeError for non-numeric data or sparse input where it is not supported, ValueError for a
    wrong number of dimensions, fewer than ``min_rows`` rows, zero columns, or NaN/inf entries.
    """
    if sp.issparse(X):
        if not allow_sparse:
            raise TypeError(f"{name}: sparse input is not supported here; pass a dense array")
        if X.ndim != 2:  # a 1-D scipy sparse array (coo_array, dok_array); scipy's own error does not name X
            hint = "; Reshape your data: X.reshape(1, -1) for a single sample" if X.ndim == 1 else ""
            raise ValueError(f"{name}: expected a 2-D sparse matrix, got shape {X.shape}{hint}")
        X = sp.csr_matrix(X)
        if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool) or np.issubdtype(X.dtype, np.complexfloating):
            raise TypeError(f"{name}: expected real numbers, got dtype {X.dtype}")
        X = X.astype(dtype)  # a copy, so canonicalising never touches the caller's matrix
        X.sum_duplicates()
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
            hint = (
                ("; Reshape your data: X.reshape(-1, 1) for a single feature, X.reshape(1, -1) for a single sample")
                if ndim == 2 and X.ndim == 1
                else ""
            )
            raise ValueError(f"{name}: expected a {ndim}-D array, got shape {X.shape}{hint}")
        X = np.ascontiguousarray(X, dtype=dtype)
        data = X
        shape = X.shape
    if shape[0] < min_rows:
        raise ValueError(
            f"{name}: expected at least {min_rows} sample(s), got {shape[0]} sample"
            f"{'' if shape[0] == 1 else 's'} (shape {shape})"
        )
    if ndim == 2 and shape[1] == 0:  # scikit-learn's wording
        raise ValueError(f"{name}: 0 feature(s) (shape=({shape[0]}, 0)) while a minimum of 1 is required.")
    if not np.isfinite(data).all():
        raise ValueError(f"{name}: contains NaN or infinity")
    return X


def check_precomputed_kernel(K: np.ndarray, name: str = "X") -> None:
    """A training Gram matrix (n, n): square and symmetric to rounding, float32 included
    (|K - K^T| <= 1e-4 max |K|). Dual solvers assume Q = Q^T; on an asymmetric K their updates do not descend
    and can cycle without end. Checked in row blocks, so no n x n temporary. ValueError."""
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name}: a precomputed training kernel must be square (n, n), got shape {K.shape}")
    n, block = K.shape[0], 1024
    asym = max((float(np.abs(K[i : i + block] - K[:, i : i + block].T).max()) for i in range(0, n, block)), default=0.0)
    if asym > 1e-4 * max(abs(float(K.max(initial=0.0))), abs(float(K.min(initial=0.0)))):
        raise ValueError(
            f"{name}: a precomputed training kernel must be symmetric (K[i, j] = K[j, i]); max |K - K^T| = {asym:.3g}"
        )


def check_n_features(
    X: np.ndarray | sp.spmatrix, n_features: int, name: str = "X", owner: object | None = None, other: str | None = None
) -> None:
    """Raise ValueError unless ``X`` has ``n_features`` columns: the number seen in fit by ``owner``, or the
    number of columns of the array named ``other`` (the other argument of a kernel function, no model)."""
    if X.shape[1] != n_features:
        if other is not None:
            raise ValueError(f"{name} has {X.shape[1]} features, but {other} has {n_features}; they need the same")
        who = type(owner).__name__ if owner is not None else "the model"
        raise ValueError(f"{name} has {X.shape[1]} features, but {who} is expecting {n_features} features as input")


def check_labels(
    y: ArrayLike, n_samples: int, *, name: str = "y", min_classes: int = 2, max_classes: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(classes, y_index)``: sorted unique labels and each sample's class index (int64).

    Raises ValueError for a wrong length, NaN, non-integer float or complex labels, a list mixing strings with
    other labels, fewer than ``min_classes`` distinct labels (for example a single class), or more than
    ``max_classes``.
    """
    if y is None:
        raise ValueError(f"{name}: this estimator requires y to be passed, but the target y is None")
    if isinstance(y, (list, tuple)) and len({isinstance(v, str) for v in y}) > 1:
        # numpy would turn [1, "a"] into the strings "1" and "a": a mix is almost always a mistake
        raise ValueError(
            f"{name}: Unknown label type: a mix of strings and other labels "
            f"({sorted({type(v).__name__ for v in y})}); pass one kind"
        )
    y = np.asarray(y)
    if y.dtype.kind == "c":
        raise ValueError(f"{name}: Unknown label type: complex labels; pass class labels")
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
        other = next((v for v in y if not isinstance(v, str)), None)
        if other is not None:
            raise ValueError(
                f"{name}: Unknown label type: an object array of labels may hold only strings, found "
                f"{other!r} ({type(other).__name__}); pass numbers as a numeric array"
            )
        y = y.astype(str)
    classes, y_index = np.unique(y, return_inverse=True)
    if classes.size < min_classes:
        raise ValueError(
            f"{name}: needs at least {min_classes} classes, got {classes.size} class"
            f"{'es' if classes.size != 1 else ''} ({classes.tolist()})"
        )
    if max_classes is not None and classes.size > max_classes:
        raise ValueError(f"{name}: expected at most {max_classes} classes, got {classes.size}")
    return classes, y_index.astype(np.int64)


def check_sample_weight(sample_weight: ArrayLike | None, n_samples: int) -> np.ndarray:
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


INT64_MAX = 2**63 - 1


def check_scalar(
    value: object,
    name: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    integer: bool = False,
) -> int | float:
    """Return ``value`` as a Python int (``integer=True``) or float (otherwise, ints included) after checking it is
    a real (or integer) number within the given bounds; numpy scalars of any dtype and other number types
    (Fraction) reach the solvers, numba's included, as plain numbers. TypeError for a non-number, ValueError for
    a value out of bounds or not finite (a real beyond the float range, such as 10**400, included)."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name}: expected {'an integer' if integer else 'a real number'}, got {value!r}")
    if integer:
        value = int(value)
    else:  # an int too: numba types 10**20 as no machine integer (a TypingError deep in a solver), 10**400 as nothing
        try:
            value = float(value)
        except OverflowError:
            raise ValueError(f"{name}: must be finite, got {value!r}") from None
    if isinstance(value, float) and not np.isfinite(value):  # (ints are; np.isfinite refuses 2**64)
        raise ValueError(f"{name}: must be finite, got {value!r}")
    if integer and hi is None and abs(value) > INT64_MAX:  # the solvers' counters and numba take int64
        raise ValueError(f"{name}: must be at most {INT64_MAX} in magnitude, got {value!r}")
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise ValueError(f"{name}: must be {'>' if lo_open else '>='} {lo}, got {value!r}")
    if hi is not None and (value >= hi if hi_open else value > hi):
        raise ValueError(f"{name}: must be {'<' if hi_open else '<='} {hi}, got {value!r}")
    return value


def check_finite_fit(
    *values: ArrayLike, what: str = "the features (or kernel values)", remedy: str = "rescale them, e.g. to [0, 1]"
) -> None:
    """Raise ValueError unless every value a fit computed (arrays or numbers: kernel values, the solution) is
    finite: NaN or inf there means ``what`` overflow. Fits call it before storing anything, so that a failed
    fit leaves the earlier model in place."""
    if not all(np.isfinite(v).all() for v in values):
        raise ValueError(f"training gave NaN or infinite values: {what} overflow; {remedy}")


def check_random_state(random_state: object) -> RandomStateLike:
    """Return ``random_state`` after checking it is None, an int >= 0, a numpy Generator or a RandomState
    (TypeError / ValueError otherwise)."""
    if random_state is None or isinstance(random_state, (np.random.Generator, np.random.RandomState)):
        return random_state
    try:
        return check_scalar(random_state, "random_state", lo=0, hi=math.inf, integer=True)  # numpy takes any int
    except (TypeError, ValueError) as err:
        raise type(err)(f"{err} (expected None, an int >= 0, a numpy Generator or RandomState)") from None


def make_rng(random_state: RandomStateLike) -> np.random.Generator:
    """A numpy Generator from a :func:`check_random_state` value: an int (the seed), a Generator (itself), a
    RandomState (seeded by its next draw) or None (seeded by a draw from numpy's global RandomState, so that
    ``np.random.seed`` makes fits reproducible, as scikit-learn's ``random_state=None``)."""
    random_state = check_random_state(random_state)
    if random_state is None:
        return np.random.default_rng(np.random.randint(2**31 - 1))  # the global RandomState's next draw
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(2**31 - 1))
    return np.random.default_rng(random_state)


def check_choice(value: object, name: str, choices: Collection[str]) -> str:
    """Return ``value`` if it is one of ``choices``; ValueError naming the allowed values otherwise."""
    if value not in choices:
        raise ValueError(f"{name}: unknown value {value!r}; expected one of {sorted(choices)}")
    return value


class ConvergenceWarning(RuntimeWarning):
    """A solver stopped at its iteration cap before its stopping rule held (as scikit-learn's warning of the same
    name); a RuntimeWarning, so that filters on either catch it."""


class NotFittedError(ValueError, AttributeError):
    """Raised when a model is used before ``fit``; a ValueError and an AttributeError, like scikit-learn's."""


def check_fitted(estimator: object, attribute: str) -> None:
    """Raise :class:`NotFittedError` if ``estimator`` has no learned ``attribute`` (has not been fitted)."""
    if not hasattr(estimator, attribute):
        raise NotFittedError(f"this {type(estimator).__name__} is not fitted yet; call fit first")


def check_class_weight(class_weight: object) -> ClassWeight:
    """Return ``class_weight`` after checking it is None, "balanced" or a dict {label: weight} of finite weights
    >= 0 (the labels are checked against the classes by :func:`class_sample_weight`).

    Raises TypeError for another kind of object or a non-numeric weight, ValueError for another string or a
    negative, NaN or infinite weight.
    """
    if class_weight is None or (isinstance(class_weight, str) and class_weight == "balanced"):
        return class_weight
    if isinstance(class_weight, str):
        raise ValueError(f"class_weight: unknown value {class_weight!r}; expected None, 'balanced' or a dict")
    if not isinstance(class_weight, dict):
        raise TypeError(f"class_weight: expected None, 'balanced' or a dict {{label: weight}}, got {class_weight!r}")
    for label, weight in class_weight.items():
        check_scalar(weight, f"class_weight[{label!r}]", lo=0)
    return class_weight


def class_sample_weight(class_weight: ClassWeight, classes: np.ndarray, y_index: ArrayLike) -> np.ndarray:
    """Per-row weights class_weight[classes[y_index[i]]], (n,) float64, scikit-learn's / LIBSVM's meaning.

    class_weight: None (ones), "balanced" (n / (n_classes * bincount(y)), computed on all the rows given,
    as scikit-learn's ``compute_class_weight``) or a dict {label: weight >= 0}, classes missing from it
    weighing 1; classes: (k,) sorted labels from :func:`check_labels`; y_index: (n,) int class indices.
    Multiplied into sample_weight, row i gets the box constraint C * class_weight[y_i] * sample_weight[i].
    Raises ValueError naming dict labels that are not in ``classes``, and as :func:`check_class_weight`.
    """
    check_class_weight(class_weight)
    y_index = np.asarray(y_index, dtype=np.int64)
    if class_weight is None:
        return np.ones(y_index.shape[0])
    if isinstance(class_weight, str):  # "balanced"
        counts = np.bincount(y_index, minlength=len(classes))
        per_class = y_index.shape[0] / (len(classes) * np.maximum(counts, 1))  # absent classes never index it
    else:
        labels = classes.tolist()  # Python scalars: numpy int and str keys compare equal to them
        per_class = np.ones(len(classes))
        unknown = []
        for label, weight in class_weight.items():  # a loop over classes, not samples
            key = label.item() if isinstance(label, np.generic) else label
            if key in labels:
                per_class[labels.index(key)] = float(weight)
            else:
                unknown.append(key)
        if unknown:
            raise ValueError(f"class_weight: labels {unknown} are not among the classes {labels}")
    return per_class[y_index]


def row_weights(
    sample_weight: ArrayLike | None, class_weight: ClassWeight, classes: np.ndarray, y_index: np.ndarray
) -> np.ndarray:
    """Each row's weight sample_weight[i] * class_weight[y_i], (n,) float64: row i's box constraint is C times it.

    classes (k,), y_index (n,) int as from :func:`check_labels`. Raises ValueError as
    :func:`check_sample_weight` and :func:`class_sample_weight` do, and naming the classes none of whose rows
    has a positive weight (such a class could not be learned).
    """
    w = check_sample_weight(sample_weight, len(y_index)) * class_sample_weight(class_weight, classes, y_index)
    has_weight = np.bincount(y_index, weights=(w > 0).astype(np.float64), minlength=len(classes)) > 0
    if not has_weight.all():
        raise ValueError(
            f"sample_weight * class_weight: classes {classes[~has_weight].tolist()} have no row of positive weight"
        )
    return w


def class_weight_to_json(class_weight: ClassWeight) -> list[list] | str | None:
    """class_weight as a JSON value for a model header: a dict becomes a list of [label, weight] pairs, since
    JSON object keys are strings and would not compare equal to numeric labels after loading. Labels must be
    numbers, bools or strings (TypeError otherwise, e.g. for bytes)."""
    if not isinstance(class_weight, dict):
        return class_weight
    pairs = []
    for label, weight in class_weight.items():
        key = label.item() if isinstance(label, np.generic) else label
        if not isinstance(key, (numbers.Real, str)):  # bool is a Real
            raise TypeError(f"class_weight: label {label!r} cannot be stored in a model file (numbers and str only)")
        pairs.append([key, float(weight) if isinstance(weight, numbers.Real) else weight])
    return pairs


def class_weight_from_json(value: object) -> object:
    """Inverse of :func:`class_weight_to_json`; ValueError for a list that is not [label, weight] pairs.
    Anything else is returned unchanged for the usual hyperparameter checks."""
    if not isinstance(value, list):
        return value
    if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], (numbers.Real, str)) for p in value):
        raise ValueError(f"class_weight: expected a list of [label, weight] pairs, got {value!r}")
    weights = {label: weight for label, weight in value}
    if len(weights) != len(value):
        raise ValueError(f"class_weight: a label appears more than once in {value!r}")
    return weights
