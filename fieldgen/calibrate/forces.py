"""The force of any modulus law on the runtime's contact surfaces, as a quadrature (docs/model.md
§3.2, §4.5).

For a rigid indenter the contact surface's geometry does not depend on the pressure field, only
the pressure on it does. On each contact polygon the extent is linear; the polygon is fanned
about its centroid and integrated with a 6-point rule, so each depth becomes a set of (extent,
weight) points and the force of any law is ``F_i = Σ_q w_q p0(e_q)``: the integral of the law
over the runtime's surface. For the linear law this is exactly the runtime's force on the asset
(P1 fields are integrated exactly), and F is proportional to M0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fieldgen.calibrate.part import PreparedPart
from fieldgen.material.modulus import ModulusLaw

#: Symmetric 6-point rule on a triangle (degree 4): barycentric points and weights (sum 1).
_A, _B = 0.445948490915965, 0.091576213509771
_WA, _WB = 0.223381589678011, 0.109951743655322
RULE_POINTS = np.array([[_A, _A, 1 - 2 * _A], [_A, 1 - 2 * _A, _A], [1 - 2 * _A, _A, _A],
                        [_B, _B, 1 - 2 * _B], [_B, 1 - 2 * _B, _B], [1 - 2 * _B, _B, _B]])
RULE_WEIGHTS = np.array([_WA, _WA, _WA, _WB, _WB, _WB])


#: Nodes of the extent grid the quadrature weights are gathered on (graded as (k/K)², finest at
#: e = 0 where laws like sqrt bend most).
GRID_NODES = 4096


@dataclass
class ForceModel:
    """Per data depth, points of the contact surface with their extent and force weight:
    ``F_i(law) = Σ_q weight_q · p0(extent_q)`` for q in depth i (N).

    For speed the weights are also gathered onto a fine extent grid (each point's weight split
    linearly between its two grid nodes), so ``forces`` costs one law evaluation on the grid and a
    small matrix product: that is the exact integral of the law's piecewise-linear interpolant on
    the grid (relative error ~ p0''·h²/8 / p0, below 1e-6 here); ``exact_forces`` uses the points."""

    depth: np.ndarray
    extent: np.ndarray
    weight: np.ndarray
    owner: np.ndarray         #: depth index of each point
    faces: np.ndarray         #: contact polygons per depth
    grid: np.ndarray = field(init=False, repr=False)
    matrix: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        top = max(self.extent_reached(), 1e-12)
        self.grid = top * (np.arange(GRID_NODES + 1) / GRID_NODES) ** 2
        e = np.clip(self.extent, 0.0, top)
        k = np.clip(np.searchsorted(self.grid, e, side="right") - 1, 0, GRID_NODES - 1)
        t = (e - self.grid[k]) / (self.grid[k + 1] - self.grid[k])
        self.matrix = np.zeros((len(self.depth), GRID_NODES + 1))
        np.add.at(self.matrix, (self.owner, k), self.weight * (1.0 - t))
        np.add.at(self.matrix, (self.owner, k + 1), self.weight * t)

    def forces(self, law: ModulusLaw) -> np.ndarray:
        return self.matrix @ law.pressure(self.grid)

    def exact_forces(self, law: ModulusLaw) -> np.ndarray:
        return np.bincount(self.owner, weights=self.weight * law.pressure(self.extent), minlength=len(self.depth))

    def basis(self, functions) -> np.ndarray:
        """(depths, k) forces of k pressure functions of the extent (a callable e -> (len(e), k))."""
        return self.matrix @ functions(self.grid)

    def extent_reached(self, i: int | None = None) -> float:
        """Largest extent on the contact surface (at depth i, or at any depth)."""
        sel = self.extent if i is None else self.extent[self.owner == i]
        return float(sel.max()) if sel.size else 0.0


def surface_points(surface, points: np.ndarray, tets: np.ndarray, extent: np.ndarray,
                   direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(extent, weight) quadrature points of a rigid–compliant contact surface (part = A): each
    polygon fanned about its centroid, 6 points per triangle; weight = area · rule weight ·
    (−n̂·u), so that Σ weight·p0 is the reaction along −u (N) of the pressure p0 (D 5.0.3)."""
    if surface.n_faces == 0:
        return np.zeros(0), np.zeros(0)
    offsets = surface.face_offsets
    counts = np.diff(offsets)
    face = np.repeat(np.arange(surface.n_faces), counts)
    local = np.arange(len(surface.face_vertices)) - offsets[face]
    nxt = surface.face_vertices[offsets[face] + (local + 1) % counts[face]]
    a = surface.centroids[face]
    b = surface.vertices[surface.face_vertices]
    c = surface.vertices[nxt]
    area = 0.5 * np.einsum("ij,ij->i", np.cross(b - a, c - a), surface.normals[face])
    q = (RULE_POINTS[None, :, 0, None] * a[:, None] + RULE_POINTS[None, :, 1, None] * b[:, None]
         + RULE_POINTS[None, :, 2, None] * c[:, None])                       # (tri, 6, 3)
    tet = surface.element_a[face]
    lam = barycentric(points, tets[tet], q)                                  # (tri, 6, 4)
    e = np.einsum("tqk,tk->tq", lam, extent[tets[tet]])
    along = -(surface.normals[face] @ np.asarray(direction, dtype=np.float64))
    w = (area * along)[:, None] * RULE_WEIGHTS[None, :]
    return e.ravel(), w.ravel()


def barycentric(points: np.ndarray, tet_vertices: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Barycentric coordinates (…, 4) of points q (t, m, 3) in tets (t, 4) of ``points``."""
    p = points[tet_vertices]                                   # (t, 4, 3)
    T = np.stack([p[:, 1] - p[:, 0], p[:, 2] - p[:, 0], p[:, 3] - p[:, 0]], axis=2)   # (t, 3, 3)
    rhs = np.transpose(q - p[:, None, 0], (0, 2, 1))            # (t, 3, m)
    lam = np.transpose(np.linalg.solve(T, rhs), (0, 2, 1))      # (t, m, 3)
    return np.concatenate([1.0 - lam.sum(axis=2, keepdims=True), lam], axis=2)


def force_model(press, prepared: PreparedPart, depths: np.ndarray) -> ForceModel:
    """The quadrature points of the runtime's contact surface at each depth (on the unlayered mesh)."""
    extents, weights, owners, faces = [], [], [], []
    for i, d in enumerate(depths):
        surface = press.surface(d)
        e, w = surface_points(surface, prepared.mesh.points, prepared.mesh.tets, prepared.extent, press.direction)
        extents.append(e)
        weights.append(w)
        owners.append(np.full(len(e), i, dtype=np.int64))
        faces.append(surface.n_faces)
    return ForceModel(np.asarray(depths, dtype=np.float64), np.concatenate(extents), np.concatenate(weights),
                      np.concatenate(owners), np.array(faces))
