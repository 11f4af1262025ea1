"""`fieldgen calibrate`: fit the modulus law so fieldgen's contact model reproduces an indentation."""

from __future__ import annotations

import dataclasses
import math
import os
import warnings

import click

from fieldgen.options import COMMAND_LINE, LAWS, BuildOptions, checked_from, options_from_mapping, options_from_spec
from fieldgen.calibrate.curve_checks import check_depth_in_part, check_force_range, check_sphere_depth
from fieldgen.calibrate.data import FORCE_UNITS, length_unit_name, parse_targets, parse_units, read_data
from fieldgen.errors import OptionError
from fieldgen.io.surface_readers import read_triangles, size_warnings
from fieldgen.paths import check_distinct
from fieldgen.progress import Progress
from fieldgen.units import LENGTH_UNITS

from .common import EXIT_USAGE, check_outputs, check_suffix, json_option, print_json, quiet_option, reported_errors


def _vector(text: str | None, name: str):
    if text is None:
        return None
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 3 or not all(map(math.isfinite, values)):
        raise OptionError(f"--{name} {text!r} is not three numbers X,Y,Z", fix=f"give e.g. --{name} 0,0,-1")
    return values


def _direction(text: str) -> list[float]:
    """--direction as three numbers scaled to a largest component of 1 (a zero vector as given, for
    the calibration to refuse): 1e300,1e300,0 and 0,0,-1e-300 are directions, though their norms
    overflow or vanish."""
    values = _vector(text, "direction")
    largest = max(abs(x) for x in values)
    return [x / largest for x in values] if largest > 0 else values


def _checked_curve(targets, data, units, indenter, length_scale, outputs, inputs, part):
    """The data (read from ``data``) or the ``targets``, checked with the outputs, before the fit:
    outputs apart from the inputs and writable, forces in range, a sphere not pushed past its
    equator, no depth the part cannot take (:func:`check_depth_in_part`)."""
    with reported_errors():
        if targets is not None:
            check_force_range(targets, None)
        check_distinct(outputs, inputs)
        check_outputs(*outputs.values())          # before the fit, not after it
        curve = targets if targets is not None else read_data(data, units)
        if targets is None:
            check_force_range(curve, data)
    with reported_errors(EXIT_USAGE):
        check_sphere_depth(indenter, length_scale, curve)
    with reported_errors():
        check_depth_in_part(curve, data if targets is None else None, indenter, part)
    return curve


def _indenter_file(text: str) -> str | None:
    """The mesh file an ``--indenter`` names, or None for a shape (``sphere:R``, ``plane``, ...)."""
    return text if os.path.isfile(text) else None


def indenter_size_notes(indenter: str, length_scale: float) -> tuple[str, ...]:
    """The size warning of an ``--indenter`` mesh file, read in the length unit of ``--units``
    as the calibration reads it (docs/model.md §1.4); none for a shape."""
    path = _indenter_file(indenter)
    if path is None:
        return ()
    units = length_unit_name(length_scale)
    with reported_errors():                   # an unreadable or non-finite mesh: exit 1, before the fit
        vertices = read_triangles(path, units=units).vertices
    return size_warnings(vertices * LENGTH_UNITS[units], units, what=f"the indenter {path}",
                         fix="check the length unit of --units (the indenter mesh is read in it)")


#: The most table points --knots may ask for: each is a parameter the data must determine, and
#: the fit's basis is (data points x knots) in memory.
MAX_KNOTS = 100


def _knots(text: str | None):
    """A count of table points, or the extents of them; refused (exit 2) before any work when it
    is not one or asks for more than :data:`MAX_KNOTS`."""
    if text is None:
        return None
    fix = f"give a count from 2 to {MAX_KNOTS} or increasing extents in (0, 1], e.g. --knots 0.05,0.1,0.2"
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise OptionError(f"--knots {text!r} is not a list of extents", fix=fix) from None
    if len(values) == 1 and values[0] >= 2 and float(values[0]).is_integer():
        if values[0] > MAX_KNOTS:
            raise OptionError(f"--knots {text} asks for more than {MAX_KNOTS} table points", fix=fix)
        return int(values[0])
    if len(values) > MAX_KNOTS or not all(0 <= v <= 1 for v in values) or values[-1] <= 0 or any(
            b <= a for a, b in zip(values, values[1:])):
        raise OptionError(f"--knots {text!r} is not a count nor up to {MAX_KNOTS} increasing extents in (0, 1]",
                          fix=fix)
    return values


