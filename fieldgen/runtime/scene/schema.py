"""What a scene file may contain: every table's keys, their types and ranges.

``check_scene_table`` runs before anything is built or stepped. An unknown key (in the top
level, ``[simulate]``, a ``[[body]]`` or its ``geometry`` table), a value of the wrong type
or out of range raises :class:`SceneError` naming the file, the table, the key and, for an
unknown key, the nearest valid one (the same check as manifests and build specs,
``fieldgen.tables.check_keys``); so does a geometry key naming a file of a type it does not
read (``mesh = "x.vtu"``, ``vtk = "x.stl"``). ``fieldgen simulate`` exits 2 on it: the scene is refused
as written, before any work.

The allowed keys are the ones the loader reads (``scene.load_scene``, the CLI's
``[simulate]`` settings), so a key that would be ignored is never accepted. Keys read by
other modules of the runtime are listed here too (``[simulate]`` ``friction`` and
``face_rule``): their values are checked for type here and for meaning where they are used. A
body's friction spring (``tangential_stiffness``, ``tangential_damping``) is bounded as ``fieldgen
build``'s; its ``mu_dynamic`` may not exceed its ``mu_static``, a kinematic body's ``motion`` is no
faster than its ``velocity`` may be, and a kinematic body with a ``motion`` takes no ``velocity``
(the motion sets its twist).
"""

from __future__ import annotations

import math
from pathlib import PurePath
from typing import Any, Callable

import numpy as np

from fieldgen.errors import OptionError
from fieldgen.material.damping import MAX_DISSIPATION
from fieldgen.material.modulus import MAX_TABLE_PRESSURE, MIN_MODULUS
from fieldgen.options import MAX_FRICTION, MAX_SPIN, MAX_TANGENTIAL_STIFFNESS, SPEED_OF_LIGHT, check_velocity
from fieldgen.runtime.contact.pose import MAX_POSITION
from fieldgen.runtime.dynamics.bodies import KINDS
from fieldgen.runtime.dynamics.choices import FRICTION_MODELS, INTEGRATORS, step_count
from fieldgen.tables import check_keys
from fieldgen.units import LENGTH_UNITS

UNITS = tuple(LENGTH_UNITS)


class SceneError(OptionError):
    """The scene file is refused as written (missing, not valid TOML, unknown key, wrong type,
    value out of range): a usage error, exit 2."""


# --------------------------------------------------------------------------- value checks
# Each check returns None when the value is fine, else what it must be ("a positive number").

def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def number(minimum: float | None = None, *, strict: bool = False, integer: bool = False,
           maximum: float | None = None) -> Callable:
    def check(v):
        what = "an integer" if integer else "a number"
        if minimum is not None:
            what += f" {'>' if strict else '>='} {minimum:g}"
        if maximum is not None:
            what += f" {'and ' if minimum is not None else ''}<= {maximum:g}"
        if not _is_number(v) or (integer and not float(v).is_integer()):
            return what
        if minimum is not None and (v <= minimum if strict else v < minimum):
            return what
        if maximum is not None and v > maximum:
            return what
        return None
    return check


def vector(n: int, *, positive: bool = False, nonzero: bool = False,
           within: tuple[float, float] | None = None) -> Callable:
    def check(v):
        what = f"{n} {'positive ' if positive else ''}numbers" + (" not all zero" if nonzero else "")
        if within is not None:
            what = f"{n} numbers from {within[0]:g} to {within[1]:g}"
        if not isinstance(v, list) or len(v) != n or not all(_is_number(x) for x in v):
            return what
        if positive and not all(x > 0 for x in v):
            return what
        if within is not None and not all(within[0] <= x <= within[1] for x in v):
            return what
        if nonzero and not any(x != 0 for x in v):
            return what
        return None
    return check


def string(choices: tuple[str, ...] | None = None) -> Callable:
    def check(v):
        if not isinstance(v, str) or (choices is not None and v not in choices):
            return f"one of {', '.join(choices)}" if choices else "a string"
        return None
    return check


