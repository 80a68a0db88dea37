"""Cascade SVM: a binary C-SVC trained as a tree of :class:`svmcore.SVC` fits on partitions of the rows, on threads
or on the workers of a Dask cluster (Graf, Cosatto, Bottou, Durdanovic, Vapnik, "Parallel Support Vector Machines:
The Cascade SVM", NIPS 2004).

Dask is an optional dependency: it is imported only by a fit that is given a ``dask.array`` or a ``client``.
"""

from __future__ import annotations

import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .parallel import check_threads, thread_map
from .validation import (
    ConvergenceWarning,
    check_array,
    check_choice,
    check_fitted,
    check_labels,
    check_random_state,
    check_scalar,
    make_rng,
)
from .base import BaseEstimator, ClassifierMixin
from .kernels import resolve_kernel
from .svc import SVC, feasible_alpha

if TYPE_CHECKING:
    import os
    from pathlib import Path

    import dask.array as da
    from distributed import Client
    from numpy.typing import ArrayLike

    from .validation import MatrixLike, RandomStateLike

KERNELS = ("linear", "poly", "rbf")  # a precomputed kernel cannot be cut into partitions of rows


@dataclass
class _Rows:
    """Training rows of one sub-problem: X (m, d) float64, y (m,) +-1 float64, index (m,) int64, the rows' positions
    in the whole training set, sorted (the key that merges two sets without duplicates); alpha (m,) float64, the
    multipliers of the node that passed them up, or None for a partition's rows."""

    X: np.ndarray
    y: np.ndarray
    index: np.ndarray
    alpha: np.ndarray | None = None


@dataclass
class _Node:
    """A fitted node of the cascade: ``rows`` the support vectors it passes up, ``svc`` its model (None where its
    rows hold one class: no sub-problem to solve, every row passes up), ``trained`` the sorted positions of the rows
    it trained on, and the solver seconds and iterations of the node and of all nodes below it in this pass."""

    rows: _Rows
    svc: SVC | None
    trained: np.ndarray
    seconds: float
    n_iter: int


@dataclass
class _Model:
    """The last SVM of a pass, as the KKT check reads it: svc, its support vectors' sorted positions among all
    training rows (n_SV,) int64, their multipliers alpha (n_SV,) float64, and the sorted positions of the rows it
    trained on."""

    svc: SVC
    support: np.ndarray
    alpha: np.ndarray
    trained: np.ndarray


class _Variance:
    """What :func:`svmcore.kernels.resolve_kernel` reads of X to resolve gamma='scale': its shape and the variance
    of all its entries, here computed by Dask over the chunks."""

    def __init__(self, shape, var):
        self.shape, self._var = shape, var

    def var(self):
        return self._var


def _union(*sets: _Rows | None) -> _Rows:
    """The rows of all sets (None: none), each training row once, in index order: fed-back support vectors already
    belong to some partitions, and a duplicated row would be a second variable of the same point (another
    problem)."""
    sets = [r for r in sets if r is not None]
    if len(sets) == 1:
        return sets[0]
    index, first, where = np.unique(np.concatenate([r.index for r in sets]), return_index=True, return_inverse=True)
    alpha = None
    if any(r.alpha is not None for r in sets):
        # a row passed up by two nodes (a fed-back support vector) starts at the mean of their alphas
        given = np.concatenate([np.full(len(r.index), r.alpha is not None) for r in sets])
        values = np.concatenate([np.zeros(len(r.index)) if r.alpha is None else r.alpha for r in sets])
        alpha, count = np.zeros(len(index)), np.zeros(len(index))
        np.add.at(alpha, where, values)
        np.add.at(count, where, given)
        alpha /= np.maximum(count, 1)
    return _Rows(*(np.concatenate([getattr(r, k) for r in sets])[first] for k in ("X", "y")), index, alpha)


def _fit_rows(rows: _Rows, params: dict, below: tuple[_Node, ...] = ()) -> _Node:
    """One node: an SVC on ``rows``, started from the alphas they were passed up with (Graf et al., Sec. 2: made
    feasible, :func:`feasible_alpha`); passes up its support vectors (all rows where they hold one class)."""
    seconds = sum(n.seconds for n in below)
    n_iter = sum(n.n_iter for n in below)
    if np.unique(rows.y).size < 2:  # alpha = 0 solves it
        return _Node(_Rows(rows.X, rows.y, rows.index), None, rows.index, seconds, n_iter)
    start = None
    if rows.alpha is not None and rows.alpha.any():
        start = feasible_alpha(rows.alpha, rows.y, np.full(len(rows.y), float(params["C"])))
    svc = SVC(**params).fit(rows.X, rows.y, alpha_init=start)
    sv = svc.support_
    up = _Rows(rows.X[sv], rows.y[sv], rows.index[sv], np.abs(svc.dual_coef_[0]))
    return _Node(up, svc, rows.index, seconds + svc.fit_seconds_, n_iter + svc.n_iter_)


