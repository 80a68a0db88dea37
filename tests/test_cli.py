"""The facedet command: detect (table, JSON, annotated images, bad files), train, bootstrap, evaluate, exit codes."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from typer.main import get_command as typer_command
from typer.testing import CliRunner

from facedet.cli import app
from facedet.imageio import read_rgb, write_image

from conftest import CBCL_DETECTOR

runner = CliRunner()


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Tables fold long paths at the terminal's width (80 columns under the runner); the tests read names
    whole wherever the repository lives."""
    from facedet.cli import common as cli

    monkeypatch.setattr(cli.out, "width", 1000)


@pytest.fixture(scope="module")
def astro(data_dir):
    return data_dir / "misc_faces_skimage" / "astronaut.png"


@pytest.fixture(scope="module")
def small_npz(data_dir, tmp_path_factory):
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    idx = np.r_[0:300, 2429:2829]
    path = tmp_path_factory.mktemp("patches") / "small.npz"
    np.savez(path, X=d["X_train"][idx], y=d["y_train"][idx])
    return path


@pytest.fixture(scope="module")
def small_model(small_npz, tmp_path_factory):
    out = tmp_path_factory.mktemp("model") / "small.npz"
    r = runner.invoke(app, ["train", "--data", str(small_npz), "--out", str(out), "--C", "5"])
    assert r.exit_code == 0, r.output
    assert "trained on 300 faces (600 with mirrors) and 400 non-faces" in r.stdout  # rows really fit
    return out