def name(v):
    return None if isinstance(v, str) and v.strip() else "a name (not empty)"


def file_path(v):
    """A file a geometry reads: an empty string would name the scene's own folder."""
    return None if isinstance(v, str) and v.strip() else "a file path (not empty)"


def boolean(v):
    return None if isinstance(v, bool) else "true or false"


def table(v):
    return None if isinstance(v, dict) else "a table, e.g. {shape = \"box\", size = [0.1, 0.1, 0.1]}"


def _physical_moments(moments) -> bool:
    """Principal moments a rigid body can have: positive, none more than the other two together
    (the triangle inequality of I = ∫ (|r|² 1 - r rᵀ) dm), allowing rounding."""
    a, b, c = sorted(float(m) for m in moments)
    return a > 0 and c <= (a + b) * (1 + 1e-6)


def inertia(v):
    what = ("3 positive principal moments, none more than the other two together, or a symmetric "
            "positive-definite 3 x 3 matrix with such moments, kg m^2")
    if vector(3, positive=True)(v) is None:
        return None if _physical_moments(v) else what
    if isinstance(v, list) and len(v) == 3 and all(vector(3)(row) is None for row in v):
        matrix = [[float(x) for x in row] for row in v]
        scale = max(abs(x) for row in matrix for x in row)
        symmetric = all(abs(matrix[i][j] - matrix[j][i]) <= 1e-9 * scale for i in range(3) for j in range(i))
        if symmetric and scale > 0:
            if _physical_moments(np.linalg.eigvalsh(np.array(matrix))):
                return None
    return what


def schedule(columns: str, limits: tuple[float, float] | None = None) -> Callable:
    """Rows ``[t, <columns>]`` with increasing t, or one constant 6-vector ``[<columns>]``
    (a wrench's fx..tz, a motion's twist vx..wz); with ``limits`` (a wrench's), each row's force
    at most ``limits[0]`` N and its torque at most ``limits[1]`` N m in every component."""
    bounded = "" if limits is None else (f" with each force component within ±{limits[0]:g} N and each torque "
                                         f"component within ±{limits[1]:g} N m")

    def within(row):
        return limits is None or (all(abs(x) <= limits[0] for x in row[-6:-3])
                                  and all(abs(x) <= limits[1] for x in row[-3:]))

    def check(v):
        if vector(6)(v) is None:
            return None if within(v) else f"6 numbers [{columns}]{bounded}"
        if isinstance(v, list) and v and all(vector(7)(row) is None for row in v):
            times = [row[0] for row in v]
            if not all(b > a for a, b in zip(times, times[1:])):      # a row at the time of the next is never applied
                return f"rows [t, {columns}] with t increasing (no two rows at one time)"
            return None if all(within(row) for row in v) else f"rows [t, {columns}]{bounded}"
        return f"6 numbers [{columns}] or rows [t, {columns}]"
    return check


#: More steps than this are refused before the first (about 3 hours at ~1 ms a step,
#: docs/design/limits.md): a typo in duration or dt, not a run anyone waits for.
MAX_STEPS = 10_000_000


def check_step_count(duration: float, dt: float, *, path=None) -> None:
    """Refuse (OptionError, exit 2) a dt longer than the duration, or more than
    :data:`MAX_STEPS` steps, naming the count and the longest duration at this dt."""
    if dt > duration:
        raise OptionError(f"dt = {dt:g} s is longer than the duration {duration:g} s, so no step would fit",
                          path=path, fix="make dt (--dt or [simulate] dt) smaller than the duration")
    steps = duration / dt
    if steps > MAX_STEPS:
        raise OptionError(f"duration {duration:g} s at dt = {dt:g} s is {steps:.3g} steps (more than "
                          f"{MAX_STEPS:.0e}; at 1 ms a step about {steps * 1e-3 / 3600:.3g} hours)", path=path,
                          fix=f"shorten the duration or raise dt (at this dt at most {MAX_STEPS * dt:g} s)")


