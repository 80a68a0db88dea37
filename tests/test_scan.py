"""Scoring, dense prefilter, pyramid scanning and merging, checked against brute force on real images."""

from pathlib import Path

import cv2
import numpy as np
import pytest
from sklearn.svm import SVC as SkSVC

from facedet.detector import Detector
from facedet.features import normalized_pixels, window_features
from facedet.imageio import read_grey
from facedet.merge import box_iou, merge_detections
from facedet.patches import augment
from facedet.scan import _MARGIN, cut_windows, prefilter_map, pyramid_scales, scan
from facedet.scoring import DecisionScorer, Prefilter, QuadraticScorer, make_scorer

from conftest import CBCL_DETECTOR


@pytest.fixture(scope="module")
def subset(data_dir):
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    rng = np.random.default_rng(0)
    idx = np.r_[rng.choice(2429, 300, replace=False), 2429 + rng.choice(4548, 400, replace=False)]
    return d["X_train"][idx], d["y_train"][idx].astype(int), d["X_test"][::40], d["y_test"][::40].astype(int)


@pytest.fixture(scope="module")
def svm(subset):
    from svmcore import SVC

    X, y, _, _ = subset
    return SVC(C=10.0, kernel="poly", degree=2, gamma="auto", coef0=1.0).fit(window_features(X), y)


@pytest.fixture(scope="module")
def prefilter(subset):
    X, y, _, _ = subset
    return Prefilter.fit(augment(X[y == 1], shifts=0), X[y == 0], recall=0.99, n_stages=3, min_nonfaces=20)


@pytest.fixture(scope="module")
def astro(data_dir):
    return read_grey(data_dir / "misc_faces_skimage" / "astronaut.png")


def test_quadratic_form_equals_kernel_expansion(subset, svm):
    _, _, Xt, _ = subset
    F = window_features(Xt)
    scorer = make_scorer(svm)
    assert isinstance(scorer, QuadraticScorer)
    np.testing.assert_allclose(scorer(F), svm.decision_function(F), rtol=0, atol=2e-5)  # float32 BLAS


def test_scorer_uses_the_fitted_kernel_after_set_params(subset, svm):
    import copy

    _, _, Xt, _ = subset  # the quadratic form must come from the kernel the model was fitted with
    F = window_features(Xt)
    changed = copy.deepcopy(svm).set_params(coef0=5.0)  # still a quadratic form, with another coef0
    np.testing.assert_allclose(make_scorer(changed)(F), svm.decision_function(F), rtol=0, atol=2e-5)


def test_scorer_of_csr_support_vectors(subset, svm):
    # an SVC fitted on CSR rows that stay sparse keeps CSR support vectors, which np.asarray cannot convert:
    # make_scorer raised ValueError (detectors train on dense patches, but any fitted SVC can be scored)
    import copy

    import scipy.sparse as sp

    _, _, Xt, _ = subset
    F = window_features(Xt)
    csr = copy.deepcopy(svm)
    csr.support_vectors_ = sp.csr_matrix(svm.support_vectors_)
    np.testing.assert_allclose(csr.decision_function(F), svm.decision_function(F), rtol=0, atol=1e-9)
    np.testing.assert_allclose(make_scorer(csr)(F), svm.decision_function(F), rtol=0, atol=2e-5)


@pytest.mark.parametrize("floor", [-1.0, 0.0, 1.0])
def test_quadratic_bound_is_exact_above_floor(data_dir, floor):
    # the shipped detector's SVM on 24,044 CBCL test windows: above the floor every score is exact; below,
    # the bound stands in, an upper bound <= floor; and it settles most windows
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    F = window_features(d["X_test"])
    scorer = Detector.load(CBCL_DETECTOR)._scorer
    exact = scorer(F)
    got = scorer(F, floor)
    above = exact > floor
    np.testing.assert_allclose(got[above], exact[above], atol=2e-5)
    settled = np.abs(got - exact) > 1e-4
    assert (got[settled] <= floor).all() and (got[settled] >= exact[settled] - 2e-5).all()
    assert settled.mean() > 0.5


@pytest.mark.parametrize("kernel, degree", [("poly", 2), ("poly", 1), ("linear", 2), ("rbf", 3)])
def test_scorer_against_libsvm(subset, kernel, degree):
    X, y, Xt, _ = subset
    F, Ft = window_features(X), window_features(Xt)
    ref = SkSVC(C=1.0, kernel=kernel, degree=degree, gamma=1 / 283, coef0=1.0).fit(F, y)
    scorer = make_scorer(ref)
    assert isinstance(scorer, DecisionScorer if kernel == "rbf" else QuadraticScorer)
    np.testing.assert_allclose(scorer(Ft), ref.decision_function(Ft), rtol=0, atol=2e-5)


