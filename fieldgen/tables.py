"""The one key check of every TOML table fieldgen reads (manifests, build specs, scenes), and the
one reader of the two-column CSV files fieldgen reads (modulus tables, indentation data).

A key that is not in the table's allowed set is an error naming the file, the table, the key
and the nearest allowed key (difflib's ratio ≥ 0.6), never silently ignored: a misspelt key
would otherwise change what is built or simulated without a word.
"""

from __future__ import annotations

import codecs
import difflib
import re
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from fieldgen.errors import FieldgenError, InputError, OptionError
from fieldgen.paths import special_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def nearest_key(key: str, allowed: Iterable[str]) -> str | None:
    """The allowed key closest to ``key`` (difflib), or None when nothing is close."""
    close = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.6)
    return close[0] if close else None


def check_keys(table: Mapping, allowed: Iterable[str], *, path=None, where: str | None = None,
               noun: str = "key", error: type[FieldgenError] = OptionError) -> None:
    """Raise ``error`` for the first key of ``table`` not in ``allowed``.

    The message reads ``"<path>: <where>: unknown <noun> 'x'. Did you mean 'y'? Valid keys here: ..."``.
    """
    allowed = tuple(allowed)
    for key in table:
        if key in allowed:
            continue
        near = nearest_key(key, allowed)
        hint = f"did you mean {near!r}? Valid" if near else "valid"
        prefix = f"{where}: " if where else ""
        raise error(f"{prefix}unknown {noun} {key!r}", path=path,
                    fix=f"{hint} {noun}s here: {', '.join(sorted(allowed))}")


#: TOML's integers are 64-bit: the TOML spec makes one it cannot hold losslessly an error.
TOML_INTEGERS = (-2**63, 2**63 - 1)


class TomlValueError(ValueError):
    """A TOML file whose syntax tomllib reads but whose values cannot be: an integer outside TOML's
    64 bits, arrays or inline tables nested deeper than the reader recurses."""


