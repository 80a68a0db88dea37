"""The contract every svmcore estimator shares: scikit-learn's model-selection tools work on it, it is
unusable before fit with a clear error, and ``svmcore.load`` refuses a file whose hyperparameters or
learned values are missing or invalid instead of silently building another model. Real data: CBCL
patches (pixels in [0, 1], nonnegative, so PmSVM takes them too)."""

import json
import numbers
import os
import stat
import warnings
from fractions import Fraction

import numpy as np
import pytest
from sklearn.base import clone, is_classifier
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler

import svmcore


@pytest.fixture(scope="module")
def patches(cbcl):
    rng = np.random.default_rng(1)
    i = rng.choice(len(cbcl["X_train"]), 300, replace=False)
    return cbcl["X_train"][i], cbcl["y_train"][i]


# PmSVM's default 100 epochs do not reach tol on these patches; tests/test_pmsvm.py tests that warning
PMSVM_AT_MAX_ITER = pytest.mark.filterwarnings("ignore:PmSVM. .* stopped at max_iter:RuntimeWarning")

CLASSIFIERS = [
    lambda: svmcore.SVC(kernel="poly", degree=2, gamma=1 / 361, coef0=1.0),
    lambda: svmcore.SVC(
        kernel="poly", degree=2, gamma=1 / 361, coef0=1.0, class_weight="balanced", probability=True, random_state=0
    ),
    lambda: svmcore.PmSVM(random_state=0),
    lambda: svmcore.TopKSVM(k=1, C=1.0, random_state=0),
]


@PMSVM_AT_MAX_ITER
@pytest.mark.parametrize("make", CLASSIFIERS)
def test_sklearn_model_selection_works(make, patches):
    X, y = patches
    assert is_classifier(make())
    folds = list(StratifiedKFold(3).split(X, y))  # what cross_val_score uses for a classifier

    def manual(**params):
        return [make().set_params(**params).fit(X[tr], y[tr]).score(X[te], y[te]) for tr, te in folds]

    np.testing.assert_allclose(cross_val_score(make(), X, y, cv=3), manual(), rtol=1e-12)
    grid = GridSearchCV(make(), {"C": [0.1, 10.0]}, cv=3).fit(X, y)
    means = {C: np.mean(manual(C=C)) for C in (0.1, 10.0)}
    assert grid.best_score_ == pytest.approx(max(means.values())) and means[grid.best_params_["C"]] == max(
        means.values()
    )
    scaled = MinMaxScaler().fit_transform(X)
    pipe = make_pipeline(MinMaxScaler(), clone(make())).fit(X, y)
    np.testing.assert_array_equal(pipe.predict(X), make().fit(scaled, y).predict(scaled))


def test_precomputed_kernels_are_sliced_as_kernels(patches):
    X, y = patches  # model selection must cut K[train][:, train] and K[test][:, train], not rows only
    np.testing.assert_allclose(
        cross_val_score(svmcore.SVC(kernel="precomputed"), X @ X.T, y, cv=3),
        cross_val_score(svmcore.SVC(kernel="linear"), X, y, cv=3),
    )


@pytest.mark.parametrize("make", CLASSIFIERS + [lambda: svmcore.OneClassSVM(nu=0.2)])
def test_not_fitted_error(make, patches, tmp_path):
    for method in ("predict", "decision_function", "predict_proba"):
        if hasattr(make(), method):
            with pytest.raises(svmcore.NotFittedError, match="not fitted"):
                getattr(make(), method)(patches[0])
    with pytest.raises(svmcore.NotFittedError, match="not fitted"):
        make().save(tmp_path / "m.npz")
    assert not hasattr(make(), "n_features_in_") and not hasattr(make(), "offset_")  # as scikit-learn expects
    for name in ("n_features_in_", "offset_"):  # learned values computed by properties
        if isinstance(getattr(type(make()), name, None), property):
            with pytest.raises(svmcore.NotFittedError, match="not fitted"):
                getattr(make(), name)
    assert issubclass(svmcore.NotFittedError, ValueError) and issubclass(svmcore.NotFittedError, AttributeError)


