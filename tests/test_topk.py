"""TopKSVM (Prox-SDCA) on real data: letter, USPS, sector subsets, against cvxopt and LIBLINEAR."""

import warnings

import cvxopt
import h5py
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
from sklearn.metrics import top_k_accuracy_score
from sklearn.svm import LinearSVC

import svmcore
from svmcore.kernels import pairwise_kernel
from svmcore.metrics import top_k_accuracies, top_k_accuracy
from svmcore.topk import TopKSVM


@pytest.fixture(scope="module")
def letter(data_dir):
    X, y = load_svmlight_file(str(data_dir / "bench" / "letter" / "letter.scale.bz2"), n_features=16)
    return X.toarray(), y.astype(int)


@pytest.fixture(scope="module")
def usps(data_dir):
    with h5py.File(data_dir / "bench" / "usps" / "usps.h5", "r") as f:
        return f["train/data"][:1500].astype(np.float64), f["train/target"][:1500].astype(int)


@pytest.fixture(scope="module")
def sector(data_dir):
    """The official sector test file (3207 x 55197 CSR, 105 classes), used here as a small real sparse set."""
    X, y = load_svmlight_file(str(data_dir / "bench" / "sector" / "sector.t.scale.bz2"), n_features=55197)
    return X.tocsr(), y.astype(int)


def primal(model, X, y, C, k, beta):
    """P(W) = 1/2 ||W||^2 + C sum loss from coef_, the loss written out in numpy (not the solver's code):
    alpha: max(0, mean of the k largest z_j); beta: mean of the k largest max(0, z_j); z_j = 1 + s_j - s_y, j != y."""
    yi = np.searchsorted(model.classes_, y)
    S = np.asarray(X @ model.coef_.T)
    rows = np.arange(len(yi))
    Z = 1.0 + S - S[rows, yi][:, None]
    if beta:
        Z = np.maximum(Z, 0.0)
    Z[rows, yi] = -np.inf
    losses = np.maximum(-np.sort(-Z, axis=1)[:, :k].mean(axis=1), 0.0)
    return 0.5 * np.sum(model.coef_**2) + C * losses.sum()


def cvxopt_primal(X, y, C, k, loss):
    """Optimal primal value by cvxopt: top-k sums written as min_tau k tau + sum_j (z_j - tau)_+ (an LP epigraph).

    Variables [W (d*m), xi (n), tau (n), u (n*(m-1))]; z_ij = 1 + <w_j - w_y, x_i>, j != y_i.
    alpha: xi_i >= 0, xi_i >= tau_i + sum_j u_ij / k, u_ij >= z_ij - tau_i, u_ij >= 0.
    beta:  the same plus u_ij >= -tau_i (so u_ij >= (max(0, z_ij) - tau_i)_+).
    """
    classes, yi = np.unique(y, return_inverse=True)
    n, d = X.shape
    m = classes.size
    nw, nv = d * m, d * m + 2 * n + n * (m - 1)
    iw = lambda j: slice(j * d, (j + 1) * d)  # noqa: E731
    ixi = lambda i: nw + i  # noqa: E731
    itau = lambda i: nw + n + i  # noqa: E731
    rows, h = [], []
    others = [[j for j in range(m) if j != yi[i]] for i in range(n)]
    iu = lambda i, p: nw + 2 * n + i * (m - 1) + p  # noqa: E731
    for i in range(n):
        g = np.zeros(nv)
        g[ixi(i)] = -1.0
        rows.append(g), h.append(0.0)  # xi >= 0
        g = np.zeros(nv)
        g[ixi(i)] = -1.0
        g[itau(i)] = 1.0
        for p in range(m - 1):
            g[iu(i, p)] = 1.0 / k
        rows.append(g), h.append(0.0)  # tau + sum u / k - xi <= 0
        for p, j in enumerate(others[i]):
            g = np.zeros(nv)  # 1 + <w_j - w_y, x> - tau - u <= 0
            g[iw(j)] = X[i]
            g[iw(yi[i])] = -X[i]
            g[itau(i)] = -1.0
            g[iu(i, p)] = -1.0
            rows.append(g), h.append(-1.0)
            g = np.zeros(nv)
            g[iu(i, p)] = -1.0
            rows.append(g), h.append(0.0)  # u >= 0
            if loss == "beta":
                g = np.zeros(nv)
                g[iu(i, p)] = -1.0
                g[itau(i)] = -1.0
                rows.append(g), h.append(0.0)  # u >= -tau
    P = np.zeros((nv, nv))
    P[:nw, :nw] = np.eye(nw)
    q = np.zeros(nv)
    q[nw : nw + n] = C
    sol = cvxopt.solvers.qp(
        cvxopt.matrix(P),
        cvxopt.matrix(q),
        cvxopt.sparse(cvxopt.matrix(np.array(rows))),
        cvxopt.matrix(np.array(h)),
        options=dict(show_progress=False, abstol=1e-9, reltol=1e-9, feastol=1e-9),
    )
    assert sol["status"] == "optimal" or sol["relative gap"] < 1e-6, (sol["status"], sol["relative gap"])
    return sol["primal objective"]


