"""Window preprocessing of Sung and Poggio (1994), as used by Osuna, Freund and Girosi (1997), sec. 5.

Every 19x19 window, whether a training patch or a window cut from a scanned image, goes through the same
batched functions over ``(n, 19, 19)`` arrays:

(a) masking: a fixed binary mask drops the pixels near the window corners, keeping 283 pixels;
(b) illumination-gradient correction: the best-fit brightness plane ``a*x + b*y + c`` (least squares over
    the unmasked pixels) is subtracted. The 3x283 pseudo-inverse of the design matrix is computed once, so
    the planes of a whole batch are one matrix product;
(c) histogram equalization over the unmasked pixels: the residuals are rounded to whole grey levels and
    each pixel is replaced by its rank (pixels of one level share their mid-rank) among the window's
    pixels, scaled to [-1, 1]: the window's empirical CDF, by a counting sort (numba, threads over windows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba as nb
import numpy as np
from svmcore.parallel import thread_map

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, DTypeLike

WINDOW = 19

# Pixels dropped from each side of each row: rounded top corners (forehead), more at the bottom (chin).
_CUT_TOP = (5, 3, 2, 1, 1)
_CUT_BOTTOM = (1, 2, 3, 4, 5, 6, 6)


def _make_mask():
    mask = np.ones((WINDOW, WINDOW), dtype=bool)
    for r, c in enumerate(_CUT_TOP):
        mask[r, :c] = mask[r, WINDOW - c :] = False
    for r, c in zip(range(WINDOW - len(_CUT_BOTTOM), WINDOW), _CUT_BOTTOM, strict=True):
        mask[r, :c] = mask[r, WINDOW - c :] = False
    return mask


MASK = _make_mask()
"""(19, 19) bool, True for the 283 pixels kept."""
MASK.flags.writeable = False
N_MASKED = int(MASK.sum())
assert N_MASKED == 283


def plane_design(mask: np.ndarray) -> np.ndarray:
    """Design matrix (p, 3) of the brightness plane ``[x, y, 1]`` over the pixels where ``mask`` is True.

    Coordinates are centred on the window so the columns are nearly orthogonal.
    """
    yy, xx = np.nonzero(mask)
    c = (mask.shape[0] - 1) / 2
    return np.column_stack([xx - c, yy - c, np.ones(len(xx))]).astype(np.float64)


_D_MASKED = plane_design(MASK)
_D_FULL = plane_design(np.ones((WINDOW, WINDOW), dtype=bool))
# (3, p) least-squares operators: coefficients = pixels @ PINV.T (computed once).
_PINV_MASKED = np.linalg.pinv(_D_MASKED)
_PINV_FULL = np.linalg.pinv(_D_FULL)
_IDX_MASKED = np.flatnonzero(MASK)


MAX_LEVEL = 65535  # 16-bit grey; equalization counts integer levels, so their range must stay bounded


def check_windows(windows: ArrayLike, name: str = "windows", dtype: DTypeLike | None = np.float64) -> np.ndarray:
    """Return ``windows`` as an (n, 19, 19) array (float64, or kept as is with ``dtype=None``); TypeError
    for a non-real dtype, ValueError for a wrong shape, NaN or infinity."""
    w = np.asarray(windows)
    if (
        w.dtype == object
        or not (np.issubdtype(w.dtype, np.number) or w.dtype == bool)
        or np.issubdtype(w.dtype, np.complexfloating)
    ):
        raise TypeError(f"{name}: expected real numbers, got dtype {w.dtype}")
    if w.ndim == 2 and w.shape == (WINDOW, WINDOW):
        w = w[None]
    if w.ndim != 3 or w.shape[1:] != (WINDOW, WINDOW):
        raise ValueError(f"{name}: expected shape (n, {WINDOW}, {WINDOW}), got {w.shape}")
    if dtype is not None:
        w = np.asarray(w, dtype=dtype)
    if w.dtype.kind == "f" and not np.isfinite(w).all():
        raise ValueError(f"{name}: contains NaN or infinity")
    return w


def check_levels(w: np.ndarray, name: str = "windows") -> None:
    """ValueError unless ``w`` holds grey levels for equalization: |values| <= 65535 (16-bit), and floats
    not all within [0, 1] (such pixels would round to one level)."""
    if w.dtype.kind in "biu" and w.dtype.itemsize <= 2 or not w.size:
        return  # 8- and 16-bit integers are grey levels by construction (the scan's hot path is uint8)
    # from the extremes as Python numbers: np.abs of a signed integer's minimum (-2**31, -2**63) wraps to itself,
    # which passed the check and made the counting sort index out of bounds (a segfault)
    top = max(abs(w.max().item()), abs(w.min().item()))
    if top > MAX_LEVEL:
        raise ValueError(f"{name}: values must be grey levels (0..255, at most {MAX_LEVEL}), got up to {top:.3g}")
    if w.dtype.kind == "f" and 0 < top <= 1.0:
        raise ValueError(
            f"{name}: pixels look scaled to [0, 1]; equalization works on grey levels, so pass "
            "them as 0..255 (e.g. windows * 255)"
        )


def apply_mask(windows: ArrayLike, mask: bool = True) -> np.ndarray:
    """Pixels of each window as rows: (n, 283) if ``mask`` else (n, 361), float64 (same values)."""
    w = check_windows(windows, dtype=None)  # gather first, convert the 283 kept pixels only
    x = w[:, MASK] if mask else w.reshape(len(w), WINDOW * WINDOW)
    return x.astype(np.float64)


def subtract_plane(pixels: ArrayLike, mask: bool = True) -> np.ndarray:
    """Subtract each row's least-squares brightness plane; ``pixels`` (n, 283) (or (n, 361) if not ``mask``).

    One matrix product for the whole batch: residual = X - (X P') D', with P the pseudo-inverse of the
    design matrix D (Sung and Poggio 1994, "illumination gradient correction"). ValueError for another shape.
    """
    D, P = (_D_MASKED, _PINV_MASKED) if mask else (_D_FULL, _PINV_FULL)
    pixels = np.asarray(pixels)
    if pixels.ndim != 2 or pixels.shape[1] != D.shape[0]:
        raise ValueError(
            f"pixels: expected (n, {D.shape[0]}) {'masked' if mask else 'full'} window rows, got shape {pixels.shape}"
        )
    return pixels - (pixels @ P.T) @ D.T


@nb.njit(cache=True, nogil=True)
def _plane_equalize(w, idx, D, P, out):
    # mask, plane subtraction, rounding and equalization of each window in one pass (no (n, p) temporaries);
    # the same arithmetic as apply_mask + subtract_plane + rint + equalize. Serial and nogil, run on threads by
    # preprocess: a parallel kernel takes three times as long to compile, and the scan already runs its levels
    # on threads. One kernel: each compiled function on the detect path costs a fresh install ~0.3-0.7 s
    n = w.shape[0]
    p = len(idx)
    scale = 2.0 / (p - 1) if p > 1 else 0.0
    x = np.empty(p)
    q = np.empty(p, np.int64)
    count = np.empty(1024, np.int64)
    value = np.empty(1024)
    for i in range(n):
        c0 = 0.0
        c1 = 0.0
        c2 = 0.0
        for j in range(p):
            x[j] = w[i, idx[j]]
            c0 += x[j] * P[0, j]
            c1 += x[j] * P[1, j]
            c2 += x[j] * P[2, j]
        for j in range(p):
            q[j] = int(np.rint(x[j] - (c0 * D[j, 0] + c1 * D[j, 1] + c2 * D[j, 2])))
        lo = q[0]
        hi = q[0]
        for j in range(p):
            lo = min(lo, q[j])
            hi = max(hi, q[j])
        # counting sort over the window's integer levels: O(p + range) instead of a comparison sort
        m = hi - lo + 1
        if m > len(count):
            count = np.empty(m, np.int64)
            value = np.empty(m)
        for b in range(m):
            count[b] = 0
        for j in range(p):
            count[q[j] - lo] += 1
        start = 0
        for b in range(m):
            value[b] = (start + 0.5 * (count[b] - 1)) * scale - 1.0  # mid-rank of the level's pixels
            start += count[b]
        for j in range(p):
            out[i, j] = value[q[j] - lo]


_THREAD_ROWS = 16384  # windows per thread at least: below that, starting threads costs more than it saves


def _plane_equalize_threaded(w, out):
    """_plane_equalize over contiguous row blocks on numba's thread count (1 inside the scan's level threads)."""
    parts = min(nb.get_num_threads(), len(w) // _THREAD_ROWS)
    if parts <= 1:
        _plane_equalize(w, _IDX_MASKED, _D_MASKED, _PINV_MASKED, out)
        return
    bounds = np.linspace(0, len(w), parts + 1).astype(np.int64)
    with thread_map(parts) as run:
        run(
            lambda k: _plane_equalize(
                w[bounds[k] : bounds[k + 1]], _IDX_MASKED, _D_MASKED, _PINV_MASKED, out[bounds[k] : bounds[k + 1]]
            ),
            range(parts),
        )


def equalize(pixels: ArrayLike) -> np.ndarray:
    """Histogram equalization of each row (n, p) -> (n, p) float64 in [-1, 1] (rank/(p-1)*2-1, mid-ranks for ties).

    Ranks by scipy.stats.rankdata (its "average" ranks are the mid-ranks); the compiled preprocessing of
    :func:`preprocess` gives the same numbers for grey-level rows. Raises ValueError for another shape or NaN/inf.
    """
    x = np.asarray(pixels)
    if x.ndim != 2:
        raise ValueError(f"pixels: expected shape (n, p), got {x.shape}")
    if x.size == 0:
        return np.empty(x.shape, dtype=np.float64)
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise ValueError("pixels: contains NaN or infinity")
    if x.shape[1] == 1:  # one pixel is a flat row, whose mid-rank maps to 0
        return np.zeros(x.shape)
    from scipy.stats import rankdata  # (imported here: scipy.stats takes a while, and the scan does not need it)

    return (rankdata(x, axis=1, method="average") - 1.0) * (2.0 / (x.shape[1] - 1)) - 1.0


def preprocess(windows: ArrayLike, *, mask: bool = True, plane: bool = True, equalize_hist: bool = True) -> np.ndarray:
    """Preprocess a batch of 19x19 windows into feature rows.

    windows: (n, 19, 19) (or one (19, 19)) array of grey levels, any real dtype (uint8 0..255 typical;
    pixels scaled to [0, 1] must be multiplied by 255 first). Returns (n, 283) float64 (or (n, 361) with
    ``mask=False``). The three flags switch steps off for ablation; with every step on, the output is in
    [-1, 1], invariant to brightness offsets and, up to the rounding of residuals to whole grey levels, to
    contrast. Without equalization the output is in grey levels / 255.
    Raises TypeError for a non-real dtype; ValueError for a wrong shape, NaN/inf, values beyond 16-bit
    grey levels, or (with equalization) float windows that all lie in [0, 1], which would round to one
    level.
    """
    w = check_windows(windows, dtype=None)  # once: the scan calls this for every batch of windows
    if equalize_hist:
        check_levels(w)
    if mask and plane and equalize_hist:
        # one numba pass; only with the mask: on the full 19x19 grid the plane is a rational function of the
        # grey levels and residuals can fall exactly on .5, where rint would depend on the summation order
        if w.dtype not in (np.uint8, np.float64):
            w = w.astype(np.float64)
        out = np.empty((len(w), N_MASKED))
        if len(w):
            _plane_equalize_threaded(np.ascontiguousarray(w).reshape(len(w), WINDOW * WINDOW), out)
        return out
    x = apply_mask(w, mask)
    if plane:
        x = subtract_plane(x, mask)
    if equalize_hist:
        # the histogram is over grey levels (Sung and Poggio): residuals rounded to whole levels, which
        # also makes residuals equal up to float noise tie (a flat window maps to all zeros)
        return equalize(np.rint(x).astype(np.int64))
    return x / 255.0


def n_features(mask: bool = True) -> int:
    """Length of a preprocessed window: 283 with the mask, 361 without."""
    return N_MASKED if mask else WINDOW * WINDOW
