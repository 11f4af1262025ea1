"""validate_asset: passes a correct asset, names the failed check for each corruption."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import meshio
import numpy as np
import pytest
from vtkmodules import vtkIOXML
from vtkmodules.util.numpy_support import numpy_to_vtk, vtk_to_numpy

from fieldgen.io.asset import Asset, read_asset, write_asset
from fieldgen.meshing.tetmesh import orient_positive, p1_gradients
from fieldgen.validate import CHECKS, Check, ValidationReport, validate_asset
sys.path.insert(0, str(Path(__file__).parent))   # the slab builders live in test_asset.py
from test_asset import M0, SIZE, TAU, box_mesh, pepper_asset, slab_asset, slab_metadata, vtk_read  # noqa: E402

ALL_CHECKS = ["readable"] + [name for name, _ in CHECKS]


def failed(report: ValidationReport) -> set[str]:
    return {check.name for check in report.checks if not check.ok}


def written(tmp_path, asset, name="asset.vtu"):
    path = tmp_path / name
    write_asset(path, asset)
    return path


def rewrite(path, mutate):
    """Change a written file with plain vtk (to corrupt what write_asset would not)."""
    grid = vtk_read(path)
    mutate(grid)
    writer = vtkIOXML.vtkXMLUnstructuredGridWriter()
    writer.SetFileName(str(path))
    writer.SetInputData(grid)
    writer.SetCompressorTypeToZLib()
    assert writer.Write() == 1
    return path


def edit_metadata(edit):
    def mutate(grid):
        fields = grid.GetFieldData()
        meta = json.loads(vtk_to_numpy(fields.GetAbstractArray("fieldgen_metadata")).tobytes())
        edit(meta)
        text = numpy_to_vtk(np.frombuffer(json.dumps(meta).encode("ascii"), dtype=np.uint8), deep=True)
        text.SetName("fieldgen_metadata")
        fields.AddArray(text)   # replaces the array of that name
    return mutate


# --------------------------------------------------------------------------- good assets

def test_good_asset_passes_every_check(tmp_path):
    report = validate_asset(written(tmp_path, slab_asset()))
    assert [c.name for c in report.checks] == ALL_CHECKS
    assert report.ok, [c for c in report.checks if not c.ok]
    as_dict = report.to_dict()
    assert as_dict["valid"] is True and as_dict["path"].endswith("asset.vtu")
    assert [c["name"] for c in as_dict["checks"]] == ALL_CHECKS
    json.dumps(as_dict)
    detail = {c.name: c.detail for c in report.checks}
    assert f"L = {SIZE[2]:.9g} m" in detail["characteristic_length"]   # L = h exactly (D 5.2.1)


@pytest.mark.parametrize("law", [
    {"kind": "hyperbolic", "modulus": M0, "k": 0.5, "unit": "Pa"},
    {"kind": "table", "modulus": 3.0e5, "extent": [0.0, 0.5, 1.0],
     "pressure": [0.0, 1.0e5, 3.0e5], "interpolation": "pchip", "unit": "Pa"},
])
def test_nonlinear_laws_pass_and_a_wrong_law_is_named(tmp_path, law):
    from fieldgen.material.modulus import law_from_metadata

    asset = slab_asset()
    asset.metadata["law"] = law
    asset.pressure = law_from_metadata(law).pressure(asset.extent)
    report = validate_asset(written(tmp_path, asset))
    assert report.ok, [c for c in report.checks if not c.ok]

    asset.metadata["law"] = {"kind": "linear", "modulus": law["modulus"], "unit": "Pa"}
    report = validate_asset(written(tmp_path, asset, "wrong.vtu"))
    assert failed(report) == {"pressure_law"}


def boundary_vertices(tets: np.ndarray) -> np.ndarray:
    """Per vertex, whether it lies on the boundary (on a face used by one tet)."""
    faces = np.sort(tets[:, [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]].reshape(-1, 3), axis=1)
    unique, counts = np.unique(faces, axis=0, return_counts=True)
    on_boundary = np.zeros(tets.max() + 1, dtype=bool)
    on_boundary[unique[counts == 1].ravel()] = True
    return on_boundary


def outer_tets(tets: np.ndarray) -> np.ndarray:
    """Indices of tets whose four vertices all lie on the boundary (faces used by one tet)."""
    return np.flatnonzero(boundary_vertices(tets)[tets].all(axis=1))


def test_real_mesh_asset_passes_except_its_flat_boundary_tets(tmp_path, meshes):
    """Drake's pepper mesh with e = 0 on its whole boundary: every check passes but the one for
    tets lying wholly on the e = 0 boundary; the mesh has such tets (counted here directly)."""
    asset = pepper_asset(meshes)
    flat = outer_tets(asset.tets)
    assert flat.size > 0
    report = validate_asset(written(tmp_path, asset))
    assert failed(report) == {"no_flat_zero_tets"}
    assert _detail(report, "no_flat_zero_tets").startswith(f"{flat.size} of {len(asset.tets)} tets")


def test_flat_zero_tet_in_a_doctored_slab(tmp_path):
    """The slab's top (z = h) is its e = 0 surface; a tet touching it with its other vertices on
    the sides, given e = 0 (and p = 0) there too, lies wholly on the e = 0 boundary."""
    asset = slab_asset()
    assert validate_asset(written(tmp_path, asset, "good.vtu")).ok
    top = asset.points[:, 2] == SIZE[2]
    candidates = [t for t in outer_tets(asset.tets) if top[asset.tets[t]].any()]
    tet = candidates[0]
    asset.extent[asset.tets[tet]] = 0.0
    asset.pressure[asset.tets[tet]] = 0.0
    flat = [t for t in range(len(asset.tets)) if np.all(asset.extent[asset.tets[t]] == 0.0)]
    assert tet in flat          # (a neighbour sharing three of its vertices may become flat too)
    report = validate_asset(written(tmp_path, asset))
    assert "no_flat_zero_tets" in failed(report)
    assert _detail(report, "no_flat_zero_tets").startswith(f"{len(flat)} of {len(asset.tets)} tets")
    assert f"(first: tet {min(flat)}," in _detail(report, "no_flat_zero_tets")


def test_zero_tet_around_an_interior_vertex_in_a_doctored_slab(tmp_path):
    """A vertex inside the slab given e = 0 (and p = 0), next to the e = 0 top: a tet with three
    top vertices and this one has e = 0 at all four though it does not lie on the boundary."""
    asset = slab_asset()
    top = asset.points[:, 2] == SIZE[2]
    boundary = boundary_vertices(asset.tets)
    outer = outer_tets(asset.tets)
    candidates = [t for t in range(len(asset.tets)) if top[asset.tets[t]].sum() == 3
                  and not boundary[asset.tets[t][~top[asset.tets[t]]]].any()]
    assert candidates, "the slab mesh has a tet on the top face with an interior fourth vertex"
    tet = candidates[0]
    inner = asset.tets[tet][~top[asset.tets[tet]]][0]
    asset.extent[inner] = 0.0
    asset.pressure[inner] = 0.0
    assert tet not in outer
    report = validate_asset(written(tmp_path, asset))
    assert "no_flat_zero_tets" in failed(report)
    assert "tets have e = 0 at all four vertices" in _detail(report, "no_flat_zero_tets")


def test_interpolation_error_above_the_layer_tolerance(tmp_path):
    path = rewrite(written(tmp_path, slab_asset()),
                   edit_metadata(lambda m: m.update(max_interpolation_error=1000.5, layer_tolerance=1000.0)))
    report = validate_asset(path)
    assert failed(report) == {"interpolation_error"}
    assert "1000.5 Pa exceeds layer_tolerance 1000 Pa" in _detail(report, "interpolation_error")
    at_tolerance = rewrite(written(tmp_path, slab_asset(), "equal.vtu"),
                           edit_metadata(lambda m: m.update(max_interpolation_error=1000.0, layer_tolerance=1000.0)))
    assert validate_asset(at_tolerance).ok


def test_dynamic_friction_above_static(tmp_path):
    path = rewrite(written(tmp_path, slab_asset()),
                   edit_metadata(lambda m: m.update(friction={"static": 0.4, "dynamic": 0.5})))
    report = validate_asset(path)
    assert failed(report) == {"friction"} and "dynamic 0.5 exceeds static 0.4" in _detail(report, "friction")
    equal = rewrite(written(tmp_path, slab_asset(), "equal.vtu"),
                    edit_metadata(lambda m: m.update(friction={"static": 0.5, "dynamic": 0.5})))
    assert validate_asset(equal).ok


def readme_metadata_keys() -> list[str]:
    """The keys the README's asset-format section lists for fieldgen_metadata, as written there."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    paragraph = text[text.index("`fieldgen_metadata` keys:"):]
    paragraph = paragraph[:paragraph.index("\n\n")]
    import re

    # top-level keys: a backticked name followed by " (" , "," or " {" and not inside braces/parentheses
    depth, keys = 0, []
    for token in re.finditer(r"[({})]|`([a-z_]+)`", paragraph):
        if token.group(0) in "({":
            depth += 1
        elif token.group(0) in ")}":
            depth -= 1
        elif depth == 0 and token.group(1) != "fieldgen_metadata":
            keys.append(token.group(1))
    return keys