@pytest.mark.parametrize("k, loss", [(1, "alpha"), (2, "alpha"), (3, "beta")])
def test_primal_objective_matches_cvxopt(letter, k, loss):
    X, y = letter
    keep = np.flatnonzero(np.isin(y, [1, 5, 9, 15, 21]))[:90]  # 5 letters, 90 samples
    X, y = X[keep], y[keep]
    C = 0.5
    model = TopKSVM(k=k, C=C, loss=loss, tol=1e-7, random_state=0).fit(X, y)
    p_star = cvxopt_primal(X, y, C, k, loss)
    p_ours = primal(model, X, y, C, k, loss == "beta")
    assert p_ours == pytest.approx(model.primal_objective_, rel=1e-10)
    assert abs(p_ours - p_star) <= 1e-5 * p_star
    assert model.dual_objective_ <= p_star * (1 + 1e-8)  # weak duality: D is a certified lower bound


def test_top1_reaches_liblinear_crammer_singer_objective(letter):
    X, y = letter
    X, y = X[:3000], y[:3000]
    C = 1.0
    ref = LinearSVC(multi_class="crammer_singer", fit_intercept=False, C=C, tol=1e-5, max_iter=100000).fit(X, y)
    p_lib = primal(ref, X, y, C, 1, False)
    models = [TopKSVM(k=1, C=C, loss=loss, tol=1e-4, random_state=0).fit(X, y) for loss in ("alpha", "beta")]
    for model in models:
        assert model.duality_gap_ <= 1e-4 * model.primal_objective_
        assert model.primal_objective_ <= p_lib * (1 + 1e-4)
        assert model.dual_objective_ <= p_lib  # LIBLINEAR's solution lies within our certified gap
    # k = 1: alpha and beta are the same loss (Crammer-Singer)
    assert models[0].primal_objective_ == pytest.approx(models[1].primal_objective_, rel=2e-4)
    assert np.mean(models[0].predict(X) == ref.predict(X)) > 0.97


def test_crammer_singer_solver_matches_prox_sdca(usps):
    """k = 1, linear runs LIBLINEAR's shrinking method (sdca.cs_fit); the precomputed linear Gram matrix runs the
    general Prox-SDCA loop: both must reach the same optimum, also with x_i = 0 rows and sparse input."""
    X, y = usps
    X, y = X[:400].copy(), y[:400]
    X[[3, 77]] = 0.0  # x_i = 0: the block is set in closed form, its loss is 1 at any W
    cs = TopKSVM(k=1, C=1.0, tol=1e-8, random_state=0).fit(X, y)
    gram = TopKSVM(k=1, C=1.0, kernel="precomputed", tol=1e-8, random_state=0).fit(X @ X.T, y)
    csr = TopKSVM(k=1, C=1.0, tol=1e-8, random_state=1).fit(sp.csr_matrix(X), y)
    for model in (cs, gram, csr):
        assert 0.0 <= model.duality_gap_ <= 1e-8 * model.primal_objective_
    assert cs.primal_objective_ == pytest.approx(primal(cs, X, y, 1.0, 1, False), rel=1e-10)
    assert cs.primal_objective_ == pytest.approx(gram.primal_objective_, rel=1e-7)
    assert csr.primal_objective_ == pytest.approx(cs.primal_objective_, rel=1e-7)
    np.testing.assert_allclose(gram.decision_function(X @ X.T), cs.decision_function(X), atol=1e-3)
    # the stopping rule is the exact gap at every tol, not LIBLINEAR's violation estimate
    for tol in (1e-1, 1e-3):
        model = TopKSVM(k=1, C=1.0, tol=tol, random_state=0).fit(X, y)
        assert model.duality_gap_ <= tol * model.primal_objective_
        assert model.primal_objective_ == pytest.approx(primal(model, X, y, 1.0, 1, False), rel=1e-10)


