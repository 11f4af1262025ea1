"""`fieldgen contact`: the contact surface and wrench between two bodies at given poses."""

from __future__ import annotations

import math
import statistics
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import click
import numpy as np

from fieldgen.errors import InputError, OptionError
from fieldgen.io.surface_readers import STEP_SUFFIXES, size_warnings
from fieldgen.options import MAX_DISSIPATION, check_friction, check_modulus_bounds, check_velocity
from fieldgen.paths import check_distinct, special_file
from fieldgen.progress import Progress
from fieldgen.runtime.contact.pose import Pose, SpatialVelocity, as_matrix, rigid_problem
from fieldgen.units import LENGTH_UNITS
from fieldgen.validate import require_valid

from .common import (EXIT_FAILED, EXIT_USAGE, check_outputs, check_suffix, echo_report, fail, has_non_finite,
                     json_option, print_json, quiet_option, reported_errors)

#: The most timed queries ``--repeat`` runs: a median of more tells nothing new, and a count
#: typed with too many digits would run for days (work that would not end is refused, §1.4).
MAX_REPEAT = 10_000


def _numbers(text: str, names: tuple[str, ...], what: str) -> list[float]:
    parts = [p.strip() for p in str(text).split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != len(names) or not all(math.isfinite(v) for v in values):
        raise click.BadParameter(f"{text!r} is not {len(names)} finite comma-separated numbers "
                                 f"{','.join(names)} ({what})")
    return values


def parse_pose(ctx, param, text):
    """``x,y,z,roll,pitch,yaw`` (m, degrees about fixed X, Y, Z) -> Pose."""
    if text is None:
        return Pose()
    pose = Pose.from_xyz_rpy(*_numbers(text, ("x", "y", "z", "roll", "pitch", "yaw"), "m and degrees"))
    problem = rigid_problem(as_matrix(pose))
    if problem is not None:
        raise click.BadParameter(f"{text!r} {problem}. Give x,y,z in m near the origin")
    return pose


def parse_velocity(ctx, param, text):
    """``vx,vy,vz,wx,wy,wz`` (m/s of the body origin, rad/s; world frame) -> SpatialVelocity."""
    if text is None:
        return SpatialVelocity()
    vx, vy, vz, wx, wy, wz = _numbers(text, ("vx", "vy", "vz", "wx", "wy", "wz"), "m/s and rad/s")
    with _refused():
        check_velocity((vx, vy, vz), (wx, wy, wz), _flag(param))
    return SpatialVelocity(linear=[vx, vy, vz], angular=[wx, wy, wz])


def _flag(param, default: str = "--velocity") -> str:
    """The flag of a click parameter (``default`` when called without one)."""
    return default if param is None else f"--{param.name.replace('_', '-')}"


@contextmanager
def _refused() -> Iterator[None]:
    """An OptionError from the options' bounds (fieldgen/options.py) as click's usage error (exit 2)."""
    try:
        yield
    except OptionError as error:
        raise click.BadParameter(str(error)) from None


def _modulus(ctx, param, value):
    if value is not None and not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"{value} is not a positive number of pascals (e.g. 1e5)")
    with _refused():
        check_modulus_bounds(value, flag=_flag(param))
    return value


def _friction(ctx, param, value):
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"{value} is not a friction coefficient (a number >= 0, e.g. 0.5)")
    with _refused():
        check_friction(value, _flag(param))
    return value




def _check_body(path: str, modulus: float | None, units: str | None, side: str) -> None:
    """Refuse (exit 2) the flags that do not fit this body's kind, before anything is loaded."""
    flag = f"--modulus-{side}"
    suffix = Path(path).suffix.lower()
    if modulus is not None and suffix != ".vtk":
        what = "a fieldgen asset carries its own pressure field" if suffix == ".vtu" else "a rigid surface has none"
        fail(f"{path}: {flag} sets the modulus of a legacy .vtk tet mesh; {what}. Drop {flag}.", EXIT_USAGE)
    if suffix == ".vtk" and modulus is None:
        fail(f"{path}: a legacy .vtk tet mesh has no pressure field of its own; Drake's field "
             f"p0 = E·d/max d needs the modulus E. Pass {flag} E in Pa (e.g. {flag} 1e5).", EXIT_USAGE)
    if units is not None and suffix in (".vtu", ".vtk"):
        fail(f"{path}: --units-{side} applies to rigid surface meshes; assets and .vtk tet meshes are in "
             f"metres. Drop --units-{side}.", EXIT_USAGE)
    if units is not None and suffix in STEP_SUFFIXES:
        fail(f"{path}: --units-{side} applies to surface meshes, which carry no unit; a STEP file names its "
             f"own and is read true to size. Drop --units-{side}.", EXIT_USAGE)


