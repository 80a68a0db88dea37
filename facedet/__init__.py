"""facedet: face detection with a support vector machine on 19x19 windows (Osuna, Freund, Girosi 1997).

- :func:`detect`: ``facedet.detect("photo.jpg")`` (or a PIL image, a grey/RGB/BGR/RGBA array) -> list of
  :class:`Face` (x, y, w, h in pixels, score, confidence), with the shipped model loaded once;
  :func:`detect_many` over many images, :func:`detect_video` over a video's frames.
- :class:`Detector`: classifier + cascade prefilter + scanning parameters; ``detect(image)`` returns
  (k, 5) boxes [x, y, w, h, score] in image pixels; ``Detector.load(path)`` / ``detector.save(path)``.
- :func:`load_default`: the shipped model (facedet/models/default_detector.npz, or $FACEDET_MODEL); its path is
  :func:`default_model_path`.
- Modules: preprocess (mask, plane, equalization), patches, features, scoring, scan, merge, training,
  bootstrap, calibration, imageio, evaluate; the ``facedet`` command is :mod:`facedet.cli`.

Names are imported lazily, so that the ``facedet`` command's entry point (:mod:`facedet.__main__`) loads
nothing heavy before it handles Ctrl-C.
"""

from __future__ import annotations

# typing.TYPE_CHECKING without importing typing: the command's entry point (__main__) loads nothing before it
# handles Ctrl-C
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .detector import Detector

__version__ = "0.7.0"  # the distribution's version (pyproject.toml reads it from here)
__all__ = ["Detector", "Face", "default_model_path", "detect", "detect_many", "detect_video", "load_default"]


def __getattr__(name):
    if name in ("Detector", "default_model_path"):
        from . import detector

        return getattr(detector, name)
    if name in ("Face", "detect", "detect_many", "detect_video"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'facedet' has no attribute {name!r}")


def load_default() -> Detector:
    """The shipped default :class:`Detector` ($FACEDET_MODEL if set); FileNotFoundError if the model file is
    missing, ValueError if it is corrupt or not a facedet model."""
    from .detector import Detector, default_model_path

    return Detector.load(default_model_path())
