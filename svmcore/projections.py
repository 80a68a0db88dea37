"""Euclidean projections used by the top-k multiclass SVM (Lapin, Hein, Schiele, NIPS 2015, Sec. 3).

Sets, for a vector x in R^m:

- simplex            Delta(r)   = {x : 0 <= x_i, <1, x> <= r}
- top-k cone         K_k        = {x : 0 <= x_i <= <1, x> / k}
- top-k simplex      Delta_k(r) = K_k intersected with {<1, x> <= r}           (alpha loss, eq. (3))
- capped simplex     B(hi, r)   = {x : 0 <= x_i <= hi, <1, x> <= r}            (beta loss, eq. (5), hi = r/k)

Each projection solves the *biased* problem ``argmin_x ||a - x||^2 + rho <1, x>^2`` over the set, which is the
per-example step of Prox-SDCA (Proposition 4, with rho = 1). The solution always has the form
``x = clip(a - t, 0, hi)``: a lower threshold t and an upper cap hi.

Algorithms (all O(m log m) at worst: the sorted order read lazily from a max-heap, O(m) to build and O(log m)
per entry, during a monotone walk over at most 2m breakpoints):

- top-k cone (Lemma 3 case analysis; Lemma 4 for rho > 0): x = 0 if the k largest a sum to <= 0; x = hi on the
  k largest entries if hi = sum_k / (k + rho k^2) keeps them apart from the rest; otherwise the general case with
  index sets U (x = hi), M (0 < x < hi), L (x = 0). Writing F(hi) for the optimal value with the cap fixed,
  F is convex and, as hi grows, t decreases and t + hi increases, so U only shrinks and U+M only grows: the
  walk visits at most m (U, M) pairs, solving F'(hi) = 0 in closed form on each piece.
- top-k simplex (Lemma 5 / Proposition 4): project onto the biased top-k cone; if the result sums to <= r it
  is the answer, otherwise the constraint <1, x> = r is active, the bias is constant and the answer is the
  continuous quadratic knapsack projection onto {0 <= x <= r/k, <1, x> = r}.
- capped simplex: x = clip(a - t, 0, hi) with t = rho <1, x> (monotone in t) unless that sum exceeds r, in
  which case the knapsack projection with <1, x> = r.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .validation import check_array, check_scalar


# --- numba cores ----------------------------------------------------------------------------------------------------
# The walks read the input in decreasing order, b[0] >= b[1] >= ..., but usually stop after a few entries (the
# projection is sparse), so b is produced lazily from a max-heap: O(m) to build, O(log m) per entry read;
# O(m log m) in the worst case. ``buf`` (length >= 2m) holds b in buf[:m] and the heap in buf[m:2m];
# ``st`` = [entries of b produced, heap size].


@nb.njit(cache=True)
def _sift_down(h, base, n, i):
    v = h[base + i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and h[base + c + 1] > h[base + c]:
            c += 1
        if h[base + c] <= v:
            break
        h[base + i] = h[base + c]
        i = c
    h[base + i] = v


@nb.njit(cache=True)
def _heap_init(a, buf, st):
    m = a.shape[0]
    for i in range(m):
        buf[m + i] = a[i]
    for i in range(m // 2 - 1, -1, -1):
        _sift_down(buf, m, m, i)
    st[0] = 0
    st[1] = m


@nb.njit(cache=True)
def _b(buf, st, m, i):
    """The i-th largest input entry (0-based), popping the heap as far as needed."""
    while st[0] <= i:
        n = st[1]
        buf[st[0]] = buf[m]
        n -= 1
        buf[m] = buf[m + n]
        st[1] = n
        _sift_down(buf, m, n, 0)
        st[0] += 1
    return buf[i]


@nb.njit(cache=True)
def _cone_thresholds(buf, st, m, k, rho):
    """Biased top-k cone: return (t, hi) with x = clip(a - t, 0, hi); hi = 0 means x = 0."""
    sum_k = 0.0
    for i in range(k):
        sum_k += _b(buf, st, m, i)
    if sum_k <= 0.0:
        return buf[0], 0.0
    kk = float(k)
    hi = sum_k / (kk + rho * kk * kk)
    if k == m:
        return buf[m - 1] - hi, hi
    if hi <= buf[k - 1] - _b(buf, st, m, k):
        # x = hi on the k largest entries; any t in [b[k], b[k-1] - hi] works, take the middle
        return 0.5 * (buf[k] + buf[k - 1] - hi), hi
    # general case, starting from U = b[:k-1], M = {b[k-1], b[k]}, walking hi upwards
    u = k - 1
    l = k + 1
    sum_U = sum_k - buf[k - 1]
    sum_M = buf[k - 1] + buf[k]
    rho_kk = rho * kk * kk
    while True:
        n_M = float(l - u)
        k_u = kk - u
        hi = (n_M * sum_U + k_u * sum_M) / (n_M * (rho_kk + u) + k_u * k_u)
        # the piece ends when t reaches b[l] (b[l] joins M) or t + hi reaches b[u-1] (it leaves U)
        h_l = (sum_M - n_M * _b(buf, st, m, l)) / k_u if l < m else np.inf
        h_u = (n_M * buf[u - 1] - sum_M) / (l - k) if u > 0 else np.inf
        if hi <= h_l and hi <= h_u:
            return (sum_M - k_u * hi) / n_M, hi
        grow_l = h_l <= h_u
        shrink_u = h_u <= h_l
        if grow_l:
            sum_M += buf[l]
            l += 1
        if shrink_u:
            u -= 1
            sum_U -= buf[u]
            sum_M += buf[u]


@nb.njit(cache=True)
def _knapsack_threshold(buf, st, m, hi, r, rho, biased):
    """Threshold t of x = clip(a - t, 0, hi) with <1, x> = r (biased=False) or t = rho <1, x> (biased=True).

    S(t) = sum clip(b - t, 0, hi) is piecewise linear and nonincreasing; walk t downwards over its breakpoints
    b[l] (entry into M) and b[u] - hi (entry into U) and solve on the piece where the root lies.
    """
    u = 0
    l = 0
    sum_M = 0.0
    t_cur = _b(buf, st, m, 0)
    while True:
        while l < m and _b(buf, st, m, l) >= t_cur:
            sum_M += buf[l]
            l += 1
        while u < l and buf[u] - hi >= t_cur:
            sum_M -= buf[u]
            u += 1
        n_M = l - u
        t_next = -np.inf
        if l < m:
            t_next = _b(buf, st, m, l)
        if u < l and buf[u] - hi > t_next:
            t_next = buf[u] - hi
        base = u * hi + sum_M  # S(t) = base - n_M t on this piece
        if biased:
            t = rho * base / (1.0 + rho * n_M)
            if t >= t_next:
                return t
        else:
            if n_M == 0:
                if t_next == -np.inf or base >= r:
                    return t_cur
            else:
                t = (base - r) / n_M
                if t >= t_next:
                    return t
        t_cur = t_next


@nb.njit(cache=True)
def _clip_into(a, t, hi, x):
    for i in range(a.shape[0]):
        v = a[i] - t
        x[i] = 0.0 if v <= 0.0 else (hi if v >= hi else v)


@nb.njit(cache=True)
def _sum(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    return s


@nb.njit(cache=True)
def _knapsack_shifted(a, hi, r, x, buf, st):
    """x <- clip(a - t, 0, hi) with <1, x> = r (the unbiased knapsack projection), computed on a - max(a).

    The projection is invariant to a common shift of a, but its threshold t is found by sums of the entries: on
    entries of size |a| >> r (Prox-SDCA steps (s - e_y) / K_ii on features of 1e-8, K_ii ~ 1e-16) their rounding
    (|a| eps) swamped r, and x came out summing to 1.125 r (an infeasible dual, above the primal) or to 0 (the
    solver stalled). Shifted, the entries near the top, the only ones x keeps, are exact differences."""
    m = a.shape[0]
    top = a[0]
    for i in range(1, m):
        top = max(top, a[i])
    for i in range(m):
        x[i] = a[i] - top
    _heap_init(x, buf, st)
    t = _knapsack_threshold(buf, st, m, hi, r, 0.0, False)
    _clip_into(x, t, hi, x)


@nb.njit(cache=True)
def topk_simplex_into(a, k, r, rho, x, buf):
    """x <- argmin ||a - x||^2 + rho <1, x>^2 over Delta_k(r); ``buf`` is scratch of length >= 2m."""
    m = a.shape[0]
    st = np.empty(2, np.int64)
    _heap_init(a, buf, st)
    t, hi = _cone_thresholds(buf, st, m, k, rho)
    if k * hi <= r:
        _clip_into(a, t, hi, x)
        return
    _knapsack_shifted(a, r / k, r, x, buf, st)


@nb.njit(cache=True)
def topk_cone_into(a, k, rho, x, buf):
    """x <- argmin ||a - x||^2 + rho <1, x>^2 over the top-k cone K_k."""
    m = a.shape[0]
    st = np.empty(2, np.int64)
    _heap_init(a, buf, st)
    t, hi = _cone_thresholds(buf, st, m, k, rho)
    _clip_into(a, t, hi, x)


@nb.njit(cache=True)
def knapsack_into(a, hi, r, rho, x, buf):
    """x <- argmin ||a - x||^2 + rho <1, x>^2 over {0 <= x <= hi, <1, x> <= r}."""
    m = a.shape[0]
    st = np.empty(2, np.int64)
    _heap_init(a, buf, st)
    b0 = _b(buf, st, m, 0)
    if b0 <= 0.0:
        _clip_into(a, b0, 0.0, x)
        return
    t = _knapsack_threshold(buf, st, m, hi, r, rho, True)
    _clip_into(a, t, hi, x)
    if _sum(x) > r:
        if m * hi <= r:  # the cap alone keeps the sum feasible: only rounding got here
            return
        _knapsack_shifted(a, hi, r, x, buf, st)


# --- public wrappers -----------------------------------------------------------------------------------------------


def _vector(a):
    return check_array(a, "a", ndim=1)


def _k(k, m):
    check_scalar(k, "k", lo=1, integer=True)
    if k > m:
        raise ValueError(f"k: must be <= the length of a ({m}), got {k}")
    return int(k)


def project_topk_cone(a: np.ndarray, k: int, rho: float = 0.0) -> np.ndarray:
    """Biased projection onto the top-k cone: argmin_x ||a - x||^2 + rho <1, x>^2 s.t. 0 <= x_i <= <1, x>/k.

    a: (m,) float array (copied to float64); k: integer 1 <= k <= m; rho >= 0. Returns (m,) float64.
    Source: Lapin, Hein, Schiele, NIPS 2015, Lemma 3 (rho = 0: the three cases x = 0, x = const on the top k,
    general U/M/L split) and Lemma 4 (rho > 0). O(m log m). Raises ValueError for NaN/inf, empty a, k out of
    range or rho < 0; TypeError for non-numeric input.
    """
    a = _vector(a)
    k = _k(k, a.shape[0])
    rho = float(check_scalar(rho, "rho", lo=0.0))
    x = np.empty_like(a)
    topk_cone_into(a, k, rho, x, np.empty(2 * a.shape[0]))
    return x


def project_topk_simplex(a: np.ndarray, k: int, r: float = 1.0, rho: float = 0.0) -> np.ndarray:
    """Biased projection onto the top-k simplex Delta_k(r) = {x : <1, x> <= r, 0 <= x_i <= <1, x>/k}.

    Solves argmin_x ||a - x||^2 + rho <1, x>^2 over Delta_k(r); rho = 1 is the Prox-SDCA step of the top-k
    hinge loss alpha (NIPS 2015, Proposition 4). a: (m,) float array; k: integer 1 <= k <= m; r > 0;
    rho >= 0. Returns (m,) float64. Source: Lemma 5 / Proposition 4: the biased top-k cone projection
    (Lemmas 3-4) if it sums to <= r, else the continuous quadratic knapsack projection onto
    {0 <= x <= r/k, <1, x> = r}. O(m log m). Raises ValueError for NaN/inf, k out of range, r <= 0, rho < 0.
    """
    a = _vector(a)
    k = _k(k, a.shape[0])
    r = float(check_scalar(r, "r", lo=0.0, lo_open=True))
    rho = float(check_scalar(rho, "rho", lo=0.0))
    x = np.empty_like(a)
    topk_simplex_into(a, k, r, rho, x, np.empty(2 * a.shape[0]))
    return x


def project_simplex(a: np.ndarray, r: float = 1.0) -> np.ndarray:
    """Projection onto the simplex Delta(r) = {x : x >= 0, <1, x> <= r} (Delta_1(r) of the paper, k = 1).

    a: (m,) float array; r > 0. Returns (m,) float64: max(a, 0) if that sums to <= r, else the knapsack
    projection onto {x >= 0, <1, x> = r}. O(m log m). Raises ValueError for NaN/inf or r <= 0.
    """
    return project_topk_simplex(a, 1, r, 0.0)


def project_knapsack(a: np.ndarray, hi: float, r: float = 1.0, rho: float = 0.0) -> np.ndarray:
    """Biased projection onto the capped simplex {x : 0 <= x_i <= hi, <1, x> <= r}.

    Solves argmin_x ||a - x||^2 + rho <1, x>^2 (a continuous quadratic knapsack problem); with hi = r/k and
    rho = 1 it is the Prox-SDCA step of the top-k hinge loss beta (NIPS 2015, eq. (5), whose conjugate is the
    indicator of this set). a: (m,) float array; hi > 0; r > 0; rho >= 0. Returns (m,) float64. O(m log m).
    Raises ValueError for NaN/inf, hi <= 0, r <= 0 or rho < 0.
    """
    a = _vector(a)
    hi = float(check_scalar(hi, "hi", lo=0.0, lo_open=True))
    r = float(check_scalar(r, "r", lo=0.0, lo_open=True))
    rho = float(check_scalar(rho, "rho", lo=0.0))
    x = np.empty_like(a)
    knapsack_into(a, hi, r, rho, x, np.empty(2 * a.shape[0]))
    return x
