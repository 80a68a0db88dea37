"""Safe image reading and atomic writing: the one place where facedet touches image and CSV files.

Decoding is Pillow's; this module adds what a batch tool needs around it: a pixel limit checked on the
header before any pixel is decoded (decompression bombs), EXIF orientation, a fixed conversion of every
supported mode to 8-bit grey or RGB, and one exception type, :class:`ImageError`, whose message names the
file and the problem, so that a caller can report a bad file and go on with the rest of a batch.

Pixel limit: ``max_pixels`` of the readers, by default :data:`MAX_PIXELS` (50 megapixels), facedet's own limit
and not Pillow's default, checked on the header before any pixel is decoded: a file of a few bytes can claim
any size, and decoding it would exhaust memory (a decompression bomb). A refusal is one
:class:`ImageTooLarge` (an :class:`ImageError`), as ``<file>: 12000x12000 = 144,000,000 pixels exceeds the
limit of 50,000,000 (refused before decoding: a possible decompression bomb); max_pixels= raises it``: the
file, its pixel count (the size too where facedet checked it; where Pillow refused the file first its
message gives the count only), the limit that applied and the way past it. The exception keeps these as
attributes, so that a caller can name its own way (the command line names ``--max-pixels``).

Pillow has limits of its own: it warns above ``PIL.Image.MAX_IMAGE_PIXELS`` (89,478,485 unless the
application changed it), which is not shown, as ``max_pixels`` is checked instead, and refuses above twice
that (178,956,970 by default). A ``max_pixels`` at or below :data:`MAX_PIXELS` leaves Pillow's setting alone,
so an application's lower setting stays in force (named as Pillow's limit in the refusal). A ``max_pixels``
above :data:`MAX_PIXELS` is the caller's explicit opt-in to large images: where Pillow's hard limit is lower,
it is raised to ``max_pixels`` for that read only (open, header check, decoding, EXIF rotation) and restored
afterwards, under a lock, so that such reads (their opening and decoding) run one at a time and the setting
they restore is the application's. While one runs, Pillow code on other threads sees the raised limit:
facedet's readers there still refuse anything above their own ``max_pixels`` from the header, but where the
application set Pillow's limit below their ``max_pixels`` they may read an image that setting would have
refused. With Pillow's default setting, whose hard limit is above :data:`MAX_PIXELS`, no other read's outcome
changes (and the command line reads on one thread).

Mode conversions (Pillow mode -> result):

- ``1``, ``L``: grey as is (``1`` -> 0/255).
- ``I;16*`` and ``I`` with values in 0..65535 (16-bit PNG/TIFF/PGM): scaled to 8 bits, ``round(v * 255 / 65535)``.
- ``LA``, ``La``, ``PA``, ``RGBA``, ``RGBa`` and palette images with a transparent colour: alpha-composited
  over a white background (what a viewer shows; dropping alpha would expose arbitrary colours hidden under
  fully transparent pixels).
- ``P``, ``RGB``, ``RGBX``, ``CMYK``, ``YCbCr``, ``HSV``: converted by Pillow to RGB (CMYK without a colour profile).
- RGB -> grey: ITU-R BT.601 luma, ``L = 0.299 R + 0.587 G + 0.114 B`` (Pillow's ``convert("L")``).
- Anything else (``F`` floating point, ``I`` outside 0..65535, ``LAB``, ...): :class:`ImageError`.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from svmcore.validation import check_scalar
from svmcore.persistence import atomic_write, move_into_place, regular_file_size

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import BinaryIO

    from numpy.typing import ArrayLike

# 50 megapixels: above every common camera's default output (a 48-MP phone sensor saves 12-MP files by
# default), not above a 61-MP full-frame or 102-MP medium-format camera or a phone's 108/200-MP mode, whose
# users raise it (max_pixels=, --max-pixels). Scanning screens large pyramid levels in bands: a 48-MP image
# peaks at ~0.4 GB of arrays and a 12-MP one at ~0.3 GB (tracemalloc, shipped model).
MAX_PIXELS = 50_000_000

_ALPHA_MODES = {"LA", "La", "PA", "RGBA", "RGBa"}
_RGB_MODES = {"RGB", "RGBX", "P", "CMYK", "YCbCr", "HSV"}


class ImageError(ValueError):
    """A file could not be read as an image: missing, unreadable, not an image, truncated or corrupt,
    too large (decompression bomb) or of an unsupported pixel mode. The message names the file."""


class ImageTooLarge(ImageError):
    """An image of more pixels than the limit (a possible decompression bomb), refused from its header before
    any pixel was decoded.

    Attributes: ``path`` (str, the file), ``pixels`` (int; None where Pillow refused the file and its message
    gave no count: then ``over``, int, Pillow's limit that the count exceeds), ``size`` ((width, height) ints,
    or None where Pillow refused the file before facedet saw its header), ``limit`` (int, the limit that
    applied) and ``pillow`` (True where that limit was Pillow's, twice ``PIL.Image.MAX_IMAGE_PIXELS``, lower
    than ``max_pixels``). ``str()`` names the readers' ``max_pixels=`` as the way past the limit;
    :meth:`message` names another.
    """

    def __init__(
        self,
        path: str,
        pixels: int | None,
        limit: int,
        *,
        size: tuple[int, int] | None = None,
        pillow: bool = False,
        over: int | None = None,
    ) -> None:
        self.path, self.pixels, self.limit, self.size, self.pillow = path, pixels, limit, size, pillow
        self.over = limit if over is None else over
        super().__init__(self.message("max_pixels="))

    def __reduce__(self):  # (pickle, e.g. across processes: the arguments are not the message)
        return _rebuild_too_large, (self.path, self.pixels, self.limit, self.size, self.pillow, self.over)

    def message(self, raised_by: str) -> str:
        """The one-line refusal, naming ``raised_by`` (str: ``"max_pixels="``, ``"--max-pixels"``, ...) as
        what raises the limit (where the limit was Pillow's: a value of it above :data:`MAX_PIXELS`)."""
        if self.size is not None:
            count = f"{self.size[0]}x{self.size[1]} = {self.pixels:,} pixels"
        else:
            count = f"{self.pixels:,} pixels" if self.pixels is not None else f"over {self.over:,} pixels"
        if self.pillow:
            limit = f"Pillow's limit of {self.limit:,} (twice PIL.Image.MAX_IMAGE_PIXELS)"
            hint = f"{raised_by} above {MAX_PIXELS:,} raises it"
        else:
            limit, hint = f"the limit of {self.limit:,}", f"{raised_by} raises it"
        return f"{self.path}: {count} exceeds {limit} (refused before decoding: a possible decompression bomb); {hint}"


def _rebuild_too_large(path, pixels, limit, size, pillow, over):
    return ImageTooLarge(path, pixels, limit, size=size, pillow=pillow, over=over)


def read_grey(path: str | os.PathLike | BinaryIO, *, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """Read an image file (a path, or a seekable binary file object, named "-" in errors) as 8-bit grey.

    Returns a C-contiguous ``(H, W)`` uint8 array, EXIF orientation applied, colour converted with BT.601
    luma, 16-bit scaled to 8 bits, transparency composited over white (see the module docstring).
    ``max_pixels`` (int >= 1): the largest image read, in pixels (width x height); above :data:`MAX_PIXELS`
    Pillow's own limit is raised to it for this read (module docstring).
    Raises :class:`ImageError` (a ValueError) naming the file if it cannot be read, :class:`ImageTooLarge` (an
    ImageError) for an image over the limit, TypeError if ``path`` is not a path or ``max_pixels`` not an
    integer, ValueError if ``max_pixels`` < 1.
    """
    with _open(path, max_pixels) as im:
        return pil_to_grey(im, _display_name(path))


def _display_name(path):
    """How messages name ``path``: "-" for a file object (standard input), else the path."""
    return "-" if hasattr(path, "read") else path


def pil_to_grey(im: Image.Image, name: str | os.PathLike = "image") -> np.ndarray:
    """A PIL image as a C-contiguous ``(H, W)`` uint8 grey array, converted as :func:`read_grey` converts a file
    (no EXIF rotation: the image is taken as given). Raises :class:`ImageError` (naming ``name``) for a pixel
    mode it cannot convert."""
    if im.mode in ("1", "L"):
        return np.ascontiguousarray(np.asarray(im.convert("L"), dtype=np.uint8))
    if im.mode.startswith("I"):
        return _sixteen_to_eight(im, name)
    return np.ascontiguousarray(np.asarray(_to_rgb_image(im, name).convert("L"), dtype=np.uint8))


def read_rgb(path: str | os.PathLike | BinaryIO, *, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """Read an image file as 8-bit RGB.

    Returns a C-contiguous ``(H, W, 3)`` uint8 array; grey images are replicated into the three channels.
    Same conversions and errors as :func:`read_grey`.
    """
    with _open(path, max_pixels) as im:
        if im.mode in ("1", "L"):
            grey = np.asarray(im.convert("L"), dtype=np.uint8)
        elif im.mode.startswith("I"):
            grey = _sixteen_to_eight(im, _display_name(path))
        else:
            return np.ascontiguousarray(np.asarray(_to_rgb_image(im, _display_name(path)), dtype=np.uint8))
        return np.ascontiguousarray(np.repeat(grey[:, :, None], 3, axis=2))


def write_image(path: str | os.PathLike, rgb: ArrayLike, *, overwrite: bool = True) -> Path:
    """Atomically write ``rgb``, an ``(H, W, 3)`` or grey ``(H, W)`` uint8 array, to ``path``.

    The format follows the suffix (``.png``, ``.jpg``/``.jpeg`` at quality 95, ``.bmp``, ``.tif``, ...,
    anything Pillow writes). The image goes to a temporary file in the target folder that is then renamed
    over ``path``, so readers never see a half-written file. Returns ``path`` as a Path.
    Raises TypeError for a non-uint8 array, ValueError for a wrong shape or an unknown suffix, OSError if
    the folder is not writable, FileExistsError if ``overwrite`` is false and ``path`` exists (also when another
    process created it during the write).
    """
    path = Path(path)
    a = np.asarray(rgb)
    if a.dtype != np.uint8:
        raise TypeError(f"write_image: expected a uint8 array, got dtype {a.dtype}")
    if not (a.ndim == 2 or (a.ndim == 3 and a.shape[2] == 3)) or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"write_image: expected an (H, W, 3) or (H, W) array, got shape {a.shape}")
    fmt = Image.registered_extensions().get(path.suffix.lower())
    if fmt is None or fmt not in Image.SAVE:
        raise ValueError(f"write_image: cannot tell an image format Pillow writes from the suffix of {path}")
    options = {"quality": 95} if fmt == "JPEG" else {}
    with atomic_write(path, overwrite) as f:
        Image.fromarray(np.ascontiguousarray(a)).save(f, format=fmt, **options)
    return path


VIDEO_SUFFIXES = {".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".wmv", ".flv", ".3gp"}
# annotated videos: MPEG-4 part 2, which every OpenCV build writes and every player plays
_VIDEO_CODECS = {".mp4": "mp4v", ".m4v": "mp4v", ".mov": "mp4v", ".avi": "MJPG", ".mkv": "mp4v"}


def is_video(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a video file by its suffix (:data:`VIDEO_SUFFIXES`), the way facedet tells the
    videos among its inputs."""
    return Path(path).suffix.lower() in VIDEO_SUFFIXES


def read_video(
    path: str | os.PathLike, *, every: int = 1, max_pixels: int = MAX_PIXELS
) -> Iterator[tuple[int, float, np.ndarray]]:
    """Frames of a video file (any container and codec OpenCV's FFmpeg reads), decoded one at a time.

    Yields ``(index, seconds, rgb)``: the frame's index from 0, its time in seconds (index / frame rate; NaN
    if the file states no rate) and the frame as a C-contiguous ``(H, W, 3)`` uint8 RGB array, for frames 0,
    every, 2 every, ... (the others are skipped without being converted). Raises :class:`ImageError` naming
    the file if it is missing or OpenCV cannot open it as a video, :class:`ImageTooLarge` for frames over
    ``max_pixels``, ValueError for ``every`` < 1.
    """
    import cv2

    check_scalar(every, "every", lo=1, integer=True)
    _check_image_file(path)
    cap = cv2.VideoCapture(os.fspath(path))
    try:
        if not cap.isOpened():
            raise ImageError(f"{os.fspath(path)}: cannot read as a video")
        w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        if w * h > max_pixels:
            raise ImageTooLarge(os.fspath(path), w * h, max_pixels, size=(w, h))
        fps = cap.get(cv2.CAP_PROP_FPS)
        index = 0
        while True:
            if index % every:
                if not cap.grab():
                    return
            else:
                ok, bgr = cap.read()
                if not ok:
                    return
                yield index, index / fps if fps > 0 else float("nan"), cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
            index += 1
    finally:
        cap.release()


def video_fps(path: str | os.PathLike) -> float:
    """The frame rate a video file states (frames per second; 0.0 if none or unreadable)."""
    import cv2

    cap = cv2.VideoCapture(os.fspath(path))
    try:
        return float(cap.get(cv2.CAP_PROP_FPS)) if cap.isOpened() else 0.0
    finally:
        cap.release()


@contextlib.contextmanager
def video_writer(
    path: str | os.PathLike, fps: float, size: tuple[int, int], *, overwrite: bool = True
) -> Iterator[Callable[[np.ndarray], None]]:
    """Context manager yielding ``write(rgb)``, which appends an ``(H, W, 3)`` uint8 RGB frame of ``size`` (W, H)
    to a video file that replaces ``path`` only when the block ends without an error (written under a temporary
    name in the same folder, then renamed). The codec follows the suffix (.mp4, .mov, .mkv: MPEG-4; .avi:
    Motion JPEG). Raises ValueError for another suffix, OSError if OpenCV cannot open the file for writing,
    FileExistsError as :func:`write_image` with ``overwrite`` false.
    """
    import cv2

    path = Path(path)
    codec = _VIDEO_CODECS.get(path.suffix.lower())
    if codec is None:
        raise ValueError(f"{path}: cannot write a video of this suffix; use {', '.join(sorted(_VIDEO_CODECS))}")
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    writer = cv2.VideoWriter(os.fspath(tmp), cv2.VideoWriter_fourcc(*codec), fps if fps > 0 else 25.0, size)
    try:
        if not writer.isOpened():
            raise OSError(f"cannot write the video {path}")
        yield lambda rgb: writer.write(cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR))
        writer.release()
        move_into_place(tmp, path, overwrite)
    finally:
        writer.release()
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def _open(path, max_pixels):
    """Open ``path``, check its header size against ``max_pixels``, decode it and apply EXIF orientation; the
    oriented image, the file closed on leaving."""
    if hasattr(path, "read"):  # a binary file object (standard input read into memory): "-" in messages
        name, source = "-", path
    elif isinstance(path, (str, os.PathLike)):
        name = source = os.fspath(path)
        _check_image_file(name)
    else:
        raise TypeError(f"expected a file path or a binary file object, got {type(path).__name__}")
    max_pixels = check_scalar(max_pixels, "max_pixels", lo=1, integer=True)
    with _pillow_limit(max_pixels):  # Pillow checks sizes as it opens and as some formats decode
        im = _open_checked(name, max_pixels, source)
        try:
            try:
                with _pillow_warning_off():  # (some formats check a frame's or tile's size as they decode)
                    im.load()
            except Image.DecompressionBombError as exc:
                raise _too_large(name, exc, max_pixels) from None
            except Exception as exc:  # truncated data, broken chunks, CRC errors, decoder errors
                raise ImageError(f"{name}: truncated or corrupt image data ({type(exc).__name__}: {exc})") from exc
            try:
                oriented = ImageOps.exif_transpose(im)
            except Exception as exc:
                raise ImageError(f"{name}: invalid EXIF orientation data ({type(exc).__name__}: {exc})") from exc
        except BaseException:
            im.close()
            raise
    try:
        yield oriented
    finally:
        im.close()


def _check_image_file(path):
    """ImageError unless ``path`` is a regular file (a FIFO would block the batch, a device never end)."""
    name = os.fspath(path)
    try:
        regular_file_size(name, "image file")
    except FileNotFoundError:
        raise ImageError(f"{name}: file not found") from None
    except IsADirectoryError:
        raise ImageError(f"{name}: is a directory, not an image file") from None
    except ValueError as exc:
        raise ImageError(str(exc)) from None


# a CSV of annotations or landmarks: caltech_webfaces' landmarks.csv is 1.3 MB; a million faces ~100 MB
MAX_CSV_BYTES = 1 << 30


@contextlib.contextmanager
def open_csv(path: str | os.PathLike, what: str = "CSV file") -> Iterator[csv.DictReader]:
    """A ``csv.DictReader`` over ``path`` (UTF-8, a byte-order mark skipped), read under the reading policy.

    ``path`` must be a regular file of at most :data:`MAX_CSV_BYTES`; a field may be as long as the file (Python's
    csv refuses fields over 131,072 characters by default). Raises FileNotFoundError if it is missing, ValueError
    naming the file for a folder, a FIFO, device or socket, a file over the limit, and (naming the line too)
    for text that is not UTF-8 or not CSV, raised where the caller iterates the reader.
    """
    try:
        size = regular_file_size(path, what)
    except IsADirectoryError as exc:
        raise ValueError(str(exc)) from None
    if size > MAX_CSV_BYTES:
        raise ValueError(f"{os.fspath(path)}: {size:,} bytes, over the limit of {MAX_CSV_BYTES:,} for a {what}")
    csv.field_size_limit(max(csv.field_size_limit(), MAX_CSV_BYTES))
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        try:
            yield reader
        except csv.Error as exc:
            raise ValueError(f"{os.fspath(path)}, line {reader.line_num}: not a readable {what} ({exc})") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"{os.fspath(path)}: not a UTF-8 text {what} ({exc.reason} at byte {exc.start})") from None


def _open_checked(name, max_pixels, source=None):
    """``Image.open(source)`` (default: ``name``) with its size checked against ``max_pixels`` from the header
    (nothing decoded); :class:`ImageError` for a file that cannot be opened, :class:`ImageTooLarge` for one
    over the limit; messages name ``name``."""
    try:
        with _pillow_warning_off():
            im = Image.open(name if source is None else source)
    except FileNotFoundError:
        raise ImageError(f"{name}: file not found") from None
    except IsADirectoryError:
        raise ImageError(f"{name}: is a directory, not an image file") from None
    except PermissionError:
        raise ImageError(f"{name}: permission denied") from None
    except UnidentifiedImageError:
        raise ImageError(f"{name}: not an image (or a format Pillow cannot read)") from None
    except Image.DecompressionBombError as exc:
        raise _too_large(name, exc, max_pixels) from None
    except Exception as exc:  # a corrupt header can raise almost anything inside a format plugin
        raise ImageError(f"{name}: cannot read the image header ({type(exc).__name__}: {exc})") from exc
    width, height = im.size
    if width * height > max_pixels:
        im.close()
        raise ImageTooLarge(name, width * height, max_pixels, size=(width, height))
    if width == 0 or height == 0:
        im.close()
        raise ImageError(f"{name}: empty image ({width}x{height})")
    return im


# held while Pillow's limit is raised: one raised read at a time, each restoring the application's setting
_PILLOW_LIMIT_LOCK = threading.Lock()


@contextlib.contextmanager
def _pillow_limit(max_pixels):
    """Context: for ``max_pixels`` above :data:`MAX_PIXELS` (a caller's opt-in to large images), Pillow's hard
    limit (twice ``Image.MAX_IMAGE_PIXELS``) at least ``max_pixels``, restored on leaving; else nothing changes.
    Such reads hold a lock, so that they run one at a time and none restores another's raised value."""
    if max_pixels <= MAX_PIXELS:
        yield
        return
    with _PILLOW_LIMIT_LOCK:
        saved = Image.MAX_IMAGE_PIXELS
        if saved is None or 2 * saved >= max_pixels:  # (None: the application turned Pillow's check off)
            yield
            return
        Image.MAX_IMAGE_PIXELS = -(-max_pixels // 2)  # Pillow refuses above twice this, i.e. above max_pixels
        try:
            yield
        finally:
            Image.MAX_IMAGE_PIXELS = saved


@contextlib.contextmanager
def _pillow_warning_off():
    """Context: Pillow's DecompressionBombWarning (above ``PIL.Image.MAX_IMAGE_PIXELS``) not shown; ``max_pixels``
    is the limit checked in its place (module docstring)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        yield


def _too_large(name, exc, max_pixels):
    """The ImageTooLarge for Pillow's DecompressionBombError ``exc``: the file, its pixel count and the limit it
    exceeds, ``max_pixels`` where that is the lower, else Pillow's (twice ``PIL.Image.MAX_IMAGE_PIXELS``, as it
    stood when Pillow raised). Pillow's message gives the count and that limit ("Image size (N pixels) exceeds limit
    of L pixels, could be decompression bomb DOS attack.", Pillow 13); the limit is read from it, as a read on
    another thread may have changed ``Image.MAX_IMAGE_PIXELS`` since; should a later Pillow word it otherwise, the
    count is given as over the limit, and the limit is the current setting's."""
    found = re.search(r"exceeds limit of (\d+) pixels", str(exc))
    pillow = int(found.group(1)) if found else 2 * (Image.MAX_IMAGE_PIXELS or 0)  # Pillow raises above twice it
    found = re.search(r"\((\d+) pixels\)", str(exc))
    pixels = int(found.group(1)) if found else None
    if max_pixels <= pillow:
        return ImageTooLarge(name, pixels, max_pixels, over=pillow)
    return ImageTooLarge(name, pixels, pillow, pillow=True)


def _sixteen_to_eight(im, path) -> np.ndarray:
    """16-bit grey (modes ``I;16*``, or ``I`` holding 0..65535) -> uint8, rounding ``v * 255 / 65535``."""
    v = np.asarray(im)
    if im.mode == "I" and v.size and (v.min() < 0 or v.max() > 65535):
        raise ImageError(
            f"{os.fspath(path)}: 32-bit integer image with values {v.min()}..{v.max()} is not supported "
            "(expected 16-bit grey, 0..65535)"
        )
    v = v.astype(np.uint32)
    return np.ascontiguousarray(((v * 255 + 32767) // 65535).astype(np.uint8))


def composite_over_white(im: Image.Image) -> Image.Image:
    """A PIL image with transparency -> RGB, alpha composited over a white background (what a viewer shows)."""
    rgba = im.convert("RGBA")
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(white, rgba).convert("RGB")


def _to_rgb_image(im, path):
    """Any colour or transparent mode -> an RGB PIL image, alpha composited over white."""
    mode = im.mode
    if mode == "P" and "transparency" in im.info:
        mode = "PA"
    if mode in _ALPHA_MODES:
        return composite_over_white(im)
    if mode in _RGB_MODES:
        return im.convert("RGB")
    raise ImageError(f"{os.fspath(path)}: unsupported pixel mode {im.mode!r}")
