"""Hostile input a fifth sweep found: the Drake bridge called as a library user calls it (a second
call on one plant ended the whole Python process inside Drake; a NaN or scaled placement gave a
zero or a wrong force without a word; a friction given as text, a bool or 1e300 and a units or
friction key naming no body were taken or ignored; a path or a bodies mapping of the wrong type,
a plant of another builder raised Python's or pydrake's own errors; a Drake state that is not
finite read as no contact), ``build --drake-vtk`` paths found wrong only after the build (an SDF
path that is a folder, a file named ``.vtk`` alone), and assets edited by hand (a friction spring
``tangential`` that is not an object, is negative or past build's bounds; a ``warnings`` entry
that is not a list; coordinates so large that volumes overflow, which spilled numpy's warnings).
Each is refused with fieldgen's own error naming the body or the file, the problem and the fix;
from the command line with its exit code, no traceback, nothing written and the inputs unchanged."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.errors import FieldgenError
from asset_edit import edited_copy
from test_hostile_input import built_ball, cube_obj, fingerprint, tampered, write
from test_hostile_sweep import _refused


def _huge_points(src: Path, dst: Path) -> Path:
    """A copy of the asset ``src`` with every coordinate times 1e200 (finite, but its volumes overflow)."""
    def edit(grid) -> None:
        points = grid.GetPoints()
        for k in range(points.GetNumberOfPoints()):
            points.SetPoint(k, *(1e200 * c for c in points.GetPoint(k)))

    return edited_copy(src, dst, edit)


def _compliant_scene(asset: str) -> str:
    """A box dropped on a fixed asset under compliant friction (which reads the asset's friction spring)."""
    return ('[simulate]\nduration = 0.002\ndt = 1e-3\nfriction = "compliant"\n'
            f'[[body]]\nname = "pad"\nkind = "fixed"\ngeometry = {{asset = "{asset}"}}\n'
            '[[body]]\nname = "box"\ngeometry = {shape = "box", size = [0.02, 0.02, 0.02]}\nmass = 0.1\n'
            'position = [0, 0, 0.06]\n')


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The inputs of every case, in one folder the cases only read."""
    folder = tmp_path_factory.mktemp("inputs")
    asset = built_ball(folder)
    write(folder / "cube.obj", "\n".join(cube_obj(0.02)) + "\n")
    tampered(asset, folder / "tangential_word.vtu", tangential="x")
    tampered(asset, folder / "tangential_negative.vtu", tangential={"stiffness": -1.0, "damping": 10.0})
    tampered(asset, folder / "tangential_huge.vtu", tangential={"stiffness": 1e300, "damping": 10.0})
    tampered(asset, folder / "warnings_number.vtu", warnings=5)
    tampered(asset, folder / "warnings_null.vtu", warnings=None)
    _huge_points(asset, folder / "huge_points.vtu")
    write(folder / "tangential_word.toml", _compliant_scene("tangential_word.vtu"))
    write(folder / "tangential_negative.toml", _compliant_scene("tangential_negative.vtu"))
    (folder / "taken.sdf").mkdir()
    return folder


BUILD = ["--modulus", "1e5", "--edge-length", "0.01", "-q"]
CASES = [
    # --drake-vtk: found by the Drake writer after the whole build, the .vtk already written
    ("build --drake-vtk whose .sdf is a folder", ["build", "{i}/cube.obj", *BUILD, "-o", "{o}/x.vtu", "--drake-vtk",
                                                 "{i}/taken.vtk"], 1, "taken.sdf: is a folder, not a file"),
    ("build --drake-vtk .vtk", ["build", "{i}/cube.obj", *BUILD, "-o", "{o}/x.vtu", "--drake-vtk", "{o}/.vtk"], 2,
     "is named .vtk alone: a file of that name has no suffix for Drake to read. Name it FILE.vtk"),
    # a friction spring edited into the metadata: an AttributeError traceback, or taken as it was
    ("contact: tangential not an object", ["contact", "{i}/tangential_word.vtu", "{i}/cube.obj"], 1,
     "tangential_word.vtu: is not a valid fieldgen asset (schema: tangential is not an object"),
    ("simulate: tangential not an object", ["simulate", "{i}/tangential_word.toml"], 1,
     "tangential_word.vtu: is not a valid fieldgen asset (schema: tangential is not an object"),
    ("inspect: tangential not an object", ["inspect", "{i}/tangential_word.vtu"], 1,
     "its metadata is wrong: tangential is not an object"),
    ("contact: tangential stiffness < 0", ["contact", "{i}/tangential_negative.vtu", "{i}/cube.obj"], 1,
     "tangential: tangential stiffness -1 1/m and damping 10 s/m must be > 0"),
    ("simulate: tangential stiffness < 0", ["simulate", "{i}/tangential_negative.toml"], 1,
     "tangential_negative.vtu: is not a valid fieldgen asset (tangential: tangential stiffness -1"),
    ("contact: tangential stiffness 1e300", ["contact", "{i}/tangential_huge.vtu", "{i}/cube.obj"], 1,
     "must be at most 1e+10 1/m and 1e+06 s/m (fieldgen build's bounds)"),
    # warnings that are not a list: a TypeError traceback in inspect
    ("inspect: warnings = 5", ["inspect", "{i}/warnings_number.vtu"], 1,
     "its metadata is wrong: warnings is 5, not a list of strings"),
    ("inspect: warnings = null", ["inspect", "{i}/warnings_null.vtu", "--json"], 1,
     "warnings is None, not a list of strings"),
    ("contact: warnings = 5", ["contact", "{i}/warnings_number.vtu", "{i}/cube.obj"], 1,
     "(schema: warnings is 5, not a list of strings)"),
    # coordinates of 1e200 m: finite, but every volume overflows
    ("contact: coordinates of 1e200 m", ["contact", "{i}/huge_points.vtu", "{i}/cube.obj"], 1,
     "coordinates above 1e+100 m in size (volumes and areas overflow)"),
    ("inspect: coordinates of 1e200 m", ["inspect", "{i}/huge_points.vtu"], 1,
     "the summary has numbers that are not finite"),
]


@pytest.mark.filterwarnings("error::RuntimeWarning")     # numpy's overflow notes are no message for a user
@pytest.mark.parametrize("args, code, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_is_refused(inputs, tmp_path, monkeypatch, args, code, words):
    _refused(inputs, tmp_path, monkeypatch, args, code, words)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("name, words", [
    ("tangential_huge.vtu", "tangential: tangential stiffness 1e+300 1/m and damping 10 s/m must be at most"),
    ("huge_points.vtu", "finite: points: "),
    ("warnings_number.vtu", "schema: warnings is 5, not a list of strings"),
])
def test_validate_names_what_is_wrong(inputs, name, words):
    """Before: the friction spring and warnings passed as valid; huge coordinates were named only
    as NaN volumes, after a screenful of numpy's overflow warnings."""
    before = fingerprint(inputs)
    result = CliRunner().invoke(main, ["validate", str(inputs / name), "-q"])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert f"{inputs / name}: INVALID" in result.stdout and words in result.stdout, result.stdout
    assert "RuntimeWarning" not in result.output
    assert fingerprint(inputs) == before


# ----------------------------------------------------------------------------- the Drake bridge

@pytest.fixture(scope="module")
def drake():
    """pydrake's classes the cases use (skipped without the extra 'drake')."""
    pytest.importorskip("pydrake")
    from pydrake.math import RigidTransform  # lazy: the optional extra 'drake'
    from pydrake.multibody.plant import AddMultibodyPlantSceneGraph
    from pydrake.multibody.tree import SpatialInertia, UnitInertia
    from pydrake.systems.framework import DiagramBuilder

    def plant():
        builder = DiagramBuilder()
        plant, _ = AddMultibodyPlantSceneGraph(builder, 1e-3)
        plant.AddRigidBody("ball", SpatialInertia(0.05, np.zeros(3), UnitInertia.SolidSphere(0.01)))
        plant.Finalize()
        return builder, plant

    return dict(plant=plant, RigidTransform=RigidTransform, DiagramBuilder=DiagramBuilder)


def _bodies(inputs: Path, world=None) -> dict:
    return {"ball": str(inputs / "cube.obj"), "world": str(inputs / "asset.vtu") if world is None else world}


SCALED = np.diag([2.0, 2.0, 2.0, 1.0])
BRIDGE = [
    # (id, bodies(inputs, drake) or None for the plain pair, keyword arguments, message fragment)
    ("friction as text", None, dict(friction={"ball": "0.5"}), "cube.obj: friction '0.5' is not a number"),
    ("friction True", None, dict(friction={"ball": True}), "friction True is not a number"),
    ("friction 1e300", None, dict(friction={"ball": 1e300}), "friction 1e+300 is above 10"),
    ("friction key of no body", None, dict(friction={"bal": 0.5}),
     "friction key 'bal' names none of the bodies given nor their files"),
    ("units key of no body", None, dict(units={"cube.stl": "mm"}),
     "units key 'cube.stl' names none of the bodies given nor their files"),
    ("units a list", None, dict(units=["mm"]), "units is a list, not a mapping"),
    ("path None", lambda i, d: {"ball": None, "world": str(i / "asset.vtu")}, {}, "body 'ball': None is not a path"),
    ("path empty", lambda i, d: {"ball": str(i / "cube.obj"), "world": ""}, {},
     "body 'world': an empty string is not a path"),
    ("bodies a list", lambda i, d: list(_bodies(i).items()), {}, "bodies is a list, not a mapping"),
    ("body name not a string", lambda i, d: {1: str(i / "cube.obj"), "world": str(i / "asset.vtu")}, {},
     "the body name 1 is not a string"),
    ("placement NaN", lambda i, d: _bodies(i, (str(i / "asset.vtu"), np.full((4, 4), np.nan))), {},
     "body 'world': the placement has numbers that are not finite"),
    ("placement scaled", lambda i, d: _bodies(i, (str(i / "asset.vtu"), SCALED)), {},
     "body 'world': the placement is not a rigid transform"),
    ("placement mirrored", lambda i, d: _bodies(i, (str(i / "asset.vtu"), np.diag([1.0, 1.0, -1.0, 1.0]))), {},
     "the placement is not a rigid transform"),
    ("placement 3x3", lambda i, d: _bodies(i, (str(i / "asset.vtu"), np.eye(3))), {},
     "the placement is of shape (3, 3), not a 4×4 transform"),
    ("placement text", lambda i, d: _bodies(i, (str(i / "asset.vtu"), "up")), {},
     "the placement 'up' is not a transform"),
]


@pytest.mark.parametrize("bodies, options, words", [c[1:] for c in BRIDGE], ids=[c[0] for c in BRIDGE])
def test_the_drake_bridge_refuses_bad_arguments_with_its_own_errors(inputs, drake, bodies, options, words):
    """Before: a TypeError or ValueError of numpy's, or no error at all (a NaN placement gave zero
    force, a scaled one 80 times the force, a misspelt key left the file's friction)."""
    from fieldgen.drake import add_pressure_field_contact  # lazy: imports pydrake's modules when called

    builder, plant = drake["plant"]()
    given = _bodies(inputs) if bodies is None else bodies(inputs, drake)
    with pytest.raises(FieldgenError) as caught:
        add_pressure_field_contact(builder, plant, given, **options)
    assert words in str(caught.value)
    assert "fieldgen_pressure_field_contact" not in [s.get_name() for s in builder.GetSystems()]


def test_the_drake_bridge_takes_a_placement_as_a_rigid_transform_or_its_matrix(inputs, drake):
    """The bounds leave every rigid transform in: a RigidTransform, its 4×4 matrix, a rotation."""
    from pydrake.math import RollPitchYaw  # lazy: the optional extra 'drake'

    from fieldgen.drake import add_pressure_field_contact  # lazy: imports pydrake's modules when called

    place = drake["RigidTransform"](RollPitchYaw(0.3, -1.2, 2.9), [0.0, 0.0, -0.01])
    for placement in (place, place.GetAsMatrix4()):
        builder, plant = drake["plant"]()
        add_pressure_field_contact(builder, plant, _bodies(inputs, (str(inputs / "asset.vtu"), placement)),
                                   friction={"ball": 0.5, str(inputs / "asset.vtu"): 10})


@pytest.mark.parametrize("case, words", [
    ("not_a_plant", "plant (object) is not a pydrake MultibodyPlant"),
    ("another_builder", "the plant 'plant' is not a system of this builder"),
    ("built", "the builder has already built its diagram"),
])
def test_the_drake_bridge_refuses_a_plant_it_cannot_connect(inputs, drake, case, words):
    """Before: an AttributeError, or pydrake's RuntimeError once a system had been added."""
    from fieldgen.drake import add_pressure_field_contact  # lazy: imports pydrake's modules when called

    builder, plant = drake["plant"]()
    if case == "not_a_plant":
        plant = object()
    elif case == "another_builder":
        builder = drake["DiagramBuilder"]()
    else:
        builder.Build()
    with pytest.raises(FieldgenError) as caught:
        add_pressure_field_contact(builder, plant, _bodies(inputs))
    assert words in str(caught.value)


SECOND_CALL = """
import numpy as np
from pydrake.multibody.plant import AddMultibodyPlantSceneGraph
from pydrake.multibody.tree import SpatialInertia, UnitInertia
from pydrake.systems.framework import DiagramBuilder
from fieldgen.drake import add_pressure_field_contact
from fieldgen.errors import OptionError

builder = DiagramBuilder()
plant, _ = AddMultibodyPlantSceneGraph(builder, 1e-3)
plant.AddRigidBody("ball", SpatialInertia(0.05, np.zeros(3), UnitInertia.SolidSphere(0.01)))
plant.Finalize()
add_pressure_field_contact(builder, plant, {{"ball": {ball!r}, "world": {pad!r}}})
try:
    add_pressure_field_contact(builder, plant, {{"ball": {ball!r}, "world": {pad!r}}})
except OptionError as error:
    print("refused:", error)
builder.Build()
print("built")
"""


def test_a_second_call_on_one_plant_is_refused_not_a_crash(inputs, drake):
    """Before: Drake's DRAKE_DEMAND on the twice-connected input ended the Python process (SIGABRT),
    with no Python error to catch. Run in a child process, so that the crash fails this test only."""
    script = textwrap.dedent(SECOND_CALL).format(ball=str(inputs / "cube.obj"), pad=str(inputs / "asset.vtu"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("refused: the plant's applied_spatial_force input is already connected (by an earlier "
            "add_pressure_field_contact or another system)") in done.stdout, done.stdout
    assert done.stdout.rstrip().endswith("built")


def test_a_diverged_drake_state_is_an_error_not_zero_force(inputs, drake):
    """Before: a NaN pose (a plant that diverged, or was given one) read as no contact, a zero
    force Drake went on with; a NaN velocity raised the runtime's ValueError naming no body."""
    from pydrake.systems.analysis import Simulator  # lazy: the optional extra 'drake'

    from fieldgen.drake import add_pressure_field_contact  # lazy: imports pydrake's modules when called

    builder, plant = drake["plant"]()
    add_pressure_field_contact(builder, plant, _bodies(inputs))
    simulator = Simulator(builder.Build())
    context = plant.GetMyMutableContextFromRoot(simulator.get_mutable_context())
    plant.SetFreeBodyPose(context, plant.GetBodyByName("ball"), drake["RigidTransform"]([0.0, 0.0, np.nan]))
    with pytest.raises(FieldgenError) as caught:
        simulator.AdvanceTo(0.01)
    assert "body 'ball' has a non-finite pose or velocity in the Drake plant at t = 0 s" in str(caught.value)


def test_a_rotation_printed_to_five_digits_is_a_placement_and_is_made_exact():
    """A rotation pasted from a log (five significant digits, about 1e-5 from orthonormal) is
    taken and projected onto the nearest rotation; one 1e-3 off is refused with how far it is."""
    from fieldgen.drake.bodies import placement_matrix
    from fieldgen.errors import OptionError

    angle = 0.7
    c, s = np.cos(angle), np.sin(angle)
    X = np.eye(4)
    X[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    X[:3, 3] = [0.01, 0.02, 0.03]
    rounded = np.array([[float(f"{v:.5g}") for v in row] for row in X])
    placed = placement_matrix("ball", rounded, np.asarray)
    R = placed[:3, :3]
    assert np.abs(R.T @ R - np.eye(3)).max() < 1e-14 and np.abs(R - X[:3, :3]).max() < 1e-4
    assert np.array_equal(placed[:3, 3], rounded[:3, 3])
    assert np.array_equal(placement_matrix("ball", X, np.asarray), X)          # an exact one as given
    off = X.copy()
    off[0, 0] *= 1.001
    with pytest.raises(OptionError, match="from orthonormal"):
        placement_matrix("ball", off, np.asarray)
