"""Preprocessing (Sung and Poggio mask, brightness plane, histogram equalization) on real CBCL patches."""

import numpy as np
import pytest
from scipy.stats import rankdata

from facedet.preprocess import MASK, N_MASKED, apply_mask, equalize, preprocess, subtract_plane


@pytest.fixture(scope="module")
def patches(data_dir):
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    idx = np.r_[0:200, 3000:3200]  # faces and non-faces
    return d["X_train"][idx]


def test_mask_keeps_283_pixels_left_right_symmetric():
    assert MASK.shape == (19, 19) and MASK.sum() == N_MASKED == 283
    assert (MASK == MASK[:, ::-1]).all()
    assert not MASK[0, 0] and not MASK[18, 0] and MASK[9].all()


def test_mask_is_the_pinned_corner_cut():
    # pixels dropped from each end of each row, top to bottom; the shipped model was trained on this mask,
    # so a change that keeps 283 pixels and the symmetry still breaks it
    cut = [5, 3, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 6]
    ref = np.array([[c <= j < 19 - c for j in range(19)] for c in cut])
    np.testing.assert_array_equal(MASK, ref)


def test_plane_matches_lstsq_per_window(patches):
    x = apply_mask(patches) / 255.0
    res = subtract_plane(x)
    yy, xx = np.nonzero(MASK)
    D = np.column_stack([xx, yy, np.ones_like(xx)]).astype(float)
    for i in (0, 57, 250, 399):
        coef, *_ = np.linalg.lstsq(D, x[i], rcond=None)
        np.testing.assert_allclose(res[i], x[i] - D @ coef, atol=1e-12)
    # the residual is orthogonal to the plane basis
    np.testing.assert_allclose(res @ D, 0, atol=1e-9)


def test_plane_removes_added_gradient(patches):
    yy, xx = np.mgrid[0:19, 0:19]
    lit = np.clip(patches.astype(float) * 0.5 + 3.0 * xx - 2.0 * yy + 40, 0, 255)
    a = preprocess(patches.astype(float) * 0.5, equalize_hist=False)
    b = preprocess(lit, equalize_hist=False)
    np.testing.assert_allclose(a, b, atol=1e-9)


def test_equalize_is_midrank_reference(patches):
    x = subtract_plane(apply_mask(patches) / 255.0)
    x[:, :10] = x[:, :1]  # force ties
    ref = (rankdata(x, axis=1, method="average") - 1) * 2 / (x.shape[1] - 1) - 1
    np.testing.assert_allclose(equalize(x), ref, atol=1e-12)
    q = np.rint(x * 255).astype(np.int64)  # grey levels: the counting-sort path
    ref = (rankdata(q, axis=1, method="average") - 1) * 2 / (x.shape[1] - 1) - 1
    np.testing.assert_allclose(equalize(q), ref, atol=1e-12)
    q = np.rint(subtract_plane(apply_mask(patches) / 255.0) * 255).astype(np.int64)
    np.testing.assert_allclose(preprocess(patches), equalize(q), atol=1e-12)


def test_preprocess_invariant_to_brightness_and_contrast(patches):
    f = preprocess(patches)
    assert f.shape == (400, 283) and f.min() >= -1 and f.max() <= 1
    np.testing.assert_allclose(preprocess(patches.astype(float) + 30), f, atol=1e-12)
    # contrast: equal up to how residuals fall into whole grey levels
    g = preprocess(patches.astype(float) * 2)
    assert np.mean(np.abs(f - g)) < 0.02 and np.corrcoef(f.ravel(), g.ravel())[0, 1] > 0.995
    # batched equals one window at a time (one code path)
    np.testing.assert_allclose(preprocess(patches[7]), f[7:8])


def test_ablation_flags_change_dimension(patches):
    assert preprocess(patches, mask=False).shape == (400, 361)
    raw = preprocess(patches, plane=False, equalize_hist=False)
    np.testing.assert_allclose(raw, patches[:, MASK] / 255.0)


