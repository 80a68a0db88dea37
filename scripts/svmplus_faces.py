"""Privileged information for the face classifier: SVM+ (Li et al. CVPR 2016) against the SVM, on windows.

    PYTHONPATH=. python scripts/svmplus_faces.py [--n-train 1000] [--model facedet/models/default_detector.npz]

At training time a face of a photo is seen at full resolution; the scan sees it as a 19x19 window. SVM+ lets
the full-resolution view model each training window's slack (how hard it is) without being needed at test
time. Main features x: the detector's 283 Osuna features of the 19x19 window. Privileged features x*: the HOG
(facedet.features.hog_features) of the four 19x19 quarters of the same window cut at twice the resolution
(38x38), 1,296 numbers. Only windows of at least 38 px are used, so that x* has the detail x lacks.

- Faces: caltech_webfaces, cut by their landmarks in the framing of the detector (facedet.patches.
  landmark_windows, the photo's own tilt); train from split train, test from split val.
- Non-faces: hard negatives, the windows of at least 38 px that the shipped detector scores highest on the
  face-free images (nonface_scenes; wu_rare_event images 0, 5, 10, ... for the test, the rest for training),
  at most 40 per image.
- Models, each chosen on a validation third of the training windows (C in 1, 10, 100; SVM+ gamma in 0.1, 1, 10;
  Gaussian width factor 0.5, 1, 2 of the mean-distance width): SVM (svmcore.SVC, rbf) without x*, KernelSVMPlus
  (rbf, rbf on x*) with it, and the detector's poly-2 SVC for reference; then refitted on all training windows.
- Figures on the test windows: ROC AUC and the detection rate at 1% and 5% false-positive rate (the CBCL
  protocol of Osuna et al.).
"""

from __future__ import annotations

from _script import DATA, limit_threads, positive_int, quiet_convergence, require_files  # scripts/ on sys.path

limit_threads()

import argparse
import itertools
import time
from pathlib import Path

import numpy as np

from facedet.detector import Detector, default_model_path
from facedet.evaluate import detection_rate_at_fpr, roc_auc
from facedet.features import hog_features, window_features
from facedet.imageio import read_grey
from facedet.patches import image_files, landmark_boxes, landmark_windows, read_landmarks, to_window
from svmcore import SVC
from svmcore.svmplus import KernelSVMPlus, mean_distance_gamma

SIDE = 38  # the privileged view: twice the window's resolution
QUARTERS = ((-0.5, -0.5), (0.5, -0.5), (-0.5, 0.5), (0.5, 0.5))  # quarter centres, in quarter sides


def face_views(data, split, n, framing, rng):
    """(19x19 windows (n, 19, 19), privileged features (n, 1296)) of n faces of caltech_webfaces ``split``."""
    root = data / "caltech_webfaces"
    points = read_landmarks(root / "landmarks.csv", split=split)
    names = list(points)
    rng.shuffle(names)
    windows, star = [], []
    for name in names:
        p = points[name]
        p = p[landmark_boxes(p)[:, 2] / framing[2] >= SIDE]
        if not len(p):
            continue
        grey = read_grey(root / "images" / name)
        w, _ = landmark_windows(grey, p, framing)
        # the four quarters at twice the resolution: windows of half the side (zoom 2) around the quarter centres
        q = [landmark_windows(grey, p, framing, zoom=2.0, offset=o)[0] for o in QUARTERS]
        windows.append(w)
        star.append(np.concatenate([hog_features(x) for x in q], axis=1))
        if sum(len(x) for x in windows) >= n:
            break
    return np.concatenate(windows)[:n], np.concatenate(star)[:n]


