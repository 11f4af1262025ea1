"""Reading surface files: every format's reader, each registered once in
:mod:`fieldgen.io.registry`, and :func:`read_triangles`, the one entry point (behind
:func:`fieldgen.surface.stage.load_surface` and the runtime's rigid bodies).

Binary STL, OBJ and ASCII OFF are read here directly (their polygons split inside themselves:
:mod:`fieldgen.io.polygons`); PLY, binary OFF, GLB and what else trimesh knows through trimesh; volume-mesh formats (their triangle cells) through meshio's public per-format readers;
STEP through OpenCASCADE (cascadio, the optional extra ``step``). Errors are InputErrors naming
the file and a fix, never a traceback or a process exit.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

from fieldgen.errors import InputError
from fieldgen.install import install_hint
from fieldgen.io.asset import read_metadata
from fieldgen.io.gltf_indices import check_index_types
from fieldgen.io.off_reader import plain_ascii_off, read_off
from fieldgen.io.ply_indices import check_ascii_indices, check_raw_indices, ply_header
from fieldgen.io.polygons import split_polygon
from fieldgen.io.registry import ANY_OTHER, Triangles, reader_for, register_reader
from fieldgen.meshing.process import scratch_folder
from fieldgen.paths import special_file
from fieldgen.tables import number_as_written, other_encoding, whole_as_written
from fieldgen.units import LENGTH_UNITS

SURFACE_FORMATS = "STL, OBJ, PLY, OFF or GLB"

#: CAD (B-rep) files, tessellated by OpenCASCADE through cascadio (the optional extra ``step``).
#: They carry their own length unit and are read in metres, whatever ``--units`` says.
STEP_SUFFIXES = (".step", ".stp")
#: OpenCASCADE's tessellation: largest distance of a facet from the B-rep surface (absolute, in
#: OpenCASCADE's millimetres) and largest angle between neighbouring facets' normals (radians).
STEP_LINEAR_DEFLECTION = 0.05
STEP_ANGULAR_DEFLECTION = 0.5

#: Volume-mesh formats (FEM meshes), read with meshio: their triangle cells, if any, are the surface.
MESHIO_SUFFIXES = (".vtk", ".vtu", ".msh", ".mesh", ".inp", ".xdmf")

#: Held while fds 1 and 2 are redirected (:func:`_standard_output_to`).
_DESCRIPTORS = threading.Lock()


# --------------------------------------------------------------------------- OBJ

def _read_obj(text: str) -> Triangles:
    """Minimal OBJ reader keeping each face's group/object name (``g``/``o``, latest wins).

    Polygons are split into triangles by :func:`fieldgen.io.polygons.split_polygon` (a fan
    if convex); negative indices count back from the latest vertex.
    """
    vertices, faces, groups = [], [], []
    names: dict[str, int] = {}
    current = -1
    for number, raw in _obj_lines(text):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        head, _, rest = line.replace("\t", " ").partition(" ")
        if head == "v":
            vertices.append(_obj_vertex(rest, number))
        elif head in ("g", "o"):
            name = rest.strip()
            if not name or name == "default":
                current = -1
            else:
                current = names.setdefault(name, len(names))
        elif head == "f":
            idx = []
            for token in rest.split():
                k = _obj_index(token, number)
                if k == 0 or -k > len(vertices):
                    raise ValueError(f"face {len(faces) + 1} refers to vertex {k}: OBJ numbers vertices from 1, "
                                     f"or back from the last one read with -1 ({len(vertices)} read so far)")
                idx.append(k - 1 if k > 0 else len(vertices) + k)
            split = split_polygon(idx, vertices) if len(idx) > 3 else [tuple(idx)] if len(idx) == 3 else []
            faces += split
            groups += [current] * len(split)
    v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    try:
        fc = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    except OverflowError:           # a vertex number past int64: no file has that many vertices
        raise ValueError(f"a face refers to a vertex numbered past {np.iinfo(np.int64).max} "
                         f"({len(vertices)} vertices read)") from None
    return Triangles(v, fc, np.asarray(groups, dtype=np.int64), tuple(names))


def _obj_lines(text: str) -> Iterator[tuple[int, str]]:
    """The statements of an OBJ text with their first line's number: a line ending in a
    backslash continues on the next (Rhino writes long faces so)."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.split("#", 1)[0].rstrip()       # a backslash in a comment continues nothing
        if stripped.endswith("\\"):
            pending, start = pending + stripped[:-1] + " ", start or number
            continue
        yield (start or number), pending + raw
        pending, start = "", 0
    if pending:
        yield start, pending


