"""Hostile magnitudes: finite numbers no material or motion has (a modulus of 1e200 Pa or 5e-324
Pa, a dissipation of 1e300 s/m, a speed above light's, an indenter a kilometre wide), a contact
whose wrench overflows, and a GLB vertex that is not finite. Each is refused where it enters,
with its exit code and a message naming the option or file, the problem and the fix, and no
traceback or Python warning."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

import fieldgen.options
from fieldgen.cli.main import main
from fieldgen.errors import InputError, OptionError
from fieldgen.io.surface_readers import read_triangles
from fieldgen.material.modulus import table_law_from_points
from fieldgen.runtime.contact.geometries import CompliantGeometry
from fieldgen.runtime.contact.wrench import combined_dissipation
from fieldgen.options import COMMAND_LINE, BuildOptions, options_from_mapping, options_from_spec

ROOT = Path(__file__).resolve().parents[1]
PEPPER = ROOT / "tests" / "data" / "meshes" / "yellow_bell_pepper_no_stem_low.vtk"


def run(*args):
    """``fieldgen ARGS`` in-process; no traceback and no Python warning whatever the exit code."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert isinstance(result.exception, (SystemExit, type(None))), result.exception
    assert "Traceback" not in result.output and "Warning:" not in result.output, result.output
    return result


@pytest.fixture
def ball(tmp_path) -> Path:
    path = tmp_path / "ball.obj"
    trimesh.creation.icosphere(subdivisions=1, radius=0.01).export(path)
    return path


# ------------------------------------------------------------------ contact's moduli, friction, velocities

CONTACT_REFUSED = [
    ("--modulus-a", "1e200", ["--modulus-a 1e+200 Pa", "above 1e+13 Pa", "stiffer than any solid"]),
    ("--modulus-a", "1e308", ["--modulus-a 1e+308 Pa", "above 1e+13 Pa"]),
    ("--modulus-b", "1e-300", ["--modulus-b 1e-300 Pa", "below 1 Pa", "softer than any gel"]),
    ("--mu-b", "1e300", ["--mu-b 1e+300 is above 10", "no pair of solids"]),
    ("--velocity-b", "0,0,1e10,0,0,0", ["--velocity-b", "faster than light"]),
    ("--velocity-a", "0,0,0,0,0,1e20", ["--velocity-a", "spin of 1e+20 rad/s", "faster than light"]),
]


@pytest.mark.parametrize("flag, value, words", CONTACT_REFUSED, ids=[f"{c[0]} {c[1]}" for c in CONTACT_REFUSED])
def test_contact_refuses_magnitudes_no_body_has(flag, value, words):
    """Exit 2 before anything is loaded, with the option, the bound and the fix; --json answers."""
    moduli = {"--modulus-a": "1e5", "--modulus-b": "1e5"}
    if flag in moduli:
        moduli[flag] = value
    args = ["contact", PEPPER, PEPPER, "--pose-b", "0.01,0,0,0,0,0", "--json"]
    args += [x for pair in moduli.items() for x in pair]
    if flag not in moduli:
        args += [flag, value]
    result = run(*args)
    assert result.exit_code == 2, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["exit_code"] == 2
    for word in words + ["Give"]:
        assert word in data["error"], data["error"]


def test_contact_accepts_the_bounds_themselves():
    """1 Pa and 1e13 Pa, a friction of 10 and a speed of light's are inside."""
    for value in ("1", "1e13"):
        assert fieldgen.options.check_modulus_bounds(float(value), flag="--modulus-a") is None
    fieldgen.options.check_friction(10.0, "--mu-a")
    fieldgen.options.check_velocity((0, 0, fieldgen.options.SPEED_OF_LIGHT), (0, 0, 0), "--velocity-b")


def test_an_overflowing_contact_force_exits_1_naming_the_damping(tmp_path, ball, monkeypatch):
    """An asset built before the dissipation was bounded (1e300 s/m) pushed at 1e8 m/s: the
    damping force overflows; exit 1 naming the dissipation and the velocities, not null forces."""
    monkeypatch.setattr(fieldgen.options, "MAX_DISSIPATION", math.inf)
    asset = tmp_path / "d300.vtu"
    built = run("build", ball, "--modulus", "1e5", "--edge-length", "0.005", "--dissipation", "1e300",
                "-o", asset, "-q")
    assert built.exit_code == 0, built.output
    monkeypatch.undo()
    box = tmp_path / "box.stl"
    trimesh.creation.box([0.02, 0.02, 0.02]).export(box)
    result = run("contact", asset, box, "--pose-b", "0,0,-0.019,0,0,0", "--velocity-b", "0,0,1e8,0,0,0",
                 "--json", "-q")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is False and "not finite" in data["error"], data
    for word in ("dissipation (1e+300 s/m)", "--velocity-a/--velocity-b", "at most 1e+06 s/m"):
        assert word in data["error"], data["error"]
    slow = run("contact", asset, box, "--pose-b", "0,0,-0.019,0,0,0", "--velocity-b", "0,0,0,0,0,0", "-q")
    assert slow.exit_code == 0, slow.output          # at rest the same asset gives a finite force


