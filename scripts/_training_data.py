"""The data both detector-training scripts use: CBCL train patches, the face-free negative images and the
annotated scenes (train and test splits), plus the per-split evaluation of a detector on those scenes."""
from __future__ import annotations

import tempfile

import cv2
import numpy as np

from facedet.evaluate import evaluate_detections, read_annotations
from facedet.imageio import read_grey
from facedet.patches import image_files, load_npz

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


def load_training_data(data):
    """(X, y, negatives, ann, images) from ../shared/data: CBCL train windows and labels, the grey
    nonface_scenes images, the scene annotations per split and the scene images by name."""
    X, y = load_npz(data / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz", "train")
    negatives = [read_grey(p) for p in image_files(data / "nonface_scenes", recursive=True)]
    scenes = data / "scenes_annotated_dlib_voc"
    ann = {s: read_annotations(scenes / "boxes.csv", split=s) for s in ("train", "test")}
    images = {name: read_grey(scenes / "images" / name) for s in ann for name in ann[s]}
    print(f"patches: {int(y.sum())} faces, {int((y == 0).sum())} non-faces; {len(negatives)} negative images")
    return X, y, negatives, ann, images


def lfw_faces(data, side=75):
    """The 100 LFW faces of misc_faces_skimage/lfw_subset.npy as (image, box) items: each 25x25 crop
    (forehead to chin) enlarged to side x side uint8, its box the whole image."""
    faces = np.load(data / "misc_faces_skimage" / "lfw_subset.npy")[:100]
    return [(cv2.resize(np.rint(f * 255).astype(np.uint8), (side, side), interpolation=cv2.INTER_CUBIC),
             np.array([[0.0, 0.0, side, side]])) for f in faces]


def evaluate_scenes(det, ann, images):
    """{split: (detection rate, false positives, average precision)} of ``det`` on the annotated scenes."""
    out = {}
    for split, a in ann.items():
        res = evaluate_detections({n: det.detect(images[n]) for n in a}, a)
        out[split] = (res.detection_rate, res.false_positives, res.average_precision)
    return out


def fmt_box(box):
    """A detector's window-to-box map (dx, dy, scale) for the training logs."""
    return f"dx={box[0]:+.3f} dy={box[1]:+.3f} scale={box[2]:.3f}"


def log_round(info):
    """bootstrap callback: one line per round (support vectors only for a classifier that has them)."""
    if info.get("event") == "round":
        r = info["round"]
        svs = f"{r.n_support} SVs, " if r.n_support else ""
        scenes = "".join(f"; {split} DR {dr:.2f} / FP {fp} / AP {ap:.2f}" for split, (dr, fp, ap) in r.scores.items())
        print(f"  round {r.round}: {r.n_nonfaces} non-faces, {svs}{r.fp_windows} FP windows / {r.fp_detections} "
              f"FP detections on negatives{scenes}", flush=True)


def report(det, ops, table, evaluate):
    """Print the operating points considered (``choose_threshold`` rows), the one chosen, the per-round
    bootstrapping table ((name, facedet.bootstrap.Round) pairs) and the final figures of ``det``."""
    print("  operating points on train split + negatives (threshold, min_neighbors, hits, false positives):")
    print("   ", " ".join(f"({t + 0.0:+.1f}, {k}, {h}, {f})" for t, k, h, f in ops))  # + 0.0: no "-0.0"
    print(f"  chosen threshold {det.threshold:+.2f}, min_neighbors {det.min_neighbors} "
          "(top of the longest max-F1 run)\n")
    print("| round | non-face patches | SVs | FP windows on negatives | FP detections on negatives "
          "| train split DR / FP | test split DR / FP / AP |")
    print("|---|---|---|---|---|---|---|")
    for name, r in table:
        tr, te = r.scores["train"], r.scores["test"]
        print(f"| {name} | {r.n_nonfaces} | {r.n_support or '-'} | {r.fp_windows} | {r.fp_detections} "
              f"| {tr[0]:.2f} / {tr[1]} | {te[0]:.2f} / {te[1]} / {te[2]:.2f} |")
    final = evaluate(det)
    print(f"\nfinal (threshold {det.threshold:+.2f}, min_neighbors {det.min_neighbors}): train DR "
          f"{final['train'][0]:.2f} FP {final['train'][1]}; test DR {final['test'][0]:.2f} FP {final['test'][1]} "
          f"AP {final['test'][2]:.2f}")
