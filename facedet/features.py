"""Window features.

- :func:`window_features`: the Osuna et al. feature vector of a window (mask, plane, equalization), the
  input of the SVM; one code path for training patches and scanned windows (see :mod:`facedet.preprocess`).
- :func:`normalized_pixels`: the cheap features of the first cascade stage: all 361 pixels, minus the
  least-squares brightness plane over the full window, divided by the residual's norm. Unlike histogram
  equalization this is linear in the window up to one scalar per window, so a linear filter on it can be
  evaluated over a whole image by correlation (see :mod:`facedet.scan`).
"""
from __future__ import annotations

import numpy as np

from .preprocess import WINDOW, check_windows, preprocess

# Windows whose plane residual has an RMS below this (grey levels) are flat: no face, and no direction.
MIN_CONTRAST = 2.0
# Centred coordinates of the full 19x19 grid; the plane design [x, y, 1] is orthogonal on it.
_R = np.arange(WINDOW) - (WINDOW - 1) / 2
RAMP_X = np.tile(_R, (WINDOW, 1))
RAMP_Y = RAMP_X.T.copy()
SUM_R2 = float((RAMP_X ** 2).sum())  # = sum of y^2 too


def window_features(windows, *, mask=True, plane=True, equalize_hist=True):
    """SVM features of (n, 19, 19) windows: (n, 283) float64 in [-1, 1]; see :func:`facedet.preprocess.preprocess`."""
    return preprocess(windows, mask=mask, plane=plane, equalize_hist=equalize_hist)


def plane_residual(windows):
    """(n, 361) float64: each window (grey levels) minus its least-squares plane over the full window."""
    w = check_windows(windows)
    n = len(w)
    a = np.einsum("nij,ij->n", w, RAMP_X) / SUM_R2
    b = np.einsum("nij,ij->n", w, RAMP_Y) / SUM_R2
    c = w.reshape(n, WINDOW * WINDOW).mean(axis=1)
    r = w - a[:, None, None] * RAMP_X - b[:, None, None] * RAMP_Y - c[:, None, None]
    return r.reshape(n, WINDOW * WINDOW)


def normalized_pixels(windows):
    """First-stage features: (n, 361) float64 unit-norm plane residuals (zero rows for flat windows).

    Windows whose residual RMS is below MIN_CONTRAST grey levels are flat: no face, no direction.
    """
    r = plane_residual(windows)
    norm = np.linalg.norm(r, axis=1)
    ok = norm >= MIN_CONTRAST * np.sqrt(r.shape[1])
    out = np.zeros_like(r)
    out[ok] = r[ok] / norm[ok, None]
    return out
