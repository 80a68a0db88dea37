import os
from pathlib import Path

import numpy as np
import pytest

# ../shared/data beside the repository (CI lays it there); FACEDET_DATA overrides.
DATA = Path(os.environ.get("FACEDET_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
# the CBCL-trained detector shipped before the Web Faces one: a fixed model for the tests that pin exact scores,
# windows and boxes (tests of the shipped model's quality load facedet.load_default())
CBCL_DETECTOR = Path(__file__).resolve().parent / "data" / "cbcl_detector.npz"


@pytest.fixture(scope="session")
def data_dir():
    if not DATA.is_dir():
        raise RuntimeError(f"real data not found at {DATA}; set FACEDET_DATA to ../shared/data")
    return DATA


@pytest.fixture(scope="session")
def cbcl(data_dir):
    """CBCL Face DB #1 as float64 pixels in [0, 1]: X_train (6977, 361), y_train in {0, 1}, X_test, y_test."""
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    return {
        "X_train": d["X_train"].reshape(len(d["X_train"]), -1) / 255.0,
        "y_train": d["y_train"].astype(int),
        "X_test": d["X_test"].reshape(len(d["X_test"]), -1) / 255.0,
        "y_test": d["y_test"].astype(int),
    }


@pytest.fixture(scope="session")
def pendigits_full(data_dir):
    """pendigits (10 digits, 16 pen coordinates scaled to [0, 1]): X (7494, 16), y, X_test (3498, 16), y_test."""
    from sklearn.datasets import load_svmlight_file

    d = data_dir / "bench" / "pendigits"
    X, y = load_svmlight_file(str(d / "pendigits.bz2"), n_features=16)
    Xt, yt = load_svmlight_file(str(d / "pendigits.t.bz2"), n_features=16)
    return X.toarray() / 100.0, y.astype(int), Xt.toarray() / 100.0, yt.astype(int)


def cbcl_sample(cbcl, n_train, n_test, seed=0):
    """(X_train, y_train, X_test, y_test): n_train and n_test rows drawn without replacement from the CBCL split."""
    rng = np.random.default_rng(seed)
    tr = rng.choice(len(cbcl["X_train"]), n_train, replace=False)
    te = rng.choice(len(cbcl["X_test"]), n_test, replace=False)
    return cbcl["X_train"][tr], cbcl["y_train"][tr], cbcl["X_test"][te], cbcl["y_test"][te]


@pytest.fixture(scope="session")
def rewrite_model():
    """rewrite(path, out, edit): copy the model file at path to out after edit(header, arrays), for the
    tests of what svmcore.load refuses."""
    import json

    def rewrite(path, out, edit):
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        header = json.loads(arrays.pop("__header__").tobytes())
        edit(header, arrays)
        np.savez(out, __header__=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)
        return out

    return rewrite


@pytest.fixture(scope="session")
def grey_png():
    """grey_png(width, height, idat): the bytes of an 8-bit grey PNG whose header claims width x height, with the
    given (zlib) image data: a file of a few bytes that claims any size, for the decompression-bomb tests."""
    import struct
    import zlib

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    def png(width, height, idat):
        ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")

    return png


@pytest.fixture(scope="session")
def rasterise():
    """rasterise(box): the (40, 40) bool mask of an integer box (x, y, w, h) -- the reference for IoU tests."""

    def raster(box):
        m = np.zeros((40, 40), bool)
        x, y, w, h = np.asarray(box[:4]).astype(int)
        m[y : y + h, x : x + w] = True
        return m

    return raster


def peak_growth(setup: str, measured: str) -> tuple[int, str]:
    """Run the Python code ``setup``, then ``measured``, in a fresh interpreter; return (bytes by which the peak
    resident memory during ``measured`` exceeds the resident memory before it, what ``measured`` printed). The peak
    is VmHWM of /proc/self/status, reset before ``measured``: ru_maxrss keeps the parent's peak across exec
    (pytest's, with the other tests' data). Linux only."""
    import subprocess
    import sys
    import textwrap

    script = "\n".join(
        [
            textwrap.dedent(setup),
            "def _kib(field):",
            "    with open('/proc/self/status') as f:",
            "        return int(dict(line.split(':', 1) for line in f)[field].split()[0])",
            "_before = _kib('VmRSS')",
            "with open('/proc/self/clear_refs', 'w') as f:",
            "    f.write('5')  # VmHWM := VmRSS",
            textwrap.dedent(measured),
            "import sys as _sys",
            "_sys.stderr.write(f'\\npeak growth {(_kib(\"VmHWM\") - _before) * 1024}\\n')",
        ]
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return int(r.stderr.rsplit("peak growth ", 1)[1]), r.stdout
