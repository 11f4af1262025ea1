"""The surface tolerance: over-tessellated CAD remeshed within a stated distance (docs/model.md §2.11).

A CAD export with micron-wide slivers (along fillets, threads, text) makes TetGen's quality bound
fill the part with tets of their size before the accuracy sizing can act. :func:`tolerated_surface`
replaces such a surface: its slivers removed by local moves (:mod:`fieldgen.surface.slivers`), then
remeshed by MMGS (``mmgpy``) with its Hausdorff parameter below the tolerance, sharp edges kept
(MMGS's ridge detection by angle) and each face's boundary condition and group carried as a label
(MMG's face reference, which MMG keeps and never merges across). The Hausdorff distance between
the input and each result is measured independently of MMG (:func:`hausdorff_distance`); the
cheapest result within the tolerance is used. When none is, MMGS is run once more with each
planar patch of the cleaned surface as its own reference (:mod:`fieldgen.surface.patches`), so a
cap's noisy normal is no ridge to it; else the input is kept, with a warning.

A surface is remeshed by default only when its triangles would cost TetGen far more tets than the
first mesh of the accuracy sizing has (:func:`surface_cost`), or when many of its edges are shorter
than the tolerance (:func:`short_edge_share`); a well-tessellated part is left as it is.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from fieldgen.errors import OptionError
from fieldgen.io.vtk_data import distance_to_triangles
from fieldgen.meshing.mmg import remeshed_surface
from fieldgen.sizing.size_field import FIRST_TETS
from fieldgen.surface.defects import surface_defects
from fieldgen.surface.patches import onto_planes, patch_normals, patch_planes, planar_patches
from fieldgen.surface.slivers import without_slivers
from fieldgen.surface.stage import Surface
from fieldgen.surface.topology import edge_table, face_areas, face_pairs_across_edges, shared_edges, signed_volume
from fieldgen.units import length_scale

#: The default tolerance, as a fraction of the part's bounding-box diagonal (docs/model.md §2.11).
DEFAULT_FRACTION = 1e-3
#: A surface is remeshed by default when its cost (:func:`surface_cost`) exceeds this many times
#: the first mesh's tets (``FIRST_TETS``): its triangles, not the accuracy, would set the mesh.
COST_RATIO = 5.0
#: A surface is also remeshed by default when at least this share of its edges is shorter than the
#: default tolerance: CAD tessellated far below what the accuracy needs, whose cost alone (5-9 tets a
#: unit on such parts, not 3) does not reach ``COST_RATIO``. Such an attempt skips the planar
#: patches and, declined, keeps the input silently (docs/model.md §2.11).
SHORT_EDGE_SHARE = 0.02
#: A result is used only if the triangles narrower than the tolerance left in it cost at most this
#: fraction of the first mesh's tets (the slivers the local moves could not remove, docs/model.md §2.11).
LEFT_COST = 0.1
#: Dihedral angle (degrees) above which MMGS keeps an edge as a sharp ridge: a CAD export's flat
#: facets meet at a few degrees along a coarse fillet, and MMGS's smooth (Bézier) surface through
#: an edge it does not keep bulges past the tolerance at 20-45 degrees on a CAD part (docs/model.md §2.11).
RIDGE_ANGLE = 10.0
#: MMGS's size gradation (its default).
GRADATION = 1.3
#: MMGS's attempts: the ``k``-th with ``hausd`` = tolerance / 2^k and ridge angle RIDGE_ANGLE / 2^(k-1)
#: (MMG's own distance is to its smooth surface, so it is asked for less than the tolerance).
ATTEMPTS = 2
#: The planar patches' remeshing (docs/model.md §2.11): a vertex within PATCH_DEVIATION × tolerance
#: of a patch's plane is in it; a patch of at least PATCH_AREA × tolerance² is its own reference;
#: MMGS's Hausdorff parameter each of PATCH_HAUSD × tolerance in turn, until a result is within the
#: tolerance (the housing: 1 measured 1.30 ×, 0.75 0.89 × with 40,216 triangles, 0.5 0.88 × with
#: 56,110), and ridge angle PATCH_RIDGE_ANGLE (at 10° the caps left on curved faces are ridges to
#: it: the housing's narrow cost 148,065 against 5,642).
PATCH_DEVIATION = 0.1
PATCH_AREA = 5000.0
PATCH_HAUSD = (0.75, 0.5)
PATCH_RIDGE_ANGLE = 30.0
#: A border between patches is given to MMGS as a ridge where their normals (a planar patch's
#: mean one) differ by more than this (degrees): MMGS's tangent along a ridge is the cross product
#: of its two normals, so a border between tangent patches, kept as a ridge, bulged 3.7 × the
#: tolerance out of a flat wall next to a round (tests' rounded prism).
PATCH_BORDER_ANGLE = 10.0
#: MMGS's vertices of a planar patch are moved back onto its plane by at most this many tolerances
#: (the bulge measured 4 × next to a round; the result is measured against the tolerance after).
PATCH_MOVE = 10.0
#: The patches' result is used if its triangles narrower than the tolerance cost at most this
#: fraction of the first mesh's tets: MMGS's own edges are no shorter than the tolerance, and
#: the narrow ones left sit on the input's patch borders (measured: 5,642 → a first mesh of 286k
#: tets on the sensor housing; the moves alone left 34,982 → 1.49 M).
PATCH_LEFT_COST = 0.5
#: With nothing usable at the default tolerance on a swamped surface, it is tried once more this
#: many times larger (a threaded bolt: the moves' result 0.96 of 2 × the default, docs/design/surface_tolerance.md).
RETRY_FACTOR = 2.0
#: A tolerance given below this fraction of the diagonal is refused: MMGS within it refines a
#: curved surface past any tet budget and runs for minutes to hours (a 50 mm ball: 1e-5 m took
#: 72 s, 1e-6 m over 200 s at 1.6 GB).
SMALLEST_FRACTION = 1e-4
#: TetGen's first mesh holds about this many tets per unit of :func:`surface_cost` where the
#: surface's triangles, not the volume, set it (first meshes of 143k-372k tets on surfaces
#: costing 52k-80k: docs/design/sizing.md, "Plates").
TETS_PER_COST = 3.0
#: ... and of a surface the slivers' moves alone remeshed: it keeps the input's CAD tessellation
#: between the moves (threads, fillets), which TetGen's quality bound refines on (measured
#: 14-24 on a threaded nut and bolt, a sensor coupling and a gripper finger, whose first meshes at
#: the default bound all passed the budget: docs/design/surface_tolerance.md).
MOVED_TETS_PER_COST = 14.0
#: The slivers' moves are also made with each needle's collapse held to this fraction of the
#: tolerance (the threaded nut: 1.46 -> 0.85 x the tolerance; docs/design/surface_tolerance.md).
NEEDLE_DEVIATION = 0.5
#: Points sampled on each surface to measure the Hausdorff distance (besides the vertices).
SAMPLES = 20_000
#: The Hausdorff distance's shortcut (:func:`hausdorff_distance`): a sample's distance is bounded
#: above through this many triangles, those of nearest centroid (:func:`distance_bounds`); every
#: this many samples of each side are measured first; the rounding allowed between a bound and
#: the measured distance, in diagonals of the first surface.
BOUND_TRIANGLES = 2
FIRST_STRIDE = 64
BOUND_SLACK = 1e-9


@dataclass(frozen=True)
class SurfaceRemesh:
    """What the surface tolerance did (lengths in m)."""

    tolerance: float            # the stated tolerance
    triangles_before: int
    triangles_after: int
    hausdorff: float            # measured, two-sided, between the input and the result
    cost_before: float          # surface_cost of the input
    cost_after: float
    hausd: float | None         # MMG's Hausdorff parameter of the result kept (None: the slivers' moves alone)
    ridge_angle: float | None   # MMG's ridge angle of the result kept, degrees
    unchanged: bool = False     # the result is the input itself: no sliver moved, no MMGS result cheaper

    def to_metadata(self) -> dict:
        """The asset's ``metadata["surface"]["remesh"]`` (README, "The asset format")."""
        return {"method": "slivers" if self.hausd is None else "slivers+mmgs", "tolerance": self.tolerance, "triangles_before": self.triangles_before,
                "triangles_after": self.triangles_after, "hausdorff": self.hausdorff,
                "mmg_hausd": self.hausd, "ridge_angle": self.ridge_angle, "cost_before": round(self.cost_before, 1),
                "cost_after": round(self.cost_after, 1)}

    def message(self, path: str, units: str, scale: float) -> str:
        """What the build tells its user (lengths in ``units``, ``scale`` metres each)."""
        if self.unchanged:
            return (f"kept {path}'s {self.triangles_before:,} triangles as they are within the surface tolerance "
                    f"{self.tolerance / scale:.3g} {units}: no sliver to move, and no remeshing within it was cheaper")
        return (f"remeshed {path} within {self.tolerance / scale:.3g} {units}: {self.triangles_before:,} -> "
                f"{self.triangles_after:,} triangles, {self.hausdorff / scale:.3g} {units} from the input (measured)")


