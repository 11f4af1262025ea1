"""The .vtu asset file: contract read back with plain vtk, determinism, atomic writes, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import meshio
import numpy as np
import pytest
from vtkmodules.util.numpy_support import vtk_to_numpy
from vtkmodules.vtkCommonCore import VTK_DOUBLE, vtkDataArray
from vtkmodules import vtkIOXML

from fieldgen.io.asset import (SCHEMA, Asset, atomic_output, read_asset, read_metadata, write_asset)
from fieldgen.errors import BuildError, InputError
from fieldgen.meshing.tetmesh import boundary_faces_of, min_dihedral_angles, orient_positive, tet_volumes

ROOT = Path(__file__).resolve().parents[1]
M0 = 1.0e5          # Pa
TAU = 2.0           # 1/s
SIZE = (0.1, 0.08, 0.05)


def box_mesh(nx: int = 4, ny: int = 3, nz: int = 3, size=SIZE):
    """A structured box, each cube split into 6 tets around its main diagonal (Kuhn)."""
    axes = [np.linspace(0.0, s, k + 1) for s, k in zip(size, (nx, ny, nz))]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    points = grid.reshape(-1, 3)
    index = np.arange(len(points)).reshape(nx + 1, ny + 1, nz + 1)
    i, j, k = (a.ravel() for a in np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz),
                                                indexing="ij"))
    corner = np.stack([index[i + a, j + b, k + c] for a in (0, 1) for b in (0, 1)
                       for c in (0, 1)], axis=1)                      # bit a*4 + b*2 + c
    paths = [(0, 1, 3, 7), (0, 1, 5, 7), (0, 2, 3, 7), (0, 2, 6, 7), (0, 4, 5, 7), (0, 4, 6, 7)]
    tets = np.concatenate([corner[:, list(p)] for p in paths])
    return points, orient_positive(points, tets)


def slab_metadata(length: float, **extra) -> dict:
    meta = {
        "law": {"kind": "linear", "modulus": M0, "unit": "Pa"},
        "characteristic_length": length,
        "expansion_rate": TAU,
        "dissipation": 1.0 / (length * TAU),
        "friction": {"static": 0.6, "dynamic": 0.5},
        "boundary": {"bonded": ["z<0.001"], "insulated": [], "problem": "laplace"},
        "max_interpolation_error": 0.0,
        "layer_tolerance": 1000.0,
        "extent_solution": {"problem": "laplace", "solver": "direct", "relative_residual": 0.0,
                            "max_violation": 0.0},
        "deterministic": True,
        "source": {"file": "box.stl", "sha256": "0" * 64},
    }
    meta.update(extra)
    return meta


def slab_asset(nx: int = 4, ny: int = 3, nz: int = 3) -> Asset:
    """A layer of thickness h bonded at z = 0: e = 1 - z/h, p = M0·e, L = h (D 5.2.1)."""
    points, tets = box_mesh(nx, ny, nz)
    h = SIZE[2]
    extent = 1.0 - points[:, 2] / h
    extent[points[:, 2] == h] = 0.0
    return Asset(points=points, tets=tets, extent=extent, pressure=M0 * extent,
                 metadata=slab_metadata(h))


def vtk_read(path):
    reader = vtkIOXML.vtkXMLUnstructuredGridReader()
    reader.SetFileName(str(path))
    reader.Update()
    return reader.GetOutput()


# --------------------------------------------------------------------------- contract

def test_round_trip_read_by_plain_vtk(tmp_path):
    asset = slab_asset()
    path = tmp_path / "slab.vtu"
    write_asset(path, asset)

    head = path.read_bytes()[:400]
    assert b'type="UnstructuredGrid"' in head
    assert b'compressor=' not in head and b'encoding="raw"' in path.read_bytes()   # the default: raw bytes
    text = path.read_text(errors="replace")
    assert '<AppendedData encoding="raw">' in text
    assert 'format="appended"' in text and 'format="ascii"' not in text and 'format="binary"' not in text

    grid = vtk_read(path)
    n, t = len(asset.points), len(asset.tets)
    assert grid.GetNumberOfPoints() == n and grid.GetNumberOfCells() == t
    assert np.array_equal(vtk_to_numpy(grid.GetPoints().GetData()), asset.points)
    assert set(vtk_to_numpy(grid.GetCellTypes()).tolist()) == {10}
    connectivity = vtk_to_numpy(grid.GetCells().GetConnectivityArray()).reshape(-1, 4)
    assert np.array_equal(connectivity, asset.tets)

    expected = {("point", "extent"): (1, "1"), ("point", "pressure"): (1, "Pa"),
                ("cell", "pressure_gradient"): (3, "Pa/m"),
                ("cell", "min_dihedral_angle"): (1, "deg")}
    for (where, name), (components, unit) in expected.items():
        data = grid.GetPointData() if where == "point" else grid.GetCellData()
        array = data.GetArray(name)
        assert array is not None, name
        assert array.GetDataType() == VTK_DOUBLE
        assert array.GetNumberOfComponents() == components
        assert array.GetNumberOfTuples() == (n if where == "point" else t)
        assert array.GetInformation().Get(vtkDataArray.UNITS_LABEL()) == unit
    assert grid.GetPointData().GetScalars().GetName() == "pressure"
    assert np.array_equal(vtk_to_numpy(grid.GetPointData().GetArray("extent")), asset.extent)
    assert np.array_equal(vtk_to_numpy(grid.GetPointData().GetArray("pressure")), asset.pressure)

    # A linear field has the closed-form gradient (0, 0, -M0/h) in every tet.
    gradient = vtk_to_numpy(grid.GetCellData().GetArray("pressure_gradient"))
    np.testing.assert_allclose(gradient, np.tile([0.0, 0.0, -M0 / SIZE[2]], (t, 1)),
                               rtol=0, atol=1e-9 * M0 / SIZE[2])
    angles = vtk_to_numpy(grid.GetCellData().GetArray("min_dihedral_angle"))
    assert np.array_equal(angles, min_dihedral_angles(asset.points, asset.tets))

    fields = grid.GetFieldData()
    text = fields.GetAbstractArray("fieldgen_metadata")
    assert text.GetDataTypeAsString() == "unsigned char"   # the JSON's ASCII bytes: meshio reads no strings
    meta = json.loads(vtk_to_numpy(text).tobytes().decode("ascii"))
    assert meta["schema"] == SCHEMA
    assert meta["tool"]["name"] == "fieldgen" and meta["tool"]["version"]
    for key, value in asset.metadata.items():
        assert meta[key] == value, key
    assert meta["units"]["pressure"] == "Pa" and meta["units"]["pressure_gradient"] == "Pa/m"
    assert meta["units"]["characteristic_length"] == "m" and meta["units"]["dissipation"] == "s/m"
    assert meta["mesh"] == {"n_points": n, "n_tets": t,
                            "n_boundary_faces": 2 * (4 * 3 + 4 * 3 + 3 * 3) * 2,
                            "volume": pytest.approx(np.prod(SIZE), rel=1e-12),
                            "min_dihedral_angle": float(angles.min())}
    for name, value, unit in (("characteristic_length", SIZE[2], "m"),
                              ("dissipation", 1.0 / (SIZE[2] * TAU), "s/m"),
                              ("modulus", M0, "Pa")):
        array = fields.GetArray(name)
        assert array.GetDataType() == VTK_DOUBLE and array.GetNumberOfTuples() == 1
        json_value = meta["law"]["modulus"] if name == "modulus" else meta[name]
        assert array.GetValue(0) == json_value == value
        assert array.GetInformation().Get(vtkDataArray.UNITS_LABEL()) == unit


def test_read_asset_returns_exactly_what_was_written(tmp_path):
    asset = slab_asset()
    path = tmp_path / "slab.vtu"
    write_asset(path, asset)
    back = read_asset(path)
    assert back.points.dtype == np.float64 and back.tets.dtype == np.int64
    for name in ("points", "tets", "extent", "pressure"):
        assert np.array_equal(getattr(back, name), getattr(asset, name)), name
    assert back.pressure_gradient.shape == (len(asset.tets), 3)
    assert np.array_equal(back.min_dihedral_angle, min_dihedral_angles(asset.points, asset.tets))
    assert back.metadata == read_metadata(path)
    assert back.metadata["characteristic_length"] == SIZE[2]
    # The caller's asset is not modified by write_asset.
    assert asset.pressure_gradient is None and "schema" not in asset.metadata


def test_long_metadata_round_trips(tmp_path):
    asset = slab_asset()
    asset.metadata["notes"] = "ünïcode ✓ " + "x" * 70000   # longer than one compressed block
    path = tmp_path / "big.vtu"
    write_asset(path, asset)
    grid = vtk_read(path)
    stored = json.loads(vtk_to_numpy(grid.GetFieldData().GetAbstractArray("fieldgen_metadata")).tobytes())
    assert stored["notes"] == asset.metadata["notes"]
    assert read_metadata(path)["notes"] == asset.metadata["notes"]


@pytest.mark.parametrize("mode", ["ascii", "raw-appended", "uncompressed", "zlib-base64"])
def test_other_encodings_read_the_same(tmp_path, mode):
    """Any encoding vtk writes reads alike, among them the inline base64 + zlib of older assets."""
    path = tmp_path / "slab.vtu"
    write_asset(path, slab_asset(2, 2, 2))
    grid = vtk_read(path)
    other = tmp_path / f"{mode}.vtu"
    writer = vtkIOXML.vtkXMLUnstructuredGridWriter()
    writer.SetFileName(str(other))
    writer.SetInputData(grid)
    if mode == "ascii":
        writer.SetDataModeToAscii()
    elif mode == "raw-appended":
        writer.SetDataModeToAppended()
        writer.EncodeAppendedDataOff()
    elif mode == "zlib-base64":
        writer.SetDataModeToBinary()
        writer.SetCompressorTypeToZLib()
    else:
        writer.SetDataModeToBinary()
        writer.SetCompressorTypeToNone()
    assert writer.Write() == 1
    assert other.read_bytes() != path.read_bytes()
    assert read_metadata(other) == read_metadata(path)
    assert np.array_equal(read_asset(other).pressure, read_asset(path).pressure)


# --------------------------------------------------------------------------- determinism

def test_two_writes_are_byte_identical(tmp_path):
    first, second = tmp_path / "a" / "x.vtu", tmp_path / "b" / "other-name.vtu"
    first.parent.mkdir()
    second.parent.mkdir()
    asset = slab_asset()
    write_asset(first, asset)
    shuffled = slab_asset()
    shuffled.metadata = dict(reversed(list(shuffled.metadata.items())))   # key order is irrelevant
    write_asset(second, shuffled)
    assert first.read_bytes() == second.read_bytes()
    # json: sorted keys, shortest round-trip floats
    text = json.dumps(read_metadata(first), sort_keys=True, separators=(",", ":"))
    assert f'"characteristic_length":{SIZE[2]!r}' in text


def test_bytes_identical_in_another_process(tmp_path):
    here = tmp_path / "here.vtu"
    write_asset(here, slab_asset())
    there = tmp_path / "there.vtu"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from threadpoolctl import threadpool_limits
        from test_asset import slab_asset
        from fieldgen.io.asset import write_asset
        with threadpool_limits(1):
            write_asset({str(there)!r}, slab_asset())
    """)
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, env=env, timeout=120)
    assert here.read_bytes() == there.read_bytes()


