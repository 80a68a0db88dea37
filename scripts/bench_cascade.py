"""Benchmark: the Cascade SVM (svmcore.cascade.CascadeSVC; Graf et al., NIPS 2004) against a single svmcore.SVC
fit, on the default detector's training set, in the same run.

Data: the patch set scripts/train_default.py trains its round 0 on, built the same way (its constants, the same
seeds): the CBCL Face DB #1 training faces (mirrored, rotated +-10 degrees) and the Web Faces `train` faces cut
by facedet.patches.load_landmark_faces, against the CBCL training non-faces and RANDOM_NONFACES random windows of
each face-free image; the detector's window features (facedet.training.training_set, 283 values) and SVM
(facedet.training.KINDS["svc"] with train_default's C: poly degree 2, gamma 1/283, coef0 1, C 10, tol 1e-3).
The bootstrapping rounds (scans for false positives, 43 min of refit for round 1 alone) are not run. A random
--test-fraction of the rows (seed 1) is held out for the test accuracy; --n-train caps the training rows (a random
subset) for a shorter run.

Three fits of the same training rows (in random order), one after the other: a single SVC; CascadeSVC in this
process (its partitions' fits on --threads threads); CascadeSVC on a dask.array of the rows (one chunk per
partition, scattered to the workers before the timing, as data held there) with a distributed.Client of a
LocalCluster of 2 worker processes, one thread each (BLAS and numba on one thread). Each sub-fit has its own
kernel cache of --cache-size MB, as the single fit. The numba code is compiled (or loaded from its cache) before
the timing; the cluster's start is not timed. Prints per fit: training rows, passes, dual objective
1/2 a'Qa - 1'a, its relative gap to the single fit's, the KKT violation over all training rows, support vectors,
test accuracy, seconds and the ratio to the single fit's seconds.

Usage: python scripts/bench_cascade.py [--data DIR] [--partitions 4] [--n-train N] [--test-fraction 0.2]
                                       [--cache-size 4000] [--threads 2] [--no-dask]
Needs the dask extra (dask[distributed]) for the Dask fit. Not part of the test suite.
"""

from __future__ import annotations

from _script import DATA, limit_threads, positive_int, require_data  # scripts/ is on sys.path when run

limit_threads("2")  # before numpy, numba and BLAS load

import argparse
import time
from pathlib import Path

import numpy as np

import svmcore
from facedet.training import KINDS, training_set
from facedet.patches import CBCL_FRAMING, augment, sample_windows
from svmcore.cascade import CascadeSVC

from _training_data import load_training_data, webfaces_windows
from train_default import CBCL_AUGMENTATION, RANDOM_NONFACES, ROTATIONS, SVM_PARAMS

ROW = "| {fit} | {n} | {passes} | {objective:.10g} | {gap} | {kkt:.2e} | {sv} | {acc:.2%} | {seconds:.1f} | {ratio} |"


def default_training_set(data):
    """(feature rows (n, 283), labels (n,) in {0, 1}) of train_default.py's round 0."""
    X, y, negatives, _, _, _ = load_training_data(data)
    web = webfaces_windows(data, CBCL_FRAMING, ROTATIONS)
    cbcl = augment(X[y == 1], **CBCL_AUGMENTATION)
    rng = np.random.default_rng(0)
    nonfaces = np.concatenate([X[y == 0]] + [sample_windows(g, RANDOM_NONFACES, rng) for g in negatives])
    windows = np.concatenate([cbcl, web, nonfaces])
    labels = np.r_[np.ones(len(cbcl) + len(web), np.int64), np.zeros(len(nonfaces), np.int64)]
    return training_set(windows, labels, augmentation={"mirror": False})  # faces already augmented


