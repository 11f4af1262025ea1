"""Size fields for a skin's depth-graded sizing (docs/model.md §2.10, docs/design/sizing.md).

With a skin, the mesh is graded by depth below the free surface: TetGen's -m with a background
size field (:func:`convex_background`) whose sizes come from the depth (:func:`depth_graded_sizes`),
the first pass's edge near the surface predicted within the tet budget
(:func:`first_near_edge`), each later pass's from the error model (:func:`next_near_edge`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial import Delaunay

from fieldgen.errors import MesherCrash
from fieldgen.meshing.tetmesh import TetMesh, orient_positive, tet_volumes

#: Convergence rate of the error in the edge length assumed before two passes measure it
#: (between a re-entrant edge's 4/3 and the smooth 2).
ASSUMED_RATE = 1.5
#: With a skin, a pass must shrink the edge near the surface to at most this fraction of the
#: last (about 37% more tets), or the sizing stops: TetGen's meshes of nearly the same size
#: differ by more than such a refinement gains (docs/design/sizing.md).
MIN_SHRINK = 0.9
#: TetGen's tets per unit of Σ V/s³ over a coarse mesh under a size field s (:func:`predicted_tets`):
#: the largest ratio measured on CAD parts with skins (docs/design/sizing.md), so a first mesh
#: predicted within a budget errs towards fewer tets.
SIZE_FIELD_TETS = 7.5
#: Rounds of growing the first near edge towards the budget; the edge after the last is taken
#: even if still predicted over.
FIRST_EDGE_ROUNDS = 8
#: Scales of a size field tried, in turn, when TetGen fails on it (:func:`mesh_with_size_field`;
#: TetGen fails on some size fields and not on others 5-10% away: docs/design/sizing.md).
SIZE_FIELD_RETRIES = (0.95, 1.05, 0.9)
#: Size of the first, coarse mesh (TetGen tets).
FIRST_TETS = 20_000


def depth_graded_sizes(depth: np.ndarray, skin: float, *, near: float | None = None,
                       grading: float = 0.5) -> np.ndarray:
    """Sizes that resolve a skin of thickness ``skin``: ``near`` (default skin/2) down to 1.25 x
    skin below the free surface, then growing by ``grading`` per unit depth (the rigid interior
    is cut away)."""
    near = 0.5 * skin if near is None else near
    return near + grading * np.maximum(np.asarray(depth) - 1.25 * skin, 0.0)


def capped_sizes(depth: np.ndarray, skin: float, first: float, near: float) -> np.ndarray:
    """The skin sizing's size field for the edge ``near`` the free surface: graded by ``depth``
    (:func:`depth_graded_sizes`), but nowhere coarser than the first mesh's edge ``first`` (or
    ``near``, if larger)."""
    return np.minimum(depth_graded_sizes(depth, skin, near=near), max(first, near))


def predicted_tets(coarse: TetMesh, sizes: np.ndarray) -> float:
    """About how many tets TetGen makes for the size field ``sizes`` (at ``coarse``'s vertices):
    ``SIZE_FIELD_TETS`` x Σ V / s³ over ``coarse``'s tets (s the mean of a tet's vertex sizes)."""
    volume = np.abs(tet_volumes(coarse.points, coarse.tets))
    size = np.asarray(sizes, dtype=np.float64)[coarse.tets].mean(axis=1)
    return SIZE_FIELD_TETS * float((volume / size ** 3).sum())


def first_near_edge(coarse: TetMesh, sizes, near: float, max_tets: int) -> float:
    """The first pass's edge near the free surface: ``near``, or larger where the mesh it asks
    for (:func:`predicted_tets` of ``sizes(near)``) would pass ``max_tets`` (``FIRST_EDGE_ROUNDS``
    rounds at most): a thin skin over a large part would otherwise ask for millions of tets in its
    first pass. The edge can pass the skin's thickness: the accuracy warning then says how far the
    field is (docs/design/sizing.md)."""
    for _ in range(FIRST_EDGE_ROUNDS):    # the deep sizes do not grow with near: 1% over each round
        predicted = predicted_tets(coarse, sizes(near))
        if predicted <= max_tets:
            break
        near *= 1.01 * (predicted / max_tets) ** (1.0 / 3.0)
    return float(near)


def mesh_with_size_field(mesher, points: np.ndarray, sizes: np.ndarray, *, near: float,
                         uniform_edge: float | None, progress=None):
    """``mesher.mesh(None, background=...)`` with the size field ``sizes`` at ``points`` (its edge
    near the free surface ``near``), how it was meshed and that edge. Where TetGen fails on the
    field (:class:`fieldgen.errors.MesherCrash`: a crash, an internal error or a flat tet; some
    size fields cause them and fields 5-10% away do not), it is tried with the sizes scaled by
    each of ``SIZE_FIELD_RETRIES`` in turn, then with the uniform edge ``uniform_edge``
    (``mesher.mesh(uniform_edge)``, TetGen's volume bound) unless that is None. Returns
    (the mesher's :class:`~fieldgen.sizing.mesher.MeshedPass`, "size field", "size field x F" or
    "uniform edge", the near edge of the mesh made: F x ``near`` or ``uniform_edge``). When every
    attempt fails, one MesherCrash lists them. ``progress`` (optional) is told of each retry and
    why."""
    failures = []
    factors = (1.0,) + SIZE_FIELD_RETRIES
    for n, factor in enumerate(factors):
        try:
            made = mesher.mesh(None, background=convex_background(points, factor * np.asarray(sizes)))
            return made, ("size field" if factor == 1.0 else f"size field x {factor:g}"), factor * near
        except MesherCrash as error:
            failures.append(f"sizes x {factor:g}: {error.defect}")
            if n + 1 < len(factors):
                _say_retry(progress, f"with the sizes x {factors[n + 1]:g}", error)
            elif uniform_edge is not None:
                _say_retry(progress, f"with a uniform edge of {uniform_edge:.4g} m", error)
    if uniform_edge is not None:
        try:
            return mesher.mesh(uniform_edge), "uniform edge", float(uniform_edge)
        except MesherCrash as error:
            failures.append(f"uniform edge {uniform_edge:.4g} m: {error.defect}")
    raise MesherCrash("TetGen failed on every mesh the skin's sizing tried: " + "; ".join(failures),
                      fix="give --edge-length (no larger than half the skin) to mesh with a uniform edge, "
                          "or change --skin slightly")


def _say_retry(progress, what: str, error: MesherCrash) -> None:
    if progress is not None:
        progress.message(f"TetGen failed on the size field ({error.defect[:120]}); retrying {what}")


def next_near_edge(near: float, worst: float, previous: tuple[float, float] | None, goal: float,
                   tets: int, max_tets: int) -> float | None:
    """The skin sizing's next edge near the free surface: the one that brings the ``worst`` error
    at edge ``near`` to ``goal`` (error ∝ h^rate, the rate measured from the ``previous`` pass's
    (edge, error) when there is one, else ``ASSUMED_RATE``), but no finer than the ``max_tets``
    budget allows for a mesh of ``tets`` (the count grows as (near / new)^3); None when that is
    not at most ``MIN_SHRINK`` x ``near`` (stop: a pass that small gains less than TetGen's
    mesh-to-mesh variation)."""
    rate = ASSUMED_RATE
    if previous is not None and previous[1] > worst > 0 and previous[0] > near:
        rate = float(np.clip(math.log(previous[1] / worst) / math.log(previous[0] / near), 1.0, 2.0))
    new = max(_edge_for(near, worst, goal, rate), near * (tets / max_tets) ** (1.0 / 3.0))
    return None if new > MIN_SHRINK * near else float(new)


def convex_background(points: np.ndarray, sizes: np.ndarray):
    """A size field for TetGen (its -m): Delaunay tets over ``points`` with ``sizes`` there.

    TetGen locates each new point in the background mesh by walking from tet to tet; measured
    with tetgen 0.8.4, it crashed (SIGSEGV) on a background mesh that was the part's own mesh
    (not convex) and on the Delaunay tets of its vertices (coincident points), and worked on
    a background covering the domain strictly: so the points are moved by 1e-9 of the part's
    size (seeded: deterministic) and eight corners 2% outside the bounding box are added, with
    the largest size.
    """
    points = np.asarray(points, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    lo, hi = points.min(axis=0), points.max(axis=0)
    extent = float((hi - lo).max())
    jitter = np.random.default_rng(0).uniform(-1.0, 1.0, size=points.shape) * 1e-9 * extent
    pad = 0.02 * extent
    corners = np.array([[x, y, z] for x in (lo[0] - pad, hi[0] + pad) for y in (lo[1] - pad, hi[1] + pad)
                        for z in (lo[2] - pad, hi[2] + pad)])
    cloud = np.vstack([points + jitter, corners])
    tets = orient_positive(cloud, Delaunay(cloud).simplices.astype(np.int64))
    tets = tets[tet_volumes(cloud, tets) > 0]
    return cloud, tets, np.concatenate([sizes, np.full(8, sizes.max())])


def first_size(volume: float, tets: int = FIRST_TETS) -> float:
    """Edge length that gives about ``tets`` TetGen tets in ``volume`` (TetGen's mean tet is about
    a fifth of a regular tet of that edge, measured)."""
    return float((5.0 * 6.0 * math.sqrt(2.0) * volume / tets) ** (1.0 / 3.0))


def _edge_for(h: float, error: float, goal: float, rate: float) -> float:
    """Edge length that brings ``error`` at edge ``h`` to ``goal`` when error ∝ h^rate."""
    return h * (goal / max(error, 1e-300)) ** (1.0 / rate)
