"""validate_asset(built=...): the builder's per-tet quantities are reused only for a file whose
arrays equal the builder's, and every writer defect is still caught."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from fieldgen.io.asset import write_asset
from fieldgen.meshing.tetmesh import boundary_faces_of, min_dihedral_angles, p1_gradients, tet_volumes
from fieldgen.validate import BuiltGeometry, validate_asset

sys.path.insert(0, str(Path(__file__).parent))   # the slab builders live in test_asset.py
from test_asset import slab_asset  # noqa: E402


def built_of(asset) -> BuiltGeometry:
    points, tets = asset.points, asset.tets
    return BuiltGeometry(points=points, tets=tets, pressure=asset.pressure, extent=asset.extent,
                         volumes=tet_volumes(points, tets),
                         min_dihedral_angle=min_dihedral_angles(points, tets),
                         gradients=p1_gradients(points, tets, np.column_stack([asset.pressure, asset.extent])),
                         boundary_faces=boundary_faces_of(tets))


def failed(report) -> set[str]:
    return {c.name for c in report.checks if not c.ok}


def test_same_report_with_and_without_the_builders_geometry(tmp_path):
    asset = slab_asset()
    path = tmp_path / "a.vtu"
    write_asset(path, asset)
    plain, reused = validate_asset(path), validate_asset(path, built=built_of(asset))
    assert plain.ok and reused.ok
    assert [(c.name, c.detail) for c in plain.checks] == [(c.name, c.detail) for c in reused.checks]


def test_a_wrong_stored_array_is_caught_with_the_builders_geometry(tmp_path):
    asset = slab_asset()
    built = built_of(asset)
    asset.pressure_gradient = built.gradients[:, :, 0] * 1.01     # what a writer bug would store
    asset.min_dihedral_angle = built.min_dihedral_angle + 0.5
    path = tmp_path / "bad.vtu"
    write_asset(path, asset)
    assert {"pressure_gradient", "min_dihedral_angle"} <= failed(validate_asset(path, built=built))


def test_geometry_of_other_arrays_is_not_used(tmp_path):
    """A builder whose arrays differ from the file's (here: a wrong gradient and angle table
    computed for other points) must not make a correct file fail or a wrong one pass."""
    asset = slab_asset()
    path = tmp_path / "a.vtu"
    write_asset(path, asset)
    other = built_of(asset)
    other.points = asset.points * 2.0
    other.gradients = other.gradients * 3.0
    other.min_dihedral_angle = other.min_dihedral_angle + 5.0
    other.volumes = -other.volumes
    report = validate_asset(path, built=other)
    assert report.ok, [c for c in report.checks if not c.ok]
    # same points, other pressure: the stored geometry must not be trusted either
    other = built_of(asset)
    other.pressure = asset.pressure + 1.0
    other.gradients = other.gradients * 3.0
    assert validate_asset(path, built=other).ok
