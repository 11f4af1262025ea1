"""What the data determine: the standard uncertainty of each fitted parameter of the law
(docs/model.md §2.3, "What the data determine").

The law the data determine is the ideal (unlayered) law fitted to the data by the force model's
quadrature (:class:`fieldgen.calibrate.forces.ForceModel`). Its parameters θ minimise the sum of
squared relative residuals ``r_i = F_i(θ)/F_data,i − 1``; with ``J = ∂r/∂θ`` at the fit and
``s² = Σ r_i² / (n − p)`` (n depths, p parameters), the covariance is ``s² (JᵀJ)⁻¹`` (the
Gauss–Newton linearisation, as for any least-squares fit), and the standard uncertainty of θ_j is
the square root of its diagonal. A parameter is *not determined* to ``DETERMINED_TO`` when its
relative standard uncertainty is larger; then the forces barely change with it over the extents
the indentations reach (for the hyperbolic K, data that stay at small extent), and a warning names
it, with how much a 1% change of it moves the forces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fieldgen.calibrate.forces import ForceModel
from fieldgen.material.modulus import ModulusLaw, table_law_from_points

#: A parameter is determined when its relative standard uncertainty is at most this.
DETERMINED_TO = 0.01
#: Relative step of the central differences for a table's pressures.
TABLE_STEP = 1e-6
#: (JᵀJ) with a larger condition number (after scaling its columns) leaves parameters undetermined.
MAX_CONDITION = 1e12


@dataclass(frozen=True)
class Determined:
    """The law's parameters as the data determine them, with standard uncertainties."""

    names: tuple[str, ...]
    values: np.ndarray            #: the ideal law's fitted parameters
    uncertainty: np.ndarray       #: standard uncertainties (inf: not determined at all)
    force_change: np.ndarray      #: largest relative force change of a 1% change of each parameter
    residual: float               #: s, the relative residuals' RMS over n − p degrees of freedom
    dof: int                      #: n − p

    def relative(self) -> np.ndarray:
        """Relative standard uncertainties (inf where a value is 0 or undetermined)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out = self.uncertainty / np.abs(self.values)
        return np.where(np.isfinite(out), out, np.inf)

    def to_metadata(self) -> dict:
        """The ``determined`` record (``--json`` and the asset's ``calibration``; README)."""
        parameters = {}
        for name, value, u, rel, change in zip(self.names, self.values, self.uncertainty, self.relative(),
                                               self.force_change):
            parameters[name] = {"value": float(value),
                                "standard_uncertainty": float(u) if np.isfinite(u) else None,
                                "relative_uncertainty": float(rel) if np.isfinite(rel) else None,
                                "force_change_per_percent": float(change) if np.isfinite(change) else None}
        residual = float(self.residual) if np.isfinite(self.residual) else None     # None: no degrees of freedom
        return {"parameters": parameters, "residual": residual, "degrees_of_freedom": int(self.dof),
                "determined_to": DETERMINED_TO}

    def warnings(self) -> list[str]:
        """One warning per parameter the data do not determine to DETERMINED_TO, naming it. None
        for as many points as parameters (design targets): they fix the law exactly, and give no
        residual to estimate an uncertainty from (its ``standard_uncertainty`` is then None)."""
        out = []
        if self.dof == 0:
            return out
        for name, value, u, rel, change in zip(self.names, self.values, self.uncertainty, self.relative(),
                                               self.force_change):
            if rel <= DETERMINED_TO:
                continue
            spread = (f"{name} = {value:.6g} ± {u:.3g} (standard uncertainty, {100 * rel:.3g}%)"
                      if np.isfinite(rel) else f"{name} = {value:.6g}, with no finite uncertainty")
            out.append(f"the data do not determine {name} to {100 * DETERMINED_TO:g}%: {spread}; a 1% change of "
                       f"{name} changes the forces by at most {100 * change:.3g}% over these depths, so "
                       "indentations reaching larger extents (deeper), or more and less noisy points, are "
                       "needed to tell it")
        return out

    def bent_warnings(self, asset_values: np.ndarray) -> list[str]:
        """One warning per parameter of the asset's (layer-corrected) law that differs from what
        the data determine by more than twice its uncertainty and DETERMINED_TO: the law was bent
        to make up for the layers' interpolation error (docs/model.md §2.3)."""
        out = []
        for name, value, u, asset in zip(self.names, self.values, self.uncertainty, asset_values):
            if not abs(asset - value) > max(2.0 * u, DETERMINED_TO * abs(value)):
                continue
            out.append(f"the asset's law has {name} = {asset:.6g}, {100 * abs(asset / value - 1):.3g}% from the "
                       f"{name} = {value:.6g} ± {u:.3g} the data determine: it is bent to make up for the "
                       "layers' interpolation error at this layer tolerance (a smaller --layer-tolerance "
                       "brings the two together)")
        return out


def law_parameters(kind: str, parameters: dict, law: ModulusLaw) -> tuple[tuple[str, ...], np.ndarray]:
    """The fitted parameters' names and values: ``modulus`` (and ``k``), ``scale``, or a table's
    pressures at its knots (``p0(e=…)``)."""
    if kind == "table":
        n = int(parameters["knots_fitted"])
        e, p = law.table_extent[1:n + 1], law.table_pressure[1:n + 1]
        return tuple(f"p0(e={x:.4g})" for x in e), np.array(p, dtype=np.float64)
    names = {"linear": ("modulus",), "hyperbolic": ("modulus", "k"), "scale": ("scale",)}[kind]
    return names, np.array([float(parameters[n]) for n in names])


def force_jacobian(kind: str, law: ModulusLaw, values: np.ndarray, model: ForceModel) -> np.ndarray:
    """(depths, p) derivatives of the ideal forces ``F_i`` with respect to the parameters."""
    forces = model.forces(law)
    if kind in ("linear", "scale"):
        return (forces / values[0])[:, None]
    if kind == "hyperbolic":
        m0, k = values
        dk = m0 * model.basis(lambda e: (e * e / (1.0 - k * e) ** 2)[:, None])[:, 0]
        return np.column_stack([forces / m0, dk])
    return _table_jacobian(law, values, model)


def _table_jacobian(law: ModulusLaw, values: np.ndarray, model: ForceModel) -> np.ndarray:
    """Central differences of the forces in each of the table's knot pressures (the rest of the
    table, its end point at e = 1 included, kept)."""
    n = len(values)
    columns = []
    for j in range(n):
        step = TABLE_STEP * max(abs(values[j]), float(np.max(np.abs(values))))
        pair = []
        for sign in (1.0, -1.0):
            p = np.array(law.table_pressure, dtype=np.float64)
            p[j + 1] += sign * step
            pair.append(model.forces(table_law_from_points(law.table_extent, np.maximum.accumulate(p))))
        columns.append((pair[0] - pair[1]) / (2.0 * step))
    return np.column_stack(columns)


def determine(kind: str, parameters: dict, law: ModulusLaw, model: ForceModel, target: np.ndarray) -> Determined:
    """The parameters of ``law`` (fitted to ``target`` on ``model``, unlayered) with their
    standard uncertainties (module docstring)."""
    names, values = law_parameters(kind, parameters, law)
    residual = model.forces(law) / target - 1.0
    jacobian = force_jacobian(kind, law, values, model) / target[:, None]
    n, p = jacobian.shape
    dof = n - p
    s = float(np.sqrt(residual @ residual / dof)) if dof > 0 else float("inf")
    norms = np.linalg.norm(jacobian, axis=0)
    uncertainty = np.full(p, np.inf)
    if dof > 0 and np.all(norms > 0):
        scaled = jacobian / norms
        normal = scaled.T @ scaled
        if np.linalg.cond(normal) < MAX_CONDITION:
            uncertainty = s * np.sqrt(np.diag(np.linalg.inv(normal))) / norms
    change = np.max(np.abs(jacobian * (0.01 * values)[None, :]) / np.maximum(1.0 + residual, 1e-300)[:, None], axis=0)
    return Determined(names, values, uncertainty, change, s, dof)