#: Keys the README lists that an asset has only when their option was given.
OPTIONAL_METADATA = {"expansion_rate", "tangential"}


@pytest.mark.parametrize("key", [k for k in readme_metadata_keys() if k not in OPTIONAL_METADATA])
def test_every_key_the_readme_lists_is_required(tmp_path, key):
    from fieldgen.validate import DOCUMENTED_METADATA

    assert key in DOCUMENTED_METADATA
    path = rewrite(written(tmp_path, slab_asset()), edit_metadata(lambda m: m.pop(key)))
    report = validate_asset(path)
    assert "schema" in failed(report) and not report.ok
    assert key in _detail(report, "schema") or key == "schema"


def test_the_readme_list_is_the_validators():
    from fieldgen.validate import DOCUMENTED_METADATA

    assert set(readme_metadata_keys()) == set(DOCUMENTED_METADATA) | OPTIONAL_METADATA


def test_dissipation_given_directly_is_accepted(tmp_path):
    asset = slab_asset()
    del asset.metadata["expansion_rate"]
    asset.metadata["dissipation"] = 0.0
    report = validate_asset(written(tmp_path, asset))
    assert report.ok
    # 0 is what a build without damping records too: the report does not say it was given.
    assert _detail(report, "dissipation") == "dissipation 0 s/m (no damping)"
    asset.metadata["dissipation"] = 2.5
    assert _detail(validate_asset(written(tmp_path, asset)), "dissipation") == "dissipation 2.5 s/m (given directly)"


