"""numpy arrays to VTK data objects: the one place that builds a ``vtkPolyData`` from arrays.

Used by the skin's distance query (:func:`fieldgen.skin.distance_to_triangles`) and by the
runtime's ParaView output (contact surfaces, simulation frames). Every array is deep-copied, so
the VTK object does not depend on the caller's arrays staying alive.
"""

from __future__ import annotations

import numpy as np


def named_array(values, name: str, components: str | None = None):
    """A float64 ``vtkDataArray`` named ``name``; ``components`` (e.g. "XYZ") names its columns."""
    from vtkmodules.util.numpy_support import numpy_to_vtk

    array = numpy_to_vtk(np.ascontiguousarray(values, dtype=np.float64), deep=True)
    array.SetName(name)
    for i, axis in enumerate(components or ""):
        array.SetComponentName(i, axis)
    return array


def polygons(points, offsets, connectivity):
    """A ``vtkPolyData`` of polygons: ``points`` (n, 3); polygon k is
    ``connectivity[offsets[k]:offsets[k + 1]]`` (VTK's offsets/connectivity layout)."""
    from vtkmodules.util.numpy_support import numpy_to_vtk, numpy_to_vtkIdTypeArray
    from vtkmodules.vtkCommonCore import vtkPoints
    from vtkmodules.vtkCommonDataModel import vtkCellArray, vtkPolyData

    data = vtkPolyData()
    corners = vtkPoints()
    corners.SetData(numpy_to_vtk(np.ascontiguousarray(points, dtype=np.float64).reshape(-1, 3), deep=True))
    data.SetPoints(corners)
    cells = vtkCellArray()
    cells.SetData(numpy_to_vtkIdTypeArray(np.ascontiguousarray(offsets, dtype=np.int64), deep=True),
                  numpy_to_vtkIdTypeArray(np.ascontiguousarray(connectivity, dtype=np.int64).ravel(), deep=True))
    data.SetPolys(cells)
    return data


def triangles(points, faces):
    """A ``vtkPolyData`` of the triangles ``faces`` (m, 3) over ``points`` (n, 3)."""
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    return polygons(points, np.arange(0, 3 * len(faces) + 1, 3, dtype=np.int64), faces.ravel())