def test_crammer_singer_learns_from_rows_of_large_norm():
    """Rows of norm ~1e6 move each dual variable by ~1/||x||^2 < 1e-12 per step; LIBLINEAR drops such steps from W
    (and so did cs_fit, while keeping them in A: W stayed zero and every row got one class)."""
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    X = X * 1e6  # as C = 1e12 on the original rows: far from converged in 20 epochs, but learning
    with pytest.warns(RuntimeWarning, match="duality gap"):
        model = TopKSVM(k=1, C=1.0, max_epochs=20, random_state=0).fit(X, y)
    assert model.score(X, y) > 0.9
    assert model.primal_objective_ == pytest.approx(primal(model, X, y, 1.0, 1, False), rel=1e-8)


@pytest.mark.parametrize("k, loss", [(2, "alpha"), (5, "alpha"), (2, "beta"), (5, "beta")])
def test_duality_gap_reaches_tol(usps, k, loss):
    X, y = usps
    model = TopKSVM(k=k, C=1.0, loss=loss, tol=1e-3, random_state=0).fit(X, y)
    assert 0.0 <= model.duality_gap_ <= 1e-3 * model.primal_objective_
    assert model.primal_objective_ == pytest.approx(primal(model, X, y, 1.0, k, loss == "beta"), rel=1e-10)
    scores = model.decision_function(X)
    yi = np.searchsorted(model.classes_, y)
    assert top_k_accuracy(scores, yi, k) > 0.95


def test_beta_loss_bounds_alpha(usps):
    X, y = usps
    a = TopKSVM(k=3, C=1.0, loss="alpha", tol=1e-4, random_state=0).fit(X, y)
    b = TopKSVM(k=3, C=1.0, loss="beta", tol=1e-4, random_state=0).fit(X, y)
    # beta >= alpha pointwise, hence min P_beta >= min P_alpha >= D_alpha
    assert b.primal_objective_ >= a.dual_objective_
    assert primal(a, X, y, 1.0, 3, True) >= a.primal_objective_
    # those two follow from the definitions for any W; the solver: each fit reaches tol on its own primal
    for m, beta in ((a, False), (b, True)):
        assert 0.0 <= m.duality_gap_ <= 1e-4 * m.primal_objective_
        assert m.primal_objective_ == pytest.approx(primal(m, X, y, 1.0, 3, beta), rel=1e-10)


def test_sparse_input_equals_dense(usps):
    X, y = usps
    X, y = X[:600], y[:600]
    dense = TopKSVM(k=2, C=0.5, tol=1e-8, random_state=3).fit(X, y)
    csr = TopKSVM(k=2, C=0.5, tol=1e-8, random_state=3).fit(sp.csr_matrix(X), y)
    # rounding differs (BLAS vs sparse products), so the paths differ slightly; both reach the unique optimum
    assert csr.primal_objective_ == pytest.approx(dense.primal_objective_, rel=1e-7)
    np.testing.assert_allclose(csr.decision_function(sp.csr_matrix(X)), dense.decision_function(X), atol=1e-3)


def test_sparse_many_classes_sector(sector):
    X, y = sector
    Xtr, ytr, Xte, yte = X[:2400], y[:2400], X[2400:], y[2400:]
    model = TopKSVM(k=5, C=1.0, loss="alpha", tol=1e-3, random_state=0).fit(Xtr, ytr)
    assert model.duality_gap_ <= 1e-3 * model.primal_objective_
    seen = np.isin(yte, model.classes_)
    scores = model.decision_function(Xte[seen])
    acc = top_k_accuracies(scores, np.searchsorted(model.classes_, yte[seen]), (1, 5))
    assert model.classes_.size > 90 and acc[1] > 0.6 and acc[5] > acc[1]


