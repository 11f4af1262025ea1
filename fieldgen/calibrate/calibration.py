"""Calibration: the modulus law that makes fieldgen's own contact model reproduce an indentation.

Given a part (a build spec), a rigid indenter pressed along a direction, and a measured loading
curve (depth, force) — or design targets — find the law ``p0(e)`` (D 5.1.2; docs/model.md §2.3)
whose built asset, under the runtime's contact model (D 5.0.2; docs/model.md §3.2, §4.5), gives
those forces, and write that asset with the calibration in its metadata.

Calibration runs the build's own stages, each once, without rebuilding per evaluation:

1. The part is meshed and its extent field solved once, by the build's front stages
   (:func:`fieldgen.calibrate.part.prepare_part`). The extent does not depend on the law.
2. The indenter is placed at first contact (:mod:`fieldgen.calibrate.indenter`) and, at each data
   depth, the runtime computes the contact surface on that mesh; the force of any law is a
   quadrature over those surfaces (:mod:`fieldgen.calibrate.forces`), which the fit
   (:mod:`fieldgen.calibrate.fit`) evaluates.
3. For a nonlinear law the asset is layered (docs/model.md §2.4) and the runtime interpolates
   ``p0`` linearly between layers, which under- or over-reads the law by up to the layer
   tolerance. So after the fit the mesh is layered with the fitted law, the runtime's forces on
   that layered mesh are computed, and the fit is repeated against the data minus that
   difference (defect correction) until the layered asset itself matches (at most
   ``MAX_CORRECTIONS`` rounds).
4. The asset is written by :func:`fieldgen.pipeline.build` on that same mesh with that same
   layering (one layering per fitted law), read back, and its runtime forces are what the
   report's residuals are computed from.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
import warnings as warnings_module
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fieldgen.calibrate.data import MAX_DATA_ROWS, Data, length_unit_name
from fieldgen.calibrate.fit import DEFAULT_SMOOTHNESS, FIT_LAWS, PARAMETER_COUNT, Fit, LawToFit, relative
from fieldgen.calibrate.forces import ForceModel, force_model
from fieldgen.calibrate.indenter import Press, parse_indenter, unit_direction
from fieldgen.calibrate.part import PreparedPart, geometry_body, prepare_part
from fieldgen.calibrate.uncertainty import Determined, determine, law_parameters
from fieldgen.calibrate.report import (CalibrationResult, calibration_record, jsonable, residual_summary,
                                       write_plot)
from fieldgen.errors import InputError, OptionError
from fieldgen.heap import kept_heap
from fieldgen.material.layering import LayeringResult, layer
from fieldgen.material.levels import LayerTolerance, relative_down_to
from fieldgen.material.modulus import MAX_TABLE_PRESSURE, ModulusLaw, is_linear, linear_law
from fieldgen.pipeline import build, make_law
from fieldgen.progress import Progress
from fieldgen.runtime.contact.geometries import CompliantGeometry
from fieldgen.runtime.contact.surface import PassThroughWarning
from fieldgen.threads import one_blas_thread
from fieldgen.units import LENGTH_UNITS

#: Defect-correction rounds against the layered mesh (nonlinear laws).
MAX_CORRECTIONS = 6
#: Stop correcting when the layered forces match the fitted ones this closely (relative).
CORRECTION_TOLERANCE = 2e-4
#: The default layer tolerance's relative bound is held down to this fraction of the largest
#: pressure of the shallowest contact (docs/model.md §2.4): a sphere's contact area is spread
#: evenly over its depths, so below a quarter of its peak lies about 1/16 of its force (linear law).
SHALLOW_FRACTION = 0.25


@dataclass(frozen=True)
class LayeredPart:
    """The part layered for one law as the build layers it, and the runtime's forces on it at the
    data's depths (N)."""

    law: ModulusLaw
    layering: LayeringResult
    forces: np.ndarray


