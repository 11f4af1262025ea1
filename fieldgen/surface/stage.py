"""The surface stage: read a closed surface, repair what is safe, refuse what is not.

``load_surface`` is the entry point: it reads the file (:mod:`fieldgen.io.surface_readers`),
repairs it (:mod:`fieldgen.surface.repair`), counts what still keeps it from bounding a volume
(:mod:`fieldgen.surface.defects`) and returns a :class:`Surface` in metres. Lengths are in the
input's units until then, so a surface read in ``mm`` is exactly ``1e-3`` times the same
surface read in ``m``.

The compliant volume is bounded by this surface (docs/model.md §2.2): it must be a closed,
oriented 2-manifold that does not cross itself and encloses a volume.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from fieldgen.errors import InputError, OptionError
from fieldgen.install import extra_installed, install_hint
from fieldgen.io.ply_indices import ply_header
from fieldgen.io.surface_readers import (LIKELY_PART_SIZE, SURFACE_FORMATS, read_bytes, read_in_metres,
                                         read_triangles, size_warnings)
from fieldgen.paths import same_file
from fieldgen.surface.defects import describe, surface_defects
from fieldgen.surface.intersections import intersecting_face_pairs
from fieldgen.surface.repair import repair_surface
from fieldgen.surface.cavities import cavity_warnings
from fieldgen.surface.components import face_components
from fieldgen.surface.topology import face_areas, signed_volume, unit_normals, winding_numbers
from fieldgen.units import LENGTH_UNITS as UNIT_SCALE  # the one table (fieldgen.units); name kept for callers
from fieldgen.units import length_scale


def robust_fix() -> str:
    """The fix for a surface only the robust mesher can use (with the install command that works
    here, when its extra is not installed)."""
    if extra_installed("robust"):
        return "or pass --robust to mesh it anyway with fTetWild"
    return f"or pass --robust to mesh it anyway with fTetWild (needs {install_hint('robust')})"


@dataclass(frozen=True, eq=False)
class Surface:
    """A closed, outward-wound triangle surface in metres, ready for meshing."""

    vertices: np.ndarray      # (n, 3) float64, metres
    faces: np.ndarray         # (m, 3) int64, consistently wound, normals outward
    face_groups: np.ndarray   # (m,) int64 index into group_names, -1 where none
    group_names: tuple[str, ...]
    path: str                 # as given by the user
    sha256: str               # hex SHA-256 of the input file's bytes
    units: str                # the units the input was in
    repairs: tuple[str, ...]  # human sentences, e.g. "merged 1,204 duplicate/seam vertices"
    remesh: Any = None        # fieldgen.surface.remesh.SurfaceRemesh when remeshed within a tolerance
    warnings: tuple[str, ...] = ()  # what the surface stage warns of (a remeshing it could not use)

    @property
    def volume(self) -> float:
        """Enclosed volume in m^3 (positive for outward normals)."""
        return float(signed_volume(self.vertices, self.faces))

    @property
    def area(self) -> float:
        """Total surface area in m^2."""
        return float(face_areas(self.vertices, self.faces).sum())

    @property
    def bounds(self) -> np.ndarray:
        """(2, 3) array: lower and upper corner of the bounding box, metres."""
        return np.stack([self.vertices.min(axis=0), self.vertices.max(axis=0)])

    @property
    def face_normals(self) -> np.ndarray:
        """(m, 3) unit outward normals (zero for a zero-area face)."""
        return unit_normals(self.vertices, self.faces)


#: PLY elements whose faces are read (``face``) or that hold no faces (``vertex``, ``edge``, ...);
#: any other element with a count, such as ``tristrips``, holds faces fieldgen does not read.
PLY_READ_ELEMENTS = ("vertex", "face", "edge", "material")


def ply_elements(data: bytes) -> list[tuple[str, int]]:
    """The ``(name, count)`` of each element a PLY header declares (binary or ASCII); empty when
    ``data`` is no PLY (:func:`fieldgen.io.ply_indices.ply_header`)."""
    header = ply_header(data)
    return [] if header is None else [(name, count) for name, count, _ in header[1]]


def _no_faces_fix(data: bytes | None) -> str:
    """The fix for a file of vertices but no faces: a PLY whose faces are in an element that is not
    read (triangle strips) is named as such; else a point cloud or a volume mesh is no surface."""
    unread = [(name, count) for name, count in ply_elements(data or b"")
              if count and name not in PLY_READ_ELEMENTS]
    if unread:
        listed = ", ".join(f"{count:,} '{name}'" for name, count in unread)
        strips = " (triangle strips)" if any(name == "tristrips" for name, _ in unread) else ""
        return (f"Its faces are stored as {listed}{strips}, a PLY element fieldgen does not read: "
                "export the mesh again with a 'face' list (e.g. MeshLab or Blender: save as PLY, "
                "or as STL or OBJ)")
    return (f"Give a triangle surface mesh ({SURFACE_FORMATS}); a point cloud, or a tetrahedral "
            "volume mesh such as .vtk, is not a surface")


def _refuse_unread(path_text: str, vertices, faces, role: str, data: bytes | None = None) -> None:
    """InputError for a file that gave no triangles, or vertices that are not finite."""
    if len(faces) == 0 and len(vertices) == 0:
        suffix = os.path.splitext(path_text)[1].lower() or "mesh"
        raise InputError(
            f"no mesh could be read from the {role} file (0 vertices, 0 faces): it is empty, cut short "
            f"or not {suffix} data",
            path=path_text,
            fix=f"Give a triangle surface mesh ({SURFACE_FORMATS}); export it again from its source")
    if len(faces) == 0:
        raise InputError(
            f"the {role} file contains no triangles ({len(vertices):,} vertices, 0 faces)",
            path=path_text, fix=_no_faces_fix(data))
    bad = ~np.isfinite(vertices).all(axis=1)
    if bad[np.unique(faces)].any():
        raise InputError(f"{int(bad.sum()):,} vertices have non-finite coordinates",
                         path=path_text, fix="Re-export the mesh from its CAD source")


def _refuse_defects(path_text: str, vertices, faces, role: str, units: str, require_closed: bool) -> tuple[str, ...]:
    """InputError naming every defect that keeps the repaired surface from bounding a volume;
    without ``require_closed`` (--robust), a warning that an open surface is closed by fTetWild."""
    span = vertices.max(axis=0) - vertices.min(axis=0)
    diag = float(np.linalg.norm(span))
    defects = surface_defects(vertices, faces, check_intersections=require_closed)
    if require_closed and not defects.ok:
        defect, robust = describe(defects, diag, units)
        if robust:
            fix = ("Repair it in a mesh editor (close holes, remove overlapping or "
                   f"intersecting faces) and export a closed solid, {robust_fix()}")
        else:
            fix = "Export the part as a closed solid with thickness, not a sheet"
        raise InputError(f"the {role} cannot bound a volume: {defect}", path=path_text, fix=fix)
    if not require_closed and defects.open_edges:
        return (f"--robust: the {role} is open ({defects.open_edges:,} edges of one face, in {defects.holes:,} "
                "hole(s)); fTetWild meshes the solid its winding number encloses, closing the holes as it "
                "sees fit: check the asset's shape (fieldgen inspect) before using it",)
    return ()


def load_surface(path, units: str = "m", *, role: str = "surface",
                 require_closed: bool = True) -> Surface:
    """Read, repair and check a closed surface; return it in metres.

    ``role`` ("surface" or "core") names the input in messages. With
    ``require_closed=False`` (the --robust path) open, non-manifold or self-intersecting
    input is repaired as far as is safe and returned instead of refused. A closed surface's sealed
    cavities are warned of (:func:`~fieldgen.surface.cavities.cavity_warnings`), under --robust
    too: fTetWild leaves them empty as TetGen does.
    Raises InputError for unreadable, empty, open, non-manifold, self-intersecting or
    zero-volume input; OptionError for unknown units.
    """
    length_scale(units)
    path_text = str(path)
    data = read_bytes(path_text)
    sha = hashlib.sha256(data).hexdigest()
    vertices, faces, groups, names = read_triangles(path_text, data, units)
    _refuse_unread(path_text, vertices, faces, role, data)
    vertices, faces, groups, repairs = repair_surface(vertices, faces, groups)
    if len(faces) == 0:
        raise InputError(f"the {role} has no faces left after removing degenerate ones "
                         f"({'; '.join(repairs)})", path=path_text,
                         fix="Export the part as a solid with non-zero size")
    opened = _refuse_defects(path_text, vertices, faces, role, units, require_closed)

    vertices = vertices * UNIT_SCALE[units]
    for array in (vertices, faces, groups):
        array.setflags(write=False)
    return Surface(vertices=vertices, faces=faces, face_groups=groups, group_names=names,
                   path=path_text, sha256=sha, units=units, repairs=repairs,
                   warnings=size_warnings(vertices, units, likely=_likely_size(path_text, role)) + opened
                   + (cavity_warnings(vertices, faces, units) if role == "surface" and not opened else ()))


def _likely_size(path: str, role: str) -> float | None:
    """The size past which a part to build read in metres is warned about as millimetres; None for
    a core, and for a STEP file (read true to size: ``--units`` would only rescale the flags)."""
    return LIKELY_PART_SIZE if role == "surface" and not read_in_metres(path) else None


# --------------------------------------------------------------------------- core

def check_core_inside(outer: Surface, core: Surface) -> None:
    """OptionError unless ``core`` lies strictly inside ``outer`` without touching it.

    The core is carved out as a hole with e = 1 on its faces (docs/model.md §2.2); it must be a
    closed surface (``load_surface`` ensures that) inside the outer one.
    """
    fix = ("Give a core surface that lies wholly inside the outer surface with material "
           "all around it (check both use the same units and origin)")
    if same_file(core.path, outer.path) or core.sha256 == outer.sha256:     # a link, or a copy
        raise OptionError(f"the core {core.path} is the input surface itself (that file, or a copy of it): "
                          "a core is a second surface, inside "
                          "the part, carved out as its rigid interior", path=outer.path,
                          fix="give the core its own surface file (core = \"...\", or --core), or drop "
                              "the core for a part compliant throughout")
    vertices = np.concatenate([outer.vertices, core.vertices])
    core_faces = core.faces + len(outer.vertices)
    crossing = intersecting_face_pairs(vertices, outer.faces, core_faces)
    if len(crossing):
        raise OptionError(f"the core {core.path} crosses or touches the outer surface: "
                          f"{len(crossing):,} pairs of faces meet", path=outer.path, fix=fix)
    # No crossings: every closed piece of the core is wholly inside or wholly outside.
    n_comp, labels, _, _, _ = face_components(core.faces)
    probes = core.vertices[core.faces[np.unique(labels, return_index=True)[1], 0]]
    inside = winding_numbers(outer.vertices, outer.faces, probes) > 0.5
    if not inside.all():
        lo, hi = outer.bounds / UNIT_SCALE[outer.units]
        raise OptionError(
            f"the core {core.path} is not inside the outer surface: "
            f"{int((~inside).sum()):,} of its {n_comp:,} pieces lie outside "
            f"(the outer surface spans {_box_text(lo, hi, outer.units)})",
            path=outer.path, fix=fix)
    if core.volume >= outer.volume:
        raise OptionError(f"the core {core.path} is not smaller than the outer surface "
                          f"({core.volume:.3g} m^3 vs {outer.volume:.3g} m^3)",
                          path=outer.path, fix=fix)


def _box_text(lo, hi, units: str) -> str:
    return ", ".join(f"{axis} {a:.6g}..{b:.6g}" for axis, a, b in zip("xyz", lo, hi)) \
        + f" {units}"