@PMSVM_AT_MAX_ITER
@pytest.mark.parametrize(
    "make, change",
    [
        (lambda: svmcore.SVC(), dict(kernel="linear")),
        (lambda: svmcore.SVC(kernel="poly", degree=2, gamma=1 / 361, coef0=1.0), dict(degree=3, coef0=0.0)),
        (lambda: svmcore.SVC(), dict(kernel="precomputed")),
        (lambda: svmcore.OneClassSVM(nu=0.2), dict(kernel="linear")),
        (lambda: svmcore.PmSVM(random_state=0), dict(multi_class="ovo")),
        (lambda: svmcore.TopKSVM(random_state=0), dict(kernel="rbf")),
    ],
)
def test_set_params_after_fit_takes_effect_at_the_next_fit(make, change, patches, tmp_path):
    X, y = patches  # a fitted model keeps scoring, and saving, as fitted: never an rbf model under a linear kernel
    y = y + (X[:, 0] > 0.5)  # three classes, so that PmSVM's multi_class matters
    m = make().fit(X, y)
    before = m.decision_function(X)
    m.set_params(**change)
    np.testing.assert_array_equal(m.decision_function(X), before)
    np.testing.assert_array_equal(svmcore.load(m.save(tmp_path / "m.npz")).decision_function(X), before)
    if change.get("kernel") != "precomputed":  # the next fit uses the new values
        np.testing.assert_array_equal(
            m.fit(X, y).decision_function(X), make().set_params(**change).fit(X, y).decision_function(X)
        )
        assert not np.allclose(m.decision_function(X), before)


def test_score_needs_one_label_per_row_and_takes_sample_weight(patches):
    X, y = patches
    m = svmcore.SVC(kernel="poly", degree=2, gamma=1 / 361, coef0=1.0).fit(X, y[:, None])  # (n, 1) as fit takes it
    assert m.score(X, y[:, None]) == m.score(X, y) > 0.8
    for bad in (y[:1], y[:-1], np.c_[y, y]):  # broadcasting would give a number: refuse
        with pytest.raises(ValueError, match="one per row"):
            m.score(X, bad)
    w = np.linspace(0.1, 1.0, len(y))  # scikit-learn's score(X, y, sample_weight), as model selection passes it
    assert m.score(X, y, sample_weight=w) == pytest.approx(np.average(m.predict(X) == y, weights=w))
    assert m.score(X, y, sample_weight=m.predict(X) == y) == 1.0 and m.score(X, y, sample_weight=None) == m.score(X, y)
    with pytest.raises(ValueError, match="sample_weight"):
        m.score(X, y, sample_weight=w[:-1])


@PMSVM_AT_MAX_ITER
def test_numbers_of_any_type_reach_the_solvers_as_plain_numbers(patches):
    X, y = patches  # numpy scalars of any dtype and other numbers (Fraction): numba's solvers take int and float
    for make, odd in (
        (
            svmcore.SVC,
            dict(
                C=Fraction(1, 2),
                tol=np.float16(1e-3),
                cache_size=np.float32(50),
                working_set_size=np.int8(16),
                max_iter=np.uint16(60000),
            ),
        ),
        (svmcore.OneClassSVM, dict(nu=Fraction(1, 5), tol=np.float16(1e-3))),
        (svmcore.PmSVM, dict(C=Fraction(1, 2), lut_bins=np.int16(1000), max_iter=np.int8(100), random_state=0)),
    ):
        plain = {k: int(v) if isinstance(v, numbers.Integral) else float(v) for k, v in odd.items()}
        np.testing.assert_array_equal(
            make(**odd).fit(X, y).decision_function(X), make(**plain).fit(X, y).decision_function(X)
        )


def test_kernel_parameters_of_other_kernels_are_ignored(patches):
    X, y = patches  # degree and coef0 belong to poly: left None, an rbf model fits, predicts and saves
    m = svmcore.SVC(degree=None, coef0=None).fit(X, y)
    np.testing.assert_array_equal(m.predict(X), svmcore.SVC().fit(X, y).predict(X))


