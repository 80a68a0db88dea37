"""Multi-scale scanning: image pyramid, dense first-stage filter, batched SVM scoring of the survivors.

The image is shrunk by ``scale_factor`` repeatedly (Osuna et al. 1997, sec. 5: "rescaled several times");
at each level every 19x19 window on a ``stride`` grid is a candidate. The linear :class:`Prefilter` is
evaluated at every position at once: one correlation (``cv2.matchTemplate``) divided by the window's
plane-residual norm, which comes from running sums over the current band of 19 rows. Stage 1 is screened the
same way (one more correlation); the windows near or above its threshold get every later stage exactly, as one
float32 product per chunk of windows. The windows passing all stages are cut out together, preprocessed as
one batch and scored as one batch. No Python code runs per window. Optionally (``refine``) the search then
goes from coarse to fine around the promising windows only: stride 1 next to them, and the pyramid's half
steps.
Levels are scanned on several threads at once, each level's kernels on one thread.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

import cv2
import numba as nb
import numpy as np

from svmcore.parallel import blas_single_thread, check_threads, thread_map
from svmcore.validation import check_scalar

from .features import MIN_CONTRAST, SUM_R2
from .preprocess import WINDOW

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import ArrayLike

    from .scoring import Prefilter, Scorer

_N = WINDOW * WINDOW
_C = (WINDOW - 1) / 2
# Screening margin on a normalized stage score (in [-1, 1]): the correlation's float32 error is ~2e-6 there
_MARGIN = 1e-3
MIN_SCALE_FACTOR = 1.01  # a step of 1.0001 made 46,805 pyramid levels for a 512 px image; 1.01 makes 330


def pyramid_scales(
    height: int, width: int, scale_factor: float = 1.2, min_window: float = WINDOW, max_window: float | None = None
) -> list[float]:
    """Scales s (window side in original pixels = 19 s) from ``min_window`` up by ``scale_factor``.

    Stops when the window no longer fits the image or exceeds ``max_window`` pixels. A scale whose level
    (the image at 1/s, rounded to whole pixels) has the size of the previous one is left out: it would scan
    the same windows again (steps close to 1 on small images). Returns a list of floats. Raises ValueError /
    TypeError for scale_factor < 1.01 or a non-finite or non-positive window size.
    """
    check_scalar(scale_factor, "scale_factor", lo=MIN_SCALE_FACTOR)
    check_scalar(min_window, "min_window", lo=0, lo_open=True)
    if max_window is not None:
        check_scalar(max_window, "max_window", lo=0, lo_open=True)
    limit = min(height, width) if max_window is None else min(height, width, max_window)
    scales, last = [], None
    s = max(min_window, 1) / WINDOW
    while WINDOW * s <= limit + 1e-9:
        size = _level_size(height, width, s)
        if size != last:
            scales.append(s)
        s, last = s * scale_factor, size
    return scales


def prefilter_map(level: ArrayLike, prefilter: Prefilter, stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Stage-0 scores w'z and plane-residual norms at the window positions (y, x) = (i, j) * ``stride`` of a
    grey level image (h, w).

    Returns (score, norm), both (ceil((h-18)/stride), ceil((w-18)/stride)) float64 ((h-18, w-18) for stride 1);
    score equals ``prefilter.scores(windows)[:, 0]`` of the windows there. Flat windows (residual RMS below
    MIN_CONTRAST grey levels) get score -inf. Raises ValueError for a level that is not 2-D or smaller than
    19x19, or a stride that is not an integer >= 1 (TypeError for a non-number).
    """
    L = np.ascontiguousarray(level, dtype=np.float32)
    # else OpenCV's assertion on the template size, or a ZeroDivisionError inside numba for stride 0
    if L.ndim != 2 or min(L.shape) < WINDOW:
        raise ValueError(f"prefilter_map: expected a 2-D level of at least {WINDOW}x{WINDOW}, got shape {L.shape}")
    check_scalar(stride, "stride", lo=1, integer=True)
    corr = cv2.matchTemplate(L, prefilter.weights[0].astype(np.float32), cv2.TM_CCORR)
    return _stage0(L, corr, stride, MIN_CONTRAST**2 * _N)


