"""`fieldgen inspect`: exact cuts, the summary against independent numbers, the picture, ParaView."""

from __future__ import annotations

import ast
import json
import os
import sys
import types

import numpy as np
import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.io.asset import Asset, write_asset
from fieldgen.inspection import cut_plane, format_summary, mid_planes, paraview_script, summarize
from fieldgen.meshing.tetmesh import box_grid, boundary_faces_of, min_dihedral_angles, orient_positive, tet_volumes

M0 = 2.5e5          # Pa
SIZE = (0.1, 0.08, 0.05)
H = SIZE[2]


def box_mesh(n=(4, 4, 3), size=SIZE):
    """A structured box, each cube split into 6 tets around its main diagonal."""
    return box_grid(*(np.linspace(0.0, s, k + 1) for s, k in zip(size, n)))


def metadata(length=H, **extra):
    meta = {
        "law": {"kind": "linear", "modulus": M0},
        "characteristic_length": length,
        "expansion_rate": 4.0,
        "dissipation": 1.0 / (length * 4.0),
        "friction": {"static": 0.6, "dynamic": 0.5},
        "boundary": {"bonded": ["below:z=0"], "insulated": [], "problem": "laplace",
                     "faces": {"free": 10, "rigid": 4, "insulated": 0}},
        "max_interpolation_error": 12.5,
        "source": {"file": "box.stl", "sha256": "ab" * 32},
    }
    meta.update(extra)
    return meta


def slab_asset(n=(4, 4, 3)) -> Asset:
    """A layer bonded at z = 0: e = 1 − z/h, p = M0·e, L = h exactly (D 5.2.1)."""
    points, tets = box_mesh(n)
    extent = 1.0 - points[:, 2] / H
    return Asset(points=points, tets=tets, extent=extent, pressure=M0 * extent, metadata=metadata())


def uniform_asset(n=(4, 4, 3)) -> Asset:
    """Same mesh, a constant pressure (not a valid field, but a picture must show the difference)."""
    asset = slab_asset(n)
    asset.pressure = np.full(len(asset.points), M0)
    asset.extent = np.ones(len(asset.points))
    return asset


# --------------------------------------------------------------------------- exact cuts

@pytest.mark.parametrize("axis", [0, 1, 2])
def test_mid_plane_through_vertices_is_exact(axis):
    """Mid-planes of an even grid pass through vertices and faces: area, field and outline exact."""
    asset = slab_asset(n=(4, 4, 2))
    normal = np.eye(3)[axis]
    centre = 0.5 * np.array(SIZE)
    cut = cut_plane(asset.points, asset.tets, asset.pressure, centre, normal)
    others = [SIZE[a] for a in range(3) if a != axis]
    assert cut.area() == pytest.approx(others[0] * others[1], rel=1e-12)
    assert np.allclose(cut.points[:, axis], centre[axis], atol=1e-15)
    assert np.allclose(cut.values, M0 * (1.0 - cut.points[:, 2] / H), rtol=0, atol=1e-9 * M0)
    lengths = np.linalg.norm(cut.outline[:, 1] - cut.outline[:, 0], axis=1)
    assert lengths.sum() == pytest.approx(2 * sum(others), rel=1e-12)


def test_oblique_cut_area_and_field():
    asset = slab_asset(n=(5, 4, 3))
    normal = np.array([1.0, 1.0, 0.0])
    origin = np.array([0.09, 0.0, 0.0])           # the line x + y = 0.09 across the xy rectangle
    cut = cut_plane(asset.points, asset.tets, asset.pressure, origin, normal)
    assert cut.area() == pytest.approx(0.08 * np.sqrt(2) * H, rel=1e-12)
    assert np.allclose(cut.values, M0 * (1.0 - cut.points[:, 2] / H), atol=1e-9 * M0)
    assert np.allclose((cut.points - origin) @ normal, 0.0, atol=1e-15)


def test_plane_outside_gives_empty_cut():
    asset = slab_asset()
    cut = cut_plane(asset.points, asset.tets, asset.pressure, [0, 0, 2 * H], [0, 0, 1])
    assert len(cut.triangles) == 0 and len(cut.outline) == 0 and cut.area() == 0.0


