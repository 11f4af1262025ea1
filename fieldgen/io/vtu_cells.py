"""The cells a VTK XML UnstructuredGrid holds, checked against its data before vtk allocates them.

vtk reads a ``<Piece>``'s cell ``offsets`` first and sizes the ``connectivity`` array by the last
offset, before it reads a value of the connectivity: an offset of 1e11 in a file of a few
kilobytes (its header sane, so :mod:`fieldgen.io.vtu_sizes` passes it) ends the whole process
(``std::bad_alloc``). :func:`check_cell_offsets` reads the last offsets and the number of values
the connectivity holds, in each encoding vtk reads (ASCII, base64 inline or appended, raw
appended; uncompressed, or in compressed blocks, whose header is checked against the file's
size too: vtk allocates the blocks it declares), and refuses the file, naming it, when an offset
reaches past the connectivity. Point ids past the points need no check here: vtk allocates
nothing by them, and :func:`fieldgen.io.asset.check_tet_indices` refuses them after the read.
"""

from __future__ import annotations

import base64
import binascii
import lzma
import math
import os
import zlib

import numpy as np

from fieldgen.errors import InputError
from fieldgen.io.vtu_sizes import MOST_VALUES_PER_BYTE

#: numpy's letter and size for each VTK word type vtk's XML reader names.
WORDS = {"Int8": "i1", "UInt8": "u1", "Int16": "i2", "UInt16": "u2", "Int32": "i4", "UInt32": "u4",
         "Int64": "i8", "UInt64": "u8", "Float32": "f4", "Float64": "f8"}
FIX = "rewrite the asset (fieldgen build); the file is damaged"
CHUNK = 1 << 20


class Unread(Exception):
    """The data cannot be decoded here (vtk's own reader says why): the check is left to vtk."""


def _lz4(data: bytes, size: int) -> bytes:
    from vtkmodules.util.numpy_support import vtk_to_numpy  # lazy: heavy (VTK), LZ4 files only
    from vtkmodules.vtkIOCore import vtkLZ4DataCompressor  # lazy: heavy (VTK), LZ4 files only

    compressor = vtkLZ4DataCompressor()
    compressor.AddObserver("ErrorEvent", lambda *_: None)   # the failure is ours to report, not printed
    out = compressor.Uncompress(data, len(data), size)
    if out is None:
        raise Unread
    return vtk_to_numpy(out).tobytes()


def _uncompress(compressor: str, data: bytes, size: int) -> bytes:
    try:                                                # at most the block's size, whatever the data
        if compressor == "vtkZLibDataCompressor":
            return zlib.decompressobj().decompress(data, size)
        if compressor == "vtkLZMADataCompressor":
            return lzma.LZMADecompressor().decompress(data, size)
    except (zlib.error, lzma.LZMAError):
        raise Unread from None
    if compressor == "vtkLZ4DataCompressor":
        return _lz4(data, size)
    raise Unread                                        # a compressor vtk reads and we do not


class _Layout:
    """How the file encodes its arrays: byte order, header word, compressor, appended data."""

    def __init__(self, root, parser, path: str):
        self.path, self.size = path, os.path.getsize(path)
        order = "<" if (root.GetAttribute("byte_order") or "LittleEndian") == "LittleEndian" else ">"
        self.order = order
        self.header = order + ("u8" if root.GetAttribute("header_type") == "UInt64" else "u4")
        self.compressor = root.GetAttribute("compressor") or ""
        appended = root.FindNestedElementWithName("AppendedData")
        self.appended = None if appended is None else parser.GetAppendedDataPosition()
        self.base64 = appended is not None and (appended.GetAttribute("encoding") or "") != "raw"
        self.per_byte = MOST_VALUES_PER_BYTE.get(self.compressor, 1032)


def _text(stream, start: int, need: int | None) -> bytes:
    """The characters from ``start`` up to the next ``<`` (or ``need`` of them), whitespace dropped."""
    stream.seek(start)
    parts, count = [], 0
    while need is None or count < need:
        chunk = stream.read(CHUNK)
        if not chunk:
            break
        end = chunk.find(b"<")
        part = b"".join((chunk if end < 0 else chunk[:end]).split())
        parts.append(part)
        count += len(part)
        if end >= 0:
            break
    return b"".join(parts)


