"""The one-call Python API: ``facedet.detect(image)`` -> a list of :class:`Face`; :func:`detect_many` over many
images, :func:`detect_video` over a video's frames.

Any image a user holds is accepted -- a path, a PIL image, a grey / RGB / BGR / RGBA array of uint8 or of
floats in [0, 1] -- and converted to the grey levels the command line sees for the same file, so that both
find the same faces. The default model is loaded once per process and kept.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
from PIL import Image

from .detector import Detector, as_grey, default_model_path
from .imageio import pil_to_grey, read_grey, read_video

ImageLike = Union[str, os.PathLike, Image.Image, np.ndarray]
COLORS = ("rgb", "bgr")


@dataclass(frozen=True)
class Face:
    """One detected face.

    x, y, w, h: the face box in pixels of the input image (top-left corner, width, height; the dlib
    convention, a square from the eyebrows to the chin; a face at the border can extend past the image);
    score: the detector's decision value (higher: surer; the model's threshold separates faces from the rest);
    confidence: the score's calibrated probability of being a face in [0, 1] (:meth:`Detector.confidence`),
    None for a model without calibration.
    """

    x: float
    y: float
    w: float
    h: float
    score: float
    confidence: Optional[float]

    @property
    def box(self) -> tuple[float, float, float, float]:
        """(x, y, w, h) in pixels."""
        return (self.x, self.y, self.w, self.h)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict."""
        return asdict(self)


def detect(
    image: ImageLike,
    *,
    model: Union[None, str, os.PathLike, Detector] = None,
    color: str = "rgb",
    min_confidence: Optional[float] = None,
    **scan_options: Any,
) -> list[Face]:
    """Find the faces in one image, best first.

    Parameters
    ----------
    image : path, PIL.Image.Image or numpy.ndarray
        A file (read as ``facedet detect`` reads it: EXIF orientation, 16-bit and transparency handled); a PIL
        image; or an array of shape (H, W) grey, (H, W, 3) colour or (H, W, 4) colour with alpha, dtype uint8
        or float (values in [0, 1]).
    model : None, path or Detector
        None: the shipped default model ($FACEDET_MODEL if set), loaded once per process; a model file (loaded
        once per path) or a :class:`Detector`.
    color : {"rgb", "bgr"}
        Channel order of a colour array; ``cv2.imread`` gives "bgr". Ignored for paths, PIL images and grey.
    min_confidence : float in [0, 1], optional
        Keep only faces of at least this confidence (needs a calibrated model).
    **scan_options
        Detector parameters for this call (``threshold``, ``min_size`` and ``max_size`` in pixels,
        ``min_neighbors``, ``scale_factor``, ``stride``, ``refine``; see :class:`Detector`).

    Returns
    -------
    list of Face
        Sorted by descending score.

    Raises
    ------
    facedet.imageio.ImageError
        A missing file or one that cannot be read as an image (a ValueError).
    FileNotFoundError
        A missing model file (ValueError: a file that is not a facedet model).
    TypeError, ValueError
        An array of another dtype or shape, float values outside [0, 1], an unknown ``color`` or scan option,
        ``min_confidence`` outside [0, 1] or given for an uncalibrated model.
    """
    det = _detector(model)
    if scan_options:
        det = det.with_params(**scan_options)
    if min_confidence is not None:
        if det.platt is None:
            raise ValueError("min_confidence: this model has no confidence calibration (use threshold)")
        if not 0.0 <= float(min_confidence) <= 1.0:
            raise ValueError(f"min_confidence: expected a value in [0, 1], got {min_confidence}")
    boxes = det.detect(to_grey(image, color=color))
    conf = det.confidence(boxes[:, 4])
    faces = [Face(*map(float, b[:5]), confidence=None if conf is None else float(conf[i])) for i, b in enumerate(boxes)]
    if min_confidence is not None:
        faces = [f for f in faces if f.confidence >= min_confidence]
    return faces


def detect_many(images: Iterable[ImageLike], **options: Any) -> Iterator[tuple[ImageLike, list[Face]]]:
    """:func:`detect` over many images, lazily: yields (image, faces) in input order, one image read at a time.
    Options as for :func:`detect`; the first error is raised where it happens (catch it and go on with the
    rest by calling :func:`detect` per image)."""
    for image in images:
        yield image, detect(image, **options)


def detect_video(
    path: Union[str, os.PathLike], *, every: int = 1, **options: Any
) -> Iterator[tuple[int, float, list[Face]]]:
    """:func:`detect` on the frames of a video file (any container OpenCV reads), decoded one at a time.

    Yields ``(frame index, time in seconds, faces)`` for frames 0, every, 2 every, ...; options as for
    :func:`detect`. Raises :class:`facedet.imageio.ImageError` for a missing file or one that is not a video,
    ValueError for ``every`` < 1, and what :func:`detect` raises for the options.
    """
    for index, seconds, rgb in read_video(path, every=every):
        yield index, seconds, detect(rgb, **options)


def warmup(estimators: bool = False) -> float:
    """Run every compiled step of detection once (pyramid, cascade prefilter, preprocessing, scoring, merging,
    matching) on a small random image with the default model, so that numba writes their machine code to its
    on-disk cache and the first ``facedet detect`` of a fresh install or container starts without compiling;
    with ``estimators``, svmcore's too (:func:`svmcore.warmup`). Returns the seconds taken."""
    import time

    from .evaluate import match_detections

    t = time.perf_counter()
    det = _detector(None)
    img = np.random.default_rng(0).integers(0, 256, (64, 80), dtype=np.uint8)
    det.detect(img)
    # without the cascade and at any score, every window reaches the SVM, the refinement and the merge
    everything = Detector(
        det.classifier, None, features=det.features, **{**det.params(), "threshold": -1e9, "refine": -1e9}
    )
    boxes = everything.detect(img)
    match_detections(boxes, boxes[:2, :4])
    if estimators:
        import svmcore

        svmcore.warmup()
    return time.perf_counter() - t


def to_grey(image: ImageLike, *, color: str = "rgb") -> np.ndarray:
    """Any image :func:`detect` takes as the (H, W) uint8 grey array it searches. Errors as :func:`detect`."""
    if color not in COLORS:
        raise ValueError(f"color: expected one of {COLORS}, got {color!r}")
    if isinstance(image, (str, os.PathLike)):
        return read_grey(image)
    if isinstance(image, Image.Image):
        return pil_to_grey(image)
    a = np.asarray(image)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.dtype.kind == "f":
        if a.size and not (np.isfinite(a).all() and a.min() >= 0.0 and a.max() <= 1.0):
            raise ValueError("image: float pixels must lie in [0, 1] (for 0..255 floats: image.astype(np.uint8))")
        a = np.round(a * 255.0).astype(np.uint8)
    if color == "bgr" and a.ndim == 3 and a.shape[2] in (3, 4):
        a = np.concatenate([a[:, :, 2::-1], a[:, :, 3:]], axis=2)
    return as_grey(a)


def _detector(model) -> Detector:
    if isinstance(model, Detector):
        return model
    path = default_model_path() if model is None else Path(model)
    st = path.stat()  # FileNotFoundError names the file; a replaced file is read again
    return _load(str(path.resolve()), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int, size: int) -> Detector:
    return Detector.load(path)
