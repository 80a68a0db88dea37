"""The data both detector-training scripts use: CBCL train patches, the face-free negative images and the
annotated scenes (train and test splits), plus the per-split evaluation of a detector on those scenes."""

from __future__ import annotations

import tempfile
import time

import numpy as np

from facedet.evaluate import evaluate_detections, read_annotations, reliability_table
from facedet.imageio import read_grey
from facedet.patches import image_files, load_landmark_faces, load_npz

from _script import require_data, require_files  # scripts/ is on sys.path when run


def check_args(ap, args, extra_files=()):
    """Usage errors before minutes of training: --out must be a writable file path (a file is created and
    removed in its folder: os.access says yes to root even on a read-only file system), --out not one of the
    input files, --rounds >= 0, --data a folder holding the files training reads (``extra_files``: those of one
    script only)."""
    out = args.out
    if out.is_dir() or not out.parent.is_dir() or not _can_create_in(out.parent):
        ap.error(f"--out {out}: not a writable file path (its folder must exist)")
    if args.rounds < 0:
        ap.error(f"--rounds: expected >= 0, got {args.rounds}")
    require_data(args.data)
    inputs = ["cbcl_face_db1/cbcl_face_db1_19x19_uint8.npz", "scenes_annotated_dlib_voc/boxes.csv", *extra_files]
    require_files(args.data, inputs, "the training data")
    if any(out.resolve() == (args.data / f).resolve() for f in inputs):
        ap.error(f"--out {out}: is an input data file; it would be overwritten")
    if not (args.data / "nonface_scenes").is_dir():
        ap.error(f"missing data folder {args.data / 'nonface_scenes'} (the face-free images for bootstrapping)")


def _can_create_in(folder):
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            return True
    except OSError:
        return False


