"""Hostile input a ninth sweep found: scene keys taken without a word (a ``wrench`` of 1e300 N that
flung a box 1e296 m, exit 0; a ``centre_of_mass`` beside a ``mass`` without ``inertia``, or beside a
``density``, which the loader never read), a run whose bodies leave every range a scene may hold (a
free fall of eleven days, 4.9e12 m, exit 0) or whose step cannot be solved (a box of 1 kg with
moments of 1e-300 kg m²: a ``LinAlgError`` traceback from inside the numba kernel), a rigid mesh
that is closed but flat (its two sides' pressures cancel: zero force from a part pressed 5 mm in),
an asset whose metadata holds an integer no float holds (an ``OverflowError`` traceback from
``inspect``, and ``validate`` naming the exception), a calibration CSV whose ``1_0`` Python reads as
ten, a surface of one triangle repeated (the seam merge paired every copy with every other: 4.5 GB
for 12,000 triangles, a ``MemoryError`` traceback for 120,000), and the Drake bridge given arguments
of the wrong kind (a ``TypeError`` from numpy's or pybind's insides, an ``AttributeError``, a
``RuntimeError`` about an unregistered frame, or, with two scene graphs in the builder, no collision
filter at all: Drake's contact acting beside fieldgen's); and a ``--duration`` that is no whole
number of steps, run past without a word (1 s at dt = 0.3 s ran to 1.2 s), and a compliant body
wholly inside a rigid one (zero force, no word) are now said on stderr. An asset edited to
declare two arrays of one name (vtk keeps the first, validate called it valid) is refused.
Each of the others is refused where it enters, naming the file, key or argument, the problem and the
fix, with the documented exit code and nothing written."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

import fieldgen.surface.repair as repair
from fieldgen.calibrate.data import read_data
from fieldgen.cli.main import main
from fieldgen.errors import FieldgenError, InputError, OptionError
from fieldgen.runtime.contact.geometries import flat_check, load_body
from test_hostile_input import FLOOR, built_ball, cube_obj, scene, tampered, write
from test_hostile_sweep import _refused

FREE_FALL = """[simulate]
duration = 1e6
dt = 1e5

[[body]]
name = "box"
geometry = {shape = "box", size = [0.02, 0.02, 0.02]}
mass = 0.1
"""

#: A 5 cm box of 1 kg whose moments are 1e-300 kg m^2, tilted onto a slab.
POINT_INERTIA = """[simulate]
duration = 0.05
dt = 1e-3

[[body]]
name = "floor"
kind = "fixed"
geometry = {shape = "slab", size = [0.6, 0.6, 0.01], modulus = 1e7, cells = [1, 1], layers = 1}

[[body]]
name = "box"
geometry = {shape = "box", size = [0.05, 0.05, 0.05]}
position = [0, 0, 0.03]
rpy = [10, 5, 0]
mass = 1
inertia = [1e-300, 1e-300, 1e-300]
"""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The inputs of every case, in one folder the cases only read."""
    folder = tmp_path_factory.mktemp("inputs")
    asset = built_ball(folder)
    tampered(asset, folder / "huge_integer.vtu", dissipation=10 ** 400)
    write(folder / "cube.obj", "\n".join(cube_obj(0.02)) + "\n")
    flat = trimesh.creation.box([0.1, 0.1, 0.02])      # its top and bottom pressed into z = 0: closed, no volume
    trimesh.Trimesh(flat.vertices * [1, 1, 0], flat.faces, process=False).export(folder / "flat.stl")
    write(folder / "wrench.toml", scene(mass="mass = 0.1\nwrench = [1e300, 0, 0, 0, 0, 0]"))
    write(folder / "torque_rows.toml",
          scene(mass="mass = 0.1\nwrench = [[0, 0, 0, 0, 0, 0, 0], [1e-3, 0, 0, 0, 0, 0, 1e300]]"))
    write(folder / "com_mass.toml", scene(mass="mass = 0.1\ncentre_of_mass = [0.5, 0, 0]"))
    write(folder / "rpy.toml", scene(mass="mass = 0.1\nrpy = [1e300, 0, 0]"))
    write(folder / "com_density.toml", scene(mass="density = 1000\ncentre_of_mass = [0.5, 0, 0]"))
    write(folder / "free_fall.toml", FREE_FALL)
    write(folder / "point_inertia.toml", POINT_INERTIA)
    write(folder / "plain.toml", scene())
    write(folder / "hall.obj", "\n".join(cube_obj(200.0)) + "\n")
    write(folder / "flat_scene.toml", scene(geometry='{mesh = "flat.stl"}'))
    return folder


