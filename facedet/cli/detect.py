"""``facedet detect``: faces in images, folders, lists, standard input and videos."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table
from rich.text import Text

from .common import (
    SCHEDULER_HELP,
    THREADS_HELP,
    WORKERS_HELP,
    annotation_targets,
    app,
    as_options,
    check_not_input,
    dask_client,
    emit,
    err,
    exit_codes,
    exit_with,
    load_detector,
    max_pixels_option,
    parse_refine,
    progress_bar,
    real_path,
    report,
    usage_error,
)


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
    scheduler: Optional[str] = typer.Option(None, help=SCHEDULER_HELP),
    workers: Optional[int] = typer.Option(None, min=1, help=WORKERS_HELP),
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
    threads: Optional[int] = typer.Option(None, min=1, help=THREADS_HELP),
    max_pixels: int = max_pixels_option(),
):
    """Find faces in images and videos: a table (or --json) of boxes in pixels, and annotated images (videos) with
    --out. A video file (.mp4, .mov, .avi, .mkv, .webm, ...) gives one record per frame searched, with its
    "frame" index and "time" in seconds."""
    import time

    from ..batch import ANNOTATED, detect_files, done_images, expand_inputs
    from ..detector import default_model_path
    from ..evaluate import plural

    if resume and (jsonl is None or jsonl == "-"):
        usage_error("--resume: give the --jsonl file to resume")
    if jsonl is not None and as_json:
        usage_error("--json and --jsonl: choose one")
    det = load_detector(model)
    try:
        names = expand_inputs([str(p) for p in images or []], from_list)
    except (OSError, ValueError) as exc:
        usage_error(f"--from-list: {exc}" if from_list is not None and str(from_list) in str(exc) else str(exc))
    # our earlier annotated outputs in the --out folder (which may be the photos' folder itself, or inside it)
    # are not inputs
    skip = real_path(out_path) if out_path is not None else None
    names = [n for n in names if not (skip is not None and n.endswith(ANNOTATED) and skip in real_path(n).parents)]
    if not names:
        usage_error(
            "no image files given" if not images and from_list is None else "no image files in the given inputs"
        )
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
        overrides["refine"] = parse_refine(refine)
    if overrides:
        try:
            det = det.with_params(**overrides)
        except (TypeError, ValueError) as exc:
            usage_error(as_options(exc, [*overrides, "min_size"]))  # (the model's min_size bounds --max-size)
    if min_confidence is not None and det.platt is None:
        usage_error("--min-confidence: the model has no confidence calibration (facedet calibrate); use --threshold")
    local = [Path(n) for n in names if "://" not in n]  # (URLs are no files here to protect)
    targets = annotation_targets([Path(n) for n in names], out_path)
    check_not_input(targets, "--out", {"IMAGE": local, "--model": model})
    existing = [t for t in targets if t is not None and os.path.lexists(t)]
    if existing and not overwrite and not resume:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        usage_error(f"--out: {existing[0]}{more} exists; --overwrite replaces annotated images, or give another --out")
    jobs = list(zip(names, targets, strict=True))
    sink = None
    if jsonl is not None and jsonl != "-":
        check_not_input(Path(jsonl), "--jsonl", {"IMAGE": local, "--model": model})
        if not resume and os.path.lexists(jsonl) and not overwrite:
            usage_error(f"--jsonl {jsonl}: exists; --resume appends the images it lacks, --overwrite starts it again")
        try:
            done = done_images(jsonl) if resume else set()
        except (OSError, ValueError) as exc:
            usage_error(f"--jsonl: {exc}")
        jobs = [(n, t) for n, t in jobs if n not in done]
        try:
            sink = open(jsonl, "a" if resume else "w", encoding="utf-8")
        except OSError as exc:
            usage_error(f"--jsonl {jsonl}: {exc.strerror or exc}")
    client = dask_client(scheduler, workers)
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
            with progress_bar() as progress:
                task = progress.add_task("detecting", total=len(jobs), info="")
                for records, failures in detect_files(
                    det, jobs, client=client, model=model or default_model_path(), params=overrides, **options
                ):
                    for message in failures:
                        report("failed", message)
                    failed += len(failures)
                    n_images += 1
                    lines = "".join(json.dumps(r) + "\n" for r in records)
                    if sink is not None:  # one write a file: a kill leaves whole records and at most one cut
                        sink.write(lines)
                        sink.flush()
                    elif jsonl == "-":
                        emit(lines, raw=True)
                    else:
                        results += records
                    rate = n_images / max(time.perf_counter() - start, 1e-9)
                    progress.update(task, advance=1, info=f"{failed} failed, {rate:.1f} images/s")
    except OSError as exc:  # the --jsonl file could not take a record (disk full)
        report("error:", f"cannot write {jsonl}: {exc.strerror or exc}")
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
        emit(json.dumps(results, indent=2) + "\n", raw=True)
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
        emit(t)
        for written in dict.fromkeys(r["annotated"] for r in results if "annotated" in r):
            emit(f"wrote {written}", markup=False, highlight=False)
    exit_with(failed)
