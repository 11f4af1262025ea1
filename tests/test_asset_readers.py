"""Assets open in every VTK reader: meshio and pyvista read what fieldgen's own reader reads
(the default raw encoding, and --compression zlib), and fieldgen still reads an LZ4-compressed
asset (--compression lz4, the default of earlier versions)."""

from __future__ import annotations

import json

import meshio
import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.io.asset import read_asset

pyvista = pytest.importorskip("pyvista")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One part built by the command line in each encoding."""
    folder = tmp_path_factory.mktemp("readers")
    trimesh.creation.box([0.04, 0.03, 0.02]).export(folder / "block.stl")
    out = {}
    for name, extra in (("default", []), ("lz4", ["--compression", "lz4"]), ("zlib", ["--compression", "zlib"])):
        path = folder / f"{name}.vtu"
        result = CliRunner().invoke(main, ["build", str(folder / "block.stl"), "--bonded", "normal:0,0,-1",
                                           "--law", "hyperbolic", "--modulus", "1e5", "--k", "0.5",
                                           "--dissipation", "1", "--edge-length", "0.008", "-o", str(path),
                                           "--quiet", *extra])
        assert result.exit_code == 0, result.output
        out[name] = path
    return out


def same_as_fieldgen(path, points, tets, extent, pressure):
    asset = read_asset(path)
    assert np.array_equal(points, asset.points)
    assert np.array_equal(tets, asset.tets)
    assert np.array_equal(extent, asset.extent)
    assert np.array_equal(pressure, asset.pressure)
    return asset


@pytest.mark.parametrize("name", ["default", "zlib"])
def test_meshio_reads_points_tets_extent_pressure_and_metadata(built, name):
    mesh = meshio.read(built[name])
    assert [block.type for block in mesh.cells] == ["tetra"]
    asset = same_as_fieldgen(built[name], mesh.points, mesh.cells_dict["tetra"], mesh.point_data["extent"],
                             mesh.point_data["pressure"])
    assert np.array_equal(mesh.cell_data["pressure_gradient"][0], asset.pressure_gradient)
    text = mesh.field_data["fieldgen_metadata"].tobytes().decode("ascii")
    assert json.loads(text) == asset.metadata


def test_pyvista_reads_points_tets_extent_pressure(built):
    grid = pyvista.read(built["default"])
    assert set(np.unique(grid.celltypes)) == {pyvista.CellType.TETRA}
    tets = grid.cells.reshape(-1, 5)
    assert np.all(tets[:, 0] == 4)
    same_as_fieldgen(built["default"], grid.points, tets[:, 1:], grid.point_data["extent"],
                     grid.point_data["pressure"])
    assert grid.active_scalars_name == "pressure"


def test_default_is_raw_and_lz4_is_still_read(built):
    head = {name: path.read_bytes()[:300] for name, path in built.items()}
    assert b"compressor=" not in head["default"]
    assert b'compressor="vtkZLibDataCompressor"' in head["zlib"]
    assert b'compressor="vtkLZ4DataCompressor"' in head["lz4"]
    with pytest.raises(KeyError, match="vtkLZ4DataCompressor"):
        meshio.read(built["lz4"])           # why LZ4 is no longer the default
    default = read_asset(built["default"])
    for other in ("lz4", "zlib"):
        asset = read_asset(built[other])
        for name in ("points", "tets", "extent", "pressure", "pressure_gradient", "min_dihedral_angle"):
            assert np.array_equal(getattr(default, name), getattr(asset, name))
        assert default.metadata == asset.metadata


def test_unknown_compression_is_a_usage_error(built, tmp_path):
    result = CliRunner().invoke(main, ["build", str(built["default"].parent / "block.stl"), "--modulus", "1e5",
                                       "--compression", "gzip", "-o", str(tmp_path / "x.vtu")])
    assert result.exit_code == 2 and "gzip" in result.output
    assert not (tmp_path / "x.vtu").exists()