def test_cut_windows_are_the_image_windows(astro):
    ys, xs = np.random.default_rng(0).integers(0, 512 - 18, (2, 500))
    ys[:2], xs[:2] = (0, 512 - 19), (512 - 19, 0)  # the corners reach both edges
    for level in (astro, astro.astype(np.float32) / 7):
        win = cut_windows(level, ys, xs)
        assert win.dtype == level.dtype and win.shape == (500, 19, 19)
        for k in (0, 1, 250, 499):
            np.testing.assert_array_equal(win[k], level[ys[k] : ys[k] + 19, xs[k] : xs[k] + 19])
    assert cut_windows(astro, [], []).shape == (0, 19, 19)
    for y, x in ((512 - 18, 0), (0, -1)):  # the window would leave the image
        with pytest.raises(IndexError):
            cut_windows(astro, [y], [x])


def test_prefilter_map_equals_window_scores(astro, prefilter):
    level = cv2.resize(astro, (300, 300), interpolation=cv2.INTER_AREA)
    score, norm = prefilter_map(level, prefilter)
    assert score.shape == norm.shape == (282, 282)
    ys, xs = np.mgrid[0:282:7, 0:282:5].reshape(2, -1)
    win = cut_windows(level, ys, xs)
    ref = prefilter.scores(win)[:, 0]
    flat = ~np.any(normalized_pixels(win), axis=1)
    np.testing.assert_allclose(score[ys, xs][~flat], ref[~flat], atol=1e-5)
    assert np.isinf(score[ys, xs][flat]).all()


@pytest.mark.parametrize("stride", [2, 3, 18, 19])  # 19: no row stays in the band from one grid row to the next
def test_prefilter_map_stride_is_the_subsampled_map(astro, prefilter, stride):
    level = cv2.resize(astro, (211, 187), interpolation=cv2.INTER_AREA)
    full = prefilter_map(level, prefilter)
    for a, b in zip(prefilter_map(level, prefilter, stride), full, strict=True):
        np.testing.assert_array_equal(a, b[::stride, ::stride])


def test_prefilter_map_refuses_small_levels_and_bad_strides(astro, prefilter):
    # were OpenCV's template assertion and a ZeroDivisionError inside numba
    for level in (astro[:18, :40], astro[:40, :18], astro[None, :40, :40]):
        with pytest.raises(ValueError, match="prefilter_map"):
            prefilter_map(level, prefilter)
    for stride in (0, -1):
        with pytest.raises(ValueError, match="stride"):
            prefilter_map(astro[:40, :40], prefilter, stride)
    assert prefilter_map(astro[:19, :19], prefilter)[0].shape == (1, 1)


def test_dense_stage1_screen_within_margin(astro):
    # scan drops windows whose dense (correlation) stage-1 score is _MARGIN below the threshold: the
    # correlation must agree with the exact stage score far within that margin (shipped 8-stage cascade)
    prefilter = Detector.load(CBCL_DETECTOR).prefilter
    level = cv2.resize(astro, (256, 256), interpolation=cv2.INTER_AREA)
    score, norm = prefilter_map(level, prefilter)
    ys, xs = np.nonzero(np.isfinite(score))
    ref = prefilter.scores(cut_windows(level, ys, xs))[:, 1]
    dense = (
        cv2.matchTemplate(level.astype(np.float32), prefilter.weights[1].astype(np.float32), cv2.TM_CCORR)[ys, xs]
        / norm[ys, xs]
    )
    assert np.abs(dense - ref).max() < _MARGIN / 100


def test_prefilter_keeps_faces_rejects_nonfaces(subset, prefilter):
    X, y, Xt, yt = subset
    ok = prefilter.accept(prefilter.scores(X))
    assert ok[y == 1].mean() >= 0.95 and ok[y == 0].mean() < 0.5


def test_prefilter_stages_are_fisher_discriminants_of_the_windows_passing_earlier_stages(data_dir):
    # stage k is Fisher's discriminant (scikit-learn's shrunk LDA) of the faces and non-faces that pass stages < k,
    # with its threshold at the recall quantile of those faces: a cascade, not k filters fitted on the same data
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    faces, nonfaces = d["X_train"][:2429:4], d["X_train"][2429:]  # 4548 non-faces: 215 pass stage 0, 23 stage 1
    pf = Prefilter.fit(faces, nonfaces, recall=0.99, n_stages=3, min_nonfaces=20)
    assert len(pf.weights) == 3
    zf, zn = normalized_pixels(faces), normalized_pixels(nonfaces)
    zf, zn = zf[np.any(zf, axis=1)], zn[np.any(zn, axis=1)]
    W = pf.weights.reshape(3, -1)
    sf, sn = zf @ W.T, zn @ W.T
    plane = np.column_stack([np.tile(np.arange(19), 19), np.repeat(np.arange(19), 19), np.ones(361)])
    for k in range(3):
        f, n = np.all(sf[:, :k] > pf.thresholds[:k], axis=1), np.all(sn[:, :k] > pf.thresholds[:k], axis=1)
        # pf's shrinkage 0.1 tr/p on the pooled covariance is sklearn's (1-s) cov + s tr/p with s = 1/11
        lda = LinearDiscriminantAnalysis(solver="lsqr", shrinkage=1 / 11).fit(
            np.r_[zf[f], zn[n]], np.r_[np.ones(f.sum()), np.zeros(n.sum())]
        )
        w = lda.coef_[0] - plane @ np.linalg.lstsq(plane, lda.coef_[0], rcond=None)[0]
        assert w @ W[k] / np.linalg.norm(w) > 0.999
        assert abs(np.mean(sf[f, k] > pf.thresholds[k]) - 0.99) < 0.005
    # min_nonfaces 1 once let a stage be fitted on one non-face (a NaN covariance); the cascade stops at 2
    assert len(Prefilter.fit(faces, nonfaces, recall=0.99, n_stages=8, min_nonfaces=1).weights) == 3


