"""Hostile input a seventh sweep found: .vtu files whose header is sane (its declared sizes fit
its bytes) but whose data would make vtk allocate without bound and end the whole process
(``std::bad_alloc``, SIGABRT): a cell ``offsets`` array whose last value (1e11) reaches past the
connectivity vtk sizes by it, in every encoding vtk and meshio write (ASCII, base64 inline or
appended, raw appended; uncompressed, zlib or LZ4), and a compressed array whose block header
declares more blocks, or bigger ones, than the file holds. ``inspect``, ``validate``, ``contact``
and ``batch --check`` refuse them, naming the file, with no traceback. Each hostile file is run in
a child process: before the checks it would take pytest with it.

Also: a tet of zero volume in the mesh ``calibrate`` fits on (NaN quadrature weights); nested
metadata of the wrong shape that ``inspect`` refused and ``validate`` called valid (one schema
now, validate's ``schema`` check); a manifest's or spec's message mixing its keys with flags
never typed (``table and --modulus/--k both given``); ``input = "."`` or ``core = "."`` (a folder,
named as the bare folder or an item labelled "()"); and a spec's core that is its input."""

from __future__ import annotations

import dataclasses
import re
import struct
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from vtkmodules.util.numpy_support import numpy_to_vtk, vtk_to_numpy
from vtkmodules.vtkCommonCore import VTK_ID_TYPE
from vtkmodules.vtkCommonDataModel import VTK_TETRA, vtkCellArray
from vtkmodules.vtkIOXML import vtkXMLUnstructuredGridReader, vtkXMLUnstructuredGridWriter

from fieldgen.calibrate import part as calibrate_part
from fieldgen.cli.main import main
from test_hostile_input import cube_obj, tampered, write
from test_hostile_sweep import FIELDGEN, _refused

