"""Hostile input the earlier sweeps left over: a failing command's --json answer on stdout, the
largest modulus refused at every entry point, ASCII PLY and OFF files shorter than their headers,
and hostile scenes and calibration data. Each case is refused with its exit code and a message
naming the file or option, the problem and the fix, with no traceback."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from fieldgen.batch.manifest import ManifestError, read_manifest
from fieldgen.cli.main import main
from fieldgen.errors import InputError, OptionError
from fieldgen.io.surface_readers import read_triangles
from fieldgen.options import COMMAND_LINE, options_from_mapping, options_from_spec
from fieldgen.runtime.scene.load import load_scene
from fieldgen.runtime.scene.schema import SceneError, check_scene_table

ROOT = Path(__file__).resolve().parents[1]
BALL = ROOT / "assets" / "foam_ball.obj"

CORNERS = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
TRIANGLES = [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]


def run(*args):
    """``fieldgen ARGS`` in-process; no traceback whatever the exit code."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert isinstance(result.exception, (SystemExit, type(None))), result.exception
    assert "Traceback" not in result.output
    return result


# ------------------------------------------------------------------ --json on failure

JSON_FAILURES = [        # {m}: a path in an empty folder, with no file there
    ("build: an option refused", ["build", BALL, "--json"], 2),                    # no modulus
    ("build: a value click refuses", ["build", BALL, "--modulus", "abc", "--json"], 2),
    ("build: the mesh fails", ["build", "{m}.obj", "--modulus", "1e5", "--json"], 1),
    ("inspect: no asset", ["inspect", "{m}.vtu", "--json"], 1),
    ("batch: no manifest", ["batch", "{m}.toml", "--json"], 2),
    ("contact: no bodies", ["contact", "{m}.vtu", "{m}.stl", "--json"], 1),
    ("simulate: no scene", ["simulate", "{m}.toml", "--json"], 2),
    ("calibrate: a missing option", ["calibrate", BALL, "--json"], 2),
]


@pytest.mark.parametrize("args, code", [c[1:] for c in JSON_FAILURES], ids=[c[0] for c in JSON_FAILURES])
def test_a_failing_command_with_json_prints_one_json_object(tmp_path, monkeypatch, args, code):
    """stdout is one JSON object with ok false, the error (as on stderr) and the exit code."""
    monkeypatch.chdir(tmp_path)
    args = [str(a).replace("{m}", str(tmp_path / "missing")) for a in args]
    result = run(*args)
    assert result.exit_code == code, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["exit_code"] == code, data
    assert data["error"] and data["error"] in result.stderr, (data, result.stderr)
    without = run(*[a for a in args if a != "--json"])            # no JSON unless asked for
    assert without.exit_code == code and without.stdout == ""
    assert data["error"] in without.stderr


def test_a_failing_command_with_json_and_stdout_closed_still_exits_with_its_code(tmp_path):
    """The JSON answer cannot be written: the error on stderr and the exit code stand, no traceback."""
    command = f"{shlex.quote(sys.executable)} -m fieldgen.cli.main build {shlex.quote(str(BALL))} --json >&-"
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "error: the linear law needs a modulus" in done.stderr and "Traceback" not in done.stderr


# ------------------------------------------------------------------ the largest modulus, everywhere

MANIFEST_ITEM = ('[[asset]]\ninput = "{input}"\noutput = "ball.vtu"\nmodulus = {modulus}\nedge_length = 0.01\n'
                 'expansion_rate = 10\n')


def test_a_manifest_item_stiffer_than_any_solid_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    manifest = tmp_path / "m.toml"
    manifest.write_text(MANIFEST_ITEM.format(input=BALL.as_posix(), modulus="1e20"))
    result = run("batch", manifest, "-j", "1")
    assert result.exit_code == 2, result.output
    assert "[[asset]] 1" in result.stderr and "modulus = 1e+20 Pa is above 1e+13 Pa" in result.stderr   # as written
    assert "--modulus" not in result.stderr and "Give M0 in Pa" in result.stderr
    assert not (tmp_path / "ball.vtu").exists()
    with pytest.raises(ManifestError, match=r"modulus = 1e\+20 Pa is above 1e\+13 Pa"):
        read_manifest(manifest)