def test_pyramid_scales():
    s = pyramid_scales(480, 640, 1.2, min_window=20)
    assert s[0] == pytest.approx(20 / 19) and 19 * s[-1] <= 480 < 19 * s[-1] * 1.2
    assert np.allclose(np.diff(np.log(s)), np.log(1.2))
    assert pyramid_scales(480, 640, 1.2, min_window=20, max_window=100)[-1] * 19 <= 100
    with pytest.raises(ValueError):
        pyramid_scales(100, 100, 1.0)
    # a step close to 1 rounds neighbouring scales to the same level size: each size is scanned once
    s = pyramid_scales(512, 512, 1.01)
    sizes = [(round(512 / v), round(512 / v)) for v in s]
    assert len(set(sizes)) == len(sizes) and 19 * s[-1] <= 512 and len(s) > 200


def brute_force(grey, score_fn, scale_factor, min_window, stride=2):
    """Every window of every level, one at a time (the reference the batched scan must reproduce)."""
    H, W = grey.shape
    rows = []
    for s in pyramid_scales(H, W, scale_factor, min_window):
        size = (max(19, int(round(W / s))), max(19, int(round(H / s))))
        level = cv2.resize(grey, size, interpolation=cv2.INTER_AREA)
        sx, sy = W / size[0], H / size[1]
        for y in range(0, size[1] - 18, stride):
            for x in range(0, size[0] - 18, stride):
                w = level[y : y + 19, x : x + 19][None]
                rows.append([x * sx, y * sy, 19 * sx, 19 * sy, score_fn(w)])
    return np.array(rows)


def test_scan_equals_brute_force(astro, svm, prefilter):
    grey = astro[80:180, 170:280]
    scorer = make_scorer(svm)

    def svm_score(w):
        return svm.decision_function(window_features(w))[0]

    ref = brute_force(grey, svm_score, 1.3, 30)
    got = scan(grey, scorer, window_features, None, scale_factor=1.3, stride=2, min_window=30, threshold=-np.inf)
    np.testing.assert_allclose(got, ref, rtol=0, atol=2e-5)

    def cascade_score(w):
        return svm_score(w) if prefilter.accept(prefilter.scores(w))[0] else -np.inf

    ref = brute_force(grey, cascade_score, 1.3, 30)
    ref = ref[ref[:, 4] > 0]
    got, win = scan(
        grey,
        scorer,
        window_features,
        prefilter,
        scale_factor=1.3,
        stride=2,
        min_window=30,
        threshold=0.0,
        return_windows=True,
    )
    assert len(ref) > 0
    np.testing.assert_allclose(got, ref, rtol=0, atol=2e-5)
    np.testing.assert_allclose(scorer(window_features(win)), got[:, 4])


def _level_positions(boxes):
    """(level side, y, x) in level pixels of scan boxes in original pixels."""
    s = boxes[:, 2] / 19
    return np.column_stack([np.round(boxes[:, 2], 6), np.round(boxes[:, 1] / s), np.round(boxes[:, 0] / s)])


def _rows(a):
    return a[np.lexsort(a.T[::-1])]


@pytest.mark.parametrize("stride", [2, 3])  # 3: bands must start on the stride grid (20,000 // 243 px is even)
def test_large_levels_are_screened_in_bands_with_the_same_result(astro, svm, prefilter, monkeypatch, stride):
    import facedet.scan as scan_module

    scorer = make_scorer(svm)
    whole = scan(astro, scorer, window_features, prefilter, stride=stride, min_window=40, threshold=-np.inf)
    monkeypatch.setattr(scan_module, "_BAND_PIXELS", 20_000)  # bands of ~40 rows of a 512-wide level
    banded = scan(astro, scorer, window_features, prefilter, stride=stride, min_window=40, threshold=-np.inf)
    assert len(whole) > 800 // stride**2  # windows through the cascade, from every band
    np.testing.assert_array_equal(banded[np.lexsort(banded.T[::-1])], whole[np.lexsort(whole.T[::-1])])