# --------------------------------------------------------------------------- corruptions

def test_negative_volume(tmp_path):
    asset = slab_asset()
    asset.tets[5, [2, 3]] = asset.tets[5, [3, 2]]
    report = validate_asset(written(tmp_path, asset))
    assert failed(report) == {"volumes"}
    assert "1 of 216 tets have volume <= 0" in _detail(report, "volumes")


def test_extent_above_one(tmp_path):
    asset = slab_asset()
    inside = np.flatnonzero((asset.points[:, 2] > 0) & (asset.points[:, 2] < SIZE[2]))[0]
    asset.extent[inside] = 1.25
    asset.pressure = M0 * asset.extent
    report = validate_asset(written(tmp_path, asset))
    assert "extent_range" in failed(report)
    assert "1 of 80 vertices have extent outside [0, 1]" in _detail(report, "extent_range")


def test_pressure_not_zero_on_the_contact_surface(tmp_path):
    asset = slab_asset()
    top = np.flatnonzero(asset.points[:, 2] == SIZE[2])
    asset.pressure[top[3]] = 1e-3
    report = validate_asset(written(tmp_path, asset))
    assert {"zero_pressure_surface"} <= failed(report) <= {"zero_pressure_surface", "pressure_law"}
    assert "1 of 20 boundary vertices with extent 0" in _detail(report, "zero_pressure_surface")


def test_negative_pressure(tmp_path):
    asset = slab_asset()
    asset.pressure[0] = -1.0
    assert "pressure_nonnegative" in failed(validate_asset(written(tmp_path, asset)))


