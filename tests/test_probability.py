"""SVC(probability=True): Platt's sigmoid (Lin, Lin, Weng 2007) against independent minimisers, Wu-Lin-Weng
pairwise coupling against its optimality conditions and an exact solve, and the whole method against
LIBSVM (scikit-learn's SVC(probability=True)), on real data (CBCL face patches, pendigits)."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn import svm as sk
from sklearn.model_selection import cross_val_predict

import svmcore
from conftest import cbcl_sample
from svmcore.multiclass import ovo_pairs
from svmcore.probability import MIN_PROB, fit_sigmoid, pairwise_coupling, sigmoid_predict


@pytest.fixture(scope="module")
def faces(cbcl):
    return cbcl_sample(cbcl, 600, 2000)


@pytest.fixture(scope="module")
def digits(pendigits_full):
    """pendigits digits 1, 3, 7, 9 (a 4-class problem): 800 training and 1,500 test rows, features in [0, 1]."""
    X, y, Xt, yt = pendigits_full
    keep, keep_t = np.isin(y, [1, 3, 7, 9]), np.isin(yt, [1, 3, 7, 9])
    return X[keep][:800], y[keep][:800], Xt[keep_t][:1500], yt[keep_t][:1500]


def sk_svc(**params):
    with warnings.catch_warnings():  # scikit-learn 1.9 deprecates probability=True (for CalibratedClassifierCV)
        warnings.simplefilter("ignore", FutureWarning)
        return sk.SVC(**params)


def sk_fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return model.fit(X, y)


def platt_reference(f, pos):
    """Platt's negative log-likelihood with the same targets, minimised by scipy's BFGS to gradient 1e-10."""
    n1 = pos.sum()
    n0 = len(pos) - n1
    t = np.where(pos, (n1 + 1.0) / (n1 + 2.0), 1.0 / (n0 + 2.0))

    def loss_grad(ab):
        z = ab[0] * f + ab[1]
        p = 0.5 * (1.0 - np.tanh(0.5 * z))  # 1 / (1 + exp(z)), another formula than the module's
        loss = np.sum(np.logaddexp(0.0, z) - (1.0 - t) * z)
        return loss, np.array([f @ (t - p), np.sum(t - p)])

    res = minimize(loss_grad, [0.0, 0.0], jac=True, method="BFGS", options={"gtol": 1e-10})
    assert res.success or np.abs(res.jac).max() < 1e-6
    return res.x


def test_sigmoid_fit_matches_independent_minimisers(faces, digits):
    X, y = faces[0], faces[1]
    # out-of-fold decision values (what SVC fits on) and, harder, the steeper training decision values
    cv = cross_val_predict(svmcore.SVC(kernel="rbf", gamma=0.02, C=2.0), X, y, cv=5, method="decision_function")
    train = svmcore.SVC(kernel="rbf", gamma=0.02, C=2.0).fit(X, y).decision_function(X)
    Xd, yd = digits[0], digits[1]
    pair = np.isin(yd, [3, 9])
    digit_cv = cross_val_predict(
        svmcore.SVC(kernel="rbf", gamma=2.0, C=10.0), Xd[pair], yd[pair], cv=5, method="decision_function"
    )
    try:
        from sklearn.calibration import _sigmoid_calibration  # private; same targets, no regularisation, L-BFGS
    except ImportError:
        _sigmoid_calibration = None
    for f, pos in ((cv, y == 1), (train, y == 1), (digit_cv, yd[pair] == 9)):
        A, B = fit_sigmoid(f, pos)
        a, b = platt_reference(f, pos)
        assert A < 0 and abs(A - a) <= 1e-5 * abs(a) and abs(B - b) <= 1e-5 * max(abs(b), 0.1), (A, B, a, b)
        if _sigmoid_calibration is not None:
            sa, sb = _sigmoid_calibration(f, pos.astype(int))
            assert abs(A - sa) <= 1e-5 * abs(sa) and abs(B - sb) <= 1e-5 * max(abs(sb), 0.1), (A, B, sa, sb)
        # LIBSVM's stopping rule holds at the returned point
        n1 = pos.sum()
        t = np.where(pos, (n1 + 1.0) / (n1 + 2.0), 1.0 / (len(pos) - n1 + 2.0))
        g = t - sigmoid_predict(f, A, B)
        assert abs(f @ g) < 1e-5 and abs(g.sum()) < 1e-5
    # labels as +-1 or bool; a swap of the classes and the sign of f gives (A, -B) (what relates our probB_
    # to LIBSVM's)
    A, B = fit_sigmoid(cv, y == 1)
    assert fit_sigmoid(cv, np.where(y == 1, 1, -1)) == (A, B)
    A2, B2 = fit_sigmoid(-cv, y == 0)
    assert A2 == pytest.approx(A, rel=1e-9) and B2 == pytest.approx(-B, rel=1e-9)


def test_sigmoid_predict_is_stable():
    f = np.array([-1e6, -50.0, -1.0, 0.0, 1.0, 50.0, 1e6])
    p = sigmoid_predict(f, -2.0, 0.5)
    from scipy.special import expit

    np.testing.assert_allclose(p, expit(-(-2.0 * f + 0.5)), rtol=1e-12, atol=1e-300)
    assert np.isfinite(p).all() and p[0] == 0.0 and p[-1] == 1.0 and 0 < p[1] < 1e-40  # no cancellation


def _coupling_matrix(R, pairs, k):
    """Q (n, k, k) of Wu-Lin-Weng's method 2 built independently of the module: r[:, i, j] = P(i | i or j),
    Q_tt = sum_{s != t} r_st^2, Q_ts = -r_st r_ts."""
    r = np.zeros((len(R), k, k))
    r[:, pairs[:, 1], pairs[:, 0]] = R
    r[:, pairs[:, 0], pairs[:, 1]] = 1.0 - R
    Q = -r.transpose(0, 2, 1) * r
    diag = np.arange(k)
    Q[:, diag, diag] = (r**2).sum(axis=1)  # r_tt = 0
    return Q


def _coupling_exact(Q):
    """The QP min p'Qp, sum p = 1 through its KKT linear system [[Q, 1], [1', 0]] [p; -mu] = [0; 1]."""
    n, k = Q.shape[:2]
    M = np.zeros((n, k + 1, k + 1))
    M[:, :k, :k] = Q
    M[:, :k, k] = M[:, k, :k] = 1.0
    rhs = np.zeros((n, k + 1, 1))
    rhs[:, k] = 1.0
    return np.linalg.solve(M, rhs)[:, :k, 0]


def test_pairwise_coupling_solves_wu_lin_weng_method_2(pendigits_full):
    X, y = pendigits_full[:2]
    keep = np.isin(y, [0, 2, 4, 6, 8])
    clf = svmcore.SVC(kernel="rbf", gamma=2.0, C=1.0, probability=True, random_state=0).fit(
        X[keep][:700], y[keep][:700]
    )
    F = clf._pairwise_decision(X[~keep][:1000])  # real decision values, of digits the model never saw too
    k, pairs = 5, ovo_pairs(5)
    rng = np.random.default_rng(0)
    fitted = np.clip(sigmoid_predict(F, clf.probA_, clf.probB_), MIN_PROB, 1 - MIN_PROB)
    # random sigmoids on the same decision values: pairwise probabilities that agree less with each other
    scrambled = np.clip(sigmoid_predict(F, rng.uniform(-6, -0.5, 10), rng.uniform(-2, 2, 10)), MIN_PROB, 1 - MIN_PROB)
    for R in (fitted, scrambled):
        Q = _coupling_matrix(R, pairs, k)
        exact = _coupling_exact(Q)
        assert exact.min() > 0  # Wu, Lin, Weng: the equality-constrained solution is already >= 0
        p, n_iter = pairwise_coupling(R, pairs, k, return_n_iter=True)
        Qp = np.einsum("nij,nj->ni", Q, p)
        residual = np.abs(Qp - np.einsum("ni,ni->n", p, Qp)[:, None]).max()
        # LIBSVM's stopping rule max_t |(Qp)_t - p'Qp| < 0.005 / k, met well within max_iter
        assert residual < 0.005 / k and n_iter.max() < 100
        assert np.abs(p.sum(axis=1) - 1).max() < 1e-12 and p.min() >= 0
        assert np.abs(p - exact).max() < 5e-3  # measured 1.5e-3
        tight = pairwise_coupling(R, pairs, k, eps=1e-14, max_iter=10_000)
        assert np.abs(tight - exact).max() < 1e-10  # measured 1e-14: the iteration converges to the QP's solution
    # two classes: the coupling returns the pairwise probability itself
    r = fitted[:, :1]
    np.testing.assert_allclose(pairwise_coupling(r, pairs[:1], 2, eps=1e-14, max_iter=1000)[:, 1], r[:, 0], atol=1e-12)


def test_sigmoid_and_coupling_reproduce_libsvm_from_its_own_model(faces, digits):
    # given LIBSVM's decision values and sigmoids, sigmoid_predict + pairwise_coupling give its predict_proba to
    # rounding. LIBSVM's pair (a, b) sigmoid is stated for class a and decision value -f (ours: b and f), so
    # P(b) = 1 - sigmoid(f_libsvm; probA, probB).
    for (X, y, Xt, _), params in ((faces, dict(gamma=0.02, C=2.0)), (digits, dict(gamma=2.0, C=10.0))):
        ref = sk_fit(
            sk_svc(kernel="rbf", probability=True, random_state=0, decision_function_shape="ovo", **params), X, y
        )
        F = np.atleast_2d(ref.decision_function(Xt).T).T
        k = len(ref.classes_)
        if k == 2:
            F = -F  # scikit-learn flips the binary decision function to mean classes_[1]
        R = np.clip(1.0 - sigmoid_predict(F, ref._probA, ref._probB), MIN_PROB, 1 - MIN_PROB)
        # scikit-learn's LIBSVM copy couples even two classes (current LIBSVM returns r for k = 2, as SVC here)
        np.testing.assert_allclose(pairwise_coupling(R, ovo_pairs(k), k), ref.predict_proba(Xt), atol=1e-12)


def _log_loss(p, classes, y):
    return float(-np.mean(np.log(p[np.arange(len(y)), np.searchsorted(classes, y)])))


@pytest.mark.parametrize(
    "data,params",
    [
        ("faces", dict(kernel="rbf", gamma=0.02, C=2.0)),
        ("faces", dict(kernel="poly", degree=2, gamma=1 / 361, coef0=1.0, C=1.0)),
        ("digits", dict(kernel="rbf", gamma=2.0, C=10.0)),
    ],
)
def test_predict_proba_matches_libsvm(request, data, params):
    X, y, Xt, yt = request.getfixturevalue(data)
    ours = svmcore.SVC(probability=True, random_state=0, **params).fit(X, y)
    ref = sk_fit(sk_svc(probability=True, random_state=0, **params), X, y)
    p, q = ours.predict_proba(Xt), ref.predict_proba(Xt)
    assert p.shape == (len(Xt), len(ours.classes_)) and p.dtype == np.float64
    assert np.abs(p.sum(axis=1) - 1).max() < 1e-12 and p.min() > 0
    # different random folds, so not equal: measured mean |p - q| 0.001-0.005, argmax agreement 99.1-100%,
    # log-loss within 0.008 of LIBSVM's (over random_state 0-3)
    assert np.abs(p - q).mean() < 0.015
    assert np.mean(p.argmax(axis=1) == q.argmax(axis=1)) >= 0.98
    assert abs(_log_loss(p, ours.classes_, yt) - _log_loss(q, ref.classes_, yt)) < 0.015
    # the sigmoids themselves: LIBSVM's probA_ is ours, its probB_ is -ours (its pair sigmoid is for class a)
    np.testing.assert_allclose(ours.probA_, ref._probA, rtol=0.25)
    assert np.abs(ours.probB_ + ref._probB).max() < 0.5
    np.testing.assert_allclose(ours.predict_log_proba(Xt), np.log(p), rtol=1e-12)
    # the decision rule is unchanged by probability=True; its agreement with the argmax of the probabilities
    # is LIBSVM's (measured 99.4% for rbf, 95% for poly on faces where the sigmoid's 0.5 lies at f = -0.38)
    plain = svmcore.SVC(**params).fit(X, y)
    np.testing.assert_array_equal(ours.dual_coef_, plain.dual_coef_)
    agree = np.mean(ours.predict(Xt) == ours.classes_[p.argmax(axis=1)])
    assert abs(agree - np.mean(ref.predict(Xt) == ref.classes_[q.argmax(axis=1)])) < 0.015 and agree > 0.9


def test_random_state_makes_the_folds_reproducible(faces):
    X, y = faces[0][:300], faces[1][:300]
    a = svmcore.SVC(probability=True, random_state=3).fit(X, y)
    b = svmcore.SVC(probability=True, random_state=3).fit(X, y)
    c = svmcore.SVC(probability=True, random_state=4).fit(X, y)
    assert np.array_equal(a.probA_, b.probA_) and np.array_equal(a.probB_, b.probB_) and a.probA_[0] != c.probA_[0]
    gen = svmcore.SVC(probability=True, random_state=np.random.default_rng(3)).fit(X, y)
    assert np.array_equal(gen.probA_, a.probA_)  # a Generator is used as it is; default_rng(seed) is what an int means
    legacy = svmcore.SVC(probability=True, random_state=np.random.RandomState(0)).fit(X, y)
    assert np.isfinite(legacy.probA_).all()
    np.random.seed(5)  # random_state=None draws from numpy's global RandomState, as scikit-learn
    d = svmcore.SVC(probability=True).fit(X, y).probA_
    np.random.seed(5)
    assert np.array_equal(svmcore.SVC(probability=True).fit(X, y).probA_, d)
    assert not hasattr(svmcore.SVC(probability=False).fit(X, y), "probA_")
    a.set_params(probability=False).fit(X, y)  # a refit without probabilities drops the old sigmoids
    assert not hasattr(a, "probA_")


def test_folds_with_one_class_follow_libsvm(faces):
    X, y = faces[0], faces[1]
    rows = np.r_[np.flatnonzero(y == 0)[:5], np.flatnonzero(y == 1)[:1]]  # one face among 6 rows
    m = svmcore.SVC(kernel="rbf", gamma=0.02, probability=True, random_state=0)
    m.check_params()
    Xs, spec = m._prepare(X[rows])
    ys = np.where(y[rows] == 1, 1.0, -1.0)
    perm = np.random.default_rng(0).permutation(6)
    f, kept = m._cross_val_decision(Xs, spec, np.arange(6), ys, np.ones(6), perm)
    # folds of sizes 1, 1, 1, 1, 2 over perm: the fold holding the face trains on non-faces only -> -1
    bounds = [(i * 6 // 5, (i + 1) * 6 // 5) for i in range(5)]
    face_fold = next((b, e) for b, e in bounds if 5 in perm[b:e])
    assert np.all(f[perm[face_fold[0] : face_fold[1]]] == -1.0) and np.array_equal(kept, ys)
    others = np.setdiff1d(np.arange(6), perm[face_fold[0] : face_fold[1]])
    assert np.all(np.abs(f[others]) != 1.0)  # decision values of real fits elsewhere
    # the whole fit works on such a tiny problem and gives proper probabilities
    p = m.fit(X[rows], y[rows]).predict_proba(X[:50])
    assert np.isfinite(p).all() and np.allclose(p.sum(axis=1), 1.0)
    # rows of zero weight take no part in the cross-validation
    _, kept = m._cross_val_decision(Xs, spec, np.arange(6), ys, np.r_[0.0, np.ones(5)], np.arange(5))
    assert len(kept) == 5


@pytest.mark.parametrize("kernel", ["rbf", "precomputed", "sparse"])
def test_persistence_keeps_predict_proba(digits, tmp_path, kernel):
    from svmcore.kernels import pairwise_kernel

    X, y, Xt, _ = digits
    X, y, Xt = X[:300], y[:300], Xt[:200]
    if kernel == "precomputed":
        X, Xt = pairwise_kernel(X, kernel="rbf", gamma=2.0), pairwise_kernel(Xt, X, kernel="rbf", gamma=2.0)
    elif kernel == "sparse":
        import scipy.sparse as sp

        X, Xt = sp.csr_matrix(X), sp.csr_matrix(Xt)
    m = svmcore.SVC(
        kernel="precomputed" if kernel == "precomputed" else "rbf", gamma=2.0, C=10.0, probability=True, random_state=7
    ).fit(X, y)
    back = svmcore.load(m.save(tmp_path / "p.npz"))
    assert back.probability and back.random_state == 7
    np.testing.assert_array_equal(back.probA_, m.probA_)
    np.testing.assert_array_equal(back.predict_proba(Xt), m.predict_proba(Xt))
    assert m.probA_.shape == m.probB_.shape == (6,)


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda h, a: a.pop("probB_"), "missing array 'probB_'"),
        (lambda h, a: a.update(probA_=np.zeros(2)), "probA_ must be"),
        (lambda h, a: a.update(probA_=np.array([np.nan])), "probA_"),
        (lambda h, a: a.update(probB_=a["probB_"].astype(np.int64)), "probB_ must be"),
        (lambda h, a: h["params"].update(probability=False), "probability=False"),
        (lambda h, a: h["params"].update(probability="yes"), "probability"),
        (lambda h, a: h["params"].update(random_state=-1), "random_state"),
    ],
)
def test_load_refuses_inconsistent_probability_state(faces, tmp_path, edit, match, rewrite_model):
    path = svmcore.SVC(probability=True, random_state=0).fit(faces[0][:200], faces[1][:200]).save(tmp_path / "m.npz")
    with pytest.raises(ValueError, match=match):
        svmcore.load(rewrite_model(path, tmp_path / "bad.npz", edit))
    plain = svmcore.SVC().fit(faces[0][:200], faces[1][:200]).save(tmp_path / "plain.npz")
    with pytest.raises(ValueError, match="probability=False"):  # sigmoids without probability=True
        svmcore.load(
            rewrite_model(plain, tmp_path / "bad2.npz", lambda h, a: a.update(probA_=np.zeros(1), probB_=np.zeros(1)))
        )


def test_errors(faces, tmp_path):
    X, y = faces[0][:200], faces[1][:200]
    plain = svmcore.SVC().fit(X, y)
    assert not hasattr(plain, "predict_proba") and not hasattr(plain, "predict_log_proba")  # scikit-learn's way
    with pytest.raises(AttributeError, match="probability=False"):
        plain.predict_proba(X)
    assert hasattr(svmcore.SVC(probability=True), "predict_proba")
    with pytest.raises(svmcore.NotFittedError, match="not fitted"):
        svmcore.SVC(probability=True).predict_proba(X)
    plain.set_params(probability=True)  # switched on after fit: it takes effect at the next fit
    with pytest.raises(AttributeError, match="set probability=True before fit"):
        plain.predict_proba(X)
    assert not svmcore.load(plain.save(tmp_path / "m.npz")).probability  # the file is the model as fitted
    m = svmcore.SVC(probability=True, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="361"):
        m.predict_proba(X[:, :10])
    with pytest.raises(ValueError, match="NaN"):
        m.predict_proba(np.full((1, 361), np.nan))
    for bad, exc in (
        (dict(probability="yes"), TypeError),
        (dict(random_state=-1), ValueError),
        (dict(random_state=1.5), TypeError),
    ):
        with pytest.raises(exc, match="probability" if "probability" in bad else "random_state"):
            svmcore.SVC(**bad).fit(X, y)
    with pytest.raises(ValueError, match="equal length"):
        fit_sigmoid(np.zeros(3), np.ones(2))
    with pytest.raises(ValueError, match="NaN"):
        fit_sigmoid(np.array([0.0, np.nan]), np.array([1, -1]))
    with pytest.raises(ValueError, match="clip"):
        pairwise_coupling(np.array([[0.5, 1.0, 0.2]]), ovo_pairs(3), 3)
    with pytest.raises(ValueError, match="one column per pair"):
        pairwise_coupling(np.full((2, 2), 0.5), ovo_pairs(3)[:2], 3)
    for pairs in (
        [[0, 1], [0, 2], [1, 10**8]],
        [[0, 1], [0, 1], [1, 2]],
        [[0, 0], [1, 1], [2, 2]],
        [[0, 1], [0, 2], [-1, 2]],
    ):  # unchecked indices in the compiled loop crashed the interpreter
        with pytest.raises(ValueError, match="once each"):
            pairwise_coupling(np.full((2, 3), 0.6), pairs, 3)
    # save writes only what load accepts: a Generator seed is not stored; bad parameters set after fit are for
    # the next fit, and the file holds the fitted ones
    g = svmcore.SVC(probability=True, random_state=np.random.default_rng(0)).fit(X, y)
    back = svmcore.load(g.save(tmp_path / "g.npz"))
    assert back.random_state is None and np.array_equal(back.predict_proba(X), g.predict_proba(X))
    for bad in (dict(class_weight={12: 1.0}), dict(C=-1.0), dict(random_state=-3)):
        m = svmcore.SVC(probability=True, random_state=0).fit(X, y).set_params(**bad)
        back = svmcore.load(m.save(tmp_path / "bad.npz"))
        assert (back.C, back.class_weight, back.random_state) == (1.0, None, 0)
        with pytest.raises(ValueError):
            m.fit(X, y)
