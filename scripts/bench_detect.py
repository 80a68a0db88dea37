"""facedet against OpenCV's Haar cascade and dlib's HOG detector, in one run on the same images.

    PYTHONPATH=. python scripts/bench_detect.py [--model PATH ...] [--repeat 3] [--threads 1] [--no-dlib]
    PYTHONPATH=. python scripts/bench_detect.py --mit-cmu [--model PATH ...] [--no-default] [--no-dlib] [--limit N]

Sets (shared/data): scenes_annotated_dlib_voc (dlib's boxes; "test" split = 5 images, 25 faces, and all
9 images, 43 faces) and misc_faces_skimage/astronaut.png (one face, box ASTRONAUT_BOX measured by hand).
Metrics (facedet.evaluate): detection rate and false positives at each detector's own operating point,
average precision (VOC, interpolated) over the boxes it outputs ranked by its score, milliseconds per
image. Speed: every scenes image resized to 640x480, all scales from 20-pixel faces up, each detector's
time as a ratio to the Haar cascade measured in the same run.

Detectors:
- facedet: the default model (facedet.Detector.load of the shipped model: polynomial SVM on Osuna
  features) and any ``--model PATH`` (e.g. a PmSVM + HOG detector from scripts/train_pmsvm_detector.py,
  scored by its lookup table); each named with its classifier and features; input the grey image;
  score = its decision value.
- haar: cv2 ``haarcascade_frontalface_default.xml``, ``detectMultiScale2`` with minSize 20, at
  (scaleFactor 1.1, minNeighbors 5) and (1.2, 3); input the grey image; score = number of neighbours.
  The cascade's window is 24 px and OpenCV never enlarges the image, so its smallest box is 24 px whatever
  minSize says (none smaller on the 9 scenes and 52 negative images at minSize 1, minNeighbors 0). The rows
  "x1.2" enlarge the image by 24/20 first (bilinear) and map the boxes back, so that 20-px faces are searched
  too, as facedet's and dlib's (upsample 2) rows do.
- dlib-hog: ``dlib.get_frontal_face_detector()`` with upsample 0 and 1 (its window is 80 px, so the
  smallest face found is 80 px at upsample 0, 40 px at 1, 20 px at 2); input RGB; score = its SVM score.

Box conventions differ (dlib and facedet: eyebrows to chin; Haar: a larger square with the forehead).
Every detector is therefore reported twice: "raw" boxes as output, and "calibrated" boxes after a
per-detector map fitted on the *train split only* (4 images, 18 faces): detections matched to truth at
IoU >= 0.3 give medians of width ratio, height ratio and centre offsets (in box widths/heights), applied
to every box. Test-split and astronaut figures with calibration are fair; the "all" figures include the
train images the map was fitted on.

All libraries are limited to --threads threads (default 1: a fair comparison on a shared machine), and
times are CPU time of this process (best of --repeat), which other processes on the machine do not inflate.
In the speed table the detectors take turns: --repeat rounds, each one pass over the images per detector.

--mit-cmu runs instead the benchmark of the field, mit_cmu_frontal (test only: nothing is fitted or chosen on it):
all 130 GIFs of its images/ folder, the 13 without a row in boxes.csv evaluated as images without faces, 510
counted faces (one under 20 px is ignored). For each detector, the ROC (facedet.evaluate.detection_rate_at_fp:
the detection rate reached with at most 10, 31, 50, 65, 78, 95, 167 false positives over the whole set, the
score threshold swept over the pooled detections; greedy one-to-one matching at IoU >= 0.5), its detection rate
and false positives at its own operating point (a second run), and Viola and Jones' published row (IJCV 2004,
Table 3; 507 faces in their count):
- facedet: scanned with the model's threshold lowered by --sweep, so that the ROC goes past its operating
  point (the model's threshold); its boxes as the model maps them (its calibration is part of the model).
- haar: sf 1.1, minNeighbors 1 for the sweep, score = number of neighbours (a whole number: detections with
  equal counts enter together); operating point minNeighbors 3, OpenCV's default.
- dlib-hog: upsample 1 (faces from 40 px; 305 of MIT+CMU's 510 are smaller), detections down to SVM score -1 for
  the sweep; operating point score > 0, dlib's default.
The Haar and dlib boxes are mapped to the dlib convention of the derived boxes by fit_calibration on
--calibration-images images of caltech_webfaces split val (spread evenly over it), from the detections at the
operating point; both the mapped and the raw boxes are reported.

--webfaces-val runs instead caltech_webfaces split val (the set operating points are chosen on, not a test set):
each detector at its operating point (Haar and dlib boxes mapped as for --mit-cmu), its detection rate over all
val faces of at least 20 px, over the faces tilted more than 15 degrees (the eye line, from landmarks.csv) and
over the faces under 30 px, and its false positives (which here include profile and small faces the set does
not annotate).
"""

