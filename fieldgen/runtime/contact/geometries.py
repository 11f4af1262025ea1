"""Bodies that take part in contact: compliant tet meshes with a pressure field, rigid surfaces.

Frames: every array is in the body frame B, metres and pascals. The bounding volume
hierarchy is built once in ``__post_init__`` and cached on the body (treat a body's arrays
as read-only after construction; build a new body to change them).

Rigid core (docs/model.md §2.5, D 5.1.2): the boundary faces of a compliant mesh whose three vertices
all have extent e = 1. They are glued to something rigid, so reaching them means the other
body has passed through the compliant layer: the contact code warns when that happens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fieldgen.errors import InputError, OptionError
from fieldgen.io.asset import check_tet_indices, read_asset
from fieldgen.io.legacy_vtk import check_legacy_vtk
from fieldgen.meshing.tetmesh import boundary_faces_of, p1_gradients, tet_volumes
from fieldgen.paths import special_file
from fieldgen.runtime.contact.bvh import BVH, build_bvh
from fieldgen.runtime.contact.drake_distance import distance_field as drake_distance_field
from fieldgen.surface.components import face_pieces
from fieldgen.surface.topology import edge_use, face_areas, signed_volume
from fieldgen.material.tangential import DEFAULT_TANGENTIAL_DAMPING, DEFAULT_TANGENTIAL_STIFFNESS
from fieldgen.units import length_scale

CORE_EXTENT = 1.0 - 1e-9   #: a vertex with e >= this lies on the rigid core



def characteristic_length_of(points: np.ndarray, tets: np.ndarray, extent: np.ndarray) -> float:
    """L = V / ∫|∇e| dV (D 5.2.1, C.3); inf when the extent is constant."""
    volumes = tet_volumes(points, tets)
    grad = np.linalg.norm(p1_gradients(points, tets, extent), axis=1)
    weight = float(np.sum(grad * volumes))
    return float(np.sum(volumes)) / weight if weight > 0 else float("inf")


@dataclass(eq=False)
class CompliantGeometry:
    """A compliant object: a tet mesh with a piecewise-linear pressure field p0 (D 5.0.1).

    points (n, 3) m; tets (t, 4) int64 VTK-positive; pressure (n,) Pa at the vertices;
    gradient (t, 3) Pa/m, the gradient of p0 in each tet (body frame); dissipation χ s/m;
    characteristic_length L m; modulus M0 Pa; core_faces (c, 3) the rigid-core boundary
    faces (outward wound, may be empty).
    """

    points: np.ndarray
    tets: np.ndarray
    pressure: np.ndarray
    gradient: np.ndarray
    dissipation: float = 0.0
    mu_static: float = 0.0
    mu_dynamic: float = 0.0
    characteristic_length: float = float("inf")
    modulus: float = 0.0
    name: str = "compliant"
    core_faces: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))
    tangential_stiffness: float = DEFAULT_TANGENTIAL_STIFFNESS   #: K̄, 1/m (D 6.2.3)
    tangential_damping: float = DEFAULT_TANGENTIAL_DAMPING       #: C̄, s/m
    bvh: BVH = field(init=False, repr=False)
    core_tets: np.ndarray = field(init=False, repr=False)   #: (t,) bool, tet has a core face
    core_pressure: float = field(init=False, repr=False)    #: smallest p0 on the core (inf if none)
    #: what runtime modules derive from the body once and keep, by name (the contact query's
    #: broad-phase caches, rigid-contact features, the rigid core, the Drake rule's per-element
    #: data): a pure speed-up, every result is the same without it
    derived: dict = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self):
        self.points = np.ascontiguousarray(self.points, dtype=np.float64)
        self.tets = np.ascontiguousarray(self.tets, dtype=np.int64)
        self.pressure = np.ascontiguousarray(self.pressure, dtype=np.float64)
        self.gradient = np.ascontiguousarray(self.gradient, dtype=np.float64)
        self.core_faces = np.ascontiguousarray(np.reshape(self.core_faces, (-1, 3)), dtype=np.int64)
        n, t = len(self.points), len(self.tets)
        if self.points.ndim != 2 or self.points.shape[1] != 3 or self.tets.ndim != 2 or self.tets.shape[1] != 4:
            raise InputError(f"{self.name}: points must be (n, 3) and tets (t, 4); got {self.points.shape} and "
                             f"{self.tets.shape}", fix="Pass a tetrahedral mesh")
        if self.pressure.shape != (n,) or self.gradient.shape != (t, 3):
            raise InputError(f"{self.name}: pressure must be ({n},) and gradient ({t}, 3); got "
                             f"{self.pressure.shape} and {self.gradient.shape}",
                             fix="Give one pressure per vertex and one gradient per tet")
        if t and (self.tets.min() < 0 or self.tets.max() >= n):
            raise InputError(f"{self.name}: tet vertex indices outside 0..{n - 1}", fix="Check the connectivity")
        if np.any(~np.isfinite(self.pressure)) or np.any(self.pressure < 0):
            bad = int(np.sum(~np.isfinite(self.pressure) | (self.pressure < 0)))
            raise InputError(f"{self.name}: {bad} vertices have a negative or non-finite pressure",
                             fix="Pressure fields must be finite and >= 0")
        self.bvh = build_bvh(self.points, self.tets)
        self.core_tets = _tets_with_faces(self.tets, self.core_faces)
        self.core_pressure = float(self.pressure[self.core_faces].min()) if len(self.core_faces) else float("inf")

    @property
    def n_tets(self) -> int:
        return int(self.tets.shape[0])

    @classmethod
    def from_arrays(cls, points, tets, pressure, *, extent=None, dissipation: float = 0.0,
                    mu_static: float = 0.0, mu_dynamic: float | None = None,
                    characteristic_length: float | None = None, modulus: float | None = None,
                    name: str = "compliant") -> "CompliantGeometry":
        """Body from vertex arrays; the gradient is p1_gradients of ``pressure``.

        ``extent`` defaults to p0/max p0 (monotone laws reach e = 1 at the largest pressure);
        it locates the rigid core and, when L is not given, L = V/∫|∇e| (D C.3).
        ``modulus`` defaults to max p0 (p0 = M0·e at e = 1); ``mu_dynamic`` to ``mu_static``.
        """
        points = np.asarray(points, dtype=np.float64)
        tets = np.asarray(tets, dtype=np.int64)
        pressure = np.asarray(pressure, dtype=np.float64)
        pmax = float(pressure.max()) if pressure.size else 0.0
        if extent is None:
            extent = pressure / pmax if pmax > 0 else np.zeros_like(pressure)
        extent = np.asarray(extent, dtype=np.float64)
        if characteristic_length is None:
            characteristic_length = characteristic_length_of(points, tets, extent)
        boundary = boundary_faces_of(tets)
        core = boundary[np.all(extent[boundary] >= CORE_EXTENT, axis=1)]
        return cls(points, tets, pressure, p1_gradients(points, tets, pressure), float(dissipation),
                   float(mu_static), float(mu_static if mu_dynamic is None else mu_dynamic),
                   float(characteristic_length), float(pmax if modulus is None else modulus), name, core)

    @classmethod
    def from_asset(cls, path, *, name: str | None = None) -> "CompliantGeometry":
        """Body from a fieldgen asset (.vtu) through ``fieldgen.io.asset.read_asset``."""
        return cls.from_asset_object(read_asset(path), path=path, name=name)

    @classmethod
    def from_asset_object(cls, asset, *, path=None, name: str | None = None) -> "CompliantGeometry":
        """Body from an Asset (points, tets, extent, pressure, pressure_gradient, metadata)."""
        meta = dict(getattr(asset, "metadata", {}) or {})
        friction = meta.get("friction", {}) or {}
        tangential = meta.get("tangential", {}) or {}
        law = meta.get("law", {}) or {}
        points = np.asarray(asset.points, dtype=np.float64)
        tets = np.asarray(asset.tets, dtype=np.int64)
        pressure = np.asarray(asset.pressure, dtype=np.float64)
        extent = np.asarray(asset.extent, dtype=np.float64)
        gradient = getattr(asset, "pressure_gradient", None)
        if gradient is None:
            gradient = p1_gradients(points, tets, pressure)
        try:
            length = float(meta.get("characteristic_length", characteristic_length_of(points, tets, extent)))
            chi = float(meta.get("dissipation", 0.0))
            mu_s = float(friction.get("static", 0.0))
            mu_d = float(friction.get("dynamic", mu_s))
            modulus = float(law.get("modulus", pressure.max() if pressure.size else 0.0))
            k_bar = float(tangential.get("stiffness", DEFAULT_TANGENTIAL_STIFFNESS))
            c_bar = float(tangential.get("damping", DEFAULT_TANGENTIAL_DAMPING))
        except (TypeError, ValueError) as exc:
            raise InputError(f"asset metadata has a non-numeric value ({exc})", path=path,
                             fix="Rebuild the asset with fieldgen") from None
        boundary = boundary_faces_of(tets)
        core = boundary[np.all(extent[boundary] >= CORE_EXTENT, axis=1)]
        label = name or (Path(path).stem if path is not None else "compliant")
        return cls(points, tets, pressure, np.asarray(gradient, dtype=np.float64), chi, mu_s, mu_d,
                   length, modulus, label, core, k_bar, c_bar)

    @classmethod
    def from_drake_vtk(cls, path, modulus: float, *, dissipation: float = 0.0, mu_static: float = 0.0,
                       mu_dynamic: float | None = None, name: str | None = None) -> "CompliantGeometry":
        """Body from a legacy .vtk tet mesh with Drake's field p0 = E·d/max d (d: distance of each
        vertex to the mesh's boundary surface; point data in the file is ignored, as Drake does)."""
        if not (np.isfinite(modulus) and modulus > 0):
            raise OptionError(f"modulus must be a positive number of pascals, got {modulus!r}",
                              path=path, fix="Pass e.g. modulus=1e5")
        points, tets = read_legacy_vtk_tets(path)
        boundary = boundary_faces_of(tets)
        on_boundary = np.zeros(len(points), bool)
        on_boundary[boundary.ravel()] = True
        interior = np.flatnonzero(~on_boundary)
        if interior.size == 0:
            raise InputError("the tet mesh has no interior vertex, so the Drake field d/max d is zero everywhere",
                             path=path, fix="Mesh the volume with at least one interior vertex")
        distance = drake_distance_field(points, tets)   # Drake's arithmetic, to the last bit
        pressure = modulus * distance / distance.max()
        extent = distance / distance.max()
        return cls(points, tets, pressure, p1_gradients(points, tets, pressure), float(dissipation),
                   float(mu_static), float(mu_static if mu_dynamic is None else mu_dynamic),
                   characteristic_length_of(points, tets, extent), float(modulus),
                   name or Path(path).stem, np.zeros((0, 3), np.int64))