def step_count_note(duration: float, dt: float) -> str | None:
    """What the run simulates when ``duration`` is no whole number of steps ``dt`` (the run takes
    the next whole number, as :func:`fieldgen.runtime.dynamics.simulate.simulate` does), else None."""
    steps = step_count(duration, dt)
    if steps - duration / dt <= 1e-6:
        return None
    return (f"the duration {duration:g} s is not a whole number of steps of dt = {dt:g} s: the run takes "
            f"{steps} steps and ends at t = {steps * dt:g} s; give a duration that is a multiple of dt "
            f"(e.g. {(steps - 1) * dt:g} s or {steps * dt:g} s) to end where you mean")


# --------------------------------------------------------------------------- the tables

#: The finest primitive a scene may ask for: a cylinder's segments and a sphere's or ball's
#: icosphere subdivisions (20·4^n triangles; 7 is 327,680); a count typed with extra digits
#: would fill the memory before the first step, not make a finer body.
MAX_SEGMENTS = 100_000
MAX_SUBDIVISIONS = 7
#: A slab's tets (6 per cell and layer), as ``fieldgen build``'s bound (meshing.tetgen.MAX_TETS).
MAX_SLAB_TETS = 20_000_000

#: A shape's lengths (size, radius, height), m: beyond them its mass and inertia (a length to the
#: fifth power) over- or underflow, trimesh's icosphere comes out NaN and TetGen stops or never
#: ends. A metre scene has no nanometre or million-kilometre primitive; a mesh body is only warned about.
SHAPE_LENGTHS = (1e-9, 1e9)
#: A compliant shape's modulus, Pa, within a build's (fieldgen.material.modulus): from softer than any
#: gel to stiffer than any solid.
SHAPE_MODULUS = number(MIN_MODULUS, maximum=MAX_TABLE_PRESSURE)
#: Bounds no body or scene has, as a build's options (fieldgen.options, fieldgen.material.damping):
#: friction, dissipation, speeds below light; positions within SHAPE_LENGTHS' largest; gravity up
#: to a million g (an ultracentrifuge's); densities up to 1e5 kg/m^3 (osmium's is 2.26e4); masses
#: from a microgram to a billion tonnes (past it inertias of metre bodies overflow to no use).
FRICTION_COEFFICIENT = number(0, maximum=MAX_FRICTION)
DISSIPATION = number(0, maximum=MAX_DISSIPATION)
MAX_GRAVITY = 1e7
MAX_DENSITY = 1e5
MASS_RANGE = (1e-9, 1e12)
#: A wrench's largest force (the heaviest body's weight at the largest gravity) and torque (that
#: force at the largest distance), N and N m: past them a body's state overflows in a step.
MAX_WRENCH = (MASS_RANGE[1] * MAX_GRAVITY, MASS_RANGE[1] * MAX_GRAVITY * SHAPE_LENGTHS[1])
LENGTH = number(SHAPE_LENGTHS[0], maximum=SHAPE_LENGTHS[1])
SIZE = vector(3, within=SHAPE_LENGTHS)
#: Roll, pitch and yaw, degrees: a thousand turns at most. Past about 1e16 degrees a double holds
#: no fraction of a turn, and an angle that large is a typo, not an orientation.
MAX_ANGLE = 360_000.0

TOP = {"gravity": vector(3, within=(-MAX_GRAVITY, MAX_GRAVITY)), "body": None, "simulate": table}

SIMULATE = {
    "duration": number(0, strict=True),
    "dt": number(0, strict=True),
    "integrator": string(INTEGRATORS),
    "friction": string(FRICTION_MODELS),   # compliant needs the continuous integrator (simulate.run_settings)
    "face_rule": string(),          # contact-surface face rule (read by the contact query)
}