def test_cut_of_a_real_sphere_matches_the_surface_section(meshes, tmp_path, monkeypatch):
    """Tet mesh of the corpus' unit sphere: cut area/outline equal trimesh's section of the STL."""
    import tetgen
    import trimesh

    surface = trimesh.load(meshes / "unit_sphere.STL", force="mesh")
    monkeypatch.chdir(tmp_path)                     # TetGen writes scratch files to the cwd
    generator = tetgen.TetGen(np.asarray(surface.vertices), np.asarray(surface.faces))
    points, tets = generator.tetrahedralize(switches="pq1.5Q")[:2]
    tets = orient_positive(points, np.asarray(tets, dtype=np.int64))
    values = np.linalg.norm(points, axis=1)
    centre = 0.5 * (points.min(axis=0) + points.max(axis=0))
    for axis in range(3):
        normal = np.eye(3)[axis]
        cut = cut_plane(points, tets, values, centre, normal)
        section = trimesh.intersections.mesh_plane(surface, normal, centre)   # (s, 2, 3)
        # the section of a convex surface is star-shaped about the centre: fan areas add up
        fan = np.cross(section[:, 0] - centre, section[:, 1] - centre)
        assert cut.area() == pytest.approx(0.5 * np.linalg.norm(fan, axis=1).sum(), rel=1e-9)
        lengths = np.linalg.norm(cut.outline[:, 1] - cut.outline[:, 0], axis=1).sum()
        expected = np.linalg.norm(section[:, 1] - section[:, 0], axis=1).sum()
        assert lengths == pytest.approx(expected, rel=1e-9)
        assert cut.area() == pytest.approx(np.pi * 0.25 * np.ptp(points[:, 0]) ** 2, rel=0.05)
        # values are the P1 interpolant: between the min and max of the cut tets' vertices
        assert values.min() - 1e-12 <= cut.values.min() and cut.values.max() <= values.max() + 1e-12


def test_mid_planes_fall_back_to_median_for_a_ring():
    """A box with its centre column removed: the z-normal mid-plane still hits, x/y planes too."""
    points, tets = box_mesh(n=(3, 3, 2), size=(0.09, 0.09, 0.02))
    centroids = points[tets].mean(axis=1)
    keep = ~((np.abs(centroids[:, 0] - 0.045) < 0.015) & (np.abs(centroids[:, 1] - 0.045) < 0.015))
    tets = tets[keep]
    cuts = mid_planes(points, tets, points[:, 2])
    assert [axis for axis, _ in cuts] == [0, 1, 2]
    assert all(len(cut.triangles) for _, cut in cuts)
    # x-plane through the hole: two strips 0.03 wide and 0.02 high
    assert cuts[0][1].area() == pytest.approx(2 * 0.03 * 0.02, rel=1e-12)


def test_paraview_cut_moves_off_a_centre_plane_that_misses_the_part():
    """Two blocks with a gap at the bounding-box centre: the x cut moves into the nearer block
    (x in (0.09, 0.12)) and cuts tets there with material on both sides; y and z stay central."""
    from fieldgen.io.paraview import cut_origin

    points, tets = box_mesh(n=(5, 1, 1), size=(0.15, 0.03, 0.03))
    centroids = points[tets].mean(axis=1)
    tets = tets[(centroids[:, 0] < 0.03) | (centroids[:, 0] > 0.09)]
    origin = cut_origin(points, tets, 0)
    assert 0.09 < origin[0] < 0.12 and origin[1:] == pytest.approx([0.015, 0.015], abs=1e-15)
    cut = cut_plane(points, tets, points[:, 0], origin, [1, 0, 0])
    assert cut.area() == pytest.approx(0.03 * 0.03, rel=1e-12)          # the whole block's section
    assert len(cut_plane(points, tets, points[:, 0], [0.075, 0.015, 0.015], [1, 0, 0]).triangles) == 0
    assert cut_origin(points, tets, 1) == pytest.approx([0.075, 0.015, 0.015], abs=1e-15)


# --------------------------------------------------------------------------- summary

@pytest.fixture(scope="module")
def slab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("inspect") / "slab.vtu"
    write_asset(path, slab_asset())
    return path