def test_the_library_refuses_a_modulus_stiffer_than_any_solid(tmp_path):
    """Options from a mapping and from a spec (what a scene's build = reads) get the same check;
    a modulus within bounds, and an infinite one (refused as not positive), pass it. Given as a
    flag, the message names the flag; written in a file, the key as written there."""
    with pytest.raises(OptionError, match=r"^--modulus 2e\+13 Pa is above 1e\+13 Pa, stiffer than any solid"):
        options_from_mapping({"modulus": 2e13}, origin=COMMAND_LINE)
    spec = tmp_path / "pad.toml"
    spec.write_text('input = "ball.obj"\nmodulus = 1e30\n')
    with pytest.raises(OptionError, match=r"pad.toml: modulus = 1e\+30 Pa is above") as refused:
        options_from_spec(spec)
    assert "--modulus" not in str(refused.value)
    assert options_from_mapping({"modulus": 1e13}).modulus == 1e13
    with pytest.raises(OptionError, match="must be a positive number"):
        options_from_mapping({"modulus": float("inf")}).checked()


def simulate_a_scene_building_a_pad(tmp_path, monkeypatch, pad_line: str):
    """``fieldgen simulate`` on a scene of a fixed pad, built from pad.toml (the ball, with
    PAD_LINE such as ``modulus = 1e20``), and a box above it."""
    monkeypatch.setenv("FIELDGEN_CACHE", str(tmp_path / "cache"))
    (tmp_path / "pad.toml").write_text(f'input = "{BALL.as_posix()}"\n{pad_line}\nedge_length = 0.01\n')
    scene = tmp_path / "scene.toml"
    scene.write_text('[[body]]\nname = "pad"\nkind = "fixed"\ngeometry = {build = "pad.toml"}\n\n'
                     '[[body]]\nname = "box"\ngeometry = {shape = "box", size = [0.02, 0.02, 0.02]}\n'
                     'density = 1000\nposition = [0, 0, 0.2]\n')
    return run("simulate", scene, "--duration", "0.002", "--dt", "1e-3")


def test_a_scene_build_spec_stiffer_than_any_solid_is_refused(tmp_path, monkeypatch):
    result = simulate_a_scene_building_a_pad(tmp_path, monkeypatch, "modulus = 1e20")
    assert result.exit_code == 2, result.output
    assert "pad.toml: modulus = 1e+20 Pa is above 1e+13 Pa" in result.stderr


# ------------------------------------------------------------------ ASCII PLY and OFF counts

def ply(vertices: int, faces: int, rows=CORNERS, triangles=TRIANGLES) -> str:
    head = (f"ply\nformat ascii 1.0\nelement vertex {vertices}\nproperty float x\nproperty float y\n"
            f"property float z\nelement face {faces}\nproperty list uchar int vertex_indices\nend_header\n")
    return (head + "".join(f"{x} {y} {z}\n" for x, y, z in rows)
            + "".join(f"3 {a} {b} {c}\n" for a, b, c in triangles))


def off(vertices: int, faces: int, rows=CORNERS, triangles=TRIANGLES) -> str:
    return (f"OFF\n# a comment\n{vertices} {faces} 0\n" + "".join(f"{x} {y} {z}\n" for x, y, z in rows)
            + "\n" + "".join(f"3 {a} {b} {c}\n" for a, b, c in triangles))


SHORT = [
    ("PLY, more faces declared", "x.ply", ply(4, 6), "4 vertices and 6 faces (10 lines of data)", 8),
    ("PLY, more vertices declared", "x.ply", ply(6, 4), "6 vertices and 4 faces (10 lines of data)", 8),
    ("PLY cut short", "x.ply", ply(4, 4, triangles=TRIANGLES[:3]), "4 vertices and 4 faces (8 lines", 7),
    ("OFF, more faces declared", "x.off", off(4, 6), "4 vertices and 6 faces (10 lines of data)", 8),
    ("OFF, more vertices declared", "x.off", off(6, 4), "6 vertices and 4 faces (10 lines of data)", 8),
    ("OFF cut short", "x.off", off(4, 4, triangles=TRIANGLES[:3]), "4 vertices and 4 faces (8 lines", 7),
]


