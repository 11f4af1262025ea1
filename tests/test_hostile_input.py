"""Hostile input, through every command of the CLI (docs/model.md §1.4, §1.5): each case is
refused with its exit code (1 the work failed, 2 usage) and a message naming the problem, with
no traceback, nothing left in the output folder and the inputs' bytes unchanged; or, where the
input is usable, handled correctly (a warning, valid JSON, zero force by symmetry)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.errors import OptionError
from asset_edit import with_metadata

ROOT = Path(__file__).resolve().parents[1]
BALL = ROOT / "assets" / "foam_ball.obj"
PAD_SPEC = ROOT / "assets" / "foam_pad.toml"
PRESS = ROOT / "assets" / "press.csv"
FIELDGEN = [sys.executable, "-m", "fieldgen.cli.main"]

CUBE_FACES = [(1, 3, 2), (1, 4, 3), (5, 6, 7), (5, 7, 8), (1, 2, 6), (1, 6, 5),
              (2, 3, 7), (2, 7, 6), (3, 4, 8), (3, 8, 7), (4, 1, 5), (4, 5, 8)]
CUBE_CORNERS = [(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0), (0, 0, 1), (1, 0, 1), (1, 1, 1), (0, 1, 1)]


def cube_obj(size: float) -> list[str]:
    lines = ["v " + " ".join(repr(size * c) for c in corner) for corner in CUBE_CORNERS]
    lines += [f"f {a} {b} {c}" for a, b, c in CUBE_FACES]
    return lines


def write(path: Path, text: str | bytes) -> Path:
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def tampered(src: Path, dst: Path, **changes) -> Path:
    """A copy of the asset ``src`` whose metadata has ``changes`` (read and written with vtk,
    independently of fieldgen's writer)."""
    def replace(text: str) -> str:
        meta = json.loads(text)
        for key, value in changes.items():
            target = meta
            *parents, leaf = key.split(".")
            for parent in parents:
                target = target[parent]
            target[leaf] = value
        return json.dumps(meta, sort_keys=True)

    return with_metadata(src, dst, replace)


SCENE_HEAD = """[simulate]
duration = {duration}
dt = {dt}
"""
FLOOR = """
[[body]]
name = "floor"
kind = "fixed"
geometry = {shape = "slab", size = [0.4, 0.4, 0.02], modulus = 1e6, cells = [2, 2], layers = 1}
"""
BOX = """
[[body]]
name = "{name}"
geometry = {geometry}
{mass}
position = [0, 0, 0.06]
"""


def scene(duration=0.002, dt=1e-3, name="box", geometry='{shape = "box", size = [0.02, 0.02, 0.02]}',
          mass="mass = 0.1", floor=FLOOR) -> str:
    return (SCENE_HEAD.format(duration=duration, dt=dt) + floor
            + BOX.format(name=name, geometry=geometry, mass=mass))


def built_ball(folder: Path) -> Path:
    """The bundled foam ball built coarse into ``folder`` (asset.vtu): the valid asset the cases tamper with."""
    asset = folder / "asset.vtu"
    result = CliRunner().invoke(main, ["build", str(BALL), "--modulus", "1e5", "--edge-length", "0.01",
                                       "--expansion-rate", "10", "-q", "-o", str(asset)])
    assert result.exit_code == 0, result.output
    return asset


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """Every hostile input, in one folder the cases only read."""
    folder = tmp_path_factory.mktemp("inputs")
    asset = built_ball(folder)
    shutil.copy(asset, folder / "twin.vtu")
    tampered(asset, folder / "negative_dissipation.vtu", dissipation=-5.0)
    tampered(asset, folder / "nan_length.vtu", characteristic_length=float("nan"))
    tampered(asset, folder / "negative_modulus.vtu", **{"law.modulus": -1e5})
    data = asset.read_bytes()
    write(folder / "truncated.vtu", data[: len(data) // 2])
    cube = cube_obj(0.02)
    write(folder / "cube.obj", "\n".join(cube) + "\n")
    write(folder / "nan.obj", "\n".join(["v nan 0 0"] + cube[1:]) + "\n")
    write(folder / "inf.obj", "\n".join(["v 0 inf 0"] + cube[1:]) + "\n")
    write(folder / "huge.obj", "\n".join(cube_obj(1e120)) + "\n")
    write(folder / "big.obj", "\n".join(cube_obj(1e30)) + "\n")
    write(folder / "tiny.obj", "\n".join(cube_obj(1e-32)) + "\n")
    thin = [line if not line.startswith("v ") else "v " + " ".join(
        [*line.split()[1:3], repr(float(line.split()[3]) * 1e-5)]) for line in cube]     # 20 mm x 20 mm x 0.2 µm
    write(folder / "thin.obj", "\n".join(thin) + "\n")
    write(folder / "face0.obj", "\n".join(cube).replace("f 1 3 2", "f 0 3 2") + "\n")
    write(folder / "face-9.obj", "\n".join(cube).replace("f 1 3 2", "f -9 3 2") + "\n")
    write(folder / "broken.ply", "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                                 "end_header\n0 0\n1 0\n0 1\n")
    (folder / "folder.obj").mkdir()
    write(folder / "bool.toml", "modulus = 1e5\nedge_length = true\n")
    write(folder / "binary.toml", b"modulus = 1e5\n# \xff\xfe\x00\n")
    write(folder / "mass_and_density.toml", scene(mass="mass = 0.1\ndensity = 1000"))
    write(folder / "long.toml", scene(duration=1e9))
    write(folder / "dt_over_duration.toml", scene(duration=0.01, dt=1.0))
    write(folder / "empty_name.toml", scene(name=""))
    write(folder / "same_names.toml", scene(name="floor"))
    write(folder / "no_bodies.toml", "gravity = [0, 0, -9.81]\n")
    write(folder / "nan_mesh_scene.toml", scene(geometry='{mesh = "nan.obj"}'))
    write(folder / "tiny_mesh_scene.toml", scene(geometry='{mesh = "tiny.obj"}'))
    write(folder / "big_mesh_scene.toml", scene(geometry='{mesh = "big.obj"}'))
    write(folder / "bad_asset_scene.toml", scene(floor="", name="pad", mass="mass = 0.1",
                                                   geometry='{asset = "negative_dissipation.vtu"}'))
    write(folder / "motion.toml", FLOOR.replace('"fixed"', '"kinematic"')
          + "motion = [[0, 1, 2, 3, 4, 5, 6], [0.1, 1, 2, 3]]\n")
    write(folder / "ball_scene.toml", scene(floor=FLOOR.replace(
        '{shape = "slab", size = [0.4, 0.4, 0.02], modulus = 1e6, cells = [2, 2], layers = 1}',
        '{shape = "ball", radius = 0.05, modulus = 1e5}')))
    write(folder / "manifest.toml", f'[[asset]]\ninput = "cube.obj"\noutput = "cube.vtu"\nmodulus = 1e5\n')
    write(folder / "pressures.csv", "extent,pressure\n0,0\n0.5,1e308\n1,1.7e308\n")
    write(folder / "huge_forces.csv", "depth_mm,force_N\n0.2,1e30\n0.4,3e30\n0.6,6e30\n")
    write(folder / "deep.csv", "depth,force\n10,1\n30,2\n50,3\n")
    write(folder / "to_the_back.csv", "depth_mm,force_N\n1,1\n2,3\n3,6\n4,10\n5,15\n8.5,40\n")   # pad: 8 mm
    return folder


def fingerprint(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


I, O = "{i}", "{o}"
PAD = ["--spec", str(PAD_SPEC), "--units", "mm,N"]

#: (id, arguments ({i}: the inputs, {o}: the empty output folder), exit code, message fragment)
REFUSED = [
    # data loss: outputs onto inputs or onto each other, refused before any work
    ("contact -o onto input A", ["contact", f"{I}/asset.vtu", f"{I}/cube.obj", "-o", f"{I}/asset.vtu"], 2,
     "would overwrite the input"),
    ("contact -o and the paraview bodies file", ["contact", f"{I}/asset.vtu", f"{I}/cube.obj", "-o",
     f"{O}/x_bodies.vtp", "--paraview", f"{O}/x.py"], 2, "are the same file"),
    # a report onto the manifest, the other report or an asset has the wrong suffix, refused first
    ("batch --report onto the manifest", ["batch", f"{I}/manifest.toml", "--report", f"{I}/manifest.toml"], 2,
     "the JSON report is written as .json"),
    ("batch --report and --junit one file", ["batch", f"{I}/manifest.toml", "--output-dir", O, "--report",
     f"{O}/r.json", "--junit", f"{O}/r.json"], 2, "the JUnit report is written as .xml"),
    ("batch --report onto an item's asset", ["batch", f"{I}/manifest.toml", "--output-dir", O, "--report",
     f"{O}/cube.vtu"], 2, "the JSON report is written as .json"),
    ("build asset onto --core", ["build", f"{I}/cube.obj", "--modulus", "1e5", "--core", f"{I}/core.vtu",
     "-o", f"{I}/core.vtu"], 2, "would overwrite the input"),
    # meshes: finite coordinates, where they enter
    ("contact rigid mesh with NaN", ["contact", f"{I}/asset.vtu", f"{I}/nan.obj"], 1, "non-finite coordinate"),
    ("contact rigid mesh with inf", ["contact", f"{I}/asset.vtu", f"{I}/inf.obj"], 1, "non-finite coordinate"),
    ("build mesh with NaN", ["build", f"{I}/nan.obj", "--modulus", "1e5", "-o", f"{O}/x.vtu"], 1,
     "non-finite coordinate"),
    ("build 1e120 coordinates", ["build", f"{I}/huge.obj", "--modulus", "1e5", "-o", f"{O}/x.vtu"], 1,
     "too large to compute with"),
    ("calibrate indenter mesh with NaN", ["calibrate", *PAD, "--indenter", f"{I}/nan.obj", "--data", str(PRESS),
     "-o", f"{O}/x.vtu"], 1, "non-finite coordinate"),
    ("scene mesh with NaN names the mesh", ["simulate", f"{I}/nan_mesh_scene.toml"], 1, "nan.obj: vertex 1"),
    ("OBJ face index 0", ["build", f"{I}/face0.obj", "--modulus", "1e5", "-o", f"{O}/x.vtu"], 1,
     "refers to vertex 0: OBJ numbers vertices from 1"),
    ("OBJ face index -9", ["build", f"{I}/face-9.obj", "--modulus", "1e5", "-o", f"{O}/x.vtu"], 1,
     "refers to vertex -9"),
    ("PLY header without z", ["build", f"{I}/broken.ply", "--modulus", "1e5", "-o", f"{O}/x.vtu"], 1,
     "it has no 'z'"),
    ("a folder as INPUT", ["build", f"{I}/folder.obj", "--modulus", "1e5", "-o", f"{O}/x.vtu"], 1,
     "is a folder"),
    ("a missing INPUT", ["build", f"{I}/missing.obj", "--modulus", "1e5", "-o", f"{O}/x.vtu"], 1,
     "file not found"),
    ("a folder as contact A", ["contact", f"{I}/folder.obj", f"{I}/asset.vtu"], 1, "is a folder"),
    # assets: metadata checked before use
    ("contact negative dissipation", ["contact", f"{I}/negative_dissipation.vtu", f"{I}/cube.obj"], 1,
     "dissipation is -5"),
    ("contact NaN characteristic length", ["contact", f"{I}/nan_length.vtu", f"{I}/cube.obj"], 1,
     "characteristic_length"),
    ("contact negative modulus", ["contact", f"{I}/asset.vtu", f"{I}/negative_modulus.vtu"], 1,
     "not a valid fieldgen asset"),
    ("contact truncated asset", ["contact", f"{I}/truncated.vtu", f"{I}/cube.obj"], 1, "truncated.vtu"),
    ("simulate asset with negative dissipation", ["simulate", f"{I}/bad_asset_scene.toml"], 1,
     "dissipation is -5"),
    ("validate truncated asset", ["validate", f"{I}/truncated.vtu"], 1, "INVALID"),
    # TOML values by type; contradicting keys
    ("spec edge_length = true", ["build", f"{I}/cube.obj", "--spec", f"{I}/bool.toml", "-o", f"{O}/x.vtu"], 2,
     "must be a number, got true"),
    ("spec with non-UTF-8 bytes", ["build", f"{I}/cube.obj", "--spec", f"{I}/binary.toml", "-o", f"{O}/x.vtu"],
     2, "not UTF-8"),
    ("manifest with non-UTF-8 bytes", ["batch", f"{I}/binary.toml", "--output-dir", O], 2, "not UTF-8"),
    ("calibrate spec with non-UTF-8 bytes", ["calibrate", "--spec", f"{I}/binary.toml", "--indenter", "plane",
     "--target", "0.001:1", "-o", f"{O}/x.vtu"], 2, "not UTF-8"),
    ("--edge-length with --max-volume", ["build", f"{I}/cube.obj", "--modulus", "1e5", "--edge-length", "0.008",
     "--max-volume", "1e-7", "-o", f"{O}/x.vtu"], 2, "--edge-length and --max-volume both given"),
    ("scene mass and density", ["simulate", f"{I}/mass_and_density.toml"], 2, "gives both mass and density"),
    ("scene dt > duration", ["simulate", f"{I}/dt_over_duration.toml"], 2, "[simulate]: dt = 1 s is longer"),
    ("--dt > --duration", ["simulate", f"{I}/ball_scene.toml", "--duration", "0.01", "--dt", "0.1"], 2,
     "longer than the duration"),
    ('scene name = ""', ["simulate", f"{I}/empty_name.toml"], 2, "not a name (not empty)"),
    ("scene two bodies one name", ["simulate", f"{I}/same_names.toml"], 2, "2 bodies are named 'floor'"),
    ("scene without bodies", ["simulate", f"{I}/no_bodies.toml"], 2, "no [[body]] tables"),
    ("scene motion row columns", ["simulate", f"{I}/motion.toml"], 2, "[t, vx, vy, vz, wx, wy, wz]"),
    ("table pressures of 1e308", ["build", f"{I}/cube.obj", "--table", f"{I}/pressures.csv", "--edge-length",
     "0.01", "-o", f"{O}/x.vtu"], 1, "above 1e+13 Pa"),
    # calibrate
    ("calibrate forces of 1e30 N", ["calibrate", *PAD, "--indenter", "sphere:10", "--data",
     f"{I}/huge_forces.csv", "-o", f"{O}/x.vtu"], 1, "a force of 1e+30 N"),
    ("calibrate target of 1e-30 N", ["calibrate", *PAD, "--indenter", "plane", "--target", "1:1e-30",
     "-o", f"{O}/x.vtu"], 2, "a force of 1e-30 N"),
    ("calibrate sphere deeper than its radius", ["calibrate", *PAD, "--indenter", "sphere:5", "--data",
     f"{I}/deep.csv", "-o", f"{O}/x.vtu"], 2, "more than the sphere's radius"),
    ("calibrate through the bonded back", ["calibrate", *PAD, "--indenter", "sphere:10", "--direction", "0,0,1",
     "--data", str(PRESS), "-o", f"{O}/x.vtu", "--json"], 1, "pushed along --direction 0,0,1"),
    # work that would not end
    ("edge 1e-6 on a 2 cm cube", ["build", f"{I}/cube.obj", "--modulus", "1e5", "--edge-length", "1e-6",
     "-o", f"{O}/x.vtu"], 2, "would make about 6.79e+13 tets"),
    ("a box 0.2 µm thick", ["build", f"{I}/thin.obj", "--modulus", "1e5", "--edge-length", "0.008", "-o",
     f"{O}/x.vtu"], 2, "thick on average"),
    ("duration = 1e9", ["simulate", f"{I}/long.toml"], 2, "1e+12 steps"),
    ("--duration 1e9", ["simulate", f"{I}/ball_scene.toml", "--duration", "1e9"], 2, "1e+12 steps"),
]

#: Meshes of an absurd size (a unit slip), in every command that reads one: warned about on
#: stderr, naming the mesh and the option or key that sets its unit (docs/model.md §1.4); the work
#: goes on (exit 0), or fails for its own reason (exit 1), with nothing written.
WARNED = [
    ("contact rigid B 1e-32 m across", ["contact", f"{I}/asset.vtu", f"{I}/tiny.obj", "-q"], 0,
     "tiny.obj is 1e-32 m across (read in m), outside 1e-06 .. 1000 m: check --units-b"),
    ("contact rigid A 1e30 m across", ["contact", f"{I}/big.obj", f"{I}/asset.vtu", "-q"], 0,
     "big.obj is 1e+30 m across (read in m), outside 1e-06 .. 1000 m: check --units-a"),
    ("contact rigid B 1e30 mm across", ["contact", f"{I}/asset.vtu", f"{I}/big.obj", "--units-b", "mm", "--json",
     "-q"], 0, "big.obj is 1e+27 m across (read in mm)"),
    ("calibrate indenter mesh 1e30 mm across", ["calibrate", *PAD, "--indenter", f"{I}/big.obj", "--data",
     str(PRESS), "-o", f"{O}/x.vtu"], 1,
     "big.obj is 1e+27 m across (read in mm), outside 1e-06 .. 1000 m: check the length unit of --units"),
    ("scene mesh 1e-32 m across", ["simulate", f"{I}/tiny_mesh_scene.toml", "-q"], 0,
     "tiny.obj of body 'box' is 1e-32 m across (read in m), outside 1e-06 .. 1000 m: check the units"),
    ("scene mesh 1e30 m across", ["simulate", f"{I}/big_mesh_scene.toml", "--json", "-q"], 0,
     "big.obj of body 'box' is 1e+30 m across"),
]


def _expand(args: list[str], inputs: Path, out: Path) -> list[str]:
    return [a.replace(I, str(inputs)).replace(O, str(out)) for a in args]


@pytest.mark.parametrize("args, code, words", [c[1:] for c in REFUSED + WARNED],
                         ids=[c[0] for c in REFUSED + WARNED])
def test_hostile_input_is_refused(inputs, tmp_path, monkeypatch, args, code, words):
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)                    # default outputs land here too
    before = fingerprint(inputs)
    result = CliRunner().invoke(main, _expand(args, inputs, out))
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, (SystemExit, type(None))), result.exception   # no traceback
    assert "Traceback" not in result.output
    report = result.stdout if args[0] == "validate" else result.stderr      # validate's report is stdout
    assert words in report, result.output
    assert list(out.iterdir()) == []          # nothing written, nothing half-written
    assert fingerprint(inputs) == before      # every input's bytes unchanged, nothing added


def test_contact_output_onto_input_is_refused_before_any_work(inputs, tmp_path):
    """-o onto A (by its name, a symbolic link or a hard link), and -o onto the ParaView bodies
    file: exit 2, no stage started, the asset's bytes unchanged."""
    a = tmp_path / "A.vtu"
    shutil.copy(inputs / "asset.vtu", a)
    (tmp_path / "link.vtu").symlink_to(a)
    os.link(a, tmp_path / "hard.vtu")
    original = a.read_bytes()
    for output in (a, tmp_path / "link.vtu", tmp_path / "hard.vtu", Path(os.path.relpath(a))):
        result = CliRunner().invoke(main, ["contact", str(a), str(inputs / "cube.obj"), "-o", str(output)])
        assert result.exit_code == 2, result.output
        assert "would overwrite the input" in result.stderr and "load" not in result.stderr
        assert a.read_bytes() == original
    result = CliRunner().invoke(main, ["contact", str(a), str(inputs / "cube.obj"), "-o",
                                       str(tmp_path / "v_bodies.vtp"), "--paraview", str(tmp_path / "v.py")])
    assert result.exit_code == 2 and "are the same file" in result.stderr and "load" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A.vtu", "hard.vtu", "link.vtu"]
    assert a.read_bytes() == original


def test_size_warnings_for_absurd_scales(inputs, tmp_path):
    """A 1e30 m cube and a 1e-32 m cube are meshed (their numbers are finite), with a warning."""
    for name, size, flags in (("big", "1e+30 m", ["--edge-length", "5e29"]),
                              ("tiny", "1e-32 m", ["--edge-length", "5e-33"])):
        result = CliRunner().invoke(main, ["build", str(inputs / f"{name}.obj"), "--modulus", "1e5", *flags,
                                           "-q", "-o", str(tmp_path / f"{name}.vtu")])
        assert result.exit_code == 0, result.output
        assert f"the part is {size} across" in result.stderr


def test_size_warning_of_a_rigid_body_in_the_json_report(inputs):
    """The rigid body's size warning is in contact's --json warnings too."""
    result = CliRunner().invoke(main, ["contact", str(inputs / "asset.vtu"), str(inputs / "tiny.obj"), "--json", "-q"])
    assert result.exit_code == 0, result.output
    assert [w for w in json.loads(result.stdout)["warnings"] if "m across" in w] == [
        f"{inputs / 'tiny.obj'} is 1e-32 m across (read in m), outside 1e-06 .. 1000 m: check --units-b"]


@pytest.mark.slow
def test_size_warning_of_an_indenter_and_the_absurd_fit_it_makes(inputs, tmp_path):
    """The indenter mesh's size warning reaches the user (stderr, even with -q), and the fit such
    an indenter would make is refused before it starts: a 1e-35 m cube pressing a pad makes
    contact polygons at round-off, whose force per pascal is -6e-88 N (it was fitted to M0 about
    1e89 Pa, or to a negative modulus refused as a bad --modulus); the --json error names the
    depth and the units; nothing is written."""
    out = tmp_path / "x.vtu"
    result = CliRunner().invoke(main, ["calibrate", *PAD, "--indenter", str(inputs / "tiny.obj"), "--data", str(PRESS),
                                       "-o", str(out), "--json", "-q"])
    assert result.exit_code == 1 and not out.exists()
    assert (f"warning: the indenter {inputs / 'tiny.obj'} is 1e-35 m across (read in mm), outside 1e-06 .. 1000 m: "
            "check the length unit of --units (the indenter mesh is read in it)") in result.stderr
    error = json.loads(result.stdout)
    assert error["ok"] is False and "pushes back with no force" in error["error"], error
    assert "(depths and the indenter read as mm,N)" in error["error"]


def test_inspect_names_what_is_invalid(inputs):
    """inspect looks at any asset, and names every failed check of an invalid one (stderr)."""
    result = CliRunner().invoke(main, ["inspect", str(inputs / "negative_dissipation.vtu"), "--json", "-q"])
    assert result.exit_code == 0 and json.loads(result.stdout)["valid"] is False
    assert "invalid asset, dissipation: dissipation is -5 s/m, negative" in result.stderr


def test_inspect_json_of_a_nan_asset_is_valid_json(inputs):
    result = CliRunner().invoke(main, ["inspect", str(inputs / "nan_length.vtu"), "--json", "-q"])
    assert result.exit_code == 1
    def refuse(token):
        raise AssertionError(f"{token} is no JSON token")
    data = json.loads(result.stdout, parse_constant=refuse)
    assert data["characteristic_length"] is None and data["valid"] is False
    assert "characteristic_length" in result.stderr


def test_coincident_identical_assets_give_zero_force(inputs):
    """Two identical assets at the same pose: by symmetry (swapping A and B changes nothing, and
    the force on A is minus the force on B) the net force is zero; 1 mm apart it is not."""
    result = CliRunner().invoke(main, ["contact", str(inputs / "asset.vtu"), str(inputs / "twin.vtu"), "--json",
                                       "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["force"] == [0.0, 0.0, 0.0] and data["torque"] == [0.0, 0.0, 0.0]
    assert "same mesh and field at the same pose" in result.stderr
    moved = CliRunner().invoke(main, ["contact", str(inputs / "asset.vtu"), str(inputs / "twin.vtu"),
                                      "--pose-b", "0.001,0,0,0,0,0", "--json", "-q"])
    force = json.loads(moved.stdout)["force"]
    assert force[0] > 1.0 and abs(force[0]) > 10 * max(abs(force[1]), abs(force[2]))   # pushed apart along x


def test_calibrate_pass_through_at_some_depths_is_one_json_warning(inputs, tmp_path):
    """The foam pad is 8 mm thick on its bonded back: the 8.5 mm row reaches it. The fit goes on,
    with one warning in the --json report and no raw PassThroughWarning lines."""
    result = CliRunner().invoke(main, ["calibrate", *PAD, "--indenter", "sphere:10", "--data",
                                       str(inputs / "to_the_back.csv"), "-o", str(tmp_path / "pad.vtu"), "--json",
                                       "-q"])
    assert result.exit_code == 0, result.output
    notes = [w for w in json.loads(result.stdout)["warnings"] if "bonded back" in w]
    assert notes == ["the indenter reaches the rigid core or bonded back at 1 of 6 depths (along --direction "
                     "0,0,-1): the force there no longer grows with depth"]
    assert "PassThroughWarning" not in result.stderr


def _run(args, **kwargs):
    return subprocess.run(FIELDGEN + [str(a) for a in args], capture_output=True, text=True, timeout=600,
                          cwd=kwargs.pop("cwd", None), **kwargs)


def test_tetgen_prints_nothing_on_stdout(inputs, tmp_path):
    """A scene with a TetGen-meshed ball: stdout is the JSON report alone."""
    done = _run(["simulate", inputs / "ball_scene.toml", "--json", "-q"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)
    assert "parsing switches" not in done.stdout.lower()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_report_that_cannot_be_written_exits_1(inputs, tmp_path):
    for args in (["inspect", inputs / "asset.vtu", "--json", "-q"], ["validate", inputs / "asset.vtu"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run(FIELDGEN + [str(a) for a in args], stdout=full, stderr=subprocess.PIPE,
                                  text=True, timeout=600)
        assert done.returncode == 1 and "cannot write the report" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run(FIELDGEN + ["contact", str(inputs / "asset.vtu"), str(inputs / "cube.obj"), "--json",
                                      "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=600, preexec_fn=lambda: os.close(1))
    assert done.returncode == 1 and "stdout is closed" in done.stderr


def test_damaged_scene_cache_is_rebuilt_and_named(inputs, tmp_path):
    spec = write(tmp_path / "part.toml", f'input = "{inputs / "cube.obj"}"\nmodulus = 1e5\nedge_length = 0.01\n')
    write(tmp_path / "scene.toml", scene(floor="", name="part", geometry=f'{{build = "{spec.name}"}}'))
    cache = tmp_path / "cache"
    env = {"FIELDGEN_CACHE": str(cache)}
    first = CliRunner().invoke(main, ["simulate", str(tmp_path / "scene.toml"), "-q"], env=env)
    assert first.exit_code == 0, first.output
    (cached,) = cache.iterdir()
    cached.write_bytes(cached.read_bytes()[:1000])                # truncated
    second = CliRunner().invoke(main, ["simulate", str(tmp_path / "scene.toml"), "-q"], env=env)
    assert second.exit_code == 0, second.output
    assert f"{cached}: the cached asset" in second.stderr and "built again" in second.stderr
    assert CliRunner().invoke(main, ["validate", str(cached), "-q"]).exit_code == 0
    write(tmp_path / "not_a_folder", "x")
    third = CliRunner().invoke(main, ["simulate", str(tmp_path / "scene.toml"), "-q"],
                               env={"FIELDGEN_CACHE": str(tmp_path / "not_a_folder")})
    assert third.exit_code == 1 and "is a file, not a folder" in third.stderr, third.output
    assert isinstance(third.exception, SystemExit)


# --------------------------------------------------------------------------- the helpers themselves

def test_check_distinct(tmp_path):
    from fieldgen.paths import check_distinct

    a = write(tmp_path / "a.vtu", "a")
    os.link(a, tmp_path / "hard.vtu")
    (tmp_path / "soft.vtu").symlink_to(a)
    check_distinct({"-o": tmp_path / "b.vtu", "--png": tmp_path / "b.png"}, {"A": a})
    for output in (a, tmp_path / "hard.vtu", tmp_path / "soft.vtu", tmp_path / "x" / ".." / "a.vtu"):
        with pytest.raises(OptionError, match="would overwrite the input"):
            check_distinct({"-o": output}, {"A": a})
    with pytest.raises(OptionError, match="--report .* and --junit .* are the same file"):
        check_distinct({"--report": tmp_path / "r.json", "--junit": tmp_path / "." / "r.json"})


def test_tet_count_estimate():
    """The estimate is the volume over the volume bound of a regular tet of the edge length; the
    size that fits is the edge whose count is the limit (closed forms, computed here)."""
    from fieldgen.meshing.tetgen import MAX_TETS, MeshingOptions, check_tet_count

    corners = np.array(CUBE_CORNERS, dtype=float) * 0.02
    faces = np.array(CUBE_FACES) - 1
    volume = 0.02 ** 3
    tet = 1e-6 ** 3 / (6 * math.sqrt(2))
    with pytest.raises(OptionError) as refused:
        check_tet_count(corners, faces, MeshingOptions(edge_length=1e-6))
    assert f"about {volume / tet:.3g} tets" in str(refused.value)
    assert f"at least {(6 * math.sqrt(2) * volume / MAX_TETS) ** (1 / 3):.3g} m" in str(refused.value)
    check_tet_count(corners, faces, MeshingOptions(edge_length=0.001))          # 5.7e4 tets: fine
    w, t = 0.02, 2e-7                          # a slab: mean thickness 2V/A = w²t / (w² + 2wt)
    slab = np.array(CUBE_CORNERS, dtype=float) * [w, w, t]
    thickness = w * w * t / (w * w + 2 * w * t)
    with pytest.raises(OptionError) as refused:
        check_tet_count(slab, faces, MeshingOptions(edge_length=0.008))
    assert f"about {thickness:.3g} m thick" in str(refused.value)
    assert f"about {6 * math.sqrt(2) * w * w * t / (2 * thickness) ** 3:.3g} of them" in str(refused.value)
    check_tet_count(slab * [1, 1, 5000], faces, MeshingOptions())              # 1 mm thick: fine


def test_step_count_limit():
    from fieldgen.runtime.scene.schema import MAX_STEPS, check_step_count

    check_step_count(1.0, 1e-3)
    with pytest.raises(OptionError, match="1e\\+12 steps"):
        check_step_count(1e9, 1e-3)
    with pytest.raises(OptionError, match="longer than the duration"):
        check_step_count(0.01, 0.1)
    check_step_count(MAX_STEPS * 1e-3, 1e-3)


def test_a_long_child_prints_progress_and_stops_at_its_limit(monkeypatch, capsys):
    from fieldgen.meshing import process

    monkeypatch.setattr(process, "PROGRESS_SECONDS", 0.2)
    child = subprocess.Popen(["sleep", "0.7"])
    assert process._waited(child, 10.0, label="TetGen") == 0
    assert "TetGen: still running after" in capsys.readouterr().err
    child = subprocess.Popen(["sleep", "30"])
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        process._waited(child, 0.5, label="TetGen")
    assert time.monotonic() - start < 5 and child.poll() is not None          # killed
