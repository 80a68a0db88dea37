"""Reproduce the shipped default detector (models/default_detector.npz) from scratch.

1. CBCL Face DB #1 training set (2,429 faces + 4,548 non-faces; faces also mirrored and rotated +-10 deg).
2. Cascade prefilter (Fisher stages) on those patches plus random windows of the face-free images in
   shared/data/nonface_scenes; poly-2 SVM (svmcore.SVC, C=10, gamma=1/283, coef0=1).
3. Window-to-box calibration on the `train` split of scenes_annotated_dlib_voc (never the test split).
4. Bootstrapping rounds on nonface_scenes: the false positives become non-face patches, the SVM is retrained.
   Per round: false positives on the negative images, and detection rate / false positives on the
   annotated scenes (train and test split, reported only; nothing is chosen on the test split).
5. Extra faces from photos: the best window (facedet.bootstrap.best_windows) of each of the 18 faces of
   the train split and of the 100 LFW faces in misc_faces_skimage, augmented (EXTRA_AUGMENTATION), join
   the face patches with weight PHOTO_WEIGHT (box constraint 3 C); the SVM (C = 30) is retrained and
   bootstrapped again.
6. Box map recalibrated; operating point (threshold, min_neighbors): the one maximising F1 on the train
   split plus the negative images (facedet.bootstrap.choose_threshold).

Usage: PYTHONPATH=. python scripts/train_default.py [--rounds 2] [--out models/default_detector.npz] [--threads 1]
                                                   [--check MODEL]

--check MODEL compares the trained model with MODEL: every array, bit for bit, and every header field but the
training time; where they differ, also what the two detectors find on the 9 annotated scenes, astronaut.png
and the 52 negative images. Exit status: 0 reproduced bit for bit; 3 the arrays differ but the detections
agree (on every image the same number of boxes, matched one-to-one at IoU >= 0.5, the evaluation's criterion);
1 the detections differ too.
Run it after a change to svmcore or facedet, as ``--out /tmp/m.npz --check models/default_detector.npz``:
even a change that only reorders float32 sums (the kernel cache's blocks) can move the shipped model.

The result depends on the thread count (multi-threaded float sums move a few windows across the SVM's
threshold: 103,660 instead of 103,655 false-positive windows in round 0 with 2 threads), so the script runs
on one thread unless --threads says otherwise; the shipped model is the one-thread result. It also depends on
the CPU type (numba and OpenBLAS compile or pick their kernels for it): on an AMD Zen 3 the SVM ends at 5,268
support vectors instead of 5,275, with the same operating point and figures. There --check exits with 3 rather
than 0: the arrays differ, the detections do not.
"""
from __future__ import annotations

from _script import DATA, limit_threads  # scripts/ is on sys.path when run

limit_threads()  # before numpy, numba and BLAS load: the shipped model is reproduced at one thread

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from facedet.bootstrap import (best_windows, bootstrap, calibrate_box, choose_threshold, fit_svm,  # noqa: E402
                               train_detector)
from facedet.detector import FORMAT as DETECTOR_FORMAT  # noqa: E402
from facedet.detector import Detector  # noqa: E402
from facedet.evaluate import iou, match_detections  # noqa: E402
from facedet.features import window_features  # noqa: E402
from facedet.imageio import read_grey  # noqa: E402
from facedet.patches import augment  # noqa: E402
from svmcore.persistence import read_archive  # noqa: E402

from _training_data import (check_args, evaluate_scenes, fmt_box, lfw_faces, load_training_data,  # noqa: E402
                            log_round, report)

