"""A body that moves further in one step than the thinner of it and another body is thick gets a
`fast_motion` warning (it can pass through unseen), and the continuous integrator's work per
output interval is bounded (fieldgen/runtime/dynamics/fast_motion.py, continuous_integrator.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import fieldgen.runtime.dynamics.continuous_integrator as continuous
from fieldgen.cli.main import main
from fieldgen.errors import BuildError
from fieldgen.runtime.dynamics.simulate import simulate
from fieldgen.runtime.scene.load import load_scene

ROOT = Path(__file__).resolve().parents[1]

#: A 1 kg box (10 cm) over a 2 cm compliant slab bonded underneath, moving down at {speed} m/s.
SCENE = """
[simulate]
duration = {duration}
dt = 1e-3

[[body]]
name = "slab"
kind = "fixed"
geometry = {{shape = "slab", size = [0.4, 0.4, 0.02], modulus = 1e6, cells = [2, 2], layers = 1, dissipation = 5.0}}

[[body]]
name = "box"
geometry = {{shape = "box", size = [0.1, 0.1, 0.1]}}
density = 1000
position = [0, 0, {height}]
velocity = [0, 0, {speed}]
"""


def scene_at(tmp_path, speed: float, height: float = 0.0505, duration: float = 0.01):
    path = tmp_path / "fast.toml"
    path.write_text(SCENE.format(speed=speed, height=height, duration=duration))
    return load_scene(path)[0]


def kinds(result) -> list[str]:
    return [w["kind"] for w in result.warnings]


def test_a_box_fast_enough_to_jump_the_slab_is_warned_about_and_does_jump_it(tmp_path):
    # 200 m/s over 1 ms: 0.2 m a step against a 2 cm slab. The box is below the slab after the
    # first step and never meets it: the run is wrong, and the warning is what says so.
    result = simulate(scene_at(tmp_path, -200.0), 0.01, 1e-3, "velocity")
    assert kinds(result) == ["fast_motion"]
    warning = result.warnings[0]
    assert warning["pair"] == ["slab", "box"] and warning["first_time"] == 0.0
    assert "a dt of at most 5e-05 s" in warning["message"]           # 0.5 x 0.02 m / 200 m/s
    assert result.positions[-1, result.body_names.index("box"), 2] < -0.02     # passed through, unseen
    assert result.contacts_per_step.max() == 0


@pytest.mark.parametrize("share, warned", [(0.4, False), (0.6, True)])
def test_the_warning_starts_at_half_the_thinner_body(tmp_path, share, warned):
    # Released 1 m above the slab, so no contact: only the speed decides (0.02 m slab, dt 1 ms).
    speed = -share * 0.02 / 1e-3
    result = simulate(scene_at(tmp_path, speed, height=1.0, duration=0.002), 0.002, 1e-3, "velocity")
    assert ("fast_motion" in kinds(result)) is warned


def test_a_small_body_falling_through_a_thicker_slab_is_warned_about(tmp_path):
    # The moving body is the thinner one: a 1 cm cube at 200 m/s (0.2 m a step) through the 2 cm
    # slab. Only its own axes are narrower than the step along the fall.
    path = tmp_path / "cube.toml"
    path.write_text(SCENE.format(speed=-200.0, height=0.5, duration=0.002).replace("size = [0.1, 0.1, 0.1]",
                                                                                  "size = [0.01, 0.01, 0.01]"))
    result = simulate(load_scene(path)[0], 0.002, 1e-3, "velocity")
    assert kinds(result) == ["fast_motion"]
    assert "across 'box', which is 0.01 m wide" in result.warnings[0]["message"]   # 20 x its side: the worst axis


@pytest.mark.parametrize("velocity, warned", [([0, -12.0, 0], True), ([0, 0, -12.0], False)])
def test_a_rotated_slab_is_thin_along_its_own_axis_in_the_world(tmp_path, velocity, warned):
    # The slab turned 90 deg about x: its 2 cm side lies along world y. 12 m/s is 0.6 of it a step
    # along y (warned), 0.03 of its 0.4 m side along z (not; the box's 0.1 m side: 0.12).
    text = SCENE.format(speed=0.0, height=1.0, duration=0.002)
    text = text.replace('mu_static', 'rpy = [90, 0, 0]\nmu_static') if 'mu_static' in text else \
        text.replace('dissipation = 5.0}\n', 'dissipation = 5.0}\nrpy = [90, 0, 0]\n', 1)
    text = text.replace("velocity = [0, 0, 0.0]", f"velocity = {velocity}")
    path = tmp_path / "turned.toml"
    path.write_text(text)
    result = simulate(load_scene(path)[0], 0.002, 1e-3, "velocity")
    assert ("fast_motion" in kinds(result)) is warned


def test_a_box_at_rest_is_not_warned_about(tmp_path):
    result = simulate(scene_at(tmp_path, 0.0), 0.01, 1e-3, "velocity")
    assert "fast_motion" not in kinds(result)


def test_the_continuous_integrator_warns_too(tmp_path):
    result = simulate(scene_at(tmp_path, -200.0, height=1.0, duration=0.002), 0.002, 1e-3, "continuous")
    assert kinds(result) == ["fast_motion"]


def test_an_interval_that_needs_too_many_radau_steps_ends_the_run(tmp_path, monkeypatch):
    # At 2 m/s into the slab a 1 ms interval takes dozens of Radau steps; with the cap at 5 the run
    # must stop with the error instead of going on (at 200 m/s it would go on for hours).
    monkeypatch.setattr(continuous, "MAX_STEPS_PER_INTERVAL", 5)
    monkeypatch.setattr(continuous, "MAX_STEPS_PER_SECOND", 0)
    with pytest.raises(BuildError, match=r"took 5 steps between the outputs at t = 0 s and 0\.001 s"):
        simulate(scene_at(tmp_path, -2.0, height=0.0495), 0.002, 1e-3, "continuous")


def test_the_step_cap_is_a_clear_error_on_the_command_line(tmp_path, monkeypatch):
    monkeypatch.setattr(continuous, "MAX_STEPS_PER_INTERVAL", 5)
    monkeypatch.setattr(continuous, "MAX_STEPS_PER_SECOND", 0)
    path = tmp_path / "fast.toml"
    path.write_text(SCENE.format(speed=-2.0, height=0.0495, duration=0.002))
    result = CliRunner().invoke(main, ["simulate", str(path), "--integrator", "continuous", "-o",
                                       str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "too stiff to integrate" in result.output


def test_sliding_and_spinning_along_a_thin_body_is_not_fast_motion(tmp_path):
    # The coin scene: 1.75 mm thick, sliding at 0.71 m/s and spinning at 58 rad/s (0.71 m/s at its
    # rim) on a plane: 1.4 mm a step in all, but none of it across the coin or the plane.
    scene, _ = load_scene(ROOT / "assets" / "scenes" / "coin.toml")
    result = simulate(scene, 0.005, 1e-3, "velocity")
    assert "fast_motion" not in kinds(result)


def test_a_spin_that_tips_a_thin_body_through_is_fast_motion(tmp_path):
    # The same coin spun about a horizontal axis at 1000 rad/s: its rim (12 mm out) moves 12 m/s
    # across its own thickness, 12 mm a step against 1.75 mm.
    scene, _ = load_scene(ROOT / "assets" / "scenes" / "coin.toml")
    coin = scene.bodies[1]
    coin.state.position = coin.state.position + [0, 0, 0.05]
    coin.state.velocity = np.zeros(3)
    coin.state.angular_velocity = np.array([1000.0, 0, 0])
    result = simulate(scene, 0.002, 1e-3, "velocity")
    assert "fast_motion" in kinds(result)


def test_the_step_cap_counts_every_segment_of_an_interval(monkeypatch):
    # y' = -1e4 y over one 1 ms interval with a schedule break in its middle: each half alone
    # fits the cap, both together do not, and the cap is on the interval.
    def rhs(t, y):
        return -1e4 * y

    def stepped(y, a, b):
        return continuous.radau_stepped(rhs, y, a, b, rtol=1e-6, atol=1e-9, jac=None, carry=None, budget=10**6)

    middle, first, _ = stepped(np.ones(1), 0.0, 5e-4)
    second = stepped(middle, 5e-4, 1e-3)[1]
    monkeypatch.setattr(continuous, "MAX_STEPS_PER_SECOND", 0)
    monkeypatch.setattr(continuous, "MAX_STEPS_PER_INTERVAL", max(first, second))
    with pytest.raises(BuildError, match="between the outputs at t = 0 s and 0.001 s"):
        continuous.radau_segments(rhs, np.ones(1), 0.0, 1e-3, [5e-4], rtol=1e-6, atol=1e-9)
    monkeypatch.setattr(continuous, "MAX_STEPS_PER_INTERVAL", first + second)
    y, segments = continuous.radau_segments(rhs, np.ones(1), 0.0, 1e-3, [5e-4], rtol=1e-6, atol=1e-9)
    assert segments == 2 and abs(y[0] - np.exp(-10.0)) < 1e-4
