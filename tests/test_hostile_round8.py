"""Hostile input an eighth sweep found: ``contact`` poses far from the origin (two balls a
centimetre apart at x = 1e17 m pushed with 18,516 N instead of 30 N, at 1e50 m with 1e37 N, exit
0; at 1e200 m the error blamed the damping and velocities none were given), scene values ``fieldgen
build`` or the scene's own keys refuse but were taken without a word (a kinematic ``motion``
faster than light where ``velocity`` is bounded by it, a ``velocity`` beside a ``motion`` that
was ignored, ``mu_dynamic`` above ``mu_static``, a friction spring ``tangential_stiffness`` of
1e300, which ran for a minute and then blamed the speeds), and a ``batch --scheduler`` that is no
Dask address (no port, ``http://``: a ValueError traceback from inside Dask's event loop after
the build had started, then 40 s more while the client closed itself); and, in the runtime's
Python API, a contact query given a NaN, infinite, scaled or mirrored pose (a force, zero for the
NaN, without a word). Each is refused at entry: from the command line with exit 2 and a message
naming the option or the scene, the body and the key, with no traceback, nothing written and the
inputs unchanged; from Python with a ValueError naming the pose."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fieldgen.runtime.contact.geometries import load_body
from fieldgen.runtime.contact.pose import Pose
from fieldgen.runtime.contact.wrench import contact
from test_hostile_input import FLOOR, built_ball, cube_obj, scene, write
from test_hostile_sweep import _refused

KINEMATIC = """
[[body]]
name = "pusher"
kind = "kinematic"
geometry = {{shape = "box", size = [0.02, 0.02, 0.02]}}
position = [0, 0, 0.06]
{keys}
"""


def kinematic(keys: str) -> str:
    return "[simulate]\nduration = 0.002\ndt = 1e-3\n" + FLOOR + KINEMATIC.format(keys=keys)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The inputs of every case, in one folder the cases only read."""
    folder = tmp_path_factory.mktemp("inputs")
    built_ball(folder)
    write(folder / "cube.obj", "\n".join(cube_obj(0.02)) + "\n")
    write(folder / "manifest.toml", '[[asset]]\ninput = "cube.obj"\nmodulus = 1e5\nedge_length = 0.01\n')
    write(folder / "motion_fast.toml", kinematic("motion = [[0, 1e300, 0, 0, 0, 0, 0]]"))
    write(folder / "motion_constant_spin.toml", kinematic("motion = [0, 0, 0, 0, 0, 1e20]"))
    write(folder / "motion_and_velocity.toml", kinematic("velocity = [1, 0, 0]\nmotion = [[0.5, 0, 0, 1, 0, 0, 0]]"))
    write(folder / "motion_and_spin.toml", kinematic("angular_velocity = [0, 0, 1]\nmotion = [[0, 0, 0, 1, 0, 0, 0]]"))
    write(folder / "mu_dynamic.toml", scene(mass="mass = 0.1\nmu_static = 0.1\nmu_dynamic = 0.9"))
    write(folder / "mu_dynamic_geometry.toml", scene(
        geometry='{shape = "box", size = [0.02, 0.02, 0.02], mu_static = 0.2, mu_dynamic = 0.3}'))
    compliant = '[simulate]\nduration = 0.002\ndt = 1e-3\nfriction = "compliant"\n' + FLOOR
    write(folder / "stiff_spring.toml", compliant.replace("layers = 1}", "layers = 1}\ntangential_stiffness = 1e300"))
    write(folder / "damped_spring.toml", compliant.replace("layers = 1}", "layers = 1}\ntangential_damping = 1e300"))
    return folder


