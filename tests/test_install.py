"""Installs: a built wheel installed with ``pip install --target`` runs ``facedet detect`` from another folder
(the shipped model is package data, found wherever the package lands; setuptools and wheel come from the test
extra, so the build needs no network); ``facedet warmup`` precompiles what detection needs."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args, **kwargs):
    r = subprocess.run([*args], capture_output=True, text=True, timeout=600, **kwargs)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_wheel_installed_with_target_finds_the_face(tmp_path):
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    run(*pip, "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"))
    wheel = next((tmp_path / "dist").glob("*.whl"))
    run(*pip, "install", "--no-deps", "--no-compile", "--target", str(tmp_path / "site"), str(wheel))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    env.pop("FACEDET_MODEL", None)
    code = (
        "import facedet, json; print(json.dumps([facedet.__file__, str(facedet.default_model_path()), "
        "facedet.__version__]))"
    )
    where, model, version = json.loads(run(sys.executable, "-c", code, cwd=elsewhere, env=env).stdout)
    assert Path(where).is_relative_to(tmp_path / "site") and Path(model).is_relative_to(tmp_path / "site")
    assert wheel.name.startswith(f"facedet_svm-{version}-")
    r = run(
        sys.executable,
        "-m",
        "facedet",
        "detect",
        str(ROOT / "examples" / "astronaut.jpg"),
        "--json",
        cwd=elsewhere,
        env=env,
    )
    faces = json.loads(r.stdout)[0]["faces"]
    assert len(faces) == 1 and 150 < faces[0]["x"] + faces[0]["w"] / 2 < 300  # her face, centre x ~ 230


def test_warmup_leaves_nothing_for_detect_to_compile(tmp_path):
    """After `facedet warmup` into an empty numba cache, a detection in a new process finds every compiled
    function there: it adds no cache entry (each function it compiled would add one)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    r = run(sys.executable, "-m", "facedet", "warmup", env=env)
    assert r.stdout.startswith("compiled in ")

    def cached():  # one .nbc file per compiled signature
        return sorted(p.name for p in (tmp_path / "cache").rglob("*.nbc"))

    before = cached()
    assert any(n.startswith("scan.") for n in before) and any(n.startswith("merge.") for n in before)
    run(sys.executable, "-m", "facedet", "detect", str(ROOT / "examples" / "astronaut.jpg"), "--json", env=env)
    assert cached() == before
