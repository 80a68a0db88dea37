"""Command line: ``facedet train | bootstrap | detect | evaluate | calibrate`` (typer). Argument handling only.

Exit codes (:func:`exit_codes`, stated by ``facedet --help`` and by every command's ``--help``): 0 success; 1 if
an input file failed (each bad file is reported on stderr and the other files are still processed) or an output
could not be written; 2 usage error (bad option, missing or unusable model, folder or CSV); 130 on Ctrl-C
(:mod:`facedet.__main__`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import warnings
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from . import _interrupt


def exit_codes(failed="an input file", unusable="model, folder, CSV or output path", also=""):
    """The exit codes as the help pages state them: one text for the program and every command, which differ only
    in what their inputs are (``failed``: the files whose failure is exit 1; ``unusable``: the inputs that make a
    usage error besides a bad option; ``also``: a usage error found in the course of the work). 130 comes from
    :mod:`facedet.__main__`'s Ctrl-C handler."""
    return (
        f"Exit codes: 0 success; 1 if {failed} could not be read (each is reported on stderr, the others are "
        f"processed) or an output could not be written; 2 usage error (a bad option, or a missing or unusable "
        f"{unusable}{f'; also if {also}' if also else ''}); 130 interrupted (Ctrl-C)."
    )


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Face detection with a polynomial SVM on 19x19 windows (Osuna, Freund, Girosi 1997), or an "
    "additive-kernel PmSVM on HOG.",
    epilog=exit_codes() + " Machine output (--json) is the only thing on stdout.",
)
# soft_wrap: one message per line when piped (grep-able); file names are never read as rich markup
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def _report(label, message):
    err.print(Text.assemble((label, "red"), " ", str(message)))


def _usage(message):
    _report("error:", message)
    raise typer.Exit(2)


def _as_options(exc, names):
    """The library's error message with its parameter names as the options the user typed (scale_factor: ->
    --scale-factor:, min_size (20) -> --min-size (20))."""
    message = str(exc)
    for name in names:  # whole words only: "C:" must not turn "SVC:" into "SV--C:"
        message = re.sub(rf"(?<![\w-]){re.escape(name)}(?=:| \()", f"--{name.replace('_', '-')}", message)
    return message