def test_refine_is_stride_1_and_half_steps_next_to_promising_windows(astro, svm, prefilter):
    grey = astro[80:180, 170:280]
    scorer = make_scorer(svm)
    kw = dict(scale_factor=1.3, min_window=30)
    full = scan(grey, scorer, window_features, None, stride=1, threshold=-np.inf, **kw)
    pyramid = np.unique(np.round(full[:, 2], 6))
    # refine = -inf: every window is promising, so on the pyramid's levels the scan is the stride-1 scan
    got = scan(grey, scorer, window_features, None, stride=2, threshold=-np.inf, refine=-np.inf, **kw)
    on_levels = np.isin(np.round(got[:, 2], 6), pyramid)
    np.testing.assert_allclose(_rows(got[on_levels]), _rows(full), atol=2e-5)
    # and every half-step window has the score of that window cut from the half-step level
    half = got[~on_levels]
    assert len(half) and len(np.unique(np.round(half[:, 2], 6))) == len(pyramid) - 1
    for x, y, w, h, score in half[::25]:
        level = cv2.resize(
            grey, (int(round(grey.shape[1] * 19 / w)), int(round(grey.shape[0] * 19 / h))), interpolation=cv2.INTER_AREA
        )
        i, j = int(round(y * 19 / h)), int(round(x * 19 / w))
        assert scorer(window_features(level[i : i + 19, j : j + 19][None]))[0] == pytest.approx(score, abs=2e-5)
    # finite refine: on the levels, the grid windows above threshold plus the off-grid ones within 1 px of a
    # grid window scoring above refine (most off-grid windows are not, and are never scored)
    th, refine = 0.0, -0.5
    grid = scan(grey, scorer, window_features, None, stride=2, threshold=refine, **kw)
    got = scan(grey, scorer, window_features, None, stride=2, threshold=th, refine=refine, **kw)
    pf, pg = _level_positions(full), _level_positions(grid)
    on_grid = (pf[:, 1] % 2 == 0) & (pf[:, 2] % 2 == 0)
    near = np.array(
        [np.any((pg[:, 0] == a) & (np.abs(pg[:, 1] - b) <= 1) & (np.abs(pg[:, 2] - c) <= 1)) for a, b, c in pf]
    )
    expected = full[(full[:, 4] > th) & (on_grid | near)]
    assert (~on_grid & near & (full[:, 4] > th)).any() and near[~on_grid].mean() < 0.2
    on_levels = np.isin(np.round(got[:, 2], 6), pyramid)
    np.testing.assert_allclose(_rows(got[on_levels]), _rows(expected), atol=2e-5)
    assert (~on_levels).any() and (got[:, 4] > th).all()
    # the threshold only filters: a scan at a lower threshold holds every detection of a higher one
    low = scan(grey, scorer, window_features, None, stride=2, threshold=-1.0, refine=refine, **kw)
    np.testing.assert_allclose(_rows(low[low[:, 4] > th]), _rows(got), atol=2e-5)  # float32 BLAS batches
    # with a prefilter, every refined window passes it too
    got, win = scan(
        grey, scorer, window_features, prefilter, stride=2, threshold=th, refine=refine, return_windows=True, **kw
    )
    assert len(got) and prefilter.accept(prefilter.scores(win)).all()


def test_levels_on_several_threads_give_the_same_scan_and_restore_thread_settings(astro, svm, prefilter):
    import numba
    from threadpoolctl import threadpool_info

    scorer = make_scorer(svm)
    kw = dict(stride=2, min_window=24, threshold=-0.5, refine=-0.2, return_windows=True)
    before = numba.get_num_threads(), [p["num_threads"] for p in threadpool_info()]
    one, win1 = scan(astro, scorer, window_features, prefilter, threads=1, **kw)
    three, win3 = scan(astro, scorer, window_features, prefilter, threads=3, **kw)
    assert len(one) > 100 and len(np.unique(np.round(one[:, 2], 6))) > 10  # windows from many levels
    np.testing.assert_array_equal(three, one)  # same windows, same order, same scores to the last bit
    np.testing.assert_array_equal(win3, win1)
    assert (numba.get_num_threads(), [p["num_threads"] for p in threadpool_info()]) == before
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="threads"):
            scan(astro, scorer, window_features, prefilter, threads=bad)


