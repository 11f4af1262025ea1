"""What every command shares: error reporting with the right exit code, JSON output."""

from __future__ import annotations

import json
import math
import shlex
import sys
from contextlib import contextmanager
from typing import Any, Iterator

import click

from fieldgen.errors import FieldgenError, OptionError
from fieldgen.io.asset import prepare_output
from fieldgen.paths import check_utf8_name

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

#: Key in the click context's ``meta`` (shared by the group and its command): whether --json was given.
JSON_REQUESTED = "fieldgen.json"


def remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    """The ``--json`` flag's callback: note it where :func:`fail` looks, so errors are JSON too."""
    ctx.meta[JSON_REQUESTED] = bool(value)
    return value


def echo_json_failure(message: str, code: int, ctx: click.Context | None = None) -> None:
    """With --json, print ``{"ok": false, "error": message, "exit_code": code}`` on stdout, so a
    script parsing stdout gets an answer on failure too; without it, nothing. A closed or full
    stdout is ignored here: the error is already on stderr."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is None or not ctx.meta.get(JSON_REQUESTED) or sys.stdout is None:
        return
    try:
        click.echo(json.dumps({"ok": False, "error": message, "exit_code": code}, indent=2, sort_keys=True))
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def fail(message: str, code: int = EXIT_FAILED) -> None:
    click.echo(f"error: {message}", err=True)
    echo_json_failure(message, code)
    sys.exit(code)


@contextmanager
def reported_errors(code: int = EXIT_FAILED) -> Iterator[None]:
    """Turn a FieldgenError into its message on stderr and exit ``code``; Ctrl-C exits 130.

    An OptionError always exits 2 (usage): an option or value was refused before any work on
    it was done, whatever stage found it (a selector that matches no face, a skin thicker than
    the part, a missing optional extra)."""
    try:
        yield
    except OptionError as exc:
        fail(str(exc), EXIT_USAGE)
    except FieldgenError as exc:
        fail(str(exc), code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        echo_json_failure("interrupted", 130)
        sys.exit(130)


def check_argument_names(command: click.Command, args: list[str]) -> None:
    """Refuse (exit 2), before parsing, a command-line argument that is not valid UTF-8 (a file
    name with a byte such as \\xff: :func:`fieldgen.paths.check_utf8_name`), naming the option it
    is the value of, an empty path (``-o "$OUT"`` with OUT unset would otherwise write to the
    default path or the current folder) and a path ``-`` (the Unix spelling of stdin or stdout,
    which no command reads or writes: ``simulate -o -`` made a folder named ``-``). Every path a
    command takes enters here, inputs and outputs alike; every argument (not an option) of a
    command is a path. The words are read as click's parser reads them (:func:`read_command_line`,
    as :func:`options_given` does), so ``-qo -`` is ``-o -``."""
    for spelling, param, value in read_command_line(command, args):
        if param is None and spelling:         # a flag or an unknown option: its word is checked
            spelling, _, value = (spelling.partition("=") if spelling.startswith("--") and "=" in spelling
                                  else ("", "", spelling))
        elif value in ("", "-") and (param is None or isinstance(param.type, click.Path)):
            what = spelling or f"an argument of fieldgen {command.name}"
            if value == "":
                fail(f"{what} is an empty string, not a path (an unset shell variable?). Give the file or "
                     "folder's path.", EXIT_USAGE)
            fail(f"{what} is -, which fieldgen does not read as stdin or write as stdout: it would be a file or "
                 "folder named '-'. Give a path (./- for one named so).", EXIT_USAGE)
        try:
            check_utf8_name(value, spelling or "the argument")
        except OptionError as exc:
            fail(str(exc), EXIT_USAGE)


def read_command_line(command: click.Command, args: list[str]) -> Iterator[tuple[str, click.Option | None, str]]:
    """Each word of ``args`` as click's parser reads it, as (spelling, option, value): a value-taking
    option's value (``--opt value``, ``--opt=value``, ``-o value``, ``-ovalue`` and, after short
    flags run together, ``-qo value``) with the option; an argument (so every word after ``--``)
    as ("", None, word); a word that holds no option's value (flags, an unknown option: click
    reports those) as (word, None, word). A value missing at the end (click reports it) ends it."""
    by_name = {name: param for param in command.params if isinstance(param, click.Option)
               for name in param.opts + param.secondary_opts}
    index, options = 0, True
    while index < len(args):
        arg, index = args[index], index + 1
        if options and arg == "--":
            options = False
            continue
        if not options or not arg.startswith("-") or arg == "-":
            yield "", None, arg
            continue
        name, param, value = _value_option(by_name, arg)
        if param is None:
            yield arg, None, arg
            continue
        if value is None:
            if index == len(args):
                return           # click reports the missing value
            value, index = args[index], index + 1
        yield name, param, value


def _value_option(by_name: dict[str, click.Option], word: str) -> tuple[str, click.Option | None, str | None]:
    """The value-taking option an option word names (``--opt``, ``--opt=value``, ``-o``, ``-ovalue``,
    ``-qo``, ``-qovalue``), its spelling and the value the word holds (None: the next word); (word,
    None, None) for flags only or an unknown option."""
    if word.startswith("--"):
        name, equals, value = word.partition("=")
        candidates = [(name, value if equals else None)]
    else:
        candidates = [("-" + word[at], word[at + 1:] or None) for at in range(1, len(word))]
    for name, value in candidates:
        param = by_name.get(name)
        if param is None:
            break
        if not (param.is_flag or param.count):
            return name, param, value
    return word, None, None


def options_given(command: click.Command, args: list[str]) -> Iterator[tuple[str, click.Option, str]]:
    """(spelling, option, value) of each value-taking option of ``command`` in ``args``, as click's
    parser reads them (:func:`read_command_line`): ``--opt value``, ``--opt=value``, ``-o value``,
    ``-ovalue`` and short flags run together before it (``-qo value``); nothing after ``--``.
    Flags and unknown options (click reports those) are skipped."""
    return ((spelling, param, value) for spelling, param, value in read_command_line(command, args)
            if param is not None)


def check_given_once(command: click.Command, args: list[str]) -> None:
    """Refuse (exit 2), before parsing, a value-taking option given twice with different values
    (``--modulus 1 --modulus 2``, ``-o a --output b``, ``--report=x --report y``), naming it and
    both values: click would keep the last silently, and a value a script or a pasted line meant
    may be the one lost. The same value again (``--dt 1e-3 --dt=1e-3``, the same characters) is
    no ambiguity and passes. Options declared ``multiple`` (``--bonded``, ``--target``:
    repeatable by design) may repeat; so may flags (``--quiet --quiet`` means what ``--quiet``
    means; no flag of fieldgen has an opposite spelling that a repeat could contradict)."""
    first: dict[str, tuple[str, str]] = {}
    for spelling, param, value in options_given(command, args):
        if param.multiple or param.count:
            continue
        if param.name not in first:
            first[param.name] = (spelling, value)
            continue
        spelled, before = first[param.name]
        if before == value:
            continue                 # the same value again: nothing is lost
        values = (f"{shlex.quote(before)} and {shlex.quote(value)}" if spelled == spelling
                  else f"{spelled} {shlex.quote(before)} and {spelling} {shlex.quote(value)}")
        fail(f"{'/'.join(param.opts)} given twice ({values}): give it once (otherwise the last would "
             "win silently)", EXIT_USAGE)


def check_outputs(*paths) -> None:
    """Each given output path can be written (:func:`fieldgen.io.asset.prepare_output`); None skipped.
    Call inside :func:`reported_errors`, before the command's work."""
    for path in paths:
        if path:
            prepare_output(path)


