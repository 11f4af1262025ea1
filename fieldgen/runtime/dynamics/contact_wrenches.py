"""Contact wrenches of the continuous integrators: one query per pair, both friction models
(docs/model.md §5; D 5.0.3, 5.2, 5.3, 6.2.4).

Every pair of bodies that can touch (at least one dynamic, at least one compliant geometry,
:func:`contact_pairs`) gets its contact surface in the triangle representation with the
scene's face rule; the query's contact warnings go to the run's log (``warnings.watched``).
The pressure-field normal and damping tractions give the wrench (``wrench.compute_wrench``);
friction is either the regularised law of that function (D 5.3) or, when the pairs' friction
springs are given, the spatial friction spring of :mod:`fieldgen.runtime.contact.tangential`
with exact Coulomb friction (D 6), whose state rates are returned too.

The wrench on a body is [force, torque about its centre of mass], world frame; B of a pair
(its second body in scene order) gets the contact wrench, A its opposite.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fieldgen.runtime.contact.geometries import CompliantGeometry
from fieldgen.runtime.contact.pose import SpatialVelocity, cross3
from fieldgen.runtime.contact.surface import ContactSurface, compute_contact_surface
from fieldgen.runtime.contact.tangential import combined_tangential, friction_wrench, spring_geometry
from fieldgen.runtime.contact.wrench import combined_friction, compute_wrench
from fieldgen.runtime.dynamics.bodies import Scene
from fieldgen.runtime.dynamics.rigid_body import RigidBodyState
from fieldgen.runtime.dynamics.warnings import watched


@dataclass
class ContactWrenches:
    """The contact wrenches of one evaluation.

    ``wrenches`` (n_bodies, 6): net [force, torque about the centre of mass] on every body;
    ``spring_rates`` (n_pairs, 6): with friction springs, the rate of each pair's state in its
    B frame (else empty); ``surfaces``: (i, j, ContactSurface) of the pairs in contact when
    asked; ``records``: with friction springs and when asked, one row per pair (status,
    sliding fraction, spring energy, spring and friction wrenches on B about the world origin)."""

    wrenches: np.ndarray
    spring_rates: np.ndarray
    surfaces: list = field(default_factory=list)
    records: list = field(default_factory=list)


def contact_pairs(scene: Scene) -> list[tuple[int, int]]:
    """Pairs (i < j) that can carry a pressure-field contact: one body dynamic, one geometry compliant."""
    out = []
    for i, bi in enumerate(scene.bodies):
        for j in range(i + 1, len(scene.bodies)):
            bj = scene.bodies[j]
            if bi.kind != "dynamic" and bj.kind != "dynamic":
                continue
            if isinstance(bi.geometry, CompliantGeometry) or isinstance(bj.geometry, CompliantGeometry):
                out.append((i, j))
    return out


def pair_tangential(body_a, body_b) -> tuple[float, float]:
    """(K̄, C̄) of two contact geometries (springs and dampers in series; rigid = infinite)."""
    inf = float("inf")
    return combined_tangential(getattr(body_a, "tangential_stiffness", inf), getattr(body_a, "tangential_damping", inf),
                               getattr(body_b, "tangential_stiffness", inf), getattr(body_b, "tangential_damping", inf))


def block_rotate(R: np.ndarray, s: np.ndarray) -> np.ndarray:
    """A 6-vector [linear, angular] rotated by ``R``, block by block."""
    return (R @ s.reshape(2, 3).T).T.reshape(6)


def contact_wrenches(scene: Scene, states: list[RigidBodyState], pairs: list[tuple[int, int]] | None = None,
                     springs: np.ndarray | None = None, *, keep_surfaces: bool = False,
                     records: bool = False, cache: dict | None = None) -> ContactWrenches:
    """Contact wrenches on every body at ``states`` (see the module doc).

    ``pairs``: the pairs to query (default :func:`contact_pairs`). ``springs`` (n_pairs, 6):
    each pair's friction-spring state in its B frame, for compliant friction (D 6); without
    it, friction is regularised (D 5.3). ``cache`` (a dict the caller keeps across calls):
    each pair's latest contact surface and friction-spring geometry with the two poses they
    were computed at, reused when a call has exactly those poses (same bits out)."""
    pairs = contact_pairs(scene) if pairs is None else pairs
    out = np.zeros((len(scene.bodies), 6))
    rates = np.zeros((len(pairs), 6)) if springs is not None else np.zeros((0, 6))
    surfaces, rows = [], []
    poses = [b.pose(s) for b, s in zip(scene.bodies, states)]
    for k, (i, j) in enumerate(pairs):
        bi, bj = scene.bodies[i], scene.bodies[j]
        surface, geometry = _cached_surface(scene, poses, i, j, cache, springs is not None)
        if springs is None:
            if surface.n_faces == 0:
                continue
            force, torque = _pressure_wrench(surface, bi.geometry, bj.geometry, states[i], poses[i], states[j],
                                             poses[j], None)
        else:
            force, torque, rates[k], row = _spring_wrench(surface, geometry, bi, bj, states[i], poses[i], states[j],
                                                          poses[j], springs[k])
            if records:
                rows.append(row)
        if keep_surfaces and surface.n_faces:
            surfaces.append((i, j, surface))
        out[j, :3] += force
        out[j, 3:] += torque - cross3(states[j].position, force)
        out[i, :3] -= force
        out[i, 3:] += -torque + cross3(states[i].position, force)
    return ContactWrenches(out, rates, surfaces, rows)


def _cached_surface(scene: Scene, poses, i: int, j: int, cache: dict | None, spring: bool):
    """The pair's triangle-representation contact surface at ``poses`` (and, with ``spring``, its
    friction-spring geometry): from ``cache`` when it holds this pair at exactly these poses."""
    key = (poses[i].tobytes(), poses[j].tobytes())
    hit = cache.get((i, j)) if cache is not None else None
    if hit is not None and hit[0] == key and (hit[2] is not None or not spring):
        return hit[1], hit[2]
    bi, bj = scene.bodies[i], scene.bodies[j]
    with watched((bi.name, bj.name)):
        surface = compute_contact_surface(bi.geometry, poses[i], bj.geometry, poses[j], "triangle",
                                          face_rule=scene.face_rule)
    geometry = spring_geometry(surface, pair_tangential(bi.geometry, bj.geometry)[0]) if spring else None
    if cache is not None:
        cache[(i, j)] = (key, surface, geometry)
    return surface, geometry


def _pressure_wrench(surface: ContactSurface, ga, gb, sa, Xa, sb, Xb, mu):
    """(force, torque about the world origin) on B of the pressure field with damping, and
    friction by ``compute_wrench`` (``mu`` None: the pair's regularised friction)."""
    V = []
    for s, X in ((sa, Xa), (sb, Xb)):
        origin_velocity = s.velocity + cross3(s.angular_velocity, X[:3, 3] - s.position)
        V.append(SpatialVelocity(linear=origin_velocity, angular=s.angular_velocity))
    w = compute_wrench(surface, ga, gb, V_WA=V[0], V_WB=V[1]) if mu is None else \
        compute_wrench(surface, ga, gb, V_WA=V[0], V_WB=V[1], mu=mu)
    return w.force, w.torque


def _spring_wrench(surface: ContactSurface, geometry, bi, bj, si, Xi, sj, Xj, spring):
    """Compliant friction on one pair (D 6.2.4): (force, torque) on B about the world origin
    (friction spring plus the frictionless pressure-field wrench), the rate of the spring state
    in B's frame, and the pair's record."""
    gi, gj = bi.geometry, bj.geometry
    Rj = Xj[:3, :3]
    k_bar, c_bar = pair_tangential(gi, gj)
    # relative velocity of B's and A's material points at the world origin, and ω_B − ω_A
    v_rel = (sj.velocity - cross3(sj.angular_velocity, sj.position)) \
        - (si.velocity - cross3(si.angular_velocity, si.position))
    res = friction_wrench(geometry, block_rotate(Rj, spring), linear_velocity=v_rel,
                          angular_velocity=sj.angular_velocity - si.angular_velocity,
                          mu=combined_friction(gi, gj), stiffness=k_bar, damping=c_bar)
    force, torque = res.force.copy(), res.torque.copy()
    if surface.n_faces:
        pressure_force, pressure_torque = _pressure_wrench(surface, gi, gj, si, Xi, sj, Xj, 0.0)
        force += pressure_force
        torque += pressure_torque
    centre = res.centre if surface.n_faces else np.zeros(3)
    row = {"body_a": bi.name, "body_b": bj.name, "status": res.status,
           "sliding_fraction": res.sliding_fraction, "energy": res.energy,
           "spring_force": res.spring_force, "spring_torque": res.spring_torque + cross3(centre, res.spring_force),
           "friction_force": res.force, "friction_torque": res.torque}
    return force, torque, block_rotate(Rj.T, res.rate), row
