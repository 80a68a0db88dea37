"""Window features.

- :func:`window_features`: the Osuna et al. feature vector of a window (mask, plane, equalization), the
  input of the SVM; one code path for training patches and scanned windows (see :mod:`facedet.preprocess`).
- :func:`normalized_pixels`: the cheap features of the first cascade stage: all 361 pixels, minus the
  least-squares brightness plane over the full window, divided by the residual's norm. Unlike histogram
  equalization this is linear in the window up to one scalar per window, so a linear filter on it can be
  evaluated over a whole image by correlation (see :mod:`facedet.scan`).
- :func:`hog_features`: a histogram of oriented gradients (Dalal and Triggs 2005) of each window:
  nonnegative, for additive-kernel classifiers (svmcore.PmSVM, scored in O(d) per window).

:data:`FEATURES` names the classifier features a :class:`facedet.detector.Detector` can use;
:func:`get_features` resolves a name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba as nb
import numpy as np

from svmcore.validation import check_choice

from .preprocess import WINDOW, check_windows, preprocess

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import ArrayLike

# Windows whose plane residual has an RMS below this (grey levels) are flat: no face, and no direction.
MIN_CONTRAST = 2.0
# Centred coordinates of the full 19x19 grid; the plane design [x, y, 1] is orthogonal on it.
_R = np.arange(WINDOW) - (WINDOW - 1) / 2
RAMP_X = np.tile(_R, (WINDOW, 1))
RAMP_Y = RAMP_X.T.copy()
SUM_R2 = float((RAMP_X**2).sum())  # = sum of y^2 too


def window_features(
    windows: ArrayLike, *, mask: bool = True, plane: bool = True, equalize_hist: bool = True
) -> np.ndarray:
    """SVM features of (n, 19, 19) windows: (n, 283) float64 in [-1, 1]; see :func:`facedet.preprocess.preprocess`."""
    return preprocess(windows, mask=mask, plane=plane, equalize_hist=equalize_hist)


def plane_residual(windows: ArrayLike) -> np.ndarray:
    """(n, 361) float64: each window (grey levels) minus its least-squares plane over the full window."""
    w = check_windows(windows)
    n = len(w)
    a = np.einsum("nij,ij->n", w, RAMP_X) / SUM_R2
    b = np.einsum("nij,ij->n", w, RAMP_Y) / SUM_R2
    c = w.reshape(n, WINDOW * WINDOW).mean(axis=1)
    r = w - a[:, None, None] * RAMP_X - b[:, None, None] * RAMP_Y - c[:, None, None]
    return r.reshape(n, WINDOW * WINDOW)


def normalized_pixels(windows: ArrayLike) -> np.ndarray:
    """First-stage features: (n, 361) float64 unit-norm plane residuals (zero rows for flat windows).

    Windows whose residual RMS is below MIN_CONTRAST grey levels are flat: no face, no direction.
    """
    r = plane_residual(windows)
    norm = np.linalg.norm(r, axis=1)
    ok = norm >= MIN_CONTRAST * np.sqrt(r.shape[1])
    out = np.zeros_like(r)
    out[ok] = r[ok] / norm[ok, None]
    return out


# HOG layout on the 19x19 window: 4x4 cells of 19/4 px, 9 unsigned orientation bins, 3x3 blocks of 2x2 cells.
HOG_CELLS = 4
HOG_BINS = 9
HOG_BLOCK = 2
HOG_CLIP = 0.2  # L2-Hys
HOG_DIM = (HOG_CELLS - HOG_BLOCK + 1) ** 2 * HOG_BLOCK**2 * HOG_BINS  # 324


@nb.njit(cache=True, parallel=True, nogil=True)
def _hog(w, out, angles, cell_index, cell_weight):
    n = w.shape[0]
    size = w.shape[1]
    nc = HOG_CELLS
    nbins = HOG_BINS
    nblk = nc - HOG_BLOCK + 1
    for i in nb.prange(n):
        hist = np.zeros((nc, nc, nbins))
        for r in range(size):
            ra, rb = cell_index[r, 0], cell_index[r, 1]
            fa, fb = cell_weight[r, 0], cell_weight[r, 1]
            for c in range(size):
                # centred differences, replicated border
                gx = float(w[i, r, min(c + 1, size - 1)]) - float(w[i, r, max(c - 1, 0)])
                gy = float(w[i, min(r + 1, size - 1), c]) - float(w[i, max(r - 1, 0), c])
                mag = np.sqrt(gx * gx + gy * gy)
                if mag == 0.0:
                    continue
                if angles.shape[0] > 0:  # integer grey levels: differences in -255..255, angle from the table
                    theta = angles[int(gy) + 255, int(gx) + 255]
                else:
                    theta = np.arctan2(gy, gx)
                    if theta < 0.0:
                        theta += np.pi
                # trilinear vote: orientation bins centred at (b + 1/2) pi / nbins (circular), cells by the
                # precomputed row / column weights
                o = theta * nbins / np.pi - 0.5
                o0 = int(np.floor(o))
                m1 = mag * (o - o0)
                m0 = mag - m1
                b0 = o0 % nbins
                b1 = (o0 + 1) % nbins
                ca, cb = cell_index[c, 0], cell_index[c, 1]
                ga, gb = cell_weight[c, 0], cell_weight[c, 1]
                f = fa * ga
                hist[ra, ca, b0] += f * m0
                hist[ra, ca, b1] += f * m1
                f = fa * gb
                hist[ra, cb, b0] += f * m0
                hist[ra, cb, b1] += f * m1
                f = fb * ga
                hist[rb, ca, b0] += f * m0
                hist[rb, ca, b1] += f * m1
                f = fb * gb
                hist[rb, cb, b0] += f * m0
                hist[rb, cb, b1] += f * m1
        k = 0
        for br in range(nblk):
            for bc in range(nblk):
                start = k
                ss = 0.0
                for dr in range(HOG_BLOCK):
                    for dc in range(HOG_BLOCK):
                        for b in range(nbins):
                            x = hist[br + dr, bc + dc, b]
                            out[i, k] = x
                            ss += x * x
                            k += 1
                # L2-Hys: normalise, clip, renormalise (eps keeps flat blocks at zero)
                norm = np.sqrt(ss + 1e-6)
                ss = 0.0
                for q in range(start, k):
                    x = min(out[i, q] / norm, HOG_CLIP)
                    out[i, q] = x
                    ss += x * x
                norm = np.sqrt(ss + 1e-6)
                for q in range(start, k):
                    out[i, q] /= norm


def _cell_weights():
    """Bilinear spatial weights of pixel rows (or columns) 0..18 on the cells: index (19, 2) int64 and weight
    (19, 2) float64 of the two cells whose centres (k + 1/2) * 19/4 px surround the pixel centre; beyond the
    outer centres both indices are the edge cell."""
    u = (np.arange(WINDOW) + 0.5) / (WINDOW / HOG_CELLS) - 0.5
    k = np.floor(u).astype(np.int64)
    index = np.clip(np.stack([k, k + 1], axis=1), 0, HOG_CELLS - 1)
    weight = np.stack([1 - (u - k), u - k], axis=1)
    return index, weight


_CELL_INDEX, _CELL_WEIGHT = _cell_weights()


def hog_features(windows: ArrayLike) -> np.ndarray:
    """HOG of (n, 19, 19) windows (grey levels): (n, 324) float64, nonnegative, each block's part of norm <= 1.

    Dalal and Triggs (CVPR 2005): centred gradients [-1, 0, 1] (replicated border), unsigned orientation in
    9 bins over [0, pi), magnitudes voted trilinearly into the two nearest bins and the four nearest of
    4x4 cells (cells of 19/4 px), then 3x3 overlapping blocks of 2x2 cells, each L2-Hys normalised (clip 0.2).
    Invariant to affine brightness changes up to the eps 1e-6 in the norms. Row layout: block (row, col),
    cell (row, col) within the block, orientation bin. Numba, parallel over windows.
    Raises ValueError/TypeError for anything but (n, 19, 19) windows.
    """
    w = check_windows(windows, dtype=None)
    out = np.empty((len(w), HOG_DIM))
    if w.dtype == np.uint8:  # scanned windows: the angle of every gradient comes from a table (3x faster)
        _hog(np.ascontiguousarray(w), out, _gradient_angles(), _CELL_INDEX, _CELL_WEIGHT)
    else:
        _hog(np.ascontiguousarray(w, dtype=np.float64), out, np.empty((0, 0)), _CELL_INDEX, _CELL_WEIGHT)
    return out


_ANGLES = []


def _gradient_angles():
    """(511, 511) float64: the unsigned angle in [0, pi) of the gradient (gx, gy) at [gy + 255, gx + 255]."""
    if not _ANGLES:
        d = np.arange(-255.0, 256.0)
        a = np.arctan2(d[:, None], d[None, :])
        _ANGLES.append(np.where(a < 0, a + np.pi, a))
    return _ANGLES[0]


FEATURES = {"osuna": window_features, "hog": hog_features}


def get_features(name: str) -> Callable[[ArrayLike], np.ndarray]:
    """The feature function windows (n, 19, 19) -> rows (n, p) called ``name`` (a key of :data:`FEATURES`):
    "osuna" (:func:`window_features`, 283 values in [-1, 1]) or "hog" (:func:`hog_features`, 324 values >= 0).
    Raises ValueError for another name."""
    return FEATURES[check_choice(name, "features", tuple(FEATURES))]