def test_overflowing_kernels_are_refused_and_the_earlier_model_kept(patches):
    X, y = patches
    m = svmcore.SVC().fit(X, y)
    before = m.decision_function(X)
    with pytest.raises(ValueError, match="overflow"):  # (255 <x, x'> + 1)^60: refused before solving
        m.set_params(kernel="poly", degree=60, gamma=1.0, coef0=1.0).fit(X * 255, y)
    with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match="no kernel width"):  # variance is inf
        svmcore.SVC().fit(X * 1e200, y)
    np.testing.assert_array_equal(m.decision_function(X), before)
    t = svmcore.TopKSVM(random_state=0).fit(X, y)
    with warnings.catch_warnings(), pytest.raises(ValueError, match="overflow"):
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's overflow notes, where they come
        t.fit(X * 1e200, y)
    assert t.score(X, y) > 0.8


@PMSVM_AT_MAX_ITER
def test_small_things_users_pass(patches, tmp_path):
    X, y = patches
    m = svmcore.SVC(kernel="linear", random_state=2**64).fit(X, y)  # any int seed, as numpy takes it
    with pytest.raises(IsADirectoryError, match="it is a folder"):
        m.save(tmp_path)
    with pytest.raises(ValueError, match="1-D list of the class labels"):
        svmcore.TopKSVM().fit(X, y, classes=2)
    # headers are strict JSON (-inf spelled out) and a Fraction is saved as the float the solver used
    for est, name, value in (
        (svmcore.PmSVM(p=-np.inf, random_state=0), "p", -np.inf),
        (svmcore.SVC(C=Fraction(1, 2)), "C", 0.5),
    ):
        path = est.fit(X, y).save(tmp_path / "m.npz")
        with np.load(path) as npz:
            header = json.loads(npz["__header__"].tobytes(), parse_constant=lambda c: pytest.fail(f"JSON has {c}"))
        assert svmcore.load(path).get_params()[name] == value
        np.testing.assert_array_equal(svmcore.load(path).decision_function(X), est.decision_function(X))
    assert header["params"]["C"] == 0.5


def test_asymmetric_precomputed_kernels_are_refused(patches):
    X, y = patches  # dual solvers assume K = K^T: on an asymmetric K they cycled without end
    K32 = X.astype(np.float32) @ X.T.astype(np.float32).copy()  # rounding-level asymmetry is fine
    assert svmcore.SVC(kernel="precomputed").fit(K32, y).score(K32, y) > 0.9
    K = X @ X.T
    K[0, 1] += 1.0
    for est in (
        svmcore.SVC(kernel="precomputed"),
        svmcore.OneClassSVM(kernel="precomputed"),
        svmcore.TopKSVM(kernel="precomputed"),
    ):
        with pytest.raises(ValueError, match="symmetric"):
            est.fit(K, y)


def test_string_labels_from_object_arrays(patches):
    X, y = patches
    labels = np.array(["non-face", "face"], dtype=object)[y]  # how pandas hands over a string column
    m = svmcore.SVC(kernel="poly", degree=2, gamma=1 / 361, coef0=1.0).fit(X, labels)
    ints = svmcore.SVC(kernel="poly", degree=2, gamma=1 / 361, coef0=1.0).fit(X, 1 - y)  # "face" < "non-face"
    assert list(m.classes_) == ["face", "non-face"]
    assert np.array_equal(m.predict(X), np.array(["face", "non-face"])[ints.predict(X)])
    with pytest.raises(ValueError, match="Unknown label type"):
        svmcore.SVC().fit(X, np.array([object()] * len(y), dtype=object))
    with pytest.raises(ValueError, match=r"labels may hold only strings, found [01] \(int\); pass numbers as a"):
        svmcore.SVC().fit(X, y.astype(object))  # what is refused: numbers in an object array


