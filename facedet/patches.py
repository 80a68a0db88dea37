"""Patch databases: 19x19 face and non-face windows for training.

Sources:
- folders of image files (PNG, PGM, JPEG, ...; any size, resized to 19x19 with ``cv2.INTER_AREA``): a
  folder with ``face/`` and ``non-face/`` subfolders (the CBCL PNG tar extracted: pass
  ``.../cbcl_face_db1`` with ``split="train"``), or two folders given separately;
- ``.npz`` arrays: ``X_<split>`` (n, 19, 19) uint8 and ``y_<split>`` (1 = face), as the CBCL npz, or plain
  ``X`` and ``y``.

Augmentation (mirror, small shifts) and random non-face windows cut from face-free images.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np
from svmcore.validation import check_scalar
from svmcore.persistence import NpzReader

from .imageio import MAX_PIXELS, ImageError, open_csv, read_grey
from .preprocess import WINDOW

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from numpy.typing import ArrayLike

# formats Pillow reads itself (no plugin or external program)
IMAGE_SUFFIXES = {
    ".png",
    ".pgm",
    ".ppm",
    ".pbm",
    ".pnm",
    ".jpg",
    ".jpeg",
    ".jpe",
    ".jfif",
    ".bmp",
    ".tif",
    ".tiff",
    ".gif",
    ".webp",
    ".tga",
    ".jp2",
    ".j2k",
}
_NONFACE_NAMES = ("non-face", "nonface", "non-faces", "nonfaces", "non_face")


def to_window(grey: ArrayLike) -> np.ndarray:
    """Resize a grey (h, w) uint8 image to a 19x19 uint8 window (INTER_AREA when shrinking). Raises ValueError
    for another shape or an empty image, TypeError for another dtype."""
    grey = _check_grey(grey, "to_window")
    if grey.shape == (WINDOW, WINDOW):
        return grey.astype(np.uint8, copy=False)
    shrink = grey.shape[0] >= WINDOW and grey.shape[1] >= WINDOW
    return cv2.resize(grey, (WINDOW, WINDOW), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def _check_grey(grey, name, empty_ok=False):
    grey = np.asarray(grey)
    if grey.ndim != 2 or (grey.size == 0 and not empty_ok):
        raise ValueError(f"{name}: expected a grey (h, w) image with h, w >= 1, got shape {grey.shape}")
    if grey.dtype != np.uint8:  # a (19, 19) float was cast (300 -> 44, [0, 1] -> 0), other sizes stayed float
        raise TypeError(f"{name}: expected uint8 grey levels, got dtype {grey.dtype}")
    return grey


def image_files(folder: str | os.PathLike, recursive: bool = False) -> list[Path]:
    """Image files (by suffix, any case) in ``folder``, or also in its subfolders if ``recursive`` (symlinked
    ones followed, each real folder once; hidden names skipped), sorted by path; ValueError if it is not a
    folder. A broken symlink with an image suffix is listed, so that reading it reports it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"not a folder: {folder}")
    if not recursive:
        paths = folder.iterdir()
    else:
        paths, seen = [], set()
        for root, dirs, files in os.walk(folder, followlinks=True):
            real = os.path.realpath(root)
            if real in seen:  # a symlink loop, or a folder reached twice
                dirs[:] = []
                continue
            seen.add(real)
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            paths += [Path(root) / f for f in files]
    return sorted(
        p
        for p in paths
        if (p.is_file() or (p.is_symlink() and not p.exists()))
        and p.suffix.lower() in IMAGE_SUFFIXES
        and not p.name.startswith(".")
    )


def load_folder(
    folder: str | os.PathLike, errors: list[tuple[Path, ImageError]] | None = None, *, max_pixels: int = MAX_PIXELS
) -> np.ndarray:
    """All images in ``folder`` as (n, 19, 19) uint8 windows; ``max_pixels``: as for
    :func:`facedet.imageio.read_grey`, the largest image read.

    Unreadable files raise :class:`facedet.imageio.ImageError`, unless ``errors`` is a list: then
    ``(path, exc)`` is appended to it (the Path and the ImageError, whose ``str()`` is the message) and the file
    is skipped. ValueError if no image was loaded.
    """
    out = []
    for path in image_files(folder):
        try:
            out.append(to_window(read_grey(path, max_pixels=max_pixels)))
        except ImageError as exc:
            if errors is None:
                raise
            errors.append((path, exc))
    if not out:
        raise ValueError(f"{folder}: no readable images ({', '.join(sorted(IMAGE_SUFFIXES))})")
    return np.stack(out)


