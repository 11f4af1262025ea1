"""The bodies a Drake pressure-field system handles: each Drake body's contact geometry, read
the way ``fieldgen contact`` reads it, and the pairs that can touch (docs/model.md §5.5).

Plain Python and numpy: nothing here imports pydrake, so the geometry side can be tested and
reused without it. A body's geometry is given in that body's frame, optionally placed by a
4×4 transform ``X_BG`` (the mesh frame G in the body frame B).
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from fieldgen.errors import BuildError, InputError, OptionError
from fieldgen.options import MAX_FRICTION
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry, load_body
from fieldgen.runtime.contact.pose import cross3, nearest_rigid, rigid_problem
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
        if units is not None and (not isinstance(units, str) or units not in LENGTH_UNITS):
            raise OptionError(f"unknown units {units!r}", path=path, fix=f"use one of {', '.join(LENGTH_UNITS)}")
        body = load_body(path, units=units or "m")
    if friction is not None:
        body.mu_static = body.mu_dynamic = checked_friction(friction, path)
    return body


def checked_friction(friction, path: str) -> float:
    """``friction`` as a float: a real number (not a bool, not text), finite, 0 to
    :data:`~fieldgen.options.MAX_FRICTION` (the bound of build's ``--mu-*``, contact's ``--mu-a/-b``)."""
    if isinstance(friction, bool) or not isinstance(friction, numbers.Real):
        raise OptionError(f"friction {friction!r} is not a number", path=path, fix="give a coefficient, e.g. 0.5")
    if not (np.isfinite(friction) and friction >= 0):
        raise OptionError(f"friction {friction} is not a coefficient >= 0", path=path, fix="give e.g. 0.5")
    if friction > MAX_FRICTION:
        raise OptionError(f"friction {friction:g} is above {MAX_FRICTION:g}: no pair of solids grips so hard",
                          path=path, fix="give a coefficient, e.g. 0.5 (rubber on glass is about 3)")
    return float(friction)


PLACEMENT_FIX = "give a pydrake RigidTransform, e.g. RigidTransform([0, 0, 0.01]), or its GetAsMatrix4()"


def placement_matrix(name: str, placement, as_matrix) -> np.ndarray:
    """The 4×4 ``X_BG`` of body ``name``'s ``placement``: finite, a rotation (orthonormal within
    ``pose.ROTATION_TOLERANCE``, determinant +1; projected onto the nearest rotation) and a translation,
    last row 0 0 0 1. OptionError otherwise: a NaN or a scaled matrix would place the mesh nowhere,
    or stretch it, without a word."""
    try:
        X = np.asarray(as_matrix(placement), dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise OptionError(f"body {name!r}: the placement {placement!r} is not a transform ({error})",
                          fix=PLACEMENT_FIX) from None
    if X.shape != (4, 4):
        raise OptionError(f"body {name!r}: the placement is of shape {X.shape}, not a 4×4 transform",
                          fix=PLACEMENT_FIX)
    problem = rigid_problem(X)
    if problem is not None:
        hint = " (RotationMatrix.ProjectToRotationMatrix makes a rounded one exact)" if "orthonormal" in problem \
            else ""
        raise OptionError(f"body {name!r}: the placement {problem}", fix=PLACEMENT_FIX + hint)
    return nearest_rigid(X)         # a rounded rotation: the nearest one (det +1 checked)


def _body_entry(name, value, as_matrix) -> tuple[str, np.ndarray]:
    """(path, X_BG) of one entry of ``bodies``: a path, or a (path, placement) pair."""
    if not isinstance(name, str):
        raise OptionError(f"the body name {name!r} is not a string", fix='key the bodies by Drake body name, e.g. "ball"')
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise OptionError(f"body {name!r}: {value!r} is not a path or a (path, RigidTransform) pair",
                              fix='give e.g. {"pad": ("pad.vtu", RigidTransform([0, 0, 0.01]))}')
        path, X_BG = value[0], placement_matrix(name, value[1], as_matrix)
    else:
        path, X_BG = value, np.eye(4)
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        what = "an empty string" if isinstance(path, str) else repr(path)
        raise OptionError(f"body {name!r}: {what} is not a path", fix='give a file path, e.g. "pad.vtu"')
    return os.fspath(path), X_BG


def _lookup(table, what: str) -> dict:
    """``units`` or ``friction`` as a dict (None: empty); OptionError if it is no mapping."""
    if table is None:
        return {}
    if not isinstance(table, Mapping):
        example = '"mm"' if what == "units" else "0.5"
        raise OptionError(f"{what} is a {type(table).__name__}, not a mapping of path or body name to value",
                          fix=f'give e.g. {what}={{"ball.stl": {example}}}')
    return {os.fspath(k) if isinstance(k, os.PathLike) else k: v for k, v in table.items()}


def _check_keys(table: dict, what: str, bodies: list[tuple[str, str]]) -> None:
    """Every key of ``units`` or ``friction`` names a body given or its file: one that names
    neither (a misspelt name) would be ignored, the body left with the file's value."""
    known = {name for name, _ in bodies} | {path for _, path in bodies}
    for key in table:
        if key not in known:
            raise OptionError(f"{what} key {key!r} names none of the bodies given nor their files",
                              fix=f"key {what} by one of {', '.join(repr(k) for k in sorted(map(str, known)))}")


def handled_bodies(bodies: Mapping, units: Mapping | None, friction: Mapping | None, as_matrix) -> list[HandledBody]:
    """The :class:`HandledBody` of each entry of ``bodies`` (body name -> path, or (path,
    placement)); ``as_matrix`` turns a placement (e.g. a Drake ``RigidTransform``) into a 4×4
    array. ``units`` and ``friction`` are looked up by path, then by body name."""
    if not isinstance(bodies, Mapping):
        raise OptionError(f"bodies is a {type(bodies).__name__}, not a mapping of Drake body name to file",
                          fix='give e.g. {"ball": "ball.stl", "world": "pad.vtu"}')
    units, friction = _lookup(units, "units"), _lookup(friction, "friction")
    entries = [(name, *_body_entry(name, value, as_matrix)) for name, value in bodies.items()]
    for table, what in ((units, "units"), (friction, "friction")):
        _check_keys(table, what, [(name, path) for name, path, _ in entries])
    out = []
    for name, path, X_BG in entries:
        geometry = read_geometry(path, units.get(path, units.get(name)), friction.get(path, friction.get(name)))
        out.append(HandledBody(name, path, geometry, X_BG))
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


def check_finite_states(names: list[str], X_WG: list[tuple[np.ndarray, np.ndarray]], V_WB: list[np.ndarray],
                        time: float) -> None:
    """BuildError naming the first body whose pose or velocity from Drake is not finite (the
    plant's simulation diverged, or was given such a state): the runtime would read it as no
    contact, a zero force that looks like an answer."""
    for name, (p_WG, q_WG), V in zip(names, X_WG, V_WB):
        if not (np.all(np.isfinite(p_WG)) and np.all(np.isfinite(q_WG)) and np.all(np.isfinite(V))):
            raise BuildError(f"body {name!r} has a non-finite pose or velocity in the Drake plant at t = {time:.6g} s",
                             fix="check the plant's initial state, masses and inertias, and keep time_step well "
                                 "below the contact's period (a step too long diverges)")


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
