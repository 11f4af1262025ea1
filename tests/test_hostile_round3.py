"""Hostile input a third sweep found: ASCII PLY and OFF files longer than their headers (faces
silently dropped), OBJ vertices of two coordinates, text files saved as UTF-16 or Latin-1,
design targets given out of depth order, calibration curves of hundreds of rows (each depth held
in memory: a log is thinned, typed targets refused), and empty paths (an unset shell variable) on the command line and in spec, manifest
and scene files. Each is refused with its exit code and a
message naming the file or option, the problem and the fix, with no traceback, nothing written
and the inputs unchanged."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from fieldgen.calibrate.calibration import thinned_note
from fieldgen.calibrate.data import parse_targets, read_data
from fieldgen.calibrate.report import calibration_record
from fieldgen.cli.main import main
from fieldgen.errors import InputError, OptionError
from fieldgen.io.surface_readers import read_triangles
from test_hostile_input import built_ball, cube_obj, scene, write
from test_hostile_sweep import _refused

ROOT = Path(__file__).resolve().parents[1]
PAD_SPEC = ROOT / "assets" / "foam_pad.toml"
BUILD = ["--modulus", "1e5", "--edge-length", "0.01", "-q"]
CORNERS = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
TRIANGLES = [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]


def ply(vertices: int, faces: int) -> str:
    head = (f"ply\nformat ascii 1.0\nelement vertex {vertices}\nproperty float x\nproperty float y\n"
            f"property float z\nelement face {faces}\nproperty list uchar int vertex_indices\nend_header\n")
    return (head + "".join(f"{x} {y} {z}\n" for x, y, z in CORNERS)
            + "".join(f"3 {a} {b} {c}\n" for a, b, c in TRIANGLES))


def off(vertices: int, faces: int) -> str:
    return (f"OFF\n{vertices} {faces} 0\n" + "".join(f"{x} {y} {z}\n" for x, y, z in CORNERS)
            + "".join(f"3 {a} {b} {c}\n" for a, b, c in TRIANGLES))


def utf16(text: str) -> bytes:
    return text.encode("utf-16")          # with its byte-order mark, as Windows editors save "Unicode"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The inputs of every case, in one folder the cases only read."""
    folder = tmp_path_factory.mktemp("inputs")
    built_ball(folder)
    cube = "\n".join(cube_obj(0.02)) + "\n"
    write(folder / "cube.obj", cube)
    write(folder / "long.ply", ply(4, 2))          # 4 face lines, 2 declared: 2 faces would be dropped
    write(folder / "long.off", off(4, 3))
    write(folder / "v2.obj", cube.replace("v 0.0 0.0 0.0", "v 0.0 0.0", 1))
    write(folder / "corner.obj", cube.replace("f 1 3 2", "f 1 3 x"))
    write(folder / "utf16.obj", utf16(cube))
    write(folder / "utf16_table.csv", utf16("extent,pressure\n0,0\n1,1e5\n"))
    write(folder / "latin1_table.csv", "extent,pr\xe9ssion\n0,0\n1,1e5\n".encode("latin-1"))
    write(folder / "utf16_data.csv", utf16("depth_mm,force_N\n0.2,0.1\n0.4,0.3\n0.6,0.6\n"))
    write(folder / "utf16_spec.toml", utf16("modulus = 1e5\nedge_length = 0.01\n"))
    write(folder / "utf16_manifest.toml", utf16('[[asset]]\ninput = "cube.obj"\nmodulus = 1e5\n'))
    write(folder / "utf16_scene.toml", utf16(scene()))
    write(folder / "input_empty.toml", '[[asset]]\ninput = ""\nmodulus = 1e5\nedge_length = 0.01\n')
    write(folder / "output_empty.toml", '[[asset]]\ninput = "cube.obj"\noutput = ""\nmodulus = 1e5\n')
    write(folder / "spec_input_empty.toml", 'input = ""\nmodulus = 1e5\nedge_length = 0.01\n')
    write(folder / "spec_core_empty.toml", 'modulus = 1e5\nedge_length = 0.01\ncore = ""\n')
    write(folder / "asset_empty.toml", scene(geometry='{asset = ""}'))
    write(folder / "mesh_empty.toml", scene(geometry='{mesh = ""}'))
    write(folder / "long_curve.csv", "depth_mm,force_N\n" + "".join(f"{0.2 + k / 400},{0.1 + k / 100}\n"
                                                                     for k in range(400)))
    write(folder / "scene.toml", scene())
    write(folder / "manifest.toml", '[[asset]]\ninput = "cube.obj"\nmodulus = 1e5\nedge_length = 0.01\n')
    return folder


