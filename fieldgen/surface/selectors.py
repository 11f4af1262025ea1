"""Face selectors and boundary conditions on a surface (D 5.1.1, docs/model.md §2.2).

A selector picks faces of a ``Surface``; ``assign_conditions`` turns the ``bonded``
and ``insulated`` selectors into per-face codes: bonded faces are glued to a rigid
backing (e = 1, ``RIGID``), insulated faces carry no flux (``INSULATED``), every other
face is contacting surface (e = 0, ``FREE``).

Grammar (lengths in the input's units, converted to metres by ``scale``)::

    normal:NX,NY,NZ[:DEG]   outward normal within DEG degrees (default 10) of the direction
    below:AXIS=VALUE        every vertex at AXIS <= VALUE      (AXIS in x|y|z)
    above:AXIS=VALUE        every vertex at AXIS >= VALUE
    box:X0,Y0,Z0,X1,Y1,Z1   every vertex inside the box
    group:NAME              faces of the OBJ group/object NAME
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from fieldgen.errors import OptionError
from fieldgen.meshing.tetmesh import FREE, INSULATED, RIGID
from fieldgen.surface.stage import UNIT_SCALE, Surface

GRAMMAR = ("Write normal:NX,NY,NZ[:DEG], below:AXIS=VALUE, above:AXIS=VALUE, "
           "box:X0,Y0,Z0,X1,Y1,Z1 or group:NAME (AXIS is x, y or z; lengths in the "
           "input's units), e.g. normal:0,0,-1:15 or below:z=2.5")
DEFAULT_ANGLE = 10.0
#: Vertices this fraction of the part's bounding-box diagonal outside a half-space or
#: box still count as inside it.
TOLERANCE = 1e-6
AXES = {"x": 0, "y": 1, "z": 2}


@dataclass(frozen=True)
class Selector:
    """One parsed selector; lengths in metres."""

    text: str                                        # as the user wrote it
    kind: str                                        # normal | below | above | box | group
    direction: tuple[float, float, float] | None = None  # unit vector (normal)
    angle: float | None = None                       # degrees (normal)
    axis: int | None = None                          # 0, 1, 2 (below, above)
    value: float | None = None                       # metres (below, above)
    lower: tuple[float, float, float] | None = None  # metres (box)
    upper: tuple[float, float, float] | None = None  # metres (box)
    name: str | None = None                          # group name (group)


def _numbers(text: str, part: str, count: int) -> list[float]:
    items = part.split(",")
    try:
        values = [float(x) for x in items]
    except ValueError:
        values = []
    if len(values) != count or not all(np.isfinite(values)):
        raise OptionError(f"selector {text!r} needs {count} comma-separated numbers, "
                          f"got {part!r}", fix=GRAMMAR)
    return values


def parse_selector(text: str, scale: float = 1.0) -> Selector:
    """Parse one selector; ``scale`` converts the input's length units to metres."""
    kind, sep, body = text.strip().partition(":")
    kind = kind.strip().lower()
    if not sep or not body.strip():
        raise OptionError(f"selector {text!r} has no kind:argument form", fix=GRAMMAR)
    body = body.strip()
    if kind == "normal":
        direction_text, _, angle_text = body.partition(":")
        d = np.array(_numbers(text, direction_text, 3))
        length = float(np.linalg.norm(d))
        if length == 0.0:
            raise OptionError(f"selector {text!r} has a zero direction", fix=GRAMMAR)
        angle = DEFAULT_ANGLE
        if angle_text:
            angle = _numbers(text, angle_text, 1)[0]
            if not 0.0 <= angle <= 180.0:
                raise OptionError(f"selector {text!r} has angle {angle:g} degrees, "
                                  "outside 0..180", fix=GRAMMAR)
        return Selector(text=text, kind="normal", direction=tuple((d / length).tolist()),
                        angle=float(angle))
    if kind in ("below", "above"):
        axis_text, eq, value_text = body.partition("=")
        axis_text = axis_text.strip().lower()
        if not eq or axis_text not in AXES:
            raise OptionError(f"selector {text!r} needs AXIS=VALUE with AXIS x, y or z",
                              fix=GRAMMAR)
        value = _numbers(text, value_text, 1)[0]
        return Selector(text=text, kind=kind, axis=AXES[axis_text], value=value * scale)
    if kind == "box":
        v = np.array(_numbers(text, body, 6)) * scale
        lower, upper = v[:3], v[3:]
        if (lower > upper).any():
            raise OptionError(f"selector {text!r} has a lower corner above its upper "
                              "corner", fix="Give the box as X0,Y0,Z0,X1,Y1,Z1 with "
                                            "X0<=X1, Y0<=Y1, Z0<=Z1")
        return Selector(text=text, kind="box", lower=tuple(lower.tolist()),
                        upper=tuple(upper.tolist()))
    if kind == "group":
        return Selector(text=text, kind="group", name=body)
    raise OptionError(f"selector {text!r} has unknown kind {kind!r}", fix=GRAMMAR)