def test_labels_of_mixed_or_complex_types_and_huge_integer_parameters_are_refused(patches):
    X, y = patches
    for labels, match in (
        ([1, "a"] * 2, "a mix of strings and other labels"),
        (np.array([1j, 2j] * 2), "complex labels"),
    ):
        with pytest.raises(ValueError, match=match):
            svmcore.SVC().fit(X[:4], labels)
    # beyond int64 numba and the epoch counters cannot take them: a clear error, not a TypingError
    for est in (
        svmcore.SVC(kernel="poly", degree=2**64),
        svmcore.PmSVM(max_iter=2**64),
        svmcore.TopKSVM(max_epochs=2**64),
    ):
        with pytest.raises(ValueError, match="must be at most 9223372036854775807"):
            est.fit(X, y)
    with pytest.raises(ValueError, match="LinearSVMPlus|max_iter"):
        svmcore.LinearSVMPlus(max_iter=2**64).fit(X, X[:, :5], y)
    # a degree whose kernel diagonal leaves float32 is refused before SMO runs on inf (it hung at 10^12)
    with pytest.raises(ValueError, match="overflow"):
        svmcore.SVC(kernel="poly", degree=10**12, gamma=1.0, coef0=1.0).fit(X, y)


def test_weights_on_one_class_only_are_refused(patches):
    X, y = patches
    with pytest.raises(ValueError, match="no row of positive weight"):
        svmcore.SVC().fit(X, y, sample_weight=(y == 1).astype(float))


@pytest.mark.filterwarnings("ignore:LinearSVMPlus. stopped")  # 50 epochs are enough to test the seeding
def test_bytes_labels_and_random_generators(patches, tmp_path):
    X, y = patches
    m = svmcore.SVC(kernel="linear").fit(X, np.array([b"no", b"yes"])[y])
    assert list(svmcore.load(m.save(tmp_path / "b.npz")).classes_) == [b"no", b"yes"]
    for rs in (np.random.default_rng(0), np.random.RandomState(0)):
        assert svmcore.LinearSVMPlus(random_state=rs, max_iter=50).fit(X, X[:, :5], y).n_iter_ <= 50