def test_overlapping_scans_restore_blas_threads_and_a_failed_level_cancels_the_rest(astro, svm, prefilter, monkeypatch):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info

    import svmcore.parallel as par

    scorer = make_scorer(svm)
    grey = astro[40:260, 120:340]
    before = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    ref = scan(grey, scorer, window_features, prefilter, stride=2, min_window=24, threads=1)
    with ThreadPoolExecutor(2) as callers:  # two scans at once, each on two threads, many times
        runs = list(
            callers.map(
                lambda _: scan(grey, scorer, window_features, prefilter, stride=2, min_window=24, threads=2), range(12)
            )
        )
    assert all(np.array_equal(r, ref) for r in runs)
    assert [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"] == before

    # a failed level stops the scan. The biggest batch (the first level's) holds one thread until no level is
    # left pending (all started or cancelled); the next level fails at once. Its thread may take one more level
    # before the error is seen, and that level holds it too: so at most 3 levels start whatever the timing.
    # Waiting for the levels in order would wait on the first forever (the 30 s guard: a deadlock, not a timing).
    sizes = []
    scan(
        astro,
        lambda X, floor=-np.inf: sizes.append(len(X)) or np.zeros(len(X)),
        window_features,
        prefilter,
        stride=2,
        min_window=24,
        threads=1,
    )
    calls, stuck, lock, failed, settled = [], [], threading.Lock(), threading.Event(), threading.Event()
    real_wait = par.wait

    def watched_wait(futures, **kw):  # the map's futures: settled once none is left to start
        def check(_):
            if all(f.running() or f.done() for f in futures):
                settled.set()

        for f in futures:
            f.add_done_callback(check)  # a cancelled future calls it too
        return real_wait(futures, **kw)

    def failing(X, floor=-np.inf):
        with lock:
            calls.append(len(X))
            fail_now = len(X) != max(sizes) and not failed.is_set()
            if fail_now:
                failed.set()
        if not fail_now:
            stuck.append(not settled.wait(30))
        raise RuntimeError("scorer failed")

    monkeypatch.setattr(par, "wait", watched_wait)
    with pytest.raises(RuntimeError, match="scorer failed"):
        scan(astro, failing, window_features, prefilter, stride=2, min_window=24, threads=2)
    assert len(sizes) >= 15 and max(sizes) in calls and not any(stuck) and len(calls) <= 3


def test_levels_fall_back_to_one_thread_under_numba_workqueue(data_dir):
    # two threads running parallel kernels abort the process under numba's workqueue layer (checked)
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, numba; from facedet import load_default; from facedet.imageio import read_grey; "
        f"g = read_grey({str(data_dir / 'misc_faces_skimage' / 'astronaut.png')!r})[40:260, 120:340]; "
        "d = load_default(); a, b = d.detect(g, threads=1), d.detect(g, threads=2); "
        "print(numba.threading_layer(), len(a), np.array_equal(a, b))"
    )  # threads=2 asked: a warning
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}
    r = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["workqueue", "1", "True"] and "workqueue threading layer" in r.stderr
    assert "running on one thread" in r.stderr


def test_scan_rejects_bad_image(svm):
    with pytest.raises(ValueError):
        scan(np.zeros((50, 50), np.float32), make_scorer(svm), window_features)


def test_merge_equals_the_greedy_definition_on_many_windows():
    """The compiled grouping against the definition written out (strongest box first, it takes every remaining
    box at IoU >= iou), on 2,000 overlapping windows with tied scores."""
    rng = np.random.default_rng(0)
    side = rng.uniform(19, 60, 2000)
    dets = np.c_[rng.uniform(0, 400, (2000, 2)), side, side, np.round(rng.normal(size=2000), 1)]
    rest, want = dets[np.argsort(-dets[:, 4], kind="stable")], []
    while len(rest):
        member = box_iou(rest[0], rest) >= 0.3
        member[0] = True
        want.append([*rest[member, :4].mean(axis=0), rest[0, 4], member.sum()])
        rest = rest[~member]
    want = np.array(want)
    for nb in (1, 3):
        np.testing.assert_allclose(merge_detections(dets, 0.3, nb), want[want[:, 5] >= nb], rtol=1e-12)


def test_merge_refuses_nan_scores():
    with pytest.raises(ValueError, match="NaN"):  # it would fall out of the greedy order unnoticed
        merge_detections([[0, 0, 10, 10, np.nan], [1, 1, 10, 10, 1.0]])


def test_merge_groups_overlapping_boxes():
    dets = np.array(
        [
            [10, 10, 20, 20, 1.0],
            [12, 11, 20, 20, 2.0],
            [11, 9, 22, 22, 0.5],
            [100, 100, 30, 30, 0.7],
            [300, 5, 19, 19, 0.1],
        ]
    )
    m = merge_detections(dets, iou=0.3, min_neighbors=1)
    assert m.shape == (3, 6)
    np.testing.assert_allclose(m[0], [11, 10, 20.666666666666668, 20.666666666666668, 2.0, 3])
    assert list(m[:, 5]) == [3, 1, 1]
    assert len(merge_detections(dets, iou=0.3, min_neighbors=2)) == 1
    assert merge_detections(np.empty((0, 5))).shape == (0, 6) and merge_detections([]).shape == (0, 6)
    for bad, kw in (
        (dets, {"min_neighbors": 0}),
        (dets, {"min_neighbors": 2.5}),
        (np.r_[dets, [[0, 0, -1, 5, 1.0]]], {}),
        (np.r_[dets, [[np.nan, 0, 5, 5, 1.0]]], {}),
    ):
        with pytest.raises((ValueError, TypeError)):
            merge_detections(bad, **kw)
    np.testing.assert_allclose(
        box_iou(np.array([0, 0, 10, 10.0]), np.array([[5, 0, 10, 10.0], [20, 20, 1, 1.0]])), [1 / 3, 0]
    )
    with pytest.raises(ValueError):
        merge_detections(np.zeros((3, 4)))


