"""The force of any modulus law on the runtime's contact surfaces, as a quadrature (docs/model.md
§3.2, §4.5).

For a rigid indenter the contact surface's geometry does not depend on the pressure field, only
the pressure on it does. On each contact polygon the extent is linear; the polygon is fanned
about its centroid and integrated with a 6-point rule, so each depth becomes a set of (extent,
weight) points and the force of any law is ``F_i = Σ_q w_q p0(e_q)``: the integral of the law
over the runtime's surface. The points are gathered onto a fine extent grid as they are made
(:class:`ForceModel`), so a fit's memory does not grow with the contact's size. For the linear law
the force is exactly the runtime's force on the asset (P1 fields are integrated exactly), and F is
proportional to M0; for the others the gathered sums are the points' sums to about 1e-8
(:class:`ForceModel`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fieldgen.calibrate.part import PreparedPart
from fieldgen.material.modulus import ModulusLaw
from fieldgen.meshing.tetmesh import tet_barycentric

#: Symmetric 6-point rule on a triangle (degree 4): barycentric points and weights (sum 1).
_A, _B = 0.445948490915965, 0.091576213509771
_WA, _WB = 0.223381589678011, 0.109951743655322
RULE_POINTS = np.array([[_A, _A, 1 - 2 * _A], [_A, 1 - 2 * _A, _A], [1 - 2 * _A, _A, _A],
                        [_B, _B, 1 - 2 * _B], [_B, 1 - 2 * _B, _B], [1 - 2 * _B, _B, _B]])
RULE_WEIGHTS = np.array([_WA, _WA, _WA, _WB, _WB, _WB])


#: Nodes of the extent grid over [0, 1] the quadrature weights are gathered on, graded as
#: (k/K)⁴: 6e-5 apart at e = 1 (where a steep hyperbolic law bends most), 2e-9 apart at
#: e = 1e-6 and finer below (a table's first knot may lie there, and a shallow contact's extents
#: all do).
GRID_NODES = 65536
#: Nodes each point's weight is spread over: the two of its grid cell and one either side.
STENCIL = 4
#: Points gathered at a time (bounds the temporaries: a depth has a million on the bundled pad).
GATHER_CHUNK = 1 << 17


def extent_grid(nodes: int = GRID_NODES) -> np.ndarray:
    """The grid's extents, 0 to 1 (``GRID_NODES``)."""
    return (np.arange(nodes + 1) / nodes) ** 4


