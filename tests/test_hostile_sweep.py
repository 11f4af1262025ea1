"""More hostile input (docs/model.md §1.4): face indices past the vertex list, named pipes given
as inputs, byte-order marks, spec paths of the wrong type, assets whose tets point past their
points, counts that would fill the memory or run for days, simulations that overflow, batch
items writing over their own core, impossible inertias. Each is refused with its exit code and a
message naming the file and the problem, with no traceback, no hang and nothing left behind; or,
where the input is usable (a byte-order mark), read as meant."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from asset_edit import edited_copy
from test_hostile_input import FLOOR, built_ball, cube_obj, fingerprint, scene, write

ROOT = Path(__file__).resolve().parents[1]
PAD_SPEC = ROOT / "assets" / "foam_pad.toml"
PRESS = ROOT / "assets" / "press.csv"
FIELDGEN = [sys.executable, "-m", "fieldgen.cli.main"]
BUILD = ["--modulus", "1e5", "--edge-length", "0.01", "-q"]
BOM = b"\xef\xbb\xbf"


def _tets_past_points(src: Path, dst: Path) -> Path:
    """A copy of the asset ``src`` whose first tet refers to a point it does not have."""
    import vtk
    from vtk.util.numpy_support import vtk_to_numpy

    def edit(grid) -> None:
        tets = vtk_to_numpy(grid.GetCells().GetConnectivityArray()).reshape(-1, 4).copy()
        tets[0, 0] = 10 ** 7
        cells = vtk.vtkCellArray()
        for tet in tets:
            cells.InsertNextCell(4, [int(k) for k in tet])
        grid.SetCells(vtk.VTK_TETRA, cells)

    return edited_copy(src, dst, edit)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The inputs of every case, in one folder the cases only read."""
    folder = tmp_path_factory.mktemp("inputs")
    built_ball(folder)
    cube = cube_obj(0.02)
    text = "\n".join(cube) + "\n"
    write(folder / "cube.obj", text)
    write(folder / "bom.obj", BOM + text.encode())
    write(folder / "big_index.obj", text.replace("f 1 3 2", "f 99999999999999999999 3 2"))
    vertices = "\n".join(line[2:] for line in cube if line.startswith("v "))
    faces = "\n".join("3 " + " ".join(str(int(k) - 1) for k in line.split()[1:])
                      for line in cube if line.startswith("f "))
    ply = ("ply\nformat ascii 1.0\nelement vertex 8\nproperty float x\nproperty float y\nproperty float z\n"
           f"element face 12\nproperty list uchar int vertex_indices\nend_header\n{vertices}\n{faces}\n")
    write(folder / "past_vertices.ply", ply.replace("3 0 2 1", "3 0 2 50"))
    os.mkfifo(folder / "pipe.toml")
    write(folder / "input_int.toml", "input = 5\nmodulus = 1e5\nedge_length = 0.01\n")
    write(folder / "input_table.toml", "[input]\nx = 1\n")
    write(folder / "huge_tolerance.toml", "modulus = 1e5\nedge_length = 0.01\nsurface_tolerance = 1e300\n")
    write(folder / "bom_spec.toml", BOM + b'input = "cube.obj"\nmodulus = 1e5\nedge_length = 0.01\n')
    write(folder / "bom_scene.toml", BOM + scene().encode())
    write(folder / "bom_manifest.toml", BOM + b'[[asset]]\ninput = "cube.obj"\nmodulus = 1e5\nedge_length = 0.01\n')
    write(folder / "pipe_item.toml", '[[asset]]\ninput = "pipe.toml"\noutput = "p.vtu"\nmodulus = 1e5\n')
    write(folder / "core_onto.toml", '[[asset]]\ninput = "cube.obj"\ncore = "core.vtu"\noutput = "core.vtu"\n'
                                     'modulus = 1e5\nedge_length = 0.01\n')
    write(folder / "table_onto.toml", '[[asset]]\ninput = "cube.obj"\ntable = "t.vtu"\noutput = "t.vtu"\n'
                                      'edge_length = 0.01\n')
    (folder / "core.vtu").write_bytes((folder / "asset.vtu").read_bytes())
    (folder / "t.vtu").write_bytes(b"extent,pressure\n0,0\n1,1e5\n")
    _tets_past_points(folder / "asset.vtu", folder / "tets_past_points.vtu")
    write(folder / "segments.toml", scene(geometry='{shape = "cylinder", radius = 0.01, height = 0.01, '
                                                   'segments = 100000000000}'))
    write(folder / "cells.toml", scene(floor=FLOOR.replace("cells = [2, 2], layers = 1",
                                                           "cells = [100000, 100000], layers = 1000")))
    write(folder / "heavy.toml", scene(mass="mass = 1e-9\nwrench = [0, 0, -1e19, 0, 0, 0]", duration=1e300, dt=1e299))
    write(folder / "inertia_triangle.toml", scene(mass="mass = 0.1\ninertia = [1, 1, 3]"))
    write(folder / "inertia_skew.toml", scene(mass="mass = 0.1\ninertia = [[1, 0.5, 0], [0, 1, 0], [0, 0, 1]]"))
    edited_copy(folder / "asset.vtu", folder / "nan_extent.vtu",
                lambda grid: grid.GetPointData().GetArray("extent").SetValue(0, float("nan")))
    return folder


