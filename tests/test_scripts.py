"""The scripts in scripts/ refuse bad options and incomplete data folders with a one-line usage error (exit 2)
before anything runs, never a traceback from inside a loader or a solver."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def run_script(name, *args, env=None):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args], capture_output=True, text=True, env=env, timeout=300
    )


def assert_usage_error(r, *needles):
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert ": error: " in last and all(n in last for n in needles), r.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ("train_pmsvm_detector.py", "--out", "{tmp}/m.npz", "--data", "{empty}"),
        ("train_default.py", "--out", "{tmp}/m.npz", "--data", "{empty}"),
        ("bench_svc.py", "--problems", "pendigits", "--data", "{empty}"),
        ("bench_svmplus.py", "--sizes", "500", "--data", "{empty}"),
        ("bench_detect.py", "--no-dlib", "--data", "{empty}"),
        ("bench_detect.py", "--mit-cmu", "--no-dlib", "--data", "{empty}"),
        ("bench_detect.py", "--webfaces-val", "--no-dlib", "--data", "{empty}"),
        ("svmplus_faces.py", "--data", "{empty}"),
    ],
)
def test_data_folder_without_the_files(tmp_path, argv):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_script(*[a.format(tmp=tmp_path, empty=empty) for a in argv])
    assert_usage_error(r, "missing data file", str(empty))
    assert not (tmp_path / "m.npz").exists()


def test_bench_detect_mit_cmu_quick_run(data_dir):
    """The MIT+CMU mode on two images with the Haar cascade only (its box map fitted on 5 val images): the ROC
    table has a figure at each of Viola and Jones' false-positive counts, and their published row."""
    r = run_script(
        "bench_detect.py",
        "--mit-cmu",
        "--no-default",
        "--no-dlib",
        "--limit",
        "2",
        "--calibration-images",
        "5",
        "--data",
        str(data_dir),
    )
    assert r.returncode == 0, r.stderr
    assert "the first 2 of 130 images (--limit: not the benchmark's figures)" in r.stdout, r.stdout
    header = next(line for line in r.stdout.splitlines() if line.startswith("| detector | boxes | swept"))
    assert "| 10 | 31 | 50 | 65 | 78 | 95 | 167 | operating point |" in header
    rows = [line for line in r.stdout.splitlines() if line.startswith("| haar sf=1.1") and "neighbours" in line]
    assert [row.split(" | ")[1] for row in rows] == ["mapped", "raw"]
    assert all(row.count("%") == 8 and " FP |" in row for row in rows), rows
    assert "| Viola-Jones, published (IJCV 2004, Table 3; 507 faces) | | | 76.1% | 88.4% |" in r.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ("bench_pmsvm.py", "--quick"),
        ("bench_topk.py", "--quick", "--skip-projections"),
        ("repro_topk.py", "--quick", "--datasets", "usps"),
    ],
)
def test_facedet_data_without_the_files(tmp_path, argv):
    (tmp_path / "bench").mkdir()
    r = run_script(*argv, env={"FACEDET_DATA": str(tmp_path)})
    assert_usage_error(r, "missing data file", str(tmp_path))


@pytest.mark.parametrize("name", ["repro_svmplus.py", "ablation_preprocess.py"])
def test_data_file_option_given_a_folder(tmp_path, name):
    r = run_script(name, "--data", str(tmp_path))
    assert_usage_error(r, "not a file", str(tmp_path))


@pytest.mark.parametrize("name", ["repro_svmplus.py", "ablation_preprocess.py"])
def test_data_file_option_given_a_file_that_is_not_the_data(tmp_path, name):
    """--data naming a text file or an .npz without the script's arrays: numpy's traceback ("pickled (object)
    data", KeyError) before; now a usage error naming the file."""
    import numpy as np

    text = tmp_path / "notes.npz"
    text.write_text("not an archive\n")
    r = run_script(name, "--data", str(text))
    assert_usage_error(r, str(text), "not an .npz archive")
    other = tmp_path / "other.npz"
    np.savez(other, X_train=np.zeros((3, 19, 19), np.uint8), y_train=np.zeros(3))
    r = run_script(name, "--data", str(other))
    assert_usage_error(r, str(other), "no arrays")


