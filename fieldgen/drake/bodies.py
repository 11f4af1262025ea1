"""The bodies a Drake pressure-field system handles: each Drake body's contact geometry, read
the way ``fieldgen contact`` reads it, and the pairs that can touch (docs/model.md §5.5).

Plain Python and numpy: nothing here imports pydrake, so the geometry side can be tested and
reused without it. A body's geometry is given in that body's frame, optionally placed by a
4×4 transform ``X_BG`` (the mesh frame G in the body frame B).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from fieldgen.errors import InputError, OptionError
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry, load_body
from fieldgen.runtime.contact.pose import cross3
from fieldgen.runtime.dynamics.bodies import Scene, SceneBody
from fieldgen.runtime.dynamics.contact_wrenches import contact_wrenches
from fieldgen.runtime.dynamics.rigid_body import RigidBodyState
from fieldgen.units import LENGTH_UNITS
from fieldgen.validate import require_valid


@dataclass(frozen=True)
class HandledBody:
    """One Drake body and its fieldgen contact geometry: ``name`` (the Drake body's), ``path``
    (the file read), ``geometry`` in its mesh frame G, ``X_BG`` (4, 4) placing G in the body frame."""

    name: str
    path: str
    geometry: CompliantGeometry | RigidGeometry
    X_BG: np.ndarray

    @property
    def compliant(self) -> bool:
        return isinstance(self.geometry, CompliantGeometry)


def read_geometry(path: str, units: str | None, friction: float | None) -> CompliantGeometry | RigidGeometry:
    """A fieldgen asset (.vtu, validated first, as ``fieldgen contact`` does) or a rigid closed
    surface in ``units`` (default m); ``friction`` sets both coefficients when given."""
    suffix = Path(path).suffix.lower()
    if suffix == ".vtu":
        if units is not None:
            raise OptionError(f"units {units!r} given for an asset; assets are in metres", path=path,
                              fix="drop this file from units (it applies to rigid surface meshes)")
        require_valid(path, use="a Drake simulation")
        body = load_body(path)
    elif suffix == ".vtk":
        raise InputError("a legacy .vtk tet mesh carries no authored field", path=path,
                         fix="give the fieldgen asset (.vtu) built from the part, or a rigid surface mesh")
    else:
        if units is not None and units not in LENGTH_UNITS:
            raise OptionError(f"unknown units {units!r}", path=path, fix=f"use one of {', '.join(LENGTH_UNITS)}")
        body = load_body(path, units=units or "m")
    if friction is not None:
        if not (np.isfinite(friction) and friction >= 0):
            raise OptionError(f"friction {friction} is not a coefficient >= 0", path=path, fix="give e.g. 0.5")
        body.mu_static = body.mu_dynamic = float(friction)
    return body


def handled_bodies(bodies: Mapping, units: Mapping | None, friction: Mapping | None, as_matrix) -> list[HandledBody]:
    """The :class:`HandledBody` of each entry of ``bodies`` (body name -> path, or (path,
    placement)); ``as_matrix`` turns a placement (e.g. a Drake ``RigidTransform``) into a 4×4
    array. ``units`` and ``friction`` are looked up by path, then by body name."""
    units, friction = dict(units or {}), dict(friction or {})
    out = []
    for name, value in bodies.items():
        if isinstance(value, (tuple, list)):
            if len(value) != 2:
                raise OptionError(f"body {name!r}: {value!r} is not a path or a (path, RigidTransform) pair",
                                  fix='give e.g. {"pad": ("pad.vtu", RigidTransform([0, 0, 0.01]))}')
            path, placement = value
            X_BG = np.asarray(as_matrix(placement), dtype=np.float64).reshape(4, 4)
        else:
            path, X_BG = value, np.eye(4)
        path = os.fspath(path)
        geometry = read_geometry(path, units.get(path, units.get(name)), friction.get(path, friction.get(name)))
        out.append(HandledBody(str(name), path, geometry, X_BG))
    return out


def pressure_field_pairs(bodies: list[HandledBody]) -> list[tuple[int, int]]:
    """Pairs (i < j) with at least one compliant geometry: compliant–compliant and compliant–rigid."""
    return [(i, j) for i in range(len(bodies)) for j in range(i + 1, len(bodies))
            if bodies[i].compliant or bodies[j].compliant]


def contact_scene(bodies: list[HandledBody], face_rule: str) -> Scene:
    """The runtime :class:`Scene` the wrenches are computed in: every body kinematic (its pose
    and velocity come from Drake, its mass stays in Drake), so each state's position is the
    mesh origin G and each wrench's torque is about it."""
    return Scene([SceneBody(b.name, b.geometry, "kinematic") for b in bodies], face_rule=face_rule)


def geometry_states(X_WG: list[tuple[np.ndarray, np.ndarray]], V_WB: list[np.ndarray],
                    p_WBo: list[np.ndarray]) -> list[RigidBodyState]:
    """The runtime states of the mesh frames: ``X_WG`` as (position, quaternion w,x,y,z),
    ``V_WB`` the Drake body's spatial velocity [ω, v of its origin Bo] (world), ``p_WBo`` that origin."""
    states = []
    for (p_WG, q_WG), V, p_Bo in zip(X_WG, V_WB, p_WBo):
        w, v_Bo = np.asarray(V[:3], dtype=np.float64), np.asarray(V[3:], dtype=np.float64)
        states.append(RigidBodyState(p_WG, q_WG, v_Bo + cross3(w, np.asarray(p_WG) - p_Bo), w))
    return states


def body_wrenches(scene: Scene, pairs: list[tuple[int, int]], states: list[RigidBodyState]) -> np.ndarray:
    """(n, 6) net [force, torque about the mesh origin G] on each body, world frame: the
    runtime's one contact-wrench function (regularised friction, D 5.3; triangle surfaces with
    the scene's face rule), as the continuous integrators and ``fieldgen contact`` compute it."""
    return contact_wrenches(scene, states, pairs).wrenches
