"""Layering: the stage that makes a tet mesh honour a nonlinear modulus law under the runtime's
linear interpolation (docs/model.md §2.4; D 5.1.2: "I mesh objects so that they have layers").

The error of linear interpolation of ``p0`` over a tet spanning ``Δe`` is about ``p0''·Δe²/8``
(docs/model.md §2.4). Refining isotropically cannot reach useful tolerances for steep laws, but
thin layers between extent levels can, and flat tets are fine for the runtime. The stage:

1. picks the extent levels (:func:`fieldgen.material.levels.balanced_levels`) and snaps the
   extent onto the nearby ones (:func:`fieldgen.material.levels.snap_to_levels`) to place the
   cuts, keeping the solved extent as the field;
2. splits only the edges the law needs split (:func:`fieldgen.material.bisection.refine_for_law`),
   or, where that would more than double the mesh, cuts every tet into the slabs between the
   levels (:func:`fieldgen.material.slabs.slice_into_slabs`) and then bisects what the snap left
   beyond the tolerance;
3. measures the achieved error independently, by sampling (:func:`max_interpolation_error`),
   against the law at the solved extent (docs/model.md §2.4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fieldgen.material.bisection import refine_for_law
from fieldgen.material.levels import balanced_levels, check_extent, check_tolerance, default_layer_tolerance, snap_to_levels
from fieldgen.material.modulus import ModulusLaw, is_linear
from fieldgen.material.slabs import slice_into_slabs
from fieldgen.meshing.tetmesh import TetMesh


@dataclass
class LayeringResult:
    """A layered mesh with its P1 extent and pressure (D 5.1.2)."""

    mesh: TetMesh
    extent: np.ndarray
    pressure: np.ndarray            # law.pressure(extent) at vertices, Pa
    levels: np.ndarray              # extent levels used
    max_interpolation_error: float  # Pa, measured by max_interpolation_error()
    tets_added: int
    method: str = "bisection"       # "bisection" (refine_for_law) or "slabs" (slice_into_slabs)


def _fixed_barycentric() -> np.ndarray:
    """Edge midpoints, face centroids and the tet centroid, as barycentric rows."""
    rows = []
    for i in range(4):
        for j in range(i + 1, 4):
            w = np.zeros(4)
            w[[i, j]] = 0.5
            rows.append(w)
    for i in range(4):
        w = np.full(4, 1.0 / 3.0)
        w[i] = 0.0
        rows.append(w)
    rows.append(np.full(4, 0.25))
    return np.array(rows)


def max_interpolation_error(points, tets, extent, pressure, law: ModulusLaw, *,
                            samples_per_tet: int = 16, seed: int = 0, chunk: int = 50_000) -> float:
    """Largest |linear interpolant of vertex ``pressure`` − ``law.pressure(interpolated extent)]|
    in Pa, sampled at random barycentric points (seeded) plus edge midpoints and face/tet
    centroids of every tet (docs/model.md §2.4). Independent of the layering criterion.

    For a linear law the difference is itself linear over each tet, so its maximum is at a
    vertex: measured there exactly, with no sampling. Random points are uniform on the simplex:
    normalised standard exponentials, which is Dirichlet(1, 1, 1, 1) at a fifth of the cost of
    ``Generator.dirichlet``.
    """
    tets = np.asarray(tets, dtype=np.int64)
    extent = np.asarray(extent, dtype=np.float64)
    pressure = np.asarray(pressure, dtype=np.float64)
    if is_linear(law):
        used = np.zeros(len(extent), dtype=bool)
        used[tets.ravel()] = True
        if not used.any():
            return 0.0
        return float(np.max(np.abs(pressure[used] - law.pressure(extent[used]))))
    rng = np.random.default_rng(seed)
    fixed = _fixed_barycentric()
    worst = 0.0
    for start in range(0, len(tets), chunk):
        t = tets[start:start + chunk]
        e, p = extent[t], pressure[t]                       # (c, 4)
        lam = rng.standard_exponential(size=(len(t), samples_per_tet, 4))
        lam /= lam.sum(axis=2, keepdims=True)                # uniform on the simplex, (c, s, 4)
        for w in (fixed[None, :, :], lam):
            ei = np.einsum("csk,ck->cs", np.broadcast_to(w, (len(t),) + w.shape[1:]), e)
            pi = np.einsum("csk,ck->cs", np.broadcast_to(w, (len(t),) + w.shape[1:]), p)
            err = np.abs(pi - law.pressure(ei))
            if err.size:
                worst = max(worst, float(err.max()))
    return worst


def layer(mesh: TetMesh, extent: np.ndarray, law: ModulusLaw,
          tolerance: float | None = None) -> LayeringResult:
    """Layer ``mesh`` so linear interpolation of ``p0`` is within ``tolerance`` of ``law`` (Pa, or
    a :class:`fieldgen.material.levels.LayerTolerance`; default
    :func:`fieldgen.material.levels.default_layer_tolerance`, 1% of the local pressure; D 5.1.2), splitting only
    where the law needs it (:func:`fieldgen.material.bisection.refine_for_law`); where that would
    more than double the mesh (tets spanning several levels), the slabs between the levels
    (:func:`fieldgen.material.slabs.slice_into_slabs`), which grow linearly in the levels a tet
    crosses (docs/model.md §2.4). A linear law needs no splitting."""
    tol = default_layer_tolerance(law) if tolerance is None else check_tolerance(tolerance, law)
    extent = check_extent(mesh, extent)
    levels = balanced_levels(law, tol)
    # The snapped extent places the cuts only; the asset keeps the solved extent, interpolated
    # linearly at the new vertices, so its error is measured against the field the build solved
    # (docs/model.md §2.4).
    snapped = snap_to_levels(extent, levels)
    method = "bisection"
    bisected = refine_for_law(mesh, extent, law, levels, tol, stop_above=2 * mesh.n_tets, cuts=snapped)
    if bisected is None:
        # Tets spanning several levels (a thin skin under a steep law): bisection multiplies
        # them; slabs between the levels grow linearly in the levels crossed, so bisection stops
        # at twice the tets instead of running on to be compared (docs/model.md §2.4). The
        # slabs' tets whose solved range a snapped vertex widened past the tolerance are then
        # bisected.
        sliced, sliced_extent, sliced_cuts = slice_into_slabs(mesh, extent, levels, cuts=snapped)
        refined, new_extent, _ = refine_for_law(sliced, sliced_extent, law, levels, tol, cuts=sliced_cuts)
        method = "slabs"
    else:
        refined, new_extent, _ = bisected
    pressure = law.pressure(new_extent)
    error = max_interpolation_error(refined.points, refined.tets, new_extent, pressure, law)
    return LayeringResult(mesh=refined, extent=new_extent, pressure=pressure, levels=levels,
                          max_interpolation_error=error,
                          tets_added=refined.n_tets - mesh.n_tets, method=method)