def _load(path: str, modulus: float | None, units: str | None, mu: float | None = None):
    """The body at ``path`` (flags checked by :func:`_check_body`), with friction ``mu`` if given."""
    from fieldgen.runtime.contact.geometries import load_body  # lazy: numba kernels, not for other commands

    suffix = Path(path).suffix.lower()
    kind = special_file(path)
    if kind is not None:             # a bad input file (exit 1), as a missing one; a pipe is never read
        raise InputError(f"is {kind}, not a file", path=path, fix="give the asset or mesh file")
    if suffix == ".vtu":
        require_valid(path, use="a contact query")      # its metadata's ranges, before the field is used
    body = (load_body(path, modulus=modulus) if suffix == ".vtk" else load_body(path) if suffix == ".vtu"
            else load_body(path, units=units or "m"))
    if mu is not None:            # static = dynamic; fieldgen's contact uses the dynamic one (§4.3)
        body.mu_static = body.mu_dynamic = float(mu)
    return body


def _size_notes(path: str, body, units: str | None, side: str) -> tuple[str, ...]:
    """The size warning of a mesh read here (a rigid surface or a .vtk tet mesh; an asset's size
    was checked when it was built): docs/model.md §1.4."""
    suffix = Path(path).suffix.lower()
    if suffix == ".vtu":
        return ()
    if suffix == ".vtk":
        return size_warnings(body.points, "m", what=path, fix="a .vtk tet mesh is read in metres: export it so")
    fix = ("a STEP file names its own unit: check its export" if suffix in STEP_SUFFIXES
           else f"check --units-{side}")
    return size_warnings(body.vertices, units or "m", what=path, fix=fix)


def check_finite(wrench) -> None:
    """Exit 1 when the query's wrench overflowed (a NaN or infinite force, torque or power, which
    ``--json`` would print as null), naming what overflowed and the fix."""
    parts = (wrench.force, wrench.torque, wrench.force_on_a, wrench.torque_on_a, wrench.elastic_force,
             [wrench.dissipated_power])
    if not has_non_finite([_vector(part) for part in parts]):
        return
    if not has_non_finite(_vector(wrench.elastic_force)):
        cause = (f"the damping force, pressure x dissipation ({float(wrench.dissipation):g} s/m) x the normal "
                 "speed of --velocity-a/--velocity-b, overflowed")
        fix = (f"give the velocities in m/s, and bodies whose dissipation is at most {MAX_DISSIPATION:g} s/m "
               "(fieldgen build --dissipation, --expansion-rate)")
    else:
        cause = "the elastic force, the pressure fields' integral over the contact surface, overflowed"
        fix = "give --modulus-a/-b in Pa, or rebuild the assets with a modulus in Pa (fieldgen build --modulus)"
    fail(f"the contact force on B is not finite ({', '.join(f'{v:g}' for v in _vector(wrench.force))} N): "
         f"{cause}. {fix[:1].upper()}{fix[1:]}.", EXIT_FAILED)


def _vector(values) -> list[float]:
    return [float(v) for v in values]


