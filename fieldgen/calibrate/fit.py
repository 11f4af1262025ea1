"""Calibration: the modulus law that makes fieldgen's own contact model reproduce an indentation.

Given a part (a build spec), a rigid indenter pressed along a direction, and a measured loading
curve (depth, force) — or design targets — find the law ``p0(e)`` (D 5.1.2; docs/model.md 2.3) whose built
asset, under the runtime's contact model (D 5.0.2; docs/model.md 3.2, 4.5), gives those forces, and write
that asset with the calibration in its metadata.

How the fit uses the real pipeline without rebuilding per evaluation:

1. The part is meshed and its extent field solved once, by the build's own front stages
   (``fieldgen.pipeline.mesh_part``: load, TetGen sized by accuracy unless the spec gives a size, or
   fTetWild with ``robust``, skin, refinement of zero-pressure tets), then the extent solve.
   The extent does not depend on the law.
2. The indenter is placed at first contact (``fieldgen.calibrate.indenter``) and, at each data depth, the
   runtime computes the contact surface on that mesh. For a rigid indenter the surface's
   geometry does not depend on the pressure field, only the pressure on it does.
3. On each contact polygon the extent is linear; the polygon is fanned about its centroid and
   integrated with a 6-point rule, so each depth becomes a set of (extent, weight) points and the
   force of any law is ``F_i = Σ_q w_q p0(e_q)`` — the integral of the law over the runtime's
   surface. For the linear law this is exactly the runtime's force on the asset (P1 fields are
   integrated exactly), and F is proportional to M0, so one evaluation gives the fit.
4. For a nonlinear law the asset is layered (D 5.1.2) and the runtime interpolates ``p0``
   linearly between layers, which under- or over-reads the law by up to the layer tolerance. So
   after the fit the mesh is layered with the fitted law, the runtime's forces on that layered
   mesh are computed, and the fit is repeated against the data minus that difference (defect
   correction) until the layered asset itself matches (at most ``MAX_CORRECTIONS`` rounds).
5. The asset is written by ``fieldgen.pipeline.build`` with the fitted law on that same mesh, read
   back, and its runtime forces are what the report's residuals are computed from.

Laws: ``linear`` (M0, closed-form least squares), ``hyperbolic`` (M0, K: M0 in closed form for
each K, K by a grid scan and a bounded scalar search), ``table`` (the pressures at the table's
extents, non-decreasing; a non-negative least-squares start on piecewise-linear ramps, then a
bounded least-squares fit of the monotone-cubic table itself, with a penalty on changes of slope
between segments). None of these needs a start guess: the scale enters linearly. With
``--target`` (design points instead of data) only the scale of the spec's law is fitted.

Residuals are relative, ``(F_model − F_data)/F_data``: forces span decades over a loading curve
and measurement noise is usually a fraction of the reading.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from fieldgen.errors import BuildError, InputError, OptionError
from fieldgen.material.modulus import ModulusLaw, hyperbolic_law, linear_law, table_law_from_points
from fieldgen.progress import Progress
from fieldgen.tables import read_number_pairs
from fieldgen.units import LENGTH_UNITS

FORCE_UNITS = {"N": 1.0, "mN": 1e-3, "kN": 1e3, "lbf": 4.4482216152605}
FIT_LAWS = ("linear", "hyperbolic", "table")
MIN_DATA_ROWS = 3
#: Defect-correction rounds against the layered mesh (nonlinear laws).
MAX_CORRECTIONS = 6
#: Stop correcting when the layered forces match the fitted ones this closely (relative).
CORRECTION_TOLERANCE = 2e-4
DEFAULT_SMOOTHNESS = 1e-4
DEFAULT_KNOTS = 8
K_MAX = 0.995

# ----------------------------------------------------------------------------- data

@dataclass
class Data:
    """A loading curve in SI: depth (m) from first contact, force (N) pushing back."""

    depth: np.ndarray
    force: np.ndarray
    rows: list[str]
    source: str | None = None        #: file path, or None for targets
    sha256: str | None = None
    units: str = "m,N"

    @property
    def fitted(self) -> np.ndarray:
        """Rows that take part in the fit (depth > 0)."""
        return self.depth > 0


def parse_units(text: str | None) -> tuple[float, float, str]:
    """``LENGTH[,FORCE]`` (e.g. ``mm`` or ``mm,N``) -> (metres per length unit, newtons per force unit, text)."""
    text = (text or "m,N").strip()
    parts = [p.strip() for p in text.split(",")]
    if len(parts) == 1:
        parts.append("N")
    if len(parts) != 2 or parts[0] not in LENGTH_UNITS or parts[1] not in FORCE_UNITS:
        raise OptionError(f"units {text!r} are not LENGTH[,FORCE]",
                          fix=f"give e.g. --units mm,N with LENGTH one of {', '.join(LENGTH_UNITS)} and FORCE one of "
                              f"{', '.join(FORCE_UNITS)}")
    return LENGTH_UNITS[parts[0]], FORCE_UNITS[parts[1]], f"{parts[0]},{parts[1]}"


def check_curve(depth: np.ndarray, force: np.ndarray, rows: Sequence[str], path: str | None) -> None:
    """A loading branch: finite, depth >= 0 strictly increasing, force >= 0 non-decreasing and
    positive once the indenter is in (depth > 0). InputError naming the row otherwise."""
    where = None if path is None else str(path)
    for i, (d, f) in enumerate(zip(depth, force)):
        if not (math.isfinite(d) and math.isfinite(f)):
            raise InputError(f"{rows[i]} is not finite (depth {d}, force {f})", path=where,
                             fix="give finite numbers in every row")
        if d < 0:
            raise InputError(f"{rows[i]} has a negative depth ({d:g} m)", path=where,
                             fix="measure depth from first contact, positive into the part")
        if f < 0:
            raise InputError(f"{rows[i]} has a negative force ({f:g} N)", path=where,
                             fix="give the force pushing back on the indenter as a positive number")
        if d > 0 and not f > 0:
            raise InputError(f"{rows[i]} has no force at depth {d:g} m", path=where,
                             fix="measure depth from the first contact (where the force starts to rise); "
                                 "drop the rows before it")
        if i and not d > depth[i - 1]:
            raise InputError(f"{rows[i]} has depth {d:g} m, not greater than {depth[i - 1]:g} m in {rows[i - 1]}",
                             path=where, fix="give the loading branch only, depth increasing (drop the unloading rows)")
        if i and f < force[i - 1]:
            raise InputError(f"{rows[i]} has force {f:g} N, less than {force[i - 1]:g} N in {rows[i - 1]}",
                             path=where, fix="give the loading branch only, force non-decreasing with depth")


def read_data(path: str | os.PathLike, units: str | None = None) -> Data:
    """Read a CSV of depth, force (header row optional, '#' comments); InputError naming the row."""
    length, force_unit, units_text = parse_units(units)
    path = Path(path)
    pairs, rows, raw = read_number_pairs(path, "depth, force",
                                         fix=f"make every data row two numbers: depth, force (in {units_text})")
    depths, forces = pairs[:, 0] * length, pairs[:, 1] * force_unit
    if not len(depths):
        raise InputError("the data has no rows", path=str(path),
                         fix="give rows 'depth, force' of the loading curve (a header row is optional)")
    depth, force = depths, forces
    check_curve(depth, force, rows, str(path))
    if int(np.sum(depth > 0)) < MIN_DATA_ROWS:
        raise InputError(f"the data has {int(np.sum(depth > 0))} rows with positive depth; at least "
                         f"{MIN_DATA_ROWS} are needed", path=str(path),
                         fix="give more points of the loading curve (or use --target for design points)")
    return Data(depth, force, rows, str(path), hashlib.sha256(raw).hexdigest(), units_text)


def parse_targets(texts: Sequence[str], units: str | None = None) -> Data:
    """``DEPTH:FORCE`` design points -> Data (OptionError on malformed ones)."""
    length, force_unit, units_text = parse_units(units)
    pairs = []
    for text in texts:
        d, sep, f = str(text).partition(":")
        try:
            pair = (float(d) * length, float(f) * force_unit)
        except ValueError:
            pair = None
        if not sep or pair is None or not all(map(math.isfinite, pair)) or pair[0] <= 0 or pair[1] <= 0:
            raise OptionError(f"target {text!r} is not DEPTH:FORCE with both positive",
                              fix=f"give e.g. --target 0.002:20 (depth and force in {units_text})")
        pairs.append(pair)
    pairs.sort()
    depth = np.array([p[0] for p in pairs])
    force = np.array([p[1] for p in pairs])
    rows = [f"target {t}" for t in texts]
    try:
        check_curve(depth, force, rows, None)
    except InputError as error:
        raise OptionError(error.defect, fix=error.fix) from None
    return Data(depth, force, rows, None, None, units_text)



# ----------------------------------------------------------------------------- the part

@dataclass
class PreparedPart:
    """The part meshed and its extent solved once (the law-independent stages of the build)."""

    mesh: Any                 #: fieldgen.meshing.tetmesh.TetMesh, after the zero-tet refinement
    extent: np.ndarray        #: (n,) P1 extent
    scale: float              #: metres per input unit
    seconds: dict[str, float]
    meshed: Any = None        #: fieldgen.pipeline.MeshedPart: the build writes the asset on this mesh


def prepare_part(input_path: str, options, progress: Progress | None = None) -> PreparedPart:
    """Mesh ``input_path`` and solve its extent with the build's own front stages
    (:func:`fieldgen.pipeline.mesh_part`: load, TetGen sized as the build sizes it or fTetWild, skin,
    zero-tet refinement), then the extent if the sizing has not solved it already. The build
    writes the asset on this mesh (``PreparedPart.meshed``), so fTetWild's run-to-run
    differences do not come between the fit and the asset."""
    from fieldgen.pipeline import make_law, mesh_part
    from fieldgen.fe.extent import solve_extent
    from fieldgen.surface.stage import UNIT_SCALE

    progress = progress or Progress(enabled=False)
    kind = options.resolved_law()
    values_missing = (options.table is None if kind == "table"
                      else options.modulus is None or (kind == "hyperbolic" and options.k is None))
    if values_missing:
        # A law still to be fitted (a table with no values yet): the sizing's pressure estimate
        # takes a linear law meanwhile, and the build measures it again for the fitted law.
        law = linear_law(1.0)
    else:
        law = make_law(options.checked())
    meshed = mesh_part(input_path, options, law=law, progress=progress)
    if meshed.solution is None:
        with progress.stage("extent"):
            meshed = dataclasses.replace(meshed, solution=solve_extent(meshed.mesh))
    return PreparedPart(meshed.mesh, meshed.solution.extent, UNIT_SCALE[options.units],
                        dict(progress.stage_seconds), meshed)


def geometry_body(mesh, extent: np.ndarray):
    """The part as a runtime body for geometry queries (its field is the extent; the force of a
    law is computed from the quadrature, not from this field)."""
    from fieldgen.runtime.contact.geometries import CompliantBody

    return CompliantBody.from_arrays(mesh.points, mesh.tets, extent, extent=extent, modulus=1.0, name="part")


# ----------------------------------------------------------------------------- quadrature

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


# ----------------------------------------------------------------------------- laws and fits

@dataclass
class Fit:
    law: ModulusLaw
    parameters: dict[str, Any]
    evaluations: int
    iterations: int


def _relative(forces: np.ndarray, target: np.ndarray) -> np.ndarray:
    return forces / target - 1.0


def fit_scale(G: np.ndarray, target: np.ndarray) -> float:
    """Least-squares s of the relative residuals s·G/target − 1."""
    g = G / target
    denominator = float(g @ g)
    if not denominator > 0:
        raise BuildError("the indenter does not press on the part at the data's depths (the predicted force is 0)",
                         fix="check --at and --direction: the indenter must be pushed into the part")
    return float(g.sum() / denominator)


def fit_linear(model: ForceModel, target: np.ndarray) -> Fit:
    G = model.exact_forces(linear_law(1.0))
    m0 = fit_scale(G, target)
    return Fit(linear_law(m0), {"modulus": m0}, 1, 1)


def scaled_law(law: ModulusLaw, s: float) -> ModulusLaw:
    if law.kind == "linear":
        return linear_law(law.modulus * s)
    if law.kind == "hyperbolic":
        return hyperbolic_law(law.modulus * s, law.k)
    return table_law_from_points(law.table_extent, np.asarray(law.table_pressure) * s)


def fit_target_scale(model: ForceModel, target: np.ndarray, base: ModulusLaw) -> Fit:
    """Only the scale of ``base`` (its shape kept): the law's pressures times s."""
    s = fit_scale(model.exact_forces(base), target)
    law = scaled_law(base, s)
    return Fit(law, {**_law_parameters(law), "scale": s}, 1, 1)


