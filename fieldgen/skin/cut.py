"""A compliant skin of given thickness over a rigid interior (``--skin``; D 5.1.1).

The rubber is the material within ``thickness`` of the exposed (FREE) surface; every point
deeper than that is rigid. The skin is cut out of a tet mesh of the whole part:

1. ``depth``: each vertex's exact distance to the FREE boundary faces (VTK's distance to a
   triangle set; bonded and insulated faces are not exposed, so depth is not measured from them);
2. the vertices inside the part whose depth is within ``CUT_SNAP`` of their mean edge length of
   the thickness are moved onto it (:func:`snap_to_cut`), so that the cut passes through them
   rather than slicing their tets into slivers close to them;
3. the depth, a P1 field, is cut conformingly at ``depth = thickness`` with
   :func:`fieldgen.material.slicing.slice_by_levels`;
4. tets deeper than the thickness are dropped; the faces this uncovers (on ``depth =
   thickness``) are marked RIGID (e = 1), the outer faces keep their condition. Where both ends
   of an edge were snapped and the tets around it alternate between the sides, two kept pieces
   would meet along that edge only; those ends are left unsnapped and steps 2-4 made again
   (``SNAP_ROUNDS`` times at most, then without the snap), so the cut is a surface;
5. the cut's vertices are moved onto the exact depth (:func:`place_cut_at_depth`; the snapped
   ones are there already). The distance to a surface is not linear along an edge (it is
   concave inside a convex region, with a kink where two faces are equally near), so the cut of
   its P1 interpolant lies deeper than the thickness where tets are coarse (docs/design/skin.md
   has what both moves achieve on the corpus parts). Each move keeps a fifth of the volume of
   the tets around it, so a tet moved by both steps keeps at least 0.04 of it. Vertices where
   the cut meets a bonded or insulated face stay on that face; ``SkinResult.cut_depth`` records
   the range.

Where the part is thinner than twice the skin, nothing is deeper than the thickness and the skin
meets itself; ``SkinResult.volume_fraction`` says how much of the part is skin.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fieldgen.errors import OptionError
from fieldgen.io.vtk_data import closest_points_on_triangles, distance_to_triangles
from fieldgen.material.slicing import slice_by_levels
from fieldgen.meshing.tetmesh import FREE, RIGID, TetMesh, boundary_faces_of, find_faces, mesh_edges, tet_volumes
from fieldgen.units import length_scale

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

#: Before the cut, a vertex inside the part whose depth is within this fraction of its mean edge
#: length of the thickness is moved onto the exact depth (:func:`snap_to_cut`); larger fractions
#: hold more vertices short and leave more flat tets (docs/design/skin.md).
CUT_SNAP = 0.2
#: Rounds of the cut that leave out the snapped vertices on edges where the cut is not a surface
#: (:func:`cut_skin`); after them the cut is made without the snap.
SNAP_ROUNDS = 3
#: A cut vertex within this fraction of the thickness of it is at the exact depth.
EXACT = 1e-9


#: A skin filling more than this share of the part's volume leaves only scraps of rigid interior
#: (:func:`skin_warnings`).
FILLS_PART = 0.99


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
    rounding: float = 0.0      # the layer band's rounded interior: its creases' radius (m); 0 for a cut

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
        still off after ``DEPTH_STEPS``. 0 under the layer band: its rounded interior is deeper
        than the thickness at its creases by design, not held (:mod:`fieldgen.skin.interior`)."""
        if self.rounding > 0:
            return 0
        depth = self.depth[self._cut_vertices()]
        return int(np.count_nonzero(np.abs(depth - self.thickness) > EXACT * self.thickness))

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


def skin_refusal(mesh: TetMesh, max_depth: float, thickness: float, free_surface, *,
                 path: str | None, units: str, scale: float) -> OptionError:
    """The error for a skin that leaves the mesh no tet beneath it (no vertex deeper than the skin,
    or none kept after the cut). The part's deepest point is taken
    over the tets' centroids too: a coarse mesh may have every vertex on the surface (depth 0),
    which says nothing of the part. Where a centroid lies deeper than the skin, the mesh is too
    coarse to cut it; otherwise the skin is thicker than the part, and the part's size is named
    (a part a fraction of a millimetre across was most likely read in the wrong units)."""
    centroids = mesh.points[mesh.tets].mean(axis=1)
    deepest = max(max_depth, float(distance_to_triangles(centroids, *free_surface).max(initial=0.0)))
    across = float(np.linalg.norm(np.ptp(mesh.points, axis=0)))
    size = f"{thickness / scale:.6g} {units}"
    if deepest > thickness:
        return OptionError(
            f"the mesh has no tet deeper than the skin ({size}) below the free surface (the part's deepest "
            f"point is about {deepest / scale:.4g} {units}): it is too coarse to cut the skin out of it", path=path,
            fix=f"give a smaller --edge-length (below {0.5 * thickness / scale:.4g} {units}), or a thinner --skin")
    return OptionError(
        f"the skin ({size}) is thicker than the part: its deepest point is about {deepest / scale:.4g} "
        f"{units} below the free surface (the part is {across / scale:.4g} {units} across), so nothing "
        "is left for a rigid interior", path=path,
        fix=f"give --skin below {deepest / scale:.4g} {units}, check --units (the file's length unit), "
            "or drop --skin for a part that is rubber throughout")


