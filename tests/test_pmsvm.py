"""PmSVM (Wu, TNNLS 2015): kernels, the Eq. (40) approximation, the solvers against independent references,
lookup-table scoring, persistence and input errors. Real data subsets (USPS, pendigits, CBCL HOG)."""

import os
import warnings

import cv2
import h5py
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import additive_chi2_kernel
from sklearn.svm import LinearSVC

import svmcore
from conftest import peak_growth
from svmcore import SVC
from svmcore.pmsvm import (
    PmSVM,
    approx_kernel,
    approximation_error,
    explanatory_variables,
    lut_decision,
    pmsvm_anchors,
    power_mean,
    power_mean_kernel,
    regression_weights,
)

# many of these real-data fits use up the default 100 epochs (docs/pmsvm.md: medians of 16-100), or are capped
# on purpose; test_warns_once_per_fit_at_max_iter checks the warning
pytestmark = pytest.mark.filterwarnings("ignore:PmSVM. .* stopped at max_iter:RuntimeWarning")


@pytest.fixture(scope="module")
def usps(data_dir):
    with h5py.File(data_dir / "bench" / "usps" / "usps.h5") as f:
        return (
            f["train/data"][:2000].astype(np.float64),
            f["train/target"][:2000].astype(int),
            f["test/data"][:1000].astype(np.float64),
            f["test/target"][:1000].astype(int),
        )


@pytest.fixture(scope="module")
def pendigits(pendigits_full):
    X, y, Xt, yt = pendigits_full
    return X[:3000], y[:3000], Xt[:2000], yt[:2000]


@pytest.fixture(scope="module")
def cbcl_hog(cbcl):
    """HOG (324-d, nonnegative) of real CBCL training patches: 1200 for training, 800 held out.

    (The official CBCL test faces come from another source; the held-out part of the training set is the
    stable comparison for a unit test. The benchmark uses the official split.)
    """
    hog = cv2.HOGDescriptor((24, 24), (12, 12), (6, 6), (6, 6), 9)
    idx = np.random.default_rng(0).permutation(len(cbcl["y_train"]))[:2000]
    P = (cbcl["X_train"][idx].reshape(-1, 19, 19) * 255).round().astype(np.uint8)
    H = np.stack([hog.compute(cv2.resize(p, (24, 24))).ravel() for p in P]).astype(np.float64)
    y = cbcl["y_train"][idx]
    return H[:1200], y[:1200], H[1200:], y[1200:]