# ------------------------------------------------------------------ build's magnitudes

BUILD_REFUSED = [
    (["--modulus", "5e-324"], ["--modulus 4.94066e-324 Pa", "below 1 Pa", "softer than any gel"]),
    (["--modulus", "1e5", "--dissipation", "1e300"], ["--dissipation 1e+300 s/m", "above 1e+06 s/m"]),
    (["--modulus", "1e5", "--expansion-rate", "1e-300"], ["--expansion-rate 1e-300 1/s", "below 1e-06 1/s"]),
    (["--modulus", "1e5", "--mu-static", "1e300", "--mu-dynamic", "1e300"], ["--mu-static 1e+300 is above 10"]),
    (["--modulus", "1e5", "--tangential-stiffness", "1e300"], ["--tangential-stiffness 1e+300 1/m", "atom"]),
    (["--modulus", "1e5", "--tangential-damping", "1e300"], ["--tangential-damping 1e+300 s/m"]),
    (["--modulus", "1e5", "--skin", "1e-12", "--edge-length", "0.000116"],
     ["--skin 1e-12 m", "thinner than 1 µm", "at least 1e-06 m"]),
    (["--modulus", "1e5", "--skin", "1e-4", "--units", "mm"], ["--skin 0.0001 mm", "at least 0.001 mm"]),
]


@pytest.mark.parametrize("flags, words", BUILD_REFUSED, ids=[" ".join(c[0][2:] or c[0]) for c in BUILD_REFUSED])
def test_build_refuses_magnitudes_no_material_has(tmp_path, ball, flags, words):
    """Exit 2 at entry (no file written), naming the flag, the bound and the fix."""
    out = tmp_path / "out.vtu"
    result = run("build", ball, *flags, "-o", out, "--json")
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)["error"]
    for word in words + ["Give"]:
        assert word in error, error
    assert not out.exists() and "failed validation" not in error


@pytest.mark.parametrize("text, words", [
    ("modulus = 0.5\n", ["s.toml: modulus = 0.5 Pa is below 1 Pa"]),
    ("modulus = 1e5\ndissipation = 1e7\n", ["s.toml: dissipation 1e+07 s/m is above"]),
    ("modulus = 1e5\nmu_static = 20.0\nmu_dynamic = 20.0\n", ["s.toml: mu_static 20 is above 10"]),
])
def test_a_spec_past_a_bound_names_the_spec_and_the_key(tmp_path, text, words):
    spec = tmp_path / "s.toml"
    spec.write_text(text)
    with pytest.raises(OptionError) as caught:
        options, _, _ = options_from_spec(spec)
        fieldgen.options.checked_from(options, spec)
    for word in words:
        assert word in str(caught.value).replace(str(tmp_path) + "/", ""), str(caught.value)


def test_the_values_examples_use_stay_accepted():
    """The smallest and largest values the assets, examples and tests give are inside the bounds."""
    for damping in ({"dissipation": 300.0}, {"expansion_rate": 2.0}):
        options = options_from_mapping({"modulus": 1.0, "mu_static": 1.0, "mu_dynamic": 0.8,
                                        "tangential_stiffness": 1e4, "tangential_damping": 1e4,
                                        "skin": 2.0, "units": "mm", **damping}, origin=COMMAND_LINE)
        assert options.checked() == options
    assert BuildOptions(modulus=1e13).checked().modulus == 1e13


# ------------------------------------------------------------------ calibrate's indenter

@pytest.mark.parametrize("indenter", ["sphere:1e300", "cylinder:1e-300", "paraboloid:2e3", "sphere:1e-10"])
def test_an_indenter_radius_no_indenter_has_is_refused_at_entry(tmp_path, ball, indenter):
    """Exit 2 naming the radius and its range, not 'the indenter never touches the part' after a
    RuntimeWarning."""
    spec = tmp_path / "c.toml"
    spec.write_text("modulus = 1e5\nedge_length = 0.005\n")
    result = run("calibrate", ball, "--spec", spec, "--indenter", indenter, "--target", "0.0005:0.1",
                 "-o", tmp_path / "c.vtu", "--json", "-q")
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)["error"]
    assert f"indenter {indenter!r}" in error and "outside 1e-09 .. 1000 m" in error, error
    assert "never touches" not in error and "RuntimeWarning" not in result.stderr


# ------------------------------------------------------------------ a GLB with a non-finite vertex

