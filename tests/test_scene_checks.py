"""Scene files are checked like manifests: unknown keys, wrong types and out-of-range values
are usage errors (exit 2) naming the file, the table, the key and the nearest valid key; the
continuous integrator refuses a pair of rigid geometries instead of dropping its contact."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.runtime.scene.load import load_scene
from fieldgen.runtime.scene.schema import SceneError

SCENES = Path(__file__).resolve().parent.parent / "assets" / "scenes"

BOX = '''
[simulate]
duration = 0.01
dt = 1e-3
{simulate}

[[body]]
name = "floor"
kind = "fixed"
geometry = {{shape = "slab", size = [1, 1, 0.02], modulus = 1e6, cells = [2, 2], layers = 1}}

[[body]]
name = "cube"
geometry = {{shape = "box", size = [0.1, 0.1, 0.1]}}
{body}
position = [0, 0, 0.0505]
'''


def run(path, *args):
    return CliRunner().invoke(main, ["simulate", str(path), "--quiet", *args])


def write(tmp_path, simulate="", body="mass = 1.0"):
    path = tmp_path / "scene.toml"
    path.write_text(BOX.format(simulate=simulate, body=body))
    return path


def test_valid_scene_runs(tmp_path):
    assert run(write(tmp_path)).exit_code == 0


@pytest.mark.parametrize("simulate, body, words", [
    ("", "masss = 2", ["[[body]] 2 (cube)", "'masss'", "'mass'"]),
    ("frobnicate = 3", "mass = 1.0", ["[simulate]", "'frobnicate'"]),
    ("dtt = 1e-3", "mass = 1.0", ["[simulate]", "'dtt'", "'dt'"]),
    ("", "mass = 1.0\nmu_statc = 0.3", ["'mu_statc'", "'mu_static'"]),
    ("", 'mass = 1.0\nvelocity = "fast"', ["[[body]] 2 (cube)", "velocity", "3 numbers"]),
    ("", "mass = -1.0", ["mass", ">= 1e-09 and <= 1e+12"]),
    ("dt = 0", "mass = 1.0", ["dt", "> 0"]),   # TOML forbids the duplicate: replaced below
    ('integrator = "euler"', "mass = 1.0", ["integrator", "velocity, continuous"]),
    ('friction = "coulomb"', "mass = 1.0", ["[simulate]", "friction", "regularised, compliant"]),
    ("", 'mass = 1.0\nkind = "dynamc"', ["kind", "dynamic, fixed, kinematic"]),
    ("", "mass = 1.0\nmotion = [[0, 1, 0, 0, 0, 0, 0]]", ["motion", "kinematic"]),
], ids=["masss", "frobnicate", "dtt", "mu_statc", "velocity-type", "negative-mass", "zero-dt",
        "integrator", "friction", "kind", "motion-on-dynamic"])
def test_bad_scene_keys_exit_2_naming_file_table_key(tmp_path, simulate, body, words):
    path = write(tmp_path, simulate, body)
    if simulate == "dt = 0":
        path.write_text(path.read_text().replace("dt = 1e-3\ndt = 0", "dt = 0"))
    with pytest.raises(SceneError):
        load_scene(path)
    result = run(path)
    assert result.exit_code == 2, result.output
    assert str(path) in result.output and "Traceback" not in result.output
    for word in words:
        assert word in result.output


def test_geometry_table_is_checked_per_shape(tmp_path):
    path = write(tmp_path, body="mass = 1.0")
    path.write_text(path.read_text().replace('size = [0.1, 0.1, 0.1]}', 'size = [0.1, 0.1, 0.1], radius = 1}'))
    result = run(path)
    assert result.exit_code == 2 and "geometry (box)" in result.output and "'radius'" in result.output
    path.write_text(BOX.format(simulate="", body="mass = 1").replace('shape = "box"', 'shap = "box"'))
    result = run(path)
    assert result.exit_code == 2 and "'shap'" in result.output and "'shape'" in result.output


def test_top_level_key_and_missing_file(tmp_path):
    path = write(tmp_path)
    path.write_text("gravty = [0, 0, -9.81]\n" + path.read_text())
    result = run(path)
    assert result.exit_code == 2 and "top level" in result.output and "'gravity'" in result.output
    assert run(tmp_path / "missing.toml").exit_code == 2      # as a missing spec or manifest


def test_example_scenes_pass_the_check():
    import tomllib

    from fieldgen.runtime.scene.schema import check_scene_table

    for path in sorted(SCENES.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        if "body" in data:
            check_scene_table(data, path=path)


def test_others_keys_are_accepted(tmp_path):
    """Keys other parts of the runtime read are allowed (their values are checked where used)."""
    import tomllib

    from fieldgen.runtime.scene.schema import check_scene_table

    text = BOX.format(simulate='friction = "compliant"\nface_rule = "drake"',
                      body="mass = 1.0\ntangential_stiffness = 1e4\ntangential_damping = 1.0\nconvex = true")
    check_scene_table(tomllib.loads(text), path="x.toml")


def test_continuous_refuses_two_rigid_boxes_before_the_first_step(tmp_path):
    path = tmp_path / "boxes.toml"
    path.write_text('''
[[body]]
name = "floor"
kind = "fixed"
geometry = {shape = "box", size = [1, 1, 0.1]}
position = [0, 0, -0.05]

[[body]]
name = "crate"
geometry = {shape = "box", size = [0.1, 0.1, 0.1]}
mass = 1.0
position = [0, 0, 0.06]
''')
    out = tmp_path / "out"
    result = run(path, "--integrator", "continuous", "--duration", "0.01", "-o", str(out))
    assert result.exit_code == 2, result.output
    assert "'floor'" in result.output and "'crate'" in result.output
    assert "--integrator velocity" in result.output
    assert not out.exists()                   # refused before any work
    assert run(path, "--integrator", "velocity", "--duration", "0.01").exit_code == 0


def test_compliant_friction_with_the_velocity_integrator_exits_2(tmp_path):
    """The friction spring (D 6) is a state of the continuous integrator's ODE: asking for it with
    the velocity integrator is refused before any step, whether the scene or the flags ask."""
    path = write(tmp_path, 'friction = "compliant"\nintegrator = "velocity"')
    result = run(path)
    assert result.exit_code == 2, result.output
    assert str(path) in result.output and "--integrator continuous" in result.output
    assert "Traceback" not in result.output
    result = run(write(tmp_path), "--friction", "compliant", "--integrator", "velocity")
    assert result.exit_code == 2, result.output