def test_kernel_models(usps):
    X, y = usps
    X, y = X[:400], y[:400]
    lin = TopKSVM(k=2, C=1.0, tol=1e-8, random_state=0).fit(X, y)
    pre = TopKSVM(k=2, C=1.0, kernel="precomputed", tol=1e-8, random_state=0).fit(X @ X.T, y)
    # the optimum W is unique: 1/2 ||W - W*||^2 <= P(W) - P* <= gap
    assert pre.primal_objective_ == pytest.approx(lin.primal_objective_, rel=1e-7)
    np.testing.assert_allclose(pre.decision_function(X @ X.T), lin.decision_function(X), atol=1e-3)
    rbf = TopKSVM(k=2, C=1.0, kernel="rbf", gamma=0.02, tol=1e-4, random_state=0).fit(X, y)
    K = pairwise_kernel(X, kernel="rbf", gamma=0.02)
    rbf_pre = TopKSVM(k=2, C=1.0, kernel="precomputed", tol=1e-4, random_state=0).fit(K, y)
    assert rbf.duality_gap_ <= 1e-4 * rbf.primal_objective_
    np.testing.assert_allclose(rbf.decision_function(X[:50]), rbf_pre.decision_function(K[:50]), atol=1e-9)
    assert rbf.support_vectors_.shape == (rbf.support_.size, X.shape[1])
    assert np.mean(rbf.predict(X) == y) > np.mean(lin.predict(X) == y) - 0.01