REFUSED = [
    # (id, arguments ({i}: the inputs, {o}: an empty output folder), exit code, message fragment)
    ("wrench of 1e300 N", ["simulate", "{i}/wrench.toml", "-o", "{o}/run"], 2,
     "wrench = [1e+300, 0, 0, 0, 0, 0] is not 6 numbers [fx, fy, fz, tx, ty, tz] with each force component "
     "within ±1e+19 N"),
    ("wrench row of 1e300 N m", ["simulate", "{i}/torque_rows.toml"], 2, "each torque component within ±1e+28 N m"),
    ("rpy of 1e300 degrees", ["simulate", "{i}/rpy.toml"], 2, "rpy = [1e+300, 0, 0] is not 3 numbers from -360000 to 360000"),
    ("centre_of_mass beside mass alone", ["simulate", "{i}/com_mass.toml"], 2,
     "[[body]] 2 (box): centre_of_mass is read with mass and inertia only"),
    ("centre_of_mass beside density", ["simulate", "{i}/com_density.toml"], 2, "so it would be ignored"),
    ("a free fall of eleven days", ["simulate", "{i}/free_fall.toml", "-o", "{o}/run"], 1,
     "free_fall.toml: the simulation left the range a scene may hold: body 'box' is more than 1e+09 m from "
     "the origin"),
    ("inertia of no scale next to the contact's", ["simulate", "{i}/point_inertia.toml", "-o", "{o}/run"], 1,
     "point_inertia.toml: a step's linear system could not be solved"),
    ("a flat rigid mesh in contact", ["contact", "{i}/asset.vtu", "{i}/flat.stl", "--pose-b", "0,0,-0.04,0,0,0"], 1,
     "flat.stl: the rigid surface is closed but encloses no volume"),
    ("a flat rigid mesh in a scene", ["simulate", "{i}/flat_scene.toml"], 1, "encloses no volume"),
    ("inspect, a metadata integer past the floats", ["inspect", "{i}/huge_integer.vtu"], 1,
     "huge_integer.vtu: invalid asset, its metadata is wrong: dissipation is 1000000000"),
]


