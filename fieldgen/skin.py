"""A compliant skin of given thickness over a rigid interior (``--skin``; D 5.1.1).

The rubber is the material within ``thickness`` of the exposed (FREE) surface; every point
deeper than that is rigid. The skin is cut out of a tet mesh of the whole part:

1. ``depth``: each vertex's exact distance to the FREE boundary faces (VTK's distance to a
   triangle set; bonded and insulated faces are not exposed, so depth is not measured from them);
2. the depth, a P1 field, is cut conformingly at ``depth = thickness`` with
   :func:`fieldgen.layering.slice_by_levels`;
3. tets deeper than the thickness are dropped; the faces this uncovers (on ``depth =
   thickness``) are marked RIGID (e = 1), the outer faces keep their condition;
4. the cut's vertices are moved onto the exact depth (:func:`place_cut_at_depth`). The distance
   to a surface is not linear along an edge (it is concave inside a convex region, with a kink
   where two faces are equally near), so the cut of its P1 interpolant lies deeper than the
   thickness where tets are coarse. Measured on angle_block and idler_riser (2 mm skin, their
   accuracy-sized meshes): the 99th percentile of the cut vertices' depth went from 1.07-1.12 x
   the thickness to 1.02-1.03 x, the largest from 1.27-1.36 x to 1.18-1.29 x. What is left is
   where a move would flatten a tet (3-5 % of the cut's vertices are held short), near the
   kink, where the part is about twice the skin thick, and where the cut meets a bonded or
   insulated face (those vertices stay on it); ``SkinResult.cut_depth`` records the range.

Where the part is thinner than twice the skin, nothing is deeper than the thickness and the skin
meets itself; ``SkinResult.volume_fraction`` says how much of the part is skin.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import OptionError
from .mesh import FREE, RIGID, TetMesh, boundary_faces_of, find_faces, tet_volumes
from .vtk_data import closest_points_on_triangles, distance_to_triangles

#: The skin cut clips depths at this multiple of the skin thickness: deeper than the skin, only
#: "deeper" matters (those tets are dropped), and ``SkinResult.max_depth`` reports the clip.
DEPTH_CAP = 2.0

#: Moving a cut vertex onto the exact depth: at most this many steps (one is exact unless the
#: step crosses to where another free face is nearer); a move is halved, up to ``HALVINGS`` times
#: and then given up, while a tet around the vertex would keep less than ``KEEP_VOLUME`` of its
#: volume.
DEPTH_STEPS = 3
HALVINGS = 6
KEEP_VOLUME = 0.2


@dataclass
class SkinResult:
    """The skin mesh and what the cut measured (lengths in m)."""

    mesh: TetMesh              # the skin: outer faces keep their markers, the cut faces are RIGID
    depth: np.ndarray          # (n,) distance of each skin vertex to the FREE surface
    thickness: float           # the skin thickness asked for
    max_depth: float           # deepest vertex of the whole part below the FREE surface
    volume_fraction: float     # skin volume / part volume, in (0, 1]
    part_volume: float         # volume of the whole part's mesh
    cut: np.ndarray            # (f,) bool: which of mesh.boundary_faces are the cut (depth = thickness)

    @property
    def rigid_faces(self) -> int:
        """Faces on the cut (not counting bonded faces, also RIGID)."""
        return int(np.count_nonzero(self.cut))

    @property
    def cut_depth(self) -> tuple[float, float]:
        """Smallest and largest depth of a cut vertex, / thickness ((1, 1) with no cut)."""
        depth = self.depth[self._cut_vertices()] / self.thickness
        return (float(depth.min()), float(depth.max())) if len(depth) else (1.0, 1.0)

    @property
    def held_vertices(self) -> int:
        """Cut vertices off that depth: a tet would flatten, on a bonded or insulated face, or
        still off after ``DEPTH_STEPS``."""
        depth = self.depth[self._cut_vertices()]
        return int(np.count_nonzero(np.abs(depth - self.thickness) > 1e-9 * self.thickness))

    def _cut_vertices(self) -> np.ndarray:
        return np.unique(self.mesh.boundary_faces[self.cut])


# ------------------------------------------------------------------ depth below the free surface

def free_surface_depth(mesh: TetMesh, cap: float = np.inf,
                       free_surface: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Distance (m) of every mesh vertex to the exposed (FREE) surface
    (:func:`distance_to_triangles`).

    ``free_surface`` (vertices, faces) is that surface as given, e.g. the input's FREE faces, which
    TetGen subdivides without moving (fewer, larger triangles: a faster search); default: the
    mesh's FREE boundary faces. Exact below ``cap``; ``cap`` where deeper.
    """
    free = mesh.boundary_faces[mesh.boundary_markers == FREE]
    surface_vertices, surface_faces = (mesh.points, free) if free_surface is None else free_surface
    depth = np.minimum(distance_to_triangles(mesh.points, surface_vertices, surface_faces), cap)
    on_free = np.zeros(mesh.n_points, dtype=bool)
    on_free[free.ravel()] = True
    depth[on_free] = 0.0
    return depth


