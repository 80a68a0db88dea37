"""Window features: batched HOG against a per-window reference, its invariances, the feature registry."""

import numpy as np
import pytest

from facedet.features import FEATURES, HOG_DIM, get_features, hog_features, window_features


def hog_reference(window):
    """Plain per-window HOG written from Dalal and Triggs (2005), independently of the numba kernel:
    np.gradient-style centred differences with replicated border, unsigned angle, trilinear votes over 9
    orientation bins x 4x4 cells of 19/4 px, 3x3 blocks of 2x2 cells, L2-Hys (clip 0.2)."""
    w = np.pad(np.asarray(window, float), 1, mode="edge")
    gx = w[1:-1, 2:] - w[1:-1, :-2]
    gy = w[2:, 1:-1] - w[:-2, 1:-1]
    mag = np.hypot(gx, gy)
    theta = np.mod(np.arctan2(gy, gx), np.pi)
    hist = np.zeros((4, 4, 9))
    cell = 19 / 4
    for r in range(19):
        for c in range(19):
            if mag[r, c] == 0:
                continue
            o = theta[r, c] / (np.pi / 9) - 0.5
            u, v = (r + 0.5) / cell - 0.5, (c + 0.5) / cell - 0.5
            for bo, fo in ((np.floor(o), 1 - (o - np.floor(o))), (np.floor(o) + 1, o - np.floor(o))):
                for ru, fu in ((np.floor(u), 1 - (u - np.floor(u))), (np.floor(u) + 1, u - np.floor(u))):
                    for cv, fv in ((np.floor(v), 1 - (v - np.floor(v))), (np.floor(v) + 1, v - np.floor(v))):
                        hist[int(np.clip(ru, 0, 3)), int(np.clip(cv, 0, 3)), int(bo) % 9] += mag[r, c] * fo * fu * fv
    blocks = []
    for br in range(3):
        for bc in range(3):
            b = hist[br : br + 2, bc : bc + 2].ravel()
            b = np.minimum(b / np.sqrt(b @ b + 1e-6), 0.2)
            blocks.append(b / np.sqrt(b @ b + 1e-6))
    return np.concatenate(blocks)


@pytest.fixture(scope="module")
def patches(data_dir):
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    rng = np.random.default_rng(0)
    return d["X_train"][rng.choice(len(d["X_train"]), 40, replace=False)]


def test_hog_batched_equals_per_window_reference(patches):
    F = hog_features(patches)
    assert F.shape == (40, HOG_DIM) == (40, 324) and F.dtype == np.float64
    ref = np.stack([hog_reference(p) for p in patches])
    np.testing.assert_allclose(F, ref, rtol=1e-10, atol=1e-12)
    # uint8 windows take the angle from a table, float windows from arctan2: same features
    np.testing.assert_allclose(hog_features(patches.astype(np.float64)), F, rtol=1e-12, atol=1e-14)
    assert (F >= 0).all() and F.max() <= 1
    # each block L2-Hys normalised: norm 1 (the window has contrast everywhere)
    np.testing.assert_allclose(np.linalg.norm(F.reshape(40, 9, 36), axis=2), 1, atol=1e-3)


def test_hog_invariances_and_flat_windows(patches):
    w = patches.astype(np.float64)
    np.testing.assert_allclose(hog_features(0.5 * w + 40), hog_features(w), atol=1e-6)  # affine brightness
    assert not np.allclose(hog_features(w[:, ::-1]), hog_features(w))  # mirror changes it
    np.testing.assert_array_equal(hog_features(np.full((2, 19, 19), 128, np.uint8)), 0)
    np.testing.assert_array_equal(hog_features(patches[0]), hog_features(patches[:1]))  # a single (19, 19) window


def test_bad_windows_and_names():
    with pytest.raises(ValueError, match="shape"):
        hog_features(np.zeros((2, 20, 19)))
    with pytest.raises(ValueError, match="NaN"):
        hog_features(np.full((1, 19, 19), np.nan))
    with pytest.raises(TypeError):
        hog_features(np.full((1, 19, 19), "a"))
    with pytest.raises(ValueError, match="features"):
        get_features("sift")
    assert get_features("osuna") is window_features and get_features("hog") is hog_features
    assert set(FEATURES) == {"osuna", "hog"}
