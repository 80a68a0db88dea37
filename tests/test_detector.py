"""Detector: the shipped model on astronaut.png, save/load, parameters, bootstrapping, box calibration."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from facedet import Detector, load_default
from facedet.bootstrap import bootstrap, mine_negatives
from facedet.calibration import best_windows, calibrate_box, choose_threshold
from facedet.detector import as_grey
from facedet.evaluate import iou, read_annotations
from facedet.imageio import read_grey, read_rgb
from facedet.patches import sample_windows
from facedet.training import fit_prefilter, train_detector, training_set

from conftest import CBCL_DETECTOR

# Hand-annotated eyebrows-to-chin box of the one face in astronaut.png (x, y, w, h).
ASTRONAUT_FACE = np.array([[182.0, 90.0, 86.0, 86.0]])


@pytest.fixture(scope="module")
def astro_path(data_dir):
    return data_dir / "misc_faces_skimage" / "astronaut.png"


@pytest.fixture(scope="module")
def negatives(data_dir):
    names = ["skimage/coffee.png", "opencv_samples/fruits.jpg", "dlib/dog.jpg"]
    return [read_grey(data_dir / "nonface_scenes" / n) for n in names]


@pytest.fixture(scope="module")
def small(data_dir, negatives):
    """A detector trained on 1,000 CBCL patches (a few seconds)."""
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    rng = np.random.default_rng(1)
    idx = np.r_[rng.choice(2429, 400, replace=False), 2429 + rng.choice(4548, 600, replace=False)]
    X, y = d["X_train"][idx], d["y_train"][idx].astype(np.int64)
    det, F, labels = train_detector(X, y, negative_images=negatives[:1], prefilter_params={"n_random": 300})
    return det, F, labels


def test_default_model_finds_the_astronaut(astro_path):
    det = load_default()
    boxes = det.detect(read_rgb(astro_path))
    assert boxes.shape == (1, 5), boxes
    assert iou(boxes[:, :4], ASTRONAUT_FACE)[0, 0] >= 0.5


def test_the_library_loads_the_default_model_without_the_cli(tmp_path, monkeypatch):
    """facedet.load_default is library code: it must not pull in the CLI (typer, rich)."""
    import subprocess
    import sys

    code = (
        "import sys, facedet; d = facedet.load_default(); "
        "print(d.threshold, sorted(m for m in ('typer', 'rich', 'facedet.cli') if m in sys.modules))"
    )
    monkeypatch.delenv("FACEDET_MODEL", raising=False)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split(" ", 1)[1].strip() == "[]"
    monkeypatch.setenv("FACEDET_MODEL", str(tmp_path / "missing.npz"))  # the override is honoured
    from facedet import default_model_path

    assert default_model_path() == tmp_path / "missing.npz"
    with pytest.raises(FileNotFoundError):
        load_default()


def test_default_model_on_a_scene(data_dir):
    det = load_default()
    scenes = data_dir / "scenes_annotated_dlib_voc"
    truth, _ = read_annotations(scenes / "boxes.csv", split="test")["2008_002470.jpg"]
    boxes = det.detect(read_grey(scenes / "images" / "2008_002470.jpg"))
    overlap = iou(boxes[:, :4], truth) >= 0.5
    assert overlap.any(axis=0).sum() == 6  # the shipped model finds all 6 faces here
    # and ranks them first: its one false positive (a 21-px box at the operating point chosen on Web Faces
    # val) scores below every face
    is_face = overlap.any(axis=1)
    assert len(boxes) <= 7 and boxes[~is_face, 4].max(initial=-np.inf) < boxes[is_face, 4].min()
    assert (np.diff(boxes[:, 4]) <= 0).all()  # best first


def test_rgb_and_grey_give_the_same_detections(small, astro_path, tmp_path):
    det = small[0]
    np.testing.assert_array_equal(as_grey(read_rgb(astro_path)), read_grey(astro_path))
    np.testing.assert_allclose(det.detect(read_rgb(astro_path)), det.detect(read_grey(astro_path)))
    # half transparent: an RGBA array is composited over white, as the file is by read_grey
    rgba = np.dstack(
        [read_rgb(astro_path), np.where(np.arange(512) < 256, 0, 255).astype(np.uint8)[None, :].repeat(512, axis=0)]
    )
    from PIL import Image

    Image.fromarray(rgba).save(tmp_path / "rgba.png")
    np.testing.assert_array_equal(as_grey(rgba), read_grey(tmp_path / "rgba.png"))


def test_save_load_roundtrip(small, astro_path, tmp_path):
    det = small[0].with_params(threshold=-0.5, box=(0.01, 0.1, 1.3))
    path = det.save(tmp_path / "m.npz")
    again = Detector.load(path)
    assert again.params() == det.params()
    g = read_grey(astro_path)
    np.testing.assert_array_equal(again.detect(g), det.detect(g))
    with np.load(path, allow_pickle=False) as z:  # plain arrays, no pickle
        assert "__header__" in z.files and "prefilter.weights" in z.files
    assert not list(tmp_path.glob("*.tmp"))


def test_load_errors(small, tmp_path):
    with pytest.raises(FileNotFoundError):
        Detector.load(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError):
        Detector.load(tmp_path / "junk.npz")
    small[0].classifier.save(tmp_path / "svc.npz")  # an svmcore model, not a detector
    with pytest.raises(ValueError, match="facedet-detector"):
        Detector.load(tmp_path / "svc.npz")


@pytest.mark.parametrize(
    "params,match",
    [
        ({"stride": 0}, "stride"),
        ({"scale_factor": 1.0}, "scale_factor"),
        ({"merge_iou": 0.0}, "merge_iou"),
        ({"min_neighbors": 0}, "min_neighbors"),
        ({"box": (0, 0, -1)}, "box"),
        ({"box": 1.0}, "box"),
        ({"min_size": 30, "max_size": 20}, "max_size"),
        ({"scale_factor": 1.0001}, "scale_factor"),  # 46,805 pyramid levels for a 512 px image: as good as a hang
        ({"stride": 10**9}, "stride"),
    ],
)
def test_bad_parameters(small, params, match):
    with pytest.raises((ValueError, TypeError), match=match):
        small[0].with_params(**params)


def test_bad_images(small):
    det = small[0]
    with pytest.raises(TypeError):
        det.detect(np.zeros((50, 50), np.float64))
    with pytest.raises(ValueError):
        det.detect(np.zeros((50, 50, 2), np.uint8))
    for path in ("photo.jpg", Path("photo.jpg")):  # a path, not pixels: the message names the reader
        with pytest.raises(TypeError, match="read_grey"):
            det.detect(path)
    assert det.detect(np.full((60, 80), 128, np.uint8)).shape == (0, 5)  # flat image: nothing
    # an image too small for any window is valid and has no faces (evaluate counts its faces as misses)
    for shape in ((10, 50), (1, 1), (0, 40)):
        assert det.detect(np.zeros(shape, np.uint8)).shape == (0, 5)


@pytest.mark.parametrize("edit", ["nan weights", "nan thresholds", "zero weights", "complex weights"])
def test_load_refuses_a_broken_prefilter(small, tmp_path, rewrite_model, edit):
    # such a cascade rejects every window: the model would load and silently find nothing
    path = tmp_path / "m.npz"
    small[0].save(path)

    def tamper(header, arrays):
        w, t = arrays["prefilter.weights"], arrays["prefilter.thresholds"]
        arrays["prefilter.weights"] = {
            "nan weights": np.full_like(w, np.nan),
            "zero weights": 0 * w,
            "complex weights": w.astype(complex),
        }.get(edit, w)
        arrays["prefilter.thresholds"] = np.full_like(t, np.nan) if edit == "nan thresholds" else t

    with pytest.raises(ValueError, match="Prefilter"):
        Detector.load(rewrite_model(path, tmp_path / "bad.npz", tamper))


def _edit_classifier(**params):
    return lambda h, a: h["classifier"]["params"].update(params)


@pytest.mark.parametrize(
    "edit,match",
    [
        # the cascade was silently dropped (the shipped model then found 5 boxes in astronaut.png, not 1)
        (
            lambda h, a: h.update(prefilter=False),
            r"the header says prefilter: false, but the file holds the "
            r"prefilter's arrays \(prefilter.weights, prefilter.thresholds\)",
        ),
        (lambda h, a: h.update(prefilter="yes"), r"prefilter: expected true or false, got 'yes'"),
        (lambda h, a: a.pop("prefilter.thresholds"), r"prefilter: true, but the file lacks prefilter.thresholds"),
        (lambda h, a: h.pop("prefilter"), r"prefilter: false, but the file holds"),  # (absent: no cascade)
        (lambda h, a: a.update({"scores": np.zeros(3)}), r"unknown arrays \['scores'\]"),
        (lambda h, a: h.update(featues="hog"), r"unknown header fields \['featues'\]"),  # (a typo, else ignored)
        (lambda h, a: h["classifier"].update(note="x"), "classifier must hold exactly class, params and meta"),
        # the kernel edited: scored at ~390 instead of ~4 (linear), or a gamma it did not use
        (_edit_classifier(kernel="linear"), r"gamma_ is 0.0035.*, but the linear kernel has no width"),
        (_edit_classifier(gamma=0.5), r"gamma_ is 0.0035.*, but gamma=0.5"),
        (lambda h, a: h["classifier"]["meta"].update(gamma_=0.5), r"gamma_ is 0.5, but gamma='auto' \(1/283 = "),
    ],
)
def test_load_refuses_a_header_that_does_not_describe_its_arrays(small, tmp_path, rewrite_model, edit, match):
    path = small[0].save(tmp_path / "m.npz")
    bad = tmp_path / "bad.npz"
    with pytest.raises(ValueError, match=match) as info:
        Detector.load(rewrite_model(path, bad, edit))
    assert str(info.value).startswith(f"{bad}: invalid facedet detector (")


def test_shipped_model_edited_to_drop_its_prefilter_is_refused_and_scan_settings_stay_editable(tmp_path, rewrite_model):
    from facedet import default_model_path

    with pytest.raises(ValueError, match="prefilter: false, but the file holds"):
        Detector.load(rewrite_model(default_model_path(), tmp_path / "bad.npz", lambda h, a: h.update(prefilter=False)))
    # the scanning parameters are the user's (as detect --threshold ...): an edited one is the model asked for
    ok = Detector.load(
        rewrite_model(
            default_model_path(),
            tmp_path / "ok.npz",
            lambda h, a: h["params"].update(threshold=0.5, min_neighbors=2, box=[0.0, 0.0, 1.5]),
        )
    )
    assert (ok.threshold, ok.min_neighbors, ok.box) == (0.5, 2, (0.0, 0.0, 1.5))
    assert ok.prefilter is not None and ok.classifier.support_.size == load_default().classifier.support_.size


def test_training_helpers_refuse_bad_input_before_any_work(small, negatives):
    det, F, labels = small
    X = np.zeros((4, 19, 19), np.uint8)
    for y, match in ((np.ones(4, int), "training needs both"), (np.ones((4, 1), int), "labels")):
        with pytest.raises(ValueError, match=match):
            training_set(X, y)
    for kw, match in (
        ({"features": F}, "without labels"),
        ({"labels": labels}, "without features"),
        ({"features": F[:, :10], "labels": labels}, "expected features"),
        ({"features": F, "labels": labels[:-1]}, "expected features"),
    ):
        with pytest.raises(ValueError, match=match):
            bootstrap(det, negatives, 1, **kw)
    with pytest.raises(ValueError, match="rounds"):
        bootstrap(det, negatives, -1, features=F, labels=labels)
    with pytest.raises(ValueError, match="no annotated"):
        choose_threshold(det, [])
    with pytest.raises(ValueError, match="no annotated face"):
        choose_threshold(det, [(negatives[0], np.zeros((0, 4)))])


def test_bootstrap_refuses_bad_labels_rows_and_counts_before_scanning(negatives, monkeypatch):
    # labels of 2, NaN rows or a float max_per_image failed only in the refit after a round of scanning; a
    # negative max_per_image silently dropped the lowest false positives ([:-1])
    det = load_default()
    F = det.classifier.support_vectors_[:20]
    labels = np.r_[np.ones(10, np.int64), np.zeros(10, np.int64)]
    with monkeypatch.context() as m:
        m.setattr(Detector, "scan_windows", lambda *a, **k: pytest.fail("scanned before the checks"))
        for kw, match in (
            ({"labels": labels * 2}, "labels must be 0"),
            ({"features": F * np.nan}, "finite"),
            ({"max_per_image": -1}, "max_per_image"),
            ({"max_per_image": 2.5}, "max_per_image"),
            ({"classifier_params": {"C": -1.0}}, "C: must be > 0"),
            ({"classifier_params": {"degree": 0}}, "degree"),
        ):
            with pytest.raises((ValueError, TypeError), match=match):
                bootstrap(det, negatives[:1], 1, **{"features": F, "labels": labels, **kw})
    with pytest.raises(ValueError, match="max_per_image"):
        mine_negatives(det, negatives[:1], max_per_image=-1)
    low = det.with_params(threshold=-1.0)
    win, n_win, _ = mine_negatives(low, negatives[:1], max_per_image=0)
    assert len(win) == 0 and n_win[0] > 0


def test_fit_prefilter_checks_windows_and_labels(data_dir, negatives):
    # -1/1 labels selected no non-face patches (the prefilter was fitted on random scene windows alone, silently);
    # a list of labels selected nothing at all; a short one was an IndexError
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    X, y = d["X_train"][np.r_[0:30, 3000:3030]], np.r_[np.ones(30, np.int64), np.zeros(30, np.int64)]
    for bad in (np.where(y == 1, 1, -1), y[:-1], y[:, None]):
        with pytest.raises(ValueError, match="labels"):
            fit_prefilter(X, bad, negatives[:1], n_random=50)
    a, b = fit_prefilter(X, y, n_random=0), fit_prefilter(X, list(y), n_random=0)
    np.testing.assert_array_equal(a.weights, b.weights)


def test_bootstrap_rounds_reduce_false_positives(small, negatives):
    det, F, labels = small
    det, F2, labels2, table = bootstrap(det, negatives, 1, features=F, labels=labels)
    assert len(table) == 2 and table[0].fp_windows > 0
    assert table[1].fp_windows < table[0].fp_windows
    assert len(F2) > len(F) and (labels2 == 0).sum() > (labels == 0).sum()
    # from the support vectors alone
    _, F3, _, table3 = bootstrap(small[0], negatives[:1], 1)
    assert len(F3) > small[0].classifier.support_.size and table3[1].fp_windows <= table3[0].fp_windows


def test_bootstrap_keeps_sample_weights(small, negatives):
    """Weighted rows keep their box C * w through the refits; mined rows get weight 1."""
    det, F, labels = small
    w = np.where(labels == 1, 3.0, 1.0)
    with pytest.raises(ValueError, match="sample_weight"):
        bootstrap(det, negatives[:1], 1, features=F, labels=labels, sample_weight=w[:-1])
    out, F2, labels2, _ = bootstrap(det, negatives[:1], 1, features=F, labels=labels, sample_weight=w)
    clf = out.classifier
    assert len(F2) > len(F)
    alpha = np.abs(np.ravel(clf.dual_coef_))
    w2 = np.r_[w, np.ones(len(F2) - len(F))][clf.support_]
    assert (alpha <= clf.C * w2 * (1 + 1e-9)).all()
    assert alpha[labels2[clf.support_] == 1].max() > clf.C * (1 + 1e-6)  # a face above C: its weight was used
    # the optimum of one weighted fit on the grown set (the refit started from the round's alphas, to tol)
    ref = type(clf)(**clf.get_params()).fit(F2, labels2, sample_weight=np.r_[w, np.ones(len(F2) - len(F))])
    assert clf.objective_ == pytest.approx(ref.objective_, rel=1e-5)
    np.testing.assert_allclose(clf.decision_function(F[:50]), ref.decision_function(F[:50]), atol=5e-3)


def test_box_calibration_on_train_split(data_dir):
    scenes = data_dir / "scenes_annotated_dlib_voc"
    ann = read_annotations(scenes / "boxes.csv", split="train")
    items = [(read_grey(scenes / "images" / n), b) for n, (b, _) in ann.items()]
    cbcl = Detector.load(CBCL_DETECTOR)  # its box map was fitted on these 18 faces
    det, n_faces = calibrate_box(cbcl, items)
    assert n_faces == 18 and 1.0 < det.box[2] < 2.0 and abs(det.box[0]) < 0.3 and abs(det.box[1]) < 0.3
    np.testing.assert_allclose(det.box, cbcl.box, atol=1e-9)
    # the best window of each face: its map is the median's input, and it outscores nearly every random
    # window of the same images
    win, rel = best_windows(cbcl, items)
    assert win.shape == (18, 19, 19) and win.dtype == np.uint8
    np.testing.assert_allclose(np.median(rel, axis=0), det.box)
    rand = np.concatenate([sample_windows(g, 300, np.random.default_rng(0)) for g, _ in items])
    assert np.median(det.score_windows(win)) > np.quantile(det.score_windows(rand), 0.99)


def test_choose_threshold_maximises_f1(small, data_dir, negatives):

    scenes = data_dir / "scenes_annotated_dlib_voc"
    truth, _ = read_annotations(scenes / "boxes.csv", split="train")["2007_007763.jpg"]
    items = [(read_grey(scenes / "images" / "2007_007763.jpg"), truth), (negatives[0], np.zeros((0, 4)))]
    det, rows = choose_threshold(small[0], items, candidates=[-0.5, 0.0, 0.5, 1.0], neighbors=(1, 3))
    ths, nbs, hits, fps = np.array(rows).T
    assert len(rows) == 8
    f1 = 2 * hits / (2 * hits + fps + len(truth) - hits)
    chosen = (ths == det.threshold) & (nbs == det.min_neighbors)
    assert chosen.sum() == 1 and f1[chosen][0] == f1.max()


def test_choose_threshold_checks_its_arguments_before_scanning(astro_path, monkeypatch):
    # empty or NaN candidates, neighbors () or (0,), a zero-width face box: an IndexError, a numpy reduction
    # error, NaN rows or an unmatchable face, each only after every image was scanned
    det, img = load_default(), read_grey(astro_path)[40:240, 120:320]
    face = ASTRONAUT_FACE - [120, 40, 0, 0]
    with monkeypatch.context() as m:
        m.setattr(Detector, "scan_windows", lambda *a, **k: pytest.fail("scanned before the checks"))
        for kw, match in (
            ({"candidates": []}, "candidates"),
            ({"candidates": [np.nan, 1.0]}, "candidates"),
            ({"neighbors": ()}, "neighbors"),
            ({"neighbors": (1, 0)}, "neighbors"),
            ({"items": [(img, [[100, 50, 0, 86]])]}, "width and height"),
            ({"items": [(img, [[np.nan, 50, 86, 86]])]}, "NaN"),
        ):
            with pytest.raises(ValueError, match=match):
                choose_threshold(det, **{"items": [(img, face)], **kw})
    rows = choose_threshold(det, [(img, face)], candidates=[1.0, 2.0], neighbors=(1,))[1]
    assert choose_threshold(det, ((i, t) for i, t in [(img, face)]), candidates=[1.0, 2.0], neighbors=(1,))[1] == rows
    assert rows[0][2] == 1  # the face is found


def test_plateau_top():
    from facedet.calibration import plateau_top

    f1 = np.array([[0.5, 0.6], [0.8, 0.8], [0.8, 0.8], [0.7, 0.8], [0.8, 0.8], [0.8, 0.7]])
    assert plateau_top(f1) == (4, 1)  # column 1 holds the longest run (rows 1-4): its last row
    assert plateau_top(f1[:, :1]) == (2, 0)  # two runs of length 2 (rows 1-2, 4-5): the first one's end
    assert plateau_top(np.array([[0.1], [0.3], [0.2]])) == (1, 0)  # a single maximum
    assert plateau_top(np.array([[0.4, 0.4], [0.4, 0.4]])) == (1, 0)  # ties: lower column


# --- the additive-kernel detector: PmSVM on HOG, scored by its lookup table -------------------------------
@pytest.fixture(scope="module")
def small_pmsvm(data_dir, negatives):
    """A PmSVM + HOG detector trained on 1,000 CBCL patches (about a second)."""
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    rng = np.random.default_rng(1)
    idx = np.r_[rng.choice(2429, 400, replace=False), 2429 + rng.choice(4548, 600, replace=False)]
    with warnings.catch_warnings():  # its binary problem uses up PmSVM's default 100 epochs; no test of convergence
        warnings.filterwarnings("ignore", "PmSVM: .* stopped at max_iter", RuntimeWarning)
        det, _, _ = train_detector(
            d["X_train"][idx],
            d["y_train"][idx].astype(np.int64),
            kind="pmsvm",
            negative_images=negatives[:1],
            prefilter_params={"n_random": 300},
        )
    return det


def test_pmsvm_scan_scores_are_the_lookup_table_decision(small_pmsvm, astro_path):
    from svmcore import PmSVM
    from facedet.features import hog_features
    from facedet.scoring import LUTScorer

    det = small_pmsvm.with_params(threshold=-1e9)
    clf = det.classifier
    assert isinstance(clf, PmSVM) and det.features == "hog" and isinstance(det._scorer, LUTScorer)
    boxes, windows = det.scan_windows(read_grey(astro_path), return_windows=True)
    assert len(boxes) > 100  # every window the prefilter passes
    np.testing.assert_allclose(boxes[:, 4], clf.decision_function(hog_features(windows)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(det.score_windows(windows), boxes[:, 4], rtol=1e-12, atol=1e-12)
    assert (boxes[:, 4] > 0).any() and (boxes[:, 4] < 0).any()


def test_pmsvm_detector_save_load_roundtrip(small_pmsvm, astro_path, tmp_path):
    import json

    det = small_pmsvm.with_params(threshold=0.3, min_neighbors=1)
    path = det.save(tmp_path / "pm.npz")
    again = Detector.load(path)
    assert type(again.classifier).__name__ == "PmSVM" and again.features == "hog"
    assert again.params() == det.params()
    np.testing.assert_array_equal(again.classifier.table_, det.classifier.table_)
    g = read_grey(astro_path)
    np.testing.assert_array_equal(again.detect(g), det.detect(g))
    with np.load(path, allow_pickle=False) as z:
        header = json.loads(z["__header__"].tobytes().decode("utf-8"))
        assert "classifier.coef_" in z.files and "classifier.table_" not in z.files  # table rebuilt on load
    assert header["features"] == "hog" and header["classifier"]["class"] == "PmSVM"
    assert again.classifier.x_max_.shape == (det.classifier.coef_.shape[1],)  # one unit per HOG feature


def test_pmsvm_detector_of_one_unit_for_all_features_loads(small_pmsvm, astro_path, tmp_path, rewrite_model):
    # detector files written before per-feature units hold the PmSVM's x_max_ as one number in the header
    from facedet.features import hog_features
    from svmcore.pmsvm import lut_decision

    det = small_pmsvm.with_params(threshold=-1e9)
    clf = det.classifier
    s = float(clf.x_max_.max())

    def old_file(h, a):
        del a["classifier.x_max_"]
        h["classifier"]["meta"]["x_max_"] = s

    old = Detector.load(rewrite_model(det.save(tmp_path / "pm.npz"), tmp_path / "old.npz", old_file))
    np.testing.assert_array_equal(old.classifier.x_max_, np.full(clf.coef_.shape[1], s))
    boxes, windows = old.scan_windows(read_grey(astro_path), return_windows=True)
    F = hog_features(windows)
    np.testing.assert_allclose(
        boxes[:, 4], lut_decision(F, clf.table_, s, clf.intercept_)[:, 0], rtol=1e-12, atol=1e-12
    )


def test_pmsvm_detector_without_lookup_table(small_pmsvm, astro_path, tmp_path):
    # lut_bins=None (or a table beyond TABLE_MAX_BYTES): no table_, so the detector scores by decision_function;
    # make_scorer asked the PmSVM for an SVC's kernel and failed with AttributeError
    import copy

    from facedet.features import hog_features

    clf = copy.deepcopy(small_pmsvm.classifier).set_params(lut_bins=None)
    det = Detector(clf, small_pmsvm.prefilter, **{**small_pmsvm.params(), "threshold": -1e9}, features="hog")
    boxes, windows = det.scan_windows(read_grey(astro_path), return_windows=True)
    np.testing.assert_allclose(boxes[:, 4], clf.decision_function(hog_features(windows)), rtol=1e-12, atol=1e-12)
    again = Detector.load(det.save(tmp_path / "nolut.npz"))
    g = read_grey(astro_path)
    np.testing.assert_array_equal(again.detect(g), det.detect(g))


def test_models_without_features_field_load_as_osuna(small, tmp_path):
    assert load_default().features == "osuna"  # written before the field existed
    det = Detector.load(small[0].save(tmp_path / "s.npz"))
    assert det.features == "osuna"


def test_detector_refuses_a_multiclass_svc(small):
    import svmcore

    X = small[1][:300]
    multi = svmcore.SVC(kernel="poly", degree=2, coef0=1.0).fit(X, np.arange(300) % 3)
    with pytest.raises(ValueError, match="two-class"):
        Detector(multi)


def test_classifier_and_features_must_match(small, small_pmsvm):
    with pytest.raises(ValueError, match="283 features"):
        Detector(small[0].classifier, features="hog")
    with pytest.raises(ValueError, match="324 features"):
        Detector(small_pmsvm.classifier, features="osuna")
    with pytest.raises(ValueError, match="features"):
        Detector(small[0].classifier, features="sift")


@pytest.mark.filterwarnings("ignore:PmSVM. .* stopped at max_iter:RuntimeWarning")  # as small_pmsvm's fit
def test_bootstrap_refits_a_pmsvm_on_its_features(small_pmsvm, data_dir, negatives):

    with pytest.raises(ValueError, match="no training rows"):
        bootstrap(small_pmsvm, negatives[:1], 1)
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    F, labels = training_set(d["X_train"][::7], d["y_train"][::7].astype(np.int64), features="hog")
    det, F2, labels2, table = bootstrap(small_pmsvm, negatives[:2], 1, features=F, labels=labels)
    assert F2.shape[1] == 324 and (labels2 == 0).sum() > (labels == 0).sum()
    assert type(det.classifier).__name__ == "PmSVM" and det.features == "hog"
    assert det.classifier.get_params() == small_pmsvm.classifier.get_params()
    assert table[1].fp_windows < table[0].fp_windows and table[0].n_support == 0


# --- pinned by the mutation audit (branch mut-fd) ------------------------------------------------------------
def test_windows_to_boxes_follows_the_box_map():
    # box (dx, dy, scale): a window of side s (its width) at (x, y) -> the square of side scale*s centred at
    # (x + s/2 + dx*s, y + s/2 + dy*s); the other columns are kept
    det = load_default().with_params(box=(0.1, -0.2, 1.5))
    win = np.array([[10.0, 20.0, 30.0, 31.0, 0.7], [0.0, 5.0, 19.0, 18.5, -1.0], [300.0, 7.0, 60.0, 60.0, 2.0]])
    out = det.windows_to_boxes(win)
    x, y, s = win[:, 0], win[:, 1], win[:, 2]
    np.testing.assert_allclose(out[:, 2], 1.5 * s)
    np.testing.assert_allclose(out[:, 3], 1.5 * s)
    np.testing.assert_allclose(out[:, 0] + out[:, 2] / 2, x + s / 2 + 0.1 * s)
    np.testing.assert_allclose(out[:, 1] + out[:, 3] / 2, y + s / 2 - 0.2 * s)
    np.testing.assert_array_equal(out[:, 4], win[:, 4])


def test_min_and_max_size_bound_the_face_boxes(astro_path):
    # min_size / max_size are face-box sides (window side times the box scale), in original pixels
    det = load_default().with_params(min_size=60, max_size=120, threshold=-1e9, refine=None)
    boxes = det.windows_to_boxes(det.scan_windows(read_grey(astro_path)))
    side = boxes[:, 2]
    assert len(boxes) and side.min() >= 60 * 0.98 and side.max() <= 120 * 1.02
    # the scan reaches both ends (within one pyramid step)
    assert side.min() < 60 * det.scale_factor and side.max() > 120 / det.scale_factor


def test_detector_refuses_a_prefilter_or_classes_it_cannot_use(small):
    det, F, labels = small
    import svmcore

    with pytest.raises(TypeError, match="prefilter: expected a facedet.scoring.Prefilter"):
        Detector(det.classifier, "abc")
    Detector(svmcore.SVC(kernel="linear").fit(F, np.where(labels == 1, 1, -1)))  # the SVM convention is fine
    for classes in ((0, 2), ("face", "non-face")):  # a score that would not mean "face" (or mean the opposite)
        clf = svmcore.SVC(kernel="linear").fit(F, np.where(labels == 1, classes[0], classes[1]))
        with pytest.raises(ValueError, match=r"classes \[0, 1\] or \[-1, 1\]"):
            Detector(clf)
