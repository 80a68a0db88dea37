"""Projections of svmcore.projections against a general QP solver (cvxopt, then an exact active-set polish).

TOPK_QP_CASES=3000 (environment) runs thousands of random problems; the default keeps the test fast.
"""

import os

import cvxopt
import numpy as np
import pytest

from svmcore.projections import project_knapsack, project_simplex, project_topk_cone, project_topk_simplex

N_CASES = int(os.environ.get("TOPK_QP_CASES", "150"))


def qp_reference(a, kind, k=1, r=1.0, rho=0.0, hi=None):
    """argmin ||a - x||^2 + rho <1, x>^2 over the named set, by cvxopt's interior-point QP solver.

    Interior-point solutions are only ~1e-5 accurate on degenerate problems (ties, zero multipliers), so the
    active set read off the solution at a few thresholds is re-solved exactly as an equality-constrained QP
    (KKT system); a polished point is kept if it is feasible and has a lower objective.
    """
    m = len(a)
    P = 2.0 * (np.eye(m) + rho * np.ones((m, m)))
    q = -2.0 * a
    G, h = [-np.eye(m)], [np.zeros(m)]
    if kind in ("cone", "topk"):
        G.append(np.eye(m) - np.ones((m, m)) / k)
        h.append(np.zeros(m))
    if kind in ("topk", "knapsack"):
        G.append(np.ones((1, m)))
        h.append([r])
    if kind == "knapsack":
        G.append(np.eye(m))
        h.append(np.full(m, hi))
    G, h = np.vstack(G), np.concatenate(h)
    x = None
    for tol in (1e-10, 1e-9, 1e-8, 1e-7):
        try:
            sol = cvxopt.solvers.qp(
                cvxopt.matrix(P),
                cvxopt.matrix(q),
                cvxopt.matrix(G),
                cvxopt.matrix(h),
                options=dict(show_progress=False, abstol=tol, reltol=tol, feastol=tol),
            )
            x = np.array(sol["x"]).ravel()
            break
        except (ValueError, ArithmeticError):
            continue
    assert x is not None, "cvxopt failed"

    def f(z):
        return 0.5 * z @ P @ z + q @ z

    scale = 1.0 + np.abs(a).max()
    best, f_best = x, f(x)
    for thr in (1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4):
        act = h - G @ x <= thr * scale
        n_act = int(act.sum())
        kkt = np.block([[P, G[act].T], [G[act], np.zeros((n_act, n_act))]])
        z = np.linalg.lstsq(kkt, np.concatenate([-q, h[act]]), rcond=None)[0][:m]
        if (G @ z - h).max() <= 1e-10 * scale and f(z) < f_best:
            best, f_best = z, f(z)
    return best


def random_case(rng):
    m = int(rng.integers(2, 15))
    kind = rng.integers(4)
    if kind == 0:
        a = rng.normal(size=m) * rng.choice([0.01, 1.0, 10.0])
    elif kind == 1:  # many ties
        a = rng.integers(-2, 3, size=m).astype(float)
    elif kind == 2:  # all equal
        a = np.full(m, rng.normal())
    else:
        a = rng.normal(size=m) + rng.choice([-3.0, 0.0, 3.0])
    k = int(rng.integers(1, m))  # k = m has an empty interior (cvxopt fails); tested in closed form below
    r = float(rng.choice([0.01, 0.5, 1.0, 3.0, 100.0]))
    rho = float(rng.choice([0.0, 0.5, 1.0, 10.0]))
    hi = r / k * float(rng.choice([0.5, 1.0, 2.0]))
    return a, k, r, rho, hi


def test_projections_match_qp_solver_on_random_inputs_with_ties():
    rng = np.random.default_rng(2015)
    worst = dict(cone=0.0, topk=0.0, simplex=0.0, knapsack=0.0)
    for _ in range(N_CASES):
        a, k, r, rho, hi = random_case(rng)
        pairs = {
            "cone": (project_topk_cone(a, k, rho), qp_reference(a, "cone", k=k, rho=rho)),
            "topk": (project_topk_simplex(a, k, r, rho), qp_reference(a, "topk", k=k, r=r, rho=rho)),
            "simplex": (project_simplex(a, r), qp_reference(a, "topk", k=1, r=r)),
            "knapsack": (project_knapsack(a, hi, r, rho), qp_reference(a, "knapsack", r=r, rho=rho, hi=hi)),
        }
        for name, (x, ref) in pairs.items():
            worst[name] = max(worst[name], float(np.abs(x - ref).max()))
    print(f"\nworst max|x - x_qp| over {N_CASES} random problems per projection: {worst}")
    assert max(worst.values()) <= 1e-6, worst


