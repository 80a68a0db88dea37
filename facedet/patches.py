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

import os
import zipfile
from pathlib import Path

import cv2
import numpy as np
from svmcore._validation import check_scalar

from .imageio import MAX_PIXELS, ImageError, read_grey
from .preprocess import WINDOW

# formats Pillow reads itself (no plugin or external program)
IMAGE_SUFFIXES = {".png", ".pgm", ".ppm", ".pbm", ".pnm", ".jpg", ".jpeg", ".jpe", ".jfif", ".bmp", ".tif", ".tiff",
                  ".gif", ".webp", ".tga", ".jp2", ".j2k"}
_NONFACE_NAMES = ("non-face", "nonface", "non-faces", "nonfaces", "non_face")


def to_window(grey):
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


def image_files(folder, recursive=False):
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
    return sorted(p for p in paths if (p.is_file() or (p.is_symlink() and not p.exists()))
                  and p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith("."))


def load_folder(folder, errors=None, *, max_pixels=MAX_PIXELS):
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


def find_class_folders(root, split="train"):
    """(face_dir, nonface_dir) under ``root``, ``root/split`` or ``root/cbcl_face_db1/split``; ValueError if none."""
    root = Path(root)
    for base in (root, root / split, root / "cbcl_face_db1" / split):
        face = base / "face" if (base / "face").is_dir() else base / "faces"
        nonface = next((base / n for n in _NONFACE_NAMES if (base / n).is_dir()), None)
        if face.is_dir() and nonface is not None:
            return face, nonface
    raise ValueError(f"{root}: no face/ and non-face/ folders (also looked in {split}/)")


def load_npz(path, split="train"):
    """Windows and labels from an .npz: (X (n, 19, 19) uint8, y (n,) int64 with 1 = face).

    Reads ``X_<split>``/``y_<split>`` (the CBCL npz) or ``X``/``y``; images of another size are resized;
    non-uint8 pixels whose maximum is <= 1 (floats in [0, 1], or 0/1 integers) are scaled to 0..255. Raises
    ValueError for a missing file, a file that is not an .npz archive, object arrays (pickle), missing keys,
    wrong shapes, NaN pixels or labels other than 0/1.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"not a file: {path}")
    if not zipfile.is_zipfile(path):  # np.load would also take a bare .npy array or a pickle
        raise ValueError(f"{path}: not an .npz archive")
    try:
        with np.load(path, allow_pickle=False) as d:
            keys = (f"X_{split}", f"y_{split}") if f"X_{split}" in d.files else ("X", "y")
            files = d.files
            X, y = (d[keys[0]], d[keys[1]]) if all(k in files for k in keys) else (None, None)
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a readable .npz file ({exc})") from exc
    except ValueError as exc:  # object arrays: numpy refuses to unpickle them
        raise ValueError(f"{path}: {exc}") from exc
    if X is None:
        raise ValueError(f"{path}: expected arrays X_{split}/y_{split} or X/y, found {files}")
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


def load_patches(faces=None, nonfaces=None, *, data=None, split="train", errors=None, max_pixels=MAX_PIXELS):
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


def check_both_classes(y, source="training set"):
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


def shift(windows, dy, dx):
    """Windows (n, 19, 19) uint8 shifted by (dy, dx) pixels (integers), edges replicated. ValueError / TypeError
    for other shapes or dtypes, or non-integer shifts."""
    windows = _check_windows(windows)
    dy, dx = check_scalar(dy, "dy", integer=True), check_scalar(dx, "dx", integer=True)
    p = max(abs(dy), abs(dx))
    padded = np.pad(windows, ((0, 0), (p, p), (p, p)), mode="edge")
    return padded[:, p - dy:p - dy + WINDOW, p - dx:p - dx + WINDOW]


def warp(windows, angle=0.0, scale=1.0):
    """Windows (n, 19, 19) uint8 rotated by ``angle`` degrees and zoomed by ``scale`` (> 0) about the centre,
    edges replicated. ValueError / TypeError for other shapes or dtypes, a non-finite angle or scale <= 0."""
    windows = _check_windows(windows)
    check_scalar(angle, "angle")
    check_scalar(scale, "scale", lo=0, lo_open=True)
    c = (WINDOW - 1) / 2
    M = cv2.getRotationMatrix2D((c, c), angle, scale)
    if len(windows) == 0:
        return windows.copy()
    return np.stack([cv2.warpAffine(w, M, (WINDOW, WINDOW), flags=cv2.INTER_LINEAR,
                                    borderMode=cv2.BORDER_REPLICATE) for w in windows])


def augment(windows, mirror=True, shifts=1, angles=(), scales=()):
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


def sample_windows(grey, n, rng, min_window=WINDOW):
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
    return np.stack([to_window(grey[y:y + s, x:x + s]) for y, x, s in zip(ys, xs, sizes)])
