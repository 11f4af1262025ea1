"""`fieldgen build`: a surface mesh to a validated pressure-field asset."""

from __future__ import annotations

import os
from pathlib import Path

import click

from fieldgen.io.asset import COMPRESSIONS
from fieldgen.options import (COMMAND_LINE, LAWS, SKIN_MESHES, BuildOptions, checked_from, options_from_mapping,
                              options_from_spec)
from fieldgen.paths import check_distinct
from fieldgen.progress import Progress
from fieldgen.units import LENGTH_UNITS

from .common import EXIT_USAGE, json_option, print_json, quiet_option, reported_errors

_NUMBER = click.FLOAT


def check_build_paths(input_path, output, spec, options) -> None:
    """Refuse (exit 2) an asset or Drake file that would overwrite an input or each other."""
    asset = output or Path(input_path).stem + ".vtu"          # the build's default (pipeline.default_output)
    drake = options.drake_vtk
    check_distinct({"the asset": asset, "--drake-vtk": drake,
                    "the --drake-vtk SDF file": drake and Path(drake).with_suffix(".sdf")},
                   {"INPUT": input_path, "--spec": spec, "--core": options.core, "--table": options.table})


@click.command("build")
@click.argument("input_path", metavar="INPUT", required=False, type=click.Path())
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Asset to write (.vtu). Default: INPUT's stem + .vtu here.")
@click.option("--spec", type=click.Path(dir_okay=False), help="Build spec (TOML) with the same options; flags override it.")
@click.option("--units", type=click.Choice(list(LENGTH_UNITS)), help="Units of INPUT and of lengths in flags (default m).")
@click.option("--core", type=click.Path(dir_okay=False), help="Inner surface carved out as a rigid core (e = 1).")
@click.option("--bonded", multiple=True, metavar="SELECTOR", help="Faces glued to a rigid backing (e = 1). Repeatable.")
@click.option("--insulated", multiple=True, metavar="SELECTOR", help="Faces with zero flux. Repeatable.")
@click.option("--max-volume", type=_NUMBER, help="Largest tet volume (input units cubed).")
@click.option("--edge-length", type=_NUMBER, help="Target tet edge length (input units).")
@click.option("--accuracy", type=_NUMBER,
              help="Without --edge-length/--max-volume: relative error of the field the mesh is sized for "
                   "(default 0.01; not with --robust --skin); the estimate is recorded as error_estimate. "
                   "With a size (or --robust --skin) and --estimate: the error to warn above.")
@click.option("--radius-edge", type=_NUMBER, help="TetGen radius-edge quality bound (default 1.414).")
@click.option("--law", type=click.Choice(LAWS), help="Modulus law (inferred from --k/--table).")
@click.option("--modulus", type=_NUMBER, help="Modulus scale M0 in Pa, 1 to 1e13.")
@click.option("--k", type=_NUMBER, help="Hyperbolic stiffening 0 <= K < 1: p0 = M0 e / (1 - K e).")
@click.option("--table", type=click.Path(dir_okay=False), help="CSV of extent, pressure (Pa): a measured law.")
@click.option("--layer-tolerance", type=_NUMBER, help="Largest allowed interpolation error of p0, Pa, the same at every pressure (default: 1% of the local p0, docs/model.md §2.4).")
@click.option("--expansion-rate", type=_NUMBER, help="Material's maximum expansion rate tau, 1/s (at least 1e-6): dissipation = 1/(L tau).")
@click.option("--dissipation", type=_NUMBER, help="Hunt-Crossley dissipation chi in s/m (at most 1e6), given directly.")
@click.option("--mu-static", type=_NUMBER, help="Static friction coefficient, 0 to 10 (default 0.5).")
@click.option("--mu-dynamic", type=_NUMBER, help="Dynamic friction coefficient, 0 to 10 (default 0.5).")
@click.option("--tangential-stiffness", type=_NUMBER, metavar="KBAR",
              help="Friction spring K̄ in 1/m: k = K̄·p, slides after μ/K̄ (default 1e4; --friction compliant).")
@click.option("--tangential-damping", type=_NUMBER, metavar="CBAR",
              help="Friction damper C̄ in s/m: c = C̄·p, time constant C̄/K̄ (default 10).")
@click.option("--drake-vtk", type=click.Path(dir_okay=False),
              help="Also write the tet mesh as a legacy .vtk Drake loads, and FILE.sdf with matching drake: properties.")
@click.option("--compression", type=click.Choice(list(COMPRESSIONS)),
              help="How the asset's arrays are encoded: none (default: raw, the fastest; every VTK reader, meshio too), zlib (smaller, every reader) or lz4 (vtk and ParaView only).")