def fit_hyperbolic(model: ForceModel, target: np.ndarray) -> Fit:
    """M0 in closed form for each K; K by a scan of [0, K_MAX] and a bounded Brent search."""
    from scipy.optimize import minimize_scalar

    e = np.clip(model.grid, 0.0, 1.0)
    evaluations = 0

    def cost(k: float) -> tuple[float, float]:
        nonlocal evaluations
        evaluations += 1
        G = model.matrix @ (e / (1.0 - k * e))
        m0 = fit_scale(G, target)
        r = _relative(m0 * G, target)
        return float(r @ r), m0

    grid = np.linspace(0.0, K_MAX, 100)
    values = np.array([cost(k)[0] for k in grid])
    best = int(np.argmin(values))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    result = minimize_scalar(lambda k: cost(k)[0], bounds=(lo, hi), method="bounded",
                             options={"xatol": 1e-10})
    k = float(result.x) if result.fun <= values[best] else float(grid[best])
    m0 = cost(k)[1]
    return Fit(hyperbolic_law(m0, k), {"modulus": m0, "k": k}, evaluations, int(result.nit) + len(grid))


def default_knots(model: ForceModel, count: int = DEFAULT_KNOTS) -> np.ndarray:
    """Table extents for a fit: ``count`` points up to the deepest extent the contact reaches,
    spaced as (j/count)^1.5 (closer near the surface, where laws bend most). Force data integrate
    the law over the contact, so the table's first segments are pinned less tightly than its
    last ones (see the smoothness penalty)."""
    top = model.extent_reached()
    if not top > 0:
        raise BuildError("the contact never reaches below the part's surface at the data's depths",
                         fix="check the depths and --direction")
    return top * (np.arange(1, count + 1) / count) ** 1.5