def _refused(inputs: Path, tmp_path: Path, monkeypatch, args: list[str], code: int, words: str):
    """Run ``args`` ({i}: the inputs, {o}: an empty output folder) in-process; check the exit code,
    the message, no traceback, nothing written and the inputs unchanged."""
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    before = fingerprint_files(inputs)
    result = CliRunner().invoke(main, [a.replace("{i}", str(inputs)).replace("{o}", str(out)) for a in args])
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, (SystemExit, type(None))), result.exception      # no traceback
    assert "Traceback" not in result.output
    assert words in result.stderr, result.output
    assert list(out.iterdir()) == []
    assert fingerprint_files(inputs) == before
    return result


def fingerprint_files(folder: Path) -> dict[str, str]:
    """:func:`test_hostile_input.fingerprint` of the regular files (a pipe is never opened)."""
    pipes = {p for p in folder.iterdir() if p.is_fifo()}
    for pipe in pipes:
        pipe.rename(pipe.with_suffix(".pipe-aside"))
    try:
        return fingerprint(folder)
    finally:
        for pipe in pipes:
            pipe.with_suffix(".pipe-aside").rename(pipe)


CASES = [
    ("PLY face past the vertices", ["build", "{i}/past_vertices.ply", *BUILD, "-o", "{o}/x.vtu"], 1,
     "face 1 of 12 refers to vertex 51 (counting from 1), but the file holds 8 vertices"),
    ("rigid PLY face past the vertices", ["contact", "{i}/asset.vtu", "{i}/past_vertices.ply"], 1,
     "refers to vertex 51"),
    ("OBJ vertex number past int64", ["build", "{i}/big_index.obj", *BUILD, "-o", "{o}/x.vtu"], 1,
     "a face refers to a vertex numbered past"),
    ("spec input = 5", ["build", "--spec", "{i}/input_int.toml", "-o", "{o}/x.vtu"], 2,
     "option 'input' must be a path string, got 5"),
    ("spec [input] table", ["build", "--spec", "{i}/input_table.toml", "-o", "{o}/x.vtu"], 2,
     "option 'input' must be a path string"),
    ("inspect: tets past the points", ["inspect", "{i}/tets_past_points.vtu"], 1,
     "its tets refer to points 0..10000000"),
    ("contact --repeat past its bound", ["contact", "{i}/asset.vtu", "{i}/cube.obj", "--repeat", "10001"], 2,
     "10001 is not in the range 1<=x<=10000"),
    ("scene cylinder of 1e11 segments", ["simulate", "{i}/segments.toml"], 2, "segments = 100000000000 is not"),
    ("scene slab of 6e13 tets", ["simulate", "{i}/cells.toml"], 2, "make 6e+13 tets"),
    ("calibrate --knots 99999999", ["calibrate", "--spec", str(PAD_SPEC), "--units", "mm,N", "--indenter",
     "sphere:10", "--data", str(PRESS), "--law", "table", "--knots", "99999999", "-o", "{o}/x.vtu"], 2,
     "asks for more than 100 table points"),
    ("a simulation that overflows", ["simulate", "{i}/heavy.toml", "-o", "{o}/run"], 1,
     "the simulation diverged: body 'box'"),
    ("batch output onto the item's core", ["batch", "{i}/core_onto.toml", "-j", "1"], 2,
     "is the same file as [[asset]] 1 (cube.obj) core"),
    ("batch output onto the item's table", ["batch", "{i}/table_onto.toml", "-j", "1"], 2,
     "is the same file as [[asset]] 1 (cube.obj) table"),
    ("inspect --png of a NaN asset", ["inspect", "{i}/nan_extent.vtu", "--png", "{o}/x.png"], 1,
     "(no picture or script written)"),
    ("--edge-length 1e308", ["build", "{i}/cube.obj", "--modulus", "1e5", "--edge-length", "1e308", "-o",
     "{o}/x.vtu"], 2, "--edge-length 1e+308 is too large to compute with"),
    ("--modulus 1e308", ["build", "{i}/cube.obj", "--modulus", "1e308", "--edge-length", "0.01", "-o",
     "{o}/x.vtu"], 2, "--modulus 1e+308 Pa is above 1e+13 Pa"),
    ("--surface-tolerance 1e300", ["build", "{i}/cube.obj", *BUILD, "--surface-tolerance", "1e300", "-o",
     "{o}/x.vtu"], 2, "--surface-tolerance 1e+300 is too large to compute with (above 1e+100)"),
    ("spec surface_tolerance = 1e300", ["build", "{i}/cube.obj", "--spec", "{i}/huge_tolerance.toml", "-o",
     "{o}/x.vtu"], 2, "huge_tolerance.toml: surface_tolerance 1e+300 is too large to compute with"),
    ("scene inertia [1, 1, 3]", ["simulate", "{i}/inertia_triangle.toml"], 2, "none more than the other two"),
    ("scene inertia not symmetric", ["simulate", "{i}/inertia_skew.toml"], 2, "symmetric positive-definite"),
]


