"""Reproduce the shipped default detector (facedet/models/default_detector.npz) from scratch.

1. Faces: every face of caltech_webfaces split `train` whose box is at least 20 px, cut by its landmarks into
   the detector's window framing (facedet.patches.load_landmark_faces: as in the photo and tilted to a random
   angle within +-20 degrees, shifted and zoomed a little, mirrored), plus the 2,429 CBCL Face DB #1 training
   faces (mirrored, rotated +-10 degrees).
2. Non-faces: the 4,548 CBCL training non-faces and RANDOM_NONFACES random windows of each face-free image
   (all sizes from 19 px); cascade prefilter (Fisher stages) on the faces against them
   and random windows of the face-free images; poly-2 SVM (svmcore.SVC, C=10, gamma=1/283, coef0=1).
3. Bootstrapping rounds on the face-free images of nonface_scenes (all subfolders, all scales) but one in
   five of wu_rare_event, kept out for the operating point: the false positives become non-face patches
   and the SVM is retrained. Per round: false positives on the negative images, and detection rate / false
   positives / AP on a fifth of the caltech_webfaces `val` images (reported only).
4. Box map (facedet.calibration.calibrate_box) on the faces of caltech_webfaces `val`; operating point
   (threshold, min_neighbors; the F1 rule of facedet.calibration.choose_threshold) and the scores' confidence
   (Platt's sigmoid, facedet.calibration.calibrate_confidence) on every other `val` photo plus the held-out
   face-free images.
   The SVM is stored as its exact reduced set (svmcore.reduced.reduce_quadratic: at most 284 vectors).
   The benchmark test set is never read here (scripts/bench_detect.py --mit-cmu).

Usage: PYTHONPATH=. python scripts/train_default.py [--rounds 1] [--out facedet/models/default_detector.npz]
                                                   [--threads 2] [--from-round MODEL] [--reliability PNG]
                                                   [--check MODEL]

--check MODEL compares the trained model with MODEL: every array, bit for bit, and every header field but the
training time; where they differ, also what the two detectors find on the 9 annotated scenes, astronaut.png
and the held-out negative images. Exit status: 0 reproduced bit for bit; 3 the arrays differ but the detections
agree (on every image the same number of boxes, matched one-to-one at IoU >= 0.5, the evaluation's criterion);
1 the detections differ too. Multi-threaded float sums and another CPU type move a few windows across the
SVM's threshold, so a retrained model is rarely bit for bit the shipped one.
"""

from __future__ import annotations

from _script import DATA, limit_threads  # scripts/ is on sys.path when run

limit_threads("2")  # before numpy, numba and BLAS load

import argparse
import time
from pathlib import Path

import numpy as np

from facedet.bootstrap import bootstrap
from facedet.calibration import calibrate_box, calibrate_confidence, choose_threshold, scan_items
from facedet.detector import FORMAT as DETECTOR_FORMAT
from facedet.detector import Detector
from facedet.training import train_detector
from facedet.evaluate import iou, match_detections, plot_reliability
from facedet.imageio import read_grey
from facedet.patches import CBCL_FRAMING, augment, sample_windows
from svmcore.persistence import read_archive
from svmcore.reduced import reduce_quadratic

from _training_data import (
    check_args,
    evaluate_sets,
    fmt_box,
    load_training_data,
    log_round,
    print_reliability,
    report,
    webfaces_val,
    webfaces_windows,
)