def _first_layer(part: _Rows, feedback: _Rows | None, params: dict) -> _Node:
    """A first-layer node: its partition plus the last pass's support vectors (Graf et al., Fig. 1, feedback)."""
    return _fit_rows(_union(part, feedback), params)


def _merge(a: _Node, b: _Node, params: dict) -> _Node:
    """A node of a later layer: the support vectors of two nodes below, retrained."""
    return _fit_rows(_union(a.rows, b.rows), params, (a, b))


def _kkt_check(part: _Rows, model: _Model, C: float, collect: bool) -> tuple[float, float, _Rows | None]:
    """(m, M, violators) on one partition's rows for ``model`` (alpha = 0 on every row that is not one of its
    support vectors). m, M: LIBSVM's stopping rule, m = max over I_up of -y_i G_i, M = min over I_low, with
    -y_i G_i = y_i - f(x_i) + b; the intercept b is left out, as it shifts both alike: the violation is m - M over
    all partitions. violators (where ``collect``, else None): the rows the model did not train on with
    y_i f(x_i) < 1, the rows whose KKT condition (alpha_i = 0 needs y_i f(x_i) >= 1) fails. Decision values in
    blocks of rows (:func:`svmcore.kernels.kernel_decision`), vectorised."""
    f = model.svc.decision_function(part.X)
    a = np.zeros(len(part.index))
    if len(model.support):
        at = np.minimum(np.searchsorted(model.support, part.index), len(model.support) - 1)
        hit = model.support[at] == part.index
        a[hit] = model.alpha[at[hit]]
    v = part.y - f
    up = np.where(part.y > 0, a < C, a > 0)
    low = np.where(part.y > 0, a > 0, a < C)
    violators = None
    if collect:
        bad = np.flatnonzero((part.y * f < 1) & ~np.isin(part.index, model.trained, assume_unique=True))
        violators = _Rows(part.X[bad], part.y[bad], part.index[bad])
    return float(v[up].max(initial=-np.inf)), float(v[low].min(initial=np.inf)), violators


@contextmanager
def _runner(client, threads: int):
    """Yields (run, gather, put): ``run(f, [args, ...])`` -> one handle per task, ``gather(handles)`` -> their
    values, ``put(value)`` -> a handle every task can read. In-process, run maps on threads and handles are the
    values; with a ``distributed.Client``, tasks go to its workers and handles are futures, so the layers of a
    pass are submitted at once and the data stay on the workers (only support vectors move)."""
    if client is None:
        with thread_map(threads) as run:
            yield (lambda f, args: run(lambda a: f(*a), args)), (lambda handles: handles), (lambda value: value)
    else:
        yield (
            (lambda f, args: [client.submit(f, *a, pure=False) for a in args]),
            client.gather,
            lambda value: value if value is None else client.scatter(value, broadcast=True),
        )


