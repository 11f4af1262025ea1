"""The arrays-to-VTK helpers and the VTK distance query that the skin, the robust mesher and the
runtime's ParaView output share."""

import os

import numpy as np
import trimesh
from vtkmodules.util.numpy_support import vtk_to_numpy

from fieldgen.io.vtk_data import closest_points_on_triangles, distance_to_triangles, named_array, polygons, triangles
from triangle_distance import distances_to_each


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


def test_vtk_distance_is_exact_against_brute_force_on_closed_and_open_surfaces():
    """The depth below the free surface comes from VTK's locator: the same distances as a brute
    force over every triangle, for a closed surface and for an open patch of it (a free surface
    is usually open: its rim meets bonded or insulated faces)."""
    rng = np.random.default_rng(11)
    mesh = trimesh.creation.icosphere(subdivisions=2)
    mesh.vertices[:, 0] *= 3.0
    points = rng.normal(size=(1200, 3)) * 1.5
    for faces in (mesh.faces, mesh.faces[mesh.triangles_center[:, 2] > 0.2]):
        brute = distances_to_each(points, mesh.vertices, faces).min(axis=1)
        np.testing.assert_allclose(distance_to_triangles(points, mesh.vertices, faces), brute, rtol=0, atol=1e-12)
    # The reference itself against trimesh's closest points (closed surface).
    _, reference, _ = trimesh.proximity.closest_point(mesh, points)
    np.testing.assert_allclose(distances_to_each(points, mesh.vertices, mesh.faces).min(axis=1), reference,
                               rtol=0, atol=1e-12)


def test_closest_points_lie_on_the_surface_at_the_brute_force_distance():
    """The skin's cut is moved towards the closest free point: that point is on the (open) surface
    and as far from the query as the brute-force distance, which is the distance returned."""
    rng = np.random.default_rng(12)
    mesh = trimesh.creation.icosphere(subdivisions=2)
    mesh.vertices[:, 0] *= 3.0
    points = rng.normal(size=(400, 3)) * 1.5
    faces = mesh.faces[mesh.triangles_center[:, 2] > 0.2]
    closest, distance = closest_points_on_triangles(points, mesh.vertices, faces)
    brute = distances_to_each(points, mesh.vertices, faces).min(axis=1)
    np.testing.assert_allclose(distance, brute, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(closest - points, axis=1), brute, rtol=0, atol=1e-12)
    assert distances_to_each(closest, mesh.vertices, faces).min(axis=1).max() < 1e-12


def test_vtk_distance_does_not_depend_on_the_thread_count():
    """VTK may evaluate the points on several threads (its SMP backend): same bits with one or
    two, in fresh processes."""
    import subprocess
    import sys

    script = ("import hashlib, numpy as np, trimesh; from fieldgen.io.vtk_data import distance_to_triangles; "
              "m = trimesh.creation.icosphere(subdivisions=3); m.vertices[:, 0] *= 3.0; "
              "p = np.random.default_rng(5).normal(size=(200000, 3)); "
              "print(hashlib.sha256(distance_to_triangles(p, m.vertices, m.faces).tobytes()).hexdigest())")
    digests = set()
    for threads in ("1", "2"):
        env = dict(os.environ, VTK_SMP_MAX_THREADS=threads, OMP_NUM_THREADS=threads)
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        digests.add(proc.stdout.strip())
    assert len(digests) == 1 and len(next(iter(digests))) == 64