def test_fused_pass_equals_the_steps(patches):
    # the one-pass numba path (uint8 and float windows; a residual range of ~8000 levels grows its scratch)
    # against mask -> plane -> rint -> equalize as separate batched steps
    rng = np.random.default_rng(1)
    wide = patches[:50].astype(np.float64) * 30 + rng.normal(0, 0.3, (50, 19, 19))
    for w in (patches, wide, patches[:7].astype(np.float32)):
        steps = equalize(np.rint(subtract_plane(apply_mask(w))).astype(np.int64))
        np.testing.assert_array_equal(preprocess(w), steps)
    assert preprocess(patches[:0]).shape == (0, N_MASKED)


def test_flat_window_equalizes_to_zero():
    np.testing.assert_array_equal(preprocess(np.full((1, 19, 19), 77, np.uint8)), 0.0)


@pytest.mark.parametrize("rows", [np.array([[5], [200]], np.uint8), np.array([[0.3], [-7.0]]), np.full((2, 4), 9.5)])
def test_flat_rows_equalize_to_zero_whatever_their_length(rows):
    np.testing.assert_array_equal(equalize(rows), 0.0)  # a single pixel gave -1


@pytest.mark.parametrize(
    "bad, exc",
    [
        (np.zeros((3, 19, 18)), ValueError),
        (np.zeros((2, 19, 19), object), TypeError),
        (np.full((1, 19, 19), np.nan), ValueError),
    ],
)
def test_bad_input(bad, exc):
    with pytest.raises(exc):
        preprocess(bad)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_signed_integer_minimum_is_refused_not_a_crash(dtype):
    # np.abs(-2**31) is -2**31: the level check passed it and the counting sort wrote out of bounds (segfault)
    w = np.zeros((1, 19, 19), dtype)
    w[0, 9, 9] = np.iinfo(dtype).min
    for mask in (True, False):
        with pytest.raises(ValueError, match="grey levels"):
            preprocess(w, mask=mask)
    w[0, 9, 9] = -65535  # the most negative 16-bit level stays accepted
    assert np.isfinite(preprocess(w)).all()


def test_plane_step_alone_checks_its_rows():
    with pytest.raises(ValueError, match="283"):
        subtract_plane(np.zeros((2, 100)))


# --- pinned by the mutation audit (branch mut-fd) ------------------------------------------------------------
def test_unit_range_floats_with_a_white_pixel_are_refused(patches):
    # pixels scaled to [0, 1] whose maximum is exactly 1.0 (any window with a white pixel) would equalize as a
    # handful of grey levels: refused like the rest of [0, 1]
    white = patches[patches.reshape(len(patches), -1).max(axis=1) == 255]
    assert len(white)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        preprocess(white[:3] / 255.0)


@pytest.mark.parametrize("mask", [True, False])
def test_unfused_steps_against_per_window_lstsq_and_ranks(patches, mask):
    # the step-by-step path (here: no mask, or the plane alone) against a per-window reference: least-squares
    # plane by lstsq, residual rounded to whole grey levels, mid-ranks scaled to [-1, 1]
    w = patches[::20].astype(np.float64) * 1.7
    keep = MASK if mask else np.ones((19, 19), bool)
    yy, xx = np.nonzero(keep)
    D = np.column_stack([xx, yy, np.ones_like(xx)]).astype(float)
    got = preprocess(w, mask=mask)
    for i, win in enumerate(w):
        x = win[keep]
        coef, *_ = np.linalg.lstsq(D, x, rcond=None)
        q = np.rint(x - D @ coef)
        ref = (rankdata(q, method="average") - 1) * 2 / (len(q) - 1) - 1
        np.testing.assert_allclose(got[i], ref, atol=1e-12)


def test_large_batches_split_over_threads_give_the_same_rows(patches, monkeypatch):
    # training preprocesses 10^5 patches: in blocks on numba's thread count, each block the serial kernel's rows
    import types

    import facedet.preprocess as pp

    serial = preprocess(patches)
    monkeypatch.setattr(pp, "_THREAD_ROWS", 64)  # 400 patches: blocks on 2 threads
    # two (Python) threads whatever the machine's cores; numba's own thread count is left alone
    monkeypatch.setattr(pp, "nb", types.SimpleNamespace(get_num_threads=lambda: 2))
    calls = []
    kernel = pp._plane_equalize
    monkeypatch.setattr(pp, "_plane_equalize", lambda w, *args: calls.append(len(w)) or kernel(w, *args))
    np.testing.assert_array_equal(preprocess(patches), serial)
    assert calls == [200, 200]