def _inline_start(stream, element) -> int:
    """Where an inline array's data begins: after the ``>`` of its start tag, as vtk seeks it."""
    start = element.GetXMLByteIndex()
    stream.seek(start)
    head = stream.read(CHUNK)
    end = head.find(b">")
    if end < 0:
        raise Unread
    return start + end + 1


class _Binary:
    """Bytes ``[begin, begin + count)`` of one array's binary payload (its header, then its data),
    read raw or decoded from base64 (a compressed array's header is encoded alone, its blocks after)."""

    def __init__(self, layout: _Layout, stream, start: int, encoded: bool):
        self.layout, self.stream, self.start, self.encoded = layout, stream, start, encoded
        self.head, self.split = 0, None      # compressed, encoded: the header's bytes and characters

    def read(self, begin: int, count: int) -> bytes:
        if count < 0 or begin < 0 or begin + count > 2 * self.layout.size:      # past anything the file holds
            raise Unread
        if not self.encoded:
            self.stream.seek(self.start + begin)
            data = self.stream.read(count)
        else:
            skip = 0
            if self.split is not None and begin >= self.head:
                begin, skip = begin - self.head, self.split
            need = 4 * math.ceil((begin + count) / 3)
            chars = _text(self.stream, self.start, skip + need)[skip: skip + need]
            try:
                data = base64.b64decode(chars, validate=True)[begin: begin + count]
            except (binascii.Error, ValueError):
                raise Unread from None
        if len(data) != count:
            raise Unread
        return data

    def words(self, begin: int, count: int, dtype: str) -> np.ndarray:
        return np.frombuffer(self.read(begin, count * np.dtype(dtype).itemsize), dtype=dtype)


def _blocks(layout: _Layout, binary: _Binary, name: str) -> tuple[int, int, int, np.ndarray]:
    """A compressed array's header: block count, block size, last block's size, compressed sizes.
    InputError when it declares more than the file holds (vtk would allocate it)."""
    word = np.dtype(layout.header).itemsize
    count, size, last = (int(v) for v in binary.words(0, 3, layout.header))
    if count * word > layout.size:
        raise InputError(f"the header of its compressed array {name!r} declares {count:,} blocks, more than its "
                         f"{layout.size:,} bytes can hold: the data is damaged", path=layout.path, fix=FIX)
    sizes = binary.words(3 * word, count, layout.header).astype(np.int64)
    if binary.encoded:                             # the header is encoded alone: its characters end here
        binary.head, binary.split = (3 + count) * word, 4 * math.ceil((3 + count) * word / 3)
    packed = int(sizes.sum())
    total = 0 if count == 0 else (count - 1) * size + (last or size)
    if (sizes < 0).any() or packed > layout.size or max(size, last, total) > layout.per_byte * layout.size:
        raise InputError(f"the header of its compressed array {name!r} declares {count:,} block{'s' if count != 1 else ''} of "
                         f"{max(size, last):,} bytes ({total:,} in all, {packed:,} compressed), more than its "
                         f"{layout.size:,} bytes can hold: the data is damaged", path=layout.path, fix=FIX)
    return count, size, last, sizes