def _obj_vertex(rest: str, number: int) -> list[float]:
    """The x, y, z of the ``v`` line ``number`` (a w or colour after them is ignored); ValueError
    naming the line when it holds fewer than three numbers."""
    words = rest.split()[:3]
    try:
        if len(words) == 3:
            return [number_as_written(x) for x in words]
    except ValueError:
        pass
    raise ValueError(f"line {number} ('v {rest.strip()}') is not a vertex x y z: three numbers needed")


def _obj_index(token: str, number: int) -> int:
    """The vertex number of a face corner (``7``, ``7/1``, ``7//2``) on line ``number``."""
    try:
        return whole_as_written(token.split("/", 1)[0])
    except ValueError:
        raise ValueError(f"line {number}: face corner {token!r} is not a vertex number "
                         "(a whole number, optionally followed by /texture/normal)") from None


def _read_obj_file(path: str, data: bytes) -> Triangles:
    encoding = other_encoding(data)       # decoded as UTF-8, every other byte would be a NUL: no vertex read
    if encoding is not None:
        raise ValueError(f"{encoding} text (by its byte-order mark), not UTF-8 or ASCII: save it as UTF-8")
    return _read_obj(data.decode("utf-8-sig", errors="replace"))    # a byte-order mark is no vertex


# --------------------------------------------------------------------------- STL

#: One triangle of a binary STL: normal, three corners (float32), a 2-byte attribute.
_STL_RECORD = np.dtype([("normal", "<f4", (3,)), ("corners", "<f4", (3, 3)), ("attribute", "<u2")])


def _read_binary_stl(data: bytes) -> Triangles | None:
    """A binary STL (80-byte header, uint32 triangle count, 50 bytes a triangle) as trimesh reads
    it unprocessed: three vertices per triangle in file order, float32 widened to float64; None
    unless the length is exactly what the count says (trimesh's own test), e.g. for ASCII STL.

    Read here because importing trimesh is slow and paid before TetGen can start, and binary STL
    is what CAD exports; tests check that both readers give the same arrays."""
    if len(data) < 84:
        return None
    count = int.from_bytes(data[80:84], "little")
    if len(data) != 84 + _STL_RECORD.itemsize * count:
        return None
    corners = np.frombuffer(data, dtype=_STL_RECORD, count=count, offset=84)["corners"]
    vertices = corners.reshape(-1, 3).astype(np.float64)
    return Triangles(vertices, np.arange(3 * count, dtype=np.int64).reshape(-1, 3),
                     np.full(count, -1, dtype=np.int64), ())


def _read_stl(path: str, data: bytes) -> Triangles:
    """Binary STL directly, anything else through trimesh (ASCII STL). A file trimesh finds no
    triangle in that is not ASCII text is reported as a binary STL of the wrong length."""
    binary = _read_binary_stl(data)
    if binary is not None:
        return binary
    read = _read_with_trimesh(path)
    text = data.lstrip()[:5].lower() == b"solid" and b"\0" not in data
    if len(read[1]) == 0 and len(data) >= 84 and not text:
        count = int.from_bytes(data[80:84], "little")
        raise ValueError(f"a binary STL whose header declares {count} triangles "
                         f"({84 + _STL_RECORD.itemsize * count} bytes) but the file has {len(data)} bytes: "
                         "it was cut short, padded or damaged; export it again")
    return read


# --------------------------------------------------------------------------- trimesh

def _no_triangles(n_vertices: int) -> Triangles:
    return Triangles(np.zeros((n_vertices, 3)), np.zeros((0, 3), np.int64), np.zeros(0, np.int64), ())


