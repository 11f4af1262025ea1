"""`fieldgen batch`: build every asset of a manifest, skipping those already current."""

from __future__ import annotations

import functools
import signal
import sys
from pathlib import Path

import click

from fieldgen.batch.executors import EXECUTORS, check_scheduler
from fieldgen.batch.manifest import read_manifest
from fieldgen.batch.report import ItemResult, stderr_lines, summary_line, write_junit, write_report
from fieldgen.batch.run import BatchInterrupted, run_batch
from fieldgen.errors import FieldgenError
from fieldgen.paths import check_distinct
from fieldgen.progress import Progress

from .common import (EXIT_FAILED, EXIT_OK, EXIT_USAGE, check_outputs, check_suffix, echo_json_failure, fail,
                     json_option, print_json, quiet_option, reported_errors)


def _interrupt(signum, _frame):
    raise BatchInterrupted(signum)


def _advance(bar, result: ItemResult) -> None:
    bar.advance(note=f"{result.output}: {result.status} ({result.seconds:.1f} s)")


#: Each item's files, by the key a manifest names them with: what it reads, what it writes.
INPUT_KEYS = ("input", "core", "table")
OUTPUT_KEYS = ("output", "drake_vtk", "drake_vtk SDF file")


def _item_paths(parsed, keys) -> list[tuple[str, str]]:
    """(label, path) of every item's files under ``keys``, for :func:`check_distinct`."""
    def path(item, key):
        if key in ("input", "output"):
            return getattr(item, key)
        drake = item.options.drake_vtk
        if key == "drake_vtk SDF file":
            return drake and str(Path(drake).with_suffix(".sdf"))
        return getattr(item.options, key)
    return [(f"{item.label} {key}", path(item, key)) for item in parsed.items for key in keys]


@click.command("batch")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Parallel builds (default: the CPU count).")
@click.option("--check", is_flag=True, help="Build nothing; exit 1 listing every missing or stale asset.")
@click.option("--force", is_flag=True, help="Rebuild every asset, current or not.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Write a JSON report here.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), help="Write a JUnit XML report here.")
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True,
              help="local worker processes, or an existing Dask cluster (needs --scheduler).")
@click.option("--scheduler", metavar="ADDRESS", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786.")
@click.option("--output-dir", type=click.Path(file_okay=False),
              help="Write every asset into DIR under its output file name (overrides the manifest's folders).")
@json_option
@quiet_option
def batch_command(manifest, jobs, check, force, report_path, junit_path, executor, scheduler, output_dir,
                  as_json, quiet):
    """Build every [[asset]] of MANIFEST (TOML) that is missing or stale.

    \b
    An item is rebuilt only when its input bytes, its resolved options (with the bytes of
    the files they name) or the fieldgen version changed; the key is stored in the asset.
    Exit 0 when every item is built or current, 1 when any failed (or, with --check, is
    stale), 2 on a manifest or usage error.
    Example:
      fieldgen batch assets/manifest.toml -j 4 --report report.json --junit junit.xml
    """
    check_suffix(report_path, "--report", ".json", "the JSON report")     # before any build
    check_suffix(junit_path, "--junit", ".xml", "the JUnit report")
    with reported_errors(EXIT_USAGE):
        check_scheduler(executor, scheduler)
        parsed = read_manifest(manifest, output_dir=output_dir)
    with reported_errors():
        check_distinct([("--report", report_path), ("--junit", junit_path)] + _item_paths(parsed, OUTPUT_KEYS),
                       [("the manifest", manifest)] + _item_paths(parsed, INPUT_KEYS))
        check_outputs(report_path, junit_path)    # before the builds, not after them

    progress = Progress(enabled=not quiet)
    on_result = functools.partial(_advance, progress.bar(len(parsed.items), "batch"))
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        report = run_batch(parsed, jobs=jobs, force=force, check=check, executor=executor,
                           scheduler=scheduler, on_result=on_result)
    except FieldgenError as exc:          # an unusable executor: nothing was built
        fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt as stop:
        message, code = "interrupted: workers stopped, no partial asset left", 128 + getattr(stop, "signum", signal.SIGINT)
        click.echo(message, err=True)
        echo_json_failure(message, code)
        sys.exit(code)
    finally:
        signal.signal(signal.SIGTERM, previous)

    if report_path:
        write_report(report, report_path)
    if junit_path:
        write_junit(report, junit_path)
    if as_json:
        print_json(report.to_dict())
    for result in report.results:
        for line in stderr_lines(result):     # whatever --quiet or --json say (docs/model.md §1.5)
            click.echo(line, err=True)
    if not quiet:
        click.echo(summary_line(report), err=True)
    sys.exit(EXIT_OK if report.ok else EXIT_FAILED)