@pytest.mark.parametrize("bad", [np.inf, np.nan], ids=["inf", "nan"])
def test_a_glb_vertex_that_is_not_finite_is_named_as_in_the_file(tmp_path, bad):
    """Only x is bad: the report gives [bad, y, z] as the file holds them (not the node transform's
    [inf, nan, nan]), and no RuntimeWarning is raised."""
    box = trimesh.creation.box([0.02, 0.02, 0.02])
    scene = trimesh.Scene()
    scene.add_geometry(box, transform=trimesh.transformations.rotation_matrix(0.3, [0, 0, 1]))
    data = bytearray(scene.export(file_type="glb"))
    first = box.vertices[0].astype(np.float32)
    at = bytes(data).find(first.tobytes())
    assert at > 0
    data[at:at + 4] = np.float32(bad).tobytes()
    path = tmp_path / "bad.glb"
    path.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(InputError) as caught:
            read_triangles(path)
    expected = [float(bad), float(first[1]), float(first[2])]
    assert f"vertex 1 of 8 has a non-finite coordinate {expected}" in str(caught.value), str(caught.value)
    result = run("build", path, "--modulus", "1e5", "-q", "--json")
    assert result.exit_code == 1 and "RuntimeWarning" not in result.stderr, result.output


def test_a_table_softer_than_any_gel_is_refused():
    with pytest.raises(InputError, match=r"p0\(1\) = 2e-300 Pa, below 1 Pa"):
        table_law_from_points([0.0, 1.0], [0.0, 2e-300])
    assert table_law_from_points([0.0, 1.0], [0.0, 1.0]).modulus == 1.0


def test_a_skin_too_thin_for_the_part_names_the_skin_not_the_edge(tmp_path, ball):
    # The skin caps the edge at half of it, so 'mesh coarser: an edge length of at least ...'
    # could not be followed: the message says the skin is too thin and how thick it must be.
    # 2e7 regular tets of edge a hold the ball's volume V when a = (6 sqrt2 V / 2e7)^(1/3); the
    # skin must be twice that.
    result = run("build", ball, "--modulus", "1e5", "--skin", "1e-5", "--edge-length", "0.001",
                 "-o", tmp_path / "x.vtu")
    assert result.exit_code == 2, result.output
    edge = (6 * math.sqrt(2) * trimesh.load(ball).volume / 2e7) ** (1 / 3)
    assert "the skin 1e-05 m is too thin for this part" in result.stderr
    assert f"a skin of at least {2 * edge:.3g} m (--skin is in --units)" in result.stderr
    assert "edge length of at least" not in result.stderr


def test_an_expansion_rate_that_makes_a_dissipation_no_material_has_is_refused(tmp_path, ball):
    # The 1 cm ball's L is a few mm, so tau = 1e-4 1/s gives chi = 1/(L tau) of a few 1e6 s/m,
    # past the 1e6 s/m bound although tau passes its own floor (1e-6 1/s); 1e-2 gives a few 1e4.
    refused = run("build", ball, "--modulus", "1e5", "--edge-length", "0.005", "--expansion-rate", "1e-4",
                  "-o", tmp_path / "x.vtu")
    assert refused.exit_code == 2, refused.output
    assert "--expansion-rate 0.0001 1/s gives this part" in refused.stderr and "above 1e+06 s/m" in refused.stderr
    assert not (tmp_path / "x.vtu").exists()
    built = run("build", ball, "--modulus", "1e5", "--edge-length", "0.005", "--expansion-rate", "1e-2",
                "-o", tmp_path / "y.vtu")
    assert built.exit_code == 0, built.output


def test_the_pair_dissipation_of_bodies_stiff_to_the_last_float_is_finite():
    # chi = (chi_a c_a^2 + chi_b c_b^2) / (c_a + c_b)^2 with c = L / M (D C.4): at M = 1e308 the
    # squares underflow to 0 and the quotient was a ZeroDivisionError; the weights c_a / (c_a +
    # c_b) = 1/3 and 2/3 are the same at any M, so chi = 2/9 + 4 x 4/9 = 2.
    def body(length, modulus, dissipation):
        body = CompliantGeometry.__new__(CompliantGeometry)      # only the three numbers are read
        body.characteristic_length, body.modulus, body.dissipation = length, modulus, dissipation
        return body

    for modulus in (1e5, 1e308):
        assert combined_dissipation(body(0.01, modulus, 2.0), body(0.02, modulus, 4.0)) == pytest.approx(2.0, rel=1e-12)


def test_a_spec_without_a_modulus_is_named(tmp_path, ball):
    spec = tmp_path / "pad.toml"
    spec.write_text(f'input = "{ball.as_posix()}"\nedge_length = 0.005\n')
    result = run("build", "--spec", spec, "-o", tmp_path / "x.vtu")
    assert result.exit_code == 2, result.output
    assert "pad.toml: the linear law needs a modulus, and the spec gives none" in result.stderr
    assert "modulus = 1e5" in result.stderr
    flagged = run("build", ball, "--edge-length", "0.005", "-o", tmp_path / "y.vtu")
    assert flagged.exit_code == 2 and "the spec" not in flagged.stderr and "--modulus" in flagged.stderr
