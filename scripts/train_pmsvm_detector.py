"""Train the additive-kernel detector: svmcore.PmSVM (power mean kernel, lookup table) on HOG of 19x19 windows.

1. CBCL Face DB #1 training set (2,429 faces + 4,548 non-faces; faces mirrored and rotated +-10 degrees, as
   for the shipped polynomial-SVM model, scripts/train_default.py).
2. Cascade prefilter as for the shipped model (facedet.training.fit_prefilter: Fisher stages on pixels,
   against the CBCL non-faces plus random windows of the face-free images in shared/data/nonface_scenes);
   PmSVM (C, p below) on facedet.features.hog_features (324 values >= 0).
3. Bootstrapping rounds on nonface_scenes (facedet.bootstrap.bootstrap: the detector's windows above
   threshold 0 on the face-free images, at most 300 per image and round, become non-faces; the PmSVM is
   refitted on the grown set). Per round: false positives on the negative images and DR / FP / AP on the
   annotated scenes (train and test split, reported only; nothing is chosen on the test split).
4. Box map (facedet.calibration.calibrate_box) on the train split. Operating point: the threshold and
   min_neighbors (1..3) at the top of the longest F1 maximum on the train split plus the negative images
   (facedet.calibration.choose_threshold), thresholds -1..3: PmSVM scores of faces reach higher than the
   polynomial SVM's.

Usage: PYTHONPATH=. python scripts/train_pmsvm_detector.py [--rounds 3] [--C 1] [--p -1] [--max-iter 3000] --out PATH
       [--threads 1]

Runs on one thread unless --threads says otherwise: multi-threaded float sums can move windows across the
threshold, so results are reproducible at a given thread count.
"""

from __future__ import annotations

from _script import DATA, limit_threads  # scripts/ is on sys.path when run

limit_threads()  # before numpy, numba and BLAS load

import argparse
import time
from pathlib import Path

import numpy as np

from facedet.bootstrap import bootstrap
from facedet.calibration import calibrate_box, choose_threshold
from facedet.training import KINDS, check_classifier_params, train_detector

from _training_data import check_args, evaluate_scenes, fmt_box, load_training_data, log_round, report

ROOT = Path(__file__).resolve().parents[1]
AUGMENTATION = {"mirror": True, "shifts": 0, "angles": (-10, 10)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA, help="shared/data folder (default: %(default)s)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="bootstrapping rounds on the negative images (default: %(default)s; 0 is no faster: the "
        "unbootstrapped model's many false positives make the operating-point search slow)",
    )
    ap.add_argument("--C", type=float, default=1.0, help="PmSVM's C (default: %(default)s)")
    ap.add_argument(
        "--p", type=float, default=-1.0, help="power mean: -1 chi-square, -8 ~ intersection (default: %(default)s)"
    )
    ap.add_argument(
        "--max-iter",
        type=int,
        default=KINDS["pmsvm"].defaults["max_iter"],
        help="PmSVM's epoch cap (default: %(default)s); the default recipe's fits converge within it "
        "(the last in 2,055 epochs, to tol = 0.1); a fit stopped short depends on rounding (so then "
        "does every bootstrapping round after it)",
    )
    ap.add_argument("--out", type=Path, required=True, help="model file to write")
    ap.add_argument("--threads", default="1", help="threads for numba and BLAS (default: %(default)s)")
    args = ap.parse_args()
    check_args(ap, args)
    if args.max_iter < 1:
        ap.error(f"--max-iter: expected >= 1, got {args.max_iter}")
    t_start = time.perf_counter()
    pmsvm_params = {"C": args.C, "p": args.p, "max_iter": args.max_iter, "random_state": 0}
    try:  # --C and --p as PmSVM checks them, before minutes of data loading and augmentation
        check_classifier_params("pmsvm", **pmsvm_params)
    except (TypeError, ValueError) as exc:
        ap.error(f"--C / --p: {exc}")

    X, y, negatives, _, ann, images = load_training_data(args.data)

    def evaluate(det):
        return evaluate_scenes(det, ann, images)

    train_items = [(images[n], ann["train"][n][0]) for n in ann["train"]]

    t = time.perf_counter()
    det, F, labels = train_detector(
        X, y, kind="pmsvm", negative_images=negatives, augmentation=AUGMENTATION, classifier_params=pmsvm_params
    )
    det = calibrate_box(det, train_items)[0]
    print(
        f"trained round 0 in {time.perf_counter() - t:.0f} s; prefilter stages: {len(det.prefilter.thresholds)}; "
        f"box map {fmt_box(det.box)}"
    )
    det, F, labels, table = bootstrap(
        det, negatives, args.rounds, features=F, labels=labels, evaluate=evaluate, callback=log_round
    )
    det = calibrate_box(det, train_items)[0]
    print(f"  epochs of the last fit: {int(det.classifier.n_iter_[0])}; box map {fmt_box(det.box)}")

    items = train_items + [(g, np.zeros((0, 4))) for g in negatives]
    det, ops = choose_threshold(det, items, candidates=np.round(np.arange(-1.0, 3.01, 0.1), 2), neighbors=(1, 2, 3))
    det.save(args.out)
    print(f"\nsaved {args.out} ({args.out.stat().st_size / 1e6:.2f} MB) in {time.perf_counter() - t_start:.0f} s total")
    report(det, ops, [(str(r.round), r) for r in table], evaluate)


if __name__ == "__main__":
    main()
