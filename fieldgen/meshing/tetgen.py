"""Tetrahedralization of a marked surface with TetGen (docs/model.md §2.1-2.2).

The volume between the outer surface and an optional rigid core is meshed with TetGen
(``tetgen`` package; TetGen itself is AGPL-3.0). Boundary faces keep the condition they
carry through TetGen's facet markers, so no geometric matching is needed afterwards.

Shared vertices: a vertex on both a FREE face and a RIGID face counts as FREE (e = 0).
The exposed contact surface must carry exactly zero pressure, otherwise the contact
force would jump as objects start to touch (D 5.0.2, D A.2). ``TetMesh.vertices_with``
reports such a vertex under both codes; :func:`fieldgen.fe.extent.solve_extent` and
:func:`fieldgen.meshing.refine.refine_zero_tets` give FREE the priority.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

import numpy as np

from fieldgen.errors import BuildError, InputError, MesherCrash, OptionError, TetGenStuck
from fieldgen.meshing.process import child_env, run_child, scratch_folder
from fieldgen.meshing.tetmesh import (
    CONDITION_NAMES,
    RIGID,
    TET_EDGES,
    TetMesh,
    boundary_faces_of,
    face_keys,
    find_faces,
    orient_positive,
    tet_volumes,
)
from fieldgen.surface.cavities import cavity_points
from fieldgen.surface.components import face_pieces
from fieldgen.surface.remesh import DEFAULT_FRACTION, hausdorff_distance
from fieldgen.surface.topology import edge_use, face_areas, signed_volume, winding_numbers
from fieldgen.units import length_scale


#: TetGen's radius-edge quality bound when none is given.
DEFAULT_RADIUS_EDGE = 1.414


@dataclass(frozen=True)
class MeshingOptions:
    """Size and quality controls passed to TetGen.

    TetGen honours the volume bound for nearly all tets; its final smoothing lets a few grow
    past it. It does not enforce ``min_dihedral`` either.
    """

    max_volume: float | None = None     # m^3
    edge_length: float | None = None    # m; converted to a regular tet's volume a^3/(6 sqrt 2)
    #: TetGen's quality bound q (circumradius / shortest edge); None: ``DEFAULT_RADIUS_EDGE``, a
    #: bound nobody chose, which the accuracy sizing may relax (fieldgen.sizing.mesher.sized_options).
    radius_edge: float | None = None
    min_dihedral: float = 10.0          # degrees; TetGen's q/ target (not enforced by TetGen)
    #: Anisotropic tets for a plate-like part: TetGen meshes the part stretched by ``stretch``
    #: along the unit vector ``stretch_axis`` (its thin direction), and the points are mapped back,
    #: so the tets are ``stretch`` times thinner across the plate than along it (the bounds
    #: above apply in the stretched part). An affine map keeps every face in its plane.
    stretch_axis: tuple[float, float, float] | None = None
    stretch: float = 1.0
    #: The skin (m) whose cut capped ``edge_length`` at half of it, named when that size is refused
    #: (:func:`check_tet_count`); None when the edge is the user's own.
    skin: float | None = None
    #: How far (m) the mesh's boundary may lie from the surface given (docs/model.md §2.11): None,
    #: the default surface tolerance; 0, the surface exactly (:func:`tetrahedralize`, -M).
    surface_tolerance: float | None = None

    @property
    def quality_bound(self) -> float:
        """The radius-edge bound TetGen is given: ``radius_edge``, or ``DEFAULT_RADIUS_EDGE``."""
        return DEFAULT_RADIUS_EDGE if self.radius_edge is None else float(self.radius_edge)

    def volume_bound(self) -> float | None:
        """The effective max tet volume in m^3: the smaller of the two bounds, or None."""
        bounds = []
        if self.max_volume is not None:
            bounds.append(float(self.max_volume))
        if self.edge_length is not None:
            bounds.append(float(self.edge_length) ** 3 / (6.0 * np.sqrt(2.0)))
        return min(bounds) if bounds else None

    def switches(self) -> str:
        """TetGen switch string: PLC, quality q<ratio>/<angle>, volume a<vol>, quiet."""
        for name in ("max_volume", "edge_length"):
            value = getattr(self, name)
            if value is not None and not (np.isfinite(value) and value > 0):
                raise OptionError(f"{name} = {value!r} is not a positive finite length/volume",
                                  fix=f"give {name} > 0 in metres (or cubic metres)")
        if not (np.isfinite(self.quality_bound) and self.quality_bound >= 1.0):
            raise OptionError(f"radius_edge = {self.radius_edge!r} is below TetGen's usable bound 1.0",
                              fix="use radius_edge >= 1.0 (1.414 is the default, 1.2 is tight)")
        if not (np.isfinite(self.min_dihedral) and 0.0 <= self.min_dihedral < 70.0):
            raise OptionError(f"min_dihedral = {self.min_dihedral!r} degrees is outside [0, 70)",
                              fix="use a target between 0 and about 18 degrees")
        text = f"pq{float(self.quality_bound)!r}/{float(self.min_dihedral)!r}"
        volume = self.volume_bound()
        if volume is not None:
            # Positional notation, so the bound never depends on how TetGen parses an exponent
            # (reported misread as "a3.8" + stray switches; with tetgen 0.8.4 here "a3.2e-08" and
            # "a0.000000032" gave identical meshes; test_volume_bound_reaches_tetgen checks the effect).
            text += "a" + np.format_float_positional(float(volume), unique=True, trim="-")
        return text + "Q"


def stretched(points: np.ndarray, axis, factor: float) -> np.ndarray:
    """``points`` stretched by ``factor`` along the unit vector ``axis`` (x + (f − 1)(x·n)n).

    Element by element, not through BLAS (whose sums may differ in the last bit between
    machines, and TetGen's mesh with them): the same inputs give the same mesh everywhere.
    """
    n = np.asarray(axis, dtype=np.float64)
    points = np.asarray(points, dtype=np.float64)
    along = points[:, 0] * n[0] + points[:, 1] * n[1] + points[:, 2] * n[2]
    return points + (float(factor) - 1.0) * along[:, None] * n[None, :]


# ---------------------------------------------------------------------------
# Surface checks and a point inside the core


def _check_surface(vertices: np.ndarray, faces: np.ndarray, what: str) -> None:
    """Refuse a surface TetGen cannot mesh (or would hang on): bad indices, not closed."""
    if vertices.ndim != 2 or vertices.shape[1] != 3 or not np.all(np.isfinite(vertices)):
        raise InputError(f"{what} vertices must be a finite (n, 3) array, got shape {vertices.shape}",
                         fix="pass vertex coordinates in metres")
    if faces.ndim != 2 or faces.shape[1] != 3 or len(faces) < 4:
        raise InputError(f"{what} faces must be an (m, 3) array of at least 4 triangles, got shape {faces.shape}",
                         fix="pass a closed triangulated surface")
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise InputError(f"{what} faces index vertex {int(faces.max())} but there are {len(vertices)} vertices",
                         fix="check the face index base (0-based) and the vertex array")
    use = edge_use(faces)
    if not use.closed:
        raise InputError(
            f"{what} surface is not closed: {use.open + use.overused} of {use.edges} edges are not shared by "
            "exactly two faces",
            fix="repair the surface so it is watertight and manifold (e.g. trimesh.repair or a CAD re-export)")


def interior_point(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """A point strictly inside a closed surface: a step inward from a large face, verified by winding number.

    Works for either winding of the faces. Raises InputError if no candidate is inside.
    """
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    tri = vertices[faces]
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    area2 = np.linalg.norm(normal, axis=1)
    order = np.argsort(-area2, kind="stable")[:8]
    size = np.ptp(vertices, axis=0).max()
    for f in order:
        if area2[f] <= 0:
            continue
        centroid = tri[f].mean(axis=0)
        unit = normal[f] / area2[f]
        # Inward is -n for outward faces; try both sides and keep the inside one.
        for fraction in (1e-3, 1e-4, 1e-5):
            step = fraction * size
            candidates = np.array([centroid - step * unit, centroid + step * unit])
            winding = winding_numbers(vertices, faces, candidates)
            inside = np.abs(winding) > 0.5
            if inside.any():
                return candidates[int(np.argmax(np.abs(winding)))]
    raise InputError("could not find a point inside the core surface (it may be flat or not closed)",
                     fix="pass a closed core surface that encloses a volume")


# ---------------------------------------------------------------------------
# Running TetGen


def _tetgen_failure(folder: str, code: int, text: str) -> Exception | None:
    """The error for TetGen's refusal (``error.txt``), crash or stop, or None when it meshed."""
    error_path = os.path.join(folder, "error.txt")
    if os.path.exists(error_path):
        with open(error_path) as handle:
            failure = handle.read()
        if "intersect" in failure.lower():
            return InputError(f"TetGen refused the surface: {failure}",
                              fix="remove the self-intersections (or the overlap between outer surface and core)")
        if "internal" in failure.lower():
            # An internal error (e.g. "Internal TetGen error within `flip32`"), as size fields
            # cause: the same input with other sizes may mesh (sizing.mesh_with_size_field).
            # Closed, manifold input meets them too: needles and slivers a refinement cannot split.
            return TetGenStuck(f"TetGen failed to tetrahedralize the surface: {failure} [{text}]",
                               fix="remesh the surface: its needle or sliver triangles (of a CAD or scan "
                                   "export, even closed and manifold) stop TetGen's refinement; give "
                                   "--surface-tolerance LENGTH, a few times the default 0.1 % of the part's "
                                   "diagonal, or repair the surface in a mesh editor")
        return BuildError(f"TetGen failed to tetrahedralize the surface: {failure} [{text}]",
                          fix="repair the surface (closed, manifold, no overlaps) or relax radius_edge")
    if code in CRASH_CODES:
        return MesherCrash(f"TetGen crashed (exit code {code}): [{text}]",
                           fix="repair the surface (closed, manifold, no near-coincident faces)")
    if code != 0 or not os.path.exists(os.path.join(folder, "output.npz")):
        return BuildError(f"TetGen stopped (exit code {code}{', killed: out of memory?' if code == -9 else ''}): "
                          f"[{text}]", fix="mesh coarser, or on a machine with more memory")
    return None


def _run_tetgen(vertices, faces, markers, holes, switches: str, timeout: float, while_waiting=None,
                background=None):
    """Run TetGen in a child process inside a temporary folder with its output captured; map failures.

    ``while_waiting()`` (optional) runs in this process while TetGen runs in its own.
    """
    with scratch_folder("fieldgen-tetgen-") as folder:
        extra = {} if background is None else {
            "background_points": background[0], "background_tets": background[1], "background_sizes": background[2]}
        np.savez(os.path.join(folder, "input.npz"), vertices=vertices, faces=faces, markers=markers,
                 holes=np.asarray(holes, dtype=np.float64).reshape(-1, 3), switches=np.array(switches), **extra)
        env = child_env()
        env.setdefault("OMP_NUM_THREADS", "1")
        log_path = os.path.join(folder, "tetgen.log")
        try:
            code = run_child("fieldgen.meshing.tetgen_child", folder, timeout=timeout, env=env, log=log_path,
                             while_waiting=while_waiting, label="TetGen")
        except subprocess.TimeoutExpired:
            raise BuildError(f"TetGen did not finish within {timeout:g} s (its wall-time limit)",
                             fix="mesh coarser (a larger --edge-length or --max-volume), or thicken parts "
                                 "thinner than the edge length (TetGen's quality bound refines them down to "
                                 "their thickness), or check the surface for near-intersections")
        with open(log_path, "rb") as log:
            text = " ".join(log.read().decode(errors="replace").split())[-300:]
        failure = _tetgen_failure(folder, code, text)
        if failure is not None:
            raise failure
        with np.load(os.path.join(folder, "output.npz")) as out:
            return (np.array(out["nodes"], dtype=np.float64), np.array(out["elements"], dtype=np.int64),
                    np.array(out["trifaces"], dtype=np.int64), np.array(out["trimarkers"], dtype=np.int64))


# ---------------------------------------------------------------------------
# The mesh


def _checked_markers(markers, faces) -> np.ndarray:
    """``markers`` as an int64 array of one FREE/RIGID/INSULATED code per face; InputError otherwise."""
    markers = np.asarray(markers, dtype=np.int64).ravel()
    if markers.shape != (len(faces),):
        raise InputError(f"{markers.size} markers for {len(faces)} faces", fix="give one marker per face")
    bad = ~np.isin(markers, list(CONDITION_NAMES))
    if bad.any():
        raise InputError(f"{int(bad.sum())} face markers are not FREE=1/RIGID=2/INSULATED=3 (e.g. {int(markers[bad][0])})",
                         fix="mark every face with one of the boundary condition codes")
    return markers


def _check_stretch(options: MeshingOptions, background) -> None:
    """OptionError unless the stretch is a positive factor along a unit axis, without a size field."""
    if not (np.isfinite(options.stretch) and options.stretch > 0):
        raise OptionError(f"stretch = {options.stretch!r} is not a positive factor", fix="use e.g. 3")
    axis = None if options.stretch_axis is None else np.asarray(options.stretch_axis, dtype=np.float64)
    if axis is None or axis.shape != (3,) or not abs(float(np.linalg.norm(axis)) - 1.0) < 1e-12:
        raise OptionError(f"stretch_axis = {options.stretch_axis!r} is not a unit vector",
                          fix="give the thin axis as a unit vector, e.g. (0, 0, 1)")
    if background is not None:
        raise OptionError("a stretch and a size field together", fix="give one of them")


def _with_core(vertices, faces, markers, core_vertices, core_faces, options: MeshingOptions):
    """The outer surface and the core's (all RIGID) as one PLC, with a hole point in each piece of
    the core: ``(vertices, faces, markers, holes, given core vertices or None)``."""
    if core_faces is None or not len(core_faces):
        return vertices, faces, markers, [], None
    if core_vertices is None:
        raise InputError("core_faces given without core_vertices", fix="pass both core arrays")
    cv = np.asarray(core_vertices, dtype=np.float64)
    original_core = None
    if options.stretch != 1.0:
        original_core = cv
        cv = stretched(cv, options.stretch_axis, options.stretch)
    cf = np.asarray(core_faces, dtype=np.int64)
    _check_surface(cv, cf, "core")
    holes = [interior_point(cv, cf[piece]) for piece in face_pieces(cf, len(cv))]
    return (np.vstack([vertices, cv]), np.vstack([faces, cf + len(vertices)]),
            np.concatenate([markers, np.full(len(cf), RIGID, dtype=np.int64)]), holes, original_core)


def _without_interior_pairs(trifaces, trimarkers, boundary, n: int):
    """TetGen's face list without the faces it lists twice (seen once in each orientation; either
    way, as vertex sets) that are not on the mesh's boundary (two tets share them): interior faces,
    not surface (docs/design/meshing.md)."""
    keys = face_keys(trifaces, n)
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    twice = counts[inverse] == 2
    if not twice.any():
        return trifaces, trimarkers
    on_boundary, _ = find_faces(trifaces, boundary, n)
    drop = twice & ~on_boundary
    return trifaces[~drop], trimarkers[~drop]


def _tet_mesh(nodes, elements, trifaces, trimarkers, has_core: bool = True) -> TetMesh:
    """TetGen's output as a TetMesh: nodes no tet uses dropped (duplicate input vertices, TetGen's
    order kept), tets positive, every boundary face with the marker TetGen carried to it."""
    if elements.ndim != 2 or elements.shape[1] != 4 or len(elements) == 0:
        raise BuildError(f"TetGen returned {len(elements)} tets", fix="check that the surface encloses a volume")
    used = np.zeros(len(nodes), dtype=bool)
    used[elements.ravel()] = True
    remap = np.cumsum(used) - 1
    points = nodes[used]
    tets = orient_positive(points, remap[elements])
    trifaces = remap[trifaces]
    flat = flat_tets(points, tets)
    if len(flat):
        raise MesherCrash(
            f"TetGen made {len(flat)} flat tet(s) (four vertices in a plane to rounding: volume "
            f"{FLAT_TET:g} x the longest edge cubed or less; e.g. tet {int(flat[0])} at "
            f"{np.round(points[tets[flat[0]]].mean(axis=0), 6).tolist()} m), which carry no field",
            fix="mesh with another edge length (--edge-length, or a slightly different one if given)")
    boundary = boundary_faces_of(tets)
    n = len(points)
    trifaces, trimarkers = _without_interior_pairs(trifaces, trimarkers, boundary, n)
    found, row = find_faces(boundary, trifaces, n)
    if not found.all() or len(np.unique(face_keys(trifaces, n))) != len(boundary):
        if not has_core:
            raise BuildError(
                f"{len(trifaces)} surface faces but {len(boundary)} on the mesh's boundary: the surface has "
                "closed pieces inside one another (a hollow part), and the cavity was filled",
                fix="give the inner surface separately as --core (a rigid core carved out), or remove it")
        raise BuildError(
            f"{int((~found).sum())} boundary faces carry no marker and {len(trifaces)} marked faces != "
            f"{len(boundary)} boundary faces (the core was probably not carved out)",
            fix="check that the core lies strictly inside the outer surface and does not touch it")
    return TetMesh(points=points, tets=tets, boundary_faces=boundary, boundary_markers=trimarkers[row])


#: Meshes estimated above this many tets are refused before TetGen starts: about 18 GB and most
#: of an hour of build (docs/design/limits.md).
MAX_TETS = 20_000_000


def check_tet_count(vertices: np.ndarray, faces: np.ndarray, options: MeshingOptions) -> None:
    """Refuse (OptionError, exit 2) a mesh estimated above :data:`MAX_TETS` tets, before TetGen
    starts. Two lower bounds (TetGen's quality tets are smaller still): the enclosed volume over
    the volume bound; and, as the radius-edge bound keeps tets no longer than about twice the
    part's thickness (mean thickness 2·volume/area), the volume over a regular tet of that edge."""
    volume = abs(signed_volume(vertices, faces))
    thickness = 2.0 * volume / max(float(face_areas(vertices, faces).sum()), np.finfo(float).tiny)
    thin = 6.0 * np.sqrt(2.0) * volume / (2.0 * thickness) ** 3
    if thin > MAX_TETS:
        raise OptionError(f"the part is about {thickness:.3g} m thick on average (2 x volume / area): TetGen's "
                          f"quality tets would be that small, about {thin:.3g} of them, more than the "
                          f"{MAX_TETS:.0e} a build can hold in memory",
                          fix="thicken the part, or check its units (--units)")
    bound = options.volume_bound()
    if bound is None or volume / bound <= MAX_TETS:
        return
    edge = (6.0 * np.sqrt(2.0) * volume / MAX_TETS) ** (1.0 / 3.0)
    if options.skin is not None and options.edge_length == 0.5 * options.skin:
        raise OptionError(f"the skin {options.skin:.3g} m is too thin for this part: its cut needs tets at most half "
                          f"the skin across, about {volume / bound:.3g} of them ({volume:.3g} m^3), more than the "
                          f"{MAX_TETS:.0e} a build can hold in memory",
                          fix=f"give a skin of at least {2.0 * edge:.3g} m (--skin is in --units), or let the "
                              "accuracy size the mesh (drop --edge-length and --max-volume)")
    raise OptionError(f"this size would make about {volume / bound:.3g} tets ({volume:.3g} m^3 in tets of at "
                      f"most {bound:.3g} m^3), more than the {MAX_TETS:.0e} a build can hold in memory",
                      fix=f"mesh coarser: an edge length of at least {edge:.3g} m (or a max volume of at "
                          f"least {volume / MAX_TETS:.3g} m^3)")


def tetrahedralize(vertices, faces, markers, *, core_vertices=None, core_faces=None,
                   options: MeshingOptions = MeshingOptions(), timeout: float = 3600.0,
                   while_waiting=None, background=None) -> TetMesh:
    """Mesh the volume inside ``faces`` and outside the core with TetGen (docs/model.md §2.2).

    ``vertices`` (n, 3) in m, ``faces`` (m, 3) wound outward, ``markers`` (m,) FREE/RIGID/INSULATED
    for the outer surface (which may hold sealed cavities, kept empty:
    :func:`fieldgen.surface.cavities.cavity_points`); ``core_faces`` (any number of closed
    components) are all RIGID and are carved out as holes. Returns a TetMesh with positive tets
    and boundary faces wound out of the volume (so core faces point into the core), each with the marker it was given. A vertex shared
    by FREE and RIGID faces is treated as FREE (e = 0) downstream so the contact surface carries
    exactly zero pressure. Deterministic (TetGen is; ordering is derived from its output).
    TetGen runs in a child process (``timeout`` in s) so a crash or hang cannot take the caller down;
    ``while_waiting()`` (optional, no arguments) runs meanwhile in this process (the build warms
    its later imports there). ``background`` (points (k, 3), tets (j, 4), sizes (k,), m) is a size
    field: TetGen refines until edges are about as long as the sizes interpolated there (its -m).
    """
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    _check_surface(vertices, faces, "outer")
    markers = _checked_markers(markers, faces)
    switches = options.switches()
    stretch = options.stretch != 1.0
    original = vertices
    if stretch:
        _check_stretch(options, background)
        vertices = stretched(vertices, options.stretch_axis, options.stretch)
    check_tet_count(vertices, faces, options)
    all_vertices, all_faces, all_markers, holes, original_core = _with_core(
        vertices, faces, markers, core_vertices, core_faces, options)
    holes = [*cavity_points(vertices, faces), *holes]      # a hollow part's sealed cavities stay empty
    given = np.vstack([original] + ([original_core] if original_core is not None else [])) if stretch \
        else all_vertices
    plc = (all_vertices, all_faces, all_markers, holes)
    started = time.monotonic()
    mesh = _meshed(plc, given, switches, options, timeout, while_waiting, background)
    off = 0.0 if "M" in switches else moved_off(mesh, given, all_faces, options.surface_tolerance)
    if not off:
        return mesh
    again = min(timeout, max(UNMERGED_MIN_TIMEOUT, UNMERGED_TIME * (time.monotonic() - started)))
    mesh.merged_off = off
    try:        # TetGen merged nearly coplanar facets and triangulated them anew: not at all now
        unmerged = _meshed(plc, given, switches[:-1] + "MQ", options, again, None, background)
    except (BuildError, MesherCrash) as error:
        mesh.merged_kept = f"TetGen failed without the merge ({error.defect.rstrip('.')})"
        return mesh
    if unmerged.n_tets > max(UNMERGED_GROWTH * mesh.n_tets, UNMERGED_TETS):
        mesh.merged_kept = (f"without the merge TetGen made {unmerged.n_tets:,} tets, more than "
                            f"{max(UNMERGED_GROWTH * mesh.n_tets, UNMERGED_TETS):,.0f}")
        return mesh
    unmerged.unmerged = True
    return unmerged


def merge_record(mesh: TetMesh) -> dict:
    """The asset's record of a merged mesh kept though TetGen's merge moved its boundary off the
    surface (:func:`tetrahedralize`); empty otherwise."""
    if not mesh.merged_kept:
        return {}
    return {"facets_merged": {"boundary_off": float(mesh.merged_off), "kept_because": mesh.merged_kept}}


def merge_warnings(parameters, units: str) -> list[str]:
    """The warning for a mesher record holding :func:`merge_record`'s entry (``units`` the build's)."""
    merged = parameters.get("facets_merged")
    if not merged:
        return []
    scale = length_scale(units)
    return [f"TetGen merged nearly coplanar facets and moved the mesh's boundary at least "
            f"{merged['boundary_off'] / scale:.3g} {units} from the surface, beyond its surface tolerance; "
            f"{merged['kept_because']}, so that mesh was kept: the asset's shape differs from the input "
            f"there (a finer --edge-length, or the input's flat faces without sliver triangles, "
            f"lets TetGen keep the facets)"]


def _meshed(plc, given, switches: str, options: MeshingOptions, timeout: float, while_waiting, background):
    """TetGen's mesh of ``plc`` (vertices, faces, markers, hole points), in the part: when stretched,
    TetGen's own points mapped back and the input's ``given`` back exactly (TetGen numbers the
    input's points first)."""
    vertices, faces, markers, holes = plc
    nodes, elements, trifaces, trimarkers = _run_tetgen(vertices, faces, markers, holes, switches, timeout,
                                                        while_waiting, background)
    if options.stretch != 1.0:
        nodes = stretched(nodes, options.stretch_axis, 1.0 / options.stretch)
        nodes[:len(given)] = given
    return _tet_mesh(nodes, elements, trifaces, trimarkers, has_core=bool(holes))


#: The boundary's distance from the surface that is rounding (a fraction of the diagonal).
ROUNDING = 1e-9
#: The mesh made again with -M is kept if it has at most this many times the tets, or at most
#: ``UNMERGED_TETS`` (an accuracy-sized part's budget): on CAD faces of many small coplanar
#: triangles TetGen's quality bound meshes each unmerged (a threaded nut's first mesh 3.7 times
#: larger, its build 1.25 -> 4.96 %; docs/design/meshing.md). It gets this many times the first
#: run's wall time, at least ``UNMERGED_MIN_TIMEOUT`` s (not the whole limit again).
UNMERGED_GROWTH = 2.0
UNMERGED_TETS = 300_000
UNMERGED_TIME = 10.0
UNMERGED_MIN_TIMEOUT = 60.0


def moved_off(mesh: TetMesh, vertices: np.ndarray, faces: np.ndarray, tolerance: float | None) -> float:
    """How far ``mesh``'s boundary lies from the surface (``vertices``, ``faces``; the core's
    included) when farther than ``tolerance`` (m; at least this far: measuring stops past it; None:
    the default surface tolerance, docs/model.md §2.11), else 0. TetGen, unless told -M, merges adjacent facets it takes as coplanar and triangulates
    them anew: a 102-vertex collision mesh's boundary moved 0.49 mm (0.24 % of its volume); on the
    corpus's CAD parts at most 0.05 mm, below their tolerance (docs/design/meshing.md). Measured
    (:func:`fieldgen.surface.remesh.hausdorff_distance`) only when the volumes differ (always
    with a core, whose faces count with the outer surface's sign)."""
    diagonal = float(np.linalg.norm(np.ptp(vertices, axis=0)))
    limit = max(DEFAULT_FRACTION * diagonal if tolerance is None else float(tolerance), ROUNDING * diagonal)
    volume = float(np.abs(tet_volumes(mesh.points, mesh.tets)).sum())
    if abs(volume - abs(signed_volume(vertices, faces))) <= ROUNDING * volume:
        return 0.0          # (with a core the two differ always: measured then)
    distance = hausdorff_distance(vertices, faces, mesh.points, mesh.boundary_faces, limit=limit)
    return distance if distance > limit else 0.0


#: Exit codes of a TetGen child killed by its own fault (SIGSEGV, SIGABRT, SIGBUS, SIGFPE,
#: SIGILL): what some size fields cause (:class:`fieldgen.errors.MesherCrash`). A kill from
#: outside (SIGKILL, e.g. out of memory) is a plain BuildError, never retried.
CRASH_CODES = (-11, -6, -7, -8, -4)

#: A tet whose volume is at most this fraction of its longest edge cubed is flat: its four
#: vertices lie in a plane to rounding (a regular tet has 0.118; TetGen's slivers are far above it).
FLAT_TET = 1e-12


def flat_tets(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Indices of the tets of (signed) volume at most ``FLAT_TET`` x their longest edge cubed."""
    points = np.asarray(points, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)
    longest = np.linalg.norm(points[tets[:, TET_EDGES[:, 0]]] - points[tets[:, TET_EDGES[:, 1]]], axis=2).max(axis=1)
    return np.flatnonzero(tet_volumes(points, tets) <= FLAT_TET * longest ** 3)

