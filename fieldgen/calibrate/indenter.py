"""Rigid indenters pressed into a compliant part, and the force–depth curve the runtime predicts.

An indentation test: a rigid object is brought along a direction ``u`` until it first touches
the part, then pushed a depth ``d`` further; the measured force is the reaction along ``−u``.
Here the part is a :class:`~fieldgen.runtime.contact.geometries.CompliantGeometry` (a built asset) and the force
is the runtime's rigid–compliant contact wrench (D 5.0.2; docs/model.md 3.2, 4.5), so the curve is exactly
what a simulator using the asset would feel.

Indenters (:func:`parse_indenter`), each a closed outward-wound triangle mesh in a local frame
whose tip is the origin and which is pushed along local −z (its body lies in z >= 0):

- ``sphere:R`` — a sphere of radius R with a vertex at the tip; rings of vertices lie exactly on
  the sphere, closely spaced (R/100) over the cap that the depths of interest reach and
  coarse beyond, so the facets' sag (spacing²/(8R)) is negligible against the depth;
- ``paraboloid:R`` — ``z = r²/(2R)``, the surface Hertz's formula assumes (D App. B);
- ``cylinder:R`` — a flat punch of radius R: a regular polygon whose area equals πR² exactly;
- ``plane`` — a flat box much wider than the part;
- any other text is a path of a closed surface mesh file (``RigidGeometry.from_mesh``), kept in
  the orientation it has in the file, its tip the vertex furthest along ``u``.

The first contact is found with the runtime itself: stepping the indenter along ``u`` until the
contact surface is not empty, then bisecting to 1e-12 of the part's size.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from fieldgen.errors import InputError, OptionError
from fieldgen.meshing.tetmesh import boundary_faces_of
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry, check_closed_surface
from fieldgen.runtime.contact.surface import compute_contact_surface
from fieldgen.runtime.contact.wrench import contact

KINDS = ("sphere", "paraboloid", "cylinder", "plane")
GRAMMAR = ("give sphere:R, paraboloid:R, cylinder:R (a flat punch), plane, or the path of a closed "
           "surface mesh file (STL, OBJ, PLY, OFF, GLB; STEP with the extra 'step')")
#: Relative precision of the first-contact position (fraction of the part's bounding-box diagonal).
TOUCH_TOLERANCE = 1e-12
#: Steps per part diagonal when searching for the first contact.
TOUCH_STEPS = 256
#: A sphere's rings are spaced this fraction of their arc length from the tip (sphere_mesh).
SAG_GRADE = 0.04
#: The radii (m) a ``kind:R`` indenter may have: 1 nm (below an AFM tip's, about 1e-8 m) to a
#: kilometre (the largest part, ``surface_readers.SANE_SIZE``); past them the indenter's mesh and
#: its first-contact search overflow or lose their precision (a RuntimeWarning, then "never touches").
RADII = (1e-9, 1e3)


@dataclass
class Indenter:
    """A rigid indenter in its local frame: tip at the origin, pushed along local −z (``aligned``)
    or, for a mesh file, in the file's own orientation with the tip at the origin (not aligned)."""

    kind: str                    #: sphere | paraboloid | cylinder | plane | mesh
    vertices: np.ndarray         #: (n, 3) m, local frame
    faces: np.ndarray            #: (f, 3) outward wound
    radius: float | None = None  #: m (sphere, paraboloid, cylinder)
    source: str | None = None    #: mesh file path
    aligned: bool = True         #: rotate local −z onto the push direction

    def describe(self) -> dict:
        out = {"kind": self.kind, "faces": int(len(self.faces))}
        if self.radius is not None:
            out["radius"] = float(self.radius)
        if self.source is not None:
            out["file"] = os.path.basename(self.source)
        return out


# ----------------------------------------------------------------------------- meshes