from __future__ import annotations

import argparse

from _script import DATA, limit_threads, positive_int, require_files  # scripts/ is on sys.path when run

limit_threads()  # before numpy, numba and cv2 load

import copy
import time
from pathlib import Path

import cv2
import numpy as np

from facedet.detector import default_model_path
from facedet.evaluate import detection_rate_at_fp, evaluate_detections, iou, match_detections, read_annotations
from facedet.imageio import read_rgb
from facedet.patches import read_landmarks

from _training_data import print_reliability

# astronaut.png (512x512): measured by hand on a 3x enlargement with a 10-px grid. Top = top of the
# eyebrows (y 87), bottom = chin (y 177), left/right = the cheek outline at eye level (x 181..269):
# the eyebrows-to-chin convention of the dlib annotations.
ASTRONAUT_BOX = (181.0, 87.0, 88.0, 90.0)
MIN_FACE = 20
# MIT+CMU: the false-positive counts of Viola and Jones' Table 3 (IJCV 2004), and their detection rates there
FP_POINTS = (10, 31, 50, 65, 78, 95, 167)
VIOLA_JONES = (0.761, 0.884, 0.914, 0.920, 0.921, 0.929, 0.939)


# ----------------------------------------------------------------------------------------------- detectors
class Haar:
    def __init__(self, scale_factor, min_neighbors, min_size=MIN_FACE, enlarge=False):
        self.cascade = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_frontalface_default.xml")
        if self.cascade.empty():
            raise RuntimeError("haarcascade_frontalface_default.xml not found (opencv-python-headless 4.x ships it)")
        window = min(self.cascade.getOriginalWindowSize())
        # enlarge: the image is scaled up so that a min_size face fills the cascade's window
        self.factor = window / min_size if enlarge and min_size < window else 1.0
        self.smallest = max(min_size, round(window / self.factor))
        self.params = dict(
            scaleFactor=scale_factor, minNeighbors=min_neighbors, minSize=(round(min_size * self.factor),) * 2
        )
        self.name = f"haar sf={scale_factor} mn={min_neighbors}" + (f" x{self.factor:.1f}" if self.factor > 1 else "")

    def __call__(self, rgb, grey):
        if self.factor > 1:
            grey = cv2.resize(grey, None, fx=self.factor, fy=self.factor, interpolation=cv2.INTER_LINEAR)
        rects, neighbours = self.cascade.detectMultiScale2(grey, **self.params)
        if len(rects) == 0:
            return np.zeros((0, 5))
        return np.c_[np.asarray(rects, float) / self.factor, np.asarray(neighbours, float)]


class DlibHog:
    def __init__(self, upsample, threshold=0.0):
        import dlib

        self.detector = dlib.get_frontal_face_detector()
        self.upsample = upsample
        self.threshold = threshold  # dlib's adjust_threshold: detections scoring above it
        self.smallest = 80 // 2**upsample  # its window is 80 px; each upsampling halves the smallest face
        self.name = f"dlib-hog upsample={upsample}" + (f" score>{threshold:g}" if threshold else "")

    def __call__(self, rgb, grey):
        rects, scores, _ = self.detector.run(rgb, self.upsample, self.threshold)
        if not rects:
            return np.zeros((0, 5))
        return np.array(
            [[r.left(), r.top(), r.width(), r.height(), s] for r, s in zip(rects, scores, strict=True)], float
        )