def test_json_summary_equals_independent_numbers(slab_file):
    result = CliRunner().invoke(main, ["inspect", str(slab_file), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    asset = slab_asset()
    points, tets = asset.points, asset.tets
    assert summary["tets"] == len(tets) == 4 * 4 * 3 * 6
    assert summary["vertices"] == len(points) == 5 * 5 * 4
    assert summary["bounds"] == [[0.0, 0.0, 0.0], list(SIZE)]
    assert summary["volume"] == pytest.approx(np.prod(SIZE), rel=1e-12)
    assert summary["volume"] == pytest.approx(tet_volumes(points, tets).sum(), rel=1e-14)
    assert summary["characteristic_length"] == H                 # L from the metadata
    assert summary["dissipation"] == 1.0 / (H * 4.0)
    assert summary["pressure_min"] == 0.0 and summary["pressure_max"] == M0
    assert summary["pressure_min"] == asset.pressure.min()
    assert summary["max_interpolation_error"] == 12.5
    angles = min_dihedral_angles(points, tets)
    expected = {"min": angles.min(), "p1": np.percentile(angles, 1), "p5": np.percentile(angles, 5),
                "p50": np.median(angles)}
    for key, value in expected.items():
        assert summary["min_dihedral_angle_percentiles"][key] == pytest.approx(value, abs=1e-9)
    assert summary["law"]["kind"] == "linear" and summary["source"]["file"] == "box.stl"
    assert summary["boundary_faces"] == len(boundary_faces_of(tets))


def test_summary_takes_ranges_from_arrays_and_l_from_metadata():
    asset = slab_asset()
    asset.pressure = asset.pressure * 0.5 + 7.0
    asset.metadata["characteristic_length"] = 0.123           # not recomputed: what the file says
    summary = summarize(asset)
    assert summary["characteristic_length"] == 0.123
    assert summary["pressure_min"] == 7.0 and summary["pressure_max"] == 0.5 * M0 + 7.0


def test_text_summary_is_readable(slab_file):
    result = CliRunner().invoke(main, ["inspect", str(slab_file)])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "slab.vtu" in text and "288 tets" in text
    assert "50 mm" in text                           # L = h = 0.05 m
    assert "250 kPa" in text                         # M0 and the max pressure
    smallest = min_dihedral_angles(slab_asset().points, slab_asset().tets).min()
    assert f"min dihedral angle: min {smallest:.2f}°" in text
    assert "box.stl" in text
    # The metadata's face counts are the input surface's, not the mesh's boundary faces.
    assert "input faces free 10, insulated 0, rigid 4" in text


def test_summary_shows_the_error_estimate_and_the_recorded_warnings():
    """An accuracy-sized asset's estimate and the warnings its build recorded are in the summary
    and its text; an asset without them (an older one) shows neither."""
    asset = slab_asset()
    asset.metadata["error_estimate"] = {"extent": 0.0123, "pressure": 0.0101, "characteristic_length": 0.002,
                                        "accuracy": 0.01}
    asset.metadata["warnings"] = ["estimated discretisation error 1.23% exceeds the accuracy asked, 1%"]
    summary = summarize(asset)
    assert summary["warnings"] == asset.metadata["warnings"]
    assert summary["error_estimate"]["extent"] == 0.0123
    text = format_summary(summary)
    assert "estimated error e 1.23%, p 1.01%, L 0.20% (asked 1%)" in text
    assert "warning        estimated discretisation error 1.23% exceeds" in text
    plain = format_summary(summarize(slab_asset()))
    assert "estimated error" not in plain and "warning" not in plain


def test_summary_shows_the_skin_and_how_deep_its_interior_lies():
    """A skinned asset's thickness, share of the part and the range of its interior's depth are
    in the summary; an asset written before the depth was recorded shows the first two only."""
    asset = slab_asset()
    asset.metadata["skin"] = {"thickness": 0.002, "skin_volume_fraction": 0.6586, "cut_depth": [0.987, 1.29],
                              "cut_vertices_held": 982, "depth_from": "free faces", "units": "m"}
    summary = summarize(asset)
    assert summary["skin"]["cut_depth"] == [0.987, 1.29]
    text = format_summary(summary)
    assert ("skin           2 mm over a rigid interior, 65.9% of the part; interior 0.987–1.29 × the "
            "thickness below the free faces (982 of its vertices short of it)") in text
    del asset.metadata["skin"]["cut_depth"]
    assert "65.9% of the part\n" in format_summary(summarize(asset)) + "\n"
    assert "skin" not in format_summary(summarize(slab_asset()))


def test_inspect_refuses_a_non_asset(tmp_path):
    bogus = tmp_path / "notes.vtu"
    bogus.write_text("hello\n")
    result = CliRunner().invoke(main, ["inspect", str(bogus)])
    assert result.exit_code == 1
    assert "notes.vtu" in result.output and "not a VTK XML file" in result.output


# --------------------------------------------------------------------------- picture

def colormap_values(image: np.ndarray) -> np.ndarray:
    """Colormap position (0..1) of every pixel whose colour is a viridis colour, else NaN."""
    from matplotlib import colormaps
    from scipy.spatial import cKDTree

    lut = colormaps["viridis"](np.linspace(0.0, 1.0, 256))[:, :3]
    rgb = image[..., :3].reshape(-1, 3).astype(np.float64)
    distance, nearest = cKDTree(lut).query(rgb)
    close = distance < 0.03
    saturated = rgb.max(axis=1) - rgb.min(axis=1) > 0.15       # not white, grey or black
    return np.where(close & saturated, nearest / 255.0, np.nan)


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    import matplotlib.image

    folder = tmp_path_factory.mktemp("pictures")
    out = {}
    for name, asset in (("gradient", slab_asset()), ("uniform", uniform_asset())):
        write_asset(folder / f"{name}.vtu", asset)
        png = folder / f"{name}.png"
        result = CliRunner().invoke(main, ["inspect", str(folder / f"{name}.vtu"), "--png", str(png)])
        assert result.exit_code == 0, result.output
        out[name] = matplotlib.image.imread(png)
    return out


def test_png_shows_the_field_not_a_blank_canvas(pictures):
    image = pictures["gradient"]
    assert image.ndim == 3 and image.shape[0] > 500 and image.shape[1] > 500
    values = colormap_values(image)
    coloured = np.isfinite(values)
    assert coloured.mean() > 0.12, f"only {coloured.mean():.1%} of the pixels show the colormap"
    # e = 1 − z/h: the side cuts span the whole range, the z mid-plane sits at p = M0/2
    v = values[coloured]
    assert np.mean(v < 0.1) > 0.03 and np.mean(v > 0.9) > 0.01
    assert np.mean(np.abs(v - 0.5) < 0.05) > 0.4


def test_png_differs_between_uniform_and_gradient_fields(pictures):
    gradient = colormap_values(pictures["gradient"])
    uniform = colormap_values(pictures["uniform"])
    g, u = gradient[np.isfinite(gradient)], uniform[np.isfinite(uniform)]
    # constant pressure: nearly every coloured pixel is the top of the map (the colour bar aside)
    assert np.mean(u > 0.95) > 0.7
    assert np.mean(g > 0.95) < 0.25
    def levels(v):   # colormap levels that cover a visible share of the coloured pixels
        return int(np.sum(np.bincount(np.round(v * 255).astype(int), minlength=256) > 0.002 * len(v)))

    assert levels(u) <= 3 and levels(g) > 30


# --------------------------------------------------------------------------- ParaView

def fake_paraview(calls: list):
    """A stand-in for paraview.simple that records calls and accepts any name and attribute
    (the real ParaView runs these scripts in tests/test_paraview.py)."""

    class Proxy:
        def __init__(self, name):
            object.__setattr__(self, "_name", name)

        def __call__(self, *args, **kwargs):
            calls.append((self._name, args, kwargs))
            return Proxy(self._name + "()")

        def __getattr__(self, attr):
            return Proxy(f"{self._name}.{attr}")

        def __setattr__(self, attr, value):
            calls.append((f"{self._name}.{attr}=", (value,), {}))

    simple = types.ModuleType("paraview.simple")
    simple.__getattr__ = lambda name: Proxy(name)
    package = types.ModuleType("paraview")
    package.simple = simple
    package.fromGUI = False
    return {"paraview": package, "paraview.simple": simple}


def run_fake(script, monkeypatch, *args):
    calls: list = []
    for name, module in fake_paraview(calls).items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(sys, "argv", [str(script), *args])
    exec(compile(script.read_text(), str(script), "exec"), {"__name__": "__main__"})
    return calls


def set_value(calls, name):
    return next(c[1][0] for c in calls if c[0] == name)


@pytest.mark.parametrize("cut", ["x", "y", "z"])
def test_paraview_script_looks_at_the_cut_face_head_on(slab_file, tmp_path, monkeypatch, cut):
    script = tmp_path / "view.py"
    result = CliRunner().invoke(main, ["inspect", str(slab_file), "--paraview", str(script), "--cut", cut])
    assert result.exit_code == 0, result.output
    tree = ast.parse(script.read_text())
    literals = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)}
    assert os.path.abspath(slab_file) in literals
    calls = run_fake(script, monkeypatch, "--screenshot", str(tmp_path / "cut.png"))
    reader = next(c for c in calls if c[0] == "XMLUnstructuredGridReader")
    assert reader[2]["FileName"] == [os.path.abspath(slab_file)]
    axis = "xyz".index(cut)
    normal = np.eye(3)[axis]
    centre = np.array(SIZE) / 2
    assert set_value(calls, "Clip().ClipType.Normal=") == normal.tolist()
    assert set_value(calls, "Clip().ClipType.Origin=") == pytest.approx(centre)
    assert set_value(calls, "Clip().Invert=") == 1          # keeps the half below: its cut face looks at +n
    color = next(c for c in calls if c[0] == "ColorBy")
    assert color[1][1] == ("POINTS", "pressure")
    assert set_value(calls, "GetScalarBar().Title=") == "pressure p0 [Pa]"
    # camera on the removed side, on the plane's normal, looking back at it
    position = np.array(set_value(calls, "GetActiveViewOrCreate().CameraPosition="))
    focus = np.array(set_value(calls, "GetActiveViewOrCreate().CameraFocalPoint="))
    assert (focus - centre) @ normal == pytest.approx(0.0, abs=1e-15)     # on the plane (shifted
    assert np.linalg.norm(focus - centre) < 0.2 * max(SIZE)              # sideways for the colour bar)
    offset = position - focus
    assert offset @ normal > 0 and np.linalg.norm(np.cross(offset, normal)) < 1e-12 * np.linalg.norm(offset)
    up = np.array(set_value(calls, "GetActiveViewOrCreate().CameraViewUp="))
    assert abs(up @ normal) < 1e-12
    shot = next(c for c in calls if c[0] == "SaveScreenshot")
    assert shot[1][0] == str(tmp_path / "cut.png") and shot[2]["ImageResolution"] == [1200, 900]
    assert not any(c[0] == "Interact" for c in calls)


