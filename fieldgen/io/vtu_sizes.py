"""What a VTK XML file declares it holds, checked against its size before vtk allocates it, and
its arrays' names checked to be one array each.

vtk sizes every array from the XML header (a ``<Piece>``'s ``NumberOfPoints`` and
``NumberOfCells``, a ``<DataArray>``'s ``NumberOfTuples`` and ``NumberOfComponents``) before it
reads a byte of the data, and ends the whole process (``std::bad_alloc``) when it cannot allocate
them: a damaged header of one asset would stop ``fieldgen batch`` and every item with it.
:func:`check_declared_sizes` refuses such a file first, naming it.
"""

from __future__ import annotations

import os
from collections import Counter

from fieldgen.errors import InputError

#: The most values one byte of the file can hold, by the ``compressor`` its ``<VTKFile>`` names:
#: deflate expands at most 1032 to 1 and LZ4 255 to 1; uncompressed (raw, base64 or ASCII) data
#: takes a byte a value at least. A compressor not listed (LZMA) is not bounded here.
MOST_VALUES_PER_BYTE = {"": 1, "vtkZLibDataCompressor": 1032, "vtkLZ4DataCompressor": 255}


def _count(element, key: str, default: int) -> int:
    text = (element.GetAttribute(key) or "").strip()
    return int(text) if text.isdigit() else default       # a negative or non-number: vtk's own error


def declared_values(root) -> int:
    """The values the arrays under the XML element ``root`` declare: a ``<Piece>``'s points and
    cells (which size the arrays in its PointData, Points, CellData and Cells) and each
    DataArray's tuples times its components."""
    total, stack = 0, [(root, 0)]
    while stack:                           # not recursive: a hostile file may nest deeply
        element, rows = stack.pop()
        name, sizes = element.GetName(), {}
        if name == "DataArray":
            total += _count(element, "NumberOfTuples", rows) * max(_count(element, "NumberOfComponents", 1), 1)
        elif name == "Piece":
            points, cells = _count(element, "NumberOfPoints", 0), _count(element, "NumberOfCells", 0)
            total += points + cells
            sizes = {"PointData": points, "Points": points, "CellData": cells, "Cells": cells}
        stack.extend((child, sizes.get(child.GetName(), rows))
                     for child in map(element.GetNestedElement, range(element.GetNumberOfNestedElements())))
    return total


def check_declared_sizes(reader, path: str) -> None:
    """InputError naming ``path`` when the XML header ``reader`` has read (``UpdateInformation``)
    declares more values than the file's bytes can hold (:data:`MOST_VALUES_PER_BYTE`)."""
    root = reader.GetXMLParser().GetRootElement()
    per_byte = None if root is None else MOST_VALUES_PER_BYTE.get(root.GetAttribute("compressor") or "")
    if per_byte is None:                   # unparsed (vtk says why) or a compressor not bounded
        return
    size, declared = os.path.getsize(path), declared_values(root)
    if declared > per_byte * size:
        raise InputError(f"its header declares {declared:,} values in its arrays, more than its {size:,} "
                         "bytes can hold: the header is damaged", path=path,
                         fix="rewrite the asset (fieldgen build); the file is damaged")


def check_unique_names(reader, path: str) -> None:
    """InputError naming ``path`` when a ``<PointData>``, ``<CellData>`` or ``<FieldData>`` of the
    XML header ``reader`` has read declares two arrays of one name (a file edited by hand): vtk and
    ParaView keep the first, a reader filling a mapping by name the last, so which ``pressure`` the
    asset holds depends on the reader, and no check of one of them speaks for the other."""
    root = reader.GetXMLParser().GetRootElement()
    stack = [] if root is None else [root]
    while stack:                           # not recursive: a hostile file may nest deeply
        element = stack.pop()
        children = [element.GetNestedElement(k) for k in range(element.GetNumberOfNestedElements())]
        if element.GetName() in ("PointData", "CellData", "FieldData"):
            counts = Counter(child.GetAttribute("Name") for child in children if child.GetName() == "DataArray")
            twice = next((name for name, count in counts.items() if count > 1), None)
            if twice is not None:
                raise InputError(f"its {element.GetName()} declares {counts[twice]} arrays named {twice!r}: "
                                 "readers disagree on which one the asset holds", path=path,
                                 fix="remove all but one of them, or rewrite the asset (fieldgen build)")
        stack.extend(children)