class Facedet:
    def __init__(self, path, name=None):
        from facedet.detector import Detector

        self.detector = Detector.load(path)
        self.smallest = self.detector.min_size
        kind = f"{type(self.detector.classifier).__name__}+{getattr(self.detector, 'features', 'osuna')}"
        self.name = f"{name or f'facedet {Path(path).name}'} ({kind})"

    def __call__(self, rgb, grey):
        d = np.asarray(self.detector.detect(grey), float)
        return d.reshape(-1, 5)

    def with_params(self, **params):
        """A copy scanning with some parameters changed (facedet.Detector.with_params), under the same name."""
        other = copy.copy(self)
        other.detector = self.detector.with_params(**params)
        return other


# ---------------------------------------------------------------------------------------------- calibration
def fit_calibration(dets, annotations, min_iou=0.3):
    """Median box map (width ratio, height ratio, x/y centre offset in box units) from train matches."""
    pairs = []
    for name, (truth, ignore) in annotations.items():
        m = match_detections(dets[name], truth, ignore, iou_threshold=min_iou)
        ok = m["is_tp"]
        pairs.append(np.c_[dets[name][ok, :4], truth[m["matched"][ok]]])
    p = np.concatenate(pairs) if pairs else np.zeros((0, 8))
    if len(p) < 3:
        return None, len(p)
    d, t = p[:, :4], p[:, 4:]
    sw, sh = np.median(t[:, 2] / d[:, 2]), np.median(t[:, 3] / d[:, 3])
    dx = np.median(((t[:, 0] + t[:, 2] / 2) - (d[:, 0] + d[:, 2] / 2)) / d[:, 2])
    dy = np.median(((t[:, 1] + t[:, 3] / 2) - (d[:, 1] + d[:, 3] / 2)) / d[:, 3])
    return (sw, sh, dx, dy), len(p)


def print_box_maps(heading, rows):
    """The table of fit_calibration's maps: rows of (detector name, matched pairs, map or None)."""
    print(f"\n## {heading}\n")
    print("| detector | matched pairs | width x | height x | centre dx (widths) | centre dy (heights) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, n, cal in rows:
        if cal is None:
            print(f"| {name} | {n} | (too few matches: not mapped) | | | |")
        else:
            print(f"| {name} | {n} | {cal[0]:.3f} | {cal[1]:.3f} | {cal[2]:+.3f} | {cal[3]:+.3f} |")


def calibrate(d, cal):
    if cal is None or len(d) == 0:
        return d
    sw, sh, dx, dy = cal
    cx = d[:, 0] + d[:, 2] * (0.5 + dx)
    cy = d[:, 1] + d[:, 3] * (0.5 + dy)
    w, h = d[:, 2] * sw, d[:, 3] * sh
    return np.c_[cx - w / 2, cy - h / 2, w, h, d[:, 4]]


# --------------------------------------------------------------------------------------------------- runs
def run(detector, images, repeat):
    """Detections per image, and the best-of-``repeat`` CPU time and wall time per image in milliseconds.

    The comparisons use CPU time of this process (time.process_time): on a shared machine wall time mostly
    measures the other processes; with every library limited to one thread the two agree when idle. With
    --threads N > 1, CPU time adds up the threads and wall time is what a user waits for.
    """
    dets, cpu, wall = {}, {}, {}
    for name, (rgb, grey) in images.items():
        best, best_wall = np.inf, np.inf
        for _ in range(repeat):
            t0, w0 = time.process_time(), time.perf_counter()
            d = detector(rgb, grey)
            best = min(best, time.process_time() - t0)
            best_wall = min(best_wall, time.perf_counter() - w0)
        dets[name], cpu[name], wall[name] = d, 1e3 * best, 1e3 * best_wall
    return dets, cpu, wall


def load_images(paths):
    out = {}
    for p in paths:
        rgb = read_rgb(p)
        out[Path(p).name] = (rgb, cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY))
    return out