@PMSVM_AT_MAX_ITER
def test_failed_pmsvm_refit_keeps_the_old_model(patches):
    X, y = patches
    m = svmcore.PmSVM(random_state=0).fit(X, np.where(y == 1, "face", "non-face"))
    before = m.predict(X)
    with pytest.raises(ValueError, match="all features are zero"):
        m.fit(np.zeros_like(X), np.where(y == 1, "cat", "dog"))
    assert list(m.classes_) == ["face", "non-face"] and np.array_equal(m.predict(X), before)
    m.set_params(solver="sgd").fit(X[:100], y[:100])
    assert not hasattr(m, "alpha_")  # the dual variables of the first fit do not describe this one


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda h, a: h.update(params={}), "missing parameters"),
        (lambda h, a: h["params"].update(C=-1.0), "C: must be > 0"),
        (lambda h, a: h["params"].update(degree=0), "degree"),
        (lambda h, a: h["params"].update(degree=2.7), "degree"),
        (lambda h, a: h["params"].update(kernel="sigmoid"), "kernel"),
        (lambda h, a: h["meta"].update(gamma_="abc"), "gamma_ must be a finite number"),
        (lambda h, a: h["meta"].update(gamma_=-5.0), "gamma_ must be > 0"),
        (lambda h, a: a.update(support_vectors_=a["support_vectors_"].astype(complex)), "expected numbers"),
        (lambda h, a: a.update(support_=np.array(3)), "support_"),
        (lambda h, a: a.update(support_=a["support_"].astype(float)), "integer"),
        (lambda h, a: h["params"].update(class_weight=[[5, 1.0]]), r"class_weight: labels \[5\]"),
        (lambda h, a: h["params"].update(class_weight={"1": 2.0}), r"class_weight: labels \['1'\]"),  # JSON keys
        (lambda h, a: h["params"].update(class_weight=[[1, -2.0]]), r"class_weight\[1\]: must be >= 0"),
        (lambda h, a: h["params"].update(class_weight=[[1]]), "pairs"),
        (lambda h, a: h["params"].update(class_weight=[[1, 2.0], [1, 3.0]]), "more than once"),
        (lambda h, a: h["params"].update(class_weight="heavy"), "class_weight: unknown value"),
        (lambda h, a: h["params"].update(probability=1), "probability: expected a bool"),
        (lambda h, a: h.update({"class": ["SVC"]}), "unknown model class"),
        (lambda h, a: a.update(classes_=a["classes_"][None, :]), "classes_ must"),
        (lambda h, a: a.update(classes_=a["classes_"][[0, 0]]), "distinct labels"),
        (lambda h, a: h["meta"].update(n_features_in_=1e9), "n_features_in_ must be a count"),
        (lambda h, a: h.update(format_version=True), "unsupported format version True"),  # a JSON bool is no version
        (lambda h, a: a.update(not_a_field_=np.arange(5)), r"unknown arrays \['not_a_field_'\]"),
        (lambda h, a: h["meta"].update(extra_=1.0), r"unknown values \['extra_'\]"),
        (
            lambda h, a: a.update(probA_=np.zeros(1), probB_=np.zeros(1)),
            "probA_/probB_ are stored, but probability=False",
        ),
        (lambda h, a: h["params"].update(verbose={"any": "json"}), "verbose: expected a bool"),
        # learned floats stored as bool or int (an edited file) scored as another model, or failed in numpy (-bool)
        (
            lambda h, a: a.update(dual_coef_=a["dual_coef_"] > 0),
            r"'dual_coef_' has dtype bool; expected numbers \(floats",
        ),
        (lambda h, a: a.update(intercept_=a["intercept_"].astype(np.int64)), r"'intercept_' .* \(floats\)"),
        (
            lambda h, a: h["meta"].update(objective_=10**400),
            "objective_ must be a finite number",
        ),  # np.isfinite: TypeError
        (lambda h, a: h["params"].update(C=10**400), "C: must be finite"),
        # a header edited after fit: scoring uses gamma_, so the file would state a model it does not hold (audit 27)
        (lambda h, a: h["params"].update(gamma=0.5), r"gamma_ is 0.1, but gamma=0.5: the model does not have"),
        (lambda h, a: h["meta"].update(gamma_=0.2), r"gamma_ is 0.2, but gamma=0.1"),
        (lambda h, a: h["params"].update(gamma="auto"), r"gamma_ is 0.1, but gamma='auto' \(1/361 = 0.00277"),
        (lambda h, a: h["params"].update(kernel="linear"), "gamma_ is 0.1, but the linear kernel has no width"),
    ],
)
def test_load_refuses_invalid_state(edit, match, patches, tmp_path, rewrite_model):
    X, y = patches
    path = svmcore.SVC(kernel="poly", degree=2, gamma=0.1, coef0=1.0).fit(X, y).save(tmp_path / "m.npz")
    with pytest.raises(ValueError, match=match):
        svmcore.load(rewrite_model(path, tmp_path / "bad.npz", edit))


def test_load_refuses_a_kernel_width_its_parameters_do_not_give(patches, tmp_path, rewrite_model):
    # the rule of SVC's files, for the other estimators with a learned width (svmcore.kernels.check_fitted_gamma)
    X, y = patches
    topk = svmcore.TopKSVM(kernel="rbf", gamma=0.5, random_state=0).fit(X[:60], y[:60]).save(tmp_path / "t.npz")
    plus = (
        svmcore.KernelSVMPlus(kernel="rbf", kernel_gamma="auto", kernel_star="rbf", kernel_star_gamma=0.5)
        .fit(X[:100], X[:100, :5], y[:100])
        .save(tmp_path / "p.npz")
    )
    for path, edit, match in (
        (topk, lambda h, a: h["params"].update(gamma=0.25), r"gamma_ is 0.5, but gamma=0.25"),
        (
            plus,
            lambda h, a: h["params"].update(kernel_gamma=0.25),
            r"kernel_gamma_ is 0.00277.*, but kernel_gamma=0.25",
        ),
        (
            plus,
            lambda h, a: h["params"].update(kernel_star_gamma="scale", kernel_star="linear"),
            r"kernel_star_gamma_ is 0.5, but the linear kernel has no width \(its fit records 0.0\)",
        ),
    ):
        with pytest.raises(ValueError, match=match):
            svmcore.load(rewrite_model(path, tmp_path / "bad.npz", edit))
    # the widths fit resolves load: a number, "auto" (1/d), "scale" (of the training rows: not checked)
    for gamma in (0.5, "auto", "scale"):
        m = svmcore.SVC(kernel="rbf", gamma=gamma).fit(X, y)
        assert svmcore.load(m.save(tmp_path / "m.npz")).gamma_ == m.gamma_