def table_from_values(knots: np.ndarray, values: np.ndarray) -> ModulusLaw:
    """The table law through (0, 0), (knots_j, values_j); if the knots stop short of e = 1 the last
    segment's slope is carried on to e = 1 (a straight, monotone extension beyond the data)."""
    e = np.concatenate([[0.0], knots[knots > 0]])
    p = np.concatenate([[0.0], values])
    if e[-1] < 1.0:
        slope = (p[-1] - p[-2]) / (e[-1] - e[-2])
        e = np.append(e, 1.0)
        p = np.append(p, p[-1] + slope * (1.0 - e[-2]))
    if not p[-1] > 0:
        p[-1] = max(p[-1], 1e-12)
    return table_law_from_points(e, p)


def fit_table(model: ForceModel, target: np.ndarray, knots: np.ndarray | None = None,
              smoothness: float = DEFAULT_SMOOTHNESS) -> Fit:
    """Monotone table at ``knots`` (extents > 0, increasing): non-negative increments; NNLS start on
    piecewise-linear ramps, then least squares on the monotone-cubic table (the law the asset
    stores) with ``smoothness`` weighting the squared changes of slope between segments."""
    from scipy.optimize import least_squares, nnls

    if knots is None or isinstance(knots, (int, np.integer)):
        knots = default_knots(model) if knots is None else default_knots(model, int(knots))
    knots = np.asarray(knots, dtype=np.float64)
    knots = knots[knots > 0]
    n = len(knots)
    if n < 1 or np.any(np.diff(knots) <= 0) or knots[-1] > 1.0:
        raise OptionError("table knots must be increasing extents in (0, 1]", fix="give --knots E1,E2,... or a count")
    edges = np.concatenate([[0.0], knots])
    width = np.diff(edges)
    # ramps: p(e) = Σ δ_j ψ_j(e), ψ_j rises from 0 at knot j-1 to 1 at knot j (then stays 1;
    # beyond the last knot the last ramp continues with its slope, as table_from_values extends).
    def ramps(e: np.ndarray) -> np.ndarray:
        out = np.clip((e[:, None] - edges[None, :-1]) / width[None, :], 0.0, 1.0)
        out[:, -1] = np.maximum((e - edges[-2]) / width[-1], 0.0)
        return out

    A = model.basis(ramps) / target[:, None]
    smooth_rows = _slope_changes(width)                         # rows acting on increments δ
    lam = math.sqrt(smoothness) if smoothness > 0 else 0.0
    matrix = np.vstack([A, lam * smooth_rows * _increment_scale(A, target)]) if lam and n > 1 else A
    rhs = np.concatenate([np.ones(len(target)), np.zeros(matrix.shape[0] - len(target))])
    delta0, _ = nnls(matrix, rhs)
    if not np.any(delta0 > 0):
        raise BuildError("the table fit found no positive pressure", fix="check the data and the indenter placement")
    p_scale = float(np.cumsum(delta0)[-1])
    evaluations = 0

    def residuals(delta: np.ndarray) -> np.ndarray:
        nonlocal evaluations
        evaluations += 1
        values = np.cumsum(np.maximum(delta, 0.0))
        law = table_from_values(knots, values * p_scale)
        r = _relative(model.forces(law), target)
        if lam and n > 1:
            r = np.concatenate([r, lam * (smooth_rows @ delta) * _increment_scale(A * p_scale, target)])
        return r

    result = least_squares(residuals, delta0 / p_scale, bounds=(0.0, np.inf), x_scale=np.maximum(delta0 / p_scale, 1e-3),
                           xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=400)
    values = np.cumsum(np.maximum(result.x, 0.0)) * p_scale
    law = table_from_values(knots, values)
    return Fit(law, {"extent": [float(x) for x in law.table_extent],
                     "pressure": [float(x) for x in law.table_pressure],
                     "knots_fitted": int(n), "smoothness": float(smoothness)},
               evaluations, int(result.nfev))