def run_contact(body_a, pose_a, body_b, pose_b, velocity_a, velocity_b, representation: str, repeat: int,
                face_rule: str = "all"):
    """One warm-up query (its warnings kept), then ``repeat`` timed ones: (surface, wrench,
    median seconds, warning messages, (faces, force on B) under the other face rule)."""
    # lazy: the contact query compiles numba kernels, which other commands do not need
    from fieldgen.runtime.contact.surface import FACE_RULES
    from fieldgen.runtime.contact.wrench import contact

    def query():
        return contact(body_a, pose_a, body_b, pose_b, V_WA=velocity_a, V_WB=velocity_b,
                       representation=representation, face_rule=face_rule)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        surface, wrench = query()
    times = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(repeat):
            start = time.perf_counter()
            surface, wrench = query()
            times.append(time.perf_counter() - start)
        other_rule = next(rule for rule in FACE_RULES if rule != face_rule)
        _, other = contact(body_a, pose_a, body_b, pose_b, V_WA=velocity_a, V_WB=velocity_b,
                           representation=representation, face_rule=other_rule)
    messages = list(dict.fromkeys(str(w.message) for w in caught))
    return surface, wrench, statistics.median(times), messages, other


def _kind(body) -> str:
    """The report's name of a body's kind (docs/cli.md): "CompliantBody" or "RigidBody", the
    names the report has always used for a compliant and a rigid contact geometry."""
    from fieldgen.runtime.contact.geometries import RigidGeometry  # lazy: numba kernels, not for other commands

    return "RigidBody" if isinstance(body, RigidGeometry) else "CompliantBody"


def report(a: str, b: str, body_a, body_b, surface, wrench, seconds: float, messages, output,
           face_rule: str = "all", other=None) -> dict:
    """The ``--json`` report (force/torque on B, world frame, torque about the world origin).
    ``faces`` are kept under ``face_rule``; ``faces_other_rule`` and ``force_other_rule`` are the
    face count and the force on B under the other rule (``all`` <-> ``drake``), from the
    wrench ``other``, so a user sees when the choice matters."""
    empty = surface.n_faces == 0
    return {
        "a": a, "b": b,
        "kind_a": _kind(body_a), "kind_b": _kind(body_b),
        "representation": surface.representation,
        "force": _vector(wrench.force), "torque": _vector(wrench.torque),
        "force_on_a": _vector(wrench.force_on_a), "torque_on_a": _vector(wrench.torque_on_a),
        "torque_about_centroid": _vector(wrench.torque_about_centroid) if not empty else [0.0, 0.0, 0.0],
        "centroid": None if empty else _vector(wrench.centroid),
        "elastic_force": _vector(wrench.elastic_force),
        "dissipated_power": float(wrench.dissipated_power),
        "area": float(wrench.area), "faces": int(wrench.n_faces),
        "face_rule": face_rule,
        "faces_other_rule": None if other is None else int(other.n_faces),
        "force_other_rule": None if other is None else _vector(other.force),
        "max_pressure": float(np.max(surface.vertex_pressure)) if not empty else 0.0,
        "dissipation": float(wrench.dissipation), "friction": float(wrench.friction),
        "query_seconds": float(seconds),
        "warnings": list(messages),
        "output": None if output is None else str(output),
    }


def summary_text(data: dict) -> str:
    def vec(v):
        return "(" + ", ".join(f"{x:.6g}" for x in v) + ")"

    lines = [f"contact {data['a']} ({data['kind_a']}) / {data['b']} ({data['kind_b']}), "
             f"{data['representation']} representation, face rule {data.get('face_rule', 'all')}"]
    if data["faces"] == 0:
        lines.append("  no contact: the bodies do not overlap (zero force)")
    lines += [
        f"  {'faces':<16}{data['faces']}" + (
            "" if data.get("faces_other_rule") is None else
            f" ({data['faces_other_rule']} under face rule {'all' if data.get('face_rule') == 'drake' else 'drake'})"),
        f"  {'area':<16}{data['area']:.6g} m^2",
        f"  {'max pressure':<16}{data['max_pressure']:.6g} Pa",
        f"  {'force on B':<16}{vec(data['force'])} N",
        f"  {'torque on B':<16}{vec(data['torque'])} N·m about the world origin",
        f"  {'query':<16}{1e3 * data['query_seconds']:.3f} ms (median)",
    ]
    if data["output"]:
        lines.append(f"  {'wrote':<16}{data['output']}")
    if data.get("paraview"):
        lines.append(f"  {'wrote':<16}{data['paraview']} (ParaView script) and {data['paraview_bodies']}")
    return "\n".join(lines)


