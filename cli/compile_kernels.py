"""`fieldgen compile-kernels`: compile the runtime's kernels once, after install (docs/design/first-run.md)."""

from __future__ import annotations

import click

from fieldgen.progress import Progress

from .common import echo_report, fail, json_option, print_json, quiet_option, reported_errors


@click.command("compile-kernels")
@json_option
@quiet_option
def compile_kernels_command(as_json, quiet):
    """Compile every contact and dynamics kernel into numba's cache, so that no later run
    (simulate, contact, calibrate) pauses to compile. `make install` runs it; run it again after
    installing fieldgen another way, or as another user.

    Example: fieldgen compile-kernels
    """
    try:
        # lazy: numba compiles (or loads) the kernels as their modules are used; other commands do not need it
        from fieldgen.runtime.compile_kernels import compile_kernels
    except RuntimeError as exc:          # numba found no folder it may write its cache to
        fail(f"{exc}. Fix: set NUMBA_CACHE_DIR to a folder you can write.")
    with reported_errors():
        done = compile_kernels(Progress(enabled=not quiet))
    if as_json:
        print_json(done.as_dict())
    elif not quiet:
        echo_report(f"{done.kernels} kernels ({done.signatures} signatures): {done.compiled} compiled now, "
                    f"{done.loaded} loaded from the cache, in {done.seconds:.1f} s; cached in "
                    f"{', '.join(done.cache_dirs)}")
        if done.not_reached:
            echo_report(f"not reached on this machine (compiled when first called): {', '.join(done.not_reached)}")