def test_fit_intercept_is_a_regularised_constant_feature(letter):
    """fit_intercept=True solves the problem of X with the constant intercept_scaling appended (LIBLINEAR's -B),
    for every loss, the kernel models through K + B^2; k = 1 reaches LIBLINEAR's Crammer-Singer with a bias."""
    X, y = letter
    X, Xt, y = X[:1500], X[1500:2000], y[:1500]
    B = 2.0
    for k, loss in ((1, "alpha"), (2, "beta")):
        ours = TopKSVM(k=k, loss=loss, C=1.0, fit_intercept=True, intercept_scaling=B, tol=1e-6, random_state=0)
        ours.fit(X, y)
        ref = TopKSVM(k=k, loss=loss, C=1.0, tol=1e-6, random_state=0).fit(np.hstack([X, np.full((1500, 1), B)]), y)
        np.testing.assert_array_equal(ours.coef_, ref.coef_[:, :-1])
        np.testing.assert_array_equal(ours.intercept_, B * ref.coef_[:, -1])
        assert np.abs(ours.intercept_).max() > 0.1  # letter's classes need a bias: it is not a no-op
        np.testing.assert_allclose(ours.class_scores(Xt), Xt @ ours.coef_.T + ours.intercept_, atol=1e-12)
        # the kernel path on 300 rows, all 26 classes (the kernel fits' time grows fast with the rows; measured
        # here: objectives within 3e-7 relative, decision values within 2e-4)
        lin = TopKSVM(k=k, loss=loss, C=1.0, fit_intercept=True, intercept_scaling=B, tol=1e-6, random_state=0)
        lin.fit(X[:300], y[:300])
        pre = TopKSVM(
            k=k,
            loss=loss,
            C=1.0,
            kernel="precomputed",
            fit_intercept=True,
            intercept_scaling=B,
            tol=1e-6,
            random_state=0,
        ).fit(X[:300] @ X[:300].T, y[:300])
        assert pre.primal_objective_ == pytest.approx(lin.primal_objective_, rel=1e-5)
        np.testing.assert_allclose(pre.decision_function(Xt @ X[:300].T), lin.decision_function(Xt), atol=5e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LIBLINEAR's convergence warning at this tight tol
        lib = LinearSVC(
            multi_class="crammer_singer",
            C=1.0,
            fit_intercept=True,
            intercept_scaling=B,
            tol=1e-6,
            max_iter=100000,
            random_state=0,
        ).fit(X, y)
    cs = TopKSVM(k=1, C=1.0, fit_intercept=True, intercept_scaling=B, tol=1e-6, random_state=0).fit(X, y)
    np.testing.assert_allclose(cs.coef_, lib.coef_, atol=2e-3 * np.abs(lib.coef_).max())
    np.testing.assert_allclose(cs.intercept_, lib.intercept_, atol=2e-3 * np.abs(lib.intercept_).max())
    no_bias = TopKSVM(k=1, C=1.0, tol=1e-6, random_state=0).fit(X, y)
    assert np.all(no_bias.intercept_ == 0)
    assert cs.primal_objective_ < no_bias.primal_objective_  # a bias can only lower the optimum here


def test_topk_files_from_before_the_intercept_still_load(usps, tmp_path, rewrite_model):
    X, y = usps
    X, y = X[:300], y[:300]
    m = TopKSVM(k=2, C=1.0, random_state=0).fit(X, y)

    def drop(h, a):
        [h["params"].pop(k) for k in ("fit_intercept", "intercept_scaling")]
        a.pop("intercept_")

    back = svmcore.load(rewrite_model(m.save(tmp_path / "m.npz"), tmp_path / "old.npz", drop))
    assert back.fit_intercept is False and np.all(back.intercept_ == 0)
    np.testing.assert_array_equal(back.decision_function(X), m.decision_function(X))
    biased = TopKSVM(k=2, C=1.0, fit_intercept=True, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="missing array 'intercept_'"):  # a bias is never silently dropped
        svmcore.load(
            rewrite_model(biased.save(tmp_path / "b.npz"), tmp_path / "b2.npz", lambda h, a: a.pop("intercept_"))
        )
    with pytest.raises(ValueError, match="fit_intercept=False"):  # a bias a model without one cannot have
        svmcore.load(
            rewrite_model(
                biased.save(tmp_path / "b.npz"),
                tmp_path / "b3.npz",
                lambda h, a: h["params"].update(fit_intercept=False),
            )
        )


def test_predict_top_k_and_persistence(usps, tmp_path):
    X, y = usps
    X, y = X[:500], y[:500]
    for model in (
        TopKSVM(k=3, C=1.0, loss="beta", random_state=0).fit(X, y),
        TopKSVM(k=2, kernel="rbf", gamma=0.02, random_state=0).fit(X, y),
    ):
        scores = model.decision_function(X[:20])
        top = model.predict_top_k(X[:20], 4)
        assert top.shape == (20, 4)
        np.testing.assert_array_equal(top[:, 0], model.predict(X[:20]))
        s_top = np.take_along_axis(scores, np.searchsorted(model.classes_, top), axis=1)
        assert np.all(np.diff(s_top, axis=1) <= 0)
        path = tmp_path / "topk.npz"
        model.save(path)
        loaded = svmcore.load(path)
        assert isinstance(loaded, TopKSVM) and loaded.get_params() == model.get_params()
        np.testing.assert_array_equal(loaded.decision_function(X[:20]), scores)
        assert loaded.duality_gap_ == model.duality_gap_ and loaded.n_iter_ == model.n_iter_
    model.dual_coef_ = model.dual_coef_[:, :3]
    with pytest.raises(ValueError, match="dual_coef_"):  # save refuses what load would refuse
        model.save(path)
    np.testing.assert_array_equal(svmcore.load(path).decision_function(X[:20]), scores)  # the old file is intact


def test_bad_input(usps):
    X, y = usps
    X, y = X[:200], y[:200]
    with pytest.raises(ValueError, match="no training samples"):
        TopKSVM().fit(X, y, classes=np.arange(11))
    with pytest.raises(ValueError, match="not in classes"):
        TopKSVM().fit(X, y, classes=np.arange(9))
    with pytest.raises(ValueError, match="smaller than the number of classes"):
        TopKSVM(k=10).fit(X, y)
    with pytest.raises(ValueError, match="smaller than the number of classes"):
        TopKSVM(k=2).fit(X[y < 2], y[y < 2])
    Xn = X.copy()
    Xn[3, 7] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        TopKSVM().fit(Xn, y)
    with pytest.raises(ValueError, match="NaN"):
        TopKSVM().fit(X, np.where(y == 1, np.nan, y.astype(float)))
    with pytest.raises(ValueError, match="at least 2 classes"):
        TopKSVM().fit(X, np.zeros(len(y)))
    with pytest.raises(ValueError, match="square"):
        TopKSVM(kernel="precomputed").fit(X, y)
    with pytest.raises(TypeError, match="sparse"):
        TopKSVM(kernel="rbf").fit(sp.csr_matrix(X), y)
    with pytest.raises(ValueError, match="loss"):
        TopKSVM(loss="gamma").fit(X, y)
    with pytest.raises(ValueError, match="gamma: expected 'scale', 'auto' or a number > 0, got 'foo'"):
        TopKSVM(kernel="rbf", gamma="foo").fit(X, y)
    with pytest.raises(ValueError, match="C"):
        TopKSVM(C=0.0).fit(X, y)
    with pytest.raises(TypeError, match="k"):
        TopKSVM(k=1.5).fit(X, y)
    with pytest.raises(TypeError, match="fit_intercept"):
        TopKSVM(fit_intercept="yes").fit(X, y)
    with pytest.raises(ValueError, match="intercept_scaling"):
        TopKSVM(fit_intercept=True, intercept_scaling=0.0).fit(X, y)
    with pytest.raises(ValueError, match="not fitted"):
        TopKSVM().predict(X)
    with pytest.warns(RuntimeWarning, match="duality gap"):
        model = TopKSVM(k=1, max_epochs=1, tol=1e-12).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :10])
    with pytest.raises(ValueError, match="k"):
        model.predict_top_k(X, 11)
    with pytest.raises(ValueError, match="NaN"):
        model.decision_function(Xn)


