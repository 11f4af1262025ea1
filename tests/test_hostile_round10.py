"""Hostile input a tenth sweep found: a scene file kept in the ``-o`` folder under the name of a file
``simulate`` writes (``DIR/trajectories.csv``, ``DIR/view.py``, a frame) was overwritten by the run,
exit 0; a CSV whose header names its two columns in the other order (``force_N,depth_mm``,
``pressure,extent``) was read by position, every force taken for a depth, exit 0; a modulus table
whose header names its pressures in kPa or MPa was read in Pa (a law 1000 times too soft), exit 0;
and an asset with one triangle among its tetrahedra was refused saying all of its cells were of the
triangle's type; an ASCII STL whose facet normals trimesh could not parse (``1.#QNAN``) printed
trimesh's traceback on stderr before a build that succeeded; a scene's ``wrench`` or ``motion`` with
two rows at one time ran with the first of them silently dropped. Each is refused where it enters, naming the file, the problem and the fix, with
the documented exit code, and the input is left as it was."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trimesh
from click.testing import CliRunner
from vtkmodules.vtkCommonCore import vtkPoints, vtkStringArray
from vtkmodules.vtkCommonDataModel import VTK_TETRA, VTK_TRIANGLE, vtkUnstructuredGrid
from vtkmodules.vtkIOXML import vtkXMLUnstructuredGridWriter

from fieldgen.calibrate.data import read_data
from fieldgen.cli.main import main
from fieldgen.errors import InputError
from fieldgen.io.asset import SCHEMA, read_asset
from fieldgen.material.modulus import table_law

#: A box falling freely: refused before its first step in every case here.
FALLING_BOX = """[simulate]
duration = 0.002
dt = 1e-3