# --------------------------------------------------------------------------- atomicity

class _FailingWriter(vtkIOXML.vtkXMLUnstructuredGridWriter):
    """Writes part of the file, then fails the way a full disk or Ctrl-C would."""

    error: type[BaseException] = OSError

    def Write(self):  # noqa: N802 — vtk's name
        super().Write()
        name = self.GetFileName()
        with open(name, "r+b") as stream:
            stream.truncate(os.path.getsize(name) // 2)
        raise self.error("simulated failure midway through the write")


class _InterruptedWriter(_FailingWriter):
    error = KeyboardInterrupt


class _RefusingWriter(vtkIOXML.vtkXMLUnstructuredGridWriter):
    def Write(self):  # noqa: N802
        return 0


@pytest.mark.parametrize("writer, error", [(_FailingWriter, OSError),
                                           (_InterruptedWriter, KeyboardInterrupt),
                                           (_RefusingWriter, BuildError)])
def test_failed_write_leaves_old_file_and_no_temporary(tmp_path, monkeypatch, writer, error):
    path = tmp_path / "asset.vtu"
    write_asset(path, slab_asset(2, 2, 2))
    before = path.read_bytes()
    monkeypatch.setattr(vtkIOXML, "vtkXMLUnstructuredGridWriter", writer)
    with pytest.raises(error):
        write_asset(path, slab_asset())
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["asset.vtu"]

    fresh = tmp_path / "fresh.vtu"
    with pytest.raises(error):
        write_asset(fresh, slab_asset())
    assert sorted(os.listdir(tmp_path)) == ["asset.vtu"]


def test_atomic_output_replaces_only_on_success(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_output(target) as temporary:
            assert Path(temporary).parent == tmp_path and Path(temporary).exists()
            Path(temporary).write_text("half")
            raise KeyboardInterrupt
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["report.json"]
    with atomic_output(target) as temporary:
        Path(temporary).write_text("new")
    assert target.read_text() == "new" and os.listdir(tmp_path) == ["report.json"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert (target.stat().st_mode & 0o777) == (0o666 & ~umask)


def test_atomic_output_makes_missing_folders_and_refuses_what_it_cannot_write(tmp_path):
    with atomic_output(tmp_path / "new" / "sub" / "x.txt") as temporary:
        Path(temporary).write_text("whole")
    assert (tmp_path / "new" / "sub" / "x.txt").read_text() == "whole"
    assert os.listdir(tmp_path / "new" / "sub") == ["x.txt"]
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError) as info:                 # a folder cannot be made under a file
        with atomic_output(tmp_path / "file" / "x.vtu"):
            pass
    assert "file" in str(info.value)
    (tmp_path / "dir.vtu").mkdir()
    with pytest.raises(InputError, match="cannot replace"):
        write_asset(tmp_path / "dir.vtu", slab_asset(2, 2, 2))
    assert sorted(os.listdir(tmp_path)) == ["dir.vtu", "file", "new"] and not os.listdir(tmp_path / "dir.vtu")


# --------------------------------------------------------------------------- errors

def test_write_refuses_incomplete_or_non_json_metadata(tmp_path):
    path = tmp_path / "x.vtu"
    asset = slab_asset(2, 2, 2)
    del asset.metadata["friction"]
    with pytest.raises(BuildError, match="friction"):
        write_asset(path, asset)
    asset = slab_asset(2, 2, 2)
    asset.metadata["max_interpolation_error"] = float("nan")
    with pytest.raises(BuildError, match="JSON"):
        write_asset(path, asset)
    asset = slab_asset(2, 2, 2)
    asset.metadata["schema"] = "something/2"
    with pytest.raises(BuildError, match="schema"):
        write_asset(path, asset)
    asset = slab_asset(2, 2, 2)
    asset.pressure = asset.pressure[:-1]
    with pytest.raises(BuildError, match="pressure has shape"):
        write_asset(path, asset)
    assert os.listdir(tmp_path) == []


def test_numpy_values_in_metadata_are_written_as_plain_json(tmp_path):
    asset = slab_asset(2, 2, 2)
    asset.metadata["characteristic_length"] = np.float64(SIZE[2])
    asset.metadata["boundary"]["faces"] = np.array([3, 4], dtype=np.int64)
    path = tmp_path / "x.vtu"
    write_asset(path, asset)
    meta = read_metadata(path)
    assert meta["boundary"]["faces"] == [3, 4] and meta["characteristic_length"] == SIZE[2]


def test_read_refuses_files_that_are_not_assets(tmp_path, capfd):
    text = tmp_path / "notes.vtu"
    text.write_text("hello, not a mesh\n")
    with pytest.raises(InputError) as info:
        read_asset(text)
    assert info.value.path == str(text) and "VTK XML" in info.value.defect and info.value.fix

    plain = tmp_path / "meshio.vtu"
    points, tets = box_mesh(2, 2, 2)
    meshio.write(str(plain), meshio.Mesh(points, [("tetra", tets)],
                                         point_data={"pressure": points[:, 2]}))
    for read in (read_asset, read_metadata):
        with pytest.raises(InputError, match="fieldgen_metadata") as info:
            read(plain)
        assert info.value.path == str(plain)

    with pytest.raises(InputError, match="does not exist"):
        read_asset(tmp_path / "missing.vtu")

    good = tmp_path / "good.vtu"
    write_asset(good, slab_asset())
    data = good.read_bytes()
    cut = tmp_path / "cut.vtu"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated"):
        read_asset(cut)
    # vtk's own messages for these are caught and reported, not printed.
    captured = capfd.readouterr()
    assert "ERR" not in captured.err and "ERROR" not in captured.err
    # Damage inside the XML: vtk's error code is reported (vtk may still print a line).
    broken = tmp_path / "broken.vtu"
    start = data.index(b"<Points>")
    broken.write_bytes(data[:start] + b"<Points><DataArray>" + data[start + 30:])
    with pytest.raises(InputError, match="vtk cannot read"):
        read_asset(broken)


def test_read_refuses_non_tetrahedral_cells(tmp_path):
    path = tmp_path / "mixed.vtu"
    write_asset(path, slab_asset(2, 2, 2))
    grid = vtk_read(path)
    from vtkmodules.vtkCommonDataModel import VTK_TRIANGLE
    from vtkmodules.vtkCommonCore import vtkIdList
    ids = vtkIdList()
    for v in (0, 1, 2):
        ids.InsertNextId(v)
    grid.InsertNextCell(VTK_TRIANGLE, ids)
    grid.GetCellData().Initialize()
    writer = vtkIOXML.vtkXMLUnstructuredGridWriter()
    writer.SetFileName(str(path))
    writer.SetInputData(grid)
    assert writer.Write() == 1
    with pytest.raises(InputError, match="tetrahedra only"):
        read_asset(path)


# --------------------------------------------------------------------------- a real mesh

def test_round_trip_on_a_real_tet_mesh(tmp_path, meshes):
    """Drake's bell pepper tet mesh with a P1 Poisson extent (docs/model.md §2.2, no rigid core)."""
    asset = pepper_asset(meshes)
    path = tmp_path / "pepper.vtu"
    write_asset(path, asset)
    back = read_asset(path)
    assert np.array_equal(back.points, asset.points) and np.array_equal(back.tets, asset.tets)
    assert np.array_equal(back.pressure, asset.pressure)
    assert back.metadata["mesh"]["n_tets"] == len(asset.tets)
    assert back.metadata["mesh"]["volume"] == pytest.approx(
        float(np.sum(tet_volumes(asset.points, asset.tets))), rel=1e-12)


def pepper_asset(meshes: Path) -> Asset:
    from skfem import Basis, ElementTetP1, MeshTet, asm, condense, solve
    from skfem.models import laplace, unit_load

    mesh = meshio.read(meshes / "yellow_bell_pepper_no_stem_low.vtk")
    points = np.asarray(mesh.points, dtype=np.float64)
    tets = orient_positive(points, mesh.cells_dict["tetra"].astype(np.int64))
    basis = Basis(MeshTet(points.T, tets.T), ElementTetP1())
    extent = solve(*condense(asm(laplace, basis), asm(unit_load, basis),
                             D=basis.get_dofs().all()))
    extent = np.clip(extent / extent.max(), 0.0, 1.0)
    boundary = np.unique(boundary_faces_of(tets))
    extent[boundary] = 0.0
    volumes = tet_volumes(points, tets)
    from fieldgen.meshing.tetmesh import p1_gradients
    weight = np.sum(np.linalg.norm(p1_gradients(points, tets, extent), axis=1) * volumes)
    length = float(np.sum(volumes) / weight)
    meta = slab_metadata(length)
    meta["boundary"] = {"bonded": [], "insulated": [], "problem": "poisson"}
    meta["source"] = {"file": "yellow_bell_pepper_no_stem_low.vtk", "sha256": "1" * 64}
    return Asset(points=points, tets=tets, extent=extent, pressure=M0 * extent, metadata=meta)

