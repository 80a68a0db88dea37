"""facedet.detect: every kind of input a user holds gives the faces the command line finds in the same file;
the confidence of a calibrated model; clear errors."""

import json

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

import facedet
from facedet.calibration import calibrate_confidence, scan_items
from facedet.cli import app
from facedet.evaluate import read_annotations, reliability_table
from facedet.imageio import read_grey, read_rgb


@pytest.fixture(scope="module")
def photos(data_dir):
    scenes = data_dir / "scenes_annotated_dlib_voc" / "images"
    return [data_dir / "misc_faces_skimage" / "astronaut.png", sorted(scenes.iterdir())[0]]


def cli_boxes(path):
    r = CliRunner().invoke(app, ["detect", str(path), "--json"])
    assert r.exit_code == 0, r.output
    return np.array([[f[k] for k in "xywh"] for f in json.loads(r.stdout)[0]["faces"]], float).reshape(-1, 4)


def boxes(faces):
    return np.array([f.box for f in faces]).reshape(-1, 4)


def test_every_input_kind_finds_the_cli_faces(photos):
    for path in photos:
        expected = cli_boxes(path)
        assert len(expected), path  # a photo with faces: an empty result would agree trivially
        rgb = read_rgb(path)
        inputs = {
            "path": (str(path), "rgb"),
            "PIL": (Image.open(path), "rgb"),
            "grey": (read_grey(path), "rgb"),
            "RGB": (rgb, "rgb"),
            "BGR": (rgb[:, :, ::-1].copy(), "bgr"),
            "RGBA": (np.dstack([rgb, np.full(rgb.shape[:2], 255, np.uint8)]), "rgb"),
            "BGRA": (np.dstack([rgb[:, :, ::-1], np.full(rgb.shape[:2], 255, np.uint8)]), "bgr"),
            "float": (rgb / 255.0, "rgb"),
        }
        for kind, (image, color) in inputs.items():
            found = boxes(facedet.detect(image, color=color))
            np.testing.assert_array_equal(np.round(found), expected, err_msg=f"{path.name}: {kind}")


def test_bgr_taken_as_rgb_differs(photos):
    """The color argument matters: BGR pixels read as RGB give other grey levels (and other scores)."""
    rgb = read_rgb(photos[0])
    a = facedet.detect(rgb)
    b = facedet.detect(rgb[:, :, ::-1].copy())
    assert [f.score for f in a] != [f.score for f in b]


def test_faces_sorted_scan_options_and_to_dict(photos):
    faces = facedet.detect(photos[1])
    assert [f.score for f in faces] == sorted((f.score for f in faces), reverse=True)
    d = faces[0].to_dict()
    assert set(d) == {"x", "y", "w", "h", "score", "confidence"} and d["score"] == faces[0].score
    stricter = facedet.detect(photos[1], threshold=faces[0].score - 1e-3, min_neighbors=1)  # per-call scan options
    assert 0 < len(stricter) < len(faces)
    assert facedet.detect(photos[1], min_size=10_000) == []


def test_model_loaded_once_and_given_forms(photos, tmp_path):
    from facedet.api import _detector

    assert _detector(None) is _detector(None)
    det = facedet.load_default()
    path = tmp_path / "m.npz"
    det.with_params(threshold=det.threshold + 1.0).save(path)
    assert len(facedet.detect(photos[1], model=path)) < len(facedet.detect(photos[1], model=det))


def test_confidence_and_min_confidence(photos):
    det = facedet.load_default().with_params(platt=(-2.0, 1.0))
    faces = facedet.detect(photos[1], model=det)
    for f in faces:
        assert f.confidence == pytest.approx(1 / (1 + np.exp(-2.0 * f.score + 1.0)))
    cut = sorted(f.confidence for f in faces)[len(faces) // 2]
    kept = facedet.detect(photos[1], model=det, min_confidence=cut)
    assert kept == [f for f in faces if f.confidence >= cut] and len(kept) < len(faces)
    with pytest.raises(ValueError, match="min_confidence"):
        facedet.detect(photos[1], model=det.with_params(platt=None), min_confidence=0.5)


def test_clear_errors(photos, tmp_path):
    rgb = read_rgb(photos[0])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        facedet.detect(rgb.astype(np.float32))  # 0..255 floats
    with pytest.raises(ValueError, match="color"):
        facedet.detect(rgb, color="hsv")
    with pytest.raises(TypeError, match="uint8"):
        facedet.detect(rgb.astype(np.int32))
    with pytest.raises(TypeError, match="threshhold"):
        facedet.detect(rgb, threshhold=1.0)
    with pytest.raises(facedet.imageio.ImageError, match="missing.png: file not found"):
        facedet.detect(tmp_path / "missing.png")
    with pytest.raises(FileNotFoundError):
        facedet.detect(rgb, model=tmp_path / "missing.npz")
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    with pytest.raises(facedet.imageio.ImageError, match="bad.png"):
        facedet.detect(bad)


def test_calibrate_confidence_on_real_photos(data_dir):
    """Platt's fit on the detections of the annotated scenes' train split: at the optimum, the confidences sum
    to the targets' sum (the likelihood's gradient in B is zero), and they rise with the score."""
    scenes = data_dir / "scenes_annotated_dlib_voc"
    ann = read_annotations(scenes / "boxes.csv", split="train")
    items = [(read_grey(scenes / "images" / name), b, ig) for name, (b, ig) in ann.items()]
    det = facedet.load_default()
    calibrated, scores, is_face = calibrate_confidence(det, items, threshold=det.threshold - 1.5)
    assert calibrated.platt is not None and calibrated.platt[0] < 0
    n_pos, n_neg = int(is_face.sum()), int((~is_face).sum())
    assert n_pos > 5 and n_neg > 5
    conf = calibrated.confidence(scores)
    targets = n_pos * (n_pos + 1) / (n_pos + 2) + n_neg / (n_neg + 2)
    assert conf.sum() == pytest.approx(targets, rel=1e-3)
    order = np.argsort(scores)
    assert (np.diff(conf[order]) >= 0).all()
    # one scan at a lower threshold serves as well: the same detections, the same sigmoid (to float32 rounding: on
    # some CPUs OpenBLAS's float32 products round a window's score differently with the size of its batch, ~1e-7)
    windows = scan_items(det, items, det.threshold - 2.0)
    again, s2, f2 = calibrate_confidence(det, items, threshold=det.threshold - 1.5, windows=windows)
    assert again.platt == pytest.approx(calibrated.platt, rel=1e-6) and np.array_equal(f2, is_face)
    np.testing.assert_allclose(s2, scores, rtol=0, atol=1e-5)
    rows, ece = reliability_table(conf, is_face, bins=5)
    assert sum(r[2] for r in rows) == len(scores) and 0 <= ece < 0.5
    with pytest.raises(ValueError, match="both faces and false positives"):
        calibrate_confidence(det, [(g, np.zeros((0, 4))) for g, _, _ in items[:1]], threshold=-1.0)
