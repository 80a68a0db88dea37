"""CascadeSVC (Graf et al., NIPS 2004): the dual objective of a single SVC fit and the KKT conditions on all rows,
in-process and on a Dask cluster; the model is an ordinary SVC."""

import subprocess
import sys

import numpy as np
import pytest

import svmcore
from conftest import cbcl_sample
from svmcore.cascade import CascadeSVC

TOL = 1e-3


@pytest.fixture(scope="module")
def faces(cbcl):
    """2,000 CBCL training patches (faces and non-faces at random, pixels in [0, 1]) and 2,000 test patches."""
    return cbcl_sample(cbcl, 2000, 2000, seed=1)


@pytest.fixture(scope="module")
def single(faces):
    X, y, _, _ = faces
    return svmcore.SVC(C=1.0, tol=TOL).fit(X, y)


@pytest.fixture(scope="module")
def cascade(faces):
    X, y, _, _ = faces
    return CascadeSVC(C=1.0, tol=TOL, n_partitions=4, n_jobs=2).fit(X, y)


def rel_gap(a, b):
    return abs(a - b) / abs(b)


def check_kkt(model, X, y, C, tol):
    """The KKT conditions of the C-SVC dual on every row, from the decision values of the model (independent of
    the cascade's own check): y f >= 1 off the support vectors, y f <= 1 at the bound C, y f = 1 between."""
    yf = np.where(y == model.classes_[1], 1.0, -1.0) * model.decision_function(X)
    alpha = np.zeros(len(X))
    alpha[model.support_] = np.abs(model.dual_coef_[0])
    slack = tol + 1e-9
    assert (yf[alpha == 0] >= 1 - slack).all()
    assert (yf[alpha >= C] <= 1 + slack).all()
    free = (alpha > 0) & (alpha < C)
    assert free.any() and (np.abs(yf[free] - 1) <= slack).all()


def test_the_cascade_reaches_the_objective_of_a_single_fit_with_the_kkt_conditions_on_all_rows(faces, single, cascade):
    X, y, Xt, yt = faces
    assert rel_gap(cascade.objective_, single.objective_) < 1e-3
    assert cascade.converged_ and cascade.kkt_violation_ <= TOL
    check_kkt(cascade.svc_, X, y, 1.0, TOL)
    # gamma="scale" resolved once on all rows, as the single fit resolves it
    assert cascade.svc_.gamma_ == single.gamma_ == 1.0 / (X.shape[1] * X.var())
    assert abs(cascade.svc_.score(Xt, yt) - single.score(Xt, yt)) <= 0.005
    assert np.mean(cascade.predict(Xt) == single.predict(Xt)) >= 0.995
    # Graf et al., Sec. 3: no pass makes the objective worse (to the solver's tolerance)
    path = cascade.objective_path_
    assert len(path) == cascade.n_passes_ >= 1 and path[-1] == cascade.objective_
    assert (np.diff(path) <= 1e-6 * abs(path[0])).all()


def test_the_model_is_an_svc_of_all_rows_and_round_trips_through_save_and_load(faces, cascade, tmp_path):
    X, y, Xt, _ = faces
    svc = cascade.svc_
    assert type(svc) is svmcore.SVC
    assert svc.support_.dtype == np.int64 and (np.diff(svc.support_) > 0).all()
    np.testing.assert_array_equal(svc.support_vectors_, X[svc.support_])  # positions in the X given to fit
    np.testing.assert_array_equal(svc.classes_, [0, 1])
    assert np.sign(svc.dual_coef_[0]).tolist() == np.where(y[svc.support_] == 1, 1, -1).tolist()
    assert svc.kkt_violation_ == cascade.kkt_violation_
    loaded = svmcore.load(cascade.save(tmp_path / "cascade.npz"))
    assert type(loaded) is svmcore.SVC
    np.testing.assert_array_equal(loaded.decision_function(Xt), cascade.decision_function(Xt))
    np.testing.assert_array_equal(loaded.support_, svc.support_)
    assert loaded.objective_ == cascade.objective_


