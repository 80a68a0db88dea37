"""What every command shares: the typer app, the consoles, exit codes, option checks, output, progress, and the
readers of images, patches and annotated sets. Argument handling only; the work is the library's.
"""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from .. import _interrupt


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


def report(label, message):
    err.print(Text.assemble((label, "red"), " ", str(message)))


def usage_error(message):
    report("error:", message)
    raise typer.Exit(2)


def as_options(exc, names):
    """The library's error message with its parameter names as the options the user typed (scale_factor: ->
    --scale-factor:, min_size (20) -> --min-size (20))."""
    message = str(exc)
    for name in names:  # whole words only: "C:" must not turn "SVC:" into "SV--C:"
        message = re.sub(rf"(?<![\w-]){re.escape(name)}(?=:| \()", f"--{name.replace('_', '-')}", message)
    return message


def check_output(path: Path, option: str):
    """Fail early (exit 2) if ``path`` cannot be written: a missing or non-folder parent, or a folder as
    the target, so that no long run ends in a failed write."""
    if path.is_dir():
        usage_error(f"{option} {path}: is a folder; give a file name")
    parent = path.parent
    if not parent.is_dir():
        usage_error(f"{option} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        usage_error(f"{option} {path}: folder {parent} is not writable")


def real_path(path) -> Path:
    """The absolute path with symlinks resolved as far as they go: ``Path.resolve()`` raises RuntimeError on a
    symlink loop (Python 3.11), a traceback where the loop is just a file that cannot be read."""
    return Path(os.path.realpath(path))


def check_not_input(paths, option: str, inputs: dict):
    """Usage error (exit 2) if writing a path of ``paths`` (one or a list; None entries skipped) would replace an
    input, or put a file of an image suffix into an input folder. ``inputs`` maps an option to the file or folder
    it names, or to a list of files (None: not given); the image files in a folder are its inputs."""
    from ..patches import IMAGE_SUFFIXES

    files, folders = {}, {}
    for name, given in inputs.items():
        for source in [] if given is None else given if isinstance(given, list) else [given]:
            source = real_path(source)  # a symlink to an input is the input
            files[source] = name
            if os.path.isdir(source):  # (os.path: False for a name too long, where Path.is_dir raises)
                folders[source] = name
    for path in paths if isinstance(paths, list) else [paths]:
        target = None if path is None else real_path(path)
        if target in files:
            usage_error(f"{option} {path}: is the {files[target]} input; it would be overwritten")
        if target is not None and target.suffix.lower() in IMAGE_SUFFIXES:
            name = next((folders[p] for p in target.parents if p in folders), None)
            if name is not None:  # (a new file there would be read as an image of that input later)
                usage_error(
                    f"{option} {path}: is an image in the {name} input; it would be overwritten"
                    if os.path.isfile(target)
                    else f"{option} {path}: is inside the {name} input folder, "
                    "where it would be read as an image; write it elsewhere"
                )


_stdout = {"lost": False}  # set when standard output could not take a command's results


def emit(*objects, **kwargs):
    """``out.print``, or for a str with ``raw=True`` a plain write (the --json document). Standard output that
    cannot take it (a full disk, a closed pipe) is one line on stderr and exit 1 at the end (:func:`exit_with`),
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
            report("error:", f"cannot write to standard output: {exc.strerror or exc}")
        try:  # what is left in the buffer goes nowhere, so that Python's flush at exit does not fail again
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass


def _version(value: bool):
    if value:
        from .. import __version__

        emit(f"facedet {__version__}", markup=False, highlight=False)
        raise typer.Exit(0)


@app.callback()
def _start(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
):
    # each run (or CliRunner invocation in one process) starts with a working standard output
    _stdout["lost"] = False


def exit_with(failed):
    """End a command: exit 1 if an input failed or an output (standard output included) was not written."""
    _interrupt.check()
    _interrupt.finish()  # (a Ctrl-C after the last output is not an interruption)
    raise typer.Exit(1 if failed or _stdout["lost"] else 0)


def write_output(save, path):
    """Run ``save(path)``; an OSError (disk full, ...) is reported with the user's path, exit 1."""
    _interrupt.check()
    try:
        save(path)
    except OSError as exc:
        report("error:", f"cannot write {path}: {exc.strerror or exc}")
        raise typer.Exit(1) from exc


_notice = {}  # "listener": the registered one


def notice_compiling():
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


def load_detector(model: Optional[Path], notice=True):
    from ..detector import Detector, default_model_path

    if notice:
        notice_compiling()

    path = model or default_model_path()
    try:
        return Detector.load(path)
    except (FileNotFoundError, ValueError) as exc:
        usage_error(f"cannot load model: {exc}")


class _Progress(Progress):
    """rich's Progress whose every update is a point where a swallowed Ctrl-C stops the command."""

    def update(self, *args, **kwargs):
        _interrupt.check()
        super().update(*args, **kwargs)

    def advance(self, *args, **kwargs):
        _interrupt.check()
        super().advance(*args, **kwargs)


def progress_bar():
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


def svm_progress(progress, task):
    def callback(info):
        if "kkt_violation" in info:
            progress.update(task, info=f"iteration {info['n_iter']}, KKT violation {info['kkt_violation']:.2e}")

    return callback


DEFAULT_MAX_PIXELS = (
    50_000_000  # facedet.imageio.MAX_PIXELS (tested equal), written out: --help loads no Pillow or numpy
)

MAX_PIXELS_HELP = (
    "Largest image read, in pixels (width x height; default 50,000,000). Each file's size is read from its header "
    "and a larger image is refused before decoding: a small file can claim a huge size and exhaust memory (a "
    "decompression bomb). Raise it for larger photos (61- or 102-MP cameras, a phone's 108- or 200-MP mode) where "
    "the memory is there: finding the faces in a photo peaks at about 23-25 bytes a pixel, 1.5 GB at 60 MP, 2.8 GB "
    "at 120 MP, 4.5 GB at 200 MP (measured with 1 and 2 threads alike), and train, bootstrap and calibrate keep "
    "every image they read, 1 byte a pixel. Above 178,956,970 Pillow's own limit is raised too, for these reads "
    "only."
)


def max_pixels_option():
    """--max-pixels: one definition for every command that reads image files."""
    return typer.Option(DEFAULT_MAX_PIXELS, "--max-pixels", min=1, show_default=False, help=MAX_PIXELS_HELP)


def image_error(exc):
    """The message of an ImageError for the command line: a refusal over the pixel limit names --max-pixels
    (where the library's message names its max_pixels= argument)."""
    from ..imageio import ImageTooLarge

    return exc.message("--max-pixels") if isinstance(exc, ImageTooLarge) else str(exc)


def list_images(folder: Path, option: str):
    from ..patches import image_files

    try:
        return image_files(folder, recursive=True)
    except ValueError as exc:
        usage_error(f"{option}: {exc}")


def _read_images(paths, progress, description, max_pixels):
    """(name, grey) of readable images of at most ``max_pixels`` pixels and at least one window large; bad files
    reported (images smaller than a window only noted: valid, but without a window to learn from). Returns
    (images, n_failed)."""
    from ..imageio import ImageError, read_grey
    from ..preprocess import WINDOW

    images, failed = [], 0
    task = progress.add_task(description, total=len(paths), info="")
    for p in paths:
        try:
            grey = read_grey(p, max_pixels=max_pixels)
            if min(grey.shape) < WINDOW:
                report(
                    "note:",
                    f"{p}: {grey.shape[1]}x{grey.shape[0]} is smaller than the {WINDOW}x{WINDOW} window; not used",
                )
            else:
                images.append((p, grey))
        except ImageError as exc:
            report("skipped", image_error(exc))
            failed += 1
        progress.advance(task)
    return images, failed


def read_negatives(folder, files, progress, max_pixels):
    """(name, grey) of the usable images ``files`` (from ``list_images(folder, "--negatives")``, listed with the
    other option checks; of at most ``max_pixels`` pixels) and the number that failed; a usage error (exit 2) if
    none is usable, for a run without them would not be the run asked for."""
    from ..preprocess import WINDOW

    images, failed = _read_images(files, progress, "reading negatives", max_pixels)
    if not images:
        usage_error(f"--negatives {folder}: no readable image of at least {WINDOW}x{WINDOW} pixels")
    return images, failed


def read_patches(faces, nonfaces, data, split, max_pixels, landmarks=None, photos=None):
    import numpy as np

    from ..imageio import open_csv
    from ..patches import CBCL_FRAMING, load_folder, load_landmark_faces, load_patches

    if data is not None and (faces is not None or nonfaces is not None):
        usage_error("give either --data or --faces with --nonfaces, not both")
    if data is None and nonfaces is None or data is None and faces is None and landmarks is None:
        usage_error("give --faces DIR (or --landmarks CSV) and --nonfaces DIR, or --data FILE.npz")
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
        report("skipped", image_error(exc))
    if usage is not None:
        usage_error(usage)
    return X, y, len(errors)


def typed_options(ctx, names):
    """Those of the options ``names`` (parameter names) given on the command line, as --option-names."""
    return [
        f"--{n.replace('_', '-')}" for n in names if getattr(ctx.get_parameter_source(n), "name", None) == "COMMANDLINE"
    ]


def split_needs_data(ctx, data):
    if data is None and typed_options(ctx, ["split"]):  # the folders of --faces/--nonfaces have no splits
        usage_error("--split: selects a split of --data; give --data")


SCHEDULER_HELP = (
    "Run on the Dask cluster of this scheduler (tcp://host:8786; default: $DASK_SCHEDULER_ADDRESS), "
    "whose workers read the same paths; needs the dask extra."
)
WORKERS_HELP = "Run on a local Dask cluster of this many processes (default: this process only); needs the dask extra."


def dask_client(scheduler, workers):
    """The Dask client of --scheduler/--workers (None: this process); a usage error if it cannot be had."""
    from ..batch import connect

    try:
        return connect(scheduler, workers)
    except (ModuleNotFoundError, OSError, ValueError) as exc:
        usage_error(f"--scheduler/--workers: {exc}")


THREADS_HELP = (
    "Threads: pyramid levels scanned at once (default: $NUMBA_NUM_THREADS, else every core, at most "
    "4; each holds a level's arrays); the boxes do not depend on it."
)


def parse_number(text, name):
    try:
        return float(text)
    except ValueError:
        usage_error(f"{name}: expected a number, got {text!r}")


def parse_refine(text):
    """--refine: a decision value, or 'off' (None: the grid only)."""
    return None if text.lower() == "off" else parse_number(text, "--refine")


def annotated_set(images, annotations, split, model, max_pixels):
    """(annotations by image name, a reader of those images, detector) for evaluate and calibrate; usage errors
    for a bad CSV, folder or model. The reader raises ImageError for an image that is unreadable, of more than
    ``max_pixels`` pixels or not of the size its boxes were drawn at (the CSV's img_width, img_height)."""
    from ..evaluate import read_annotations, read_image_sizes
    from ..imageio import ImageError, read_grey

    try:
        ann = read_annotations(annotations, split=split)
        sizes = read_image_sizes(annotations, split=split)
    except OSError as exc:
        usage_error(f"--annotations {annotations}: {exc.strerror or exc}")
    except ValueError as exc:
        usage_error(str(exc))
    if not images.is_dir():
        usage_error(f"not a folder: {images}")

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

    return ann, read, load_detector(model)


def annotation_targets(images, out_path):
    """The annotated-image path of each input (None without --out). An --out with an image suffix is one
    file (usage error if several images are given, or if Pillow cannot write that format); otherwise a folder
    of <stem>.faces.png, with -2, -3, ... where stems repeat, so that no output overwrites another."""
    from PIL import Image

    from ..batch import ANNOTATED
    from ..imageio import VIDEO_SUFFIXES, is_video

    if out_path is None:
        return [None] * len(images)
    image_suffixes = Image.registered_extensions()
    if out_path.suffix.lower() in VIDEO_SUFFIXES and not out_path.is_dir():
        if len(images) != 1 or not is_video(images[0]):
            usage_error(f"--out {out_path} names one video file: give one video (or a folder for several inputs)")
        check_output(out_path, "--out")
        return [out_path]
    if any(map(is_video, images)) and out_path.suffix.lower() in image_suffixes and not out_path.is_dir():
        usage_error(f"--out {out_path}: an image file, for a video; give a video file (.mp4, .avi) or a folder")
    if out_path.suffix.lower() in image_suffixes and not out_path.is_dir():
        fmt = image_suffixes[out_path.suffix.lower()]
        try:  # some formats Pillow writes take no colour (XBM: 1-bit only)
            Image.new("RGB", (1, 1)).save(io.BytesIO(), format=fmt)
        except (OSError, ValueError, KeyError):
            usage_error(f"--out {out_path}: cannot write colour {fmt} images; use .png or .jpg")
        if len(images) > 1:
            usage_error(f"--out {out_path} names one file, but {len(images)} images were given; give a folder")
        check_output(out_path, "--out")
        return [out_path]
    if out_path.exists() and not out_path.is_dir():
        usage_error(f"--out {out_path}: exists and is not a folder")
    if out_path.suffix and not out_path.exists():  # out.txt is more likely a wrong file name than a new folder
        usage_error(
            f"--out {out_path}: {out_path.suffix} is not an image format that can be written; give an image "
            "file (.png, .jpg, ...) or a folder (an existing one, or a name without a suffix)"
        )
    ancestor = next(p for p in (out_path, *out_path.parents) if p.exists())
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        usage_error(
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
