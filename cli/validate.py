"""`fieldgen validate`: check assets against the schema and every invariant."""

from __future__ import annotations

import click

from .common import json_option, print_json, quiet_option


@click.command("validate")
@click.argument("assets", nargs=-1, required=True, type=click.Path(dir_okay=False))
@json_option
@quiet_option
def validate_command(assets, as_json, quiet):
    """Check each ASSET (.vtu); exit 0 if all are valid, 1 otherwise.

    Example: fieldgen validate build/*.vtu --json
    """
    from fieldgen.progress import Progress
    from fieldgen.validate import validate_asset

    progress = Progress(enabled=not quiet)
    reports = []
    for path in assets:
        with progress.stage(f"validate {path}"):       # seconds each for assets of millions of tets
            reports.append(validate_asset(path))
    if as_json:
        print_json({"valid": all(r.ok for r in reports), "assets": [r.to_dict() for r in reports]})
    else:
        for report in reports:
            failed = [c for c in report.checks if not c.ok]
            if not failed:
                if not quiet:
                    click.echo(f"{report.path}: valid ({len(report.checks)} checks)")
            else:                  # the report, on stdout with the valid ones; listed even with -q
                click.echo(f"{report.path}: INVALID")
                for check in failed:
                    click.echo(f"  {check.name}: {check.detail}")
    raise SystemExit(0 if all(r.ok for r in reports) else 1)
