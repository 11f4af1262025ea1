"""One reader per file kind: surface meshes (fieldgen.io.surface_readers.read_triangles, behind
load_surface), assets (fieldgen.io.asset.read_vtu, behind read_asset/read_metadata) and legacy .vtk
tet meshes (fieldgen.runtime.contact.geometries.read_legacy_vtk_tets). Build and runtime read a file alike."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from fieldgen.runtime.contact.geometries import RigidGeometry, load_body
from fieldgen.surface.stage import load_surface

PACKAGE = Path(__file__).resolve().parents[1] / "fieldgen"
CLI = Path(__file__).resolve().parents[1] / "cli"

#: the calls that parse a file of each kind, and the one module allowed to make them
READERS = {
    r"trimesh\.load\w*\(|meshio\.read\(|stl\.mesh|def _read_obj\(|def _read_binary_stl\(|step_to_glb\(":
        "fieldgen/io/surface_readers.py",
    r"vtkXMLUnstructuredGridReader\(\)": "fieldgen/io/asset.py",
    r"vtkUnstructuredGridReader\(\)|==\s*[\"']POINTS|\.startswith\([\"']POINTS": "fieldgen/runtime/contact/geometries.py",
}


@pytest.mark.parametrize("pattern", sorted(READERS))
def test_each_format_is_parsed_in_one_module(pattern):
    users = set()
    for source in [*PACKAGE.rglob("*.py"), *CLI.rglob("*.py")]:
        if re.search(pattern, source.read_text(encoding="utf-8")):
            users.add(source.relative_to(PACKAGE.parent).as_posix())
    assert users == {READERS[pattern]}


@pytest.mark.parametrize("name, units", [("unit_sphere.STL", "mm"), ("fandisk.obj", "m"), ("torus.STL", "mm")])
def test_runtime_rigid_body_reads_like_the_builder(meshes, name, units):
    """A closed, outward part: the same vertices and faces (seams merged, in metres) both ways."""
    surface = load_surface(meshes / name, units)
    body = RigidGeometry.from_mesh(meshes / name, units)
    assert np.array_equal(body.vertices, surface.vertices)
    assert np.array_equal(body.faces, surface.faces)


def test_stl_seams_merged_for_the_runtime(meshes):
    """STL stores 3 corners per face; merged, the part has as many vertices as trimesh's own
    exact-duplicate merge finds, and Euler's V - E + F = 2 for the closed sphere."""
    import trimesh

    body = load_body(meshes / "unit_sphere.STL")
    reference = trimesh.load(meshes / "unit_sphere.STL", force="mesh", process=True)
    assert len(body.vertices) == len(reference.vertices) and len(body.faces) == len(reference.faces)
    edges = np.unique(np.sort(body.faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1), axis=0)
    assert len(body.vertices) - len(edges) + len(body.faces) == 2


def _is_binary_stl(path: Path) -> bool:
    """A binary STL by its length: an 80-byte header, a 4-byte count n, then n 50-byte records."""
    data = path.read_bytes()
    return len(data) >= 84 and len(data) == 84 + 50 * int.from_bytes(data[80:84], "little")


STL_FILES = sorted(p.name for p in (Path(__file__).parent / "data" / "meshes").iterdir()
                   if p.suffix.lower() == ".stl" and _is_binary_stl(p))


@pytest.mark.parametrize("name", STL_FILES)
def test_binary_stl_reads_as_trimesh_reads_it(meshes, name):
    """Binary STL is read without trimesh (whose import costs 0.4-0.7 s before TetGen can
    start): the same vertices (float64), faces and groups as trimesh's unprocessed load."""
    from fieldgen.io.surface_readers import _read_binary_stl, _read_with_trimesh

    ours = _read_binary_stl((meshes / name).read_bytes())
    assert ours is not None, f"{name} is not a binary STL"
    theirs = _read_with_trimesh(str(meshes / name))
    for mine, reference in zip(ours[:3], theirs[:3]):
        assert mine.dtype == reference.dtype and np.array_equal(mine, reference)
    assert ours[3] == theirs[3]


