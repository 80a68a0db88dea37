"""``facedet evaluate``: detection rate, false positives and average precision on annotated images."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from .common import (
    THREADS_HELP,
    annotated_set,
    app,
    as_options,
    check_not_input,
    check_output,
    emit,
    exit_codes,
    exit_with,
    image_error,
    max_pixels_option,
    progress_bar,
    real_path,
    report,
    usage_error,
    write_output,
)


def _unlisted_images(images, annotations):
    """The image files in the folder ``images`` (subfolders included) that the CSV ``annotations`` lists under no
    split, as names relative to the folder: evaluate counts them as face-free. The annotated copies detect --out
    writes (<stem>.faces.png) are not among them: they show the faces of other images."""
    from ..batch import ANNOTATED
    from ..evaluate import listed_images
    from ..patches import image_files

    try:
        listed = listed_images(annotations)
    except (OSError, ValueError) as exc:  # (read_annotations has read the file by now; kept as a usage error)
        usage_error(f"--annotations {annotations}: {getattr(exc, 'strerror', None) or exc}")
    names = (os.path.normpath(os.path.relpath(p, images)) for p in image_files(images, recursive=True))
    return [n for n in names if n not in listed and not n.endswith(ANNOTATED)]


def _fp_points(text):
    """The counts of --fp-points ("10,31,50"): whole numbers >= 0, in the order given; a usage error otherwise."""
    parts = [t.strip() for t in text.split(",")]
    if not all(t.isascii() and t.isdigit() for t in parts):
        usage_error(f"--fp-points: expected whole numbers >= 0 separated by commas (e.g. 10,31,50), got {text!r}")
    return [int(t) for t in parts]


def _inside(path, folder):
    """Whether ``path`` (existing or not) lies in ``folder`` or one of its subfolders."""
    folder = real_path(folder)
    return folder in real_path(path).parents


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
    threads: Optional[int] = typer.Option(None, min=1, help=THREADS_HELP),
    max_pixels: int = max_pixels_option(),
):
    """Detection rate, false positives and average precision on annotated images, and the detection rate at
    given numbers of false positives (the ROC)."""
    import numpy as np

    from ..evaluate import (
        detection_rate_at_fp,
        evaluate_detections,
        plot_format,
        plot_precision_recall,
        plot_roc,
        plural,
        rate,
    )
    from ..imageio import ImageError
    from ..patches import IMAGE_SUFFIXES

    if not 0 < iou <= 1:
        usage_error(f"--iou: must be in (0, 1], got {iou}")
    points = _fp_points(fp_points)
    for path, option in ((plot, "--plot"), (roc, "--roc")):
        if path is not None:
            check_output(path, option)
            check_not_input(path, option, {"--annotations": annotations, "--model": model})
            try:
                plot_format(path)
            except (ValueError, ModuleNotFoundError) as exc:
                usage_error(f"{option} {exc}")
    if plot is not None and roc is not None and real_path(plot) == real_path(roc):
        usage_error(f"--roc {roc}: is the --plot file too; give two names")
    no_plot, default_plot = None, plot is None  # (why the default plot is not written)
    if default_plot:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            no_plot = "matplotlib is not installed (pip install 'facedet-svm[plot]')"
        elif not os.access(".", os.W_OK | os.X_OK):
            no_plot = "the current folder is not writable (give --plot PATH)"
        else:
            plot = Path("precision_recall.png")
    ann, read, det = annotated_set(images, annotations, split, model, max_pixels)
    if threshold is not None:
        try:
            det = det.with_params(threshold=threshold)
        except (TypeError, ValueError) as exc:
            usage_error(as_options(exc, ["threshold"]))
    unlisted = _unlisted_images(images, annotations)
    ann = {**ann, **{name: (np.zeros((0, 4)), np.zeros(0, bool)) for name in unlisted}}
    if default_plot and plot is not None and _inside(plot, images):  # the next run would read it as an image
        plot, no_plot = None, "the current folder is inside --images (give --plot PATH)"
    for path, option in ((plot, "--plot"), (roc, "--roc")):
        if path is not None:
            check_not_input(path, option, {"--images": [images / name for name in ann]})
            if path.suffix.lower() in IMAGE_SUFFIXES and _inside(path, images):
                usage_error(
                    f"{option} {path}: is inside the --images folder, where the next evaluate would read it as "
                    "an image without faces; write it elsewhere"
                )
    dets, failed = {}, 0
    with progress_bar() as progress:
        task = progress.add_task("detecting", total=len(ann), info="")
        for name in ann:
            try:
                dets[name] = det.detect(read(name), threads=threads)
            except (ImageError, ValueError) as exc:
                report("failed", image_error(exc) if isinstance(exc, ImageError) else f"{name}: {exc}")
                failed += 1
            progress.advance(task)
    lost = sum(int((~ignore).sum()) for name, (_, ignore) in ann.items() if name not in dets)
    ann = {k: v for k, v in ann.items() if k in dets}
    if not ann:
        usage_error("no annotated image could be read")
    try:
        res = evaluate_detections(dets, ann, iou_threshold=iou)
    except ValueError as exc:
        usage_error(f"--annotations {annotations}: {exc}")
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
    emit(t)
    at_fp = detection_rate_at_fp(res, points)
    t = Table(title=Text(f"detection rate at a number of false positives over the {plural(res.n_images, 'image')}"))
    for k in points:
        t.add_column(f"{k}", justify="right")
    t.add_row(*(rate(r) for r in at_fp))
    emit(t)
    if points and max(points) > res.false_positives:
        report(
            "note:",
            f"the detections end at {plural(res.false_positives, 'false positive')} (the detector's "
            f"threshold); at more, the rate is that of all of them (a lower --threshold goes further)",
        )
    if plot is None:
        report("note:", f"no precision-recall plot: {no_plot}")
    else:
        write_output(lambda path: plot_precision_recall(res, path), plot)
        emit(f"wrote {plot}", markup=False, highlight=False)
    if roc is not None:
        write_output(lambda path: plot_roc(res, path, fp_points=points), roc)
        emit(f"wrote {roc}", markup=False, highlight=False)
    exit_with(failed)
