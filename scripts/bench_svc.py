"""Benchmark: svmcore.SVC against LIBSVM (scikit-learn's SVC) on the same data, in the same run.

Prints, per problem: training seconds of both and their ratio (svmcore / LIBSVM), both dual objectives
(1/2 a'Qa - 1'a, computed the same way for both), both test accuracies, support vector counts.

Problems (real data from ../shared/data):
  cbcl      CBCL Face DB #1 train (6,977 x 361, pixels in [0, 1]), poly degree 2, C=1; test on CBCL test
  ijcnn1    ijcnn1 train (49,990 x 22), rbf gamma=2, C=32 (LIBSVM guide's setting); test on ijcnn1 test
  patches   >= 100,000 patches of 361 dims: CBCL train faces with mirrored and shifted copies, CBCL train
            non-faces, and non-face windows cut from nonface_scenes; rbf gamma="scale", C=1; test on CBCL test
  pendigits pendigits train (7,494 x 16, 10 classes, scaled to [0, 1]), rbf gamma=2, C=10: one-vs-one, 45
            binary problems for both; the objective column is svmcore's sum over them (LIBSVM's per-pair
            values are not exposed), the last column the share of equal test predictions
  usps      USPS train (7,291 x 256, 10 classes, pixels in [-1, 1]), rbf gamma=0.0078 (~1/d), C=10; test on USPS test
  letter    letter.scale (15,000 x 16, 26 classes: 325 pairs), rbf gamma=1, C=10; test on letter.scale.t
  a9a       a9a / Adult (32,561 x 123, binary features, 11% nonzero), CSR input to both, rbf gamma=0.05, C=1; test
            on a9a.tst (svmcore trains on a dense copy: svmcore.kernels.densify_if_cheaper)
  reuters   reuters money-fx (7,770 x 8,315 tf-idf, 0.5% nonzero), CSR input to both, rbf gamma=1, C=10; test on
            reuters.tst (svmcore keeps it sparse)
  sector    300 sector.scale rows (the first of 1,200 drawn at random, seed 3: 92 of the 105 classes, 4,186 pairs of
            ~6 rows), 55,197 tf-idf columns, CSR input to both, linear, C=1; test on sector.t.scale's first 2,000
            rows of those classes. Thousands of tiny one-vs-one problems: the per-problem overhead, not SMO
            (with --probability, six solves, five fold decisions and a sigmoid per pair)

Both solvers run on one thread (LIBSVM has no other mode): the script sets OPENBLAS_NUM_THREADS and
NUMBA_NUM_THREADS to 1 unless they are set already; set them to 2 to let svmcore's BLAS use both cores.

With --n-jobs N (N > 1), the multiclass problems are also fitted by svmcore with n_jobs=N (its pairs of classes
on N threads; LIBSVM has no such mode): the time, its ratio to LIBSVM's and to svmcore's one-thread fit, and
whether the model is the same to the bit. Set the thread variables to 1 (the default) for this: the pairs are
the parallelism.

With --probability both fit with probability=True (LIBSVM's 5-fold cross-validation and Platt sigmoids, random_state
0 for both; the folds differ) and the script also prints both test log-losses and the mean absolute difference of
their predict_proba.

Usage: python scripts/bench_svc.py [--problems cbcl,ijcnn1,patches,pendigits,usps,letter,a9a,reuters,sector]
       [--cache-size 200]
       [--n-patches N] [--probability] [--n-jobs N] [--data DIR]
Needs the bench extra (scikit-learn). Not part of the test suite.
"""

from __future__ import annotations

from _script import DATA, limit_threads, require_data, require_sets, svmlight_csr  # scripts/ is on sys.path when run

limit_threads(override=False)  # before numpy and numba load

import argparse
import time
from pathlib import Path

import numpy as np

import svmcore
from svmcore.kernels import kernel_block


