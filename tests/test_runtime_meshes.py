"""Hand-made meshes for the runtime tests (imported by the other test_runtime_* files), and
checks that they are what the tests assume."""

from __future__ import annotations


import numpy as np

from fieldgen.meshing.tetmesh import box_grid, boundary_faces_of, tet_volumes


def slab(width, height, cells_xy, zs):
    """A slab [-w/2, w/2]² × zs: (points, tets)."""
    xy = np.linspace(-width / 2, width / 2, cells_xy + 1)
    return box_grid(xy, xy, zs)


def box_surface(lo, hi):
    """Closed, outward-wound triangle mesh of an axis-aligned box (vertices, faces)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    v = np.array([[lo[0] if b & 1 == 0 else hi[0], lo[1] if b & 2 == 0 else hi[1], lo[2] if b & 4 == 0 else hi[2]]
                  for b in range(8)])
    quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
    faces = []
    for a, b, c, d in quads:
        faces += [(a, b, c), (a, c, d)]
    return v, np.array(faces, np.int64)


def cylinder_surface(radius, height, segments):
    """Closed outward triangle mesh of a cylinder, axis z, bottom at z = 0."""
    angle = 2 * np.pi * np.arange(segments) / segments
    ring = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    bottom = np.column_stack([ring, np.zeros(segments)])
    top = np.column_stack([ring, np.full(segments, height)])
    v = np.vstack([bottom, top, [[0, 0, 0], [0, 0, height]]])
    cb, ct = 2 * segments, 2 * segments + 1
    faces = []
    for s in range(segments):
        t = (s + 1) % segments
        faces += [(s, t, segments + t), (s, segments + t, segments + s), (cb, t, s), (ct, segments + s, segments + t)]
    return v, np.array(faces, np.int64)


def test_box_grid_fills_the_box_with_positive_tets():
    points, tets = box_grid(np.linspace(0, 1, 4), [0, 0.1, 0.5, 2.0], np.linspace(-1, 0, 3))
    volumes = tet_volumes(points, tets)
    assert np.all(volumes > 0)
    assert np.isclose(volumes.sum(), 1 * 2 * 1, rtol=1e-14)
    # Conforming: every interior face is shared by exactly two tets, so the boundary is
    # exactly the 2·(3·3 + 3·2 + 3·2) = 42 cell-face quads, each split in two.
    assert len(boundary_faces_of(tets)) == 2 * 2 * (3 * 3 + 3 * 2 + 3 * 2)


def test_box_and_cylinder_surfaces_are_closed_and_outward():
    import trimesh

    for v, f, volume in [(*box_surface([0, 0, 0], [1, 2, 3]), 6.0),
                         (*cylinder_surface(1.0, 2.0, 64), 2.0 * 64 / 2 * np.sin(2 * np.pi / 64))]:
        mesh = trimesh.Trimesh(v, f, process=False)
        assert mesh.is_watertight
        assert np.isclose(mesh.volume, volume, rtol=1e-12)