# --- pinned by the mutation audit (branch mut-fd) ------------------------------------------------------------
def test_a_window_the_size_of_the_image_is_scanned(data_dir, svm):
    # the top pyramid level is the one whose window exactly fits the image (19 s == min(H, W))
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    face = d["X_test"][3]
    scorer = make_scorer(svm)
    ref = svm.decision_function(window_features(face[None]))[0]
    np.testing.assert_allclose(
        scan(face, scorer, window_features, None, threshold=-np.inf), [[0, 0, 19, 19, ref]], atol=2e-5
    )
    big = cv2.resize(face, (38, 38), interpolation=cv2.INTER_LINEAR)  # scales 1 and 2 exactly
    assert pyramid_scales(38, 38, 2.0) == [1.0, 2.0]
    got = scan(big, scorer, window_features, None, scale_factor=2.0, threshold=-np.inf)
    top = cv2.resize(big, (19, 19), interpolation=cv2.INTER_AREA)
    np.testing.assert_allclose(got[-1], [0, 0, 38, 38, svm.decision_function(window_features(top[None]))[0]], atol=2e-5)


def test_cascade_stages_are_exact_at_their_thresholds(astro, svm):
    # the scan's cascade (dense stage 0, screened stage 1, exact later stages) against the plain per-window test
    # w_k'z > t_k on every window of a level, with stage 1's threshold moved to 1e-4 below one window's score:
    # that window passes by a hair (the stage-1 screen's margin is 1e-3); the first 3 stages of the shipped cascade
    shipped = Detector.load(CBCL_DETECTOR).prefilter
    grey = astro[80:180, 170:280]
    s = 30 / 19  # one pyramid level (min_window = max_window = 30)
    H, W = grey.shape
    size = (int(round(W / s)), int(round(H / s)))
    level = cv2.resize(grey, size, interpolation=cv2.INTER_AREA)
    ys, xs = np.mgrid[0 : size[1] - 18 : 2, 0 : size[0] - 18 : 2].reshape(2, -1)
    S = Prefilter(shipped.weights[:3], shipped.thresholds[:3]).scores(cut_windows(level, ys, xs))
    t = shipped.thresholds[:3].copy()
    passing = np.flatnonzero(np.all(S > t, axis=1))
    i = passing[np.argmin(S[passing, 1])]  # the passing window nearest to stage 1's threshold
    t[1] = S[i, 1] - 1e-4
    ok = np.all(S > t, axis=1)
    assert ok[i] and 0 < ok.sum() < len(ok)
    assert (np.all(S[:, :2] > t[:2], axis=1) & (S[:, 2] <= t[2])).any()  # stage 2 decides some windows
    got = scan(
        grey,
        make_scorer(svm),
        window_features,
        Prefilter(shipped.weights[:3], t),
        stride=2,
        min_window=30,
        max_window=30,
        threshold=-np.inf,
    )
    sx, sy = W / size[0], H / size[1]
    assert np.allclose(got[:, 2], 19 * sx) and np.allclose(got[:, 3], 19 * sy)
    pos = {(int(round(y / sy)), int(round(x / sx))) for x, y in got[:, :2]}
    assert pos == {(int(a), int(b)) for a, b in zip(ys[ok], xs[ok], strict=True)}


def test_refine_scores_exactly_the_windows_its_definition_names(astro, svm):
    # refine, on a level: the stride grid and the windows within stride - 1 px of a grid window above `refine`;
    # off the levels: the 3x3 windows around the centre (in original pixels) of every window above `refine` on level
    # k or k + 1, cut from the half-step level s_k sqrt(scale_factor); written out from that definition
    grey = astro[80:180, 170:280]  # not square: x and y scale differently
    H, W = grey.shape
    kw = dict(scale_factor=1.3, min_window=30, stride=2)
    refine = -0.5
    got = scan(grey, make_scorer(svm), window_features, None, threshold=-np.inf, refine=refine, **kw)
    scales = pyramid_scales(H, W, 1.3, 30)
    sides = [19 * W / max(19, int(round(W / s))) for s in scales]
    on_level = [np.isclose(got[:, 2], side) for side in sides]
    for k, s in enumerate(scales):  # on a level: the grid, plus every window within 1 px of a grid window above refine
        rows = got[on_level[k]]
        size = (max(19, int(round(W / s))), max(19, int(round(H / s))))
        sx, sy = W / size[0], H / size[1]
        nx, ny = size[0] - 18, size[1] - 18
        pos = np.rint(rows[:, [1, 0]] / [sy, sx]).astype(int)
        grid = (pos % 2 == 0).all(axis=1)
        seeds = pos[grid & (rows[:, 4] > refine)]
        expected = {(y, x) for y in range(0, ny, 2) for x in range(0, nx, 2)}
        expected |= {
            (y + dy, x + dx)
            for y, x in seeds
            for dy in (-1, 0, 1)
            for dx in (-1, 0, 1)
            if 0 <= y + dy < ny and 0 <= x + dx < nx
        }
        assert len(rows) == len(expected) and {tuple(p) for p in pos} == expected
    n_half = 0
    for k in range(len(scales) - 1):
        seeds = got[(on_level[k] | on_level[k + 1]) & (got[:, 4] > refine)]
        cx, cy = seeds[:, 0] + seeds[:, 2] / 2, seeds[:, 1] + seeds[:, 3] / 2
        s = scales[k] * np.sqrt(1.3)
        size = (max(19, int(round(W / s))), max(19, int(round(H / s))))
        sx, sy = W / size[0], H / size[1]
        expected = set()
        for y0, x0 in zip(np.rint(cy / sy - 9.5), np.rint(cx / sx - 9.5), strict=True):
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    y, x = int(y0 + dy), int(x0 + dx)
                    if 0 <= y <= size[1] - 19 and 0 <= x <= size[0] - 19:
                        expected.add((y, x))
        half = got[np.isclose(got[:, 2], 19 * sx)]
        assert len(half) == len(expected) > 0
        assert {(int(round(y / sy)), int(round(x / sx))) for x, y in half[:, :2]} == expected
        n_half += len(half)
    assert n_half == (~np.any(on_level, axis=0)).sum()  # nothing else off the pyramid's levels