def _flattened_scene(scene) -> Triangles:
    """A trimesh Scene's triangle meshes with their node transforms, one face group per geometry."""
    import trimesh  # lazy: heavy, and binary STL and OBJ never need it

    vs, fs, gs, names = [], [], [], []
    offset = 0
    for node in scene.graph.nodes_geometry:
        transform, geometry_name = scene.graph[node]
        geom = scene.geometry[geometry_name]
        if not isinstance(geom, trimesh.Trimesh) or len(geom.faces) == 0:
            continue
        v = np.asarray(geom.vertices, dtype=np.float64)
        if np.isfinite(v).all():     # else kept as the file has them, for check_coordinates to name
            with np.errstate(over="ignore", invalid="ignore"):   # an overflow is refused there too
                v = v @ np.asarray(transform)[:3, :3].T + np.asarray(transform)[:3, 3]
        if geometry_name not in names:
            names.append(geometry_name)
        vs.append(v)
        fs.append(np.asarray(geom.faces, dtype=np.int64) + offset)
        gs.append(np.full(len(geom.faces), names.index(geometry_name), dtype=np.int64))
        offset += len(v)
    if not fs:
        return _no_triangles(sum(len(getattr(g, "vertices", ())) for g in scene.geometry.values()))
    return Triangles(np.concatenate(vs), np.concatenate(fs), np.concatenate(gs), tuple(names))


@contextmanager
def _trimesh_log_off() -> Iterator[None]:
    """trimesh's log off while it reads: it logs what it skips (an ASCII STL's facet normals it
    cannot parse, ``1.#QNAN`` as old Windows exporters write) as a warning with a traceback, which
    Python prints on stderr when no handler is set, before a build that then succeeds. What it
    skips fieldgen does not use (it orients the faces itself); what it cannot read raises."""
    log, quiet = logging.getLogger("trimesh"), logging.NullHandler()     # its modules log below it
    was = log.propagate
    log.addHandler(quiet)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(quiet)
        log.propagate = was


