"""A glTF's (``.glb``, ``.gltf``) triangle indices, checked to be stored as integers before trimesh
reads them.

glTF stores a primitive's vertex indices as unsigned bytes, shorts or ints (component types 5121,
5123, 5125). trimesh reads an index accessor of another type as that type and the mesh then casts
it to integers: floats are truncated (a face joins other vertices than the file names), and the
bits of integers read as floats are all about zero (every face collapses onto vertex 0).
"""

from __future__ import annotations

import json
import struct

from fieldgen.errors import InputError

#: glTF's index component types: unsigned byte, unsigned short, unsigned int.
INDEX_TYPES = {5121: "unsigned byte", 5123: "unsigned short", 5125: "unsigned int"}
#: The names of glTF's other component types, for a message.
OTHER_TYPES = {5120: "signed byte", 5122: "signed short", 5124: "signed int", 5126: "float"}


def _document(data: bytes) -> dict | None:
    """The JSON of a binary glTF (its first chunk) or a text one; None when it is not readable
    (trimesh then says what it makes of the file)."""
    try:
        if data[:4] == b"glTF":
            length, kind = struct.unpack_from("<I4s", data, 12)
            text = data[20:20 + length] if kind == b"JSON" else b""
        else:
            text = data
        document = json.loads(text.decode("utf-8"))
    except (struct.error, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


def check_index_types(path: str, data: bytes) -> None:
    """InputError when a mesh primitive's index accessor is not of an unsigned integer type."""
    document = _document(data)
    if document is None:
        return
    accessors = document.get("accessors")
    meshes = document.get("meshes")
    if not isinstance(accessors, list) or not isinstance(meshes, list):
        return
    for number, mesh in enumerate(meshes):
        primitives = mesh.get("primitives") if isinstance(mesh, dict) else None
        for primitive in primitives if isinstance(primitives, list) else ():
            index = primitive.get("indices") if isinstance(primitive, dict) else None
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(accessors):
                continue
            accessor = accessors[index]
            kind = accessor.get("componentType") if isinstance(accessor, dict) else None
            if kind not in INDEX_TYPES:
                name = f"mesh {mesh['name']!r}" if isinstance(mesh.get("name"), str) else f"mesh {number}"
                what = OTHER_TYPES.get(kind, f"component type {kind!r}")
                raise InputError(f"{name}: its triangle indices (accessor {index}) are stored as {what}s, which "
                                 "glTF does not allow (they would be read as other vertices)", path=path,
                                 fix="export the mesh again; glTF indices are unsigned bytes, shorts or ints")