def _slope_changes(width: np.ndarray) -> np.ndarray:
    """Rows giving slope_{j+1} − slope_j (times the mean width) from increments δ (slope = δ/width)."""
    n = len(width)
    rows = np.zeros((max(n - 1, 0), n))
    for j in range(n - 1):
        h = 0.5 * (width[j] + width[j + 1])
        rows[j, j] = -h / width[j]
        rows[j, j + 1] = h / width[j + 1]
    return rows


def _increment_scale(A: np.ndarray, target: np.ndarray) -> float:
    """Makes the penalty comparable with the relative data residuals: the data rows' typical
    sensitivity to one unit of increment."""
    return float(np.sqrt(np.mean(np.sum(A * A, axis=1)))) or 1.0


def _law_parameters(law: ModulusLaw) -> dict[str, Any]:
    meta = law.to_metadata()
    meta.pop("unit", None)
    return meta


def fit_law(kind: str, model: ForceModel, target: np.ndarray, *, base: ModulusLaw | None = None,
            knots: np.ndarray | None = None, smoothness: float = DEFAULT_SMOOTHNESS) -> Fit:
    """Dispatch: ``linear``, ``hyperbolic``, ``table`` or ``scale`` (of ``base``)."""
    if kind == "linear":
        return fit_linear(model, target)
    if kind == "hyperbolic":
        return fit_hyperbolic(model, target)
    if kind == "table":
        return fit_table(model, target, knots, smoothness)
    if kind == "scale":
        return fit_target_scale(model, target, base)
    raise OptionError(f"unknown law {kind!r}", fix=f"use one of {', '.join(FIT_LAWS)}")


