"""MMG (``mmgpy``: MMGS for surfaces, MMG2D for plane sections, MMG3D for tet meshes) run the one
way: the remeshing called with its options, and a failure, raised or reported by its return code,
turned into one exception the caller words for its own stage (docs/model.md §2.4, §2.10, §2.11);
the points moved and scaled to about 1 across, the metric with them, for MMGS and MMG2D; and MMGS
on a triangle set, the one way the surface stage, the band skin's interior and the sheets call it.

MMG's return codes: 0 success, 1 stopped early with a valid mesh (the caller's own checks judge
it), 2 failed with no usable mesh.
"""

from __future__ import annotations

import numpy as np

#: MMG's options that are lengths (scaled with the points when MMG runs on a unit-sized copy).
LENGTH_OPTIONS = ("hausd", "hmin", "hmax", "hsiz")


class MmgFailure(RuntimeError):
    """MMG failed: its message, or the return code it reported."""


def unit_scale(points: np.ndarray) -> tuple[np.ndarray, float]:
    """The centre and the size (largest extent) that move and scale ``points`` to about 1 across,
    as MMG2D needs (:func:`fieldgen.sizing.extrusion.mmg2d`) and MMGS is given with ``unit``
    (:func:`remeshed_surface`): ``(points - centre) / size``."""
    return points.mean(axis=0), float(np.ptp(points, axis=0).max())


def scaled_metric(metric: np.ndarray, size: float) -> np.ndarray:
    """``metric``, a size (n,) or a tensor (n, k) per point, for the points divided by ``size``."""
    return metric / size if metric.ndim == 1 else metric * size * size


def set_metric(mesh, metric: np.ndarray) -> None:
    """``metric`` on an mmgpy mesh: a size (n,) per point as its ``metric``, else tensors (n, k)
    as its ``tensor``."""
    if metric.ndim == 1:
        mesh["metric"] = np.ascontiguousarray(metric.reshape(-1, 1))
    else:
        mesh["tensor"] = np.ascontiguousarray(metric)


def remesh(mesh, **options) -> None:
    """``mesh.remesh(**options)`` (an ``mmgpy.MmgMeshS`` or ``MmgMesh3D``, its arrays set), in
    place; MmgFailure when MMG raises or returns 2 or more."""
    try:
        done = mesh.remesh(**options)
    except RuntimeError as error:
        raise MmgFailure(str(error)) from None
    if isinstance(done, dict) and int(done.get("return_code", 0)) >= 2:
        raise MmgFailure(f"return code {done['return_code']}")


def remeshed_surface(points: np.ndarray, triangles: np.ndarray, *, refs: np.ndarray | None = None,
                     ridges: np.ndarray | None = None, metric: np.ndarray | None = None, unit: bool = False,
                     required: np.ndarray | None = None, **options) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MMGS's remeshing of a triangle set: (points, triangles, their references). ``refs`` label
    the triangles (MMGS keeps the borders between labels), ``ridges`` (k, 2) are edges to keep as
    ridges, ``metric`` a size (n,) or a tensor (n, 6) at the points, ``required`` the points MMGS
    keeps where they are; ``options`` go to MMGS
    (``hausd``, ``hmin``, ``hmax``, ``hgrad``, ...). With ``unit``, MMGS runs on the points moved
    and scaled to about 1 across (:func:`unit_scale`), lengths and the metric with them.
    MmgFailure when MMGS fails."""
    import mmgpy  # lazy: heavy, and only a remeshed surface, a band skin or a sheet needs it

    centre, size = unit_scale(points) if unit else (0.0, 1.0)
    mesh = mmgpy.MmgMeshS()
    ridges = np.zeros((0, 2), dtype=np.int32) if ridges is None else np.asarray(ridges, dtype=np.int32)
    mesh.set_mesh_size(vertices=len(points), triangles=len(triangles), edges=len(ridges))
    mesh.set_vertices(np.ascontiguousarray((points - centre) / size if unit else points, dtype=np.float64))
    if refs is None:
        mesh.set_triangles(np.ascontiguousarray(triangles, dtype=np.int32))
    else:
        mesh.set_triangles(np.ascontiguousarray(triangles, dtype=np.int32),
                           refs=np.ascontiguousarray(refs, dtype=np.int32))
    if len(ridges):
        mesh.set_edges(np.ascontiguousarray(ridges), refs=np.ones(len(ridges), dtype=np.int64))
        mesh.set_ridge_edges(np.arange(len(ridges), dtype=np.int32))
    if metric is not None:
        set_metric(mesh, scaled_metric(metric, size))
    if required is not None and len(required):
        mesh.set_required_vertices(np.ascontiguousarray(required, dtype=np.int32))
    lengths = {key: float(value) / size for key, value in options.items() if key in LENGTH_OPTIONS}
    remesh(mesh, **{**options, **lengths})
    new_triangles, new_refs = mesh.get_triangles_with_refs()
    new_points = np.asarray(mesh.get_vertices(), dtype=np.float64)
    new_points = new_points * size + centre if unit else new_points
    if not np.isfinite(new_points).all():
        raise MmgFailure("MMGS returned points that are not finite")
    return new_points, np.asarray(new_triangles, dtype=np.int64), np.asarray(new_refs, dtype=np.int64)
