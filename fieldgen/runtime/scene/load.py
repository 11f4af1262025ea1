"""Scenes for ``fieldgen simulate``: rigid bodies with contact geometry, gravity and loads.

The scene is the plain data of :mod:`fieldgen.runtime.dynamics.bodies` (bodies, kinds,
states, schedules); this module reads it from a TOML file.

TOML (``load_scene``)::

    gravity = [0, 0, -9.81]
    [[body]]
    name = "coin"
    kind = "dynamic"                         # dynamic | fixed | kinematic
    geometry = {shape = "cylinder", radius = 0.01213, height = 0.00175, segments = 152}
    #   or {asset = "pad.vtu"} | {vtk = "x.vtk", modulus = 1e9} | {mesh = "part.stl", units = "mm"}
    #   or {build = "pad.toml"} (built with fieldgen build on first use, cached: default_cache_dir())
    #   or {shape = "box", size = [...]} | {shape = "sphere", radius = ...}
    #   or {shape = "slab", size = [x, y, H], modulus = 1e9} | {shape = "ball", radius = .., modulus = ..}
    # [simulate] (optional): duration, dt, integrator, and face_rule = "all" | "drake"
    mass = 0.00567                           # or density = 7800 (mass and inertia from the mesh)
    inertia = [[...], [...], [...]]          # optional with mass (from the mesh at uniform density)
    position = [0, 0, 0.001]                 # m
    rpy = [0, 0, 0]                          # degrees, fixed X-Y-Z axes (or quaternion = [w, x, y, z])
    velocity = [0.1, 0, 0]
    angular_velocity = [0, 0, 10]
    mu_static = 0.2                          # override the geometry's friction
    mu_dynamic = 0.2
    dissipation = 0.0                        # override the geometry's χ (s/m)
    tangential_stiffness = 1e4               # override K̄ (1/m) of --friction compliant (D 6.2.3)
    tangential_damping = 10.0                # override C̄ (s/m)
    wrench = [[t, fx, fy, fz, tx, ty, tz], ...]   # piecewise-constant external wrench
    motion = [[t, vx, vy, vz, wx, wy, wz], ...]   # kinematic bodies: piecewise-constant twist
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from scipy.spatial.transform import Rotation

from fieldgen.errors import InputError, OptionError
from fieldgen.io.surface_readers import STEP_SUFFIXES, size_warnings
from fieldgen.meshing.tetmesh import boundary_faces_of
from fieldgen.paths import special_file
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry, load_body
from fieldgen.runtime.contact.pose import rotation_from_rpy
from fieldgen.runtime.contact.surface import FACE_RULES
from fieldgen.runtime.dynamics.bodies import Scene, SceneBody, Schedule
from fieldgen.runtime.dynamics.rigid_body import MassProperties, RigidBodyState, mass_properties_from_mesh
from fieldgen.runtime.dynamics.rigid_contact import convex_hull_body
from fieldgen.runtime.scene import primitives as prim
from fieldgen.runtime.scene.schema import SceneError, check_scene_table
from fieldgen.tables import TomlValueError, not_utf8, parse_toml
from fieldgen.validate import require_valid, validate_asset


# --------------------------------------------------------------------------- TOML

def _vector(table: dict, key: str, n: int, default, path) -> np.ndarray:
    value = table.get(key, default)
    try:
        out = np.asarray(value, dtype=np.float64).reshape(n)
    except (TypeError, ValueError):
        raise InputError(f"{key} must be {n} numbers, got {value!r}", path=path,
                         fix=f"write {key} = [{', '.join(['0'] * n)}]") from None
    if not np.all(np.isfinite(out)):
        raise InputError(f"{key} has non-finite values {value!r}", path=path, fix="use finite numbers")
    return out


def default_cache_dir() -> Path:
    """Where ``build =`` geometries are cached: ``$FIELDGEN_CACHE`` or ``~/.cache/fieldgen/assets``."""
    if os.environ.get("FIELDGEN_CACHE"):
        return Path(os.environ["FIELDGEN_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "fieldgen" / "assets"


def _cached_build(spec: Path, cache_dir: Path, notes: list[str]) -> Path:
    """Build the asset a ``fieldgen build`` spec describes, once: cached by the spec's bytes and
    its input's bytes (the spec names its input relative to itself). A cached file that fails
    validation is built again, and a line naming it added to ``notes``."""
    # lazy: the build pipeline and its options, needed only for build = geometries
    from fieldgen.options import checked_from, options_from_spec
    from fieldgen.pipeline import build, file_sha256  # lazy: as above

    options, input_name, _ = options_from_spec(spec)
    options = checked_from(options, spec)          # a defect names the spec and its key
    if input_name is None:
        raise InputError("build spec names no input surface", path=spec, fix='add input = "part.stl"')
    source = (spec.parent / input_name).resolve()
    if not source.is_file():
        kind = special_file(source)
        raise InputError(f"its input {source} is {kind or 'not found'}", path=spec,
                         fix="name the surface mesh in input = (relative to the spec's folder)")
    digest = hashlib.sha256((file_sha256(spec) + file_sha256(source)).encode()).hexdigest()[:16]
    out = cache_dir / f"{spec.stem}-{digest}.vtu"
    if cache_dir.exists() and not cache_dir.is_dir():
        raise InputError(f"the asset cache {cache_dir} is a file, not a folder", path=spec,
                         fix="point FIELDGEN_CACHE at a folder (or unset it for ~/.cache/fieldgen/assets)")
    if out.is_file() and not validate_asset(out).ok:      # truncated or damaged: built again
        notes.append(f"{out}: the cached asset of {spec} was not a valid asset (truncated?) and was built again")
    elif out.is_file():
        return out
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:        # HOME a file or missing, FIELDGEN_CACHE under /proc, no permission
        raise InputError(f"cannot make the asset cache {cache_dir} ({error.strerror or error})", path=spec,
                         fix="point FIELDGEN_CACHE at a folder you can write (or unset it for "
                             "~/.cache/fieldgen/assets)") from None
    build(source, out, options)
    return out


def geometry_from_table(table: dict, *, base_dir: Path, path=None, name: str = "body",
                        cache_dir: Path | None = None, notes: list[str] | None = None
                        ) -> CompliantGeometry | RigidGeometry:
    """Contact geometry from a scene's ``geometry`` table (see the module docstring); lines for
    the user (a cached asset built again) are added to ``notes``."""
    friction = {k: table[k] for k in ("mu_static", "mu_dynamic") if k in table}
    if "asset" in table:
        require_valid(base_dir / table["asset"], use="a simulation")   # its metadata's ranges, first
        return load_body(base_dir / table["asset"], name=name)
    if "build" in table:
        cache = cache_dir if cache_dir is not None else default_cache_dir()
        return load_body(_cached_build((base_dir / table["build"]).resolve(), cache, [] if notes is None else notes),
                         name=name)
    if "vtk" in table:
        if "modulus" not in table:
            raise InputError(f"body {name!r}: a .vtk geometry needs modulus (Pa)", path=path,
                             fix="add modulus = 1e6 to the geometry table")
        return load_body(base_dir / table["vtk"], modulus=float(table["modulus"]), name=name,
                         dissipation=float(table.get("dissipation", 0.0)), **friction)
    if "mesh" in table:
        if "units" in table and Path(table["mesh"]).suffix.lower() in STEP_SUFFIXES:
            raise OptionError(f"body {name!r}: units = {table['units']!r} for {table['mesh']}, a STEP file, which "
                              "names its own unit and is read true to size", path=path,
                              fix="drop units from the geometry table (it applies to surface meshes, which carry no unit)")
        if "mu_static" in friction and "mu_dynamic" not in friction:
            friction["mu_dynamic"] = friction["mu_static"]
        body = load_body(base_dir / table["mesh"], units=table.get("units", "m"), name=name, **friction)
        if notes is not None:        # a unit slip is warned about, as for a built part (docs/model.md §1.4)
            notes.extend(size_warnings(body.vertices, table.get("units", "m"), what=f"the mesh {base_dir / table['mesh']} "
                                       f"of body {name!r}", fix="check the units of its geometry table"))
        return body
    shape = table.get("shape")
    try:
        if shape == "box":
            return prim.rigid_box(table["size"], name=name, **friction)
        if shape == "cylinder":
            return prim.rigid_cylinder(float(table["radius"]), float(table["height"]),
                                       int(table.get("segments", 152)), name=name, **friction)
        if shape == "sphere":
            return prim.rigid_sphere(float(table["radius"]), int(table.get("subdivisions", 3)), name=name,
                                     **friction)
        if shape == "slab":
            return prim.compliant_slab(table["size"], float(table["modulus"]), cells=table.get("cells", (8, 8)),
                                       layers=int(table.get("layers", 2)),
                                       dissipation=float(table.get("dissipation", 0.0)), name=name, **friction)
        if shape == "ball":
            return prim.compliant_ball(float(table["radius"]), float(table["modulus"]),
                                       subdivisions=int(table.get("subdivisions", 2)),
                                       dissipation=float(table.get("dissipation", 0.0)), name=name, **friction)
    except KeyError as exc:
        raise InputError(f"body {name!r}: geometry shape {shape!r} needs {exc.args[0]}", path=path,
                         fix=f"add {exc.args[0]} to the geometry table") from None
    raise InputError(f"body {name!r}: geometry {table!r} names no asset, build, vtk, mesh or known shape",
                     path=path, fix="use asset=, build=, vtk=, mesh= or shape = box|cylinder|sphere|slab|ball")


def _surface_for_mass(geometry) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(geometry, RigidGeometry):
        return geometry.vertices, geometry.faces
    return geometry.points, boundary_faces_of(geometry.tets)


def body_from_table(table: dict, *, base_dir: Path, path=None, cache_dir: Path | None = None,
                    notes: list[str] | None = None) -> SceneBody:
    """One ``[[body]]`` table of a scene file as a :class:`SceneBody`."""
    name = str(table.get("name", "body"))
    kind = str(table.get("kind", "dynamic"))
    if "geometry" not in table or not isinstance(table["geometry"], dict):
        raise InputError(f"body {name!r} has no geometry table", path=path,
                         fix='add geometry = {shape = "box", size = [0.1, 0.1, 0.1]} or asset/mesh/vtk')
    geometry = geometry_from_table(table["geometry"], base_dir=base_dir, path=path, name=name,
                                   cache_dir=cache_dir, notes=notes)
    for key in ("mu_static", "mu_dynamic", "dissipation"):
        if key in table:
            if key == "dissipation" and not isinstance(geometry, CompliantGeometry):
                continue
            setattr(geometry, key, float(table[key]))
    if "mu_static" in table and "mu_dynamic" not in table:
        geometry.mu_dynamic = float(table["mu_static"])
    for key in ("tangential_stiffness", "tangential_damping"):     # friction spring, D 6.2.3 (bounds: schema)
        if key in table:
            setattr(geometry, key, float(table[key]))
    mass = None
    if kind == "dynamic":
        if "density" in table:
            V, F = _surface_for_mass(geometry)
            mass = mass_properties_from_mesh(V, F, float(table["density"]), path=path)
        elif "mass" in table:
            m = float(table["mass"])
            if "inertia" in table:
                inertia = np.asarray(table["inertia"], dtype=np.float64)
                inertia = np.diag(inertia) if inertia.shape == (3,) else inertia.reshape(3, 3)
                com = _vector(table, "centre_of_mass", 3, [0, 0, 0], path)
                mass = MassProperties(m, inertia, com)
            else:
                V, F = _surface_for_mass(geometry)
                unit = mass_properties_from_mesh(V, F, 1.0, path=path)
                mass = MassProperties(m, unit.inertia * (m / unit.mass), unit.centre_of_mass)
        else:
            raise InputError(f"dynamic body {name!r} has neither mass nor density", path=path,
                             fix="add mass = <kg> (inertia optional) or density = <kg/m^3>")
    if table.get("convex") is True:      # declared convex: contacts on the hull (rigid_contact)
        if not isinstance(geometry, RigidGeometry):
            raise SceneError(f"body {name!r}: convex = true applies to rigid geometry only", path=path,
                             fix="remove convex, or use a rigid mesh or shape")
        geometry = convex_hull_body(geometry)
    if "quaternion" in table:
        q = _vector(table, "quaternion", 4, None, path)
        q = q / np.max(np.abs(q))          # first: the norm of [1e200, 1e200, 0, 0] overflows, of 1e-200 is 0
        q = q / np.linalg.norm(q)
    else:
        R = rotation_from_rpy(*_vector(table, "rpy", 3, [0, 0, 0], path))
        x, y, z, w = Rotation.from_matrix(R).as_quat()
        q = np.array([w, x, y, z])
    position = _vector(table, "position", 3, [0, 0, 0], path)
    state = RigidBodyState(position, q, _vector(table, "velocity", 3, [0, 0, 0], path),
                           _vector(table, "angular_velocity", 3, [0, 0, 0], path))
    if mass is not None:   # the file gives the mesh origin's position; simulate the centre of mass
        state.position = position + state.rotation @ mass.centre_of_mass
    wrench = Schedule.from_rows(table["wrench"], path=path, what="wrench") if "wrench" in table else None
    motion = Schedule.from_rows(table["motion"], path=path, what="motion") if "motion" in table else None
    try:
        return SceneBody(name, geometry, kind, mass, state, wrench, motion)
    except OptionError as exc:
        raise InputError(exc.defect, path=path, fix=exc.fix) from None


def load_scene(path, *, cache_dir: str | os.PathLike | None = None,
               notes: list[str] | None = None) -> tuple[Scene, dict[str, Any]]:
    """Read a scene TOML file: ``(Scene, settings)`` where settings holds the optional
    ``[simulate]`` table (duration, dt, integrator, ...) as given; its ``face_rule`` ("all" or
    "drake") becomes :attr:`Scene.face_rule`. Lines for the user (a damaged cached asset built
    again) are added to ``notes``."""
    path = Path(path)
    # A scene file that cannot be read as TOML is refused like a build spec or a manifest: a
    # usage error (exit 2), before any work.
    kind = special_file(path)
    if kind is not None:              # a pipe or a device would be read for ever
        raise SceneError(f"is {kind}, not a scene file", path=path, fix="give the scene's .toml file")
    if not path.is_file():
        raise SceneError("scene file not found", path=path, fix="check the path")
    try:
        data = parse_toml(path.read_bytes().decode("utf-8-sig"))     # a byte-order mark is allowed
    except UnicodeDecodeError as exc:
        raise SceneError(f"{not_utf8(exc)}, so not a TOML scene", path=path, fix="save the scene as UTF-8 text") from None
    except (tomllib.TOMLDecodeError, TomlValueError) as exc:
        raise SceneError(f"not valid TOML ({exc})", path=path, fix="fix the TOML syntax") from None
    check_scene_table(data, path=path)      # unknown keys, types, ranges: SceneError (usage)
    bodies = data.get("body", [])
    if not isinstance(bodies, list) or not bodies:
        raise SceneError("the scene has no [[body]] tables", path=path, fix="add at least one [[body]]")
    names = [b.get("name", "body") for b in bodies]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise SceneError(f"{names.count(twice)} bodies are named {twice!r}", path=path,
                         fix="give every [[body]] its own name")
    base = path.parent
    cache = None if cache_dir is None else Path(cache_dir)
    scene_bodies = [body_from_table(b, base_dir=base, path=path, cache_dir=cache, notes=notes) for b in bodies]
    settings = dict(data.get("simulate", {}))
    face_rule = settings.get("face_rule", "all")
    if face_rule not in FACE_RULES:   # a refused value: the CLI exits 2 on OptionError
        raise OptionError(f"[simulate] face_rule = {face_rule!r} is not one of {FACE_RULES}", path=path,
                          fix='write face_rule = "all" (every polygon) or "drake" (Drake\'s 5π/8 rule)')
    try:
        scene = Scene(scene_bodies, _vector(data, "gravity", 3, [0, 0, -9.81], path), name=path.stem,
                      face_rule=face_rule)
    except OptionError as exc:
        raise InputError(exc.defect, path=path, fix=exc.fix) from None
    return scene, settings