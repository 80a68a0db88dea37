"""SVM+ duals solved by a general QP solver: the reference for tests and the baseline for benchmarks.

Not used by the estimators. The solvers (cvxopt, interior point; osqp, ADMM) are imported inside the
functions, so this module imports without them (they are in the ``test`` and ``bench`` extras).
Equation numbers refer to Li, Dai, Tan, Xu, Van Gool, "Fast Algorithms for Linear and Kernel SVM+",
CVPR 2016.

- :func:`svmplus_qp`: the original SVM+ dual (4) of Vapnik and Vashist, with unregularised biases b
  and b* (the paper's CVX-SVM+ / MAT-SVM+ baseline).
- :func:`svmplus_biasfree_qp`: the dual (8) with biases absorbed by a constant feature, i.e. the
  problem :class:`svmcore.LinearSVMPlus` solves by dual coordinate descent.
- :func:`l2_svmplus_qp`: the l2-loss SVM+ dual (22), the problem :class:`svmcore.KernelSVMPlus`
  solves by SMO.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from svmcore.kernels import KernelSpec, kernel_block
from svmcore.validation import check_choice

SOLVERS = ("cvxopt", "osqp")


def _qp(P, q, G=None, h=None, A=None, b=None, solver="cvxopt", tol=1e-10):
    """min 1/2 x'Px + q'x  s.t.  G x <= h, A x = b.  Returns ``(x, nu)``.

    ``nu`` holds the multipliers of the equality rows, signed so that P x + q + G'z + A' nu = 0 with
    z >= 0 (both solvers' convention).  Raises RuntimeError if the solver fails.
    """
    P = 0.5 * (P + P.T)
    n_eq = 0 if A is None else A.shape[0]
    if solver == "cvxopt":
        import cvxopt
        from cvxopt import solvers

        Gs = sp.coo_matrix(G)  # the constraint matrices are sparse (identity blocks)
        args = [
            cvxopt.matrix(P),
            cvxopt.matrix(q),
            cvxopt.spmatrix(Gs.data.tolist(), Gs.row.tolist(), Gs.col.tolist(), Gs.shape),
            cvxopt.matrix(h),
        ]
        if A is not None:
            args += [cvxopt.matrix(A), cvxopt.matrix(b)]
        sol = solvers.qp(
            *args, options={"show_progress": False, "abstol": tol, "reltol": tol, "feastol": tol, "maxiters": 200}
        )
        if sol["status"] != "optimal":
            # cvxopt often stalls just short of very tight tolerances; accept a small relative gap
            gap = sol.get("relative gap")
            if gap is None or not np.isfinite(gap) or gap > max(1e-7, 10 * tol):
                raise RuntimeError(f"cvxopt did not converge (status {sol['status']!r}, relative gap {gap})")
        x = np.array(sol["x"]).ravel()
        nu = np.array(sol["y"]).ravel() if A is not None else np.zeros(0)
        return x, nu
    if solver == "osqp":
        import osqp

        rows, lo, hi = [], [], []
        if A is not None:
            rows.append(sp.csc_matrix(A))
            lo.append(b)
            hi.append(b)
        rows.append(sp.csc_matrix(G))
        lo.append(np.full(G.shape[0], -np.inf))
        hi.append(h)
        prob = osqp.OSQP()
        prob.setup(
            sp.csc_matrix(np.triu(P)),
            q,
            sp.vstack(rows, format="csc"),
            np.concatenate(lo),
            np.concatenate(hi),
            eps_abs=tol,
            eps_rel=tol,
            max_iter=200000,
            polishing=True,
            verbose=False,
        )
        res = prob.solve()
        status = str(getattr(res.info, "status", ""))
        if "solved" not in status or "inaccurate" in status:
            raise RuntimeError(f"osqp did not converge (status {status!r})")
        return np.asarray(res.x, dtype=np.float64), np.asarray(res.y[:n_eq], dtype=np.float64)
    raise ValueError(f"solver: unknown value {solver!r}; expected one of {list(SOLVERS)}")


def svmplus_dual_objective(alpha, zeta, K, K_star, y, C, gamma):
    """Objective of the SVM+ duals (4) and (8), written as a minimisation (the negated dual):

    1/2 (alpha*y)' K (alpha*y) + 1/(2 gamma) (alpha + zeta - C)' K* (alpha + zeta - C) - 1'alpha.
    Pass the bias-augmented kernels (K + 1, K* + 1) for (8).
    """
    ay = alpha * y
    v = alpha + zeta - C
    return 0.5 * ay @ K @ ay + 0.5 / gamma * v @ K_star @ v - alpha.sum()


def _svmplus_alpha_u(K, K_star, y, C, gamma, equality, solver, tol):
    """Solve (4) (``equality``) or (8) over x = [alpha; u] with u = alpha + zeta - C.

    The objective 1/2 (alpha*y)'K(alpha*y) + 1/(2 gamma) u'K*u - 1'alpha has no large constant
    that cancels (in (alpha, zeta) the term in C/gamma does), which keeps the reference accurate for
    large C / small gamma; the constraints are alpha >= 0 and zeta = u - alpha + C >= 0.
    """
    n = y.shape[0]
    P = np.zeros((2 * n, 2 * n))
    P[:n, :n] = K * np.outer(y, y)
    P[n:, n:] = K_star / gamma
    q = np.concatenate([-np.ones(n), np.zeros(n)])
    eye = np.eye(n)
    G = np.block([[-eye, np.zeros((n, n))], [eye, -eye]])
    h = np.concatenate([np.zeros(n), np.full(n, float(C))])
    A = b = None
    if equality:
        A = np.zeros((2, 2 * n))
        A[0, :n] = y
        A[1, n:] = 1.0
        b = np.zeros(2)
    x, nu = _qp(P, q, G, h, A, b, solver=solver, tol=tol)
    alpha = np.maximum(x[:n], 0.0)
    zeta = np.maximum(x[n:] - alpha + C, 0.0)
    return alpha, zeta, nu


def svmplus_qp(K, K_star, y, C, gamma, solver="cvxopt", tol=1e-10):
    """Solve the original SVM+ dual (4) for (n, n) kernels ``K``, ``K_star`` and labels y in {+1, -1}.

    min over alpha, zeta >= 0 of :func:`svmplus_dual_objective` subject to y'alpha = 0 and
    1'(alpha + zeta - C) = 0.  The biases are the multipliers of these two equalities, so the
    decision function is f(x) = sum_i alpha_i y_i K(x_i, x) + b and the correcting function
    xi(x*) = (1/gamma) sum_i (alpha_i + zeta_i - C) K*(x*_i, x*) + b_star.
    Returns a dict with alpha, zeta (n,), b, b_star and objective.
    """
    alpha, zeta, nu = _svmplus_alpha_u(K, K_star, y, C, gamma, True, solver, tol)
    return {
        "alpha": alpha,
        "zeta": zeta,
        "b": float(nu[0]),
        "b_star": float(nu[1]),
        "objective": float(svmplus_dual_objective(alpha, zeta, K, K_star, y, C, gamma)),
    }


def svmplus_biasfree_qp(K_aug, K_star_aug, y, C, gamma, solver="cvxopt", tol=1e-10):
    """Solve the dual (8): the SVM+ dual with biases absorbed, over alpha, zeta >= 0 only.

    ``K_aug`` = K + 1 and ``K_star_aug`` = K* + 1 (for LinearSVMPlus: X X' + 1 and X* X*' + 1).
    Returns a dict with alpha, zeta (n,) and objective (:func:`svmplus_dual_objective`).
    """
    alpha, zeta, _ = _svmplus_alpha_u(K_aug, K_star_aug, y, C, gamma, False, solver, tol)
    return {
        "alpha": alpha,
        "zeta": zeta,
        "objective": float(svmplus_dual_objective(alpha, zeta, K_aug, K_star_aug, y, C, gamma)),
    }


def l2_svmplus_qp(Q, solver="cvxopt", tol=1e-10):
    """Solve the l2-loss SVM+ dual (22): min 1/2 alpha'Q alpha  s.t.  1'alpha = 1, alpha >= 0.

    ``Q`` (n, n) = (K + 1) o yy' + G (see :func:`svmcore.svmplus.l2_svmplus_q`).  Returns a dict with
    alpha (n,) and objective.
    """
    n = Q.shape[0]
    x, _ = _qp(Q, np.zeros(n), -np.eye(n), np.zeros(n), np.ones((1, n)), np.ones(1), solver=solver, tol=tol)
    alpha = np.maximum(x, 0.0)
    alpha /= alpha.sum()
    return {"alpha": alpha, "objective": float(0.5 * alpha @ Q @ alpha)}


class SVMPlusQP:
    """The QP baseline as a classifier: the original SVM+ (4) by :func:`svmplus_qp` (benchmarks only).

    ``kernel``/``kernel_star`` in {"linear", "rbf"} with widths ``kernel_gamma``/``kernel_star_gamma``
    (numbers; resolve the authors' mean-distance rule with :func:`svmcore.svmplus.mean_distance_gamma`);
    ``tol``: the solver's absolute/relative/feasibility tolerance (1e-7, about cvxopt's defaults).
    ``fit(X, X_star, y)`` with y (n,) in {+1, -1} (no label mapping); ``decision_function(X)`` returns
    f(x) = sum_i alpha_i y_i K(x_i, x) + b. Dense float64 inputs; O(n^2) memory, O(n^3) time.
    """

    def __init__(
        self,
        C=1.0,
        gamma=1.0,
        kernel="rbf",
        kernel_gamma=1.0,
        kernel_star="rbf",
        kernel_star_gamma=1.0,
        solver="cvxopt",
        tol=1e-7,
    ):
        self.C, self.gamma, self.solver, self.tol = C, gamma, solver, tol
        self.spec = KernelSpec(check_choice(kernel, "kernel", ("linear", "rbf")), float(kernel_gamma))
        self.spec_star = KernelSpec(
            check_choice(kernel_star, "kernel_star", ("linear", "rbf")), float(kernel_star_gamma)
        )

    def fit(self, X, X_star, y):
        y = np.asarray(y, dtype=np.float64)
        sol = svmplus_qp(
            kernel_block(X, X, self.spec),
            kernel_block(X_star, X_star, self.spec_star),
            y,
            self.C,
            self.gamma,
            solver=self.solver,
            tol=self.tol,
        )
        sv = sol["alpha"] > 1e-8 * max(sol["alpha"].max(), 1e-300)
        self.support_vectors_ = X[sv]
        self.dual_coef_ = sol["alpha"][sv] * y[sv]
        self.intercept_ = sol["b"]
        self.objective_ = sol["objective"]
        return self

    def decision_function(self, X):
        return kernel_block(X, self.support_vectors_, self.spec) @ self.dual_coef_ + self.intercept_