def test_detect_json_default_model(astro):
    r = runner.invoke(app, ["detect", str(astro), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res[0]["image"] == str(astro) and (res[0]["width"], res[0]["height"]) == (512, 512)
    assert len(res[0]["faces"]) == 1
    f = res[0]["faces"][0]
    assert set(f) == {"x", "y", "w", "h", "score", "confidence"} and isinstance(f["x"], int)
    assert isinstance(f["score"], float) and 0.9 < f["confidence"] <= 1  # the shipped model is calibrated


def test_detect_reads_an_image_file_on_standard_input(astro, tmp_path):
    by_path = json.loads(runner.invoke(app, ["detect", str(astro), "--json"]).stdout)[0]
    r = runner.invoke(app, ["detect", "-", "--json", "--out", str(tmp_path)], input=astro.read_bytes())
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)[0]
    assert res["image"] == "-" and res["faces"] == by_path["faces"] and len(res["faces"]) == 1
    assert res["annotated"] == str(tmp_path / "stdin.faces.png") and (tmp_path / "stdin.faces.png").is_file()
    r = runner.invoke(app, ["detect", "-", "--json"], input=b"not an image")
    assert r.exit_code == 1 and json.loads(r.stdout)[0]["error"].startswith("-: not an image")


def test_version():
    import facedet

    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout == f"facedet {facedet.__version__}\n"


def test_detect_scan_overrides(astro):
    # a coarse scan (every other pyramid level, twice the stride, no refinement) scores a subset of the
    # windows: the face's score can only drop
    from facedet import load_default

    det = load_default()
    fine = json.loads(runner.invoke(app, ["detect", str(astro), "--json"]).stdout)[0]["faces"]
    r = runner.invoke(
        app,
        [
            "detect",
            str(astro),
            "--json",
            "--scale-factor",
            str(det.scale_factor**2),
            "--stride",
            str(2 * det.stride),
            "--refine",
            "off",
            "--threshold",
            "-1",
            "--min-neighbors",
            "1",
        ],
    )
    assert r.exit_code == 0, r.output
    coarse = json.loads(r.stdout)[0]["faces"]
    assert len(fine) == 1 and coarse and max(f["score"] for f in coarse) <= fine[0]["score"] + 1e-6
    # the face box is 87 px: a size range that excludes it finds nothing, one that includes it the same box
    for max_size, expect in ((80, []), (200, fine)):
        r = runner.invoke(app, ["detect", str(astro), "--json", "--max-size", str(max_size)])
        assert r.exit_code == 0 and json.loads(r.stdout)[0]["faces"] == expect, r.output
    for bad in (
        ["--stride", "0"],
        ["--scale-factor", "1"],
        ["--refine", "maybe"],
        ["--threads", "0"],
        ["--max-size", "10"],
    ):
        r = runner.invoke(app, ["detect", str(astro), *bad])
        assert r.exit_code == 2 and "error" in r.output.lower()
    r = runner.invoke(app, ["detect", str(astro), "--json", "--threads", "1"])
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["faces"] == fine  # the boxes do not depend on it


def test_detect_bad_files_reported_rest_processed(astro, tmp_path):
    junk = tmp_path / "junk.jpg"
    junk.write_bytes(b"this is not an image")
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(astro.read_bytes()[:5000])
    r = runner.invoke(app, ["detect", str(junk), str(astro), str(truncated), str(tmp_path / "missing.png"), "--json"])
    assert r.exit_code == 1
    res = json.loads(r.stdout)
    assert [x["image"] for x in res] == [str(junk), str(astro), str(truncated), str(tmp_path / "missing.png")]
    assert [sorted(x) for x in res] == [
        ["error", "image"],
        ["faces", "height", "image", "width"],
        ["error", "image"],
        ["error", "image"],
    ]
    assert "file not found" in res[3]["error"] and len(res[1]["faces"]) == 1
    assert "junk.jpg" in r.stderr and "cut.png" in r.stderr and "missing.png" in r.stderr


def test_detect_table_and_annotated_output(astro, tmp_path):
    r = runner.invoke(app, ["detect", str(astro), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert "astronaut.png" in r.stdout and "512x512" in r.stdout
    assert f"wrote {tmp_path / 'out' / 'astronaut.faces.png'}" in r.stdout  # people are told where it went too
    img = read_rgb(tmp_path / "out" / "astronaut.faces.png")
    assert img.shape == (512, 512, 3) and not np.array_equal(img, read_rgb(astro))
    # the label sits on a filled strip above the box; --no-labels leaves that strip as it was
    face = json.loads(runner.invoke(app, ["detect", str(astro), "--json"]).stdout)[0]["faces"][0]
    r = runner.invoke(app, ["detect", str(astro), "--out", str(tmp_path / "plain.png"), "--no-labels"])
    plain, orig = read_rgb(tmp_path / "plain.png"), read_rgb(astro)
    strip = np.s_[face["y"] - 8 : face["y"] - 3, face["x"] + 3 : face["x"] + 20]
    assert np.array_equal(plain[strip], orig[strip]) and not np.array_equal(img[strip], orig[strip])
    r = runner.invoke(app, ["detect", str(astro), "--out", str(tmp_path / "one.jpg"), "--threshold", "1e9"])
    assert r.exit_code == 0 and (tmp_path / "one.jpg").is_file()


def test_usage_errors(astro, tmp_path, small_npz):
    assert runner.invoke(app, ["detect", str(astro), "--model", str(tmp_path / "none.npz")]).exit_code == 2
    assert runner.invoke(app, ["detect", str(astro), "--bogus"]).exit_code == 2
    assert runner.invoke(app, ["detect"]).exit_code == 2
    r = runner.invoke(app, ["train", "--data", str(small_npz), "--faces", str(tmp_path), "--out", "x.npz"])
    assert r.exit_code == 2
    assert runner.invoke(app, ["train", "--out", str(tmp_path / "x.npz")]).exit_code == 2
    assert (
        runner.invoke(
            app, ["train", "--data", str(small_npz), "--out", str(tmp_path / "x.npz"), "--gamma", "big"]
        ).exit_code
        == 2
    )
    # errors name the options the user typed; a precomputed kernel cannot score windows
    for extra, message in (
        (["--scale-factor", "0.5"], "--scale-factor: must be >= 1.01"),
        (["--C", "-1"], "--C: must"),
        (["--kernel", "precomputed"], "--kernel: unknown value 'precomputed'"),
    ):
        r = runner.invoke(app, ["train", "--data", str(small_npz), "--out", str(tmp_path / "x.npz"), *extra])
        assert r.exit_code == 2 and message in r.stderr, (extra, r.stderr)


@pytest.mark.parametrize("command", ["train", "bootstrap", "detect", "evaluate", "calibrate"])
def test_help_explains_every_option(command):
    r = runner.invoke(app, [command, "--help"])
    assert r.exit_code == 0
    assert "--out" in r.stdout or command == "evaluate"


@pytest.mark.parametrize(
    "command",
    [[], *([name] for name in typer_command(app).commands)],
    ids=lambda command: " ".join(["facedet", *command]),
)
def test_every_help_states_the_exit_codes(command):
    # only `facedet --help` stated them (and without 130); each command's page now does, from one text
    r = runner.invoke(app, [*command, "--help"])
    text = " ".join(r.stdout.split())  # (rich wraps the epilog at 80 columns)
    assert r.exit_code == 0
    assert re.search(
        r"Exit codes: 0 success; 1 if \S.* could not be read \(each is reported on stderr, the others "
        r"are processed\) or an output could not be written; 2 usage error \(a bad option, or a missing "
        r"or unusable \S[^;]*(; also if [^)]+)?\); 130 interrupted \(Ctrl-C\)\.",
        text,
    ), text[-600:]


def test_train_and_bootstrap(small_model, small_npz, data_dir, tmp_path, astro):
    from facedet import Detector

    det = Detector.load(small_model)
    assert det.classifier.kernel == "poly" and det.classifier.C == 5
    negs = tmp_path / "negs"
    (negs / "dlib").mkdir(parents=True)  # subfolders are searched, as in ../shared/data/nonface_scenes
    shutil.copy(data_dir / "nonface_scenes" / "skimage" / "coffee.png", negs)
    shutil.copy(data_dir / "nonface_scenes" / "dlib" / "dog.jpg", negs / "dlib")
    (negs / "broken.jpg").write_bytes(b"\xff\xd8\xff garbage")
    write_image(negs / "tiny.png", np.zeros((10, 10), np.uint8))
    out = tmp_path / "boot.npz"
    r = runner.invoke(
        app, ["bootstrap", "--model", str(small_model), "--negatives", str(negs), "--rounds", "1", "--out", str(out)]
    )
    assert r.exit_code == 1, r.output  # the broken file is reported, the rest is processed
    assert "broken.jpg" in r.stderr and "tiny.png: 10x10 is smaller" in r.stderr and "note:" in r.stderr
    assert out.is_file()
    assert "FP windows" in r.stdout and "on 2 negative images" in r.stdout
    r = runner.invoke(app, ["detect", str(astro), "--model", str(out), "--json"])
    assert r.exit_code == 0


def test_evaluate_prints_figures_and_plots(data_dir, tmp_path):
    scenes = data_dir / "scenes_annotated_dlib_voc"
    png = tmp_path / "pr.png"
    r = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(scenes / "images"),
            "--annotations",
            str(scenes / "boxes.csv"),
            "--split",
            "test",
            "--plot",
            str(png),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "detection rate" in r.stdout and "average precision" in r.stdout and "25 faces" in r.stdout
    assert png.stat().st_size > 1000


class _FixedDetector:
    """Stands in for the model in evaluate: the detections of each image, told apart by its pixels."""

    def __init__(self, by_pixels):
        self.by_pixels = by_pixels

    def detect(self, grey, threads=None):
        return self.by_pixels[grey.tobytes()]


def test_evaluate_fp_points_count_images_the_csv_does_not_list(data_dir, tmp_path, monkeypatch):
    """Two MIT+CMU photos with their rows of the real boxes.csv, three of its face-free images (no row), and
    detections made by hand; the ranked list, computed by hand: 3.0 hit, 2.5 FP (wall), 2.0 hit, 1.5 FP FP (the
    two knex images), 1.0 hit, 0.0 hit."""
    from facedet.cli import common
    from facedet.evaluate import read_annotations
    from facedet.imageio import read_grey

    source = data_dir / "mit_cmu_frontal"
    folder = tmp_path / "images"
    folder.mkdir()
    for name in ("albert.gif", "trekcolr.gif", "knex20.gif", "knex42.gif", "wall.gif"):
        shutil.copy(source / "images" / name, folder / name)
    write_image(folder / "albert.faces.png", read_rgb(source / "images" / "albert.gif"))  # detect's output: not read
    rows = (source / "boxes.csv").read_text().splitlines()
    csv = tmp_path / "boxes.csv"
    csv.write_text("\n".join([rows[0], *(r for r in rows if r.split(",")[1] in ("albert.gif", "trekcolr.gif"))]))
    ann = read_annotations(csv)
    assert [len(b) for b, _ in ann.values()] == [1, 3]
    pixels = {
        name: read_grey(folder / name).tobytes()
        for name in ("albert.gif", "trekcolr.gif", "knex20.gif", "knex42.gif", "wall.gif")
    }
    by_pixels = {
        pixels["albert.gif"]: np.c_[ann["albert.gif"][0], [2.0]],
        pixels["trekcolr.gif"]: np.c_[ann["trekcolr.gif"][0], [3.0, 1.0, 0.0]],
        pixels["knex20.gif"]: np.array([[10, 10, 40, 40, 1.5]]),
        pixels["knex42.gif"]: np.array([[100, 10, 40, 40, 1.5]]),
        pixels["wall.gif"]: np.array([[10, 10, 40, 40, 2.5]]),
    }
    monkeypatch.setattr(common, "load_detector", lambda model: _FixedDetector(by_pixels))
    roc = tmp_path / "roc.png"
    base = ["evaluate", "--images", str(folder), "--annotations", str(csv), "--plot", str(tmp_path / "pr.png")]
    r = runner.invoke(app, [*base, "--split", "test", "--fp-points", "0,1,2,3,10", "--roc", str(roc)])
    assert r.exit_code == 0, r.output
    assert "boxes.csv (test): 5 images (3 not in the CSV: without faces), 4 faces" in r.stdout, r.stdout
    # AP: precision interpolated at recall 0.25, 0.5, 0.75, 1 is 1, 2/3, 4/7, 4/7
    assert re.search(r"1\.000\D+3\D+0\.702", r.stdout), r.stdout
    assert re.search(r"0\.250\D+0\.500\D+0\.500\D+1\.000\D+1\.000", r.stdout), r.stdout
    assert "the detections end at 3 false positives" in r.stderr
    assert read_rgb(roc).shape == (450, 500, 3)
    # the default points: the detections end before them (a note), so each is the rate of all the detections
    r = runner.invoke(app, base)
    assert r.exit_code == 0 and "10 " in r.stdout and "167" in r.stdout and r.stdout.count("1.000") >= 8, r.output
    for extra, message in (
        (["--fp-points", "10,x"], "--fp-points: expected whole numbers"),
        (["--fp-points", "-1"], "--fp-points"),
        (["--roc", str(tmp_path / "pr.png")], "is the --plot file too"),
        (["--roc", str(tmp_path / "roc.txt")], "cannot write a plot as .txt"),
        (["--roc", str(folder / "roc.png")], "inside the --images folder"),
    ):
        r = runner.invoke(app, [*base, *extra])
        assert r.exit_code == 2 and message in r.stderr, (extra, r.output)
    assert not (folder / "roc.png").exists()
    # the default precision-recall plot is not written into the images' folder, where the next run would read it
    monkeypatch.chdir(folder)
    r = runner.invoke(app, base[:5])
    assert r.exit_code == 0 and "inside --images" in r.stderr and not (folder / "precision_recall.png").exists()


def test_evaluate_threshold_overrides_the_models(data_dir, tmp_path):
    scenes = data_dir / "scenes_annotated_dlib_voc"
    base = [
        "evaluate",
        "--images",
        str(scenes / "images"),
        "--annotations",
        str(scenes / "boxes.csv"),
        "--split",
        "test",
        "--plot",
        str(tmp_path / "pr.png"),
    ]
    r = runner.invoke(app, [*base, "--threshold", "100"])  # far above any decision value: nothing found
    assert r.exit_code == 0, r.output
    assert re.search(r"0\.000\s.*\s0\s", r.stdout) and "the detections end at 0 false positives" in r.stderr


def test_detect_handles_image_kinds_and_rejects_bomb(astro, tmp_path, grey_png):
    from PIL import Image

    rgb = read_rgb(astro)
    grey = Image.fromarray(rgb).convert("L")
    grey.save(tmp_path / "grey.png")
    Image.fromarray((np.asarray(grey).astype(np.uint16) * 257)).save(tmp_path / "sixteen.png")
    Image.fromarray(np.dstack([rgb, np.full(rgb.shape[:2], 255, np.uint8)])).save(tmp_path / "alpha.png")
    Image.new("1", (9000, 9000)).save(tmp_path / "bomb.png")  # 81 MP, a few KB on disk
    huge = tmp_path / "huge.png"  # 2^20 x 2^20 in its header: beyond Pillow's own limit, which gave its wording
    huge.write_bytes(grey_png(2**20, 2**20, b""))
    files = [tmp_path / n for n in ("grey.png", "sixteen.png", "alpha.png", "bomb.png", "huge.png")]
    r = runner.invoke(app, ["detect", *map(str, files), "--json"])
    assert r.exit_code == 1 and "bomb.png" in r.stderr
    assert (
        f"failed {huge}: 1,099,511,627,776 pixels exceeds the limit of 50,000,000 (refused before decoding: a "
        "possible decompression bomb); --max-pixels raises it\n"
    ) in r.stderr and "DOS" not in r.stderr, r.stderr
    res = json.loads(r.stdout)
    assert [x["image"] for x in res] == list(map(str, files))
    assert all(len(x["faces"]) == 1 for x in res[:3]) and all("decompression bomb" in x["error"] for x in res[3:])


@pytest.mark.filterwarnings("ignore:PmSVM. .* stopped at max_iter:RuntimeWarning")  # 100 epochs on the small set
def test_train_pmsvm_hog(small_npz, data_dir, tmp_path, astro):
    from facedet import Detector

    out = tmp_path / "pm.npz"
    r = runner.invoke(
        app,
        [
            "train",
            "--data",
            str(small_npz),
            "--out",
            str(out),
            "--classifier",
            "pmsvm",
            "--features",
            "hog",
            "--p",
            "-8",
            "--C",
            "0.5",
            "--max-iter",
            "150",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "hog features" in r.stdout and "PmSVM p=-8.0" in r.stdout
    det = Detector.load(out)
    assert type(det.classifier).__name__ == "PmSVM" and det.features == "hog" and det.classifier.max_iter == 150
    assert det.classifier.p == -8.0 and det.classifier.C == 0.5 and det.classifier.table_.shape == (1, 324, 1000)
    r = runner.invoke(app, ["detect", str(astro), "--model", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)[0]["width"] == 512
    # bootstrap refits the PmSVM on its HOG features; it keeps no training rows, so it needs the patches
    negs = tmp_path / "negs"
    negs.mkdir()
    shutil.copy(data_dir / "nonface_scenes" / "skimage" / "coffee.png", negs)
    r = runner.invoke(
        app, ["bootstrap", "--model", str(out), "--negatives", str(negs), "--out", str(tmp_path / "b.npz")]
    )
    assert r.exit_code == 2 and "no training rows" in r.output
    r = runner.invoke(
        app,
        [
            "bootstrap",
            "--model",
            str(out),
            "--negatives",
            str(negs),
            "--rounds",
            "1",
            "--data",
            str(small_npz),
            "--out",
            str(tmp_path / "b.npz"),
        ],
    )
    assert r.exit_code == 0, r.output
    boot = Detector.load(tmp_path / "b.npz")
    assert type(boot.classifier).__name__ == "PmSVM" and boot.features == "hog" and boot.classifier.p == -8.0
    assert not np.array_equal(boot.classifier.coef_, det.classifier.coef_)  # refitted with the false positives
    # svc takes osuna features only; PmSVM needs features >= 0
    bad = [
        ["--classifier", "svc", "--features", "hog"],
        ["--classifier", "pmsvm", "--features", "osuna"],
        ["--classifier", "knn"],
        ["--classifier", "pmsvm", "--p", "2"],
        ["--max-iter", "0"],
    ]
    for extra in bad:
        r = runner.invoke(app, ["train", "--data", str(small_npz), "--out", str(tmp_path / "x.npz"), *extra])
        assert r.exit_code == 2, (extra, r.output)
    assert (
        "negative"
        in runner.invoke(
            app,
            [
                "train",
                "--data",
                str(small_npz),
                "--out",
                str(tmp_path / "x.npz"),
                "--classifier",
                "pmsvm",
                "--features",
                "osuna",
            ],
        ).stderr
    )


def test_outputs_are_checked_before_work_and_never_overwrite(astro, tmp_path, small_npz):
    two = [str(astro), str(astro)]
    r = runner.invoke(app, ["detect", *two, "--out", str(tmp_path / "two.png")])
    assert r.exit_code == 2 and "give a folder" in r.stderr and not (tmp_path / "two.png").exists()
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "astronaut.png").write_bytes(astro.read_bytes())
    r = runner.invoke(app, ["detect", str(astro), str(tmp_path / "a"), "--out", str(tmp_path / "o")])  # a folder too
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["astronaut-2.faces.png", "astronaut.faces.png"]
    # a second run over a folder holding its own output does not annotate the annotations
    r = runner.invoke(app, ["detect", str(tmp_path / "a"), "--out", str(tmp_path / "a" / "out")])
    r = runner.invoke(app, ["detect", str(tmp_path / "a"), "--out", str(tmp_path / "a" / "out"), "--overwrite"])
    assert r.exit_code == 0 and [p.name for p in (tmp_path / "a" / "out").iterdir()] == ["astronaut.faces.png"]
    # annotations written beside the photos: the photos are scanned, the annotations of a previous run are not
    for again in ([], ["--overwrite"]):
        r = runner.invoke(app, ["detect", str(tmp_path / "a"), "--out", str(tmp_path / "a"), "--json", *again])
        assert r.exit_code == 0
        assert [x["image"] for x in json.loads(r.stdout)] == [str(tmp_path / "a" / "astronaut.png")]
    for fmt in ("psd", "xbm"):  # Pillow writes neither in colour
        r = runner.invoke(app, ["detect", str(astro), "--out", str(tmp_path / f"x.{fmt}")])
        assert r.exit_code == 2 and f"cannot write colour {fmt.upper()}" in r.stderr
    # an input is never the output, nor through a symlink
    photo = tmp_path / "a" / "astronaut.png"
    (tmp_path / "link.png").symlink_to(photo)
    before = photo.read_bytes()
    for out in (photo, tmp_path / "link.png"):
        r = runner.invoke(app, ["detect", str(photo), "--out", str(out)])
        assert r.exit_code == 2 and "input" in r.stderr and photo.read_bytes() == before
    (tmp_path / "empty").mkdir()
    r = runner.invoke(app, ["detect", str(tmp_path / "empty")])
    assert r.exit_code == 2 and "no image files" in r.stderr
    (tmp_path / "file").write_text("x")
    assert runner.invoke(app, ["detect", str(astro), "--out", str(tmp_path / "file" / "sub")]).exit_code == 2
    # a bad --out fails at once, not after training
    r = runner.invoke(app, ["train", "--data", str(small_npz), "--out", str(tmp_path / "no" / "dir" / "m.npz")])
    assert r.exit_code == 2 and "does not exist" in r.stderr and "training" not in r.stdout


def test_a_symlink_loop_is_a_bad_file_not_a_traceback(astro, small_npz, tmp_path):
    """Path.resolve() raises RuntimeError on a symlink loop (Python 3.11): the input/output checks gave a
    traceback (exit 1) for detect, train, evaluate and --out naming such a link."""
    loop = tmp_path / "loop.jpg"
    loop.symlink_to(loop)
    r = runner.invoke(app, ["detect", str(loop), str(astro), "--json"])
    assert r.exit_code == 1 and isinstance(r.exception, (SystemExit, type(None))), r.output
    res = json.loads(r.stdout)
    assert [x["image"] for x in res] == [str(loop), str(astro)] and "error" in res[0] and "faces" in res[1]
    assert "failed" in r.stderr and str(loop) in r.stderr and "Traceback" not in r.output
    for argv in (
        ["train", "--data", str(loop), "--out", str(tmp_path / "m.npz")],
        ["train", "--faces", str(loop), "--nonfaces", str(tmp_path), "--out", str(tmp_path / "m.npz")],
    ):
        r = runner.invoke(app, argv)
        assert r.exit_code == 2 and isinstance(r.exception, SystemExit) and str(loop) in r.stderr, r.output
    (tmp_path / "ev").mkdir()
    (tmp_path / "ev" / "x.jpg").symlink_to(tmp_path / "ev" / "x.jpg")
    (tmp_path / "ev" / "a.csv").write_text("image,x,y,w,h\nx.jpg,1,1,20,20\n")
    r = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(tmp_path / "ev"),
            "--annotations",
            str(tmp_path / "ev" / "a.csv"),
            "--plot",
            str(tmp_path / "pr.png"),
        ],
    )
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit) and "x.jpg" in r.stderr, r.output
    # an output path that is a dangling loop is refused as any file there would be, and replaced with --overwrite
    r = runner.invoke(app, ["detect", str(astro), "--out", str(loop)])
    assert r.exit_code == 2 and "--overwrite" in r.stderr, r.output
    r = runner.invoke(app, ["detect", str(astro), "--out", str(loop), "--overwrite"])
    assert r.exit_code == 0 and not loop.is_symlink() and read_rgb(loop).shape == (512, 512, 3), r.output


def test_names_are_not_markup_and_messages_do_not_wrap(astro, tmp_path):
    odd = tmp_path / "holiday [edited] with a rather long name to pass eighty columns [bold].png"
    odd.write_bytes(astro.read_bytes())
    (tmp_path / "scan[").mkdir()
    bad = tmp_path / "scan[" / "red] draft.jpg"  # the path holds "[/red]", a closing tag rich would choke on
    bad.write_bytes(b"not an image")
    r = runner.invoke(app, ["detect", str(odd), str(bad)])
    assert r.exit_code == 1
    assert "[edited]" in r.stdout and "[bold]" in r.stdout
    line = next(x for x in r.stderr.splitlines() if "failed" in x)
    assert str(bad) in line and "not an image" in line


def test_input_files_that_are_not_what_they_claim(astro, tmp_path, data_dir):
    np.save(tmp_path / "plain.npy", np.arange(3))
    (tmp_path / "plain.npy").rename(tmp_path / "plain.npz")
    for args in (
        ["detect", str(astro), "--model", str(tmp_path / "plain.npz")],
        ["train", "--data", str(tmp_path / "plain.npz"), "--out", str(tmp_path / "m.npz")],
    ):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and "not an .npz" in r.stderr and "pickle" not in r.stderr
    scenes = data_dir / "scenes_annotated_dlib_voc"
    dup = tmp_path / "dup.csv"
    rows = (scenes / "boxes.csv").read_text().splitlines()
    dup.write_text("\n".join(rows + rows[1:2]) + "\n")
    base = ["evaluate", "--images", str(scenes / "images"), "--plot", str(tmp_path / "pr.png")]
    for extra, message in (
        (["--annotations", str(dup)], "already on line"),
        (["--annotations", str(scenes / "images")], "is a folder"),
        (["--annotations", str(scenes / "boxes.csv"), "--iou", "1.5"], "--iou"),
        (
            ["--annotations", str(scenes / "boxes.csv"), "--plot", str(tmp_path / "pr.txt")],
            "cannot write a plot as .txt",
        ),
    ):
        r = runner.invoke(app, base + extra)
        assert r.exit_code == 2 and message in r.stderr, r.output
    assert not (tmp_path / "pr.png").exists()


def test_ctrl_c_inside_a_numba_kernel_exits_130(monkeypatch, capsys):
    # numba turns Ctrl-C during a kernel into SystemErrors chained to the KeyboardInterrupt
    import facedet.__main__ as entry
    import facedet.cli as cli

    def interrupted(**kw):
        try:
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as exc:
                raise SystemError("_numba_unpickle returned a result with an exception set") from exc
        except SystemError as exc:
            raise SystemError("CPUDispatcher(_stage0) returned a result with an exception set") from exc

    monkeypatch.setattr(cli, "app", interrupted)
    with pytest.raises(SystemExit) as exit_:
        entry.main()
    assert exit_.value.code == 130 and "interrupted" in capsys.readouterr().err

    def broken(**kw):
        raise SystemError("a real bug")

    monkeypatch.setattr(cli, "app", broken)
    with pytest.raises(SystemError, match="a real bug"):  # any other SystemError is not hidden
        entry.main()


@pytest.mark.parametrize("step", ["print", "progress", "write"])
def test_ctrl_c_that_a_callback_swallowed_stops_the_command_at_its_next_step(monkeypatch, capsys, tmp_path, step):
    # llvmlite ignores exceptions raised in its ctypes callbacks: Ctrl-C while numba loads a kernel was lost, and
    # the command ran on to print its results (seen in CI) or to exit 0
    import facedet.__main__ as entry
    import facedet.cli as cli
    from facedet.cli import common

    ran_on = []

    def swallowed(**kw):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler runs here
        except KeyboardInterrupt:
            pass
        if step == "print":
            common.emit("results\n", raw=True)
        elif step == "progress":
            with common.progress_bar() as progress:
                progress.advance(progress.add_task("detecting", total=2, info=""))
        else:
            common.write_output(lambda path: path.write_text("model"), tmp_path / "m.npz")
        ran_on.append(step)
        raise SystemExit(0)

    monkeypatch.setattr(cli, "app", swallowed)
    # an interactive run's Ctrl-C (a test run started in the background inherits SIGINT ignored)
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(SystemExit) as exit_:
            entry.main()
        out, err = capsys.readouterr()
        assert exit_.value.code == 130 and "interrupted" in err and "Traceback" not in err
        assert ran_on == [] and out == "" and not (tmp_path / "m.npz").exists()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
        common.emit("next command\n", raw=True)  # the press does not outlive its command
        assert capsys.readouterr().out == "next command\n"
        # a caller that ignores SIGINT (nohup, a background job) keeps it ignored: the command runs to its end
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with pytest.raises(SystemExit) as exit_:
            entry.main()
        assert exit_.value.code == 0 and ran_on == [step]
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, outer)


def test_ctrl_c_while_the_command_loads_exits_130_without_a_traceback(data_dir):
    image = sorted((data_dir / "scenes_annotated_dlib_voc" / "images").iterdir())[0]
    proc = subprocess.Popen(
        [sys.executable, "-m", "facedet", "detect", str(image), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a terminal's Ctrl-C reaches a foreground command; a test run in the background would pass SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(0.4)  # numpy, typer and numba are loading (a detection takes over a second from start)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    # -2 (ended by SIGINT, which a shell also reports as 130): after "interrupted" CPython sometimes ends the
    # process so when the interrupt came during an import (3 of 12 runs here; probably its flag for an unhandled
    # KeyboardInterrupt, set by a nested PyRun call that main() cannot see)
    assert proc.returncode in (130, -signal.SIGINT) and "interrupted" in err and "Traceback" not in err and out == ""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (writes fail with ENOSPC)")
def test_results_that_standard_output_cannot_take_are_one_line_and_exit_1(astro, tmp_path):
    """facedet detect --json > file on a full disk: a rich traceback of the failed write (or Python's 'Exception
    ignored' at exit); now one line on stderr, exit 1, and the annotated image is still written."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    for extra in (["--json"], []):
        out = tmp_path / f"a{len(extra)}.png"
        with open("/dev/full", "w") as full:
            r = subprocess.run(
                [sys.executable, "-m", "facedet", "detect", str(astro), "--out", str(out), *extra],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                timeout=300,
            )
        assert r.returncode == 1, r.stderr
        assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
        assert r.stderr.strip().splitlines() == ["error: cannot write to standard output: No space left on device"]
        assert read_rgb(out).shape == (512, 512, 3)


def test_a_model_whose_header_does_not_describe_its_arrays_is_a_usage_error(astro, tmp_path, rewrite_model):
    # "prefilter": false beside the prefilter's arrays loaded as a model without its cascade (5 boxes on
    # astronaut.png, not 1)
    from facedet import default_model_path

    bad = rewrite_model(default_model_path(), tmp_path / "bad.npz", lambda h, a: h.update(prefilter=False))
    r = runner.invoke(app, ["detect", str(astro), "--model", str(bad), "--json"])
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr == (
        f"error: cannot load model: {bad}: invalid facedet detector (the header says prefilter: false, "
        "but the file holds the prefilter's arrays (prefilter.weights, prefilter.thresholds): the "
        "cascade would be dropped; set prefilter to true, or remove the arrays too)\n"
    )


def test_train_checks_scan_options_before_fitting(small_npz, tmp_path, monkeypatch):
    import facedet.training

    monkeypatch.setattr(facedet.training, "fit_classifier", lambda *a, **k: pytest.fail("fitted before the checks"))
    for bad in (["--stride", "0"], ["--scale-factor", "1"], ["--threshold", "nan"]):
        r = runner.invoke(app, ["train", "--data", str(small_npz), "--out", str(tmp_path / "m.npz"), *bad])
        assert r.exit_code == 2 and bad[0] in r.stderr, r.output
    d = np.load(small_npz)
    with pytest.raises(ValueError, match="stride"):
        facedet.training.train_detector(d["X"], d["y"], stride=0)
    # the classifier's hyperparameters too, by svmcore's own checks, before the features are computed
    monkeypatch.setattr(facedet.training, "training_set", lambda *a, **k: pytest.fail("features before the checks"))
    with pytest.raises(ValueError, match="C: must be > 0"):
        facedet.training.train_detector(d["X"], d["y"], classifier_params={"C": -1})
    with pytest.raises(ValueError, match="p=1.0 > 0 is not positive definite"):
        facedet.training.train_detector(d["X"], d["y"], kind="pmsvm", classifier_params={"p": 1})
    with pytest.raises(TypeError, match="kernal"):  # a misspelt name is no hyperparameter
        facedet.training.train_detector(d["X"], d["y"], classifier_params={"kernal": "rbf"})
    with pytest.raises(ValueError, match="reads hog features"):  # PmSVM needs nonnegative features
        facedet.training.train_detector(d["X"], d["y"], kind="pmsvm", features="osuna")
    with pytest.raises(ValueError, match="unknown classifier 'svm'; expected one of svc, pmsvm"):
        facedet.training.train_detector(d["X"], d["y"], kind="svm")


def test_train_and_bootstrap_refuse_bad_hyperparameters_before_reading_any_data(
    small_npz, small_model, tmp_path, monkeypatch
):
    # --C -1 (and the rest) were refused by the fit, after the patches and the negatives had been read
    import facedet.patches

    for name in ("load_patches", "image_files", "read_grey"):
        monkeypatch.setattr(facedet.patches, name, lambda *a, **k: pytest.fail("data read before the checks"))
    import facedet.imageio

    monkeypatch.setattr(facedet.imageio, "read_grey", lambda *a, **k: pytest.fail("data read before the checks"))
    base = ["train", "--data", str(small_npz), "--negatives", str(tmp_path), "--out", str(tmp_path / "m.npz")]
    for bad, message in (
        (["--C", "-1"], "--C: must be > 0, got -1.0"),
        (["--C", "0"], "--C: must be > 0"),
        (["--C", "nan"], "--C: must be finite"),
        (["--gamma", "-1"], "--gamma: must be > 0"),
        (["--degree", "0"], "--degree: must be >= 1"),
        (["--tol", "0"], "--tol: must be > 0"),
        (["--coef0", "inf"], "--coef0: must be finite"),
        (["--kernel", "rbf", "--gamma", "0"], "--gamma: must be > 0"),
        (["--classifier", "pmsvm", "--p", "1"], "--p"),
        (["--classifier", "pmsvm", "--C", "-2"], "--C: must be > 0"),
        (["--classifier", "pmsvm", "--tol", "-1"], "--tol: must be > 0"),
        (["--max-iter", "0"], "--max-iter"),
        (["--shifts", "10"], "--shifts"),
    ):
        r = runner.invoke(app, [*base, *bad])
        assert r.exit_code == 2 and message in r.output, (bad, r.output)
    for bad in (["--rounds", "0"], ["--max-per-image", "0"]):  # bootstrap's own options (typer's ranges)
        r = runner.invoke(
            app,
            [
                "bootstrap",
                "--model",
                str(small_model),
                "--negatives",
                str(tmp_path),
                "--out",
                str(tmp_path / "b.npz"),
                "--data",
                str(small_npz),
                *bad,
            ],
        )
        assert r.exit_code == 2 and bad[0] in r.output, (bad, r.output)
    # a --negatives folder that is not there is reported before the patches are read, too
    monkeypatch.undo()
    monkeypatch.setattr(facedet.patches, "load_patches", lambda *a, **k: pytest.fail("patches read before the checks"))
    r = runner.invoke(
        app,
        ["train", "--data", str(small_npz), "--negatives", str(tmp_path / "none"), "--out", str(tmp_path / "m.npz")],
    )
    assert r.exit_code == 2 and "--negatives" in r.stderr, r.output


def test_calibrate_refits_the_shipped_box_map_and_operating_point(data_dir, tmp_path):
    # the CBCL model's box map was fitted on the train split's 18 faces: from the raw window (0, 0, 1)
    # calibrate finds it again
    from facedet import Detector

    shipped = Detector.load(CBCL_DETECTOR)
    raw = tmp_path / "raw.npz"
    shipped.with_params(box=(0.0, 0.0, 1.0), threshold=0.0, min_neighbors=2).save(raw)
    scenes = data_dir / "scenes_annotated_dlib_voc"
    args = [
        "calibrate",
        "--model",
        str(raw),
        "--images",
        str(scenes / "images"),
        "--annotations",
        str(scenes / "boxes.csv"),
        "--split",
        "train",
    ]
    r = runner.invoke(app, [*args, "--box-only", "--out", str(tmp_path / "box.npz")])
    assert r.exit_code == 0, r.output
    assert "from 18 faces" in r.stdout
    det = Detector.load(tmp_path / "box.npz")
    np.testing.assert_allclose(det.box, shipped.box, rtol=1e-12)
    assert (det.threshold, det.min_neighbors) == (0.0, 2)
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "op.npz"), "--reliability", str(tmp_path / "rel.png")])
    assert r.exit_code == 0, r.output
    assert read_rgb(tmp_path / "rel.png").shape[2] == 3  # the reliability diagram of the fitted confidence
    # the chosen operating point is at least as good (F1) on these images as the one it replaced
    from facedet.evaluate import evaluate_detections, read_annotations
    from facedet.imageio import read_grey

    ann = read_annotations(scenes / "boxes.csv", split="train")
    grey = {n: read_grey(scenes / "images" / n) for n in ann}

    def f1(d):
        res = evaluate_detections({n: d.detect(g) for n, g in grey.items()}, ann)
        hits = round(res.detection_rate * res.n_truth)
        return 2 * hits / (hits + res.n_truth + res.false_positives)

    det = Detector.load(tmp_path / "op.npz")
    assert det.min_neighbors in (1, 2, 3) and -1 <= det.threshold <= 3
    assert f1(det) >= f1(Detector.load(tmp_path / "box.npz"))
    assert Detector.load(tmp_path / "box.npz").platt is None and det.platt[0] < 0  # the confidence is fitted
    # --min-confidence keeps the faces of at least that confidence, each listed with it
    photo = str(scenes / "images" / next(iter(grey)))
    r = runner.invoke(app, ["detect", photo, "--json", "--model", str(tmp_path / "op.npz"), "--threshold", "-1"])
    faces = json.loads(r.stdout)[0]["faces"]
    cut = sorted(f["confidence"] for f in faces)[len(faces) // 2]
    r = runner.invoke(
        app,
        [
            "detect",
            photo,
            "--json",
            "--model",
            str(tmp_path / "op.npz"),
            "--threshold",
            "-1",
            "--min-confidence",
            str(cut),
        ],
    )
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["faces"] == [f for f in faces if f["confidence"] >= cut]
    r = runner.invoke(app, ["detect", photo, "--model", str(tmp_path / "box.npz"), "--min-confidence", "0.5"])
    assert r.exit_code == 2 and "no confidence calibration" in r.stderr
    r = runner.invoke(app, [*args[:4], str(tmp_path / "nowhere"), *args[5:], "--out", str(tmp_path / "x.npz")])
    assert r.exit_code == 2 and "not a folder" in r.stderr
    ignored = tmp_path / "ignored.csv"
    ignored.write_text("image,x,y,w,h,ignore\n2008_002470.jpg,10,10,50,50,1\n")
    r = runner.invoke(app, [*args[:6], str(ignored), "--out", str(tmp_path / "x.npz")])
    assert r.exit_code == 2 and "no face to calibrate on" in r.stderr


def test_no_output_replaces_an_input(astro, tmp_path, small_npz, small_model, data_dir):
    """train, bootstrap, calibrate and evaluate refuse (exit 2, before any work) an output that is one of
    their inputs, as detect does."""
    data = tmp_path / "data.npz"
    data.write_bytes(small_npz.read_bytes())
    faces = tmp_path / "pf" / "face"
    with np.load(small_npz) as d:  # 300 CBCL faces, then 400 non-faces
        for label, rows in (("face", range(0, 8)), ("non-face", range(300, 308))):
            (tmp_path / "pf" / label).mkdir(parents=True, exist_ok=True)
            for i in rows:
                write_image(tmp_path / "pf" / label / f"{i:04d}.png", d["X"][i])
    scenes = tmp_path / "scenes"
    shutil.copytree(data_dir / "scenes_annotated_dlib_voc" / "images", scenes)
    csv = data_dir / "scenes_annotated_dlib_voc" / "boxes.csv"
    photo = scenes / "2008_002470.jpg"
    kept = {p: p.read_bytes() for p in (data, faces / "0000.png", small_model, photo)}
    for args in (
        ["train", "--data", str(data), "--out", str(data)],
        [
            "train",
            "--faces",
            str(faces),
            "--nonfaces",
            str(tmp_path / "pf" / "non-face"),
            "--out",
            str(faces / "0000.png"),
        ],
        ["bootstrap", "--model", str(small_model), "--negatives", str(scenes), "--out", str(small_model)],
        [
            "calibrate",
            "--model",
            str(small_model),
            "--images",
            str(scenes),
            "--annotations",
            str(csv),
            "--out",
            str(small_model),
        ],
        ["evaluate", "--images", str(scenes), "--annotations", str(csv), "--plot", str(photo)],
    ):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and "would be overwritten" in r.stderr, (args, r.output)
    assert all(p.read_bytes() == b for p, b in kept.items())
    # a new file beside the inputs is fine: the model is not an image the next run would read
    r = runner.invoke(
        app,
        [
            "train",
            "--faces",
            str(faces),
            "--nonfaces",
            str(tmp_path / "pf" / "non-face"),
            "--out",
            str(faces / "model.npz"),
            "--no-mirror",
        ],
    )
    assert r.exit_code == 0, r.output


def test_evaluate_reports_what_it_left_out(data_dir, tmp_path):
    scenes = data_dir / "scenes_annotated_dlib_voc"
    rows = (scenes / "boxes.csv").read_text().splitlines()
    test = [r for r in rows[1:] if r.startswith("test,")]
    csv = tmp_path / "b.csv"
    # the same box under two splits is one box listed twice once the split is not filtered
    csv.write_text("\n".join([rows[0], test[0], "train" + test[0][4:]]) + "\n")
    base = ["evaluate", "--images", str(scenes / "images"), "--plot", str(tmp_path / "pr.png")]
    r = runner.invoke(app, base + ["--annotations", str(csv)])
    assert r.exit_code == 2 and "already on line 2" in r.stderr, r.output
    r = runner.invoke(app, base + ["--annotations", str(csv), "--split", "train"])
    assert r.exit_code == 0 and "9 images (8 not in the CSV: without faces), 1 face\n" in r.stdout, r.output
    # ./name is the same image; a missing image is reported and its faces are named as left out
    name = test[0].split(",")[1]
    csv.write_text(
        "\n".join([rows[0], *test, test[0].replace(name, "./" + name), "test,missing.jpg,,,0,0,20,20"]) + "\n"
    )
    r = runner.invoke(app, base + ["--annotations", str(csv)])
    assert r.exit_code == 2 and "already on line 2" in r.stderr, r.output
    csv.write_text("\n".join([rows[0], *test, "test,missing.jpg,,,0,0,20,20"]) + "\n")
    r = runner.invoke(app, base + ["--annotations", str(csv)])
    assert r.exit_code == 1 and "missing.jpg" in r.stderr
    # the 4 train images of the folder are not in this CSV: evaluated as images without faces
    assert (
        "9 images (4 not in the CSV: without faces), 25 faces; 1 unreadable image with 1 face left out" in r.stdout
    ), r.stdout
    # boxes drawn on an image of another size (img_width, img_height) would not match: that image fails
    name, n = test[0].split(",")[1], sum(r.split(",")[1] == test[0].split(",")[1] for r in test)
    resized = [r.split(",") for r in test]
    for row in resized:
        if row[1] == name:
            row[2], row[3] = str(2 * int(row[2])), str(2 * int(row[3]))
    csv.write_text("\n".join([rows[0], *(",".join(row) for row in resized)]) + "\n")
    r = runner.invoke(app, base + ["--annotations", str(csv)])
    assert r.exit_code == 1 and f"{name}: " in r.stderr and "annotated at" in r.stderr, r.output
    assert (
        f"8 images (4 not in the CSV: without faces), {25 - n} faces; 1 unreadable image with {n} face" in r.stdout
    ), r.stdout
    other = ",".join([*resized[0][:4], "1", *resized[0][5:]])  # a new box of that image, at another size
    csv.write_text("\n".join([rows[0], *test, other]) + "\n")
    r = runner.invoke(app, base + ["--annotations", str(csv)])
    assert r.exit_code == 2 and "on an earlier line" in r.stderr, r.output


def test_bad_patch_arrays_and_out_names_are_usage_errors(astro, tmp_path, small_model):
    for name, X, y in (
        ("empty", np.zeros((4, 0, 0), np.uint8), np.array([0, 1, 0, 1])),
        ("y2d", np.zeros((4, 19, 19), np.uint8), np.array([[0], [1], [0], [1]])),
        ("y0d", np.zeros((4, 19, 19), np.uint8), np.array(1)),
    ):
        np.savez(tmp_path / f"{name}.npz", X=X, y=y)
        for cmd in (["train"], ["bootstrap", "--model", str(small_model), "--negatives", str(tmp_path)]):
            r = runner.invoke(app, [*cmd, "--data", str(tmp_path / f"{name}.npz"), "--out", str(tmp_path / "m.npz")])
            assert r.exit_code == 2 and "--data" in r.stderr and "expected X (n, h, w)" in r.stderr, (name, r.output)
    r = runner.invoke(
        app, ["train", "--data", str(tmp_path / "y2d.npz"), "--out", str(tmp_path / "m.npz"), "--features", "sift"]
    )
    assert r.exit_code == 2 and "--features: unknown value 'sift'" in r.stderr
    r = runner.invoke(app, ["detect", str(astro), "--min-size", "2", "--max-size", "5"])  # no scan could find one
    assert r.exit_code == 2 and "--max-size: must be >= 6.2, the smallest face" in r.stderr, r.output
    r = runner.invoke(app, ["detect", str(astro), "--max-size", "5"])  # below the model's min_size, which it names
    assert r.exit_code == 2 and "--max-size: must be >= --min-size (20), got 5" in r.stderr, r.output
    r = runner.invoke(app, ["detect", str(astro), "--out", str(tmp_path / "out.txt")])
    assert r.exit_code == 2 and ".txt is not an image format" in r.stderr and not (tmp_path / "out.txt").exists()
    r = runner.invoke(app, ["detect", str(astro), "--out", str(tmp_path / "ann"), "--json"])
    assert r.exit_code == 0
    written = json.loads(r.stdout)[0]["annotated"]
    assert written == str(tmp_path / "ann" / "astronaut.faces.png") and read_rgb(written).shape == (512, 512, 3)


def test_train_options_of_the_other_classifier_are_refused_and_tol_reaches_pmsvm(small_npz, tmp_path, monkeypatch):
    # --tol was silently dropped for pmsvm, and --kernel ... for pmsvm or --p for svc did nothing
    import facedet.training

    monkeypatch.setattr(facedet.training, "fit_classifier", lambda *a, **k: pytest.fail("fitted despite a usage error"))
    base = ["train", "--data", str(small_npz), "--out", str(tmp_path / "x.npz")]
    for extra, named in (
        (["--classifier", "pmsvm", "--kernel", "rbf", "--degree", "3"], "--kernel, --degree"),
        (["--classifier", "pmsvm", "--gamma", "0.1"], "--gamma"),
        (["--p", "0"], "--p"),
    ):
        r = runner.invoke(app, [*base, *extra])
        assert r.exit_code == 2 and f"{named}: not an option of --classifier" in r.stderr, (extra, r.output)
    monkeypatch.undo()
    from facedet import Detector

    r = runner.invoke(app, [*base, "--classifier", "pmsvm", "--tol", "0.5", "--no-mirror", "--max-iter", "300"])
    assert r.exit_code == 0, r.output
    assert Detector.load(tmp_path / "x.npz").classifier.tol == 0.5


def test_train_shifts_stay_inside_the_window(small_npz, tmp_path, monkeypatch):
    # --shifts 30 made 242 copies of each face, most of them the replicated border of the window, and fitted them
    import facedet.training

    monkeypatch.setattr(facedet.training, "fit_classifier", lambda *a, **k: pytest.fail("fitted despite a usage error"))
    r = runner.invoke(app, ["train", "--data", str(small_npz), "--out", str(tmp_path / "x.npz"), "--shifts", "10"])
    assert r.exit_code == 2 and "--shifts" in r.output
    import typer.main

    option = next(o for o in typer.main.get_command(app).commands["train"].params if o.name == "shifts")
    assert "0-9" in option.help and "4 copies" in option.help


def test_negatives_without_a_usable_image_are_a_usage_error(astro, data_dir, tmp_path, monkeypatch):
    # calibrate went on without them (exit 0), choosing its operating point on the annotated images alone
    import facedet.calibration
    from facedet.detector import default_model_path

    monkeypatch.setattr(facedet.calibration, "calibrate_box", lambda *a, **k: pytest.fail("calibrated anyway"))
    small = tmp_path / "small"
    small.mkdir()
    write_image(small / "tiny.png", read_rgb(astro)[:10, :10])  # readable, but smaller than a window
    (small / "notes.txt").write_text("no image")
    scenes = data_dir / "scenes_annotated_dlib_voc"
    base = [
        "calibrate",
        "--model",
        str(default_model_path()),
        "--images",
        str(scenes / "images"),
        "--annotations",
        str(scenes / "boxes.csv"),
        "--split",
        "train",
        "--out",
        str(tmp_path / "c.npz"),
    ]
    r = runner.invoke(app, [*base, "--negatives", str(small)])
    assert r.exit_code == 2 and "no readable image of at least 19x19 pixels" in r.stderr, r.output
    r = runner.invoke(app, [*base, "--negatives", str(data_dir / "nonface_scenes"), "--box-only"])
    assert r.exit_code == 2 and "--negatives: not used with --box-only" in r.stderr, r.output
    assert not (tmp_path / "c.npz").exists()


def test_split_without_data_is_a_usage_error(small_npz, small_model, data_dir, tmp_path):
    # --split was silently ignored without --data (a folder pair, or bootstrap on the support vectors)
    faces = data_dir / "misc_faces_skimage"
    for args in (
        ["train", "--faces", str(faces), "--nonfaces", str(tmp_path)],
        ["bootstrap", "--model", str(small_model), "--negatives", str(faces)],
    ):
        r = runner.invoke(app, [*args, "--split", "test", "--out", str(tmp_path / "x.npz")])
        assert r.exit_code == 2 and "--split: selects a split of --data" in r.stderr, (args, r.output)
    assert not (tmp_path / "x.npz").exists()


def test_min_size_help_gives_the_smallest_face_searched():
    # --min-size below the 4x-upsampled window silently acted as that floor; the help says so, with the number
    import typer.main
    from facedet import load_default
    from facedet.detector import MAX_UPSAMPLE
    from facedet.preprocess import WINDOW

    option = next(o for o in typer.main.get_command(app).commands["detect"].params if o.name == "min_size")
    floor = WINDOW / MAX_UPSAMPLE * load_default().box[2]
    assert f"upsampled {MAX_UPSAMPLE}x" in option.help and f"{floor:.1f} px for the shipped model" in option.help


def test_annotated_image_or_plot_never_replaces_the_model(astro, small_model, data_dir, tmp_path):
    # train --out takes any name, so a model can be called m.png; detect --out m.png wrote over it
    model = tmp_path / "m.png"
    model.write_bytes(small_model.read_bytes())
    scenes = data_dir / "scenes_annotated_dlib_voc"
    for args in (
        ["detect", str(astro), "--model", str(model), "--out", str(model)],
        [
            "evaluate",
            "--images",
            str(scenes / "images"),
            "--annotations",
            str(scenes / "boxes.csv"),
            "--model",
            str(model),
            "--plot",
            str(model),
        ],
    ):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and "is the --model input" in r.stderr, (args, r.output)
    assert model.read_bytes() == small_model.read_bytes()


READERS = ["train", "bootstrap", "detect", "evaluate", "calibrate"]  # the commands that read image files


def test_max_pixels_is_one_option_of_every_command_that_reads_images():
    from facedet.cli import common as cli
    from facedet.imageio import MAX_PIXELS

    assert cli.DEFAULT_MAX_PIXELS == MAX_PIXELS == 50_000_000  # the default stays 50 MP, written out in the CLI
    commands = typer_command(app).commands
    options = [next(o for o in commands[name].params if o.name == "max_pixels") for name in READERS]
    assert all(o.opts == ["--max-pixels"] and o.default == MAX_PIXELS for o in options)
    assert len({o.help for o in options}) == 1  # one text
    text = options[0].help
    for said in (
        "default 50,000,000",
        "before decoding",
        "decompression bomb",
        "exhaust memory",
        "GB",
        "Above 178,956,970 Pillow's own limit is raised",
    ):
        assert said in text, said
    assert not re.search(r"\{\d+\}", text)  # every figure filled in
    r = runner.invoke(app, ["detect", "--help"])
    assert "--max-pixels" in r.stdout


def test_detect_max_pixels_both_ways(astro, tmp_path, grey_png):
    # 512 x 512 = 262,144 pixels: refused one pixel below, read at the limit
    r = runner.invoke(app, ["detect", str(astro), "--json", "--max-pixels", "262143"])
    res = json.loads(r.stdout)
    assert r.exit_code == 1 and res[0]["image"] == str(astro) and f"failed {res[0]['error']}\n" in r.stderr
    assert (
        f"failed {astro}: 512x512 = 262,144 pixels exceeds the limit of 262,143 (refused before decoding: a "
        "possible decompression bomb); --max-pixels raises it\n"
    ) in r.stderr, r.stderr
    r = runner.invoke(app, ["detect", str(astro), "--json", "--max-pixels", "262144"])
    assert r.exit_code == 0 and len(json.loads(r.stdout)[0]["faces"]) == 1, r.output
    # the default: a header claiming 10,000 pixels over 50 MP is refused, naming the option (nothing decoded)
    over = tmp_path / "over.png"
    over.write_bytes(grey_png(10000, 5001, b""))
    r = runner.invoke(app, ["detect", str(over)])
    assert r.exit_code == 1 and "10000x5001 = 50,010,000 pixels exceeds the limit of 50,000,000" in r.stderr
    assert "; --max-pixels raises it" in r.stderr and "max_pixels=" not in r.stderr, r.stderr
    for bad in ("0", "-5", "1e8", "many"):
        r = runner.invoke(app, ["detect", str(astro), "--max-pixels", bad])
        assert r.exit_code == 2 and "--max-pixels" in r.output, (bad, r.output)


def test_max_pixels_above_pillows_limit_raises_it_for_the_reads(astro, monkeypatch):
    # Pillow refuses above twice PIL.Image.MAX_IMAGE_PIXELS (178,956,970 by default); lowered here below the
    # photo's 262,144 pixels, it stands in for a 200-MP photo against the default
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100_000)
    r = runner.invoke(app, ["detect", str(astro)])
    assert (
        r.exit_code == 1
        and (
            f"failed {astro}: 262,144 pixels exceeds Pillow's limit of 200,000 (twice "
            "PIL.Image.MAX_IMAGE_PIXELS) (refused before decoding: a possible decompression "
            "bomb); --max-pixels above 50,000,000 raises it\n"
        )
        in r.stderr
    ), r.stderr
    r = runner.invoke(app, ["detect", str(astro), "--json", "--max-pixels", "60000000"])
    assert r.exit_code == 0 and len(json.loads(r.stdout)[0]["faces"]) == 1, r.output
    assert Image.MAX_IMAGE_PIXELS == 100_000  # restored after the read


def test_max_pixels_reaches_every_image_a_command_reads(astro, data_dir, small_npz, small_model, tmp_path):
    from facedet.detector import default_model_path

    scenes = data_dir / "scenes_annotated_dlib_voc"
    negs = data_dir / "nonface_scenes"
    n_negs = len(list(p for p in negs.rglob("*") if p.suffix.lower() in (".png", ".jpg")))
    low = ["--max-pixels", "1000"]  # every image here is larger

    def refused(r, n):
        lines = [line for line in r.stderr.splitlines() if line.endswith("; --max-pixels raises it")]
        return len(lines) == n and all("exceeds the limit of 1,000 (refused before decoding" in x for x in lines)

    r = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(scenes / "images"),
            "--annotations",
            str(scenes / "boxes.csv"),
            "--split",
            "test",
            "--plot",
            str(tmp_path / "pr.png"),
            *low,
        ],
    )
    assert r.exit_code == 2 and "no annotated image could be read" in r.stderr and refused(r, 5), r.output
    out = tmp_path / "m.npz"
    r = runner.invoke(
        app,
        [
            "calibrate",
            "--model",
            str(default_model_path()),
            "--images",
            str(scenes / "images"),
            "--annotations",
            str(scenes / "boxes.csv"),
            "--split",
            "train",
            "--out",
            str(out),
            *low,
        ],
    )
    assert r.exit_code == 2 and "no face to calibrate" in r.stderr and refused(r, 4), r.output
    for args in (["train", "--data", str(small_npz)], ["bootstrap", "--model", str(small_model)]):
        r = runner.invoke(app, [*args, "--negatives", str(negs), "--out", str(out), *low])
        assert r.exit_code == 2 and "no readable image of at least 19x19" in r.stderr and refused(r, n_negs), r.output
    # image folders of patches (any size): each refused file is named with the reason, before the folder's error
    faces, nonfaces = tmp_path / "faces", tmp_path / "nonfaces"
    faces.mkdir(), nonfaces.mkdir()
    write_image(faces / "big.png", read_rgb(astro)[:40, :40])  # 1,600 pixels
    write_image(nonfaces / "small.png", read_rgb(astro)[-19:, :19])
    r = runner.invoke(app, ["train", "--faces", str(faces), "--nonfaces", str(nonfaces), "--out", str(out), *low])
    assert r.exit_code == 2 and refused(r, 1) and "big.png: 40x40 = 1,600 pixels" in r.stderr, r.output
    assert r.stderr.index("big.png") < r.stderr.index("no readable images")
    # where a command reads no image file, the option is refused rather than ignored
    r = runner.invoke(app, ["train", "--data", str(small_npz), "--out", str(out), *low])
    assert r.exit_code == 2 and "--max-pixels: no image file is read" in r.stderr, r.output
    assert not out.exists()


def test_train_on_faces_cut_from_landmark_annotated_photos(data_dir, tmp_path):
    """--landmarks: 25 Web Faces photos (the CSV's own rows, split column and all) give the faces, CBCL
    non-face patches the non-faces; the model finds the face of astronaut.png's landmark box region as a face
    more than a non-face patch. A photo the CSV names that is missing is reported, the rest trained on."""
    web = data_dir / "caltech_webfaces"
    lines = (web / "landmarks.csv").read_text().splitlines()
    rows = [r for r in lines[1:] if r.startswith("train,")][:25]
    photos = tmp_path / "photos"
    photos.mkdir()
    for n in {r.split(",")[1] for r in rows}:
        shutil.copy(web / "images" / n, photos / n)
    csv_path = tmp_path / "points.csv"
    csv_path.write_text(
        "\n".join([lines[0], *rows, "train,gone.jpg,10,10,30,10,20,20,20,30", "val," + rows[0].split(",", 1)[1]]) + "\n"
    )  # a val row: not read
    nonfaces = tmp_path / "nonfaces"
    nonfaces.mkdir()
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    for i in range(4548 - 300, 4548):
        write_image(nonfaces / f"n{i}.png", d["X_train"][2429 + i])
    out = tmp_path / "m.npz"
    r = runner.invoke(
        app,
        [
            "train",
            "--landmarks",
            str(csv_path),
            "--photos",
            str(photos),
            "--nonfaces",
            str(nonfaces),
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 1, r.output  # gone.jpg
    assert "gone.jpg" in r.stderr
    n_faces = int(re.search(r"trained on (\d+) faces", r.stdout).group(1))
    assert 2 * 20 <= n_faces <= 2 * 25 * 2 and n_faces % 2 == 0  # each face as in the photo and tilted
    assert "and 300 non-faces" in r.stdout
    from facedet import Detector

    det = Detector.load(out)
    faces = d["X_train"][:2429]
    assert np.median(det.score_windows(faces)) > np.median(det.score_windows(d["X_train"][2429 : 2429 + 1000]))
    r = runner.invoke(
        app, ["train", "--photos", str(photos), "--nonfaces", str(nonfaces), "--faces", str(photos), "--out", str(out)]
    )
    assert r.exit_code == 2 and "--photos" in r.output


def test_a_run_that_compiles_says_so_once(capsys):
    # numba sends its compile event only when a kernel is not in its cache: a fresh install's first run
    import numba
    from numba.core import event

    from facedet.cli import common as cli

    saved = cli._notice.pop("listener", None)  # a command run by an earlier test registered one
    if saved is not None:
        event.unregister("numba:compile", saved)
    try:
        cli.notice_compiling()
        assert capsys.readouterr().err == ""
        numba.njit(lambda x: x + 1)(1)
        numba.njit(lambda x: x * 2)(1)
        assert capsys.readouterr().err.count("compiling machine code on first use") == 1
    finally:
        event.unregister("numba:compile", cli._notice.pop("listener"))
        if saved is not None:
            event.register("numba:compile", saved)
            cli._notice["listener"] = saved
