"""The velocity-level integrator at rest (docs/model.md §5.3-5.4): a body resting on a compliant
pad sits where the pressure field's force balances its weight.

With exact Coulomb friction (§5.3) too: slip is measured in the pair's contact plane, so the
tilted polygons of a ball pressed into a pad see no slip from its sinking or rising, and stuck
friction cannot hold it off the balance (it did, by up to 194 µm, when each polygon's own
tangent plane measured slip).

At rest the next-step velocity is zero, so the step's normal impulses are ``δt k (−φ0)`` per
point contact and must sum to ``δt m g``; the field's force at the resting pose (the wrench of
``contact()``, computed independently of the step) must then equal the weight. References: the
weight itself, and the closed-form force of a sphere pressed into a slab whose pressure is
linear in depth, ``F(δ) = (π M0 / H)(δ²R − δ³/3)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from fieldgen.runtime.contact.wrench import contact
from fieldgen.runtime.dynamics.bodies import Scene, SceneBody
from fieldgen.runtime.dynamics.rigid_body import MassProperties, RigidBodyState
from fieldgen.runtime.dynamics.simulate import simulate
from fieldgen.runtime.scene.primitives import compliant_slab, rigid_sphere

R, MASS, G = 0.01, 0.05, 9.81
H, M0 = 0.02, 1e5
Z0 = 0.0082                     # start slightly pressed in: a short settle


def ball_on_pad(x0: float = 0.0, z0: float = Z0, mu: float = 0.0) -> Scene:
    pad = compliant_slab((0.06, 0.06, H), M0, cells=(6, 6), layers=2, dissipation=20.0, mu_static=mu)
    ball = rigid_sphere(R, 4, mu_static=mu)
    inertia = np.eye(3) * 0.4 * MASS * R * R
    return Scene([SceneBody("pad", pad, "fixed", state=RigidBodyState([0.0, 0.0, 0.0])),
                  SceneBody("ball", ball, "dynamic", MassProperties(MASS, inertia), RigidBodyState([x0, 0.0, z0]))],
                 gravity=np.array([0.0, 0.0, -G]))


def closed_form_rest_height() -> float:
    """Centre height where a true sphere's force in the linear slab equals the weight."""
    def force(delta):
        return math.pi * M0 / H * (delta * delta * R - delta ** 3 / 3.0)

    return R - brentq(lambda d: force(d) - MASS * G, 1e-6, 0.9 * R, xtol=1e-14)


def rest(integrator: str, dt: float, duration: float = 0.3, x0: float = 0.0, z0: float = Z0):
    scene = ball_on_pad(x0, z0)
    result = simulate(scene, duration, dt, integrator)
    assert np.abs(result.velocities[-1, 1]).max() < 1e-5, "the ball is not at rest"
    final = RigidBodyState(result.positions[-1, 1], result.quaternions[-1, 1])
    pad = scene.bodies[0]
    _, wrench = contact(pad.geometry, pad.pose(pad.state), scene.bodies[1].geometry, scene.bodies[1].pose(final))
    return float(result.positions[-1, 1, 2]), wrench.force


@pytest.mark.parametrize("dt,z0", [(1e-3, Z0), (5e-3, Z0), (1e-3, R + 0.005)], ids=["1ms", "5ms", "dropped"])
def test_velocity_integrator_rests_where_the_field_balances_the_weight(dt, z0):
    height, force = rest("velocity", dt, z0=z0, duration=0.3 if z0 == Z0 else 0.6)
    weight = MASS * G
    # the field's force at the resting pose is the weight (1e-3 relative; the step's own sum is exact)
    assert abs(force[2] - weight) <= 1e-3 * weight, (force, weight)
    assert np.abs(force[:2]).max() <= 1e-3 * weight
    # and the icosphere sits within 1 % of the depth of a true sphere's closed form
    expected = closed_form_rest_height()
    assert abs(height - expected) < 0.01 * (R - expected), (height, expected)


def test_rest_off_centre_balances_too():
    """Off the pad's centre (other tets, other polygon sizes) the balance is the same."""
    height, force = rest("velocity", 1e-3, x0=0.0071)
    assert abs(force[2] - MASS * G) <= 1e-3 * MASS * G
    expected = closed_form_rest_height()
    assert abs(height - expected) < 0.01 * (R - expected), (height, expected)



@pytest.mark.parametrize("z0", [Z0, R + 0.005], ids=["pressed", "dropped"])
def test_with_friction_the_ball_rests_at_the_balance_too(z0):
    """With μ = 0.5 the ball rests where the field alone balances the weight: friction acts in
    the pair's contact plane, so the tilted polygons' share of the normal approach is no slip
    (before, stuck polygons held it 194 µm deep at 0.596 N when dropped, or above the balance
    at 0.474 N when started there). The step's impulses, normal and friction, sum to m g δt."""
    from fieldgen.runtime.dynamics.velocity_integrator import velocity_step

    dt = 1e-3
    scene = ball_on_pad(z0=z0, mu=0.5)
    result = simulate(scene, 0.6, dt, "velocity")
    assert np.abs(result.velocities[-1, 1]).max() < 1e-5
    final = RigidBodyState(result.positions[-1, 1], result.quaternions[-1, 1], result.velocities[-1, 1],
                           result.angular_velocities[-1, 1])
    pad, weight = scene.bodies[0], MASS * G
    _, wrench = contact(pad.geometry, pad.pose(pad.state), scene.bodies[1].geometry, scene.bodies[1].pose(final))
    assert abs(wrench.force[2] - weight) <= 1e-3 * weight, (wrench.force, weight)
    expected = closed_form_rest_height()
    assert abs(final.position[2] - expected) < 0.01 * (R - expected)
    _, info = velocity_step(scene, [pad.state, final], 0.6, dt)
    total = info.impulses.sum(axis=0) / dt                      # on the ball (B of the pair)
    assert abs(total[2] - weight) <= 1e-3 * weight and np.abs(total[:2]).max() <= 1e-3 * weight
