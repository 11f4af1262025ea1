"""What a third batch of public parts found (benchmarks/README.md, "Public parts, third batch"),
each reduced to a small input written here."""

from __future__ import annotations

import json

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

import fieldgen.meshing.tetgen as tetgen_module
import fieldgen.sizing.warning as warning_module
from fieldgen.cli.main import main
from fieldgen.errors import InputError, TetGenStuck
from fieldgen.io.asset import read_metadata
from fieldgen.surface.remesh import tolerated_surface
from fieldgen.surface.stage import load_surface

#: A tetrahedron's four faces as one triangle strip, as scanners' PLY files store them (the
#: Cyberware "igea" scan holds its 268k triangles so): the element is ``tristrips``, not ``face``.
TRISTRIP_PLY = """\
ply
format ascii 1.0
element vertex 4
property float x
property float y
property float z
element tristrips 1
property list int int vertex_indices
end_header
0 0 0
1 0 0
0 1 0
0 0 1
6 0 1 2 3 0 1
"""


def test_a_ply_of_triangle_strips_is_refused_naming_its_strips(tmp_path):
    """A PLY whose faces are triangle strips reads as vertices without faces: the refusal named a
    tetrahedral volume mesh (.vtk) as the likely cause. It now names the strips and how to export
    the faces as a list."""
    path = tmp_path / "strips.ply"
    path.write_text(TRISTRIP_PLY)
    with pytest.raises(InputError) as raised:
        load_surface(path, "mm")
    message = str(raised.value)
    assert "contains no triangles (4 vertices, 0 faces)" in message
    assert "'tristrips' (triangle strips)" in message
    assert ".vtk" not in message


def test_a_ply_of_vertices_only_is_named_a_point_cloud(tmp_path):
    """A PLY of vertices alone (a point cloud) is told apart from a file of unread faces."""
    path = tmp_path / "cloud.ply"
    head, _, _ = TRISTRIP_PLY.partition("element tristrips")
    body = "end_header\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n"
    path.write_text(head + body)
    with pytest.raises(InputError, match="a point cloud, or a tetrahedral volume mesh"):
        load_surface(path, "mm")


def test_a_surface_the_tolerance_leaves_as_it_is_is_not_called_remeshed(tmp_path):
    """A dense, well-shaped scan surface (the igea head, a noisy sphere of 327k triangles) has no
    sliver to move, and MMGS finds nothing cheaper within the tolerance: the input itself was kept,
    but told as "remeshed ... 327,680 -> 327,680 triangles, 4.66e-21 m from the input". The
    message now says the triangles were kept as they are."""
    path = tmp_path / "sphere.stl"
    trimesh.creation.icosphere(subdivisions=3, radius=0.01).export(path)
    surface = load_surface(path, "m")
    kept = tolerated_surface(surface, np.zeros(len(surface.faces), dtype=np.int64), 1e-5)
    assert kept.remesh is not None and kept.remesh.unchanged
    assert np.array_equal(kept.surface.faces, surface.faces)
    message = kept.remesh.message(str(path), "mm", 1e-3)
    assert "triangles as they are" in message and "remeshed" not in message


def test_a_mesh_far_over_the_tet_budget_is_warned_of_even_within_the_accuracy(tmp_path, monkeypatch):
    """A dense scan's first mesh (the igea head's: 881,873 tets, 3.1 times the budget) met the
    accuracy, and nothing said the asset was three times heavier than the sizing aims for. Here
    the budget the warning reads is made small, so a plain ball's mesh is far over it; a mesh
    within 1.5 times the budget, or one not sized by accuracy, is not warned of."""
    trimesh.creation.icosphere(subdivisions=2, radius=20.0).export(tmp_path / "ball.stl")
    monkeypatch.setattr(warning_module, "MAX_TETS", 1_000)
    out = tmp_path / "ball.vtu"
    result = CliRunner().invoke(main, ["build", str(tmp_path / "ball.stl"), "--units", "mm", "--modulus", "1e5",
                                       "-o", str(out), "--json", "-q"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    over = [w for w in report["warnings"] if "times the sizing's budget (about 1,000)" in w]
    assert report["tets"] > 1_500 and len(over) == 1 and f"{report['tets']:,} tets" in over[0]
    sized = {"passes": [{"meshed_by": "TetGen"}]}
    assert warning_module.budget_warning(sized, 1_500) == [] and warning_module.budget_warning(None, 10**6) == []
    assert warning_module.budget_warning(sized, 1_501)


def test_tetgen_failing_on_the_inputs_own_triangles_meshes_them_remeshed_once(tmp_path, monkeypatch):
    """A CAD fan (1,792 triangles, 111 needles under 1 degree) failed by default with TetGen's
    internal error in ``repair_tet``, its advice (--surface-tolerance) working: the surface stage
    had kept its triangles (no edge under the tolerance). Now the build remeshes within the default
    tolerance and meshes again, saying so. Here TetGen is made to fail on the input's triangles
    only; with a tolerance given, the failure is reported, naming the file."""
    ball = trimesh.creation.icosphere(subdivisions=3, radius=20.0)
    ball.export(tmp_path / "ball.stl")
    original, calls = tetgen_module.tetrahedralize, []

    def failing_first(vertices, faces, markers, **kwargs):
        calls.append(len(faces))
        if len(calls) == 1:
            raise TetGenStuck("TetGen failed to tetrahedralize the surface: internal error (made to fail)")
        return original(vertices, faces, markers, **kwargs)
    monkeypatch.setattr(tetgen_module, "tetrahedralize", failing_first)
    out = tmp_path / "ball.vtu"
    result = CliRunner().invoke(main, ["build", str(tmp_path / "ball.stl"), "--units", "mm", "--modulus", "1e5",
                                       "-o", str(out), "--json", "-q"])
    assert result.exit_code == 0, result.output
    default = 1e-3 * np.linalg.norm(np.ptp(ball.vertices, axis=0))          # mm
    warning = [w for w in json.loads(result.stdout)["warnings"] if w.startswith("TetGen failed on the input's")]
    assert len(warning) == 1 and f"remeshed within {default:.3g} mm" in warning[0]
    assert read_metadata(out)["surface"]["remesh"]["tolerance"] == pytest.approx(default * 1e-3, rel=1e-9)
    calls.clear()
    given = CliRunner().invoke(main, ["build", str(tmp_path / "ball.stl"), "--units", "mm", "--modulus", "1e5",
                                      "--surface-tolerance", "0.1", "-o", str(tmp_path / "b.vtu"), "--json", "-q"])
    assert given.exit_code == 1 and "made to fail" in json.loads(given.stdout)["error"]
    assert str(tmp_path / "ball.stl") in given.stderr and not (tmp_path / "b.vtu").exists()
