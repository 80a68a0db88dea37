"""Hostile files, crafted at test time: each is refused with a one-line error, in bounded memory, and the rest of
a batch goes on. The cases of the hostile-input table in docs/hostile-inputs.md."""

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import CBCL_DETECTOR, peak_growth
from numpy.lib import format as npy
from typer.testing import CliRunner

import svmcore
from facedet.cli import app
from facedet.detector import Detector
from facedet.evaluate import read_image_sizes
from facedet.imageio import write_image

ROOT = Path(__file__).resolve().parents[1]
ASTRONAUT = ROOT / "examples" / "astronaut.jpg"
runner = CliRunner()


def npy_header(shape, dtype="<f8"):
    b = io.BytesIO()
    npy.write_array_header_1_0(b, {"descr": dtype, "fortran_order": False, "shape": shape})
    return b.getvalue()


def craft(src, out, member, write):
    """A copy of the archive src with ``member`` (a file name in the zip) replaced (or added) by write(zip file)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            if info.filename != member:
                zout.writestr(info, zin.read(info))
        write(zout)
    return out


def claimed_size(out):
    """support vectors whose header claims 10**12 float64 values, in a 110 KB member."""
    member = "classifier.support_vectors_.npy"
    return craft(CBCL_DETECTOR, out, member, lambda z: z.writestr(member, npy_header((10**12,)) + bytes(110_000)))


def deflate_bomb(out, member, mbytes=256):
    """``member`` deflated from ``mbytes`` MB of zeros (about 1,000:1)."""

    def write(z):
        info = zipfile.ZipInfo(member)
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as f:
            f.write(npy_header((mbytes * 2**20 // 8,)))
            for _ in range(mbytes // 16):
                f.write(bytes(16 * 2**20))

    return craft(CBCL_DETECTOR, out, member, write)


@pytest.mark.parametrize(
    "make,match",
    [
        (claimed_size, r"claims \(1000000000000,\) float64 \(8000000000000 bytes\), the archive holds 110000"),
        (lambda out: deflate_bomb(out, "extra.npy"), r"member 'extra.npy' expands \d+ bytes to \d+, more than 100"),
        (lambda out: deflate_bomb(out, "classifier.support_vectors_.npy"), r"expands \d+ bytes to \d+, more than 100"),
    ],
)
@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="measures the peak memory in /proc (Linux)")
def test_crafted_model_files_are_refused_before_any_array_is_read(tmp_path, make, match):
    path = make(tmp_path / "m.npz")
    with pytest.raises(ValueError, match=match):
        Detector.load(path)
    growth, message = peak_growth(
        "import svmcore, facedet.detector",
        f"""
        try:
            facedet.detector.Detector.load({str(path)!r})
        except ValueError as exc:
            print(exc)
    """,
    )
    assert "not a valid model file" in message and growth < 100 * 2**20, (message, growth)
    r = runner.invoke(app, ["detect", "--model", str(path), str(ASTRONAUT)])
    assert r.exit_code == 2 and r.exception is None or isinstance(r.exception, SystemExit)
    assert len(r.stderr.strip().splitlines()) == 1 and str(path) in r.stderr


def test_unknown_members_and_header_fields_are_refused_by_every_loader(tmp_path, rewrite_model):
    X = np.random.default_rng(0).random((40, 3))
    path = svmcore.SVC(kernel="linear").fit(X, X[:, 0] > 0.5).save(tmp_path / "svc.npz")
    for edit, match in (
        ((lambda h, a: h.update(note="x")), r"unknown header fields \['note'\]"),
        ((lambda h, a: a.update(extra=np.zeros(3))), r"unknown arrays \['extra'\]"),
    ):
        with pytest.raises(ValueError, match=match):
            svmcore.load(rewrite_model(path, tmp_path / "bad.npz", edit))
    with pytest.raises(ValueError, match=r"unknown header fields \['note'\]"):
        Detector.load(rewrite_model(CBCL_DETECTOR, tmp_path / "bad.npz", lambda h, a: h.update(note="x")))


def test_a_model_whose_degree_overflows_is_refused_at_load(tmp_path, rewrite_model):
    bad = rewrite_model(
        CBCL_DETECTOR, tmp_path / "bad.npz", lambda h, a: h["classifier"]["params"].update(degree=10**9)
    )
    r = runner.invoke(app, ["detect", "--model", str(bad), str(ASTRONAUT)])
    assert r.exit_code == 2 and "degree=1000000000" in r.stderr and "overflows on the model's own" in r.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_special_paths_named_directly_are_reported_and_the_batch_goes_on(tmp_path):
    fifo = tmp_path / "p.png"
    os.mkfifo(fifo)
    r = subprocess.run(
        [sys.executable, "-m", "facedet", "detect", "--json", str(fifo), str(ASTRONAUT)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode == 1, r.stderr
    records = json.loads(r.stdout)
    assert records[0] == {"image": str(fifo), "error": f"{fifo}: a pipe, device or socket, not a regular file"}
    assert len(records[1]["faces"]) == 1
    # a device as the CSV: refused at once, not read for ever
    r = runner.invoke(app, ["evaluate", "--images", str(tmp_path), "--annotations", "/dev/zero"])
    assert r.exit_code == 2 and "/dev/zero: a pipe, device or socket, not a regular file" in r.stderr


def test_a_csv_field_over_pythons_default_limit_is_read(tmp_path):
    name = "x" * 200_000 + ".png"  # csv's default limit: 131,072 characters
    csv_path = tmp_path / "a.csv"
    csv_path.write_text(f"image,x,y,w,h\n{name},1,2,3,4\nastronaut.jpg,,,,\n")
    (tmp_path / "astronaut.jpg").write_bytes(ASTRONAUT.read_bytes())
    r = runner.invoke(app, ["evaluate", "--images", str(tmp_path), "--annotations", str(csv_path)])
    assert r.exit_code == 1 and r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert "failed" in r.stderr and "Traceback" not in r.output


def test_boxes_outside_the_declared_image_size_are_refused_with_the_line(tmp_path):
    csv_path = tmp_path / "a.csv"
    csv_path.write_text("image,x,y,w,h,img_width,img_height\na.png,10,10,20,20,100,80\na.png,90,85,20,20,100,80\n")
    with pytest.raises(ValueError, match=r"a.csv, line 3: the box 90,85,20,20 lies wholly outside the 100x80 image"):
        read_image_sizes(csv_path)


def test_annotated_images_never_replace_another_runs(tmp_path):
    out = tmp_path / "out"
    assert runner.invoke(app, ["detect", str(ASTRONAUT), "--out", str(out)]).exit_code == 0
    written = (out / "astronaut.faces.png").read_bytes()
    r = runner.invoke(app, ["detect", str(ASTRONAUT), "--out", str(out), "--no-labels"])
    assert r.exit_code == 2 and "--overwrite" in r.stderr and (out / "astronaut.faces.png").read_bytes() == written
    # a concurrent run that creates the name while this one writes: the no-clobber rename refuses, nothing lost
    target = tmp_path / "race.png"
    target.write_bytes(b"the other run's")
    with pytest.raises(FileExistsError, match="exists and was not replaced"):
        write_image(target, np.zeros((4, 4, 3), np.uint8), overwrite=False)
    assert target.read_bytes() == b"the other run's" and sorted(p.name for p in tmp_path.iterdir()) == [
        "out",
        "race.png",
    ]


def test_an_image_name_inside_an_input_folder_is_not_an_output(tmp_path):
    faces, nonfaces = tmp_path / "faces", tmp_path / "nonfaces"
    faces.mkdir()
    nonfaces.mkdir()
    r = runner.invoke(
        app, ["train", "--faces", str(faces), "--nonfaces", str(nonfaces), "--out", str(faces / "new.png")]
    )
    assert r.exit_code == 2 and "inside the --faces input folder" in r.stderr and not (faces / "new.png").exists()


def _run_command(body, tmp_path):
    """Run ``python -m facedet`` with its command replaced by ``body`` (code using ``folder``); the process."""
    script = "\n".join(
        [
            "import os, signal, sys, time",
            "from pathlib import Path",
            "import facedet.cli",
            "from facedet import _interrupt, __main__",
            "from svmcore.persistence import atomic_write",
            f"folder = Path({str(tmp_path)!r})",
            "def command():",
            textwrap.indent(textwrap.dedent(body).strip(), "    "),
            "facedet.cli.main = command",
            "__main__.main()",
        ]
    )
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigterm_during_a_save_removes_the_temporary_file(tmp_path):
    p = _run_command(
        """
        with atomic_write(folder / "model.npz") as f:
            f.write(b"half a model")
            print("writing", flush=True)
            time.sleep(60)
    """,
        tmp_path,
    )
    assert p.stdout.readline() == "writing\n"
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == 143
    assert list(tmp_path.iterdir()) == []


def test_a_ctrl_c_after_the_last_output_is_not_an_interruption(tmp_path):
    p = _run_command(
        """
        print("results", flush=True)
        _interrupt.finish()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
        raise SystemExit(0)
    """,
        tmp_path,
    )
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out == "results\n" and "interrupted" not in err