@dataclass(frozen=True)
class ToleratedSurface:
    """The surface stage's result: the surface to mesh, its faces' conditions, what was done."""

    surface: Surface
    markers: np.ndarray
    remesh: SurfaceRemesh | None      # None: the input surface is kept
    warnings: tuple[str, ...] = ()


def default_tolerance(vertices: np.ndarray) -> float:
    """``DEFAULT_FRACTION`` of the bounding-box diagonal of ``vertices`` (same units)."""
    return DEFAULT_FRACTION * float(np.linalg.norm(np.ptp(vertices, axis=0)))


def surface_cost(vertices: np.ndarray, faces: np.ndarray, narrower_than: float | None = None) -> float:
    """About the number of tets TetGen's quality bound puts along the surface (docs/model.md
    §2.11): each triangle's area over the square of its shortest height, ``l² / (4A)`` with ``l``
    its longest edge. A sliver of length ``l`` and width ``w`` costs ``l / 2w``; a well-shaped
    triangle about 0.5. With ``narrower_than``: only the triangles whose shortest height is less."""
    tri = vertices[faces]
    longest = np.max([np.einsum("ij,ij->i", d, d) for d in
                      (tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 1], tri[:, 0] - tri[:, 2])], axis=0)
    area = face_areas(vertices, faces)
    cost = longest / (4.0 * np.maximum(area, 1e-300 + 1e-12 * longest))
    if narrower_than is not None:
        cost = cost[2.0 * area < narrower_than * np.sqrt(longest)]
    return float(np.sum(cost))