def _ring_strip(ring_a: np.ndarray, ring_b: np.ndarray, angles_a: np.ndarray, angles_b: np.ndarray) -> list:
    """Triangles joining two closed rings of vertex ids whose angles increase from 0 (counter-
    clockwise seen from +z), walking both rings by angle. Every strip is wound the same way, so
    the closed surface is consistent; ``revolved_mesh`` flips it outward at the end if needed."""
    faces = []
    na, nb = len(ring_a), len(ring_b)
    i = j = 0
    while i < na or j < nb:
        next_a = angles_a[i + 1] if i + 1 < na else 2 * math.pi + angles_a[0]
        next_b = angles_b[j + 1] if j + 1 < nb else 2 * math.pi + angles_b[0]
        if j >= nb or (i < na and next_a <= next_b):
            faces.append((ring_a[i % na], ring_a[(i + 1) % na], ring_b[j % nb]))
            i += 1
        else:
            faces.append((ring_a[i % na], ring_b[(j + 1) % nb], ring_b[j % nb]))
            j += 1
    return faces


def revolved_mesh(profile_r: np.ndarray, profile_z: np.ndarray, spacing) -> tuple[np.ndarray, np.ndarray]:
    """Closed surface of revolution about z through the profile points (r_i, z_i), i = 0 the tip on
    the axis (r = 0) and the last point on the axis too; ring i has about 2π r_i / spacing_i
    vertices (at least 8). Faces are wound outward."""
    r = np.asarray(profile_r, dtype=np.float64)
    z = np.asarray(profile_z, dtype=np.float64)
    h = np.broadcast_to(np.asarray(spacing, dtype=np.float64), r.shape)
    vertices = [np.array([[0.0, 0.0, z[0]]])]
    rings, angles = [np.array([0])], [np.array([0.0])]
    count = 1
    for i in range(1, len(r) - 1):
        m = max(8, int(math.ceil(2 * math.pi * r[i] / h[i])))
        a = 2 * math.pi * np.arange(m) / m
        vertices.append(np.column_stack([r[i] * np.cos(a), r[i] * np.sin(a), np.full(m, z[i])]))
        rings.append(np.arange(count, count + m))
        angles.append(a)
        count += m
    vertices.append(np.array([[0.0, 0.0, z[-1]]]))
    rings.append(np.array([count]))
    angles.append(np.array([0.0]))
    faces: list = []
    for k in range(len(rings) - 1):
        ra, rb, aa, ab = rings[k], rings[k + 1], angles[k], angles[k + 1]
        if len(ra) == 1:
            faces += [(ra[0], rb[(j + 1) % len(rb)], rb[j]) for j in range(len(rb))]
        elif len(rb) == 1:
            faces += [(ra[i], ra[(i + 1) % len(ra)], rb[0]) for i in range(len(ra))]
        else:
            faces += _ring_strip(ra, rb, aa, ab)
    V = np.vstack(vertices)
    F = np.array(faces, dtype=np.int64)
    # Orient outward: the signed volume must be positive.
    tri = V[F]
    volume = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6.0
    if volume < 0:
        F = F[:, ::-1].copy()
    return V, F


def _graded_arcs(fine_length: float, total: float, fine: float, coarse: float) -> np.ndarray:
    """Arc-length stations: ``fine`` spacing up to ``fine_length``, growing by 1.3x to ``coarse``."""
    s = list(np.linspace(0.0, fine_length, max(2, int(math.ceil(fine_length / fine)) + 1)))
    step = fine
    while s[-1] < total:
        step = min(coarse, step * 1.3)
        s.append(min(total, s[-1] + step))
    return np.array(s)


def _cap_arcs(cap: float, total: float, tip: float, fine: float, coarse: float) -> np.ndarray:
    """Arc-length stations from the tip: ``tip`` spacing, then growing as ``SAG_GRADE`` times the
    arc length (so a facet's sag stays a fixed fraction of the depth at which the contact's rim
    reaches it) but at most ``fine``, up to ``cap``, then by 1.3x to ``coarse``."""
    s = [0.0]
    while s[-1] < cap:
        s.append(s[-1] + min(max(tip, SAG_GRADE * s[-1]), fine))
    step = s[-1] - s[-2]
    while s[-1] < total:
        step = min(coarse, max(step, tip) * 1.3)
        s.append(min(total, s[-1] + step))
    return np.array(s)