def fmt(x, spec):
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model",
        "--classifier",
        dest="models",
        action="append",
        default=[],
        type=Path,
        help="a saved facedet detector to compare as well (repeatable)",
    )
    ap.add_argument("--no-default", action="store_true", help="skip the default facedet model")
    ap.add_argument(
        "--repeat", type=positive_int, default=3, help="timing: best of N runs per image (default: %(default)s)"
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads for every library (OpenCV, numba, BLAS, dlib; default: %(default)s)",
    )
    ap.add_argument("--data", type=Path, default=DATA, help="the shared/data folder (default: %(default)s)")
    ap.add_argument("--no-dlib", action="store_true", help="skip dlib's HOG detector (a shorter run)")
    ap.add_argument(
        "--mit-cmu",
        action="store_true",
        help="run the MIT+CMU benchmark (ROC points, operating points) instead of the scenes one",
    )
    ap.add_argument(
        "--webfaces-val",
        action="store_true",
        help="run the caltech_webfaces val benchmark (detection rate by tilt and size) instead",
    )
    ap.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        help="--mit-cmu: only the first N images in name order, a quick check whose figures are not "
        "the benchmark's (default: all 130)",
    )
    ap.add_argument(
        "--sweep",
        type=float,
        default=1.0,
        help="--mit-cmu: scan facedet with the model's threshold lowered by this much, so that its "
        "ROC goes past its operating point (default: %(default)s)",
    )
    ap.add_argument(
        "--calibration-images",
        type=positive_int,
        default=300,
        help="--mit-cmu: caltech_webfaces val images the Haar and dlib box maps are fitted on (default: %(default)s)",
    )
    args = ap.parse_args()
    if args.mit_cmu:
        require_files(
            args.data,
            ["mit_cmu_frontal/boxes.csv", "caltech_webfaces/boxes.csv"],
            "the MIT+CMU benchmark and the box-map images",
        )
    elif args.webfaces_val:
        require_files(
            args.data, ["caltech_webfaces/boxes.csv", "caltech_webfaces/landmarks.csv"], "the Web Faces val images"
        )
    else:
        require_files(
            args.data,
            [
                "scenes_annotated_dlib_voc/boxes.csv",
                "misc_faces_skimage/astronaut.png",
                "cbcl_face_db1/cbcl_face_db1_19x19_uint8.npz",
            ],
            "the benchmark images and patches",
        )
    if not args.sweep >= 0:
        ap.error(f"--sweep: expected a number >= 0, got {args.sweep}")
    missing = [str(p) for p in args.models if not p.is_file()]
    if missing:  # a mistyped --model must not leave a benchmark of the others only
        ap.error(f"--model: no such file: {', '.join(missing)}")
    cv2.setNumThreads(args.threads)

    detectors = facedet_detectors(args, ap)
    if args.mit_cmu:
        mit_cmu(detectors, args, ap)
        return
    if args.webfaces_val:
        webfaces_val(detectors, args)
        return
    detectors += [Haar(1.1, 5), Haar(1.2, 3), Haar(1.2, 3, enlarge=True)]
    detectors += [] if args.no_dlib else [DlibHog(0), DlibHog(1)]

    scenes = args.data / "scenes_annotated_dlib_voc"
    ann_all = read_annotations(scenes / "boxes.csv")
    ann_train = read_annotations(scenes / "boxes.csv", split="train")
    ann_test = read_annotations(scenes / "boxes.csv", split="test")
    images = load_images([scenes / "images" / n for n in ann_all])
    astro_path = args.data / "misc_faces_skimage" / "astronaut.png"
    astro = load_images([astro_path])
    ann_astro = {astro_path.name: (np.array([ASTRONAUT_BOX]), np.zeros(1, bool))}

    print(
        f"# {len(images)} scenes images ({sum(len(b) for b, _ in ann_all.values())} faces), astronaut.png; "
        f"threads={args.threads}, "
        f"CPU ms, best of {args.repeat}"
    )
    scene_rows, astro_rows, cal_rows = [], [], []
    for det in detectors:
        dets, ms, _ = run(det, images, args.repeat)
        adets, ams, _ = run(det, astro, args.repeat)
        cal, n_pairs = fit_calibration({k: dets[k] for k in ann_train}, ann_train)
        cal_rows.append((det.name, n_pairs, cal))
        for boxes, f in (("raw", lambda d: d), ("calibrated", lambda d, cal=cal: calibrate(d, cal))):
            if boxes == "calibrated" and cal is None:
                continue
            for split, ann in (("test", ann_test), ("all", ann_all)):
                r = evaluate_detections({k: f(dets[k]) for k in ann}, ann)
                scene_rows.append((split, det.name, boxes, r, np.mean([ms[k] for k in ann])))
            a = f(adets[astro_path.name])
            r = evaluate_detections({astro_path.name: a}, ann_astro)
            best = float(iou(a, ann_astro[astro_path.name][0]).max()) if len(a) else 0.0
            astro_rows.append((det.name, boxes, r, best, ams[astro_path.name]))
        print(f"#   {det.name}: done", flush=True)

    print_box_maps("Box calibration fitted on the train split (4 images, 18 faces; matches at IoU >= 0.3)", cal_rows)

    for split, title in (
        ("test", "test split: 5 images, 25 faces"),
        ("all", "all 9 images, 43 faces (calibrated rows include the 4 calibration images)"),
    ):
        print(f"\n## scenes_annotated_dlib_voc, {title}; IoU >= 0.5\n")
        print("| detector | boxes | detection rate | false positives | AP | ms / image |")
        print("|---|---|---:|---:|---:|---:|")
        for s, name, boxes, r, t in scene_rows:
            if s == split:
                print(
                    f"| {name} | {boxes} | {r.detection_rate:.3f} ({round(r.detection_rate * r.n_truth)}/"
                    f"{r.n_truth}) | {r.false_positives} | {fmt(r.average_precision, '.3f')} | {t:.1f} |"
                )

    print("\n## astronaut.png (512x512, one face, hand-measured box); hit = IoU >= 0.5\n")
    print("| detector | boxes | face found | best IoU | other boxes | ms |")
    print("|---|---|---|---:|---:|---:|")
    for name, boxes, r, best, t in astro_rows:
        print(
            f"| {name} | {boxes} | {'yes' if r.detection_rate == 1 else 'no'} | {best:.2f} | "
            f"{r.false_positives} | {t:.1f} |"
        )

    speed(detectors, images, args)
    window_cost(detectors, args)