def tets_per_cost(remesh: SurfaceRemesh | None) -> float:
    """TetGen's first-mesh tets per unit of :func:`surface_cost` on a surface the stage left as
    ``remesh`` records (None: the input kept)."""
    return MOVED_TETS_PER_COST if remesh is not None and remesh.hausd is None else TETS_PER_COST


def swamped(surface: Surface) -> bool:
    """Whether the surface costs more than ``COST_RATIO`` first meshes (``FIRST_TETS``)."""
    return surface_cost(surface.vertices, surface.faces) > COST_RATIO * FIRST_TETS


def short_edge_share(vertices: np.ndarray, faces: np.ndarray, length: float) -> float:
    """The share of the surface's edges shorter than ``length``."""
    faces = np.asarray(faces, dtype=np.int64)
    if len(faces) == 0:
        return 0.0
    key = edge_table(faces)[0]
    n = int(faces.max()) + 1
    lengths = np.linalg.norm(vertices[key // n] - vertices[key % n], axis=1)
    return float(np.mean(lengths < length))


def needs_remesh(surface: Surface) -> bool:
    """Whether the default tolerance applies: the surface is :func:`swamped`, or at least
    ``SHORT_EDGE_SHARE`` of its edges are shorter than the default tolerance."""
    return swamped(surface) or short_edge_share(surface.vertices, surface.faces,
                                                default_tolerance(surface.vertices)) >= SHORT_EDGE_SHARE


def tolerated_surface(surface: Surface, markers: np.ndarray, tolerance: float | None,
                      robust: bool = False, units: str = "m") -> ToleratedSurface:
    """The surface to mesh (docs/model.md §2.11): ``surface`` itself when ``tolerance`` is 0, or is
    None (the default) and the surface does not need it; else the first usable of
    :func:`_remeshed`'s results within ``tolerance`` (metres; None: ``DEFAULT_FRACTION`` of the
    diagonal), with ``markers`` carried to the new faces; with none at the default tolerance on a
    :func:`swamped` surface, the same at ``RETRY_FACTOR`` times it; else the input, with a warning.
    When the default tolerance was tried only for the surface's short edges (not :func:`swamped`),
    the planar patches are not tried (the slowest attempt, made for swamped CAD) and the input is
    kept without a warning: it would have been meshed as it is anyway. With ``robust`` (fTetWild
    meshes the result, whatever its slivers, overlaps or holes): the slivers' moves only, checked
    by the measured distance alone. A tolerance given below ``SMALLEST_FRACTION`` of the diagonal
    is refused (OptionError, lengths in ``units``)."""
    if tolerance == 0 or (tolerance is None and not needs_remesh(surface)):
        return ToleratedSurface(surface=surface, markers=markers, remesh=None)
    # Asked for only by the short edges (not given, not swamped): no planar patches, no warning.
    short_edges_only = tolerance is None and not swamped(surface)
    retry = tolerance is None and not short_edges_only and not robust
    tolerance = default_tolerance(surface.vertices) if tolerance is None else checked_tolerance(surface, tolerance, units)
    labels, table = face_labels(markers, surface.face_groups)
    problems: list[str] = []
    kept = _remeshed(surface, labels, table, tolerance, robust, not short_edges_only, problems)
    if kept is None and retry:
        kept = _remeshed(surface, labels, table, RETRY_FACTOR * tolerance, robust, True, problems)
    if kept is not None:
        return kept
    if short_edges_only:
        return ToleratedSurface(surface=surface, markers=markers, remesh=None)
    also = f" (nor within {RETRY_FACTOR * tolerance:.3g} m)" if retry else ""
    warning = (f"the surface was not remeshed within the surface tolerance {tolerance:.3g} m{also}: "
               f"{problems[0]}; the input's triangles were meshed as they are "
               "(--surface-tolerance 0 skips the attempt)")
    return ToleratedSurface(surface=surface, markers=markers, remesh=None, warnings=(warning,))


def crash_warning(tolerance: float, units: str, defect: str) -> str:
    """What a build says when TetGen failed on the input's own triangles (``defect``) and the
    surface was remeshed within ``tolerance`` (in ``units``) to mesh it again (docs/model.md §2.11)."""
    return (f"TetGen failed on the input's own triangles ({defect.rstrip('.')}; needle or sliver triangles "
            f"stop its refinement), so the surface was remeshed within {tolerance:.3g} {units}, the default "
            "surface tolerance, and meshed again (--surface-tolerance sets it)")


def checked_tolerance(surface: Surface, tolerance: float, units: str = "m") -> float:
    """A given surface tolerance (m), OptionError below ``SMALLEST_FRACTION`` of the diagonal
    (the message's lengths in ``units``)."""
    diagonal = float(np.linalg.norm(np.ptp(surface.vertices, axis=0)))
    if float(tolerance) < SMALLEST_FRACTION * diagonal:
        scale = length_scale(units)
        raise OptionError(f"--surface-tolerance {tolerance / scale:.3g} {units} is below {SMALLEST_FRACTION:g} of "
                          f"the part's diagonal ({diagonal / scale:.3g} {units}): remeshing within it would refine "
                          "the surface past any tet budget",
                          fix=f"give at least {SMALLEST_FRACTION * diagonal / scale:.3g} {units}, or 0 to keep the "
                              "input's triangles exactly")
    return float(tolerance)


def _remeshed(surface: Surface, labels: np.ndarray, table, tolerance: float, robust: bool, patches: bool,
              problems: list) -> ToleratedSurface | None:
    """The surface's slivers removed (:func:`fieldgen.surface.slivers.without_slivers`) and the
    result remeshed by MMGS; of the results within ``tolerance`` (measured) the one of least
    :func:`surface_cost` whose narrow triangles cost at most ``LEFT_COST``; with none and
    ``patches``, MMGS's result on the planar patches (:func:`patch_remesh`), then the moves' result
    alone, each if within the tolerance and its narrow triangles cost at most ``PATCH_LEFT_COST``;
    else None, each result's problem appended to ``problems``."""
    cleaned = without_slivers(surface.vertices, surface.faces, labels, tolerance)
    results = [(cleaned, None)]
    # MMGS keeps the slivers the moves left (their edges look sharp to it): no attempt then.
    slivers_left = _slivers_left(cleaned[0], cleaned[1], tolerance)
    attempts = ATTEMPTS if not robust and not slivers_left else 0
    for attempt in range(1, attempts + 1):
        hausd, ridge = tolerance * 0.5**attempt, RIDGE_ANGLE * 2.0**(1 - attempt)
        try:
            result = mmgs_remesh(*cleaned, hausd, tolerance, ridge)
        except RuntimeError as error:
            problems.append(f"MMGS failed ({error})")
            continue
        results.append((result, (hausd, ridge)))
        if _slivers_left(result[0], result[1], tolerance):
            break          # a smaller hausd and ridge angle keep more narrow triangles, not fewer
    kept = _first_within(surface, results, table, tolerance, robust, LEFT_COST, problems)
    if kept is not None or robust or not patches:
        return kept
    for fraction in PATCH_HAUSD:
        try:
            patched = patch_remesh(*cleaned, tolerance, fraction)
        except RuntimeError as error:
            problems.append(f"MMGS on the planar patches failed ({error})")
            continue
        kept = _first_within(surface, [(patched, (fraction * tolerance, PATCH_RIDGE_ANGLE))], table,
                             tolerance, robust, PATCH_LEFT_COST, problems)
        if kept is not None:
            return kept
        if _slivers_left(patched[0], patched[1], tolerance, PATCH_LEFT_COST):
            # A smaller Hausdorff parameter buys distance, not fewer narrow triangles: MMGS's
            # triangles only get finer (docs/design/surface_tolerance.md, "Planar patches").
            break
    # Threads and curved CAD faces, where MMGS keeps micron ridges or crosses itself: the moves
    # alone, held to the patches' bar (docs/design/surface_tolerance.md, "Threads"); judged
    # already unless their narrow triangles barred them. A needle's collapse is bounded against
    # the surface of the moment, so the moves of successive rounds can add up past the
    # tolerance (1.46 x on a threaded nut): they are also made with each needle's collapse held
    # to NEEDLE_DEVIATION x the tolerance, and that result judged too.
    held = without_slivers(surface.vertices, surface.faces, labels, tolerance, NEEDLE_DEVIATION)
    moves = [(cleaned, None)] if slivers_left else []
    if not _same_surface(held, cleaned):
        moves.append((held, None))
    return _first_within(surface, moves, table, tolerance, robust, PATCH_LEFT_COST, problems) if moves else None


def _same_surface(a, b) -> bool:
    """Whether two (vertices, faces, labels) results are the same surface."""
    return all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))


