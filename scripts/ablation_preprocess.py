"""Ablation of the window preprocessing on the CBCL Face Database #1 test set (24,044 patches).

For each setting of the three steps of Osuna, Freund, Girosi (1997) sec. 5 / Sung and Poggio (1994) --
mask, illumination-plane subtraction, histogram equalization: all on, each one off, all off -- train a
degree-2 polynomial SVM, K(x, z) = (gamma x.z + 1)^2, on the CBCL training set (2,429 faces, 4,548
non-faces) and report on the test set (472 faces, 23,572 non-faces) the ROC AUC and the detection rate
at 1% false positives. C is chosen per setting by 3-fold cross-validated ROC AUC on the training set
only (grid 0.1, 1, 10, 100); gamma = 1 / (n_features * var(X_train)) (scikit-learn's "scale").

    PYTHONPATH=. python scripts/ablation_preprocess.py [--solver auto|svmcore|sklearn] [--C 10]

Prints a markdown table (docs/evaluation.md holds the measured one).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from facedet.evaluate import detection_rate_at_fpr, roc_auc
from facedet.preprocess import WINDOW, preprocess

from _script import DATA as SHARED_DATA, require_arrays  # scripts/ is on sys.path when run

DATA = SHARED_DATA / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz"
SETTINGS = [  # (label, mask, plane, equalize)
    ("all on", True, True, True),
    ("no mask", False, True, True),
    ("no illumination plane", True, False, True),
    ("no histogram equalization", True, True, False),
    ("all off (raw pixels / 255)", False, False, False),
]
C_GRID = (0.1, 1.0, 10.0, 100.0)


def make_svc(solver, C, gamma):
    if solver == "svmcore":
        import svmcore

        return svmcore.SVC(kernel="poly", degree=2, gamma=gamma, coef0=1.0, C=C)
    from sklearn.svm import SVC

    return SVC(kernel="poly", degree=2, gamma=gamma, coef0=1.0, C=C, cache_size=500)


def pick_solver(requested):
    if requested != "auto":
        return requested
    try:
        import svmcore

        svmcore.SVC  # noqa: B018 -- lazily imported; falls back to scikit-learn if svmcore cannot be imported
        return "svmcore"
    except (ImportError, AttributeError):
        return "sklearn"


def cv_auc(solver, X, y, C, gamma, folds=3, seed=0):
    """Mean ROC AUC over stratified folds of the training set."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(y), int)
    for c in (0, 1):
        idx = np.flatnonzero(y == c)
        fold[rng.permutation(idx)] = np.arange(len(idx)) % folds
    aucs = []
    for k in range(folds):
        train, held = fold != k, fold == k
        model = make_svc(solver, C, gamma).fit(X[train], y[train])
        aucs.append(roc_auc(model.decision_function(X[held]), y[held]))
    return float(np.mean(aucs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="the CBCL patch file (default: %(default)s)")
    ap.add_argument(
        "--solver",
        choices=("auto", "svmcore", "sklearn"),
        default="auto",
        help="which SVC trains each setting (default: %(default)s; auto: svmcore)",
    )
    ap.add_argument("--C", type=float, default=None, help="fixed C for every setting (default: 3-fold CV on train)")
    args = ap.parse_args()
    if args.C is not None and not 0 < args.C < float("inf"):
        ap.error(f"--C: expected a positive number, got {args.C}")
    d = require_arrays(args.data, ("X_train", "y_train", "X_test", "y_test"), "the CBCL patch file")
    for split in ("train", "test"):
        X, y = d[f"X_{split}"], d[f"y_{split}"]
        if X.ndim != 3 or X.shape[1:] != (WINDOW, WINDOW) or y.shape != (len(X),):
            ap.error(
                f"--data {args.data}: X_{split} {X.shape} and y_{split} {y.shape} are not {WINDOW}x{WINDOW} "
                "patches with one label each"
            )
    solver = pick_solver(args.solver)
    X_train, y_train = d["X_train"], d["y_train"].astype(int)
    X_test, y_test = d["X_test"], d["y_test"].astype(int)
    print(
        f"CBCL: train {len(y_train)} ({y_train.sum()} faces), test {len(y_test)} ({y_test.sum()} faces); "
        f"solver {solver}"
    )
    rows = []
    for label, mask, plane, equalize in SETTINGS:
        t0 = time.perf_counter()
        Ftr = preprocess(X_train, mask=mask, plane=plane, equalize_hist=equalize)
        Fte = preprocess(X_test, mask=mask, plane=plane, equalize_hist=equalize)
        gamma = 1.0 / (Ftr.shape[1] * Ftr.var())
        if args.C is None:
            cv = {C: cv_auc(solver, Ftr, y_train, C, gamma) for C in C_GRID}
            C = max(cv, key=cv.get)
        else:
            C = args.C
        model = make_svc(solver, C, gamma).fit(Ftr, y_train)
        scores = model.decision_function(Fte)
        n_sv = len(getattr(model, "support_", getattr(model, "support_vectors_", [])))
        rows.append(
            (
                label,
                Ftr.shape[1],
                C,
                n_sv,
                roc_auc(scores, y_test),
                detection_rate_at_fpr(scores, y_test, 0.01),
                detection_rate_at_fpr(scores, y_test, 0.1),
            )
        )
        print(f"  {label}: C={C:g}, {n_sv} SVs, AUC {rows[-1][4]:.4f}, {time.perf_counter() - t0:.1f} s", flush=True)
    print()
    print(
        f"| preprocessing | features | C ({'fixed' if args.C is not None else 'CV on train'}) | support vectors "
        "| ROC AUC | detection rate at 1% FPR "
        "| detection rate at 10% FPR |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, p, C, n_sv, auc, dr1, dr10 in rows:
        print(f"| {label} | {p} | {C:g} | {n_sv} | {auc:.4f} | {dr1:.3f} | {dr10:.3f} |")


if __name__ == "__main__":
    main()
