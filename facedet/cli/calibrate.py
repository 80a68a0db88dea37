"""``facedet calibrate``: box map, operating point and confidence fitted on annotated photos."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import (
    annotated_set,
    app,
    check_not_input,
    check_output,
    emit,
    exit_codes,
    exit_with,
    image_error,
    list_images,
    max_pixels_option,
    progress_bar,
    read_negatives,
    report,
    usage_error,
    write_output,
)


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
    max_pixels: int = max_pixels_option(),
):
    """Fit a model's window-to-box map to the annotations' box convention (and its operating point and confidence).

    A window of side s at (x, y) becomes the box of side scale*s centred at (x + s/2 + dx*s, y + s/2 + dy*s);
    (dx, dy, scale) is the median over the annotated faces of the map from each face's best window to its box.
    Models from train and bootstrap have (0, 0, 1), the raw 19x19 window (eyebrows to mouth)."""
    import numpy as np

    from ..calibration import calibrate_box, calibrate_confidence, choose_threshold, scan_items
    from ..evaluate import plot_format, plot_reliability, plural
    from ..imageio import ImageError

    if negatives is not None and not operating_point:  # they only count in choosing the operating point
        usage_error("--negatives: not used with --box-only (it keeps the model's operating point)")
    if reliability is not None:
        if not operating_point:
            usage_error("--reliability: --box-only fits no confidence")
        try:
            plot_format(reliability)
        except (ValueError, ModuleNotFoundError) as exc:
            usage_error(f"--reliability: {exc}")
        check_output(reliability, "--reliability")
    check_output(out_path, "--out")
    negative_files = list_images(negatives, "--negatives") if negatives else []
    ann, read, det = annotated_set(images, annotations, split, model, max_pixels)
    for path, option in ((out_path, "--out"), (reliability, "--reliability")):
        check_not_input(
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
    with progress_bar() as progress:
        task = progress.add_task("reading images", total=len(ann), info="")
        for name, (boxes, ignore) in ann.items():
            progress.advance(task)
            try:
                items.append((read(name), boxes[~ignore]))
            except ImageError as exc:
                report("failed", image_error(exc))
                failed += 1
        neg, nfail = read_negatives(negatives, negative_files, progress, max_pixels) if negatives else ([], 0)
        if not any(len(boxes) for _, boxes in items):
            usage_error(
                f"{annotations}: no face to calibrate on in the readable images (faces flagged ignore are left out)"
            )
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
            usage_error(str(exc))
        if operating_point:  # down to the lowest threshold tried: users may lower --threshold that far
            try:
                det, scores, is_face = calibrate_confidence(det, items, threshold=-1.0, windows=windows)
            except ValueError as exc:
                report("warning:", f"no confidence calibration: {exc}")
    write_output(det.save, out_path)
    if reliability is not None and det.platt is not None:
        write_output(lambda path: plot_reliability(det.confidence(scores), is_face, path), reliability)
    dx, dy, scale = det.box
    emit(
        f"box map from {plural(n_faces, 'face')}: dx={dx:+.3f} dy={dy:+.3f} scale={scale:.3f}; threshold "
        f"{det.threshold:+.2f}, min_neighbors {det.min_neighbors}; wrote {out_path}",
        markup=False,
        highlight=False,
    )
    exit_with(failed or nfail)
