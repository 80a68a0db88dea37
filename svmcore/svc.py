"""Kernel SVMs on the decomposition solver: :class:`SVC` (C-SVC) and :class:`OneClassSVM`.

Both only build a Q-matrix and call :func:`svmcore.smo.solve`; everything else is input checking and
the decision function f(x) = sum_i dual_coef_i K(sv_i, x) + intercept_. The one-vs-one pairs of classes that a fit
cuts from the Gram of its rows are solved in compiled code by :mod:`svmcore.pairs`.
"""

from __future__ import annotations

import functools
import time
import types
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from . import persistence
from .parallel import blas_single_thread, check_threads, thread_map
from .validation import (
    NotFittedError,
    check_array,
    check_choice,
    check_class_weight,
    check_finite_fit,
    check_fitted,
    check_labels,
    check_n_features,
    check_precomputed_kernel,
    check_random_state,
    check_sample_weight,
    check_scalar,
    make_rng,
    row_weights,
)
from .base import BaseEstimator, ClassifierMixin
from .gram import CentredGram, Gram
from .kernels import (
    KernelSpec,
    block_rows,
    centres,
    check_fitted_gamma,
    check_gamma,
    densify_if_cheaper,
    kernel_decision,
    kernel_diagonal,
    resolve_kernel,
    row_norms_sq,
    surely_sparse,
)
from .multiclass import ovo_pairs, ovo_votes
from . import pairs
from .pairs import FOLD_DECIDE, PairBlock, fold_decisions, gram_pays, most_held, solve_pairs, uses_gram
from .probability import MIN_PROB, fit_sigmoid, pairwise_coupling, sigmoid_predict
from .qmatrix import EPS32, KernelQ, PrecomputedQ, cache_holds
from .smo import SolverResult, SolverSettings, solve, warn_not_converged

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import ArrayLike

    from .validation import ClassWeight, MatrixLike, RandomStateLike

_THREADED_PAIR_ROWS = 256  # n_jobs > 1 solves pairs on threads where they average this many rows (2n / k) or more
# problems and decisions on up to this many CSR rows take their kernel inputs from gram.CentredGram
_CENTRED_ROWS = 64


