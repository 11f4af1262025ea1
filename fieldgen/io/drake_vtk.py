"""Export an asset's tet mesh for Drake's hydroelastic contact: a legacy ``.vtk`` + an SDFormat file.

What Drake does with a compliant ``.vtk`` mesh (geometry/proximity, ``MakeVolumeMeshPressureField``):
it reads the points and tetrahedra only (legacy VTK UNSTRUCTURED_GRID, cell type 10; point
and cell data are ignored), computes each vertex's distance ``d`` to the mesh's boundary
surface and sets ``p = E·d / max d``. So the file cannot carry our field: Drake's field is
always 0 on the whole boundary and E at the deepest vertex, linear in distance.

Choice of E (``drake:hydroelastic_modulus``): ``d / max d`` ranges over [0, 1] and reaches 1
at the deepest vertex, so Drake's largest pressure is exactly E. Matching the asset's largest
pressure gives ``E = max p0`` (for the linear law with ``max e = 1`` that is M0; for the
hyperbolic law M0/(1 − k)). The shape of the field in between is Drake's, not ours.
χ (``drake:hunt_crossley_dissipation``, s/m) is the asset's dissipation (D 5.2.1: the same unit
and role), and the friction coefficients are copied.
"""

from __future__ import annotations

import os
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from fieldgen.errors import BuildError
from fieldgen.io.asset import atomic_output
from fieldgen.meshing.tetmesh import boundary_faces_of, tet_volumes

VTK_TETRA = 10
NOTE = ("Drake ignores any field in the file and computes p = E·d/max d from each vertex's "
        "distance d to the boundary; only the maximum pressure (E) is matched")


def drake_modulus(pressure: np.ndarray) -> float:
    """E such that Drake's field E·d/max d has the asset's maximum pressure: E = max p0."""
    return float(np.max(pressure))