def load_training_data(data, held_out_every=5):
    """(X, y, negatives, held_out, ann, images) from ../shared/data: CBCL train windows and labels, the grey
    face-free images of nonface_scenes (all subfolders) for bootstrapping, less one in ``held_out_every`` of
    wu_rare_event kept out (held_out) to count the false positives of an operating point, the scene
    annotations per split and the scene images by name."""
    X, y = load_npz(data / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz", "train")
    paths = image_files(data / "nonface_scenes", recursive=True)
    wu = [p for p in paths if p.parent.name == "wu_rare_event"]
    kept_out = set(wu[::held_out_every])
    negatives = [read_grey(p) for p in paths if p not in kept_out]
    held_out = [read_grey(p) for p in sorted(kept_out)]
    scenes = data / "scenes_annotated_dlib_voc"
    ann = {s: read_annotations(scenes / "boxes.csv", split=s) for s in ("train", "test")}
    images = {name: read_grey(scenes / "images" / name) for s in ann for name in ann[s]}
    print(
        f"patches: {int(y.sum())} faces, {int((y == 0).sum())} non-faces; {len(negatives)} negative images "
        f"(+ {len(held_out)} held out)"
    )
    return X, y, negatives, held_out, ann, images


def webfaces_windows(data, framing, rotations, seed=0):
    """Face windows (n, 19, 19) uint8 of caltech_webfaces split train (facedet.patches.load_landmark_faces)."""
    root = data / "caltech_webfaces"
    windows, _, faces = load_landmark_faces(
        root / "landmarks.csv", root / "images", framing, split="train", rotations=rotations, seed=seed
    )
    print(f"Web Faces train: {faces.max() + 1} faces -> {len(windows)} windows", flush=True)
    return windows


def webfaces_val(data):
    """caltech_webfaces split val as (grey image, truth boxes (m, 4)) items, faces marked ignore left out."""
    root = data / "caltech_webfaces"
    ann = read_annotations(root / "boxes.csv", split="val")
    return [(read_grey(root / "images" / name), boxes[~ignore]) for name, (boxes, ignore) in ann.items()]


def evaluate_scenes(det, ann, images):
    """{split: (detection rate, false positives, average precision)} of ``det`` on the annotated scenes."""
    return evaluate_sets(det, {split: [(images[n], a[n][0]) for n in a] for split, a in ann.items()})


def evaluate_sets(det, sets):
    """{name: (detection rate, false positives, average precision)} of ``det`` on named lists of (grey image,
    truth boxes (m, 4)) items."""
    out = {}
    for name, items in sets.items():
        dets = {str(k): det.detect(img) for k, (img, _) in enumerate(items)}
        truth = {
            str(k): (np.asarray(t, float).reshape(-1, 4), np.zeros(len(t), bool)) for k, (_, t) in enumerate(items)
        }
        res = evaluate_detections(dets, truth)
        out[name] = (res.detection_rate, res.false_positives, res.average_precision)
    return out


def fmt_box(box):
    """A detector's window-to-box map (dx, dy, scale) for the training logs."""
    return f"dx={box[0]:+.3f} dy={box[1]:+.3f} scale={box[2]:.3f}"


def log_round(info):
    """bootstrap callback: a progress line every 50 scanned images, and one line per round (support vectors
    only for a classifier that has them)."""
    if info.get("event") == "scan" and (info["image"] % 50 == 0 or info["image"] == info["n_images"]):
        print(f"    {time.strftime('%H:%M:%S')} scanned {info['image']}/{info['n_images']} negative images", flush=True)
    if info.get("event") == "round":
        r = info["round"]
        svs = f"{r.n_support} SVs, " if r.n_support else ""
        scenes = "".join(f"; {split} DR {dr:.2f} / FP {fp} / AP {ap:.2f}" for split, (dr, fp, ap) in r.scores.items())
        print(
            f"  {time.strftime('%H:%M:%S')} round {r.round}: {r.n_nonfaces} non-faces, {svs}{r.fp_windows} FP windows"
            f" / {r.fp_detections} FP detections on negatives{scenes}",
            flush=True,
        )


def report(det, ops, table, evaluate):
    """Print the operating points considered (``choose_threshold`` rows), the one chosen, the per-round
    bootstrapping table ((name, facedet.bootstrap.Round) pairs, with the figures of ``evaluate``) and the final
    figures of ``det``."""
    print("  operating points (threshold, min_neighbors, hits, false positives):")
    print("   ", " ".join(f"({t + 0.0:+.1f}, {k}, {h}, {f})" for t, k, h, f in ops))  # + 0.0: no "-0.0"
    print(
        f"  chosen threshold {det.threshold:+.2f}, min_neighbors {det.min_neighbors} (top of the longest max-F1 run)\n"
    )
    final = evaluate(det)
    print(
        f"\nfinal (threshold {det.threshold:+.2f}, min_neighbors {det.min_neighbors}): "
        + "; ".join(f"{s} DR {dr:.2f} FP {fp} AP {ap:.2f}" for s, (dr, fp, ap) in final.items())
    )
    if not table:
        return
    sets = list(table[0][1].scores)
    print(
        "| round | non-face patches | SVs | FP windows on negatives | FP detections on negatives | "
        + " | ".join(f"{s} DR / FP / AP" for s in sets)
        + " |"
    )
    print("|---|---|---|---|---|" + "---|" * len(sets))
    for name, r in table:
        print(
            f"| {name} | {r.n_nonfaces} | {r.n_support or '-'} | {r.fp_windows} | {r.fp_detections} | "
            + " | ".join(f"{dr:.2f} / {fp} / {ap:.2f}" for dr, fp, ap in (r.scores[s] for s in sets))
            + " |"
        )


def print_reliability(title, confidence, is_face, bins=10):
    """A reliability table (facedet.evaluate.reliability_table) as markdown under ``title``, with its expected
    calibration error."""
    rows, ece = reliability_table(confidence, is_face, bins)
    print(
        f"\n## {title}: {len(confidence)} detections, {int(np.sum(is_face))} faces; expected calibration error "
        f"{ece:.3f}\n"
    )
    print("| confidence | detections | mean confidence | fraction faces |\n|---|---:|---:|---:|")
    for lo, hi, n, conf, frac in rows:
        print(f"| {lo:.1f}-{hi:.1f} | {n} | {conf:.3f} | {frac:.3f} |")