def gathered(extent: np.ndarray, weight: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """One depth's quadrature points (``extent``, clipped to [0, 1]; ``weight``) gathered on
    ``grid``: each point's weight split between the ``STENCIL`` nodes around its cell by their
    cubic Lagrange weights at its extent, so that ``row · p0(grid)`` is the integral of the law's
    piecewise-cubic interpolant on the grid (exact for a law that is a cubic across each stencil:
    the linear law, and a table's PCHIP segments away from its knots)."""
    row = np.zeros(len(grid))
    start = np.arange(len(grid) - STENCIL + 1)         # a stencil's first node
    others = [[m for m in range(STENCIL) if m != j] for j in range(STENCIL)]
    spans = [np.prod([grid[start + j] - grid[start + m] for m in others[j]], axis=0) for j in range(STENCIL)]
    for lo in range(0, len(extent), GATHER_CHUNK):
        e = np.clip(extent[lo:lo + GATHER_CHUNK], 0.0, 1.0)
        first = np.clip(np.searchsorted(grid, e, side="right") - 2, 0, len(grid) - STENCIL)
        offset = [e - grid[first + m] for m in range(STENCIL)]
        for j in range(STENCIL):
            share = weight[lo:lo + GATHER_CHUNK] * np.prod([offset[m] for m in others[j]], axis=0) / spans[j][first]
            row += np.bincount(first + j, share, minlength=len(grid))
    return row


@dataclass(frozen=True)
class ForceModel:
    """Per data depth, the contact surface's quadrature weights gathered on an extent grid:
    ``F_i(law) = Σ_j matrix_ij · p0(grid_j)`` (N), the integral over the runtime's surface of the
    law's piecewise-cubic interpolant on the grid (:func:`gathered`): exact for the linear law,
    and for the others the points' own sum to within about ``h⁴·p0''''/(40·p0)``, or
    ``h²·Δp0''/(8·p0)`` in the cells beside a table's knot (h the grid's spacing there).
    Measured against the points' sums (the bundled pad 0.2-2 mm deep; a sphere on a slab 0.1 µm
    to 9 mm deep; extents uniform up to 1e-9 ... 1): within 4e-10 for hyperbolic K 0.8 and K 0.995
    (7e-9 where the points crowd against e = 1) and for tables whose first knot is 1e-7 to 1e-6
    (2e-9 on contacts that lie below e = 1e-7), 1.1e-8 for a first knot at 1e-8 on a contact below
    e = 1e-8. (Split linearly between two nodes of a grid graded (k/K)², they were off by up to
    7e-7 for K 0.995 reaching e = 1, 5e-6 crowding against it, and for tables whose first knot is
    below 1e-6 by 1e-4 on contacts below e = 1e-5, 1e-2 below 1e-8.)
    Each depth's points are dropped once gathered: kept, they took about 25 MB a depth on the
    bundled pad (a million points a depth), and a hundred depths 10 GB with the temporaries."""

    depth: np.ndarray
    matrix: np.ndarray        #: (depths, grid nodes) gathered weights
    grid: np.ndarray          #: the grid's extents, up to one node past the last any depth reaches
    reached: np.ndarray       #: per depth, the largest extent on its contact surface
    faces: np.ndarray         #: contact polygons per depth

    @classmethod
    def from_gathered(cls, depth, rows: list[np.ndarray], reached, faces) -> "ForceModel":
        """The model of each depth's row of gathered weights (:func:`gathered` on
        :func:`extent_grid`), the grid cut one node past the last any row reaches."""
        grid = extent_grid()
        matrix = np.array(rows, dtype=np.float64).reshape(len(rows), len(grid))
        used = np.flatnonzero(matrix.any(axis=0))
        end = min(len(grid), int(used[-1]) + 2) if len(used) else 2
        return cls(np.asarray(depth, dtype=np.float64), np.ascontiguousarray(matrix[:, :end]), grid[:end],
                   np.asarray(reached, dtype=np.float64), np.asarray(faces))

    @classmethod
    def from_points(cls, depth, extent, weight, owner, faces) -> "ForceModel":
        """The model of quadrature points (``extent``, ``weight``), each owned by a depth."""
        grid = extent_grid()
        chosen = [owner == i for i in range(len(depth))]
        return cls.from_gathered(depth, [gathered(extent[c], weight[c], grid) for c in chosen],
                                 [float(extent[c].max()) if c.any() else 0.0 for c in chosen], faces)

    def forces(self, law: ModulusLaw) -> np.ndarray:
        return self.matrix @ law.pressure(self.grid)

    def basis(self, functions) -> np.ndarray:
        """(depths, k) forces of k pressure functions of the extent (a callable e -> (len(e), k))."""
        return self.matrix @ functions(self.grid)

    def extent_reached(self, i: int | None = None) -> float:
        """Largest extent on the contact surface (at depth i, or at any depth)."""
        if not len(self.reached):
            return 0.0
        return float(self.reached.max() if i is None else self.reached[i])


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
    lam = tet_barycentric(points[tets[tet]], q)                              # (tri, 6, 4)
    e = np.einsum("tqk,tk->tq", lam, extent[tets[tet]])
    along = -(surface.normals[face] @ np.asarray(direction, dtype=np.float64))
    w = (area * along)[:, None] * RULE_WEIGHTS[None, :]
    return e.ravel(), w.ravel()


def force_model(press, prepared: PreparedPart, depths: np.ndarray) -> ForceModel:
    """The runtime's contact surface at each depth (on the unlayered mesh), its quadrature points
    gathered on the extent grid one depth at a time (:class:`ForceModel`)."""
    grid = extent_grid()
    rows, reached, faces = [], [], []
    for d in depths:
        surface = press.surface(d)
        e, w = surface_points(surface, prepared.mesh.points, prepared.mesh.tets, prepared.extent, press.direction)
        rows.append(gathered(e, w, grid))
        reached.append(float(e.max()) if len(e) else 0.0)
        faces.append(surface.n_faces)
    return ForceModel.from_gathered(depths, rows, reached, faces)