def _read_with_trimesh(path: str) -> Triangles:
    """Any trimesh format, unprocessed; scenes are flattened with their node transforms."""
    import trimesh  # lazy: heavy, and binary STL and OBJ never need it

    with _trimesh_log_off(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # numpy's casts: what they spoil is refused below
        loaded = trimesh.load(path, force=None, process=False)
    if isinstance(loaded, trimesh.Scene):
        return _flattened_scene(loaded)
    if not isinstance(loaded, trimesh.Trimesh):
        return _no_triangles(len(getattr(loaded, "vertices", ())))
    check_raw_indices(path, loaded.metadata.get("_ply_raw"))      # a float face list, truncated by the cast
    faces = np.asarray(loaded.faces, dtype=np.int64).reshape(-1, 3)
    return Triangles(np.asarray(loaded.vertices, dtype=np.float64).reshape(-1, 3), faces,
                     np.full(len(faces), -1, dtype=np.int64), ())


def _read_any_other(path: str, data: bytes) -> Triangles:
    if Path(path).suffix.lower() in (".glb", ".gltf"):
        check_index_types(path, data)        # indices of a type trimesh would cast to other vertices
    return _read_with_trimesh(path)


# --------------------------------------------------------------------------- ASCII PLY and OFF counts
# trimesh reads the counts an ASCII PLY or OFF header declares and takes that many data lines,
# so a file cut short loses faces silently, a face count too small drops the faces past it, and a
# vertex count too large reads face lines as vertices. Both formats write one vertex or face a line: the lines are counted against the header.

def _data_lines(text: str) -> list[str]:
    """The non-empty lines of ``text``, each without its ``#`` comment."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


def _ply_declared(data: bytes) -> tuple[list[tuple[str, int]], int] | None:
    """An ASCII PLY's declared ``(element, count)`` pairs and its data lines; None for a binary
    PLY or a header this does not understand (trimesh then reports what it finds)."""
    header = ply_header(data)
    if header is None or not header[0]:
        return None
    body = data[header[2]:].decode("latin-1")
    return [(name, count) for name, count, _ in header[1]], sum(1 for line in body.splitlines() if line.strip())


def _off_declared(data: bytes) -> tuple[list[tuple[str, int]], int] | None:
    """An OFF's declared vertex and face counts and its data lines after the counts line; None
    when there is no counts line this understands (trimesh then reports what it finds)."""
    lines = _data_lines(data.decode("utf-8", errors="replace"))
    if not lines:
        return None
    head = re.match(r"\S*OFF\b", lines[0])
    counts = lines[0][head.end():].split() if head else []
    if head and not counts:
        counts, lines = (lines[1].split() if len(lines) > 1 else []), lines[1:]
    try:
        vertices, faces = int(counts[0]), int(counts[1])
    except (IndexError, ValueError):
        return None
    return [("vertex", vertices), ("face", faces)], len(lines) - 1


def _counted(elements: list[tuple[str, int]]) -> str:
    plural = {"vertex": "vertices", "face": "faces"}
    return " and ".join(f"{n} {plural.get(name, f'{name!r} elements')}" for name, n in elements)


def check_declared_counts(path: str, data: bytes, suffix: str) -> None:
    """InputError when an ASCII PLY or an OFF holds another number of data lines (one vertex or
    face each) than the vertices and faces its header declares: cut short, a header count too
    large, or one too small (the reader would silently drop the faces past it)."""
    declared = (_ply_declared if suffix == ".ply" else _off_declared)(data)
    if declared is None:
        return
    elements, found = declared
    expected = sum(n for _, n in elements)
    if found != expected:           # more lines: the reader would drop the faces past the count
        extra = found - expected
        why = "it was cut short" if extra < 0 else f"the {extra} line{'s' * (extra > 1)} past them would be dropped"
        raise InputError(f"its header declares {_counted(elements)} ({expected} lines of data), but the file "
                         f"holds {found} lines of data: {why}, or its header's counts are wrong",
                         path=path, fix="export the mesh again from its source (the whole file, one vertex or "
                                        "face a line)")


def _read_counted(path: str, data: bytes) -> Triangles:
    """A PLY or OFF, once its data lines are as many as its header declares: an ASCII OFF read
    here (:mod:`fieldgen.io.off_reader`, its polygons split inside themselves), else through trimesh."""
    check_declared_counts(path, data, Path(path).suffix.lower())
    if Path(path).suffix.lower() == ".ply":
        check_ascii_indices(path, data)
    if Path(path).suffix.lower() == ".off" and plain_ascii_off(data):
        vertices, faces = read_off(data.decode("utf-8", errors="replace"))
        return Triangles(vertices, faces, np.full(len(faces), -1, dtype=np.int64), ())
    return _read_with_trimesh(path)


# --------------------------------------------------------------------------- STEP

def _read_step(path: str, data: bytes) -> Triangles:
    """A STEP file's solids as triangles in metres, one face group per body: OpenCASCADE (cascadio)
    tessellates the B-rep into a GLB in a scratch folder, read back as any GLB. Single-threaded,
    so the triangles, and the asset built on them, do not depend on the machine's thread count."""
    import cascadio       # lazy: optional extra 'step'; ImportError: the caller names the package and the extra

    with scratch_folder("fieldgen-step-") as folder:
        glb = os.path.join(folder, "part.glb")
        log = os.path.join(folder, "opencascade.log")
        # OpenCASCADE and cascadio report on the process's standard output and error, where
        # stdout carries only the report (docs/model.md §1.5): to a file, and into the error if
        # the reading fails.
        with _standard_output_to(log):
            status = cascadio.step_to_glb(str(path), glb, tol_linear=STEP_LINEAR_DEFLECTION,
                                          tol_angular=STEP_ANGULAR_DEFLECTION, tol_relative=False,
                                          merge_primitives=True, use_parallel=False)
        if status != 0 or not os.path.isfile(glb):
            with open(log, "rb") as handle:
                said = re.sub(r"\x1b\[[0-9;]*m|\*{4}", "", handle.read().decode("utf-8", "replace"))
            said = " ".join(said.split())
            raise ValueError("OpenCASCADE could not read it as STEP" + (f": {said[:300]}" if said else ""))
        return _read_with_trimesh(glb)


@contextmanager
def _standard_output_to(path: str) -> Iterator[None]:
    """File descriptors 1 and 2 (what a C++ library prints) into ``path`` for the block; those
    that are not open are left alone. One block at a time: the descriptors are the process's."""
    with _DESCRIPTORS:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):   # None, closed or not a file
                pass
        saved = {}
        try:
            with open(path, "wb") as sink:
                for descriptor in (1, 2):
                    try:
                        saved[descriptor] = os.dup(descriptor)
                    except OSError:         # not open: nothing to keep quiet there
                        continue
                    os.dup2(sink.fileno(), descriptor)
                yield
        finally:
            for descriptor, copy in saved.items():
                os.dup2(copy, descriptor)
                os.close(copy)