[[body]]
name = "box"
geometry = {shape = "box", size = [0.02, 0.02, 0.02]}
mass = 0.1
"""


@pytest.mark.parametrize("name", ["trajectories.csv", "view.py", "bodies.pvd", "frames/contact_000001.vtp"])
@pytest.mark.parametrize("linked", [False, True], ids=["the file", "a link to it"])
def test_a_scene_file_among_the_run_outputs_is_refused_before_the_run(tmp_path, name, linked):
    out = tmp_path / "out"
    scene = out / name
    scene.parent.mkdir(parents=True)
    scene.write_text(FALLING_BOX)
    given = scene
    if linked:                          # the same file by another path
        given = tmp_path / "scene.toml"
        given.symlink_to(scene)
    result = CliRunner().invoke(main, ["simulate", str(given), "-o", str(out), "-q"])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, (SystemExit, type(None))), result.exception
    assert f"is {name}, a file simulate writes in -o" in result.stderr, result.output
    assert "would overwrite the input" in result.stderr and "Give -o another folder" in result.stderr
    assert scene.read_text() == FALLING_BOX
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [name]


@pytest.mark.parametrize("header", ["force_N,depth_mm", "force, depth", "Force [N]; Depth [mm]",
                                    "force (N)   depth (mm)"])
def test_calibration_data_whose_header_swaps_the_columns_is_refused(tmp_path, header):
    sep = ";" if ";" in header else ("   " if "   " in header else ",")
    path = tmp_path / "press.csv"
    path.write_text(header + "\n" + "".join(f"{f}{sep}{d}\n" for d, f in [(0.2, 0.11), (0.4, 0.32), (0.6, 0.59)]))
    with pytest.raises(InputError, match=r"header names the columns force, depth.*order depth, force") as error:
        read_data(path, "mm,N")
    assert str(path) in str(error.value)


def test_a_header_in_the_order_read_still_reads(tmp_path):
    path = tmp_path / "press.csv"
    path.write_text("depth_mm,force_N\n0.2,0.11\n0.4,0.32\n0.6,0.59\n")
    data = read_data(path, "mm,N")
    assert data.depth.tolist() == pytest.approx([2e-4, 4e-4, 6e-4]) and data.force.tolist() == [0.11, 0.32, 0.59]
    table = tmp_path / "law.csv"
    table.write_text("extent,pressure_Pa\n0,0\n0.5,1e5\n1,3e5\n")
    assert table_law(table).modulus == 3e5


@pytest.mark.parametrize("header, words", [
    ("pressure,extent", "header names the columns pressure, extent"),
    ("extent,pressure_kPa", "names the pressure in kPa ('pressure_kPa')"),
    ("extent pressure [MPa]", "names the pressure in MPa ('pressure [MPa]')"),
    ("extent, pressure (psi)", "names the pressure in psi"),
])
def test_a_modulus_table_header_that_would_be_misread_is_refused(tmp_path, header, words):
    path = tmp_path / "law.csv"
    rows = [(0, 0), (0.5, 100), (1, 300)]
    swapped = header.startswith("pressure")
    path.write_text(header + "\n" + "".join(f"{p},{e}\n" if swapped else f"{e},{p}\n" for e, p in rows))
    with pytest.raises(InputError, match=r"read") as error:
        table_law(path)
    assert words in str(error.value) and str(path) in str(error.value)


def test_build_refuses_a_table_in_kpa_before_meshing(tmp_path):
    path = tmp_path / "law.csv"
    path.write_text("extent,pressure_kPa\n0,0\n0.5,100\n1,300\n")
    trimesh.creation.box([0.02, 0.02, 0.01]).export(tmp_path / "pad.stl")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["build", str(tmp_path / "pad.stl"), "--table", str(path),
                                       "-o", str(out / "x.vtu"), "-q"])
    assert result.exit_code == 1, result.output
    assert "names the pressure in kPa" in result.stderr and "Give the pressures in Pa" in result.stderr
    assert not out.exists()


def test_an_asset_with_one_cell_not_a_tet_says_how_many(tmp_path):
    grid = vtkUnstructuredGrid()
    points = vtkPoints()
    for corner in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1)]:
        points.InsertNextPoint(*corner)
    grid.SetPoints(points)
    grid.InsertNextCell(VTK_TETRA, 4, [0, 1, 2, 3])
    grid.InsertNextCell(VTK_TETRA, 4, [1, 2, 3, 4])
    grid.InsertNextCell(VTK_TRIANGLE, 3, [1, 2, 4])
    metadata = vtkStringArray()
    metadata.SetName("fieldgen_metadata")
    metadata.InsertNextValue(json.dumps({"schema": SCHEMA}))
    grid.GetFieldData().AddArray(metadata)
    path = tmp_path / "mixed.vtu"
    writer = vtkXMLUnstructuredGridWriter()
    writer.SetFileName(str(path))
    writer.SetInputData(grid)
    writer.Write()
    with pytest.raises(InputError, match=r"1 of its 3 cells are of VTK types \[5\], not tetrahedra"):
        read_asset(path)


def test_an_ascii_stl_with_normals_trimesh_cannot_parse_reads_without_a_traceback(tmp_path):
    text = trimesh.creation.box([0.02, 0.02, 0.01]).export(file_type="stl_ascii")
    path = tmp_path / "qnan.stl"          # as old Windows exporters write a NaN normal
    path.write_text(re.sub(r"facet normal \S+ \S+ \S+", "facet normal -1.#QNAN -1.#QNAN -1.#QNAN", text))
    # In a process of its own, as the command runs: no logging handler set (pytest sets its own),
    # so a record trimesh logs reaches Python's last-resort handler, which prints it on stderr.
    code = "import sys; from fieldgen.io.surface_readers import read_triangles; print(len(read_triangles(sys.argv[1]).faces))"
    run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "12", run.stderr
    assert "Traceback" not in run.stderr and "face_normals" not in run.stderr, run.stderr


@pytest.mark.parametrize("rows", [
    'wrench = [[0, 0, 0, 1, 0, 0, 0], [0.001, 0, 0, 5, 0, 0, 0], [0.001, 0, 0, -5, 0, 0, 0]]',
    'kind = "kinematic"\nmotion = [[0, 0, 0, 0.1, 0, 0, 0], [0, 0, 0, -0.1, 0, 0, 0]]',
], ids=["wrench", "motion"])
def test_two_rows_at_one_time_are_refused_not_one_dropped(tmp_path, rows):
    scene = tmp_path / "scene.toml"          # the later row won: the earlier was never applied
    text = FALLING_BOX + rows + "\n"
    scene.write_text(text.replace("mass = 0.1\n", "") if "kinematic" in rows else text)
    result = CliRunner().invoke(main, ["simulate", str(scene), "-q"])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, (SystemExit, type(None))), result.exception
    assert "with t increasing (no two rows at one time)" in result.stderr and str(scene) in result.stderr