@pytest.mark.filterwarnings("error::RuntimeWarning")     # numpy's overflow notes are no message for a user
@pytest.mark.parametrize("args, code, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_is_refused(inputs, tmp_path, monkeypatch, args, code, words):
    _refused(inputs, tmp_path, monkeypatch, args, code, words)


#: A named pipe where a file is read: refused at once (a read would wait for a writer for ever).
PIPES = [
    ("build INPUT", ["build", "{i}/pipe.toml", *BUILD, "-o", "{o}/x.vtu"], 1),
    ("build --spec", ["build", "--spec", "{i}/pipe.toml", "-o", "{o}/x.vtu"], 2),
    ("build --table", ["build", "{i}/cube.obj", "--table", "{i}/pipe.toml", "-o", "{o}/x.vtu"], 1),
    ("calibrate --data", ["calibrate", "--spec", str(PAD_SPEC), "--units", "mm,N", "--indenter", "sphere:10",
                          "--data", "{i}/pipe.toml", "-o", "{o}/x.vtu"], 1),
    ("batch MANIFEST", ["batch", "{i}/pipe.toml", "--output-dir", "{o}"], 2),
    ("batch item input", ["batch", "{i}/pipe_item.toml", "--output-dir", "{o}", "-j", "1"], 1),
    ("simulate SCENE_FILE", ["simulate", "{i}/pipe.toml"], 2),
    ("contact B", ["contact", "{i}/asset.vtu", "{i}/pipe.toml"], 1),
]


@pytest.mark.parametrize("args, code", [c[1:] for c in PIPES], ids=[c[0] for c in PIPES])
def test_a_named_pipe_as_input_fails_at_once(inputs, tmp_path, args, code):
    out = tmp_path / "out"
    out.mkdir()
    command = FIELDGEN + [a.replace("{i}", str(inputs)).replace("{o}", str(out)) for a in args]
    done = subprocess.run(command, cwd=out, capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{inputs / 'pipe.toml'}: " in done.stderr and "is a named pipe (FIFO)" in done.stderr, done.stderr
    assert list(out.iterdir()) == []


def test_a_byte_order_mark_is_read_as_meant(inputs, tmp_path, monkeypatch):
    """OBJ, spec, scene and manifest files saved with a UTF-8 byte-order mark (Windows editors)
    read as without it: the OBJ keeps its first vertex, the TOML files parse."""
    monkeypatch.chdir(tmp_path)
    runs = [["build", str(inputs / "bom.obj"), *BUILD, "-o", str(tmp_path / "obj.vtu")],
            ["build", "--spec", str(inputs / "bom_spec.toml"), "-q", "-o", str(tmp_path / "spec.vtu")],
            ["simulate", str(inputs / "bom_scene.toml"), "-q"],
            ["batch", str(inputs / "bom_manifest.toml"), "-q", "-j", "1", "--output-dir", str(tmp_path / "batch")]]
    for args in runs:
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, (args, result.output)
    assert (tmp_path / "obj.vtu").is_file() and (tmp_path / "spec.vtu").is_file()
    assert (tmp_path / "batch" / "cube.vtu").is_file()
