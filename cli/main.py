"""The fieldgen command line: parse, call the library, report."""

from __future__ import annotations

import click

from fieldgen import __version__

from .batch import batch_command
from .build import build_command
from .calibrate import calibrate_command
from .compile_kernels import compile_kernels_command
from .contact import contact_command
from .inspect import inspect_command
from .simulate import simulate_command
from .validate import validate_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