# ----------------------------------------------------------------------------- the layered asset

def layered_body(prepared: PreparedPart, law: ModulusLaw, tolerance: float):
    """The part layered for ``law`` (``fieldgen.material.layering.layer``, as the build does) as a runtime body."""
    from fieldgen.material.layering import layer
    from fieldgen.runtime.contact.geometries import CompliantBody

    layered = layer(prepared.mesh, prepared.extent, law, tolerance)
    body = CompliantBody.from_arrays(layered.mesh.points, layered.mesh.tets, layered.pressure,
                                     extent=layered.extent, modulus=law.modulus, name="part")
    return body, layered


def default_tolerance(law: ModulusLaw) -> float:
    """The build's default layer tolerance, 1% of max p0. Tighter tolerances multiply the tets
    (every level cuts every tet it crosses); the defect correction already makes the layered asset
    match the data at the data's depths, a tighter ``--layer-tolerance`` brings the law itself
    closer to the one the ideal (unlayered) integral would fit."""
    return 0.01 * law.max_pressure


# ----------------------------------------------------------------------------- the whole job

@dataclass
class CalibrationResult:
    output: str
    law: dict[str, Any]
    parameters: dict[str, Any]
    depth: list[float]
    force: list[float]
    predicted: list[float]
    rms_residual: float               #: N
    max_residual: float               #: N
    rms_relative_residual: float
    max_relative_residual: float
    fit_rms_relative_residual: float  #: the final law's ideal forces (unlayered surface integral) vs data
    iterations: int
    evaluations: int
    corrections: int
    layer_tolerance: float
    tets: int
    touch: list[float]
    indenter: dict[str, Any]
    seconds: dict[str, float]
    png: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def calibrate(input_path: str, output_path: str, options, *, indenter_text: str, direction, at=None,
              data: Data, law_kind: str | None = None, targets: bool = False, knots=None,
              smoothness: float = DEFAULT_SMOOTHNESS, layer_tolerance: float | None = None,
              length_scale: float = 1.0, png: str | None = None,
              progress: Progress | None = None) -> CalibrationResult:
    """Fit the law of the part in ``input_path`` (built with ``options``) to ``data`` and write the
    calibrated asset to ``output_path`` (and the fit plot to ``png``). See the module docstring."""
    from fieldgen.pipeline import build, make_law
    from fieldgen.calibrate.indenter import Press, parse_indenter, unit_direction
    from fieldgen.runtime.contact.geometries import CompliantBody

    progress = progress or Progress(enabled=False)
    start = time.perf_counter()
    if not str(output_path).endswith(".vtu"):
        raise OptionError(f"output {output_path!r} does not end in .vtu", fix="name the asset FILE.vtu")
    if png is not None and not str(png).endswith(".png"):
        raise OptionError(f"--png {png!r} does not end in .png", fix="name the plot FILE.png")
    u = unit_direction(direction)
    if targets:
        kind = law_kind or "scale"
    else:
        kind = law_kind or options.resolved_law()
    if kind not in FIT_LAWS + ("scale",):
        raise OptionError(f"unknown law {kind!r}", fix=f"use one of {', '.join(FIT_LAWS)}")
    base = make_law(options) if kind == "scale" else None
    fitted = data.fitted
    needed = {"linear": 1, "scale": 1, "hyperbolic": 2, "table": 2}[kind]
    if int(fitted.sum()) < needed:
        raise OptionError(f"the {kind} law has {needed} parameters but only {int(fitted.sum())} point(s) are given",
                          fix="give more data points or fit a law with fewer parameters")

    prepared = prepare_part(input_path, options, progress)
    part = geometry_body(prepared.mesh, prepared.extent)
    lo, hi = part.points.min(axis=0), part.points.max(axis=0)
    line_point = 0.5 * (lo + hi) if at is None else np.asarray(at, dtype=np.float64) * length_scale
    depths = data.depth[fitted]
    target = data.force[fitted]
    with progress.stage("indenter"):
        indenter = parse_indenter(indenter_text, scale=length_scale, reach=float(depths.max()),
                                  part_size=float(np.linalg.norm(hi - lo)), units=_length_name(length_scale))
        press = Press(part, indenter, u, line_point)
    with progress.stage("contact surfaces"):
        model = force_model(press, prepared, depths)
    empty = np.flatnonzero(model.faces == 0)
    if empty.size:
        raise InputError(f"the indenter does not reach the part at depth {depths[empty[0]]:g} m",
                         path=data.source, fix="check --at and --direction")

    with progress.stage("fit"):
        fit = fit_law(kind, model, target, base=base, knots=knots, smoothness=smoothness)
    tolerance = layer_tolerance if layer_tolerance is not None else (
        options.layer_tolerance if options.layer_tolerance is not None else None)
    relative_tolerance = tolerance is None
    corrections = 0
    evaluations = fit.evaluations
    iterations = fit.iterations
    warnings: list[str] = []
    nonlinear = fit.law.kind != "linear" and not (fit.law.kind == "hyperbolic" and fit.law.k == 0.0)
    if nonlinear:
        # Defect correction against the layered mesh the asset will have (module docstring, 4).
        goal = target.copy()
        with progress.stage("layered check"):
            for corrections in range(1, MAX_CORRECTIONS + 1):
                tol = default_tolerance(fit.law) if relative_tolerance else tolerance
                body, _ = layered_body(prepared, fit.law, tol)
                layered = press.forces(depths, body)
                defect = layered - model.forces(fit.law)
                mismatch = np.max(np.abs(layered / target - 1.0))
                progress.message(f"layered check {corrections}: largest force mismatch {100 * mismatch:.3f}%")
                if mismatch < CORRECTION_TOLERANCE:
                    break
                goal = target - defect
                if np.any(goal <= 0):
                    warnings.append("the layered asset's forces differ from the law's by more than the data; "
                                    "a smaller --layer-tolerance helps")
                    break
                refit = fit_law(kind, model, goal, base=base, knots=knots, smoothness=smoothness)
                evaluations += refit.evaluations
                iterations += refit.iterations
                fit = refit
    tol_final = (default_tolerance(fit.law) if relative_tolerance else tolerance) if nonlinear else (
        tolerance if tolerance is not None else None)
    if nonlinear and tol_final is not None:
        peak = float(fit.law.pressure(np.array([model.extent_reached(int(np.argmin(depths)))]))[0])
        if tol_final > 0.1 * peak:
            warnings.append(f"the layer tolerance {tol_final:.4g} Pa is large against the contact pressures "
                            f"({peak:.4g} Pa at the shallowest depth): the fitted law is bent to make up for the "
                            f"layers' interpolation error; --layer-tolerance {0.02 * peak:.3g} keeps it closer "
                            "to the ideal law (at the cost of more tets)")
    fit_r = _relative(model.exact_forces(fit.law), target)     # the final law's ideal (unlayered) forces

    # Write the asset with the real build, then measure it.
    parameters = {k: v for k, v in fit.parameters.items()}
    calibration_meta = {
        "data": ({"file": Path(data.source).name, "sha256": data.sha256, "units": data.units,
                  "rows": int(len(data.depth))} if data.source is not None else
                 {"targets": [[float(d), float(f)] for d, f in zip(data.depth, data.force)]}),
        "indenter": {**indenter.describe(), "direction": [float(x) for x in u],
                     "touch": [float(x) for x in press.touch]},
        "fitted": kind, "parameters": _jsonable(parameters),
    }
    with tempfile.TemporaryDirectory() as folder:
        new = {"law": fit.law.kind, "modulus": None, "k": None, "table": None, "layer_tolerance": tol_final}
        if fit.law.kind == "table":
            table_path = os.path.join(folder, "calibrated_table.csv")
            np.savetxt(table_path, np.column_stack([fit.law.table_extent, fit.law.table_pressure]),
                       delimiter=",", fmt="%.17g", header="extent,pressure_pa", comments="")
            new["table"] = table_path
        else:
            new["modulus"] = fit.law.modulus
            new["k"] = fit.law.k if fit.law.kind == "hyperbolic" else None
        build_options = dataclasses.replace(options, **new)
        # The residuals are measured on the written asset; they go into its metadata after a
        # measurement on the identical in-memory arrays (the build is deterministic).
        with progress.stage("measure"):
            tol_used = tol_final if tol_final is not None else 0.01 * fit.law.max_pressure
            body, layered = layered_body(prepared, fit.law, tol_used)
            predicted = press.forces(depths, body)
        residual = predicted - target
        relative = residual / target
        calibration_meta["residual"] = {
            "rms_force": float(np.sqrt(np.mean(residual ** 2))), "max_force": float(np.max(np.abs(residual))),
            "rms_relative": float(np.sqrt(np.mean(relative ** 2))), "max_relative": float(np.max(np.abs(relative))),
            "unit": "N"}
        with progress.stage("build"):
            result = build(input_path, output_path, build_options, progress=Progress(enabled=False),
                           extra_metadata={"calibration": calibration_meta}, meshed=prepared.meshed)
    warnings += result.warnings
    with progress.stage("verify"):
        asset_body = CompliantBody.from_asset(output_path)
        measured = press.forces(depths, asset_body)
    if not np.allclose(measured, predicted, rtol=1e-9, atol=0.0):
        warnings.append("the written asset's forces differ from the fitted mesh's "
                        f"(largest relative difference {np.max(np.abs(measured / predicted - 1)):.3g})")
    residual = measured - target
    relative = residual / target
    seconds = {**progress.stage_seconds, "total": time.perf_counter() - start}
    out = CalibrationResult(
        output=str(output_path), law=fit.law.to_metadata(), parameters=_jsonable(parameters),
        depth=[float(x) for x in depths], force=[float(x) for x in target], predicted=[float(x) for x in measured],
        rms_residual=float(np.sqrt(np.mean(residual ** 2))), max_residual=float(np.max(np.abs(residual))),
        rms_relative_residual=float(np.sqrt(np.mean(relative ** 2))),
        max_relative_residual=float(np.max(np.abs(relative))),
        fit_rms_relative_residual=float(np.sqrt(np.mean(fit_r ** 2))),
        iterations=int(iterations), evaluations=int(evaluations), corrections=int(corrections),
        layer_tolerance=float(tol_used),
        tets=int(result.tets), touch=[float(x) for x in press.touch], indenter=calibration_meta["indenter"],
        seconds={k: round(v, 4) for k, v in seconds.items()}, png=png,
        warnings=warnings)
    if png is not None:
        with progress.stage("plot"):
            write_plot(png, out, data)
    return out


