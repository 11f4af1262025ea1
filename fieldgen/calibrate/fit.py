"""The least-squares fits of a modulus law to forces (docs/model.md §2.3): each evaluation is the
quadrature of the law over the runtime's contact surfaces (:class:`fieldgen.calibrate.forces.ForceModel`).

Laws: ``linear`` (M0, closed-form least squares), ``hyperbolic`` (M0, K: M0 in closed form for
each K, K by a grid scan and a bounded scalar search), ``table`` (the pressures at the table's
extents, non-decreasing; a non-negative least-squares start on piecewise-linear ramps, then a
bounded least-squares fit of the monotone-cubic table itself, with a penalty on changes of slope
between segments). None of these needs a start guess: the scale enters linearly. ``scale``
(design targets) fits only the scale of a given law.

Residuals are relative, ``(F_model − F_data)/F_data``: forces span decades over a loading curve
and measurement noise is usually a fraction of the reading.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fieldgen.calibrate.forces import ForceModel
from fieldgen.errors import BuildError, OptionError
from fieldgen.material.modulus import ModulusLaw, hyperbolic_law, linear_law, scaled_law, table_law_from_points

FIT_LAWS = ("linear", "hyperbolic", "table")
#: Parameters of each law the fit can find (``scale``: of a given law's shape).
PARAMETER_COUNT = {"linear": 1, "scale": 1, "hyperbolic": 2, "table": 2}
DEFAULT_SMOOTHNESS = 1e-4
DEFAULT_KNOTS = 8
K_MAX = 0.995


@dataclass
class Fit:
    law: ModulusLaw
    parameters: dict[str, Any]
    evaluations: int
    iterations: int


def relative(forces: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Relative residuals ``F/F_data − 1``."""
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
    G = model.forces(linear_law(1.0))
    m0 = fit_scale(G, target)
    return Fit(linear_law(m0), {"modulus": m0}, 1, 1)


def fit_target_scale(model: ForceModel, target: np.ndarray, base: ModulusLaw) -> Fit:
    """Only the scale of ``base`` (its shape kept): the law's pressures times s."""
    s = fit_scale(model.forces(base), target)
    law = scaled_law(base, s)
    return Fit(law, {**_law_parameters(law), "scale": s}, 1, 1)


@dataclass
class _HyperbolicCost:
    """The relative least-squares cost of a stiffening K, with M0 in closed form for each K;
    counts its evaluations."""

    matrix: np.ndarray          #: ForceModel.matrix
    extent: np.ndarray          #: the model's grid, within [0, 1]
    target: np.ndarray
    evaluations: int = 0

    def __call__(self, k: float) -> tuple[float, float]:
        self.evaluations += 1
        G = self.matrix @ (self.extent / (1.0 - k * self.extent))
        m0 = fit_scale(G, self.target)
        r = relative(m0 * G, self.target)
        return float(r @ r), m0


def fit_hyperbolic(model: ForceModel, target: np.ndarray) -> Fit:
    """M0 in closed form for each K; K by a scan of [0, K_MAX] and a bounded Brent search."""
    from scipy.optimize import minimize_scalar  # lazy: scipy.optimize is heavy and only some laws need it

    cost = _HyperbolicCost(model.matrix, np.clip(model.grid, 0.0, 1.0), target)
    grid = np.linspace(0.0, K_MAX, 100)
    values = np.array([cost(k)[0] for k in grid])
    best = int(np.argmin(values))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    result = minimize_scalar(lambda k: cost(k)[0], bounds=(lo, hi), method="bounded",
                             options={"xatol": 1e-10})
    k = float(result.x) if result.fun <= values[best] else float(grid[best])
    m0 = cost(k)[1]
    return Fit(hyperbolic_law(m0, k), {"modulus": m0, "k": k}, cost.evaluations, int(result.nit) + len(grid))


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


def _ramps(e: np.ndarray, edges: np.ndarray, width: np.ndarray) -> np.ndarray:
    """The table's basis: p(e) = Σ δ_j ψ_j(e), ψ_j rises from 0 at knot j-1 to 1 at knot j (then
    stays 1; beyond the last knot the last ramp continues with its slope, as
    :func:`table_from_values` extends)."""
    out = np.clip((e[:, None] - edges[None, :-1]) / width[None, :], 0.0, 1.0)
    out[:, -1] = np.maximum((e - edges[-2]) / width[-1], 0.0)
    return out