def sphere_mesh(radius: float, reach: float, spacing: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A sphere of ``radius`` with its tip vertex at the origin and centre at (0, 0, R): rings on
    the sphere, over the cap of depth ``reach`` spaced ``SAG_GRADE`` times their arc length from
    the tip (at least R/2000, at most R/100 or 1/8 of the contact radius; or every ``spacing`` if
    given), coarser beyond. The facets are
    inscribed: a facet of size h at radius r sits about h²/(8R) inside the sphere, which reads as
    that much less depth; with the graded rings that is about ``SAG_GRADE²/4·r²/(2R)``, 0.04% of
    the depth at which the contact's rim reaches r, at every depth (docs/model.md §2.3)."""
    R = float(radius)
    reach = min(max(float(reach), 1e-6 * R), 2 * R)
    cap = math.acos(max(-1.0, 1.0 - reach / R)) * R            # arc length of the fine cap
    if spacing:
        s = _graded_arcs(min(cap * 1.1, math.pi * R), math.pi * R, spacing, math.pi * R / 24)
    else:
        fine = min(R / 100.0, max(math.sqrt(max(reach * (2 * R - reach), 0.0)), 1e-9 * R) / 8.0)
        s = _cap_arcs(min(cap * 1.1, math.pi * R), math.pi * R, min(R / 2000.0, fine), fine, math.pi * R / 24)
    phi = s / R
    profile_r = R * np.sin(phi)
    profile_r[-1] = 0.0
    profile_z = 2 * R * np.sin(phi / 2) ** 2
    h = np.gradient(s)
    return revolved_mesh(profile_r, profile_z, h)


def paraboloid_mesh(radius: float, reach: float, spacing: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``z = r²/(2R)`` from the tip at the origin out to depth ``1.2·reach``, closed by a flat top."""
    R = float(radius)
    top = 1.2 * max(float(reach), 1e-6 * R)
    r_max = math.sqrt(2 * R * top)
    fine = spacing or min(R / 100.0, r_max / 10.0)
    r = np.linspace(0.0, r_max, max(3, int(math.ceil(r_max / fine)) + 1))
    z = r * r / (2 * R)
    r = np.append(r, 0.0)
    z = np.append(z, top)
    h = np.append(np.full(len(r) - 1, fine), fine)
    return revolved_mesh(r, z, h)


def punch_mesh(radius: float, height: float, segments: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """A flat punch: a regular ``segments``-gon prism whose face area is exactly πR² (its
    circumradius is R·sqrt(2π/(m·sin(2π/m)))), flat face at z = 0 fanned about the tip."""
    m = int(segments)
    rho = radius * math.sqrt(2 * math.pi / (m * math.sin(2 * math.pi / m)))
    a = 2 * math.pi * np.arange(m) / m
    ring = np.column_stack([rho * np.cos(a), rho * np.sin(a)])
    V = np.vstack([[[0.0, 0.0, 0.0]], np.column_stack([ring, np.zeros(m)]),
                   np.column_stack([ring, np.full(m, height)]), [[0.0, 0.0, height]]])
    faces = []
    top = 2 * m + 1
    for i in range(m):
        j = (i + 1) % m
        faces += [(0, 1 + j, 1 + i), (1 + i, 1 + j, 1 + m + j), (1 + i, 1 + m + j, 1 + m + i),
                  (top, 1 + m + i, 1 + m + j)]
    return V, np.array(faces, dtype=np.int64)


def plane_mesh(half_width: float, thickness: float) -> tuple[np.ndarray, np.ndarray]:
    """A box [−w, w]² × [0, t]: its face z = 0 is the plane, the tip its centre (a vertex there)."""
    w, t = float(half_width), float(thickness)
    V = np.array([[0, 0, 0], [-w, -w, 0], [w, -w, 0], [w, w, 0], [-w, w, 0],
                  [-w, -w, t], [w, -w, t], [w, w, t], [-w, w, t]], dtype=np.float64)
    F = [(0, 2, 1), (0, 3, 2), (0, 4, 3), (0, 1, 4),          # bottom fan, normal −z
         (5, 6, 7), (5, 7, 8),                                # top
         (1, 2, 6), (1, 6, 5), (2, 3, 7), (2, 7, 6), (3, 4, 8), (3, 8, 7), (4, 1, 5), (4, 5, 8)]
    return V, np.array(F, dtype=np.int64)


def check_indenter_text(text: str, scale: float = 1.0) -> None:
    """OptionError unless ``text`` is a valid indenter (checked before any work is done)."""
    kind, sep, arg = str(text).strip().partition(":")
    kind = kind.strip().lower()
    if kind == "plane" and not sep:
        return
    if kind in ("sphere", "paraboloid", "cylinder"):
        _radius(str(text).strip(), arg, scale)
        return
    if kind in KINDS or not os.path.isfile(str(text).strip()):
        raise OptionError(f"indenter {text!r} is neither a known shape nor an existing file", fix=GRAMMAR)


def _radius(text: str, arg: str, scale: float) -> float:
    """The radius (m) of ``kind:R``; OptionError unless R is a positive number within :data:`RADII`."""
    try:
        radius = float(arg) * scale
    except ValueError:
        radius = float("nan")
    if not (math.isfinite(radius) and radius > 0):
        raise OptionError(f"indenter {text!r}: the radius must be a positive number", fix=GRAMMAR)
    low, high = RADII
    if not low <= radius <= high:
        raise OptionError(f"indenter {text!r}: a radius of {radius:.3g} m is outside {low:g} .. {high:g} m",
                          fix=f"give R in the length unit of --units (e.g. --indenter {text.partition(':')[0]}:10 "
                              "--units mm for a 10 mm radius)")
    return radius


def parse_indenter(text: str, *, scale: float = 1.0, reach: float, part_size: float,
                   units: str = "m") -> Indenter:
    """Indenter from ``sphere:R``, ``paraboloid:R``, ``cylinder:R``, ``plane`` or a mesh path.

    Lengths (R) are in the caller's units, ``scale`` converts them to metres. ``reach`` (m) is the
    deepest indentation wanted (it sizes the finely meshed cap); ``part_size`` (m) the part's
    bounding-box diagonal (it sizes the plane). OptionError on a malformed spec, InputError on an
    unreadable mesh file.
    """
    text = str(text).strip()
    kind, sep, arg = text.partition(":")
    kind_l = kind.strip().lower()
    if kind_l == "plane" and not sep:
        V, F = plane_mesh(2.0 * part_size, part_size)
        return Indenter("plane", V, F)
    if kind_l in ("sphere", "paraboloid", "cylinder"):
        radius = _radius(text, arg, scale)
        if kind_l == "sphere":
            V, F = sphere_mesh(radius, reach)
        elif kind_l == "paraboloid":
            V, F = paraboloid_mesh(radius, reach)
        else:
            V, F = punch_mesh(radius, max(radius, 2.0 * reach))
        return Indenter(kind_l, V, F, radius=radius)
    if kind_l in KINDS:
        raise OptionError(f"indenter {text!r} is malformed", fix=GRAMMAR)
    if not os.path.isfile(text):
        raise OptionError(f"indenter {text!r} is neither a known shape nor an existing file", fix=GRAMMAR)
    body = RigidGeometry.from_mesh(text, units=units)
    check_closed_surface(body.vertices, body.faces, text)
    return Indenter("mesh", body.vertices, body.faces, source=text, aligned=False)


# ----------------------------------------------------------------------------- placement

def rotation_to(direction: np.ndarray) -> np.ndarray:
    """A rotation taking local −z onto the unit vector ``direction`` (deterministic)."""
    u = np.asarray(direction, dtype=np.float64)
    w = -u                                   # local +z goes to −u
    helper = np.array([1.0, 0.0, 0.0]) if abs(w[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = helper - w * (helper @ w)
    x /= np.linalg.norm(x)
    y = np.cross(w, x)
    return np.column_stack([x, y, w])


def unit_direction(values) -> np.ndarray:
    u = np.asarray(values, dtype=np.float64).reshape(-1)
    if u.shape != (3,) or not np.all(np.isfinite(u)) or np.linalg.norm(u) == 0:
        raise OptionError(f"the direction {values!r} is not a non-zero 3-vector", fix="give --direction X,Y,Z, e.g. 0,0,-1")
    return u / np.linalg.norm(u)


@dataclass
class Press:
    """An indenter placed against a part: ``tip(d) = touch + d·u``; ``force(d)`` the reaction
    along −u (N) from the runtime's contact wrench; the part sits at the identity pose."""

    part: CompliantGeometry
    indenter: Indenter
    direction: np.ndarray
    line_point: np.ndarray
    touch: np.ndarray = field(init=False)            #: tip position at first contact (m)
    body: RigidGeometry = field(init=False, repr=False)  #: the indenter posed with its tip at ``touch``

    def __post_init__(self):
        self.direction = unit_direction(self.direction)
        self.line_point = np.asarray(self.line_point, dtype=np.float64).reshape(3)
        rotation = rotation_to(self.direction) if self.indenter.aligned else np.eye(3)
        self._local = self.indenter.vertices @ rotation.T      # rotated, tip at the origin
        s = find_touch(surface_shell(self.part), self._local, self.indenter.faces, self.line_point,
                       self.direction)
        self.touch = self.line_point + s * self.direction
        self.body = RigidGeometry(self._local + self.touch, self.indenter.faces, name=self.indenter.kind)

    def pose(self, depth: float) -> np.ndarray:
        X = np.eye(4)
        X[:3, 3] = float(depth) * self.direction
        return X

    def surface(self, depth: float):
        """The runtime's contact surface (polygons) at ``depth`` (part = A, indenter = B)."""
        return compute_contact_surface(self.part, np.eye(4), self.body, self.pose(depth), "polygon")

    def force(self, depth: float, body: CompliantGeometry | None = None) -> float:
        """Reaction on the indenter along −u at ``depth`` (N), for ``body`` (default the part)."""
        _, wrench = contact(body or self.part, np.eye(4), self.body, self.pose(depth))
        return float(-wrench.force @ self.direction)

    def forces(self, depths, body: CompliantGeometry | None = None) -> np.ndarray:
        return np.array([self.force(d, body) for d in np.asarray(depths, dtype=np.float64)])


def _touching(part: CompliantGeometry, body: RigidGeometry, tip: np.ndarray) -> bool:
    X = np.eye(4)
    X[:3, 3] = tip
    surface = compute_contact_surface(part, np.eye(4), body, X, "polygon")
    return surface.n_faces > 0 and surface.total_area > 0


def surface_shell(part: CompliantGeometry) -> CompliantGeometry:
    """The tets of ``part`` that touch its boundary, as a body with a zero field: an indenter
    coming from outside meets one of them first, and queries on them are much cheaper than on a
    finely layered whole part."""
    on_boundary = np.zeros(len(part.points), bool)
    on_boundary[boundary_faces_of(part.tets).ravel()] = True
    tets = part.tets[on_boundary[part.tets].any(axis=1)]
    return CompliantGeometry(part.points, tets, np.zeros(len(part.points)), np.zeros((len(tets), 3)),
                         name=part.name)


def find_touch(part: CompliantGeometry, vertices: np.ndarray, faces: np.ndarray, line_point: np.ndarray,
               direction: np.ndarray) -> float:
    """Parameter ``s`` of the first contact: the indenter (tip at the origin of ``vertices``)
    with its tip at ``line_point + s·direction`` touches the part and does not for smaller s.

    InputError when it never touches (the line misses the part)."""
    u = np.asarray(direction, dtype=np.float64)
    lo_box, hi_box = part.points.min(axis=0), part.points.max(axis=0)
    diag = float(np.linalg.norm(hi_box - lo_box))
    corners = np.array([[x, y, z] for x in (lo_box[0], hi_box[0]) for y in (lo_box[1], hi_box[1])
                        for z in (lo_box[2], hi_box[2])])
    along = (corners - line_point) @ u
    back = float(np.max((vertices @ u)))          # <= 0 for a tip at the origin
    start = float(along.min()) - 1e-3 * diag - max(back, 0.0)
    stop = float(along.max()) + 1e-3 * diag
    steps = max(8, int(math.ceil(TOUCH_STEPS * (stop - start) / diag)))
    grid = np.linspace(start, stop, steps + 1)
    previous = grid[0]
    body = RigidGeometry(vertices, faces, name="indenter")
    if _touching(part, body, line_point + previous * u):
        raise InputError("the indenter overlaps the part before it starts moving",
                         fix="check --at and --direction: the indenter is placed outside the part and moved along the direction")
    hit = None
    for s in grid[1:]:
        if _touching(part, body, line_point + s * u):
            hit = s
            break
        previous = s
    if hit is None:
        raise InputError(f"the indenter never touches the part moving along {np.round(u, 6).tolist()} "
                         f"through {np.round(line_point, 6).tolist()} m",
                         fix="aim --at at a point of the part's surface (in the --units given) and --direction into it")
    lo, hi = previous, hit
    while hi - lo > TOUCH_TOLERANCE * diag:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _touching(part, body, line_point + mid * u):
            hi = mid
        else:
            lo = mid
    return float(lo)
