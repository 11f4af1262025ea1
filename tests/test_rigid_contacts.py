"""Rigid contacts of the velocity integrator: kinematic bodies in the LCP, contacts on the
actual meshes (vertex–face and edge–edge), rigid cores."""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.runtime import primitives as prim
from fieldgen.runtime.rigid_body import RigidBodyState, box_mass_properties
from fieldgen.runtime.scene import Scene, SceneBody, Schedule
from fieldgen.runtime.simulate import simulate


def test_kinematic_plate_pushes_a_rigid_box_at_its_own_speed():
    """A kinematic plate moving at 0.1 m/s reaches a resting box 5 mm away after 0.05 s and
    pushes it over a rigid floor (μ = 0.5): from then on the box moves at the plate's speed."""
    floor = prim.rigid_box([2, 1, 0.1], mu_static=0.5, name="floor")
    box = prim.rigid_box([0.1, 0.1, 0.1], mu_static=0.5, name="box")
    plate = prim.rigid_box([0.02, 0.4, 0.25], mu_static=0.0, name="plate")
    speed = 0.1
    scene = Scene([
        SceneBody("floor", floor, "fixed", state=RigidBodyState([0, 0, -0.05])),
        SceneBody("box", box, "dynamic", box_mass_properties(1.0, [0.1] * 3), RigidBodyState([0, 0, 0.05])),
        SceneBody("plate", plate, "kinematic", state=RigidBodyState([-0.065, 0, 0.075]),
                  motion=Schedule.constant([speed, 0, 0, 0, 0, 0])),
    ])
    result = simulate(scene, 0.3, 1e-3)
    t = result.times
    vx = result.velocities[:, 1, 0]
    assert np.all(np.abs(vx[t < 0.045]) < 1e-9)                 # at rest before the plate arrives
    pushed = t > 0.06
    assert np.all(np.abs(vx[pushed] - speed) <= 0.01 * speed)
    # the plate never passes into the box: its face stays behind the box's
    gap = (result.positions[:, 1, 0] - 0.05) - (result.positions[:, 2, 0] + 0.01)
    assert gap.min() > -1e-6
    assert np.abs(result.positions[:, 1, 2] - 0.05).max() < 1e-6   # slides, does not lift or tip