@dataclass(eq=False)
class RigidGeometry:
    """A rigid object: a triangle surface mesh, faces wound so normals point out (body frame, m)."""

    vertices: np.ndarray
    faces: np.ndarray
    mu_static: float = 0.0
    mu_dynamic: float = 0.0
    name: str = "rigid"
    tangential_stiffness: float = float("inf")   #: rigid: the pair takes the other body's K̄
    tangential_damping: float = float("inf")
    bvh: BVH = field(init=False, repr=False)
    face_normals: np.ndarray = field(init=False, repr=False)   #: (f, 3) unit outward normals
    #: what runtime modules derive from the body once and keep, by name (the contact query's
    #: broad-phase caches, rigid-contact features, the rigid core, the Drake rule's per-element
    #: data): a pure speed-up, every result is the same without it
    derived: dict = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self):
        self.vertices = np.ascontiguousarray(self.vertices, dtype=np.float64)
        self.faces = np.ascontiguousarray(self.faces, dtype=np.int64)
        if self.vertices.ndim != 2 or self.vertices.shape[1] != 3 or self.faces.ndim != 2 or self.faces.shape[1] != 3:
            raise InputError(f"{self.name}: vertices must be (n, 3) and faces (f, 3); got {self.vertices.shape} "
                             f"and {self.faces.shape}", fix="Pass a triangle mesh")
        if len(self.faces) and (self.faces.min() < 0 or self.faces.max() >= len(self.vertices)):
            raise InputError(f"{self.name}: face indices outside 0..{len(self.vertices) - 1}",
                             fix="Check the connectivity")
        tri = self.vertices[self.faces]
        normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        length = np.linalg.norm(normal, axis=1, keepdims=True)
        self.face_normals = np.where(length > 0, normal / np.where(length > 0, length, 1.0), 0.0)
        self.bvh = build_bvh(self.vertices, self.faces)

    @classmethod
    def from_mesh(cls, path, units: str = "m", *, mu_static: float = 0.0, mu_dynamic: float | None = None,
                  name: str | None = None) -> "RigidGeometry":
        """Rigid body from a surface mesh file, read by :func:`fieldgen.io.surface_readers.read_triangles` (the
        one surface reader) in ``units`` (:data:`fieldgen.units.LENGTH_UNITS`); seams merged as the
        builder merges them, degenerate faces dropped, and a closed mesh wound inward as a whole is
        flipped so normals point out (each shell keeps its own winding otherwise: overlapping
        shells stay solid). Closedness is checked by :func:`load_body`."""
        # lazy: the surface readers and repairs, needed only for rigid surface meshes
        from fieldgen.io.surface_readers import read_triangles
        from fieldgen.surface.repair import MERGE_TOLERANCE, merge_close_vertices  # lazy: likewise

        scale = length_scale(units, path=path)
        vertices, faces, _, _ = read_triangles(path, units=units)
        if len(faces) == 0:
            raise InputError("the file holds no triangles (0 faces)", path=path,
                             fix="Export the surface as a triangle mesh")
        used = vertices[np.unique(faces)]
        diag = float(np.linalg.norm(used.max(axis=0) - used.min(axis=0)))
        vertices, faces, _ = merge_close_vertices(vertices, faces, MERGE_TOLERANCE * diag)
        faces = faces[(faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 2] != faces[:, 0])]
        if open_edges(faces) == (0, 0):
            a, b, c = vertices[faces[:, 0]], vertices[faces[:, 1]], vertices[faces[:, 2]]
            if np.sum(a * np.cross(b, c)) < 0:
                faces = faces[:, ::-1]
        return cls(np.ascontiguousarray(vertices * scale), np.ascontiguousarray(faces, dtype=np.int64),
                   float(mu_static), float(mu_static if mu_dynamic is None else mu_dynamic), name or Path(path).stem)