ROOT = Path(__file__).resolve().parents[1]
# each Web Faces face: as in the photo plus ROTATIONS tilted copies, each mirrored
ROTATIONS = 1
CBCL_AUGMENTATION = {"mirror": True, "shifts": 0, "angles": (-10, 10)}
# a kernel-column cache of 8 GB: a round's refit has 10^5 rows and 10^4 support vectors, whose columns a
# smaller cache recomputes over and over
SVM_PARAMS = {"C": 10.0, "cache_size": 8000}
# random windows of each face-free image among the first non-faces: with the CBCL ones alone (4,548 against
# 46,000 faces) the first detector accepts so much that its first round of mining yields near-random windows
RANDOM_NONFACES = 100
# the highest-scoring false positives kept per negative image and round: one texture cannot flood the set
MAX_PER_IMAGE = 300
# pyramid step 1.1, stride 2, and around every window scoring above 0.5 stride 1 and the pyramid's half steps
# (facedet.scan.scan; around every window above 0, the SVM's boundary, a Web Faces detector refines 14 times
# as many windows, at 0.44 s a val photo instead of 0.38)
SCAN = {"scale_factor": 1.1, "stride": 2, "refine": 0.5, "min_size": 20}
# the operating point's thresholds; from the refinement's floor up (below it the scan is another one)
CANDIDATES = np.round(np.arange(0.5, 3.01, 0.1), 2)
# every other val photo for the threshold and the confidence: the scans of all 1,355 at a low threshold take
# longer than a bootstrapping round (the box map uses all)
OPERATING_POINT_EVERY = 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA, help="shared/data folder (default: %(default)s)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="bootstrapping rounds (default: %(default)s, the shipped model's; each refit of the "
        "grown set takes longer: 3 min for round 0's 78,000 rows, 43 min for round 1's 158,000)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "facedet" / "models" / "default_detector.npz",
        help="model file (default: replaces the shipped facedet/models/default_detector.npz)",
    )
    ap.add_argument("--threads", default="2", help="threads for numba and BLAS (default: %(default)s)")
    ap.add_argument(
        "--from-round",
        type=Path,
        metavar="MODEL",
        help="skip the training: calibrate the detector of a round saved by an earlier run "
        "(OUT.round<r>.npz, written after every round) and write OUT",
    )
    ap.add_argument(
        "--reliability",
        type=Path,
        metavar="PNG",
        help="also draw the confidence's reliability diagram on the calibration images to this file (default: none)",
    )
    ap.add_argument(
        "--check",
        type=Path,
        metavar="MODEL",
        help="compare the result with this model file (arrays and header, not the training time; "
        "then the detections): exit 0 identical, 3 the same detections only, 1 different",
    )
    args = ap.parse_args()
    check_args(ap, args, extra_files=["caltech_webfaces/landmarks.csv", "caltech_webfaces/boxes.csv"])
    if args.check is not None:
        if args.check.resolve() == args.out.resolve():
            ap.error(f"--check {args.check}: the same file as --out, which training overwrites; give another --out")
        try:
            read_archive(args.check, DETECTOR_FORMAT)
        except (OSError, ValueError) as exc:
            ap.error(f"--check: {exc}")
    t_start = time.perf_counter()

    X, y, negatives, held_out, ann, images = load_training_data(args.data)
    val = webfaces_val(args.data)
    sets = {"val/20": val[::20], "scenes test": [(images[n], ann["test"][n][0]) for n in ann["test"]]}
    if args.from_round is not None:
        det, table = Detector.load(args.from_round), []
    else:
        det, table = train(args, X, y, negatives, sets)
    # box map and operating point on held-out data only: Web Faces val and the face-free images kept out
    det, n = calibrate_box(det, val)
    print(f"  box calibration on {n} val faces: {fmt_box(det.box)}", flush=True)
    items = val[::OPERATING_POINT_EVERY] + [(g, np.zeros((0, 4))) for g in held_out]
    det = det.with_params(refine=SCAN["refine"])  # (a round saved by an earlier version may refine elsewhere)
    windows = scan_items(det, items, CANDIDATES[0])  # one scan for both
    det, rows = choose_threshold(det, items, candidates=CANDIDATES, neighbors=(1, 2, 3), windows=windows)
    det, scores, is_face = calibrate_confidence(det, items, threshold=CANDIDATES[0], windows=windows)
    print(f"  confidence: platt A={det.platt[0]:.4f} B={det.platt[1]:.4f}", flush=True)
    print_reliability(
        "Confidence on the calibration images (Web Faces val + held-out scenes)", det.confidence(scores), is_face
    )
    if args.reliability is not None:
        plot_reliability(
            det.confidence(scores),
            is_face,
            args.reliability,
            title="Confidence on Web Faces val (every other photo) + held-out scenes",
        )
    # the same decision function in at most 284 vectors: a file of 1 MB, not one of 8 bytes x 283 x n_SV
    n_sv = det.classifier.support_.size
    det = Detector(reduce_quadratic(det.classifier), det.prefilter, features=det.features, **det.params())
    print(f"  stored as the exact reduced set: {n_sv} support vectors -> {det.classifier.support_.size}", flush=True)
    det.save(args.out)
    print(f"\nsaved {args.out} ({args.out.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t_start:.0f} s total")
    report(det, rows, [(str(r.round), r) for r in table], lambda d: evaluate_sets(d, sets))
    if args.check is not None:
        differ = compare_models(args.out, args.check)
        if not differ:
            print(f"\n--check {args.check}: reproduced bit for bit (arrays and header equal)")
            raise SystemExit(0)
        print(
            f"\n--check {args.check}: the arrays differ: {', '.join(differ)} (on another CPU type or thread "
            "count the float sums come in another order); comparing the detections",
            flush=True,
        )
        astronaut = read_grey(args.data / "misc_faces_skimage" / "astronaut.png")
        items = {**images, "astronaut.png": astronaut, **{f"negative {k}": g for k, g in enumerate(held_out)}}
        changed, lowest = changed_detections(det, Detector.load(args.check), items)
        for name, (k_new, k_ref, same) in changed.items():
            print(f"  {name}: {k_new} boxes against {k_ref}, {same} matched at IoU >= 0.5")
        print(
            f"  detections on {len(items)} images: "
            + (
                f"{len(changed)} differ"
                if changed
                else f"the same boxes, matched one-to-one at IoU >= 0.5 (lowest IoU {lowest:.2f})"
            )
        )
        raise SystemExit(1 if changed else 3)


