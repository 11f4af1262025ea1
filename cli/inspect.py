"""`fieldgen inspect`: summary, picture and ParaView script of an asset."""

from __future__ import annotations

import click

from fieldgen.inspection import format_summary, plot_asset, summarize, summary_row, write_paraview_script
from fieldgen.io.asset import read_asset
from fieldgen.paths import check_distinct
from fieldgen.progress import Progress
from fieldgen.validate import validate_asset

from .common import (EXIT_FAILED, EXIT_USAGE, check_outputs, check_suffix, echo_report, fail, has_non_finite,
                     json_option, print_json, quiet_option, reported_errors)


@click.command("inspect")
@click.argument("asset", type=click.Path())
@click.option("--png", "png", type=click.Path(dir_okay=False),
              help="Write a picture: three cuts coloured by pressure + element-quality histogram.")
@click.option("--paraview", "paraview", type=click.Path(dir_okay=False),
              help="Write a ParaView script (FILE.py): the cut face seen head-on, coloured by pressure. "
                   "Run it with pvpython (add --screenshot out.png for a picture) or in the GUI's Python shell.")
@click.option("--cut", type=click.Choice(["x", "y", "z"]), default=None,
              help="Normal of the ParaView script's cut plane through the bounding-box centre (default x).")
@json_option
@quiet_option
def inspect_command(asset, png, paraview, cut, as_json, quiet):
    """Summarise ASSET (.vtu): counts, bounds, L, dissipation, pressure range, element quality.

    Example: fieldgen inspect paddle.vtu --png paddle.png --paraview view.py --cut x,
    then: pvpython view.py --screenshot paddle_cut.png
    """
    check_suffix(png, "--png", ".png", "the picture")
    check_suffix(paraview, "--paraview", ".py", "the ParaView script")
    if cut is not None and not paraview:
        fail(f"--cut {cut} chooses the plane of the ParaView script: add --paraview FILE.py", EXIT_USAGE)

    progress = Progress(enabled=not quiet)
    with reported_errors():
        check_distinct({"--png": png, "--paraview": paraview}, {"ASSET": asset})
        check_outputs(png, paraview)
        with progress.stage(f"read {asset}"):
            data = read_asset(asset)
        with progress.stage("summary"):
            summary = summarize(data, asset)
        with progress.stage("validate"):
            failed = [check for check in validate_asset(asset).checks if not check.ok]
        summary["valid"] = not failed
        broken = has_non_finite(summary)      # exit 1 below: no picture or script of it is written
        if png and not broken:
            with progress.stage("picture"):
                plot_asset(data, png)
            summary["png"] = click.format_filename(png)
        if paraview and not broken:
            with progress.stage("ParaView script"):
                write_paraview_script(paraview, asset, data, cut=cut or "x")
            summary["paraview"] = click.format_filename(paraview)
    if as_json:
        print_json(summary)
    elif not quiet:
        echo_report(format_summary(summary))
        for key, what in (("png", "picture"), ("paraview", "ParaView script")):
            if key in summary:
                echo_report(summary_row("wrote", f"{what} {summary[key]}"))
    for check in failed:      # whatever --quiet or --json say (docs/model.md §1.5)
        click.echo(f"warning: {asset}: invalid asset, {check.name}: {check.detail}", err=True)
    if broken:       # a NaN or infinity, reported as null: the numbers are not there
        unwritten = " (no picture or script written)" if png or paraview else ""
        click.echo(f"error: {asset}: the summary has numbers that are not finite (null in --json){unwritten}. "
                   "Build the asset again with fieldgen build", err=True)
        raise SystemExit(EXIT_FAILED)
