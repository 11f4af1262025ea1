"""The fieldgen command line: parse, call the library, report."""

from __future__ import annotations

import click

from fieldgen import __version__
from fieldgen.threads import one_blas_thread

from .batch import batch_command
from .build import build_command
from .calibrate import calibrate_command
from .common import JSON_REQUESTED, check_argument_names, check_given_once, echo_json_failure
from .compile_kernels import compile_kernels_command
from .contact import contact_command
from .inspect import inspect_command
from .simulate import simulate_command
from .validate import validate_command


class FieldgenGroup(click.Group):
    """The command group, so that a usage error click itself reports (an option's value of the wrong
    type, a missing argument) is also a JSON object on stdout when --json was given, and an
    argument that is not UTF-8 and an option given twice are refused before any work."""

    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None and any(param.name == "as_json" for param in command.params):
            options = rest[:rest.index("--")] if "--" in rest else rest
            ctx.meta[JSON_REQUESTED] = "--json" in options    # before parsing, which may fail first
        if command is not None:
            check_argument_names(command, rest)      # a path that is not UTF-8: exit 2 before any work
            if not {"-h", "--help"} & set(rest[:rest.index("--")] if "--" in rest else rest):
                check_given_once(command, rest)      # --modulus 1 --modulus 2: exit 2, not the last silently
        return name, command, rest

    def invoke(self, ctx):
        try:     # every command's numerics on one BLAS thread: the same output on any machine
            return one_blas_thread(super().invoke)(ctx)
        except click.ClickException as exc:
            echo_json_failure(exc.format_message(), exc.exit_code, ctx)
            raise


@click.group(cls=FieldgenGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fieldgen")
def main() -> None:
    """Pressure-field contact assets from surface meshes, and contact between them."""


main.add_command(build_command)
main.add_command(batch_command)
main.add_command(validate_command)
main.add_command(inspect_command)
main.add_command(contact_command)
main.add_command(simulate_command)
main.add_command(calibrate_command)
main.add_command(compile_kernels_command)

if __name__ == "__main__":
    main()