def hard_negatives(detector, images, per_image):
    """(19x19 windows, privileged features) of the highest-scoring windows of at least 38 px of face-free images."""
    det = detector.with_params(threshold=-1.0, min_size=SIDE * detector.box[2], refine=None)
    windows, star = [], []
    for grey in images:
        boxes = det.scan_windows(grey)
        boxes = boxes[np.argsort(-boxes[:, 4])[:per_image]]
        for x, y, s in boxes[:, :3]:
            x, y, s = int(round(x)), int(round(y)), int(round(s))
            crop = grey[y : y + s, x : x + s]
            if crop.shape != (s, s):
                continue
            h = s // 2
            windows.append(to_window(crop))
            star.append(
                np.concatenate(
                    [
                        hog_features(to_window(crop[r : r + h, c : c + h])[None])[0]
                        for r, c in ((0, 0), (0, h), (h, 0), (h, h))
                    ]
                )
            )
    return np.stack(windows), np.stack(star)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA, help="shared/data folder (default: %(default)s)")
    ap.add_argument(
        "--model",
        type=Path,
        default=default_model_path(),
        help="the detector whose framing and hard negatives are used (default: the shipped one)",
    )
    ap.add_argument(
        "--n-train",
        type=positive_int,
        default=1000,
        help="training faces, and at most as many training non-faces (default: %(default)s)",
    )
    ap.add_argument("--threads", default="1", help="threads for numba and BLAS (default: %(default)s)")
    args = ap.parse_args()
    require_files(args.data, ["caltech_webfaces/landmarks.csv"], "the Web Faces landmarks")
    rng = np.random.default_rng(0)
    det = Detector.load(args.model)
    framing = det.box
    paths = image_files(args.data / "nonface_scenes", recursive=True)
    wu = [p for p in paths if p.parent.name == "wu_rare_event"]
    test_paths = set(wu[::5])
    t0 = time.perf_counter()
    Ftr, Str = face_views(args.data, "train", args.n_train, framing, rng)
    Fte, Ste = face_views(args.data, "val", args.n_train, framing, rng)
    Ntr, NStr = hard_negatives(det, [read_grey(p) for p in paths if p not in test_paths], 40)
    Nte, NSte = hard_negatives(det, [read_grey(p) for p in sorted(test_paths)], 40)
    keep = rng.permutation(len(Ntr))[: args.n_train]
    Ntr, NStr = Ntr[keep], NStr[keep]
    print(
        f"windows: train {len(Ftr)} faces + {len(Ntr)} hard negatives, test {len(Fte)} + {len(Nte)} "
        f"({time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    X, Z = window_features(np.concatenate([Ftr, Ntr])), np.concatenate([Str, NStr])
    y = np.r_[np.ones(len(Ftr)), np.zeros(len(Ntr))].astype(int)
    Xte, yte = window_features(np.concatenate([Fte, Nte])), np.r_[np.ones(len(Fte)), np.zeros(len(Nte))].astype(int)
    fit_idx = rng.permutation(len(y))
    val_idx, fit_idx = fit_idx[: len(y) // 3], fit_idx[len(y) // 3 :]
    g = mean_distance_gamma(X)
    grids = {
        "SVM rbf (no x*)": (
            lambda C, width, **_: SVC(C=C, kernel="rbf", gamma=width * g),
            {"C": (1, 10, 100), "width": (0.5, 1, 2)},
            False,
        ),
        "SVM+ rbf, x* = HOG at 2x": (
            lambda C, width, gamma: KernelSVMPlus(C=C, gamma=gamma, kernel_gamma=width * g),
            {"C": (1, 10, 100), "width": (0.5, 1, 2), "gamma": (0.1, 1, 10)},
            True,
        ),
        "SVM poly-2 (the detector's kernel)": (
            lambda C, **_: SVC(C=C, kernel="poly", degree=2, gamma="auto", coef0=1.0),
            {"C": (1, 10, 100)},
            False,
        ),
    }
    print("\n| model | chosen | val AUC | test AUC | test DR at 1% FPR | test DR at 5% FPR | fit s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, (make, grid, plus) in grids.items():
        best = None
        for values in itertools.product(*grid.values()):
            p = dict(zip(grid, values, strict=True))
            with quiet_convergence():
                m = make(**p)
                m.fit(X[fit_idx], Z[fit_idx], y[fit_idx]) if plus else m.fit(X[fit_idx], y[fit_idx])
            auc = roc_auc(m.decision_function(X[val_idx]), y[val_idx])
            if best is None or auc > best[0]:
                best = (auc, p)
        t = time.perf_counter()
        with quiet_convergence():
            m = make(**best[1])
            m.fit(X, Z, y) if plus else m.fit(X, y)
        fit_s = time.perf_counter() - t
        s = m.decision_function(Xte)
        print(
            f"| {name} | {', '.join(f'{k} {v:g}' for k, v in best[1].items())} | {best[0]:.4f} | "
            f"{roc_auc(s, yte):.4f} | {detection_rate_at_fpr(s, yte, 0.01):.3f} | "
            f"{detection_rate_at_fpr(s, yte, 0.05):.3f} | {fit_s:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
