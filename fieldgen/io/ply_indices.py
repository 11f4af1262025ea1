"""A PLY's face indices, checked to be whole numbers its header's type holds before trimesh casts
them to integers.

trimesh reads an ASCII PLY's face list with the type its header declares (``int``: ``2.7`` is cut
to 2; ``uchar``: ``299`` wraps round to 43) and a list declared ``float`` or ``double`` (ASCII or
binary) as floats that the mesh then truncates: either way a face silently joins other vertices
than the file names. A whole number written as a float (``2.0``) names one vertex and is read as it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from fieldgen.errors import InputError
from fieldgen.tables import number_as_written

#: The names exporters give the face element's list of vertex indices (trimesh reads these).
INDEX_LISTS = ("vertex_indices", "vertex_index")

#: The fix when an index is not a whole number.
FIX = ("export the mesh again with whole-number vertex indices (a PLY face lists the numbers of its "
       "vertices, counted from 0, and is read as integers)")

#: PLY's scalar types (both spellings) as numpy types: a value the type cannot hold is cast to another.
PLY_TYPES = {"char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1", "short": "i2", "int16": "i2",
             "ushort": "u2", "uint16": "u2", "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4",
             "float": "f4", "float32": "f4", "double": "f8", "float64": "f8"}


#: The fix when the index is a whole number its declared type is too narrow for.
WIDER = ("declare the face list's index type wide enough for every vertex number (e.g. 'property list uchar "
         "int vertex_indices'), or export the mesh again")


def _refuse(path: str, face: int, faces: int, value: str, kind: str | None = None) -> InputError:
    """``kind``: the declared index type that cannot hold ``value`` (None: not a whole number)."""
    why = "which is not a whole number" if kind is None else f"which its header's index type {kind!r} cannot hold"
    return InputError(f"face {face + 1} of {faces} has the vertex index {value}, {why} (it would be read as "
                      "another vertex)", path=path, fix=FIX if kind is None else WIDER)


def ply_header(data: bytes) -> tuple[bool, list[tuple[str, int, list[list[str]]]], int] | None:
    """A PLY's header: whether it is ASCII, its elements (name, count, properties as header words)
    and where its body starts; None when ``data`` is no PLY or its header does not end within
    ``HEADER_BYTES``."""
    head = data[:HEADER_BYTES]
    end = head.find(b"end_header")
    if not head.startswith(b"ply") or end < 0:
        return None
    lines = head[:end].decode("latin-1").splitlines()
    elements: list[tuple[str, int, list[list[str]]]] = []
    for line in lines:
        words = line.split()
        if words[:1] == ["element"] and (len(words) != 3 or not words[2].isdigit()):
            return None         # a header this does not understand: trimesh says what it makes of it
        if words[:1] == ["element"]:
            elements.append((words[1], int(words[2]), []))
        elif words[:1] == ["property"] and elements:
            elements[-1][2].append(words[1:])
    newline = data.find(b"\n", end)
    ascii_ = any(line.split()[:2] == ["format", "ascii"] for line in lines)
    return ascii_, elements, (len(data) if newline < 0 else newline + 1)


#: How far into a file its PLY header must end.
HEADER_BYTES = 1 << 20


def _header(data: bytes) -> tuple[list[tuple[str, int, list[list[str]]]], int] | None:
    """An ASCII PLY's elements and where its body starts (:func:`ply_header`); None for a binary
    PLY or a header this does not understand."""
    header = ply_header(data)
    if header is None or not header[0]:
        return None
    return header[1], header[2]


def _held(values: np.ndarray, kind: str | None) -> np.ndarray:
    """Which of ``values`` are whole numbers the PLY type ``kind`` holds exactly (all of them
    when the type is unknown: trimesh then says what it makes of it)."""
    with np.errstate(invalid="ignore", over="ignore"):
        whole = np.isfinite(values) & (values == np.round(values))
        if kind in PLY_TYPES:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                whole &= values.astype(PLY_TYPES[kind]).astype(np.float64) == values
    return whole


def _number(token: str) -> float:
    try:
        return number_as_written(token)
    except ValueError:
        return math.nan


def _check_row(words: list[str], properties: list[list[str]], path: str, face: int, faces: int) -> None:
    """Walk one face line by its properties; refuse a list count or vertex index that is not a
    whole number its declared type holds."""
    at = 0
    for words_of in properties:
        if words_of[:1] != ["list"] or len(words_of) != 4:
            at += 1
            continue
        if at >= len(words):
            return                     # a short line: trimesh says what it makes of it
        count = _number(words[at])
        if not _held(np.array([count]), words_of[1])[0]:
            raise InputError(f"face {face + 1} of {faces} starts its list with {words[at]!r}, not a whole count "
                             "of vertices", path=path, fix=FIX)
        items = words[at + 1:at + 1 + int(count)]
        if words_of[3] in INDEX_LISTS:
            held = _held(np.array([_number(t) for t in items], dtype=np.float64), words_of[2])
            if not held.all():
                bad = items[int(np.flatnonzero(~held)[0])]
                whole = _held(np.array([_number(bad)]), None)[0]
                raise _refuse(path, face, faces, bad, words_of[2] if whole else None)
        at += 1 + int(count)


def _uniform_held(rows: list[str], properties: list[list[str]]) -> bool:
    """Whether the face lines, each one list of one length among scalar properties (a colour),
    hold only counts and indices their types hold (vectorized: a file of millions of faces); False
    when any does not, or the lines are not of that layout (each line is then walked)."""
    lists = [k for k, p in enumerate(properties) if p[:1] == ["list"]]
    if len(lists) != 1 or len(properties[lists[0]]) != 4 or not rows \
            or any(len(p) != 2 for k, p in enumerate(properties) if k != lists[0]):
        return False
    try:
        values = np.array(" ".join(rows).split(), dtype=np.float64)
    except ValueError:
        return False
    at = lists[0]                                   # the count's column: one value per scalar before it
    first = values[at] if values.size > at else -1.0
    count = int(first) if first == int(first) and first >= 0 else -1
    width = len(properties) + count
    if count < 1 or values.size != width * len(rows):
        return False
    table = values.reshape(len(rows), width)
    return bool((table[:, at] == count).all() and _held(table[:, at + 1:at + 1 + count].ravel(),
                                                          properties[at][2]).all())


def check_ascii_indices(path: str, data: bytes) -> None:
    """InputError when an ASCII PLY's face lists a vertex count or index that is not a whole
    number its declared type holds (trimesh casts it to the type: truncated, or wrapped round)."""
    header = _header(data)
    if header is None:
        return
    elements, start = header
    lines = [line for line in data[start:].decode("latin-1").splitlines() if line.strip()]
    row = 0
    for name, count, properties in elements:
        rows = lines[row:row + count]
        row += count
        if name != "face" or not any(p[:1] == ["list"] and p[-1] in INDEX_LISTS for p in properties):
            continue
        if _uniform_held(rows, properties):
            continue
        for face, line in enumerate(rows):
            _check_row(line.split("#", 1)[0].split(), properties, path, face, count)


def _index_values(blob) -> list[np.ndarray] | None:
    """The vertex indices of trimesh's raw face data, a float array a face; None when they are not
    floats (integers are read as they are)."""
    if isinstance(blob, dict):
        values = next((blob[name] for name in INDEX_LISTS if name in blob), None)
    elif isinstance(blob, np.ndarray) and blob.dtype.names:
        name = next((n for n in blob.dtype.names if n in INDEX_LISTS), blob.dtype.names[0])
        values = blob[name]["f1"] if blob[name].dtype.names else blob[name]
    else:
        return None
    if values is None:
        return None
    values = np.asarray(values)
    rows = list(values) if values.dtype == object else [values.reshape(len(values), -1)]
    rows = [np.asarray(row) for row in rows]
    return rows if rows and all(row.dtype.kind == "f" for row in rows) else None


def check_raw_indices(path: str, raw) -> None:
    """InputError when a PLY's face list, declared ``float`` or ``double`` (trimesh's raw elements,
    ``metadata['_ply_raw']``), holds a vertex index that is not a whole number."""
    face = raw.get("face") if isinstance(raw, dict) else None
    rows = _index_values(face.get("data")) if isinstance(face, dict) else None
    if rows is None:
        return
    table = rows[0] if len(rows) == 1 and rows[0].ndim == 2 else None   # one array of all faces
    with np.errstate(invalid="ignore"):
        if table is not None:
            bad = (~np.isfinite(table) | (table != np.round(table))).any(axis=1)
        else:
            bad = np.array([bool((~np.isfinite(r) | (r != np.round(r))).any()) for r in rows], bool)
    if bad.any():
        number = int(np.flatnonzero(bad)[0])
        row = np.ravel(table[number] if table is not None else rows[number]).astype(np.float64)
        value = row[np.flatnonzero(~np.isfinite(row) | (row != np.round(row)))[0]]
        raise _refuse(path, number, len(bad), f"{value:g}")