def _first_within(surface: Surface, results, table, tolerance: float, robust: bool, left_cost: float,
                  problems: list):
    """The cheapest of ``results`` within the tolerance (measured) and usable, as the stage's
    result, or None; each one's problem appended to ``problems``."""
    for (vertices, faces, refs), mmg in sorted(results, key=lambda r: surface_cost(r[0][0], r[0][1])):
        problem = "" if robust else _unusable(surface, vertices, faces, refs, table, tolerance, left_cost)
        if not problem:
            # The distance before the closed-and-unintersected check: a result past the tolerance
            # is refused on a first sample (hausdorff_distance's limit) without the slower check.
            measured = hausdorff_distance(surface.vertices, surface.faces, vertices, faces, limit=tolerance)
            if measured > tolerance:
                problem = f"the Hausdorff distance measured (at least {measured:.3g} m) exceeds it"
            elif not robust:
                problem = _unsound(surface, vertices, faces, tolerance)
            if not problem:
                return _kept(surface, vertices, faces, table[refs], measured, mmg, tolerance)
        problems.append(problem)
    return None


def patch_remesh(vertices: np.ndarray, faces: np.ndarray, labels: np.ndarray, tolerance: float,
                 fraction: float = PATCH_HAUSD[-1]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MMGS's remeshing, its Hausdorff parameter ``fraction`` × ``tolerance``, with each planar
    patch of each label its own reference (:func:`fieldgen.surface.patches.planar_patches`); the
    new vertices, faces and their labels.
    RuntimeError when MMGS fails or loses the references."""
    patch, planar = planar_patches(vertices, faces, labels, PATCH_DEVIATION * tolerance, PATCH_AREA * tolerance**2)
    pairs, refs = np.unique(np.column_stack([labels, patch]), axis=0, return_inverse=True)
    refs = refs.reshape(-1)
    first, second, _ = face_pairs_across_edges(faces)
    normals = patch_normals(vertices, faces, patch, planar)
    bent = np.einsum("ij,ij->i", normals[first], normals[second]) < np.cos(np.radians(PATCH_BORDER_ANGLE))
    border = (refs[first] != refs[second]) & bent
    ridges = shared_edges(faces, first[border], second[border])
    new_vertices, new_faces, new_refs = mmgs_remesh(vertices, faces, refs + 1, fraction * tolerance,
                                                    tolerance, PATCH_RIDGE_ANGLE, ridges)
    if len(new_faces) == 0 or new_refs.min() < 1 or new_refs.max() > len(pairs):
        raise RuntimeError("MMGS returned faces without the input's references")
    # MMGS's smooth surface bulges out of a plane next to a round (its normals there are blended):
    # the planar patches' vertices are put back on their planes.
    plane_normals, offsets = patch_planes(vertices, faces, patch, planar)
    new_patch = pairs[new_refs - 1, 1]
    flat = onto_planes(new_vertices, new_faces, new_patch, plane_normals, offsets, PATCH_MOVE * tolerance)
    return flat, new_faces, pairs[new_refs - 1, 0]


def face_labels(markers: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each face's label (1, 2, …: its MMG reference) for its (condition, group) pair, and the
    pairs by label (row ``r`` of the table is label ``r``; row 0 is unused)."""
    pairs = np.column_stack([np.asarray(markers, dtype=np.int64), np.asarray(groups, dtype=np.int64)])
    unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
    table = np.concatenate([np.full((1, 2), -2, dtype=np.int64), unique])
    return inverse.reshape(-1).astype(np.int64) + 1, table


def mmgs_remesh(vertices: np.ndarray, faces: np.ndarray, refs: np.ndarray, hausd: float,
                tolerance: float, ridge: float = RIDGE_ANGLE,
                ridges: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MMGS's remeshing within ``hausd`` of its smooth surface (edges no shorter than
    ``tolerance`` where the geometry allows), edges sharper than ``ridge`` degrees and the borders
    between references kept, and the edges ``ridges`` (k, 2) too; the new vertices, faces and their
    references. RuntimeError when MMGS fails."""
    diagonal = float(np.linalg.norm(np.ptp(vertices, axis=0)))
    return remeshed_surface(vertices, faces, refs=refs, ridges=ridges, hausd=float(hausd), hmin=float(tolerance),
                            hmax=diagonal, hgrad=GRADATION, ar=float(ridge), verbose=-1)


def _unusable(surface: Surface, vertices, faces, refs, table, tolerance: float, left_cost: float = LEFT_COST) -> str:
    """Why MMG's result cannot replace the surface by its references and narrow triangles ('' if
    it can); the slower checks of its shape are :func:`_unsound`'s."""
    if len(faces) == 0 or refs.min() < 1 or refs.max() >= len(table):
        return "MMGS returned faces without the input's references"
    return _slivers_left(vertices, faces, tolerance, left_cost)