def cut_skin(mesh: TetMesh, thickness: float, *,
             free_surface: tuple[np.ndarray, np.ndarray] | None = None,
             path: str | None = None, units: str = "m", scale: float = 1.0) -> SkinResult:
    """Keep the part of ``mesh`` within ``thickness`` (m) of its FREE surface; the cut is RIGID
    and its vertices lie at the exact depth (module docstring).

    Depth is measured to ``free_surface`` (vertices, faces; default: the mesh's FREE faces),
    capped at twice the thickness (deeper vertices are dropped anyway). ``path``, ``units`` and
    ``scale`` (metres per input unit) only serve the messages. OptionError if no vertex is deeper
    than the thickness (the skin would fill the part and leave no rigid interior).
    ``SkinResult.max_depth`` is exact when below the cap, else the cap.
    """
    from .layering import slice_by_levels

    thickness = float(thickness)
    if not (np.isfinite(thickness) and thickness > 0):
        raise OptionError(f"the skin thickness must be a positive length, got {thickness / scale:g} {units}",
                          path=path, fix="give --skin THICKNESS > 0 in the input's units")
    if free_surface is None:
        free_surface = (mesh.points, mesh.boundary_faces[mesh.boundary_markers == FREE])
    depth = free_surface_depth(mesh, cap=DEPTH_CAP * thickness, free_surface=free_surface)
    max_depth = float(depth.max())
    part_volume = float(tet_volumes(mesh.points, mesh.tets).sum())
    refuse = OptionError(
        f"the skin ({thickness / scale:.6g} {units}) is thicker than the part: its deepest point "
        f"is {max_depth / scale:.6g} {units} below the free surface (at the mesh vertices), so "
        "nothing is left for a rigid interior",
        path=path, fix=f"give --skin below {max_depth / scale:.4g} {units}, or drop --skin for a "
                       "part that is rubber throughout")
    if max_depth <= thickness:
        raise refuse
    level = thickness / max_depth
    sliced, value = slice_by_levels(mesh, depth / max_depth, np.array([level]))
    keep = value[sliced.tets].mean(axis=1) < level
    if keep.all():
        raise refuse  # every deeper vertex was snapped onto the cut: no interior volume
    kept = sliced.tets[keep]
    used = np.zeros(sliced.n_points, dtype=bool)
    used[kept.ravel()] = True
    remap = np.cumsum(used) - 1
    points = sliced.points[used]
    tets = remap[kept]
    faces = boundary_faces_of(tets)
    markers, outer = _inherit_markers(faces, remap[sliced.boundary_faces[_all_used(sliced.boundary_faces, used)]],
                                      sliced.boundary_markers[_all_used(sliced.boundary_faces, used)],
                                      len(points))
    # The cut's own vertices; where it meets a bonded or insulated face they stay on that face.
    on_cut = np.unique(faces[~outer])
    movable = np.zeros(len(points), dtype=bool)
    movable[on_cut] = True
    movable[faces[outer].ravel()] = False
    points = place_cut_at_depth(points, tets, movable, thickness, free_surface)
    skin_depth = value[used] * max_depth
    skin_depth[on_cut] = distance_to_triangles(points[on_cut], *free_surface)
    skin_volume = float(tet_volumes(points, tets).sum())
    result = TetMesh(points=points, tets=tets, boundary_faces=faces, boundary_markers=markers)
    return SkinResult(mesh=result, depth=skin_depth, thickness=thickness,
                      max_depth=max_depth, volume_fraction=skin_volume / part_volume,
                      part_volume=part_volume, cut=~outer)


def place_cut_at_depth(points: np.ndarray, tets: np.ndarray, movable: np.ndarray, thickness: float,
                       free_surface: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Move the ``movable`` vertices to depth ``thickness`` below ``free_surface`` (vertices,
    faces): each along the line to its nearest free point, where the distance changes at unit
    rate, so one step is exact unless it crosses to where another face is nearer (``DEPTH_STEPS``
    steps at most). A move that would leave a tet around the vertex with less than
    ``KEEP_VOLUME`` of its volume is halved, ``HALVINGS`` times at most, then not made.
    Returns the moved points."""
    points = np.array(points, dtype=np.float64)
    ids = np.flatnonzero(movable)
    around = np.flatnonzero(np.asarray(movable)[tets].any(axis=1))
    near_tets = tets[around]
    volume = tet_volumes(points, near_tets)
    where = np.full(len(points), -1)
    where[ids] = np.arange(len(ids))
    for _ in range(DEPTH_STEPS):
        closest, distance = closest_points_on_triangles(points[ids], *free_surface)
        off = distance - thickness
        if np.abs(off).max(initial=0.0) <= 1e-9 * thickness:
            break
        step = (closest - points[ids]) * (off / np.maximum(distance, 1e-300))[:, None]
        scale = np.ones(len(ids))
        halvings = 0
        while True:         # ends: scales only fall, and with none left the step's start is kept
            moved = points.copy()
            moved[ids] += scale[:, None] * step
            flat = tet_volumes(moved, near_tets) < KEEP_VOLUME * volume
            if not flat.any():
                break
            rows = where[near_tets[flat]]
            rows = np.unique(rows[rows >= 0])
            scale[rows] = 0.0 if halvings == HALVINGS else 0.5 * scale[rows]
            halvings = min(halvings + 1, HALVINGS)
        points[ids] += scale[:, None] * step
    return points


def _all_used(faces, used):
    return used[faces].all(axis=1)


def _inherit_markers(faces, old_faces, old_markers, n):
    """Marker of each face: that of the same outer face before the cut, RIGID for new faces; and
    which faces are outer ones."""
    markers = np.full(len(faces), RIGID, dtype=np.int64)
    found, row = find_faces(faces, old_faces, n)
    markers[found] = np.asarray(old_markers, dtype=np.int64)[row[found]]
    return markers, found