def test_ascii_and_damaged_stl_go_to_trimesh(tmp_path):
    """An ASCII STL is read by trimesh, also with a NUL byte at its end (some exporters write
    one); a binary STL cut short is refused, naming the file, the declared and the actual length."""
    import trimesh

    from fieldgen.errors import InputError
    from fieldgen.io.surface_readers import _read_binary_stl, read_triangles

    box = trimesh.creation.box(extents=(0.25, 0.5, 1.0))
    text = tmp_path / "box_ascii.stl"
    text.write_bytes(trimesh.exchange.stl.export_stl_ascii(box).encode())
    assert _read_binary_stl(text.read_bytes()) is None
    vertices, faces, _, _ = read_triangles(text)
    assert len(faces) == 12 and np.allclose(np.ptp(vertices, axis=0), [0.25, 0.5, 1.0])
    padded = tmp_path / "box_ascii_nul.stl"
    padded.write_bytes(text.read_bytes() + b"\0")
    assert np.array_equal(read_triangles(padded)[1], faces)
    binary = tmp_path / "box.stl"
    binary.write_bytes(trimesh.exchange.stl.export_stl(box))
    vertices_b, faces_b, _, _ = read_triangles(binary)
    assert np.array_equal(faces_b, faces) and np.allclose(vertices_b, vertices)
    cut = tmp_path / "cut.stl"
    cut.write_bytes(binary.read_bytes()[:-20])
    assert _read_binary_stl(cut.read_bytes()) is None
    with pytest.raises(InputError, match="cut short") as error:
        read_triangles(cut)
    assert "cut.stl" in str(error.value) and "declares 12 triangles (684 bytes)" in str(error.value)
    assert "664 bytes" in str(error.value)


