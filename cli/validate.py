"""`fieldgen validate`: check assets against the schema and every invariant."""

from __future__ import annotations

import click

from fieldgen.progress import Progress
from fieldgen.validate import reports_to_dict, validate_asset

from .common import echo_report, json_option, print_json, quiet_option


@click.command("validate")
@click.argument("assets", nargs=-1, required=True, type=click.Path())
@json_option
@quiet_option
def validate_command(assets, as_json, quiet):
    """Check each ASSET (.vtu); exit 0 if all are valid, 1 otherwise.

    Example: fieldgen validate build/*.vtu --json
    """
    progress = Progress(enabled=not quiet)
    reports = []
    for path in assets:
        with progress.stage(f"validate {path}"):       # seconds each for assets of millions of tets
            reports.append(validate_asset(path))
    if as_json:
        print_json(reports_to_dict(reports))
    else:
        for report in reports:     # on stdout, the invalid ones listed even with -q
            for line in report.text_lines(quiet=quiet):
                echo_report(line)
    raise SystemExit(0 if all(r.ok for r in reports) else 1)