# --------------------------------------------------------------------------- meshio

def _meshio_mesh(path: str):
    """meshio's Mesh of ``path``: the formats meshio names for its suffix, tried in turn through
    their public readers (``meshio.<format>.read``). ``meshio.read`` itself prints why each
    candidate failed; here nothing is printed and the reasons go into the error."""
    import meshio  # lazy: heavy, and only volume-mesh files need it

    reasons = []
    for kind in meshio.extension_to_filetypes.get(Path(path).suffix.lower(), []):
        try:
            return getattr(meshio, kind).read(path)
        except ImportError:
            raise                    # a reader's optional package (h5py for XDMF): said as such
        except Exception as error:    # meshio.ReadError, or whatever else a reader meets
            reasons.append(f"as {kind}: {str(error) or type(error).__name__}")
    raise ValueError("; ".join(reasons) or "no meshio reader for this suffix")


def _read_with_meshio(path: str, data: bytes) -> Triangles:
    """The triangle cells of a volume-mesh file (none for a pure tet mesh), unprocessed."""
    mesh = _meshio_mesh(path)
    points = np.asarray(mesh.points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] not in (2, 3):
        raise ValueError(f"its points are {points.shape[1:] or 'scalars'}, not 3-D coordinates")
    if points.shape[1] == 2:                 # a flat mesh: z = 0, which the closed-surface check refuses
        points = np.column_stack([points, np.zeros(len(points))])
    blocks = []
    for block in mesh.cells:     # triangles; quads and polygons split inside themselves (split_polygon)
        cells = np.asarray(block.data, dtype=np.int64)
        if block.type == "triangle" and cells.ndim == 2:
            blocks.append(cells)
        elif (block.type == "quad" or block.type.startswith("polygon")) and cells.ndim == 2 and len(cells):
            blocks.append(np.array([t for row in cells.tolist() for t in split_polygon(row, points)],
                                   dtype=np.int64).reshape(-1, 3))
    faces = np.concatenate(blocks) if blocks else np.zeros((0, 3), np.int64)
    return Triangles(points, faces, np.full(len(faces), -1, dtype=np.int64), ())


def _read_vtu(path: str, data: bytes) -> Triangles:
    """A .vtu: refused if it is a fieldgen asset (:func:`_refuse_asset`), else read with meshio."""
    _refuse_asset(path)
    return _read_with_meshio(path, data)


def _refuse_asset(path: str) -> None:
    """A fieldgen asset given where a surface is wanted: name the surface it was built from."""
    try:
        source = read_metadata(path).get("source") or {}
    except InputError:
        return                                   # not an asset: read it as any .vtu
    raise InputError("is a fieldgen asset (tets with a pressure field), not a surface mesh", path=path,
                     fix=f"Give the surface it was built from ({source.get('file', 'its source')}, "
                         f"units {source.get('units', 'm')!r})")


register_reader((".obj",), _read_obj_file)
register_reader((".stl",), _read_stl)
register_reader(STEP_SUFFIXES, _read_step, in_metres=True)
register_reader((".vtu",), _read_vtu)
register_reader((".ply", ".off"), _read_counted)
register_reader(tuple(s for s in MESHIO_SUFFIXES if s != ".vtu"), _read_with_meshio)
register_reader((ANY_OTHER,), _read_any_other)        # PLY, OFF, GLB, ...: trimesh