def test_paraview_script_colours_by_extent_on_request(slab_file, tmp_path, monkeypatch):
    script = tmp_path / "view.py"
    assert CliRunner().invoke(main, ["inspect", str(slab_file), "--paraview", str(script)]).exit_code == 0
    calls = run_fake(script, monkeypatch, "--field", "extent", "--cut", "z")
    assert next(c for c in calls if c[0] == "ColorBy")[1][1] == ("POINTS", "extent")
    assert set_value(calls, "Clip().ClipType.Normal=") == [0.0, 0.0, 1.0]
    assert any(c[0] == "Interact" for c in calls)             # no --screenshot: a window


def test_inspect_refuses_an_unknown_cut(slab_file, tmp_path):
    result = CliRunner().invoke(main, ["inspect", str(slab_file), "--paraview", str(tmp_path / "v.py"),
                                       "--cut", "w"])
    assert result.exit_code == 2 and "--cut" in result.output
    alone = CliRunner().invoke(main, ["inspect", str(slab_file), "--cut", "y"])
    assert alone.exit_code == 2 and "--paraview" in alone.output


def test_paraview_script_escapes_odd_paths(tmp_path):
    odd = tmp_path / "it's a \"part\"" / "pad.vtu"
    text = paraview_script(odd, slab_asset())
    compile(text, "view.py", "exec")
    assert os.path.abspath(odd) in {n.value for n in ast.walk(ast.parse(text))
                                  if isinstance(n, ast.Constant)}
