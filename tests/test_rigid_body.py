"""Rigid-body state, mass properties and kinematics against closed forms and real meshes."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from fieldgen.errors import InputError
from fieldgen.runtime.dynamics.rigid_body import (
    MassProperties,
    RigidBodyState,
    box_mass_properties,
    integrate_pose,
    mass_properties_from_mesh,
    newton_euler_rhs,
    point_jacobian,
    point_velocity,
    quaternion_from_rotation_vector,
    quaternion_multiply,
    quaternion_to_matrix,
    world_inertia,
)


def test_box_mesh_matches_closed_form_off_origin():
    size = np.array([0.3, 0.2, 0.1])
    box = trimesh.creation.box(extents=size)
    vertices = box.vertices + [1.0, -2.0, 0.5]
    props = mass_properties_from_mesh(vertices, box.faces, density=2700.0)
    expected = box_mass_properties(2700.0 * size.prod(), size)
    assert props.mass == pytest.approx(expected.mass, rel=1e-12)
    np.testing.assert_allclose(props.centre_of_mass, [1.0, -2.0, 0.5], atol=1e-12)
    np.testing.assert_allclose(props.inertia, expected.inertia, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", ["featuretype.STL", "fandisk.obj", "torus.STL"])
def test_real_cad_mesh_matches_trimesh(meshes, name):
    mesh = trimesh.load(meshes / name, force="mesh")
    assert mesh.is_watertight and mesh.is_winding_consistent
    props = mass_properties_from_mesh(mesh.vertices, mesh.faces, density=1.0, path=name)
    assert props.mass == pytest.approx(mesh.volume, rel=1e-9)
    np.testing.assert_allclose(props.centre_of_mass, mesh.center_mass,
                               atol=1e-9 * mesh.scale)
    np.testing.assert_allclose(props.inertia, mesh.moment_inertia,
                               atol=1e-9 * np.abs(mesh.moment_inertia).max())


def test_open_or_inverted_mesh_is_refused(meshes):
    mesh = trimesh.load(meshes / "teapot.stl", force="mesh")
    with pytest.raises(InputError, match="not closed") as err:
        mass_properties_from_mesh(mesh.vertices, mesh.faces, 1000.0, path="teapot.stl")
    assert "teapot.stl" in str(err.value) and "watertight" in str(err.value)
    box = trimesh.creation.box()
    with pytest.raises(InputError, match="volume"):
        mass_properties_from_mesh(box.vertices, box.faces[:, ::-1], 1000.0)
    with pytest.raises(InputError, match="density"):
        mass_properties_from_mesh(box.vertices, box.faces, -1.0)


def test_quaternions_rotate_like_matrices():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=3), rng.normal(size=3)
    qa, qb = quaternion_from_rotation_vector(a), quaternion_from_rotation_vector(b)
    Ra, Rb = quaternion_to_matrix(qa), quaternion_to_matrix(qb)
    np.testing.assert_allclose(quaternion_to_matrix(quaternion_multiply(qa, qb)), Ra @ Rb,
                               atol=1e-14)
    np.testing.assert_allclose(Ra @ Ra.T, np.eye(3), atol=1e-14)
    # rotation by angle |a| about a/|a| leaves the axis fixed (Rodrigues)
    np.testing.assert_allclose(Ra @ a, a, atol=1e-14)
    np.testing.assert_allclose(quaternion_to_matrix(quaternion_from_rotation_vector([0, 0, np.pi / 2])),
                               [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-15)


def test_integrate_pose_exact_for_constant_twist_and_unit_quaternion():
    omega = np.array([0.3, -1.2, 2.0])
    state = RigidBodyState([0, 0, 0], [1, 0, 0, 0], [1.0, 2.0, 3.0], omega)
    dt, steps = 1e-3, 5000
    for _ in range(steps):
        state = integrate_pose(state, dt)
    assert np.linalg.norm(state.quaternion) == pytest.approx(1.0, abs=1e-14)
    expected = quaternion_to_matrix(quaternion_from_rotation_vector(omega * dt * steps))
    np.testing.assert_allclose(state.rotation, expected, atol=1e-11)
    np.testing.assert_allclose(state.position, [5.0, 10.0, 15.0], rtol=1e-12)


def test_newton_euler_free_rotation_conserves_momentum_and_energy():
    """Torque-free asymmetric top (RK4 on newton_euler_rhs): L and T conserved."""
    props = MassProperties(2.0, np.diag([0.1, 0.2, 0.3]))
    state = RigidBodyState(angular_velocity=[0.1, 3.0, 0.2])

    def rhs(x):
        s = RigidBodyState(x[:3], x[3:7], x[7:10], x[10:])
        return np.concatenate(newton_euler_rhs(s, props))

    def invariants(x):
        s = RigidBodyState(x[:3], x[3:7], x[7:10], x[10:])
        L = world_inertia(props, s.quaternion) @ s.angular_velocity
        return L, 0.5 * s.angular_velocity @ L

    x = np.concatenate([state.position, state.quaternion, state.velocity, state.angular_velocity])
    L0, T0 = invariants(x)
    h, largest_change = 2e-3, 0.0
    for _ in range(1500):   # intermediate-axis tumbling: a demanding check
        k1 = rhs(x); k2 = rhs(x + h / 2 * k1); k3 = rhs(x + h / 2 * k2); k4 = rhs(x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        x[3:7] /= np.linalg.norm(x[3:7])
        largest_change = max(largest_change, np.linalg.norm(x[10:] - state.angular_velocity))
    L, T = invariants(x)
    np.testing.assert_allclose(L, L0, atol=1e-8)
    assert T == pytest.approx(T0, rel=1e-8)
    # the world angular velocity really wandered (gyroscopic term is exercised)
    assert largest_change > 1.0


def test_point_jacobian_matches_point_velocity():
    rng = np.random.default_rng(1)
    state = RigidBodyState(rng.normal(size=3), quaternion_from_rotation_vector(rng.normal(size=3)),
                           rng.normal(size=3), rng.normal(size=3))
    p, d = rng.normal(size=3), rng.normal(size=3)
    assert point_jacobian(state, p, d) @ state.twist == pytest.approx(d @ point_velocity(state, p))
