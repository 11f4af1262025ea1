"""One BLAS thread for the library's numerics: the same bytes on every machine.

A BLAS reduction (a dot product or a norm over more than about ten thousand values, OpenBLAS)
is split among the library's threads, and each thread's partial sum rounds differently, so its
last bits follow the machine's core count. A build records such sums (the estimate's
``surface_gradient``, docs/model.md §2.10) and decides by others, so its asset would differ from
one machine to the next. :func:`one_blas_thread` runs a function with every BLAS and OpenMP
pool of the process held to one thread (threadpoolctl), restoring them after. The build gains
nothing from those threads (its sparse solves already ran on one; TetGen and fTetWild are child
processes with their own threads) and spends less CPU: idle BLAS threads spin between calls
(docs/design/extent-and-estimate.md, "One BLAS thread").
"""

from __future__ import annotations

import functools

from threadpoolctl import threadpool_limits


def one_blas_thread(function):
    """``function`` run with the process's BLAS and OpenMP pools at one thread (module docstring)."""
    @functools.wraps(function)
    def held(*args, **kwargs):
        with threadpool_limits(1):
            return function(*args, **kwargs)
    return held