def test_files_from_before_new_parameters_still_load(patches, tmp_path, rewrite_model):
    # SVC files written before class_weight, probability and random_state existed (the shipped detector's)
    X, y = patches
    m = svmcore.SVC(kernel="poly", degree=2, gamma=0.1, coef0=1.0).fit(X, y)
    old = rewrite_model(
        m.save(tmp_path / "m.npz"),
        tmp_path / "old.npz",
        lambda h, a: [h["params"].pop(k) for k in ("class_weight", "probability", "random_state", "n_jobs")],
    )
    back = svmcore.load(old)
    assert back.class_weight is None and back.probability is False and back.random_state is None
    assert back.n_jobs is None
    np.testing.assert_array_equal(back.decision_function(X), m.decision_function(X))


def test_load_refuses_npy_and_saves_through_symlinks(patches, tmp_path):
    import zipfile

    X, y = patches
    np.save(tmp_path / "array.npy", np.arange(3))
    with pytest.raises(ValueError, match="not an .npz"):
        svmcore.load(tmp_path / "array.npy")
    with zipfile.ZipFile(tmp_path / "raw.npz", "w") as z:  # a zip whose members are not .npy arrays
        z.writestr("__header__.npy", b'{"format": "svmcore-model"}')
    with pytest.raises(ValueError, match="not a .npy array"):
        svmcore.load(tmp_path / "raw.npz")
    m = svmcore.SVC(kernel="linear").fit(X, y)
    target = m.save(tmp_path / "real.npz")
    (tmp_path / "link.npz").symlink_to(target)
    svmcore.SVC(kernel="linear", C=0.01).fit(X, y).save(tmp_path / "link.npz")
    assert (tmp_path / "link.npz").is_symlink()
    assert svmcore.load(target).C == 0.01


def test_saving_over_a_file_keeps_its_permissions(patches, tmp_path):
    X, y = patches
    m = svmcore.SVC(kernel="linear").fit(X, y)
    path = m.save(tmp_path / "m.npz")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # a new file: the usual mode
    path.chmod(0o600)
    m.save(path)  # replaced by a new file: a private model stays private
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# scikit-learn's own estimator checks; the few expected failures are deliberate
_SKLEARN_EXPECTED = {
    "check_estimators_unfitted": "svmcore.NotFittedError is not scikit-learn's class: scikit-learn is no runtime "
    "dependency (it is a ValueError and an AttributeError, as scikit-learn's)",
    "check_supervised_y_2d": "a (n, 1) y is ravelled without scikit-learn's DataConversionWarning",
    "check_sample_weight_equivalence_on_dense_data": "weights and repeated rows agree to the solver tolerance, "
    "not to scikit-learn's 1e-7 (LIBSVM fails it too)",
    "check_sample_weight_equivalence_on_sparse_data": "as on dense data",
}