CASES = [
    # ASCII PLY and OFF longer than their headers: trimesh takes the declared count, dropping the rest
    ("PLY with more face lines than declared", ["build", "{i}/long.ply", *BUILD, "-o", "{o}/x.vtu"], 1,
     "long.ply: its header declares 4 vertices and 2 faces (6 lines of data), but the file holds 8 lines of "
     "data: the 2 lines past them would be dropped"),
    ("OFF with more face lines than declared", ["build", "{i}/long.off", *BUILD, "-o", "{o}/x.vtu"], 1,
     "the 1 line past them would be dropped"),
    ("rigid PLY with more face lines than declared", ["contact", "{i}/asset.vtu", "{i}/long.ply"], 1,
     "the 2 lines past them would be dropped"),
    # OBJ lines named
    ("OBJ vertex of two coordinates", ["build", "{i}/v2.obj", *BUILD, "-o", "{o}/x.vtu"], 1,
     "line 1 ('v 0.0 0.0') is not a vertex x y z: three numbers needed"),
    ("OBJ face corner not a number", ["build", "{i}/corner.obj", *BUILD, "-o", "{o}/x.vtu"], 1,
     "face corner 'x' is not a vertex number"),
    # text saved as UTF-16 or Latin-1: named as such, with the fix
    ("OBJ saved as UTF-16", ["build", "{i}/utf16.obj", *BUILD, "-o", "{o}/x.vtu"], 1,
     "utf16.obj: cannot be read as an OBJ mesh (UTF-16 text (by its byte-order mark)"),
    ("table saved as UTF-16", ["build", "{i}/cube.obj", "--table", "{i}/utf16_table.csv", "--edge-length",
     "0.01", "-o", "{o}/x.vtu"], 1,
     "utf16_table.csv: UTF-16 text (by its byte-order mark), not UTF-8, so not a CSV file fieldgen reads. "
     "Save it as CSV text in UTF-8"),
    ("table saved as Latin-1", ["build", "{i}/cube.obj", "--table", "{i}/latin1_table.csv", "--edge-length",
     "0.01", "-o", "{o}/x.vtu"], 1, "latin1_table.csv: not UTF-8 text (byte 9 is 0xe9)"),
    ("calibration data saved as UTF-16", ["calibrate", "--spec", str(PAD_SPEC), "--units", "mm,N", "--indenter",
     "sphere:10", "--data", "{i}/utf16_data.csv", "-o", "{o}/x.vtu"], 1, "utf16_data.csv: UTF-16 text"),
    ("spec saved as UTF-16", ["build", "{i}/cube.obj", "--spec", "{i}/utf16_spec.toml", "-o", "{o}/x.vtu"], 2,
     "utf16_spec.toml: UTF-16 text (by its byte-order mark), not UTF-8, so not a TOML spec"),
    ("manifest saved as UTF-16", ["batch", "{i}/utf16_manifest.toml", "--output-dir", "{o}"], 2,
     "utf16_manifest.toml: UTF-16 text (by its byte-order mark), not UTF-8, so not a TOML manifest"),
    ("scene saved as UTF-16", ["simulate", "{i}/utf16_scene.toml"], 2,
     "utf16_scene.toml: UTF-16 text (by its byte-order mark), not UTF-8, so not a TOML scene. Save the scene "
     "as UTF-8 text"),
    # empty paths on the command line (an unset shell variable): never the default path or the current folder
    ("build -o ''", ["build", "{i}/cube.obj", *BUILD, "-o", ""], 2, "-o is an empty string, not a path"),
    ("build --core ''", ["build", "{i}/cube.obj", *BUILD, "--core", "", "-o", "{o}/x.vtu"], 2,
     "--core is an empty string"),
    ("simulate -o ''", ["simulate", "{i}/scene.toml", "-q", "-o", ""], 2, "-o is an empty string"),
    ("batch --output-dir ''", ["batch", "{i}/manifest.toml", "-j", "1", "--output-dir", ""], 2,
     "--output-dir is an empty string"),
    ("batch --report=", ["batch", "{i}/manifest.toml", "--check", "--report="], 2, "--report is an empty string"),
    ("contact -o ''", ["contact", "{i}/asset.vtu", "{i}/cube.obj", "-o", ""], 2, "-o is an empty string"),
    ("inspect ''", ["inspect", ""], 2, "an argument of fieldgen inspect is an empty string"),
    ("contact A ''", ["contact", "", "{i}/cube.obj"], 2, "an argument of fieldgen contact is an empty string"),
    # empty paths in files: they would name the file's own folder
    ("manifest input = ''", ["batch", "{i}/input_empty.toml", "--output-dir", "{o}"], 2,
     "input_empty.toml: [[asset]] 1: option 'input' is an empty string, not a path"),
    ("manifest output = ''", ["batch", "{i}/output_empty.toml"], 2,
     "[[asset]] 1 (cube.obj): option 'output' is an empty string, not a path"),
    ("spec input = ''", ["build", "--spec", "{i}/spec_input_empty.toml", "-o", "{o}/x.vtu"], 2,
     "spec_input_empty.toml: option 'input' is an empty string, not a path"),
    ("spec core = ''", ["build", "{i}/cube.obj", "--spec", "{i}/spec_core_empty.toml", "-o", "{o}/x.vtu"], 2,
     "spec_core_empty.toml: option 'core' is an empty string, not a path"),
    ("scene asset = ''", ["simulate", "{i}/asset_empty.toml"], 2,
     "geometry (asset): asset = '' is not a file path (not empty)"),
    ("scene mesh = ''", ["simulate", "{i}/mesh_empty.toml"], 2, "mesh = '' is not a file path (not empty)"),
]