def compact_mesh(points: np.ndarray, tets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop vertices no tet uses (Drake would give them a distance and a pressure of their own)."""
    used, inverse = np.unique(tets.ravel(), return_inverse=True)
    return np.asarray(points, dtype=np.float64)[used], inverse.reshape(tets.shape).astype(np.int64)


def interior_vertices(tets: np.ndarray) -> np.ndarray:
    """Sorted indices of vertices used by tets but on no boundary face."""
    used = np.unique(tets.ravel())
    on_boundary = np.unique(boundary_faces_of(tets).ravel())
    return np.setdiff1d(used, on_boundary, assume_unique=True)


def drake_signed_volumes(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """(t, 4): for each tet and vertex V = v_i, the triple product (AB × AC)·AV with A, B, C the
    next vertices v_(i+1), v_(i+2), v_(i+3) (mod 4) — the number Drake tests when it computes
    the gradient of each barycentric coordinate (±6 × volume)."""
    out = np.empty((len(tets), 4))
    for i in range(4):
        v, a, b, c = (points[tets[:, (i + j) % 4]] for j in range(4))
        out[:, i] = np.einsum("ij,ij->i", np.cross(b - a, c - a), v - a)
    return out


def check_for_drake(points: np.ndarray, tets: np.ndarray, path: str) -> None:
    """BuildError unless Drake can use the mesh: tets, finite points, positive volumes, no tet so
    thin that Drake cannot take its gradient (|6·volume| <= machine epsilon in m³, Drake's
    absolute test), an interior vertex (Drake divides by the largest distance to the boundary)."""
    if len(tets) == 0:
        raise BuildError("the mesh has no tets", path=path, fix="export a built asset")
    if not np.all(np.isfinite(points)):
        bad = int(np.sum(~np.all(np.isfinite(points), axis=1)))
        raise BuildError(f"{bad} vertex position(s) are not finite", path=path,
                         fix="rebuild the asset")
    volumes = tet_volumes(points, tets)
    if np.any(volumes <= 0):
        bad = int(np.sum(volumes <= 0))
        raise BuildError(f"{bad} of {len(tets)} tets have non-positive volume "
                         f"(smallest {volumes.min():.3g} m³); Drake needs every volume positive",
                         path=path, fix="rebuild the asset (fieldgen writes VTK-positive tets)")
    thin = np.any(np.abs(drake_signed_volumes(points, tets)) <= np.finfo(np.float64).eps, axis=1)
    if np.any(thin):
        raise BuildError(f"{int(thin.sum())} of {len(tets)} tets are too thin for Drake: "
                         f"|6·volume| <= {np.finfo(np.float64).eps:.3g} m³ (smallest volume "
                         f"{volumes.min():.3g} m³), so Drake cannot compute their pressure gradient "
                         "and refuses the mesh ('Bad geometry; could not calculate gradient')",
                         path=path, fix="export the mesh before layering (layer cuts for a nonlinear "
                                        "law make such slivers, and Drake's field is linear anyway), "
                                        "or build with the linear law; fieldgen's own runtime "
                                        "accepts the asset as it is")
    if len(interior_vertices(tets)) == 0:
        raise BuildError(f"none of the mesh's {len(np.unique(tets))} vertices is interior: "
                         "every vertex lies on the boundary, so Drake's distance field d/max d "
                         "is undefined (Drake refuses such a mesh)", path=path,
                         fix="mesh finer (smaller --edge-length or --max-volume) so the volume "
                             "has interior vertices")


def vtk_text(points: np.ndarray, tets: np.ndarray, title: str) -> str:
    """Legacy ASCII VTK (version 3.0 layout, read by every VTK and by Drake), tets only."""
    title = " ".join(title.split())[:255] or "fieldgen tet mesh"
    out = ["# vtk DataFile Version 3.0", title, "ASCII", "DATASET UNSTRUCTURED_GRID",
           f"POINTS {len(points)} double"]
    out += [f"{x!r} {y!r} {z!r}" for x, y, z in points.tolist()]
    out.append(f"CELLS {len(tets)} {5 * len(tets)}")
    out += [f"4 {a} {b} {c} {d}" for a, b, c, d in tets.tolist()]
    out.append(f"CELL_TYPES {len(tets)}")
    out += [str(VTK_TETRA)] * len(tets)
    return "\n".join(out) + "\n"


def drake_warnings(metadata: dict) -> list[str]:
    """What of the asset Drake cannot reproduce (Drake computes its own field from the mesh)."""
    warnings = []
    law = metadata.get("law") or {}
    if law.get("kind", "linear") != "linear":
        warnings.append(f"the asset's {law.get('kind')} law is nonlinear; Drake's field is linear "
                        "in distance, so the stiffening curve is lost")
    boundary = metadata.get("boundary") or {}
    faces = boundary.get("faces") or {}
    if boundary.get("core"):
        warnings.append(f"the rigid core ({boundary['core'].get('file', 'core')}) is exported as a "
                        "hole: Drake sets p = 0 on the core surface instead of the maximum")
    if boundary.get("bonded") or (not boundary.get("core") and (faces.get("rigid") or 0) > 0):
        warnings.append(f"{faces.get('rigid', '?')} bonded (rigid, e = 1) boundary faces get p = 0 "
                        "in Drake instead of the maximum")
    if boundary.get("insulated") or (faces.get("insulated") or 0) > 0:
        warnings.append(f"{faces.get('insulated', '?')} insulated boundary faces get p = 0 in Drake")
    if metadata.get("skin"):
        warnings.append("the rigid interior under the skin is exported as a hole: Drake sets p = 0 "
                        "on it instead of the maximum")
    return warnings


def sdf_text(vtk_uri: str, name: str, modulus: float, dissipation: float, mu_static: float,
             mu_dynamic: float) -> str:
    """An SDFormat model with one link whose collision is the compliant-hydroelastic mesh."""
    name = escape(name)
    return f"""<?xml version="1.0"?>
<!-- Written by fieldgen: Drake hydroelastic properties matching a fieldgen asset.
     Drake computes its own pressure field p = E·d/max d from this mesh (d = distance to the
     boundary); E below is the asset's maximum pressure. Add <inertial> for dynamics. -->
<sdf version="1.7" xmlns:drake="http://drake.mit.edu">
  <model name="{name}">
    <link name="{name}">
      <collision name="{name}_collision">
        <geometry>
          <mesh>
            <uri>{escape(vtk_uri)}</uri>
          </mesh>
        </geometry>
        <drake:proximity_properties>
          <drake:compliant_hydroelastic/>
          <drake:hydroelastic_modulus>{modulus!r}</drake:hydroelastic_modulus>
          <drake:hunt_crossley_dissipation>{dissipation!r}</drake:hunt_crossley_dissipation>
          <drake:mu_dynamic>{mu_dynamic!r}</drake:mu_dynamic>
          <drake:mu_static>{mu_static!r}</drake:mu_static>
        </drake:proximity_properties>
      </collision>
    </link>
  </model>
</sdf>
"""


def write_drake_files(asset, vtk_path, *, name: str | None = None) -> dict:
    """Write ``vtk_path`` (legacy .vtk tet mesh) and ``vtk_path`` with suffix .sdf for Drake.

    Both are written atomically. Returns a dict for the build report:
    {"vtk", "sdf", "hydroelastic_modulus", "hunt_crossley_dissipation", "mu_static",
    "mu_dynamic", "tets", "vertices", "note", "warnings"} — warnings name what Drake cannot
    reproduce (nonlinear law, rigid core, bonded or insulated faces). BuildError if Drake could not load the mesh
    (no interior vertex, a non-positive volume).
    """
    vtk_path = Path(os.fspath(vtk_path))
    if vtk_path.suffix.lower() != ".vtk":
        raise BuildError(f"the Drake mesh file has suffix {vtk_path.suffix or '(none)'!r}; Drake "
                         "reads compliant tet meshes only from .vtk files", path=str(vtk_path),
                         fix="name the file FILE.vtk")
    sdf_path = vtk_path.with_suffix(".sdf")
    points, tets = compact_mesh(asset.points, np.asarray(asset.tets, dtype=np.int64))
    check_for_drake(points, tets, str(vtk_path))

    metadata = asset.metadata or {}
    modulus = drake_modulus(asset.pressure)
    if not modulus > 0:
        raise BuildError(f"the asset's maximum pressure is {modulus:g} Pa; Drake needs a positive "
                         "hydroelastic modulus", path=str(vtk_path), fix="rebuild with --modulus > 0")
    dissipation = float(metadata.get("dissipation", 0.0))
    friction = metadata.get("friction") or {}
    mu_static = float(friction.get("static", 0.5))
    mu_dynamic = float(friction.get("dynamic", mu_static))
    source = (metadata.get("source") or {}).get("file", "asset")
    name = name or vtk_path.stem
    title = f"fieldgen tet mesh of {source} for Drake hydroelastic contact (E = {modulus:.6g} Pa)"

    with atomic_output(vtk_path) as temporary:
        with open(temporary, "w", encoding="ascii", newline="\n") as stream:
            stream.write(vtk_text(points, tets, title))
    with atomic_output(sdf_path) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(sdf_text(vtk_path.name, name, modulus, dissipation, mu_static, mu_dynamic))

    return {
        "vtk": os.path.abspath(vtk_path),
        "sdf": os.path.abspath(sdf_path),
        "hydroelastic_modulus": modulus,
        "hunt_crossley_dissipation": dissipation,
        "mu_static": mu_static,
        "mu_dynamic": mu_dynamic,
        "tets": int(len(tets)),
        "vertices": int(len(points)),
        "note": NOTE,
        "warnings": drake_warnings(metadata),
    }