# --------------------------------------------------------------------------- entry point

def _missing_reader(path: str, suffix: str, error: ImportError) -> InputError:
    """trimesh and meshio know more formats than fieldgen installs readers for (3MF: lxml;
    COLLADA: pycollada; XDMF: h5py), and STEP needs the optional extra ``step`` (cascadio): the
    error names the package and how to install it."""
    named = re.findall(r"No module named '([^']+)'|pip install (\S+?)`?$", str(error))
    package = getattr(error, "name", None) or ("".join(named[0]) if named else "one fieldgen lacks")
    if suffix in STEP_SUFFIXES:
        return InputError(
            f"is a CAD (STEP) file: reading it needs the Python package {package!r}, which the optional "
            "extra 'step' installs", path=path,
            fix=f"Install it with {install_hint('step')}; or export the part from its source as a "
                f"surface mesh ({SURFACE_FORMATS})")
    return InputError(
        f"is a {suffix} file: reading it needs the Python package {package!r}, which fieldgen does not install",
        path=path, fix=f"Export the part from its source as a surface mesh ({SURFACE_FORMATS}); "
                       f"or install {package!r} into fieldgen's environment")


def read_bytes(path: str) -> bytes:
    """The file's bytes; InputError when it does not exist."""
    if os.path.isdir(path):
        raise InputError("is a folder, not a surface mesh file", path=path,
                         fix=f"give the mesh file inside it ({SURFACE_FORMATS})")
    kind = special_file(path)
    if kind is not None:              # a pipe or a device would be read for ever
        raise InputError(f"is {kind}, not a surface mesh file", path=path, fix=f"give a mesh file ({SURFACE_FORMATS})")
    if not os.path.isfile(path):
        raise InputError("file not found", path=path,
                         fix="Check the path (relative paths on the command line are taken from the current "
                             "folder, those in a spec or manifest from its folder)")
    with open(path, "rb") as handle:
        return handle.read()


#: Coordinates beyond this cannot be measured: a volume (a cube of them) overflows float64.
LARGEST_COORDINATE = 1e100


def check_coordinates(vertices, path: str) -> None:
    """Refuse vertices with a non-finite or unmeasurably large coordinate (docs/model.md §1.4):
    a NaN vertex would silently drop the faces around it from every sum."""
    vertices = np.asarray(vertices, dtype=float)
    bad = ~np.isfinite(vertices).all(axis=1) if vertices.size else np.zeros(0, bool)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise InputError(f"vertex {index + 1} of {len(vertices)} has a non-finite coordinate "
                         f"{vertices[index].tolist()} ({int(bad.sum())} such vertices)", path=path,
                         fix="export the mesh again from its CAD tool; every coordinate must be a finite number")
    if vertices.size and float(np.abs(vertices).max()) > LARGEST_COORDINATE:
        raise InputError(f"a coordinate of {float(np.abs(vertices).max()):.3g} is too large to compute with "
                         f"(above {LARGEST_COORDINATE:g}: volumes overflow)", path=path,
                         fix="export the mesh in metres or millimetres and give its unit with --units")


def _a_format(suffix: str) -> str:
    """The format of ``suffix`` with its article, as said aloud: "an STL", "a PLY", "a surface"."""
    name = suffix.lstrip(".").upper() or "surface"
    return f"{'an' if name[0] in 'AEFHILMNORSX' else 'a'} {name}"


def check_face_indices(faces, n_vertices: int, path: str) -> None:
    """Refuse a face that refers to a vertex the file does not hold (every format: trimesh and
    meshio pass such indices through unchecked), naming the face and its vertex number."""
    faces = np.asarray(faces)
    bad = ((faces < 0) | (faces >= n_vertices)).any(axis=1) if faces.size else np.zeros(0, bool)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        corner = next(int(k) for k in faces[index] if not 0 <= k < n_vertices)
        raise InputError(f"face {index + 1} of {len(faces)} refers to vertex {corner + 1} (counting from 1), but the file "
                         f"holds {n_vertices} vertices ({int(bad.sum())} such faces)", path=path,
                         fix="export the mesh again from its source: its faces and vertex list do not match")