_PMSVM_EXPECTED = {
    "check_class_weight_classifiers": "its data (make_blobs) has negative features, which an additive "
    "kernel refuses; tests/test_pmsvm.py checks class_weight"
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(
    "make, expected",
    [
        (svmcore.SVC, {}),
        (lambda: svmcore.SVC(probability=True), {}),
        (lambda: svmcore.PmSVM(random_state=0), _PMSVM_EXPECTED),
        (lambda: svmcore.TopKSVM(random_state=0), {}),
        (svmcore.OneClassSVM, {}),
    ],
)
def test_scikit_learn_estimator_checks(make, expected):
    from sklearn.utils.estimator_checks import check_estimator

    check_estimator(make(), expected_failed_checks={**_SKLEARN_EXPECTED, **expected}, on_fail="raise", on_skip=None)


@pytest.mark.parametrize("make", [svmcore.SVC, lambda: svmcore.SVC(kernel="poly", degree=2, gamma=1 / 361, coef0=1.0)])
def test_class_weight_balanced_helps_on_imbalanced_faces(make, cbcl):
    # scikit-learn's check (not part of check_estimator: it needs data): on 20 faces among 420 CBCL patches,
    # "balanced" raises the weighted F1 on the held-out ones (measured 0.948 -> 0.975 rbf, 0.907 -> 0.946 poly)
    from sklearn.utils.estimator_checks import check_class_weight_balanced_classifiers

    X, y = cbcl["X_train"], cbcl["y_train"]
    rng = np.random.default_rng(1)
    faces = rng.choice(np.flatnonzero(y == 1), 60, replace=False)
    others = rng.choice(np.flatnonzero(y == 0), 1000, replace=False)
    train, test = np.r_[faces[:20], others[:400]], np.r_[faces[20:], others[400:]]
    check_class_weight_balanced_classifiers("SVC", make(), X[train], y[train], X[test], y[test], None)


def test_every_solver_stopped_at_its_cap_warns_convergence(patches):
    X, y = patches  # one class to filter on, as scikit-learn's; still a RuntimeWarning for older filters
    assert issubclass(svmcore.ConvergenceWarning, RuntimeWarning)
    for fit in (
        lambda: svmcore.SVC(max_iter=3).fit(X, y),
        lambda: svmcore.PmSVM(max_iter=1).fit(X, y),
        lambda: svmcore.TopKSVM(max_epochs=1, tol=1e-9).fit(X, y),
        lambda: svmcore.LinearSVMPlus(max_iter=1).fit(X, X[:, :5], y),
    ):
        with pytest.warns(svmcore.ConvergenceWarning):
            fit()


def test_corrupt_headers_and_arrays_of_every_kind_are_refused_with_value_error(patches, tmp_path, rewrite_model):
    X, y = patches
    path = svmcore.SVC(kernel="linear").fit(X, y).save(tmp_path / "m.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files if k != "__header__"}
    np.savez(tmp_path / "nested.npz", __header__=np.frombuffer(b"[" * 100000 + b"]" * 100000, np.uint8), **arrays)
    with pytest.raises(ValueError, match="not valid JSON"):  # was a RecursionError from json
        svmcore.load(tmp_path / "nested.npz")
    # a learned real stored as a JSON int: a float again, which numba's kernels can type (a TypingError before)
    m = svmcore.OneClassSVM(kernel="rbf", gamma=0.1).fit(X)
    big = rewrite_model(
        m.save(tmp_path / "oc.npz"),
        tmp_path / "big.npz",
        lambda h, a: [h["params"].update(gamma=10**30), h["meta"].update(gamma_=10**30)],
    )
    assert isinstance(svmcore.load(big).gamma_, float) and svmcore.load(big).predict(X).shape == (len(X),)
    t = svmcore.TopKSVM(kernel="rbf", random_state=0).fit(X[:60], y[:60])  # a kernel model has no primal weights
    bad = rewrite_model(t.save(tmp_path / "t.npz"), tmp_path / "tbad.npz", lambda h, a: a.update(coef_=np.ones((2, 7))))
    with pytest.raises(ValueError, match=r"coef_ has shape \(2, 7\), expected \(2, 0\)"):
        svmcore.load(bad)


@PMSVM_AT_MAX_ITER
def test_integer_valued_real_parameters_beyond_int64_reach_the_solvers_as_floats(patches):
    X, y = patches  # ints of the real hyperparameters were passed on as ints: numba could not type 10**20
    for make, name in ((svmcore.SVC, "gamma"), (svmcore.SVC, "tol"), (svmcore.OneClassSVM, "tol")):
        big = make(**{name: 10**20}).fit(X, y).decision_function(X)
        np.testing.assert_array_equal(big, make(**{name: 1e20}).fit(X, y).decision_function(X))
    for est in (svmcore.SVC(C=10**400), svmcore.PmSVM(tol=10**400), svmcore.TopKSVM(C=10**400)):
        with pytest.raises(ValueError, match="must be finite"):  # an OverflowError before
            est.fit(X, y)
    np.testing.assert_array_equal(
        svmcore.PmSVM(p=-(10**400), random_state=0).fit(X, y).decision_function(X),
        svmcore.PmSVM(p=-np.inf, random_state=0).fit(X, y).decision_function(X),
    )


def test_kernel_overflow_at_prediction_is_an_error_not_a_silent_class(patches):
    X, y = patches  # poly values of inf - inf gave NaN decision values, which predict read as classes_[0]
    big = (X[:5] - X.mean(axis=0)) * 1e200  # products of both signs: inf - inf
    for m in (
        svmcore.SVC(kernel="poly", degree=3, probability=True, random_state=0).fit(X, y),
        svmcore.OneClassSVM(kernel="poly", degree=3).fit(X),
    ):
        for method in ("decision_function", "predict", "predict_proba"):
            if hasattr(m, method):
                with (
                    warnings.catch_warnings(),
                    pytest.raises(ValueError, match="kernel values on these features overflow"),
                ):
                    warnings.simplefilter("ignore", RuntimeWarning)
                    getattr(m, method)(big)
        assert m.predict(X[:5]).shape == (5,)


def test_kernel_svm_plus_with_c_over_gamma_beyond_floating_point_says_so(patches):
    X, y = patches  # Cholesky of gamma I + C (K* + 1) failed with numpy's "leading minor is not positive definite"
    with pytest.raises(ValueError, match="C max\\(K\\* \\+ 1\\) / gamma = 2e\\+20 \\(C / gamma = 1e\\+20"):
        svmcore.KernelSVMPlus(C=1e20, gamma=1.0).fit(X, X[:, :2], y)


@pytest.mark.filterwarnings("ignore::svmcore.ConvergenceWarning")  # short runs: the models only need to exist
@pytest.mark.filterwarnings("ignore:Constructing a DIA matrix")
def test_sparse_inputs_of_every_scipy_kind_and_one_dimensional_sparse_arrays(patches):
    # every scipy sparse format, matrix or array, gives the decision values of the same rows dense; a 1-D sparse
    # array (scipy's coo_array / dok_array may be 1-D) is refused naming X, as a 1-D dense array is (it raised
    # scipy's "shape must have length in (2,). Got new_shape=(361,)", which names neither X nor the remedy)
    import scipy.sparse as sp

    X, y = patches
    X = np.where(X > 0.5, X, 0.0)  # half the pixels zero
    models = [
        svmcore.SVC(kernel="rbf").fit(sp.csr_matrix(X), y),
        svmcore.OneClassSVM().fit(sp.csc_matrix(X)),
        svmcore.PmSVM(random_state=0).fit(sp.coo_array(X), y),
        svmcore.TopKSVM(random_state=0).fit(sp.lil_matrix(X), y),
        svmcore.LinearSVMPlus(max_iter=20, random_state=0).fit(sp.dok_matrix(X), sp.bsr_matrix(X), y),
    ]
    kinds = (
        sp.csr_matrix,
        sp.csc_matrix,
        sp.coo_matrix,
        sp.dok_matrix,
        sp.lil_matrix,
        sp.bsr_matrix,
        sp.dia_matrix,
        sp.csr_array,
        sp.coo_array,
        sp.dok_array,
    )
    for m in models:
        dense = m.decision_function(X)
        for kind in kinds:
            np.testing.assert_allclose(m.decision_function(kind(X)), dense, atol=1e-9)
        for one_d in (sp.coo_array(X[0]), sp.dok_array(X[0])):
            with pytest.raises(ValueError, match=r"X: expected a 2-D sparse matrix, got shape \(361,\); Reshape"):
                m.decision_function(one_d)
        with pytest.raises(ValueError, match=r"X: expected a 2-D"):
            m.fit(sp.coo_array(X[0]), y[:1]) if not isinstance(m, svmcore.LinearSVMPlus) else m.fit(
                sp.coo_array(X[0]), X[:1], y[:1]
            )