def test_no_contact_surface(tmp_path):
    asset = slab_asset()
    asset.extent = 0.5 + 0.5 * asset.extent
    asset.pressure = M0 * asset.extent
    assert "zero_pressure_surface" in failed(validate_asset(written(tmp_path, asset)))


def test_inconsistent_gradient_and_the_tolerance(tmp_path):
    asset = slab_asset()
    gradient = p1_gradients(asset.points, asset.tets, asset.pressure)
    scale = np.max(np.linalg.norm(gradient, axis=1))
    asset.pressure_gradient = gradient.copy()
    asset.pressure_gradient[7, 0] += 1e-8 * scale            # inside 1e-6 of max |grad p|
    assert validate_asset(written(tmp_path, asset, "close.vtu")).ok
    asset.pressure_gradient[7, 0] += 1e-4 * scale
    report = validate_asset(written(tmp_path, asset, "off.vtu"))
    assert failed(report) == {"pressure_gradient"}
    assert "at tet 7" in _detail(report, "pressure_gradient")


def test_inconsistent_min_dihedral_angle(tmp_path):
    asset = slab_asset()
    from fieldgen.meshing.tetmesh import min_dihedral_angles
    asset.min_dihedral_angle = min_dihedral_angles(asset.points, asset.tets) + 0.5
    report = validate_asset(written(tmp_path, asset))
    # the writer records the smallest stored angle in metadata['mesh'] too
    assert failed(report) == {"min_dihedral_angle", "mesh_statistics"}


def test_wrong_characteristic_length(tmp_path):
    asset = slab_asset()
    length = SIZE[2] * 1.001
    asset.metadata.update(characteristic_length=length, dissipation=1.0 / (length * TAU))
    report = validate_asset(written(tmp_path, asset))
    assert failed(report) == {"characteristic_length"}


def test_wrong_dissipation(tmp_path):
    asset = slab_asset()
    asset.metadata["dissipation"] *= 1.01
    assert failed(validate_asset(written(tmp_path, asset))) == {"dissipation"}


def test_wrong_schema(tmp_path):
    path = rewrite(written(tmp_path, slab_asset()),
                   edit_metadata(lambda m: m.update(schema="fieldgen.pressure_field/0")))
    report = validate_asset(path)
    assert failed(report) == {"schema"}
    assert "fieldgen.pressure_field/0" in _detail(report, "schema")


def test_missing_metadata_key(tmp_path):
    path = rewrite(written(tmp_path, slab_asset()), edit_metadata(lambda m: m.pop("friction")))
    report = validate_asset(path)
    assert failed(report) == {"schema", "friction"} and "friction" in _detail(report, "schema")
    assert _detail(report, "friction") == "not checked: needs metadata friction.static"


def test_mesh_counts_that_do_not_match(tmp_path):
    def edit(meta):
        meta["mesh"]["n_tets"] += 1
    report = validate_asset(rewrite(written(tmp_path, slab_asset()), edit_metadata(edit)))
    assert failed(report) == {"mesh_statistics"}
    assert "n_tets is 217, the file has 216" in _detail(report, "mesh_statistics")


def test_field_data_number_differs_from_json(tmp_path):
    def mutate(grid):
        array = numpy_to_vtk(np.array([M0 * 2]))
        array.SetName("modulus")
        grid.GetFieldData().AddArray(array)       # replaces the array of that name
    report = validate_asset(rewrite(written(tmp_path, slab_asset()), mutate))
    assert failed(report) == {"field_data"}


def test_non_finite_values(tmp_path):
    asset = slab_asset()
    asset.extent[3] = np.nan
    report = validate_asset(written(tmp_path, asset))
    assert "finite" in failed(report)
    assert "extent: 1 non-finite of 80" in _detail(report, "finite")


def test_pressure_not_the_active_scalars(tmp_path):
    def mutate(grid):
        grid.GetPointData().SetActiveScalars("extent")
    assert "arrays" in failed(validate_asset(rewrite(written(tmp_path, slab_asset()), mutate)))