def cbcl(data):
    d = np.load(data / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz")
    return d["X_train"], d["y_train"].astype(int), d["X_test"], d["y_test"].astype(int)


def problem_cbcl(data):
    X, y, Xt, yt = cbcl(data)
    flat = lambda a: a.reshape(len(a), -1) / 255.0  # noqa: E731
    return flat(X), y, flat(Xt), yt, dict(kernel="poly", degree=2, gamma=1 / 361, coef0=1.0, C=1.0)


def problem_ijcnn1(data):
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(data / "bench" / "ijcnn1" / "ijcnn1.trn.bz2"), n_features=22)
    Xt, yt = load_svmlight_file(str(data / "bench" / "ijcnn1" / "ijcnn1.tst.bz2"), n_features=22)
    return X.toarray(), y, Xt.toarray(), yt, dict(kernel="rbf", gamma=2.0, C=32.0)


def problem_a9a(data):
    X, y = svmlight_csr(data / "bench" / "a9a" / "a9a.trn.bz2", 123)
    Xt, yt = svmlight_csr(data / "bench" / "a9a" / "a9a.tst.bz2", 123)
    return X, y, Xt, yt, dict(kernel="rbf", gamma=0.05, C=1.0)


def problem_reuters(data):
    X, y = svmlight_csr(data / "bench" / "reuters_lasvm" / "reuters.trn.bz2", 8315)
    Xt, yt = svmlight_csr(data / "bench" / "reuters_lasvm" / "reuters.tst.bz2", 8315)
    return X, y, Xt, yt, dict(kernel="rbf", gamma=1.0, C=10.0)


def problem_sector(data, n=300):
    X, y = svmlight_csr(data / "bench" / "sector" / "sector.scale.bz2", 55197)
    Xt, yt = svmlight_csr(data / "bench" / "sector" / "sector.t.scale.bz2", 55197)
    rows = np.sort(np.random.default_rng(3).choice(X.shape[0], 1200, replace=False))[:n]
    test = np.flatnonzero(np.isin(yt, y[rows]))[:2000]  # the classes trained on (log-loss needs them)
    return X[rows], y[rows], Xt[test], yt[test], dict(kernel="linear", C=1.0)


def problem_patches(data, n_total=100_000, seed=0):
    from facedet.imageio import read_grey
    from facedet.patches import augment, sample_windows

    X, y, Xt, yt = cbcl(data)
    faces = augment(X[y == 1], mirror=True, shifts=1)  # 10 copies of each face
    nonfaces = X[y == 0]
    scenes = sorted(p for p in (data / "nonface_scenes").rglob("*") if p.suffix.lower() in (".jpg", ".png"))
    need = n_total - len(faces) - len(nonfaces)
    if need < 0:
        raise SystemExit(
            f"--n-patches must be at least {len(faces) + len(nonfaces)} (the augmented CBCL faces and "
            f"the CBCL non-faces), got {n_total}"
        )
    rng = np.random.default_rng(seed)
    per = -(-need // len(scenes))
    cut = np.concatenate([sample_windows(read_grey(p), per, rng) for p in scenes])[:need]
    P = np.concatenate([faces, nonfaces, cut]).reshape(-1, 361) / 255.0
    labels = np.r_[np.ones(len(faces)), np.zeros(len(nonfaces) + len(cut))].astype(int)
    return P, labels, Xt.reshape(len(Xt), -1) / 255.0, yt, dict(kernel="rbf", gamma="scale", C=1.0)


ROW = (
    "| {problem} | {n} | {t_ours:.2f} | {t_ref:.2f} | **{ratio:.2f}** | {obj_ours:.8g} | {obj_ref} | "
    "{rel_obj} | {acc_ours:.2%} | {acc_ref:.2%} | {sv_ours} / {sv_ref} | {corr:.6f} |"
)


def problem_pendigits(data):
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(data / "bench" / "pendigits" / "pendigits.bz2"), n_features=16)
    Xt, yt = load_svmlight_file(str(data / "bench" / "pendigits" / "pendigits.t.bz2"), n_features=16)
    return X.toarray() / 100.0, y, Xt.toarray() / 100.0, yt, dict(kernel="rbf", gamma=2.0, C=10.0)