# --- exact kernel ----------------------------------------------------------------------------------
def test_power_mean_kernel_matches_definitions(usps):
    X, Y = usps[0][:40], usps[2][:30]
    # p = -1 is the additive chi-square kernel: 2xy/(x+y) = (x+y)/2 - (x-y)^2/(2(x+y)) (sklearn's form)
    ref = (X.sum(1)[:, None] + Y.sum(1)[None, :]) / 2 + 0.5 * additive_chi2_kernel(X, Y)
    np.testing.assert_allclose(power_mean_kernel(X, Y, p=-1), ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(power_mean_kernel(X, Y, p=0), np.sqrt(X) @ np.sqrt(Y).T, rtol=1e-10)
    np.testing.assert_allclose(power_mean_kernel(X, Y, p=-np.inf), np.minimum(X[:, None], Y[None]).sum(-1))
    a, c = X[:, None, :], Y[None, :, :]
    with np.errstate(divide="ignore"):  # the textbook formula ((a^p + c^p)/2)^(1/p), 0 where a or c is 0
        ref8 = np.where((a > 0) & (c > 0), ((a**-8.0 + c**-8.0) / 2) ** (-1 / 8), 0.0).sum(-1)
    np.testing.assert_allclose(power_mean(a, c, -8.0).sum(-1), ref8, rtol=1e-10)
    assert abs(power_mean(0.1, 0.5, -1000.0) - 0.1) < 1e-3  # large |p|: no overflow, tends to min
    np.testing.assert_allclose(power_mean_kernel(X, Y, p=-8), ref8, rtol=1e-10)
    # p = -8 is close to histogram intersection, and M_p(x, x) = x
    assert np.abs(ref8 - np.minimum(X[:, None], Y[None]).sum(-1)).max() < 0.1 * ref8.max()
    np.testing.assert_allclose(np.diag(power_mean_kernel(X, p=-3)), X.sum(1), rtol=1e-12)
    np.testing.assert_allclose(power_mean_kernel(sp.csr_matrix(X), Y, p=-1), ref, rtol=1e-10, atol=1e-10)


def test_power_mean_kernel_sparse_path_is_the_dense_one(usps):
    # USPS is 41% nonzero: the inverted-index path must add the same terms in the same order
    X, Y = usps[0][:200], usps[2][:150]
    Xs = sp.csr_matrix(X)
    Xs.indices, Xs.data = Xs.indices.copy(), Xs.data.copy()
    perm = np.arange(Xs.nnz)
    for i in range(Xs.shape[0]):  # unsorted column indices within rows, as scipy allows
        perm[Xs.indptr[i] : Xs.indptr[i + 1]] = perm[Xs.indptr[i] : Xs.indptr[i + 1]][::-1]
    Xs = sp.csr_matrix((Xs.data[perm], Xs.indices[perm], Xs.indptr), shape=Xs.shape)
    before = Xs.indices.copy()
    for p in (-1.0, -8.0, -np.inf, 0.0):
        dense = power_mean_kernel(X, Y, p=p)
        if p == 0:  # one sparse product of square roots instead of a dense one: equal to rounding
            np.testing.assert_allclose(power_mean_kernel(Xs, Y, p=p), dense, rtol=1e-12)
        else:
            np.testing.assert_array_equal(power_mean_kernel(Xs, sp.csr_matrix(Y), p=p), dense)
        np.testing.assert_array_equal(power_mean_kernel(Xs, Y, p=p), power_mean_kernel(Xs, sp.csc_matrix(Y), p=p))
    np.testing.assert_array_equal(Xs.indices, before)  # the caller's matrix is not reordered
    K = power_mean_kernel(Xs, p=-1.0)
    np.testing.assert_allclose(np.diag(K), X.sum(1), rtol=1e-12)
    # duplicate entries count summed, as scipy reads them (and as the dense kernel sees them)
    D = sp.csr_matrix((np.array([0.5, 0.7, 0.4]), np.array([0, 0, 1]), np.array([0, 3])), shape=(1, 2))
    assert not D.has_canonical_format
    np.testing.assert_array_equal(power_mean_kernel(D, p=-1.0), power_mean_kernel(D.toarray(), p=-1.0))
    np.testing.assert_allclose(power_mean_kernel(D, p=-1.0), [[1.6]])


# --- the approximation (Eq. 25-31, 40, 41) ---------------------------------------------------------
def test_power_mean_kernel_at_extreme_magnitudes():
    # each term is homogeneous of degree 1, K(vX, vY) = v K(X, Y); the chi-square shortcut 2ac/(a+c) overflowed to
    # inf for values above ~1e154 and underflowed to 0 below ~1e-154
    X0 = np.array([[1.0, 2.0, 0.5, 0.0], [3.0, 0.25, 1.0, 1.0]])
    Y0 = np.array([[0.5, 2.0, 4.0, 1.0], [1.0, 1.0, 0.0, 7.0], [2.0, 0.1, 3.0, 0.5]])
    for p in (-1.0, -2.0, -np.inf, 0.0):
        ref = power_mean_kernel(X0, Y0, p)
        for v in (1e-300, 1e-170, 1e-20, 1e20, 1e160, 1e300):
            np.testing.assert_allclose(
                power_mean_kernel(v * X0, v * Y0, p), v * ref, rtol=1e-12, atol=0, err_msg=f"p={p}, v={v}"
            )
            np.testing.assert_allclose(
                power_mean_kernel(sp.csr_matrix(v * X0), v * Y0, p),
                v * ref,
                rtol=1e-12,
                atol=0,
                err_msg=f"p={p}, v={v}, sparse",
            )


def test_power_mean_at_extreme_magnitudes():
    # M_p(va, vc) = v M_p(a, c); for p = 0 sqrt(ac) overflowed to inf above ~1e154 and underflowed below ~1e-154
    a, c = np.array([1.0, 2.0, 0.5, 3.0]), np.array([0.5, 2.0, 4.0, 0.1])
    for p in (-1.0, -8.0, -np.inf, 0.0):
        ref = power_mean(a, c, p)
        for v in (1e-300, 1e-170, 1e-20, 1e20, 1e160, 1e300):
            np.testing.assert_allclose(
                power_mean(v * a, v * c, p), v * ref, rtol=1e-12, atol=0, err_msg=f"p={p}, v={v}"
            )


def test_anchors_paper_and_chebyshev():
    np.testing.assert_array_equal(pmsvm_anchors(3), [0.01, 0.06, 0.75])
    c = pmsvm_anchors(5)
    t = np.log(c + 0.05)
    lo, hi = np.log(0.05), np.log(1.05)
    nodes = np.sort(np.cos((2 * np.arange(1, 6) - 1) * np.pi / 10))
    np.testing.assert_allclose((t - (lo + hi) / 2) / ((hi - lo) / 2), nodes, atol=1e-12)
    e = explanatory_variables(np.array([0.0, 0.2]), 3)
    np.testing.assert_allclose(e[1], [1, np.log(0.25), np.log(0.25) ** 2])
    assert not e[0].any()


def test_approximation_error_eq40():
    e3 = approximation_error(-1.0, 3)
    # paper: ~1.94% average relative deviation for chi-square on (0, 1)^2
    assert 0.015 < e3["sum_relative"] < 0.025 and 0.015 < e3["mean_relative"] < 0.03
    errs = [approximation_error(-1.0, n)["mean_relative"] for n in (3, 4, 5, 6)]
    assert errs == sorted(errs, reverse=True) and errs[-1] < 0.001


def test_approx_kernel_on_real_data(usps):
    A, B = usps[0][:60], usps[0][60:110]
    K = power_mean_kernel(A, B)
    for n_anchors, bound in ((3, 0.03), (6, 0.002)):
        Kt = approx_kernel(A, B, n_anchors=n_anchors)
        assert np.linalg.norm(Kt - K) / np.linalg.norm(K) < bound
    Kab, Kba = approx_kernel(A, B), approx_kernel(B, A)
    assert np.abs(Kab - Kba.T).max() > 1e-3  # non-symmetric, as in the paper
    # homogeneity: with x_max = s the approximation of s-scaled data is s times that of the data
    np.testing.assert_allclose(approx_kernel(3 * A, 3 * B, x_max=3.0), 3 * approx_kernel(A, B), rtol=1e-10)


# --- solver against independent references ---------------------------------------------------------
def _box_dual_qp(Q, C):
    """min 1/2 a'Qa - 1'a, 0 <= a <= C (a scalar or one bound per row; C = inf: a >= 0 only), by cvxopt's
    interior point method (an independent QP solver)."""
    import cvxopt

    n = len(Q)
    C = np.broadcast_to(np.asarray(C, dtype=np.float64), (n,))
    bounded = np.isfinite(C).all()
    G = np.vstack([-np.eye(n), np.eye(n)]) if bounded else -np.eye(n)
    h = np.concatenate([np.zeros(n), C]) if bounded else np.zeros(n)
    cvxopt.solvers.options.update(show_progress=False, abstol=1e-10, reltol=1e-10, feastol=1e-10)
    sol = cvxopt.solvers.qp(cvxopt.matrix(Q), cvxopt.matrix(-np.ones(n)), cvxopt.matrix(G), cvxopt.matrix(h))
    a = np.array(sol["x"]).ravel()
    return a, 0.5 * a @ Q @ a - a.sum()


def test_dcd_reaches_the_exact_kernel_dual_optimum(usps):
    X, y = usps[0][:300], usps[1][:300]
    yb = np.where(y == 3, 1.0, -1.0)  # 3 vs rest
    Q = np.outer(yb, yb) * (power_mean_kernel(X) + 1.0)  # exact chi-square kernel, +1 regularised bias
    C = 0.1
    _, opt = _box_dual_qp(Q, C)
    for n_anchors, lut_bins, rel in ((6, None, 1e-3), (3, None, 3e-2), (3, 1000, 3e-2)):  # 1000: the default table
        m = PmSVM(C=C, n_anchors=n_anchors, lut_bins=lut_bins, tol=1e-3, max_iter=2000, random_state=0).fit(X, y == 3)
        a = m.alpha_[0]
        assert m.n_iter_[0] < 2000 and 0 <= a.min() and a.max() <= C
        obj = 0.5 * a @ Q @ a - a.sum()
        assert obj >= opt - 1e-9 and (obj - opt) / abs(opt) < rel, (n_anchors, lut_bins, obj, opt)
    # squared hinge: no upper bound, Q + I / (2C) (LIBLINEAR's l2-loss dual)
    Q2 = Q + np.eye(len(Q)) / (2 * C)
    _, opt2 = _box_dual_qp(Q2, np.inf)
    m = PmSVM(C=C, n_anchors=6, lut_bins=None, loss="squared_hinge", tol=1e-3, max_iter=2000, random_state=0)
    a = m.fit(X, y == 3).alpha_[0]
    obj2 = 0.5 * a @ Q2 @ a - a.sum()
    assert m.n_iter_[0] < 2000 and a.min() >= 0 and obj2 >= opt2 - 1e-9 and (obj2 - opt2) / abs(opt2) < 1e-3


def test_weights_reach_the_weighted_dual_optimum(usps):
    # class_weight and sample_weight scale each row's box constraint: 0 <= a_i <= C class_weight[y_i] sw_i
    # (hinge) or its diagonal term 1/(2 C_i) (squared hinge); against cvxopt on the exact kernel's dual.
    X, y = usps[0][:300], usps[1][:300] == 3
    yb = np.where(y, 1.0, -1.0)
    Q = np.outer(yb, yb) * (power_mean_kernel(X) + 1.0)
    sw = np.random.default_rng(0).uniform(0.2, 3.0, len(y))
    C, cw = 0.1, {True: 4.0, False: 0.5}
    C_i = C * sw * np.where(y, 4.0, 0.5)
    _, opt = _box_dual_qp(Q, C_i)
    m = PmSVM(C=C, n_anchors=6, lut_bins=None, tol=1e-3, max_iter=2000, random_state=0, class_weight=cw)
    a = m.fit(X, y, sample_weight=sw).alpha_[0]
    obj = 0.5 * a @ Q @ a - a.sum()
    assert a.min() >= 0 and (a <= C_i + 1e-12).all() and (a == C_i).sum() >= 5  # per-row bounds bind (6 rows)
    assert obj >= opt - 1e-9 and (obj - opt) / abs(opt) < 1e-3, (obj, opt)
    Q2 = Q + np.diag(0.5 / C_i)
    _, opt2 = _box_dual_qp(Q2, np.inf)
    m2 = PmSVM(
        C=C, n_anchors=6, lut_bins=None, loss="squared_hinge", tol=1e-3, max_iter=2000, random_state=0, class_weight=cw
    )
    a = m2.fit(X, y, sample_weight=sw).alpha_[0]
    obj2 = 0.5 * a @ Q2 @ a - a.sum()
    assert obj2 >= opt2 - 1e-9 and (obj2 - opt2) / abs(opt2) < 1e-3, (obj2, opt2)


def test_class_weight_balanced_and_zero_weights(pendigits):
    X, y, Xt, yt = pendigits
    counts = np.bincount(y)
    balanced = PmSVM(C=1.0, random_state=0, class_weight="balanced").fit(X, y)
    manual = PmSVM(C=1.0, random_state=0).fit(X, y, sample_weight=len(y) / (10 * counts[y]))
    np.testing.assert_array_equal(balanced.coef_, manual.coef_)
    # rows of weight 0 take no part: their dual variables stay 0 in every problem, for both multiclass schemes
    sw = np.where(np.arange(len(y)) % 3 == 0, 0.0, 1.0)
    for mc in ("ovr", "ovo"):
        m = PmSVM(C=1.0, random_state=0, multi_class=mc).fit(X, y, sample_weight=sw)
        assert not m.alpha_[:, sw == 0].any() and m.alpha_[:, sw > 0].any()
        assert np.mean(m.predict(Xt) == yt) > 0.85
    # a heavy weight on one class of a binary problem raises its recall, for the dual and the SGD solver
    yb = y == 4
    for kw in (dict(), dict(solver="sgd", max_iter=20)):
        plain = PmSVM(C=0.01, random_state=0, **kw).fit(X, yb).predict(Xt)
        heavy = PmSVM(C=0.01, random_state=0, class_weight={True: 10.0}, **kw).fit(X, yb).predict(Xt)
        assert np.mean(heavy[yt == 4]) > np.mean(plain[yt == 4]) and heavy.sum() > plain.sum(), kw


def test_rows_of_weight_zero_set_no_feature_unit(usps):
    # a row of weight 0 is left out, also from x_max_: fitting with it equals fitting without it, even when its
    # values are far above the others' (they used to set the units, and so the approximation and the table)
    X, y, Xt, _ = usps
    X, y = X[:300], y[:300]
    Xz, yz = np.vstack([X, 50.0 * X[:1]]), np.append(y, y[0])
    sw = np.append(np.ones(len(y)), 0.0)
    for kw in (dict(), dict(lut_bins=None), dict(solver="sgd", max_iter=5), dict(multi_class="ovo")):
        for layout in (np.asarray, sp.csr_matrix):
            ref = PmSVM(C=1.0, random_state=0, **kw).fit(layout(X), y)
            m = PmSVM(C=1.0, random_state=0, **kw).fit(layout(Xz), yz, sample_weight=sw)
            np.testing.assert_array_equal(m.x_max_, ref.x_max_)
            np.testing.assert_allclose(
                m.decision_function(Xt[:200]), ref.decision_function(Xt[:200]), rtol=0, atol=1e-12, err_msg=str(kw)
            )


def test_lut_decision_sums_duplicate_csr_entries(usps):
    # scipy reads duplicate entries of a CSR matrix summed, and so do decision_function and power_mean_kernel
    X, y, Xt, _ = usps
    m = PmSVM(C=1.0, random_state=0).fit(X[:300], y[:300])
    Q = sp.csr_matrix(Xt[:50])
    coo = Q.tocoo()
    rows = np.repeat(coo.row, 2)  # each entry split into two of a quarter and three quarters, row by row
    dup = sp.csr_matrix(
        (
            np.ravel(np.column_stack([0.25 * coo.data, 0.75 * coo.data])),
            np.repeat(coo.col, 2),
            np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=Q.shape[0]))]),
        ),
        shape=Q.shape,
    )
    assert dup.nnz == 2 * Q.nnz and abs(dup - Q).max() < 1e-15
    ref = lut_decision(Q, m.table_, m.x_max_, m.intercept_)
    np.testing.assert_allclose(lut_decision(dup, m.table_, m.x_max_, m.intercept_), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(m.decision_function(dup), ref, rtol=0, atol=1e-12)


def test_warns_once_per_fit_at_max_iter(pendigits):
    X, y = pendigits[0][:600], pendigits[1][:600]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # all converge: no warning
        epochs = PmSVM(random_state=0, max_iter=5000).fit(X, y).n_iter_
    cut = int(np.median(epochs))  # the problems needing more epochs stop there, the others converge
    with pytest.warns(RuntimeWarning, match=rf"PmSVM: \d+ of 10 binary problems stopped at max_iter={cut}") as record:
        m = PmSVM(random_state=0, max_iter=cut).fit(X, y)
    stopped = int((m.n_iter_ == cut).sum())
    assert stopped == np.sum(epochs >= cut) and 0 < stopped < 10
    messages = [str(w.message) for w in record if "max_iter" in str(w.message)]
    assert len(messages) == 1 and messages[0].startswith(f"PmSVM: {stopped} of 10 ")


def test_shrinking_stops_at_kkt_on_all_samples(usps):
    # Shrinking (LIBLINEAR's PGmax_old / PGmin_old rule) drops bounded variables from the epochs; the solver may
    # only stop after a check of all samples' gradients at one w. So the returned point must satisfy the KKT
    # conditions of the box dual on every sample, including those that were shrunk: the projected gradient
    # PG_i = y_i f(x_i) - 1 (clipped at the bounds) has spread <= tol, to the rounding of the dense float32 rows.
    X, y = usps[0][:600], usps[1][:600]
    for C, loss in ((0.1, "hinge"), (1.0, "hinge"), (0.1, "squared_hinge")):
        tol = 1e-3
        m = PmSVM(C=C, lut_bins=None, tol=tol, max_iter=3000, loss=loss, random_state=0).fit(X, y == 3)
        a = m.alpha_[0]
        ys = np.where(y == 3, 1.0, -1.0)
        G = ys * m.decision_function(X) - 1.0  # the solver's gradient: same regression, same bias
        upper = C if loss == "hinge" else np.inf
        if loss == "squared_hinge":
            G += a * 0.5 / C
        pg = np.where(a <= 0, np.minimum(G, 0), np.where(a >= upper, np.maximum(G, 0), G))
        assert m.n_iter_[0] < 3000
        assert pg.max() - pg.min() <= tol + 1e-6, (C, loss, pg.max() - pg.min())
        # shrinking did remove work: fewer full-data passes than epochs
        assert 1.0 <= m.n_passes_[0] < m.n_iter_[0], (m.n_passes_, m.n_iter_)
        bounded = (a == 0) | (a == upper)
        assert bounded.mean() > 0.5  # most variables sit at a bound: the ones shrinking may drop
    sgd = PmSVM(C=0.1, solver="sgd", max_iter=5, random_state=0).fit(X, y)
    np.testing.assert_array_equal(sgd.n_passes_, sgd.n_iter_)


def test_first_phase_shrinks_more_and_stops_at_the_same_kkt_point(usps, monkeypatch):
    # Dual CD's first phase bounds the shrinking threshold by FIRST_PHASE_CAP until the PG spread falls to 10 times
    # that: against no first phase (FIRST_PHASE_CAP = 0), fewer full-data passes on one-vs-rest problems
    # (83 against 111 on these 3000 samples), and the same stopping test on every sample, so a KKT point to the same
    # tolerance and the same predictions
    X, y, Xt, _ = usps
    X, y = X[:3000], y[:3000]
    tol = 0.1
    models = {}
    for phase in (0.0, svmcore.pmsvm.solver.FIRST_PHASE_CAP):
        monkeypatch.setattr(svmcore.pmsvm.solver, "FIRST_PHASE_CAP", phase)
        models[phase] = PmSVM(C=0.1, tol=tol, max_iter=3000, random_state=0).fit(X, y)
    plain, phased = models.values()
    assert (phased.n_iter_ < 3000).all() and (plain.n_iter_ < 3000).all()
    assert phased.n_passes_.sum() < 0.9 * plain.n_passes_.sum(), (phased.n_passes_.sum(), plain.n_passes_.sum())
    for m in (plain, phased):
        ys = np.where(y[None, :] == m.classes_[:, None], 1.0, -1.0)
        G = ys * m.decision_function(X).T - 1.0
        a = m.alpha_
        pg = np.where(a <= 0, np.minimum(G, 0), np.where(a >= 0.1, np.maximum(G, 0), G))
        assert (pg.max(axis=1) - pg.min(axis=1)).max() <= tol + 1e-6
    assert np.mean(plain.predict(Xt) == phased.predict(Xt)) > 0.99


def test_shrinking_verifies_on_all_samples_before_stopping(usps):
    # A solve that converges on the shrunk set must check all samples: on this problem the shrunk variables
    # violate the KKT conditions by ~14 tol at that point (measured), which only that check sees.
    X, y = usps[0], usps[1] == 8
    tol, C = 1e-2, 10.0
    m = PmSVM(C=C, lut_bins=None, tol=tol, max_iter=3000, random_state=0).fit(X, y)
    a = m.alpha_[0]
    G = np.where(y, 1.0, -1.0) * m.decision_function(X) - 1.0
    pg = np.where(a <= 0, np.minimum(G, 0), np.where(a >= C, np.maximum(G, 0), G))
    assert m.n_iter_[0] < 3000 and pg.max() - pg.min() <= tol + 1e-6


def test_sgd_approaches_the_dual_solution(usps):
    # Algorithm 4 and Algorithm 3 minimise the same primal: after 20 epochs SGD's held-out decision values
    # follow DCD's (measured: correlation 0.995, std ratio 1.18; with the step schedule's shrink halved,
    # 0.87 and 2.6)
    X, y, Xt, _ = usps
    X, y = X[:1000], y[:1000] == 3
    dcd = PmSVM(C=0.1, lut_bins=None, tol=1e-3, max_iter=3000, random_state=0).fit(X, y)
    sgd = PmSVM(C=0.1, lut_bins=None, solver="sgd", tol=1e-3, max_iter=20, random_state=0).fit(X, y)
    fd, fs = dcd.decision_function(Xt), sgd.decision_function(Xt)
    assert np.corrcoef(fd, fs)[0, 1] > 0.97
    assert 0.8 < fs.std() / fd.std() < 1.6


@pytest.mark.parametrize("layout", ["dense rows", "csr"])
@pytest.mark.parametrize("lut_bins", [None, 20])
def test_learned_weights_are_sums_of_the_training_rows_betas(usps, layout, lut_bins, monkeypatch):
    # coef_[0, j] = s_j sum_i alpha_i y_i beta(x_ij / s_j) and intercept_ = sum_i alpha_i y_i, with x_ij / s_j
    # rounded to the nearest of the lut_bins nodes of [0, 1] when training with a table (PmSVM-LUT), in both row
    # layouts; both hold s_j beta in float32 (relative rounding 6e-8)
    X, y = usps[:2]
    X, y = X[:800] * np.linspace(0.5, 40.0, 256), y[:800] == 3  # a different unit per feature
    assert np.mean(X > 0) >= svmcore.pmsvm.solver.DENSE_FROM
    if layout == "csr":
        monkeypatch.setattr(svmcore.pmsvm.solver, "DENSE_FROM", 1.01)
    m = PmSVM(C=0.1, lut_bins=lut_bins, max_iter=20, random_state=0).fit(X, y)
    assert np.ptp(m.x_max_) > 0.1 * m.x_max_.max()  # the units differ
    u = X / m.x_max_
    if lut_bins is not None:
        u = np.rint(u * (lut_bins - 1)) / (lut_bins - 1)
    coef = np.where(y, 1.0, -1.0) * m.alpha_[0]
    beta = regression_weights(u, pmsvm_anchors(3), -1.0)  # 0 where u = 0
    ref = np.einsum("i,ijb->jb", coef, beta) * m.x_max_[:, None]
    np.testing.assert_allclose(m.coef_[0], ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max())
    assert m.intercept_[0] == pytest.approx(coef.sum(), rel=1e-9, abs=1e-12)


def test_learned_weights_are_the_eq40_expansion(usps, tmp_path):
    X, y, Xt, _ = usps
    m = PmSVM(C=0.1, lut_bins=None, random_state=0).fit(X[:500], y[:500] == 7)
    ys = np.where(y[:500] == 7, 1.0, -1.0)
    # f(q) = sum_i alpha_i y_i (k~(q, x_i) + 1), k~ the non-symmetric kernel of Eq. (40)
    ref = approx_kernel(Xt[:100], X[:500], x_max=m.x_max_) @ (m.alpha_[0] * ys) + (m.alpha_[0] * ys).sum()
    # (to the float32 rounding of the dense rows the solver reads e and beta from: relative 6e-8 per term)
    np.testing.assert_allclose(m.decision_function(Xt[:100]), ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max())
    # the table path (PmSVM-LUT scoring of the same weights) differs only by interpolation error
    m.set_params(lut_bins=1000)  # the table follows lut_bins: scoring at once, and the same after save
    lut = m.decision_function(Xt[:100])
    assert m.table_.shape == (1, 256, 1000) and np.abs(lut - ref).max() < 0.01 * np.abs(ref).max()
    m.save(tmp_path / "m.npz")
    np.testing.assert_array_equal(m.decision_function(Xt[:100]), lut)
    np.testing.assert_array_equal(svmcore.load(tmp_path / "m.npz").decision_function(Xt[:100]), lut)
    m.set_params(lut_bins=None)
    np.testing.assert_allclose(m.decision_function(Xt[:100]), ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max())
    assert not hasattr(m, "table_")


def test_lut_decision_formula_dense_and_csr(usps):
    X, y, Xt, _ = usps
    m = PmSVM(C=0.1, lut_bins=50, random_state=0).fit(X[:800], y[:800])
    T, s = m.table_, m.x_max_
    assert T.shape == (10, 256, 50) and np.all(T[:, :, 0] == 0)
    # one unit per feature: its largest training value, 1 for a feature never positive in training
    col_max = X[:800].max(axis=0)
    np.testing.assert_array_equal(s, np.where(col_max > 0, col_max, 1.0))
    assert s.shape == (256,) and s.dtype == np.float64 and len(np.unique(s)) > 10
    nodes = np.linspace(0, s, 50)  # (50, 256): feature j's nodes 0, ..., s_j
    Q = Xt[:20]
    ref = m.intercept_ + np.stack(
        [[sum(np.interp(q[j], nodes[:, j], T[c, j]) for j in range(256)) for c in range(10)] for q in Q]
    )
    np.testing.assert_allclose(lut_decision(Q, T, s, m.intercept_), ref, rtol=1e-10)
    np.testing.assert_allclose(lut_decision(sp.csr_matrix(Q), T, s, m.intercept_), ref, rtol=1e-10)
    np.testing.assert_allclose(
        lut_decision(Q.astype(np.float32), T.astype(np.float32), s, m.intercept_), ref, rtol=1e-4
    )
    np.testing.assert_allclose(m.decision_function(Q), ref, rtol=1e-10)
    # one number for all features (the unit of earlier models) is that number in every dimension
    np.testing.assert_array_equal(
        lut_decision(Q, T, 0.7, m.intercept_), lut_decision(Q, T, np.full(256, 0.7), m.intercept_)
    )


def test_each_feature_has_its_own_unit_an_outlier_leaves_the_others_alone(usps):
    # One training pixel set to 1000 (USPS pixels are in [0, 1]): with one unit for all features every other value
    # fell below the smallest anchor (0.01 x_max) and, with the table, into its first bin (88.8% / 94.8% against
    # 95.3% on 1500 / 1500 USPS digits, docs/pmsvm.md); with a unit per feature only that pixel's unit changes.
    X, y, Xt, yt = usps
    X, y = X[:1500], y[:1500]
    Xo = X.copy()
    Xo[0, 0] = 1000.0
    for lut_bins in (None, 1000):
        clean, outlier = (
            PmSVM(C=10.0, multi_class="ovo", lut_bins=lut_bins, random_state=0).fit(A, y) for A in (X, Xo)
        )
        assert outlier.x_max_[0] == 1000.0 and np.array_equal(outlier.x_max_[1:], clean.x_max_[1:])
        acc, acc_o = (np.mean(m.predict(Xt) == yt) for m in (clean, outlier))
        assert acc > 0.9 and abs(acc_o - acc) <= 0.005, (lut_bins, acc, acc_o)


def test_features_of_very_different_ranges_match_the_exact_kernel(usps):
    # USPS pixels scaled by factors spread over six decades, 1e-6 to 1 (the same for the test set): the power mean
    # kernel of the scaled data weighs feature j by its factor; each feature's own unit keeps its approximation that
    # of [0, 1]. (With factors up to 1e3 the kernel dwarfs the +1 of PmSVM's regularised bias, and PmSVM's dual parts
    # from the SVC's, whose bias is free, by 1.2 points whether approximated or not: 85.6-85.8% against 87.0%, and
    # 85.9% for PmSVM's dual solved by cvxopt on the exact kernel. Here the two formulations agree.)
    X, y, Xt, yt = usps
    X, y, Xt, yt = X[:1000], y[:1000], Xt[:1000], yt[:1000]
    scale = 10.0 ** np.random.default_rng(0).permutation(np.linspace(-6, 0, X.shape[1]))
    Xs, Xts = X * scale, Xt * scale
    exact = SVC(C=1.0, kernel="precomputed").fit(power_mean_kernel(Xs) + 1.0, y)
    acc_exact = np.mean(exact.predict(power_mean_kernel(Xts, Xs) + 1.0) == yt)
    assert acc_exact > 0.85
    for lut_bins in (None, 1000):
        m = PmSVM(C=1.0, multi_class="ovo", lut_bins=lut_bins, random_state=0).fit(Xs, y)
        np.testing.assert_allclose(m.x_max_[Xs.max(axis=0) > 0], Xs.max(axis=0)[Xs.max(axis=0) > 0])
        acc = np.mean(m.predict(Xts) == yt)
        assert abs(acc - acc_exact) <= 0.01, (lut_bins, acc, acc_exact)


# --- accuracy on real data --------------------------------------------------------------------------
def _exact_binary_accuracy(Xtr, ytr, Xte, yte, C):
    model = SVC(C=C, kernel="precomputed").fit(power_mean_kernel(Xtr), ytr)
    return np.mean(model.predict(power_mean_kernel(Xte, Xtr)) == yte)


def test_binary_accuracy_cbcl_hog(cbcl_hog):
    # On this held-out CBCL split a linear SVM is as good as the kernel (~98.8%), so only the distance to
    # the exact kernel SVM is asserted here; "above linear" is asserted on USPS and pendigits below.
    Xtr, ytr, Xte, yte = cbcl_hog
    exact = _exact_binary_accuracy(Xtr, ytr, Xte, yte, C=1.0)
    assert exact > 0.97
    for kw, slack in (
        (dict(lut_bins=None), 0.01),
        (dict(lut_bins=1000), 0.01),
        (dict(solver="sgd", max_iter=30), 0.02),
    ):
        model = PmSVM(C=1.0, random_state=0, **kw).fit(Xtr, ytr)
        acc = np.mean(model.predict(Xte) == yte)
        assert acc >= exact - slack and model.n_iter_[0] <= model.max_iter, (kw, acc, exact)


def test_multiclass_usps_and_pendigits(usps, pendigits):
    for X, y, Xt, yt in (usps, pendigits):
        linear = np.mean(LinearSVC(C=1.0).fit(X, y).predict(Xt) == yt)
        ovr = PmSVM(C=1.0, n_anchors=6, random_state=0).fit(X, y)
        ovo = PmSVM(C=1.0, random_state=0, multi_class="ovo").fit(X, y)
        assert ovr.coef_.shape == (10, X.shape[1], 6) and ovo.coef_.shape == (45, X.shape[1], 3)
        assert np.mean(ovr.predict(Xt) == yt) > linear + 0.005
        assert np.mean(ovo.predict(Xt) == yt) > linear + 0.02
        # one-vs-one voting with LIBSVM's tie-break, against scikit-learn's implementation of it
        from sklearn.utils.multiclass import _ovr_decision_function

        F = lut_decision(Xt, ovo.table_, ovo.x_max_, ovo.intercept_)
        np.testing.assert_allclose(
            ovo.decision_function(Xt), _ovr_decision_function((F > 0).astype(int), F, 10), atol=1e-12
        )


def test_labels_sparse_input_and_determinism(pendigits):
    X, y, Xt, _ = pendigits
    names = np.array(list("abcdefghij"))[y]
    m1 = PmSVM(C=1.0, random_state=3).fit(X, names)
    m2 = PmSVM(C=1.0, random_state=3).fit(sp.csr_matrix(X), names)
    np.testing.assert_array_equal(m1.classes_, list("abcdefghij"))
    np.testing.assert_array_equal(m1.coef_, m2.coef_)
    np.testing.assert_array_equal(m1.predict(Xt), m2.predict(sp.csr_matrix(Xt)))
    # dense input reaches the dense rows entry by entry: column order, an all-zero feature and an all-zero row
    # give the model of the same data in CSR
    X2 = X[:1500].copy()
    X2[:, 3] = 0.0
    X2[5] = 0.0
    dense = PmSVM(C=1.0, random_state=3).fit(np.asfortranarray(X2), names[:1500])
    np.testing.assert_array_equal(dense.coef_, PmSVM(C=1.0, random_state=3).fit(sp.csr_matrix(X2), names[:1500]).coef_)
    assert dense.x_max_[3] == 1.0 and not dense.coef_[:, 3].any()
    assert set(m1.predict(Xt)) <= set(m1.classes_)
    for p in (0.0, -8.0, -np.inf):  # the other kernels of the family train too
        assert np.mean(PmSVM(C=1.0, p=p, random_state=0).fit(X, y).predict(Xt) == pendigits[3]) > 0.8


def test_dense_and_sparse_row_layouts_train_the_same_model(pendigits, monkeypatch):
    # pendigits is 87% nonzero: fit takes the dense rows; forced to the CSR layout, the iterates differ only by
    # the rows' float32 rounding of e and beta (relative 6e-8): the same epochs, coef_ to 1e-5, the same labels
    X, y = pendigits[0][:1500], pendigits[1][:1500]
    Xt = pendigits[2][:1000]
    assert np.mean(X > 0) > svmcore.pmsvm.solver.DENSE_FROM
    for kw in (
        dict(),
        dict(lut_bins=None),
        dict(n_anchors=5, multi_class="ovo"),
        dict(solver="sgd", max_iter=5),
        dict(loss="squared_hinge", lut_bins=None, n_anchors=4),
    ):
        dense = PmSVM(C=1.0, random_state=0, **kw).fit(X, y)
        monkeypatch.setattr(svmcore.pmsvm.solver, "DENSE_FROM", 1.01)
        csr = PmSVM(C=1.0, random_state=0, **kw).fit(X, y)
        monkeypatch.undo()
        scale = np.abs(csr.coef_).max()
        np.testing.assert_allclose(dense.coef_, csr.coef_, rtol=0, atol=1e-5 * scale)
        np.testing.assert_allclose(dense.intercept_, csr.intercept_, rtol=0, atol=1e-5 * scale)
        np.testing.assert_array_equal(dense.n_iter_, csr.n_iter_)
        np.testing.assert_array_equal(dense.predict(Xt), csr.predict(Xt))
        assert np.abs(dense.coef_).sum() > 0
    # values that round to the table's node 0 add nothing: dense rows hold zeros there, CSR drops the positions
    Xtiny = X.copy()
    Xtiny[X == 0] = 1e-6  # below half a table step of every feature's range
    assert np.count_nonzero(X == 0) > 1000 and X.max(axis=0).min() > 2e-3
    dense = PmSVM(C=1.0, random_state=0).fit(Xtiny, y)
    monkeypatch.setattr(svmcore.pmsvm.solver, "DENSE_FROM", 1.01)
    csr = PmSVM(C=1.0, random_state=0).fit(Xtiny, y)
    monkeypatch.undo()
    np.testing.assert_allclose(dense.coef_, csr.coef_, rtol=0, atol=1e-5 * np.abs(csr.coef_).max())
    np.testing.assert_array_equal(dense.n_iter_, csr.n_iter_)
    # rows beyond ROWS_MAX_BYTES stay CSR: the CSR model to the bit
    monkeypatch.setattr(svmcore.pmsvm.solver, "ROWS_MAX_BYTES", X.size * 3 * 8 - 1)
    big = PmSVM(C=1.0, random_state=0).fit(X, y)
    monkeypatch.setattr(svmcore.pmsvm.solver, "DENSE_FROM", 1.01)
    np.testing.assert_array_equal(big.coef_, PmSVM(C=1.0, random_state=0).fit(X, y).coef_)
    monkeypatch.undo()
    # CSR with duplicate entries and unsorted indices trains the model of its canonical form, in either layout:
    # each row's first entry is split in two halves, one of them moved to the end of the row
    Xs = sp.csr_matrix(X)
    data, indices, indptr = [], [], [0]
    for i in range(Xs.shape[0]):
        d_i, j_i = Xs.data[Xs.indptr[i] : Xs.indptr[i + 1]].copy(), Xs.indices[Xs.indptr[i] : Xs.indptr[i + 1]]
        d_i[0] /= 2
        data += [*d_i, d_i[0]]
        indices += [*j_i, j_i[0]]
        indptr.append(len(data))
    dup = sp.csr_matrix((np.array(data), np.array(indices), np.array(indptr)), shape=Xs.shape)
    assert not dup.has_canonical_format
    np.testing.assert_allclose(dup.toarray(), X)
    for layout in (None, 1.01):
        if layout:
            monkeypatch.setattr(svmcore.pmsvm.solver, "DENSE_FROM", layout)
        a = PmSVM(C=1.0, random_state=0).fit(dup, y)
        b = PmSVM(C=1.0, random_state=0).fit(X, y)
        monkeypatch.undo()
        np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12, atol=1e-12)