class _Array:
    """One binary DataArray: how many values it holds (:attr:`count`), and any of them,
    decompressing only the blocks they are in."""

    def __init__(self, layout: _Layout, stream, element):
        word_type = WORDS.get(element.GetAttribute("type") or "")
        if word_type is None:
            raise Unread
        self.layout, self.dtype = layout, layout.order + word_type
        if element.GetAttribute("format") == "appended":
            offset = (element.GetAttribute("offset") or "").strip()
            if layout.appended is None or not offset.isdigit():
                raise Unread
            binary = _Binary(layout, stream, layout.appended + int(offset), layout.base64)
        else:
            binary = _Binary(layout, stream, _inline_start(stream, element), True)
        self.binary, word = binary, np.dtype(layout.header).itemsize
        if layout.compressor:
            self.blocks = _blocks(layout, binary, element.GetAttribute("Name") or "")
            count, size, last, _ = self.blocks
            self.data, self.bytes = (3 + count) * word, 0 if count == 0 else (count - 1) * size + (last or size)
        else:
            self.blocks, self.data = None, word
            self.bytes = int(binary.words(0, 1, layout.header)[0])
        # Its header's word, not the bytes there: at most what the file's bytes can hold (a hostile
        # header declaring 8e11 bytes in a few kilobytes would pass the offsets that vtk allocates by).
        self.count = min(self.bytes, layout.per_byte * layout.size) // np.dtype(self.dtype).itemsize

    def values(self, first: int, last: int) -> np.ndarray:
        """Values ``first`` to ``last - 1`` (within :attr:`count`)."""
        item = np.dtype(self.dtype).itemsize
        if self.blocks is None:
            return self.binary.words(self.data + first * item, last - first, self.dtype)
        count, size, tail, sizes = self.blocks
        begin, end = first * item, last * item
        if size <= 0 or end <= begin:
            raise Unread
        starts = np.concatenate([[0], np.cumsum(sizes)])
        out = []
        for block in range(begin // size, min((end - 1) // size + 1, count)):
            length = tail if block == count - 1 and tail else size
            packed = self.binary.read(self.data + int(starts[block]), int(sizes[block]))
            out.append(_uncompress(self.layout.compressor, packed, length)[:length])
        joined = b"".join(out)[begin % size:][: end - begin]
        if len(joined) != end - begin:
            raise Unread
        return np.frombuffer(joined, dtype=self.dtype)


def _reach_and_held(layout: _Layout, stream, offsets, connectivity, cells: int) -> tuple[int, int]:
    """The offset vtk sizes the connectivity by (the larger of offsets ``cells - 1`` and ``cells``:
    with or without a leading 0) and the number of values the connectivity holds."""
    if offsets.GetAttribute("format") == "ascii":
        words = _tokens(stream, offsets)
        try:
            ends = [int(word) for word in words[cells - 1: cells + 1]]
        except ValueError:
            raise Unread from None
    else:
        array = _Array(layout, stream, offsets)
        if array.count < cells:
            raise Unread                                 # too few offsets: vtk says so
        ends = array.values(cells - 1, min(array.count, cells + 1)).tolist()
    if not ends:
        raise Unread
    if connectivity.GetAttribute("format") == "ascii":
        held = len(_tokens(stream, connectivity))
    else:
        held = _Array(layout, stream, connectivity).count
    return int(max(ends)), held


def _tokens(stream, element) -> list[bytes]:
    """The whitespace-separated words of an ASCII array."""
    stream.seek(_inline_start(stream, element))
    parts = []
    while True:
        chunk = stream.read(CHUNK)
        end = chunk.find(b"<")
        parts.append(chunk if end < 0 else chunk[:end])
        if end >= 0 or not chunk:
            return b"".join(parts).split()


def _elements(root, name: str):
    """Every element called ``name`` under ``root`` (not recursive: a hostile file may nest deeply)."""
    stack = [root]
    while stack:
        element = stack.pop()
        if element.GetName() == name:
            yield element
        stack.extend(map(element.GetNestedElement, range(element.GetNumberOfNestedElements())))


def check_cell_offsets(reader, path: str) -> None:
    """InputError naming ``path`` when a ``<Piece>`` of the file the XML ``reader`` has read
    (``UpdateInformation``) has cell offsets reaching past the values its connectivity holds, or
    a compressed array whose block header declares more than the file holds."""
    parser = reader.GetXMLParser()
    root = parser.GetRootElement()
    if root is None:
        return
    layout = _Layout(root, parser, path)
    with open(path, "rb") as stream:
        if layout.compressor:
            for element in _elements(root, "DataArray"):
                if element.GetAttribute("format") != "ascii":
                    _checked(_Array, layout, stream, element)
        for piece in _elements(root, "Piece"):
            cells = (piece.GetAttribute("NumberOfCells") or "").strip()
            found = {e.GetAttribute("Name"): e
                     for cell in _elements(piece, "Cells") for e in _elements(cell, "DataArray")}
            if not cells.isdigit() or int(cells) == 0 or not {"offsets", "connectivity"} <= found.keys():
                continue                              # vtk's own error, or nothing to size
            held = _checked(_reach_and_held, layout, stream, found["offsets"], found["connectivity"], int(cells))
            if held is not None and held[0] > held[1]:
                raise InputError(f"its cell offsets reach {held[0]:,}, but its connectivity holds {held[1]:,} "
                                 "point ids: the cells are damaged", path=path, fix=FIX)


def _checked(read, *args):
    """What ``read(*args)`` returns; None when the data cannot be decoded here (vtk reports why)."""
    try:
        return read(*args)
    except Unread:
        return None