def press_layered(press: Press, prepared: PreparedPart, law: ModulusLaw, tolerance: LayerTolerance,
                  depths: np.ndarray) -> LayeredPart:
    """Layer the part for ``law`` (:func:`fieldgen.material.layering.layer`, the build's layering
    stage) and press the layered part at ``depths``."""
    layering = layer(prepared.mesh, prepared.extent, law, tolerance)
    body = CompliantGeometry.from_arrays(layering.mesh.points, layering.mesh.tets, layering.pressure,
                                     extent=layering.extent, modulus=law.modulus, name="part")
    return LayeredPart(law, layering, press.forces(depths, body))


@dataclass(frozen=True)
class Corrected:
    """The fit after the defect correction against the layered part (module docstring, 3)."""

    fit: Fit
    corrections: int
    evaluations: int
    iterations: int
    layered: LayeredPart | None      #: the layering of ``fit.law``, when the last round made it
    warnings: tuple[str, ...]
    tolerance: LayerTolerance | None = None   #: the layer tolerance of every round (the first fit's law's)


def correct_for_layers(fit: Fit, law_to_fit: LawToFit, model: ForceModel, press: Press,
                       prepared: PreparedPart, target: np.ndarray, layer_options,
                       progress: Progress) -> Corrected:
    """Refit against the data minus the layering's force difference until the layered part
    matches the data (at most MAX_CORRECTIONS rounds). ``layer_options`` give the layer tolerance
    (``layer_tolerance_for``), taken once for the first fit's law and kept: a default tolerance
    that followed each refit's largest pressure would let the correction feed on itself (a
    stiffer law, coarser layers, a larger defect, a stiffer law ...). The default's relative bound
    is held down to the pressures of the shallowest contact (:func:`shallow_pressure`)."""
    evaluations, iterations = fit.evaluations, fit.iterations
    tolerance = relative_down_to(layer_options.layer_tolerance_for(fit.law),
                                 SHALLOW_FRACTION * shallow_pressure(fit.law, model))
    warnings: list[str] = []
    layered = None
    corrections = 0
    for corrections in range(1, MAX_CORRECTIONS + 1):
        layered = press_layered(press, prepared, fit.law, tolerance, model.depth)
        defect = layered.forces - model.forces(fit.law)
        mismatch = np.max(np.abs(layered.forces / target - 1.0))
        progress.message(f"layered check {corrections}: largest force mismatch {100 * mismatch:.3f}%")
        if mismatch < CORRECTION_TOLERANCE:
            break
        goal = target - defect
        if np.any(goal <= 0):
            warnings.append("the layered asset's forces differ from the law's by more than the data; "
                            "a smaller --layer-tolerance helps")
            break
        refit = law_to_fit.fit(model, goal)
        evaluations += refit.evaluations
        iterations += refit.iterations
        fit = refit
    return Corrected(fit, corrections, evaluations, iterations,
                     layered if layered is not None and layered.law is fit.law else None, tuple(warnings), tolerance)


def fit_and_correct(law_to_fit: LawToFit, model: ForceModel, target: np.ndarray, press: Press,
                    prepared: PreparedPart, layer_options, progress: Progress) -> tuple[Corrected, Determined]:
    """The ideal law fitted to the data, what the data determine of it (its parameters' standard
    uncertainties, :mod:`fieldgen.calibrate.uncertainty`), and, for a nonlinear law, the fit
    corrected for the layers (:func:`correct_for_layers`)."""
    with progress.stage("fit"):
        fit = law_to_fit.fit(model, target)
        determined = determine(law_to_fit.kind, fit.parameters, fit.law, model, target)
    if is_linear(fit.law):
        return Corrected(fit, 0, fit.evaluations, fit.iterations, None, (),
                         layer_options.layer_tolerance_for(fit.law)), determined
    with progress.stage("layered check"):
        return correct_for_layers(fit, law_to_fit, model, press, prepared, target, layer_options, progress), determined