def test_closed_form_cases():
    a = np.array([3.0, 1.0, -1.0, 0.5])
    # k = m: x = c 1 with c = max(0, sum a) / (m + rho m^2)
    for rho in (0.0, 1.0):
        np.testing.assert_allclose(project_topk_cone(a, 4, rho), np.full(4, 3.5 / (4 + rho * 16)))
    np.testing.assert_array_equal(project_topk_cone(-np.abs(a), 4), 0.0)
    # zero case: the k largest sum to <= 0 (Lemma 3)
    np.testing.assert_array_equal(project_topk_cone(np.array([1.0, -1.0, -2.0]), 2), 0.0)
    # constant case: the top k far above the rest -> x = sum_k / (k + rho k^2) on them
    np.testing.assert_allclose(project_topk_cone(np.array([10.0, 9.0, -5.0]), 2, 1.0), [19 / 6, 19 / 6, 0.0])
    # k = 1 cone is the nonnegative orthant; the simplex is its intersection with <1, x> <= r
    np.testing.assert_allclose(project_topk_cone(a, 1), np.maximum(a, 0))
    np.testing.assert_allclose(project_simplex(np.array([0.2, 0.3, -1.0])), [0.2, 0.3, 0.0])
    np.testing.assert_allclose(project_simplex(np.array([2.0, 1.0, 0.0]), 1.0), [1.0, 0.0, 0.0])
    # top-k simplex with a large radius is the cone projection
    np.testing.assert_allclose(project_topk_simplex(a, 2, 1e6, 0.5), project_topk_cone(a, 2, 0.5))
    # capped simplex with hi >= r is the simplex
    np.testing.assert_allclose(project_knapsack(a, 5.0, 2.0), project_simplex(a, 2.0))


def test_large_inputs_feasible_and_permutation_equivariant():
    rng = np.random.default_rng(1)
    for m in (1000, 20000):
        a = rng.normal(size=m)
        perm = rng.permutation(m)
        for k in (1, 7, m // 3):
            x = project_topk_simplex(a, k, 5.0, 1.0)
            s = x.sum()
            assert s <= 5.0 + 1e-9 and x.min() >= 0.0 and x.max() <= s / k + 1e-12
            np.testing.assert_allclose(project_topk_simplex(a[perm], k, 5.0, 1.0), x[perm], atol=1e-12)
            # optimality: no feasible point on the segment towards a random feasible point is better
            y = project_topk_simplex(rng.normal(size=m), k, 5.0, 1.0)

            def f(z, a=a):
                return np.sum((a - z) ** 2) + z.sum() ** 2

            assert all(f(x) <= f(x + t * (y - x)) + 1e-9 for t in (1e-3, 1e-2, 0.1, 1.0))


@pytest.mark.parametrize(
    "bad, err",
    [
        (dict(a=[1.0, np.nan], k=1), ValueError),
        (dict(a=[1.0, 2.0], k=3), ValueError),
        (dict(a=[1.0, 2.0], k=0), ValueError),
        (dict(a=[1.0, 2.0], k=1.5), TypeError),
        (dict(a=[[1.0, 2.0]], k=1), ValueError),
        (dict(a=[1.0, 2.0], k=1, r=0.0), ValueError),
        (dict(a=[1.0, 2.0], k=1, rho=-1.0), ValueError),
        (dict(a=["x", "y"], k=1), TypeError),
    ],
)
def test_bad_input(bad, err):
    with pytest.raises(err):
        project_topk_simplex(**bad)


def test_bad_input_other_projections():
    with pytest.raises(ValueError, match="k"):
        project_topk_cone([1.0, 2.0], 3)
    with pytest.raises(ValueError, match="hi"):
        project_knapsack([1.0, 2.0], 0.0)
    with pytest.raises(ValueError, match="NaN"):
        project_simplex([np.inf, 1.0])


def test_huge_entries_stay_feasible():
    """Entries of 1e15-1e20 near one another (Prox-SDCA's step on features of 1e-9): the knapsack threshold was
    found from sums whose rounding swamped r, so x summed to 1.125 r or to 0; the projection is shift-invariant
    there and is now computed on a - max(a)."""
    rng = np.random.default_rng(1)
    for big in (1e15, 1e17, 1e20):
        for m, k in ((3, 2), (5, 2), (9, 1), (9, 4)):
            noise = rng.normal(size=m)
            a = big + noise
            for x in (project_topk_simplex(a, k, 1.0, 1.0), project_knapsack(a, 1.0 / k, 1.0, 1.0)):
                assert x.min() >= 0.0 and x.max() <= 1.0 / k + 1e-12
                assert x.sum() == pytest.approx(1.0, abs=1e-12)  # |a| >> r: the sum constraint is active
            # the same as the projection of moderate entries with the same differences (both have <1, x> = r)
            np.testing.assert_allclose(
                project_topk_simplex(a, k, 1.0, 1.0), project_topk_simplex(a - a.max() + 100.0, k, 1.0, 1.0), atol=1e-12
            )
