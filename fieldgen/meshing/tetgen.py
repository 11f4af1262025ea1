"""Tetrahedralization of a marked surface with TetGen (docs/model.md §2.1-2.2).

The volume between the outer surface and an optional rigid core is meshed with TetGen
(``tetgen`` package; TetGen itself is AGPL-3.0). Boundary faces keep the condition they
carry through TetGen's facet markers, so no geometric matching is needed afterwards.

Shared vertices: a vertex on both a FREE face and a RIGID face counts as FREE (e = 0).
The exposed contact surface must carry exactly zero pressure, otherwise the contact
force would jump as objects start to touch (D 5.0.2, D A.2). ``TetMesh.vertices_with``
reports such a vertex under both codes; :func:`fieldgen.fe.extent.solve_extent` and
:func:`refine_zero_tets` give FREE the priority.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

from fieldgen.meshing.process import child_env, scratch_folder
from fieldgen.errors import BuildError, InputError, MesherCrash, OptionError
from fieldgen.meshing.tetmesh import (
    FREE,
    RIGID,
    TET_EDGES,
    CONDITION_NAMES,
    TetMesh,
    boundary_faces_of,
    face_keys,
    find_faces,
    min_dihedral_angles,
    orient_positive,
    tet_volumes,
)

# Local edges and faces of a tet (vertex indices 0..3).
_TET_FACES = np.array([(1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1)])


@dataclass(frozen=True)
class MeshingOptions:
    """Size and quality controls passed to TetGen.

    TetGen honours the volume bound for nearly all tets; its final smoothing lets a few (~0.6%
    measured) grow to about 1.35x the bound. It does not enforce ``min_dihedral`` either.
    """

    max_volume: float | None = None     # m^3
    edge_length: float | None = None    # m; converted to a regular tet's volume a^3/(6 sqrt 2)
    radius_edge: float = 1.414          # TetGen quality bound q (circumradius / shortest edge)
    min_dihedral: float = 10.0          # degrees; TetGen's q/ target (not enforced by TetGen)
    #: Anisotropic tets for a plate-like part: TetGen meshes the part stretched by ``stretch``
    #: along the unit vector ``stretch_axis`` (its thin direction), and the points are mapped back,
    #: so the tets are ``stretch`` times thinner across the plate than along it (the bounds
    #: above apply in the stretched part). An affine map keeps every face in its plane.
    stretch_axis: tuple[float, float, float] | None = None
    stretch: float = 1.0

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
        if not (np.isfinite(self.radius_edge) and self.radius_edge >= 1.0):
            raise OptionError(f"radius_edge = {self.radius_edge!r} is below TetGen's usable bound 1.0",
                              fix="use radius_edge >= 1.0 (1.414 is the default, 1.2 is tight)")
        if not (np.isfinite(self.min_dihedral) and 0.0 <= self.min_dihedral < 70.0):
            raise OptionError(f"min_dihedral = {self.min_dihedral!r} degrees is outside [0, 70)",
                              fix="use a target between 0 and about 18 degrees")
        text = f"pq{float(self.radius_edge)!r}/{float(self.min_dihedral)!r}"
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


def _edge_use_counts(faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique undirected edges of a triangle set and how many faces use each."""
    edges = np.sort(faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    return np.unique(edges, axis=0, return_counts=True)


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
    _, counts = _edge_use_counts(faces)
    open_edges = int(np.sum(counts != 2))
    if open_edges:
        raise InputError(
            f"{what} surface is not closed: {open_edges} of {len(counts)} edges are not shared by exactly two faces",
            fix="repair the surface so it is watertight and manifold (e.g. trimesh.repair or a CAD re-export)")


def _winding_numbers(vertices: np.ndarray, faces: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Generalised winding number of a closed triangle surface at each query point (van Oosterom-Strackee)."""
    result = np.empty(len(queries))
    for i, q in enumerate(queries):
        a = vertices[faces[:, 0]] - q
        b = vertices[faces[:, 1]] - q
        c = vertices[faces[:, 2]] - q
        la, lb, lc = (np.linalg.norm(x, axis=1) for x in (a, b, c))
        numerator = np.einsum("ij,ij->i", a, np.cross(b, c))
        denominator = (la * lb * lc + np.einsum("ij,ij->i", a, b) * lc
                       + np.einsum("ij,ij->i", b, c) * la + np.einsum("ij,ij->i", c, a) * lb)
        result[i] = np.sum(2.0 * np.arctan2(numerator, denominator)) / (4.0 * np.pi)
    return result


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
            winding = _winding_numbers(vertices, faces, candidates)
            inside = np.abs(winding) > 0.5
            if inside.any():
                return candidates[int(np.argmax(np.abs(winding)))]
    raise InputError("could not find a point inside the core surface (it may be flat or not closed)",
                     fix="pass a closed core surface that encloses a volume")


def _components(faces: np.ndarray, n_vertices: int) -> list[np.ndarray]:
    """Face index arrays of the vertex-connected components of a triangle set, in a stable order."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    rows = np.repeat(np.arange(len(faces)), 3)
    graph = coo_matrix((np.ones(len(rows)), (faces.ravel(), rows)), shape=(n_vertices, len(faces))).tocsr()
    _, labels = connected_components(graph @ graph.T, directed=False)
    face_label = labels[faces[:, 0]]
    return [np.flatnonzero(face_label == lab) for lab in np.unique(face_label)]


# ---------------------------------------------------------------------------
# Running TetGen


def _tetgen_worker(folder: str) -> None:
    """Child-process side: read ``input.npz`` in ``folder``, run TetGen there, write ``output.npz``.

    TetGen runs in its own process because a refused surface can corrupt its heap (an abort at
    exit was measured after a self-intersection error), some inputs make it hang, and it prints
    to stdout and writes ``tetgen-tmpfile_skipped.*`` into the current directory.
    """
    import tetgen

    from fieldgen.meshing.process import die_with_starter

    die_with_starter()                # killed with the build that started it
    data = np.load(os.path.join(folder, "input.npz"))
    generator = tetgen.TetGen(data["vertices"], data["faces"].astype(np.int32), data["markers"].astype(np.int32))
    for point in data["holes"]:
        generator.add_hole([float(x) for x in point])
    switches = str(data["switches"])
    if "background_sizes" in data.files:
        # A size field (target edge length at the vertices of a background tet mesh, TetGen's -m).
        generator._tetgen.load_bgmesh_from_arrays(
            np.ascontiguousarray(data["background_points"], dtype=np.float64),
            np.ascontiguousarray(data["background_tets"], dtype=np.int32),
            np.ascontiguousarray(data["background_sizes"], dtype=np.float64))
        switches = switches[:-1] + "mQ" if switches.endswith("Q") else switches + "m"
    try:
        generator.tetrahedralize(switches=switches)
    except RuntimeError as error:
        with open(os.path.join(folder, "error.txt"), "w") as handle:
            handle.write(str(error))
        return
    np.savez(os.path.join(folder, "output.npz"), nodes=generator.node, elements=generator.elem,
             trifaces=generator.trifaces, trimarkers=generator.triface_markers)


def _run_tetgen(vertices, faces, markers, holes, switches: str, timeout: float, while_waiting=None,
                background=None):
    """Run TetGen in a child process inside a temporary folder with its output captured; map failures.

    ``while_waiting()`` (optional) runs in this process while TetGen runs in its own.
    """
    import subprocess

    with scratch_folder("fieldgen-tetgen-") as folder:
        extra = {} if background is None else {
            "background_points": background[0], "background_tets": background[1], "background_sizes": background[2]}
        np.savez(os.path.join(folder, "input.npz"), vertices=vertices, faces=faces, markers=markers,
                 holes=np.asarray(holes, dtype=np.float64).reshape(-1, 3), switches=np.array(switches), **extra)
        env = child_env()
        env.setdefault("OMP_NUM_THREADS", "1")
        log_path = os.path.join(folder, "tetgen.log")
        with open(log_path, "wb") as log:
            child = subprocess.Popen([sys.executable, "-m", "fieldgen.meshing.tetgen", folder], cwd=folder, env=env,
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            try:
                if while_waiting is not None:
                    while_waiting()
                code = child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                raise BuildError(f"TetGen did not finish within {timeout:g} s",
                                 fix="check the surface for near-intersections, mesh coarser, or raise the timeout")
            except BaseException:
                child.kill()
                child.wait()
                raise
        with open(log_path, "rb") as log:
            text = " ".join(log.read().decode(errors="replace").split())[-300:]
        error_path = os.path.join(folder, "error.txt")
        if os.path.exists(error_path):
            with open(error_path) as handle:
                failure = handle.read()
            if "intersect" in failure.lower():
                raise InputError(f"TetGen refused the surface: {failure}",
                                 fix="remove the self-intersections (or the overlap between outer surface and core)")
            if "internal" in failure.lower():
                # An internal error (e.g. "Internal TetGen error within `flip32`"), as size fields
                # cause: the same input with other sizes may mesh (sizing.mesh_with_size_field).
                raise MesherCrash(f"TetGen failed to tetrahedralize the surface: {failure} [{text}]",
                                  fix="repair the surface (closed, manifold, no overlaps) or relax radius_edge")
            raise BuildError(f"TetGen failed to tetrahedralize the surface: {failure} [{text}]",
                             fix="repair the surface (closed, manifold, no overlaps) or relax radius_edge")
        if code in CRASH_CODES:
            raise MesherCrash(f"TetGen crashed (exit code {code}): [{text}]",
                              fix="repair the surface (closed, manifold, no near-coincident faces)")
        if code != 0 or not os.path.exists(os.path.join(folder, "output.npz")):
            raise BuildError(f"TetGen stopped (exit code {code}{', killed: out of memory?' if code == -9 else ''}): "
                             f"[{text}]", fix="mesh coarser, or on a machine with more memory")
        with np.load(os.path.join(folder, "output.npz")) as out:
            return (np.array(out["nodes"], dtype=np.float64), np.array(out["elements"], dtype=np.int64),
                    np.array(out["trifaces"], dtype=np.int64), np.array(out["trimarkers"], dtype=np.int64))


def tetrahedralize(vertices, faces, markers, *, core_vertices=None, core_faces=None,
                   options: MeshingOptions = MeshingOptions(), timeout: float = 3600.0,
                   while_waiting=None, background=None) -> TetMesh:
    """Mesh the volume inside ``faces`` and outside the core with TetGen (D 5.1.1).

    ``vertices`` (n, 3) in m, ``faces`` (m, 3) wound outward, ``markers`` (m,) FREE/RIGID/INSULATED
    for the outer surface; ``core_faces`` (any number of closed components) are all RIGID and are
    carved out as holes. Returns a TetMesh with positive tets and boundary faces wound out of the
    volume (so core faces point into the core), each with the marker it was given. A vertex shared
    by FREE and RIGID faces is treated as FREE (e = 0) downstream so the contact surface carries
    exactly zero pressure. Deterministic (TetGen is; ordering is derived from its output).
    TetGen runs in a child process (``timeout`` in s) so a crash or hang cannot take the caller down;
    ``while_waiting()`` (optional, no arguments) runs meanwhile in this process (the build warms
    its later imports there). ``background`` (points (k, 3), tets (j, 4), sizes (k,), m) is a size
    field: TetGen refines until edges are about as long as the sizes interpolated there (its -m).
    """
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    markers = np.asarray(markers, dtype=np.int64).ravel()
    _check_surface(vertices, faces, "outer")
    if markers.shape != (len(faces),):
        raise InputError(f"{markers.size} markers for {len(faces)} faces", fix="give one marker per face")
    bad = ~np.isin(markers, list(CONDITION_NAMES))
    if bad.any():
        raise InputError(f"{int(bad.sum())} face markers are not FREE=1/RIGID=2/INSULATED=3 (e.g. {int(markers[bad][0])})",
                         fix="mark every face with one of the boundary condition codes")
    switches = options.switches()
    stretch = options.stretch != 1.0
    original, original_core = vertices, None
    if stretch:
        if not (np.isfinite(options.stretch) and options.stretch > 0):
            raise OptionError(f"stretch = {options.stretch!r} is not a positive factor", fix="use e.g. 3")
        axis = None if options.stretch_axis is None else np.asarray(options.stretch_axis, dtype=np.float64)
        if axis is None or axis.shape != (3,) or not abs(float(np.linalg.norm(axis)) - 1.0) < 1e-12:
            raise OptionError(f"stretch_axis = {options.stretch_axis!r} is not a unit vector",
                              fix="give the thin axis as a unit vector, e.g. (0, 0, 1)")
        if background is not None:
            raise OptionError("a stretch and a size field together", fix="give one of them")
        vertices = stretched(vertices, options.stretch_axis, options.stretch)

    all_vertices, all_faces, all_markers, holes = vertices, faces, markers, []
    if core_faces is not None and len(core_faces):
        if core_vertices is None:
            raise InputError("core_faces given without core_vertices", fix="pass both core arrays")
        cv = np.asarray(core_vertices, dtype=np.float64)
        if stretch:
            original_core = cv
            cv = stretched(cv, options.stretch_axis, options.stretch)
        cf = np.asarray(core_faces, dtype=np.int64)
        _check_surface(cv, cf, "core")
        for component in _components(cf, len(cv)):
            holes.append(interior_point(cv, cf[component]))
        all_vertices = np.vstack([vertices, cv])
        all_faces = np.vstack([faces, cf + len(vertices)])
        all_markers = np.concatenate([markers, np.full(len(cf), RIGID, dtype=np.int64)])

    nodes, elements, trifaces, trimarkers = _run_tetgen(all_vertices, all_faces, all_markers, holes,
                                                        switches, timeout, while_waiting, background)
    if stretch:
        # Back to the part: TetGen's own points mapped back, the input's given back exactly
        # (TetGen numbers the input's points first).
        nodes = stretched(nodes, options.stretch_axis, 1.0 / options.stretch)
        given = np.vstack([original] + ([original_core] if original_core is not None else []))
        nodes[:len(given)] = given
    if elements.ndim != 2 or elements.shape[1] != 4 or len(elements) == 0:
        raise BuildError(f"TetGen returned {len(elements)} tets", fix="check that the surface encloses a volume")

    # Drop nodes no tet uses (duplicate input vertices), keeping TetGen's order.
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
    found, row = find_faces(boundary, trifaces, n)
    if not found.all() or len(np.unique(face_keys(trifaces, n))) != len(boundary):
        raise BuildError(
            f"{int((~found).sum())} boundary faces carry no marker and {len(trifaces)} marked faces != "
            f"{len(boundary)} boundary faces (the core was probably not carved out)",
            fix="check that the core lies strictly inside the outer surface and does not touch it")
    boundary_markers = trimarkers[row]
    return TetMesh(points=points, tets=tets, boundary_faces=boundary, boundary_markers=boundary_markers)


#: Exit codes of a TetGen child killed by its own fault (SIGSEGV, SIGABRT, SIGBUS, SIGFPE,
#: SIGILL): what some size fields cause (:class:`fieldgen.errors.MesherCrash`). A kill from
#: outside (SIGKILL, e.g. out of memory) is a plain BuildError, never retried.
CRASH_CODES = (-11, -6, -7, -8, -4)

#: A tet whose volume is at most this fraction of its longest edge cubed is flat: its four
#: vertices lie in a plane to rounding (a regular tet has 0.118; TetGen's slivers in the corpus
#: builds have 4e-8 or more; one TetGen mesh of angle_block under a size field had 2e-18).
FLAT_TET = 1e-12


def flat_tets(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Indices of the tets of (signed) volume at most ``FLAT_TET`` x their longest edge cubed."""
    points = np.asarray(points, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)
    longest = np.linalg.norm(points[tets[:, TET_EDGES[:, 0]]] - points[tets[:, TET_EDGES[:, 1]]], axis=2).max(axis=1)
    return np.flatnonzero(tet_volumes(points, tets) <= FLAT_TET * longest ** 3)


# ---------------------------------------------------------------------------
# Tets with all four vertices on the FREE boundary


def zero_tets(mesh: TetMesh) -> np.ndarray:
    """Indices of tets whose four vertices all lie on FREE faces (e = 0 on the whole tet)."""
    on_free = np.zeros(mesh.n_points, dtype=bool)
    on_free[mesh.vertices_with(FREE)] = True
    return np.flatnonzero(_row_counts(on_free[mesh.tets]) == 4)


def _split_edges(points, tets, edges):
    """Split each edge (k, 2; sorted pairs) at its midpoint in every tet containing it (edge stars
    must be disjoint: a tet holds at most one of the edges)."""
    n = len(points)
    new_points = 0.5 * (points[edges[:, 0]] + points[edges[:, 1]])
    t_idx, local, which = _edge_hits(tets, edges[:, 0] * n + edges[:, 1], n)
    midpoint = n + which
    a_local, b_local = TET_EDGES[local, 0], TET_EDGES[local, 1]
    first = tets[t_idx].copy()
    second = tets[t_idx].copy()
    first[np.arange(len(t_idx)), b_local] = midpoint           # keeps a, replaces b
    second[np.arange(len(t_idx)), a_local] = midpoint          # keeps b, replaces a
    keep = np.ones(len(tets), dtype=bool)
    keep[t_idx] = False
    return np.vstack([points, new_points]), np.vstack([tets[keep], first, second])


def _edge_hits(tets, keys, n):
    """Where the edges ``keys`` (unique keys ``a * n + b`` of sorted pairs, a < b) lie in
    ``tets``: for each occurrence, the tet, its local edge (row of ``TET_EDGES``) and the index
    of the key, in tet order. Only tets holding two endpoints of the edges can contain one, so
    keys are formed for those few (at 1M tets the keys of every tet cost ~0.5 s per round)."""
    keys = np.asarray(keys, dtype=np.int64)
    candidates = _tets_touching(tets, np.stack([keys // n, keys % n], axis=1), n)
    pairs = np.sort(tets[candidates][:, TET_EDGES], axis=2)           # (c, 6, 2)
    tet_keys = pairs[..., 0] * n + pairs[..., 1]                         # (c, 6)
    order = np.argsort(keys)
    pos = np.clip(np.searchsorted(keys[order], tet_keys), 0, len(keys) - 1)
    c_idx, local = np.nonzero(keys[order][pos] == tet_keys)
    return candidates[c_idx], local, order[pos[c_idx, local]]


def _independent_edges(tets, keys, rank, n) -> np.ndarray:
    """Which of the edges ``keys`` (unique keys ``a * n + b`` of sorted pairs) no tet holds
    together with an edge of smaller ``rank`` (unique integers): an independent set, so each tet
    is split at most once in a round, and never empty (the smallest rank is always in it)."""
    t_idx, _, which = _edge_hits(tets, keys, n)
    ranks = np.asarray(rank, dtype=np.int64)[which]
    best = np.full(len(tets), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best, t_idx, ranks)
    take = np.ones(len(keys), dtype=bool)
    take[which[ranks != best[t_idx]]] = False
    return take


def split_edges(mesh: TetMesh, edges: np.ndarray, priority: np.ndarray | None = None) -> TetMesh:
    """``mesh`` with each of ``edges`` (k, 2) split at its midpoint in every tet around it: conforming
    by construction, and every other edge kept. Each round splits the edges that rank highest by
    ``priority`` (ties: the smaller vertex pair) in every tet around them, so a tet is split at
    most once per round and a steep direction goes first; rounds continue until every edge is
    split. A boundary face that is split passes its condition to its two halves
    (:func:`_carried_markers`)."""
    points = np.asarray(mesh.points, dtype=np.float64)
    tets = np.asarray(mesh.tets, dtype=np.int64)
    pairs = np.unique(np.sort(np.asarray(edges, dtype=np.int64).reshape(-1, 2), axis=1), axis=0, return_index=True)
    pairs, first = pairs
    priority = np.zeros(len(pairs)) if priority is None else np.asarray(priority, dtype=np.float64)[first]
    n = len(points)
    known = np.unique(np.sort(tets[:, TET_EDGES], axis=2).reshape(-1, 2) @ np.array([n, 1]))
    keys = pairs @ np.array([n, 1])
    if len(keys) and not np.isin(keys, known).all():
        raise BuildError("split_edges was given a pair of vertices that is not an edge of the mesh",
                         fix="this is a fieldgen bug: report it with the input")
    rank = np.empty(len(pairs), dtype=np.int64)
    rank[np.lexsort((keys, -priority))] = np.arange(len(pairs))
    while len(pairs):
        n = len(points)
        take = _independent_edges(tets, pairs @ np.array([n, 1]), rank, n)
        points, tets = _split_edges(points, tets, pairs[take])
        pairs, rank = pairs[~take], rank[~take]
    faces, markers = _carried_markers(mesh, points, tets)
    return TetMesh(points=points, tets=tets, boundary_faces=faces, boundary_markers=markers)


def _tets_touching(tets, edges, n):
    """Sorted indices of the tets holding at least two endpoints of ``edges`` (a superset of the
    tets containing one of the edges)."""
    ends = np.zeros(n, dtype=bool)
    ends[np.asarray(edges).ravel()] = True
    return np.flatnonzero(_row_counts(ends[tets]) >= 2)


def _row_counts(flags: np.ndarray) -> np.ndarray:
    """Number of True entries in each row of a (t, 4) bool array.

    numpy's per-row reductions over 4 columns are slow (~40 ms per call at 1M tets, called ~20
    times per refinement); read as one uint32 per row, one multiply sums the four 0/1 bytes
    into the top byte (no carries: the sum is at most 4), whatever the byte order.
    """
    words = np.ascontiguousarray(flags, dtype=np.bool_).view(np.uint32).ravel()
    return (words * np.uint32(0x01010101)) >> np.uint32(24)


def _split_faces(points, tets, faces):
    """Split each face (k, 3) at its centroid in every tet holding it (no tet may hold two).

    Each owner tet becomes three: the centroid replaces one face vertex in each piece.
    """
    n = len(points)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    keys = face_keys(faces, n)
    order = np.argsort(keys, kind="stable")
    ends = np.zeros(n, dtype=bool)
    ends[faces.ravel()] = True
    candidates = np.flatnonzero(_row_counts(ends[tets]) >= 3)
    tet_keys = face_keys(tets[candidates][:, _TET_FACES].reshape(-1, 3), n).reshape(-1, 4)
    pos = np.clip(np.searchsorted(keys[order], tet_keys), 0, len(keys) - 1)
    hit = keys[order][pos] == tet_keys
    c_idx, local = np.nonzero(hit)
    owners = candidates[c_idx]
    centre = n + order[pos[c_idx, local]]
    pieces = np.repeat(tets[owners], 3, axis=0)
    pieces[np.arange(len(pieces)), _TET_FACES[local].ravel()] = np.repeat(centre, 3)
    keep = np.ones(len(tets), dtype=bool)
    keep[owners] = False
    return np.vstack([points, points[faces].mean(axis=1)]), np.vstack([tets[keep], pieces])


def _independent_faces(tets, faces, n):
    """The rows of ``faces`` (k, 3; unique sorted triples) to split in one round: a face is kept
    unless a tet around it holds a chosen face of lower row, so no tet holds two."""
    chosen_keys = face_keys(faces, n)
    ends = np.zeros(n, dtype=bool)
    ends[faces.ravel()] = True
    near = tets[np.flatnonzero(_row_counts(ends[tets]) >= 3)]
    near_keys = face_keys(near[:, _TET_FACES].reshape(-1, 3), n).reshape(-1, 4)
    rank_order = np.argsort(chosen_keys, kind="stable")
    pos = np.clip(np.searchsorted(chosen_keys[rank_order], near_keys), 0, len(chosen_keys) - 1)
    hit = chosen_keys[rank_order][pos] == near_keys
    rank = np.where(hit, rank_order[pos], np.iinfo(np.int64).max)
    lowest = rank.min(axis=1)
    t_idx, local = np.nonzero(hit)
    blocked = np.unique(rank[t_idx, local][rank[t_idx, local] != lowest[t_idx]])
    return np.setdiff1d(np.arange(len(faces)), blocked)


def _faces_beside_lifted(tets, zero, flags, n):
    """The faces (unique sorted triples) that a tet of ``zero`` shares with a tet holding a vertex
    off e = 0 (``flags`` False): a vertex at such a face's centroid is joined to that vertex."""
    ends = np.zeros(n, dtype=bool)
    ends[tets[zero].ravel()] = True
    near = tets[_row_counts(ends[tets]) >= 3]
    lifted = near[_row_counts(flags[near]) < 4]
    faces = tets[zero][:, _TET_FACES].reshape(-1, 3)
    beside = np.isin(face_keys(faces, n), face_keys(lifted[:, _TET_FACES].reshape(-1, 3), n))
    return np.unique(np.sort(faces[beside], axis=1), axis=0)


def _split_corner_tets(points, tets, corner, n0, boundary_face_keys):
    """Split tets with no interior edge: one interior face each (an independent set of faces per
    round: no tet holds two of them), or the tet's centroid when all four faces are boundary."""
    local_faces = tets[corner][:, _TET_FACES]                                    # (c, 4, 3)
    keys = face_keys(local_faces.reshape(-1, 3), n0).reshape(-1, 4)
    interior = ~np.isin(keys, boundary_face_keys)
    has_face = interior.any(axis=1)
    lone = corner[~has_face]
    first = np.argmax(interior, axis=1)
    chosen_faces = np.sort(local_faces[np.arange(len(corner)), first][has_face], axis=1)
    chosen_faces = np.unique(chosen_faces, axis=0)
    if len(chosen_faces):
        accepted = _independent_faces(tets, chosen_faces, len(points))
        # Lone tets (if any) wait for the next round: their indices change here.
        return _split_faces(points, tets, chosen_faces[accepted])
    if len(lone):
        m = len(points)
        centroids = points[tets[lone]].mean(axis=1)
        pieces = np.repeat(tets[lone], 4, axis=0)
        pieces[np.arange(len(pieces)), np.tile(np.arange(4), len(lone))] = np.repeat(m + np.arange(len(lone)), 4)
        points = np.vstack([points, centroids])
        tets = np.vstack([np.delete(tets, lone, axis=0), pieces])
    return points, tets


def _vertex_labels(n: int, pairs: np.ndarray) -> np.ndarray:
    """Connected-component label of each of ``n`` vertices in the graph of the edges ``pairs``."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    # scipy indexes a graph this size with int32 anyway: converting first saves a copy of each column.
    pairs = pairs.astype(np.int32 if n < 2**31 else np.int64, copy=False)
    graph = coo_matrix((np.ones(len(pairs), dtype=np.int8), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    return connected_components(graph.tocsr(), directed=False)[1]


def _star_pairs(tets: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Edges joining each tet's vertices (those ``keep`` flags, all when None) into one
    connected set: a star from the first kept vertex, at most 3 edges a tet instead of 6, with the same
    connected components as all the edges among kept vertices."""
    tets = np.asarray(tets, dtype=np.int64)
    if keep is None:
        return np.stack([np.repeat(tets[:, 0], 3), tets[:, 1:].ravel()], axis=1)
    kept = keep[tets]
    first = kept.argmax(axis=1)                                    # the first kept vertex's column
    root = tets[np.arange(len(tets)), first]
    use = kept & (np.arange(4) != first[:, None])                  # none in a tet with no kept vertex
    return np.stack([np.broadcast_to(root[:, None], tets.shape)[use], tets[use]], axis=1)


def _at_zero(n: int, tets: np.ndarray, on_free: np.ndarray, on_rigid: np.ndarray,
             reaching: np.ndarray | None = None) -> np.ndarray:
    """Vertices whose extent is 0 in every solve (docs/model.md §2.2): the FREE ones and, for the
    Laplace problem (some RIGID vertex), every vertex joined to no RIGID vertex by a path of mesh
    edges through vertices off the free surface: e at such a vertex is a weighted mean of values
    that are all 0. For the Poisson problem the source lifts every vertex off the free surface.

    ``reaching``: vertices already known to be joined to a RIGID one on an earlier mesh that this
    one refines by splitting (every old edge survives, split or whole, so a joined vertex stays
    joined); then only the tets holding another vertex off the free surface are searched."""
    flags = np.zeros(n, dtype=bool)
    flags[:len(on_free)] = on_free
    if not on_rigid.any():
        return flags
    seeds = np.zeros(n, dtype=bool)
    seeds[:len(on_rigid)] = on_rigid
    if reaching is not None:
        seeds[:len(reaching)] |= reaching
        unknown = ~flags & ~seeds
        tets = tets[unknown[tets].any(axis=1)]     # a path from an unknown vertex to a seed stays in these
    label = _vertex_labels(n, _star_pairs(tets, ~flags))
    reaches_rigid = np.zeros(label.max() + 1, dtype=bool)
    reaches_rigid[label[np.flatnonzero(seeds)]] = True
    return flags | ~reaches_rigid[label]


def _check_every_piece_has_a_rigid_face(mesh: TetMesh, on_rigid: np.ndarray, path) -> None:
    """In the Laplace problem every separate piece of the part needs an e = 1 face: a piece without
    one has e = 0 throughout (no refinement can change that)."""
    tets = np.asarray(mesh.tets, dtype=np.int64)
    label = _vertex_labels(mesh.n_points, _star_pairs(tets))
    used = np.unique(label[tets[:, 0]])
    held = np.unique(label[on_rigid])
    lacking = np.setdiff1d(used, held)
    if len(lacking):
        raise InputError(f"{len(lacking)} of the part's {len(used)} separate pieces have no rigid (e = 1) face "
                         "while another piece has one, so their extent would be 0 throughout", path=path,
                         fix="bond a face of every piece (--bonded SELECTOR), give each piece a core, or build "
                             "each piece as its own part")


def bisected(mesh: TetMesh, marked: np.ndarray) -> TetMesh:
    """``mesh`` with the ``marked`` tets refined by scikit-fem's conforming adaptive refinement
    (``MeshTet.refined(marked)``: bisection with closure, so neighbours are split only as far as
    conformity needs). Each new boundary face takes the condition of the old boundary face it
    lies in (:func:`fieldgen.meshing.ftetwild.classify_boundary`: the nearest one to its centroid)."""
    import logging

    from skfem import MeshTet

    # scikit-fem logs a warning for every intermediate mesh whose arrays it makes contiguous:
    # harmless, and it would reach the user's terminal through --quiet.
    log = logging.getLogger("skfem")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        refined = MeshTet(np.ascontiguousarray(mesh.points.T), np.ascontiguousarray(mesh.tets.T),
                          validate=False).refined(np.asarray(marked, dtype=np.int64))
    finally:
        log.setLevel(level)
    points = np.ascontiguousarray(refined.p.T, dtype=np.float64)
    tets = orient_positive(points, np.ascontiguousarray(refined.t.T, dtype=np.int64))
    if not np.array_equal(points[:mesh.n_points], mesh.points):   # pragma: no cover - skfem's layout
        raise BuildError("scikit-fem's refinement renumbered the old vertices",
                         fix="this is a fieldgen bug: report it with the scikit-fem version")
    faces, markers = _carried_markers(mesh, points, tets)
    return TetMesh(points=points, tets=tets, boundary_faces=faces, boundary_markers=markers)


def _carried_markers(mesh: TetMesh, points: np.ndarray, tets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boundary faces of ``tets``, a refinement of ``mesh`` by splitting that keeps the old
    vertices' numbers, and their conditions: a face that was already on the boundary keeps its
    own; each child of a split face takes the condition of the old face it lies in (the nearest
    to it, :func:`fieldgen.meshing.ftetwild.classify_boundary`), looked up among the split faces only (the
    search over every boundary face took 27 s on a skinned CAD part)."""
    from fieldgen.meshing.ftetwild import classify_boundary

    faces = boundary_faces_of(tets)
    old = np.asarray(mesh.boundary_markers, dtype=np.int64)
    if len(np.unique(old)) == 1:
        return faces, np.full(len(faces), old[0], dtype=np.int64)
    old_faces = np.asarray(mesh.boundary_faces, dtype=np.int64)
    kept, row = find_faces(faces, old_faces, len(points))
    markers = np.empty(len(faces), dtype=np.int64)
    markers[kept] = old[row[kept]]
    split = ~find_faces(old_faces, faces[kept], len(points))[0]
    if np.any(~kept):
        markers[~kept] = classify_boundary(points, faces[~kept], mesh.points, old_faces[split], old[split])
    return faces, markers


def refine_zero_tets(mesh: TetMesh, *, path=None) -> tuple[TetMesh, int]:
    """Split every tet whose 4 vertices are at e = 0; return the new mesh and how many were found.

    Such tets carry e = 0 everywhere and punch holes in the pressure field. A vertex is at e = 0
    when it lies on a FREE face or, in the Laplace problem, when no path through vertices off the
    free surface joins it to a RIGID one (:func:`_at_zero`). Each zero tet is removed by a
    conforming split that puts a new vertex off the free surface: an interior edge (not on any
    boundary face) is bisected in every tet around it, so the midpoint couples to every vertex of
    those tets. In the Laplace problem the new vertex must be joined to one off e = 0, so the edge
    is one that a tet holding a vertex off e = 0 also holds, else a face such a tet shares is split
    at its centroid (in both tets); a zero region shrinks from its rim inward, and zero tets with
    neither wait for their neighbours. In the Poisson problem (every new vertex is lifted by the
    source) the edge is the longest; a tet whose edges all lie on the boundary (a corner tet) has
    an interior face split at the centroid in both tets sharing it, and a lone tet whose four
    faces are all boundary is split at its centroid. Boundary faces are unchanged. Repeats until
    none is left (verified).
    A Laplace part with a separate piece that has no RIGID face is refused (InputError naming
    ``path``): that piece is at e = 0 throughout, whatever is split.
    """
    points = np.asarray(mesh.points, dtype=np.float64)
    tets = np.asarray(mesh.tets, dtype=np.int64)
    on_free = np.zeros(len(points), dtype=bool)
    on_free[mesh.vertices_with(FREE)] = True
    on_rigid = np.zeros(len(points), dtype=bool)
    on_rigid[mesh.vertices_with(RIGID)] = True
    on_rigid &= ~on_free                               # FREE wins (extent.dirichlet_values)
    # A separate piece without a RIGID face is refused. The whole-mesh search for one runs only
    # once some vertex off the free surface is cut off from every RIGID one: such a piece has one
    # from the start (an interior vertex) or after its first split (every split adds one), so a
    # part with no cut-off vertex (the common case) skips the search.
    pieces_checked = not on_rigid.any()
    boundary_edges = np.unique(np.sort(mesh.boundary_faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1), axis=0)
    boundary_faces = np.asarray(mesh.boundary_faces, dtype=np.int64)
    n0 = len(points)

    def zero(tets_now, flags):
        return np.flatnonzero(_row_counts(flags[tets_now]) == 4)

    flags = _at_zero(n0, tets, on_free, on_rigid)
    found = len(zero(tets, flags))
    # Every round splits at least one edge or all corner tets, so this bound is never reached on
    # a valid mesh; it only guards against a bug looping forever.
    for _ in range(max(64, 2 * found + 8)):
        n = len(points)
        if n > len(flags):   # the mesh was split: vertices joined to a RIGID one stay joined
            flags = _at_zero(n, tets, on_free, on_rigid, reaching=~flags)
        if not pieces_checked and (np.any(flags[:n0] & ~on_free) or np.any(flags[n0:])):
            _check_every_piece_has_a_rigid_face(mesh, on_rigid, path)
            pieces_checked = True
        z = zero(tets, flags)
        if len(z) == 0:
            break
        pairs = np.sort(tets[z][:, TET_EDGES], axis=2)                  # (z, 6, 2)
        keys = pairs[..., 0] * n + pairs[..., 1]
        interior = ~np.isin(keys, boundary_edges[:, 0] * n + boundary_edges[:, 1])
        length = np.linalg.norm(points[pairs[..., 0]] - points[pairs[..., 1]], axis=2)
        if on_rigid.any():
            # Laplace: a new vertex must be joined to one off e = 0, or it is cut off itself and
            # every tet around it is a zero tet again. So only edges a tet with a vertex off e = 0
            # also holds are split (only tets holding two vertices of zero tets can), else faces
            # such a tet shares, at their centroids; zero tets with neither wait until their
            # neighbours are lifted. (Splitting the longest edge instead made cut-off midpoints
            # on a skinned teapot meshed by fTetWild: the zero tets grew 1.3x a round, to 942k
            # tets in 50 rounds.) Poisson: every new vertex is lifted by the source, so the
            # longest interior edge is split, else an interior face.
            ends = np.zeros(n, dtype=bool)
            ends[tets[z].ravel()] = True
            around = tets[_row_counts(ends[tets]) >= 2]
            lifted = around[_row_counts(flags[around]) < 4]
            lifted_pairs = np.sort(lifted[:, TET_EDGES], axis=2)
            interior &= np.isin(keys, lifted_pairs[..., 0] * n + lifted_pairs[..., 1])
            if not interior.any():
                faces = _faces_beside_lifted(tets, z, flags, n)
                if not len(faces):
                    break       # nothing can join what is left to a rigid face: reported below
                points, tets = _split_faces(points, tets, faces[_independent_faces(tets, faces, n)])
                continue
        length = np.where(interior, length, -1.0)
        best = np.argmax(length, axis=1)
        has_edge = interior.any(axis=1)
        chosen = np.unique(keys[np.arange(len(z)), best][has_edge])
        if len(chosen):
            # Keep an independent set: an edge is taken unless a tet around it holds a smaller chosen edge.
            accepted = chosen[_independent_edges(tets, chosen, np.arange(len(chosen)), n)]
            edges = np.stack([accepted // n, accepted % n], axis=1)
            points, tets = _split_edges(points, tets, edges)
            continue
        # Poisson, no interior edge left (corner tets, common in fTetWild meshes of thin parts):
        # split one interior face of every such tet at its centroid, all in one round; a tet with
        # no interior face (a lone tet) is split at its centroid.
        points, tets = _split_corner_tets(points, tets, z, n, np.unique(face_keys(boundary_faces, n)))
    remaining = len(zero(tets, _at_zero(len(points), tets, on_free, on_rigid)))
    if remaining and not pieces_checked:   # the rounds ran out before a split revealed the piece
        _check_every_piece_has_a_rigid_face(mesh, on_rigid, path)
    if remaining:
        raise BuildError(f"{remaining} tets still have e = 0 at all four vertices after refinement (on the free "
                         "surface, or cut off from every rigid face)",
                         fix="mesh finer (smaller edge_length) near thin features, and give every separate "
                             "piece of the part a rigid (bonded) face or none at all")
    # Every tet the refinement made holds a new vertex (index >= n0); TetGen's own are unchanged.
    made = tets[_row_counts(tets >= n0) > 0]
    if np.any(tet_volumes(points, made) <= 0):
        raise BuildError("refining zero-pressure tets produced a non-positive tet", fix="report this mesh")
    refined = TetMesh(points=points, tets=tets, boundary_faces=np.array(mesh.boundary_faces, dtype=np.int64),
                      boundary_markers=np.array(mesh.boundary_markers, dtype=np.int64))
    return refined, found


# ---------------------------------------------------------------------------
# Statistics


def radius_edge_ratios(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Circumradius over shortest edge of each tet (TetGen's quality measure; 0.612 for a regular tet)."""
    p = points[tets]
    a, b, c = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0], p[:, 3] - p[:, 0]
    bc, ca, ab = np.cross(b, c), np.cross(c, a), np.cross(a, b)
    aa, bb, cc = (np.einsum("ij,ij->i", x, x) for x in (a, b, c))
    numerator = aa[:, None] * bc + bb[:, None] * ca + cc[:, None] * ab
    det = 2.0 * np.einsum("ij,ij->i", a, bc)
    radius = np.linalg.norm(numerator, axis=1) / np.abs(det)
    # The three edges at vertex 0 are a, b, c; the other three are their differences.
    squared = np.minimum(np.minimum(aa, bb), cc)
    for u, v in ((b, a), (c, a), (c, b)):
        d = u - v
        np.minimum(squared, np.einsum("ij,ij->i", d, d), out=squared)
    return radius / np.sqrt(squared)


def mesh_statistics(mesh: TetMesh, *, min_dihedral: np.ndarray | None = None,
                    volumes: np.ndarray | None = None) -> dict:
    """Counts, volume and quality of a TetMesh as plain JSON-able numbers.

    ``min_dihedral``: the per-tet smallest dihedral angles (degrees) when the caller already
    has them (the asset stores them), so they are not computed twice; ``volumes`` likewise.
    """
    volumes = tet_volumes(mesh.points, mesh.tets) if volumes is None else np.asarray(volumes)
    dihedral = min_dihedral_angles(mesh.points, mesh.tets) if min_dihedral is None else np.asarray(min_dihedral)
    ratio = radius_edge_ratios(mesh.points, mesh.tets)
    faces_by = {CONDITION_NAMES[c]: int(np.sum(mesh.boundary_markers == c)) for c in sorted(CONDITION_NAMES)}
    p1, p5 = np.percentile(dihedral, [1, 5])
    return {
        "tets": int(mesh.n_tets),
        "vertices": int(mesh.n_points),
        "boundary_faces": int(len(mesh.boundary_faces)),
        "boundary_faces_by_condition": faces_by,
        "volume": float(np.sum(volumes)),
        "min_tet_volume": float(volumes.min()),
        "min_dihedral_deg": float(dihedral.min()),
        "dihedral_p1_deg": float(p1),
        "dihedral_p5_deg": float(p5),
        "dihedral_median_deg": float(np.median(dihedral)),
        "radius_edge_max": float(ratio.max()),
        "radius_edge_p99": float(np.percentile(ratio, 99)),
        "radius_edge_median": float(np.median(ratio)),
        "zero_pressure_tets": int(len(zero_tets(mesh))),
    }


if __name__ == "__main__":  # the TetGen child process, see _run_tetgen
    _tetgen_worker(sys.argv[1])