def _length_name(scale: float) -> str:
    for name, value in LENGTH_UNITS.items():
        if value == scale:
            return name
    return "m"


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value)
    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return int(value)
    return value


def write_plot(path: str, result: CalibrationResult, data: Data) -> None:
    """Measured and predicted force against depth, and the relative residuals (PNG, atomic)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fieldgen.io.asset import atomic_output

    depth = np.array(result.depth) * 1e3
    force = np.array(result.force)
    predicted = np.array(result.predicted)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 6.0), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1.4]})
    top.plot(depth, force, "o", label="data" if data.source else "target", color="black", markersize=4)
    top.plot(depth, predicted, "-", label=f"calibrated asset ({result.law['kind']})", color="tab:blue")
    top.set_ylabel("force (N)")
    top.legend(loc="upper left")
    top.grid(alpha=0.3)
    top.set_title(f"fieldgen calibrate: RMS {100 * result.rms_relative_residual:.2f}%, "
                  f"max {100 * result.max_relative_residual:.2f}%")
    bottom.axhline(0.0, color="grey", linewidth=0.8)
    bottom.plot(depth, 100 * (predicted / force - 1), "o-", color="tab:red", markersize=3)
    bottom.set_ylabel("residual (%)")
    bottom.set_xlabel("depth (mm)")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_output(path) as temporary:
        fig.savefig(temporary, format="png", dpi=110)
    plt.close(fig)
