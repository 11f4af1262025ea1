"""The arrays-to-VTK helper that the skin's distance query and the runtime's ParaView output share."""

import numpy as np
from vtkmodules.util.numpy_support import vtk_to_numpy

from fieldgen.vtk_data import named_array, polygons, triangles


def test_polygons_keep_points_and_cells():
    points = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [2, 0, 0]], dtype=float)
    offsets = np.array([0, 4, 7])
    connectivity = np.array([0, 1, 2, 3, 1, 4, 2])       # a quad and a triangle
    data = polygons(points, offsets, connectivity)
    assert data.GetNumberOfPoints() == 5 and data.GetNumberOfPolys() == 2
    np.testing.assert_array_equal(vtk_to_numpy(data.GetPoints().GetData()), points)
    np.testing.assert_array_equal(vtk_to_numpy(data.GetPolys().GetOffsetsArray()), offsets)
    np.testing.assert_array_equal(vtk_to_numpy(data.GetPolys().GetConnectivityArray()), connectivity)
    # Deep copies: changing the caller's arrays afterwards changes nothing in VTK.
    points[:] = -1.0
    assert vtk_to_numpy(data.GetPoints().GetData()).min() == 0.0


def test_triangles_and_named_arrays():
    points = np.random.default_rng(0).normal(size=(6, 3))
    faces = np.array([[0, 1, 2], [3, 4, 5], [0, 2, 4]])
    data = triangles(points, faces)
    np.testing.assert_array_equal(vtk_to_numpy(data.GetPolys().GetConnectivityArray()).reshape(-1, 3), faces)
    cell = data.GetCell(1)
    assert [cell.GetPointId(i) for i in range(3)] == [3, 4, 5]
    array = named_array(np.arange(9.0).reshape(3, 3), "traction", "XYZ")
    assert array.GetName() == "traction" and array.GetNumberOfComponents() == 3
    assert [array.GetComponentName(i) for i in range(3)] == ["X", "Y", "Z"]
    np.testing.assert_array_equal(vtk_to_numpy(array), np.arange(9.0).reshape(3, 3))
