import os
from pathlib import Path

import numpy as np
import pytest

# ../shared/data beside the repository (CI lays it there); FACEDET_DATA overrides.
DATA = Path(os.environ.get("FACEDET_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


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
