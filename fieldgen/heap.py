"""Freed memory kept for a build's next large array (glibc's malloc).

glibc serves every allocation above its mmap threshold (at most 32 MiB, its dynamic threshold's
ceiling) with fresh pages from the kernel and gives them back when the array is freed, so the
next array of that size is zeroed and paged in again, fault by fault. A build makes hundreds of
arrays of 50–250 MB (the error estimate's 1:8 refinement of a 300k-tet mesh, pass after pass),
and its system time went there: on a 75 mm coupling's default build 6.0–6.5 s of 31 s of CPU.
:data:`kept_heap` runs a function with both thresholds (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD) at
``KEPT_BYTES``, so freed arrays stay in the heap for the next ones (the same build: 2.8 s of
system time, its peak memory 12 % higher), and when the last caller inside ends
(:class:`fieldgen.held.Held`) sets them to ``AFTER_MMAP`` and ``AFTER_TRIM`` and returns the
heap's free memory to the system (malloc_trim). glibc has no call that turns its dynamic
threshold back on, so "after" is where that threshold settles in a process that frees large
arrays (32 MiB, trim at twice it), not the 128 KiB it starts at. The results are the same bytes
(docs/design/extent-and-estimate.md, "The heap"). Elsewhere than glibc (macOS, Windows, musl),
or where glibc refuses the value, nothing is changed.
"""

from __future__ import annotations

import ctypes

from fieldgen.held import Held

#: Arrays up to this size are served from (and freed to) the heap while a build runs.
KEPT_BYTES = 1 << 30
#: The thresholds after: glibc's dynamic mmap threshold's ceiling, and the trim threshold it sets
#: beside it (twice).
AFTER_MMAP, AFTER_TRIM = 32 << 20, 64 << 20
#: mallopt's parameters.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3


def _glibc():
    """The running C library when it is glibc (it has mallopt, malloc_trim and
    gnu_get_libc_version), else None."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    if not all(hasattr(libc, f) for f in ("mallopt", "malloc_trim", "gnu_get_libc_version")):
        return None
    return libc


LIBC = _glibc()


def _thresholds(mmap: int, trim: int) -> bool:
    """Set both thresholds; whether glibc took either (mallopt returns 1, else changes nothing)."""
    took_mmap = LIBC.mallopt(M_MMAP_THRESHOLD, mmap) == 1
    return LIBC.mallopt(M_TRIM_THRESHOLD, trim) == 1 or took_mmap


def _keep() -> bool:
    return LIBC is not None and _thresholds(KEPT_BYTES, KEPT_BYTES)


def _release(kept: bool) -> None:
    if kept:
        _thresholds(AFTER_MMAP, AFTER_TRIM)
        LIBC.malloc_trim(0)


#: A decorator (and context manager): freed memory kept in the heap while the function runs
#: (module docstring).
kept_heap = Held(_keep, _release)