def test_threshold_and_stage_thresholds_are_strict(astro, prefilter):
    # "above the threshold": a score equal to it is out, in the scan and in every stage of the cascade
    grey = astro[80:180, 170:280]
    zero = lambda X, floor=-np.inf: np.zeros(len(X))  # noqa: E731
    assert scan(grey, zero, window_features, None, min_window=60, threshold=0.0).shape == (0, 5)
    assert len(scan(grey, zero, window_features, None, min_window=60, threshold=-1e-12)) > 0
    t = prefilter.thresholds
    assert not prefilter.accept(t[None]).any()
    assert prefilter.accept(t[None] + 1e-12).all()
    for k in range(len(t)):  # one stage exactly at its threshold rejects the window
        row = t + 1e-9
        row[k] = t[k]
        assert not prefilter.accept(row[None])[0]


def test_box_iou_of_non_square_boxes_and_merging_at_exactly_the_iou(rasterise):
    rng = np.random.default_rng(4)
    boxes = np.c_[rng.integers(0, 20, (40, 2)), rng.integers(1, 15, (40, 2))].astype(float)
    masks = [rasterise(b) for b in boxes]
    for i in range(0, 40, 7):
        ref = [(masks[i] & m).sum() / (masks[i] | m).sum() for m in masks]
        np.testing.assert_allclose(box_iou(boxes[i], boxes), ref)
    # IoU exactly 0.5 (a box and its upper half): merged at iou=0.5, not above it
    dets = np.array([[0, 0, 10, 20, 1.0], [0, 0, 10, 10, 0.5]])
    assert box_iou(dets[0], dets[1:, :4])[0] == 0.5
    np.testing.assert_allclose(merge_detections(dets, iou=0.5), [[0, 0, 10, 15, 1.0, 2]])
    assert len(merge_detections(dets, iou=0.51)) == 2


def test_bands_at_stride_1_keep_every_window_row(astro, svm, prefilter, monkeypatch):
    # with stride 1 the last window row of a band needs all WINDOW - 1 extra pixel rows (with stride >= 2 one
    # of them is slack, which the band test above cannot see)
    import facedet.scan as scan_module

    grey = astro[40:260, 120:340]
    scorer = make_scorer(svm)
    kw = dict(stride=1, min_window=40, max_window=40, threshold=-np.inf)
    whole = scan(grey, scorer, window_features, prefilter, **kw)
    monkeypatch.setattr(scan_module, "_BAND_PIXELS", 2_000)  # bands of ~19 rows of a ~104-wide level
    banded = scan(grey, scorer, window_features, prefilter, **kw)
    assert len(whole) > 50
    np.testing.assert_array_equal(_rows(banded), _rows(whole))


def test_prefilter_of_raw_template_weights_is_made_plane_free(data_dir, astro):
    # a cascade built from any filter (here the mean CBCL face, which has a large constant part): its stage is
    # projected off the plane, so the dense map (one correlation of the raw image over the norm) is the
    # per-window score w'z
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    template = d["X_train"][d["y_train"] == 1].mean(axis=0)
    pf = Prefilter(template[None] / np.linalg.norm(template), [0.0])
    w = pf.weights[0]
    for basis in (np.ones((19, 19)), np.mgrid[0:19, 0:19][0], np.mgrid[0:19, 0:19][1]):
        assert abs((w * basis).sum()) < 1e-9
    level = cv2.resize(astro, (120, 100), interpolation=cv2.INTER_AREA)
    score, _ = prefilter_map(level, pf)
    ys, xs = np.mgrid[0:82:3, 0:102:4].reshape(2, -1)
    ref = pf.scores(cut_windows(level, ys, xs))[:, 0]
    ok = np.isfinite(score[ys, xs])
    assert ok.mean() > 0.9
    np.testing.assert_allclose(score[ys, xs][ok], ref[ok], atol=1e-5)