def shallow_pressure(law: ModulusLaw, model: ForceModel) -> float:
    """The largest pressure of ``law`` on the shallowest depth's contact surface (Pa)."""
    return float(law.pressure(np.array([model.extent_reached(int(np.argmin(model.depth)))]))[0])


def tolerance_warning(law: ModulusLaw, tolerance: LayerTolerance, model: ForceModel) -> list[str]:
    """A warning when the layer tolerance is large against the pressures at the shallowest depth:
    the fit then bends the law to make up for the layers' interpolation error."""
    peak = shallow_pressure(law, model)
    # A default tolerance is relative to the local pressure (docs/model.md §2.4): what it allows there.
    allowed = float(tolerance.at(peak))
    if not allowed > 0.1 * peak:
        return []
    return [f"the layer tolerance {allowed:.4g} Pa is large against the contact pressures "
            f"({peak:.4g} Pa at the shallowest depth): the fitted law is bent to make up for the "
            f"layers' interpolation error; --layer-tolerance {0.02 * peak:.3g} keeps it closer "
            "to the ideal law (at the cost of more tets)"]


def fitted_options(options, law: ModulusLaw, layer_tolerance: float | None, folder: str):
    """``options`` with the fitted ``law`` (a table written as a CSV into ``folder``) and
    ``layer_tolerance`` (Pa, or None for the default rule, which stays relative to the local
    pressure when a spec is rebuilt from these options: docs/model.md §2.4)."""
    new = {"law": law.kind, "modulus": None, "k": None, "table": None, "layer_tolerance": layer_tolerance}
    if law.kind == "table":
        table_path = os.path.join(folder, "calibrated_table.csv")
        np.savetxt(table_path, np.column_stack([law.table_extent, law.table_pressure]),
                   delimiter=",", fmt="%.17g", header="extent,pressure_pa", comments="")
        new["table"] = table_path
    else:
        new["modulus"] = law.modulus
        new["k"] = law.k if law.kind == "hyperbolic" else None
    return dataclasses.replace(options, **new)


def _law_to_fit(options, data: Data, law_kind: str | None, targets: bool, knots, smoothness: float) -> LawToFit:
    """What to fit, checked against the number of data points."""
    kind = law_kind or ("scale" if targets else options.resolved_law())
    if kind not in FIT_LAWS + ("scale",):
        raise OptionError(f"unknown law {kind!r}", fix=f"use one of {', '.join(FIT_LAWS)}")
    base = make_law(options) if kind == "scale" else None
    needed, given = PARAMETER_COUNT[kind], int(data.fitted.sum())
    if given < needed:
        raise OptionError(f"the {kind} law has {needed} parameters but only {given} point(s) are given",
                          fix="give more data points or fit a law with fewer parameters")
    return LawToFit(kind, base, knots, smoothness)


def _place_indenter(prepared: PreparedPart, indenter_text: str, direction: np.ndarray, at, length_scale: float,
                    depths: np.ndarray, progress: Progress) -> Press:
    """The indenter at first contact, its axis through ``at`` (default the part's box centre)."""
    part = geometry_body(prepared.mesh, prepared.extent)
    lo, hi = part.points.min(axis=0), part.points.max(axis=0)
    line_point = 0.5 * (lo + hi) if at is None else np.asarray(at, dtype=np.float64) * length_scale
    with progress.stage("indenter"):
        indenter = parse_indenter(indenter_text, scale=length_scale, reach=float(depths.max()),
                                  part_size=float(np.linalg.norm(hi - lo)), units=length_unit_name(length_scale))
        return Press(part, indenter, direction, line_point)


def _check_outputs(output_path: str, png: str | None) -> None:
    if not str(output_path).endswith(".vtu"):
        raise OptionError(f"output {output_path!r} does not end in .vtu", fix="name the asset FILE.vtu")
    if png is not None and not str(png).endswith(".png"):
        raise OptionError(f"--png {png!r} does not end in .png", fix="name the plot FILE.png")