def test_models_too_large_for_a_table_score_through_coef(pendigits, monkeypatch, tmp_path):
    # the same interpolation from coef_ as from the table, for values inside and above the training range
    X, y, Xt, _ = pendigits
    Xq = np.vstack([Xt[:300], 1.5 * Xt[300:400]])
    for kw in (dict(), dict(multi_class="ovo", lut_bins=40), dict(n_anchors=5)):
        m = PmSVM(C=1.0, random_state=0, **kw).fit(X, y)
        with_table = m.decision_function(Xq)
        monkeypatch.setattr(svmcore.pmsvm.estimator, "TABLE_MAX_BYTES", m.table_.nbytes - 1)
        big = PmSVM(C=1.0, random_state=0, **kw).fit(X, y)
        assert not hasattr(big, "table_")
        np.testing.assert_allclose(big.decision_function(Xq), with_table, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(big.decision_function(sp.csr_matrix(Xq)), with_table, rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(svmcore.load(big.save(tmp_path / "big.npz")).predict(Xq), big.predict(Xq))
        monkeypatch.undo()


def test_high_dimensional_multiclass_text(data_dir):
    # sector (tf-idf, 55,197 features, 105 classes): its one-vs-rest table would take 43 GiB
    from sklearn.datasets import load_svmlight_file
    from sklearn.kernel_approximation import AdditiveChi2Sampler
    from sklearn.pipeline import make_pipeline

    X, y = load_svmlight_file(str(data_dir / "bench" / "sector" / "sector.t.scale.bz2"), n_features=55197)
    X = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)
    idx = np.random.default_rng(0).permutation(X.shape[0])
    tr, te = idx[:2200], idx[2200:]
    m = PmSVM(C=1.0, random_state=0).fit(X[tr], y[tr])
    assert m.coef_.shape == (105, 55197, 3) and not hasattr(m, "table_")
    acc = np.mean(m.predict(X[te]) == y[te])
    fm = make_pipeline(AdditiveChi2Sampler(sample_steps=2), LinearSVC(C=1.0, random_state=0)).fit(X[tr], y[tr])
    assert acc > 0.8 and acc > np.mean(fm.predict(X[te]) == y[te]) - 0.02


# --- persistence -----------------------------------------------------------------------------------
def test_table_is_built_at_first_use_and_never_outlives_its_fit(pendigits):
    X, y, Xt, _ = pendigits
    m = PmSVM(C=1.0, random_state=0).fit(X, y)
    assert m._cache == {}  # fit leaves the table to the first scoring
    f = m.decision_function(Xt)
    T = m.table_
    assert T is m.table_ and T.shape == (10, 16, 1000)  # built once, then cached
    # a refit of the same shape must not score through the previous fit's table
    m.fit(X[::-1], (y[::-1] + 1) % 10)
    fresh = PmSVM(C=1.0, random_state=0).fit(X[::-1], (y[::-1] + 1) % 10)
    np.testing.assert_array_equal(m.decision_function(Xt), fresh.decision_function(Xt))
    assert np.abs(m.decision_function(Xt) - f).max() > 0.1


def test_files_of_settings_earlier_versions_ignored_load_as_what_they_are(tmp_path, pendigits, rewrite_model):
    X, y, Xt, _ = pendigits  # SGD ignored loss, and p within 1e-9 of 0 computed M_p as the minimum (p = -inf)
    m = PmSVM(solver="sgd", max_iter=5, random_state=0).fit(X, y)
    edits = (
        (lambda h, a: h["params"].update(loss="squared_hinge"), "loss", "hinge"),
        (lambda h, a: h["params"].update(p=-1e-10), "p", -np.inf),
    )
    for edit, name, value in edits:
        back = svmcore.load(rewrite_model(m.save(tmp_path / "m.npz"), tmp_path / "old.npz", edit))
        assert getattr(back, name) == value
        np.testing.assert_array_equal(back.decision_function(Xt), m.decision_function(Xt))


def test_files_with_one_unit_for_all_features_load_and_score_as_before(tmp_path, usps, rewrite_model):
    # files saved before per-feature units hold x_max_ as one number in the header; the model they describe
    # measures every feature in that unit: the table (or E(X)) is read at x_j / x_max_ for every j
    from svmcore.pmsvm import explanatory_variables

    X, y, Xt, _ = usps
    for lut_bins in (1000, None):
        m = PmSVM(C=1.0, lut_bins=lut_bins, random_state=0).fit(X[:500], y[:500] == 3)
        s = float(m.x_max_.max())

        def old_file(h, a, value=s):
            del a["x_max_"]
            h["meta"]["x_max_"] = value

        back = svmcore.load(rewrite_model(m.save(tmp_path / "m.npz"), tmp_path / "old.npz", old_file))
        np.testing.assert_array_equal(back.x_max_, np.full(256, s))
        Q = np.vstack([Xt[:100], 1.5 * Xt[100:120]])  # some values above the unit
        if lut_bins:
            old = lut_decision(Q, m.table_, s, m.intercept_)[:, 0]
            np.testing.assert_array_equal(back.decision_function(Q), old)
            np.testing.assert_array_equal(back.table_, m.table_)
        else:  # the regression at x / s, as the earlier version scored
            old = (explanatory_variables(Q / s, 3) * m.coef_[0]).sum(axis=(1, 2)) + m.intercept_[0]
            np.testing.assert_allclose(back.decision_function(Q), old, rtol=1e-12, atol=1e-12)
        # written back, it is a file of this version (one unit per feature) with the same scores
        again = svmcore.load(back.save(tmp_path / "again.npz"))
        np.testing.assert_array_equal(again.decision_function(Q), back.decision_function(Q))
        # refused: a unit of the wrong shape, NaN, infinity, <= 0, or not a number, in either form
        bad_edits = [
            lambda h, a: a.update(x_max_=a["x_max_"][:5]),
            lambda h, a: a.update(x_max_=a["x_max_"][None]),
            lambda h, a: a.update(x_max_=np.float64(1.0)),
            lambda h, a: a["x_max_"].__setitem__(3, np.nan),
            lambda h, a: a["x_max_"].__setitem__(3, np.inf),
            lambda h, a: a["x_max_"].__setitem__(3, 0.0),
            lambda h, a: a["x_max_"].__setitem__(3, -1.0),
            lambda h, a: a.update(x_max_=a["x_max_"] > 0),
        ]
        bad_edits += [lambda h, a, v=v: old_file(h, a, v) for v in (0.0, -1.0, float("nan"), "1.0", True, None)]
        for edit in bad_edits:
            with pytest.raises(ValueError, match="x_max_"):
                svmcore.load(rewrite_model(m.save(tmp_path / "m.npz"), tmp_path / "bad.npz", edit))


def test_scoring_reads_lut_bins_once(pendigits):
    import threading

    X, y, Xt, _ = pendigits  # another thread's set_params(lut_bins=...) must not mix two resolutions
    m = PmSVM(C=1.0, random_state=0).fit(X, y)
    errors, stop = [], threading.Event()

    def toggle():
        while not stop.is_set():
            m.set_params(lut_bins=7)
            m.set_params(lut_bins=1000)

    t = threading.Thread(target=toggle)
    t.start()
    try:
        for _ in range(300):
            try:
                m.decision_function(Xt[:50])
            except ValueError as exc:
                errors.append(exc)
    finally:
        stop.set()
        t.join()
    assert not errors, errors[:1]


def test_save_load_roundtrip(tmp_path, pendigits, rewrite_model):
    X, y, Xt, _ = pendigits
    for kw in (dict(), dict(lut_bins=None, multi_class="ovo", class_weight={3: 2.0, np.int64(5): 0.5})):
        m = PmSVM(C=1.0, random_state=0, **kw).fit(X, y)
        path = m.save(tmp_path / "pm.npz")
        m2 = svmcore.load(path)
        assert isinstance(m2, PmSVM) and m2.get_params() == m.get_params()
        np.testing.assert_array_equal(m2.decision_function(Xt), m.decision_function(Xt))
        if m.lut_bins:
            np.testing.assert_array_equal(m2.table_, m.table_)
    # a state that does not match n_anchors is refused on either side: save writes no file, load refuses one
    m.coef_ = m.coef_[:, :, :2]
    with pytest.raises(ValueError, match="coef_ has shape"):
        m.save(tmp_path / "bad.npz")
    assert not (tmp_path / "bad.npz").exists()
    with pytest.raises(ValueError, match="coef_ has shape"):
        svmcore.load(rewrite_model(path, tmp_path / "bad.npz", lambda h, a: a.update(coef_=a["coef_"][:, :, :2])))


# --- bad input -------------------------------------------------------------------------------------
def test_bad_input(pendigits):
    X, y = pendigits[0][:200], pendigits[1][:200]
    neg = X.copy()
    neg[3, 4] = -0.1
    nan = X.copy()
    nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="must be >= 0"):
        PmSVM().fit(neg, y)
    with pytest.raises(ValueError, match="must be >= 0"):
        PmSVM().fit(sp.csr_matrix(neg), y)
    with pytest.raises(ValueError, match="NaN"):
        PmSVM().fit(nan, y)
    with pytest.raises(ValueError, match="p > 0|not positive definite"):
        PmSVM(p=1.0).fit(X, y)
    with pytest.raises(ValueError, match="p"):
        power_mean_kernel(X, p=0.5)
    with pytest.raises(ValueError, match="NaN"):
        PmSVM(p=float("nan")).fit(X, y)
    with pytest.raises(TypeError, match="p"):
        PmSVM(p="chi2").fit(X, y)
    with pytest.raises(ValueError, match="must be >= 0"):
        power_mean_kernel(neg)
    with pytest.raises(ValueError, match="Y has 5 features, but X has 16; they need the same"):  # no model
        power_mean_kernel(X, X[:, :5])
    with pytest.raises(ValueError, match="X has 5 features, but Q has 16; they need the same"):
        approx_kernel(X, X[:, :5])
    for bad in (
        dict(n_anchors=1),
        dict(n_anchors=11),
        dict(lut_bins=1),
        dict(C=0),
        dict(tol=-1),
        dict(solver="newton"),
        dict(multi_class="crammer"),
        dict(loss="log"),
        dict(max_iter=0),
    ):
        with pytest.raises(ValueError):
            PmSVM(**bad).fit(X, y)
    with pytest.raises(ValueError, match="classes"):
        PmSVM().fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="no row of positive weight"):
        PmSVM().fit(X, y, sample_weight=(y != 3).astype(float))
    with pytest.raises(ValueError, match="no row of positive weight"):
        PmSVM(class_weight={3: 0.0}).fit(X, y)
    with pytest.raises(ValueError, match="12"):
        PmSVM(class_weight={12: 1.0}).fit(X, y)
    with pytest.raises(ValueError, match="sample_weight"):
        PmSVM().fit(X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError, match="all features are zero"):
        PmSVM().fit(np.zeros((4, 3)), [0, 1, 0, 1])
    with pytest.raises(ValueError, match="not fitted"):
        PmSVM().predict(X)
    m = PmSVM().fit(X, y)
    huge = X.copy()
    huge[0, 0] = 1e200  # k(x, x) overflows: the solution would be NaN
    for solver in ("dcd", "sgd"):
        before = m.coef_.copy()
        with pytest.raises(ValueError, match="overflow"):
            m.set_params(solver=solver).fit(huge, y)
        np.testing.assert_array_equal(m.coef_, before)  # the earlier model is kept
    m.set_params(solver="dcd")
    with pytest.raises(ValueError, match="must be >= 0"):
        m.predict(neg)
    with pytest.raises(ValueError, match="features"):
        m.predict(X[:, :5])
    with pytest.raises(ValueError, match="table"):
        lut_decision(X, m.table_[0], m.x_max_, m.intercept_)
    with pytest.raises(ValueError, match="features"):
        lut_decision(X[:, :3], m.table_, m.x_max_, m.intercept_)
    for x_max in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError, match="x_max"):
            lut_decision(X, m.table_, x_max, m.intercept_)
    np.testing.assert_array_equal(
        lut_decision(X[:5].tolist(), m.table_, m.x_max_, m.intercept_),
        lut_decision(X[:5], m.table_, m.x_max_, m.intercept_),
    )  # a list is an array
    with pytest.raises(ValueError, match="solver='dcd'"):  # Algorithm 4 has no squared hinge: never ignore it
        PmSVM(solver="sgd", loss="squared_hinge").fit(X, y)
    with pytest.raises(svmcore.NotFittedError):
        _ = PmSVM().table_
    with pytest.raises(ValueError, match="too close to 0"):  # x^p rounds to 1: M_p would be the minimum
        power_mean_kernel(X[:5], p=-1e-300)
    with pytest.raises(ValueError, match="step"):  # a step^-2 grid: 1e-5 asked for 75 GB
        approximation_error(step=1e-5)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the resident sizes from /proc (Linux)")
