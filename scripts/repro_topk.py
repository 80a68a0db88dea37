"""Reproduce the finding of Lapin, Hein, Schiele (NIPS 2015), Table 1, on letter, sector and USPS.

For each data set: one-vs-all linear SVM (scikit-learn LinearSVC, hinge loss, one-vs-rest), top-1 SVM
(= Crammer-Singer, TopKSVM k=1) and top-k SVM alpha / beta for k in {2, 5, 10} (k < number of classes), all
linear with a constant feature 1 appended (a regularised bias, as in libsdca and LIBLINEAR). C is chosen by
stratified 3-fold cross-validation on the training set: OvA and top-1 SVM by top-1 accuracy, top-k SVM by
top-k accuracy (the measure it targets). The chosen C is refitted on the whole training set and the table
reports top-1, 2, 3, 5, 10 accuracy (%) on the official test set.

    PYTHONPATH=. python scripts/repro_topk.py            # C in {0.1, 1, 10}, 3 folds
    PYTHONPATH=. python scripts/repro_topk.py --quick    # C in {1, 10}, 2 folds
"""

from __future__ import annotations

import argparse
import time

import h5py
import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
from sklearn.model_selection import StratifiedKFold
from sklearn.svm import LinearSVC

from svmcore.metrics import top_k_accuracies
from svmcore.topk import TopKSVM

from _script import DATA, quiet_convergence, require_data, require_sets  # scripts/ is on sys.path when run

BENCH = DATA / "bench"
KS = (1, 2, 3, 5, 10)


def csr32(X):
    """CSR with int32 indices: scikit-learn's LIBLINEAR wrappers reject int64 ones (see bench/README.md)."""
    X = sp.csr_matrix(X)
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X


def with_bias(X):
    if sp.issparse(X):
        return csr32(sp.hstack([X, np.ones((X.shape[0], 1))]))
    return np.hstack([X, np.ones((X.shape[0], 1))])


def load(name):
    if name == "usps":
        with h5py.File(BENCH / "usps" / "usps.h5", "r") as f:
            return (
                f["train/data"][:].astype(np.float64),
                f["train/target"][:].astype(int),
                f["test/data"][:].astype(np.float64),
                f["test/target"][:].astype(int),
            )
    files = {
        "letter": ("letter/letter.scale.bz2", "letter/letter.scale.t.bz2", 16),
        "sector": ("sector/sector.scale.bz2", "sector/sector.t.scale.bz2", 55197),
    }[name]
    Xtr, ytr = load_svmlight_file(str(BENCH / files[0]), n_features=files[2])
    Xte, yte = load_svmlight_file(str(BENCH / files[1]), n_features=files[2])
    if name == "letter":
        Xtr, Xte = Xtr.toarray(), Xte.toarray()
    else:
        Xtr, Xte = csr32(Xtr), csr32(Xte)
    return Xtr, ytr.astype(int), Xte, yte.astype(int)


class OvA:
    """One-vs-all linear SVM (hinge loss) exposing decision_function and classes_."""

    def __init__(self, C, tol):
        self.model = LinearSVC(C=C, random_state=0, loss="hinge", fit_intercept=False, tol=tol, max_iter=5000)

    def fit(self, X, y):
        with quiet_convergence():  # LIBLINEAR's max_iter notices
            self.model.fit(X, y)
        self.classes_ = self.model.classes_
        return self

    def decision_function(self, X):
        return self.model.decision_function(X)


def make(method, C, tol):
    if method == "OvA SVM":
        return OvA(C, tol)
    k = 1 if method == "top-1 SVM" else int(method.split()[-1].split("=")[1])
    loss = "beta" if "beta" in method else "alpha"
    return TopKSVM(k=k, C=C, loss=loss, tol=tol, max_epochs=300, random_state=0)


def accuracies(model, X, y):
    known = np.isin(y, model.classes_)  # a label unseen in training counts as an error
    scores = model.decision_function(X[known])
    acc = top_k_accuracies(scores, np.searchsorted(model.classes_, y[known]), KS)
    return {k: v * known.mean() for k, v in acc.items()}


def target_k(method):
    return 1 if method in ("OvA SVM", "top-1 SVM") else int(method.split()[-1].split("=")[1])


def run(name, grid, folds, cv_tol, tol):
    Xtr, ytr, Xte, yte = load(name)
    Xtr, Xte = with_bias(Xtr), with_bias(Xte)
    m = np.unique(ytr).size
    methods = ["OvA SVM", "top-1 SVM"] + [
        f"top-k SVM {loss} k={k}" for loss in ("alpha", "beta") for k in (2, 5, 10) if k < m
    ]
    print(
        f"\n## {name}: {Xtr.shape[0]} train / {Xte.shape[0]} test, {Xtr.shape[1] - 1} features, {m} classes", flush=True
    )
    splits = list(StratifiedKFold(folds, shuffle=True, random_state=0).split(np.zeros(len(ytr)), ytr))
    rows = []
    for method in methods:
        t0 = time.perf_counter()
        k = target_k(method)
        cv = {}
        for C in grid:
            cv[C] = np.mean(
                [accuracies(make(method, C, cv_tol).fit(Xtr[a], ytr[a]), Xtr[b], ytr[b])[k] for a, b in splits]
            )
        best = max(grid, key=lambda c: (cv[c], -c))
        t1 = time.perf_counter()
        model = make(method, best, tol).fit(Xtr, ytr)
        fit_s = time.perf_counter() - t1
        acc = accuracies(model, Xte, yte)
        rows.append((method, best, acc, fit_s, time.perf_counter() - t0))
        print(
            f"  {method:24s} C={best:<5g} cv top-{k}={100 * cv[best]:.2f}  "
            + " ".join(f"top-{q}={100 * acc[q]:.2f}" for q in KS)
            + f"  fit {fit_s:.1f}s (with CV {rows[-1][4]:.0f}s)",
            flush=True,
        )
    print(f"\n| {name} | C | " + " | ".join(f"top-{q}" for q in KS) + " |")
    print("|---|---|" + "---|" * len(KS))
    for method, best, acc, _, _ in rows:
        print(f"| {method} | {best:g} | " + " | ".join(f"{100 * acc[q]:.1f}" for q in KS) + " |")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="C in {1, 10} and 2 folds (default: {0.1, 1, 10}, 3)")
    ap.add_argument(
        "--datasets",
        default="letter,usps,sector",
        help="comma-separated, from letter, usps, sector (default: %(default)s)",
    )
    args = ap.parse_args()
    require_data()  # a usage error if the data folder is missing
    unknown = set(args.datasets.split(",")) - {"letter", "usps", "sector"}
    if unknown:
        ap.error(f"--datasets: unknown {sorted(unknown)}")
    require_sets(args.datasets.split(","))
    grid, folds, cv_tol = ((1.0, 10.0), 2, 1e-2) if args.quick else ((0.1, 1.0, 10.0), 3, 1e-2)
    t0 = time.perf_counter()
    for name in args.datasets.split(","):
        run(name, grid, folds, cv_tol, 1e-3)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; C grid {grid}, {folds}-fold CV (tol {cv_tol}), final tol 1e-3")


if __name__ == "__main__":
    main()
