"""The exact reduced set of a quadratic-kernel SVM: the decision function of a real face SVM kept to rounding
with at most d + 1 vectors; saved and loaded like any SVC; refused where it cannot hold."""

import numpy as np
import pytest

import svmcore
from facedet.bootstrap import bootstrap, keeps_training_rows
from facedet.detector import Detector
from facedet.features import window_features
from svmcore.reduced import reduce_quadratic

from conftest import cbcl_sample


@pytest.fixture(scope="module")
def face_svm(cbcl):
    """A poly-2 SVC on 3,000 CBCL windows in the detector's features (283 values a window): hundreds of SVs."""
    X, y, Xt, _ = cbcl_sample(cbcl, 3000, 2000)
    F, Ft = (window_features((A * 255).round().astype(np.uint8).reshape(-1, 19, 19)) for A in (X, Xt))
    svc = svmcore.SVC(kernel="poly", degree=2, gamma="auto", coef0=1.0, C=0.3).fit(F, y)
    return svc, Ft


def test_same_decision_function_with_at_most_d_plus_1_vectors(face_svm, tmp_path):
    svc, Ft = face_svm
    d = Ft.shape[1]
    assert svc.support_vectors_.shape[0] > d + 1  # else nothing is reduced
    red = reduce_quadratic(svc)
    assert red.support_vectors_.shape[0] <= d + 1 and (red.support_ == -1).all()
    f, g = svc.decision_function(Ft), red.decision_function(Ft)
    np.testing.assert_allclose(g, f, rtol=0, atol=1e-9 * np.abs(f).max())
    assert (red.predict(Ft) == svc.predict(Ft)).mean() > 0.999  # (a window exactly at 0 may flip)
    assert red.intercept_ == svc.intercept_ and red.objective_ == svc.objective_
    red.save(tmp_path / "r.npz")
    np.testing.assert_array_equal(svmcore.load(tmp_path / "r.npz").decision_function(Ft), g)


def test_refused_where_it_cannot_hold(face_svm, cbcl):
    svc, Ft = face_svm
    X, y, _, _ = cbcl_sample(cbcl, 300, 10)
    for params, what in (
        ({"kernel": "rbf"}, "kernel='poly'"),
        ({"kernel": "poly", "degree": 3}, "degree 3"),
        ({"kernel": "poly", "degree": 2, "coef0": 0.0}, "coef0 0.0"),
    ):
        with pytest.raises(ValueError, match=what):
            reduce_quadratic(svmcore.SVC(**params).fit(X, y))
    with pytest.raises(ValueError, match="two-class"):
        reduce_quadratic(svmcore.SVC(kernel="poly", degree=2, coef0=1.0).fit(X, np.arange(len(y)) % 3))
    with pytest.raises(svmcore.NotFittedError):
        reduce_quadratic(svmcore.SVC(kernel="poly", degree=2, coef0=1.0))


def test_bootstrap_does_not_take_a_reduced_set_for_training_rows(face_svm):
    svc, _ = face_svm
    red = reduce_quadratic(svc)
    assert keeps_training_rows(svc) and not keeps_training_rows(red)
    with pytest.raises(ValueError, match="keeps no training rows"):
        bootstrap(Detector(red), [np.zeros((40, 40), np.uint8)], 1)