def test_top_k_accuracy_matches_sklearn():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(300, 7))
    y = rng.integers(0, 7, size=300)
    for k in (1, 2, 5):
        assert top_k_accuracy(scores, y, k) == pytest.approx(top_k_accuracy_score(y, scores, k=k, labels=range(7)))
    assert top_k_accuracies(scores, y, (1, 2, 5)) == {k: top_k_accuracy(scores, y, k) for k in (1, 2, 5)}
    # ties count against the true class: constant scores are never right for k < m
    assert top_k_accuracy(np.zeros((5, 3)), np.arange(5) % 3, 2) == 0.0
    assert top_k_accuracy(np.zeros((5, 3)), np.arange(5) % 3, 3) == 1.0
    with pytest.raises(ValueError, match="k"):
        top_k_accuracy(scores, y, 8)
    with pytest.raises(ValueError, match="indices"):
        top_k_accuracy(scores, y + 7, 1)
    with pytest.raises(TypeError):
        top_k_accuracy(scores, y.astype(float), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        top_k_accuracy(scores, y, 7)


@pytest.mark.parametrize("kw", [dict(k=1), dict(k=2), dict(k=2, loss="beta"), dict(k=1, kernel="precomputed")])
def test_tiny_features_feasible_steps(pendigits_full, kw):
    """Features of 1e-9 / 1e-10 (K_ii ~ 1e-18): the block steps (s - e_y) / K_ii are ~1e18, whose rounding swamped
    C. The knapsack projection then summed to up to 1.34 C (dual above the primal, reported converged) or to 0 (no
    progress: 1000 epochs and a ConvergenceWarning), and the Crammer-Singer sub-problem emptied its set (NaN model,
    a ValueError blaming overflow). W = 0 is then all but optimal: P = C n exactly, D must reach it from below."""
    X, y = pendigits_full[0][:60], pendigits_full[1][:60]
    for scale in (1e-9, 1e-10):
        Xs = X * scale
        if kw.get("kernel") == "precomputed":
            Xs = Xs @ Xs.T
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model = TopKSVM(C=1.0, random_state=0, **kw).fit(Xs, y)
        n = len(y)
        assert model.primal_objective_ == pytest.approx(n, rel=1e-6)
        assert model.dual_objective_ <= model.primal_objective_ + 1e-9 * n  # weak duality: A feasible
        assert model.duality_gap_ <= 1e-3 * model.primal_objective_
        assert np.isfinite(model.decision_function(Xs[:5])).all()


def test_crammer_singer_large_features_converge(pendigits_full):
    """Pen coordinates in the raw units x 100 (values to 1e4, ||x||^2 ~ 3e9, alpha ~ 1e-8 << C): the Crammer-Singer
    sub-problem's threshold carried Aii C ~ 3e9, whose rounding moved each alpha by eps C (1e-8 of alpha); the margins
    then jittered by 1e-16 ||x||^2 and the relative gap stalled near 0.5 for all 1000 epochs (15 s, a
    ConvergenceWarning). Aii C cancels while alpha_y < C and is left out: 36 epochs."""
    X, y = pendigits_full[0][:60] * 1e4, pendigits_full[1][:60]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = TopKSVM(k=1, random_state=0, max_epochs=200).fit(X, y)
    reference = TopKSVM(k=1, kernel="precomputed", random_state=0).fit(X @ X.T, y)  # Prox-SDCA: 923 epochs
    assert 0 <= model.duality_gap_ <= 1e-3 * model.primal_objective_
    assert model.dual_objective_ <= reference.primal_objective_ and reference.dual_objective_ <= model.primal_objective_