def _unsound(surface: Surface, vertices, faces, tolerance: float) -> str:
    """Why MMG's result cannot replace the surface by its shape ('' if it can): not closed,
    manifold and free of self-intersections, or not enclosing the surface's volume."""
    defects = surface_defects(vertices, faces, check_intersections=True)
    if not defects.ok:
        return "MMGS's surface is not closed, manifold and free of self-intersections"
    if abs(signed_volume(vertices, faces) - surface.volume) > tolerance * surface.area:
        return "MMGS's surface encloses a volume that differs by more than the tolerance times the area"
    return ""


def _slivers_left(vertices, faces, tolerance: float, left_cost: float = LEFT_COST) -> str:
    """Why the triangles narrower than the tolerance left in a result bar it ('' if they do not):
    they would cost more than ``left_cost`` of the first mesh's tets."""
    left = surface_cost(vertices, faces, narrower_than=tolerance)
    if left <= left_cost * FIRST_TETS:
        return ""
    return f"the triangles narrower than the tolerance that could not be removed would still cost about {left:,.0f} tets"


def _kept(surface: Surface, vertices, faces, pairs, measured: float, mmg, tolerance: float):
    """The surface remeshed, with its faces' conditions and groups from their labels."""
    remesh = SurfaceRemesh(tolerance=tolerance, triangles_before=len(surface.faces), triangles_after=len(faces),
                           hausdorff=measured, cost_before=surface_cost(surface.vertices, surface.faces),
                           cost_after=surface_cost(vertices, faces), hausd=None if mmg is None else mmg[0],
                           ridge_angle=None if mmg is None else mmg[1],
                           unchanged=mmg is None and vertices.shape == surface.vertices.shape
                           and faces.shape == surface.faces.shape and np.array_equal(vertices, surface.vertices)
                           and np.array_equal(faces, surface.faces))
    vertices, faces = np.ascontiguousarray(vertices), np.ascontiguousarray(faces)
    groups = np.ascontiguousarray(pairs[:, 1])
    for array in (vertices, faces, groups):
        array.setflags(write=False)
    new = dataclasses.replace(surface, vertices=vertices, faces=faces, face_groups=groups, remesh=remesh)
    return ToleratedSurface(surface=new, markers=np.ascontiguousarray(pairs[:, 0]), remesh=remesh)


