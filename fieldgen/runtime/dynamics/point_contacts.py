"""Point contacts of one velocity-level step (docs/model.md §5.3-5.4; M22 IV).

Each polygon of each contact surface whose gradients satisfy ``g_A = −∇p_A·n̂ > 0`` and
``g_B = ∇p_B·n̂ > 0`` becomes a compliant point contact at its centroid with
``g = g_A g_B/(g_A + g_B)`` (a rigid side contributes ``g`` of the compliant one), ``k = g·A``,
``φ0 = −p_c/g``. Between two rigid geometries, or a rigid core (D 5.1.2) and a rigid geometry,
the contacts are the mesh features within the pair's signed-distance margin
(:mod:`fieldgen.runtime.dynamics.rigid_contact`), with infinite stiffness.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba as nb
import numpy as np

from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
from fieldgen.runtime.contact.surface import ContactSurface, compute_contact_surface
from fieldgen.runtime.contact.wrench import combined_dissipation, combined_friction
from fieldgen.runtime.dynamics.bodies import Scene
from fieldgen.runtime.dynamics.rigid_body import RigidBodyState
from fieldgen.runtime.dynamics.rigid_contact import contact_margin, core_body, mesh_contacts, mesh_features, pair_speed
from fieldgen.runtime.dynamics.warnings import watched


@dataclass
class PointContacts:
    """Point contacts of one step, as arrays (n_c rows). Bodies are scene indices; ``normal``
    points from A into B; ``stiffness`` inf marks a rigid contact."""

    body_a: np.ndarray
    body_b: np.ndarray
    position: np.ndarray
    normal: np.ndarray
    phi0: np.ndarray
    stiffness: np.ndarray
    dissipation: np.ndarray
    mu: np.ndarray
    surfaces: list = field(default_factory=list)   # (index_a, index_b, ContactSurface)
    core: np.ndarray | None = None                 # (n_c,) bool: a rigid contact with a rigid core
    #: per pair searched for rigid contacts: (margin, features of each side), see scene_contacts
    margins: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.core is None:
            self.core = np.zeros(self.n, bool)

    @property
    def n(self) -> int:
        return int(self.phi0.shape[0])

    @property
    def rigid(self) -> np.ndarray:
        return ~np.isfinite(self.stiffness)


def polygon_point_contacts(surface: ContactSurface, dissipation: float, mu: float):
    """M22 IV: arrays (position, normal, phi0, stiffness) of the polygons kept, and their count.

    ``g_A = −∇p_A·n̂``, ``g_B = ∇p_B·n̂`` (inf for a rigid side), keep both > 0;
    ``g = g_A g_B/(g_A + g_B)``, ``k = g·A``, ``φ0 = −p_c/g``. Polygons whose stiffness is
    below ``1e-12`` of the surface's total (e.g. the side slivers of a rigid coin tilted by
    1e-7 rad) are dropped too: their force is below the round-off of the total, and they
    would otherwise double the constraint count."""
    return _polygon_point_contacts(surface.normals, surface.grad_a, surface.grad_b, surface.areas,
                                   surface.centroids, surface.centroid_pressure)


@nb.njit(cache=True)
def _polygon_point_contacts(normals, grad_a, grad_b, areas, centroids, centroid_pressure):
    """Kernel of :func:`polygon_point_contacts` (one pass to keep, one to drop the negligible)."""
    m = areas.shape[0]
    g = np.empty(m)
    k = np.empty(m)
    keep = np.zeros(m, np.bool_)
    total = 0.0
    for f in range(m):
        ga = -(grad_a[f, 0] * normals[f, 0] + grad_a[f, 1] * normals[f, 1] + grad_a[f, 2] * normals[f, 2])
        gb = grad_b[f, 0] * normals[f, 0] + grad_b[f, 1] * normals[f, 1] + grad_b[f, 2] * normals[f, 2]
        if np.isnan(ga):
            ga = np.inf
        if np.isnan(gb):
            gb = np.inf
        if not (ga > 0.0 and gb > 0.0 and areas[f] > 0.0) or (np.isinf(ga) and np.isinf(gb)):
            continue
        if np.isinf(ga):
            g[f] = gb
        elif np.isinf(gb):
            g[f] = ga
        else:
            g[f] = ga * gb / (ga + gb)
        k[f] = g[f] * areas[f]
        keep[f] = True
        total += k[f]
    n = 0
    for f in range(m):
        if keep[f] and k[f] > 1e-12 * total:
            n += 1
    position = np.empty((n, 3))
    normal = np.empty((n, 3))
    phi0 = np.empty(n)
    stiffness = np.empty(n)
    c = 0
    for f in range(m):
        if keep[f] and k[f] > 1e-12 * total:
            for i in range(3):
                position[c, i] = centroids[f, i]
                normal[c, i] = normals[f, i]
            phi0[c] = -centroid_pressure[f] / g[f]
            stiffness[c] = k[f]
            c += 1
    return position, normal, phi0, stiffness


def scene_contacts(scene: Scene, states: list[RigidBodyState], *, rigid_margin: float = 0.0,
                   keep_surfaces: bool = False, dt: float = 0.0, speeds: dict | None = None,
                   cache: dict | None = None) -> PointContacts:
    """All point contacts of the scene at ``states``: M22 IV polygons, and between two rigid
    geometries (or a rigid core and a rigid geometry) the mesh features within the pair's
    signed-distance margin (``rigid_contact``): the larger of ``rigid_margin`` and what the
    pair's relative speed can close within ``dt`` (that speed: the larger of what ``states``
    give and ``speeds[(i, j)]``). The margin used per such pair is in ``PointContacts.margins``.
    ``cache`` (a dict kept by the caller across calls at the same ``states``) keeps the
    compliant pairs' polygons, so a call that only widens margins recomputes only rigid pairs."""
    cols = {k: [] for k in ("a", "b", "p", "n", "phi", "k", "chi", "mu", "core")}
    surfaces = []
    margins = {}
    speeds = speeds or {}
    poses = [b.pose(s) for b, s in zip(scene.bodies, states)]
    for i, bi in enumerate(scene.bodies):
        for j in range(i + 1, len(scene.bodies)):
            bj = scene.bodies[j]
            if bi.kind != "dynamic" and bj.kind != "dynamic":
                continue
            gi, gj = bi.geometry, bj.geometry
            chi, mu = combined_dissipation(gi, gj), combined_friction(gi, gj)
            extra = speeds.get((i, j), 0.0)
            if isinstance(gi, CompliantGeometry) or isinstance(gj, CompliantGeometry):
                if cache is not None and (i, j) in cache:
                    surface, polygons = cache[(i, j)]
                else:
                    with watched((bi.name, bj.name)):   # kept once per (pair, kind) by simulate()
                        surface = compute_contact_surface(gi, poses[i], gj, poses[j], "polygon",
                                                          face_rule=scene.face_rule)
                    polygons = polygon_point_contacts(surface, chi, mu) if surface.n_faces else None
                    if cache is not None:
                        cache[(i, j)] = (surface, polygons)
                if surface.n_faces == 0:
                    continue
                if keep_surfaces:
                    surfaces.append((i, j, surface))
                p, n, phi, k, c = _with_core_contacts(gi, poses[i], states[i], gj, poses[j], states[j], dt,
                                                      rigid_margin, polygons, extra, margins, (i, j))
            else:
                p, n, phi = _rigid_pair_contacts(gi, poses[i], states[i], gj, poses[j], states[j], dt,
                                                 rigid_margin, extra, margins, (i, j))
                k = np.full(len(phi), np.inf)
                c = np.zeros(len(phi), bool)
            m = len(phi)
            if m == 0:
                continue
            cols["a"].append(np.full(m, i)), cols["b"].append(np.full(m, j))
            cols["p"].append(p), cols["n"].append(n), cols["phi"].append(phi), cols["k"].append(k)
            cols["chi"].append(np.full(m, chi)), cols["mu"].append(np.full(m, mu)), cols["core"].append(c)
    if not cols["a"]:
        z = np.zeros(0)
        return PointContacts(z.astype(int), z.astype(int), np.zeros((0, 3)), np.zeros((0, 3)), z, z, z, z, surfaces,
                             margins=margins)
    cat = {k: np.concatenate(v) for k, v in cols.items()}
    return PointContacts(cat["a"], cat["b"], cat["p"], cat["n"], cat["phi"], cat["k"], cat["chi"], cat["mu"],
                         surfaces, cat["core"], margins)