class CascadeSVC(ClassifierMixin, BaseEstimator):
    """Binary kernel C-SVC trained as a Cascade SVM on partitions of the rows (Graf et al., NIPS 2004).

    Each pass trains one :class:`svmcore.SVC` per partition (layer 1), merges the support vectors of pairs of
    results and retrains them, layer after layer of a binary tree, down to one SVM (Graf et al., Sec. 2, Fig. 1),
    then feeds that SVM's support vectors back into every first-layer partition and starts again, until the KKT
    conditions of the whole problem hold on all rows or ``max_passes`` passes ran. Every node solves the dual of
    :class:`svmcore.SVC` on its rows with the same kernel, C and tol, so the result, once converged, is an SVC of
    the whole training set: with f the last SVM's decision function and alpha its multipliers (0 on every other
    row), LIBSVM's maximal violation m - M over all n rows is at most ``tol``. Graf et al. (Sec. 3) show that the
    objective never gets worse from one pass to the next (their W(alpha) = -``objective_`` never decreases) and
    that, with exact sub-problem solutions, the cascade reaches the optimum of the whole problem in finitely many
    passes.

    Parameters
    ----------
    C, kernel, degree, gamma, coef0, tol, cache_size
        As :class:`svmcore.SVC` (kernel "linear", "poly" or "rbf"). gamma="scale" is resolved once on all rows,
        1 / (d X.var()), so that every node solves with the kernel a single SVC fit would use; "auto" is 1 / d.
    n_partitions : int >= 1 or None
        Partitions of the rows (first-layer SVMs). None: a dask array's row chunks as they are; 4 for a numpy
        array. For a dask array an int rechunks its rows into that many partitions.
    max_passes : int >= 1
        Passes of the cascade at most; a ConvergenceWarning if the KKT conditions still fail after them.
    client : distributed.Client or None
        None: the fits run in this process, ``n_jobs`` of them at once on threads (a dask array's chunks are
        computed into memory first). A client: the partitions' fits, merges and KKT checks run on its workers,
        each partition loaded or computed on a worker once; only support vectors and (m, M) pairs travel.
    n_jobs : int or None
        Threads in this process when client is None: -1 (default) one per core, None or 1 one.
    random_state : None, int >= 0, numpy Generator or RandomState
        The random assignment of a numpy array's rows to partitions (rows sorted by class would give
        single-class partitions). A dask array's rows stay in their chunks: shuffle them first if sorted.

    Attributes
    ----------
    svc_ : SVC
        The model, an ordinary fitted :class:`svmcore.SVC` of the whole training set: ``support_`` (n_SV,) int64
        indexes the rows of X given to fit, ``support_vectors_``, ``dual_coef_``, ``intercept_``, ``classes_``,
        ``objective_`` as fit gives them; ``kkt_violation_`` is the violation over all rows, ``n_iter_`` and
        ``fit_seconds_`` the solver iterations and seconds of all sub-fits summed. Save it with ``svc_.save(path)``
        (or :meth:`save`) and load it with :func:`svmcore.load`.
    classes_ : (2,) ndarray
        The labels, sorted; classes_[1] is the positive class.
    objective_ : float
        1/2 a'Qa - 1'a of the model (a over all rows).
    objective_path_ : (n_passes_,) float64 ndarray
        ``objective_`` of the last SVM of each pass (a repair step, see Notes, counts as a pass): non-increasing
        to within the solver's tolerance.
    kkt_violation_ : float
        max_{I_up} -y_i G_i - min_{I_low} -y_i G_i over all n rows (LIBSVM's stopping rule).
    converged_ : bool
        Whether kkt_violation_ <= tol.
    n_passes_ : int
    fit_seconds_ : float
        Wall-clock seconds of fit, the data's loading and checks included.

    Raises
    ------
    ValueError
        Bad hyperparameters (as :class:`svmcore.SVC`, kernel "precomputed" included, n_partitions or max_passes
        < 1), X with NaN or inf or not 2-D, y with other than one label per row, a single class or more than two
        classes. TypeError: non-numeric or sparse X, a client without ``submit``.

    Notes
    -----
    Feedback (Graf et al., Sec. 2): the first-layer SVMs of pass k + 1 train on their partition plus the support
    vectors of pass k's last SVM, so each starts from a problem holding the best solution so far. Every fit starts
    from the alphas its rows were passed up with (Graf et al.'s warm start; ``SVC.fit(alpha_init=)``): a node of a
    later layer from its two children's (a row both pass up at their mean, made feasible by
    :func:`svmcore.svc.feasible_alpha`), a first-layer node of a later pass from the last SVM's on the fed-back
    rows and 0 on its partition.
    A node whose rows hold a single class passes all of them up (its dual has the solution alpha = 0).

    Repair step: the sub-problems are solved to ``tol``, not exactly, so a pass can return the support vectors of
    the pass before while the KKT conditions still fail on all rows by a little more than ``tol`` (seen on the
    detector's patches: 1.14e-3 for tol 1e-3); the next pass would repeat it. Such a pass is followed by one fit
    of the last SVM's support vectors plus every row outside its training rows with y f(x) < 1, a chunking step
    (Osuna, Freund, Girosi 1997) whose objective is lower wherever such a row exists.
    """

    def __init__(
        self,
        C: float = 1.0,
        kernel: str = "rbf",
        degree: int = 3,
        gamma: float | str = "scale",
        coef0: float = 0.0,
        tol: float = 1e-3,
        cache_size: float = 200,
        n_partitions: int | None = None,
        max_passes: int = 10,
        client: Client | None = None,
        n_jobs: int | None = -1,
        random_state: RandomStateLike = 0,
    ) -> None:
        self.set_params(**{k: v for k, v in locals().items() if k != "self"})

    def _svc_params(self, gamma="scale") -> dict:
        return {
            "C": self.C,
            "kernel": self.kernel,
            "degree": self.degree,
            "gamma": gamma,
            "coef0": self.coef0,
            "tol": self.tol,
            "cache_size": self.cache_size,
        }

    def _check_params(self):
        """Check the hyperparameters (SVC's own checks for the SVC ones); returns the thread count."""
        check_choice(self.kernel, "kernel", KERNELS)
        SVC(**self._svc_params(self.gamma))._check_params()
        if self.n_partitions is not None:
            check_scalar(self.n_partitions, "n_partitions", lo=1, integer=True)
        check_scalar(self.max_passes, "max_passes", lo=1, integer=True)
        check_random_state(self.random_state)
        if self.client is not None and not callable(getattr(self.client, "submit", None)):
            raise TypeError(f"client: expected None or a distributed.Client, got {self.client!r}")
        return 1 if self.n_jobs is None else check_threads(self.n_jobs, "n_jobs", all_cores=True)

    def fit(self, X: ArrayLike | da.Array, y: ArrayLike | da.Array) -> CascadeSVC:
        """Train and return self.

        X: (n, d) array-like of real numbers (float64 after checks), or a ``dask.array.Array`` (n, d) whose row
        chunks are the partitions (its column chunks are joined); y: (n,) binary labels (a numpy array or a dask
        array, read whole: n labels). Raises ValueError / TypeError as the class docstring states; a
        ConvergenceWarning if the passes end before the KKT conditions hold on all rows.
        """
        start = time.perf_counter()
        threads = self._check_params()
        dask_array = sys.modules.get("dask.array")  # not imported here: X can only be a dask array if it is loaded
        if dask_array is not None and isinstance(X, dask_array.Array):
            parts, spec, classes = self._dask_partitions(X, y)
        else:
            parts, spec, classes = self._numpy_partitions(X, y)
        params = self._svc_params(spec.gamma if self.kernel in ("poly", "rbf") else self.gamma)
        C, tol = float(params["C"]), float(params["tol"])
        objectives, previous, repair, exhausted = [], None, None, False
        with _runner(self.client, threads) as (run, gather, put):
            if self.client is not None and isinstance(parts[0], _Rows):
                parts = self.client.scatter(parts)  # each numpy partition to one worker, once
            feedback = None
            for n_pass in range(1, int(self.max_passes) + 1):  # noqa: B007 (read after the loop)
                if repair is None:
                    layer = run(_first_layer, [(p, feedback, params) for p in parts])
                    while len(layer) > 1:  # one binary-tree layer at a time; an odd node waits for the next layer
                        merged = run(_merge, [(layer[i], layer[i + 1], params) for i in range(0, len(layer) - 1, 2)])
                        layer = merged + layer[len(layer) - len(layer) % 2 :]
                else:
                    layer = run(_fit_rows, [(repair, params)])
                top = gather(layer)[0]
                svc, support = top.svc, top.rows.index
                objectives.append(svc.objective_)
                # the same support vectors as the pass before: another pass would solve the same problems again
                stalled = previous is not None and np.array_equal(previous, support)
                model = put(_Model(svc, support, np.abs(svc.dual_coef_[0]), top.trained))
                checks = gather(run(_kkt_check, [(p, model, C, stalled) for p in parts]))
                violation = max(c[0] for c in checks) - min(c[1] for c in checks)
                if violation <= tol:
                    break
                repair = None
                if stalled:
                    # every node solved to tol, yet the whole problem is not: the last SVM's rows plus the rows
                    # outside them that violate its margin, solved once more (a chunking step, Osuna et al. 1997)
                    violators = [c[2] for c in checks if len(c[2].index)]
                    if not violators:
                        exhausted = True
                        break
                    repair = _union(top.rows, *violators)
                else:
                    feedback = put(top.rows)
                previous = support
        if violation > tol:
            why = "no row outside the last SVM's rows violates its margin" if exhausted else "raise max_passes"
            warnings.warn(
                f"CascadeSVC: after {n_pass} passes the KKT violation over all rows is {violation:.3g} > "
                f"tol {tol:g} ({why})",
                ConvergenceWarning,
                stacklevel=2,
            )
        # the last SVM, stated as the model of all n rows: its support vectors' positions in X, the violation over
        # all rows, the iterations and solver seconds of every sub-fit
        svc.support_ = support.astype(np.int64)
        svc.classes_ = classes
        svc.kkt_violation_ = float(violation)
        svc.n_iter_, svc.fit_seconds_ = int(top.n_iter), float(top.seconds)
        self.svc_ = svc
        self.classes_ = classes
        self.objective_ = float(svc.objective_)
        self.objective_path_ = np.array(objectives)
        self.kkt_violation_ = float(violation)
        self.converged_ = bool(violation <= tol)
        self.n_passes_ = n_pass
        self.n_features_in_ = int(svc.n_features_in_)
        self.fit_seconds_ = time.perf_counter() - start
        return self

    def _numpy_partitions(self, X, y):
        """(partitions, kernel spec, classes) of an array X: rows assigned to partitions at random."""
        X = check_array(X, "X")
        classes, yi = check_labels(y, X.shape[0], max_classes=2)
        ys = np.where(yi == 1, 1.0, -1.0)
        spec = resolve_kernel(self.kernel, X, self.gamma, self.degree, self.coef0)
        k = 4 if self.n_partitions is None else min(int(self.n_partitions), X.shape[0])
        perm = make_rng(self.random_state).permutation(X.shape[0])
        return [_Rows(X[i], ys[i], i) for i in map(np.sort, np.array_split(perm, k))], spec, classes

    def _dask_partitions(self, X, y):
        """(partitions, kernel spec, classes) of a dask array X, each row chunk checked by :func:`check_array`:
        held in memory here (no client) or on the client's workers, one task result per partition."""
        import dask
        import dask.array as da

        if X.ndim != 2:
            raise ValueError(f"X: expected a 2-D array, got shape {X.shape}")
        if any(np.isnan(c) for c in X.chunks[0]):
            raise ValueError("X: the dask array's row chunks have unknown sizes; call X.compute_chunk_sizes() first")
        n, d = X.shape
        classes, yi = check_labels(y.compute() if isinstance(y, da.Array) else y, n, max_classes=2)
        ys = np.where(yi == 1, 1.0, -1.0)
        rows = X.chunks[0] if self.n_partitions is None else -(-n // min(int(self.n_partitions), n))
        X = X.rechunk({0: rows, 1: -1}).map_blocks(check_array, dtype=np.float64)
        bounds = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
        index = [np.arange(s, e, dtype=np.int64) for s, e in zip(bounds[:-1], bounds[1:], strict=True)]
        if self.client is None:
            var, *chunks = dask.compute(X.var(), *X.to_delayed()[:, 0], scheduler="threads")
            parts = [_Rows(c, ys[i], i) for c, i in zip(chunks, index, strict=True)]
        else:  # computed once, kept on the workers
            X = self.client.persist(X)
            var = self.client.compute(X.var()).result()
            chunks = self.client.compute(list(X.to_delayed()[:, 0]))
            parts = [self.client.submit(_Rows, c, ys[i], i, pure=False) for c, i in zip(chunks, index, strict=True)]
        spec = resolve_kernel(self.kernel, _Variance((n, d), float(var)), self.gamma, self.degree, self.coef0)
        return parts, spec, classes

    def decision_function(self, X: MatrixLike) -> np.ndarray:
        """Decision values (n,) float64 of :attr:`svc_` (> 0 means classes_[1]); raises as
        :meth:`svmcore.SVC.decision_function`, :class:`svmcore.NotFittedError` before fit."""
        check_fitted(self, "svc_")
        return self.svc_.decision_function(X)

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Labels (n,) from classes_, :meth:`svmcore.SVC.predict` of :attr:`svc_`."""
        check_fitted(self, "svc_")
        return self.svc_.predict(X)

    def save(self, path: str | os.PathLike) -> Path:
        """Write :attr:`svc_` with :meth:`svmcore.SVC.save` (``svmcore.load(path)`` returns that SVC); returns the
        path as a ``pathlib.Path``. Raises :class:`svmcore.NotFittedError` before fit."""
        check_fitted(self, "svc_")
        return self.svc_.save(path)
