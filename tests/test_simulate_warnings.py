"""`fieldgen simulate` reports contact warnings once per (pair, kind), in the --json summary and
on stderr, instead of silencing them."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.errors import BuildError
from fieldgen.runtime.dynamics.contact_wrenches import contact_pairs, contact_wrenches
from fieldgen.runtime.contact.surface import PassThroughWarning
from fieldgen.runtime.dynamics.warnings import ContactWarningLog, collecting, warning_kind, watched
from fieldgen.runtime.scene.load import load_scene
from fieldgen.runtime.dynamics.point_contacts import scene_contacts
from fieldgen.runtime.dynamics.simulate import simulate

#: A 2 cm slab bonded underneath (its bottom is the rigid core, e = 1). Box "deep" starts 1 mm
#: below the slab's bottom, so every step's contact reaches the core; box "shallow" rests 5 mm
#: deep, far from it; box "late" falls from 10 mm above and is heavy enough to push through
#: the soft slab.
SCENE = """
[simulate]
dt = 1e-3

[[body]]
name = "slab"
kind = "fixed"
geometry = {shape = "slab", size = [1.0, 0.4, 0.02], modulus = 1e3, cells = [10, 4], layers = 1}

[[body]]
name = "deep"
geometry = {shape = "box", size = [0.04, 0.04, 0.04]}
mass = 0.1
position = [-0.3, 0, -0.001]

[[body]]
name = "shallow"
geometry = {shape = "box", size = [0.04, 0.04, 0.04]}
mass = 1e-4
position = [0, 0, 0.015]
"""


@pytest.fixture
def scene_file(tmp_path):
    path = tmp_path / "through.toml"
    path.write_text(SCENE)
    return path


def test_kind_names():
    assert warning_kind(PassThroughWarning) == "pass_through"


def test_summary_lists_each_pair_and_kind_once(scene_file):
    scene, _ = load_scene(scene_file)
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # nothing escapes to the caller either
        result = simulate(scene, 0.005, 1e-3)
    assert result.steps == 5
    entries = result.summary()["warnings"]
    assert len(entries) == 1
    entry = entries[0]
    assert entry["pair"] == ["slab", "deep"] and entry["kind"] == "pass_through"
    assert entry["first_time"] == 0.0
    assert entry["message"].startswith("deep reached the rigid core of slab")


def test_first_time_is_when_it_first_happened():
    """The log keeps the time set when the first warning of a key arrived, not later ones."""
    log = ContactWarningLog()
    with collecting(log):
        for t in (0.0, 0.1, 0.2):
            log.time = t
            with watched(("a", "b")):
                if t > 0:
                    warnings.warn(PassThroughWarning(f"at {t}"))
            with watched(("a", "c")):
                if t > 0.15:
                    warnings.warn(PassThroughWarning(f"at {t}"))
    assert log.as_list() == [
        {"pair": ["a", "b"], "kind": "pass_through", "message": "at 0.1", "first_time": 0.1},
        {"pair": ["a", "c"], "kind": "pass_through", "message": "at 0.2", "first_time": 0.2}]


def test_other_warnings_and_calls_outside_a_run_pass_through(scene_file):
    log = ContactWarningLog()
    with collecting(log), pytest.warns(RuntimeWarning, match="not a contact warning"):
        with watched(("a", "b")):
            warnings.warn("not a contact warning", RuntimeWarning)
    assert log.as_list() == []
    scene, _ = load_scene(scene_file)
    with pytest.warns(PassThroughWarning, match="rigid core of slab"):
        scene_contacts(scene, [b.state for b in scene.bodies])


def test_cli_prints_once_on_stderr_and_in_json(scene_file):
    result = CliRunner().invoke(main, ["simulate", str(scene_file), "--duration", "0.005", "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [(w["pair"], w["kind"], w["first_time"]) for w in data["warnings"]] == [(["slab", "deep"], "pass_through", 0.0)]
    lines = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert lines == [f"warning: slab / deep (pass_through, first at t = 0 s): {data['warnings'][0]['message']}"]


def test_continuous_integrator_refuses_the_rigid_pair_before_running(scene_file):
    """The two boxes are rigid, and the continuous integrator has no rigid–rigid contact: the
    scene is refused before the first step, naming the pair, instead of run with it dropped."""
    from fieldgen.errors import OptionError

    scene, _ = load_scene(scene_file)
    with pytest.raises(OptionError, match="'deep' and 'shallow'.*--integrator velocity"):
        simulate(scene, 0.002, 1e-3, "continuous")


def test_compliant_friction_warns_and_refuses_like_the_other_integrators(tmp_path):
    """Compliant friction queries contacts exactly as the other integrators do: a body reaching
    the rigid core is logged once per (pair, kind) as by the velocity integrator's query (not
    silenced), and the core contact ends the run with the continuous integrator's error."""
    path = tmp_path / "core.toml"
    path.write_text(SCENE[:SCENE.index('[[body]]\nname = "shallow"')])     # the slab and "deep" only
    scene, _ = load_scene(path)
    states = [b.state for b in scene.bodies]
    pairs = contact_pairs(scene)
    logs = {}
    for name, query in (("velocity", lambda: scene_contacts(scene, states)),
                        ("regularised", lambda: contact_wrenches(scene, states, pairs)),
                        ("compliant", lambda: contact_wrenches(scene, states, pairs, np.zeros((len(pairs), 6))))):
        with collecting(ContactWarningLog()) as log:
            query()
        logs[name] = log.as_list()
    assert [(w["pair"], w["kind"], w["first_time"]) for w in logs["velocity"]] == \
        [(["slab", "deep"], "pass_through", 0.0)]
    assert logs["compliant"] == logs["regularised"]
    assert [(w["pair"], w["kind"], w["first_time"]) for w in logs["compliant"]] == \
        [(w["pair"], w["kind"], w["first_time"]) for w in logs["velocity"]]
    with pytest.raises(BuildError, match="rigid core") as regularised:
        simulate(scene, 0.002, 1e-3, "continuous")
    with pytest.raises(BuildError, match="rigid core") as compliant:
        simulate(scene, 0.002, 1e-3, "continuous", friction="compliant")
    assert str(compliant.value) == str(regularised.value)