def load_body(path, *, modulus: float | None = None, units: str = "m", **kwargs) -> CompliantGeometry | RigidGeometry:
    """.vtu -> fieldgen asset; .vtk -> Drake-compatible compliant mesh (``modulus`` required);
    anything else -> rigid surface in ``units``, which must be closed (:func:`check_closed_surface`)."""
    path = Path(path)
    if not path.is_file():
        kind = special_file(path)         # a folder (mesh = ".."), a pipe: say so, not "not found"
        raise InputError(f"is {kind}, not a file" if kind else "file not found", path=path,
                         fix="Give the asset or mesh file" if kind else "Check the path")
    suffix = path.suffix.lower()
    if suffix == ".vtu":
        return CompliantGeometry.from_asset(path, **kwargs)
    if suffix == ".vtk":
        if modulus is None:
            raise OptionError("a legacy .vtk tet mesh has no pressure field of its own; the Drake-compatible "
                              "field p0 = E·d/max d needs the modulus E", path=path,
                              fix="Pass modulus= in pascals (e.g. 1e5)")
        return CompliantGeometry.from_drake_vtk(path, modulus, **kwargs)
    body = RigidGeometry.from_mesh(path, units=units, **kwargs)
    check_closed_surface(body.vertices, body.faces, path)
    return body