def find_class_folders(root: str | os.PathLike, split: str = "train") -> tuple[Path, Path]:
    """(face_dir, nonface_dir) under ``root``, ``root/split`` or ``root/cbcl_face_db1/split``; ValueError if none."""
    root = Path(root)
    for base in (root, root / split, root / "cbcl_face_db1" / split):
        face = base / "face" if (base / "face").is_dir() else base / "faces"
        nonface = next((base / n for n in _NONFACE_NAMES if (base / n).is_dir()), None)
        if face.is_dir() and nonface is not None:
            return face, nonface
    raise ValueError(f"{root}: no face/ and non-face/ folders (also looked in {split}/)")


def load_npz(path: str | os.PathLike, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Windows and labels from an .npz: (X (n, 19, 19) uint8, y (n,) int64 with 1 = face).

    Reads ``X_<split>``/``y_<split>`` (the CBCL npz) or ``X``/``y``; images of another size are resized;
    non-uint8 pixels whose maximum is <= 1 (floats in [0, 1], or 0/1 integers) are scaled to 0..255. Raises
    ValueError for a missing file, a file that is not an .npz archive, object arrays (pickle), missing keys,
    wrong shapes, NaN pixels or labels other than 0/1.
    """
    path = Path(path)
    try:
        with NpzReader(path, "patch file") as npz:
            keys = (f"X_{split}", f"y_{split}") if f"X_{split}" in npz.members else ("X", "y")
            if not all(k in npz.members for k in keys):
                raise ValueError(f"{path}: expected arrays X_{split}/y_{split} or X/y, found {sorted(npz.members)}")
            X, y = npz.read(keys[0]), npz.read(keys[1])
    except FileNotFoundError as exc:
        raise ValueError(str(exc)) from None
    if X.dtype.kind not in "biuf":
        raise ValueError(f"{path}: X must hold numbers, got dtype {X.dtype}")
    if X.dtype.kind == "f" and not np.isfinite(X).all():
        raise ValueError(f"{path}: X contains NaN or infinity")
    if X.ndim == 2 and X.shape[1] == WINDOW * WINDOW:
        X = X.reshape(-1, WINDOW, WINDOW)
    if X.ndim != 3 or y.ndim != 1 or len(X) != len(y) or min(X.shape[1:], default=0) < 1:
        raise ValueError(f"{path}: expected X (n, h, w) with h, w >= 1 and y (n,), got {X.shape} and {y.shape}")
    if not np.isin(y, (0, 1)).all():
        raise ValueError(f"{path}: labels must be 0 (non-face) or 1 (face)")
    if X.size and (X.min() < 0 or X.max() > 255):
        raise ValueError(f"{path}: pixels must be grey levels 0..255 (or 0..1), got {X.min():g}..{X.max():g}")
    if X.dtype != np.uint8:
        scale = 255.0 if X.max(initial=0) <= 1.0 else 1.0
        X = np.clip(np.rint(X * scale), 0, 255).astype(np.uint8)
    if X.shape[1:] != (WINDOW, WINDOW):
        X = np.stack([to_window(x) for x in X])
    return np.ascontiguousarray(X), y.astype(np.int64)


def load_patches(
    faces: str | os.PathLike | None = None,
    nonfaces: str | os.PathLike | None = None,
    *,
    data: str | os.PathLike | None = None,
    split: str = "train",
    errors: list[tuple[Path, ImageError]] | None = None,
    max_pixels: int = MAX_PIXELS,
) -> tuple[np.ndarray, np.ndarray]:
    """Training windows and labels from two folders, a folder holding both, or an .npz (``data``).

    Returns (X (n, 19, 19) uint8, y (n,) int64, 1 = face), faces first. ``errors`` and ``max_pixels`` (the
    largest image file read): as for :func:`load_folder`. Raises ValueError for a bad source, the same folder
    given for both classes, or a source without both faces and non-faces.
    """
    if data is not None:
        data = Path(data)
        if data.is_dir():
            faces, nonfaces = find_class_folders(data, split)
        else:
            X, y = load_npz(data, split)
            check_both_classes(y, data)
            return X, y
    if faces is None or nonfaces is None:
        raise ValueError("give both a face folder and a non-face folder, or an .npz file")
    if os.path.realpath(faces) == os.path.realpath(nonfaces):  # resolve() raises on a symlink loop
        raise ValueError(f"the face and the non-face folder are the same folder: {faces}")
    F, N = load_folder(faces, errors, max_pixels=max_pixels), load_folder(nonfaces, errors, max_pixels=max_pixels)
    return np.concatenate([F, N]), np.r_[np.ones(len(F), np.int64), np.zeros(len(N), np.int64)]


def check_both_classes(y: ArrayLike, source: str | os.PathLike = "training set") -> None:
    """ValueError unless labels y (n,) in {0, 1} hold both faces (1) and non-faces (0); ``source`` names them."""
    n_faces = int(np.sum(y))
    if n_faces == 0 or n_faces == len(y):
        raise ValueError(f"{source}: {n_faces} faces and {len(y) - n_faces} non-faces; training needs both")


def _check_windows(windows):
    windows = np.asarray(windows)
    if windows.ndim != 3 or windows.shape[1:] != (WINDOW, WINDOW):
        raise ValueError(f"windows: expected an (n, {WINDOW}, {WINDOW}) array, got shape {windows.shape}")
    if windows.dtype != np.uint8:  # OpenCV's warps take no bool or int64, and the outputs are grey levels
        raise TypeError(f"windows: expected uint8 grey levels, got dtype {windows.dtype}")
    return windows


def shift(windows: ArrayLike, dy: int, dx: int) -> np.ndarray:
    """Windows (n, 19, 19) uint8 shifted by (dy, dx) pixels (integers), edges replicated. ValueError / TypeError
    for other shapes or dtypes, or non-integer shifts."""
    windows = _check_windows(windows)
    dy, dx = check_scalar(dy, "dy", integer=True), check_scalar(dx, "dx", integer=True)
    p = max(abs(dy), abs(dx))
    padded = np.pad(windows, ((0, 0), (p, p), (p, p)), mode="edge")
    return padded[:, p - dy : p - dy + WINDOW, p - dx : p - dx + WINDOW]


def warp(windows: ArrayLike, angle: float = 0.0, scale: float = 1.0) -> np.ndarray:
    """Windows (n, 19, 19) uint8 rotated by ``angle`` degrees and zoomed by ``scale`` (> 0) about the centre,
    edges replicated. ValueError / TypeError for other shapes or dtypes, a non-finite angle or scale <= 0."""
    windows = _check_windows(windows)
    check_scalar(angle, "angle")
    check_scalar(scale, "scale", lo=0, lo_open=True)
    c = (WINDOW - 1) / 2
    M = cv2.getRotationMatrix2D((c, c), angle, scale)
    if len(windows) == 0:
        return windows.copy()
    return np.stack(
        [
            cv2.warpAffine(w, M, (WINDOW, WINDOW), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
            for w in windows
        ]
    )


def augment(
    windows: ArrayLike,
    mirror: bool = True,
    shifts: int = 1,
    angles: float | Sequence[float] = (),
    scales: float | Sequence[float] = (),
) -> np.ndarray:
    """Windows plus mirror images, shifts by up to ``shifts`` pixels (4-neighbourhood steps), rotations by
    each of ``angles`` (degrees) and zooms by each of ``scales``.

    Returns (n * m, 19, 19) uint8, the originals first; m = (2 if mirror) * (1 + 4 * shifts + len(angles)
    + len(scales)). ``angles`` and ``scales``: sequences of numbers (or one number). ValueError / TypeError for
    other shapes, a dtype other than uint8, shifts < 0 or non-integer, bad angles or scales.
    """
    windows = _check_windows(windows)
    check_scalar(shifts, "shifts", lo=0, integer=True)
    angles, scales = np.atleast_1d(angles).tolist(), np.atleast_1d(scales).tolist()  # one number is one angle
    base = [windows, windows[:, :, ::-1]] if mirror else [windows]
    out = list(base)
    for k in range(1, shifts + 1):
        for dy, dx in ((k, 0), (-k, 0), (0, k), (0, -k)):
            out += [shift(b, dy, dx) for b in base]
    out += [warp(b, angle=a) for a in angles for b in base]
    out += [warp(b, scale=z) for z in scales for b in base]
    return np.ascontiguousarray(np.concatenate(out))


def sample_windows(grey: ArrayLike, n: int, rng: np.random.Generator, min_window: float = WINDOW) -> np.ndarray:
    """``n`` random square windows of a face-free grey image, each resized to 19x19: (n, 19, 19) uint8.

    Sizes are drawn log-uniformly between ``min_window`` and the image's shorter side. Raises ValueError for
    n < 0, min_window < 1 (or not finite) or an image that is not (h, w) (an empty one gives no windows);
    TypeError if it is not uint8.
    """
    check_scalar(n, "n", lo=0, integer=True)
    check_scalar(min_window, "min_window", lo=1)  # below 1 px: log(0) and empty crops deep in numpy / OpenCV
    grey = _check_grey(grey, "sample_windows", empty_ok=True)  # an empty image has no windows
    H, W = grey.shape
    top = min(H, W)
    if top < min_window or n == 0:
        return np.empty((0, WINDOW, WINDOW), np.uint8)
    sizes = np.exp(rng.uniform(np.log(min_window), np.log(top), n)).astype(int)
    ys = (rng.random(n) * (H - sizes + 1)).astype(int)
    xs = (rng.random(n) * (W - sizes + 1)).astype(int)
    return np.stack([to_window(grey[y : y + s, x : x + s]) for y, x, s in zip(ys, xs, sizes, strict=True)])


# --- faces cut from landmark-annotated photos ------------------------------------------------------------

# the window-to-box map (dx, dy, k) of a window framed as the CBCL faces are (eyebrows to mouth), measured on
# photo faces by the CBCL-trained detector: the framing landmark_windows cuts training faces in by default
CBCL_FRAMING = (0.048, 0.039, 1.571)
LANDMARK_COLUMNS = ("left_eye_x", "left_eye_y", "right_eye_x", "right_eye_y", "mouth_x", "mouth_y")
# dlib's frontal-face box from eyes and mouth (shared/data README, "Box convention"): centre E + 0.433 (M - E),
# side 1.281 |eye distance| + 1.003 |M - E|, E the eyes' midpoint, M the mouth; fitted on 1,992 faces
BOX_FROM_LANDMARKS = (0.433, 1.281, 1.003)


def read_landmarks(csv_path: str | os.PathLike, split: str | None = None) -> dict[str, np.ndarray]:
    """Face landmarks from a CSV file, one row per face: ``{image: (m, 3, 2) float64}``, the points
    (left eye, right eye, mouth centre) as (x, y) pixels, in file order.

    Columns (header row, any order and case, extra columns such as ``nose_x`` ignored): ``image`` and
    ``left_eye_x, left_eye_y, right_eye_x, right_eye_y, mouth_x, mouth_y`` ("left": the eye on the image's
    left), optionally ``split`` (rows of another split are skipped), as ``caltech_webfaces/landmarks.csv`` of
    the shared data. Raises FileNotFoundError for a missing file and ValueError naming the file and line for a
    missing column, a field that is not a finite number, an empty image name, a ``split`` requested of a file
    without that column, or no face left.
    """
    path = Path(csv_path)
    out: dict[str, list] = {}
    with open_csv(path, "landmark CSV") as reader:
        reader.fieldnames = [c.strip().lower() for c in (reader.fieldnames or [])]
        missing = [c for c in ("image", *LANDMARK_COLUMNS) if c not in reader.fieldnames]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
        if split is not None and "split" not in reader.fieldnames:
            raise ValueError(f"{path}: split={split!r} requested but the file has no 'split' column")
        for row in reader:
            if split is not None and (row.get("split") or "").strip() != split:
                continue
            name = os.path.normpath((row.get("image") or "").strip()) if (row.get("image") or "").strip() else ""
            try:
                values = [float(row[c]) for c in LANDMARK_COLUMNS]
            except (TypeError, ValueError):
                values = [math.nan]
            if not name or not np.isfinite(values).all():
                raise ValueError(f"{path}, line {reader.line_num}: expected an image name and six finite coordinates")
            out.setdefault(name, []).append(values)
    if not out:
        raise ValueError(f"{path}: no faces" + (f" in split {split!r}" if split is not None else ""))
    return {name: np.array(v).reshape(-1, 3, 2) for name, v in out.items()}


def landmark_boxes(points: ArrayLike) -> np.ndarray:
    """Face boxes in dlib's frontal-face convention (eyebrows to chin, cheek to cheek) from landmarks
    (m, 3, 2) [left eye, right eye, mouth] (x, y) pixels: (m, 4) float64 square boxes x, y, w, h
    (:data:`BOX_FROM_LANDMARKS`)."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3, 2)
    eyes = (p[:, 0] + p[:, 1]) / 2
    down = p[:, 2] - eyes
    a, b, c = BOX_FROM_LANDMARKS
    centre = eyes + a * down
    side = b * np.hypot(*(p[:, 1] - p[:, 0]).T) + c * np.hypot(*down.T)
    return np.c_[centre - side[:, None] / 2, side, side]


def landmark_windows(
    grey: ArrayLike,
    points: ArrayLike,
    box: Sequence[float],
    *,
    tilt: ArrayLike | None = None,
    zoom: ArrayLike | None = None,
    offset: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """19x19 windows of the faces of a grey image, framed by their landmarks as a detector frames them.

    A detector with the window-to-box map ``box`` = (dx, dy, k) (:attr:`facedet.Detector.box`) reports the
    window of side s at centre c as the face box of side k s centred at c + (dx, dy) s; this cuts, for each
    face, the window whose box is the face's :func:`landmark_boxes` box, offsets taken along the face's eye
    line. It is the inverse map, so the patches have the framing the scan will see.

    Parameters
    ----------
    grey : (H, W) uint8
    points : (n, 3, 2) float
        For each window, its face's landmarks [left eye, right eye, mouth] (x, y) in pixels (repeat a face's
        points for several windows of it).
    box : (dx, dy, k) floats, k > 0
    tilt : (n,) float or None
        The face's in-plane angle in the window, degrees (0: eyes level; positive: the right eye lower, the
        sense of the photo's own eye line); None, or NaN for a window: as in the photo (an upright window).
    zoom : (n,) float > 0 or None
        The face appears ``zoom`` times as large (the window side is s / zoom); None: 1.
    offset : (n, 2) float or None
        The window moved by (x, y) window sides, in the window's axes; None: 0.

    Returns
    -------
    windows : (n, 19, 19) uint8
        Shrunk with ``cv2.INTER_AREA`` (as the scan's pyramid is) and rotated bilinearly; pixels outside the
        image replicate its edge.
    window_points : (n, 3, 2) float64
        The landmarks in window pixels (0..19), for privileged features or checks.

    Raises
    ------
    ValueError
        For mis-shaped or non-finite points, a zoom <= 0, a box scale k <= 0, or an image that is not (H, W).
    TypeError
        For an image that is not uint8.
    """
    grey = _check_grey(grey, "landmark_windows")
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 3 or p.shape[1:] != (3, 2) or not np.isfinite(p).all():
        raise ValueError(f"points: expected finite (n, 3, 2) landmarks, got shape {p.shape}")
    n = len(p)
    dx, dy, k = (float(v) for v in box)
    if not k > 0:
        raise ValueError(f"box: the scale k must be > 0, got {k}")
    tilt = np.full(n, np.nan) if tilt is None else np.broadcast_to(np.asarray(tilt, np.float64), (n,))
    zoom = np.ones(n) if zoom is None else np.broadcast_to(np.asarray(zoom, np.float64), (n,))
    offset = np.zeros((n, 2)) if offset is None else np.broadcast_to(np.asarray(offset, np.float64), (n, 2))
    if not (np.isfinite(zoom).all() and (zoom > 0).all() and np.isfinite(offset).all()):
        raise ValueError("zoom must be finite and > 0, offset finite")
    faces = landmark_boxes(p)
    centre, side = faces[:, :2] + faces[:, 2:3] / 2, faces[:, 2]
    roll = np.degrees(np.arctan2(p[:, 1, 1] - p[:, 0, 1], p[:, 1, 0] - p[:, 0, 0]))
    # the window's rotation in the photo: upright (0) as scanned, or turned so that the face shows ``tilt``
    turn = np.where(np.isnan(tilt), 0.0, roll - np.nan_to_num(tilt))
    s = side / k / zoom
    r, t = np.radians(roll), np.radians(turn)
    # the box map's offset runs along the face's axes; the augmentation's offset along the window's
    centre = (
        centre - s[:, None] * zoom[:, None] * np.c_[dx * np.cos(r) - dy * np.sin(r), dx * np.sin(r) + dy * np.cos(r)]
    )
    centre = (
        centre
        + s[:, None]
        * np.c_[
            offset[:, 0] * np.cos(t) - offset[:, 1] * np.sin(t), offset[:, 0] * np.sin(t) + offset[:, 1] * np.cos(t)
        ]
    )
    windows = np.empty((n, WINDOW, WINDOW), np.uint8)
    window_points = np.empty((n, 3, 2))
    H, W = grey.shape
    for i in range(n):
        # shrink a crop around the window first (INTER_AREA, as the pyramid), then one small bilinear warp
        f = min(1.0, WINDOW / s[i])
        half = 0.75 * s[i] + 2  # the rotated window's corners (s / sqrt(2)) with a margin
        x0, y0 = int(np.floor(centre[i, 0] - half)), int(np.floor(centre[i, 1] - half))
        x1, y1 = int(np.ceil(centre[i, 0] + half)) + 1, int(np.ceil(centre[i, 1] + half)) + 1
        crop = cv2.copyMakeBorder(
            grey[max(y0, 0) : min(y1, H), max(x0, 0) : min(x1, W)],
            max(-y0, 0),
            max(y1 - H, 0),
            max(-x0, 0),
            max(x1 - W, 0),
            cv2.BORDER_REPLICATE,
        )
        size = (max(1, round(crop.shape[1] * f)), max(1, round(crop.shape[0] * f)))
        fx, fy = size[0] / crop.shape[1], size[1] / crop.shape[0]
        small = cv2.resize(crop, size, interpolation=cv2.INTER_AREA) if f < 1 else crop
        # window pixel u = R(-turn) (image point - centre) * 19 / s + 9 (pixel centres at 0..18)
        M = cv2.getRotationMatrix2D((0.0, 0.0), float(turn[i]), WINDOW / s[i])
        A = M[:, :2] @ np.diag([1 / fx, 1 / fy])  # from the shrunk crop's pixels
        # (boxes put pixel j's centre at j + 0.5; OpenCV at j, and a shrink by f maps j to (j + 0.5) f - 0.5)
        c_small = ((centre[i, 0] - x0) * fx - 0.5, (centre[i, 1] - y0) * fy - 0.5)
        b = np.array([(WINDOW - 1) / 2, (WINDOW - 1) / 2]) - A @ c_small
        windows[i] = cv2.warpAffine(
            small, np.c_[A, b], (WINDOW, WINDOW), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
        window_points[i] = (p[i] - centre[i]) @ M[:, :2].T + (WINDOW - 1) / 2
    return windows, window_points


def load_landmark_faces(
    landmarks_csv: str | os.PathLike,
    image_dir: str | os.PathLike,
    box: Sequence[float],
    *,
    split: str | None = None,
    min_side: float = 20.0,
    rotations: int = 2,
    max_tilt: float = 20.0,
    max_shift: float = 0.05,
    max_zoom: float = 1.1,
    mirror: bool = True,
    seed: int = 0,
    errors: list[tuple[Path, ImageError]] | None = None,
    max_pixels: int = MAX_PIXELS,
    callback: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Face windows cut from landmark-annotated photos, with the variation of real photos.

    Every face of ``landmarks_csv`` (:func:`read_landmarks`) whose box (:func:`landmark_boxes`) is at least
    ``min_side`` pixels and whose window lies inside its image (to 10% of its side) gives ``1 + rotations``
    windows (:func:`landmark_windows`): one as in the photo (the face's own tilt, which the eye line gives),
    and ``rotations`` tilted to an angle drawn uniformly in +-``max_tilt`` degrees; every window is moved by up
    to ``max_shift`` window sides and zoomed by a factor drawn log-uniformly in [1 / max_zoom, max_zoom]; with
    ``mirror`` each window's mirror image follows.

    Parameters
    ----------
    landmarks_csv : path
    image_dir : path
        The folder the CSV's image names are relative to.
    box : (dx, dy, k)
        The detector's window-to-box map (:attr:`facedet.Detector.box`): the framing of the windows.
    split : str or None
        Only the CSV rows of this split.
    errors : list or None
        Unreadable images raise :class:`facedet.imageio.ImageError`, unless ``errors`` is a list: then
        ``(path, exc)`` is appended and the image's faces skipped.
    callback : callable or None
        Called with ``(images done, images in all)`` after each image (progress).

    Returns
    -------
    windows : (n, 19, 19) uint8
        The windows of each face together, faces in file order.
    window_points : (n, 3, 2) float64
        Each window's landmarks [left eye, right eye, mouth] in window pixels (mirrored with the window).
    face : (n,) int64
        The face each window comes from (its index among the faces kept), to keep a face's windows in one fold.

    Raises
    ------
    ValueError
        For a bad CSV (see :func:`read_landmarks`), bad augmentation settings, or no face kept.
    """
    check_scalar(min_side, "min_side", lo=0)
    check_scalar(rotations, "rotations", lo=0, integer=True)
    check_scalar(max_tilt, "max_tilt", lo=0)
    check_scalar(max_shift, "max_shift", lo=0)
    check_scalar(max_zoom, "max_zoom", lo=1)
    rng = np.random.default_rng(seed)
    faces = read_landmarks(landmarks_csv, split)
    out_w, out_p, out_f = [], [], []
    n_faces = 0
    for done, (name, points) in enumerate(faces.items()):
        path = Path(image_dir) / name
        try:
            grey = read_grey(path, max_pixels=max_pixels)
        except ImageError as exc:
            if errors is None:
                raise
            errors.append((path, exc))
            continue
        boxes = landmark_boxes(points)
        side = boxes[:, 2] / float(box[2])  # the window's side
        centre = boxes[:, :2] + boxes[:, 2:3] / 2
        margin = 0.5 * side * 0.9
        H, W = grey.shape
        keep = (
            (boxes[:, 2] >= min_side)
            & (centre[:, 0] - margin >= 0)
            & (centre[:, 1] - margin >= 0)
            & (centre[:, 0] + margin <= W)
            & (centre[:, 1] + margin <= H)
        )
        points = points[keep]
        if len(points):
            m = 1 + rotations
            tilt = np.where(np.arange(m) == 0, np.nan, 1.0)[None, :] * rng.uniform(
                -max_tilt, max_tilt, (len(points), m)
            )
            zoom = np.exp(rng.uniform(-np.log(max_zoom), np.log(max_zoom), (len(points), m)))
            offset = rng.uniform(-max_shift, max_shift, (len(points), m, 2))
            w, p = landmark_windows(
                grey,
                np.repeat(points, m, axis=0),
                box,
                tilt=tilt.ravel(),
                zoom=zoom.ravel(),
                offset=offset.reshape(-1, 2),
            )
            ids = np.repeat(np.arange(n_faces, n_faces + len(points)), m)
            if mirror:
                flipped = p[:, [1, 0, 2]].copy()  # the left eye becomes the right one
                flipped[:, :, 0] = WINDOW - 1 - flipped[:, :, 0]
                w, p = (
                    np.stack([w, w[:, :, ::-1]], 1).reshape(-1, WINDOW, WINDOW),
                    np.stack([p, flipped], 1).reshape(-1, 3, 2),
                )
                ids = np.repeat(ids, 2)
            out_w.append(w)
            out_p.append(p)
            out_f.append(ids)
            n_faces += len(points)
        if callback is not None:
            callback(done + 1, len(faces))
    if not out_w:
        raise ValueError(f"{landmarks_csv}: no face of at least {min_side} px inside its image")
    return np.ascontiguousarray(np.concatenate(out_w)), np.concatenate(out_p), np.concatenate(out_f)
