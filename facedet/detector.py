"""The face detector: a classifier on features of 19x19 windows, a cascade prefilter, scanning parameters and
the calibration from windows to face boxes (Osuna, Freund, Girosi 1997, sec. 5).

Two kinds of classifier share one scan path (:func:`facedet.scoring.make_scorer`): the polynomial
svmcore.SVC on Osuna-preprocessed pixels (``features="osuna"``, the default and the shipped model), and the
additive-kernel svmcore.PmSVM on HOG (``features="hog"``, ``kind="pmsvm"`` in
:func:`facedet.training.train_detector`), scored by its lookup table in O(d) per window.

``Detector.detect(image)`` -> (k, 5) float64 boxes [x, y, w, h, score] in original-image pixels, following the
dlib annotations' convention (a square from the eyebrows to the chin). The box is larger than the scanned
window, so near the image border it may extend past it (negative x, y; clip before cropping). Models are
saved as one ``.npz`` archive with a JSON header (format ``facedet-detector``; never pickle; written
atomically).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from svmcore import persistence
from svmcore.base import BaseEstimator
from svmcore.validation import check_scalar
from svmcore.probability import sigmoid_predict

from .features import get_features
from .imageio import composite_over_white
from .merge import merge_detections
from .preprocess import WINDOW
from .scan import MIN_SCALE_FACTOR, scan
from .scoring import Prefilter, make_scorer

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from numpy.typing import ArrayLike

    from .scoring import Classifier

FORMAT = "facedet-detector"
MAX_UPSAMPLE = 4  # min_size is raised to what a 19x19 window upsampled 4x covers: larger levels cost memory
#                   for nothing the window can resolve
MODEL_NAME = "default_detector.npz"  # the shipped model: package data in facedet/models/


def default_model_path() -> Path:
    """$FACEDET_MODEL if set, else the shipped model, facedet/models/default_detector.npz inside the installed
    package (package data: the same for source trees, editable, wheel and ``pip install --target`` installs)."""
    env = os.environ.get("FACEDET_MODEL")
    if env:
        return Path(env)
    return Path(str(resources.files("facedet").joinpath("models", MODEL_NAME)))


def as_grey(image: ArrayLike) -> np.ndarray:
    """An image array as (H, W) uint8 grey: grey as is, (H, W, 3) RGB by BT.601 luma, (H, W, 4) RGBA composited
    over white first.

    The luma is Pillow's fixed-point ``convert("L")`` and RGBA is composited as
    :func:`facedet.imageio.read_grey` does, so an array and the same file read as grey give identical detections.
    Any size is accepted: an image too small for the smallest window the scan uses has no detections.
    Raises TypeError for a non-uint8 array and ValueError for another shape.
    """
    if isinstance(image, (str, bytes, os.PathLike)):
        raise TypeError(
            f"image: expected an array of pixels, got the path {image!r}; read it with "
            "facedet.imageio.read_grey (or read_rgb)"
        )
    a = np.asarray(image)
    if a.dtype != np.uint8:
        raise TypeError(
            f"image: expected uint8 pixels, got dtype {a.dtype} (for floats in [0, 1]: "
            "(image * 255).round().astype(np.uint8))"
        )
    if a.ndim == 3 and a.shape[2] == 4:
        a = np.asarray(composite_over_white(Image.fromarray(np.ascontiguousarray(a), "RGBA")))
    if a.ndim == 3 and a.shape[2] == 3:
        rgb = a.astype(np.uint32)
        a = ((rgb[:, :, 0] * 19595 + rgb[:, :, 1] * 38470 + rgb[:, :, 2] * 7471 + 0x8000) >> 16).astype(np.uint8)
    if a.ndim != 2:
        raise ValueError(f"image: expected (H, W) grey, (H, W, 3) RGB or (H, W, 4) RGBA, got shape {a.shape}")
    return np.ascontiguousarray(a)


def check_params(**params: Any) -> tuple[tuple[float, float, float], tuple[float, float] | None]:
    """Check :class:`Detector` scanning parameters (its keyword parameters but ``features``; meanings and
    defaults there).

    Training calls it before any work, so that a bad value fails in seconds, not after the SVM fit.
    Raises ValueError/TypeError for out-of-range or unknown parameters. Returns (box, platt) as float tuples
    (platt None if not given).
    """
    defaults = {k: v for k, v in Detector.__init__.__kwdefaults__.items() if k != "features"}
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise TypeError(f"unknown detector parameter(s): {', '.join(unknown)}")
    p = {**defaults, **params}
    check_scalar(p["scale_factor"], "scale_factor", lo=MIN_SCALE_FACTOR)
    check_scalar(p["stride"], "stride", lo=1, hi=WINDOW, integer=True)  # beyond a window, stretches go unscanned
    check_scalar(p["min_size"], "min_size", lo=1)
    if p["max_size"] is not None:
        check_scalar(p["max_size"], "max_size")
        if p["max_size"] < p["min_size"]:  # name the bound: "must be >= 20.0" alone reads as a constant
            raise ValueError(f"max_size: must be >= min_size ({p['min_size']:g}), got {p['max_size']:g}")
    check_scalar(p["threshold"], "threshold")
    if p["refine"] is not None:
        check_scalar(p["refine"], "refine")
    check_scalar(p["merge_iou"], "merge_iou", lo=0, hi=1, lo_open=True)
    check_scalar(p["min_neighbors"], "min_neighbors", lo=1, integer=True)
    box = p["box"]
    if np.ndim(box) != 1 or len(box) != 3:
        raise ValueError(f"box: expected (dx, dy, scale), got {box!r}")
    box = tuple(float(check_scalar(b, "box")) for b in box)
    if box[2] <= 0:
        raise ValueError(f"box: expected (dx, dy, scale > 0), got {box}")
    smallest = WINDOW / MAX_UPSAMPLE * box[2]
    if p["max_size"] is not None and p["max_size"] < smallest:  # else every scan would be silently empty
        raise ValueError(
            f"max_size: must be >= {smallest:.1f}, the smallest face this detector finds (a {WINDOW}x"
            f"{WINDOW} window upsampled {MAX_UPSAMPLE}x), got {p['max_size']}"
        )
    platt = p["platt"]
    if platt is not None:
        if np.ndim(platt) != 1 or len(platt) != 2:
            raise ValueError(f"platt: expected (A, B) or None, got {platt!r}")
        platt = tuple(float(check_scalar(v, "platt")) for v in platt)
        if platt[0] >= 0:  # the confidence would fall as the score rises
            raise ValueError(f"platt: expected A < 0 (confidence rising with the score), got {platt}")
    return box, platt


class Detector:
    """Face detector.

    classifier: a fitted binary classifier (svmcore.SVC or svmcore.PmSVM; classes [0, 1] or [-1, 1], 1 = face)
    on the rows of ``features``; features: the name of its window features in :data:`facedet.features.FEATURES`
    ("osuna": :func:`facedet.features.window_features`, the default; "hog": :func:`facedet.features.hog_features`);
    prefilter: a :class:`facedet.scoring.Prefilter` cascade, or None to score every window with the SVM;
    scale_factor (>= 1.01): pyramid step; stride (px, at each level, 1..19): window step; min_size / max_size: smallest
    and largest face box side in original pixels (max None: the image; min at least what a window upsampled
    4x covers, 7.5 px with the shipped box map); threshold: SVM decision value above
    which a window is a face; refine: SVM decision value; around every window scoring above it the scan also
    scores the stride-1 windows and the pyramid's half steps (coarse-to-fine, :func:`facedet.scan.scan`;
    None: off);
    merge_iou: windows overlapping this much (IoU) are merged into one detection;
    min_neighbors: detections made of fewer windows are dropped; box: (dx, dy, scale) maps a window of side s
    at (x, y) to the face box of side scale*s centred at (x + s/2 + dx*s, y + s/2 + dy*s); platt: (A, B) of
    Platt's sigmoid 1 / (1 + exp(A score + B)) that turns a detection's score into its :meth:`confidence`
    (:func:`facedet.calibration.calibrate_confidence`), or None for an uncalibrated model.
    Raises ValueError/TypeError for out-of-range parameters, a classifier without two classes [0, 1] or [-1, 1],
    or a prefilter that is not a :class:`facedet.scoring.Prefilter`.
    """

    def __init__(
        self,
        classifier: Classifier,
        prefilter: Prefilter | None = None,
        *,
        scale_factor: float = 1.2,
        stride: int = 2,
        min_size: float = 20,
        max_size: float | None = None,
        threshold: float = 0.0,
        refine: float | None = None,
        merge_iou: float = 0.3,
        min_neighbors: int = 2,
        box: Sequence[float] = (0.0, 0.0, 1.0),
        platt: Sequence[float] | None = None,
        features: str = "osuna",
    ) -> None:
        box, platt = check_params(
            scale_factor=scale_factor,
            stride=stride,
            min_size=min_size,
            max_size=max_size,
            threshold=threshold,
            refine=refine,
            merge_iou=merge_iou,
            min_neighbors=min_neighbors,
            box=box,
            platt=platt,
        )
        if not hasattr(classifier, "decision_function") or not (
            hasattr(classifier, "dual_coef_") or hasattr(classifier, "coef_")
        ):
            raise ValueError("classifier: expected a fitted SVC or PmSVM")
        classes = [c.item() if isinstance(c, np.generic) else c for c in getattr(classifier, "classes_", ())]
        if classes not in ([0, 1], [-1, 1]):  # the score must mean "face": labels that sort otherwise would flip it
            raise ValueError(
                "classifier: a face detector needs a two-class classifier with classes [0, 1] or [-1, 1] "
                f"(1 = face), got classes {classes}"
            )
        if prefilter is not None and not isinstance(prefilter, Prefilter):
            raise TypeError(f"prefilter: expected a facedet.scoring.Prefilter or None, got {type(prefilter).__name__}")
        self._features = get_features(features)
        self.features = features
        self._scorer = make_scorer(classifier)
        n_in, n_out = _n_features(classifier), self._features(np.zeros((1, WINDOW, WINDOW), np.uint8)).shape[1]
        if n_in is not None and n_in != n_out:
            raise ValueError(f"classifier: takes {n_in} features, but features={features!r} gives {n_out}")
        self.classifier = classifier
        self.prefilter = prefilter
        self.scale_factor = float(scale_factor)
        self.stride = int(stride)
        self.min_size = float(min_size)
        self.max_size = None if max_size is None else float(max_size)
        self.threshold = float(threshold)
        self.refine = None if refine is None else float(refine)
        self.merge_iou = float(merge_iou)
        self.min_neighbors = int(min_neighbors)
        self.box = box
        self.platt = platt

    def params(self) -> dict[str, Any]:
        """Scanning parameters as a JSON-able dict (the keyword arguments of the constructor)."""
        return {
            "scale_factor": self.scale_factor,
            "stride": self.stride,
            "min_size": self.min_size,
            "max_size": self.max_size,
            "threshold": self.threshold,
            "refine": self.refine,
            "merge_iou": self.merge_iou,
            "min_neighbors": self.min_neighbors,
            "box": list(self.box),
            "platt": None if self.platt is None else list(self.platt),
        }

    def with_params(self, **params: Any) -> Detector:
        """A copy with some scanning parameters (or ``features``) changed; same classifier and prefilter.

        Raises TypeError / ValueError for an unknown or out-of-range parameter (e.g. scale_factor <= 1), and
        ValueError for features that do not match the classifier's input size."""
        features = params.pop("features", self.features)
        return Detector(self.classifier, self.prefilter, features=features, **{**self.params(), **params})

    def confidence(self, scores: ArrayLike) -> np.ndarray | np.float64 | None:
        """Detection scores (any shape) -> confidences in [0, 1], float64 of the same shape: Platt's sigmoid
        1 / (1 + exp(A score + B)) fitted on held-out detections (Platt 1999; Lin, Lin, Weng 2007), the
        fraction of detections of that score that were faces there. None for a model without ``platt``."""
        if self.platt is None:
            return None
        return sigmoid_predict(scores, *self.platt)

    def window_features(self, windows: ArrayLike) -> np.ndarray:
        """The classifier's feature rows of (n, 19, 19) windows: (n, p) float64 (see ``features``)."""
        return self._features(windows)

    def score_windows(self, windows: ArrayLike) -> np.ndarray:
        """Decision values of (n, 19, 19) windows: (n,) float64 (no prefilter)."""
        return self._scorer(self._features(windows))

    def score_features(self, features: ArrayLike, floor: float = -np.inf) -> np.ndarray:
        """Decision values of feature rows (n, p) of the detector's ``features``: (n,) float64; with ``floor``,
        exact only where above it (see :func:`facedet.scoring.make_scorer`)."""
        return self._scorer(features, floor)

    def windows_to_boxes(self, windows: ArrayLike) -> np.ndarray:
        """Map window boxes (k, >=4) [x, y, w, h, ...] to square face boxes with the calibration ``box``; extra
        columns kept. The window's side s is its width w: pyramid levels are whole pixels, so h = 19 sy differs
        from w = 19 sx by the rounding of the level's size (under 1% on most levels, about 3% on the top level
        of a small image). ValueError for another shape."""
        w = np.asarray(windows, dtype=np.float64)
        if w.ndim != 2 or w.shape[1] < 4:
            raise ValueError(f"windows: expected shape (k, >= 4), got {w.shape}")
        dx, dy, k = self.box
        out = w.copy()
        s = w[:, 2]
        out[:, 0] = w[:, 0] + s * (0.5 + dx - k / 2)
        out[:, 1] = w[:, 1] + s * (0.5 + dy - k / 2)
        out[:, 2] = out[:, 3] = k * s
        return out

    def scan_windows(
        self, image: ArrayLike, return_windows: bool = False, threads: int | None = None
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Every window above ``threshold`` (not merged, not calibrated): (k, 5) [x, y, w, h, score] in original
        pixels (w and h differ by the level's rounding to whole pixels), and with ``return_windows`` the (k, 19,
        19) uint8 windows. threads: pyramid levels scanned at once (None: $NUMBA_NUM_THREADS or every core, at
        most 4; the result does not depend on it). See :func:`facedet.scan.scan`."""
        k = self.box[2]
        return scan(
            as_grey(image),
            self._scorer,
            self._features,
            self.prefilter,
            scale_factor=self.scale_factor,
            stride=self.stride,
            min_window=max(self.min_size / k, WINDOW / MAX_UPSAMPLE),
            max_window=None if self.max_size is None else self.max_size / k,
            threshold=self.threshold,
            refine=self.refine,
            return_windows=return_windows,
            threads=threads,
        )

    def detect(self, image: ArrayLike, threads: int | None = None) -> np.ndarray:
        """Faces in ``image`` ((H, W) grey, (H, W, 3) RGB or (H, W, 4) RGBA uint8; OpenCV's ``cv2.imread`` gives
        BGR: convert it with ``cv2.cvtColor(img, cv2.COLOR_BGR2RGB)``, as the grey levels differ): (k, 5) float64
        [x, y, w, h, score], best first.

        Windows above the threshold are merged (IoU >= merge_iou), groups of fewer than min_neighbors windows
        are dropped, and each group's mean window is mapped to a face box. threads: pyramid levels scanned at
        once (None: $NUMBA_NUM_THREADS or every core, at most 4; the result does not depend on it). Raises
        TypeError/ValueError for a bad image or threads < 1.
        """
        merged = merge_detections(self.scan_windows(image, threads=threads), self.merge_iou, self.min_neighbors)
        out = self.windows_to_boxes(merged[:, :5])
        return out[np.argsort(-out[:, 4], kind="stable")]

    # --- persistence ----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write the detector to ``path`` (.npz + JSON header, atomic). Needs an svmcore classifier.

        The header records the classifier's class, parameters and meta data, and the ``features`` name
        (absent in models written before it existed, which read as "osuna")."""
        if not isinstance(self.classifier, BaseEstimator):
            raise TypeError(f"cannot save a {type(self.classifier).__name__}; train with svmcore.SVC or PmSVM")
        params, meta, arrays = persistence.get_state(self.classifier)
        header = {
            "format": FORMAT,
            "format_version": persistence.FORMAT_VERSION,
            "params": self.params(),
            "features": self.features,
            "classifier": {"class": type(self.classifier).__name__, "params": params, "meta": meta},
            "prefilter": self.prefilter is not None,
        }
        payload = {f"classifier.{k}": v for k, v in arrays.items()}
        if self.prefilter is not None:
            payload["prefilter.weights"] = self.prefilter.weights
            payload["prefilter.thresholds"] = self.prefilter.thresholds
        return persistence.write_archive(path, header, payload)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Detector:
        """Read a detector written by :meth:`save`. FileNotFoundError if missing; ValueError if corrupt or foreign.

        The header must describe the arrays: a ValueError names the file and the mismatch where a hand-edited
        header no longer does, rather than load another model than the file holds. Refused: header fields other
        than :meth:`save` writes; a ``prefilter`` that is not true or false, true without the prefilter's arrays,
        or false beside them (the cascade would be silently dropped); arrays of neither the classifier nor the
        prefilter; and whatever ``svmcore`` refuses in the classifier's part (:func:`svmcore.load`: unknown or
        missing parameters and arrays, mis-shaped arrays, a kernel width ``gamma_`` that its ``kernel`` and
        ``gamma`` do not give, :func:`svmcore.kernels.check_fitted_gamma`). The scanning parameters (threshold,
        stride, box, ...) are the user's to edit, as ``detect --threshold`` or :meth:`with_params` change them,
        and are only range-checked."""
        import svmcore.pmsvm  # register SVC and PmSVM with persistence
        import svmcore.svc  # noqa: F401

        header, arrays = persistence.read_archive(path, FORMAT, _array_names, "facedet detector")
        try:
            _check_prefilter(header, arrays)
            info = header["classifier"]
            clf_arrays = {k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith("classifier.")}
            classifier = persistence.from_state(info["class"], info["params"], info["meta"], clf_arrays)
            prefilter = None
            if header.get("prefilter", False):
                prefilter = Prefilter(arrays["prefilter.weights"], arrays["prefilter.thresholds"])
            params = dict(header["params"])
            params["box"] = tuple(params["box"])
            return cls(classifier, prefilter, features=header.get("features", "osuna"), **params)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            # (a ValueError's message says what is wrong; the other kinds need their name: KeyError: 'x')
            what = exc if type(exc) is ValueError else f"{type(exc).__name__}: {exc}"
            raise ValueError(f"{path}: invalid facedet detector ({what})") from exc

    def __repr__(self):
        p = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return (
            f"Detector({type(self.classifier).__name__}, features={self.features!r}, "
            f"prefilter={self.prefilter is not None}, {p})"
        )


_HEADER_FIELDS = {"format", "format_version", "params", "features", "classifier", "prefilter"}  # what save writes
_PREFILTER_ARRAYS = ("prefilter.weights", "prefilter.thresholds")


def _array_names(header):
    """The arrays a detector file with this ``header`` (dict) may hold; ValueError unless the header names exactly
    the fields :meth:`Detector.save` writes and a known classifier class (see :meth:`Detector.load`)."""
    unknown = sorted(set(header) - _HEADER_FIELDS)
    if unknown:
        raise ValueError(f"unknown header fields {unknown}")
    if not isinstance(header.get("classifier"), dict) or set(header["classifier"]) != {"class", "params", "meta"}:
        raise ValueError("the header's classifier must hold exactly class, params and meta")
    return [f"classifier.{k}" for k in persistence.file_arrays(header["classifier"]["class"])] + list(_PREFILTER_ARRAYS)


def _check_prefilter(header, arrays):
    """ValueError unless the header's ``prefilter`` flag agrees with the prefilter's arrays in ``arrays``."""
    has = header.get("prefilter", False)  # (written by every version; absent: no cascade)
    if not isinstance(has, bool):
        raise ValueError(f"prefilter: expected true or false, got {has!r}")
    present = [k for k in _PREFILTER_ARRAYS if k in arrays]
    if has and len(present) < len(_PREFILTER_ARRAYS):
        raise ValueError(
            f"the header says prefilter: true, but the file lacks "
            f"{', '.join(k for k in _PREFILTER_ARRAYS if k not in arrays)}"
        )
    if not has and present:
        raise ValueError(
            f"the header says prefilter: false, but the file holds the prefilter's arrays "
            f"({', '.join(present)}): the cascade would be dropped; set prefilter to true, or remove the "
            "arrays too"
        )


def _n_features(classifier):
    """Number of input features of a fitted SVC (support_vectors_) or PmSVM (coef_), else None."""
    sv = getattr(classifier, "support_vectors_", None)
    if sv is not None and np.ndim(sv) == 2:
        return np.shape(sv)[1]
    coef = getattr(classifier, "coef_", None)
    if coef is not None and np.ndim(coef) == 3:  # PmSVM: (n_models, d, n_anchors)
        return np.shape(coef)[1]
    return None