def _with_core_contacts(gi, Xi, si, gj, Xj, sj, dt, floor, polygons, speed=0.0, margins=None, pair=None):
    """Polygon contacts of a compliant pair plus, where a side has a rigid core (D 5.1.2: the
    boundary faces at e = 1, ``CompliantGeometry.core_faces``) and the other side is rigid or has a
    core too, the rigid contacts between that core and the other side (``rigid_contact``),
    within the pair's signed-distance margin: the core is rigid geometry, so nothing passes
    through it. Returns (p, n, φ0, k, from_core)."""
    ci, cj = core_body(gi), core_body(gj)
    oi = ci if ci is not None else gi if isinstance(gi, RigidGeometry) else None
    oj = cj if cj is not None else gj if isinstance(gj, RigidGeometry) else None
    p, n, phi, k = polygons
    core = np.zeros(len(phi), bool)
    if (ci is None and cj is None) or oi is None or oj is None:
        return p, n, phi, k, core
    pc, nc, phic = _rigid_pair_contacts(oi, Xi, si, oj, Xj, sj, dt, floor, speed, margins, pair)
    if len(phic) == 0:          # the usual case: the core is not reached (no copies of the polygons)
        return p, n, phi, k, core
    return (np.vstack([p, pc]), np.vstack([n, nc]), np.concatenate([phi, phic]),
            np.concatenate([k, np.full(len(phic), np.inf)]), np.concatenate([core, np.ones(len(phic), bool)]))


def _rigid_pair_contacts(gi, Xi, si, gj, Xj, sj, dt, floor, speed=0.0, margins=None, pair=None):
    """``rigid_contact.mesh_contacts`` with the margin of this pair's relative motion: the larger
    of the speed its states give and ``speed``; the margin used goes into ``margins[pair]``."""
    fi, fj = mesh_features(gi), mesh_features(gj)
    speed = max(speed, pair_speed(fi, si.velocity, si.angular_velocity, fj, sj.velocity, sj.angular_velocity))
    margin = max(contact_margin(speed, dt, min(fi.diagonal, fj.diagonal)), floor)
    if margins is not None:
        margins[pair] = (margin, fi, fj)
    return mesh_contacts(gi, Xi, gj, Xj, margin)


def margin_shortfalls(contacts: PointContacts, twists: np.ndarray, dt: float) -> dict:
    """Pairs whose rigid contacts were searched within a margin the step's solution outran:
    ``{(i, j): speed}`` for each pair whose surfaces can move closer within ``dt`` at the
    solved ``twists`` (n_bodies, 6) than the margin used, with the speed to search again at.
    Empty when every gap the step can close was a constraint of the step."""
    out = {}
    for (i, j), (margin, fi, fj) in contacts.margins.items():
        speed = pair_speed(fi, twists[i, :3], twists[i, 3:], fj, twists[j, :3], twists[j, 3:])
        if speed * dt > margin:
            out[(i, j)] = speed
    return out
