"""Batch detection over image collections: one JSON record per image (or video frame), on this process or on a
Dask cluster, resumable from a JSON-lines file.

:func:`detect_file` is the unit of work: read one image or video, detect, write its annotated copy, return its
records, never raise for a bad file. :func:`detect_files` runs it over many files, in order on this process or,
given a ``distributed.Client``, in chunks on the cluster's workers (each loads the model once), yielding
results as they finish. :func:`done_images` reads what a killed run already wrote, so that a restarted run
skips it. The ``facedet detect`` command is a thin layer over these.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import io
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from svmcore.persistence import regular_file_size

from . import _interrupt
from .imageio import (
    MAX_CSV_BYTES,
    MAX_PIXELS,
    ImageError,
    ImageTooLarge,
    is_video,
    read_rgb,
    read_video,
    video_fps,
    video_writer,
    write_image,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from distributed import Client

    from .detector import Detector

ANNOTATED = ".faces.png"  # suffix of the annotated images detect --out writes into a folder
MAX_STDIN_BYTES = 2**30  # "-": an image file on standard input is read whole, up to 1 GiB
CHUNK = 16  # images per task on a cluster: enough to amortise a task's overhead, few enough to balance


def expand_inputs(paths: Iterable[str | os.PathLike], from_list: str | os.PathLike | None = None) -> list[str]:
    """The files a batch reads: each of ``paths`` as given, a folder replaced by its image files (subfolders
    included, :func:`facedet.patches.image_files`), a pattern with ``*``, ``?`` or ``[`` that names no file
    replaced by its matches (``**`` for any depth), then the lines of the ``from_list`` file (one path or URL a
    line; empty lines and lines starting with ``#`` skipped).

    Returns strings, as given (``./a.jpg`` as ``a.jpg``; a file named twice is read twice). Raises ValueError for a
    pattern that matches nothing, or a list file that is not a regular file of at most
    :data:`facedet.imageio.MAX_CSV_BYTES` of UTF-8 text; FileNotFoundError for a missing list file.
    """
    from .patches import image_files

    out = []
    for p in map(os.fspath, paths):
        if os.path.isdir(p):
            out += [str(f) for f in image_files(p, recursive=True)]
        elif not os.path.lexists(p) and any(c in p for c in "*?["):
            matches = sorted(glob.glob(p, recursive=True))
            if not matches:
                raise ValueError(f"{p}: no file matches the pattern")
            out += [m for m in matches if not os.path.isdir(m)]
        else:
            out.append(p)
    out = [p if p == "-" or "://" in p else str(Path(p)) for p in out]  # (a URL's // is not a folder)
    if from_list is not None:
        size = regular_file_size(from_list, "list file")
        if size > MAX_CSV_BYTES:
            raise ValueError(
                f"{os.fspath(from_list)}: {size:,} bytes, over the limit of {MAX_CSV_BYTES:,} for a list file"
            )
        try:
            text = Path(from_list).read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{os.fspath(from_list)}: not a UTF-8 text list file ({exc.reason} at byte {exc.start})"
            ) from None
        out += [
            s if "://" in s else str(Path(s))
            for line in text.splitlines()
            if (s := line.strip()) and not s.startswith("#")
        ]
    return out


def done_images(jsonl_path: str | os.PathLike) -> set[str]:
    """The ``image`` of every complete record in a JSON-lines file written by an earlier run; a last line cut
    short by a kill is removed from the file, so that the run that resumes appends whole lines only.

    A missing file holds nothing. Raises ValueError naming the line for a complete line that is not a JSON
    record with an ``image``, or a file that is not a regular file.
    """
    path = Path(jsonl_path)
    if not path.exists():
        return set()
    regular_file_size(path, "JSON-lines file")
    with open(path, "r+b") as f:
        data = f.read()
        end = data.rfind(b"\n") + 1
        if end < len(data):  # (a record cut short: written again by the resumed run)
            f.truncate(end)
    done = set()
    for number, line in enumerate(data[:end].splitlines(), 1):
        try:
            record = json.loads(line)
            done.add(record["image"])
        except (ValueError, TypeError, KeyError):
            raise ValueError(f"{path}, line {number}: not a JSON record with an 'image'") from None
    return done


def draw_boxes(rgb: np.ndarray, boxes: np.ndarray, labels: list[str] | None = None) -> np.ndarray:
    """A copy of an (H, W, 3) uint8 image with the boxes (k, >=4) xywh in pixels drawn in green, each with its
    label (``labels``: k strings, or None) above it (inside the box where the top edge is too close to the
    border)."""
    import cv2

    img = np.ascontiguousarray(rgb.copy())
    t = max(1, round(min(img.shape[:2]) / 250))
    scale = 0.4 * t
    for k, (x, y, w, h) in enumerate(np.asarray(boxes)[:, :4].round().astype(int)):
        cv2.rectangle(img, (int(x), int(y)), (int(x + w), int(y + h)), (0, 255, 0), t)
        if labels is not None:
            (tw, th), base = cv2.getTextSize(labels[k], cv2.FONT_HERSHEY_SIMPLEX, scale, t)
            top = int(y) - th - base - t if y - th - base - t >= 0 else max(int(y), 0) + t
            x0 = max(int(x), 0)
            cv2.rectangle(img, (x0, top), (x0 + tw + 2 * t, top + th + base + t), (0, 255, 0), -1)
            cv2.putText(
                img, labels[k], (x0 + t, top + th + t // 2), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), t, cv2.LINE_AA
            )
    return img


def box_labels(record: dict) -> list[str]:
    """The labels of a record's faces on annotated images: the confidence in percent, else the score."""
    return [f"{f['confidence']:.0%}" if "confidence" in f else f"{f['score']:.2f}" for f in record["faces"]]


def face_record(box: Sequence[float] | np.ndarray, confidence: float | None) -> dict:
    """One face of a record: whole pixels, score and confidence (calibrated models only) to 4 decimals."""
    face = {k: int(round(v)) for k, v in zip("xywh", box[:4], strict=True)} | {"score": round(float(box[4]), 4)}
    if confidence is not None:
        face["confidence"] = round(float(confidence), 4)
    return face


def frames(path: str | os.PathLike, every: int = 1, max_pixels: int = MAX_PIXELS) -> Iterator[tuple[dict, np.ndarray]]:
    """(record fields, RGB frame): an image file's one frame (no fields), or each kept frame of a video
    ("frame": index, "time": seconds, null if the file states no frame rate). ``-`` is standard input (one image
    file, at most :data:`MAX_STDIN_BYTES`); a URL (``s3://...``) is read through fsspec where it is installed."""
    name = os.fspath(path)
    if name == "-" or "://" in name:  # read whole (Pillow seeks) up to a bound: `< /dev/zero` must end
        yield {}, read_rgb(io.BytesIO(_read_remote(name)), max_pixels=max_pixels)
        return
    if not is_video(path):
        yield {}, read_rgb(path, max_pixels=max_pixels)
        return
    for index, seconds, rgb in read_video(path, every=every, max_pixels=max_pixels):
        yield {"frame": index, "time": round(seconds, 3) if seconds == seconds else None}, rgb


def _read_remote(name):
    if name == "-":
        data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    else:
        try:
            import fsspec
        except ModuleNotFoundError:
            raise ImageError(
                f"{name}: reading URLs needs fsspec (pip install fsspec, and s3fs, gcsfs, ... for the protocol)"
            ) from None
        try:
            with fsspec.open(name, "rb") as f:
                data = f.read(MAX_STDIN_BYTES + 1)
        except (OSError, ValueError, ImportError) as exc:
            raise ImageError(f"{name}: cannot read ({type(exc).__name__}: {exc})") from None
    if len(data) > MAX_STDIN_BYTES:
        raise ImageError(f"{name}: more than {MAX_STDIN_BYTES:,} bytes, not one image file")
    return data


def detect_file(
    det: Detector,
    path: str,
    *,
    target: Path | None = None,
    every: int = 1,
    max_pixels: int = MAX_PIXELS,
    min_confidence: float | None = None,
    labels: bool = True,
    overwrite: bool = False,
    threads: int | None = None,
    raised_by: str = "max_pixels=",
) -> tuple[list[dict], list[str]]:
    """Detect faces in one image or video file; never raises for a bad file.

    Parameters
    ----------
    det : facedet.Detector
        The detector, with the user's operating point.
    path : str
        An image or video file, ``-`` (standard input) or a URL (:func:`frames`).
    target : Path or None
        Where to write the annotated image (video); None: nothing written.
    every : int
        Videos: every N-th frame.
    max_pixels : int
        Pixel limit of the readers.
    min_confidence : float or None
        Keep faces of at least this confidence (calibrated models).
    labels : bool
        Write each face's confidence (or score) above its box on the annotated image.
    overwrite : bool
        Replace an existing annotated image (else FileExistsError, reported as a failure).
    threads : int or None
        Pyramid levels scanned at once (:meth:`Detector.detect`).
    raised_by : str
        What raises the pixel limit, for the message of an image over it.

    Returns
    -------
    records : list of dict
        One record per image or video frame: ``{"image", "width", "height", "faces": [{x, y, w, h, score,
        confidence}]}`` (pixels; a video frame also ``"frame"``, ``"time"`` in seconds), ``"annotated"`` where the
        annotated file was written; a file that could not be read: one ``{"image", "error"}`` (a video that
        fails mid-way keeps the frames before it).
    failures : list of str
        One message per failure (a file not read, an annotated image not written).
    """
    records, failures, write = [], [], None

    def find(rgb):  # boxes and their confidences (None for an uncalibrated model), min_confidence applied
        boxes = det.detect(rgb, threads=threads)
        conf = det.confidence(boxes[:, 4])
        if min_confidence is not None:
            boxes, conf = boxes[conf >= min_confidence], conf[conf >= min_confidence]
        return boxes, {
            "width": int(rgb.shape[1]),
            "height": int(rgb.shape[0]),
            "faces": [face_record(b, None if conf is None else conf[i]) for i, b in enumerate(boxes)],
        }

    try:
        with contextlib.ExitStack() as stack:
            for extra, rgb in frames(path, every, max_pixels):
                boxes, record = find(rgb)
                records.append({"image": str(path), **extra, **record})
                if target is not None and extra:
                    if write is None:
                        target.parent.mkdir(parents=True, exist_ok=True)
                        write = stack.enter_context(
                            video_writer(
                                target, video_fps(path) / every, (rgb.shape[1], rgb.shape[0]), overwrite=overwrite
                            )
                        )
                    write(draw_boxes(rgb, boxes, box_labels(record) if labels else None))
                    _interrupt.check()
        if write is not None:  # each frame's record names the annotated video, as an image's does
            for r in records:
                r["annotated"] = str(target)
    except (ImageError, ValueError, OSError) as exc:
        message = (
            exc.message(raised_by)
            if isinstance(exc, ImageTooLarge)
            else str(exc)
            if isinstance(exc, ImageError)
            else f"{path}: {exc}"
        )
        return records + [{"image": str(path), "error": message}], [message]
    if target is not None and not is_video(path):  # a failed write loses the picture, not the detections
        _interrupt.check()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_image(target, draw_boxes(rgb, boxes, box_labels(record) if labels else None), overwrite=overwrite)
            records[-1]["annotated"] = str(target)
        except (ImageError, OSError) as exc:
            failures.append(f"cannot write annotated image {target}: {getattr(exc, 'strerror', None) or exc}")
    return records, failures


def detect_files(
    det: Detector,
    jobs: list[tuple[str, Path | None]],
    *,
    client: Client | None = None,
    model: str | os.PathLike | None = None,
    params: dict | None = None,
    chunk: int = CHUNK,
    **options: Any,
) -> Iterator[tuple[list[dict], list[str]]]:
    """:func:`detect_file` for each (path, target) of ``jobs``, yielding its (records, failures) as it finishes.

    Without ``client``: in order, on this process, with ``det``. With a ``distributed.Client``: in chunks of
    ``chunk`` files, in the order they finish; each worker loads ``model`` (a path every worker can read) once
    and applies ``params`` (:meth:`Detector.with_params` keyword arguments, JSON values), which must give ``det``.
    ``options``: the keyword arguments of :func:`detect_file`.
    """
    if client is None:
        for path, target in jobs:
            yield detect_file(det, path, target=target, **options)
        return
    from distributed import as_completed

    chunks = [jobs[i : i + chunk] for i in range(0, len(jobs), chunk)]
    model, params_json = os.fspath(model), json.dumps(params or {}, sort_keys=True)
    futures = client.map(_detect_chunk, chunks, model=model, params_json=params_json, options=options, pure=False)
    for future in as_completed(futures):
        yield from future.result()
        future.release()


def _detect_chunk(jobs, model, params_json, options):
    det = _worker_detector(model, params_json)
    return [detect_file(det, path, target=target, **options) for path, target in jobs]


@functools.lru_cache(maxsize=4)
def _worker_detector(model, params_json):
    """The detector of a worker, loaded once per (model, parameters)."""
    from .detector import Detector

    return Detector.load(model).with_params(**json.loads(params_json))


def connect(scheduler: str | None = None, workers: int | None = None) -> Client | None:
    """A ``distributed.Client`` for a batch: to the scheduler at ``scheduler`` (``tcp://host:8786``; None:
    ``$DASK_SCHEDULER_ADDRESS``), or, without one, to a local cluster of ``workers`` processes of one thread
    each; None if neither is given (the batch then runs on this process).

    Raises ModuleNotFoundError saying how to install Dask (the ``dask`` extra), OSError if the scheduler cannot
    be reached.
    """
    scheduler = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    if scheduler is None and not workers:
        return None
    try:
        from distributed import Client
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError("running on Dask needs it: pip install 'facedet-svm[dask]'", name=exc.name) from None
    if scheduler is not None:
        return Client(scheduler, timeout="30s")
    # (a client that starts its cluster closes it with itself)
    return Client(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