def _force_model(press: Press, prepared: PreparedPart, depths: np.ndarray, data: Data,
                 progress: Progress, notes: list[str]) -> ForceModel:
    """The force model; refused when every depth reaches the rigid core (bonded back or core:
    D 5.1.2, the force stops growing), a line in ``notes`` when some do."""
    with progress.stage("contact surfaces"), warnings_module.catch_warnings(record=True) as caught:
        warnings_module.simplefilter("always", PassThroughWarning)
        model = force_model(press, prepared, depths)
    passed = sum(issubclass(w.category, PassThroughWarning) for w in caught)
    direction = ",".join(f"{x:g}" for x in press.direction)
    if passed >= len(depths):
        raise InputError(f"pushed along --direction {direction}, the indenter passes through the compliant "
                         "layer to the rigid core or bonded back at every depth, where the force no longer "
                         "grows with depth", path=data.source,
                         fix="push from the free side (reverse --direction), or use shallower depths")
    if passed:
        notes.append(f"the indenter reaches the rigid core or bonded back at {passed} of {len(depths)} depths "
                     f"(along --direction {direction}): the force there no longer grows with depth")
    empty = np.flatnonzero(model.faces == 0)
    if empty.size:
        raise InputError(f"the indenter does not reach the part at depth {depths[empty[0]]:g} m",
                         path=data.source, fix="check --at and --direction")
    pushing = model.forces(linear_law(1.0))      # N per Pa of a linear law: positive wherever it presses
    limp = np.flatnonzero(~(pushing > 0.0))
    if limp.size:
        raise InputError(f"the indenter's contact at depth {depths[limp[0]]:g} m pushes back with no force "
                         f"({pushing[limp[0]]:.3g} N per Pa of modulus): it makes no contact a law can be fitted to "
                         f"(depths and the indenter read as {data.units})", path=data.source,
                         fix="check the indenter's size and the length unit (--units), --at and --direction")
    return model


def thinned_note(data: Data) -> list[str]:
    """The warning that a long log was thinned (:func:`fieldgen.calibrate.data.thinned`), naming
    the rows read and the depths kept; none otherwise."""
    if data.rows_read is None:
        return []
    depths = data.depth[data.fitted]
    unit = data.units.split(",")[0]
    scale = LENGTH_UNITS[unit]
    return [f"{Path(data.source).name} has {data.rows_read} rows; the fit takes at most {MAX_DATA_ROWS} depths "
            f"(each depth a contact query: a longer log takes hours), so it used {int(data.fitted.sum())} rows: those "
            f"nearest to {MAX_DATA_ROWS} depths spread evenly from {depths[0] / scale:g} to {depths[-1] / scale:g} "
            f"{unit}, and for any of those depths that shared a row, those nearest the middles of the widest gaps left"]


def _check_fitted_stiffness(law: ModulusLaw, data: Data) -> None:
    """InputError when the fitted law presses harder than any solid (above ``MAX_TABLE_PRESSURE``,
    the limit a given modulus has): the data's forces are far too large for their depths, most
    likely in other units than the ones read, and the asset would be meaningless."""
    if law.max_pressure > MAX_TABLE_PRESSURE:
        source = "the targets" if data.source is None else "the data"
        raise InputError(f"the law fitted to {source} reaches {law.max_pressure:.3g} Pa, above "
                         f"{MAX_TABLE_PRESSURE:g} Pa, stiffer than any solid: the forces are far too large for "
                         f"their depths (read as {data.units})", path=data.source,
                         fix="check the data's units (--units, e.g. depths in mm) and that the indenter and "
                             "the part are the ones measured")