# ------------------------------------------------------------------ the measured distance

def hausdorff_distance(vertices_a, faces_a, vertices_b, faces_b, samples: int = SAMPLES,
                       limit: float | None = None) -> float:
    """The two-sided Hausdorff distance between two triangle surfaces, measured on each one's
    vertices and points spread over its faces (:func:`surface_samples`), as the exact distance
    to the other's triangles (VTK's cell locator). Every ``FIRST_STRIDE``-th sample is measured
    first; of the others, only those whose upper bound (:func:`distance_bounds`) reaches the
    largest distance measured so far: the rest cannot be the farthest, so the result is that of
    measuring every sample (the sensor housing's 746k samples: about 2 s of CPU instead of 6).
    With a ``limit``, a first measure above it is returned at once: the distance is at least that."""
    sides = [(surface_samples(vertices_a, faces_a, samples), vertices_b, faces_b),
             (surface_samples(vertices_b, faces_b, samples), vertices_a, faces_a)]
    slack = BOUND_SLACK * float(np.linalg.norm(np.ptp(np.asarray(vertices_a, dtype=np.float64), axis=0)))
    largest, measured = 0.0, []
    for points, vertices, faces in sides:
        first = np.arange(0, len(points), FIRST_STRIDE)
        largest = max(largest, float(distance_to_triangles(points[first], vertices, faces).max(initial=0.0)))
        measured.append(first)
    if limit is not None and largest > limit:
        return largest
    bounds = [distance_bounds(*side) for side in sides]
    for (points, vertices, faces), bound, first in zip(sides, bounds, measured):
        left = bound >= largest - slack
        left[first] = False
        if left.any():
            largest = max(largest, float(distance_to_triangles(points[left], vertices, faces).max(initial=0.0)))
    return largest