BODY = {
    "name": name, "kind": string(KINDS), "geometry": table,
    "mass": number(MASS_RANGE[0], maximum=MASS_RANGE[1]), "density": number(0, strict=True, maximum=MAX_DENSITY), "inertia": inertia,
    "centre_of_mass": vector(3, within=(-SHAPE_LENGTHS[1], SHAPE_LENGTHS[1])),
    "position": vector(3, within=(-MAX_POSITION, MAX_POSITION)), "rpy": vector(3, within=(-MAX_ANGLE, MAX_ANGLE)),
    "quaternion": vector(4, nonzero=True),
    "velocity": vector(3, within=(-SPEED_OF_LIGHT, SPEED_OF_LIGHT)),
    "angular_velocity": vector(3, within=(-MAX_SPIN, MAX_SPIN)),
    "mu_static": FRICTION_COEFFICIENT, "mu_dynamic": FRICTION_COEFFICIENT, "dissipation": DISSIPATION,
    "wrench": schedule("fx, fy, fz, tx, ty, tz", MAX_WRENCH), "motion": schedule("vx, vy, vz, wx, wy, wz"),
    "convex": boolean,
    "tangential_stiffness": number(0, strict=True, maximum=MAX_TANGENTIAL_STIFFNESS),   # K̄, 1/m (D 6.2.3)
    "tangential_damping": number(0, strict=True, maximum=MAX_DISSIPATION),              # C̄, s/m
}
#: body keys that only a given kind reads
ONLY_FOR = {"mass": "dynamic", "density": "dynamic", "inertia": "dynamic", "centre_of_mass": "dynamic",
            "wrench": "dynamic", "motion": "kinematic"}

FRICTION = {"mu_static": FRICTION_COEFFICIENT, "mu_dynamic": FRICTION_COEFFICIENT}
GEOMETRY = {
    "asset": {"asset": file_path},
    "build": {"build": file_path},
    "vtk": {"vtk": file_path, "modulus": SHAPE_MODULUS, "dissipation": DISSIPATION, **FRICTION},
    "mesh": {"mesh": file_path, "units": string(UNITS), **FRICTION},
    "box": {"shape": string(), "size": SIZE, **FRICTION},
    "cylinder": {"shape": string(), "radius": LENGTH, "height": LENGTH,
                 "segments": number(3, integer=True, maximum=MAX_SEGMENTS), **FRICTION},
    "sphere": {"shape": string(), "radius": LENGTH,
               "subdivisions": number(0, integer=True, maximum=MAX_SUBDIVISIONS), **FRICTION},
    "slab": {"shape": string(), "size": SIZE, "modulus": SHAPE_MODULUS,
             "cells": lambda v: None if (isinstance(v, list) and len(v) == 2
                                         and all(number(1, integer=True)(x) is None for x in v))
             else "2 integers >= 1", "layers": number(1, integer=True), "dissipation": DISSIPATION, **FRICTION},
    "ball": {"shape": string(), "radius": LENGTH, "modulus": SHAPE_MODULUS,
             "subdivisions": number(0, integer=True, maximum=MAX_SUBDIVISIONS), "dissipation": DISSIPATION,
             **FRICTION},
}
SOURCES = ("asset", "build", "vtk", "mesh", "shape")
SHAPES = ("box", "cylinder", "sphere", "slab", "ball")
#: geometries without a pressure field (a body-level dissipation would be ignored)
RIGID_GEOMETRIES = ("mesh", "box", "cylinder", "sphere")


def _values(data: dict, spec: dict[str, Any], *, path, where: str) -> None:
    check_keys(data, spec, path=path, where=where, error=SceneError)
    for key, value in data.items():
        check = spec[key]
        problem = check(value) if check is not None else None
        if problem:
            raise SceneError(f"{where}: {key} = {value!r} is not {problem}", path=path,
                             fix=f"write {key} as {problem}")


def _check_slab_size(geometry: dict, *, path, where: str) -> None:
    """Refuse a slab of more than :data:`MAX_SLAB_TETS` tets (its defaults as
    ``primitives.compliant_slab``'s), before its arrays are allocated."""
    cells, layers = geometry.get("cells", [8, 8]), geometry.get("layers", 2)
    tets = 6 * int(cells[0]) * int(cells[1]) * int(layers)
    if tets > MAX_SLAB_TETS:
        raise SceneError(f"{where}: cells = {cells} and layers = {layers} make {tets:.3g} tets (more than "
                         f"{MAX_SLAB_TETS:.0e})", path=path,
                         fix="use fewer cells or layers: the slab's field is linear in depth, so a few suffice")


