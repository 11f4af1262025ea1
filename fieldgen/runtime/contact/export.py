"""Write a contact surface for ParaView (docs/model.md §3-4): ``.vtp`` (polygons) or ``.vtu`` (by suffix).

Point data: ``pressure`` (p0 at each surface vertex, Pa). Cell data, one value per face:
``normal`` (unit, from A into B), ``area`` (m²), ``pressure`` (p0 at the face centroid, Pa) and
``traction`` (Pa), the traction on B at the face centroid, ``t = p n̂ + t_f`` with the
dissipative pressure ``p = p0·max(1 − χ v_n, 0)`` and regularised Coulomb friction
``t_f = −μ p v_t / max(|v_t|, v_c)`` (D 4.4.2, 5.2.2, 5.2.3) for the given velocities (SpatialVelocity, linear and angular).
Everything is in the world frame. Written with VTK's XML writers through
:func:`fieldgen.io.asset.atomic_output`, so a failed write leaves no partial file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fieldgen.errors import InputError, OptionError
from fieldgen.io.asset import atomic_output
from fieldgen.io.vtk_data import named_array, polygons
from fieldgen.runtime.contact.surface import ContactSurface
from fieldgen.runtime.contact.pose import SpatialVelocity, as_spatial_velocity
from fieldgen.runtime.contact.wrench import DEFAULT_STICTION_VELOCITY, combined_dissipation, combined_friction

SUFFIXES = (".vtp", ".vtu")


def centroid_tractions(surface: ContactSurface, *, V_WA: SpatialVelocity | None = None,
                       V_WB: SpatialVelocity | None = None, dissipation: float = 0.0, friction: float = 0.0,
                       stiction_velocity: float = DEFAULT_STICTION_VELOCITY) -> np.ndarray:
    """(nf, 3) traction on B at each face centroid (docs/model.md §4; D 5.2.2, 5.2.3); ``V_WA``/``V_WB``
    SpatialVelocity values in W (None = at rest)."""
    VA = as_spatial_velocity(V_WA, "V_WA")
    VB = as_spatial_velocity(V_WB, "V_WB")
    q = np.asarray(surface.centroids, dtype=np.float64).reshape(-1, 3)
    n = np.asarray(surface.normals, dtype=np.float64).reshape(-1, 3)
    v_b = VB.linear + np.cross(VB.angular, q - surface.X_WB[:3, 3])
    v_a = VA.linear + np.cross(VA.angular, q - surface.X_WA[:3, 3])
    v = v_b - v_a
    v_n = np.sum(v * n, axis=1)
    p = surface.centroid_pressure * np.maximum(1.0 - dissipation * v_n, 0.0)
    v_t = v - v_n[:, None] * n
    speed = np.linalg.norm(v_t, axis=1)
    return p[:, None] * n - (friction * p / np.maximum(speed, stiction_velocity))[:, None] * v_t


def surface_tractions(surface: ContactSurface, body_a, body_b, *, V_WA: SpatialVelocity | None = None,
                      V_WB: SpatialVelocity | None = None,
                      stiction_velocity: float = DEFAULT_STICTION_VELOCITY) -> np.ndarray:
    """:func:`centroid_tractions` with the pair's χ and μ (``combined_dissipation``/``combined_friction``)."""
    return centroid_tractions(surface, V_WA=V_WA, V_WB=V_WB, dissipation=combined_dissipation(body_a, body_b),
                              friction=combined_friction(body_a, body_b), stiction_velocity=stiction_velocity)


def _polydata(surface: ContactSurface, traction: np.ndarray):
    data = polygons(np.reshape(surface.vertices, (-1, 3)), surface.face_offsets, surface.face_vertices)
    data.GetPoints().GetData().SetName("points")
    pd = data.GetPointData()
    pd.AddArray(named_array(surface.vertex_pressure, "pressure"))
    pd.SetActiveScalars("pressure")
    cd = data.GetCellData()
    cd.AddArray(named_array(surface.normals, "normal", "XYZ"))
    cd.SetActiveNormals("normal")
    cd.AddArray(named_array(traction, "traction", "XYZ"))
    cd.SetActiveVectors("traction")
    cd.AddArray(named_array(surface.areas, "area"))
    cd.AddArray(named_array(surface.centroid_pressure, "pressure"))
    return data


def write_contact_surface(path, surface: ContactSurface, body_a=None, body_b=None, *,
                          V_WA: SpatialVelocity | None = None, V_WB: SpatialVelocity | None = None,
                          stiction_velocity: float = DEFAULT_STICTION_VELOCITY) -> str:
    """Write ``surface`` to ``path`` (``.vtp`` polygons or ``.vtu`` unstructured grid, by suffix).

    The traction uses the pair's χ and μ when both bodies are given, else p0·n̂ alone.
    Returns the path written; an empty surface gives a valid file with no cells.
    """
    # lazy: vtk is heavy, needed only to write the file
    from vtkmodules.vtkCommonDataModel import vtkUnstructuredGrid
    from vtkmodules.vtkFiltersCore import vtkAppendFilter
    from vtkmodules.vtkIOXML import vtkXMLPolyDataWriter, vtkXMLUnstructuredGridWriter

    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise OptionError(f"unknown contact-surface format {suffix or '(no suffix)'!r}", path=path,
                          fix="name the file SURFACE.vtp (polygons) or SURFACE.vtu (unstructured grid)")
    if body_a is not None and body_b is not None:
        traction = surface_tractions(surface, body_a, body_b, V_WA=V_WA, V_WB=V_WB, stiction_velocity=stiction_velocity)
    else:
        traction = centroid_tractions(surface, V_WA=V_WA, V_WB=V_WB, stiction_velocity=stiction_velocity)
    data = _polydata(surface, traction)
    if suffix == ".vtu":
        append = vtkAppendFilter()
        append.AddInputData(data)
        append.Update()
        data = vtkUnstructuredGrid()
        data.ShallowCopy(append.GetOutput())
        writer = vtkXMLUnstructuredGridWriter()
    else:
        writer = vtkXMLPolyDataWriter()
    writer.SetInputData(data)
    writer.SetDataModeToBinary()
    with atomic_output(path) as temporary:
        writer.SetFileName(temporary)
        if writer.Write() != 1:
            raise InputError("VTK could not write the contact surface", path=path,
                             fix="write to an existing, writable directory")
    return str(path)