def distance_bounds(points: np.ndarray, vertices: np.ndarray, faces: np.ndarray,
                    nearest: int = BOUND_TRIANGLES) -> np.ndarray:
    """(n,) an upper bound of each point's distance to the triangles ``faces``: its distance to a
    point on each of the ``nearest`` triangles whose centroids are nearest (its projection onto
    the triangle's plane, the barycentric coordinates clipped to the triangle; the centroid when
    the triangle is degenerate). Close to the distance where the triangles are well shaped."""
    points = np.asarray(points, dtype=np.float64)
    tri = np.asarray(vertices, dtype=np.float64)[np.asarray(faces, dtype=np.int64)]
    k = min(nearest, len(tri))
    best = np.full(len(points), np.inf)
    if not len(points) or not k:
        return best
    _, near = cKDTree(tri.mean(axis=1)).query(points, k=k)
    near = np.asarray(near).reshape(len(points), k)
    for c in range(k):
        on = _point_on_triangles(points, tri[near[:, c]])
        best = np.minimum(best, np.linalg.norm(points - on, axis=1))
    return best


def _point_on_triangles(points: np.ndarray, tri: np.ndarray) -> np.ndarray:
    """(n, 3) a point of each triangle ``tri`` (n, 3, 3) near each of ``points``: the projection
    onto its plane with the barycentric coordinates clipped to >= 0 and rescaled to sum 1."""
    a = tri[:, 0]
    u, v, w = tri[:, 1] - a, tri[:, 2] - a, points - a
    uu, uv, vv = (np.einsum("ij,ij->i", x, y) for x, y in ((u, u), (u, v), (v, v)))
    wu, wv = np.einsum("ij,ij->i", w, u), np.einsum("ij,ij->i", w, v)
    denominator = uu * vv - uv * uv
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (vv * wu - uv * wv) / denominator
        t = (uu * wv - uv * wu) / denominator
        bary = np.clip(np.column_stack([1.0 - s - t, s, t]), 0.0, None)
        total = bary.sum(axis=1, keepdims=True)
        bary = np.where(np.isfinite(total) & (total > 0.0), bary / total, 1.0 / 3.0)
    return np.einsum("ik,ikj->ij", bary, tri)


