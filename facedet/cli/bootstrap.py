"""``facedet bootstrap``: rounds of hard-negative mining on face-free images."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .common import (
    SCHEDULER_HELP,
    WORKERS_HELP,
    app,
    check_not_input,
    check_output,
    dask_client,
    emit,
    exit_codes,
    exit_with,
    list_images,
    load_detector,
    max_pixels_option,
    progress_bar,
    read_negatives,
    read_patches,
    split_needs_data,
    usage_error,
    write_output,
)


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
    scheduler: Optional[str] = typer.Option(None, help=SCHEDULER_HELP + " The negatives are scanned there."),
    workers: Optional[int] = typer.Option(None, min=1, help=WORKERS_HELP),
    max_pixels: int = max_pixels_option(),
):
    """Bootstrap: add the false positives on face-free images to the non-faces and retrain, N rounds."""
    from ..bootstrap import bootstrap as run, keeps_training_rows
    from ..training import training_set

    split_needs_data(ctx, data)
    check_output(out_path, "--out")
    check_not_input(
        out_path,
        "--out",
        {"--model": model, "--data": data, "--faces": faces, "--nonfaces": nonfaces, "--negatives": negatives},
    )
    negative_files = list_images(negatives, "--negatives")
    det = load_detector(model)
    features = labels = None
    failed = 0
    if data is not None or faces is not None or nonfaces is not None:
        X, y, failed = read_patches(faces, nonfaces, data, split, max_pixels)
        try:
            features, labels = training_set(X, y, features=det.features)
        except (TypeError, ValueError) as exc:
            usage_error(str(exc))
    elif not keeps_training_rows(det.classifier):
        usage_error(
            f"{model}: the model keeps no training rows (a PmSVM, or a reduced set as the shipped model); give "
            f"the patches to retrain on (--data, or --faces and --nonfaces)"
        )
    with progress_bar() as progress:
        neg, nfail = read_negatives(negatives, negative_files, progress, max_pixels)
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

        client = dask_client(scheduler, workers)
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
            usage_error(str(exc))
    write_output(det.save, out_path)
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
    emit(t)
    emit(f"wrote {out_path}", markup=False, highlight=False)
    exit_with(failed or nfail)