def open_edges(faces: np.ndarray) -> tuple[int, int]:
    """(boundary, defective) edge counts of a triangle mesh: edges used by one face, and edges
    used by more than two faces or twice in the same direction (inconsistent winding)."""
    use = edge_use(faces)
    return use.open, use.overused + use.repeated


def check_closed_surface(vertices: np.ndarray, faces: np.ndarray, path=None) -> None:
    """InputError unless the rigid surface is closed and consistently wound (vertices at the same
    position count as one, so seams of UV-split files pass): contact with a rigid body clips its
    boundary triangles by the tets (D 5.0.2), which is the boundary of the displaced volume only
    when the surface encloses a volume (D A.1)."""
    _, same = np.unique(np.asarray(vertices, dtype=np.float64).reshape(-1, 3), axis=0, return_inverse=True)
    boundary, defective = open_edges(same.reshape(-1)[np.asarray(faces, dtype=np.int64)])
    if boundary or defective:
        raise InputError(f"the rigid surface is not closed: {boundary} boundary edges and {defective} "
                         f"non-manifold or inconsistently wound edges out of {len(faces)} triangles, so it "
                         f"bounds no volume and its contact force would depend on the missing faces",
                         path=path, fix="Repair it into a closed, consistently wound surface (e.g. in "
                         "MeshLab or trimesh's fill_holes/fix_normals) before using it as a rigid body")
    flat_check(np.asarray(vertices, dtype=np.float64), np.asarray(faces, dtype=np.int64), path)