def _tolerance(surface: Surface) -> float:
    lo, hi = surface.bounds
    return TOLERANCE * float(np.linalg.norm(hi - lo))


def select_faces(surface: Surface, selector: Selector) -> np.ndarray:
    """Boolean mask (m,) of the faces ``selector`` picks."""
    if selector.kind == "normal":
        cos = surface.face_normals @ np.asarray(selector.direction)
        return cos >= np.cos(np.radians(selector.angle)) - 1e-12
    tri = surface.vertices[surface.faces]  # (m, 3, 3)
    tol = _tolerance(surface)
    if selector.kind == "below":
        return (tri[:, :, selector.axis] <= selector.value + tol).all(axis=1)
    if selector.kind == "above":
        return (tri[:, :, selector.axis] >= selector.value - tol).all(axis=1)
    if selector.kind == "box":
        lower = np.asarray(selector.lower) - tol
        upper = np.asarray(selector.upper) + tol
        return ((tri >= lower) & (tri <= upper)).all(axis=(1, 2))
    if selector.kind == "group":
        if selector.name not in surface.group_names:
            return np.zeros(len(surface.faces), dtype=bool)
        return surface.face_groups == surface.group_names.index(selector.name)
    raise OptionError(f"selector {selector.text!r} has unknown kind {selector.kind!r}",
                      fix=GRAMMAR)


def _what_is_there(surface: Surface, selector: Selector) -> str:
    """What the surface offers instead, in the input's units (for a selector matching nothing)."""
    scale = UNIT_SCALE[surface.units]
    lo, hi = surface.bounds / scale
    if selector.kind == "group":
        if surface.group_names:
            return "the groups in the file are " + ", ".join(surface.group_names)
        return "the file has no groups (only OBJ g/o names and scene mesh names count)"
    if selector.kind == "normal":
        cos = np.clip(surface.face_normals @ np.asarray(selector.direction), -1.0, 1.0)
        nearest = float(np.degrees(np.arccos(cos.max())))
        return f"the closest face normal is {nearest:.3g} degrees away"
    span = ", ".join(f"{a} {x:.6g}..{y:.6g}" for a, x, y in zip("xyz", lo, hi))
    return f"the part spans {span} {surface.units}"


def assign_conditions(surface: Surface, bonded: Sequence[Selector] = (),
                      insulated: Sequence[Selector] = ()) -> np.ndarray:
    """Per-face boundary condition codes (m,) int64: FREE, RIGID (bonded), INSULATED.

    OptionError for a selector that matches no face, a face both bonded and insulated,
    or no FREE face left (nothing could touch the part).
    """
    masks = {}
    for role, selectors in (("bonded", bonded), ("insulated", insulated)):
        mask = np.zeros(len(surface.faces), dtype=bool)
        for selector in selectors:
            picked = select_faces(surface, selector)
            if not picked.any():
                raise OptionError(
                    f"--{role} selector {selector.text!r} matches no face; "
                    f"{_what_is_there(surface, selector)}", path=surface.path,
                    fix="Change the selector so it picks at least one face")
            mask |= picked
        masks[role] = mask
    both = masks["bonded"] & masks["insulated"]
    if both.any():
        raise OptionError(
            f"{int(both.sum()):,} faces are both bonded and insulated",
            path=surface.path, fix="Make the bonded and insulated selectors pick disjoint "
                                   "faces")
    codes = np.full(len(surface.faces), FREE, dtype=np.int64)
    codes[masks["bonded"]] = RIGID
    codes[masks["insulated"]] = INSULATED
    if not (codes == FREE).any():
        raise OptionError(
            f"no free face is left: {int(masks['bonded'].sum()):,} faces bonded and "
            f"{int(masks['insulated'].sum()):,} insulated of {len(codes):,}, so nothing "
            "can touch the part", path=surface.path,
            fix="Bond or insulate fewer faces so some of the surface can make contact")
    return codes
