"""The pressure-field asset file: a VTK XML UnstructuredGrid (``.vtu``), raw binary appended data, uncompressed by default.

Layout (the contract other tools and ParaView rely on):

- tetrahedra only (``VTK_TETRA``), VTK-positive, points in metres;
- point data ``extent`` (1) and ``pressure`` (Pa, the active scalars) — the piecewise-linear
  fields of D 5.0.1 / docs/model.md §2.1;
- cell data ``pressure_gradient`` (Pa/m, 3 components, active vectors) and
  ``min_dihedral_angle`` (degrees);
- field data ``fieldgen_metadata`` (one JSON text, sorted keys, schema :data:`SCHEMA`, as the
  bytes of its ASCII in a ``UInt8`` array: meshio reads no string array) and the
  numbers ``characteristic_length`` (m, D 5.2.1), ``dissipation`` (s/m) and ``modulus`` (Pa);
- every array carries its unit in VTK's ``UNITS_LABEL`` information key, and the metadata's
  ``units`` maps each array name to its unit.

meshio drops the arrays' units, so this module uses vtk's own XML writer and reader (what
ParaView uses); the files open in meshio and pyvista too (tests/test_asset_readers.py). Assets
of earlier versions, whose metadata is a string array, read the same. Output is byte-identical for identical inputs and is
written atomically (:func:`atomic_output`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from fieldgen import __version__
from fieldgen.errors import BuildError, InputError
from fieldgen.io.vtu_cells import check_cell_offsets
from fieldgen.io.vtu_sizes import check_declared_sizes, check_unique_names
from fieldgen.meshing.statistics import mesh_counts
from fieldgen.meshing.tetmesh import min_dihedral_angles, p1_gradients
from fieldgen.paths import check_utf8_name

SCHEMA = "fieldgen.pressure_field/1"
METADATA_ARRAY = "fieldgen_metadata"
VTK_TETRA = 10
#: How the arrays are encoded (``--compression``): vtk's compressor and its level. "none", the
#: default, writes the raw bytes, which every VTK reader reads (meshio, and the tools built on
#: it, read no LZ4) and is the fastest to write and read; zlib (level 1) is read everywhere too,
#: about 40% smaller and the slowest; LZ4 (level 9: its smallest output, no slower than 1 here)
#: is in between, read by vtk and ParaView only. Float64 fields barely compress: the sizes differ
#: by the connectivity (benchmarks/README.md, "Asset encodings"). Each is byte-deterministic; the
#: reader reads any of them, so assets written LZ4-compressed (the default before) still read.
COMPRESSIONS = {"none": (None, 0), "zlib": ("ZLib", 1), "lz4": ("LZ4", 9)}
DEFAULT_COMPRESSION = "none"
LZ4_LEVEL = COMPRESSIONS["lz4"][1]
#: How the arrays are encoded, recorded in batch cache keys: a change of encoding changes every
#: asset's bytes, so assets written the old way are rebuilt rather than kept as cached (the
#: compression chosen is one of the options, so it is in the keys too).
ENCODING = "vtu appended raw, uncompressed (default) | zlib level 1 | lz4 level 9"

#: Unit of every array in the file (and of the metadata numbers of the same name).
UNITS = {
    "points": "m",
    "extent": "1",
    "pressure": "Pa",
    "pressure_gradient": "Pa/m",
    "min_dihedral_angle": "deg",
    "characteristic_length": "m",
    "dissipation": "s/m",
    "modulus": "Pa",
    "expansion_rate": "1/s",
    "max_interpolation_error": "Pa",
}
POINT_ARRAYS = {"extent": 1, "pressure": 1}                        # name -> components
CELL_ARRAYS = {"pressure_gradient": 3, "min_dihedral_angle": 1}
FIELD_NUMBERS = ("characteristic_length", "dissipation", "modulus")

#: Metadata keys the caller must supply; ``schema``, ``units``, ``tool`` and the
#: statistics in ``mesh`` are filled in by :func:`write_asset`.
REQUIRED_METADATA = ("law", "characteristic_length", "dissipation", "friction", "boundary",
                     "max_interpolation_error", "source")
#: Mesh statistics computed from the arrays by :func:`write_asset` (override the caller's).
MESH_STATISTICS = ("n_points", "n_tets", "n_boundary_faces", "volume", "min_dihedral_angle")


@dataclass
class Asset:
    """A pressure-field asset in memory (D 5.0.1: linear fields over VTK-positive tets)."""

    points: np.ndarray        # (n, 3) float64, m
    tets: np.ndarray          # (t, 4) int64, VTK-positive
    extent: np.ndarray        # (n,)
    pressure: np.ndarray      # (n,) Pa
    metadata: dict            # JSON-able
    pressure_gradient: np.ndarray | None = None   # (t, 3) Pa/m, filled by write/read
    min_dihedral_angle: np.ndarray | None = None  # (t,) degrees, filled by write/read


# --------------------------------------------------------------------------- atomic output

def prepare_output(path, *, directory: bool = False) -> str:
    """Check that ``path`` (a file, or with ``directory`` a folder) can be written, before any work.

    Nothing is created: the nearest folder on the path that exists must be a folder in which a
    file can be made (one is made there and removed again), so a read-only or full file system,
    a parent that is a file, or a file path that is a folder are all found now, not after a long
    build. The missing folders are made when the output is written (:func:`atomic_output`).
    Raises InputError naming the path (exit 1), OptionError (exit 2) for a path that is not UTF-8
    (its folder's name too). Returns the absolute path.
    """
    target = os.path.abspath(os.fspath(path))
    check_utf8_name(target)              # VTK would fail on it after the work (exit 2, now)
    folder = target if directory else os.path.dirname(target)
    if os.path.isdir(target) != directory and os.path.exists(target):
        what = "a file, not a folder" if directory else "a folder, not a file"
        raise InputError(f"is {what}", path=str(path), fix=f"give a {'folder' if directory else 'file'} path")
    existing = folder
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise InputError(f"cannot write in {folder}: {existing} is a file, not a folder", path=str(path),
                         fix="choose another output folder")
    # Named as atomic_output's temporaries, which `fieldgen batch` removes if a kill leaves one.
    probe = os.path.join(existing, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        os.remove(probe)
    except OSError as error:
        raise InputError(f"cannot write in {existing} ({error.strerror or error})", path=str(path),
                         fix="write to a folder you can write to (missing folders are made)") from None
    return target


@contextlib.contextmanager
def atomic_output(path) -> Iterator[str]:
    """Yield a temporary path next to ``path``; ``os.replace`` it onto ``path`` on success.

    On any exception (``BaseException``, so KeyboardInterrupt too) the temporary file is
    removed and an existing ``path`` is left untouched. The temporary file is created with
    mode 0666 filtered by the umask, like an ordinary new file. Missing folders of ``path`` are
    made (every output's folders are made so, when it is written).
    """
    target = os.path.abspath(os.fspath(path))
    directory, name = os.path.split(target)
    temporary = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    try:
        os.makedirs(directory, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as error:
        raise InputError(f"cannot create a file in {directory} ({error.strerror or error})",
                         path=str(path), fix="write to an existing, writable directory") from None
    try:
        os.close(fd)
        yield temporary
        try:
            os.replace(temporary, target)
        except OSError as error:
            raise InputError(f"cannot replace the file ({error.strerror or error})",
                             path=str(path), fix="write to a file path that is not a directory "
                             "and whose directory is writable") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


# --------------------------------------------------------------------------- vtk plumbing

class _VtkErrors:
    """Collect the error messages of a vtk algorithm, its executive and its XML parser.

    Observers keep vtk from printing to stderr; the messages become our error text.
    """

    def __init__(self, algorithm) -> None:
        from vtkmodules.util import vtkConstants  # lazy: heavy (VTK)
        from vtkmodules.util.misc import calldata_type  # lazy: heavy (VTK)
        from vtkmodules.vtkCommonCore import vtkObject  # lazy: heavy (VTK)

        self.messages: list[str] = []

        @calldata_type(vtkConstants.VTK_STRING)
        def on_error(_obj, _event, text):
            self.messages.append(str(text))

        self._callback = on_error
        algorithm.AddObserver("ErrorEvent", on_error)
        algorithm.AddObserver("WarningEvent", lambda *_: None)
        algorithm.GetExecutive().AddObserver("ErrorEvent", on_error)
        self._holder = vtkObject()
        tag = self._holder.AddObserver("ErrorEvent", on_error)
        if hasattr(algorithm, "SetParserErrorObserver"):
            algorithm.SetParserErrorObserver(self._holder.GetCommand(tag))
            algorithm.SetReaderErrorObserver(self._holder.GetCommand(tag))

    def summary(self) -> str:
        """The first meaningful line of the first message (vtk prefixes 'ERROR: In file, line')."""
        for message in self.messages:
            for line in message.splitlines():
                line = line.strip()
                if line and not line.startswith("ERROR: In "):
                    return re.sub(r"^\w+ \(0x[0-9a-f]+\): ", "", line)
        return "vtk reported an error"


def _vtk_array(values: np.ndarray, name: str, unit: str):
    from vtkmodules.util.numpy_support import numpy_to_vtk  # lazy: heavy (VTK)
    from vtkmodules.vtkCommonCore import vtkDataArray  # lazy: heavy (VTK)

    array = numpy_to_vtk(np.ascontiguousarray(values, dtype=np.float64), deep=True)
    array.SetName(name)
    array.GetInformation().Set(vtkDataArray.UNITS_LABEL(), unit)
    return array


def _grid(asset: Asset, metadata_json: str, metadata: dict):
    """Build the vtkUnstructuredGrid of an asset whose derived arrays are filled in."""
    from vtkmodules.util.numpy_support import numpy_to_vtk  # lazy: heavy (VTK)
    from vtkmodules.vtkCommonCore import vtkDataArray, vtkPoints  # lazy: heavy (VTK)
    from vtkmodules.vtkCommonDataModel import vtkCellArray, vtkUnstructuredGrid  # lazy: heavy (VTK)

    grid = vtkUnstructuredGrid()
    points = vtkPoints()
    points_data = numpy_to_vtk(np.ascontiguousarray(asset.points, dtype=np.float64), deep=True)
    points_data.GetInformation().Set(vtkDataArray.UNITS_LABEL(), UNITS["points"])
    points.SetData(points_data)
    grid.SetPoints(points)

    tets = np.ascontiguousarray(asset.tets, dtype=np.int64)
    offsets = numpy_to_vtk(np.arange(0, 4 * len(tets) + 1, 4, dtype=np.int64), deep=True)
    connectivity = numpy_to_vtk(tets.ravel(), deep=True)
    cells = vtkCellArray()
    cells.SetData(offsets, connectivity)
    grid.SetCells(VTK_TETRA, cells)

    point_data = grid.GetPointData()
    point_data.AddArray(_vtk_array(asset.extent, "extent", UNITS["extent"]))
    point_data.AddArray(_vtk_array(asset.pressure, "pressure", UNITS["pressure"]))
    point_data.SetActiveScalars("pressure")

    cell_data = grid.GetCellData()
    gradient = _vtk_array(asset.pressure_gradient, "pressure_gradient", UNITS["pressure_gradient"])
    for i, axis in enumerate("XYZ"):
        gradient.SetComponentName(i, axis)
    cell_data.AddArray(gradient)
    cell_data.SetActiveVectors("pressure_gradient")
    cell_data.AddArray(_vtk_array(asset.min_dihedral_angle, "min_dihedral_angle",
                                  UNITS["min_dihedral_angle"]))

    field_data = grid.GetFieldData()
    text = numpy_to_vtk(np.frombuffer(metadata_json.encode("ascii"), dtype=np.uint8), deep=True)
    text.SetName(METADATA_ARRAY)
    field_data.AddArray(text)
    for name in FIELD_NUMBERS:
        value = metadata["law"]["modulus"] if name == "modulus" else metadata[name]
        field_data.AddArray(_vtk_array(np.array([float(value)]), name, UNITS[name]))
    return grid


# --------------------------------------------------------------------------- metadata

def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON-able")


def metadata_json(metadata: dict) -> str:
    """The canonical JSON text of ``metadata``: sorted keys, compact, ASCII, shortest-repr floats.

    NaN/inf are refused (they are not JSON); identical dicts give identical text.
    """
    return json.dumps(metadata, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False, default=_json_default)


def _complete_metadata(asset: Asset, path: str, statistics: dict | None = None) -> dict:
    """Caller's metadata plus schema, units, tool and the mesh statistics (see module doc)."""
    if not isinstance(asset.metadata, dict):
        raise BuildError(f"the asset metadata is a {type(asset.metadata).__name__}, not a dict",
                         path=path, fix="pass the metadata as a dict")
    metadata = copy.deepcopy(asset.metadata)
    missing = [key for key in REQUIRED_METADATA if key not in metadata]
    if missing:
        raise BuildError(f"the asset metadata lacks {len(missing)} required key(s): "
                         f"{', '.join(missing)}", path=path,
                         fix=f"fill in {', '.join(REQUIRED_METADATA)} before writing")
    if not isinstance(metadata["law"], dict) or "modulus" not in metadata["law"]:
        raise BuildError("the metadata 'law' has no 'modulus'", path=path,
                         fix="store the law with ModulusLaw.to_metadata()")
    if metadata.setdefault("schema", SCHEMA) != SCHEMA:
        raise BuildError(f"the metadata schema is {metadata['schema']!r}", path=path,
                         fix=f"write schema {SCHEMA!r} (or leave it out)")
    units = dict(metadata.get("units") or {})
    units.update(UNITS)
    metadata["units"] = units
    metadata["tool"] = {"name": "fieldgen", "version": __version__}
    mesh = dict(metadata.get("mesh") or {})
    mesh.update(statistics if statistics is not None
                else mesh_counts(asset.points, asset.tets, asset.min_dihedral_angle))
    metadata["mesh"] = mesh
    return metadata


# --------------------------------------------------------------------------- write

def _checked_arrays(asset: Asset, path: str) -> Asset:
    """Asset with contiguous float64/int64 arrays of consistent shapes; BuildError otherwise."""
    points = np.ascontiguousarray(asset.points, dtype=np.float64)
    tets = np.ascontiguousarray(asset.tets)
    if points.ndim != 2 or points.shape[1] != 3:
        raise BuildError(f"points have shape {points.shape}, not (n, 3)", path=path,
                         fix="pass points as an (n, 3) array in metres")
    if tets.ndim != 2 or tets.shape[1] != 4 or not np.issubdtype(tets.dtype, np.integer):
        raise BuildError(f"tets have shape {tets.shape} and dtype {tets.dtype}, not (t, 4) integers",
                         path=path, fix="pass tets as a (t, 4) int64 array")
    tets = tets.astype(np.int64, copy=False)
    if len(tets) == 0:
        raise BuildError("the asset has no tets", path=path, fix="mesh the volume before writing")
    if tets.min() < 0 or tets.max() >= len(points):
        raise BuildError(f"tets refer to vertices {tets.min()}..{tets.max()} but there are "
                         f"{len(points)} points", path=path, fix="pass tets indexing into points")
    n, t = len(points), len(tets)
    fields = {}
    for name, shape in (("extent", (n,)), ("pressure", (n,))):
        fields[name] = np.ascontiguousarray(getattr(asset, name), dtype=np.float64)
        if fields[name].shape != shape:
            raise BuildError(f"{name} has shape {fields[name].shape}, not {shape}", path=path,
                             fix=f"give one {name} value per point")
    gradient, angle = asset.pressure_gradient, asset.min_dihedral_angle
    gradient = (p1_gradients(points, tets, fields["pressure"]) if gradient is None
                else np.ascontiguousarray(gradient, dtype=np.float64))
    angle = (min_dihedral_angles(points, tets) if angle is None
             else np.ascontiguousarray(angle, dtype=np.float64))
    if gradient.shape != (t, 3) or angle.shape != (t,):
        raise BuildError(f"pressure_gradient {gradient.shape} / min_dihedral_angle {angle.shape} "
                         f"do not match {t} tets", path=path,
                         fix="leave them None so write_asset computes them")
    return Asset(points=points, tets=tets, extent=fields["extent"], pressure=fields["pressure"],
                 metadata=asset.metadata, pressure_gradient=gradient, min_dihedral_angle=angle)


def write_asset(path, asset: Asset, *, statistics: dict | None = None,
                compression: str = DEFAULT_COMPRESSION) -> None:
    """Write ``asset`` to ``path`` (.vtu), atomically and byte-deterministically.

    Computes ``pressure_gradient`` (D 5.0.1) and ``min_dihedral_angle`` when None, and
    completes the metadata (schema, units, tool, mesh statistics). ``statistics``: the
    :func:`~fieldgen.meshing.statistics.mesh_counts` of these arrays when the caller has them (the build, whose
    validation then recomputes them from the file). ``compression``: one of
    :data:`COMPRESSIONS`. BuildError on an asset
    that cannot be written as the contract says; nothing is left behind on any error.
    """
    from vtkmodules.vtkIOXML import vtkXMLUnstructuredGridWriter  # lazy: heavy (VTK)

    where = os.fspath(path)
    if compression not in COMPRESSIONS:
        raise BuildError(f"unknown compression {compression!r}", path=where,
                         fix=f"use one of {', '.join(COMPRESSIONS)}")
    asset = _checked_arrays(asset, where)
    metadata = _complete_metadata(asset, where, statistics)
    try:
        text = metadata_json(metadata)
    except (TypeError, ValueError) as error:
        raise BuildError(f"the asset metadata is not JSON-able ({error})", path=where,
                         fix="store only finite numbers, strings, lists and dicts") from None
    grid = _grid(asset, text, metadata)

    with atomic_output(where) as temporary:
        writer = vtkXMLUnstructuredGridWriter()
        errors = _VtkErrors(writer)
        writer.SetFileName(temporary)
        writer.SetInputData(grid)
        writer.SetDataModeToAppended()
        writer.EncodeAppendedDataOff()          # raw bytes, not base64
        compressor, level = COMPRESSIONS[compression]
        if compressor is None:
            writer.SetCompressorTypeToNone()
        else:
            getattr(writer, f"SetCompressorTypeTo{compressor}")()
            writer.SetCompressionLevel(level)
        writer.SetHeaderTypeToUInt64()
        writer.SetIdTypeToInt64()
        if not writer.Write() or errors.messages:
            raise BuildError(f"vtk could not write the asset ({errors.summary()})", path=where,
                             fix="check the disk space and permissions of the output directory")


# --------------------------------------------------------------------------- read

@dataclass
class RawVtu:
    """What a .vtu holds, without judging it (shared by :func:`read_asset` and validate)."""

    points: np.ndarray                 # (n, 3) float64
    cell_types: np.ndarray             # (c,) uint8
    offsets: np.ndarray                # (c + 1,) int64
    connectivity: np.ndarray           # (sum of cell sizes,) int64
    point_data: dict[str, np.ndarray]  # name -> (n,) or (n, k)
    cell_data: dict[str, np.ndarray]
    field_data: dict[str, Any]         # numeric arrays as ndarray, string arrays (and the metadata) as list[str]
    active_scalars: str | None
    units: dict[str, str]              # "point:<name>" / "cell:<name>" / "field:<name>" -> UNITS_LABEL

    def tets(self) -> np.ndarray | None:
        """(c, 4) connectivity when every cell is a VTK_TETRA, else None."""
        if not (len(self.cell_types) and np.all(self.cell_types == VTK_TETRA)
                and np.array_equal(np.diff(self.offsets), np.full(len(self.cell_types), 4))):
            return None
        return self.connectivity.reshape(-1, 4)


def _sniff(path: str) -> None:
    """InputError unless ``path`` looks like a complete VTK XML UnstructuredGrid file."""
    fix = "give a .vtu asset written by fieldgen build"
    if not os.path.exists(path):
        raise InputError("the file does not exist", path=path, fix=fix)
    if not os.path.isfile(path):
        raise InputError("the path is not a regular file", path=path, fix=fix)
    size = os.path.getsize(path)
    try:
        with open(path, "rb") as stream:
            head = stream.read(512)
            stream.seek(max(0, size - 64))
            tail = stream.read()
    except OSError as error:
        raise InputError(f"cannot read the file ({error.strerror or error})", path=path,
                         fix=fix) from None
    if b"<VTKFile" not in head:
        raise InputError(f"the file ({size} bytes) is not a VTK XML file (no <VTKFile> header)",
                         path=path, fix=fix)
    if not re.search(rb'type\s*=\s*"UnstructuredGrid"', head):
        kind = re.search(rb'type\s*=\s*"(\w+)"', head)
        raise InputError(f"the VTK file holds a {kind.group(1).decode() if kind else 'non'}-"
                         "UnstructuredGrid dataset", path=path, fix=fix)
    if b"</VTKFile>" not in tail:
        raise InputError(f"the file ends after {size} bytes without </VTKFile> (truncated)",
                         path=path, fix="rewrite the asset; it was not written completely")


def _numpy(array) -> np.ndarray:
    from vtkmodules.util.numpy_support import vtk_to_numpy  # lazy: heavy (VTK)

    return np.array(vtk_to_numpy(array), copy=True)


def read_vtu(path) -> RawVtu:
    """Read any VTK XML UnstructuredGrid file with vtk; InputError if vtk cannot read it."""
    from vtkmodules.vtkCommonCore import vtkDataArray  # lazy: heavy (VTK)
    from vtkmodules.vtkIOXML import vtkXMLUnstructuredGridReader  # lazy: heavy (VTK)

    where = os.fspath(path)
    _sniff(where)
    reader = vtkXMLUnstructuredGridReader()
    errors = _VtkErrors(reader)
    reader.SetFileName(where)
    reader.UpdateInformation()          # the XML alone: what it declares is checked before vtk allocates it
    check_declared_sizes(reader, where)
    check_cell_offsets(reader, where)    # and the cells' offsets, which size the connectivity
    check_unique_names(reader, where)    # one array a name: readers disagree on which of two they keep
    reader.Update()
    grid = reader.GetOutput()
    if errors.messages or reader.GetErrorCode():
        reason = (errors.summary() if errors.messages
                  else f"malformed content, vtk error code {reader.GetErrorCode()}")
        raise InputError(f"vtk cannot read the file ({reason})", path=where,
                         fix="give a .vtu asset written by fieldgen build")
    declared = (reader.GetNumberOfPoints(), reader.GetNumberOfCells())
    if declared != (grid.GetNumberOfPoints(), grid.GetNumberOfCells()):
        raise InputError(f"the file declares {declared[0]} points and {declared[1]} cells but vtk "
                         f"read {grid.GetNumberOfPoints()} and {grid.GetNumberOfCells()}",
                         path=where, fix="rewrite the asset; the file is damaged")
    units: dict[str, str] = {}

    def arrays(data, prefix):
        out = {}
        for i in range(data.GetNumberOfArrays()):
            array = data.GetAbstractArray(i)
            name = array.GetName()
            if array.IsA("vtkStringArray"):
                out[name] = [array.GetValue(j) for j in range(array.GetNumberOfValues())]
                continue
            if not array.IsA("vtkDataArray"):
                continue
            out[name] = _numpy(array)
            info = array.GetInformation()
            if info.Has(vtkDataArray.UNITS_LABEL()):
                units[f"{prefix}:{name}"] = info.Get(vtkDataArray.UNITS_LABEL())
        return out

    n_points = grid.GetNumberOfPoints()
    points = (_numpy(grid.GetPoints().GetData()).astype(np.float64, copy=False).reshape(-1, 3)
              if n_points else np.zeros((0, 3)))
    cells = grid.GetCells()
    if grid.GetNumberOfCells():
        offsets = _numpy(cells.GetOffsetsArray()).astype(np.int64, copy=False)
        connectivity = _numpy(cells.GetConnectivityArray()).astype(np.int64, copy=False)
        cell_types = _numpy(grid.GetCellTypes()).astype(np.uint8, copy=False)
    else:
        offsets, connectivity = np.zeros(1, np.int64), np.zeros(0, np.int64)
        cell_types = np.zeros(0, np.uint8)
    scalars = grid.GetPointData().GetScalars()
    field_data = arrays(grid.GetFieldData(), "field")
    text = field_data.get(METADATA_ARRAY)
    if isinstance(text, np.ndarray) and text.dtype == np.uint8 and text.ndim == 1:
        field_data[METADATA_ARRAY] = [text.tobytes().decode("ascii", errors="replace")]
    return RawVtu(points=points, cell_types=cell_types, offsets=offsets,
                  connectivity=connectivity,
                  point_data=arrays(grid.GetPointData(), "point"),
                  cell_data=arrays(grid.GetCellData(), "cell"),
                  field_data=field_data,
                  active_scalars=None if scalars is None else scalars.GetName(), units=units)


def metadata_of(raw: RawVtu, path: str) -> dict:
    """The parsed ``fieldgen_metadata`` of a read file; InputError when absent or malformed."""
    fix = "give a .vtu asset written by fieldgen build"
    text = raw.field_data.get(METADATA_ARRAY)
    if not isinstance(text, list) or len(text) != 1:
        raise InputError(f"the file has no {METADATA_ARRAY} string (field data) — not a fieldgen "
                         "asset", path=path, fix=fix)
    return _parse_metadata(text[0], path)


def _parse_metadata(text: str, path: str) -> dict:
    fix = "rebuild the asset with fieldgen build"
    try:
        metadata = json.loads(text)
    except (ValueError, RecursionError) as error:      # RecursionError: arrays nested thousands deep
        raise InputError(f"{METADATA_ARRAY} ({len(text)} characters) is not JSON ({error})",
                         path=path, fix=fix) from None
    if not isinstance(metadata, dict):
        raise InputError(f"{METADATA_ARRAY} is a JSON {type(metadata).__name__}, not an object",
                         path=path, fix=fix)
    if metadata.get("schema") != SCHEMA:
        raise InputError(f"the asset schema is {metadata.get('schema')!r}, expected {SCHEMA!r}",
                         path=path, fix=fix)
    return metadata


def check_tet_indices(tets: np.ndarray, n_points: int, path, *, fix: str) -> None:
    """InputError naming ``path`` when a tet of a file read refers to a point it does not have
    (every later sum would index past the points): an asset, a legacy .vtk tet mesh."""
    if len(tets) and (tets.min() < 0 or tets.max() >= n_points):
        raise InputError(f"its tets refer to points {int(tets.min())}..{int(tets.max())}, but it has "
                         f"{n_points} points", path=path, fix=fix)


def read_asset(path) -> Asset:
    """Read a fieldgen asset; InputError (naming the file, the defect, the fix) otherwise."""
    where = os.fspath(path)
    raw = read_vtu(where)
    metadata = metadata_of(raw, where)
    tets = raw.tets()
    if tets is None and not len(raw.cell_types):
        raise InputError("the file has no cells: an asset holds tetrahedra", path=where, fix="rebuild the asset")
    if tets is None:
        other = sorted(set(raw.cell_types.tolist()) - {VTK_TETRA})
        count = int(np.count_nonzero(raw.cell_types != VTK_TETRA))
        shown = (f"{count} of its {len(raw.cell_types)} cells are of VTK types {other}" if other
                 else f"its {len(raw.cell_types)} tetrahedra do not have 4 vertices each")
        raise InputError(f"{shown}, not tetrahedra (type {VTK_TETRA}); an asset holds tetrahedra only",
                         path=where, fix="rebuild the asset")
    n, t = len(raw.points), len(tets)
    check_tet_indices(tets, n, where, fix="rebuild the asset with fieldgen build")
    expected = [("point", name, k, n, raw.point_data) for name, k in POINT_ARRAYS.items()]
    expected += [("cell", name, k, t, raw.cell_data) for name, k in CELL_ARRAYS.items()]
    values = {}
    for where_kind, name, k, count, data in expected:
        array = data.get(name)
        shape = (count,) if k == 1 else (count, k)
        if not isinstance(array, np.ndarray) or array.shape != shape:
            found = "missing" if array is None else f"of shape {np.shape(array)}"
            raise InputError(f"{where_kind} array {name!r} is {found}, expected shape {shape}",
                             path=where, fix="rebuild the asset with fieldgen build")
        values[name] = array.astype(np.float64, copy=False)
    return Asset(points=raw.points, tets=tets, extent=values["extent"],
                 pressure=values["pressure"], metadata=metadata,
                 pressure_gradient=values["pressure_gradient"],
                 min_dihedral_angle=values["min_dihedral_angle"])


# --------------------------------------------------------------------------- metadata only

def read_metadata(path) -> dict:
    """Only the parsed ``fieldgen_metadata`` JSON; InputError when the file is not a fieldgen asset.

    Reads the whole file with vtk (LZ4 data reads at about 0.1 s per million tets).
    """
    where = os.fspath(path)
    return metadata_of(read_vtu(where), where)