#: A closed rigid surface whose mean thickness (twice the volume its shells enclose over its area)
#: is below this fraction of its bounding box's diagonal encloses nothing: a sheet meshed as two
#: coincident sides (its thickness is rounding, about 1e-16 of it), not a solid. A 1 µm film across
#: a metre, or a wire 10 µm across and a metre long, is 1e-6 to 1e-5 of it.
FLAT_THICKNESS = 1e-9


def flat_check(vertices: np.ndarray, faces: np.ndarray, path=None) -> None:
    """InputError for a closed rigid surface that encloses no volume (:data:`FLAT_THICKNESS`): it
    has no inside, so its two sides' pressures cancel and every contact force on it would be zero.
    Each shell's volume counts by its size, whichever way it is wound."""
    used = vertices[np.unique(faces)]
    low, high = (used.min(axis=0), used.max(axis=0)) if len(used) else (np.zeros(3), np.zeros(3))
    half = high / 2 - low / 2                  # halved first: no overflow at 1e308
    diagonal = float(np.linalg.norm(half)) * 2
    scaled = (vertices - (low / 2 + high / 2)) / diagonal if diagonal > 0 else vertices
    volume = sum(abs(signed_volume(scaled, faces[piece])) for piece in face_pieces(faces, len(vertices)))
    area = float(face_areas(scaled, faces).sum())
    thickness = 2.0 * volume / area if area > 0 else 0.0    # of the diagonal: no overflow or underflow
    if not thickness > FLAT_THICKNESS:
        raise InputError(f"the rigid surface is closed but encloses no volume (its mean thickness is {thickness:.3g} "
                         f"of its bounding box's diagonal, {diagonal:.3g} m): it is flat, a sheet meshed as two "
                         "coincident sides, so it has no inside and the forces on its two sides would cancel",
                         path=path, fix="Give the part its thickness (export it as a solid) before using it as a "
                                        "rigid body")


