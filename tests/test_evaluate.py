"""facedet.evaluate: box matching, detection metrics and patch ROC, against scikit-learn, an independent
rasterised IoU, the VOC devkit's AP formula, the dlib XML annotations, and hand-checked cases."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from sklearn import metrics

from facedet.evaluate import (
    EvalResult,
    average_precision,
    detection_rate_at_fp,
    detection_rate_at_fpr,
    detection_roc,
    evaluate_detections,
    iou,
    listed_images,
    match_detections,
    plot_precision_recall,
    plot_reliability,
    plot_roc,
    read_annotations,
    read_image_sizes,
    roc_auc,
    roc_curve,
)
from facedet.imageio import read_rgb


@pytest.fixture(scope="module")
def boxes_csv(data_dir):
    return data_dir / "scenes_annotated_dlib_voc" / "boxes.csv"


def test_iou_hand_cases():
    a = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 0, 0]], float)
    b = np.array([[5, 5, 10, 10], [0, 0, 10, 10], [10, 0, 5, 5], [0, 0, 10, 20], [0, 0, 0, 0]], float)
    np.testing.assert_allclose(np.diag(iou(a, b)), [25 / 175, 1.0, 0.0, 0.5, 0.0])
    assert iou(a, np.zeros((0, 4))).shape == (5, 0)
    with pytest.raises(ValueError, match="shape"):
        iou(np.zeros((2, 3)), b)
    with pytest.raises(ValueError, match="widths and heights"):
        iou([[0, 0, -1, 4]], b)


def test_iou_against_rasterised_boxes(rasterise):
    rng = np.random.default_rng(0)
    a = np.c_[rng.integers(0, 20, (30, 2)), rng.integers(1, 15, (30, 2))].astype(float)
    b = np.c_[rng.integers(0, 20, (25, 2)), rng.integers(1, 15, (25, 2))].astype(float)
    ma, mb = [rasterise(x) for x in a], [rasterise(x) for x in b]
    ref = np.array([[(p & q).sum() / (p | q).sum() for q in mb] for p in ma])
    np.testing.assert_allclose(iou(a, b), ref)
    np.testing.assert_allclose(iou(np.c_[a, rng.random(30)], b), ref)  # score column ignored


def test_read_annotations_matches_dlib_xml(boxes_csv):
    folder = boxes_csv.parent
    every = read_annotations(boxes_csv)
    for split, xml in (("train", "training.xml"), ("test", "testing.xml")):
        ann = read_annotations(boxes_csv, split=split)
        images = ET.parse(folder / xml).getroot().find("images")
        expected = {
            im.get("file"): np.array(
                [[float(b.get(k)) for k in ("left", "top", "width", "height")] for b in im.findall("box")]
            )
            for im in images.findall("image")
        }
        assert list(ann) == list(expected)
        for name, (boxes, ignore) in ann.items():
            assert boxes.dtype == np.float64 and ignore.dtype == bool and not ignore.any()
            np.testing.assert_array_equal(boxes, expected[name])
            np.testing.assert_array_equal(every[name][0], boxes)
    assert len(every) == 9 and sum(len(b) for b, _ in every.values()) == 43
    assert sum(len(b) for b, _ in read_annotations(boxes_csv, split="test").values()) == 25


def test_read_image_sizes_are_the_real_images_sizes(boxes_csv, tmp_path):
    sizes = read_image_sizes(boxes_csv, split="test")
    assert list(sizes) == list(read_annotations(boxes_csv, split="test"))
    for name, (w, h) in sizes.items():
        assert read_rgb(boxes_csv.parent / "images" / name).shape[:2] == (h, w)
    bad = tmp_path / "b.csv"
    bad.write_text("image,x,y,w,h,img_width,img_height\na.jpg,1,1,5,5,640,4.5\n")
    with pytest.raises(ValueError, match="line 2: img_width, img_height must be whole numbers > 0"):
        read_image_sizes(bad)
    bad.write_text("image,x,y,w,h\na.jpg,1,1,5,5\n")
    assert read_image_sizes(bad) == {}


def test_read_annotations_ignore_and_faceless_rows(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text(
        "image,x,y,w,h,ignore\n"
        "a.jpg,1,2,3,4,0\na.jpg,5,6,7.5,8,TRUE\nb.jpg,1,1,2,2,\nempty.jpg,,,,,\nc.jpg,0,0,9,9,yes\n"
    )
    ann = read_annotations(path)
    assert list(ann) == ["a.jpg", "b.jpg", "empty.jpg", "c.jpg"]
    np.testing.assert_array_equal(ann["a.jpg"][0], [[1, 2, 3, 4], [5, 6, 7.5, 8]])
    np.testing.assert_array_equal(ann["a.jpg"][1], [False, True])
    assert ann["empty.jpg"][0].shape == (0, 4) and ann["empty.jpg"][1].shape == (0,)
    assert ann["c.jpg"][1].tolist() == [True]


@pytest.mark.parametrize(
    "text, message",
    [
        ("image,x,y,w\na.jpg,1,2,3\n", "missing column"),
        ("", "missing column"),
        ("image,x,y,w,h,X\na.jpg,1,2,3,4,999\n", "more than once"),
        ("image,x,y,w,h\na.jpg,1,2,three,4\n", "line 2: x, y, w, h must be numbers"),
        ("image,x,y,w,h\na.jpg,1,2,3,4\na.jpg,1,2,0,4\n", "line 3: box width and height must be > 0"),
        ("image,x,y,w,h\na.jpg,1,2,nan,4\n", "finite"),
        ("image,x,y,w,h\na.jpg,1,2,3\n", "line 2: expected 5 fields"),
        ("image,x,y,w,h\na.jpg,1,2,3,4,5\n", "line 2: expected 5 fields"),
        ("image,x,y,w,h\n,1,2,3,4\n", "empty image name"),
        ("image,x,y,w,h,ignore\na.jpg,1,2,3,4,maybe\n", "ignore must be"),
    ],
)
def test_read_annotations_malformed(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_annotations(path)


def test_read_annotations_bad_split(tmp_path, boxes_csv):
    with pytest.raises(ValueError, match=r"no rows with split 'val' \(splits present: test, train\)"):
        read_annotations(boxes_csv, split="val")
    path = tmp_path / "nosplit.csv"
    path.write_text("image,x,y,w,h\na.jpg,1,2,3,4\n")
    with pytest.raises(ValueError, match="no 'split' column"):
        read_annotations(path, split="test")
    with pytest.raises(FileNotFoundError):
        read_annotations(tmp_path / "missing.csv")


def test_match_greedy_by_score_one_to_one():
    truth = np.array([[0, 0, 10, 10], [100, 100, 10, 10]], float)
    dets = np.array(
        [
            [0, 0, 10, 10, 0.2],  # perfect overlap but lower score: the duplicate, a false positive
            [1, 1, 10, 10, 0.9],  # IoU 81/119, highest score: takes truth 0
            [100, 100, 10, 20, 0.5],  # IoU exactly 0.5 with truth 1: a hit (>=)
            [50, 50, 10, 10, 0.7],  # nothing there
        ]
    )
    m = match_detections(dets, truth)
    assert m["is_tp"].tolist() == [False, True, True, False]
    assert m["matched"].tolist() == [-1, 0, 1, -1]
    assert not m["is_ignored"].any()
    m = match_detections(dets, truth, iou_threshold=0.6)
    assert m["is_tp"].tolist() == [False, True, False, False]
    # a lower-scored detection falls back to the next unmatched truth box it overlaps enough
    two = np.array([[0, 0, 10, 10], [0, 2, 10, 10]], float)
    m = match_detections(np.array([[0, 1, 10, 10, 0.9], [0, 1, 10, 10, 0.8]]), two)
    assert m["matched"].tolist() == [0, 1] and m["is_tp"].all()
    # ties in score: input order decides
    m = match_detections(np.array([[0, 0, 10, 10, 0.5], [0, 0, 10, 10, 0.5]]), truth[:1])
    assert m["is_tp"].tolist() == [True, False]
    with pytest.raises(ValueError, match=r"\(k, 5\)"):
        match_detections(np.zeros((2, 4)), truth)
    with pytest.raises(ValueError, match="iou_threshold"):
        match_detections(dets, truth, iou_threshold=0)


def test_match_ignored_truth():
    truth = np.array([[0, 0, 10, 10], [30, 0, 10, 10], [2, 0, 10, 10]], float)
    ignore = np.array([False, True, True])
    dets = np.array(
        [
            [30, 0, 10, 10, 0.9],  # on the ignored box
            [31, 0, 10, 10, 0.8],  # a second one on it: also ignored, not a duplicate false positive
            [1, 0, 10, 10, 0.7],  # overlaps ignored box 2 (IoU .82) and real box 0 (IoU .82): the real one wins
            [1, 0, 10, 10, 0.6],  # real box taken; falls back to the ignored box 2: ignored
            [60, 0, 10, 10, 0.5],  # false positive
        ]
    )
    m = match_detections(dets, truth, ignore)
    assert m["is_tp"].tolist() == [False, False, True, False, False]
    assert m["is_ignored"].tolist() == [True, True, False, True, False]
    assert m["matched"].tolist() == [1, 1, 0, 2, -1]
    r = evaluate_detections({"x": dets}, {"x": (truth, ignore)})
    assert (r.n_truth, r.false_positives, r.n_detections, r.detection_rate) == (1, 1, 2, 1.0)
    assert r.per_image["x"] == (1, 1, 0)
    with pytest.raises(ValueError, match="ignore"):
        match_detections(dets, truth, ignore[:2])


def _voc_devkit_ap(rec, prec):
    # VOCdevkit VOCevaldet.m / VOCap.m (2010+): envelope, then sum over the points where recall changes
    mrec = np.r_[0.0, rec, 1.0]
    mpre = np.r_[0.0, prec, 0.0]
    for i in range(len(mpre) - 2, -1, -1):
        mpre[i] = max(mpre[i], mpre[i + 1])
    i = np.flatnonzero(mrec[1:] != mrec[:-1]) + 1
    return float(np.sum((mrec[i] - mrec[i - 1]) * mpre[i]))


def test_annotation_dicts_follow_the_csv_rules():
    dets = {"a": np.array([[0, 0, 10, 10, 1.0]])}  # as read_annotations refuses them in a CSV
    for ann, message in (
        ({"a": (np.array([[0, 0, 10, 10]] * 2), np.zeros(2, bool))}, "listed twice"),
        ({"a": (np.array([[0, 0, 0, 10]]), np.zeros(1, bool))}, "width and height > 0"),
        ({"a": np.array([[0, 0, 10, 10]])}, "expected \\(boxes"),
    ):
        with pytest.raises(ValueError, match=message):
            evaluate_detections(dets, ann)
    assert evaluate_detections(dets, {"a": (np.array([[0, 0, 10, 10]]), np.zeros(1, bool))}).detection_rate == 1.0


def test_average_precision_hand_and_devkit():
    assert average_precision([1.0, 0.5, 2 / 3], [0.25, 0.25, 0.5]) == pytest.approx(0.25 + 0.25 * 2 / 3)
    rng = np.random.default_rng(1)
    for _ in range(20):
        hits = rng.random(40) < 0.6
        n_truth = int(hits.sum()) + int(rng.integers(0, 5))
        tp, fp = np.cumsum(hits), np.cumsum(~hits)
        rec, prec = tp / n_truth, tp / (tp + fp)
        assert average_precision(prec, rec) == pytest.approx(_voc_devkit_ap(rec, prec))
    with pytest.raises(ValueError, match="non-decreasing"):
        average_precision([1, 1], [0.5, 0.2])
    for prec, rec in (([2.0], [0.5]), ([np.nan], [0.5]), ([1.0], [1.5])):  # 10.0 came out of ([2.], [5.])
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            average_precision(prec, rec)


def test_pr_curve_against_sklearn():
    rng = np.random.default_rng(2)
    n_images = 12
    annotations, detections = {}, {}
    for i in range(n_images):
        truth = np.c_[rng.integers(0, 400, (5, 2)) * 1.0, np.full((5, 2), 30.0)]
        # each truth box is found once with a jittered box, plus false alarms; scores rounded to make ties
        found = truth[rng.random(5) < 0.8] + np.r_[rng.integers(-3, 4, 2), 0, 0]
        clutter = np.c_[rng.integers(500, 900, (3, 2)) * 1.0, np.full((3, 2), 30.0)]
        boxes = np.r_[found, clutter]
        scores = np.round(rng.random(len(boxes)), 1) + 0.5 * (np.arange(len(boxes)) < len(found))
        annotations[f"im{i}"] = (truth, np.zeros(5, bool))
        detections[f"im{i}"] = np.c_[boxes, scores]
    r = evaluate_detections(detections, annotations)
    assert isinstance(r, EvalResult) and r.n_images == n_images and r.n_truth == 5 * n_images
    scores = np.concatenate([d[:, 4] for d in detections.values()])
    hits = np.concatenate([match_detections(detections[k], *annotations[k])["is_tp"] for k in annotations])
    assert r.false_positives == (~hits).sum() == 3 * n_images
    assert r.detection_rate == pytest.approx(hits.sum() / r.n_truth)
    prec, rec, thr = metrics.precision_recall_curve(hits, scores)
    # sklearn: thresholds increasing, recall over found faces only, a final (1, 0) point
    np.testing.assert_allclose(r.thresholds, thr[::-1])
    np.testing.assert_allclose(r.precision, prec[:-1][::-1])
    np.testing.assert_allclose(r.recall, rec[:-1][::-1] * hits.sum() / r.n_truth)
    # sklearn's AP does not interpolate, so it is a lower bound; with recall rescaled they coincide
    # when precision is already monotone
    ap_sk = metrics.average_precision_score(hits, scores) * hits.sum() / r.n_truth
    assert ap_sk <= r.average_precision + 1e-12
    assert r.average_precision == pytest.approx(_voc_devkit_ap(r.recall, r.precision))
    perfect = evaluate_detections({k: np.c_[a[0], np.ones(len(a[0]))] for k, a in annotations.items()}, annotations)
    assert (perfect.detection_rate, perfect.false_positives, perfect.average_precision) == (1.0, 0, 1.0)


def test_evaluate_real_annotations_shifted_boxes(boxes_csv, tmp_path):
    ann = read_annotations(boxes_csv, split="test")
    # the truth shifted by 20% of its width (IoU 0.667) is still a hit; by 40% (IoU 0.43) it is not
    dets = {
        k: np.r_[
            np.c_[b + [0.2, 0, 0, 0] * b[:, [2, 2, 2, 2]], np.full(len(b), 2.0)],
            np.c_[b + [0.4, 0, 0, 0] * b[:, [2, 2, 2, 2]], np.full(len(b), 1.0)],
        ]
        for k, (b, _) in ann.items()
    }
    r = evaluate_detections(dets, ann)
    assert (r.n_truth, r.detection_rate, r.false_positives, r.n_images) == (25, 1.0, 25, 5)
    assert r.thresholds.tolist() == [2.0, 1.0] and r.precision.tolist() == [1.0, 0.5]
    assert r.average_precision == 1.0
    r = evaluate_detections({k: d[d[:, 4] == 1.0] for k, d in dets.items()}, ann)
    assert (r.detection_rate, r.false_positives, r.average_precision) == (0.0, 25, 0.0)
    png = plot_precision_recall(evaluate_detections(dets, ann), tmp_path / "pr.png")
    img = read_rgb(png)
    assert img.shape == (450, 500, 3) and img.std() > 10
    # the suffix decides the format (a .jpg holds JPEG bytes), and one matplotlib cannot write is refused
    for name, magic in (("pr.jpg", b"\xff\xd8"), ("pr.pdf", b"%PDF"), ("pr", b"\x89PNG")):
        assert plot_precision_recall(r, tmp_path / name).read_bytes()[: len(magic)] == magic
    with pytest.raises(ValueError, match="cannot write a plot as .txt"):
        plot_precision_recall(r, tmp_path / "pr.txt")
    assert not (tmp_path / "pr.txt").exists()
    with pytest.raises(ValueError, match="no detections entry for 2008_002470.jpg"):
        evaluate_detections({k: d for k, d in list(dets.items())[1:]}, ann)
    with pytest.raises(ValueError, match="no annotations for other.jpg"):
        evaluate_detections({**dets, "other.jpg": np.zeros((0, 5))}, ann)


def test_roc_against_sklearn_with_ties():
    rng = np.random.default_rng(3)
    labels = rng.random(500) < 0.3
    scores = np.round(rng.normal(size=500) + labels, 1)
    fpr, tpr, thr = roc_curve(scores, labels)
    f, t, th = metrics.roc_curve(labels, scores, drop_intermediate=False)
    np.testing.assert_allclose(fpr, f)
    np.testing.assert_allclose(tpr, t)
    np.testing.assert_allclose(thr[1:], th[1:])
    assert roc_auc(scores, labels) == pytest.approx(metrics.roc_auc_score(labels, scores))
    assert roc_auc(scores, np.where(labels, 1, -1)) == pytest.approx(roc_auc(scores, labels.astype(int)))
    for level in (0.0, 0.01, 0.1, 0.5):
        assert detection_rate_at_fpr(scores, labels, level) == pytest.approx(t[f <= level].max())
    with pytest.raises(ValueError, match="one class"):
        roc_auc(scores, np.ones(500))
    with pytest.raises(ValueError, match="labels must be"):
        roc_auc(scores, rng.integers(0, 3, 500))
    with pytest.raises(ValueError, match="same length"):
        roc_curve(scores[:-1], labels)
    with pytest.raises(ValueError, match="fpr"):
        detection_rate_at_fpr(scores, labels, 1.5)


def test_roc_on_cbcl_test_set(data_dir):
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    X_train, y_train = d["X_train"].reshape(6977, -1) / 255.0, d["y_train"]
    X_test, y_test = d["X_test"].reshape(24044, -1) / 255.0, d["y_test"]
    # a template matcher: correlation with the mean training face
    template = X_train[y_train == 1].mean(0)
    template = (template - template.mean()) / template.std()
    Xc = X_test - X_test.mean(1, keepdims=True)
    scores = Xc @ template / (np.linalg.norm(Xc, axis=1) + 1e-9)
    assert len(scores) == 24044 and y_test.sum() == 472
    auc = roc_auc(scores, y_test)
    assert auc == pytest.approx(metrics.roc_auc_score(y_test, scores), abs=1e-12)
    assert 0.6 < auc < 1.0
    f, t, _ = metrics.roc_curve(y_test, scores)
    assert detection_rate_at_fpr(scores, y_test, 0.01) == pytest.approx(t[f <= 0.01].max())


# --- pinned by the mutation audit (branch mut-fd) ------------------------------------------------------------
def test_match_ties_in_iou_go_to_the_first_box_ignored_ones_too():
    # a detection exactly between two boxes (IoU 2/3 with each): the first box takes it, among real boxes and
    # among ignored ones alike (matched is reported per truth index)
    truth = np.array([[0, 0, 10, 10], [4, 0, 10, 10]], float)
    det = np.array([[2, 0, 10, 10, 1.0]])
    assert iou(det, truth)[0, 0] == iou(det, truth)[0, 1]
    for ignore in (None, np.array([True, True])):
        assert match_detections(det, truth, ignore)["matched"].tolist() == [0]
    m = match_detections(det, truth[::-1], np.array([True, True]))
    assert m["matched"].tolist() == [0] and m["is_ignored"].tolist() == [True]


def test_unmatched_detection_is_a_false_positive_when_the_first_box_is_ignored():
    # a detection overlapping nothing is a false positive whatever the flag of truth box 0
    truth = np.array([[0, 0, 10, 10], [50, 50, 10, 10]], float)
    dets = np.array([[200, 200, 10, 10, 0.9], [50, 50, 10, 10, 0.8], [1, 0, 10, 10, 0.7]])
    m = match_detections(dets, truth, np.array([True, False]))
    assert m["matched"].tolist() == [-1, 1, 0]
    assert m["is_tp"].tolist() == [False, True, False] and m["is_ignored"].tolist() == [False, False, True]
    r = evaluate_detections({"a": dets}, {"a": (truth, np.array([True, False]))})
    assert (r.n_truth, r.false_positives, r.n_detections, r.per_image["a"]) == (1, 1, 2, (1, 1, 0))


def test_iou_of_a_box_with_itself_is_exactly_one_and_ignore_flags_are_booleans():
    rng = np.random.default_rng(0)  # w * h and ((x + w) - x) * h differ in the last bit for most such boxes
    boxes = np.column_stack([rng.uniform(0, 1000, 1000), rng.uniform(0, 1000, 1000), rng.uniform(1, 200, (1000, 2))])
    assert (np.diag(iou(boxes, boxes)) == 1.0).all() and iou(boxes, boxes).max() == 1.0
    dets = np.column_stack([boxes, rng.random(1000)])
    assert match_detections(dets, boxes, iou_threshold=1.0)["is_tp"].all()
    truth = np.array([[0, 0, 10, 10.0]])
    assert match_detections([[0, 0, 10, 10, 1.0]], truth, [1])["is_ignored"].all()
    for bad in (["0"], ["false"], [0.4], [2]):  # astype(bool) read each as True: a real face dropped
        with pytest.raises(ValueError, match="ignore: expected booleans or 0/1"):
            match_detections([[0, 0, 10, 10, 1.0]], truth, bad)


@pytest.mark.parametrize("score", [np.inf, -np.inf, 3.0])
def test_tied_infinite_scores_are_one_point_of_the_curve(boxes_csv, score):
    # infinite scores are accepted (only NaN is refused). Tied at +-inf, the hits and the false positives were
    # split into several curve points (np.diff: inf - inf is NaN, which compares unequal to 0), so the order of
    # the ties set the curve and the AP: 0.703 (50 points) at +-inf against 0.5 (1 point) at any finite tied score
    ann = read_annotations(boxes_csv, split="test")
    dets = {
        k: np.r_[
            np.c_[b, np.full(len(b), score)], np.c_[b + [0.4, 0, 0, 0] * b[:, [2, 2, 2, 2]], np.full(len(b), score)]
        ]
        for k, (b, _) in ann.items()
    }
    r = evaluate_detections(dets, ann)
    assert (r.detection_rate, r.false_positives, r.n_detections) == (1.0, 25, 50)
    assert r.thresholds.tolist() == [score] and r.precision.tolist() == [0.5] and r.recall.tolist() == [1.0]
    assert r.average_precision == 0.5


def _ranked_case():
    """Three images, three faces to find (one more ignored), the third image without faces. Pooled and ranked (the
    detection on the ignored face left out): 0.9 hit, 0.85 FP (face-free image), 0.8 FP, 0.7 FP, 0.5 hit,
    0.3 hit and 0.3 FP (face-free image; tied), 0.2 FP (a second box on a found face)."""
    ann = {
        "a.png": (np.array([[0, 0, 10, 10], [20, 0, 10, 10.0]]), np.zeros(2, bool)),
        "b.png": (np.array([[0, 0, 10, 10], [50, 50, 10, 10.0]]), np.array([False, True])),
        "free.png": (np.zeros((0, 4)), np.zeros(0, bool)),
    }
    dets = {
        "a.png": np.array([[0, 0, 10, 10, 0.9], [100, 100, 10, 10, 0.8], [20, 0, 10, 10, 0.3], [0, 0, 10, 10, 0.2]]),
        "b.png": np.array([[80, 0, 10, 10, 0.7], [0, 0, 10, 10, 0.5], [50, 50, 10, 10, 0.6]]),
        "free.png": np.array([[0, 0, 10, 10, 0.85], [30, 30, 10, 10, 0.3]]),
    }
    return dets, ann


def test_detection_roc_and_rate_at_fp_hand_case():
    dets, ann = _ranked_case()
    r = evaluate_detections(dets, ann)
    assert (r.n_truth, r.detection_rate, r.false_positives) == (3, 1.0, 5)
    assert r.tp_counts.tolist() == [1, 1, 1, 1, 2, 3, 3] and r.fp_counts.tolist() == [0, 1, 2, 3, 3, 4, 5]
    fp, dr, thr = detection_roc(r)
    assert fp.tolist() == [0, 0, 1, 2, 3, 3, 4, 5] and fp.dtype == np.int64
    np.testing.assert_allclose(dr, np.array([0, 1, 1, 1, 1, 2, 3, 3]) / 3)
    assert thr.tolist() == [np.inf, 0.9, 0.85, 0.8, 0.7, 0.5, 0.3, 0.2]
    # at 3 false positives the last face is out of reach: it is tied with a false positive at 0.3
    at = detection_rate_at_fp(r, [0, 1, 2, 3, 4, 5, 100, np.inf])
    np.testing.assert_allclose(at, np.array([1, 1, 1, 2, 3, 3, 3, 3]) / 3)
    assert at.shape == (8,) and detection_rate_at_fp(r, 3.0) == pytest.approx(2 / 3)
    # without the face-free image, two false positives are gone from the count: every face found with 2
    without = evaluate_detections({k: dets[k] for k in ("a.png", "b.png")}, {k: ann[k] for k in ("a.png", "b.png")})
    np.testing.assert_allclose(detection_rate_at_fp(without, [0, 1, 2, 3]), np.array([1, 1, 3, 3]) / 3)
    for bad in (-1, [3, np.nan]):
        with pytest.raises(ValueError, match="fp_points must be counts >= 0"):
            detection_rate_at_fp(r, bad)
    # no faces to find: the rate is undefined
    free = evaluate_detections({"free.png": dets["free.png"]}, {"free.png": ann["free.png"]})
    assert np.isnan(detection_rate_at_fp(free, [0, 10])).all() and detection_roc(free)[0].tolist() == [0, 1, 2]
    nothing = evaluate_detections({k: np.zeros((0, 5)) for k in ann}, ann)
    assert detection_rate_at_fp(nothing, [0, 10]).tolist() == [0.0, 0.0]
    hand = EvalResult(1.0, 0, 1, 1, 1, np.array([1.0]), np.array([1.0]), np.array([0.5]), 1.0)
    with pytest.raises(ValueError, match="make it with evaluate_detections"):
        detection_rate_at_fp(hand, [10])


def test_plot_roc_writes_the_curve(tmp_path):
    dets, ann = _ranked_case()
    r = evaluate_detections(dets, ann)
    img = read_rgb(plot_roc(r, tmp_path / "roc.png", fp_points=[1, 3, 10]))
    assert img.shape == (450, 500, 3) and img.std() > 10
    assert plot_roc(r, tmp_path / "roc.pdf").read_bytes()[:4] == b"%PDF"
    with pytest.raises(ValueError, match="cannot write a plot as .txt"):
        plot_roc(r, tmp_path / "roc.txt")
    with pytest.raises(ValueError, match="fp_points"):
        plot_roc(r, tmp_path / "bad.png", fp_points=[-2])
    assert not (tmp_path / "roc.txt").exists() and not (tmp_path / "bad.png").exists()


def test_plot_reliability_draws_the_bins(tmp_path):
    rng = np.random.default_rng(0)
    confidence = rng.random(2000)
    is_face = rng.random(2000) < confidence  # calibrated by construction
    img = read_rgb(plot_reliability(confidence, is_face, tmp_path / "rel.png"))
    assert img.shape == (450, 500, 3) and img.std() > 10
    # a confidence that says the opposite draws other bars
    other = read_rgb(plot_reliability(1 - confidence, is_face, tmp_path / "other.png"))
    assert np.abs(other.astype(int) - img).sum() > 0
    with pytest.raises(ValueError, match="differ in length"):
        plot_reliability(confidence, is_face[:-1], tmp_path / "bad.png")
    assert not (tmp_path / "bad.png").exists()


def test_face_free_images_of_mit_cmu_count_in_the_roc(data_dir):
    """MIT+CMU's 13 images without faces have no row in its boxes.csv: evaluated as images with empty truth, a
    detection on each is a false positive that the listed images alone would not show."""
    folder = data_dir / "mit_cmu_frontal"
    ann = read_annotations(folder / "boxes.csv")
    files = sorted(p.name for p in (folder / "images").iterdir() if p.suffix == ".gif")
    free = [f for f in files if f not in listed_images(folder / "boxes.csv")]
    assert (len(files), len(ann), len(free)) == (130, 117, 13) and "wall.gif" in free
    ann = {**ann, **{f: (np.zeros((0, 4)), np.zeros(0, bool)) for f in free}}
    # every face found at its own box (score 1), and one box on each face-free image, scored above (2) or below (0)
    for fp_score, expected in ((2.0, [0.0, 0.0, 1.0, 1.0]), (0.0, [1.0, 1.0, 1.0, 1.0])):
        dets = {name: np.c_[boxes, np.ones(len(boxes))] for name, (boxes, _) in ann.items()}
        dets.update({f: np.array([[10, 10, 40, 40, fp_score]]) for f in free})
        r = evaluate_detections(dets, ann)
        assert (r.n_images, r.n_truth, r.false_positives, r.detection_rate) == (130, 510, 13, 1.0)
        assert detection_rate_at_fp(r, [0, 12, 13, 167]).tolist() == expected
    # the ignored face (under 20 px) neither counts nor adds a false positive when found
    assert sum(int(ignore.sum()) for _, ignore in ann.values()) == 1