def test_ablation_data_of_another_shape(tmp_path):
    import numpy as np

    path = tmp_path / "flat.npz"
    np.savez(path, X_train=np.zeros((4, 100)), y_train=np.zeros(4), X_test=np.zeros((4, 100)), y_test=np.zeros(4))
    r = run_script("ablation_preprocess.py", "--data", str(path))
    assert_usage_error(r, "X_train (4, 100)", "19x19 patches")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (("train_pmsvm_detector.py", "--out", "{tmp}/m.npz", "--C", "-1"), "C: must be > 0"),
        (("train_pmsvm_detector.py", "--out", "{tmp}/m.npz", "--p", "2"), "p <= 0"),
        (("ablation_preprocess.py", "--C", "-1"), "--C"),
        (("bench_svc.py", "--problems", "pendigits", "--cache-size", "-5"), "--cache-size"),
        (("bench_svmplus.py", "--sizes", "-5"), "--sizes"),  # was X[:-5]: a run on 6,972 rows labelled -5
        (("bench_svmplus.py", "--sizes", "500", "--tol", "-1"), "--tol"),
    ],
)
def test_bad_values_are_usage_errors(tmp_path, argv, needle):
    r = run_script(*[a.format(tmp=tmp_path) for a in argv])
    assert_usage_error(r, needle)
    assert not (tmp_path / "m.npz").exists()


def test_out_in_a_folder_where_no_file_can_be_created(tmp_path, monkeypatch):
    """os.access(folder, W_OK) says yes to root on a read-only file system (/proc here): training ran for
    minutes and then failed to save."""
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import argparse

    import _training_data

    ap = argparse.ArgumentParser(prog="train")
    bad = Path("/proc/facedet-audit.npz") if os.geteuid() == 0 else tmp_path / "ro" / "m.npz"
    if os.geteuid() != 0:
        bad.parent.mkdir()
        bad.parent.chmod(0o555)
    args = argparse.Namespace(out=bad, rounds=1, data=tmp_path)
    with pytest.raises(SystemExit) as exc:
        _training_data.check_args(ap, args)
    assert exc.value.code == 2


def test_out_may_not_replace_an_input_data_file(tmp_path):
    """--out naming the CBCL patch file under --data would overwrite the training data once training ends."""
    data = tmp_path / "data"
    for f in (
        "cbcl_face_db1/cbcl_face_db1_19x19_uint8.npz",
        "scenes_annotated_dlib_voc/boxes.csv",
        "caltech_webfaces/landmarks.csv",
        "caltech_webfaces/boxes.csv",
    ):
        (data / f).parent.mkdir(parents=True, exist_ok=True)
        (data / f).write_bytes(b"x")
    (data / "nonface_scenes").mkdir()
    target = data / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz"
    for name in ("train_pmsvm_detector.py", "train_default.py"):
        r = run_script(name, "--data", str(data), "--out", str(target))
        assert_usage_error(r, "input data file")
        assert target.read_bytes() == b"x"


# options whose value has no default to state: repeatable, optional comparisons, required
NO_DEFAULT = {
    ("bench_detect.py", "--model"),
    ("train_default.py", "--check"),
    ("train_default.py", "--from-round"),
    ("train_pmsvm_detector.py", "--out"),
}


@pytest.mark.parametrize("name", sorted(p.name for p in SCRIPTS.glob("[a-z]*.py")))
def test_help_states_the_default_of_every_option_that_takes_a_value(name):
    """--help is where a user looks up what a run does when an option is left out (several said nothing: the
    --repeat of bench_detect.py, the --rounds of train_default.py, ...)."""
    import re

    r = run_script(name, "--help", env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    options = r.stdout.split("options:", 1)[1]
    entries = re.split(r"\n(?=  -)", options)
    checked = 0
    for entry in entries:
        m = re.match(r"\s*(?:-\w, )?(--[\w-]+)(?:,\s*--[\w-]+)*\s+([A-Z_{][\w,{}]*)?", entry)
        if not m or m.group(1) == "--help" or not m.group(2):
            continue  # --help, and flags (store_true), which take no value
        checked += 1
        if (name, m.group(1)) not in NO_DEFAULT:
            assert "default" in entry, f"{name} {m.group(1)}: {entry.strip()}"
    assert checked, r.stdout
