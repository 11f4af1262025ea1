"""One BLAS thread for the library's numerics: the same bytes on every machine.

A BLAS reduction (a dot product or a norm over more than about ten thousand values, OpenBLAS)
is split among the library's threads, and each thread's partial sum rounds differently, so its
last bits follow the machine's core count. A build records such sums (the estimate's
``surface_gradient``, docs/model.md §2.10) and decides by others, so its asset would differ from
one machine to the next. :func:`one_blas_thread` runs a function with every BLAS and OpenMP
pool of the process held to one thread (threadpoolctl), scipy's own OpenBLAS loaded first so
the limit reaches it too, and puts them back after; each call sets the limit itself, in its own
thread (a limit set in a thread other than the main one does not always hold there with
OpenBLAS 0.3.30: builds in threads of one process are not covered, docs/design/extent-and-estimate.md). The build
gains nothing from those threads (its sparse solves already ran on one; TetGen and fTetWild are
child processes with their own threads) and an idle BLAS thread spins between calls
(docs/design/extent-and-estimate.md, "One BLAS thread").
"""

from __future__ import annotations

import contextlib
import functools


@contextlib.contextmanager
def blas_held():
    """The process's BLAS and OpenMP pools at one thread for this thread's calls, then as before."""
    import scipy.linalg  # noqa: F401  # lazy: loads scipy's own OpenBLAS, limited only once loaded
    from threadpoolctl import threadpool_limits  # lazy: as above

    with threadpool_limits(1):
        yield


def one_blas_thread(function):
    """``function`` run inside :func:`blas_held` (module docstring)."""
    @functools.wraps(function)
    def held(*args, **kwargs):
        with blas_held():
            return function(*args, **kwargs)
    return held
