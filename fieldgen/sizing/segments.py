"""Straight segments ``a[i] → b[i]`` (k, d) in 2-D or 3-D, the one home of two measures the thin
wall meshers share: the nearest point of a set of segments to each query point, and points
sampled along the segments at a given spacing (docs/model.md §2.10)."""

from __future__ import annotations

import numpy as np


def nearest_on_segments(query: np.ndarray, a: np.ndarray, b: np.ndarray,
                        chunk: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """For each ``query`` point the segment whose nearest point is nearest it and where that
    point lies on it (0 at ``a``, 1 at ``b``); a segment of zero length is its point ``a``."""
    run = b - a
    length2 = np.maximum(np.linalg.norm(run, axis=1) ** 2, np.finfo(float).tiny)
    segment = np.empty(len(query), dtype=np.int64)
    where = np.empty(len(query))
    for first in range(0, len(query), chunk):
        q = query[first:first + chunk, None, :]
        share = np.clip(np.einsum("qsd,sd->qs", q - a[None], run) / length2[None], 0.0, 1.0)
        gap = np.linalg.norm(a[None] + share[..., None] * run[None] - q, axis=2)
        nearest = np.argmin(gap, axis=1)
        segment[first:first + chunk] = nearest
        where[first:first + chunk] = share[np.arange(len(q)), nearest]
    return segment, where


def along_segments(a: np.ndarray, b: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Points every ``step`` or less along each segment, from its ``a`` (its ``b`` left to the
    next segment of a chain), and the segment of each."""
    pieces = np.maximum(np.ceil(np.linalg.norm(b - a, axis=1) / step), 1).astype(np.int64)
    share = np.concatenate([np.arange(k) / k for k in pieces] + [np.zeros(0)])
    samples = np.repeat(a, pieces, axis=0) + share[:, None] * np.repeat(b - a, pieces, axis=0)
    return samples, np.repeat(np.arange(len(a)), pieces)