#: The file each geometry key reads, by its suffix (``load_body`` picks the reader by it): the
#: suffix it takes (None: ``mesh``, any surface mesh but these two), what that is, and how to
#: write a file of that type instead.
FILE_KEYS = {"asset": ".vtu", "vtk": ".vtk", "mesh": None}
FILE_KINDS = {".vtu": ("asset", "a fieldgen asset (.vtu)", "alone (an asset carries its modulus)"),
              ".vtk": ("vtk", "a legacy .vtk tet mesh", "with modulus = <Pa>"),
              None: ("mesh", "a rigid surface mesh (STL, OBJ, PLY, OFF, GLB or STEP)",
                     "without modulus or dissipation")}


def _check_file_type(geometry: dict, variant: str, *, path, where: str) -> None:
    """Refuse a geometry key naming a file of a type the key does not read (``mesh = "x.vtu"``,
    ``vtk = "x.stl"``), before any file is read."""
    name = geometry.get(variant)
    suffix = PurePath(name).suffix.lower() if isinstance(name, str) else ""
    if variant not in FILE_KEYS or not suffix:       # no suffix (a folder?): the loader says what it is
        return
    kind = suffix if suffix in (".vtu", ".vtk") else None
    if kind == FILE_KEYS[variant]:
        return
    key, what, keys = FILE_KINDS[kind]
    raise SceneError(f"{where}: {variant} = {name!r} names a {suffix} file, but {variant} "
                     f"takes {FILE_KINDS[FILE_KEYS[variant]][1]}", path=path,
                     fix=f"for {what} write {key} = {name!r}, {keys}")


def geometry_variant(geometry: dict, *, path=None, where: str = "geometry") -> str:
    """Which kind of geometry a ``geometry`` table describes (a key of :data:`GEOMETRY`)."""
    given = [k for k in SOURCES if k in geometry]
    if not given:
        every = sorted({k for spec in GEOMETRY.values() for k in spec})
        check_keys(geometry, every, path=path, where=where, error=SceneError)
        raise SceneError(f"{where} names no asset, build, vtk, mesh or shape", path=path,
                         fix='add one of asset = "x.vtu", build = "spec.toml", vtk = "x.vtk", '
                             f'mesh = "x.stl" or shape = one of {", ".join(SHAPES)}')
    if len(given) > 1:
        raise SceneError(f"{where} gives both {given[0]!r} and {given[1]!r}", path=path,
                         fix="keep one source of geometry per body")
    if given[0] != "shape":
        return given[0]
    shape = geometry["shape"]
    if shape not in SHAPES:
        raise SceneError(f"{where}: shape = {shape!r} is not one of {', '.join(SHAPES)}", path=path,
                         fix=f"use shape = {SHAPES[0]!r} (or one of {', '.join(SHAPES[1:])})")
    return shape


def _check_motion_and_friction(body: dict, label: str, *, path) -> None:
    """A kinematic body's ``motion`` twists bounded as ``velocity`` is, and no ``velocity`` beside
    it (ignored: the motion sets the twist, zero before its first row); ``mu_dynamic`` at most
    ``mu_static`` where a table gives both (as ``fieldgen build`` refuses)."""
    if "motion" in body:
        rows = body["motion"] if isinstance(body["motion"][0], list) else [[0.0, *body["motion"]]]
        for row in rows:
            try:
                check_velocity(row[1:4], row[4:7], f"{label}: motion row {row}")
            except OptionError as error:
                raise SceneError(error.defect, path=path, fix="give the rows [t, vx, vy, vz, wx, wy, wz] in s, "
                                                              "m/s and rad/s") from None
        for key in ("velocity", "angular_velocity"):     # motion is read for kinematic bodies only
            if key in body:
                raise SceneError(f"{label}: a kinematic body with a motion moves as its rows say (at rest before "
                                 f"the first), so {key} would be ignored", path=path,
                                 fix=f"remove {key}, or put it in the motion's first row [0, vx, vy, vz, wx, wy, wz]")
    for where, table in (("", body), (" geometry", body.get("geometry", {}))):
        static, dynamic = table.get("mu_static"), table.get("mu_dynamic")
        if static is not None and dynamic is not None and dynamic > static:
            raise SceneError(f"{label}{where}: mu_dynamic = {dynamic:g} exceeds mu_static = {static:g}", path=path,
                             fix="kinetic friction cannot exceed static friction; swap or lower them")