FAR = ["--pose-a", "1e17,0,0,0,0,0", "--pose-b", "1e17,0,0.01,0,0,0"]
CASES = [
    # contact: a silent wrong force (18,516 N for 30 N), or an error blaming the damping
    ("contact poses 1e17 m out", ["contact", "{i}/asset.vtu", "{i}/asset.vtu", *FAR], 2,
     "'1e17,0,0,0,0,0' places the body 1e+17 m from the origin, past 1e+09 m"),
    ("contact poses 1e200 m out", ["contact", "{i}/asset.vtu", "{i}/asset.vtu", "--pose-a", "1e200,0,0,0,0,0",
                                   "--pose-b", "1e200,0,0.01,0,0,0", "--json"], 2,
     "'1e200,0,0,0,0,0' places the body 1e+200 m from the origin"),
    # scene: values taken that the scene's own keys or fieldgen build refuse
    ("scene motion faster than light", ["simulate", "{i}/motion_fast.toml"], 2,
     "motion_fast.toml: [[body]] 2 (pusher): motion row [0, 1e+300, 0, 0, 0, 0, 0]: a speed of 1e+300 m/s is "
     "faster than light"),
    ("scene constant motion spinning past light", ["simulate", "{i}/motion_constant_spin.toml"], 2,
     "a spin of 1e+20 rad/s moves a point 1 µm off its axis faster than light"),
    ("scene velocity beside a motion", ["simulate", "{i}/motion_and_velocity.toml"], 2,
     "motion_and_velocity.toml: [[body]] 2 (pusher): a kinematic body with a motion moves as its rows say (at "
     "rest before the first), so velocity would be ignored"),
    ("scene angular_velocity beside a motion", ["simulate", "{i}/motion_and_spin.toml"], 2,
     "so angular_velocity would be ignored"),
    ("scene mu_dynamic above mu_static", ["simulate", "{i}/mu_dynamic.toml"], 2,
     "mu_dynamic.toml: [[body]] 2 (box): mu_dynamic = 0.9 exceeds mu_static = 0.1"),
    ("scene geometry mu_dynamic above mu_static", ["simulate", "{i}/mu_dynamic_geometry.toml"], 2,
     "[[body]] 2 (box) geometry: mu_dynamic = 0.3 exceeds mu_static = 0.2"),
    ("scene tangential_stiffness 1e300", ["simulate", "{i}/stiff_spring.toml"], 2,
     "stiff_spring.toml: [[body]] 1 (floor): tangential_stiffness = 1e+300 is not a number > 0 and <= 1e+10"),
    ("scene tangential_damping 1e300", ["simulate", "{i}/damped_spring.toml"], 2,
     "tangential_damping = 1e+300 is not a number > 0 and <= 1e+06"),
]


@pytest.mark.parametrize("args, code, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_is_refused(inputs, tmp_path, monkeypatch, args, code, words):
    _refused(inputs, tmp_path, monkeypatch, args, code, words)


@pytest.mark.parametrize("address, problem", [
    ("garbage", "missing port number in address 'garbage'"),
    ("http://10.0.0.5:8786", "unknown address scheme 'http'"),
    ("tcp://10.0.0.5:99999", "port 99999 is outside 1..65535"),
])
def test_a_scheduler_that_is_no_dask_address_is_refused_before_any_build(inputs, tmp_path, monkeypatch, address,
                                                                         problem):
    """Before: exit 1 with a ValueError traceback from inside Dask's client (after the item had
    been sent to build), and 40 s more while the half-made client closed itself."""
    pytest.importorskip("distributed")
    _refused(inputs, tmp_path, monkeypatch, ["batch", "{i}/manifest.toml", "--output-dir", "{o}", "--executor",
                                             "dask", "--scheduler", address], 2,
             f"--scheduler {address!r} is not a Dask scheduler address ({problem}")


@pytest.mark.parametrize("pose, words", [
    (Pose.from_xyz_rpy(z=float("nan")), "X_WB has numbers that are not finite"),
    (Pose.from_xyz_rpy(z=float("inf")).matrix, "X_WB has numbers that are not finite"),
    (np.diag([2.0, 2.0, 2.0, 1.0]), "X_WB is not a rigid transform (its 3×3 block is 3 from orthonormal"),
    (np.diag([1.0, 1.0, -1.0, 1.0]), "X_WB is not a rigid transform"),
    (Pose.from_xyz_rpy(x=1e17), "X_WB places the body 1e+17 m from the origin, past 1e+09 m"),
])
def test_the_library_contact_query_refuses_a_pose_that_places_no_body(inputs, pose, words):
    """docs/cli.md's runtime API: before, a NaN or infinite pose, a scaled or a mirrored matrix gave
    a contact surface and a force (zero, for the NaN) without a word, as the Drake bridge's did."""
    ball, cube = load_body(inputs / "asset.vtu"), load_body(inputs / "cube.obj")
    with pytest.raises(ValueError) as caught:
        contact(ball, Pose(), cube, pose)
    assert words in str(caught.value) and "give a Pose" in str(caught.value)