class _KernelSVM(BaseEstimator):
    """Shared parts: hyperparameter checks, the solver call, the decision function, persistence."""

    _coef_sum_zero = False  # SVC: True; OneClassSVM's dual coefficients sum to nu n, not 0

    _state_arrays = ("support_", "support_vectors_", "dual_coef_", "intercept_")
    _sparse_arrays = ("support_vectors_",)
    _sparse_in_files = ("dual_coef_",)  # one-vs-one with many classes: sector's 3,000 rows, 124 of 127.5 MiB
    _state_meta = ("gamma_", "n_features_in_", "n_iter_", "objective_", "kkt_violation_", "fit_seconds_")

    def _check_params(self):
        check_choice(self.kernel, "kernel", ("linear", "poly", "rbf", "precomputed"))
        if self.kernel == "poly":
            check_scalar(self.degree, "degree", lo=1, integer=True)
            check_scalar(self.coef0, "coef0")
        if self.kernel in ("poly", "rbf"):
            check_gamma(self.gamma)
        self._solver_settings()
        for name in ("shrinking", "verbose"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name}: expected a bool, got {getattr(self, name)!r}")
        if self.callback is not None and not callable(self.callback):
            raise TypeError("callback: expected a callable taking one dict")

    def _solver_settings(self):
        """tol, cache_size, working_set_size and max_iter for :func:`svmcore.smo.solve`: checked, plain numbers."""
        q, max_iter = self.working_set_size, self.max_iter
        return {
            "tol": check_scalar(self.tol, "tol", lo=0, lo_open=True),
            "cache_size": check_scalar(self.cache_size, "cache_size", lo=0, lo_open=True),
            "working_set_size": None if q is None else check_scalar(q, "working_set_size", lo=2, integer=True),
            "max_iter": None if max_iter is None else check_scalar(max_iter, "max_iter", lo=1, integer=True),
        }

    def _compiled_settings(self, settings):
        """:meth:`_solver_settings` and ``shrinking`` as the compiled solvers take them (:class:`SolverSettings`)."""
        return SolverSettings.of(settings["tol"], settings["working_set_size"], self.shrinking, settings["max_iter"])

    @property
    def _sparse_input(self):
        return self.kernel != "precomputed"

    @property
    def _pairwise_input(self):
        return self.kernel == "precomputed"

    def _prepare(self, X, min_rows=1):
        """Validate X and return (X, Q-factory arguments) for the kernel."""
        X = check_array(X, "X", allow_sparse=self._sparse_input, min_rows=min_rows)
        spec = resolve_kernel(self.kernel, X, self.gamma, self.degree, self.coef0)
        if spec.kind == "precomputed":
            check_precomputed_kernel(X)
        return densify_if_cheaper(X), spec

    def _make_q(self, X, spec, y):
        if spec.kind == "precomputed":
            return PrecomputedQ(X, y)
        return KernelQ(X, spec, y)

    def _run(self, Q, p, y, C, alpha0, settings=None):
        """smo.solve with the estimator's settings (``settings``: :meth:`_solver_settings`, checked once a fit)."""
        return solve(
            Q,
            p,
            y,
            C,
            alpha0,
            **(settings or self._solver_settings()),
            shrinking=bool(self.shrinking),
            callback=self.callback,
            verbose=self.verbose,
        )

    def _fit_binary(self, X, spec, rows, ys, C, gram=None, block=None, settings=None, alpha0=None):
        """Solve the C-SVC dual on the training rows ``rows`` (sorted int indices into X) with labels ys (+-1)
        and box constraints C, all (len(rows),); returns the solver result. ``gram``: X's :class:`Gram`, or None;
        ``block``: the rows' :class:`PairBlock`, or None; ``settings``: :meth:`_solver_settings`, or None;
        ``alpha0``: a feasible start (:func:`check_alpha_init`), None for 0."""
        settings = settings or self._solver_settings()
        if block is not None:
            Q = block.dense_q()
        elif uses_gram(gram, spec, rows):
            Q = KernelQ(gram, spec, ys, rows=rows)
        elif sp.issparse(X) and len(rows) <= _CENTRED_ROWS:  # the numbers of KernelQ(X[rows]), without scipy
            Q = KernelQ(
                CentredGram(X, rows, rows if centres(spec, True) else rows[:0]), spec, ys, rows=np.arange(len(rows))
            )
        elif len(rows) == X.shape[0]:  # sorted and complete: all of X, no copy
            Q = self._make_q(X, spec, ys)
        else:
            Q = self._make_q(X[np.ix_(rows, rows)] if spec.kind == "precomputed" else X[rows], spec, ys)
        res = self._run(Q, -np.ones(len(rows)), ys, C, np.zeros(len(rows)) if alpha0 is None else alpha0, settings)
        res.rho += Q.rho_shift(res.alpha)
        return res

    def _pair_block(self, spec, rows, ys, C, gram, settings):
        """The :class:`PairBlock` of the pair of classes on ``rows`` (labels ys, bounds C), or None where the pair
        is solved through KernelQ and solve: no Gram, rows that shift, more than BLOCK_PAIR_ROWS, a cache that
        cannot hold all columns (solve's cache would evict some, and iterate otherwise), or a callback or verbose
        (their reports come from solve's loop)."""
        if (
            gram is None
            or self.callback is not None
            or self.verbose
            or len(rows) > pairs.BLOCK_PAIR_ROWS  # (read here at each fit: a test lowers it)
            or not uses_gram(gram, spec, rows)
        ):
            return None
        block = PairBlock(gram, spec, rows, ys, C, settings["tol"], self.probability)
        return (
            block if cache_holds(len(rows), settings["cache_size"], np.float64 if block.wide else np.float32) else None
        )

    def _solve_on_gram(self, problems, spec, gram, settings, n_folds=5):
        """Solve in one compiled call (:func:`solve_pairs`) the pairs of ``problems`` that :meth:`_pair_block` would
        give a block, with the same numbers, and with probability=True their folds and sigmoids as
        :meth:`_cross_val_decision` and :func:`svmcore.probability.fit_sigmoid` give them; returns {index of the pair:
        (SolverResult, (A, B) or None)}. Their Python around the solver was most of the time on small pairs (~40 us
        of ~50 a pair of sector's 300 rows in 92 classes; ~100 us of ~155 with probability). The kernel values of all
        rows are computed once, as ``Gram.kernel`` gives them (float64 too where a pair needs float64 columns,
        :func:`svmcore.qmatrix.float32_columns_suffice`, or with probability), where they fit in ``cache_size``
        beside the Gram; otherwise every pair is left to the caller."""
        if self.callback is not None or self.verbose or len(problems) == 0:
            return {}
        tol, cache_mb = settings["tol"], settings["cache_size"]
        with np.errstate(over="ignore"):
            diag = kernel_diagonal(gram.sq, spec)
        if not np.abs(diag).max(initial=0.0) < 3e38:  # KernelQ's check and error, pair by pair
            return {}
        start = time.perf_counter()
        sizes = [len(rows) for rows, _, _, _ in problems]
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        rows = np.concatenate([rows for rows, _, _, _ in problems]).astype(np.int64)
        ys = np.concatenate([ys for _, ys, _, _ in problems])
        C = np.concatenate([C for _, _, C, _ in problems])
        first = starts[:-1]  # float32_columns_suffice per pair, on its C and diagonal:
        wide = ~(np.maximum.reduceat(C, first) * np.maximum.reduceat(np.abs(diag[rows]), first) * EPS32 < tol)
        n = len(gram.sq)
        need64 = self.probability or wide.any()
        if (4 + 8 * need64) * n * n > cache_mb * 2**20:  # all rows' kernel values within the cache's budget too
            return {}
        K32 = gram.kernel_all(spec, np.float32)
        K64 = gram.kernel_all(spec, np.float64) if need64 else np.empty((0, 0))
        column_of = np.arange(n) if gram.column_of is None else gram.column_of
        if self.probability:
            perm_starts = np.concatenate([[0], np.cumsum([len(perm) for _, _, _, perm in problems])]).astype(np.int64)
            perms = np.concatenate([perm for _, _, _, perm in problems]).astype(np.int64)
        else:
            perm_starts, perms, n_folds = np.zeros(len(problems) + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), 0
        alpha, G = np.empty(len(rows)), np.empty(len(rows))
        counts, values = np.zeros((len(problems), 6), dtype=np.int64), np.zeros((len(problems), 4))
        max_iter = settings["max_iter"]
        solve_pairs(
            K32,
            K64,
            column_of,
            diag,
            starts,
            rows,
            ys,
            C,
            wide,
            perm_starts,
            perms,
            n_folds,
            most_held(cache_mb, np.float32),
            most_held(cache_mb, np.float64),
            self._compiled_settings(settings),
            centres(spec, True) and gram.sparse,
            gram.shift_test(),
            alpha,
            G,
            counts,
            values,
        )
        done = np.flatnonzero(counts[:, 0])
        seconds = (time.perf_counter() - start) / max(len(done), 1)
        out = {}
        for m in done:
            s, e = starts[m], starts[m + 1]
            a, g = alpha[s:e], G[s:e]
            _, converged, n_iter, n_inner, hits, misses = (int(v) for v in counts[m])
            if not converged:
                warn_not_converged(max_iter, n_inner, values[m, 0], tol, stacklevel=4)
            out[m] = (
                SolverResult(
                    a,
                    g,
                    float(values[m, 1]),
                    0.5 * float(a @ (g - 1.0)),
                    n_iter,
                    n_inner,
                    float(values[m, 0]),
                    hits / max(hits + misses, 1),
                    seconds,
                    bool(converged),
                ),
                (float(values[m, 2]), float(values[m, 3])) if self.probability else None,
            )
        return out

    @staticmethod
    def _binary_decision(X, spec, train, coef, intercept, rows, gram=None):
        """Decision values (len(rows),) on X[rows] of a binary model trained on X[train] with dual
        coefficients coef (len(train),) = alpha * y; only its support vectors enter the kernel block. ``gram``: X's
        :class:`Gram`, or None."""
        sv = coef != 0
        if spec.kind == "precomputed":
            return X[np.ix_(rows, train[sv])] @ coef[sv] + intercept
        if uses_gram(gram, spec, train[sv]):  # what kernel_decision computes where it does not centre, in its blocks
            step = block_rows(sv.sum())
            return (
                np.concatenate(
                    [
                        gram.kernel(rows[s : s + step], train[sv], spec) @ coef[sv, None]
                        for s in range(0, len(rows), step)
                    ]
                )[:, 0]
                + intercept
            )
        # centred as decision_function: uncentred, pendigits 3 vs 9 + 1e7 cross-validated into sigmoids of slope
        # -2.3 (rbf) / -1.7 (linear) instead of -4.5 / -3.6, probabilities 0.22 / 0.24 off
        support = train[sv]
        if (
            sp.issparse(X)
            and len(rows) <= _CENTRED_ROWS
            and len(support) <= _CENTRED_ROWS
            and surely_sparse(len(support), X.shape[1], int((X.indptr[support + 1] - X.indptr[support]).sum()))
        ):
            # kernel_decision's numbers (it keeps these support vectors sparse), without scipy's cuts and shifts
            local = CentredGram(X, np.concatenate([rows, support]), support if centres(spec, True) else rows[:0])
            at = len(rows) + np.arange(len(support))
            out = local.kernel(np.arange(len(rows)), at, spec) @ coef[sv, None]
            offset = local.offsets[at] @ coef[sv, None] if spec.kind == "linear" and local.offsets is not None else 0.0
            return (out + offset)[:, 0] + intercept
        return kernel_decision(X[rows], X[support], coef[sv, None], spec, coef_sum_zero=True)[:, 0] + intercept

    def _store(self, X, spec, results, coef, intercept):
        """Keep the rows with a nonzero coefficient in any of the binary models: coef (n_models, n),
        intercept (n_models,), results: one solver result per model. ValueError, before anything is stored, if
        the solution is not finite (kernel values that overflow, e.g. a high-degree poly on large features)."""
        check_finite_fit(
            coef,
            intercept,
            what=f"the {spec.kind} kernel values on these features",
            remedy="rescale the features (e.g. to [0, 1]) or lower degree / gamma / |coef0|",
        )
        support = np.flatnonzero(np.any(coef != 0, axis=0))
        self.support_ = support.astype(np.int64)
        # the rows as the solver saw them: CSR where fit kept X sparse (densify_if_cheaper), as scikit-learn's SVC
        # keeps sparse input; a dense copy took 1.3 GB for 3,000 sector rows (55,197 tf-idf columns), CSR 5.8 MB
        self.support_vectors_ = np.empty((0, 0)) if spec.kind == "precomputed" else X[support]
        self.dual_coef_ = coef[:, support]
        self.intercept_ = np.asarray(intercept, dtype=np.float64)
        self.gamma_ = float(spec.gamma)
        self.n_features_in_ = int(X.shape[1])
        self.n_iter_ = int(sum(r.n_iter for r in results))
        self.objective_ = float(sum(r.objective for r in results))
        self.kkt_violation_ = float(max(r.kkt_violation for r in results))
        self.fit_seconds_ = float(sum(r.seconds for r in results))
        self.cache_hit_rate_ = float(np.mean([r.cache_hit_rate for r in results]))

    @property
    def _spec(self):
        kernel = self._param("kernel")
        if kernel in ("linear", "precomputed"):
            return KernelSpec(kernel)
        if kernel == "rbf":  # degree and coef0 are poly's: unchecked, and unused, for rbf
            return KernelSpec("rbf", self.gamma_)
        return KernelSpec(kernel, self.gamma_, int(self._param("degree")), float(self._param("coef0")))

    @property
    def coef_(self):
        """Primal weights of a linear kernel, w = dual_coef_ @ support_vectors_: (n_models, n_features_in_)
        float64 ndarray, also for CSR support vectors, one row per binary model (decision value w'x + intercept_).
        Raises AttributeError for other kernels (as scikit-learn's SVC: ``hasattr`` tells) and
        :class:`svmcore.NotFittedError` before fit."""
        check_fitted(self, "dual_coef_")
        if self._param("kernel") != "linear":
            raise AttributeError(f"coef_ exists for kernel='linear' only, not {self._param('kernel')!r}")
        return np.ascontiguousarray(self.dual_coef_ @ self.support_vectors_)  # (dense @ CSR: a transposed view)

    def _pairwise_decision(self, X):
        """f_m(x) = sum_i dual_coef_[m, i] K(sv_i, x) + intercept_[m] of every binary model: (n, n_models)."""
        check_fitted(self, "dual_coef_")
        precomputed = self._param("kernel") == "precomputed"
        X = check_array(X, "X", allow_sparse=not precomputed)
        check_n_features(X, self.n_features_in_, owner=self)
        coef = self.dual_coef_.T
        if coef.shape[1] > 2 and np.count_nonzero(coef) < 0.1 * coef.size:
            # one-vs-one: a pair's coefficients are nonzero on its two classes' support vectors only, so a sparse
            # product costs n n_SV (k - 1), LIBSVM's, not n n_SV k(k - 1)/2 (sector, 104 classes: 0.21 s for 1,000
            # rows against 0.41 s)
            coef = sp.csr_matrix(coef)
        if precomputed:
            return np.asarray(X[:, self.support_] @ coef) + self.intercept_
        spec = self._spec
        out = kernel_decision(X, self.support_vectors_, coef, spec, self._coef_sum_zero)
        if np.isnan(out).any():  # X and the model are finite: kernel values overflowed (inf - inf); predict would
            # read NaN as "not > 0", a silent class
            raise ValueError(
                f"X: the {spec.kind} kernel values on these features overflow (NaN decision values); "
                "scale X as the training data were"
            )
        return out + self.intercept_

    def decision_function(self, X):
        """Decision values f(x) = sum_i dual_coef_i K(sv_i, x) + intercept_, shape (n,) float64.

        X: (n, n_features_in_) array or CSR matrix; for kernel="precomputed", (n, n_train) kernel
        values against the training samples. Raises :class:`svmcore.NotFittedError` before fit and
        ValueError for a wrong number of features, NaN or inf, or kernel values that overflow (a poly kernel on
        features far larger than the training data's).
        """
        return self._pairwise_decision(X)[:, 0]

    def _n_models(self):
        return 1

    def _check_state(self):
        super()._check_state()
        if self.support_.ndim != 1 or self.support_.dtype.kind not in "iu":
            raise ValueError(f"support_ must be a 1-D integer array, got {self.support_.dtype} {self.support_.shape}")
        n_sv, m = self.support_.shape[0], self._n_models()
        if self.dual_coef_.shape != (m, n_sv) or self.intercept_.shape != (m,):
            raise ValueError(
                f"dual_coef_ {self.dual_coef_.shape} / intercept_ {self.intercept_.shape} do not match "
                f"support_ ({n_sv},) and {m} model(s)"
            )
        if self.kernel in ("poly", "rbf") and not self.gamma_ > 0:
            raise ValueError(f"gamma_ must be > 0 for the {self.kernel} kernel, got {self.gamma_}")
        if (
            self.kernel == "precomputed"
            and n_sv
            and (self.support_.min() < 0 or self.support_.max() >= self.n_features_in_)
        ):
            raise ValueError("support_ indexes outside the training kernel")
        if self.kernel != "precomputed" and self.support_vectors_.shape != (n_sv, self.n_features_in_):
            raise ValueError(
                f"support_vectors_ has shape {self.support_vectors_.shape}, expected ({n_sv}, {self.n_features_in_})"
            )
        check_fitted_gamma(self.kernel, self.gamma, self.gamma_, self.n_features_in_)
        if self.kernel == "poly" and n_sv:  # (an edited degree: every decision value would overflow)
            with np.errstate(over="ignore", invalid="ignore"):
                diag = kernel_diagonal(row_norms_sq(self.support_vectors_), self._spec)
            if not np.isfinite(diag).all():
                raise ValueError(
                    f"the poly kernel (degree={self.degree}, gamma_={self.gamma_:g}, coef0={self.coef0:g})"
                    " overflows on the model's own support vectors, which no fit produces"
                )


