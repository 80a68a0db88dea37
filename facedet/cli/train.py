"""``facedet train``: a detector trained on face and non-face patches."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import (
    app,
    as_options,
    check_not_input,
    check_output,
    emit,
    exit_codes,
    exit_with,
    list_images,
    max_pixels_option,
    notice_compiling,
    parse_number,
    parse_refine,
    progress_bar,
    read_negatives,
    read_patches,
    split_needs_data,
    svm_progress,
    typed_options,
    usage_error,
    write_output,
)


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
    max_pixels: int = max_pixels_option(),
):
    """Train a detector on face and non-face patches."""
    from ..detector import check_params
    from ..features import FEATURES
    from ..training import KINDS, check_classifier_params, train_detector

    if classifier not in KINDS:
        usage_error(f"--classifier: unknown value {classifier!r}; expected {' or '.join(KINDS)}")
    if kernel not in ("poly", "rbf", "linear"):  # windows are feature rows: a precomputed kernel cannot scan
        usage_error(f"--kernel: unknown value {kernel!r}; expected poly, rbf or linear")
    features = features or KINDS[classifier].features[0]
    if features not in FEATURES:
        usage_error(f"--features: unknown value {features!r}; expected {' or '.join(FEATURES)}")
    try:
        KINDS[classifier].check_features(features)
    except ValueError as exc:
        usage_error(f"--features {features}: {exc}")
    # an option the chosen classifier does not take would be silently dropped: a mistyped command
    other = typed_options(ctx, ["kernel", "degree", "gamma", "coef0"] if classifier == "pmsvm" else ["p"])
    if data is None and landmarks is None:
        split_needs_data(ctx, data)
    if photos is not None and landmarks is None:
        usage_error("--photos: the folder of the --landmarks photos; give --landmarks")
    if other:
        usage_error(f"{', '.join(other)}: not an option of --classifier {classifier}")
    if typed_options(ctx, ["max_pixels"]) and negatives is None and data is not None and data.is_file():
        usage_error(f"--max-pixels: no image file is read (--data {data} holds the patches as arrays; no --negatives)")
    check_output(out_path, "--out")
    check_not_input(
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
    scan_params = {
        "stride": stride,
        "scale_factor": scale_factor,
        "threshold": threshold,
        "refine": parse_refine(refine),
    }
    given = {k: v for k, v in (("C", C), ("tol", tol), ("max_iter", max_iter)) if v is not None}  # else the defaults
    if classifier == "svc":
        g = gamma if gamma in ("auto", "scale") else parse_number(gamma, "--gamma")
        clf_params = {"kernel": kernel, "degree": degree, "gamma": g, "coef0": coef0, **given}
    else:
        clf_params = {"p": p, **given}
    names = [*scan_params, *clf_params]
    try:  # the options by the library's own checks, before any data are read and the classifier fitted
        check_params(**scan_params)
        check_classifier_params(classifier, **clf_params)
    except (TypeError, ValueError) as exc:
        usage_error(as_options(exc, names))
    negative_files = list_images(negatives, "--negatives") if negatives else []
    X, y, failed = read_patches(faces, nonfaces, data, split, max_pixels, landmarks, photos)
    augmentation = {"mirror": mirror, "shifts": shifts}
    notice_compiling()
    with progress_bar() as progress:
        neg, nfail = read_negatives(negatives, negative_files, progress, max_pixels) if negatives else ([], 0)
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
                callback=svm_progress(progress, task),
                classifier_params=clf_params,
                **scan_params,
            )
        except (TypeError, ValueError) as exc:
            usage_error(as_options(exc, names))
    write_output(det.save, out_path)
    clf = det.classifier
    size = (
        f"{clf.support_.size} support vectors"
        if classifier == "svc"
        else f"PmSVM p={clf.p}, lookup table {clf.coef_.shape[1]}x{clf.lut_bins}, {clf.n_iter_[0]} epochs"
    )
    faces_fit = int((labels == 1).sum())  # with the mirror images and shifted copies
    added = " and ".join(w for w, on in (("mirrors", mirror), ("shifts", shifts > 0)) if on)
    copies = f" ({faces_fit} with {added})" if faces_fit != int(y.sum()) else ""
    emit(
        f"trained on {int(y.sum())} faces{copies} and {int((labels != 1).sum())} non-faces ({features} "
        f"features): {size}; wrote {out_path}",
        markup=False,
        highlight=False,
    )
    exit_with(failed or nfail)