BUILD = ["--modulus", "1e5", "--edge-length", "0.01", "-q"]
FAR = 10 ** 11
#: vtk's writer settings for each encoding: (data mode, base64-encode appended data, compressor).
ENCODINGS = {
    "ascii": ("Ascii", False, "None"),
    "base64 inline": ("Binary", False, "None"),
    "raw appended": ("Appended", False, "None"),
    "base64 appended": ("Appended", True, "None"),
    "zlib raw appended": ("Appended", False, "ZLib"),
    "zlib base64 inline": ("Binary", False, "ZLib"),
    "lz4 raw appended": ("Appended", False, "LZ4"),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """A small asset of a cube, written uncompressed and zlib-compressed, and the cube."""
    folder = tmp_path_factory.mktemp("inputs")
    write(folder / "cube.obj", "\n".join(cube_obj(0.02)) + "\n")
    for compression in ("none", "zlib"):
        built = CliRunner().invoke(main, ["build", str(folder / "cube.obj"), *BUILD, "--compression", compression,
                                          "-o", str(folder / f"{compression}.vtu")])
        assert built.exit_code == 0, built.output
    return folder


def rewritten(src: Path, dst: Path, encoding: str, last_offset: int | None = None, wide: bool = False) -> Path:
    """The asset ``src`` written by vtk in ``encoding``, its last cell offset ``last_offset``
    (the connectivity unchanged); ``wide``: 64-bit array headers, as fieldgen writes."""
    reader = vtkXMLUnstructuredGridReader()
    reader.SetFileName(str(src))
    reader.Update()
    grid = reader.GetOutput()
    offsets = vtk_to_numpy(grid.GetCells().GetOffsetsArray()).astype(np.int64)
    connectivity = vtk_to_numpy(grid.GetCells().GetConnectivityArray()).astype(np.int64)
    if last_offset is not None:
        offsets[-1] = last_offset
    cells = vtkCellArray()
    cells.SetData(numpy_to_vtk(offsets, deep=True, array_type=VTK_ID_TYPE),
                  numpy_to_vtk(connectivity, deep=True, array_type=VTK_ID_TYPE))
    grid.SetCells(VTK_TETRA, cells)
    mode, encoded, compressor = ENCODINGS[encoding]
    writer = vtkXMLUnstructuredGridWriter()
    writer.SetFileName(str(dst))
    writer.SetInputData(grid)
    getattr(writer, f"SetDataModeTo{mode}")()
    writer.SetEncodeAppendedData(encoded)
    getattr(writer, f"SetCompressorTypeTo{compressor}")()
    if wide:
        writer.SetHeaderTypeToUInt64()
    assert writer.Write() == 1
    return dst


def fieldgen(args: list, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*FIELDGEN, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=180)


def refused(done: subprocess.CompletedProcess, words: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr       # not -6 (SIGABRT)
    assert words in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "bad_alloc" not in done.stderr


REACH = "its cell offsets reach 100,000,000,000, but its connectivity holds 1,008 point ids: the cells are damaged"


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_offsets_past_the_connectivity_are_refused_in_every_encoding(inputs, tmp_path, encoding):
    """Before: vtk sized the connectivity by the last offset, 1e11 values, and ended the process
    (SIGABRT). The same file with its offsets intact still reads."""
    valid = rewritten(inputs / "none.vtu", tmp_path / "valid.vtu", encoding)
    assert CliRunner().invoke(main, ["validate", str(valid), "-q"]).exit_code == 0
    hostile = rewritten(inputs / "none.vtu", tmp_path / "hostile.vtu", encoding, last_offset=FAR)
    refused(fieldgen(["inspect", hostile], tmp_path), f"hostile.vtu: {REACH}")


@pytest.mark.parametrize("command", [["inspect", "{a}"], ["validate", "{a}"], ["contact", "{a}", "{i}/cube.obj"]],
                         ids=["inspect", "validate", "contact"])
def test_every_command_reading_an_asset_refuses_offsets_past_the_connectivity(inputs, tmp_path, command):
    hostile = rewritten(inputs / "none.vtu", tmp_path / "hostile.vtu", "raw appended", last_offset=FAR)
    done = fieldgen([a.replace("{a}", str(hostile)).replace("{i}", str(inputs)) for a in command], tmp_path)
    refused(done, f"hostile.vtu: {REACH}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.vtu"]


def test_a_batch_check_over_an_output_with_offsets_past_its_connectivity_ends(inputs, tmp_path):
    """Before: reading the output's cache key ended the whole batch (SIGABRT). Now the output is
    unreadable, so stale: it would be built again."""
    write(tmp_path / "cube.obj", (inputs / "cube.obj").read_bytes())
    rewritten(inputs / "none.vtu", tmp_path / "cube.vtu", "raw appended", last_offset=FAR)
    write(tmp_path / "m.toml", '[defaults]\nmodulus = 1e5\nedge_length = 0.01\n[[asset]]\ninput = "cube.obj"\n')
    done = fieldgen(["batch", "m.toml", "-j", "1", "--check"], tmp_path)
    refused(done, "would rebuild cube.vtu (not a readable asset")


def _block_header(src: Path, dst: Path, word: int, value: int) -> Path:
    """A copy of the zlib-compressed asset ``src`` whose connectivity's block header has ``value``
    at word ``word`` (0: the number of blocks, 3: the first block's compressed size)."""
    data = bytearray(src.read_bytes())
    offset = int(re.search(rb'Name="connectivity"[^>]*offset="(\d+)"', data).group(1))
    start = data.index(b"_", data.index(b"<AppendedData")) + 1 + offset
    struct.pack_into("<Q", data, start + 8 * word, value)
    return write(dst, bytes(data))


@pytest.mark.parametrize("word, words", [(0, f"declares {FAR:,} blocks"), (3, f"declares 1 block of 32,768 bytes (8,064 in all, {FAR:,} compressed)")],
                         ids=["block count", "compressed size"])
def test_a_compressed_block_header_past_the_file_is_refused(inputs, tmp_path, word, words):
    """Before: vtk allocated the blocks the header declares and ended the process (SIGABRT)."""
    hostile = _block_header(inputs / "zlib.vtu", tmp_path / "hostile.vtu", word, FAR)
    refused(fieldgen(["inspect", hostile], tmp_path),
            f"hostile.vtu: the header of its compressed array 'connectivity' {words}")


def test_calibrate_refuses_a_mesh_with_a_tet_of_zero_volume(inputs, tmp_path, monkeypatch):
    """Calibrate reads no asset: its tets are the mesh it makes (``prepare_part``), which the
    meshers already refuse flat tets in. Should one come through (here, one of the mesher's tets
    given a repeated corner), its quadrature weights would be NaN. Before: the NaN stopped the
    extent solve ("the Poisson extent has maximum nan", no file named, numpy's warnings printed);
    now a clear error names the input and the tet."""
    real = calibrate_part.mesh_part

    def with_a_flat_tet(*args, **kwargs):
        meshed = real(*args, **kwargs)
        tets = meshed.mesh.tets.copy()
        tets[0, 3] = tets[0, 0]
        return dataclasses.replace(meshed, mesh=dataclasses.replace(meshed.mesh, tets=tets), solution=None)

    monkeypatch.setattr(calibrate_part, "mesh_part", with_a_flat_tet)
    write(tmp_path / "spec.toml", 'modulus = 1e5\nedge_length = 0.01\nlaw = "linear"\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # no numpy warning on the way
        result = CliRunner().invoke(main, ["calibrate", str(inputs / "cube.obj"), "--spec", str(tmp_path / "spec.toml"),
                                           "--indenter", "plane", "--target", "0.002:20", "-q",
                                           "-o", str(tmp_path / "out.vtu")])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "cube.obj: the mesh of the part has 1 tet(s) of zero or negative volume (e.g. tet 0 at" in result.stderr, result.output
    assert not (tmp_path / "out.vtu").exists()


SKIN = {"thickness": 0.001, "skin_volume_fraction": 0.5}
NESTED = [  # (the metadata changed, the problem both commands name)
    ({"skin": [1]}, "skin is [1], not an object"),
    ({"skin": {**SKIN, "cut_depth": [1.0, 1.0, 1.0]}}, "skin.cut_depth is [1.0, 1.0, 1.0], not two numbers"),
    ({"skin": {**SKIN, "cut_vertices_held": "many"}}, "skin.cut_vertices_held is 'many', not a number"),
    ({"error_estimate": {"extent": "x", "pressure": 0.01, "characteristic_length": 0.01}},
     "error_estimate.extent is 'x', not a number"),
    ({"boundary.faces": [1]}, "boundary.faces is [1], not an object of face counts"),
    ({"boundary.core": "core.obj"}, "boundary.core is 'core.obj', not an object"),
    ({"boundary.bonded": 5}, "boundary.bonded is 5, not a list of selector strings"),
    ({"law.extent": 5}, "law.extent is 5, not a list of extents"),
]


@pytest.mark.parametrize("changes, problem", NESTED, ids=[next(iter(c)) + ": " + p.split(" is ")[1] for c, p in NESTED])
def test_inspect_and_validate_agree_on_nested_metadata(inputs, tmp_path, changes, problem):
    """One schema for both: inspect refused these shapes while validate called the asset valid.
    Now validate's ``schema`` check fails naming the same problem inspect refuses with."""
    asset = tampered(inputs / "none.vtu", tmp_path / "nested.vtu", **changes)
    inspected = CliRunner().invoke(main, ["inspect", str(asset)])
    assert inspected.exit_code == 1 and isinstance(inspected.exception, SystemExit), inspected.output
    assert f"nested.vtu: invalid asset, its metadata is wrong: {problem}" in inspected.stderr, inspected.output
    validated = CliRunner().invoke(main, ["validate", str(asset)])
    assert validated.exit_code == 1 and isinstance(validated.exception, SystemExit), validated.output
    assert "nested.vtu: INVALID" in validated.stdout, validated.output
    assert f"  schema: {problem}" in validated.stdout, validated.output


SPEC = "modulus = 1e5\nedge_length = 0.01\n"


@pytest.fixture(scope="module")
def files(inputs) -> Path:
    """The specs and manifests of the cases below, beside the cube, in one folder the cases only read."""
    folder = inputs / "files"
    folder.mkdir()
    write(folder / "cube.obj", (inputs / "cube.obj").read_bytes())
    write(folder / "t.csv", "extent,pressure\n0,0\n1,1e5\n")
    write(folder / "table_manifest.toml", f'[defaults]\n{SPEC}[[asset]]\ninput = "cube.obj"\ntable = "t.csv"\n')
    write(folder / "table_spec.toml", f'table = "t.csv"\n{SPEC}')
    write(folder / "folder_manifest.toml", f'[defaults]\n{SPEC}[[asset]]\ninput = "."\n')
    write(folder / "folder_spec.toml", f'input = "."\n{SPEC}')
    write(folder / "folder_core.toml", f'core = "."\n{SPEC}')
    write(folder / "core_input.toml", f'core = "cube.obj"\n{SPEC}')
    write(folder / "core_both.toml", f'input = "cube.obj"\ncore = "./cube.obj"\n{SPEC}')
    write(folder / "cube_copy.obj", (folder / "cube.obj").read_bytes())
    write(folder / "core_copy.toml", f'core = "cube_copy.obj"\n{SPEC}')
    return folder


OPTION_CASES = [
    # the TOML keys mixed with flags the user never typed: "table and --modulus/--k both given"
    ("manifest [defaults] modulus, item table", ["batch", "{i}/table_manifest.toml", "--output-dir", "{o}"], 2,
     "table_manifest.toml: [[asset]] 1 (cube.obj): table and modulus/k both given"),
    ("spec table and modulus", ["build", "{i}/cube.obj", "--spec", "{i}/table_spec.toml", "-o", "{o}/x.vtu"], 2,
     "table_spec.toml: table and modulus/k both given"),
    # a folder: an item labelled "()" writing ".vtu", or the bare folder "." named as the file
    ("manifest input a folder", ["batch", "{i}/folder_manifest.toml", "--output-dir", "{o}"], 2,
     "folder_manifest.toml: [[asset]] 1 (.): option 'input' = '.' is a folder ({i}), not a file. Write input = "),
    ("spec input a folder", ["build", "--spec", "{i}/folder_spec.toml", "-o", "{o}/x.vtu"], 2,
     "folder_spec.toml: option 'input' = '.' is a folder ({i}), not a file"),
    ("spec core a folder", ["build", "{i}/cube.obj", "--spec", "{i}/folder_core.toml", "-o", "{o}/x.vtu"], 2,
     "folder_core.toml: option 'core' = '.' is a folder ({i}), not a file"),
    # the core the input itself: "crosses or touches the outer surface: 104 pairs of faces meet"
    ("spec core the input", ["build", "{i}/cube.obj", "--spec", "{i}/core_input.toml", "-o", "{o}/x.vtu"], 2,
     "cube.obj: the core {i}/cube.obj is the input surface itself"),
    ("spec core the spec's input", ["build", "--spec", "{i}/core_both.toml", "-o", "{o}/x.vtu"], 2,
     "the core {i}/cube.obj is the input surface itself"),
    ("spec core a copy of the input", ["build", "{i}/cube.obj", "--spec", "{i}/core_copy.toml", "-o", "{o}/x.vtu"], 2,
     "the core {i}/cube_copy.obj is the input surface itself"),
]


@pytest.mark.parametrize("args, code, words", [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES])
def test_spec_and_manifest_keys_are_named_as_written(files, tmp_path, monkeypatch, args, code, words):
    result = _refused(files, tmp_path, monkeypatch, args, code, words.replace("{i}", str(files)))
    assert "--modulus" not in result.stderr and "--k" not in result.stderr


def _appended_start(data: bytes, name: str) -> int:
    """Where array ``name``'s appended data starts (its header first)."""
    offset = int(re.search(rb'Name="%s"[^>]*offset="(\d+)"' % name.encode(), data).group(1))
    return data.index(b"_", data.index(b"<AppendedData")) + 1 + offset


def test_an_uncompressed_connectivity_declaring_more_bytes_than_the_file_is_refused(inputs, tmp_path):
    """Offsets reaching 1e11 and the raw connectivity's own header raised to 8e11 bytes to match:
    the values it holds are counted by the file's bytes, not its header (before: SIGABRT)."""
    hostile = rewritten(inputs / "none.vtu", tmp_path / "hostile.vtu", "raw appended", last_offset=FAR, wide=True)
    data = bytearray(hostile.read_bytes())
    assert b'header_type="UInt64"' in data
    struct.pack_into("<Q", data, _appended_start(bytes(data), "connectivity"), 8 * FAR)
    write(hostile, bytes(data))
    refused(fieldgen(["inspect", hostile], tmp_path), "hostile.vtu: its cell offsets reach 100,000,000,000")


def test_compressed_blocks_adding_up_past_the_file_are_refused(inputs, tmp_path):
    """A zlib connectivity replaced by 10,000 blocks of 100 MB, one byte each compressed: each block
    fits the file's bound, their sum does not (before: SIGABRT)."""
    hostile = rewritten(inputs / "zlib.vtu", tmp_path / "hostile.vtu", "zlib raw appended", last_offset=FAR, wide=True)
    data = hostile.read_bytes()
    body_start = data.index(b"_", data.index(b"<AppendedData")) + 1
    end = data.index(b"</AppendedData>")
    body = data[body_start:end].rstrip()
    blocks, size = 10_000, 10 ** 8
    header = "<Q" if b'header_type="UInt64"' in data else "<I"
    fake = struct.pack(header[0] + 3 * header[1], blocks, size, size) + \
        struct.pack(header[0] + f"{blocks}" + header[1], *([1] * blocks)) + b"\0" * blocks
    crafted = data[:body_start] + body + fake + b"\n  " + data[end:]
    crafted = re.sub(rb'(Name="connectivity"[^>]*offset=")(\d+)(")',
                     lambda m: m.group(1) + str(len(body)).encode() + m.group(3), crafted)
    write(hostile, crafted)
    refused(fieldgen(["inspect", hostile], tmp_path),
            "the header of its compressed array 'connectivity' declares 10,000 blocks of 100,000,000 bytes")