def train(args, X, y, negatives, sets):
    """Faces, the first non-faces, round 0 and the bootstrapping rounds: (detector, list of Round). Every round's
    detector is saved as OUT.round<r>.npz, so that a run stopped later still has it (--from-round)."""
    web = webfaces_windows(args.data, CBCL_FRAMING, ROTATIONS)

    def per_round(det):  # threshold 0 without refinement: an early round accepts too much to refine around
        return evaluate_sets(det.with_params(refine=None), sets)

    def checkpoint(info):
        log_round(info)
        if info.get("event") == "round":
            info["detector"].save(args.out.with_suffix(f".round{info['round'].round}.npz"))

    cbcl = augment(X[y == 1], **CBCL_AUGMENTATION)
    faces = np.concatenate([cbcl, web])
    rng = np.random.default_rng(0)
    nonfaces = np.concatenate([X[y == 0]] + [sample_windows(g, RANDOM_NONFACES, rng) for g in negatives])
    print(
        f"faces: {len(cbcl)} CBCL patches + {len(web)} Web Faces patches; non-faces: {int((y == 0).sum())} CBCL "
        f"+ {len(nonfaces) - int((y == 0).sum())} random windows of the negative images",
        flush=True,
    )
    Xall = np.concatenate([faces, nonfaces])
    yall = np.r_[np.ones(len(faces), np.int64), np.zeros(len(nonfaces), np.int64)]
    t = time.perf_counter()
    det, F, labels = train_detector(
        Xall,
        yall,
        negative_images=negatives,
        augmentation={"mirror": False},
        classifier_params=SVM_PARAMS,
        box=CBCL_FRAMING,
        **SCAN,
    )
    print(
        f"trained round 0 in {time.perf_counter() - t:.0f} s; prefilter stages: {len(det.prefilter.thresholds)}",
        flush=True,
    )
    det, F, labels, table = bootstrap(
        det,
        negatives,
        args.rounds,
        features=F,
        labels=labels,
        max_per_image=MAX_PER_IMAGE,
        evaluate=per_round,
        callback=checkpoint,
    )
    print(
        f"final training set: {int(labels.sum())} faces, {int((labels == 0).sum())} non-faces; "
        f"{det.classifier.support_.size} support vectors; last fit {det.classifier.fit_seconds_:.0f} s",
        flush=True,
    )
    return det, table


def compare_models(path, reference):
    """Names of what differs between two detector files: every array (bit for bit, shape and dtype) and every
    header field (scan parameters, features, prefilter, the classifier's class, parameters and fitted values)
    except the training time."""
    (head_a, arr_a), (head_b, arr_b) = (read_archive(p, DETECTOR_FORMAT) for p in (path, reference))
    differ = sorted(
        k
        for k in arr_a.keys() | arr_b.keys()
        if k not in arr_a
        or k not in arr_b
        or arr_a[k].dtype != arr_b[k].dtype
        or not np.array_equal(arr_a[k], arr_b[k])
    )
    flat_a, flat_b = (_flatten(h, "header") for h in (head_a, head_b))
    for flat in (flat_a, flat_b):
        flat.pop("header.classifier.meta.fit_seconds_", None)
    return differ + sorted(
        k
        for k in flat_a.keys() | flat_b.keys()
        if flat_a.get(k, None) != flat_b.get(k, None) or (k in flat_a) != (k in flat_b)
    )


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