def facedet_detectors(args, ap):
    """The default model (unless --no-default) and every --model, as Facedet detectors."""
    detectors = []
    model_paths = [] if args.no_default else [("facedet default", default_model_path())]
    model_paths += [(None, p) for p in args.models]
    for label, path in model_paths:
        if not Path(path).exists():
            print(f"# skipped {label}: no model file at {path}")
            continue
        try:
            detectors.append(Facedet(path, label))
        except Exception as exc:
            if label is None:  # a --model the user named: a usage error, as a missing file is
                ap.error(f"--model {path}: {type(exc).__name__}: {exc}")
            print(f"# skipped {label}: {type(exc).__name__}: {exc}")  # the benchmark of the others still runs
    return detectors


def mit_cmu(facedets, args, ap):
    """The MIT+CMU tables (see the module docstring): each detector's ROC points over the set, its operating
    point, and the box maps fitted on caltech_webfaces val."""
    folder = args.data / "mit_cmu_frontal"
    listed = read_annotations(folder / "boxes.csv")
    names = sorted(p.name for p in (folder / "images").iterdir() if p.suffix.lower() == ".gif")
    absent = sorted(set(listed) - set(names))
    if absent:  # a folder short of images would give figures of another set
        ap.error(
            f"{folder / 'images'} lacks {len(absent)} images that boxes.csv lists ({', '.join(absent[:3])}"
            f"{', ...' if len(absent) > 3 else ''})"
        )
    no_face = (np.zeros((0, 4)), np.zeros(0, bool))
    ann = {n: listed.get(n, no_face) for n in names[: args.limit]}
    n_free = sum(n not in listed for n in ann)
    n_faces = sum(int((~ignore).sum()) for _, ignore in ann.values())
    n_ignored = sum(int(ignore.sum()) for _, ignore in ann.values())
    images = load_images([folder / "images" / n for n in ann])

    val, val_images = calibration_images(args)

    # (name, swept, at the operating point, what is swept, fit a box map)
    runs = []
    for det in facedets:
        thr = det.detector.threshold
        runs.append(
            (
                det.name,
                det.with_params(threshold=thr - args.sweep),
                det,
                f"threshold from {thr - args.sweep:+.2f} (op: {thr:+.2f})",
                False,
            )
        )
    runs.append(("haar sf=1.1 (frontalface_default)", Haar(1.1, 1), Haar(1.1, 3), "neighbours from 1 (op: 3)", True))
    if not args.no_dlib:
        runs.append(("dlib-hog upsample=1", DlibHog(1, threshold=-1.0), DlibHog(1), "score from -1 (op: > 0)", True))

    scope = (
        f"the first {len(ann)} of {len(names)} images (--limit: not the benchmark's figures)"
        if args.limit
        else f"all {len(ann)} images"
    )
    print(
        f"# MIT+CMU frontal: {scope}, {n_free} without faces, {n_faces} faces ({n_ignored} ignored); box maps "
        f"from {len(val)} caltech_webfaces val images; threads={args.threads}",
        flush=True,
    )
    rows, maps, calibrated = [], [], []
    for name, swept, operating, sweep, fit in runs:
        t0 = time.process_time()
        dets_swept, _, _ = run(swept, images, 1)
        dets_op, _, _ = run(operating, images, 1)
        seconds = time.process_time() - t0
        cal = None
        if fit:
            val_dets, _, _ = run(operating, val_images, 1)
            cal, n_pairs = fit_calibration(val_dets, val)
            maps.append((name, n_pairs, cal))
        for boxes in ("mapped", "raw") if fit else ("model's",):
            f = (lambda d, cal=cal: calibrate(d, cal)) if boxes == "mapped" else (lambda d: d)
            r_swept = evaluate_detections({k: f(d) for k, d in dets_swept.items()}, ann)
            r_op = evaluate_detections({k: f(d) for k, d in dets_op.items()}, ann)
            rows.append((name, boxes, sweep, detection_rate_at_fp(r_swept, FP_POINTS), r_swept.false_positives, r_op))
        print(f"#   {name}: {seconds:.0f} s CPU on the MIT+CMU images (both runs)", flush=True)
        if getattr(getattr(operating, "detector", None), "platt", None) is not None:
            calibrated.append((name, operating.detector, dets_swept))

    print_box_maps(
        f"Box maps fitted on {len(val)} caltech_webfaces val images (detections at the operating point "
        "matched at IoU >= 0.3)",
        maps,
    )

    print(
        f"\n## MIT+CMU frontal: detection rate at a number of false positives over {scope}, {n_free} without "
        f"faces, {n_faces} faces (IoU >= 0.5)\n"
    )
    print("| detector | boxes | swept | " + " | ".join(map(str, FP_POINTS)) + " | operating point |")
    print("|---|---|---|" + "---:|" * len(FP_POINTS) + "---|")
    short = False
    for name, boxes, sweep, at, end, r in rows:
        # \*: the swept detections end below this count, so the figure is the rate of all of them
        cells = [f"{100 * a:.1f}%" + ("\\*" if k > end else "") for a, k in zip(at, FP_POINTS, strict=True)]
        short |= any(k > end for k in FP_POINTS)
        hits = round(r.detection_rate * r.n_truth)
        print(
            f"| {name} | {boxes} | {sweep} | "
            + " | ".join(cells)
            + f" | {100 * r.detection_rate:.1f}% ({hits}/{r.n_truth}), {r.false_positives} FP |"
        )
    print(
        "| Viola-Jones, published (IJCV 2004, Table 3; 507 faces) | | | "
        + " | ".join(f"{100 * v:.1f}%" for v in VIOLA_JONES)
        + " | |"
    )
    if short:
        print("\n\\* the swept detections end below this number of false positives: the rate of all of them")
    for name, detector, dets in calibrated:
        reliability(name, detector, dets, ann)


