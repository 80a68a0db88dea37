"""Timing of SVM+ (Li et al. CVPR 2016) against references measured in the same run, and how each
scales with the number of training samples n.

1. LinearSVMPlus (dual coordinate descent on (8), main + privileged features) against a linear SVM
   (scikit-learn LinearSVC = LIBLINEAR dual coordinate descent, hinge loss) on the same main features,
   both with C=1 and the same projected-gradient tolerance; and against the SVM+ QP baseline (dual (4)
   with linear kernels, cvxopt) up to --qp-max samples.
2. KernelSVMPlus (Gaussian kernels, l2-SVM+ by SMO) against the SVM+ QP baseline (dual (4), Gaussian
   kernels, cvxopt), with an SVM without privileged features (scikit-learn SVC = LIBSVM) for scale.

Data: MNIST+ (100 training digits, see scripts/repro_svmplus.py) and CBCL Face DB #1 training patches
(2,429 faces + 4,548 non-faces) subsampled to n: main view = the 19x19 patch area-averaged to 6x6
(36-d), privileged view = the full-resolution 361 pixels; each view's rows are centred and scaled to
unit norm. Accuracies are balanced accuracies on the 24,044 CBCL test patches (472 faces).
Times are medians of --repeats fits (wall clock), with --threads BLAS/numba threads.

    PYTHONPATH=. python scripts/bench_svmplus.py [--sizes 500,1000,2000,4000,6977] [--qp-max 1000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # thread counts must be fixed before numpy/numba load
    from _script import limit_threads  # scripts/ is on sys.path when run

    limit_threads(override=False)

import numpy as np

from _script import quiet_convergence
from svmcore.svmplus import KernelSVMPlus, LinearSVMPlus, mean_distance_gamma

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the QP references the tests use
from qp_references import SVMPlusQP


def unit_rows(A):
    A = A - A.mean(axis=1, keepdims=True)
    return A / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-12)


def cbcl_views(images):
    import cv2

    small = np.stack([cv2.resize(im, (6, 6), interpolation=cv2.INTER_AREA) for im in images.astype(np.float32)])
    return (
        unit_rows(small.reshape(len(images), -1).astype(np.float64)),
        unit_rows(images.reshape(len(images), -1).astype(np.float64)),
    )


def load_cbcl(data_dir):
    d = np.load(data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    X, X_star = cbcl_views(d["X_train"])
    X_test, _ = cbcl_views(d["X_test"])
    return X, X_star, np.where(d["y_train"] == 1, 1, -1), X_test, np.where(d["y_test"] == 1, 1, -1)


def load_mnist_plus(data_dir, norm):
    d = np.load(data_dir / "bench" / "mnist_plus" / "mnist_plus.npz")
    if norm == "l1":
        f = lambda A: A / np.abs(A).sum(axis=1, keepdims=True)  # noqa: E731
    else:
        f = lambda A: A / np.linalg.norm(A, axis=1, keepdims=True)  # noqa: E731
    sign = lambda y: np.where(y == 5, 1, -1)  # noqa: E731
    return (
        f(d["X_train"].astype(np.float64)),
        f(d["Xstar_train"].astype(np.float64)),
        sign(d["y_train"]),
        f(d["X_test"].astype(np.float64)),
        sign(d["y_test"]),
    )


def subsample(y, n, seed=0):
    """n indices stratified by class (fixed seed), so every size sees the same face/non-face ratio."""
    if n >= len(y):
        return np.arange(len(y))
    rng = np.random.default_rng(seed)
    idx = [rng.permutation(np.flatnonzero(y == c))[: int(round(n * np.mean(y == c)))] for c in (-1, 1)]
    return np.sort(np.concatenate(idx))


def balanced_accuracy(f, y):
    pred = np.where(f > 0, 1, -1)
    return float(np.mean([np.mean(pred[y == c] == c) for c in (-1, 1)]))


def median_time(fit, repeats):
    """Median wall time of ``repeats`` calls of ``fit`` after one untimed warm-up (numba cache load)."""
    times = []
    with quiet_convergence():
        model = fit()
        for _ in range(repeats):
            t = time.perf_counter()
            model = fit()
            times.append(time.perf_counter() - t)
    return model, float(np.median(times))


def bench_linear(name, X, X_star, y, X_test, y_test, repeats, qp_max, tol):
    from sklearn.svm import LinearSVC

    svm, t_svm = median_time(
        lambda: LinearSVC(C=1.0, random_state=0, loss="hinge", tol=tol, max_iter=100000).fit(X, y), repeats
    )
    plus, t_plus = median_time(
        lambda: LinearSVMPlus(C=1.0, gamma=1.0, tol=tol, max_iter=100000, random_state=0).fit(X, X_star, y), repeats
    )
    qp_cell, ratio_cell = "-", "-"
    if len(y) <= qp_max:
        _, t_qp = median_time(
            lambda: SVMPlusQP(C=1.0, gamma=1.0, kernel="linear", kernel_star="linear").fit(X, X_star, y),
            max(1, repeats // 2),
        )
        qp_cell, ratio_cell = f"{t_qp:.3f}", f"{t_qp / t_plus:.1f}x"
    print(
        f"| {name} | {len(y)} | {X.shape[1]} | {X_star.shape[1]} | {t_svm:.4f} | {t_plus:.4f} | "
        f"{t_plus / t_svm:.1f} | {plus.n_iter_} | {qp_cell} | {ratio_cell} | "
        f"{100 * balanced_accuracy(svm.decision_function(X_test), y_test):.2f}% | "
        f"{100 * balanced_accuracy(plus.decision_function(X_test), y_test):.2f}% |",
        flush=True,
    )


def bench_kernel(name, X, X_star, y, X_test, y_test, repeats, qp_max):
    from sklearn.svm import SVC

    g, g_star = mean_distance_gamma(X), mean_distance_gamma(X_star)
    svm, t_svm = median_time(lambda: SVC(C=1.0, kernel="rbf", gamma=g).fit(X, y), repeats)
    plus, t_plus = median_time(lambda: KernelSVMPlus(C=1.0, gamma=1.0).fit(X, X_star, y), repeats)
    qp_cell, ratio_cell, acc_qp = "-", "-", "-"
    if len(y) <= qp_max:
        qp, t_qp = median_time(
            lambda: SVMPlusQP(C=1.0, gamma=1.0, kernel_gamma=g, kernel_star_gamma=g_star).fit(X, X_star, y),
            max(1, repeats // 2),
        )
        qp_cell, ratio_cell = f"{t_qp:.3f}", f"{t_qp / t_plus:.1f}x"
        acc_qp = f"{100 * balanced_accuracy(qp.decision_function(X_test), y_test):.2f}%"
    print(
        f"| {name} | {len(y)} | {t_svm:.4f} | {t_plus:.4f} | {len(plus.support_)} | {qp_cell} | {ratio_cell} | "
        f"{100 * balanced_accuracy(svm.decision_function(X_test), y_test):.2f}% | "
        f"{100 * balanced_accuracy(plus.decision_function(X_test), y_test):.2f}% | {acc_qp} |",
        flush=True,
    )


def main():
    from _script import DATA, positive_int, require_files  # scripts/ is on sys.path when run

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the shared/data folder (default: %(default)s)")
    parser.add_argument(
        "--sizes", default="500,1000,2000,4000,6977", help="CBCL training-set sizes (default: %(default)s)"
    )
    parser.add_argument(
        "--kernel-max", type=int, default=2000, help="largest n for the kernel methods (default: %(default)s)"
    )
    parser.add_argument(
        "--qp-max", type=int, default=1000, help="largest n for the cvxopt baseline (default: %(default)s)"
    )
    parser.add_argument(
        "--repeats", type=positive_int, default=3, help="fits per timing; the median is reported (default: %(default)s)"
    )
    parser.add_argument(
        "--tol",
        type=float,
        default=1e-2,
        help="projected-gradient tolerance (both linear solvers; default: %(default)s)",
    )
    parser.add_argument("--threads", default="1", help="BLAS/numba threads (set before import; default: %(default)s)")
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes: expected comma-separated integers, got {args.sizes!r}")
    if min(sizes) < 1:  # a negative n would slice X[:n], all but the last |n| rows
        parser.error(f"--sizes: expected positive integers, got {args.sizes!r}")
    if not args.tol > 0:
        parser.error(f"--tol: expected > 0, got {args.tol}")
    require_files(
        args.data,
        ["cbcl_face_db1/cbcl_face_db1_19x19_uint8.npz", "bench/mnist_plus/mnist_plus.npz"],
        "the CBCL and MNIST+ files",
    )
    print(f"threads={os.environ.get('OMP_NUM_THREADS')}, repeats={args.repeats} (median), C=1, gamma=1")
    cbcl = load_cbcl(args.data)
    X, X_star, y, X_test, y_test = cbcl

    print(f"\nLinear: LinearSVMPlus vs LinearSVC (hinge, same X, tol={args.tol}) and the QP baseline (4)")
    print(
        "| data | n | d | d* | LinearSVC s | LinearSVMPlus s | ours / LinearSVC | epochs | QP (4) s | QP / ours "
        "| SVM bal. acc | SVM+ bal. acc |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    bench_linear("MNIST+ (L2 rows)", *load_mnist_plus(args.data, "l2"), args.repeats, args.qp_max, args.tol)
    for n in sizes:
        idx = subsample(y, n)
        bench_linear("CBCL", X[idx], X_star[idx], y[idx], X_test, y_test, args.repeats, args.qp_max, args.tol)

    print("\nGaussian: KernelSVMPlus vs the QP baseline (4); SVC (no x*) for scale")
    print(
        "| data | n | SVC s | KernelSVMPlus s | n_SV | QP (4) s | QP / ours | SVM bal. acc | SVM+ bal. acc "
        "| QP SVM+ bal. acc |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    bench_kernel("MNIST+ (L1 rows)", *load_mnist_plus(args.data, "l1"), args.repeats, args.qp_max)
    for n in sizes:
        if n <= args.kernel_max:
            idx = subsample(y, n)
            bench_kernel("CBCL", X[idx], X_star[idx], y[idx], X_test, y_test, args.repeats, args.qp_max)


if __name__ == "__main__":
    main()
