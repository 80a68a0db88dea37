"""One thread pool for independent tasks: svmcore.SVC's binary problems and facedet's pyramid levels.

The tasks are the parallelism: inside each, BLAS and numba kernels run on one thread (small products shared
across cores lose to the pool's own threads; two pools spinning on the same cores made a scan 3x slower). The
numba solvers and kernels release the GIL, so threads are enough and the data are shared, not copied.
"""

from __future__ import annotations

import os
import threading
import warnings
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING

import numba as nb
import numpy as np
from threadpoolctl import threadpool_limits

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any

_lock = threading.Lock()
_single_users = 0  # contexts in this process that need BLAS on one thread
_limit = None


@contextmanager
def blas_single_thread() -> Iterator[None]:
    """BLAS on one thread while the context lasts. BLAS's thread count is process-wide: the first of
    overlapping contexts (in any threads) sets it to 1 and the last restores it (nested threadpool_limits in two
    threads would restore each other's settings out of order)."""
    global _single_users, _limit
    with _lock:
        if _single_users == 0:
            _limit = threadpool_limits(1, user_api="blas")
        _single_users += 1
    try:
        yield
    finally:
        with _lock:
            _single_users -= 1
            if _single_users == 0:
                _limit.restore_original_limits()


@lru_cache(maxsize=None)  # numba picks its layer once per process
def threadsafe_numba() -> bool:
    """Whether numba's threading layer (chosen at the first parallel kernel) takes parallel kernels from several
    threads at once: tbb and omp do, workqueue does not (it aborts the process)."""
    try:  # the layer is chosen by numba's thread launch, which a first parallel kernel would call after compiling
        from numba.np.ufunc.parallel import _launch_threads
    except ImportError:  # another numba: launch through a kernel (0.7 s to compile)
        nb.njit(parallel=True)(_parallel_sum)(2)
    else:
        _launch_threads()
    return nb.threading_layer() != "workqueue"


def _parallel_sum(n):
    total = 0
    for i in nb.prange(n):
        total += i
    return total


def check_threads(threads: object, name: str = "threads", all_cores: bool = False) -> int:
    """``threads`` as an int >= 1; with ``all_cores``, -1 means one per core this process may run on (affinity,
    containers). ValueError otherwise (bools included)."""
    valid = not isinstance(threads, bool) and isinstance(threads, (int, np.integer))
    if valid and all_cores and threads == -1:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if not valid or threads < 1:
        raise ValueError(
            f"{name}: expected {'-1 (one per core) or ' if all_cores else ''}an integer >= 1, got {threads!r}"
        )
    return int(threads)


@contextmanager
def thread_map(
    threads: int, *, parallel_kernels: bool = False, warn_stacklevel: int | None = None
) -> Iterator[Callable[[Callable[[Any], Any], Iterable[Any]], list[Any]]]:
    """A map over independent tasks on ``threads`` threads: yields ``run(f, items)`` -> [f(x) for x in items],
    in order, also from several calls.

    With more than one thread, each task runs its BLAS calls and numba kernels on one thread, and the first
    error cancels the tasks not yet started (Ctrl-C too) and is raised. One thread: a plain loop, thread
    settings untouched. ``parallel_kernels``: the tasks call numba parallel kernels; under numba's workqueue
    layer, which cannot run them from two threads at once, the map then runs on one thread, with a
    RuntimeWarning at ``warn_stacklevel`` if that is given. Tasks that do not depend on each other's order give
    the results of the plain loop run with BLAS on one thread.
    """
    threads = check_threads(threads)
    if threads > 1 and parallel_kernels and not threadsafe_numba():
        if warn_stacklevel is not None:
            warnings.warn(
                "numba's workqueue threading layer cannot run kernels from two threads at once (it "
                "aborts the process): running on one thread; install tbb for parallel work",
                RuntimeWarning,
                stacklevel=warn_stacklevel + 2,
            )
        threads = 1
    if threads == 1:
        yield lambda f, items: [f(x) for x in items]
        return
    before = nb.get_num_threads()
    with blas_single_thread():
        nb.set_num_threads(1)
        pool = ThreadPoolExecutor(threads, initializer=nb.set_num_threads, initargs=(1,))
        try:
            yield lambda f, items: _map_fail_fast(pool, f, items)
        except BaseException:
            pool.shutdown(cancel_futures=True)  # Ctrl-C: no task starts after it
            raise
        finally:
            pool.shutdown()
            nb.set_num_threads(before)


def _map_fail_fast(pool, f, items):
    """[f(x) for x in items] on the pool; the first error cancels every task not yet started and is raised."""
    futures = [pool.submit(f, x) for x in items]
    wait(futures, return_when=FIRST_EXCEPTION)
    for fut in futures:
        if fut.done() and not fut.cancelled() and fut.exception() is not None:
            for other in futures:
                other.cancel()
            raise fut.exception()
    return [fut.result() for fut in futures]