def _check_output(path: Path, option: str):
    """Fail early (exit 2) if ``path`` cannot be written: a missing or non-folder parent, or a folder as
    the target, so that no long run ends in a failed write."""
    if path.is_dir():
        _usage(f"{option} {path}: is a folder; give a file name")
    parent = path.parent
    if not parent.is_dir():
        _usage(f"{option} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        _usage(f"{option} {path}: folder {parent} is not writable")


def _real(path) -> Path:
    """The absolute path with symlinks resolved as far as they go: ``Path.resolve()`` raises RuntimeError on a
    symlink loop (Python 3.11), a traceback where the loop is just a file that cannot be read."""
    return Path(os.path.realpath(path))


def _check_not_input(paths, option: str, inputs: dict):
    """Usage error (exit 2) if writing a path of ``paths`` (one or a list; None entries skipped) would replace an
    input, or put a file of an image suffix into an input folder. ``inputs`` maps an option to the file or folder
    it names, or to a list of files (None: not given); the image files in a folder are its inputs."""
    from .patches import IMAGE_SUFFIXES

    files, folders = {}, {}
    for name, given in inputs.items():
        for source in [] if given is None else given if isinstance(given, list) else [given]:
            source = _real(source)  # a symlink to an input is the input
            files[source] = name
            if os.path.isdir(source):  # (os.path: False for a name too long, where Path.is_dir raises)
                folders[source] = name
    for path in paths if isinstance(paths, list) else [paths]:
        target = None if path is None else _real(path)
        if target in files:
            _usage(f"{option} {path}: is the {files[target]} input; it would be overwritten")
        if target is not None and target.suffix.lower() in IMAGE_SUFFIXES:
            name = next((folders[p] for p in target.parents if p in folders), None)
            if name is not None:  # (a new file there would be read as an image of that input later)
                _usage(
                    f"{option} {path}: is an image in the {name} input; it would be overwritten"
                    if os.path.isfile(target)
                    else f"{option} {path}: is inside the {name} input folder, "
                    "where it would be read as an image; write it elsewhere"
                )


_stdout = {"lost": False}  # set when standard output could not take a command's results


def _print(*objects, **kwargs):
    """``out.print``, or for a str with ``raw=True`` a plain write (the --json document). Standard output that
    cannot take it (a full disk, a closed pipe) is one line on stderr and exit 1 at the end (:func:`_exit`),
    not a traceback, and the command's other outputs are still written."""
    raw = kwargs.pop("raw", False)
    _interrupt.check()  # no results after Ctrl-C
    if _stdout["lost"]:
        return
    try:
        if raw:
            sys.stdout.write(objects[0])
            sys.stdout.flush()
        else:
            out.print(*objects, **kwargs)
    except OSError as exc:
        _stdout["lost"] = True
        if not isinstance(exc, BrokenPipeError):  # a reader that left (| head) needs no message
            _report("error:", f"cannot write to standard output: {exc.strerror or exc}")
        try:  # what is left in the buffer goes nowhere, so that Python's flush at exit does not fail again
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass


def _version(value: bool):
    if value:
        from . import __version__

        _print(f"facedet {__version__}", markup=False, highlight=False)
        raise typer.Exit(0)


@app.callback()
def _start(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
):
    # each run (or CliRunner invocation in one process) starts with a working standard output
    _stdout["lost"] = False


def _exit(failed):
    """End a command: exit 1 if an input failed or an output (standard output included) was not written."""
    _interrupt.check()
    _interrupt.finish()  # (a Ctrl-C after the last output is not an interruption)
    raise typer.Exit(1 if failed or _stdout["lost"] else 0)


def _write(save, path):
    """Run ``save(path)``; an OSError (disk full, ...) is reported with the user's path, exit 1."""
    _interrupt.check()
    try:
        save(path)
    except OSError as exc:
        _report("error:", f"cannot write {path}: {exc.strerror or exc}")
        raise typer.Exit(1) from exc


_notice = {}  # "listener": the registered one


def _notice_compiling():
    """One line on stderr when numba compiles instead of loading its cache (a fresh install, container or cluster
    worker): the first run then pauses for seconds, which should not look like a hang. Once per process."""
    if "listener" in _notice:
        return
    from numba.core import event

    class Notice(event.Listener):
        shown = False

        def on_start(self, ev):  # compilation only: a kernel loaded from the cache sends no event
            if not self.shown:
                self.shown = True
                err.print(
                    "note: compiling machine code on first use, once per install (`facedet warmup` does it ahead)",
                    markup=False,
                    highlight=False,
                    style="dim",
                )

        def on_end(self, ev):
            pass

    _notice["listener"] = Notice()
    event.register("numba:compile", _notice["listener"])


def _load_detector(model: Optional[Path], notice=True):
    from .detector import Detector, default_model_path

    if notice:
        _notice_compiling()

    path = model or default_model_path()
    try:
        return Detector.load(path)
    except (FileNotFoundError, ValueError) as exc:
        _usage(f"cannot load model: {exc}")


class _Progress(Progress):
    """rich's Progress whose every update is a point where a swallowed Ctrl-C stops the command."""

    def update(self, *args, **kwargs):
        _interrupt.check()
        super().update(*args, **kwargs)

    def advance(self, *args, **kwargs):
        _interrupt.check()
        super().advance(*args, **kwargs)


def _progress():
    return _Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def _svm_callback(progress, task):
    def callback(info):
        if "kkt_violation" in info:
            progress.update(task, info=f"iteration {info['n_iter']}, KKT violation {info['kkt_violation']:.2e}")

    return callback


_MAX_PIXELS = 50_000_000  # facedet.imageio.MAX_PIXELS (tested equal), written out: --help loads no Pillow or numpy

_MAX_PIXELS_HELP = (
    "Largest image read, in pixels (width x height; default 50,000,000). Each file's size is read from its header "
    "and a larger image is refused before decoding: a small file can claim a huge size and exhaust memory (a "
    "decompression bomb). Raise it for larger photos (61- or 102-MP cameras, a phone's 108- or 200-MP mode) where "
    "the memory is there: finding the faces in a photo peaks at about 23-25 bytes a pixel, 1.5 GB at 60 MP, 2.8 GB "
    "at 120 MP, 4.5 GB at 200 MP (measured with 1 and 2 threads alike), and train, bootstrap and calibrate keep "
    "every image they read, 1 byte a pixel. Above 178,956,970 Pillow's own limit is raised too, for these reads "
    "only."
)


def _max_pixels_option():
    """--max-pixels: one definition for every command that reads image files."""
    return typer.Option(_MAX_PIXELS, "--max-pixels", min=1, show_default=False, help=_MAX_PIXELS_HELP)


def _image_error(exc):
    """The message of an ImageError for the command line: a refusal over the pixel limit names --max-pixels
    (where the library's message names its max_pixels= argument)."""
    from .imageio import ImageTooLarge

    return exc.message("--max-pixels") if isinstance(exc, ImageTooLarge) else str(exc)


def _image_files(folder: Path, option: str):
    from .patches import image_files

    try:
        return image_files(folder, recursive=True)
    except ValueError as exc:
        _usage(f"{option}: {exc}")


def _read_images(paths, progress, description, max_pixels):
    """(name, grey) of readable images of at most ``max_pixels`` pixels and at least one window large; bad files
    reported (images smaller than a window only noted: valid, but without a window to learn from). Returns
    (images, n_failed)."""
    from .imageio import ImageError, read_grey
    from .preprocess import WINDOW

    images, failed = [], 0
    task = progress.add_task(description, total=len(paths), info="")
    for p in paths:
        try:
            grey = read_grey(p, max_pixels=max_pixels)
            if min(grey.shape) < WINDOW:
                _report(
                    "note:",
                    f"{p}: {grey.shape[1]}x{grey.shape[0]} is smaller than the {WINDOW}x{WINDOW} window; not used",
                )
            else:
                images.append((p, grey))
        except ImageError as exc:
            _report("skipped", _image_error(exc))
            failed += 1
        progress.advance(task)
    return images, failed


def _negatives(folder, files, progress, max_pixels):
    """(name, grey) of the usable images ``files`` (from ``_image_files(folder, "--negatives")``, listed with the
    other option checks; of at most ``max_pixels`` pixels) and the number that failed; a usage error (exit 2) if
    none is usable, for a run without them would not be the run asked for."""
    from .preprocess import WINDOW

    images, failed = _read_images(files, progress, "reading negatives", max_pixels)
    if not images:
        _usage(f"--negatives {folder}: no readable image of at least {WINDOW}x{WINDOW} pixels")
    return images, failed


def _patches(faces, nonfaces, data, split, max_pixels, landmarks=None, photos=None):
    import numpy as np

    from .imageio import open_csv
    from .patches import CBCL_FRAMING, load_folder, load_landmark_faces, load_patches

    if data is not None and (faces is not None or nonfaces is not None):
        _usage("give either --data or --faces with --nonfaces, not both")
    if data is None and nonfaces is None or data is None and faces is None and landmarks is None:
        _usage("give --faces DIR (or --landmarks CSV) and --nonfaces DIR, or --data FILE.npz")
    errors = []
    try:
        if faces is None and data is None:  # the faces come from --landmarks alone
            what = "--nonfaces"
            N = load_folder(nonfaces, errors, max_pixels=max_pixels)
            X, y = N, np.zeros(len(N), np.int64)
        else:
            what = "--data" if data is not None else "--faces/--nonfaces"
            X, y = load_patches(faces, nonfaces, data=data, split=split, errors=errors, max_pixels=max_pixels)
        if landmarks is not None:
            what = "--landmarks"
            # one tilted copy a face; the mirror images come with --mirror, as for the other faces
            with open_csv(landmarks, "landmark CSV") as reader:  # a CSV without splits: all its rows
                has_split = "split" in [c.strip().lower() for c in reader.fieldnames or []]
            F, _, _ = load_landmark_faces(
                landmarks,
                photos if photos is not None else landmarks.parent / "images",
                CBCL_FRAMING,
                split=split if has_split else None,
                rotations=1,
                mirror=False,
                errors=errors,
                max_pixels=max_pixels,
            )
            X, y = np.concatenate([F, X]), np.r_[np.ones(len(F), np.int64), y]
    except (OSError, ValueError) as exc:
        usage = f"{what}: {exc}"
    else:
        usage = None
    for _path, exc in errors:  # (before a folder's "no readable images": they say why)
        _report("skipped", _image_error(exc))
    if usage is not None:
        _usage(usage)
    return X, y, len(errors)


def _typed(ctx, names):
    """Those of the options ``names`` (parameter names) given on the command line, as --option-names."""
    return [
        f"--{n.replace('_', '-')}" for n in names if getattr(ctx.get_parameter_source(n), "name", None) == "COMMANDLINE"
    ]


def _split_needs_data(ctx, data):
    if data is None and _typed(ctx, ["split"]):  # the folders of --faces/--nonfaces have no splits
        _usage("--split: selects a split of --data; give --data")


@app.command(
    epilog=exit_codes(
        "a face, non-face or --negatives image", "data file, folder or output path", "no --negatives image is usable"
    )
)
def train(
    ctx: typer.Context,
    out_path: Path = typer.Option(..., "--out", help="Model file to write (.npz)."),
    faces: Optional[Path] = typer.Option(None, help="Folder of face images (any size; resized to 19x19)."),
    nonfaces: Optional[Path] = typer.Option(None, help="Folder of non-face images (any size; resized to 19x19)."),
    data: Optional[Path] = typer.Option(
        None,
        help="Patch .npz (X_<split>, y_<split> or X, y; 1 = face), or a "
        "folder holding face/ and non-face/ (or <split>/face, ...).",
    ),
    split: str = typer.Option("train", help="Split to read from --data (the CBCL files have train and test)."),
    landmarks: Optional[Path] = typer.Option(
        None,
        help="More faces, cut from photos by their landmarks: a CSV "
        "with columns image, left_eye_x, left_eye_y, right_eye_x, "
        "right_eye_y, mouth_x, mouth_y (pixels; split: rows of "
        "--split only), as caltech_webfaces/landmarks.csv. Each "
        "face of at least 20 px gives its window as in the photo "
        "and one tilted by up to 20 degrees.",
    ),
    photos: Optional[Path] = typer.Option(
        None, help="Folder the --landmarks CSV's image names are in (default: images/ beside the CSV)."
    ),
    negatives: Optional[Path] = typer.Option(
        None,
        help="Folder of face-free images (subfolders included): random windows from them train the cascade prefilter.",
    ),
    classifier: str = typer.Option(
        "svc",
        help="svc: svmcore.SVC (--kernel ...) on Osuna-preprocessed pixels; "
        "pmsvm: additive-kernel svmcore.PmSVM (--p) scored by its lookup "
        "table in O(d) per window, on nonnegative features (hog).",
    ),
    features: Optional[str] = typer.Option(
        None, help="Window features: osuna (the default for svc; the only one it takes) or hog (the default for pmsvm)."
    ),
    p: float = typer.Option(
        -1.0, "--p", help="PmSVM power mean kernel: -1 chi-square, -8 ~ intersection, 0 Hellinger (pmsvm only)."
    ),
    kernel: str = typer.Option(
        "poly", help="SVM kernel: poly, rbf or linear (poly 2 and linear score fastest; svc only)."
    ),
    degree: int = typer.Option(2, help="Polynomial degree (svc, poly kernel)."),
    C: Optional[float] = typer.Option(
        None, "--C", help="SVM regularisation constant C > 0 (default 10 for svc, 1 for pmsvm)."
    ),
    gamma: str = typer.Option("auto", help="Kernel gamma: a number > 0, 'auto' (1/283) or 'scale' (svc only)."),
    coef0: float = typer.Option(1.0, help="Kernel coef0 (svc, poly kernel)."),
    tol: Optional[float] = typer.Option(
        None,
        help="Solver stopping tolerance: the KKT violation for svc (default "
        "1e-3), the spread of projected gradients for pmsvm (default "
        "0.1, LIBLINEAR's).",
    ),
    max_iter: Optional[int] = typer.Option(
        None,
        min=1,
        help="Solver iteration cap: SMO iterations for svc (default: none), epochs for pmsvm (default 3000).",
    ),
    mirror: bool = typer.Option(True, help="Add mirror images of the faces."),
    shifts: int = typer.Option(
        0,
        min=0,
        max=9,
        help="Add face copies shifted by 1 to this many pixels (0-9: a "
        "larger shift moves most of the face out of the 19x19 "
        "window); each pixel adds 4 copies (up, down, left, right) of "
        "every face and of its mirror image.",
    ),
    stride: int = typer.Option(
        2, help="Saved scanning default (not used in fitting): stride in pixels (1-19) per pyramid level."
    ),
    scale_factor: float = typer.Option(1.2, help="Saved scanning default: pyramid step >= 1.01."),
    refine: str = typer.Option(
        "0",
        help="Saved scanning default, coarse-to-fine: around every window scoring "
        "above this SVM value, also score stride 1 and the pyramid's half steps; "
        "'off': grid only.",
    ),
    threshold: float = typer.Option(
        0.0, help="Saved scanning default: SVM decision value above which a window is a face."
    ),
    max_pixels: int = _max_pixels_option(),
):
    """Train a detector on face and non-face patches."""
    from .detector import check_params
    from .training import KINDS, check_classifier_params, train_detector

    if classifier not in KINDS:
        _usage(f"--classifier: unknown value {classifier!r}; expected {' or '.join(KINDS)}")
    if kernel not in ("poly", "rbf", "linear"):  # windows are feature rows: a precomputed kernel cannot scan
        _usage(f"--kernel: unknown value {kernel!r}; expected poly, rbf or linear")
    features = features or KINDS[classifier].features[0]
    if features not in ("osuna", "hog"):
        _usage(f"--features: unknown value {features!r}; expected osuna or hog")
    if classifier == "svc" and features != "osuna":
        _usage(f"--features {features}: the svc classifier takes osuna features; use --classifier pmsvm")
    if classifier == "pmsvm" and features == "osuna":
        _usage("--features osuna: pmsvm needs nonnegative features (osuna windows are centred); use hog")
    # an option the chosen classifier does not take would be silently dropped: a mistyped command
    other = _typed(ctx, ["kernel", "degree", "gamma", "coef0"] if classifier == "pmsvm" else ["p"])
    if data is None and landmarks is None:
        _split_needs_data(ctx, data)
    if photos is not None and landmarks is None:
        _usage("--photos: the folder of the --landmarks photos; give --landmarks")
    if other:
        _usage(f"{', '.join(other)}: not an option of --classifier {classifier}")
    if _typed(ctx, ["max_pixels"]) and negatives is None and data is not None and data.is_file():
        _usage(f"--max-pixels: no image file is read (--data {data} holds the patches as arrays; no --negatives)")
    _check_output(out_path, "--out")
    _check_not_input(
        out_path,
        "--out",
        {
            "--data": data,
            "--faces": faces,
            "--nonfaces": nonfaces,
            "--negatives": negatives,
            "--landmarks": landmarks,
            "--photos": photos,
        },
    )
    scan_params = {"stride": stride, "scale_factor": scale_factor, "threshold": threshold, "refine": _refine(refine)}
    given = {k: v for k, v in (("C", C), ("tol", tol), ("max_iter", max_iter)) if v is not None}  # else the defaults
    if classifier == "svc":
        g = gamma if gamma in ("auto", "scale") else _number(gamma, "--gamma")
        clf_params = {"kernel": kernel, "degree": degree, "gamma": g, "coef0": coef0, **given}
    else:
        clf_params = {"p": p, **given}
    names = [*scan_params, *clf_params]
    try:  # the options by the library's own checks, before any data are read and the classifier fitted
        check_params(**scan_params)
        check_classifier_params(classifier, **clf_params)
    except (TypeError, ValueError) as exc:
        _usage(_as_options(exc, names))
    negative_files = _image_files(negatives, "--negatives") if negatives else []
    X, y, failed = _patches(faces, nonfaces, data, split, max_pixels, landmarks, photos)
    augmentation = {"mirror": mirror, "shifts": shifts}
    _notice_compiling()
    with _progress() as progress:
        neg, nfail = _negatives(negatives, negative_files, progress, max_pixels) if negatives else ([], 0)
        negative_images = [im for _, im in neg]
        task = progress.add_task(f"training {classifier}", total=None, info="")
        try:
            det, _, labels = train_detector(
                X,
                y,
                kind=classifier,
                features=features,
                negative_images=negative_images,
                augmentation=augmentation,
                callback=_svm_callback(progress, task),
                classifier_params=clf_params,
                **scan_params,
            )
        except (TypeError, ValueError) as exc:
            _usage(_as_options(exc, names))
    _write(det.save, out_path)
    clf = det.classifier
    size = (
        f"{clf.support_.size} support vectors"
        if classifier == "svc"
        else f"PmSVM p={clf.p}, lookup table {clf.coef_.shape[1]}x{clf.lut_bins}, {clf.n_iter_[0]} epochs"
    )
    faces_fit = int((labels == 1).sum())  # with the mirror images and shifted copies
    added = " and ".join(w for w, on in (("mirrors", mirror), ("shifts", shifts > 0)) if on)
    copies = f" ({faces_fit} with {added})" if faces_fit != int(y.sum()) else ""
    _print(
        f"trained on {int(y.sum())} faces{copies} and {int((labels != 1).sum())} non-faces ({features} "
        f"features): {size}; wrote {out_path}",
        markup=False,
        highlight=False,
    )
    _exit(failed or nfail)


_SCHEDULER_HELP = (
    "Run on the Dask cluster of this scheduler (tcp://host:8786; default: $DASK_SCHEDULER_ADDRESS), "
    "whose workers read the same paths; needs the dask extra."
)
_WORKERS_HELP = "Run on a local Dask cluster of this many processes (default: this process only); needs the dask extra."


def _client(scheduler, workers):
    """The Dask client of --scheduler/--workers (None: this process); a usage error if it cannot be had."""
    from .batch import connect

    try:
        return connect(scheduler, workers)
    except (ModuleNotFoundError, OSError, ValueError) as exc:
        _usage(f"--scheduler/--workers: {exc}")


_THREADS_HELP = (
    "Threads: pyramid levels scanned at once (default: $NUMBA_NUM_THREADS, else every core, at most "
    "4; each holds a level's arrays); the boxes do not depend on it."
)


def _number(text, name):
    try:
        return float(text)
    except ValueError:
        _usage(f"{name}: expected a number, got {text!r}")


def _refine(text):
    """--refine: a decision value, or 'off' (None: the grid only)."""
    return None if text.lower() == "off" else _number(text, "--refine")


@app.command(
    epilog=exit_codes(
        "a patch or --negatives image", "model, data file, folder or output path", "no --negatives image is usable"
    )
)
def bootstrap(
    ctx: typer.Context,
    model: Path = typer.Option(..., help="Trained model to start from."),
    negatives: Path = typer.Option(..., help="Folder of images that contain no face (subfolders included)."),
    rounds: int = typer.Option(2, min=1, help="Rounds of: scan negatives, add false positives, retrain."),
    out_path: Path = typer.Option(..., "--out", help="Model file to write."),
    faces: Optional[Path] = typer.Option(
        None,
        help="Face patch folder to retrain on (default: the model's support vectors; a PmSVM model needs patches).",
    ),
    nonfaces: Optional[Path] = typer.Option(None, help="Non-face patch folder (with --faces)."),
    data: Optional[Path] = typer.Option(None, help="Patch .npz or folder to retrain on instead of --faces/--nonfaces."),
    split: str = typer.Option("train", help="Split to read from --data."),
    max_per_image: int = typer.Option(300, min=1, help="At most this many false positives kept per image and round."),
    scheduler: Optional[str] = typer.Option(None, help=_SCHEDULER_HELP + " The negatives are scanned there."),
    workers: Optional[int] = typer.Option(None, min=1, help=_WORKERS_HELP),
    max_pixels: int = _max_pixels_option(),
):
    """Bootstrap: add the false positives on face-free images to the non-faces and retrain, N rounds."""
    from .bootstrap import bootstrap as run, keeps_training_rows
    from .training import training_set

    _split_needs_data(ctx, data)
    _check_output(out_path, "--out")
    _check_not_input(
        out_path,
        "--out",
        {"--model": model, "--data": data, "--faces": faces, "--nonfaces": nonfaces, "--negatives": negatives},
    )
    negative_files = _image_files(negatives, "--negatives")
    det = _load_detector(model)
    features = labels = None
    failed = 0
    if data is not None or faces is not None or nonfaces is not None:
        X, y, failed = _patches(faces, nonfaces, data, split, max_pixels)
        try:
            features, labels = training_set(X, y, features=det.features)
        except (TypeError, ValueError) as exc:
            _usage(str(exc))
    elif not keeps_training_rows(det.classifier):
        _usage(
            f"{model}: the model keeps no training rows (a PmSVM, or a reduced set as the shipped model); give "
            f"the patches to retrain on (--data, or --faces and --nonfaces)"
        )
    with _progress() as progress:
        neg, nfail = _negatives(negatives, negative_files, progress, max_pixels)
        scan_task = progress.add_task("scanning negatives", total=len(neg), info="")
        fit_task = progress.add_task("retraining SVM", total=None, info="", visible=False)
        rows = []

        def callback(info):
            if info.get("event") == "scan":
                progress.update(scan_task, completed=info["image"], info=f"round {len(rows)}")
            elif info.get("event") == "round":
                rows.append(info["round"])
                progress.update(scan_task, completed=0)
            elif "kkt_violation" in info:
                progress.update(
                    fit_task,
                    visible=True,
                    info=f"iteration {info['n_iter']}, KKT violation {info['kkt_violation']:.2e}",
                )

        client = _client(scheduler, workers)
        try:
            with client if client is not None else contextlib.nullcontext():
                det, _, _, table = run(
                    det,
                    [im for _, im in neg],
                    rounds,
                    features=features,
                    labels=labels,
                    max_per_image=max_per_image,
                    callback=callback,
                    client=client,
                )
        except (TypeError, ValueError) as exc:
            _usage(str(exc))
    _write(det.save, out_path)
    t = Table(title=f"bootstrapping on {len(neg)} negative images")
    for col in ("round", "non-face patches", "support vectors", "FP windows", "FP detections"):
        t.add_column(col, justify="right")
    for r in table:
        t.add_row(
            str(r.round),
            str(r.n_nonfaces),
            str(r.n_support) if hasattr(det.classifier, "support_") else "-",
            str(r.fp_windows),
            str(r.fp_detections),
        )
    _print(t)
    _print(f"wrote {out_path}", markup=False, highlight=False)
    _exit(failed or nfail)


@app.command(epilog=exit_codes("an image", "model, folder or --out path"))
def detect(
    images: Optional[List[Path]] = typer.Argument(
        None,
        readable=False,
        metavar="IMAGE",
        help="Image files (PNG, JPEG, TIFF, ...; colour, grey, 16-bit or "
        "alpha), video files, folders (every image file in them, "
        "subfolders included), patterns ('photos/**/*.jpg', quoted), "
        "URLs (s3://..., with fsspec), or - for one image file on "
        "standard input.",
    ),
    from_list: Optional[Path] = typer.Option(
        None, "--from-list", help="Also read the files named in this text file, one path or URL a line."
    ),
    model: Optional[Path] = typer.Option(
        None, help="Model file (default: facedet/models/default_detector.npz, or $FACEDET_MODEL)."
    ),
    out_path: Optional[Path] = typer.Option(
        None,
        "--out",
        help="Write annotated images (boxes in green): a folder "
        "(one <name>.faces.png per image, <name>.faces.mp4 per video; -2, -3 "
        "added when names repeat), or a file name (.png, .jpg, ...; .mp4, "
        ".avi, ... for a video) for a single input.",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print JSON: [{image, width, height, faces: "
        "[{x, y, w, h, score, confidence}]}], whole pixels of the "
        "original image (a face at the border can extend past "
        "it), score and confidence (0-1, calibrated models only) "
        "to 4 decimals; with --out also 'annotated', the image "
        "written. An image that fails is listed as {image, error} "
        "(also reported on stderr; the exit code is 1).",
    ),
    jsonl: Optional[str] = typer.Option(
        None,
        "--jsonl",
        metavar="OUT",
        help="Write one JSON record a line to OUT (- for standard output) as each "
        "image finishes, in any order: the records of --json, failed files "
        "with 'error'. OUT must not exist unless --resume or --overwrite.",
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="With --jsonl: skip the images OUT already has a record "
        "of, and append the others (a killed run goes on where "
        "it stopped).",
    ),
    scheduler: Optional[str] = typer.Option(None, help=_SCHEDULER_HELP),
    workers: Optional[int] = typer.Option(None, min=1, help=_WORKERS_HELP),
    threshold: Optional[float] = typer.Option(
        None,
        help="SVM decision value above which a window is a face (default: the model's; higher: fewer, surer faces).",
    ),
    min_confidence: Optional[float] = typer.Option(
        None,
        min=0.0,
        max=1.0,
        help="Keep faces of at least this confidence, 0-1: the fraction "
        "of detections of that score that were faces on the "
        "model's calibration photos (needs a calibrated model).",
    ),
    min_size: Optional[float] = typer.Option(
        None,
        help="Smallest face side in pixels (default: the model's). "
        "Smaller values act as the smallest face a 19x19 window "
        "upsampled 4x covers (6.2 px for the shipped model).",
    ),
    max_size: Optional[float] = typer.Option(
        None,
        help="Largest face side in pixels (default: the model's, "
        "usually the whole image; smaller: fewer scales, faster).",
    ),
    min_neighbors: Optional[int] = typer.Option(
        None, help="Drop detections merged from fewer windows, >= 1 (default: the model's)."
    ),
    scale_factor: Optional[float] = typer.Option(
        None, help="Pyramid step >= 1.01 (default: the model's; smaller: more scales, slower)."
    ),
    stride: Optional[int] = typer.Option(
        None, help="Window step in pixels (1-19) at each pyramid level (default: the model's)."
    ),
    refine: Optional[str] = typer.Option(
        None,
        help="Coarse-to-fine: around every window scoring above this SVM "
        "value, also score stride 1 and the pyramid's half steps; "
        "'off': the grid only (default: the model's).",
    ),
    every: int = typer.Option(1, min=1, help="Videos: search every N-th frame (1: all; the records say which)."),
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        help="Replace annotated images that exist already (default: refuse, so that runs never replace one another's).",
    ),
    labels: bool = typer.Option(
        True,
        "--labels/--no-labels",
        help="Annotated images: write each face's confidence (or score, for an uncalibrated model) above its box.",
    ),
    threads: Optional[int] = typer.Option(None, min=1, help=_THREADS_HELP),
    max_pixels: int = _max_pixels_option(),
):
    """Find faces in images and videos: a table (or --json) of boxes in pixels, and annotated images (videos) with
    --out. A video file (.mp4, .mov, .avi, .mkv, .webm, ...) gives one record per frame searched, with its
    "frame" index and "time" in seconds."""
    import time

    from .batch import ANNOTATED, detect_files, done_images, expand_inputs
    from .detector import default_model_path
    from .evaluate import plural

    if resume and (jsonl is None or jsonl == "-"):
        _usage("--resume: give the --jsonl file to resume")
    if jsonl is not None and as_json:
        _usage("--json and --jsonl: choose one")
    det = _load_detector(model)
    try:
        names = expand_inputs([str(p) for p in images or []], from_list)
    except (OSError, ValueError) as exc:
        _usage(f"--from-list: {exc}" if from_list is not None and str(from_list) in str(exc) else str(exc))
    # our earlier annotated outputs in the --out folder (which may be the photos' folder itself, or inside it)
    # are not inputs
    skip = _real(out_path) if out_path is not None else None
    names = [n for n in names if not (skip is not None and n.endswith(ANNOTATED) and skip in _real(n).parents)]
    if not names:
        _usage("no image files given" if not images and from_list is None else "no image files in the given inputs")
    overrides = {
        k: v
        for k, v in (
            ("threshold", threshold),
            ("min_size", min_size),
            ("max_size", max_size),
            ("min_neighbors", min_neighbors),
            ("scale_factor", scale_factor),
            ("stride", stride),
        )
        if v is not None
    }
    if refine is not None:
        overrides["refine"] = _refine(refine)
    if overrides:
        try:
            det = det.with_params(**overrides)
        except (TypeError, ValueError) as exc:
            _usage(_as_options(exc, [*overrides, "min_size"]))  # (the model's min_size bounds --max-size)
    if min_confidence is not None and det.platt is None:
        _usage("--min-confidence: the model has no confidence calibration (facedet calibrate); use --threshold")
    local = [Path(n) for n in names if "://" not in n]  # (URLs are no files here to protect)
    targets = _annotation_targets([Path(n) for n in names], out_path)
    _check_not_input(targets, "--out", {"IMAGE": local, "--model": model})
    existing = [t for t in targets if t is not None and os.path.lexists(t)]
    if existing and not overwrite and not resume:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        _usage(f"--out: {existing[0]}{more} exists; --overwrite replaces annotated images, or give another --out")
    jobs = list(zip(names, targets, strict=True))
    sink = None
    if jsonl is not None and jsonl != "-":
        _check_not_input(Path(jsonl), "--jsonl", {"IMAGE": local, "--model": model})
        if not resume and os.path.lexists(jsonl) and not overwrite:
            _usage(f"--jsonl {jsonl}: exists; --resume appends the images it lacks, --overwrite starts it again")
        try:
            done = done_images(jsonl) if resume else set()
        except (OSError, ValueError) as exc:
            _usage(f"--jsonl: {exc}")
        jobs = [(n, t) for n, t in jobs if n not in done]
        try:
            sink = open(jsonl, "a" if resume else "w", encoding="utf-8")
        except OSError as exc:
            _usage(f"--jsonl {jsonl}: {exc.strerror or exc}")
    client = _client(scheduler, workers)
    options = {
        "every": every,
        "max_pixels": max_pixels,
        "min_confidence": min_confidence,
        "labels": labels,
        "overwrite": overwrite or resume,
        "raised_by": "--max-pixels",
        "threads": threads if threads is not None or client is None else 1,
    }
    results, failed, n_images, start = [], 0, 0, time.perf_counter()
    try:
        with contextlib.ExitStack() as stack:
            if sink is not None:
                stack.enter_context(sink)
            if client is not None:
                stack.enter_context(client)
            with _progress() as progress:
                task = progress.add_task("detecting", total=len(jobs), info="")
                for records, failures in detect_files(
                    det, jobs, client=client, model=model or default_model_path(), params=overrides, **options
                ):
                    for message in failures:
                        _report("failed", message)
                    failed += len(failures)
                    n_images += 1
                    lines = "".join(json.dumps(r) + "\n" for r in records)
                    if sink is not None:  # one write a file: a kill leaves whole records and at most one cut
                        sink.write(lines)
                        sink.flush()
                    elif jsonl == "-":
                        _print(lines, raw=True)
                    else:
                        results += records
                    rate = n_images / max(time.perf_counter() - start, 1e-9)
                    progress.update(task, advance=1, info=f"{failed} failed, {rate:.1f} images/s")
    except OSError as exc:  # the --jsonl file could not take a record (disk full)
        _report("error:", f"cannot write {jsonl}: {exc.strerror or exc}")
        raise typer.Exit(1) from None
    if jsonl is not None:
        if sink is not None:
            seconds = time.perf_counter() - start
            err.print(
                Text(
                    f"{plural(n_images, 'file')} ({failed} failed) in {seconds:.1f} s, "
                    f"{n_images / max(seconds, 1e-9):.1f} a second; wrote {jsonl}"
                )
            )
    elif as_json:
        _print(json.dumps(results, indent=2) + "\n", raw=True)
    else:
        t = Table(title="faces")
        t.add_column("image", overflow="fold")
        for col in ("size", "faces", "boxes x,y,w,h (score, confidence)"):
            t.add_column(col)
        for r in (r for r in results if "error" not in r):  # (failed files: on stderr)
            name = r["image"] + (f" frame {r['frame']}" if "frame" in r else "")
            t.add_row(
                Text(name),
                f"{r['width']}x{r['height']}",
                str(len(r["faces"])),
                "\n".join(
                    f"{f['x']},{f['y']},{f['w']},{f['h']} ({f['score']:.2f}"
                    + (f", {f['confidence']:.0%})" if "confidence" in f else ")")
                    for f in r["faces"]
                ),
            )
        _print(t)
        for written in dict.fromkeys(r["annotated"] for r in results if "annotated" in r):
            _print(f"wrote {written}", markup=False, highlight=False)
    _exit(failed)


def _annotated_set(images, annotations, split, model, max_pixels):
    """(annotations by image name, a reader of those images, detector) for evaluate and calibrate; usage errors
    for a bad CSV, folder or model. The reader raises ImageError for an image that is unreadable, of more than
    ``max_pixels`` pixels or not of the size its boxes were drawn at (the CSV's img_width, img_height)."""
    from .evaluate import read_annotations, read_image_sizes
    from .imageio import ImageError, read_grey

    try:
        ann = read_annotations(annotations, split=split)
        sizes = read_image_sizes(annotations, split=split)
    except OSError as exc:
        _usage(f"--annotations {annotations}: {exc.strerror or exc}")
    except ValueError as exc:
        _usage(str(exc))
    if not images.is_dir():
        _usage(f"not a folder: {images}")

    def read(name):
        grey = read_grey(images / name, max_pixels=max_pixels)
        size = (grey.shape[1], grey.shape[0])
        if sizes.get(name, size) != size:
            raise ImageError(
                f"{images / name}: {size[0]}x{size[1]} pixels, but annotated at "
                f"{sizes[name][0]}x{sizes[name][1]} (img_width, img_height of --annotations): its boxes "
                f"would not match"
            )
        return grey

    return ann, read, _load_detector(model)


def _unlisted_images(images, annotations):
    """The image files in the folder ``images`` (subfolders included) that the CSV ``annotations`` lists under no
    split, as names relative to the folder: evaluate counts them as face-free. The annotated copies detect --out
    writes (<stem>.faces.png) are not among them: they show the faces of other images."""
    from .batch import ANNOTATED
    from .evaluate import listed_images
    from .patches import image_files

    try:
        listed = listed_images(annotations)
    except (OSError, ValueError) as exc:  # (read_annotations has read the file by now; kept as a usage error)
        _usage(f"--annotations {annotations}: {getattr(exc, 'strerror', None) or exc}")
    names = (os.path.normpath(os.path.relpath(p, images)) for p in image_files(images, recursive=True))
    return [n for n in names if n not in listed and not n.endswith(ANNOTATED)]


def _fp_points(text):
    """The counts of --fp-points ("10,31,50"): whole numbers >= 0, in the order given; a usage error otherwise."""
    parts = [t.strip() for t in text.split(",")]
    if not all(t.isascii() and t.isdigit() for t in parts):
        _usage(f"--fp-points: expected whole numbers >= 0 separated by commas (e.g. 10,31,50), got {text!r}")
    return [int(t) for t in parts]


def _inside(path, folder):
    """Whether ``path`` (existing or not) lies in ``folder`` or one of its subfolders."""
    folder = _real(folder)
    return folder in _real(path).parents


def _annotation_targets(images, out_path):
    """The annotated-image path of each input (None without --out). An --out with an image suffix is one
    file (usage error if several images are given, or if Pillow cannot write that format); otherwise a folder
    of <stem>.faces.png, with -2, -3, ... where stems repeat, so that no output overwrites another."""
    from PIL import Image

    from .batch import ANNOTATED
    from .imageio import VIDEO_SUFFIXES, is_video

    if out_path is None:
        return [None] * len(images)
    image_suffixes = Image.registered_extensions()
    if out_path.suffix.lower() in VIDEO_SUFFIXES and not out_path.is_dir():
        if len(images) != 1 or not is_video(images[0]):
            _usage(f"--out {out_path} names one video file: give one video (or a folder for several inputs)")
        _check_output(out_path, "--out")
        return [out_path]
    if any(map(is_video, images)) and out_path.suffix.lower() in image_suffixes and not out_path.is_dir():
        _usage(f"--out {out_path}: an image file, for a video; give a video file (.mp4, .avi) or a folder")
    if out_path.suffix.lower() in image_suffixes and not out_path.is_dir():
        fmt = image_suffixes[out_path.suffix.lower()]
        try:  # some formats Pillow writes take no colour (XBM: 1-bit only)
            Image.new("RGB", (1, 1)).save(io.BytesIO(), format=fmt)
        except (OSError, ValueError, KeyError):
            _usage(f"--out {out_path}: cannot write colour {fmt} images; use .png or .jpg")
        if len(images) > 1:
            _usage(f"--out {out_path} names one file, but {len(images)} images were given; give a folder")
        _check_output(out_path, "--out")
        return [out_path]
    if out_path.exists() and not out_path.is_dir():
        _usage(f"--out {out_path}: exists and is not a folder")
    if out_path.suffix and not out_path.exists():  # out.txt is more likely a wrong file name than a new folder
        _usage(
            f"--out {out_path}: {out_path.suffix} is not an image format that can be written; give an image "
            "file (.png, .jpg, ...) or a folder (an existing one, or a name without a suffix)"
        )
    ancestor = next(p for p in (out_path, *out_path.parents) if p.exists())
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        _usage(
            f"--out {out_path}: "
            + ("folder is not writable" if ancestor == out_path else f"cannot create a folder under {ancestor}")
        )
    targets, used = [], set()
    for path in images:
        suffix = ".faces.mp4" if is_video(path) else ANNOTATED
        stem = "stdin" if str(path) == "-" else path.stem
        name, n = f"{stem}{suffix}", 1
        while name in used:
            n += 1
            name = f"{stem}-{n}{suffix}"
        used.add(name)
        targets.append(out_path / name)
    return targets


@app.command(
    epilog=exit_codes(
        "an annotated image", "model, folder, CSV, --fp-points, --plot or --roc path", "no annotated image can be read"
    )
)
def evaluate(
    images: Path = typer.Option(
        ...,
        help="Folder holding the annotated images. Image files in it (subfolders "
        "included) that the CSV does not list, under any split, are evaluated "
        "as images without faces: every detection on them is a false positive "
        "(the annotated copies detect --out writes, *.faces.png, excepted).",
    ),
    annotations: Path = typer.Option(
        ...,
        help="CSV with a header row and columns "
        "image,x,y,w,h[,ignore][,split][,img_width,img_height]: image names "
        "relative to --images; x, y the top-left corner and w, h the size of a "
        "face box in pixels; ignore 0/1 (true/false, yes/no): a face that "
        "counts neither as hit nor miss; empty x,y,w,h: an image without "
        "faces; img_width, img_height: the image's size when annotated (an "
        "image of another size fails).",
    ),
    model: Optional[Path] = typer.Option(
        None, help="Model file (default: facedet/models/default_detector.npz, or $FACEDET_MODEL)."
    ),
    split: Optional[str] = typer.Option(
        None,
        help="Evaluate only rows of this split (e.g. test); the images the "
        "CSV does not list are evaluated with every split.",
    ),
    threshold: Optional[float] = typer.Option(
        None,
        help="SVM decision value above which a window is a face "
        "(default: the model's). Lower, it takes the ROC and "
        "--fp-points past the model's operating point; every "
        "figure is then that of this threshold.",
    ),
    fp_points: str = typer.Option(
        "10,31,50,65,78,95,167",
        help="Also print the detection rate reached with at most "
        "each of these numbers of false positives over all "
        "the images, the threshold swept over the pooled "
        "detection scores (the default: the points of "
        "Viola and Jones' MIT+CMU table).",
    ),
    plot: Optional[Path] = typer.Option(
        None,
        help="Write the precision-recall curve here, in the format of its "
        "suffix (.png, .pdf, .svg, .jpg, ...). Default: "
        "precision_recall.png in the current folder, skipped with a "
        "note if that is not writable or is inside --images.",
    ),
    roc: Optional[Path] = typer.Option(
        None,
        help="Write the ROC here (detection rate against the number of false "
        "positives over all the images, --fp-points marked), in the "
        "format of its suffix as for --plot.",
    ),
    iou: float = typer.Option(0.5, help="Intersection over union, in (0, 1], for a detection to match a face."),
    threads: Optional[int] = typer.Option(None, min=1, help=_THREADS_HELP),
    max_pixels: int = _max_pixels_option(),
):
    """Detection rate, false positives and average precision on annotated images, and the detection rate at
    given numbers of false positives (the ROC)."""
    import numpy as np

    from .evaluate import (
        detection_rate_at_fp,
        evaluate_detections,
        plot_format,
        plot_precision_recall,
        plot_roc,
        plural,
        rate,
    )
    from .imageio import ImageError
    from .patches import IMAGE_SUFFIXES

    if not 0 < iou <= 1:
        _usage(f"--iou: must be in (0, 1], got {iou}")
    points = _fp_points(fp_points)
    for path, option in ((plot, "--plot"), (roc, "--roc")):
        if path is not None:
            _check_output(path, option)
            _check_not_input(path, option, {"--annotations": annotations, "--model": model})
            try:
                plot_format(path)
            except (ValueError, ModuleNotFoundError) as exc:
                _usage(f"{option} {exc}")
    if plot is not None and roc is not None and _real(plot) == _real(roc):
        _usage(f"--roc {roc}: is the --plot file too; give two names")
    no_plot, default_plot = None, plot is None  # (why the default plot is not written)
    if default_plot:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            no_plot = "matplotlib is not installed (pip install 'facedet-svm[plot]')"
        elif not os.access(".", os.W_OK | os.X_OK):
            no_plot = "the current folder is not writable (give --plot PATH)"
        else:
            plot = Path("precision_recall.png")
    ann, read, det = _annotated_set(images, annotations, split, model, max_pixels)
    if threshold is not None:
        try:
            det = det.with_params(threshold=threshold)
        except (TypeError, ValueError) as exc:
            _usage(_as_options(exc, ["threshold"]))
    unlisted = _unlisted_images(images, annotations)
    ann = {**ann, **{name: (np.zeros((0, 4)), np.zeros(0, bool)) for name in unlisted}}
    if default_plot and plot is not None and _inside(plot, images):  # the next run would read it as an image
        plot, no_plot = None, "the current folder is inside --images (give --plot PATH)"
    for path, option in ((plot, "--plot"), (roc, "--roc")):
        if path is not None:
            _check_not_input(path, option, {"--images": [images / name for name in ann]})
            if path.suffix.lower() in IMAGE_SUFFIXES and _inside(path, images):
                _usage(
                    f"{option} {path}: is inside the --images folder, where the next evaluate would read it as "
                    "an image without faces; write it elsewhere"
                )
    dets, failed = {}, 0
    with _progress() as progress:
        task = progress.add_task("detecting", total=len(ann), info="")
        for name in ann:
            try:
                dets[name] = det.detect(read(name), threads=threads)
            except (ImageError, ValueError) as exc:
                _report("failed", _image_error(exc) if isinstance(exc, ImageError) else f"{name}: {exc}")
                failed += 1
            progress.advance(task)
    lost = sum(int((~ignore).sum()) for name, (_, ignore) in ann.items() if name not in dets)
    ann = {k: v for k, v in ann.items() if k in dets}
    if not ann:
        _usage("no annotated image could be read")
    try:
        res = evaluate_detections(dets, ann, iou_threshold=iou)
    except ValueError as exc:
        _usage(f"--annotations {annotations}: {exc}")
    # the figures cover the images read; say so where some failed, rather than let them vanish
    skipped = f"; {plural(failed, 'unreadable image')} with {plural(lost, 'face')} left out" if failed else ""
    n_free = sum(name in dets for name in unlisted)
    free = f" ({n_free} not in the CSV: without faces)" if n_free else ""
    t = Table(
        title=Text(
            f"{annotations.name}{f' ({split})' if split else ''}: {plural(res.n_images, 'image')}"
            f"{free}, {plural(res.n_truth, 'face')}{skipped}"
        )
    )
    for col in ("detection rate", "false positives", "average precision"):
        t.add_column(col, justify="right")
    t.add_row(rate(res.detection_rate), str(res.false_positives), rate(res.average_precision))
    _print(t)
    at_fp = detection_rate_at_fp(res, points)
    t = Table(title=Text(f"detection rate at a number of false positives over the {plural(res.n_images, 'image')}"))
    for k in points:
        t.add_column(f"{k}", justify="right")
    t.add_row(*(rate(r) for r in at_fp))
    _print(t)
    if points and max(points) > res.false_positives:
        _report(
            "note:",
            f"the detections end at {plural(res.false_positives, 'false positive')} (the detector's "
            f"threshold); at more, the rate is that of all of them (a lower --threshold goes further)",
        )
    if plot is None:
        _report("note:", f"no precision-recall plot: {no_plot}")
    else:
        _write(lambda path: plot_precision_recall(res, path), plot)
        _print(f"wrote {plot}", markup=False, highlight=False)
    if roc is not None:
        _write(lambda path: plot_roc(res, path, fp_points=points), roc)
        _print(f"wrote {roc}", markup=False, highlight=False)
    _exit(failed)


@app.command(
    epilog=exit_codes(
        "an annotated or --negatives image",
        "model, folder, CSV or output path",
        "no readable image has a face, or no --negatives image is usable",
    )
)
def calibrate(
    model: Path = typer.Option(..., help="Trained model to calibrate (e.g. from facedet train or bootstrap)."),
    images: Path = typer.Option(
        ..., help="Folder holding annotated training images (not the ones you will evaluate on)."
    ),
    annotations: Path = typer.Option(
        ...,
        help="CSV as for evaluate: "
        "image,x,y,w,h[,ignore][,split][,img_width,img_height]; faces flagged "
        "ignore are left out.",
    ),
    out_path: Path = typer.Option(..., "--out", help="Model file to write."),
    split: Optional[str] = typer.Option(None, help="Use only rows of this split (e.g. train)."),
    negatives: Optional[Path] = typer.Option(
        None,
        help="Folder of face-free images (subfolders included): their "
        "detections count as false positives when choosing the "
        "operating point (so not with --box-only).",
    ),
    operating_point: bool = typer.Option(
        True,
        "--operating-point/--box-only",
        help="Also choose the threshold (-1 to 3, step 0.1) and min_neighbors (1-3) "
        "that maximise F1 on these images, and fit the scores' confidence "
        "(Platt's sigmoid) on their detections; --box-only keeps the "
        "model's.",
    ),
    reliability: Optional[Path] = typer.Option(
        None,
        help="Also draw the confidence's reliability diagram on "
        "these images (the fraction of detections that are "
        "faces per confidence bin) to this image file (.png, "
        ".svg, .pdf; needs matplotlib).",
    ),
    max_pixels: int = _max_pixels_option(),
):
    """Fit a model's window-to-box map to the annotations' box convention (and its operating point and confidence).

    A window of side s at (x, y) becomes the box of side scale*s centred at (x + s/2 + dx*s, y + s/2 + dy*s);
    (dx, dy, scale) is the median over the annotated faces of the map from each face's best window to its box.
    Models from train and bootstrap have (0, 0, 1), the raw 19x19 window (eyebrows to mouth)."""
    import numpy as np

    from .calibration import calibrate_box, calibrate_confidence, choose_threshold, scan_items
    from .evaluate import plot_format, plot_reliability, plural
    from .imageio import ImageError

    if negatives is not None and not operating_point:  # they only count in choosing the operating point
        _usage("--negatives: not used with --box-only (it keeps the model's operating point)")
    if reliability is not None:
        if not operating_point:
            _usage("--reliability: --box-only fits no confidence")
        try:
            plot_format(reliability)
        except (ValueError, ModuleNotFoundError) as exc:
            _usage(f"--reliability: {exc}")
        _check_output(reliability, "--reliability")
    _check_output(out_path, "--out")
    negative_files = _image_files(negatives, "--negatives") if negatives else []
    ann, read, det = _annotated_set(images, annotations, split, model, max_pixels)
    for path, option in ((out_path, "--out"), (reliability, "--reliability")):
        _check_not_input(
            path,
            option,
            {
                "--model": model,
                "--annotations": annotations,
                "--negatives": negatives,
                "--images": [images / name for name in ann],
            },
        )
    items, failed = [], 0
    with _progress() as progress:
        task = progress.add_task("reading images", total=len(ann), info="")
        for name, (boxes, ignore) in ann.items():
            progress.advance(task)
            try:
                items.append((read(name), boxes[~ignore]))
            except ImageError as exc:
                _report("failed", _image_error(exc))
                failed += 1
        neg, nfail = _negatives(negatives, negative_files, progress, max_pixels) if negatives else ([], 0)
        if not any(len(boxes) for _, boxes in items):
            _usage(f"{annotations}: no face to calibrate on in the readable images (faces flagged ignore are left out)")
        progress.add_task("calibrating", total=None, info="")
        try:
            det, n_faces = calibrate_box(det, [item for item in items if len(item[1])])
            if operating_point:
                items += [(g, np.zeros((0, 4))) for _, g in neg]
                windows = scan_items(det, items, -1.0)  # one scan for both
                det, _ = choose_threshold(
                    det, items, candidates=np.round(np.arange(-1.0, 3.01, 0.1), 2), neighbors=(1, 2, 3), windows=windows
                )
        except ValueError as exc:
            _usage(str(exc))
        if operating_point:  # down to the lowest threshold tried: users may lower --threshold that far
            try:
                det, scores, is_face = calibrate_confidence(det, items, threshold=-1.0, windows=windows)
            except ValueError as exc:
                _report("warning:", f"no confidence calibration: {exc}")
    _write(det.save, out_path)
    if reliability is not None and det.platt is not None:
        _write(lambda path: plot_reliability(det.confidence(scores), is_face, path), reliability)
    dx, dy, scale = det.box
    _print(
        f"box map from {plural(n_faces, 'face')}: dx={dx:+.3f} dy={dy:+.3f} scale={scale:.3f}; threshold "
        f"{det.threshold:+.2f}, min_neighbors {det.min_neighbors}; wrote {out_path}",
        markup=False,
        highlight=False,
    )
    _exit(failed or nfail)


@app.command(epilog=exit_codes(failed="(no input files)", unusable="model"))
def warmup(
    estimators: bool = typer.Option(
        False,
        "--estimators",
        help="Also svmcore's estimators (SVC, OneClassSVM, "
        "PmSVM, TopKSVM, SVM+: what train and bootstrap "
        "use), about ten times longer.",
    ),
):
    """Compile the detector's machine code into numba's cache (NUMBA_CACHE_DIR, else beside the package), once,
    so that the first detect of a fresh install, container or cluster worker starts without compiling."""
    from .api import warmup as run

    _load_detector(None, notice=False)  # a missing or corrupt default model: exit 2 with the loader's message
    with _progress() as progress:
        progress.add_task("compiling", total=None, info="")
        seconds = run(estimators=estimators)
    _print(f"compiled in {seconds:.1f} s", markup=False, highlight=False)
    _exit(0)


def main(prog_name="facedet"):
    """Run the ``facedet`` command (typer app). The installed script enters through
    :func:`facedet.__main__.main`, which handles Ctrl-C (exit 130)."""
    # a solver's RuntimeWarning (e.g. max_iter reached) as one line, not Python's source excerpt
    warnings.formatwarning = lambda message, category, *args, **kwargs: f"warning: {message}\n"
    app(prog_name=prog_name)
