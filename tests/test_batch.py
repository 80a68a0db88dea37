"""Batch detection: JSON lines as images finish, resumable after a kill, the same records on a Dask cluster."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from facedet.batch import done_images, expand_inputs
from facedet.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture(scope="module")
def photos(data_dir, tmp_path_factory):
    """A folder of 18 real photos: the 9 annotated scenes, twice under other names."""
    folder = tmp_path_factory.mktemp("photos")
    for k, p in enumerate(sorted((data_dir / "scenes_annotated_dlib_voc" / "images").iterdir())):
        for copy in (0, 1):
            (folder / f"{copy}_{k}{p.suffix}").write_bytes(p.read_bytes())
    return folder


def records_by_image(path):
    lines = Path(path).read_text().splitlines()
    images = [json.loads(line)["image"] for line in lines]
    assert len(images) == len(set(images)), "an image has two records"
    return {json.loads(line)["image"]: json.loads(line) for line in lines}


@pytest.fixture(scope="module")
def reference(photos, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "ref.jsonl"
    r = runner.invoke(app, ["detect", str(photos), "--jsonl", str(out)])
    assert r.exit_code == 0, r.output
    records = records_by_image(out)
    assert len(records) == 18 and sum(len(r["faces"]) for r in records.values()) > 18
    return records


def test_a_run_killed_halfway_and_resumed_has_each_image_once(photos, reference, tmp_path):
    out = tmp_path / "run.jsonl"
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "facedet", "detect", str(photos), "--jsonl", str(out)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 300
    while (not out.exists() or out.read_text().count("\n") < 3) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    with open(out, "a") as f:  # as if the kill had cut a record short
        f.write('{"image": "cut sh')
    before = out.read_text().count("\n")
    assert 3 <= before < 18
    r = runner.invoke(app, ["detect", str(photos), "--jsonl", str(out), "--resume"])
    assert r.exit_code == 0, r.output
    assert f"{18 - before} files (0 failed)" in r.stderr
    assert records_by_image(out) == reference


def test_the_records_on_a_dask_cluster_are_the_local_ones(photos, reference, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        out = tmp_path / "dask.jsonl"
        r = runner.invoke(app, ["detect", str(photos), "--jsonl", str(out), "--scheduler", cluster.scheduler_address])
        assert r.exit_code == 0, r.output
    assert records_by_image(out) == reference


def test_inputs_patterns_and_list_files(photos, tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text(f"# photos\n\n{photos / '0_1.jpg'}\n  {photos / '1_2.jpg'}  \ns3://bucket/key.jpg\n")
    names = expand_inputs([photos / "0_*.jpg"], listing)
    assert names == [str(photos / f"0_{k}.jpg") for k in range(9)] + [
        str(photos / "0_1.jpg"),
        str(photos / "1_2.jpg"),
        "s3://bucket/key.jpg",
    ]
    with pytest.raises(ValueError, match="no file matches"):
        expand_inputs([photos / "*.gif"])
    with pytest.raises(ValueError, match="a pipe, device or socket"):
        expand_inputs([], "/dev/zero")
    # a URL without fsspec or its protocol package is a failed file, and the batch goes on
    r = runner.invoke(app, ["detect", "--from-list", str(listing), "--json"])
    assert r.exit_code == 1 and "s3://bucket/key.jpg" in r.stderr
    assert [rec["image"] for rec in json.loads(r.stdout)] == names[-3:]


def test_jsonl_refuses_to_replace_and_resume_needs_it(photos, tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text('{"image": "x"}\n')
    r = runner.invoke(app, ["detect", str(photos / "0_1.jpg"), "--jsonl", str(out)])
    assert r.exit_code == 2 and "--resume" in r.stderr and out.read_text() == '{"image": "x"}\n'
    r = runner.invoke(app, ["detect", str(photos / "0_1.jpg"), "--resume"])
    assert r.exit_code == 2 and "--jsonl" in r.stderr
    out.write_text('{"image": "x"}\nnot json\n')
    with pytest.raises(ValueError, match="line 2: not a JSON record"):
        done_images(out)
    out.write_text('{"image": "x"}\n{"ima')
    assert done_images(out) == {"x"} and out.read_text() == '{"image": "x"}\n'


def test_a_bootstrapping_round_on_dask_mines_the_same_negatives(data_dir):
    """Hard-negative mining of the CBCL model (threshold lowered, so that every image gives false positives) on
    face-free scenes: the windows a 2-worker cluster returns are the single-process ones, in image order."""
    distributed = pytest.importorskip("distributed")
    from conftest import CBCL_DETECTOR

    from facedet.bootstrap import mine_negatives
    from facedet.detector import Detector
    from facedet.patches import image_files

    det = Detector.load(CBCL_DETECTOR).with_params(threshold=-1.0)
    paths = image_files(data_dir / "nonface_scenes" / "wu_rare_event")[:6]
    local = mine_negatives(det, paths, max_per_image=50)
    assert len(local[0]) > 50 and (local[1] > 0).sum() >= 4
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        remote = mine_negatives(det, [str(p) for p in paths], max_per_image=50, client=client)
    for a, b in zip(local, remote, strict=True):
        np.testing.assert_array_equal(a, b)