class _if_probability:
    """Decorator: the method exists only while ``probability`` is True (scikit-learn's ``available_if``, which
    svmcore does not import): otherwise attribute access raises AttributeError, so ``hasattr(clf,
    "predict_proba")`` tells whether probabilities can be asked for, as for scikit-learn's SVC."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.fn
        if not obj._param("probability"):  # as fitted: set_params(probability=True) needs a refit
            raise AttributeError(
                f"{self.fn.__name__} is not available when probability=False; set probability=True before fit"
            )
        return types.MethodType(self.fn, obj)


@persistence.register
class SVC(ClassifierMixin, _KernelSVM):
    """Kernel C-support vector classifier trained by working-set decomposition.

    Dual (Osuna et al. 1997, Eq. 3; LIBSVM's form): min_a 1/2 a'Qa - 1'a, y'a = 0, 0 <= a_i <= C w_i,
    Q_ij = y_i y_j K(x_i, x_j), solved by :func:`svmcore.smo.solve`. More than two classes: one binary
    problem per pair of classes and LIBSVM's voting (one-vs-one, Hsu and Lin 2002).

    Parameters: C > 0; kernel "linear" | "poly" | "rbf" | "precomputed"; degree (poly); gamma "scale" |
    "auto" | float > 0 (as in scikit-learn); coef0; tol (KKT violation, LIBSVM's eps); cache_size in MB
    for kernel columns; working_set_size q >= 2 (None: 64); shrinking; max_iter (iterations, None:
    until converged, or at most LIBSVM's safeguard of max(10^7, 100 n) SMO steps, with a svmcore.ConvergenceWarning);
    verbose (bool); callback(info dict) about every 1000 iterations (progress bars; with probability=True it
    also reports the cross-validation fits); class_weight None | "balanced" | dict
    {label: weight >= 0} (scikit-learn's meaning: w_i = class_weight[y_i] * sample_weight[i]; "balanced" =
    n / (n_classes * bincount(y)) over all training rows, also for the one-vs-one pairs; labels missing
    from the dict weigh 1); probability (bool: fit Platt sigmoids for :meth:`predict_proba`, about 5 times
    the training cost); random_state (None | int >= 0 | numpy Generator / RandomState: the folds of the
    probability cross-validation, None drawing from numpy's global RandomState as scikit-learn; unused when
    probability=False); n_jobs (None or 1: one binary problem at a time; j > 1: up to j pairs of classes
    solved at once on threads, each with its probability cross-validation; -1: one thread per available core;
    pairs of fewer than 256 rows on average, whose time is mostly Python, run on one thread: two were slower).
    With j > 1, BLAS runs on one thread meanwhile, so the model is that of n_jobs=1 with BLAS on one thread, to
    the bit (multi-threaded BLAS rounds the float32 kernel columns differently, which can move a fit slightly);
    each running solver keeps its own kernel cache of cache_size MB, and the callback is called from the
    threads.

    Learned: classes_ (k,), support_ (n_SV,) int64 (training rows that are a support vector of any pair),
    support_vectors_ (n_SV, d) float64, the training rows as fit used them: a CSR matrix (sorted indices, as
    scikit-learn's SVC) where CSR X stayed sparse, an array where X was dense or fit trained on a dense copy
    (:func:`svmcore.kernels.densify_if_cheaper`), (0, 0) for kernel="precomputed"; dual_coef_ (m, n_SV) =
    alpha_i y_i of each of the m = k(k-1)/2 binary models (1 for two classes; pairs (a, b), a < b, in
    :func:`svmcore.multiclass.ovo_pairs` order, y = +1 for classes_[b], 0 where a row is not in that model),
    intercept_ (m,), objective_ (1/2 a'Qa - 1'a at the solution, summed over the models), kkt_violation_ (the
    largest), n_iter_ (summed), gamma_,
    fit_seconds_ (solver seconds of these m models, summed: more than the wall time with n_jobs > 1);
    cache_hit_rate_ (after fit only, not saved). With probability=True also probA_, probB_ (m,) float64:
    P(classes_[b] | x in class a or b) = 1 / (1 + exp(probA_[m] f_m(x) + probB_[m])), f_m the pair's decision value
    (> 0 means classes_[b]); LIBSVM and scikit-learn state the same sigmoid for classes_[a] with decision value -f_m,
    so their probA_ equals ours and their probB_ is -probB_. Computed from these: n_support_ (k,) int64, support
    vectors per class; coef_ (m, d) float64 array, the primal weights, for kernel="linear" only.
    Raises TypeError/ValueError for bad input: NaN/inf, wrong shapes, empty X, a single class, C <= 0,
    unknown kernel, bad class_weight; :class:`svmcore.NotFittedError` (a ValueError) before fit.
    Working-set selection and the SMO step: Fan, Chen, Lin, JMLR 2005 (LIBSVM).
    """

    _coef_sum_zero = True  # each binary model's dual coefficients sum to 0 (y'a = 0)

    _state_arrays = _KernelSVM._state_arrays + ("classes_",)
    _prob_arrays = ("probA_", "probB_")  # saved iff probability=True
    # absent from files written before these parameters existed; these values reproduce those models exactly
    _params_added_later = {"class_weight": None, "probability": False, "random_state": None, "n_jobs": None}

    def __init__(
        self,
        C: float = 1.0,
        kernel: str = "rbf",
        degree: int = 3,
        gamma: float | str = "scale",
        coef0: float = 0.0,
        tol: float = 1e-3,
        cache_size: float = 200,
        working_set_size: int | None = None,
        shrinking: bool = True,
        max_iter: int | None = None,
        verbose: bool = False,
        callback: Callable[[dict], None] | None = None,
        class_weight: ClassWeight = None,
        probability: bool = False,
        random_state: RandomStateLike = None,
        n_jobs: int | None = None,
    ) -> None:
        self.set_params(**{k: v for k, v in locals().items() if k != "self"})

    def _check_params(self):
        """Check the hyperparameters; return C as a float."""
        C = check_scalar(self.C, "C", lo=0, lo_open=True)
        super()._check_params()
        check_class_weight(self.class_weight)
        if not isinstance(self.probability, (bool, np.bool_)):
            raise TypeError(f"probability: expected a bool, got {self.probability!r}")
        check_random_state(self.random_state)
        self._n_threads()
        return C

    def _n_threads(self):
        """Threads for the binary problems, from n_jobs (None: 1, -1: one per core); ValueError if invalid."""
        return 1 if self.n_jobs is None else check_threads(self.n_jobs, "n_jobs", all_cores=True)

    def fit(
        self,
        X: MatrixLike,
        y: ArrayLike,
        sample_weight: ArrayLike | None = None,
        *,
        alpha_init: ArrayLike | None = None,
    ) -> SVC:
        """Train and return self.

        X: (n, d) float array or CSR matrix (trained on a dense copy where that is cheaper and small:
        :func:`svmcore.kernels.densify_if_cheaper`), or the (n, n) kernel matrix for kernel="precomputed"; y: (n,)
        with at least 2 distinct labels (numbers or strings); sample_weight: (n,) >= 0, None for ones; row
        i gets the box constraint C * class_weight[y_i] * sample_weight[i]. With probability=True, each
        binary model is first cross-validated (:meth:`_cross_val_decision`) and Platt's sigmoid fitted to
        the out-of-fold decision values (:func:`svmcore.probability.fit_sigmoid`), as LIBSVM.

        alpha_init: (n,) float, two classes only: the dual variables to start from instead of 0 (alpha seeding,
        DeCoste and Wagstaff 2000), 0 <= alpha_init[i] <= row i's box constraint and sum_i y_i alpha_init[i] = 0
        with y_i = +1 for classes_[1], -1 for classes_[0]. A refit on rows added to an earlier fit's training set
        starts from that fit's alphas on its rows and 0 on the new ones (:func:`warm_alpha`): the same optimum,
        reached from a point where only the new rows violate the KKT conditions. Platt's folds start from 0.

        Raises ValueError for NaN/inf, wrong shapes, a single class (also among the rows of positive weight of a
        pair of classes), class_weight labels that are not classes, bad hyperparameters and an infeasible or
        multi-class alpha_init; TypeError for non-numeric input.
        """
        C_value = self._check_params()
        X, spec = self._prepare(X)
        classes, yi = check_labels(y, X.shape[0])
        w = row_weights(sample_weight, self.class_weight, classes, yi)  # checked before any pair is trained
        rng = make_rng(self.random_state) if self.probability else None
        class_pairs = ovo_pairs(len(classes))
        settings = self._solver_settings()
        gram = (
            Gram(X, centres(spec, True), yi)
            if gram_pays(X, spec, len(classes), settings["cache_size"], self.probability)
            else None
        )
        # the pairs' models come from the Gram only where probability=False would use it too: the decision function
        # does not depend on probability (LIBSVM's rule; dense rows' products round otherwise on the Gram)
        fit_gram = (
            gram if gram is not None and gram_pays(X, spec, len(classes), settings["cache_size"], False) else None
        )
        problems = []
        for a, b in class_pairs:
            rows = np.flatnonzero((yi == a) | (yi == b))
            C = C_value * w[rows]
            # the folds are drawn here, pair by pair, so that they do not depend on the order the threads take
            folds = rng.permutation(np.count_nonzero(C > 0)) if self.probability else None
            problems.append((rows, np.where(yi[rows] == b, 1.0, -1.0), C, folds))
        if alpha_init is not None:
            if len(classes) != 2:
                raise ValueError(f"alpha_init: a start for two classes, got {len(classes)} classes")
            rows, ys, C, _ = problems[0]
            alpha_init = check_alpha_init(alpha_init, ys, C)

        def solve_pair(problem):
            rows, ys, C, folds = problem
            block = self._pair_block(spec, rows, ys, C, gram, settings)
            sigmoid = (
                fit_sigmoid(
                    *self._cross_val_decision(X, spec, rows, ys, C, folds, gram=gram, block=block, settings=settings)
                )
                if self.probability
                else None
            )
            if fit_gram is None:
                block = None
            return self._fit_binary(X, spec, rows, ys, C, fit_gram, block, settings, alpha_init), sigmoid

        threads = min(self._n_threads(), len(class_pairs))
        tiny = 2 * len(yi) / len(classes) < _THREADED_PAIR_ROWS
        batch = {}
        if fit_gram is not None and (threads == 1 or tiny):  # (never binary: gram_pays; alpha_init is binary)
            batch = self._solve_on_gram(problems, spec, fit_gram, settings)
        rest = [problem for m, problem in enumerate(problems) if m not in batch]
        if threads > 1 and tiny:
            # tiny pairs are mostly Python around the solver, which holds the GIL: two threads took 1.7-2x the time of
            # one (sector, 700 rows in 104 classes, 13 a pair; 300 rows with probability=True: 9-11 s against 5.1 s)
            # and gained nothing up to ~300 rows a pair. One thread, BLAS too, so that the model stays n_jobs=j's
            with blas_single_thread():
                solved = [solve_pair(problem) for problem in rest]
        else:
            with thread_map(threads) as run:
                solved = run(solve_pair, rest)
        solved = iter(solved)
        solved = [batch[m] if m in batch else next(solved) for m in range(len(problems))]
        coef = np.zeros((len(class_pairs), X.shape[0]))
        for m, ((rows, ys, _, _), (res, _)) in enumerate(zip(problems, solved, strict=True)):
            coef[m, rows] = res.alpha * ys
        results = [res for res, _ in solved]
        self._store(X, spec, results, coef, [-res.rho for res in results])
        self.classes_ = classes
        if self.probability:
            sigmoids = np.array([sigmoid for _, sigmoid in solved])  # (m, 2): (A, B) per pair
            self.probA_, self.probB_ = sigmoids[:, 0].copy(), sigmoids[:, 1].copy()
        else:  # a refit without probabilities must not keep the sigmoids of an earlier model
            for k in self._prob_arrays:
                self.__dict__.pop(k, None)
        self._freeze()
        return self

    def _cross_val_decision(self, X, spec, rows, ys, C, perm, n_folds=5, gram=None, block=None, settings=None):
        """Out-of-fold decision values of one binary model (training rows ``rows``, labels ys, box
        constraints C, all (len(rows),)) for Platt's sigmoid: LIBSVM's svm_binary_svc_probability.

        ``perm``, a random permutation of the rows of positive weight, is cut into ``n_folds`` consecutive parts;
        each part gets the decision values of the same SVC (same kernel, C, weights, solver settings) trained on
        the other parts. A fold whose training part holds a single class gives +1 (class b) or -1 (class a) to
        all its rows, as LIBSVM. Rows of zero weight take no part (LIBSVM removes them before training).
        Returns (f, ys) over the rows kept, (n_kept,) float64 each. ``gram``: X's :class:`Gram`, or None;
        ``block``: the pair's :class:`PairBlock`, or None; ``settings``: :meth:`_solver_settings`, or None. With a
        block, the folds run in one compiled call (:func:`fold_decisions`), the same numbers; those whose rows shift
        (KernelQ or kernel_decision centre them) are finished here.
        """
        keep = C > 0
        kept = np.flatnonzero(keep)
        rows_all, ys_all, C_all = rows, ys, C
        rows, ys, C = rows[keep], ys[keep], C[keep]
        n = len(rows)
        f = np.zeros(n)
        todo = range(n_folds)
        settings = settings or self._solver_settings()
        if block is not None:
            folds, fold_values, fold_alpha = (
                np.zeros((4, n_folds), dtype=np.int64),
                np.zeros((2, n_folds)),
                np.zeros((n_folds, n)),
            )
            max_iter = settings["max_iter"]
            left, unconverged = fold_decisions(
                block.Q32,
                block.Q64,
                block.K,
                block.Q.diagonal,
                ys_all,
                C_all,
                kept,
                np.asarray(perm, dtype=np.int64),
                n_folds,
                max(block.Q.column_rel_error, EPS32),
                self._compiled_settings(settings),
                centres(spec, True) and gram.sparse,
                gram.shift_test(),
                rows_all,
                f,
                folds,
                fold_values,
                fold_alpha,
            )
            if unconverged:
                for i in np.flatnonzero(folds[1] & (1 - folds[2])):
                    warn_not_converged(max_iter, folds[3, i], fold_values[0, i], settings["tol"], stacklevel=4)
            todo = np.flatnonzero(folds[0]) if left else ()
        for i in todo:  # a loop over folds, each a vectorised fit and prediction
            begin, end = i * n // n_folds, (i + 1) * n // n_folds
            if begin == end:
                continue
            test = perm[begin:end]
            train = np.sort(np.concatenate([perm[:begin], perm[end:]]))  # sorted: the solver sees rows in order
            n_pos = int((ys[train] > 0).sum())
            if n_pos in (0, len(train)):
                f[test] = 1.0 if n_pos else (-1.0 if len(train) else 0.0)
                continue
            if block is not None and folds[0, i] == FOLD_DECIDE:
                alpha, rho = fold_alpha[i, train], fold_values[1, i]
            else:
                res = self._fit_binary(X, spec, rows[train], ys[train], C[train], gram, settings=settings)
                alpha, rho = res.alpha, res.rho
            f[test] = self._binary_decision(X, spec, rows[train], alpha * ys[train], -rho, rows[test], gram)
        return f, ys

    def decision_function(self, X: MatrixLike) -> np.ndarray:
        """Decision values: (n,) float64 for two classes, f(x) = sum_i dual_coef_i K(sv_i, x) + intercept_
        (> 0 means classes_[1]); (n, k) for k > 2 classes, the one-vs-one votes plus a tie-break in
        (-1/3, 1/3) (scikit-learn's "ovr" shape). X as in fit ((n, n_train) kernel values for
        kernel="precomputed"). Raises :class:`svmcore.NotFittedError` before fit and ValueError for a wrong
        number of features, NaN or inf.
        """
        F = self._pairwise_decision(X)
        return F[:, 0] if F.shape[1] == 1 else ovo_votes(F, ovo_pairs(len(self.classes_)), len(self.classes_))

    @property
    def n_support_(self) -> np.ndarray:
        """Support vectors per class, (k,) int64 in classes_ order: a row's class is read from the sign of its
        coefficient in any model it belongs to (y = +1 for classes_[b] of pair (a, b)). Raises
        :class:`svmcore.NotFittedError` before fit."""
        check_fitted(self, "dual_coef_")
        class_pairs = ovo_pairs(len(self.classes_))
        coef = self.dual_coef_
        model = np.argmax(coef != 0, axis=0)  # the first model each support vector belongs to
        positive = coef[model, np.arange(coef.shape[1])] > 0
        return np.bincount(
            np.where(positive, class_pairs[model, 1], class_pairs[model, 0]), minlength=len(self.classes_)
        ).astype(np.int64)

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Class labels (n,) from classes_: for two classes classes_[1] where decision_function(X) > 0, else
        the class with the most one-vs-one votes, a tie going to the more confident class (scikit-learn's
        ``SVC(break_ties=True)``; LIBSVM gives it to the first class). This stays the rule with
        probability=True (as LIBSVM and scikit-learn), so the argmax of :meth:`predict_proba` can differ on
        some rows."""
        f = self.decision_function(X)
        return self.classes_[(f > 0).astype(int) if f.ndim == 1 else np.argmax(f, axis=1)]

    @_if_probability
    def predict_proba(self, X: MatrixLike) -> np.ndarray:
        """Class probabilities (n, k) float64, columns in classes_ order, rows summing to 1 (LIBSVM's method).

        Each pair's decision value f_m goes through its sigmoid, r = 1 / (1 + exp(probA_ f_m + probB_)),
        clipped to [1e-7, 1 - 1e-7]; two classes: (1 - r, r); more: Wu, Lin, Weng's pairwise coupling
        (:func:`svmcore.probability.pairwise_coupling`). Only defined with probability=True (AttributeError
        otherwise); raises :class:`svmcore.NotFittedError` before fit or if the model was fitted with
        probability=False, and ValueError for bad X as :meth:`decision_function`. The sigmoids come from
        cross-validation, so the argmax can differ from :meth:`predict` on a few rows.
        """
        check_fitted(self, "dual_coef_")
        if not hasattr(self, "probA_"):
            raise NotFittedError(
                "this SVC was fitted with probability=False; fit it again with probability=True to get predict_proba"
            )
        F = self._pairwise_decision(X)
        R = np.clip(sigmoid_predict(F, self.probA_, self.probB_), MIN_PROB, 1.0 - MIN_PROB)
        if R.shape[1] == 1:
            return np.column_stack([1.0 - R[:, 0], R[:, 0]])
        k = len(self.classes_)
        return pairwise_coupling(R, ovo_pairs(k), k)

    @_if_probability
    def predict_log_proba(self, X: MatrixLike) -> np.ndarray:
        """log of :meth:`predict_proba`, (n, k) float64 (finite: the pairwise probabilities are clipped)."""
        return np.log(self.predict_proba(X))

    def _n_models(self):
        k = self.classes_.shape[0] if self.classes_.ndim == 1 else 0
        return k * (k - 1) // 2

    def _check_state(self):
        if self.classes_.ndim != 1 or self.classes_.shape[0] < 2:
            raise ValueError(f"classes_ must hold at least 2 labels, got shape {self.classes_.shape}")
        super()._check_state()

    def _check_probability_state(self):
        m = self._n_models()
        for k in self._prob_arrays:
            a = getattr(self, k)
            if a.dtype.kind != "f" or a.shape != (m,):
                raise ValueError(f"{k} must be a float array of shape ({m},), got {a.dtype} {a.shape}")
            if not np.isfinite(a).all():
                raise ValueError(f"array {k!r} contains NaN or infinity")

    def _state(self):
        params, meta, arrays = super()._state()
        if params["probability"]:  # as fitted, so the sigmoids exist
            arrays.update({k: getattr(self, k) for k in self._prob_arrays})
        return params, meta, arrays

    @classmethod
    def _file_arrays(cls):
        return super()._file_arrays() + list(cls._prob_arrays)

    @classmethod
    def _from_state(cls, params, meta, arrays):
        est = super()._from_state(params, meta, {k: v for k, v in arrays.items() if k not in cls._prob_arrays})
        if est.probability:
            for k in cls._prob_arrays:
                if k not in arrays:
                    raise KeyError(f"missing array {k!r} (the model has probability=True)")
                setattr(est, k, arrays[k])
            est._check_probability_state()
        elif any(k in arrays for k in cls._prob_arrays):
            raise ValueError("probA_/probB_ are stored, but probability=False")
        return est


@persistence.register
class OneClassSVM(_KernelSVM):
    """One-class SVM (Schoelkopf et al. 2001) on the same decomposition solver, scikit-learn's meaning.

    Dual: min_a 1/2 a'Ka, 1'a = nu n, 0 <= a_i <= 1 (LIBSVM's scaling); decision f(x) = sum_i a_i K(x_i,
    x) - rho, positive for inliers. nu in (0, 1]. Learned attributes as :class:`SVC` (dual_coef_ = alpha,
    intercept_ = -rho, offset_ = rho) without classes_. predict returns +1 (inlier) / -1 (outlier).
    """

    _state_arrays = _KernelSVM._state_arrays
    _estimator_type = "outlier_detector"

    def __init__(
        self,
        nu: float = 0.5,
        kernel: str = "rbf",
        degree: int = 3,
        gamma: float | str = "scale",
        coef0: float = 0.0,
        tol: float = 1e-3,
        cache_size: float = 200,
        working_set_size: int | None = None,
        shrinking: bool = True,
        max_iter: int | None = None,
        verbose: bool = False,
        callback: Callable[[dict], None] | None = None,
    ) -> None:
        self.set_params(**{k: v for k, v in locals().items() if k != "self"})

    def _check_params(self):
        """Check the hyperparameters; return nu as a float."""
        nu = check_scalar(self.nu, "nu", lo=0, hi=1, lo_open=True)
        super()._check_params()
        return nu

    def fit(self, X: MatrixLike, y: object = None, sample_weight: ArrayLike | None = None) -> OneClassSVM:
        """Train and return self. X: (n, d) float array or CSR, n >= 2 (or an (n, n) precomputed kernel);
        y is ignored; sample_weight: (n,) >= 0 (None: ones), the per-row upper bounds of alpha, with
        sum(alpha) = nu * sum(sample_weight). Raises ValueError / TypeError as :meth:`SVC.fit`."""
        nu = self._check_params()
        X, spec = self._prepare(X, min_rows=2)
        n = X.shape[0]
        w = check_sample_weight(sample_weight, n)
        alpha0 = initial_one_class_alpha(nu * w.sum(), w)
        res = self._run(self._make_q(X, spec, None), np.zeros(n), np.ones(n), w, alpha0)
        self._store(X, spec, [res], res.alpha[None, :], [-res.rho])
        self._freeze()
        return self

    @property
    def n_support_(self) -> np.ndarray:
        """[number of support vectors], (1,) int64, as scikit-learn's OneClassSVM gives it. Raises
        :class:`svmcore.NotFittedError` before fit."""
        check_fitted(self, "support_")
        return np.array([len(self.support_)], dtype=np.int64)

    @property
    def offset_(self) -> float:
        """rho (float): decision_function = score_samples - offset_. Raises :class:`svmcore.NotFittedError` (also
        an AttributeError: ``hasattr`` is False) before fit."""
        check_fitted(self, "intercept_")
        return -self.intercept_[0]

    def score_samples(self, X: MatrixLike) -> np.ndarray:
        """Raw scores sum_i alpha_i K(sv_i, x), shape (n,) float64 (scikit-learn's convention). Raises as
        :meth:`decision_function`."""
        return self.decision_function(X) + self.offset_

    def predict(self, X: MatrixLike) -> np.ndarray:
        """+1 for inliers (decision_function(X) >= 0), -1 for outliers; shape (n,) int. Raises as
        :meth:`decision_function`."""
        return np.where(self.decision_function(X) >= 0, 1, -1)

    def fit_predict(self, X: MatrixLike, y: object = None, sample_weight: ArrayLike | None = None) -> np.ndarray:
        """fit(X) then predict(X): +1 / -1 per training row, shape (n,) int."""
        return self.fit(X, sample_weight=sample_weight).predict(X)


def initial_one_class_alpha(total: float, upper: ArrayLike) -> np.ndarray:
    """A feasible start for sum(a) = total, 0 <= a <= upper: fill the first variables to their bound
    (LIBSVM's one-class initialisation). Raises ValueError if total exceeds sum(upper)."""
    upper = np.asarray(upper, dtype=np.float64)
    if total > upper.sum() * (1 + 1e-12):
        raise ValueError(f"infeasible: sum of alpha {total} exceeds the sum of bounds {upper.sum()}")
    before = np.concatenate([[0.0], np.cumsum(upper)[:-1]])
    return np.clip(total - before, 0.0, upper)


def check_alpha_init(alpha: ArrayLike, y: ArrayLike, C: ArrayLike) -> np.ndarray:
    """``alpha`` as a start of the C-SVC dual with labels ``y`` (+-1) and box constraints ``C``.

    Parameters
    ----------
    alpha, y, C : array-like of shape (n,)

    Returns
    -------
    ndarray of shape (n,), float64

    Raises
    ------
    ValueError
        A wrong shape, NaN or inf, an alpha outside [0, C], or y'alpha != 0 beyond rounding (1e-9 of sum alpha):
        the solver keeps y'alpha where it starts, and the C-SVC dual needs 0.
    """
    alpha = np.array(alpha, dtype=np.float64)
    y, C = np.asarray(y, dtype=np.float64), np.asarray(C, dtype=np.float64)
    if alpha.shape != y.shape:
        raise ValueError(f"alpha_init: expected shape {y.shape}, got {alpha.shape}")
    if not np.isfinite(alpha).all():
        raise ValueError("alpha_init: NaN or inf")
    if (alpha < 0).any() or (alpha > C).any():
        worst = int(np.argmax(np.maximum(-alpha, alpha - C)))
        raise ValueError(
            f"alpha_init: need 0 <= alpha_init[i] <= C_i (C times the row's weights); row {worst} has "
            f"{alpha[worst]:g} against C_i = {C[worst]:g}"
        )
    balance = float(y @ alpha)
    if abs(balance) > 1e-9 * max(float(alpha.sum()), 1.0):
        raise ValueError(f"alpha_init: sum_i y_i alpha_i must be 0, got {balance:g} (feasible_alpha makes it so)")
    return alpha


def feasible_alpha(alpha: ArrayLike, y: ArrayLike, C: ArrayLike) -> np.ndarray:
    """A feasible start of the C-SVC dual near ``alpha``: clipped to [0, C], then the alphas of the class whose
    sum is larger scaled down so that y'alpha = 0. For starts put together from several solutions (the merged
    support vectors of a Cascade SVM, Graf et al. 2004, Sec. 2), which hold a row twice or leave y'alpha off 0.

    Parameters
    ----------
    alpha, y, C : array-like of shape (n,)
        Multipliers, labels +-1, box constraints.

    Returns
    -------
    ndarray of shape (n,), float64
    """
    alpha = np.clip(np.asarray(alpha, dtype=np.float64), 0.0, np.asarray(C, dtype=np.float64))
    pos = np.asarray(y) > 0
    s_pos, s_neg = alpha[pos].sum(), alpha[~pos].sum()
    big, small = (pos, s_neg / s_pos) if s_pos > s_neg else (~pos, s_pos / s_neg if s_neg > 0 else 1.0)
    alpha[big] *= small
    return alpha


def warm_alpha(svc: SVC, n: int, rows: ArrayLike | None = None) -> np.ndarray:
    """The multipliers of a fitted binary ``svc`` over ``n`` training rows: |dual_coef_| on the rows of its support
    vectors, 0 elsewhere; rows appended after the ones it was fitted on start at 0. The ``alpha_init`` of a refit
    on a grown training set (:meth:`SVC.fit`).

    Parameters
    ----------
    svc : SVC
        Fitted, two classes.
    n : int
        Rows of the new training set.
    rows : array-like of shape (n_SV,) of int, or None
        The positions of its support vectors among the n rows; None: ``svc.support_`` (the rows it was fitted on
        come first, in their order).

    Returns
    -------
    ndarray of shape (n,), float64

    Raises
    ------
    ValueError
        A model of more than two classes, or positions that are not rows (``support_`` -1: a reduced set).
    """
    check_fitted(svc, "support_")
    if len(svc.classes_) != 2:
        raise ValueError(f"warm_alpha: a binary SVC, got {len(svc.classes_)} classes")
    support = np.asarray(svc.support_ if rows is None else rows)
    if support.shape != (len(svc.support_),) or (len(support) and (support.min() < 0 or support.max() >= n)):
        raise ValueError(f"warm_alpha: the support vectors' positions must be {len(svc.support_)} rows of {n}")
    alpha = np.zeros(n)
    alpha[support] = np.abs(np.ravel(svc.dual_coef_))
    return alpha