@pytest.mark.parametrize("args, code, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_is_refused(inputs, tmp_path, monkeypatch, args, code, words):
    _refused(inputs, tmp_path, monkeypatch, args, code, words)


def test_a_ply_or_off_longer_than_its_header_is_refused_by_the_reader(inputs):
    """Every command reads surfaces through read_triangles: the check is there, for every reader."""
    for name, words in (("long.ply", "holds 8 lines of data"), ("long.off", "holds 8 lines of data")):
        with pytest.raises(InputError, match="would be dropped") as caught:
            read_triangles(inputs / name)
        assert words in str(caught.value) and "Export the mesh again" in str(caught.value)


#: More --target points than a fit takes: each depth is a contact query (400 rows of the bundled
#: pad once took 24 GB, when each depth's points were kept, and the kernel killed the run); typed points are
#: refused (the user chooses which to drop), a --data log is thinned (below).
def test_more_targets_than_a_fit_takes_are_refused_before_any_contact_query(inputs, tmp_path, monkeypatch):
    """Refused where the curve enters (parse_targets): the fit is never started (were it reached,
    this test fails at once instead of filling the memory)."""
    import fieldgen.calibrate.calibration as calibration

    def never(*_args, **_kwargs):
        raise AssertionError("the fit was started")

    monkeypatch.setattr(calibration, "calibrate", never)
    targets = [x for k in range(1, 102) for x in ("--target", f"{k / 100}:{k}")]
    args = ["calibrate", "--spec", str(PAD_SPEC), "--units", "mm,N", "--indenter", "plane", *targets, "-o", "{o}/x.vtu"]
    _refused(inputs, tmp_path, monkeypatch, args, 2, "the curve has 101 points, more than the 100 depths a fit takes")


def test_a_long_log_is_thinned_to_the_depths_a_fit_takes_spread_evenly(inputs):
    """400 rows, 0.2-1.2 mm: the fit gets 100 rows, the first and last among them, each the row
    nearest to one of 100 depths spread evenly over the range (computed here from the file's own
    numbers, not from the function), and the warning and the metadata say so."""
    data = read_data(inputs / "long_curve.csv", "mm,N")
    depth_mm = np.array([0.2 + k / 400 for k in range(400)])
    wanted = np.linspace(depth_mm[0], depth_mm[-1], 100)
    nearest = sorted({int(np.argmin(np.abs(depth_mm - w))) for w in wanted})
    assert data.rows_read == 400 and len(data.depth) == len(nearest) == 100
    assert np.allclose(data.depth, depth_mm[nearest] * 1e-3, rtol=1e-12, atol=0)
    assert data.rows == [f"row {i + 2}" for i in nearest]          # named as read (row 1 the header)
    note = thinned_note(data)
    assert len(note) == 1 and note[0].startswith("long_curve.csv has 400 rows; the fit takes at most 100 depths")
    assert "from 0.2 to 1.1975 mm" in note[0], note[0]
    record = calibration_record(data, SimpleNamespace(indenter=SimpleNamespace(describe=dict), touch=np.zeros(3)),
                                np.array([0.0, 0.0, -1.0]), "linear", {}, {})
    assert record["data"]["rows"] == 100 and record["data"]["rows_read"] == 400


def test_a_short_log_is_taken_whole(inputs, tmp_path):
    """At 100 rows with depth, as at 400 above, nothing is dropped and nothing is said."""
    path = tmp_path / "hundred.csv"
    path.write_text("depth_mm,force_N\n0,0\n" + "".join(f"{0.01 * (k + 1)},{k + 1}\n" for k in range(100)))
    data = read_data(path, "mm,N")
    assert len(data.depth) == 101 and data.rows_read is None and thinned_note(data) == []


def test_the_calibrate_command_fits_a_long_log_thinned(inputs, tmp_path, monkeypatch):
    """From the command line the fit receives the thinned curve (the fit itself is replaced: the
    curve it is given is what is checked)."""
    import fieldgen.calibrate.calibration as calibration

    given = {}

    def capture(*_args, data, **_kwargs):
        given["data"] = data
        raise AssertionError("stop here")

    monkeypatch.setattr(calibration, "calibrate", capture)
    CliRunner().invoke(main, ["calibrate", "--spec", str(PAD_SPEC), "--units", "mm,N", "--indenter", "sphere:10",
                              "--data", str(inputs / "long_curve.csv"), "-o", str(tmp_path / "x.vtu")])
    assert len(given["data"].depth) == 100 and given["data"].rows_read == 400


def test_targets_out_of_depth_order_name_their_own_values():
    """Targets are sorted by depth; each keeps its own text, so a refused one is named as typed."""
    with pytest.raises(OptionError) as caught:
        parse_targets(["0.002:10", "0.001:20"], "mm")
    assert str(caught.value).startswith("target 0.002:10 has force 10 N, less than 20 N in target 0.001:20"), \
        str(caught.value)
    data = parse_targets(["0.003:30", "0.001:10", "0.002:20"], "mm")
    assert data.rows == ["target 0.001:10", "target 0.002:20", "target 0.003:30"]
    assert data.force.tolist() == [10.0, 20.0, 30.0]


def test_the_calibrate_command_names_targets_as_typed(tmp_path):
    result = CliRunner().invoke(main, ["calibrate", "--spec", str(PAD_SPEC), "--units", "mm,N", "--indenter",
                                       "plane", "--target", "2:10", "--target", "1:20", "-o",
                                       str(tmp_path / "x.vtu")])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "target 2:10 has force 10 N, less than 20 N in target 1:20" in result.stderr, result.output
    assert list(tmp_path.iterdir()) == []