def row(fit, model, seconds, reference, Xt, yt):
    """A table row of a fitted SVC or CascadeSVC; ``reference``: (objective, seconds) of the single fit, or None."""
    svc = getattr(model, "svc_", model)
    objective = model.objective_
    return dict(
        fit=fit,
        passes=getattr(model, "n_passes_", "-"),
        objective=objective,
        kkt=model.kkt_violation_,
        sv=len(svc.support_),
        acc=model.score(Xt, yt),
        seconds=seconds,
        gap="-" if reference is None else f"{abs(objective - reference[0]) / abs(reference[0]):.1e}",
        ratio="1" if reference is None else f"{seconds / reference[1]:.2f}",
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA, help="the shared/data folder (default: %(default)s)")
    ap.add_argument(
        "--partitions",
        type=positive_int,
        default=4,
        help="first-layer partitions of the cascade (default: %(default)s)",
    )
    ap.add_argument(
        "--n-train",
        type=positive_int,
        default=None,
        help="train on at most this many rows, drawn at random (default: all but the held-out ones)",
    )
    ap.add_argument(
        "--test-fraction",
        type=float,
        default=0.2,
        help="share of the rows held out for the test accuracy (default: %(default)s)",
    )
    ap.add_argument(
        "--cache-size",
        type=float,
        default=4000.0,
        help="kernel cache of each SVC fit and sub-fit, MB (default: %(default)s)",
    )
    ap.add_argument(
        "--threads", default="2", help="threads for BLAS, numba and the in-process cascade (default: %(default)s)"
    )
    ap.add_argument("--no-dask", action="store_true", help="skip the fit on a local Dask cluster")
    args = ap.parse_args()
    if not 0 < args.test_fraction < 1:
        ap.error(f"--test-fraction: expected a number in (0, 1), got {args.test_fraction}")
    if not 0 < args.cache_size < float("inf"):
        ap.error(f"--cache-size: expected a positive number of MB, got {args.cache_size}")
    require_data(args.data, "the shared/data folder")

    t = time.perf_counter()
    F, labels = default_training_set(args.data)
    perm = np.random.default_rng(1).permutation(len(F))
    n_test = int(round(args.test_fraction * len(F)))
    # the training rows in random order: a dask array's chunks are the cascade's partitions, and the set is
    # sorted by class (single-class partitions filter nothing)
    test, train = np.sort(perm[:n_test]), perm[n_test:][: args.n_train]
    X, y, Xt, yt = F[train], labels[train], F[test], labels[test]
    print(
        f"patches: {len(F)} rows ({int(labels.sum())} faces) x {F.shape[1]} features in "
        f"{time.perf_counter() - t:.0f} s; training on {len(X)} ({int(y.sum())} faces), testing on {len(Xt)}",
        flush=True,
    )
    params = {**KINDS["svc"].defaults, "C": SVM_PARAMS["C"], "cache_size": args.cache_size}
    print(f"SVC parameters: {params}; {args.partitions} partitions", flush=True)
    threads = int(args.threads)

    w = np.random.default_rng(0).choice(len(X), min(4000, len(X)), replace=False)  # numba code compiled untimed
    CascadeSVC(**params, n_partitions=2, n_jobs=threads).fit(X[w], y[w])

    rows = []
    t = time.perf_counter()
    single = svmcore.SVC(**params).fit(X, y)
    seconds = time.perf_counter() - t
    reference = (single.objective_, seconds)
    rows.append(row("single SVC", single, seconds, None, Xt, yt))
    print(f"single SVC: {seconds:.1f} s", flush=True)

    t = time.perf_counter()
    local = CascadeSVC(**params, n_partitions=args.partitions, n_jobs=threads).fit(X, y)
    seconds = time.perf_counter() - t
    rows.append(row(f"CascadeSVC, {threads} threads", local, seconds, reference, Xt, yt))
    print(f"CascadeSVC in-process: {seconds:.1f} s, objective per pass {local.objective_path_.tolist()}", flush=True)

    if not args.no_dask:
        import dask.array as da
        import distributed

        one = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, env=one
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            CascadeSVC(**params, n_partitions=2, client=client).fit(X[w], y[w])  # the workers' numba code, untimed
            # the rows as data held by the workers: one chunk per partition, scattered before the timing
            step = -(-len(X) // args.partitions)
            starts = range(0, len(X), step)
            futures = client.scatter([X[s : s + step] for s in starts])
            Xd = da.concatenate(
                [
                    da.from_delayed(f, shape=(min(step, len(X) - s), X.shape[1]), dtype=X.dtype)
                    for f, s in zip(futures, starts, strict=True)
                ]
            )
            t = time.perf_counter()
            remote = CascadeSVC(**params, client=client).fit(Xd, y)
            seconds = time.perf_counter() - t
        rows.append(row("CascadeSVC, Dask, 2 workers", remote, seconds, reference, Xt, yt))
        print(f"CascadeSVC on Dask: {seconds:.1f} s, objective per pass {remote.objective_path_.tolist()}", flush=True)

    print(
        "\n| fit | training rows | passes | dual objective | rel. gap to SVC | KKT violation (all rows) | SVs | "
        "test accuracy | seconds | x SVC's time |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(ROW.format(**{**r, "n": len(X)}))


if __name__ == "__main__":
    main()