@nb.njit(cache=True, nogil=True)
def _stage0(L, corr, stride, flat_below):
    # score and norm on the stride grid in one pass over the level. The plane residual's squared norm comes from
    # the window sums of p, p^2, x p and y p: |p|^2 - n mean^2 - ((x p)^2 + (y p)^2) / sum r^2 with x, y about
    # the window's centre. Column sums over the current 19-row band move down by the stride (rows in, rows out),
    # and each grid row's window sums are differences of their running sums along x: O(width) memory that stays
    # in cache (four whole-level integral images were memory-bound: 2.2 of 5.6 s on a 12-megapixel photo). For
    # grey levels (integers) every sum is exact in float64, whatever its order, so the result is too.
    h, w = L.shape
    ny = (h - WINDOW) // stride + 1
    nx = (w - WINDOW) // stride + 1
    score = np.empty((ny, nx))
    norm = np.empty((ny, nx))
    c1 = np.zeros(w)
    c2 = np.zeros(w)
    cx = np.zeros(w)
    cy = np.zeros(w)
    P1 = np.zeros(w + 1)
    P2 = np.zeros(w + 1)
    PX = np.zeros(w + 1)
    PY = np.zeros(w + 1)
    top = -WINDOW  # the band holds rows [top, top + 19): none yet
    for i in range(ny):
        y0 = i * stride
        fill = y0 - top >= WINDOW  # the first grid row, or a stride of 19 or more: no row stays in the band
        if fill:
            for x in range(w):  # loops, not slice fills: a second faster to compile
                c1[x] = 0.0
                c2[x] = 0.0
                cx[x] = 0.0
                cy[x] = 0.0
        # the rows moved: fill adds rows y0 .. y0 + 18; else row top + k leaves and row top + k + 19 enters, for
        # k < y0 - top, in that order (one loop: a function per move took ~0.3 s more to compile)
        for r in range(WINDOW if fill else 2 * (y0 - top)):
            if fill:
                y, sign = y0 + r, 1.0
            else:
                y, sign = top + r // 2 + (r % 2) * WINDOW, 2.0 * (r % 2) - 1.0
            for x in range(w):
                v = np.float64(L[y, x])
                c1[x] += sign * v
                c2[x] += sign * (v * v)
                cx[x] += sign * (v * x)
                cy[x] += sign * (v * y)
        top = y0
        for x in range(w):
            P1[x + 1] = P1[x] + c1[x]
            P2[x + 1] = P2[x] + c2[x]
            PX[x + 1] = PX[x] + cx[x]
            PY[x + 1] = PY[x] + cy[x]
        for j in range(nx):
            x0 = j * stride
            x1 = x0 + WINDOW
            s1 = P1[x1] - P1[x0]
            s2 = P2[x1] - P2[x0]
            mx = PX[x1] - PX[x0] - (x0 + _C) * s1
            my = PY[x1] - PY[x0] - (y0 + _C) * s1
            n2 = s2 - s1 * s1 / _N - (mx * mx + my * my) / SUM_R2
            norm[i, j] = np.sqrt(max(n2, 1e-12))
            score[i, j] = -np.inf if n2 < flat_below else np.float64(corr[y0, x0]) / norm[i, j]
    return score, norm


