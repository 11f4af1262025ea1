"""Hostile input an eleventh sweep found: a PLY whose face list holds an index that is no whole
number (``3 0 2.7 3`` in ASCII, a ``float`` or ``double`` list in binary) was read with the index
truncated (the face joined another vertex, exit 0), and an ASCII PLY whose index is too large for
the type its header declares (``299`` in a ``uchar`` list) was read wrapped round (vertex 43, exit
0); a face list count of ``3.5`` was read as 3; a GLB whose indices are stored as floats collapsed
every face onto vertex 0; an OBJ or OFF number ``1_0`` was read as ten. A calibration CSV whose
header is a testing machine's (``Load (N),Extension (mm)``) was read by position, every load taken
for a depth, and one naming a unit --units does not take (``depth_um``, ``force_kgf``) was read in
--units' unit; a modulus table naming its pressure ``stress (kPa)`` was read in Pa. A legacy
``.vtk`` declaring more cells than its data hold made VTK's reader corrupt the heap (``free():
invalid next size``, exit 134). A JUnit report whose names held a control character was no XML a
parser reads. A file of a few thousand notched polygons took an hour to read. Each is refused where
it enters (or, for the report and the polygons, made right), naming the file, the problem and the
fix, with the documented exit code, and nothing written."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

from fieldgen.calibrate.data import read_data
from fieldgen.cli.main import main
from fieldgen.errors import InputError
from fieldgen.io.legacy_vtk import check_legacy_vtk
from fieldgen.io.ply_indices import check_ascii_indices
from fieldgen.io.surface_readers import read_triangles
from fieldgen.material.modulus import table_law

PAD_SPEC = Path(__file__).resolve().parents[1] / "assets" / "foam_pad.toml"

#: A unit tetrahedron's corners and outward faces (counted from 0).
CORNERS = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
FACES = [["0", "2", "1"], ["0", "1", "3"], ["0", "3", "2"], ["1", "2", "3"]]


def ascii_ply(faces, index_type="int", corners=CORNERS, count_type="uchar") -> str:
    head = ("ply\nformat ascii 1.0\n"
            f"element vertex {len(corners)}\nproperty float x\nproperty float y\nproperty float z\n"
            f"element face {len(faces)}\nproperty list {count_type} {index_type} vertex_indices\nend_header\n")
    return (head + "".join(" ".join(map(str, c)) + "\n" for c in corners)
            + "".join(" ".join([str(len(f)), *f]) + "\n" for f in faces))


def binary_ply(faces, index_type="float", code="<f4") -> bytes:
    head = ("ply\nformat binary_little_endian 1.0\n"
            f"element vertex {len(CORNERS)}\nproperty float x\nproperty float y\nproperty float z\n"
            f"element face {len(faces)}\nproperty list uchar {index_type} vertex_indices\nend_header\n").encode()
    body = np.array(CORNERS, "<f4").tobytes()
    body += b"".join(struct.pack("B", len(f)) + np.array(f, code).tobytes() for f in faces)
    return head + body


def _with(last):
    return [*FACES[:3], last]


PLYS = [
    # (id, file contents, message fragment)
    ("ASCII int list, index 2.7", ascii_ply(_with(["1", "2.7", "3"])),
     "face 4 of 4 has the vertex index 2.7, which is not a whole number"),
    ("ASCII float list, index 2.7", ascii_ply(_with(["1", "2.7", "3"]), "float"),
     "face 4 of 4 has the vertex index 2.7, which is not a whole number"),
    ("ASCII double list, index nan", ascii_ply(_with(["1", "nan", "3"]), "double"),
     "the vertex index nan, which is not a whole number"),
    ("binary float list, index 2.7", binary_ply(_with([1, 2.7, 3])),
     "face 4 of 4 has the vertex index 2.7, which is not a whole number"),
    ("binary double list, index nan", binary_ply(_with([1, np.nan, 3]), "double", "<f8"),
     "face 4 of 4 has the vertex index nan, which is not a whole number"),
    ("ASCII uchar list, index 299", ascii_ply(_with(["1", "2", "299"]), "uchar",
                                              corners=CORNERS + [(2, 2, 2)] * 296),
     "face 4 of 4 has the vertex index 299, which its header's index type 'uchar' cannot hold"),
    ("ASCII int list, index 2**32 + 1", ascii_ply(_with(["1", "2", "4294967297"])),
     "the vertex index 4294967297, which its header's index type 'int' cannot hold"),
    ("ASCII list count 3.5", ascii_ply(_with(["1", "2", "3"])).replace("\n3 1 2 3\n", "\n3.5 1 2 3\n"),
     "face 4 of 4 starts its list with '3.5', not a whole count of vertices"),
]


@pytest.mark.parametrize("content, words", [c[1:] for c in PLYS], ids=[c[0] for c in PLYS])
def test_a_ply_face_index_that_would_be_cast_to_another_vertex_is_refused(tmp_path, content, words):
    """Before: the index truncated (2.7 read as 2), wrapped round (299 as 43 in a uchar list) or,
    past an int, named as vertex -2147483647; a count of 3.5 read as 3; exit 0 for all but that."""
    path = tmp_path / "part.ply"
    (path.write_text if isinstance(content, str) else path.write_bytes)(content)
    before = path.read_bytes()
    with pytest.raises(InputError) as error:
        read_triangles(path)
    assert words in str(error.value) and str(path) in str(error.value)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["build", str(path), "--modulus", "1e5", "-o", str(out / "x.vtu"), "-q"])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, (SystemExit, type(None))), result.exception
    assert f"{path}: " in result.stderr and words in result.stderr and "Traceback" not in result.output
    assert "RuntimeWarning" not in result.output
    assert not out.exists() and path.read_bytes() == before


@pytest.mark.parametrize("content", [
    ascii_ply(_with(["1.0", "2.0", "3e0"]), "float"),
    ascii_ply(_with(["1", "2", "3"]), "uint"),
    ascii_ply([["0", "2", "1", "1"], *FACES[1:]], "int"),          # a quad with a repeated corner
    binary_ply(_with([1.0, 2.0, 3.0])),
    binary_ply(_with([1, 2, 3]), "int", "<i4"),
], ids=["ASCII whole floats", "ASCII uint", "ASCII quad", "binary whole floats", "binary int"])
def test_a_ply_whose_indices_are_whole_numbers_reads(tmp_path, content):
    path = tmp_path / "part.ply"
    (path.write_text if isinstance(content, str) else path.write_bytes)(content)
    faces = read_triangles(path).faces
    assert faces.dtype == np.int64 and [1, 2, 3] in faces.tolist() and len(faces) >= 4


def test_a_junit_report_stays_well_formed_whatever_the_names_hold(tmp_path):
    """A manifest's output holding a control character (TOML's ``\\u0001``), and a missing input
    holding another, whose error message quotes it. Before: the characters went into the JUnit XML
    as they were, and no XML parser could read the report (``not well-formed (invalid token)``)."""
    trimesh.creation.box([0.02, 0.02, 0.02]).export(tmp_path / "cube.stl")
    manifest = tmp_path / "manifest.toml"
    manifest.write_text('[[asset]]\ninput = "cube.stl"\nmodulus = 1e5\nedge_length = 0.01\n'
                        'output = "a\\u0001<&]]>.vtu"\n\n'
                        '[[asset]]\ninput = "missing\\u0002.stl"\nmodulus = 1e5\noutput = "b.vtu"\n')
    junit, report = tmp_path / "junit.xml", tmp_path / "report.json"
    result = CliRunner().invoke(main, ["batch", str(manifest), "-j", "1", "--output-dir", str(tmp_path / "out"),
                                       "--junit", str(junit), "--report", str(report), "-q"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    cases = ElementTree.parse(junit).getroot().findall(".//testcase")
    assert [case.get("name") for case in cases] == [str(tmp_path / "out" / "a\\x01<&]]>.vtu"),
                                                    str(tmp_path / "out" / "b.vtu")]
    assert "missing\\x02.stl: input file not found" in cases[1].find("failure").get("message")
    items = json.loads(report.read_text())["items"]             # JSON holds the names as they are
    assert items[0]["output"].endswith("a\u0001<&]]>.vtu") and items[1]["status"] == "failed"


@pytest.mark.parametrize("header, words", [
    ("Load (N),Extension (mm)", "its header names the columns force, depth (Load, Extension)"),
    ("load_N;displacement_mm", "its header names the columns force, depth (load_N, displacement_mm)"),
    ("depth_um,force_N", "its header names depth in um ('depth_um'), a unit --units does not take"),
    ("Displacement (µm),Load (N)", "its header names depth in µm ('Displacement (µm)'), a unit --units does not take"),
    ("depth_mm,force_kgf", "its header names force in kgf ('force_kgf'), a unit --units does not take"),
    ("Displacement (in),Load (N)", "its header names depth in in ('Displacement (in)'), but --units gives mm"),
    # spelled out, after a space or a hyphen, in decanewtons (a review found these read in --units)
    ("Displacement (inches),Force (N)", "its header names depth in in ('Displacement (inches)'), but --units gives mm"),
    ("Displacement (millimeters),load (kilonewtons)", "its header names force in kN ('load (kilonewtons)')"),
    ("depth mm,force daN", "its header names force in daN ('force daN'), a unit --units does not take"),
    ("depth-um,force-N", "its header names depth in um ('depth-um'), a unit --units does not take"),
])
def test_calibration_data_whose_header_would_be_misread_is_refused(tmp_path, header, words):
    """A testing machine's header (``Load (N)``, ``Extension (mm)``) in the other order, or a unit
    --units does not take. Before: read by position and in --units' unit: every load taken for a
    depth, 100 µm read as 100 mm (a law a thousand times too soft), exit 0."""
    path = tmp_path / "press.csv"
    text = header + "\n" + "".join(f"{d},{f}\n" for d, f in [(0.2, 0.11), (0.4, 0.32), (0.6, 0.59)])
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as error:
        read_data(path, "mm,N")
    assert words in str(error.value) and str(path) in str(error.value)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["calibrate", "--spec", str(PAD_SPEC), "--indenter", "sphere:10", "--units",
                                       "mm,N", "--data", str(path), "-o", str(out / "x.vtu"), "--json"])
    assert result.exit_code == 1, result.output
    assert words in json.loads(result.stdout)["error"] and str(path) in result.stderr
    assert "Traceback" not in result.output and not out.exists() and path.read_text(encoding="utf-8") == text


@pytest.mark.parametrize("header", ["Displacement (mm),Load (N)", "depth_abs,force_N", "indentation/mm;load/N",
                                    "Displacement in mm,Force in N", "depth millimetres,load newtons"])
def test_a_machine_header_in_the_order_and_unit_read_still_reads(tmp_path, header):
    path = tmp_path / "press.csv"
    path.write_text(header + "\n0.2,0.11\n0.4,0.32\n0.6,0.59\n")
    data = read_data(path, "mm,N")
    assert data.depth.tolist() == pytest.approx([2e-4, 4e-4, 6e-4]) and data.force.tolist() == [0.11, 0.32, 0.59]


@pytest.mark.parametrize("header, words", [
    ("extent, stress (kPa)", "its header names the pressure in kPa ('stress (kPa)')"),
    ("stress_Pa,extent", "its header names the columns pressure, extent (stress_Pa, extent)"),
    ("extent, pressure (N/mm2)", "its header names the pressure in N ('pressure (N'"),    # N/mm2 is MPa
    ("extent, pressure [kgf/cm^2]", "its header names the pressure in kgf"),
    ("extent, pressure kPa", "its header names the pressure in kPa ('pressure kPa')"),
    ("extent, pressure-megapascals", "its header names the pressure in MPa ('pressure-megapascals')"),
])
def test_a_modulus_table_naming_its_pressure_a_stress_is_read_as_one(tmp_path, header, words):
    """Before: a column named ``stress`` was no pressure to the header checks, so kPa were read as
    Pa (a law a thousand times too soft) and a swapped table read by position, exit 0; and a unit
    outside a list of other pressure units (N/mm2, kgf/cm^2) was read as Pa. Any unit but Pa is
    refused now."""
    path = tmp_path / "law.csv"
    swapped = header.startswith("stress")
    text = header + "\n" + "".join(f"{p},{e}\n" if swapped else f"{e},{p}\n" for e, p in [(0, 0), (0.5, 100), (1, 300)])
    path.write_text(text)
    trimesh.creation.box([0.02, 0.02, 0.01]).export(tmp_path / "pad.stl")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["build", str(tmp_path / "pad.stl"), "--table", str(path),
                                       "-o", str(out / "x.vtu"), "-q"])
    assert result.exit_code == 1, result.output
    assert f"{path}: {words}" in result.stderr and "Traceback" not in result.output
    assert not out.exists() and path.read_text() == text


def test_a_file_of_many_notched_polygons_reads_into_triangles_that_cover_each_star(tmp_path):
    """200 star-shaped faces of 256 corners each (1.5 MB of OBJ), each split by ear clipping. Before:
    0.37 s a face, a corner tested at a time in Python (75 s here; an hour for a 25 MB file); now the
    corners are tested at once, and the triangles are the same. (No time is asserted: speed is a
    benchmark's; this checks the vectorised clipping's triangles cover each star exactly.)"""
    n, count = 256, 200
    angle = np.linspace(0, 2 * np.pi, n, endpoint=False)
    radius = np.where(np.arange(n) % 2 == 0, 1.0, 0.5)
    star = np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])
    lines = [f"v {x:.6f} {y:.6f} {z}" for z in range(count) for x, y in star]
    lines += ["f " + " ".join(str(z * n + i + 1) for i in range(n)) for z in range(count)]
    path = tmp_path / "stars.obj"
    path.write_text("\n".join(lines) + "\n")
    read = read_triangles(path)
    faces = read.faces
    assert len(faces) == count * (n - 2)
    corners = np.asarray(read.vertices)[faces]
    u, v = corners[:, 1, :2] - corners[:, 0, :2], corners[:, 2, :2] - corners[:, 0, :2]
    areas = 0.5 * np.abs(u[:, 0] * v[:, 1] - u[:, 1] * v[:, 0])
    x, y = star[:, 0], star[:, 1]
    star_area = 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))     # the shoelace formula
    assert np.allclose(areas.reshape(count, n - 2).sum(axis=1), star_area, rtol=1e-5)     # (6 decimals written)


LEGACY_HEAD = "# vtk DataFile Version {version}\ntwo tets\nASCII\nDATASET UNSTRUCTURED_GRID\n" \
              "POINTS 5 double\n0 0 0\n0.01 0 0\n0 0.01 0\n0 0 0.01\n0.01 0.01 0.01\n"
LEGACY = [
    # (id, cells and types after the points, message fragment)
    ("CELLS declares 3 of 2 (VTK's reader corrupted the heap: exit 134)",
     "CELLS 3 10\n4 0 1 2 3\n4 1 2 3 4\nCELL_TYPES 2\n10\n10\n",
     "its CELLS section declares 3 cells in 10 numbers, but at cell 3 its numbers end"),
    ("a point number 2.7", "CELLS 2 10\n4 0 1 2 3\n4 1 2.7 3 4\nCELL_TYPES 2\n10\n10\n",
     "cell 2 of its CELLS section has a point number that is not a whole number"),
    ("OFFSETS past the CONNECTIVITY (cells read past it)",
     "CELLS 4 8\nOFFSETS vtktypeint64\n0 4 8 12\nCONNECTIVITY vtktypeint64\n0 1 2 3 1 2 3 4\nCELL_TYPES 3\n10 10 10\n",
     "its OFFSETS section does not run from 0 to 8"),
    ("CELL_TYPES of 3 for 2 cells", "CELLS 2 10\n4 0 1 2 3\n4 1 2 3 4\nCELL_TYPES 3\n10\n10\n",
     "its CELL_TYPES section declares 3 types for its 2 cells"),
]


@pytest.mark.parametrize("cells, words", [c[1:] for c in LEGACY], ids=[c[0] for c in LEGACY])
def test_a_legacy_vtk_whose_counts_do_not_match_its_data_is_refused(tmp_path, cells, words):
    """Run in a process of its own, as the command runs: before, VTK's legacy reader trusted the
    CELLS line, read past its data, and glibc aborted the process (``free(): invalid next size``,
    exit 134, no word of the file) or the cells were read from memory past the connectivity."""
    path = tmp_path / "tets.vtk"
    path.write_text(LEGACY_HEAD.format(version="5.1" if "OFFSETS" in cells else "3.0") + cells)
    trimesh.creation.box([0.02, 0.02, 0.02]).export(tmp_path / "cube.stl")
    code = "import sys; from fieldgen.cli.main import main; sys.exit(main())"
    run = subprocess.run([sys.executable, "-c", code, "contact", str(path), str(tmp_path / "cube.stl"),
                          "--modulus-a", "1e5", "--json", "-q"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, (run.returncode, run.stderr)
    assert f"{path}: {words}" in run.stderr and words in json.loads(run.stdout)["error"]
    assert "Traceback" not in run.stderr and "free()" not in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cube.stl", "tets.vtk"]


def test_a_legacy_vtk_whose_counts_match_is_read(tmp_path):
    """The same two tets, counted right in both layouts, pass the count check (VTK then reads them)."""
    for version, cells in [("3.0", "CELLS 2 10\n4 0 1 2 3\n4 1 2 3 4\nCELL_TYPES 2\n10\n10\n"),
                           ("5.1", "CELLS 3 8\nOFFSETS vtktypeint64\n0 4 8\nCONNECTIVITY vtktypeint64\n"
                                   "0 1 2 3 1 2 3 4\nCELL_TYPES 2\n10 10\n")]:
        text = LEGACY_HEAD.format(version=version) + cells
        check_legacy_vtk("tets.vtk", text.encode())
    data = (Path(__file__).parent / "data" / "meshes" / "yellow_bell_pepper_no_stem_low.vtk").read_bytes()
    check_legacy_vtk("pepper.vtk", data)


def _glb_with_index_type(component_type: int) -> bytes:
    """A 2 cm box as trimesh writes a GLB, its index accessor's component type set to another."""
    data = trimesh.creation.box([0.02, 0.02, 0.02]).export(file_type="glb")
    length = struct.unpack_from("<I", data, 12)[0]
    document = json.loads(data[20:20 + length])
    document["accessors"][document["meshes"][0]["primitives"][0]["indices"]]["componentType"] = component_type
    text = json.dumps(document).encode()
    text += b" " * (-len(text) % 4)
    body = struct.pack("<I", len(text)) + b"JSON" + text + data[20 + length:]
    return b"glTF" + struct.pack("<II", 2, 12 + len(body)) + body