@click.command("calibrate")
@click.argument("input_path", metavar="INPUT", required=False, type=click.Path())
@click.option("--spec", type=click.Path(dir_okay=False), help="Build spec (TOML) of the part; its law is the start (and, with --target, the shape).")
@click.option("--indenter", "indenter", required=True,
              help="sphere:R, paraboloid:R, cylinder:R (flat punch), plane, or a closed rigid mesh file.")
@click.option("--at", help="X,Y,Z: the indenter's axis passes through this point (default: the part's bounding-box centre).")
@click.option("--direction", default="0,0,-1", show_default=True, help="X,Y,Z: the direction the indenter is pushed.")
@click.option("--data", type=click.Path(dir_okay=False), help="CSV depth, force of the loading branch (header optional).")
@click.option("--target", multiple=True, metavar="DEPTH:FORCE", help="Design point instead of data (repeatable): fit the scale of the spec's law.")
@click.option("--units", default="m,N", show_default=True,
              help=f"LENGTH[,FORCE] of --data, --target, --at and the indenter's radius ({'|'.join(LENGTH_UNITS)}, "
                   f"{'|'.join(FORCE_UNITS)}); a CSV header naming other units (depth_mm, force_N) is refused.")
@click.option("--law", type=click.Choice(LAWS), help="Law to fit (default: the spec's).")
@click.option("--knots", help="Table law: a count, or the extents E1,E2,... of the table's points (default 8 up to the deepest extent reached).")
@click.option("--smoothness", type=float, default=1e-4, show_default=True, help="Table law: weight of the slope-change penalty.")
@click.option("--layer-tolerance", type=float, help="Layer tolerance of the calibrated asset, Pa (default the spec's, else 1% of the local p0 down to the shallowest contact's pressures).")
@click.option("--mesh-units", type=click.Choice(list(LENGTH_UNITS)), help="Units of INPUT (default: the spec's, else m).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Calibrated asset to write (.vtu).")
@click.option("--png", type=click.Path(dir_okay=False), help="Also write the fit plot (measured vs predicted force, residuals).")
@json_option
@quiet_option
def calibrate_command(input_path, spec, indenter, at, direction, data, target, units, law, knots, smoothness,
                      layer_tolerance, mesh_units, output, png, as_json, quiet):
    """Fit the modulus law of a part so that fieldgen's own contact model reproduces a measured
    indentation (--data) or design targets (--target), and write the calibrated asset.

    \b
    Examples:
      fieldgen calibrate --spec assets/foam_pad.toml --indenter sphere:10 --units mm,N \\
          --data assets/press.csv --law hyperbolic -o pad_calibrated.vtu --png fit.png --json
      fieldgen calibrate --spec assets/foam_pad.toml --indenter plane --target 0.002:20 -o pad.vtu
    """
    # lazy: the calibration loads the build and the runtime, which the other commands do not need
    from fieldgen.calibrate.calibration import calibrate
    from fieldgen.calibrate.indenter import check_indenter_text  # lazy: loads the runtime's contact code

    check_suffix(png, "--png", ".png", "the fit plot")
    with reported_errors(EXIT_USAGE):
        options, spec_input = BuildOptions(), None
        if spec is not None:
            options, spec_input, _ = options_from_spec(spec)
        if mesh_units is not None:
            options = options_from_mapping({"units": mesh_units}, origin=COMMAND_LINE, base=options)
        input_path = input_path or spec_input
        if input_path is None:
            raise click.UsageError("no INPUT given (on the command line or as `input` in the spec)")
        if (data is None) == (not target):
            raise click.UsageError("give either --data CSV or --target DEPTH:FORCE (not both, not neither)")
        if target and law is not None:
            raise click.UsageError("--target fits only the scale of the spec's law; drop --law (set the law in the spec)")
        length_scale, _, _ = parse_units(units)
        check_indenter_text(indenter, length_scale)
        at_point = _vector(at, "at")
        direction_vector = _direction(direction)
        knot_values = _knots(knots)
        if not (math.isfinite(smoothness) and smoothness >= 0):
            raise OptionError(f"--smoothness must be >= 0, got {smoothness}", fix="give e.g. --smoothness 1e-4")
        if layer_tolerance is not None and not (math.isfinite(layer_tolerance) and layer_tolerance > 0):
            raise OptionError(f"--layer-tolerance must be positive, got {layer_tolerance}", fix="give Pa, e.g. 100")
        if target:
            curve = parse_targets(target, units)
            # The spec's law is the shape that is scaled; calibrate has no law flags of its own.
            if spec is None:
                raise OptionError("--target rescales the law of a build spec, and no --spec was given",
                                  fix="give --spec FILE.toml with the part's law (modulus, and k or table), "
                                      "or fit the law to a measured curve with --data CSV")
            try:
                options.checked()
            except OptionError as exc:
                raise OptionError(f"the spec's law cannot be rescaled: {exc.defect}", path=spec,
                                  fix="set modulus (and k or table) in the spec") from None
        else:
            # The law's values are what the fit finds: check every other option (a spec's named as its keys).
            checked_from(dataclasses.replace(options, law="linear", modulus=1.0, k=None, table=None), spec)
            kind = law or options.resolved_law()
            options = dataclasses.replace(options, law=kind)
    curve = _checked_curve(curve if target else None, data, units, indenter, length_scale,
                           {"-o": output, "--png": png},
                           {"INPUT": input_path, "--spec": spec, "--data": data, "--indenter": _indenter_file(indenter),
                            "the spec's --table": options.table, "the spec's --core": options.core},
                           part=(input_path, options.units, direction_vector))
    sizes = indenter_size_notes(indenter, length_scale)
    for warning in sizes:                     # before the fit, which may fail for the same reason
        click.echo(f"warning: {warning}", err=True)
    progress = Progress(enabled=not quiet)
    # lazy: as calibrate; its pass-through is reported once, in result.warnings, not as raw lines
    from fieldgen.runtime.contact.surface import PassThroughWarning

    with reported_errors(), warnings.catch_warnings():
        warnings.simplefilter("ignore", PassThroughWarning)
        result = calibrate(input_path, output, options, indenter_text=indenter, direction=direction_vector,
                           at=at_point, data=curve, law_kind=law, targets=bool(target), knots=knot_values,
                           smoothness=smoothness, layer_tolerance=layer_tolerance, length_scale=length_scale,
                           png=png, progress=progress)
    if as_json:
        report = result.to_dict()
        print_json({**report, "warnings": [*sizes, *report["warnings"]]})
    elif not quiet:
        click.echo(_wrote(result), err=True)
    for warning in result.warnings:      # whatever --quiet or --json say (docs/model.md §1.5)
        click.echo(f"warning: {warning}", err=True)


def _wrote(result) -> str:
    """The one line of a calibration's outcome (docs/model.md §1.5)."""
    return (f"wrote {result.output}: {result.law['kind']} law {_summary(result.parameters)}; force residual "
            f"RMS {100 * result.rms_relative_residual:.3f}% ({result.rms_residual:.4g} N), max "
            f"{100 * result.max_relative_residual:.3f}%{_determined(result.determined)}")


def _determined(determined: dict) -> str:
    """``; the data determine NAME = V ± U, ...`` (standard uncertainties; docs/model.md §2.3)."""
    items = []
    for name, entry in determined.get("parameters", {}).items():
        u = entry["standard_uncertainty"]
        items.append(f"{name} = {entry['value']:.6g} ± {u:.2g}" if u is not None else f"{name} = {entry['value']:.6g}")
    return "; the data determine " + ", ".join(items) if items else ""


def _summary(parameters: dict) -> str:
    keys = [k for k in ("modulus", "k", "scale") if k in parameters]
    if not keys:
        return f"({len(parameters.get('extent', []))} points)"
    return ", ".join(f"{k} = {parameters[k]:.6g}" for k in keys)