def check_scene_table(data: dict, *, path=None) -> None:
    """Refuse (:class:`SceneError`) a scene file's parsed TOML whose keys, types or values are
    not the ones the loader reads; see the module docstring."""
    _values(data, TOP, path=path, where="top level")
    if "simulate" in data:
        _values(data["simulate"], SIMULATE, path=path, where="[simulate]")
        settings = data["simulate"]        # the defaults are fieldgen simulate's (cli/simulate.py)
        try:
            check_step_count(settings.get("duration", 1.0), settings.get("dt", 1e-3))
        except OptionError as error:
            raise SceneError(f"[simulate]: {error.defect}", path=path, fix=error.fix) from None
    bodies = data.get("body")
    if not isinstance(bodies, list) or not all(isinstance(b, dict) for b in bodies):
        if bodies is None:
            return            # the loader says "no [[body]] tables"
        raise SceneError("body is not an array of tables", path=path, fix="write each body as a [[body]] table")
    for index, body in enumerate(bodies, start=1):
        label = f"[[body]] {index}" + (f" ({body['name']})" if isinstance(body.get("name"), str) else "")
        _values(body, BODY, path=path, where=label)
        kind = body.get("kind", "dynamic")
        for key, only in ONLY_FOR.items():
            if key in body and kind != only:
                raise SceneError(f"{label}: {key} is read for {only} bodies only, and this body is {kind}",
                                 path=path, fix=f"remove {key}, or make the body kind = {only!r}")
        if kind == "fixed":
            for key in ("velocity", "angular_velocity"):
                if key in body:
                    raise SceneError(f"{label}: a fixed body never moves, so {key} would be ignored", path=path,
                                     fix=f'remove {key}, or make the body kind = "kinematic"')
        if "mass" in body and "density" in body:
            raise SceneError(f"{label} gives both mass and density", path=path,
                             fix="keep one: mass = <kg> (inertia optional) or density = <kg/m^3>")
        if "centre_of_mass" in body and not ("mass" in body and "inertia" in body):
            raise SceneError(f"{label}: centre_of_mass is read with mass and inertia only (else the mass properties "
                             "come from the geometry, its centroid the centre of mass), so it would be ignored",
                             path=path, fix="give mass and inertia beside it, or remove centre_of_mass")
        if "rpy" in body and "quaternion" in body:
            raise SceneError(f"{label} gives both rpy and quaternion", path=path, fix="keep one of them")
        if "geometry" not in body:
            raise SceneError(f"{label} has no geometry table", path=path,
                             fix='add geometry = {shape = "box", size = [0.1, 0.1, 0.1]} or asset/mesh/vtk')
        where = f"{label} geometry"
        variant = geometry_variant(body["geometry"], path=path, where=where)
        _values(body["geometry"], GEOMETRY[variant], path=path, where=f"{where} ({variant})")
        _check_file_type(body["geometry"], variant, path=path, where=where)
        if variant == "slab":
            _check_slab_size(body["geometry"], path=path, where=f"{where} (slab)")
        _check_motion_and_friction(body, label, path=path)
        if "dissipation" in body and variant in RIGID_GEOMETRIES:
            raise SceneError(f"{label}: dissipation is a property of compliant geometry and this body is rigid "
                             f"({variant})", path=path, fix="remove it, or give it to the compliant body")
