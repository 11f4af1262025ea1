"""Freed memory kept for a build's next large array (glibc's malloc).

glibc serves every allocation above its mmap threshold (at most 32 MiB by default) with fresh
pages from the kernel and gives them back when the array is freed, so the next array of that
size is zeroed and paged in again, fault by fault. A build makes hundreds of arrays of 50–250
MB (the error estimate's 1:8 refinement of a 300k-tet mesh, pass after pass), and its system
time went there: on a 75 mm coupling's default build 6.0–6.5 s of 31 s of CPU. :func:`kept_heap`
runs a function with both thresholds (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD) at ``KEPT_BYTES``,
so freed arrays stay in the heap for the next ones (the same build: 2.8 s of system time, its
peak memory 12 % higher), then puts glibc's defaults back and returns the heap's free memory to
the system (malloc_trim). The results are the same bytes (docs/design/extent-and-estimate.md,
"The heap"). Nested calls keep the thresholds until the outermost ends. Elsewhere than glibc
(macOS, Windows, musl), nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading

#: Arrays up to this size are served from (and freed to) the heap while a build runs.
KEPT_BYTES = 1 << 30
#: mallopt's parameters and glibc's defaults for them.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
DEFAULT_THRESHOLD = 128 * 1024


def _glibc():
    """The C library when it is glibc (it has mallopt, malloc_trim and gnu_get_libc_version), else None."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    if libc is None or not all(hasattr(libc, f) for f in ("mallopt", "malloc_trim", "gnu_get_libc_version")):
        return None
    return libc


LIBC = _glibc()
_LOCK = threading.Lock()
_DEPTH = [0]


def _thresholds(value: int) -> None:
    LIBC.mallopt(M_MMAP_THRESHOLD, value)
    LIBC.mallopt(M_TRIM_THRESHOLD, value)


def kept_heap(function):
    """``function`` run with freed memory kept in the heap (module docstring)."""
    @functools.wraps(function)
    def kept(*args, **kwargs):
        if LIBC is None:
            return function(*args, **kwargs)
        with _LOCK:
            _DEPTH[0] += 1
            if _DEPTH[0] == 1:
                _thresholds(KEPT_BYTES)
        try:
            return function(*args, **kwargs)
        finally:
            with _LOCK:
                _DEPTH[0] -= 1
                if _DEPTH[0] == 0:
                    _thresholds(DEFAULT_THRESHOLD)
                    LIBC.malloc_trim(0)
    return kept