def test_loading_a_binary_stl_does_not_import_trimesh(meshes):
    import subprocess
    import sys

    code = ("import sys; from fieldgen.surface.stage import load_surface; "
            f"load_surface({str(meshes / 'idler_riser.STL')!r}, 'mm'); print('trimesh' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_volume_mesh_formats_are_read_with_meshio(meshes, tmp_path, capsys):
    """.vtk and the other FEM formats go to meshio directly (trimesh's route through meshio is
    deprecated): a triangle surface in one loads as the surface written; a tet mesh has no
    triangles and says so; a damaged file is refused with meshio's reason, and meshio's own
    printing (it writes the reason, then calls sys.exit) reaches neither stdout nor stderr."""
    import warnings

    import meshio
    import trimesh

    from fieldgen.errors import InputError

    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    meshio.write_points_cells(tmp_path / "box.vtk", box.vertices, [("triangle", box.faces)])
    meshio.write_points_cells(tmp_path / "box.vtu", box.vertices, [("triangle", box.faces)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for name in ("box.vtk", "box.vtu"):
            surface = load_surface(tmp_path / name)
            assert np.array_equal(surface.vertices, box.vertices) and np.array_equal(surface.faces, box.faces)
            assert surface.repairs == ()
        with pytest.raises(InputError, match=r"contains no triangles \(4 vertices, 0 faces\)"):
            load_surface(meshes / "drake_one_negative_tetrahedron.vtk")
    (tmp_path / "junk.vtk").write_text("not a mesh\n")
    capsys.readouterr()
    with pytest.raises(InputError, match=r"junk\.vtk.*cannot be read as a VTK mesh \(as vtk: Illegal VTK header"):
        load_surface(tmp_path / "junk.vtk")
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err == ""


@pytest.mark.parametrize("suffix, raised, package", [
    (".3mf", ModuleNotFoundError("No module named 'lxml'"), "lxml"),
    (".dae", ImportError("missing `pip install pycollada`"), "pycollada"),
])
def test_a_format_whose_reader_is_not_installed_is_an_input_error(tmp_path, monkeypatch, suffix, raised, package):
    """trimesh knows formats whose readers fieldgen does not install (a STEP file needs cascadio):
    the error names the file, the package and the fix, instead of a traceback."""
    import trimesh

    from fieldgen.errors import InputError

    def load(*args, **kwargs):
        raise raised

    monkeypatch.setattr(trimesh, "load", load)
    path = tmp_path / f"part{suffix}"
    path.write_text("ISO-10303-21;\n")
    with pytest.raises(InputError) as caught:
        load_surface(path)
    message = str(caught.value)
    assert f"part{suffix}" in message and f"'{package}'" in message and "STL, OBJ, PLY, OFF or GLB" in message


def test_a_step_file_without_cascadio_names_the_extra(tmp_path, monkeypatch):
    """STEP needs the optional extra 'step' (cascadio): without it the error says which package,
    and the pip command that installs the extra, instead of a traceback."""
    import sys

    from fieldgen.errors import InputError
    from fieldgen.install import install_hint

    monkeypatch.setitem(sys.modules, "cascadio", None)      # `import cascadio` raises ImportError
    path = tmp_path / "part.stp"
    path.write_text("ISO-10303-21;\n")
    with pytest.raises(InputError) as caught:
        load_surface(path)
    message = str(caught.value)
    assert "part.stp" in message and "CAD (STEP) file" in message and "'cascadio'" in message
    assert install_hint("step") in message and "[step]" in install_hint("step")


def test_a_step_part_is_its_stl_export(meshes):
    """featuretype.STEP and featuretype.STL are two exports of one SolidWorks part (inches):
    OpenCASCADE's tessellation of the B-rep (facets within 0.05 mm) encloses the STL's volume
    within 0.1% and spans the same box. The STEP file carries its unit, so --units does not scale
    it: read with 'in', 'mm' or 'm' it is the same part in metres."""
    stl = load_surface(meshes / "featuretype.STL", "in")
    step = load_surface(meshes / "featuretype.STEP", "in")
    assert step.volume == pytest.approx(stl.volume, rel=1e-3)
    np.testing.assert_allclose(step.bounds, stl.bounds, atol=1e-6)
    assert abs(stl.volume - (5.0 * 2.5 * 1.375) * 0.0254 ** 3) > 1e-6      # not a plain box
    for units in ("mm", "m"):
        other = load_surface(meshes / "featuretype.STEP", units)
        np.testing.assert_allclose(other.vertices, step.vertices, rtol=1e-12, atol=1e-15)
        # the runtime reads it alike (a rigid body in `contact` or a scene)
        body = RigidGeometry.from_mesh(meshes / "featuretype.STEP", units)
        np.testing.assert_allclose([body.vertices.min(axis=0), body.vertices.max(axis=0)], step.bounds, atol=1e-9)


def test_a_damaged_step_file_is_an_input_error_and_prints_nothing(tmp_path, capfd):
    """OpenCASCADE prints its parse errors on the process's stdout and stderr: they go into the
    error message, and nothing reaches stdout, which carries only the report."""
    from fieldgen.errors import InputError

    path = tmp_path / "broken.step"
    path.write_text("ISO-10303-21;\nHEADER;\nthis is not STEP\n")
    capfd.readouterr()
    with pytest.raises(InputError) as caught:
        load_surface(path)
    printed = capfd.readouterr()
    assert printed.out == "" and printed.err == ""
    message = str(caught.value)
    assert "broken.step" in message and "cannot be read as a STEP file" in message and "AP214" in message
    assert "OpenCASCADE could not read it as STEP: " in message and "StepFile" in message   # its own words
    import os

    os.write(1, b"stdout is back")
    os.write(2, b"stderr is back")
    printed = capfd.readouterr()
    assert printed.out == "stdout is back" and printed.err == "stderr is back"


def test_meshio_formats_flat_points_and_missing_packages(tmp_path, monkeypatch):
    """A mesh with 2-D points is read at z = 0 (then refused as not closed), not reshaped into other
    vertices; a reader that needs a package fieldgen does not install (XDMF's h5py) says so."""
    import meshio

    from fieldgen.errors import InputError
    from fieldgen.io.surface_readers import read_triangles

    flat = tmp_path / "flat.mesh"                 # medit keeps 2-D points as they are
    meshio.write_points_cells(flat, np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [2.0, 0.0]]),
                              [("triangle", np.array([[0, 1, 2], [0, 2, 3], [1, 4, 2]]))])
    vertices, faces, _, _ = read_triangles(flat)
    assert vertices.shape == (5, 3) and np.array_equal(vertices[:, 2], np.zeros(5))
    assert np.array_equal(vertices[:, :2], [[0, 0], [1, 0], [1, 1], [0, 1], [2, 0]])
    assert np.array_equal(faces, [[0, 1, 2], [0, 2, 3], [1, 4, 2]])
    with pytest.raises(InputError, match="not closed"):
        load_surface(flat)

    def needs_h5py(path):
        raise ModuleNotFoundError("No module named 'h5py'")

    monkeypatch.setattr(meshio.medit, "read", needs_h5py)
    with pytest.raises(InputError, match=r"flat\.mesh: is a \.mesh file: reading it needs the Python package 'h5py'"):
        read_triangles(flat)


def test_an_asset_given_as_a_surface_names_its_source(tmp_path):
    from fieldgen.io.asset import write_asset
    from fieldgen.errors import InputError
    from test_inspect import slab_asset

    write_asset(tmp_path / "slab.vtu", slab_asset())
    with pytest.raises(InputError, match=r"slab\.vtu: is a fieldgen asset .* Give the surface it was built from "
                                         r"\(box\.stl, units"):
        load_surface(tmp_path / "slab.vtu")


def test_a_quad_surface_in_a_volume_mesh_format_is_read_as_triangles(tmp_path):
    """A box of six quads (as ParaView exports a surface) is read as twelve triangles, each quad
    split from its first corner, and loads as a closed surface of the box's volume."""
    import meshio

    corners = np.array([[x, y, z] for x in (0.0, 0.04) for y in (0.0, 0.03) for z in (0.0, 0.02)])
    quads = np.array([[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]])
    meshio.write_points_cells(tmp_path / "box.vtk", corners, [("quad", quads)])
    surface = load_surface(tmp_path / "box.vtk")
    assert len(surface.faces) == 12
    expected = np.concatenate([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]])
    assert sorted(map(tuple, surface.faces)) == sorted(map(tuple, expected))
    v = surface.vertices[surface.faces]
    assert np.einsum("ij,ij->i", v[:, 0], np.cross(v[:, 1], v[:, 2])).sum() / 6 == pytest.approx(0.04 * 0.03 * 0.02)


