"""The segment measures (fieldgen/sizing/segments.py) and the sheet's rim helpers built on them
(fieldgen/sizing/sheet.py), against answers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.sizing import sheet
from fieldgen.sizing.segments import along_segments, nearest_on_segments


def test_the_nearest_point_on_segments_is_the_foot_or_an_end():
    a = np.array([[0.0, 0.0], [10.0, 0.0], [5.0, 5.0]])
    b = np.array([[10.0, 0.0], [10.0, 10.0], [5.0, 5.0]])       # the last of zero length
    query = np.array([[3.0, 2.0],      # above the first: foot (3, 0), 0.3 along
                      [12.0, 4.0],     # right of the second: foot (10, 4), 0.4 along
                      [-2.0, -1.0],    # past the first's start: its start
                      [5.0, 4.5]])     # by the point segment: the point
    segment, where = nearest_on_segments(query, a, b, chunk=2)
    assert segment.tolist() == [0, 1, 0, 2]
    assert where[:3] == pytest.approx([0.3, 0.4, 0.0])
    assert np.isfinite(where).all()


def test_points_along_segments_are_spaced_at_most_the_step_and_start_each_segment():
    a = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    b = np.array([[1.0, 0.0, 0.0], [1.0, 0.25, 0.0]])
    samples, segment = along_segments(a, b, 0.3)
    assert segment.tolist() == [0, 0, 0, 0, 1]                     # ceil(1/0.3) = 4, ceil(0.25/0.3) = 1
    assert samples[:, 0].tolist() == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])


def test_the_thickness_is_the_median_by_area():
    values, weights = np.array([0.2, 0.002, 0.2, 0.002, 0.2]), np.array([1.0, 10.0, 1.0, 10.0, 1.0])
    assert sheet.weighted_median(values, weights) == 0.002                # the count's median is 0.2
    assert sheet.weighted_median(np.array([3.0, 1.0, 2.0]), np.ones(3)) == 2.0


def _square(n: int = 4, size: float = 1.0):
    """A flat square side (z = 0, normal +z), n x n cells of two triangles."""
    x, y = np.meshgrid(np.linspace(0, size, n + 1), np.linspace(0, size, n + 1), indexing="ij")
    points = np.column_stack([x.ravel(), y.ravel(), np.zeros(x.size)])
    k = np.arange(n * (n + 1)).reshape(n, n + 1)[:, :n].ravel()
    triangles = np.concatenate([np.stack([k, k + n + 1, k + n + 2], axis=1), np.stack([k, k + n + 2, k + 1], axis=1)])
    return points, triangles


def test_rim_vertices_moved_off_the_rim_are_put_back_on_it_and_the_inside_is_left():
    points, triangles = _square()
    rim_points = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=float)
    rim_edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0]])
    moved = points.copy()
    moved[5] += [0.0, 0.03, 0.0]           # (0.25, 0), a vertex of the edge y = 0, moved into the side
    moved[6] += [0.01, 0.01, 0.0]          # (0.25, 0.25), inside
    back = sheet.onto_rim(moved, triangles, rim_points, rim_edges)
    assert back[5] == pytest.approx(points[5]) and np.array_equal(back[6], moved[6])


def test_a_rim_column_is_turned_into_the_cut_face_and_an_inner_one_is_left():
    points, triangles = _square()
    lean = np.tile([-0.2, -0.2, -1.0], (len(points), 1)) / np.sqrt(1.08)
    turned = sheet.along_rim_faces(points, triangles, lean)
    on_x = (points[:, 0] == 0.0) & (points[:, 1] > 0) & (points[:, 1] < 1)        # the cut face x = 0
    on_y = (points[:, 1] == 0.0) & (points[:, 0] > 0) & (points[:, 0] < 1)        # the cut face y = 0
    inner = (points[:, 0] > 0) & (points[:, 0] < 1) & (points[:, 1] > 0) & (points[:, 1] < 1)
    assert np.allclose(turned[on_x], [0.0, -0.2 / np.sqrt(1.04), -1.0 / np.sqrt(1.04)])   # the lean across x = 0 out
    assert np.allclose(turned[on_y], [-0.2 / np.sqrt(1.04), 0.0, -1.0 / np.sqrt(1.04)])   # the lean across y = 0 out
    assert np.allclose(turned[0], [0.0, 0.0, -1.0])                     # the corner: held by both faces
    assert np.allclose(turned[inner], lean[inner])