# --------------------------------------------------------------------------- not assets

@pytest.mark.parametrize("content", [b"hello, this is a text file\n", b"", b"\x00\xff" * 100,
                                     b'<?xml version="1.0"?>\n<VTKFile type="PolyData">\n'])
def test_files_that_are_not_vtu_fail_readable(tmp_path, content, capfd):
    path = tmp_path / "thing.vtu"
    path.write_bytes(content)
    report = validate_asset(path)
    assert [(c.name, c.ok) for c in report.checks] == [("readable", False)]
    assert str(path) in report.checks[0].detail
    assert not report.ok and report.to_dict()["valid"] is False
    assert "ERR" not in capfd.readouterr().err


def test_missing_file_and_directory_fail_readable(tmp_path):
    for path in (tmp_path / "missing.vtu", tmp_path):
        report = validate_asset(path)
        assert failed(report) == {"readable"} and len(report.checks) == 1


def test_truncated_asset_fails_readable(tmp_path):
    path = written(tmp_path, slab_asset())
    data = path.read_bytes()
    path.write_bytes(data[: 2 * len(data) // 3])
    report = validate_asset(path)
    assert failed(report) == {"readable"} and "truncated" in report.checks[0].detail


def test_meshio_vtu_without_metadata(tmp_path):
    points, tets = box_mesh(2, 2, 2)
    extent = 1.0 - points[:, 2] / SIZE[2]
    path = tmp_path / "meshio.vtu"
    meshio.write(str(path), meshio.Mesh(points, [("tetra", tets)],
                                        point_data={"extent": extent, "pressure": M0 * extent}))
    report = validate_asset(path)
    assert not report.ok
    assert "fieldgen_metadata" in _detail(report, "metadata")
    assert {"metadata", "schema", "characteristic_length", "pressure_law"} <= failed(report)
    assert {"readable", "cell_types", "volumes"} <= {c.name for c in report.checks if c.ok}


def test_non_tetrahedral_cells(tmp_path):
    points = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0],
                       [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], dtype=float)
    path = tmp_path / "hex.vtu"
    meshio.write(str(path), meshio.Mesh(points, [("hexahedron", np.arange(8)[None])]))
    report = validate_asset(path)
    assert "cell_types" in failed(report)
    assert "1 of 1 cells are not tetrahedra" in _detail(report, "cell_types")


def test_report_dataclasses():
    report = ValidationReport(path="x.vtu", checks=[Check("a", True, "fine")])
    assert report.ok and report.to_dict() == {
        "path": "x.vtu", "valid": True, "checks": [{"name": "a", "ok": True, "detail": "fine"}]}
    assert not ValidationReport(path="x.vtu", checks=[]).ok


def _detail(report: ValidationReport, name: str) -> str:
    return next(c.detail for c in report.checks if c.name == name)


def sliver_slab(drop: float) -> Asset:
    """The slab of :func:`slab_asset` with one sliver in a conforming mesh: in a cube under the
    middle layer's top plane (moved to z = 0, so a vertex can leave it by ``drop``), the two tets
    on the face (0, 1, 7) are flipped into three across the edge 3-5; one of them, (1, 3, 5, 7),
    has its four vertices on the cube's top face, and corner 5 lowered by ``drop`` gives it the
    volume ``drop`` times a third of the face's triangle (the cube above keeps its diagonal 1-7)."""
    nx, ny, nz = 2, 2, 2
    points, tets = box_mesh(nx, ny, nz)
    cubes = nx * ny * nz
    cube = 0                                   # at the origin; the cube above it is cube 1
    step = np.array(SIZE) / (nx, ny, nz)               # corner bits x*4 + y*2 + z, as box_mesh numbers them
    where = {tuple(np.round(points[k] / step).astype(int)): k for k in np.unique(tets[[cube, cubes + cube]])}
    c = {bits: where[(bits >> 2 & 1, bits >> 1 & 1, bits & 1)] for bits in (0, 1, 3, 5, 7)}
    top = points[c[1], 2]
    extent = 1.0 - points[:, 2] / SIZE[2]
    extent[points[:, 2] == SIZE[2]] = 0.0
    points = points - [0.0, 0.0, top]          # the cube's top plane at z = 0 exactly
    points[c[5], 2] -= drop
    flipped = orient_positive(points, np.array([[c[0], c[1], c[3], c[5]], [c[7], c[0], c[3], c[5]],
                                                [c[1], c[7], c[3], c[5]]]))
    keep = np.ones(len(tets), dtype=bool)
    keep[[cube, cubes + cube]] = False
    tets = np.concatenate([tets[keep], flipped])
    return Asset(points=points, tets=tets, extent=extent, pressure=M0 * extent,
                 metadata=slab_metadata(SIZE[2]))