@pytest.mark.parametrize("layout", ["dense rows", "csr"])
def test_fit_memory_is_bounded_by_a_multiple_of_the_input(layout):
    # PmSVM's docstring bound: for a dense float64 X, fit's peak resident memory exceeds that before fit by at most
    # 3 X.nbytes (the solver's rows, built in place) plus an allowance for the per-sample arrays and the allocator.
    # X of 153 MiB is mostly nonzero: fit takes the dense rows; ROWS_MAX_BYTES = 0 forces the CSR positions, the layout
    # of 5 x 10^7 features (issue 39). Building them through a CSR copy of X, codes and indices per entry took 4 and
    # 5.1 X.nbytes. Measured in a fresh interpreter whose kernels were loaded by small fits first.
    setup = f"""
        import warnings
        import numpy as np
        import svmcore.pmsvm as pmsvm

        warnings.simplefilter("ignore")  # max_iter=2: the memory does not depend on the epochs
        rng = np.random.default_rng(0)
        for zeros in (0.0, 0.8):
            Xs = rng.random((300, 40))
            Xs[Xs < zeros] = 0.0
            pmsvm.PmSVM(max_iter=2).fit(Xs, Xs[:, 0] > 0.5)
        if {layout == "csr"}:
            pmsvm.solver.ROWS_MAX_BYTES = 0
        X = rng.random((20000, 1000))
        y = X[:, 0] > 0.5
    """
    growth, out = peak_growth(setup, "pmsvm.PmSVM(max_iter=2, random_state=0).fit(X, y)\nprint(X.nbytes)")
    nbytes = int(out)
    assert growth <= 3 * nbytes + 48 * 2**20, f"fit's peak grew by {growth / nbytes:.2f} X.nbytes"