def later_stages(
    L: np.ndarray,
    ys: np.ndarray,
    xs: np.ndarray,
    norm: np.ndarray,
    Wk: np.ndarray,
    thresholds: np.ndarray,
    chunk: int = 2048,
) -> np.ndarray:
    """Bool (n,): windows (top-left corners ys, xs) of a float32 level L passing the later stages Wk (k, 361)
    float32, given their plane-residual norms (n,). w_k is orthogonal to the plane, so w_k'z = w_k'x / norm
    on the raw window. The float32 rows are gathered in chunks that stay in cache (all at once, the gather
    of the windows passing stage 0, up to 60% of a level, is hundreds of MB and memory-bound)."""
    ok = np.empty(len(ys), dtype=bool)
    # stages padded to a multiple of 8 with zero rows that always pass: OpenBLAS's sgemm takes 1.7x as long for
    # 7 columns as for 8 (Haswell kernels). Its sums may then round differently in the last bit (0.4% of the
    # windows of 30 images; no pass or fail changed), as they do from one CPU type to another
    k = -(-len(Wk) // 8) * 8
    W = np.zeros((k, _N), np.float32)
    W[: len(Wk)] = Wk
    t = np.full(k, -np.inf)
    t[: len(Wk)] = thresholds
    X = np.empty((min(chunk, len(ys)), _N), np.float32)
    for i in range(0, len(ys), chunk):
        j = slice(i, i + chunk)
        rows = X[: len(ys[j])]
        _gather(L, ys[j], xs[j], rows)
        _pass_all(rows @ W.T, norm[j], t, ok[j])
    return ok


@nb.njit(cache=True, nogil=True)
def _pass_all(P, norm, t, ok):
    # ok[n] = all_k P[n, k] / norm[n] > t[k], in float64 as numpy would compute it, without its (n, k) temporaries
    # (numpy's took 10-15% longer over the later stages)
    for n in range(P.shape[0]):
        ok[n] = True
        for k in range(P.shape[1]):
            if not np.float64(P[n, k]) / norm[n] > t[k]:
                ok[n] = False
                break


@nb.njit(cache=True, nogil=True)
def _gather(L, ys, xs, out):
    # out[n] = the window at (ys[n], xs[n]), row-major: 29 ms per 640x480 image (the later stages' float32 rows)
    # against 45 ms for numpy's fancy indexing of a sliding view. y and x are read once per window: out might
    # alias ys or xs for all LLVM knows, so ys[n] in the inner loop would be reloaded at every pixel (88 ms)
    for n in range(ys.shape[0]):
        y = ys[n]
        x = xs[n]
        for r in range(WINDOW):
            for c in range(WINDOW):
                out[n, r * WINDOW + c] = L[y + r, x + c]


def cut_windows(level: ArrayLike, ys: ArrayLike, xs: ArrayLike) -> np.ndarray:
    """The 19x19 windows with top-left corners (ys, xs) of a level (h, w): (n, 19, 19), same dtype.
    Raises IndexError for a corner whose window does not fit in the level."""
    level = np.ascontiguousarray(level)
    ys, xs = np.asarray(ys, dtype=np.int64).ravel(), np.asarray(xs, dtype=np.int64).ravel()
    h, w = level.shape
    if len(ys) != len(xs):
        raise IndexError(f"cut_windows: {len(ys)} rows but {len(xs)} columns")
    if len(ys) and (min(ys.min(), xs.min()) < 0 or ys.max() > h - WINDOW or xs.max() > w - WINDOW):
        raise IndexError(f"cut_windows: a window corner lies outside the {h}x{w} level's {WINDOW}x{WINDOW} windows")
    out = np.empty((len(ys), _N), level.dtype)
    _gather(level, ys, xs, out)
    return out.reshape(-1, WINDOW, WINDOW)


def neighbours(
    ys: np.ndarray, xs: np.ndarray, radius: int, n_rows: int, n_cols: int, stride: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """The window positions within ``radius`` pixels (Chebyshev) of positions (ys, xs) on a level with
    n_rows x n_cols window positions, leaving out the ``stride`` grid (every position if stride is 1):
    (ny, nx) int arrays, unique, row-major."""
    d = np.arange(-radius, radius + 1)
    ny = (ys[:, None] + np.repeat(d, len(d))[None, :]).ravel()
    nx = (xs[:, None] + np.tile(d, len(d))[None, :]).ravel()
    ok = (ny >= 0) & (ny < n_rows) & (nx >= 0) & (nx < n_cols)
    if stride > 1:
        ok &= (ny % stride != 0) | (nx % stride != 0)
    lin = np.unique(ny[ok] * n_cols + nx[ok])
    return lin // n_cols, lin % n_cols


def _level_size(H, W, s):
    """(width, height) in whole pixels of the pyramid level of scale s."""
    return max(WINDOW, int(round(W / s))), max(WINDOW, int(round(H / s)))


def _resize(grey, s):
    """The pyramid level of scale s (window side 19 s in original pixels): (level, sx, sy)."""
    H, W = grey.shape
    size = _level_size(H, W, s)
    level = grey if size == (W, H) else cv2.resize(grey, size, interpolation=cv2.INTER_AREA)
    return level, W / size[0], H / size[1]


_BAND_PIXELS = 4_000_000  # levels above this are screened in bands: the dense maps take ~70 bytes a pixel


def _grid(level, stride, prefilter, Wk):
    """Top-left corners (ys, xs) of the windows on the ``stride`` grid of a level that pass the cascade."""
    h, w = level.shape
    if prefilter is None:
        return np.mgrid[0 : h - WINDOW + 1 : stride, 0 : w - WINDOW + 1 : stride].reshape(2, -1)
    if h * w <= _BAND_PIXELS:
        return _grid_band(level, stride, prefilter, Wk)
    # bands of window rows starting on the stride grid, each with the WINDOW - 1 rows its last windows need
    rows = max(stride, _BAND_PIXELS // w // stride * stride)
    starts = range(0, h - WINDOW + 1, rows)
    parts = [_grid_band(level[r0 : r0 + rows + WINDOW - 1], stride, prefilter, Wk) for r0 in starts]
    return (
        np.concatenate([ys + r0 for r0, (ys, _) in zip(starts, parts, strict=True)]),
        np.concatenate([xs for _, xs in parts]),
    )


def _grid_band(level, stride, prefilter, Wk):
    L = level.astype(np.float32)
    score0, norm = prefilter_map(L, prefilter, stride)
    # stage 1 screened densely like stage 0 (one correlation), then decided exactly on the windows within
    # _MARGIN of passing it: the screen only drops windows far below its threshold
    keep = score0 > prefilter.threshold
    if len(Wk):
        corr1 = cv2.matchTemplate(L, Wk[0].reshape(WINDOW, WINDOW), cv2.TM_CCORR)[::stride, ::stride]
        keep &= corr1.astype(np.float64) > (prefilter.thresholds[1] - _MARGIN) * norm
    i, j = np.nonzero(keep)  # row-major
    ys, xs, norm = i * stride, j * stride, norm[i, j]
    if len(Wk):
        ok = later_stages(L, ys, xs, norm, Wk, prefilter.thresholds[1:])
        ys, xs = ys[ok], xs[ok]
    return ys, xs


def _score_at(level, ys, xs, scorer, features, prefilter, floor):
    """The windows at (ys, xs) that pass the cascade, and their scores (exact above ``floor``):
    (ys, xs, windows, scores)."""
    win = cut_windows(level, ys, xs)
    if prefilter is not None and len(ys):
        ok = prefilter.accept(prefilter.scores(win))
        ys, xs, win = ys[ok], xs[ok], win[ok]
    return ys, xs, win, (scorer(features(win), floor) if len(ys) else np.empty(0))


def scan(
    grey: ArrayLike,
    scorer: Scorer,
    features: Callable[[np.ndarray], np.ndarray],
    prefilter: Prefilter | None = None,
    *,
    scale_factor: float = 1.2,
    stride: int = 1,
    min_window: float = WINDOW,
    max_window: float | None = None,
    threshold: float = 0.0,
    refine: float | None = None,
    return_windows: bool = False,
    threads: int | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Every window scoring above ``threshold``, as boxes in original pixels.

    grey: (H, W) uint8 image. scorer: (feature rows (n, p), floor) -> scores (n,), exact above floor (see
    :func:`facedet.scoring.make_scorer`; the scan's floor is min(threshold, refine)). features: windows
    (n, 19, 19) -> rows (n, p). prefilter: a :class:`facedet.scoring.Prefilter` cascade or None (score every window).
    refine: a score; coarse-to-fine search around every window scoring above it: the windows within
    stride - 1 pixels of it on its level (a stride-1 scan there), and the 3x3 windows around its centre on
    the pyramid's half step (scale s sqrt(scale_factor)) towards each neighbouring level, are scored too
    (through the prefilter, if any; every window once, also where a half step rounds to the size of a level or of
    another half step, as with steps close to 1 on small levels). Independent of ``threshold``, so one scan at a low
    threshold gives the detections at every higher one. None: the grid and the pyramid alone.
    threads: pyramid levels scanned at once (None: ``numba.get_num_threads()``, i.e. $NUMBA_NUM_THREADS or
    every core, at most MAX_THREADS = 4). Each level runs its BLAS and numba kernels on one thread: the batches
    are too small to share, and two thread pools spinning on the same cores made a 500x334 image 3x slower
    than one thread. BLAS stays on one thread for the whole process while a scan runs. The result does not
    depend on ``threads``; with threads > 1, ``scorer`` and ``features`` are called from several threads at
    once (those of facedet and svmcore are thread-safe). Under numba's workqueue threading layer, which is
    not thread-safe, the scan runs on one thread (a RuntimeWarning if more were asked for).
    Returns boxes (k, 5) float64 [x, y, w, h, score] of the 19 s x 19 s windows (not yet calibrated to face
    boxes nor merged); with ``return_windows``, also the (k, 19, 19) uint8 windows as scored (for bootstrapping).
    Raises ValueError / TypeError for another image kind, a non-integer stride < 1, a NaN threshold or refine,
    or bad pyramid parameters (:func:`pyramid_scales`).
    """
    grey = np.asarray(grey)
    if grey.ndim != 2 or grey.dtype != np.uint8:
        raise ValueError(f"scan: expected a 2-D uint8 grey image, got {grey.dtype} {grey.shape}")
    check_scalar(stride, "stride", lo=1, integer=True)
    for name, value in (("threshold", threshold), ("refine", refine)):  # -inf: every window; NaN: none, silently
        if value is not None and np.isnan(value):
            raise ValueError(f"{name}: must be a number, not NaN")
    H, W = grey.shape
    Wk = None if prefilter is None else prefilter.weights[1:].reshape(-1, _N).astype(np.float32)
    floor = threshold if refine is None else min(threshold, refine)
    scales = pyramid_scales(H, W, scale_factor, min_window, max_window)

    def scan_level(s):
        level, sx, sy = _resize(grey, s)
        ys, xs = _grid(level, stride, prefilter, Wk)
        ys, xs, win, score = _score_at(level, ys, xs, scorer, features, None, floor)
        if refine is not None and stride > 1:
            ny, nx = neighbours(
                ys[score > refine],
                xs[score > refine],
                stride - 1,
                level.shape[0] - WINDOW + 1,
                level.shape[1] - WINDOW + 1,
                stride,
            )
            ny, nx, nwin, nscore = _score_at(level, ny, nx, scorer, features, prefilter, floor)
            ys, xs, win, score = np.r_[ys, ny], np.r_[xs, nx], np.concatenate([win, nwin]), np.r_[score, nscore]
        return ys, xs, win, score, sx, sy

    def centres(found):  # (m, 2) centres in original pixels of a level's windows scoring above refine
        ys, xs, _, score, sx, sy = found
        up = score > refine
        return np.column_stack([(xs[up] + WINDOW / 2) * sx, (ys[up] + WINDOW / 2) * sy])

    def half_step(step):  # the 3x3 windows around the seeds on a half step, less those its level scored already
        s, seeds, done = step
        level, sx, sy = _resize(grey, s)
        ny, nx = level.shape[0] - WINDOW + 1, level.shape[1] - WINDOW + 1
        ys, xs = neighbours(
            np.rint(seeds[:, 1] / sy - WINDOW / 2).astype(np.int64),
            np.rint(seeds[:, 0] / sx - WINDOW / 2).astype(np.int64),
            1,
            ny,
            nx,
        )
        new = np.ones(len(ys), bool)
        if done:
            new = ~np.isin(ys * nx + xs, np.concatenate([y * nx + x for y, x in done]))
        return (*_score_at(level, ys[new], xs[new], scorer, features, prefilter, floor), sx, sy)

    with _level_pool(threads) as run:
        found = run(scan_level, scales)
        if refine is not None:
            # the half steps of the pyramid, only around the promising windows of the two levels on either side.
            # Close to 1, a step's half step can round to the size of a level (or of another half step): that is
            # the same level, and its windows are scored once (else they come out twice, and merging counts them
            # as two windows)
            seeds = [centres(f) for f in found]
            steps = {}
            for k in range(len(seeds) - 1):
                s = scales[k] * np.sqrt(scale_factor)
                step = steps.setdefault(_level_size(H, W, s), [s, [], []])
                step[1] += [seeds[k], seeds[k + 1]]
            for k, (ys, xs, *_) in enumerate(found):
                if _level_size(H, W, scales[k]) in steps:
                    steps[_level_size(H, W, scales[k])][2].append((ys, xs))
            steps = [(s, np.concatenate(sd), done) for s, sd, done in steps.values()]
            found += run(half_step, [st for st in steps if len(st[1])])
    boxes, windows = [], []
    for ys, xs, win, score, sx, sy in found:
        keep = score > threshold
        if keep.any():
            n = int(keep.sum())
            boxes.append(
                np.column_stack(
                    [xs[keep] * sx, ys[keep] * sy, np.full(n, WINDOW * sx), np.full(n, WINDOW * sy), score[keep]]
                )
            )
            if return_windows:
                windows.append(win[keep])
    out = np.concatenate(boxes) if boxes else np.empty((0, 5))
    if return_windows:
        return out, (np.concatenate(windows) if windows else np.empty((0, WINDOW, WINDOW), np.uint8))
    return out


MAX_THREADS = 4  # default cap: each thread holds a level's arrays (100-250 MB on a 12-MP photo)


@contextmanager
def _level_pool(threads):
    """:func:`svmcore.parallel.thread_map` over pyramid levels (``threads`` None: numba's thread count, at most
    MAX_THREADS). Every level's BLAS and numba kernels run on one thread, also when ``threads`` is 1; the caller's
    thread settings are restored afterwards."""
    asked = threads
    threads = min(nb.get_num_threads(), MAX_THREADS) if threads is None else check_threads(threads)
    before = nb.get_num_threads()
    with (
        blas_single_thread(),
        thread_map(threads, parallel_kernels=True, warn_stacklevel=None if asked is None else 4) as run,
    ):
        nb.set_num_threads(1)
        try:
            yield run
        finally:
            nb.set_num_threads(before)
