"""What a calibration reports: the result (the CLI prints it, ``--json`` as is), the record stored
in the calibrated asset's metadata, and the fit plot."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fieldgen.calibrate.data import Data
from fieldgen.io.asset import atomic_output


@dataclass
class CalibrationResult:
    """A calibration's outcome: the fitted law, the forces on the written asset and their
    residuals against the data, and the work done."""

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
    #: the ideal law's parameters as the data determine them, with standard uncertainties
    #: (:meth:`fieldgen.calibrate.uncertainty.Determined.to_metadata`)
    determined: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the ``--json`` report)."""
        return dataclasses.asdict(self)


def residual_summary(forces: np.ndarray, target: np.ndarray) -> dict[str, Any]:
    """RMS and largest residual of ``forces`` against ``target``, in N and relative."""
    residual = forces - target
    relative = residual / target
    return {"rms_force": float(np.sqrt(np.mean(residual ** 2))), "max_force": float(np.max(np.abs(residual))),
            "rms_relative": float(np.sqrt(np.mean(relative ** 2))), "max_relative": float(np.max(np.abs(relative))),
            "unit": "N"}


def calibration_record(data: Data, press, direction: np.ndarray, kind: str, parameters: dict[str, Any],
                       residual: dict[str, Any], determined: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``calibration`` record of the asset's metadata: the data (file and digest, or the
    targets), the indenter, the unit ``direction`` it is pushed along and its first contact, the
    law fitted and its parameters, the residuals (:func:`residual_summary`) of the layered part,
    and what the data determine (the ideal law's parameters with their standard uncertainties)."""
    return {
        "data": ({"file": Path(data.source).name, "sha256": data.sha256, "units": data.units,
                  "rows": int(len(data.depth)),
                  **({} if data.rows_read is None else {"rows_read": int(data.rows_read)})} if data.source is not None else
                 {"targets": [[float(d), float(f)] for d, f in zip(data.depth, data.force)]}),
        "indenter": {**press.indenter.describe(), "direction": [float(x) for x in direction],
                     "touch": [float(x) for x in press.touch]},
        "fitted": kind, "parameters": jsonable(parameters), "residual": residual,
        "determined": determined or {},
    }


def jsonable(value):
    """``value`` with numpy scalars and arrays as plain floats, ints and lists."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [jsonable(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value)
    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return int(value)
    return value


def write_plot(path: str, result: CalibrationResult, data: Data) -> None:
    """Measured and predicted force against depth, and the relative residuals (PNG, atomic)."""
    import matplotlib  # lazy: optional extra (the plot is written only with --png)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: optional extra, after choosing the Agg backend

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