def _large_integer(value: Any, key: str) -> str | None:
    """The dotted key (``[n]`` for an array's item) of the first integer in ``value`` outside
    :data:`TOML_INTEGERS`, else None."""
    if isinstance(value, dict):
        items = ((f"{key}.{k}" if key else str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{key}[{n}]", v) for n, v in enumerate(value))
    else:
        low, high = TOML_INTEGERS
        outside = isinstance(value, int) and not isinstance(value, bool) and not low <= value <= high
        return key if outside else None
    return next((found for k, v in items if (found := _large_integer(v, k)) is not None), None)


def parse_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads(text)``, the way every TOML file fieldgen reads (specs, manifests, scenes) is
    parsed. tomllib takes an integer of any length, so a slip of 400 digits would become no float
    past every check (and one past 4300 digits fails inside tomllib), and it recurses once per
    nested array: TomlValueError says which, with tomllib's own TOMLDecodeError for bad syntax."""
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise TomlValueError("arrays or inline tables nested deeper than a TOML reader follows") from None
    except tomllib.TOMLDecodeError:
        raise
    except ValueError:                    # int() refuses a literal of more than 4300 digits
        data = None
    key = None if data is None else _large_integer(data, "")
    if data is None or key is not None:
        what = "an integer of thousands of digits is" if data is None else f"{key} is an integer"
        raise TomlValueError(f"{what} outside TOML's 64-bit range (±{TOML_INTEGERS[1]:.2g}); write a large "
                             "number with an exponent, e.g. 1e5")
    return data


_SPLIT = re.compile(r"[,;\s]+")

#: Byte-order marks of the Unicode encodings that are not UTF-8 (UTF-32 first: its little-endian
#: mark begins with UTF-16's), as an editor saving "Unicode" text writes them.
_OTHER_ENCODINGS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                    (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


def other_encoding(raw: bytes) -> str | None:
    """The encoding ("UTF-16", "UTF-32") whose byte-order mark ``raw`` starts with, else None."""
    return next((name for mark, name in _OTHER_ENCODINGS if raw.startswith(mark)), None)


def not_utf8(error: UnicodeDecodeError) -> str:
    """Why the bytes ``error`` was raised on are not UTF-8 text, for a message: saved as UTF-16 or
    UTF-32 (by the byte-order mark), else the first byte that is not UTF-8 (Latin-1 text, a binary
    file). Every text file fieldgen reads (TOML, CSV) is decoded as UTF-8."""
    raw = bytes(error.object)
    encoding = other_encoding(raw)
    if encoding is not None:
        return f"{encoding} text (by its byte-order mark), not UTF-8"
    return f"not UTF-8 text (byte {error.start} is 0x{raw[error.start]:02x})"


def number_as_written(cell: str) -> float:
    """The number a cell of a table or a word of a mesh file holds; ValueError unless it is one as
    a program writes it (Python's ``float`` also reads ``1_0`` as ten: a typo or a digit group,
    never a number a spreadsheet, an instrument or an exporter writes, so it is refused rather than
    read ten times too large)."""
    if "_" in cell:
        raise ValueError(f"{cell!r} has an underscore")
    return float(cell)


def whole_as_written(word: str) -> int:
    """The whole number ``word`` holds, as :func:`number_as_written` (``int`` reads ``1_0`` as ten)."""
    if "_" in word:
        raise ValueError(f"{word!r} has an underscore")
    return int(word)


def is_number(cell: str) -> bool:
    """Whether ``cell`` holds a number as :func:`number_as_written` reads it."""
    try:
        number_as_written(cell)
    except ValueError:
        return False
    return True


def whole_or_none(word: str) -> int | None:
    """The whole number ``word`` holds (:func:`whole_as_written`), or None."""
    try:
        return whole_as_written(word)
    except ValueError:
        return None


#: The words a header row may name a column by, beside the column's own name: testing machines
#: write ``Load (N)`` and ``Displacement (mm)``, a material sheet ``stress (kPa)``.
COLUMN_WORDS = {"depth": ("depth", "displacement", "indentation", "deflection", "penetration", "extension",
                          "stroke", "travel"),
                "force": ("force", "load"),
                "pressure": ("pressure", "stress")}


def _column_of(word: str, names: list[str]) -> str | None:
    """The column of ``names`` that ``word`` (a header cell's first word, lower case) names, or None."""
    return next((name for name in names if word in COLUMN_WORDS.get(name, (name,))), None)


def check_header_order(cells: list[str], columns: str, path) -> None:
    """InputError when a header row names the two columns (by the first word of a cell:
    ``force_N``, ``force (N)``, ``Load (N)``) in the other order than ``columns`` ("depth, force"):
    the columns are read by position, so every depth would be read as a force and every force as a
    depth, with no error later (both are positive numbers)."""
    names = [n.strip().lower() for n in columns.split(",")]
    words = [re.match(r"[A-Za-z]*", cell).group(0).lower() for cell in cells]
    named = [column for column in (_column_of(word, names) for word in words) if column is not None]
    if named == names[::-1]:
        cited = ", ".join(cell for cell, word in zip(cells, words) if _column_of(word, names))
        raise InputError(f"its header names the columns {names[1]}, {names[0]} ({cited}), but the first column is "
                         f"read as the {names[0]} and the second as the {names[1]}: every value would be read as "
                         "the other", path=str(path), fix=f"put the columns in the order {columns} (header and data)")


def header_unit(raw: bytes, quantity: str) -> tuple[str, str] | None:
    """(unit, cell) when the header row of the two-column file ``raw`` names ``quantity`` with a
    unit (``pressure_kPa``, ``pressure (kPa)``, ``pressure [MPa]``, ``pressure/Pa``, ``pressure kPa``,
    ``Displacement (µm)``, ``Displacement in mm``: by any of its :data:`COLUMN_WORDS`; a unit spelled
    out as its symbol,
    :data:`UNIT_NAMES`), else None (no header, or no unit named). The word after the quantity is
    returned whatever it is: the caller tells a unit from other words."""
    words = "|".join(COLUMN_WORDS.get(quantity, (quantity,)))
    named = re.compile(rf"({words})\s*(?:[-_/(\[]|\s)\s*(?:in\s+)?([^\W\d_]+)\s*[)\]]?", re.IGNORECASE)
    for line in raw.decode("utf-8-sig", errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if any(is_number(c) for c in _SPLIT.split(line) if c):
            return None                 # the first row is data: no header
        match = named.search(line)
        return (UNIT_NAMES.get(match.group(2).lower(), match.group(2)), match.group(0).strip()) if match else None
    return None


#: Units spelled out in headers, as their symbols (``Displacement (millimeters)`` names mm).
UNIT_NAMES = {**dict.fromkeys(("millimetre", "millimetres", "millimeter", "millimeters"), "mm"),
              **dict.fromkeys(("centimetre", "centimetres", "centimeter", "centimeters"), "cm"),
              **dict.fromkeys(("metre", "metres", "meter", "meters"), "m"),
              **dict.fromkeys(("inch", "inches"), "in"),
              **dict.fromkeys(("micrometre", "micrometres", "micrometer", "micrometers", "micron", "microns"), "um"),
              **dict.fromkeys(("newton", "newtons"), "N"), **dict.fromkeys(("kilonewton", "kilonewtons"), "kN"),
              **dict.fromkeys(("millinewton", "millinewtons"), "mN"),
              **dict.fromkeys(("decanewton", "decanewtons"), "daN"),
              **dict.fromkeys(("pascal", "pascals"), "Pa"), **dict.fromkeys(("kilopascal", "kilopascals"), "kPa"),
              **dict.fromkeys(("megapascal", "megapascals"), "MPa")}


def read_number_pairs(path, columns: str, fix: str) -> tuple[np.ndarray, list[str], bytes]:
    """Rows of two numbers from a text file (comma, semicolon or blank separated; one header row
    allowed; '#' starts a comment): ``(values (n, 2), ["row <line>", ...], the file's bytes)``.

    ``columns`` names the two columns in messages ("depth, force"); ``fix`` says what a data row
    must hold. InputError names the file and the line of any defect.
    """
    path = Path(path)
    kind = special_file(path)
    if kind is not None:              # a pipe or a device would be read for ever
        raise InputError(f"is {kind}, not a CSV file", path=str(path),
                         fix=f"give the path of a CSV file with columns {columns}")
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read the file ({error.strerror or error})", path=str(path),
                         fix=f"give the path of a CSV file with columns {columns}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{not_utf8(error)}, so not a CSV file fieldgen reads", path=str(path),
                         fix=f"save it as CSV text in UTF-8 (or ASCII) with columns {columns}") from None
    values, rows = [], []
    first = True
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.split("#", 1)[0].strip()
        if not stripped:
            continue
        cells = [c for c in _SPLIT.split(stripped) if c]
        try:
            row = [number_as_written(c) for c in cells]
        except ValueError:
            row = None
        if row is None and first and not any(is_number(c) for c in cells):
            first = False            # a header
            check_header_order(cells, columns, path)
            continue
        first = False
        if row is None or len(row) != 2:
            raise InputError(f"row {number} ({line.strip()!r}) is not two numbers '{columns}'",
                             path=str(path), fix=fix)
        values.append(row)
        rows.append(f"row {number}")
    return np.array(values, dtype=np.float64).reshape(-1, 2), rows, raw