def read_legacy_vtk_tets(path) -> tuple[np.ndarray, np.ndarray]:
    """Points and tets of a legacy .vtk unstructured grid, with Drake's checks: only tets,
    every tet of positive volume (InputError otherwise, never a process exit)."""
    import vtk  # lazy: vtk is heavy, needed only for legacy .vtk files
    from vtk.util.numpy_support import vtk_to_numpy  # lazy: as vtk

    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path, fix="Check the path")
    check_legacy_vtk(str(path), path.read_bytes())     # counts VTK's reader would trust past its data
    reader = vtk.vtkUnstructuredGridReader()
    reader.SetFileName(str(path))
    reader.ReadAllScalarsOff()
    quiet = vtk.vtkObject.GetGlobalWarningDisplay()
    vtk.vtkObject.GlobalWarningDisplayOff()
    try:
        if not reader.IsFileUnstructuredGrid():
            raise InputError("not a legacy VTK unstructured grid", path=path,
                             fix="Write the tet mesh as 'DATASET UNSTRUCTURED_GRID' (Drake's .vtk format)")
        reader.Update()
    finally:
        vtk.vtkObject.SetGlobalWarningDisplay(quiet)
    grid = reader.GetOutput()
    if grid is None or grid.GetNumberOfPoints() == 0 or grid.GetNumberOfCells() == 0:
        raise InputError("the file has no points or no cells (unreadable or empty grid)", path=path,
                         fix="Check that it is a legacy VTK unstructured grid of tetrahedra")
    points = vtk_to_numpy(grid.GetPoints().GetData()).astype(np.float64)
    types = np.array([grid.GetCellType(i) for i in range(grid.GetNumberOfCells())], dtype=np.int64) \
        if grid.GetNumberOfCells() < 64 else _cell_types(grid)
    if np.any(types != 10):
        raise InputError(f"{int(np.sum(types != 10))} of {len(types)} cells are not tetrahedra", path=path,
                         fix="Keep only VTK_TETRA (type 10) cells")
    cells = grid.GetCells()
    offsets = vtk_to_numpy(cells.GetOffsetsArray())
    conn = vtk_to_numpy(cells.GetConnectivityArray()).astype(np.int64)
    if not np.all(np.diff(offsets) == 4):
        raise InputError("some cells do not have 4 vertices", path=path, fix="Keep only tetrahedra")
    tets = conn.reshape(-1, 4)
    check_tet_indices(tets, len(points), path, fix="Repair the mesh: each tet's indices count from 0 below "
                      "the number of points")
    if not np.all(np.isfinite(points)):
        raise InputError("some point coordinates are not finite", path=path, fix="Repair the mesh")
    volumes = tet_volumes(points, tets)
    bad = np.flatnonzero(volumes <= 0)
    if bad.size:
        raise InputError(f"{bad.size} of {len(tets)} tetrahedra have zero or negative volume (first: cell {bad[0]}, "
                         f"volume {volumes[bad[0]]:.3g} m^3)", path=path,
                         fix="Reorder each tet so det[p1-p0, p2-p0, p3-p0] > 0 (VTK order), as Drake requires")
    return points, tets


def _cell_types(grid) -> np.ndarray:
    """Cell type codes of a vtkUnstructuredGrid (API renamed in VTK 9.6)."""
    from vtk.util.numpy_support import vtk_to_numpy  # lazy: vtk is heavy, needed only for legacy .vtk files

    getter = grid.GetCellTypes if hasattr(grid, "GetCellTypes") else grid.GetCellTypesArray
    return np.asarray(vtk_to_numpy(getter()), dtype=np.int64)


def _tets_with_faces(tets: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """(t,) bool: the tet has one of ``faces`` (any winding) as a face."""
    flags = np.zeros(len(tets), bool)
    if len(faces) == 0 or len(tets) == 0:
        return flags
    local = np.array([(1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1)])
    keys = np.sort(tets[:, local], axis=2).reshape(-1, 3)
    wanted = np.sort(faces, axis=1)
    n = int(max(tets.max(), faces.max())) + 1
    if n ** 3 < 2 ** 62:   # one int64 per sorted triple
        code = lambda k: (k[:, 0] * n + k[:, 1]) * n + k[:, 2]  # noqa: E731
        hit = np.isin(code(keys), code(wanted))
    else:
        rows = np.ascontiguousarray(np.vstack([keys, wanted])).view(np.dtype((np.void, 24))).ravel()
        _, inverse = np.unique(rows, return_inverse=True)
        hit = np.isin(inverse[:len(keys)], inverse[len(keys):])
    return hit.reshape(-1, 4).any(axis=1)
