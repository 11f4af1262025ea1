"""One table of length units for `build`, `contact` and scene files: each accepts exactly the
names of fieldgen.units.LENGTH_UNITS and refuses any other as a usage error (exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

from fieldgen.options import BuildOptions, options_from_mapping
from fieldgen.cli.main import main
from fieldgen.errors import OptionError
from fieldgen.runtime.scene.load import load_scene
from fieldgen.units import LENGTH_UNITS, length_scale
from test_runtime_meshes import box_surface

#: metres per unit, from the definitions (1 in = 25.4 mm exactly)
EXPECTED = {"m": 1.0, "cm": 0.01, "mm": 0.001, "in": 0.0254}
REFUSED = ["furlong", "inch", "ft", "MM", "meter", "km", ""]


def run(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def test_the_table():
    assert list(LENGTH_UNITS) == list(EXPECTED)
    for name, scale in EXPECTED.items():
        assert length_scale(name) == pytest.approx(scale, rel=1e-15)
    for name in REFUSED:
        with pytest.raises(OptionError, match="m, cm, mm, in"):
            length_scale(name)


def _choices(command: str, option: str) -> list[str]:
    params = {p.name: p for p in main.commands[command].params}
    return list(params[option].type.choices)


def test_commands_offer_exactly_the_table():
    assert _choices("build", "units") == list(LENGTH_UNITS)
    assert _choices("contact", "units_a") == list(LENGTH_UNITS)
    assert _choices("contact", "units_b") == list(LENGTH_UNITS)


@pytest.mark.parametrize("units", list(EXPECTED))
def test_build_accepts(units):
    assert options_from_mapping({"units": units, "modulus": 1e5}).checked().units == units


@pytest.mark.parametrize("units", REFUSED)
def test_build_refuses(units, meshes, tmp_path):
    with pytest.raises(OptionError, match="units"):
        BuildOptions(units=units, modulus=1e5).checked()
    result = run("build", meshes / "box.STL", "--units", units, "--modulus", "1e5", "-o", tmp_path / "x.vtu")
    assert result.exit_code == 2 and "--units" in result.stderr
    spec = tmp_path / "spec.toml"
    spec.write_text(f'units = "{units}"\nmodulus = 1e5\n')
    result = run("build", meshes / "box.STL", "--spec", spec, "-o", tmp_path / "x.vtu")
    assert result.exit_code == 2 and repr(units) in result.stderr and "m, cm, mm, in" in result.stderr


@pytest.fixture(scope="module")
def plate_files(tmp_path_factory):
    """The same 0.2 x 0.2 x 0.02 m plate written once per unit (coordinates divided by the scale)."""
    folder = tmp_path_factory.mktemp("plates")
    v, f = box_surface([-0.1, -0.1, -0.02], [0.1, 0.1, 0.0])
    out = {}
    for name, scale in EXPECTED.items():
        out[name] = folder / f"plate_{name}.stl"
        trimesh.Trimesh(v / scale, f, process=False).export(out[name])
    return out


@pytest.mark.parametrize("units", list(EXPECTED))
def test_contact_accepts_and_scales(units, plate_files, meshes):
    """The pepper (Drake's field, E = 1e5 Pa) pressed 3 mm into the plate: the plate written in any
    accepted unit and read with that --units-b gives the metre plate's force."""
    pepper = meshes / "yellow_bell_pepper_no_stem_low.vtk"
    from fieldgen.runtime.contact.geometries import load_body

    bottom = float(load_body(pepper, modulus=1e5).points[:, 2].min())
    common = ["contact", pepper, "--modulus-a", "1e5", "--pose-b", f"0,0,{bottom + 0.003},0,0,0", "--json"]
    reference = json.loads(run(*common[:2], plate_files["m"], *common[2:]).stdout)
    result = run(*common[:2], plate_files[units], *common[2:], "--units-b", units)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert reference["faces"] > 0
    assert data["force"][2] == pytest.approx(reference["force"][2], rel=1e-6)


@pytest.mark.parametrize("units", REFUSED)
def test_contact_refuses(units, plate_files, meshes):
    result = run("contact", meshes / "yellow_bell_pepper_no_stem_low.vtk", plate_files["m"], "--modulus-a", "1e5",
                 "--units-b", units)
    assert result.exit_code == 2 and "--units-b" in result.stderr


def _scene(tmp_path, mesh, units) -> str:
    path = tmp_path / "scene.toml"
    path.write_text(f"""
[[body]]
name = "floor"
kind = "fixed"
geometry = {{shape = "slab", size = [0.4, 0.4, 0.02], modulus = 1e6, cells = [2, 2], layers = 1}}

[[body]]
name = "plate"
geometry = {{mesh = "{mesh.name}", units = "{units}"}}
mass = 1.0
position = [0, 0, 0.1]
""")
    return path


@pytest.mark.parametrize("units", list(EXPECTED))
def test_scene_accepts_and_scales(units, plate_files, tmp_path):
    import shutil

    shutil.copy(plate_files[units], tmp_path / plate_files[units].name)
    scene, _ = load_scene(_scene(tmp_path, plate_files[units], units))
    vertices = scene.bodies[1].geometry.vertices
    assert np.allclose(vertices.min(axis=0), [-0.1, -0.1, -0.02], rtol=0, atol=1e-8)   # STL stores float32
    assert np.allclose(vertices.max(axis=0), [0.1, 0.1, 0.0], rtol=0, atol=1e-8)   # STL stores float32


@pytest.mark.parametrize("units", REFUSED)
def test_scene_refuses(units, plate_files, tmp_path):
    import shutil

    shutil.copy(plate_files["m"], tmp_path / plate_files["m"].name)
    scene = _scene(tmp_path, plate_files["m"], units)
    with pytest.raises(OptionError, match="m, cm, mm, in"):
        load_scene(scene)
    result = run("simulate", scene, "--duration", "0.001")
    assert result.exit_code == 2 and repr(units) in result.stderr


def test_contact_units_only_for_rigid_meshes(plate_files, meshes):
    """Assets and .vtk tet meshes are SI: a unit for them is refused, not silently ignored."""
    result = run("contact", meshes / "yellow_bell_pepper_no_stem_low.vtk", plate_files["m"], "--modulus-a", "1e5",
                 "--units-a", "mm")
    assert result.exit_code == 2 and "--units-a applies to rigid surface meshes" in result.stderr


def test_contact_refuses_a_unit_for_a_step_body(plate_files, meshes):
    """A STEP file names its own unit (read true to size): --units-b would be ignored, so it is refused."""
    result = run("contact", plate_files["m"], meshes / "featuretype.STEP", "--units-b", "in")
    assert result.exit_code == 2 and "a STEP file names its own" in result.stderr
    assert "featuretype.STEP" in result.stderr and "Drop --units-b" in result.stderr


def test_scene_refuses_a_unit_for_a_step_body(meshes, tmp_path):
    """As contact's --units-b: a STEP file's own unit holds, so a scene's units for it is refused, not ignored."""
    import shutil

    shutil.copy(meshes / "featuretype.STEP", tmp_path / "featuretype.STEP")
    scene = _scene(tmp_path, tmp_path / "featuretype.STEP", "in")
    with pytest.raises(OptionError, match="names its own unit"):
        load_scene(scene)
    result = run("simulate", scene, "--duration", "0.001")
    assert result.exit_code == 2 and "featuretype.STEP" in result.stderr and "Drop units" in result.stderr


@pytest.mark.parametrize("units, warned", [("m", True), ("mm", False)])
def test_a_part_tens_of_metres_across_read_in_metres_is_warned_about(tmp_path, units, warned):
    """A 40-unit cube (a 40 mm part whose file is in millimetres): read in metres, the default, it
    is 40 m across, within the absurd-size bounds but no contact part; the build warns, naming
    --units mm. Read in mm: no warning."""
    path = tmp_path / "cube.stl"
    trimesh.creation.box(extents=(40.0, 40.0, 40.0)).export(path)
    out = tmp_path / "cube.vtu"
    edge = 20.0 if units == "m" else 0.02 * 1000
    result = run("build", path, "--units", units, "--modulus", "1e5", "--edge-length", edge, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    slip = [w for w in warnings if "across (read in metres" in w]
    assert bool(slip) is warned
    if warned:
        assert "40 m across" in slip[0] and "--units mm" in slip[0]


def test_a_step_part_is_never_warned_of_as_millimetres_read_as_metres(meshes, monkeypatch):
    """A STEP file is read true to size whatever --units says, so the advice to give --units mm
    would only rescale the length flags. With the bound lowered below the part's size, the STL of
    the same part read in metres is warned about and its STEP file is not."""
    import fieldgen.surface.stage as stage
    from fieldgen.surface.stage import load_surface

    monkeypatch.setattr(stage, "LIKELY_PART_SIZE", 0.01)
    assert any("read in metres, the default" in w for w in load_surface(meshes / "featuretype.STL", "m").warnings)
    assert not any("read in metres" in w for w in load_surface(meshes / "featuretype.STEP", "m").warnings)