def test_on_a_dask_cluster_from_a_dask_array_and_from_numpy(faces, single, cascade):
    distributed = pytest.importorskip("distributed")
    import dask.array as da

    X, y, _, _ = faces
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        chunked = CascadeSVC(C=1.0, tol=TOL, client=client).fit(
            da.from_array(X, chunks=(500, 100)), da.from_array(y, chunks=700)
        )
        spread = CascadeSVC(C=1.0, tol=TOL, n_partitions=4, client=client).fit(X, y)
    for model in (chunked, spread):
        assert rel_gap(model.objective_, single.objective_) < 1e-3
        assert model.converged_ and model.kkt_violation_ <= TOL
    check_kkt(chunked.svc_, X, y, 1.0, TOL)
    assert chunked.svc_.gamma_ == pytest.approx(single.gamma_, rel=1e-12)  # Dask's variance of the chunks
    # the same partitions as in-process: the same sub-problems
    assert rel_gap(spread.objective_, cascade.objective_) < 1e-6


def test_a_dask_array_without_client_uses_its_chunks_in_process(faces, single):
    da = pytest.importorskip("dask.array")
    X, y, _, _ = faces
    model = CascadeSVC(C=1.0, tol=TOL, n_jobs=2).fit(da.from_array(X, chunks=(1000, 361)), y)
    assert rel_gap(model.objective_, single.objective_) < 1e-3 and model.converged_
    with pytest.raises(ValueError, match="NaN"):
        bad = X.copy()
        bad[1500, 3] = np.nan
        CascadeSVC().fit(da.from_array(bad, chunks=(1000, 361)), y)


def test_max_passes_stops_early_with_a_convergence_warning(faces, cascade):
    X, y, _, _ = faces
    assert cascade.n_passes_ > 1  # this problem needs the feedback
    with pytest.warns(svmcore.ConvergenceWarning, match="KKT violation"):
        model = CascadeSVC(C=1.0, tol=TOL, n_partitions=4, n_jobs=2, max_passes=1).fit(X, y)
    assert model.n_passes_ == 1 and not model.converged_ and model.kkt_violation_ > TOL
    assert model.objective_ > cascade.objective_


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_partitions": 0}, "n_partitions"),
        ({"max_passes": 0}, "max_passes"),
        ({"C": -1.0}, "C"),
        ({"kernel": "precomputed"}, "kernel"),
        ({"gamma": "wide"}, "gamma"),
        ({"tol": 0}, "tol"),
        ({"n_jobs": 0}, "n_jobs"),
        ({"random_state": -1}, "random_state"),
    ],
)
def test_bad_parameters_raise_value_error(faces, params, match):
    X, y, _, _ = faces
    with pytest.raises(ValueError, match=match):
        CascadeSVC(**params).fit(X[:50], y[:50])


def test_bad_data_raise_value_error(faces):
    X, y, _, _ = faces
    with pytest.raises(ValueError, match="at most 2 classes"):
        CascadeSVC().fit(X[:60], np.arange(60) % 3)
    with pytest.raises(ValueError, match="at least 2 classes"):
        CascadeSVC().fit(X[:60], np.ones(60))
    with pytest.raises(ValueError, match="NaN"):
        CascadeSVC().fit(np.full((60, 4), np.nan), np.arange(60) % 2)
    with pytest.raises(ValueError, match="labels for"):
        CascadeSVC().fit(X[:60], y[:59])
    with pytest.raises(svmcore.NotFittedError):
        CascadeSVC().predict(X[:5])
    with pytest.raises(TypeError, match="client"):
        CascadeSVC(client="tcp://host:8786").fit(X[:60], y[:60])


def test_numpy_fits_never_import_dask():
    code = (
        "import sys, numpy as np, svmcore\n"
        "X = np.random.default_rng(0).random((200, 5)); y = (X[:, 0] > 0.5).astype(int)\n"
        "assert svmcore.CascadeSVC(n_partitions=3).fit(X, y).converged_\n"
        "print('dask' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
