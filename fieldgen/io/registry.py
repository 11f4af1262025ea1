"""The one table of surface readers: each file format registers its reader once, by the
suffixes it is named with (``register_reader((".stl",), read_stl)``), and
:func:`reader_for` finds it. The readers themselves are in :mod:`fieldgen.io.surface_readers`,
which registers them when it is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np


class Triangles(NamedTuple):
    """A surface file as read, unrepaired: vertices as the file gives them."""

    vertices: np.ndarray       # (n, 3) float64
    faces: np.ndarray          # (m, 3) int64
    face_groups: np.ndarray    # (m,) int64 index into group_names, -1 where none
    group_names: tuple[str, ...]


@dataclass(frozen=True)
class SurfaceReader:
    """How one format is read: ``read(path, data)`` with the file's bytes already in ``data``."""

    read: Callable[[str, bytes], Triangles]
    in_metres: bool = False    # the format names its own length unit and is read in metres


_READERS: dict[str, SurfaceReader] = {}
#: The suffix under which the reader of every suffix nobody registered is kept.
ANY_OTHER = "*"


def register_reader(suffixes: tuple[str, ...], read: Callable[[str, bytes], Triangles], *,
                    in_metres: bool = False) -> None:
    """Register ``read`` for the lower-case ``suffixes`` (with their dot, or :data:`ANY_OTHER`);
    a suffix is registered once."""
    for suffix in suffixes:
        if suffix in _READERS:
            raise ValueError(f"a reader is registered for {suffix!r} already")
        _READERS[suffix] = SurfaceReader(read=read, in_metres=in_metres)


def reader_for(suffix: str) -> SurfaceReader:
    """The reader registered for ``suffix`` (lower case, with its dot), else the one for any other."""
    return _READERS.get(suffix) or _READERS[ANY_OTHER]