def test_a_tet_flat_to_within_rounding_is_named_and_a_thin_one_is_not(tmp_path):
    """A sliver whose 6V/l³ is ~1e-18 (numerically flat: its gradients are rounding noise) fails
    the volumes check naming the tet; before, its positive volume passed it and the asset was
    valid. One a thousandth of its edge thick (6V/l³ ~ 1e-3, as a mesher's worst) passes."""
    flat = sliver_slab(1e-20)
    report = validate_asset(written(tmp_path, flat, "flat.vtu"))
    sliver = len(flat.tets) - 1
    assert failed(report) == {"volumes"}, [c for c in report.checks if not c.ok]
    detail = _detail(report, "volumes")
    assert detail.startswith(f"1 of {len(flat.tets)} tets are flat to within rounding (6V/l³ below 1e-12")
    assert f"tet {sliver} has " in detail
    thin = sliver_slab(1e-3 * SIZE[2] / 2)
    report = validate_asset(written(tmp_path, thin, "thin.vtu"))
    assert report.ok, [c for c in report.checks if not c.ok]


def test_a_recomputed_gradient_that_overflows_fails_its_check_by_name(tmp_path, capfd):
    """Pressures up to 1e308 Pa on the slab (every stored number finite): the P1 gradient, M0/h,
    is past float64's largest. Before, pressure_gradient passed as "max deviation inf Pa/m
    (tolerance inf)"; now it fails naming itself and what overflowed, and numpy prints nothing."""
    m0 = 1e308
    assert m0 > np.finfo(np.float64).max * SIZE[2]             # the exact gradient, m0/h, overflows float64
    asset = slab_asset()
    asset.pressure = m0 * asset.extent
    asset.metadata["law"]["modulus"] = m0
    asset.pressure_gradient = np.tile([0.0, 0.0, -m0], (len(asset.tets), 1))
    path = written(tmp_path, asset)
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = validate_asset(path)
    assert failed(report) == {"pressure_gradient"}, [c for c in report.checks if not c.ok]
    assert _detail(report, "pressure_gradient").startswith(
        "pressure_gradient fails on what it measured: the gradient of the vertex pressures is NaN or infinite")
    assert "  pressure_gradient: pressure_gradient fails on what it measured" in "\n".join(report.text_lines())
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("consistent", [True, False])
def test_a_gradient_whose_norm_would_overflow_is_still_checked(tmp_path, consistent):
    """Pressures and gradients of about 1e160 (each finite, their squares not): the slab's valid
    asset scaled by 1e160 still passes, and with its stored gradient zeroed fails the deviation
    (before, both passed as "max deviation inf Pa/m (tolerance inf)")."""
    factor = 1e160
    asset = slab_asset()
    plain = written(tmp_path, asset, "plain.vtu")
    assert validate_asset(plain).ok
    asset.pressure_gradient = read_asset(plain).pressure_gradient       # as the writer computed it
    asset.pressure = factor * asset.pressure
    asset.metadata["law"]["modulus"] = factor * asset.metadata["law"]["modulus"]
    asset.pressure_gradient = factor * asset.pressure_gradient if consistent else 0.0 * asset.pressure_gradient
    report = validate_asset(written(tmp_path, asset, "scaled.vtu"))
    if consistent:
        assert "pressure_gradient" not in failed(report), _detail(report, "pressure_gradient")
    else:
        assert "pressure_gradient" in failed(report)
        assert "have a pressure_gradient off by more than" in _detail(report, "pressure_gradient")