def surface_samples(vertices: np.ndarray, faces: np.ndarray, samples: int = SAMPLES) -> np.ndarray:
    """The vertices and, on each face, a barycentric grid whose spacing is about
    ``sqrt(area / samples)`` (at least the centroid and the edge midpoints): the same points
    every time."""
    vertices = np.asarray(vertices, dtype=np.float64)
    tri = vertices[faces]
    spacing = math.sqrt(max(float(face_areas(vertices, faces).sum()), 1e-300) / samples)
    longest = np.sqrt(np.max([np.einsum("ij,ij->i", d, d) for d in
                              (tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 1], tri[:, 0] - tri[:, 2])], axis=0))
    order = np.clip(np.ceil(longest / spacing), 2, 32).astype(np.int64)
    points = [vertices[np.unique(faces)]]
    for k in np.unique(order):
        i, j = np.meshgrid(np.arange(k + 1), np.arange(k + 1), indexing="ij")
        keep = (i + j <= k) & ~(((i == k) | (j == k) | (i + j == 0)))   # the corners are vertices
        a, b = i[keep] / k, j[keep] / k
        weights = np.column_stack([1.0 - a - b, a, b])           # (s, 3)
        chosen = tri[order == k]                                  # (f, 3, 3)
        points.append(np.einsum("sc,fcd->fsd", weights, chosen).reshape(-1, 3))
    return np.concatenate(points)
