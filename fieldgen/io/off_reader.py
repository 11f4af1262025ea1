"""Reading an ASCII OFF file (Geomview's Object File Format) with polygon faces.

trimesh splits an OFF's polygons into fans (a non-convex face then crosses itself) and, with
numpy 2, stops on a face of more than four corners; here each polygon is split by
:func:`fieldgen.io.polygons.split_polygon`. The header keyword may carry the prefixes ST, C and N
(texture, colour, normal after each vertex's x y z, ignored here); the counts follow it on the
same line or the next. Binary OFF, 4OFF and nOFF are left to trimesh (:func:`plain_ascii_off`).
"""

from __future__ import annotations

import re

import numpy as np

from fieldgen.io.polygons import split_polygon
from fieldgen.tables import number_as_written, whole_as_written

#: The header keywords read here: [ST][C][N]OFF, each extra only adding numbers after x y z.
_KEYWORD = re.compile(r"(ST)?C?N?OFF")


def _statements(text: str) -> list[tuple[int, list[str]]]:
    """The non-empty lines of ``text`` without ``#`` comments, as (line number, words)."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        words = raw.split("#", 1)[0].split()
        if words:
            out.append((number, words))
    return out


def plain_ascii_off(data: bytes) -> bool:
    """Whether ``data`` is an ASCII OFF this reader reads: a [ST][C][N]OFF keyword first (or
    none: the counts first), not BINARY."""
    head = _statements(data[:4096].decode("latin-1"))
    if not head:
        return False
    words = head[0][1]
    if _KEYWORD.fullmatch(words[0]):
        return "BINARY" not in (w.upper() for w in words[1:])
    return words[0].isdigit()


def read_off(text: str) -> tuple[np.ndarray, np.ndarray]:
    """``(vertices, triangles)`` of an ASCII OFF; ValueError naming the line where it is not one."""
    lines = _statements(text)
    if lines and _KEYWORD.fullmatch(lines[0][1][0]):
        number, words = lines[0]
        lines = ([(number, words[1:])] if len(words) > 1 else []) + lines[1:]
    if not lines:
        raise ValueError("no counts line (vertices, faces, edges)")
    number, counts = lines[0]
    try:
        n_vertices, n_faces = int(counts[0]), int(counts[1])
    except (IndexError, ValueError):
        raise ValueError(f"line {number} ({' '.join(counts)!r}) is not the counts 'vertices faces edges'") from None
    body = lines[1:]
    if len(body) < n_vertices + n_faces:
        raise ValueError(f"{n_vertices} vertices and {n_faces} faces declared, {len(body)} lines of data")
    vertices = [_vertex(number, words) for number, words in body[:n_vertices]]
    triangles = []
    for number, words in body[n_vertices:n_vertices + n_faces]:
        triangles += split_polygon(_face(number, words, n_vertices), vertices)
    return (np.asarray(vertices, dtype=np.float64).reshape(-1, 3),
            np.asarray(triangles, dtype=np.int64).reshape(-1, 3))


def _vertex(number: int, words: list[str]) -> list[float]:
    try:
        if len(words) >= 3:
            return [number_as_written(x) for x in words[:3]]
    except ValueError:
        pass
    raise ValueError(f"line {number} ({' '.join(words)!r}) is not a vertex x y z")


def _face(number: int, words: list[str], n_vertices: int) -> list[int]:
    """The corners of the face on line ``number``: a count, then as many vertex numbers from 0
    (a colour after them is ignored)."""
    try:
        count = whole_as_written(words[0])
        corners = [whole_as_written(w) for w in words[1:1 + count]]
    except (IndexError, ValueError):
        corners, count = [], -1
    if count < 0 or len(corners) != count:
        raise ValueError(f"line {number} ({' '.join(words)!r}) is not a face: a corner count, then as many "
                         "vertex numbers")
    bad = [k for k in corners if not 0 <= k < n_vertices]
    if bad:
        raise ValueError(f"line {number}: a face refers to vertex {bad[0]}, but OFF numbers its "
                         f"{n_vertices} vertices from 0")
    return corners