def cut_skin(mesh: TetMesh, thickness: float, *,
             free_surface: tuple[np.ndarray, np.ndarray] | None = None,
             path: str | None = None, units: str = "m", scale: float = 1.0,
             snap: float = CUT_SNAP) -> SkinResult:
    """Keep the part of ``mesh`` within ``thickness`` (m) of its FREE surface; the cut is RIGID
    and its vertices lie at the exact depth (module docstring).

    Depth is measured to ``free_surface`` (vertices, faces; default: the mesh's FREE faces),
    capped at twice the thickness (deeper vertices are dropped anyway). ``path``, ``units`` and
    ``scale`` (metres per input unit) only serve the messages. OptionError if no vertex is deeper
    than the thickness (the skin would fill the part and leave no rigid interior).
    ``SkinResult.max_depth`` is exact when below the cap, else the cap. ``snap``: see
    :func:`snap_to_cut` (0: none).
    """
    thickness = float(thickness)
    if not (np.isfinite(thickness) and thickness > 0):
        raise OptionError(f"the skin thickness must be a positive length, got {thickness / scale:g} {units}",
                          path=path, fix="give --skin THICKNESS > 0 in the input's units")
    if free_surface is None:
        free_surface = (mesh.points, mesh.boundary_faces[mesh.boundary_markers == FREE])
    depth = free_surface_depth(mesh, cap=DEPTH_CAP * thickness, free_surface=free_surface)
    max_depth = float(depth.max())
    part_volume = float(tet_volumes(mesh.points, mesh.tets).sum())
    if max_depth <= thickness:
        raise skin_refusal(mesh, max_depth, thickness, free_surface, path=path, units=units, scale=scale)
    level = thickness / max_depth
    # Snap, cut, and keep the shallower side. Where the snap put both ends of an edge on the cut
    # and the tets around it alternate between the sides, two kept pieces meet along that edge
    # only (more than two cut faces on it: not a surface); its snapped ends are then left where
    # they were and the cut made again, at last without any snap (slicing alone).
    excluded = np.zeros(mesh.n_points, dtype=bool)
    for attempt in range(SNAP_ROUNDS + 1):
        if attempt == SNAP_ROUNDS:
            snap = 0.0
        snapped_mesh, snapped_depth, snapped = snap_to_cut(mesh, depth, thickness, snap, free_surface,
                                                           exclude=excluded)
        sliced, value = slice_by_levels(snapped_mesh, snapped_depth / max_depth, np.array([level]))
        keep = value[sliced.tets].mean(axis=1) < level
        if not snapped.any():
            break
        if keep.all():                      # every deeper vertex was snapped onto the cut
            excluded |= snapped
            continue
        culprits = snapped & _on_nonmanifold_edges(sliced.tets[keep], sliced.n_points)[:mesh.n_points]
        if not culprits.any():
            break
        excluded |= culprits
    if keep.all():
        raise skin_refusal(mesh, max_depth, thickness, free_surface, path=path, units=units,  # nothing left
                           scale=scale)
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