def reliability(name, detector, dets, ann):
    """The confidence's reliability on these images (reported, never tuned on): confidence bins of the swept
    detections against the fraction that match a face (IoU >= 0.5; those matching an ignored face left out)."""
    conf, is_face = [], []
    for k, d in dets.items():
        truth, ignore = ann[k]
        m = match_detections(d, truth, ignore)
        conf.append(detector.confidence(d[~m["is_ignored"], 4]))
        is_face.append(m["is_tp"][~m["is_ignored"]])
    print_reliability(
        f"{name}: confidence against the fraction of faces, at the swept threshold",
        np.concatenate(conf),
        np.concatenate(is_face),
    )


def calibration_images(args):
    """The --calibration-images caltech_webfaces val images (spread evenly over the split) the Haar and dlib
    box maps are fitted on: (annotations, images)."""
    web = args.data / "caltech_webfaces"
    val = read_annotations(web / "boxes.csv", split="val")
    names = list(val)
    pick = np.unique(np.linspace(0, len(names) - 1, min(args.calibration_images, len(names))).round())
    val = {names[int(i)]: val[names[int(i)]] for i in pick}
    return val, load_images([web / "images" / n for n in val])


def webfaces_val(facedets, args):
    """The caltech_webfaces val table (see the module docstring): detection rate overall, on tilted faces and
    on small faces, and false positives, each detector at its operating point."""
    web = args.data / "caltech_webfaces"
    ann = read_annotations(web / "boxes.csv", split="val")
    points = read_landmarks(web / "landmarks.csv", split="val")
    names = list(ann)[: args.limit]
    ann = {n: ann[n] for n in names}
    # the landmarks' rows are the boxes' rows, face for face
    tilt = {
        n: np.degrees(
            np.abs(np.arctan2(points[n][:, 1, 1] - points[n][:, 0, 1], points[n][:, 1, 0] - points[n][:, 0, 0]))
        )
        for n in names
    }
    images = load_images([web / "images" / n for n in names])
    cal_ann, cal_images = calibration_images(args)
    runs = [(det.name, det, False) for det in facedets] + [("haar sf=1.1 mn=3", Haar(1.1, 3), True)]
    runs += [] if args.no_dlib else [("dlib-hog upsample=1", DlibHog(1), True)]
    groups = {
        "all": lambda n, b: np.ones(len(b), bool),
        "tilted > 15 deg": lambda n, b: tilt[n] > 15,
        "under 30 px": lambda n, b: b[:, 2] < 30,
    }
    print(
        f"# caltech_webfaces val: {len(names)} images; Haar and dlib box maps from {len(cal_ann)} of them; "
        f"threads={args.threads}",
        flush=True,
    )
    print("\n| detector | " + " | ".join(f"DR {g}" for g in groups) + " | false positives | ms / image |")
    print("|---|" + "---:|" * (len(groups) + 2))
    for name, det, fit in runs:
        dets, cpu, _ = run(det, images, 1)
        if fit:
            cal, _ = fit_calibration(run(det, cal_images, 1)[0], cal_ann)
            dets = {n: calibrate(d, cal) for n, d in dets.items()}
        hit = {n: np.zeros(len(ann[n][0]), bool) for n in names}
        fps = 0
        for n in names:
            truth, ignore = ann[n]
            m = match_detections(dets[n], truth, ignore)
            hit[n][m["matched"][m["is_tp"]]] = True
            fps += int((~m["is_tp"] & ~m["is_ignored"]).sum())
        cells = []
        for member in groups.values():
            sel = [(hit[n], member(n, ann[n][0]) & ~ann[n][1]) for n in names]
            k, total = sum(int(h[s].sum()) for h, s in sel), sum(int(s.sum()) for _, s in sel)
            cells.append(f"{100 * k / max(total, 1):.1f}% ({k}/{total})")
        print(f"| {name} | " + " | ".join(cells) + f" | {fps} | {np.mean(list(cpu.values())):.0f} |", flush=True)