ROOT = Path(__file__).resolve().parents[1]
# mirror images and +-10 degree rotations of the faces (rotations raised the train-split AP 0.18 -> 0.31)
AUGMENTATION = {"mirror": True, "shifts": 0, "angles": (-10, 10)}
SVM_PARAMS = {"C": 10.0}
# the photo faces are few (118), so each gives 22 patches: mirror, 1-pixel shifts, rotations, zooms
EXTRA_AUGMENTATION = {"mirror": True, "shifts": 1, "angles": (-10, -5, 5, 10), "scales": (0.9, 1.1)}
# the SVM retrained with the photo faces: a larger C fits those few faces; at threshold 0.75, min_neighbors
# 2, C = 10 / 30 / 100 give train-split DR 0.44 / 0.67 / 0.78 with 0 / 0 / 11 false positives (train split
# plus negative images)
FINAL_SVM_PARAMS = {"C": 30.0}
# each photo-face patch weighs 3 (box constraint 3 C = 90) while every other row keeps C = 30: the photo faces
# are fitted almost as with C = 100, whose extra false positives on the negatives came from the non-faces'
# larger C. The weight was fixed before measuring; test split at the rule's point: weight 1 / 3 / 6 ->
# 0.80 / 0.88 / 0.84 with 0 / 0 / 1 false positives (docs/detector.md)
PHOTO_WEIGHT = 3.0
# pyramid step 1.1, stride 2, and around every window scoring above 0 (the SVM's boundary) stride 1 and the
# pyramid's half steps (facedet.scan.scan)
SCAN = {"scale_factor": 1.1, "stride": 2, "refine": 0.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA, help="shared/data folder (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="bootstrapping rounds, before and after the photo faces (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=ROOT / "models" / "default_detector.npz",
                    help="model file (default: replaces the shipped models/default_detector.npz)")
    ap.add_argument("--threads", default="1",
                    help="threads for numba and BLAS (default: %(default)s, as for the shipped model)")
    ap.add_argument("--check", type=Path, metavar="MODEL",
                    help="compare the result with this model file (arrays and header, not the training time; "
                         "then the detections): exit 0 identical, 3 the same detections only, 1 different")
    args = ap.parse_args()
    check_args(ap, args, extra_files=["misc_faces_skimage/lfw_subset.npy"])
    if args.check is not None:
        if args.check.resolve() == args.out.resolve():
            ap.error(f"--check {args.check}: the same file as --out, which training overwrites; give another --out")
        try:
            read_archive(args.check, DETECTOR_FORMAT)
        except (OSError, ValueError) as exc:
            ap.error(f"--check: {exc}")
    t_start = time.perf_counter()

    X, y, negatives, ann, images = load_training_data(args.data)

    def evaluate(det):
        return evaluate_scenes(det, ann, images)

    def calibrated(det):
        det, n = calibrate_box(det, [(images[n], ann["train"][n][0]) for n in ann["train"]])
        print(f"  box calibration on {n} train-split faces: {fmt_box(det.box)}")
        return det

    t = time.perf_counter()
    det, F, labels = train_detector(X, y, negative_images=negatives, augmentation=AUGMENTATION,
                                    svm_params=SVM_PARAMS, **SCAN)
    print(f"trained round 0 in {time.perf_counter() - t:.0f} s; prefilter stages: {len(det.prefilter.thresholds)}")
    det = calibrated(det)
    det, F, labels, table = bootstrap(det, negatives, args.rounds, features=F, labels=labels,
                                      evaluate=evaluate, callback=log_round)

    # each photo face as the bootstrapped SVM sees it best (its framing is unknown: the dlib boxes run
    # eyebrows to chin, the LFW crops forehead to chin, CBCL's windows eyebrows to mouth)
    extra = [(images[n], ann["train"][n][0]) for n in ann["train"]] + lfw_faces(args.data)
    faces, _ = best_windows(det, extra)
    P = augment(faces, **EXTRA_AUGMENTATION)
    print(f"extra faces: {len(faces)} best windows (train split + LFW) -> {len(P)} patches; retraining")
    weights = np.r_[np.ones(len(F)), np.full(len(P), PHOTO_WEIGHT)]
    F = np.concatenate([F, window_features(P)])
    labels = np.concatenate([labels, np.ones(len(P), labels.dtype)])
    det = Detector(fit_svm(F, labels, sample_weight=weights, **FINAL_SVM_PARAMS), det.prefilter, **det.params())
    det, F, labels, more = bootstrap(det, negatives, args.rounds, features=F, labels=labels, sample_weight=weights,
                                     evaluate=evaluate, callback=log_round)
    table = [(str(r.round), r) for r in table] + [(f"faces+{r.round}", r) for r in more]
    # operating point and box map, on training images only: the train split and the negative images
    items = [(images[n], ann["train"][n][0]) for n in ann["train"]] + [(g, np.zeros((0, 4))) for g in negatives]
    det = calibrated(det)
    # min_neighbors up to 3: with refinement a face gives several windows above a useful threshold
    det, rows = choose_threshold(det, items, candidates=np.round(np.arange(-0.5, 2.01, 0.1), 2), neighbors=(1, 2, 3))
    det.save(args.out)
    print(f"\nsaved {args.out} ({args.out.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t_start:.0f} s total")
    report(det, rows, table, evaluate)
    if args.check is not None:
        differ = compare_models(args.out, args.check)
        if not differ:
            print(f"\n--check {args.check}: reproduced bit for bit (arrays and header equal)")
            raise SystemExit(0)
        print(f"\n--check {args.check}: the arrays differ: {', '.join(differ)} (on another CPU type or thread "
              "count the float sums come in another order); comparing the detections", flush=True)
        astronaut = read_grey(args.data / "misc_faces_skimage" / "astronaut.png")
        items = {**images, "astronaut.png": astronaut, **{f"negative {k}": g for k, g in enumerate(negatives)}}
        changed, lowest = changed_detections(det, Detector.load(args.check), items)
        for name, (k_new, k_ref, same) in changed.items():
            print(f"  {name}: {k_new} boxes against {k_ref}, {same} matched at IoU >= 0.5")
        print(f"  detections on {len(items)} images: " + (f"{len(changed)} differ" if changed else
              f"the same boxes, matched one-to-one at IoU >= 0.5 (lowest IoU {lowest:.2f})"))
        raise SystemExit(1 if changed else 3)


def compare_models(path, reference):
    """Names of what differs between two detector files: every array (bit for bit, shape and dtype) and every
    header field (scan parameters, features, prefilter, the classifier's class, parameters and fitted values)
    except the training time."""
    (head_a, arr_a), (head_b, arr_b) = (read_archive(p, DETECTOR_FORMAT) for p in (path, reference))
    differ = sorted(k for k in arr_a.keys() | arr_b.keys()
                    if k not in arr_a or k not in arr_b or arr_a[k].dtype != arr_b[k].dtype
                    or not np.array_equal(arr_a[k], arr_b[k]))
    flat_a, flat_b = (_flatten(h, "header") for h in (head_a, head_b))
    for flat in (flat_a, flat_b):
        flat.pop("header.classifier.meta.fit_seconds_", None)
    return differ + sorted(k for k in flat_a.keys() | flat_b.keys() if flat_a.get(k, None) != flat_b.get(k, None)
                           or (k in flat_a) != (k in flat_b))


def changed_detections(det, reference, images, iou_threshold=0.5):
    """Where two detectors disagree on the images (name -> grey image): ({name: (boxes of det, boxes of reference,
    boxes matched one-to-one at IoU >= iou_threshold)} for the images whose boxes differ in number or do not all
    match, the lowest IoU of a matched pair over all images (1.0 if none))."""
    out, lowest = {}, 1.0
    for name, img in images.items():
        a, b = det.detect(img), reference.detect(img)
        m = match_detections(a, b[:, :4], iou_threshold=iou_threshold)
        same = int(m["is_tp"].sum())
        if same:
            lowest = min(lowest, float(iou(a[m["is_tp"]], b[m["matched"][m["is_tp"]], :4]).diagonal().min()))
        if not len(a) == len(b) == same:
            out[name] = (len(a), len(b), same)
    return out, lowest


def _flatten(tree, prefix):
    """{"a.b.c": leaf} for a JSON tree of dicts."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    return {k: v for name, sub in tree.items() for k, v in _flatten(sub, f"{prefix}.{name}").items()}


if __name__ == "__main__":
    main()
