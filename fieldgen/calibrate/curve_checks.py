"""Checks of a loading curve against what a calibration can fit (docs/cli.md, "fieldgen
calibrate"): forces no indentation has, depths an indenter cannot be pushed to, depths the part
cannot take. Each raises InputError for a data file (exit 1) or OptionError for ``--target``
and the indenter's own size (exit 2), before any meshing."""

from __future__ import annotations

import numpy as np

from fieldgen.errors import InputError, OptionError
from fieldgen.io.surface_readers import read_triangles
from fieldgen.units import LENGTH_UNITS


#: Forces outside this range (N) are no indentation a contact model is fitted to: a unit slip
#: (--units) or a typo, not a measurement.
FORCE_RANGE = (1e-9, 1e9)


def check_force_range(curve, path) -> None:
    """Refuse forces outside :data:`FORCE_RANGE` (InputError for a data file, exit 1; OptionError
    for --target, exit 2)."""
    forces = [f for f in curve.force if f > 0]
    low, high = FORCE_RANGE
    bad = next((f for f in forces if not low <= f <= high), None)
    if bad is not None:
        error = InputError if path is not None else OptionError
        raise error(f"a force of {bad:g} N is outside {low:g} .. {high:g} N, no indentation a contact model "
                    "is fitted to", path=path, fix="check the force unit (--units LENGTH,FORCE, e.g. mm,N)")


#: The deepest a paraboloid indenter is pushed, in its radii: its mesh has rings R/100 apart out to
#: the contact's rim, about 76,000 vertices at one radius deep and 10 times more per 10 times deeper
#: (at 1e6 radii a fit that never ends).
MAX_PARABOLOID_DEPTH = 10.0


def check_sphere_depth(indenter: str, length_scale: float, curve) -> None:
    """Refuse (exit 2) a sphere indenter pushed deeper than its radius: past the equator the
    contact is no longer a cap, and its cap mesh would need spacings of nothing; and a paraboloid
    pushed deeper than :data:`MAX_PARABOLOID_DEPTH` radii, whose mesh would not end."""
    kind, _, arg = str(indenter).partition(":")
    kind = kind.strip().lower()
    if kind not in ("sphere", "paraboloid"):
        return
    try:
        radius = float(arg) * length_scale
    except ValueError:
        return                        # check_indenter_text has refused it
    deepest = float(max(curve.depth))
    if kind == "sphere" and deepest > radius:
        raise OptionError(f"--indenter {indenter}: the deepest depth, {deepest:g} m, is more than the sphere's "
                          f"radius {radius:g} m (past its equator)",
                          fix="use a larger sphere (or a paraboloid or cylinder), or drop the deeper rows")
    if kind == "paraboloid" and deepest > MAX_PARABOLOID_DEPTH * radius:
        raise OptionError(f"--indenter {indenter}: the deepest depth, {deepest:g} m, is more than "
                          f"{MAX_PARABOLOID_DEPTH:g} times the paraboloid's radius {radius:g} m: its mesh, fine "
                          f"enough at the tip, would have about {76000 * deepest / radius:.2g} vertices",
                          fix="check the length unit of --units, or use a larger radius, a cylinder or a mesh "
                              "indenter")


def check_depth_in_part(curve, path, indenter: str, part: tuple[str, str, list]) -> None:
    """Refuse depths no indenter reaches in this part (InputError for a data file, exit 1;
    OptionError for --target, exit 2): deeper than the part measures across (its bounding-box
    diagonal: the indenter has gone through it, and a paraboloid's mesh for such a reach would
    not fit in memory); for a plane, deeper than the part is thick along the push (past its far
    side the plane touches nothing, which the fit would report as "does not reach the part; check
    --at"). A sphere, punch or mesh pushed through the back still touches the walls of the hole
    it made: a pass-through, warned about. ``part``: the input mesh, its length unit, --direction."""
    input_path, mesh_units, direction = part
    push = np.asarray(direction, dtype=float)
    vertices = read_triangles(input_path, units=mesh_units).vertices * LENGTH_UNITS[mesh_units]
    if not (len(vertices) and np.abs(push).max() > 0):
        return                         # the calibration refuses an empty mesh or a zero direction
    heights = vertices @ (push / np.linalg.norm(push))
    across = float(np.linalg.norm(vertices.max(axis=0) - vertices.min(axis=0)))
    limits = [(across, f"measures across ({across:g} m, its bounding-box diagonal): the indenter would "
                       "have gone through it")]
    if str(indenter).strip().lower() == "plane":
        thickness = float(heights.max() - heights.min())
        limits.append((thickness, f"is thick along --direction {','.join(f'{x:g}' for x in direction)} "
                                  f"({thickness:g} m): the plane would come out of its far side"))
    deepest = float(max(curve.depth))
    for limit, what in sorted(limits):
        if deepest > limit:
            error = InputError if path is not None else OptionError
            raise error(f"the deepest depth, {deepest:g} m, is more than {input_path} {what}", path=path,
                        fix="check the length unit of --units (LENGTH,FORCE) and give depths from first "
                            "contact, less than the part's thickness")