@pytest.mark.parametrize("name, text, declared, found", [c[1:] for c in SHORT], ids=[c[0] for c in SHORT])
def test_a_ply_or_off_shorter_than_its_header_is_refused(tmp_path, name, text, declared, found):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        read_triangles(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: its header declares {declared}"), message
    assert f"the file holds {found} lines of data" in message and "Export the mesh again" in message
    result = run("build", path, "--modulus", "1e5", "--edge-length", "0.2", "-o", tmp_path / "x.vtu")
    assert result.exit_code == 1 and f"holds {found} lines of data" in result.stderr, result.output
    assert not (tmp_path / "x.vtu").exists()


@pytest.mark.parametrize("name, text", [("ok.ply", ply(4, 4)), ("ok.off", off(4, 4)),
                                        ("same_line.off", off(4, 4).replace("OFF\n# a comment\n", "OFF "))])
def test_a_ply_or_off_as_long_as_its_header_is_read(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    read = read_triangles(path)
    assert len(read.vertices) == 4 and len(read.faces) == 4


# ------------------------------------------------------------------ hostile scenes

BOX = '{shape = "box", size = [0.02, 0.02, 0.02]}'
SLAB = '{shape = "slab", size = [0.4, 0.4, 0.02], modulus = 1e6, cells = [4, 4], layers = 1}'


def scene_text(geometry: str = BOX, floor: str = SLAB, extra: str = "") -> str:
    return ('[simulate]\nduration = 0.002\ndt = 1e-3\n\n'
            f'[[body]]\nname = "slab"\nkind = "fixed"\ngeometry = {floor}\n\n'
            f'[[body]]\nname = "box"\ngeometry = {geometry}\ndensity = 1000\nposition = [0, 0, 0.0105]\n{extra}')


SHAPES_OUT_OF_RANGE = [     # what each did before: a hang, a traceback, a silent NaN run
    ("ball radius 1e-30 (TetGen never ended)", scene_text('{shape = "ball", radius = 1e-30, modulus = 1e6}'),
     "radius = 1e-30 is not a number >= 1e-09 and <= 1e+09"),
    ("ball radius 1e100 (a TetGen traceback)", scene_text('{shape = "ball", radius = 1e100, modulus = 1e6}'),
     "radius = 1e+100 is not a number >= 1e-09 and <= 1e+09"),
    ("box 1e-100 m (a LinAlgError traceback)", scene_text('{shape = "box", size = [1e-100, 1e-100, 1e-100]}'),
     "size = [1e-100, 1e-100, 1e-100] is not 3 numbers from 1e-09 to 1e+09"),
    ("slab 1e200 m (ran on NaN, exit 0)", scene_text(floor=SLAB.replace("[0.4, 0.4, 0.02]", "[1e200, 1e200, 1e200]")),
     "size = [1e+200, 1e+200, 1e+200] is not 3 numbers from 1e-09 to 1e+09"),
    ("cylinder radius 1e-300", scene_text('{shape = "cylinder", radius = 1e-300, height = 0.01}'),
     "radius = 1e-300 is not a number >= 1e-09"),
    ("sphere radius 1e300", scene_text('{shape = "sphere", radius = 1e300}'), "radius = 1e+300 is not a number"),
    ("slab modulus 1e20", scene_text(floor=SLAB.replace("1e6", "1e20")),
     "modulus = 1e+20 is not a number >= 1 and <= 1e+13"),
    ("ball modulus 1e300", scene_text('{shape = "ball", radius = 0.01, modulus = 1e300}'),
     "modulus = 1e+300 is not a number >= 1 and <= 1e+13"),
]


@pytest.mark.parametrize("text, words", [c[1:] for c in SHAPES_OUT_OF_RANGE], ids=[c[0] for c in SHAPES_OUT_OF_RANGE])
def test_a_scene_shape_outside_the_computable_range_is_refused(tmp_path, text, words):
    """Checked by the scene's schema, before anything is meshed (the library: a hang cannot hang the test)."""
    path = tmp_path / "scene.toml"
    path.write_text(text)
    with pytest.raises(SceneError) as caught:
        check_scene_table(tomllib.loads(text), path=path)
    assert words in str(caught.value) and str(path) in str(caught.value)


def test_a_scene_shape_outside_the_range_exits_2_from_simulate(tmp_path):
    path = tmp_path / "scene.toml"
    path.write_text(scene_text('{shape = "box", size = [1e-100, 1e-100, 1e-100]}'))
    result = run("simulate", path, "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "[[body]] 2 (box) geometry (box): size = [1e-100, 1e-100, 1e-100] is not 3 numbers" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("given, unit", [("[1e200, 1e200, 0, 0]", [2 ** -0.5, 2 ** -0.5, 0, 0]),
                                         ("[1e-200, 0, 0, 0]", [1, 0, 0, 0]),
                                         ("[5e-324, 5e-324, 0, 0]", [2 ** -0.5, 2 ** -0.5, 0, 0])])
def test_a_scene_quaternion_of_any_scale_is_normalised(tmp_path, given, unit):
    """Before: a ZeroDivisionError traceback (the norm overflowed) or a NaN orientation."""
    path = tmp_path / "scene.toml"
    path.write_text(scene_text(extra=f"quaternion = {given}\n"))
    scene, _ = load_scene(path)
    assert scene.bodies[1].state.quaternion == pytest.approx(unit, abs=1e-15)
    result = run("simulate", path, "--json", "-q")
    assert result.exit_code == 0, result.output


# ------------------------------------------------------------------ hostile calibration data

PAD = ["calibrate", "--spec", ROOT / "assets" / "foam_pad.toml", "--indenter", "plane", "--units", "mm,N"]


def test_calibration_depths_no_indenter_reaches_are_refused(tmp_path):
    """The foam pad is 8 mm thick along -z and 45 mm across. Before: a plane 30 mm deep and a
    cylinder 1e297 m deep were reported as "the indenter does not reach the part" with the fix
    "check --at and --direction"."""
    data = tmp_path / "press.csv"
    for indenter, deepest, words in [
            ("plane", "30", "is thick along --direction 0,0,-1 (0.008 m): the plane would come out of its far side"),
            ("plane", "1e300", "is thick along --direction 0,0,-1 (0.008 m)"),
            ("cylinder:2", "1e300", "measures across (0.0454313 m, its bounding-box diagonal): the indenter would "
                                    "have gone through it")]:
        data.write_text(f"depth_mm,force_N\n0.1,0.1\n0.2,0.3\n{deepest},0.5\n")
        result = run(*PAD[:-3], indenter, *PAD[-2:], "--data", data, "--law", "hyperbolic", "-o", tmp_path / "x.vtu")
        assert result.exit_code == 1, result.output
        assert f"{data}: the deepest depth, {float(deepest) * 1e-3:g} m, is more than" in result.stderr
        assert words in result.stderr and "Check the length unit of --units" in result.stderr, result.stderr
    result = run(*PAD, "--target", "30:5", "-o", tmp_path / "x.vtu")
    assert result.exit_code == 2 and "the deepest depth, 0.03 m, is more than" in result.stderr, result.output
    assert not (tmp_path / "x.vtu").exists()


def test_a_paraboloid_pushed_ten_radii_deep_is_refused(tmp_path):
    """Before: paraboloid:1e-6 (mm) pushed 1 mm deep meshed rings 1e-11 m apart and never ended;
    paraboloid:5 pushed 1e297 m deep was a traceback (an array too large)."""
    data = tmp_path / "press.csv"
    for radius, deepest in (("1e-6", "1.0"), ("5", "1e300")):
        data.write_text(f"depth_mm,force_N\n0.2,0.1\n0.4,0.3\n{deepest},1.2\n")
        result = run(*PAD[:-3], f"paraboloid:{radius}", *PAD[-2:], "--data", data, "-o", tmp_path / "x.vtu")
        assert result.exit_code == 2, result.output
        assert (f"--indenter paraboloid:{radius}: the deepest depth, {float(deepest) * 1e-3:g} m, is more than 10 "
                f"times the paraboloid's radius {float(radius) * 1e-3:g} m") in result.stderr


@pytest.mark.slow
def test_a_direction_of_any_scale_is_a_direction(tmp_path):
    """Before: 0,0,-1e-300 and 0,1e300,-1e300 were refused as "not a non-zero 3-vector"."""
    data = tmp_path / "press.csv"
    data.write_text("depth_mm,force_N\n0.2,0.1131\n0.4,0.3200\n0.6,0.5879\n")
    fitted = []
    for direction in ("0,0,-1", "0,0,-1e-300", "0,1e300,-1e300"):
        result = run("calibrate", "--spec", ROOT / "assets" / "foam_pad.toml", "--indenter", "sphere:10", "--units",
                     "mm,N", "--data", data, "--law", "hyperbolic", "--direction", direction, "-o", tmp_path / "x.vtu",
                     "--json", "-q")
        assert result.exit_code == 0, result.output
        fitted.append(json.loads(result.stdout)["parameters"])
    assert fitted[1] == fitted[0]


def test_a_fitted_law_stiffer_than_any_solid_is_refused_naming_the_data(tmp_path):
    """Forces far too large for their depths (a newton at a picometre: a unit slip) fit a modulus
    above any solid's. Before: the asset was written with M0 6.4e23 Pa and the command exited 0."""
    data = tmp_path / "press.csv"
    data.write_text("depth_m,force_N\n1e-12,1.0\n2e-12,2.8\n3e-12,5.2\n")
    out = tmp_path / "x.vtu"
    result = run("calibrate", "--spec", ROOT / "assets" / "foam_pad.toml", "--indenter", "sphere:10", "--units",
                 "m,N", "--data", data, "--law", "hyperbolic", "-o", out)
    assert result.exit_code == 1, result.output
    assert f"{data}: the law fitted to the data reaches" in result.stderr and "stiffer than any solid" in result.stderr
    assert "check the data's units" in result.stderr.lower() and not out.exists()


# ------------------------------------------------------------------ a spec's refused value names the spec

SPEC_VALUES = [
    ("modulus = nan\n", "spec.toml: modulus must be a positive number, got nan"),
    ('modulus = 1e5\nlaw = "hyperbolic"\nk = 1.0\n', "spec.toml: k must be in [0, 1)"),
    ("modulus = 1e5\nmu_static = -1\n", "spec.toml: mu_static must be >= 0, got -1.0"),
    ('modulus = 1e5\nunits = "furlong"\n', "spec.toml: unknown units 'furlong'"),
    ('modulus = 1e5\nlaw = "cubic"\n', "spec.toml: unknown law 'cubic'"),
]


@pytest.mark.parametrize("text, words", SPEC_VALUES, ids=[w.split(": ")[1][:24] for _, w in SPEC_VALUES])
def test_a_value_refused_in_a_spec_names_the_spec_and_the_key_as_written(tmp_path, text, words):
    """Before: "--modulus must be a positive number, got nan", naming neither the spec nor the key
    the user wrote in it. A flag given over the spec is still named as the flag."""
    spec = tmp_path / "spec.toml"
    spec.write_text(f'input = "{BALL.as_posix()}"\nedge_length = 0.01\n' + text)
    result = run("build", "--spec", spec, "-o", tmp_path / "x.vtu")
    assert result.exit_code == 2, result.output
    assert words in result.stderr and "--" not in result.stderr.split(". ")[0], result.stderr
    assert not (tmp_path / "x.vtu").exists()


def test_a_flag_over_a_spec_is_named_as_the_flag(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(f'input = "{BALL.as_posix()}"\nedge_length = 0.01\nmodulus = nan\n')
    result = run("build", "--spec", spec, "--modulus", "-1", "-o", tmp_path / "x.vtu")
    assert result.exit_code == 2 and "error: --modulus must be a positive number, got -1.0" in result.stderr


def test_a_value_refused_in_a_scene_build_spec_names_that_spec(tmp_path, monkeypatch):
    result = simulate_a_scene_building_a_pad(tmp_path, monkeypatch, "modulus = nan")
    assert result.exit_code == 2, result.output
    assert "pad.toml: modulus must be a positive number, got nan" in result.stderr


def test_a_value_refused_in_a_manifest_item_names_the_key_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    manifest = tmp_path / "m.toml"
    manifest.write_text(MANIFEST_ITEM.format(input=BALL.as_posix(), modulus="nan"))
    result = run("batch", manifest, "-j", "1")
    assert result.exit_code == 2, result.output
    assert "[[asset]] 1" in result.stderr and "): modulus must be a positive number, got nan" in result.stderr
    assert "--modulus" not in result.stderr


@pytest.mark.parametrize("where", ["defaults", "spec"])
def test_a_value_refused_in_a_manifest_names_the_defaults_or_the_spec_that_set_it(tmp_path, monkeypatch, where):
    """A bad value the item takes from the manifest's [defaults] or from its spec is named there,
    by its key (it named the item and --modulus, a flag nobody typed)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text("modulus = nan\n" if where == "spec" else "edge_length = 0.01\n")
    defaults = "[defaults]\nmodulus = -5\n\n" if where == "defaults" else ""
    manifest = tmp_path / "m.toml"
    manifest.write_text(f'{defaults}[[asset]]\ninput = "{BALL.as_posix()}"\noutput = "ball.vtu"\nspec = "s.toml"\n')
    result = run("batch", manifest, "-j", "1")
    assert result.exit_code == 2, result.output
    named = "m.toml [defaults]" if where == "defaults" else "s.toml"
    assert f"(in {tmp_path / named})" in result.stderr
    assert "): modulus must be a positive number" in result.stderr and "--modulus" not in result.stderr