def test_a_step_part_builds_the_same_asset_every_time(meshes, tmp_path):
    """`fieldgen build part.step`: a valid asset, byte-identical from one build to the next (the
    tessellation runs on one thread), its source recorded as the STEP file; `--edge-length` is in
    --units (inches here) while the geometry keeps the file's own unit."""
    from click.testing import CliRunner

    from fieldgen.io.asset import read_metadata
    from fieldgen.cli.main import main
    from fieldgen.validate import validate_asset

    outputs = []
    for name in ("a.vtu", "b.vtu"):
        out = tmp_path / name
        result = CliRunner().invoke(main, ["build", str(meshes / "featuretype.STEP"), "--units", "in",
                                           "--edge-length", "0.25", "--modulus", "1e5", "-o", str(out), "--quiet"])
        assert result.exit_code == 0, result.output
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert validate_asset(tmp_path / "a.vtu").ok
    meta = read_metadata(tmp_path / "a.vtu")
    assert meta["source"]["file"] == "featuretype.STEP" and meta["source"]["units"] == "in"
    stl = load_surface(meshes / "featuretype.STL", "in")
    assert meta["mesh"]["volume"] == pytest.approx(stl.volume, rel=2e-3)


def test_a_step_file_reads_without_a_python_stdout(meshes, monkeypatch):
    """pythonw, or a process started with stdout closed, has sys.stdout None: the quieting of
    OpenCASCADE's output must not turn that into an error."""
    import sys

    monkeypatch.setattr(sys, "stdout", None)
    surface = load_surface(meshes / "featuretype.STEP", "in")
    assert len(surface.faces) > 1000