def window_cost(detectors, args):
    """Per-window cost of each facedet model's features and classifier on the 24,044 CBCL test patches:
    microseconds per window (CPU, best of --repeat), ratio to the default model's, and the patch-level
    ROC AUC and detection rate at 1% false positives (the cascade not applied). The polynomial SVM scores a
    283x283 quadratic form, PmSVM its (324 x 1000) lookup table."""
    from facedet.evaluate import detection_rate_at_fpr, roc_auc

    d = np.load(args.data / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    X, y = d["X_test"], d["y_test"]
    rows = []
    for det in detectors:
        if not isinstance(det, Facedet):
            continue
        D = det.detector
        D.score_features(D.window_features(X))  # compile and warm up (caches, page faults) at full size, untimed
        t_feat = t_score = np.inf
        for _ in range(args.repeat):
            t0 = time.process_time()
            F = D.window_features(X)
            t1 = time.process_time()
            f = D.score_features(F)
            t2 = time.process_time()
            t_feat, t_score = min(t_feat, t1 - t0), min(t_score, t2 - t1)
        rows.append(
            (
                det.name,
                F.shape[1],
                1e6 * t_feat / len(X),
                1e6 * t_score / len(X),
                roc_auc(f, y),
                detection_rate_at_fpr(f, y, 0.01),
            )
        )
    if not rows:
        return
    ref = rows[0][2] + rows[0][3]
    print(
        f"\n## Per window: CBCL test patches ({len(X)}, {int(y.sum())} faces), {args.threads} thread(s), "
        f"CPU us per window, best of {args.repeat}\n"
    )
    print(
        "| detector | features | features us | classifier us | total us | ratio to the first | patch ROC AUC "
        "| DR at 1% FP |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, p, tf, ts, auc, dr in rows:
        print(f"| {name} | {p} | {tf:.2f} | {ts:.2f} | {tf + ts:.2f} | {(tf + ts) / ref:.2f} | {auc:.3f} | {dr:.3f} |")


def speed(detectors, images, args):
    """ms per 640x480 image over all scales from 20-px faces up, ratio to the Haar cascade (sf 1.2) as it runs
    by default (from 24 px) and enlarged to reach 20 px."""
    small = {
        k: (
            cv2.resize(rgb, (640, 480), interpolation=cv2.INTER_AREA),
            cv2.resize(grey, (640, 480), interpolation=cv2.INTER_AREA),
        )
        for k, (rgb, grey) in images.items()
    }
    runs = [Haar(1.2, 3), Haar(1.2, 3, enlarge=True), Haar(1.1, 5), Haar(1.1, 5, enlarge=True)]
    for det in detectors:
        if isinstance(det, Facedet):
            if getattr(det.detector, "min_size", MIN_FACE) != MIN_FACE:
                print(f"# {det.name}: speed run at min_size {MIN_FACE} (model default {det.detector.min_size})")
                det.detector = det.detector.with_params(min_size=MIN_FACE)
                det.smallest = MIN_FACE
            runs.append(det)
    runs += [] if args.no_dlib else [DlibHog(2), DlibHog(1), DlibHog(0)]
    # the detectors take turns, one pass over the images each per round, and each image keeps its best time over
    # the rounds: when a shared machine's speed drifts over minutes, every detector sees the same drift
    cpu = {det.name: np.full(len(small), np.inf) for det in runs}
    wall = {det.name: np.full(len(small), np.inf) for det in runs}
    for _ in range(args.repeat):
        for det in runs:
            _, ms, w = run(det, small, 1)
            cpu[det.name] = np.minimum(cpu[det.name], list(ms.values()))
            wall[det.name] = np.minimum(wall[det.name], list(w.values()))
    times = {k: float(v.mean()) for k, v in cpu.items()}
    walls = {k: float(v.mean()) for k, v in wall.items()}
    ref, ref20 = times[runs[0].name], times[runs[1].name]
    print(
        f"\n## Speed: {len(small)} scenes images resized to 640x480, faces from {MIN_FACE} px up "
        f"(each detector's smallest face in the table), best of {args.repeat}, {args.threads} thread(s)\n"
    )
    print(
        f"| detector | smallest face | CPU ms / image | ratio to {runs[0].name} | ratio to {runs[1].name} | "
        "wall ms / image |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for det in runs:
        print(
            f"| {det.name} | {det.smallest:g} px | {times[det.name]:.1f} | {times[det.name] / ref:.2f} | "
            f"{times[det.name] / ref20:.2f} | {walls[det.name]:.1f} |"
        )


if __name__ == "__main__":
    main()