@pytest.mark.parametrize("component_type, words", [(5126, "stored as floats"), (5122, "stored as signed shorts")])
def test_a_glb_whose_indices_are_not_unsigned_integers_is_refused(tmp_path, component_type, words):
    """Before: trimesh read the index bytes as floats (all about zero), the mesh cast them to vertex
    0, and the build said the surface had no faces left after removing degenerate ones."""
    path = tmp_path / "box.glb"
    path.write_bytes(_glb_with_index_type(component_type))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["build", str(path), "--modulus", "1e5", "-o", str(out / "x.vtu"), "-q"])
    assert result.exit_code == 1, result.output
    assert f"{path}: mesh 'geometry_0': its triangle indices (accessor 0) are {words}" in result.stderr
    assert "Traceback" not in result.output and not out.exists()
    assert len(read_triangles_of(tmp_path, _glb_with_index_type(5125)).faces) == 12      # as trimesh writes it


def read_triangles_of(folder, data: bytes):
    path = folder / "plain.glb"
    path.write_bytes(data)
    return read_triangles(path)


TET_OBJ = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
TET_OFF = "OFF\n4 4 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 2 1\n3 0 1 3\n3 0 3 2\n3 1 2 3\n"


@pytest.mark.parametrize("name, text, words", [
    ("x.obj", TET_OBJ.replace("v 1 0 0", "v 1_0 0 0"), "line 2 ('v 1_0 0 0') is not a vertex x y z"),
    ("x.obj", TET_OBJ.replace("f 2 3 4", "f 2 3 0_4"), "line 8: face corner '0_4' is not a vertex number"),
    ("x.off", TET_OFF.replace("\n1 0 0\n", "\n1_0 0 0\n"), "line 4 ('1_0 0 0') is not a vertex x y z"),
    ("x.off", TET_OFF.replace("3 1 2 3", "3 1 2 0_3"), "line 10 ('3 1 2 0_3') is not a face"),
], ids=["OBJ vertex 1_0", "OBJ corner 0_4", "OFF vertex 1_0", "OFF corner 0_3"])
def test_a_mesh_number_with_an_underscore_is_refused(tmp_path, name, text, words):
    """Before: Python's float and int read ``1_0`` as ten: a vertex ten times as far, a corner on
    another vertex, exit 0 (as a calibration CSV's ``1_0`` was before)."""
    path = tmp_path / name
    path.write_text(text)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["build", str(path), "--modulus", "1e5", "-o", str(out / "x.vtu"), "-q"])
    assert result.exit_code == 1, result.output
    assert f"{path}: cannot be read as an {name[2:].upper()} mesh ({words}" in result.stderr
    assert "Traceback" not in result.output and not out.exists() and path.read_text() == text
    assert read_triangles_of_text(tmp_path, name, text.replace("_", "")).faces.shape == (4, 3)