def snap_to_cut(mesh: TetMesh, depth: np.ndarray, thickness: float, snap: float,
                free_surface: tuple[np.ndarray, np.ndarray], *,
                exclude: np.ndarray | None = None) -> tuple[TetMesh, np.ndarray, np.ndarray]:
    """Put the vertices near the cut on it before cutting: every vertex inside the part (on no
    boundary face, not in ``exclude``) whose depth is within ``snap`` x its mean edge length of
    ``thickness`` is moved onto the exact depth (:func:`place_cut_at_depth`, which gives up a
    move that would flatten a tet) and its depth set to ``thickness``, so that the cut passes
    through it instead of slicing its tets close to it (the snap of isosurface stuffing, Labelle &
    Shewchuk 2007). Returns the mesh with those vertices moved, the depths (measured again where
    a move fell short) and which vertices were moved (a mask)."""
    depth = np.array(depth, dtype=np.float64)
    if snap <= 0:
        return mesh, depth, np.zeros(mesh.n_points, dtype=bool)
    edges, _ = mesh_edges(mesh.tets, mesh.n_points)
    length = np.linalg.norm(mesh.points[edges[:, 0]] - mesh.points[edges[:, 1]], axis=1)
    ends = edges.ravel()
    mean = (np.bincount(ends, weights=np.repeat(length, 2), minlength=mesh.n_points)
            / np.maximum(np.bincount(ends, minlength=mesh.n_points), 1))
    # Depths are capped (cut_skin): a vertex at the cap may lie much deeper and is never snapped.
    cap = DEPTH_CAP * thickness
    near = (depth > 0) & (depth < cap) & (np.abs(depth - thickness) < snap * mean)
    near[np.asarray(mesh.boundary_faces).ravel()] = False
    if exclude is not None:
        near &= ~np.asarray(exclude, dtype=bool)
    if not near.any():
        return mesh, depth, near
    points = place_cut_at_depth(mesh.points, mesh.tets, near, thickness, free_surface)
    ids = np.flatnonzero(near)
    moved = distance_to_triangles(points[ids], *free_surface)
    depth[ids] = np.where(np.abs(moved - thickness) <= EXACT * thickness, thickness, np.minimum(moved, cap))
    return TetMesh(points=points, tets=mesh.tets, boundary_faces=mesh.boundary_faces,
                   boundary_markers=mesh.boundary_markers), depth, near


def _on_nonmanifold_edges(tets: np.ndarray, n: int) -> np.ndarray:
    """(n,) mask of the vertices on an edge that more than two boundary faces of ``tets`` share."""
    faces = boundary_faces_of(tets)
    pairs = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
    edges, count = np.unique(pairs, axis=0, return_counts=True)
    mask = np.zeros(n, dtype=bool)
    mask[edges[count > 2].ravel()] = True
    return mask


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
        if np.abs(off).max(initial=0.0) <= EXACT * thickness:
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


def skin_warnings(skin: SkinResult, units: str) -> list[str]:
    """A skin that fills nearly the whole part (walls thinner than twice the skin nearly
    everywhere) leaves a rigid interior of scraps, on which the whole Laplace field hangs (D 5.1.1):
    L, and the damping through it, change with every scrap the mesh happens to keep."""
    if skin.volume_fraction <= FILLS_PART:
        return []
    scale = length_scale(units)
    return [f"the skin ({skin.thickness / scale:.4g} {units}) fills {100 * skin.volume_fraction:.1f}% of the part: "
            f"its walls are thinner than twice the skin nearly everywhere, and the rigid interior left "
            f"({skin.rigid_faces} faces at e = 1) sets the whole field; for a part that is rubber throughout "
            f"drop --skin, for a rigid interior give a skin below {0.5 * skin.max_depth / scale:.3g} {units} "
            f"(half the part's deepest point below its free faces)"]


def refined_skin(skin: SkinResult, mesh: TetMesh, free_surface: tuple[np.ndarray, np.ndarray]) -> SkinResult:
    """``skin`` for ``mesh``, a refinement of ``skin.mesh`` by splitting (the old vertices keep
    their numbers): the new vertices' depth below the ``free_surface`` (vertices, faces), and
    which boundary faces are the cut (a face kept from the old mesh as it was; a child of a split
    RIGID face as the old RIGID face nearest its centroid: the cut or a bonded face)."""
    old = skin.mesh
    depth = np.empty(mesh.n_points)
    depth[:old.n_points] = skin.depth
    depth[old.n_points:] = distance_to_triangles(mesh.points[old.n_points:], *free_surface)
    faces, markers = np.asarray(mesh.boundary_faces), np.asarray(mesh.boundary_markers)
    cut = np.zeros(len(faces), dtype=bool)
    kept, row = find_faces(faces, old.boundary_faces, mesh.n_points)
    cut[kept] = skin.cut[row[kept]]
    rigid = np.asarray(old.boundary_markers) == RIGID
    new = np.flatnonzero(~kept & (markers == RIGID))
    if len(new) and np.any(rigid & skin.cut) and np.any(rigid & ~skin.cut):
        centroids = mesh.points[faces[new]].mean(axis=1)
        to_cut = distance_to_triangles(centroids, old.points, old.boundary_faces[rigid & skin.cut])
        to_bonded = distance_to_triangles(centroids, old.points, old.boundary_faces[rigid & ~skin.cut])
        cut[new] = to_cut <= to_bonded
    elif len(new):
        cut[new] = bool(np.any(rigid & skin.cut))
    volume = float(tet_volumes(mesh.points, mesh.tets).sum())
    return SkinResult(mesh=mesh, depth=depth, thickness=skin.thickness, max_depth=skin.max_depth,
                      volume_fraction=volume / skin.part_volume, part_volume=skin.part_volume, cut=cut,
                      rounding=skin.rounding)