@pytest.mark.parametrize("args, code, words", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_hostile_input_is_refused(inputs, tmp_path, monkeypatch, args, code, words):
    """Before: exit 0 for the scenes and the flat mesh (a box 1e296 m away, a centre of mass
    ignored, a body 4.9e12 m down, zero force), a LinAlgError traceback from the step's solve and
    an OverflowError traceback from inspect."""
    result = _refused(inputs, tmp_path, monkeypatch, args, code, words)
    assert "OverflowError" not in result.output


def test_validate_names_a_metadata_integer_past_the_floats(inputs):
    """Before: the schema check's detail was "OverflowError: int too large to convert to float"."""
    result = CliRunner().invoke(main, ["validate", str(inputs / "huge_integer.vtu"), "-q"])
    assert result.exit_code == 1, result.output
    assert "schema: metadata dissipation is 1000000000" in result.stdout
    assert "OverflowError" not in result.output and "..., not a finite number" in result.stdout


def test_a_run_that_leaves_the_range_writes_nothing(inputs, tmp_path):
    """The free fall is refused after the run and before any output is moved into -o."""
    result = CliRunner().invoke(main, ["simulate", str(inputs / "free_fall.toml"), "-o", str(tmp_path / "run"), "-q"])
    assert result.exit_code == 1, result.output
    assert not (tmp_path / "run").exists()


def test_a_duration_that_is_no_whole_number_of_steps_is_said(inputs):
    """Before: --duration 0.0025 --dt 1e-3 ran 3 steps, to t = 0.003 s, 20 % past the duration
    asked, without a word. A duration of whole steps (the scene's 0.002 s) says nothing."""
    result = CliRunner().invoke(main, ["simulate", str(inputs / "plain.toml"), "--duration", "0.0025", "-q"])
    assert result.exit_code == 0, result.output
    assert ("warning: the duration 0.0025 s is not a whole number of steps of dt = 0.001 s: the run takes 3 "
            "steps and ends at t = 0.003 s") in result.stderr
    result = CliRunner().invoke(main, ["simulate", str(inputs / "plain.toml"), "-q"])
    assert result.exit_code == 0 and result.stderr == "", result.output


def test_a_compliant_body_wholly_inside_the_rigid_one_is_said(inputs):
    """A rigid mesh in mm read in metres (a 200 m box) around the ball: no face crosses the ball, so
    the force is zero. Before: exit 0 and no word, a zero force for bodies that overlap entirely.
    Now the same answer (the model's) with a warning naming both files and the options to check;
    the same ball clear of the box says nothing."""
    args = ["contact", str(inputs / "asset.vtu"), str(inputs / "hall.obj"), "--json", "-q"]
    result = CliRunner().invoke(main, [*args, "--pose-b", "-100,-100,-100,0,0,0"])
    assert result.exit_code == 0, result.output
    words = "asset.vtu lies wholly inside the rigid " + str(inputs / "hall.obj")
    assert words in result.stderr and '"faces": 0' in result.stdout and words in result.stdout
    result = CliRunner().invoke(main, [*args, "--pose-b", "1,1,1,0,0,0"])
    assert result.exit_code == 0 and "wholly inside" not in result.output, result.output


def _with_a_second_array(src: Path, dst: Path, name: str, data_of: str) -> Path:
    """A copy of the uncompressed asset ``src`` whose header declares a second array ``name``, after
    the first, reading the appended data of the array ``data_of`` (a hand edit; the data unchanged)."""
    text = src.read_bytes()
    start = text.index(f'Name="{name}"'.encode())
    start = text.rindex(b"<DataArray", 0, start)
    end = text.index(b"</DataArray>", start) + len(b"</DataArray>")
    offset = re.search(rb'offset="(\d+)"', text[text.index(f'Name="{data_of}"'.encode()):]).group(0)
    second = re.sub(rb'offset="\d+"', offset, text[start:end])
    return write(dst, text[:end] + b"\n" + second + text[end:])


@pytest.mark.parametrize("name, data_of", [("pressure", "extent"), ("modulus", "dissipation")])
def test_an_array_declared_twice_is_refused(inputs, tmp_path, name, data_of):
    """Before: vtk kept the first array of the name and validate called the asset valid (21
    checks), whichever the second held (here the extent as a pressure, a dissipation of 7.6 as
    the modulus); a reader keeping the last would see another asset. Now every command reading
    the asset refuses it (exit 1), naming the section, the name and the fix."""
    edited = _with_a_second_array(inputs / "asset.vtu", tmp_path / "twice.vtu", name, data_of)
    for args in (["validate", str(edited)], ["inspect", str(edited)],
                 ["contact", str(edited), str(inputs / "cube.obj"), "--pose-b", "0,0,-0.04,0,0,0"]):
        result = CliRunner().invoke(main, [*args, "-q"])
        assert result.exit_code == 1, result.output
        assert f"declares 2 arrays named {name!r}: readers disagree" in result.output
        assert "Traceback" not in result.output


def test_the_library_refuses_a_flat_rigid_mesh(inputs):
    """load_body is where every rigid mesh enters (contact, scenes, calibrate's indenter mesh,
    the Drake bridge); a closed cube of full volume still loads."""
    with pytest.raises(InputError, match="encloses no volume"):
        load_body(inputs / "flat.stl")
    assert load_body(inputs / "cube.obj").faces.shape == (12, 3)


def test_thin_wires_and_shells_wound_either_way_are_no_flat_meshes(tmp_path):
    """Rigid meshes with an inside that the flat check must not take for a sheet: a closed wire
    0.2 mm across and 10 m long (its volume is 3e-10 of its diagonal cubed), and two disjoint
    cubes, one wound inside out (their signed volumes cancel)."""
    wire = trimesh.creation.cylinder(radius=1e-4, height=10.0, sections=16)
    flat_check(np.asarray(wire.vertices), np.asarray(wire.faces), path="wire.obj")      # no error
    a = trimesh.creation.box([0.02, 0.02, 0.02])
    b = trimesh.Trimesh(a.vertices + [0.1, 0, 0], a.faces[:, ::-1], process=False)
    assert abs(a.volume + b.volume) < 1e-12                          # signed: they cancel
    trimesh.util.concatenate([a, b]).export(tmp_path / "pair.stl")
    assert load_body(tmp_path / "pair.stl").faces.shape == (24, 3)


def test_a_csv_number_with_an_underscore_is_refused(tmp_path):
    """Before: Python's float read ``1_0`` as 10, a depth ten times the one meant, and no error."""
    data = write(tmp_path / "press.csv", "depth_mm,force_N\n0.5,1\n1_0,2\n1.5,3\n2,4\n")
    with pytest.raises(InputError, match=r"row 3 \('1_0,2'\) is not two numbers 'depth, force'"):
        read_data(data, "mm,N")


def test_copies_of_one_vertex_are_merged_without_pairing_them(monkeypatch):
    """A triangle repeated 2,000 times in an STL (every copy its own three vertices): the seam
    merge gives the 3 vertices and 2,000 faces as before, but its neighbour search sees the 3
    distinct positions, not the 6,000 copies (whose pairs, k²/2, filled the memory: 18 GB and a
    MemoryError for 120,000 copies). Before: the search was given all 6,000."""
    searched = []

    class Tree(repair.cKDTree):
        def __init__(self, points, *args, **kwargs):
            searched.append(len(points))
            super().__init__(points, *args, **kwargs)

    monkeypatch.setattr(repair, "cKDTree", Tree)
    triangle = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    vertices = np.tile(triangle, (2000, 1))
    faces = np.arange(len(vertices)).reshape(-1, 3)
    merged, new_faces, count = repair.merge_close_vertices(vertices, faces, 1e-8)
    assert np.array_equal(merged, triangle) and count == 5997
    assert np.array_equal(new_faces, np.tile([0, 1, 2], (2000, 1)))
    assert searched == [3]


# ----------------------------------------------------------------------------- the Drake bridge

@pytest.fixture(scope="module")
def drake():
    """A builder and a finalized plant with a 'ball' body (skipped without the extra 'drake')."""
    pytest.importorskip("pydrake")
    from pydrake.math import RigidTransform  # lazy: the optional extra 'drake'
    from pydrake.geometry import Box  # lazy: as above
    from pydrake.multibody.plant import AddMultibodyPlantSceneGraph, CoulombFriction  # lazy: as above
    from pydrake.multibody.tree import SpatialInertia, UnitInertia  # lazy: as above
    from pydrake.systems.framework import DiagramBuilder  # lazy: as above

    def plant(builder=None, collisions=False):
        builder = builder or DiagramBuilder()
        plant, scene_graph = AddMultibodyPlantSceneGraph(builder, 1e-3)
        ball = plant.AddRigidBody("ball", SpatialInertia(0.05, np.zeros(3), UnitInertia.SolidSphere(0.01)))
        if collisions:
            for body, size in ((ball, 0.02), (plant.world_body(), 0.2)):
                plant.RegisterCollisionGeometry(body, RigidTransform(), Box(size, size, size), "box",
                                                CoulombFriction(0.5, 0.5))
        plant.Finalize()
        return builder, plant, scene_graph

    return plant


def _other_builders_graph(drake):
    return drake()[2]


BRIDGE = [
    # (id, keyword arguments (a callable: of the fixture), message fragment)
    ("units a list", lambda d: dict(units={"ball": ["mm"]}), "cube.obj: unknown units ['mm']"),
    ("name a number", lambda d: dict(name=5), "name 5 is not a string"),
    ("scene_graph text", lambda d: dict(scene_graph="sg"), "scene_graph (str) is not a pydrake SceneGraph"),
    ("scene_graph of another builder", lambda d: dict(scene_graph=_other_builders_graph(d)),
     "scene_graph is not a system of this builder"),
]


@pytest.mark.parametrize("options, words", [c[1:] for c in BRIDGE], ids=[c[0] for c in BRIDGE])
def test_the_drake_bridge_refuses_arguments_of_the_wrong_kind(inputs, drake, options, words):
    """Before: TypeError (unhashable list; pybind's set_name after the system was added),
    AttributeError ('str' has no collision_filter_manager), RuntimeError (an unregistered frame)."""
    from fieldgen.drake import add_pressure_field_contact  # lazy: imports pydrake's modules when called

    builder, plant, _ = drake()
    with pytest.raises(OptionError) as caught:
        bodies = {"ball": str(inputs / "cube.obj"), "world": str(inputs / "asset.vtu")}
        add_pressure_field_contact(builder, plant, bodies, **options(drake))
    assert words in str(caught.value)
    assert "fieldgen_pressure_field_contact" not in [s.get_name() for s in builder.GetSystems()]


def test_the_drake_bridge_asks_which_of_two_scene_graphs(inputs, drake):
    """Two plants, each with its scene graph, in one builder: before, no scene graph was chosen and
    no collision filtered, so Drake's contact between the bodies acted beside fieldgen's. Now the
    call asks for scene_graph=, and with it filters and connects."""
    from fieldgen.drake import add_pressure_field_contact  # lazy: imports pydrake's modules when called

    builder, plant, graph = drake(collisions=True)
    _, _, other_graph = drake(builder, collisions=True)
    bodies = {"ball": str(inputs / "cube.obj"), "world": str(inputs / "asset.vtu")}
    with pytest.raises(FieldgenError, match=r"the builder has 2 SceneGraphs.*Pass the plant's as scene_graph="):
        add_pressure_field_contact(builder, plant, bodies)
    assert add_pressure_field_contact(builder, plant, bodies, scene_graph=graph) is not None
    filtered = []
    for scene_graph in (graph, other_graph):
        inspector = scene_graph.model_inspector()
        ids = inspector.GetAllGeometryIds()
        assert len(ids) == 2
        filtered.append(inspector.CollisionFiltered(ids[0], ids[1]))
    assert filtered == [True, False]                # the plant's graph, not the other plant's


def test_a_build_spec_given_as_input_is_named_as_one(tmp_path):
    """`fieldgen build spec.toml` once answered "the linear law needs a modulus" (the spec never
    read), or with a modulus, that TOML is no mesh format; now a usage error naming --spec."""
    spec = tmp_path / "spec.toml"
    spec.write_text('input = "part.stl"\nmodulus = 1e5\n')
    result = CliRunner().invoke(main, ["build", str(spec), "-o", str(tmp_path / "part.vtu")])
    assert result.exit_code == 2, result.output
    assert f"--spec {spec}" in result.output and "needs a modulus" not in result.output
    assert list(tmp_path.iterdir()) == [spec]


def test_a_piece_of_a_compliant_body_inside_the_rigid_one_is_said():
    """Two unit tets 10 m apart, the first inside a 2 m box, the second clear of it: no face of the
    box crosses either. Before, one point of the body was asked (the first piece's or the second's,
    by the order of the points), so a body half inside was called wholly inside or clear; now each
    piece is asked: one of the two inside, and both when the box is moved over the second too."""
    from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
    from fieldgen.runtime.contact.wrench import swallowed

    unit = np.array([[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]], float)
    points = np.vstack([unit + [10.0, 0, 0], unit])     # the second piece's points listed first
    tets = np.array([[4, 5, 6, 7], [0, 1, 2, 3]])
    body = CompliantGeometry.from_arrays(points, tets, np.array([0, 0, 0, 1e5] * 2, float))
    box = trimesh.creation.box((2.0, 2.0, 2.0))
    rigid = RigidGeometry(box.vertices, box.faces)
    identity = np.eye(4)
    assert swallowed(body, identity, rigid, identity) == ("a", 1, 2)
    assert swallowed(rigid, identity, body, identity) == ("b", 1, 2)
    moved = np.eye(4)
    moved[0, 3] = -10.0                                 # the body moved so its second piece is in the box
    assert swallowed(body, moved, rigid, identity) == ("a", 1, 2)
    wide = RigidGeometry(box.vertices * [12, 1, 1] + [5, 0, 0], box.faces)
    assert swallowed(body, identity, wide, identity) == ("a", 2, 2)
    far = np.eye(4)
    far[2, 3] = 5.0
    assert swallowed(body, far, rigid, identity) is None