def problem_usps(data):
    import h5py

    with h5py.File(data / "bench" / "usps" / "usps.h5", "r") as f:
        X, y, Xt, yt = (f[f"{s}/{k}"][:] for s in ("train", "test") for k in ("data", "target"))
    return X.astype(np.float64), y, Xt.astype(np.float64), yt, dict(kernel="rbf", gamma=0.0078, C=10.0)


def problem_letter(data):
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(data / "bench" / "letter" / "letter.scale.bz2"), n_features=16)
    Xt, yt = load_svmlight_file(str(data / "bench" / "letter" / "letter.scale.t.bz2"), n_features=16)
    return X.toarray(), y, Xt.toarray(), yt, dict(kernel="rbf", gamma=1.0, C=10.0)


def objective(model, X, coef, support):
    """1/2 a'Qa - 1'a from dual coefficients a_i y_i, without an n x n matrix."""
    sv = X[support]
    spec = model._spec
    Kc = np.zeros(len(support))
    for s in range(0, len(support), 2048):
        Kc[s : s + 2048] = kernel_block(sv[s : s + 2048], sv, spec) @ coef
    return 0.5 * coef @ Kc - np.abs(coef).sum()


def run(name, X, y, Xt, yt, params, cache_size, n_jobs=1):
    import warnings

    from sklearn.svm import SVC as LibSVM

    warnings.filterwarnings("ignore", message=".*probability.*deprecated", category=FutureWarning)  # sklearn 1.9

    # compile the numba code outside the timing
    w = np.random.default_rng(0).choice(X.shape[0], 300, replace=False)
    svmcore.SVC(**params).fit(X[w], y[w])
    print(f"\n== {name}: n={X.shape[0]}, d={X.shape[1]}, {params}, cache {cache_size} MB", flush=True)
    t = time.perf_counter()
    ours = svmcore.SVC(cache_size=cache_size, **params).fit(X, y)
    t_ours = time.perf_counter() - t
    print(f"svmcore: {t_ours:.2f} s, {ours.n_iter_} iterations, cache hit rate {ours.cache_hit_rate_:.3f}", flush=True)
    t = time.perf_counter()
    ref = LibSVM(cache_size=cache_size, **params).fit(X, y)
    t_ref = time.perf_counter() - t
    print(f"LIBSVM:  {t_ref:.2f} s", flush=True)
    if n_jobs > 1 and len(ours.classes_) > 2:
        t = time.perf_counter()
        par = svmcore.SVC(cache_size=cache_size, n_jobs=n_jobs, **params).fit(X, y)
        t_par = time.perf_counter() - t
        same = all(np.array_equal(getattr(par, k), getattr(ours, k)) for k in ("dual_coef_", "intercept_", "support_"))
        print(
            f"svmcore n_jobs={n_jobs}: {t_par:.2f} s, {t_par / t_ref:.2f} x LIBSVM's time, "
            f"{t_ours / t_par:.2f}x faster than n_jobs=1; same model to the bit: {same}",
            flush=True,
        )
    if params.get("probability"):
        from sklearn.metrics import log_loss

        P, R = ours.predict_proba(Xt), ref.predict_proba(Xt)
        print(
            f"predict_proba: test log-loss svmcore {log_loss(yt, P, labels=ours.classes_):.4f}, LIBSVM "
            f"{log_loss(yt, R, labels=ref.classes_):.4f}; mean |p_svmcore - p_LIBSVM| {np.abs(P - R).mean():.4f}",
            flush=True,
        )
    p_ours, p_ref = ours.predict(Xt), ref.predict(Xt)
    if len(ours.classes_) == 2:
        coef = ref.dual_coef_.toarray() if hasattr(ref.dual_coef_, "toarray") else ref.dual_coef_  # CSR input: CSR
        obj_ref = objective(ours, X, coef[0], ref.support_)
        agree = float(np.corrcoef(ours.decision_function(Xt), ref.decision_function(Xt))[0, 1])
    else:
        obj_ref, agree = float("nan"), float(np.mean(p_ours == p_ref))
    row = dict(
        problem=name,
        n=X.shape[0],
        t_ours=t_ours,
        t_ref=t_ref,
        ratio=t_ours / t_ref,
        obj_ours=ours.objective_,
        obj_ref=obj_ref,
        acc_ours=np.mean(p_ours == yt),
        acc_ref=np.mean(p_ref == yt),
        sv_ours=len(ours.support_),
        sv_ref=len(ref.support_),
        corr=agree,
    )
    # LIBSVM exposes no per-pair objectives: "-" for multiclass problems
    row["rel_obj"] = "-" if np.isnan(obj_ref) else f"{abs(row['obj_ours'] - obj_ref) / abs(obj_ref):.1e}"
    row["obj_ref"] = "-" if np.isnan(obj_ref) else f"{obj_ref:.8g}"
    print(ROW.format(**row), flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--problems",
        default="cbcl,ijcnn1,patches,pendigits",
        help="comma-separated, from cbcl, ijcnn1, patches, pendigits, usps, letter, a9a, reuters, sector "
        "(default: %(default)s)",
    )
    ap.add_argument(
        "--cache-size", type=float, default=200.0, help="kernel cache in MB, for both solvers (default: %(default)s)"
    )
    ap.add_argument(
        "--n-patches",
        type=int,
        default=100_000,
        help="size of the patches problem (>= 28,838: the augmented faces and CBCL non-faces; default: %(default)s)",
    )
    ap.add_argument("--probability", action="store_true", help="fit both with probability=True (Platt scaling)")
    ap.add_argument(
        "--n-jobs",
        type=int,
        default=1,
        help="also fit multiclass problems with SVC(n_jobs=N) (default: %(default)s, no such fit)",
    )
    ap.add_argument("--data", type=Path, default=DATA, help="the shared/data folder (default: %(default)s)")
    args = ap.parse_args()
    if args.n_jobs < 1:
        ap.error(f"--n-jobs: expected >= 1, got {args.n_jobs}")
    if not 0 < args.cache_size < float("inf"):
        ap.error(f"--cache-size: expected a positive number of MB, got {args.cache_size}")
    require_data(args.data, "the shared/data folder")
    makers = {
        "cbcl": problem_cbcl,
        "ijcnn1": problem_ijcnn1,
        "patches": lambda d: problem_patches(d, args.n_patches),
        "pendigits": problem_pendigits,
        "usps": problem_usps,
        "letter": problem_letter,
        "a9a": problem_a9a,
        "reuters": problem_reuters,
        "sector": problem_sector,
    }
    unknown = set(args.problems.split(",")) - set(makers)
    if unknown:
        ap.error(f"--problems: unknown {sorted(unknown)}; choose from {sorted(makers)}")
    if "patches" in args.problems.split(",") and args.n_patches < 28_838:  # checked before the other problems run
        ap.error(
            f"--n-patches: at least 28,838 (the augmented CBCL faces and the CBCL non-faces), got {args.n_patches}"
        )
    # the patches problem reads the CBCL file (and the nonface_scenes folder, below)
    require_sets([p.replace("patches", "cbcl") for p in args.problems.split(",")], args.data, "the benchmark problems")
    if "patches" in args.problems.split(",") and not (args.data / "nonface_scenes").is_dir():
        ap.error(f"missing data folder {args.data / 'nonface_scenes'} (the patches problem's negative images)")
    rows = []
    for name in args.problems.split(","):
        X, y, Xt, yt, params = makers[name](args.data)
        if args.probability:
            params = {**params, "probability": True, "random_state": 0}
        rows.append(run(name, X, y, Xt, yt, params, args.cache_size, args.n_jobs))
    print(
        "\n| problem | n | svmcore s | LIBSVM s | ratio | objective svmcore | objective LIBSVM | rel. diff | "
        "acc svmcore | acc LIBSVM | nSV | corr(f) (2 classes) / equal predictions |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(ROW.format(**r))


if __name__ == "__main__":
    main()