def check_suffix(path: str | None, flag: str, suffix: str, what: str) -> None:
    """Refuse (exit 2) an output path for ``flag`` that does not end in ``suffix`` (a picture named
    .jpg would get PNG bytes; a script named .txt would not run as one)."""
    if path is not None and not str(path).lower().endswith(suffix):
        fail(f"{flag} {path}: {what} is written as {suffix}. Name it FILE{suffix}.", EXIT_USAGE)


def finite_json(data: Any) -> Any:
    """``data`` with every NaN or infinite number as None (JSON's null: ``NaN`` is no JSON token)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: finite_json(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite_json(value) for value in data]
    return data


def has_non_finite(data: Any) -> bool:
    """Whether ``data`` holds a NaN or an infinite number (which :func:`finite_json` makes null)."""
    if isinstance(data, float):
        return not math.isfinite(data)
    if isinstance(data, dict):
        return any(has_non_finite(value) for value in data.values())
    if isinstance(data, (list, tuple)):
        return any(has_non_finite(value) for value in data)
    return False


def echo_report(text: str) -> None:
    """Print ``text`` on stdout; a full device or closed stdout exits 1 with a message, not a traceback."""
    try:
        if sys.stdout is None:
            raise OSError("stdout is closed")
        click.echo(text)
        sys.stdout.flush()
    except OSError as error:
        fail(f"cannot write the report to stdout ({error.strerror or error}). Free space on the device or "
             "redirect stdout to a file you can write")


def print_json(data: Any) -> None:
    echo_report(json.dumps(finite_json(data), indent=2, sort_keys=True, allow_nan=False))


json_option = click.option("--json", "as_json", is_flag=True, callback=remember_json,
                           help="Print a JSON report on stdout (on failure: ok false, the error and the exit code).")
quiet_option = click.option("--quiet", "-q", is_flag=True,
                            help="No progress, status lines or text report; warnings and errors still print.")