@click.option("--surface-tolerance", type=_NUMBER, metavar="LENGTH",
              help="Remesh the surface (MMGS) within LENGTH (input units) before meshing, keeping sharp edges and "
                   "every face selection. Default: 0.1% of the part's diagonal, only when its triangles (micron "
                   "slivers of a CAD export) would cost far more tets than the accuracy needs; 0 keeps the input.")
@click.option("--skin", type=_NUMBER, metavar="THICKNESS",
              help="Compliant skin THICKNESS (input units, at least 1 µm) over a rigid interior (e = 1), measured from the free faces.")
@click.option("--skin-mesh", type=click.Choice(SKIN_MESHES),
              help="How --skin is meshed: band, layers of prisms over a rounded rigid interior and tets outside "
                   "them (the default when the accuracy sizes the mesh and every face is free); cut, out of a "
                   "whole-part mesh (the default otherwise).")
@click.option("--robust", is_flag=True, default=None,
              help="Mesh open, non-manifold or self-intersecting input with fTetWild (the optional extra 'robust'; the error names the pip command).")
@click.option("--threads", type=click.IntRange(min=0),
              help="fTetWild's threads with --robust (default: every core; 0 = every core).")
@click.option("--estimate", is_flag=True, default=None,
              help="Also estimate the discretisation error of a mesh sized by --edge-length/--max-volume, or by "
                   "fTetWild under --skin: solved again on the mesh refined 1:8, about 8x the solve's memory. With "
                   "--accuracy, warn above it. Builds sized by accuracy always record it.")
@json_option
@quiet_option
def build_command(input_path, output, spec, as_json, quiet, **flags):
    """Build a pressure-field asset from a surface mesh INPUT (STL, OBJ, PLY, OFF, GLB; STEP with the extra 'step').

    \b
    Face selectors: normal:NX,NY,NZ[:DEG]  below:AXIS=VALUE  above:AXIS=VALUE
                    box:X0,Y0,Z0,X1,Y1,Z1  group:NAME
    Example:
      fieldgen build pad.stl --units mm --bonded normal:0,0,-1 --modulus 2e5 --k 0.5 \\
          --expansion-rate 10 -o pad.vtu
    """
    given = {k: v for k, v in flags.items() if v is not None and v != ()}
    with reported_errors(EXIT_USAGE):
        if (spec is None and input_path is not None and str(input_path).lower().endswith(".toml")
                and os.path.isfile(input_path)):      # a pipe or a missing file: refused where it is read
            raise click.UsageError(f"{input_path} is a TOML file, not a surface mesh: a build spec is given as "
                                   f"--spec {input_path} (a batch manifest to `fieldgen batch`)")
        options, spec_input, spec_output = (BuildOptions(), None, None)
        if spec is not None:
            options, spec_input, spec_output = options_from_spec(spec)
        options = checked_from(options_from_mapping(given, origin=COMMAND_LINE, base=options), spec, given)
        input_path = input_path or spec_input
        if input_path is None:
            raise click.UsageError("no INPUT given (on the command line or as `input` in the spec)")
        output = output or spec_output
        check_build_paths(input_path, output, spec, options)
    # lazy: the pipeline's modules (scipy, the meshers) load only when a build runs, not for --help
    from fieldgen.pipeline import build

    from fieldgen.runtime.contact.kernels import announce_compiling  # lazy: numba, as the pipeline's

    progress = Progress(enabled=not quiet)
    click.get_current_context().call_on_close(announce_compiling(progress))   # a cold numba cache: say why
    with reported_errors():
        result = build(input_path, output, options, progress=progress)
    if as_json:
        print_json(result.to_dict())
    elif not quiet:
        click.echo(
            f"wrote {result.output}: {result.tets} tets, {result.vertices} vertices, "
            f"L = {result.characteristic_length:.6g} m, dissipation = {result.dissipation:.6g} s/m, "
            f"max interpolation error = {result.max_interpolation_error:.4g} Pa"
        , err=True)
        if "error_estimate" in result.extra:
            estimate = result.extra["error_estimate"]
            click.echo(f"estimated discretisation error: extent {100 * estimate['extent']:.2f}%, pressure "
                       f"{100 * estimate['pressure']:.2f}%, L {100 * estimate['characteristic_length']:.2f}%",
                       err=True)
        if "skin_volume_fraction" in result.extra:
            click.echo(f"skin: {100 * result.extra['skin_volume_fraction']:.1f}% of the volume is skin, "
                       "the rest a rigid interior", err=True)
    for warning in result.warnings:      # whatever --quiet or --json say (docs/model.md §1.5)
        click.echo(f"warning: {warning}", err=True)
