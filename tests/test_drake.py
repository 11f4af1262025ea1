"""Drake export: the .vtk passes Drake's loading rules (checked with vtk), the .sdf carries the
hydroelastic properties that match the asset, meshes Drake would refuse are refused, and real
Drake (pydrake 1.51.1, in the test extra; imported directly, so a missing wheel is an error,
not a skip) loads the export and simulates a built part resting on a rigid box."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
from vtkmodules.util.numpy_support import vtk_to_numpy
from vtkmodules.vtkIOLegacy import vtkUnstructuredGridReader

from fieldgen.io.asset import Asset
from fieldgen.io.drake_vtk import check_for_drake, interior_vertices, write_drake_files
from fieldgen.errors import BuildError
from fieldgen.meshing.tetmesh import box_grid, boundary_faces_of, tet_volumes

DRAKE = "{http://drake.mit.edu}"
M0 = 1.0e5
SIZE = (0.1, 0.08, 0.05)


def box_mesh(n=(4, 3, 3), size=SIZE):
    """A structured box, each cube split into 6 tets around its main diagonal."""
    return box_grid(*(np.linspace(0.0, s, k + 1) for s, k in zip(size, n)))


def metadata(**changes):
    meta = {
        "law": {"kind": "linear", "modulus": M0},
        "characteristic_length": 0.05,
        "dissipation": 7.5,
        "friction": {"static": 0.6, "dynamic": 0.45},
        "boundary": {"bonded": [], "insulated": [], "problem": "poisson",
                     "faces": {"free": 100, "rigid": 0, "insulated": 0}},
        "max_interpolation_error": 0.0,
        "source": {"file": "box.stl", "sha256": "0" * 64},
    }
    meta.update(changes)
    return meta


def box_asset(meta=None, n=(4, 3, 3)) -> Asset:
    """A free box with a Poisson-like field peaking inside (not Drake's field: E is what matches)."""
    points, tets = box_mesh(n)
    low, high = points.min(axis=0), points.max(axis=0)
    bump = np.prod(4 * (points - low) * (high - points) / (high - low) ** 2, axis=1)
    extent = bump / bump.max()
    return Asset(points=points, tets=tets, extent=extent, pressure=0.8 * M0 * extent,
                 metadata=meta or metadata())


def read_legacy_vtk(path):
    """What Drake's loader sees: points, cell types, connectivity (vtk's legacy reader)."""
    reader = vtkUnstructuredGridReader()
    reader.SetFileName(str(path))
    reader.Update()
    assert reader.GetErrorCode() == 0
    grid = reader.GetOutput()
    points = vtk_to_numpy(grid.GetPoints().GetData()).astype(np.float64)
    types = np.array([grid.GetCellType(i) for i in range(grid.GetNumberOfCells())])  # any VTK 9
    cells = grid.GetCells()
    offsets = vtk_to_numpy(cells.GetOffsetsArray())
    connectivity = vtk_to_numpy(cells.GetConnectivityArray())
    return points, types, offsets, connectivity, grid


def assert_drake_loadable(vtk_path, expected_points=None, expected_tets=None):
    points, types, offsets, connectivity, _ = read_legacy_vtk(vtk_path)
    assert len(types) > 0 and np.all(types == 10), "tets only (VTK_TETRA = 10)"
    assert np.all(np.diff(offsets) == 4)
    tets = connectivity.reshape(-1, 4).astype(np.int64)
    assert np.all(tet_volumes(points, tets) > 0), "every volume positive"
    assert len(interior_vertices(tets)) > 0, "at least one interior vertex"
    assert set(np.unique(tets)) == set(range(len(points))), "no unused points"
    if expected_points is not None:
        assert np.array_equal(points, expected_points)        # repr round trip: bit-exact
        assert np.array_equal(tets, expected_tets)
    return points, tets


def sdf_properties(sdf_path):
    root = ElementTree.parse(sdf_path).getroot()
    assert root.tag == "sdf"
    collision = root.find("./model/link/collision")
    uri = collision.find("./geometry/mesh/uri").text
    props = collision.find(f"./{DRAKE}proximity_properties")
    values = {child.tag.replace(DRAKE, ""): (child.text or "").strip() for child in props}
    return uri, values


# --------------------------------------------------------------------------- export

def test_export_passes_drake_loading_rules_and_matches_the_asset(tmp_path):
    asset = box_asset()
    info = write_drake_files(asset, tmp_path / "box.vtk")
    assert info["vtk"] == str(tmp_path / "box.vtk") and info["sdf"] == str(tmp_path / "box.sdf")
    assert_drake_loadable(tmp_path / "box.vtk", asset.points, asset.tets)

    uri, values = sdf_properties(tmp_path / "box.sdf")
    assert (tmp_path / uri).resolve() == (tmp_path / "box.vtk").resolve()   # relative to the .sdf
    assert "compliant_hydroelastic" in values
    # Drake's field E·d/max d peaks at E: E must be the asset's max pressure (0.8·M0 here, not M0)
    assert float(values["hydroelastic_modulus"]) == asset.pressure.max() == 0.8 * M0
    assert float(values["hunt_crossley_dissipation"]) == 7.5
    assert float(values["mu_static"]) == 0.6 and float(values["mu_dynamic"]) == 0.45
    assert info["hydroelastic_modulus"] == 0.8 * M0 and info["hunt_crossley_dissipation"] == 7.5
    assert info["warnings"] == []                    # linear law, free boundary: nothing lost
    assert "ignores" in info["note"]
    assert sorted(os.listdir(tmp_path)) == ["box.sdf", "box.vtk"]   # no temporaries left


def test_drake_field_with_exported_modulus_has_the_asset_peak(tmp_path):
    """Drake itself (pydrake, tests/drake_contact.py) loads the exported mesh with the exported
    modulus and is cut by a rigid plane just above the asset's peak: the pressures Drake reports
    on that cut are the field E·d/max d computed here on the asset's own mesh (d the distance to
    its boundary, by trimesh, interpolated linearly in each tet), and E is the asset's peak, so
    Drake's field reaches the asset's largest pressure at the asset's peak vertex."""
    import trimesh

    from drake_contact import DrakeBody, drake_contact, write_obj
    from test_runtime_meshes import box_surface

    asset = box_asset(n=(6, 5, 4))
    info = write_drake_files(asset, tmp_path / "box.vtk")
    assert_drake_loadable(tmp_path / "box.vtk")
    points, tets = asset.points, asset.tets
    _, d, _ = trimesh.proximity.closest_point(trimesh.Trimesh(points, boundary_faces_of(tets), process=False), points)
    field = info["hydroelastic_modulus"] * d / d.max()
    peak = np.argmax(asset.pressure)
    assert info["hydroelastic_modulus"] == asset.pressure.max()
    assert field[peak] == pytest.approx(asset.pressure.max(), rel=1e-12)      # the asset's peak is Drake's deepest
    cut = points[peak, 2] + 1e-4
    write_obj(tmp_path / "plane.obj", *box_surface([-1.0, -1.0, cut], [1.0, 1.0, 1.0]))
    drake = drake_contact(DrakeBody(str(tmp_path / "box.vtk"), "compliant", np.eye(4), info["hydroelastic_modulus"]),
                          DrakeBody(str(tmp_path / "plane.obj"), "rigid", np.eye(4)))
    assert drake.faces > 20 and np.allclose(drake.centroids[:, 2], cut)
    p = points[tets]                                                           # (t, 4, 3)
    T = np.transpose(p[:, 1:] - p[:, :1], (0, 2, 1))
    expected = []
    for q in drake.centroids:
        lam = np.linalg.solve(T, (q - p[:, 0])[:, :, None])[:, :, 0]
        bary = np.column_stack([1.0 - lam.sum(axis=1), lam])
        inside = np.flatnonzero(bary.min(axis=1) >= -1e-9)
        expected.append(bary[inside[0]] @ field[tets[inside[0]]])
    np.testing.assert_allclose(drake.pressures, expected, rtol=1e-9, atol=1e-9 * field.max())
    assert drake.pressures.max() > 0.9 * asset.pressure.max()


def test_unused_vertices_are_dropped(tmp_path):
    asset = box_asset()
    far = np.array([[1.0, 1.0, 1.0]])
    asset.points = np.vstack([far, asset.points])          # an unused vertex in front
    asset.tets = asset.tets + 1
    asset.pressure = np.concatenate([[0.0], asset.pressure])
    asset.extent = np.concatenate([[0.0], asset.extent])
    info = write_drake_files(asset, tmp_path / "box.vtk")
    points, tets = assert_drake_loadable(tmp_path / "box.vtk")
    assert info["vertices"] == len(points) == len(asset.points) - 1
    assert np.array_equal(points[tets], asset.points[asset.tets])


def test_real_drake_mesh_round_trips(meshes, tmp_path):
    """Drake's own compliant pepper mesh: our checks accept it and the export is the same mesh."""
    points, types, _, connectivity, _ = read_legacy_vtk(meshes / "yellow_bell_pepper_no_stem_low.vtk")
    assert np.all(types == 10)
    tets = connectivity.reshape(-1, 4).astype(np.int64)
    check_for_drake(points, tets, "pepper.vtk")
    pressure = np.zeros(len(points))
    pressure[interior_vertices(tets)] = 3.0e4
    asset = Asset(points=points, tets=tets, extent=pressure / 3.0e4, pressure=pressure,
                  metadata=metadata())
    write_drake_files(asset, tmp_path / "pepper.vtk")
    out_points, out_tets = assert_drake_loadable(tmp_path / "pepper.vtk")
    used = np.unique(tets)
    assert np.array_equal(out_points, points[used])
    assert np.array_equal(used[out_tets], tets)


def test_drake_test_mesh_with_a_negative_tet_is_refused(meshes, tmp_path):
    points, _, _, connectivity, _ = read_legacy_vtk(meshes / "drake_one_negative_tetrahedron.vtk")
    tets = connectivity.reshape(-1, 4).astype(np.int64)
    assert np.sum(tet_volumes(points, tets) < 0) == 1
    asset = Asset(points=points, tets=tets, extent=np.zeros(len(points)),
                  pressure=np.full(len(points), 1e4), metadata=metadata())
    with pytest.raises(BuildError, match=r"1 of \d+ tets have non-positive volume"):
        write_drake_files(asset, tmp_path / "bad.vtk")
    assert os.listdir(tmp_path) == []


def test_single_tet_has_no_interior_vertex_and_is_refused(tmp_path):
    points = np.array([[0.0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]])
    tets = np.array([[0, 1, 2, 3]])
    assert tet_volumes(points, tets)[0] > 0
    asset = Asset(points=points, tets=tets, extent=np.zeros(4), pressure=np.array([0, 0, 0, 1e4]),
                  metadata=metadata())
    with pytest.raises(BuildError) as caught:
        write_drake_files(asset, tmp_path / "tet.vtk")
    error = caught.value
    assert error.path == str(tmp_path / "tet.vtk")
    assert "none of the mesh's 4 vertices is interior" in error.defect
    assert "edge-length" in error.fix
    assert os.listdir(tmp_path) == []


def test_tet_too_thin_for_drake_is_refused(tmp_path):
    """Drake refuses a tet whose |6·volume| is below machine epsilon (absolute, in m³)."""
    asset = box_asset()
    n = len(asset.points)
    sliver = np.array([[0.2, 0, 0], [0.21, 0, 0], [0.2, 0.01, 0], [0.2, 0, 1e-14]])
    asset.points = np.vstack([asset.points, sliver])
    asset.tets = np.vstack([asset.tets, [[n, n + 1, n + 2, n + 3]]])
    asset.pressure = np.concatenate([asset.pressure, np.zeros(4)])
    asset.extent = np.concatenate([asset.extent, np.zeros(4)])
    assert tet_volumes(asset.points, asset.tets)[-1] > 0
    with pytest.raises(BuildError, match=r"1 of \d+ tets are too thin for Drake"):
        write_drake_files(asset, tmp_path / "thin.vtk")
    assert os.listdir(tmp_path) == []
    asset.points[-1, 2] = 1e-3                       # a proper tet: accepted
    write_drake_files(asset, tmp_path / "thin.vtk")


def test_wrong_suffix_is_refused(tmp_path):
    with pytest.raises(BuildError, match="only from .vtk files"):
        write_drake_files(box_asset(), tmp_path / "box.vtu")


def test_warnings_name_what_drake_cannot_reproduce(tmp_path):
    core = metadata(law={"kind": "hyperbolic", "modulus": M0, "k": 0.5},
                    boundary={"bonded": [], "insulated": [], "problem": "laplace",
                              "core": {"file": "paddle_core.off", "sha256": "1" * 64},
                              "faces": {"free": 80, "rigid": 20, "insulated": 0}})
    warnings = write_drake_files(box_asset(core), tmp_path / "a.vtk")["warnings"]
    assert len(warnings) == 2
    assert "hyperbolic" in warnings[0] and "paddle_core.off" in warnings[1]

    bonded = metadata(boundary={"bonded": ["below:z=0"], "insulated": ["normal:1,0,0"],
                                "problem": "laplace",
                                "faces": {"free": 80, "rigid": 12, "insulated": 6}})
    warnings = write_drake_files(box_asset(bonded), tmp_path / "b.vtk")["warnings"]
    assert any("12 bonded" in w for w in warnings) and any("6 insulated" in w for w in warnings)

    table = metadata(law={"kind": "table", "modulus": M0, "extent": [0, 1], "pressure": [0, M0]})
    warnings = write_drake_files(box_asset(table), tmp_path / "c.vtk")["warnings"]
    assert warnings and "table" in warnings[0]

    # A skin's rigid interior is cut away: Drake sees a hole there (and its e = 1 faces as rigid ones).
    skinned = metadata(skin={"thickness": 0.002, "skin_volume_fraction": 0.4},
                       boundary={"bonded": [], "insulated": [], "problem": "laplace",
                                 "faces": {"free": 80, "rigid": 30, "insulated": 0}})
    warnings = write_drake_files(box_asset(skinned), tmp_path / "d.vtk")["warnings"]
    assert any("under the skin is exported as a hole" in w for w in warnings)
    assert any("30 bonded" in w for w in warnings)


def test_export_is_deterministic(tmp_path):
    write_drake_files(box_asset(), tmp_path / "one.vtk", name="box")
    write_drake_files(box_asset(), tmp_path / "two.vtk", name="box")
    assert (tmp_path / "one.vtk").read_bytes() == (tmp_path / "two.vtk").read_bytes()
    one = (tmp_path / "one.sdf").read_text().replace("one.vtk", "X")
    assert one == (tmp_path / "two.sdf").read_text().replace("two.vtk", "X")


def test_loads_in_drake(tmp_path):
    """The export loads in real Drake (pydrake, part of the test extra): the SDF parses into a
    MultibodyPlant and Drake accepts the mesh and the properties when it builds the diagram."""
    from pydrake.multibody.parsing import Parser
    from pydrake.multibody.plant import AddMultibodyPlantSceneGraph
    from pydrake.systems.framework import DiagramBuilder

    asset = box_asset()
    info = write_drake_files(asset, tmp_path / "box.vtk")
    builder = DiagramBuilder()
    plant, scene_graph = AddMultibodyPlantSceneGraph(builder, time_step=0.0)
    Parser(plant).AddModels(info["sdf"])
    plant.Finalize()
    inspector = scene_graph.model_inspector()
    ids = inspector.GetAllGeometryIds()
    assert len(ids) == 1
    props = inspector.GetProximityProperties(ids[0])
    assert props.GetProperty("hydroelastic", "hydroelastic_modulus") == info["hydroelastic_modulus"]
    assert props.GetProperty("material", "hunt_crossley_dissipation") == 7.5
    builder.Build()            # Drake computes its own field here; refuses meshes it cannot use


CUBE = 0.04          # m, edge of the built part
MASS = 0.1           # kg
E_BUILD = 1.0e5      # Pa
G = 9.81


def test_built_part_drops_onto_a_rigid_box_and_rests_in_drake(tmp_path):
    """`fieldgen build --drake-vtk` on a 40 mm cube, then in Drake: the part loads from the
    written SDF into a MultibodyPlant with hydroelastic contact, falls 5 mm onto a rigid box and
    comes to rest. At rest: velocities ~0, Drake's contact force equals the weight, and the
    height is the one where the exported mesh's field carries the weight -- checked with
    fieldgen's own contact query (face_rule="drake") on the same .vtk at Drake's final pose."""
    import json

    import trimesh
    from click.testing import CliRunner
    from pydrake.geometry import AddContactMaterial, AddRigidHydroelasticProperties, Box, ProximityProperties
    from pydrake.math import RigidTransform
    from pydrake.multibody.parsing import Parser
    from pydrake.multibody.plant import AddMultibodyPlant, ContactModel, CoulombFriction, MultibodyPlantConfig
    from pydrake.multibody.tree import SpatialInertia
    from pydrake.systems.analysis import Simulator
    from pydrake.systems.framework import DiagramBuilder

    from fieldgen.cli.main import main
    from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
    from fieldgen.runtime.contact.wrench import contact

    surface = tmp_path / "cube.stl"
    trimesh.creation.box(extents=[CUBE] * 3).export(surface)
    vtk = tmp_path / "cube.vtk"
    result = CliRunner().invoke(main, ["build", str(surface), "-o", str(tmp_path / "cube.vtu"), "--edge-length",
                                       "0.008", "--modulus", str(E_BUILD), "--dissipation", "20",
                                       "--mu-static", "0.8", "--mu-dynamic", "0.6", "--drake-vtk", str(vtk),
                                       "--quiet", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    sdf = tmp_path / "cube.sdf"
    assert sdf.is_file() and vtk.is_file()
    del info

    builder = DiagramBuilder()
    plant, scene_graph = AddMultibodyPlant(MultibodyPlantConfig(time_step=1e-3, contact_model="hydroelastic"),
                                           builder)
    model, = Parser(plant).AddModels(str(sdf))
    body = plant.GetBodyByName("cube", model)
    ground = ProximityProperties()
    AddContactMaterial(dissipation=20.0, friction=CoulombFriction(0.8, 0.6), properties=ground)
    AddRigidHydroelasticProperties(properties=ground)
    top = 0.0
    plant.RegisterCollisionGeometry(plant.world_body(), RigidTransform([0, 0, top - 0.05]), Box(0.3, 0.3, 0.1),
                                    "ground", ground)
    plant.Finalize()
    assert plant.get_contact_model() == ContactModel.kHydroelastic
    diagram = builder.Build()
    simulator = Simulator(diagram)
    context = simulator.get_mutable_context()
    plant_context = plant.GetMyMutableContextFromRoot(context)
    body.SetSpatialInertiaInBodyFrame(plant_context, SpatialInertia.SolidBoxWithMass(MASS, CUBE, CUBE, CUBE))
    start_height = top + CUBE / 2 + 0.005                      # 5 mm gap under the cube
    plant.SetFreeBodyPose(plant_context, body, RigidTransform([0.01, -0.02, start_height]))
    simulator.AdvanceTo(1.0)

    pose = plant.EvalBodyPoseInWorld(plant_context, body)
    velocity = plant.EvalBodySpatialVelocityInWorld(plant_context, body)
    assert pose.translation()[2] < start_height - 0.004       # it fell
    assert np.linalg.norm(velocity.translational()) < 1e-4    # and rests
    assert np.linalg.norm(velocity.rotational()) < 1e-3
    results = plant.get_contact_results_output_port().Eval(plant_context)
    assert results.num_hydroelastic_contacts() == 1
    force = results.hydroelastic_contact_info(0).F_Ac_W().translational()
    assert abs(abs(force[2]) - MASS * G) <= 0.01 * MASS * G   # contact carries the weight
    X = pose.GetAsMatrix4()
    points = CompliantGeometry.from_drake_vtk(vtk, E_BUILD).points
    lowest = (points @ X[:3, :3].T + X[:3, 3])[:, 2].min()
    assert 0.0 < top - lowest < 0.02 * CUBE                   # a shallow penetration
    # fieldgen at Drake's resting pose, same mesh, Drake's field and modulus: the same weight
    modulus = float(ElementTree.parse(sdf).getroot().find(f".//{DRAKE}hydroelastic_modulus").text)
    part = CompliantGeometry.from_drake_vtk(vtk, modulus)
    slab = RigidGeometry(*_box_surface([-0.15, -0.15, top - 0.1], [0.15, 0.15, top]))
    _, wrench = contact(slab, np.eye(4), part, X, face_rule="drake")
    assert wrench.force[2] == pytest.approx(MASS * G, rel=0.01)


def _box_surface(lo, hi):
    from test_runtime_meshes import box_surface

    return box_surface(lo, hi)