def swallowed_message(inside: tuple[str, int, int], a: str, b: str) -> str:
    """The warning for a compliant body (or some of its pieces) lying wholly inside the rigid other."""
    side, count, pieces = inside
    path, rigid = (a, b) if side == "a" else (b, a)
    whole = count == pieces
    what = path if whole else f"{count} of the {pieces} separate pieces of {path}"
    return (f"{what} {'lies' if whole else 'lie'} wholly inside the rigid {rigid} at these poses, so no surface "
            f"of {rigid} crosses {'it' if whole else 'them'} and the force there is zero, though the bodies "
            "overlap; check the poses (--pose-a/--pose-b) and the rigid mesh's --units")


@click.command("contact")
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@click.option("--pose-a", callback=parse_pose, metavar="P", help="Pose of A: x,y,z,roll,pitch,yaw (m, degrees; "
              "fixed X-Y-Z axes). Default: identity.")
@click.option("--pose-b", callback=parse_pose, metavar="P", help="Pose of B, as --pose-a.")
@click.option("--velocity-a", callback=parse_velocity, metavar="V", help="Velocity of A: vx,vy,vz,wx,wy,wz "
              "(m/s of A's origin, rad/s; world frame; slower than light). Default: at rest.")
@click.option("--velocity-b", callback=parse_velocity, metavar="V", help="Velocity of B, as --velocity-a.")
@click.option("--representation", type=click.Choice(["polygon", "triangle"]), default="polygon", show_default=True,
              help="One polygon per element pair, or centroid-fan triangles.")
@click.option("--face-rule", type=click.Choice(["all", "drake"]), default="all", show_default=True,
              help="all: keep every polygon of the equal-pressure surface; drake: Drake's rule (drop "
                   "polygons whose normal is more than 5π/8 from the pressure gradients), to reproduce "
                   "Drake's contact surface. See docs/model.md §3.5.")
@click.option("--modulus-a", type=float, callback=_modulus, metavar="E",
              help="Pa, 1 to 1e13 as build's --modulus; required when A is a legacy .vtk tet mesh "
                   "(Drake's field E·d/max d).")
@click.option("--modulus-b", type=float, callback=_modulus, metavar="E", help="Pa; as --modulus-a, for B.")
@click.option("--units-a", type=click.Choice(list(LENGTH_UNITS)), help="Units of A when it is a rigid surface mesh "
              "(default m).")
@click.option("--units-b", type=click.Choice(list(LENGTH_UNITS)), help="Units of B, as --units-a.")
@click.option("--mu-a", type=float, callback=_friction, metavar="MU",
              help="Friction coefficient of A, 0 to 10 (static = dynamic). A rigid surface or .vtk tet mesh has none "
                   "(0, so the pair has no friction) unless given; for an asset it replaces the asset's own.")
@click.option("--mu-b", type=float, callback=_friction, metavar="MU", help="As --mu-a, for B.")
@click.option("--repeat", type=click.IntRange(min=1, max=MAX_REPEAT), default=1, show_default=True,
              help=f"Time N queries after one warm-up; report the median (at most {MAX_REPEAT:,}).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), metavar="SURFACE",
              help="Write the contact surface (.vtp or .vtu) with pressure, normals and tractions.")
@click.option("--paraview", "paraview", type=click.Path(dir_okay=False), metavar="FILE.py",
              help="With -o: write a ParaView script showing the surface coloured by pressure and the "
                   "bodies (FILE_bodies.vtp) see-through; pvpython FILE.py --screenshot out.png for a picture.")