@one_blas_thread
@kept_heap
def calibrate(input_path: str, output_path: str, options, *, indenter_text: str, direction, at=None,
              data: Data, law_kind: str | None = None, targets: bool = False, knots=None,
              smoothness: float = DEFAULT_SMOOTHNESS, layer_tolerance: float | None = None,
              length_scale: float = 1.0, png: str | None = None,
              progress: Progress | None = None) -> CalibrationResult:
    """Fit the law of the part in ``input_path`` (built with ``options``) to ``data`` and write the
    calibrated asset to ``output_path`` (and the fit plot to ``png``). See the module docstring."""
    progress = progress or Progress(enabled=False)
    start = time.perf_counter()
    _check_outputs(output_path, png)
    u = unit_direction(direction)
    law_to_fit = _law_to_fit(options, data, law_kind, targets, knots, smoothness)
    prepared = prepare_part(input_path, options, progress)
    depths, target = data.depth[data.fitted], data.force[data.fitted]
    press = _place_indenter(prepared, indenter_text, u, at, length_scale, depths, progress)
    notes: list[str] = thinned_note(data)
    model = _force_model(press, prepared, depths, data, progress, notes)
    tolerance = layer_tolerance if layer_tolerance is not None else options.layer_tolerance
    layer_options = dataclasses.replace(options, layer_tolerance=tolerance)   # the build's tolerance rule
    corrected, determined = fit_and_correct(law_to_fit, model, target, press, prepared, layer_options, progress)
    fit, tol_used = corrected.fit, corrected.tolerance
    _check_fitted_stiffness(fit.law, data)
    nonlinear = not is_linear(fit.law)
    warnings = notes + list(corrected.warnings) + determined.warnings()
    if nonlinear:
        warnings += tolerance_warning(fit.law, tol_used, model)
        warnings += determined.bent_warnings(*law_parameters(law_to_fit.kind, fit.parameters, fit.law)[1:])
    fit_r = relative(model.forces(fit.law), target)     # the final law's ideal (unlayered) forces
    parameters = dict(fit.parameters)
    # The residuals are measured on the layered part the build writes (the same layering).
    with progress.stage("measure"):
        layered = corrected.layered or press_layered(press, prepared, fit.law, tol_used, depths)
    record = calibration_record(data, press, u, law_to_fit.kind, parameters, residual_summary(layered.forces, target),
                                determined.to_metadata())
    with tempfile.TemporaryDirectory() as folder:
        build_options = fitted_options(options, fit.law, tolerance, folder)    # None: the default rule
        with progress.stage("build"):
            result = build(input_path, output_path, build_options, progress=Progress(enabled=False),
                           extra_metadata={"calibration": record}, meshed=prepared.meshed,
                           layered=layered.layering)
    warnings += result.warnings
    with progress.stage("verify"):
        measured = press.forces(depths, CompliantGeometry.from_asset(output_path))
    if not np.allclose(measured, layered.forces, rtol=1e-9, atol=0.0):
        warnings.append("the written asset's forces differ from the fitted mesh's "
                        f"(largest relative difference {np.max(np.abs(measured / layered.forces - 1)):.3g})")
    residual = residual_summary(measured, target)
    seconds = {**progress.stage_seconds, "total": time.perf_counter() - start}
    out = CalibrationResult(
        output=str(output_path), law=fit.law.to_metadata(), parameters=jsonable(parameters),
        depth=[float(x) for x in depths], force=[float(x) for x in target], predicted=[float(x) for x in measured],
        rms_residual=residual["rms_force"], max_residual=residual["max_force"],
        rms_relative_residual=residual["rms_relative"], max_relative_residual=residual["max_relative"],
        fit_rms_relative_residual=float(np.sqrt(np.mean(fit_r ** 2))),
        iterations=int(corrected.iterations), evaluations=int(corrected.evaluations),
        corrections=int(corrected.corrections), layer_tolerance=float(layer_options.layer_tolerance_for(fit.law)),   # as the asset records it
        tets=int(result.tets), touch=[float(x) for x in press.touch], indenter=record["indenter"],
        seconds={k: round(v, 4) for k, v in seconds.items()}, png=png, warnings=warnings,
        determined=determined.to_metadata())
    if png is not None:
        with progress.stage("plot"):
            write_plot(png, out, data)
    return out