@dataclass
class _TableResiduals:
    """Relative force residuals of the monotone-cubic table with increments ``δ`` (times
    ``p_scale``), then the weighted slope changes; counts its evaluations."""

    model: ForceModel
    target: np.ndarray
    knots: np.ndarray
    p_scale: float
    smooth_rows: np.ndarray | None  #: rows on δ giving the slope changes (None: no penalty)
    weight: float = 0.0             #: sqrt(smoothness)
    scale: float = 1.0              #: makes the penalty comparable with the data rows
    evaluations: int = 0

    def __call__(self, delta: np.ndarray) -> np.ndarray:
        self.evaluations += 1
        values = np.cumsum(np.maximum(delta, 0.0))
        law = table_from_values(self.knots, values * self.p_scale)
        r = relative(self.model.forces(law), self.target)
        if self.smooth_rows is not None:
            r = np.concatenate([r, self.weight * (self.smooth_rows @ delta) * self.scale])
        return r


def _table_knots(model: ForceModel, knots) -> np.ndarray:
    """The table's extents: given, or a count of (or by default) :func:`default_knots`."""
    if knots is None or isinstance(knots, (int, np.integer)):
        knots = default_knots(model) if knots is None else default_knots(model, int(knots))
    knots = np.asarray(knots, dtype=np.float64)
    knots = knots[knots > 0]
    if len(knots) < 1 or np.any(np.diff(knots) <= 0) or knots[-1] > 1.0:
        raise OptionError("table knots must be increasing extents in (0, 1]", fix="give --knots E1,E2,... or a count")
    return knots


def fit_table(model: ForceModel, target: np.ndarray, knots: np.ndarray | None = None,
              smoothness: float = DEFAULT_SMOOTHNESS) -> Fit:
    """Monotone table at ``knots`` (extents > 0, increasing): non-negative increments; NNLS start on
    piecewise-linear ramps, then least squares on the monotone-cubic table (the law the asset
    stores) with ``smoothness`` weighting the squared changes of slope between segments."""
    from scipy.optimize import least_squares, nnls  # lazy: scipy.optimize is heavy and only some laws need it

    knots = _table_knots(model, knots)
    n = len(knots)
    edges = np.concatenate([[0.0], knots])
    width = np.diff(edges)
    A = model.basis(functools.partial(_ramps, edges=edges, width=width)) / target[:, None]
    smooth_rows = _slope_changes(width)                         # rows acting on increments δ
    lam = math.sqrt(smoothness) if smoothness > 0 else 0.0
    matrix = np.vstack([A, lam * smooth_rows * _increment_scale(A, target)]) if lam and n > 1 else A
    rhs = np.concatenate([np.ones(len(target)), np.zeros(matrix.shape[0] - len(target))])
    delta0, _ = nnls(matrix, rhs)
    if not np.any(delta0 > 0):
        raise BuildError("the table fit found no positive pressure", fix="check the data and the indenter placement")
    p_scale = float(np.cumsum(delta0)[-1])
    if lam and n > 1:
        residuals = _TableResiduals(model, target, knots, p_scale, smooth_rows, lam,
                                    _increment_scale(A * p_scale, target))
    else:
        residuals = _TableResiduals(model, target, knots, p_scale, None)
    result = least_squares(residuals, delta0 / p_scale, bounds=(0.0, np.inf), x_scale=np.maximum(delta0 / p_scale, 1e-3),
                           xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=400)
    values = np.cumsum(np.maximum(result.x, 0.0)) * p_scale
    law = table_from_values(knots, values)
    return Fit(law, {"extent": [float(x) for x in law.table_extent],
                     "pressure": [float(x) for x in law.table_pressure],
                     "knots_fitted": int(n), "smoothness": float(smoothness)},
               residuals.evaluations, int(result.nfev))


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


@dataclass(frozen=True)
class LawToFit:
    """What a calibration fits: the law's kind (one of FIT_LAWS, or ``scale`` of ``base``), and for
    a table its knots (extents, a count, or None for :func:`default_knots`) and smoothness."""

    kind: str
    base: ModulusLaw | None = None
    knots: Any = None
    smoothness: float = DEFAULT_SMOOTHNESS

    def fit(self, model: ForceModel, target: np.ndarray) -> Fit:
        """The law of this kind whose forces on ``model`` best match ``target`` (:func:`fit_law`)."""
        return fit_law(self.kind, model, target, base=self.base, knots=self.knots, smoothness=self.smoothness)
