"""Output paths that must differ from the inputs and from each other (docs/model.md §1.4).

Every command names its inputs and outputs by the flag a user typed; :func:`check_distinct`
refuses, before any work, an output that is one of the inputs (it would be overwritten) or two
outputs that are one file (one would overwrite the other). Paths are compared resolved
(symbolic links, ``..``, relative to the current folder) and, when both exist, as the same file
on disk (hard links).
"""

from __future__ import annotations

import os
import stat
from typing import Mapping

from fieldgen.errors import OptionError


#: What a path that is not a regular file is, by its ``stat`` mode: reading one would block (a
#: named pipe nobody writes to) or never end (``/dev/zero``).
_SPECIAL_FILES = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                  (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                  (stat.S_ISSOCK, "a socket"))


def special_file(path) -> str | None:
    """What ``path`` is when it exists but is not a regular file ("a folder", "a named pipe
    (FIFO)", ...), else None (a regular file, or nothing there: the reader says "not found").
    Inputs are checked with it before they are opened, so that a pipe or a device given as an
    input fails at once instead of waiting for data for ever."""
    try:
        mode = os.stat(os.fspath(path)).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _SPECIAL_FILES if test(mode)), "not a regular file")


def check_utf8_name(path, label: str | None = None) -> None:
    """Refuse (OptionError, exit 2) a path that is not valid UTF-8: a Linux file name may hold any
    bytes (``\\xff``), which Python keeps as lone surrogates, but VTK opens only UTF-8 names and
    the metadata and JSON reports hold UTF-8 text. ``label`` names the option or argument it came
    from; the name is shown with U+FFFD in place of each byte that is not UTF-8."""
    text = os.fsdecode(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
        raise OptionError("the name is not valid UTF-8 (a byte shown as \ufffd), and VTK files and the reports "
                          "hold UTF-8 names only", path=f"{label} {shown!r}" if label else repr(shown),
                          fix="rename the file or folder with UTF-8 characters only") from None


def _identity(path) -> tuple:
    """What makes two paths one file: the resolved path, and (dev, inode) when it exists."""
    resolved = os.path.realpath(os.fspath(path))
    try:
        stat = os.stat(resolved)
    except OSError:
        return (resolved, None)
    return (resolved, (stat.st_dev, stat.st_ino))


def _named(items) -> list[tuple[str, object, tuple]]:
    pairs = items.items() if isinstance(items, Mapping) else items
    return [(label, path, _identity(path)) for label, path in pairs if path is not None and str(path) != ""]


def _keys(identity: tuple) -> list:
    return [("path", identity[0])] + ([("inode", identity[1])] if identity[1] is not None else [])


def same_file(first, second) -> bool:
    """Whether the paths ``first`` and ``second`` name one file (one resolved path, or one inode:
    a link, another spelling)."""
    return bool(set(_keys(_identity(first))) & set(_keys(_identity(second))))


def check_distinct(outputs, inputs=()) -> None:
    """Refuse (OptionError, exit 2) an output that is an input, or two outputs that are one file.

    ``outputs`` and ``inputs`` map (or list as pairs) a label a user recognises (``"-o"``,
    ``"--report"``, ``"input A"``) to a path; None entries are skipped. Linear in the number of
    paths (a manifest's thousands of items).
    """
    seen_inputs = {}
    for label, path, identity in _named(inputs):
        for key in _keys(identity):
            seen_inputs.setdefault(key, (label, path))
    seen_outputs = {}
    for label, path, identity in _named(outputs):
        for key in _keys(identity):
            if key in seen_inputs:
                in_label, in_path = seen_inputs[key]
                raise OptionError(f"{label} {path} is the same file as {in_label} ({in_path}): writing it "
                                  "would overwrite the input", path=str(path),
                                  fix=f"give {label} another path")
            if key in seen_outputs:
                other_label, other_path = seen_outputs[key]
                raise OptionError(f"{other_label} {other_path} and {label} {path} are the same file: one "
                                  "would overwrite the other", path=str(path),
                                  fix=f"give {other_label} and {label} different paths")
        for key in _keys(identity):
            seen_outputs[key] = (label, path)
