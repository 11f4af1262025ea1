"""End-to-end `fieldgen build` / `fieldgen validate`: real CAD parts, bad inputs, determinism, CLI contract."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from fieldgen.cli.main import main
from fieldgen.options import BuildOptions, options_from_spec
from fieldgen.pipeline import build

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def read_with_vtk(path: Path):
    """Read an asset with the plain vtk package, as ParaView does."""
    import vtk
    from vtk.util.numpy_support import vtk_to_numpy

    reader = vtk.vtkXMLUnstructuredGridReader()
    reader.SetFileName(str(path))
    reader.Update()
    grid = reader.GetOutput()
    pd, cd, fd = grid.GetPointData(), grid.GetCellData(), grid.GetFieldData()
    arrays = {
        "extent": vtk_to_numpy(pd.GetArray("extent")),
        "pressure": vtk_to_numpy(pd.GetArray("pressure")),
        "pressure_gradient": vtk_to_numpy(cd.GetArray("pressure_gradient")),
        "min_dihedral_angle": vtk_to_numpy(cd.GetArray("min_dihedral_angle")),
    }
    meta = json.loads(vtk_to_numpy(fd.GetAbstractArray("fieldgen_metadata")).tobytes())
    numbers = {name: float(vtk_to_numpy(fd.GetArray(name))[0]) for name in ("characteristic_length", "dissipation", "modulus")}
    cell_types = {grid.GetCellType(i) for i in range(grid.GetNumberOfCells())}
    return grid, arrays, meta, numbers, cell_types, pd.GetScalars().GetName()


# Real CAD parts from the test corpus (tests/data/meshes): (file, units, flags). plate_holes.STL is in mm.
REAL_PARTS = [
    ("plate_holes.STL", "mm", ["--bonded", "normal:0,0,-1", "--modulus", "1e6", "--expansion-rate", "5"]),
    ("featuretype.STL", "in", ["--modulus", "3e5", "--k", "0.5", "--dissipation", "2"]),
    ("fandisk.obj", "m", ["--bonded", "below:z=-0.7", "--modulus", "1e5", "--expansion-rate", "10"]),
]


@pytest.mark.parametrize("name,units,flags", REAL_PARTS, ids=[p[0] for p in REAL_PARTS])
def test_real_cad_part_builds_valid_asset(meshes, tmp_path, name, units, flags):
    out = tmp_path / (Path(name).stem + ".vtu")
    result = run("build", meshes / name, "--units", units, "-o", out, "--json", "--quiet", *flags)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    for key in ("output", "tets", "vertices", "characteristic_length", "dissipation",
                "max_interpolation_error", "stage_seconds"):
        assert key in report
    assert "tetrahedralize" in report["stage_seconds"]
    assert run("validate", out).exit_code == 0

    grid, arrays, meta, numbers, cell_types, scalars = read_with_vtk(out)
    assert cell_types == {10}  # VTK_TETRA only
    assert scalars == "pressure"
    assert grid.GetNumberOfPoints() == report["vertices"] and grid.GetNumberOfCells() == report["tets"]
    assert arrays["pressure_gradient"].shape == (report["tets"], 3)
    assert arrays["min_dihedral_angle"].shape == (report["tets"],)
    assert meta["schema"] == "fieldgen.pressure_field/1"
    assert meta["source"]["file"] == name and len(meta["source"]["sha256"]) == 64
    assert numbers["characteristic_length"] == pytest.approx(meta["characteristic_length"], rel=1e-12)
    assert numbers["dissipation"] == pytest.approx(meta["dissipation"], rel=1e-12)
    assert report["characteristic_length"] == pytest.approx(meta["characteristic_length"], rel=1e-12)
    # SI: the part's size in metres, whatever the input units.
    bounds = np.array(grid.GetBounds()).reshape(3, 2)
    import trimesh

    source = trimesh.load(meshes / name, force="mesh")
    scale = {"m": 1.0, "mm": 1e-3, "in": 0.0254}[units]
    assert np.allclose(bounds[:, 1] - bounds[:, 0], source.extents * scale, rtol=1e-6)
    assert 0.0 <= arrays["extent"].min() and arrays["extent"].max() <= 1.0
    assert meta["max_interpolation_error"] <= meta["layer_tolerance"]


def test_mm_units_make_an_si_asset_with_the_same_field(tmp_path, meshes):
    """The same part in mm and in m gives the same asset in metres (up to meshing: the STL re-export
    rounds to float32, so TetGen sees slightly different coordinates)."""
    import trimesh

    part = trimesh.load(meshes / "plate_holes.STL", force="mesh")
    metres = tmp_path / "plate_m.stl"
    part.apply_scale(1e-3)
    part.export(metres)
    a = build(meshes / "plate_holes.STL", tmp_path / "a.vtu",
              BuildOptions(units="mm", modulus=1e6, bonded=("below:z=0.01",)))
    b = build(metres, tmp_path / "b.vtu", BuildOptions(units="m", modulus=1e6, bonded=("below:z=0.00001",)))
    assert a.characteristic_length == pytest.approx(b.characteristic_length, rel=5e-3)
    assert a.volume == pytest.approx(b.volume, rel=1e-5)
    # Coarea: L = V / (mean area of the iso-surfaces of e). The free sides and holes shrink the
    # iso-surfaces below the footprint, so L exceeds the 12.7 mm thickness, but not by much.
    assert 0.0127 < a.characteristic_length < 1.2 * 0.0127


def test_two_builds_are_byte_identical(tmp_path):
    spec = ROOT / "assets" / "paddle.toml"
    outs = []
    for i in range(2):
        out = tmp_path / f"run{i}" / "paddle.vtu"
        result = run("build", "--spec", spec, "-o", out, "--quiet")
        assert result.exit_code == 0, result.output
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_build_is_byte_identical_across_processes_and_thread_counts(tmp_path):
    """Same input, different BLAS/numba thread counts in fresh processes: identical bytes."""
    outs = []
    for threads in ("1", "2"):
        out = tmp_path / f"t{threads}.vtu"
        env = dict(os.environ, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads, NUMBA_NUM_THREADS=threads)
        proc = subprocess.run(
            [sys.executable, "-m", "fieldgen.cli.main", "build", "--spec", str(ROOT / "assets" / "foam_ball.toml"),
             "-o", str(out), "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


# Inputs of the corpus (tests/data/meshes) that must be refused, and words the message must contain.
BAD_INPUTS = [
    ("soup.stl", "open"),
    ("drake_neg_volume.obj", "not closed: 3 open edges"),
    ("drake_two_inverted_faces.obj", "open"),
    ("pr2_l_finger_tip.obj", "--robust"),
    ("box.STL", "--robust"),
    ("drake_one_negative_tetrahedron.vtk", "contains no triangles (4 vertices, 0 faces)"),
    ("bunny.ply", "--robust"),
    ("teapot.stl", "--robust"),
]


@pytest.mark.parametrize("name,word", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_refused_cleanly(meshes, tmp_path, name, word):
    out = tmp_path / "out.vtu"
    result = run("build", meshes / name, "--modulus", "1e5", "-o", out)
    assert result.exit_code == 1, result.output
    assert name in result.stderr          # names the file
    assert "Traceback" not in result.stderr
    assert word and word in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_piece_without_a_rigid_face_builds_with_a_warning(tmp_path):
    """Two separate boxes in one file, only one bonded: the other gets a field of its own (the
    Poisson extent of a part without rigid faces) and the build warns how to hold it
    (docs/model.md §2.2; tests/test_unreachable_pieces.py checks the field)."""
    import trimesh

    first = trimesh.creation.box(extents=(0.02, 0.02, 0.01))
    second = trimesh.creation.box(extents=(0.02, 0.02, 0.01))
    second.apply_translation((0.05, 0.0, 0.0))
    source = tmp_path / "input" / "two_boxes.stl"
    source.parent.mkdir()
    trimesh.util.concatenate([first, second]).export(source)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = run("build", source, "--modulus", "1e5", "--bonded", "below:x=0.01", "--edge-length", "0.003",
                 "-o", out_dir / "two.vtu")
    assert result.exit_code == 0, result.output
    assert "has no path inside the part to a rigid" in result.stderr and "bond a face of it" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(out_dir.iterdir()) == [out_dir / "two.vtu"]
    # Bonding a face of each piece builds.
    result = run("build", source, "--modulus", "1e5", "--bonded", "normal:0,0,-1", "--edge-length", "0.003",
                 "-o", out_dir / "two.vtu", "--quiet")
    assert result.exit_code == 0, result.output


EXAMPLE_SPECS = ("foam_pad.toml", "foam_ball.toml", "paddle.toml")


def test_inconsistently_wound_prism_is_repaired_and_built(meshes, tmp_path):
    """Drake calls this prism 'zero volume': its faces are wound inconsistently, so the signed
    volume cancels. It is closed and orientable, so fixing the winding is a safe repair."""
    result = run("build", meshes / "drake_bad_geometry_volume_zero.obj", "--modulus", "1e5",
                 "-o", tmp_path / "prism.vtu", "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert any("revers" in r or "wind" in r for r in report["repairs"]), report["repairs"]
    assert report["volume"] == pytest.approx(0.5, rel=1e-9)


def test_examples_build_and_validate(tmp_path):
    for spec in [ROOT / "assets" / name for name in EXAMPLE_SPECS]:
        out = tmp_path / (spec.stem + ".vtu")
        result = run("build", "--spec", spec, "-o", out, "--json", "--quiet")
        assert result.exit_code == 0, (spec, result.output)
    result = run("validate", *sorted(tmp_path.glob("*.vtu")), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["valid"] is True


def test_paddle_core_is_rigid_and_pad_back_is_bonded(tmp_path):
    """e = 1 on the core (paddle) and on the bonded back (pad); e = 0 on the free outside."""
    from fieldgen.io.asset import read_asset
    from fieldgen.meshing.tetmesh import boundary_faces_of

    for name in ("paddle", "foam_pad"):
        options, input_path, _ = options_from_spec(ROOT / "assets" / f"{name}.toml")
        build(input_path, tmp_path / f"{name}.vtu", options)
        asset = read_asset(tmp_path / f"{name}.vtu")
        faces = boundary_faces_of(asset.tets)
        on_one = np.all(asset.extent[faces] == 1.0, axis=1)
        on_zero = np.all(asset.extent[faces] == 0.0, axis=1)
        assert on_one.sum() > 0 and on_zero.sum() > 0
        assert np.all(asset.pressure[np.unique(faces[on_zero])] == 0.0)
        if name == "paddle":  # the core faces are inside: near the centre
            centres = asset.points[faces[on_one]].mean(axis=1)
            assert np.all(np.abs(centres[:, 0]) <= 0.0451)
        else:  # the back is the plane z = 0
            assert np.allclose(asset.points[np.unique(faces[on_one])][:, 2], 0.0, atol=1e-12)


def test_hyperbolic_k09_interpolation_error_within_tolerance(tmp_path):
    """k = 0.9: recorded max error <= tolerance, confirmed here by independent sampling in tets."""
    from fieldgen.io.asset import read_asset
    from fieldgen.material.modulus import law_from_metadata

    out = tmp_path / "k09.vtu"
    result = build(ROOT / "assets" / "foam_pad.stl", out,
                   BuildOptions(units="mm", bonded=("normal:0,0,-1",), modulus=1e5, k=0.9, edge_length=2.0))
    asset = read_asset(out)
    law = law_from_metadata(asset.metadata["law"])
    tolerance = asset.metadata["layer_tolerance"]
    assert tolerance == pytest.approx(0.01 * law.max_pressure)
    assert result.max_interpolation_error <= tolerance
    rng = np.random.default_rng(12345)
    bary = rng.dirichlet(np.ones(4), size=(len(asset.tets), 8))          # (t, 8, 4)
    e = np.einsum("tsk,tk->ts", bary, asset.extent[asset.tets])
    p = np.einsum("tsk,tk->ts", bary, asset.pressure[asset.tets])
    sampled = np.max(np.abs(p - law.pressure(e)))
    assert sampled <= tolerance


def test_usage_errors_exit_2(tmp_path, meshes):
    out = tmp_path / "x.vtu"
    assert run("build", meshes / "box.STL", "-o", out).exit_code == 2                  # no modulus
    for k in ("1.5", "1", "-0.1", "nan"):
        result = run("build", meshes / "box.STL", "--modulus", "1e5", "--k", k, "-o", out)
        assert result.exit_code == 2 and "--k" in result.stderr and "[0, 1)" in result.stderr, (k, result.stderr)
    result = run("build", ROOT / "assets" / "foam_ball.obj", "--k", "1.5", "-o", out)       # the example
    assert result.exit_code == 2 and "--k must be in [0, 1)" in result.stderr
    assert run("build", meshes / "box.STL", "--modulus", "-1", "-o", out).exit_code == 2
    assert run("build", meshes / "box.STL", "--units", "furlong", "--modulus", "1", "-o", out).exit_code == 2
    bad_spec = tmp_path / "bad.toml"
    bad_spec.write_text('modulus = 1e5\nedge_lenght = 0.1\n')
    result = run("build", meshes / "box.STL", "--spec", bad_spec, "-o", out)
    assert result.exit_code == 2 and "edge_lenght" in result.stderr and "edge_length" in result.stderr
    assert not out.exists()


def test_selector_matching_nothing_is_refused(tmp_path, meshes):
    out = tmp_path / "x.vtu"
    result = run("build", meshes / "angle_block.STL", "--modulus", "1e5", "--bonded", "above:z=1000", "-o", out)
    assert result.exit_code == 2
    assert "above:z=1000" in result.stderr
    assert not out.exists()


def test_flags_override_spec(tmp_path):
    spec = ROOT / "assets" / "foam_ball.toml"
    out = tmp_path / "ball.vtu"
    result = run("build", "--spec", spec, "--modulus", "3e5", "-o", out, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    from fieldgen.io.asset import read_metadata

    assert read_metadata(out)["law"]["modulus"] == 3e5


def test_console_script_runs(tmp_path):
    exe = shutil.which("fieldgen", path=str(Path(sys.executable).parent))
    assert exe is not None
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and "fieldgen" in proc.stdout


def test_drake_export_from_build(tmp_path):
    """--drake-vtk writes the pre-layering tet mesh as legacy VTK Drake can load, plus the SDF."""
    import vtk
    import xml.etree.ElementTree as ET

    from fieldgen.meshing.tetmesh import tet_volumes

    vtk_path = tmp_path / "drake" / "paddle.vtk"
    vtk_path.parent.mkdir()
    result = run("build", "--spec", ROOT / "assets" / "paddle.toml", "-o", tmp_path / "paddle.vtu",
                 "--drake-vtk", vtk_path, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    reader = vtk.vtkUnstructuredGridReader()
    reader.SetFileName(str(vtk_path))
    reader.Update()
    grid = reader.GetOutput()
    from vtk.util.numpy_support import vtk_to_numpy

    points = vtk_to_numpy(grid.GetPoints().GetData()).astype(float)
    tets = vtk_to_numpy(grid.GetCells().GetConnectivityArray()).reshape(-1, 4)
    assert {grid.GetCellType(i) for i in range(grid.GetNumberOfCells())} == {10}
    assert np.all(6 * tet_volumes(points, tets) > 2.3e-16)          # Drake's absolute test
    assert report["drake"]["tets"] == len(tets) < report["tets"]      # before layering
    sdf = ET.parse(vtk_path.with_suffix(".sdf")).getroot()
    text = ET.tostring(sdf, encoding="unicode")
    assert "hydroelastic_modulus" in text and "hunt_crossley_dissipation" in text
    assert report["drake"]["hydroelastic_modulus"] == pytest.approx(report["pressure_max"], rel=1e-12)
    assert any("core" in w for w in report["warnings"])               # Drake cannot take the core
    # The asset records the same warnings, the export's included, for a later look at it.
    from fieldgen.io.asset import read_metadata

    assert read_metadata(tmp_path / "paddle.vtu")["warnings"] == report["warnings"]


@pytest.mark.parametrize("text", ["hello, this is not a mesh\n", "solid x\nendsolid x\n", ""],
                         ids=["text", "empty solid", "empty file"])
def test_a_file_that_holds_no_mesh_is_named_so(tmp_path, text):
    """Not "a volume mesh is not a surface" (the hint for a .vtk tet mesh) when nothing was read."""
    path = tmp_path / "part.stl"
    path.write_text(text)
    result = run("build", path, "--modulus", "1e5", "-o", tmp_path / "out.vtu")
    assert result.exit_code == 1, result.output
    assert "no mesh could be read" in result.stderr and "not .stl data" in result.stderr
    assert "volume mesh" not in result.stderr and str(path) in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part.stl"]