#: Parts outside this size range (m, across the bounding box) are warned about: a unit slip.
SANE_SIZE = (1e-6, 1e3)
#: A part to build larger than this (m) read in metres is warned about too: a contact part that
#: size is unlikely, a millimetre file read as metres likely (a 103 mm foot built as 103 m).
LIKELY_PART_SIZE = 10.0


def size_warnings(vertices_m, units: str, what: str = "the part",
                  fix: str = "check --units (or the spec's units)", *, likely: float | None = None) -> tuple[str, ...]:
    """A warning when a mesh in metres (a part, a rigid body, a scene mesh, an indenter: ``what``
    names it, ``fix`` is the option or key that sets its unit) is smaller than a micrometre or
    larger than a kilometre across (docs/model.md §1.2, §1.4): almost always the wrong units.
    ``likely``: a part to build read in metres and larger than this across (within those bounds)
    is warned about too, as a millimetre file read as metres (``LIKELY_PART_SIZE``)."""
    vertices_m = np.asarray(vertices_m, dtype=float)
    if not vertices_m.size:
        return ()
    size = float(np.max(vertices_m.max(axis=0) - vertices_m.min(axis=0)))
    low, high = SANE_SIZE
    if not low <= size <= high:
        return (f"{what} is {size:.3g} m across (read in {units}), outside {low:g} .. {high:g} m: {fix}",)
    if likely is not None and units == "m" and size > likely:
        return (f"{what} is {size:.3g} m across (read in metres, the default): if its file is in millimetres, "
                "give --units mm (or units = \"mm\" in a spec)",)
    return ()


def read_in_metres(path) -> bool:
    """Whether ``path``'s format names its own unit (STEP), so that ``--units`` does not scale it."""
    return reader_for(Path(str(path)).suffix.lower()).in_metres


def read_triangles(path, data: bytes | None = None, units: str = "m") -> Triangles:
    """Raw ``(vertices, faces, face_groups, group_names)`` of a surface file, unrepaired, with
    the vertices as the file gives them, taken to be in ``units``. A STEP file names its own unit:
    its vertices are converted into ``units`` (docs/model.md §1.2), so that scaling by ``units``
    gives metres for every format alike.

    Raises InputError when the file is missing or cannot be read as triangles.
    """
    path = str(path)
    if data is None:
        data = read_bytes(path)
    if not data:          # no triangles, as an empty OBJ or STL reads: other readers fail with their own words
        return _no_triangles(0)
    suffix = Path(path).suffix.lower()
    reader = reader_for(suffix)
    try:
        try:
            read = reader.read(path, data)
        except ImportError as error:          # only a library's reader: fieldgen's own imports are not here
            raise _missing_reader(path, suffix, error) from None
        if reader.in_metres:
            read = read._replace(vertices=read.vertices / LENGTH_UNITS[units])
        check_coordinates(read.vertices, path)
        check_face_indices(read.faces, len(read.vertices), path)
        return read
    except KeyError as error:                  # a reader looked up a field the file does not declare
        raise InputError(f"cannot be read as {_a_format(suffix)} mesh: it has no "
                         f"{error.args[0]!r} (a property or element its header should declare)", path=path,
                         fix=f"export it again (vertices with x, y, z and triangle faces): {SURFACE_FORMATS}") from None
    except (ValueError, IndexError, TypeError, NotImplementedError, OSError) as error:
        if suffix in STEP_SUFFIXES:
            raise InputError(f"cannot be read as a STEP file ({error})", path=path,
                             fix="Export the part again from its CAD tool as STEP (AP203 or AP214), or as a "
                                 f"surface mesh ({SURFACE_FORMATS})") from error
        raise InputError(
            f"cannot be read as {_a_format(suffix)} mesh ({error})",
            path=path, fix=f"Give a surface mesh file: {SURFACE_FORMATS}") from error