@json_option
@quiet_option
def contact_command(a, b, pose_a, pose_b, velocity_a, velocity_b, representation, face_rule, modulus_a, modulus_b,
                    units_a, units_b, mu_a, mu_b, repeat, output, paraview, as_json, quiet):
    """Contact surface, force and torque between A and B.

    A and B are fieldgen assets (.vtu), legacy .vtk tet meshes (give --modulus-a/-b) or closed rigid
    surface meshes (STL, OBJ, PLY, OFF, GLB, or STEP with the extra 'step'; metres unless --units-a/-b, STEP
    true to size). Force and torque act on B (world frame, torque
    about the world origin); A receives the opposite.

    Example: fieldgen contact pad.vtu box.stl --pose-b 0,0,0.004,0,0,0 --json
    """
    if output is not None and Path(output).suffix.lower() not in (".vtp", ".vtu"):
        fail(f"{output}: unknown contact-surface format. Name it SURFACE.vtp or SURFACE.vtu.", EXIT_USAGE)
    check_suffix(paraview, "--paraview", ".py", "the ParaView script")
    if paraview is not None and output is None:
        fail(f"--paraview {paraview}: the script shows the contact surface file, so it needs -o SURFACE.vtp "
             "as well.", EXIT_USAGE)
    progress = Progress(enabled=not quiet)
    from fieldgen.runtime.contact.kernels import announce_compiling  # lazy: numba, not for other commands

    click.get_current_context().call_on_close(announce_compiling(progress))   # a cold numba cache: say why
    _check_body(a, modulus_a, units_a, "a")
    _check_body(b, modulus_b, units_b, "b")
    with reported_errors():
        check_distinct({"-o": output, "--paraview": paraview,
                        "the --paraview script's bodies file": paraview and Path(paraview).with_name(
                            Path(paraview).stem + "_bodies.vtp")},
                       {"A": a, "B": b})
        check_outputs(output, paraview)
        with progress.stage(f"load {a}"):
            body_a = _load(a, modulus_a, units_a, mu_a)
        with progress.stage(f"load {b}"):
            body_b = _load(b, modulus_b, units_b, mu_b)
    sizes = [*_size_notes(a, body_a, units_a, "a"), *_size_notes(b, body_b, units_b, "b")]
    from fieldgen.runtime.contact.geometries import RigidGeometry  # lazy: numba kernels, not for other commands

    if isinstance(body_a, RigidGeometry) and isinstance(body_b, RigidGeometry):
        fail(f"{a} and {b} are both rigid surfaces: pressure-field contact needs at least one compliant body. "
             "Pass a fieldgen asset (.vtu) or a .vtk tet mesh with --modulus as A or B.", EXIT_USAGE)
    with reported_errors():
        with progress.stage("contact"):
            surface, wrench, seconds, messages, other = run_contact(
                body_a, pose_a, body_b, pose_b, velocity_a, velocity_b, representation, repeat, face_rule)
        check_finite(wrench)
        messages = sizes + messages
        if output is not None:
            from fieldgen.runtime.contact.export import write_contact_surface  # lazy: only with -o

            with progress.stage("write"):
                write_contact_surface(output, surface, body_a, body_b, V_WA=velocity_a, V_WB=velocity_b)
        if paraview is not None:
            from fieldgen.runtime.scene.outputs import write_query_view  # lazy: only with --paraview

            with progress.stage("ParaView script"):
                written = write_query_view(paraview, output, surface, [body_a, body_b],
                                           [as_matrix(pose_a), as_matrix(pose_b)])
    from fieldgen.runtime.contact.wrench import friction_lost_to, swallowed  # lazy: numba kernels, as above

    inside = swallowed(body_a, pose_a, body_b, pose_b) if surface.n_faces == 0 else None
    if inside is not None:
        messages.append(swallowed_message(inside, a, b))
    side = friction_lost_to(body_a, body_b)
    if side is not None and any(float(x) != 0.0 for v in (velocity_a, velocity_b) for x in v.vector):
        path, mu = (a, mu_a) if side == "a" else (b, mu_b)
        why = ("given as 0" if mu is not None else "an asset's own" if Path(path).suffix.lower() == ".vtu"
               else "a rigid surface or .vtk mesh carries none")
        messages.append(f"{path} has friction coefficient 0 ({why}), so the pair's is 0 (docs/model.md §4.3) "
                        f"and the sliding bodies feel no friction; give --mu-{side} MU")
    for message in messages:
        click.echo(f"warning: {message}", err=True)
    data = report(a, b, body_a, body_b, surface, wrench, seconds, messages, output, face_rule, other)
    if paraview is not None:
        data.update(written)
    if as_json:
        print_json(data)
    elif not quiet:
        echo_report(summary_text(data))