def test_scan_uses_only_what_the_scorer_promises_below_the_floor(astro, svm):
    # a scorer may return any value <= floor for the windows below it (the QuadraticScorer's bound): with
    # refine below threshold, the floor must be refine, or windows under it would seed the refine step
    grey = astro[80:180, 170:280]
    kw = dict(scale_factor=1.3, min_window=30, stride=2, threshold=0.5, refine=-0.5)
    rows = {"exact": 0, "clamped": 0}

    def exact(X, floor=-np.inf):
        rows["exact"] += len(X)
        return svm.decision_function(X)

    def clamped(X, floor=-np.inf):  # the least informative answer the contract allows
        rows["clamped"] += len(X)
        return np.maximum(svm.decision_function(X), floor)

    a = scan(grey, exact, window_features, None, **kw)
    b = scan(grey, clamped, window_features, None, **kw)
    assert len(a) > 0 and rows["exact"] == rows["clamped"]
    np.testing.assert_array_equal(_rows(b), _rows(a))


def test_scan_and_merge_parameters_are_checked(svm, astro):
    for kwargs, err, match in (
        ({"stride": 1.5}, TypeError, "stride: expected an integer"),
        ({"threshold": np.nan}, ValueError, "threshold: must be a number"),
        ({"refine": np.nan}, ValueError, "refine: must be a number"),
        ({"scale_factor": 1.000001}, ValueError, "scale_factor: must be >= 1.01"),
        ({"min_window": np.nan}, ValueError, "min_window: must be finite"),
    ):
        with pytest.raises(err, match=match):
            scan(astro, make_scorer(svm), window_features, **kwargs)
    with pytest.raises(TypeError, match="iou: expected a real number"):
        merge_detections(np.zeros((0, 5)), "0.3")


def test_a_half_step_of_the_size_of_a_level_scores_its_windows_once(data_dir):
    # audit 25: with a step close to 1, half steps round to the size of a pyramid level or of each other (levels
    # under ~50 px at 1.02), so refine scored the same window of the same level twice. The rows came out twice,
    # and merging counted them as two windows: a lone window passed min_neighbors=2 (2008_007676.jpg, the face at
    # 314,122), and 132 of the 263 rows of this face crop of 2008_004176.jpg were repeats
    det = Detector.load(CBCL_DETECTOR).with_params(scale_factor=1.02)
    grey = read_grey(data_dir / "scenes_annotated_dlib_voc" / "images" / "2008_004176.jpg")[73:128, 181:236]
    rows, win = det.scan_windows(grey, return_windows=True)
    keys = {tuple(np.round(r[:4], 6)) for r in rows}
    assert len(rows) > 100 and len(keys) == len(rows)
    assert len({np.round(w, 6) for w in rows[:, 2]}) > 15  # windows from many levels and half steps
    # the same windows as before, once each: every row is the window it names, with its score
    H, W = grey.shape
    for x, y, w, h, score in rows[::7]:
        level = cv2.resize(grey, (int(round(W * 19 / w)), int(round(H * 19 / h))), interpolation=cv2.INTER_AREA)
        i, j = int(round(y * 19 / h)), int(round(x * 19 / w))
        assert det.score_windows(level[i : i + 19, j : j + 19][None])[0] == pytest.approx(score, abs=2e-5)
    one = read_grey(data_dir / "scenes_annotated_dlib_voc" / "images" / "2008_007676.jpg")[113:168, 305:360]
    lone = det.with_params(min_neighbors=2)
    assert len(lone.scan_windows(one)) == 1 and len(lone.detect(one)) == 0


def test_flat_windows_pass_no_stage_of_any_cascade(data_dir):
    # audit 25: the dense scan gives flat windows (residual RMS < MIN_CONTRAST) stage-0 score -inf, but
    # Prefilter.scores gave them 0, which passes a stage of negative threshold: with a one-stage cascade (the shipped
    # stage 0, threshold -0.037) the grid dropped them and refine's off-grid and half-step windows (Prefilter.accept)
    # kept them. Histogram equalization stretches their noise over [-1, 1], so the SVM scores them anywhere: up to
    # 1.5 on this crop of moon.png (3,373 off-grid flat windows there), 1.16 on 2008_001009.jpg
    shipped = Detector.load(CBCL_DETECTOR)
    one = Prefilter(shipped.prefilter.weights[:1], shipped.prefilter.thresholds[:1])
    assert one.threshold < 0
    grey = read_grey(data_dir / "nonface_scenes" / "skimage" / "moon.png")[:120, :160]
    rows, win = scan(
        grey,
        shipped._scorer,
        window_features,
        one,
        scale_factor=1.3,
        stride=2,
        min_window=19,
        threshold=-100.0,
        refine=-100.0,
        return_windows=True,
    )
    flat = ~np.any(normalized_pixels(win), axis=1)
    assert len(rows) > 10_000 and not flat.any()
    # the per-window rule agrees with the dense map: flat windows of the level are -inf, and pass no stage
    level = cv2.resize(grey, (123, 92), interpolation=cv2.INTER_AREA)
    ys, xs = np.mgrid[0:74, 0:105].reshape(2, -1)
    windows = cut_windows(level, ys, xs)
    flat = ~np.any(normalized_pixels(windows), axis=1)
    score, _ = prefilter_map(level, one)
    S = one.scores(windows)
    assert flat.sum() > 100 and np.isneginf(S[flat]).all() and np.isneginf(score.ravel()[flat]).all()
    np.testing.assert_array_equal(one.accept(S), score.ravel() > one.threshold)
