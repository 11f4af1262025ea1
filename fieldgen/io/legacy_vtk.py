"""The counts an ASCII legacy ``.vtk`` file declares (Drake's tet-mesh format), checked against its
data before VTK reads it.

VTK's legacy reader trusts the ``CELLS n size`` line: a file declaring more cells than its numbers
hold makes it read past the connectivity it allocated, which corrupts the process's memory (glibc
aborts it, ``free(): invalid next size``: exit 134, no message that names the file). A count line
that does not match the data after it is refused here, naming the section and the fix.
"""

from __future__ import annotations

from fieldgen.errors import InputError
from fieldgen.tables import is_number, whole_or_none

FIX = ("write the mesh again (Drake's .vtk format: POINTS n, then n points; CELLS n size, then n lines "
       "of a vertex count and that many point numbers, size numbers in all; CELL_TYPES n, then n types)")

#: The section keywords of a legacy unstructured grid (the reader takes them in any case).
_KEYWORDS = {"POINTS", "CELLS", "CELL_TYPES", "OFFSETS", "CONNECTIVITY", "POINT_DATA", "CELL_DATA",
             "FIELD", "METADATA", "DATASET"}


def _section(tokens: list[str], keyword: str) -> int | None:
    """The index of ``keyword``'s first token (any case), or None."""
    return next((i for i, token in enumerate(tokens) if token.upper() == keyword), None)


def _refuse(path: str, what: str) -> InputError:
    return InputError(what, path=path, fix=FIX)


def _numbers_after(tokens: list[str], at: int, count: int, path: str, section: str) -> list[str]:
    """The ``count`` tokens after index ``at``, which must be there and be followed by a keyword
    (or the end of the file): else the section holds another number of values than it declares."""
    values = tokens[at:at + count]
    following = tokens[at + count] if at + count < len(tokens) else None
    ended = [i for i, token in enumerate(values) if token.upper() in _KEYWORDS]
    if len(values) < count or ended:
        held = ended[0] if ended else len(values)
        raise _refuse(path, f"its {section} section declares {count} numbers, but the file holds {held} there "
                            "(cut short, or a count line that is wrong)")
    if following is not None and is_number(following):
        raise _refuse(path, f"its {section} section declares {count} numbers, but more follow them (its count "
                            "line is wrong: the numbers past it would be read as the next section)")
    return values


def _check_cells(tokens: list[str], at: int, path: str) -> int | None:
    """Check a ``CELLS n size`` section of the classic layout (each cell a count and its point
    numbers); the number of cells, or None for the layout of OFFSETS and CONNECTIVITY."""
    n, size = whole_or_none(tokens[at + 1]) if at + 1 < len(tokens) else None, \
        whole_or_none(tokens[at + 2]) if at + 2 < len(tokens) else None
    if n is None or size is None or n < 0 or size < 0:
        raise _refuse(path, f"its CELLS line ({' '.join(tokens[at:at + 3])}) is not 'CELLS n size' with two counts")
    if at + 3 < len(tokens) and tokens[at + 3].upper() == "OFFSETS":
        return _check_offsets(tokens, at, n, size, path)
    values = _numbers_after(tokens, at + 3, size, path, f"CELLS {n} {size}")
    position = 0
    for cell in range(n):
        count = whole_or_none(values[position]) if position < size else None
        if count is None or count < 0 or position + 1 + count > size:
            found = "its numbers end" if position >= size else f"it has {values[position]!r} as a vertex count"
            raise _refuse(path, f"its CELLS section declares {n} cells in {size} numbers, but at cell {cell + 1} "
                                f"{found}")
        if any(whole_or_none(token) is None for token in values[position + 1:position + 1 + count]):
            raise _refuse(path, f"cell {cell + 1} of its CELLS section has a point number that is not a whole number")
        position += 1 + count
    if position != size:
        raise _refuse(path, f"its CELLS section declares {size} numbers, but its {n} cells take {position}")
    return n


def _check_offsets(tokens: list[str], at: int, n: int, size: int, path: str) -> int:
    """Check ``CELLS n size`` of the layout VTK 9 writes (``OFFSETS`` of n numbers, then
    ``CONNECTIVITY`` of size numbers); the number of cells, n - 1."""
    offsets = [whole_or_none(t) for t in _numbers_after(tokens, at + 5, n, path, f"OFFSETS of CELLS {n} {size}")]
    connectivity = at + 5 + n
    if connectivity >= len(tokens) or tokens[connectivity].upper() != "CONNECTIVITY":
        raise _refuse(path, f"its OFFSETS section (CELLS {n} {size}) is not followed by CONNECTIVITY")
    if any(o is None for o in offsets) or (offsets and (offsets[0] != 0 or offsets[-1] != size)) or any(
            b < a for a, b in zip(offsets, offsets[1:])):
        raise _refuse(path, f"its OFFSETS section does not run from 0 to {size} (its CONNECTIVITY's numbers) without "
                            "decreasing: cells would be read past the connectivity")
    values = _numbers_after(tokens, connectivity + 2, size, path, f"CONNECTIVITY of CELLS {n} {size}")
    if any(whole_or_none(token) is None for token in values):
        raise _refuse(path, "its CONNECTIVITY section has a point number that is not a whole number")
    return max(n - 1, 0)


def check_legacy_vtk(path: str, data: bytes) -> None:
    """InputError when an ASCII legacy ``.vtk`` file's POINTS, CELLS or CELL_TYPES count line does
    not match the values after it. Binary files are left to VTK."""
    lines = data.split(b"\n", 3)
    if len(lines) < 4 or lines[2].strip().upper() != b"ASCII":
        return
    tokens = lines[3].decode("latin-1").split()
    points = _section(tokens, "POINTS")
    if points is not None:
        n = whole_or_none(tokens[points + 1]) if points + 1 < len(tokens) else None
        if n is None or n < 0:
            raise _refuse(path, "its POINTS line is not 'POINTS n type' with a count")
        _numbers_after(tokens, points + 3, 3 * n, path, f"POINTS {n} (3 x {n} coordinates)")
    cells_at = _section(tokens, "CELLS")
    cells = None if cells_at is None else _check_cells(tokens, cells_at, path)
    types_at = _section(tokens, "CELL_TYPES")
    if types_at is not None and cells is not None:
        n = whole_or_none(tokens[types_at + 1]) if types_at + 1 < len(tokens) else None
        if n != cells:
            raise _refuse(path, f"its CELL_TYPES section declares {tokens[types_at + 1] if n is not None else 'no'} "
                                f"types for its {cells} cells")
        _numbers_after(tokens, types_at + 2, n, path, f"CELL_TYPES {n}")
