"""The fast-motion check's per-step ratio (``fast_motion.step_ratio``, one numba call a pair and
step) against the numpy formula of fieldgen/runtime/dynamics/fast_motion.py's docstring, on
random poses and twists: the same body and side, the same ratio to round-off."""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.runtime.dynamics.fast_motion import Extents, step_ratio
from fieldgen.runtime.dynamics.rigid_body import RigidBodyState


def reference_step_ratio(states, sizes, a, b, dt):
    """Along each axis n of either body (the rows of its rotation's transpose):
    dt (|(v_a − v_b)·n| + |ω_a × n| r_a + |ω_b × n| r_b) over the body's side along n; the
    largest, body a's axes first."""
    sa, sb = states[a], states[b]
    worst = (0.0, a, float("inf"))
    for m in (a, b):
        axes = states[m].rotation.T
        closing = (np.abs(axes @ (sa.velocity - sb.velocity))
                   + np.linalg.norm(np.cross(sa.angular_velocity, axes), axis=1) * sizes.reach[a]
                   + np.linalg.norm(np.cross(sb.angular_velocity, axes), axis=1) * sizes.reach[b])
        ratios = closing * dt / sizes.sides[m]
        k = int(np.argmax(ratios))
        if ratios[k] > worst[0]:
            worst = (float(ratios[k]), m, float(sizes.sides[m][k]))
    return worst


def random_state(rng, moving: bool, turning: bool) -> RigidBodyState:
    q = rng.normal(size=4)
    return RigidBodyState(rng.normal(size=3), q / np.linalg.norm(q), rng.normal(size=3) * moving,
                          rng.normal(size=3) * turning)


def test_step_ratio_equals_the_numpy_formula():
    rng = np.random.default_rng(7)
    for trial in range(300):
        states = [random_state(rng, trial % 3 > 0, trial % 2 > 0) for _ in range(3)]
        sizes = Extents(rng.uniform(0.001, 0.1, (3, 3)), rng.uniform(0.001, 0.1, 3))
        a, b = (0, 2) if trial % 2 else (1, 0)
        got = step_ratio(states, sizes, a, b, 1e-3)
        expected = reference_step_ratio(states, sizes, a, b, 1e-3)
        assert got[1:] == expected[1:]
        assert got[0] == pytest.approx(expected[0], rel=1e-13, abs=0.0)


def test_step_ratio_of_bodies_at_rest_and_of_an_empty_body():
    rng = np.random.default_rng(8)
    states = [random_state(rng, False, False) for _ in range(2)]
    assert step_ratio(states, Extents(np.full((2, 3), 0.01), np.full(2, 0.01)), 0, 1, 1e-3) == (0.0, 0, float("inf"))
    states[1].velocity[:] = [0.0, 0.0, 2.0]
    # a body with no points (infinite sides) never limits; the other one does
    sizes = Extents(np.array([[np.inf] * 3, [0.01] * 3]), np.array([0.0, 0.01]))
    ratio, body, side = step_ratio(states, sizes, 0, 1, 1e-3)
    assert body == 1 and side == 0.01 and ratio == pytest.approx(reference_step_ratio(states, sizes, 0, 1, 1e-3)[0])


def test_step_ratio_ties_go_to_the_first_axis_of_body_a():
    """Two bodies turned alike with equal sides close equally along the same axes: body a's first."""
    q = np.array([1.0, 0.0, 0.0, 0.0])
    states = [RigidBodyState(np.zeros(3), q, np.array([1.0, 1.0, 0.0]), np.zeros(3)),
              RigidBodyState(np.ones(3), q, np.zeros(3), np.zeros(3))]
    sizes = Extents(np.full((2, 3), 0.01), np.full(2, 0.01))
    for a, b in ((0, 1), (1, 0)):
        assert step_ratio(states, sizes, a, b, 1e-3) == reference_step_ratio(states, sizes, a, b, 1e-3) == (0.1, a, 0.01)


def test_a_flat_body_closing_across_its_zero_side_has_an_infinite_ratio():
    """A closed flat rigid mesh (a double-sided quad) has a side of 0: numpy's x/0 gave inf (the
    fast-motion warning); the kernel raised ZeroDivisionError before this was guarded."""
    q = np.array([1.0, 0.0, 0.0, 0.0])
    states = [RigidBodyState(np.zeros(3), q, np.array([0.0, 0.0, 1.0]), np.zeros(3)),
              RigidBodyState(np.ones(3), q, np.zeros(3), np.zeros(3))]
    sizes = Extents(np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]), np.ones(2))
    with np.errstate(divide="ignore"):
        expected = reference_step_ratio(states, sizes, 0, 1, 1e-2)
    assert step_ratio(states, sizes, 0, 1, 1e-2) == expected == (float("inf"), 0, 0.0)