def read_triangles_of_text(folder, name: str, text: str):
    path = folder / f"plain_{name}"
    path.write_text(text)
    return read_triangles(path)


def test_a_legacy_vtk_in_a_scene_whose_counts_do_not_match_is_refused_by_simulate(tmp_path):
    """The same count check guards every reader of legacy .vtk tets (the scene's bodies too):
    before, ``fieldgen simulate`` on such a body aborted with ``free(): invalid next size``."""
    path = tmp_path / "count.vtk"
    path.write_text(LEGACY_HEAD.format(version="3.0") + "CELLS 3 10\n4 0 1 2 3\n4 1 2 3 4\nCELL_TYPES 2\n10\n10\n")
    scene = tmp_path / "scene.toml"
    scene.write_text('[simulate]\nduration = 0.01\ndt = 1e-3\n\n[[body]]\nname = "floor"\nkind = "fixed"\n'
                     'geometry = {vtk = "count.vtk", modulus = 1e5}\n\n[[body]]\nname = "ball"\n'
                     'geometry = {shape = "sphere", radius = 0.005}\nmass = 0.01\nposition = [0, 0, 0.02]\n')
    code = "import sys; from fieldgen.cli.main import main; sys.exit(main())"
    run = subprocess.run([sys.executable, "-c", code, "simulate", str(scene), "-o", str(tmp_path / "out"), "--json",
                          "-q"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 1, (run.returncode, run.stderr)
    assert "count.vtk" in run.stderr and "CELLS" in run.stderr
    assert "Traceback" not in run.stderr and "free()" not in run.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_surface_tolerance_far_below_the_part_is_refused_before_the_remeshing(tmp_path):
    """Before: MMGS within 1e-6 m of a 40 mm ball's facets ran past 200 s at 1.6 GB (1e-12: past
    5 min), a run a user cannot tell from a hang. Now refused at once (exit 2), naming the part's
    size and the least tolerance, in the units given; 0 still keeps the input."""
    trimesh.creation.icosphere(subdivisions=3, radius=20.0).export(tmp_path / "ball.stl")
    out = tmp_path / "ball.vtu"
    result = CliRunner().invoke(main, ["build", str(tmp_path / "ball.stl"), "--units", "mm", "--modulus", "1e5",
                                       "--surface-tolerance", "0.001", "-o", str(out), "--json", "-q"])
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)["error"]
    diagonal = 40.0 * np.sqrt(3.0) * (1.0 - 0.0)      # the icosphere's box, mm (its vertices touch the sphere)
    assert "--surface-tolerance 0.001 mm" in error and "below 0.0001 of the part's diagonal" in error
    assert f"{1e-4 * diagonal:.3g} mm" in error and not out.exists()
    kept = CliRunner().invoke(main, ["build", str(tmp_path / "ball.stl"), "--units", "mm", "--modulus", "1e5",
                                     "--surface-tolerance", "0", "-o", str(out), "--json", "-q"])
    assert kept.exit_code == 0, kept.output


@pytest.mark.parametrize("header", ["extent, stress_true", "extent, pressure_at_50C", "extent, pressure (Pa)",
                                    "extent, pressure in pascals"])
def test_a_modulus_table_whose_header_names_no_other_unit_reads(tmp_path, header):
    """Words after the pressure that are no unit (a true stress, a temperature) and Pa itself say
    nothing: the table reads (a first version refused every word but Pa)."""
    path = tmp_path / "law.csv"
    path.write_text(header + "\n0,0\n0.5,100\n1,300\n")
    assert table_law(path).pressure(1.0) == pytest.approx(300.0)


@pytest.mark.parametrize("colour_first", [False, True])
def test_a_coloured_ply_face_index_that_would_be_cast_is_refused(colour_first):
    """Faces with a colour beside their list (the common layout, now checked as one array): a
    non-whole index and one its type cannot hold are refused, whole ones read."""
    lines = ["3 0 1 2", "3 0 2 3", "3 0 3 1", "3 1 3 2"]
    props = ["property list uchar int vertex_indices", "property uchar red"]
    rows = [f"200 {line}" if colour_first else f"{line} 200" for line in lines]
    head = ("ply\nformat ascii 1.0\nelement vertex 4\nproperty float x\nproperty float y\nproperty float z\n"
            f"element face 4\n{chr(10).join(props[::-1] if colour_first else props)}\nend_header\n"
            "0 0 0\n1 0 0\n0 1 0\n0 0 1\n")
    check_ascii_indices("good.ply", (head + "\n".join(rows) + "\n").encode())
    for bad, words in [("2.5", "2.5, which is not a whole number"), ("300", "300, which its header's index type")]:
        text = head + "\n".join(rows).replace("0 2 3", f"0 2 {bad}", 1) + "\n"
        text = text.replace("list uchar int", "list uchar uchar") if bad == "300" else text
        with pytest.raises(InputError) as error:
            check_ascii_indices("bad.ply", text.encode())
        assert "face 2 of 4" in str(error.value) and words in str(error.value)
