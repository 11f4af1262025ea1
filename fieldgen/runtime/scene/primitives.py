"""Simple contact geometries for scenes: rigid boxes/cylinders/spheres and compliant slabs/balls.

Rigid shapes are closed, outward-wound triangle surfaces. Compliant shapes carry the
fields the model prescribes (docs/model.md §2.2): a slab bonded on its bottom has the linear
extent ``e = depth / H`` (Laplace with e = 0 on top, e = 1 on the bonded bottom, zero
flux on the sides: exact for this geometry), so L = H; a ball uses Drake's field
``e = d / max d`` with ``d`` the distance to the surface (``1 − r/R`` for a sphere).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

import numpy as np

from fieldgen.errors import OptionError
from fieldgen.meshing.tetmesh import box_grid, orient_positive
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry


def box_surface(size) -> tuple[np.ndarray, np.ndarray]:
    """Box of full edge lengths ``size`` centred at the origin: (vertices (8, 3), faces (12, 3))."""
    half = 0.5 * np.asarray(size, dtype=np.float64)
    corners = np.array([[(-1) ** (1 + (b & 1)), (-1) ** (1 + ((b >> 1) & 1)), (-1) ** (1 + ((b >> 2) & 1))]
                        for b in range(8)], dtype=np.float64) * half
    quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
    faces = [tri for a, b, c, d in quads for tri in ((a, b, c), (a, c, d))]
    return corners, np.array(faces, np.int64)


def cylinder_surface(radius: float, height: float, segments: int) -> tuple[np.ndarray, np.ndarray]:
    """Cylinder about z centred at the origin; each cap a fan of ``segments`` triangles
    about its centre (M22 V-A's coin: 152), sides two triangles per segment."""
    angle = 2.0 * np.pi * np.arange(segments) / segments
    ring = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    h = 0.5 * height
    vertices = np.vstack([np.column_stack([ring, np.full(segments, -h)]),
                          np.column_stack([ring, np.full(segments, h)]), [[0.0, 0.0, -h], [0.0, 0.0, h]]])
    bottom, top = 2 * segments, 2 * segments + 1
    faces = []
    for s in range(segments):
        t = (s + 1) % segments
        faces += [(s, t, segments + t), (s, segments + t, segments + s), (bottom, t, s),
                  (top, segments + s, segments + t)]
    return vertices, np.array(faces, np.int64)


def sphere_surface(radius: float, subdivisions: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Icosphere of ``radius`` about the origin."""
    import trimesh  # lazy: trimesh is heavy, and only the sphere shapes need it

    mesh = trimesh.creation.icosphere(subdivisions=int(subdivisions), radius=float(radius))
    return np.asarray(mesh.vertices, np.float64), np.asarray(mesh.faces, np.int64)


def box_tets(xs, ys, zs) -> tuple[np.ndarray, np.ndarray]:
    """Structured tets of the box xs × ys × zs: 6 Kuhn tets per cell (conforming), VTK-positive."""
    return box_grid(xs, ys, zs)


def compliant_slab(size, modulus: float, *, cells=(8, 8), layers: int = 2, dissipation: float = 0.0,
                   mu_static: float = 0.0, mu_dynamic: float | None = None, name: str = "slab") -> CompliantGeometry:
    """Slab of full size (x, y, H) centred on the origin in x, y with its top at z = 0, bonded
    on its bottom: ``e = −z/H``, ``p0 = modulus·e`` (linear law), L = H (D 5.2.1)."""
    sx, sy, h = (float(s) for s in size)
    if not (sx > 0 and sy > 0 and h > 0 and modulus > 0):
        raise OptionError(f"slab size {size} and modulus {modulus} must be positive",
                          fix="give size = [x, y, thickness] in m and modulus in Pa")
    points, tets = box_tets(np.linspace(-sx / 2, sx / 2, int(cells[0]) + 1),
                            np.linspace(-sy / 2, sy / 2, int(cells[1]) + 1), np.linspace(-h, 0.0, int(layers) + 1))
    extent = np.clip(-points[:, 2] / h, 0.0, 1.0)
    return CompliantGeometry.from_arrays(points, tets, modulus * extent, extent=extent, dissipation=dissipation,
                                         mu_static=mu_static, mu_dynamic=mu_dynamic, modulus=modulus, name=name)


@contextlib.contextmanager
def stdout_silenced():
    """Drop what native code prints on file descriptor 1 meanwhile (TetGen's "parsing switches":
    docs/model.md §1.5, stdout is only the report)."""
    if sys.stdout is not None:
        sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:                   # stdout closed: nothing to protect
        yield
        return
    try:
        sink = os.open(os.devnull, os.O_WRONLY)
        os.dup2(sink, 1)
        os.close(sink)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def compliant_ball(radius: float, modulus: float, *, subdivisions: int = 2, dissipation: float = 0.0,
                   mu_static: float = 0.0, mu_dynamic: float | None = None, name: str = "ball") -> CompliantGeometry:
    """Ball about the origin, tet-meshed by TetGen from an icosphere, field ``p0 = E (1 − r/R)``
    evaluated at the vertices (Drake's ``E d / max d``; the centre vertex is added)."""
    import tetgen  # lazy: only the ball shape is tet-meshed here

    if not (radius > 0 and modulus > 0):
        raise OptionError(f"ball radius {radius} m and modulus {modulus} Pa must be positive",
                          fix="give radius in m and modulus in Pa")
    vertices, faces = sphere_surface(radius, subdivisions)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:    # TetGen writes scratch files into cwd
        os.chdir(tmp)
        try:
            gen = tetgen.TetGen(vertices, faces)
            with stdout_silenced():      # TetGen prints its switches; stdout carries only the report
                points, tets = gen.tetrahedralize(switches="pq1.5Q")[:2]
        finally:
            os.chdir(cwd)
    points = np.asarray(points, np.float64)
    tets = orient_positive(points, np.asarray(tets, np.int64))
    r = np.linalg.norm(points, axis=1)
    extent = np.clip(1.0 - r / radius, 0.0, 1.0)
    extent[r >= radius * (1 - 1e-9)] = 0.0
    emax = extent.max()
    extent = extent / emax if emax > 0 else extent
    return CompliantGeometry.from_arrays(points, tets, modulus * extent, extent=extent, dissipation=dissipation,
                                         mu_static=mu_static, mu_dynamic=mu_dynamic, modulus=modulus, name=name)


def _friction(kwargs: dict) -> dict:
    """``mu_dynamic`` defaults to ``mu_static`` (as for compliant bodies)."""
    out = dict(kwargs)
    if out.get("mu_dynamic") is None:
        out["mu_dynamic"] = out.get("mu_static", 0.0)
    return out


def rigid_box(size, **kwargs) -> RigidGeometry:
    """Rigid box of full edge lengths ``size`` centred at the origin."""
    return RigidGeometry(*box_surface(size), **_friction(kwargs))


def rigid_cylinder(radius: float, height: float, segments: int = 152, **kwargs) -> RigidGeometry:
    """Rigid cylinder about z centred at the origin, fan caps of ``segments`` triangles."""
    return RigidGeometry(*cylinder_surface(radius, height, segments), **_friction(kwargs))


def rigid_sphere(radius: float, subdivisions: int = 3, **kwargs) -> RigidGeometry:
    """Rigid icosphere about the origin."""
    return RigidGeometry(*sphere_surface(radius, subdivisions), **_friction(kwargs))
