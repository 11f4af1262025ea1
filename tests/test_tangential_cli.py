"""Interfaces of tangential compliance: build options and metadata, scene overrides, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from fieldgen.options import BuildOptions
from fieldgen.pipeline import _tangential_metadata
from fieldgen.cli.main import main
from fieldgen.errors import OptionError
from fieldgen.meshing.tetmesh import box_grid
from fieldgen.runtime.contact.geometries import DEFAULT_TANGENTIAL_DAMPING, CompliantGeometry
from fieldgen.runtime.scene.primitives import rigid_box
from fieldgen.runtime.scene.load import load_scene
from fieldgen.runtime.contact.tangential import combined_tangential
from fieldgen.runtime.dynamics.contact_wrenches import pair_tangential

SCENES = Path(__file__).resolve().parent.parent / "assets" / "scenes"


def test_build_options_check_and_store_tangential_constants():
    with pytest.raises(OptionError, match="--tangential-stiffness"):
        BuildOptions(modulus=1e5, tangential_stiffness=-1.0).checked()
    with pytest.raises(OptionError, match="--tangential-damping"):
        BuildOptions(modulus=1e5, tangential_damping=float("nan")).checked()
    assert _tangential_metadata(BuildOptions(modulus=1e5)) == {}
    meta = _tangential_metadata(BuildOptions(modulus=1e5, tangential_stiffness=2e3).checked())
    assert meta == {"tangential": {"stiffness": 2e3, "damping": DEFAULT_TANGENTIAL_DAMPING}}


def test_asset_metadata_reaches_the_runtime_body():
    points, tets = box_grid(*(np.linspace(0, 0.01, 3),) * 3)
    asset = SimpleNamespace(points=points, tets=tets, pressure=1e5 * points[:, 2] / 0.01,
                            extent=points[:, 2] / 0.01, pressure_gradient=None,
                            metadata={"tangential": {"stiffness": 3e3, "damping": 7.0}})
    body = CompliantGeometry.from_asset_object(asset)
    assert (body.tangential_stiffness, body.tangential_damping) == (3e3, 7.0)


def test_pair_rule_springs_and_dampers_in_series():
    assert combined_tangential(2e3, 10.0, 2e3, 10.0) == (1e3, 5.0)
    assert combined_tangential(1e3, 4.0, 3e3, 12.0) == pytest.approx((750.0, 3.0))
    points, tets = box_grid(*(np.linspace(0, 0.01, 2),) * 3)
    soft = CompliantGeometry.from_arrays(points, tets, points[:, 2] * 1e7)
    soft.tangential_stiffness, soft.tangential_damping = 5e3, 2.0
    assert pair_tangential(soft, rigid_box([1, 1, 1])) == (5e3, 2.0)     # rigid: the soft side's


def test_scene_overrides_per_body(tmp_path):
    text = (SCENES / "compliant_incline.toml").read_text()
    scene, settings = load_scene(SCENES / "compliant_incline.toml")
    assert settings["friction"] == "compliant"
    assert scene.body("slab").geometry.tangential_stiffness == 1e3
    assert scene.body("slab").geometry.tangential_damping == 20.0
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("tangential_stiffness = 1e3", "tangential_stiffness = -5"))
    with pytest.raises(OptionError, match="tangential_stiffness = -5 is not a number > 0 and <= 1e"):
        load_scene(bad)                 # a scene value out of range: exit 2 (docs/cli.md, simulate)


def test_cli_refuses_compliant_friction_with_the_velocity_integrator(tmp_path):
    scene = SCENES / "resting_box.toml"
    run = CliRunner().invoke(main, ["simulate", str(scene), "--friction", "compliant", "--integrator", "velocity",
                                    "--quiet"])
    assert run.exit_code == 2
    assert "continuous" in run.output
    bogus = tmp_path / "bogus.toml"
    bogus.write_text(scene.read_text().replace("[simulate]", '[simulate]\nfriction = "sticky"'))
    run = CliRunner().invoke(main, ["simulate", str(bogus), "--quiet"])
    assert run.exit_code == 2 and "sticky" in run.output


@pytest.mark.slow
def test_cli_writes_tangential_csv(tmp_path):
    out = tmp_path / "out"
    run = CliRunner().invoke(main, ["simulate", str(SCENES / "compliant_incline.toml"), "--duration", "0.1",
                                    "--dt", "0.05", "-o", str(out), "--json", "--quiet"])
    assert run.exit_code == 0, run.output
    summary = json.loads(run.output)
    assert summary["friction"] == "compliant" and summary["integrator"] == "continuous"
    assert summary["tangential"][0]["body_b"] == "box"
    rows = (out / "tangential.csv").read_text().splitlines()
    assert rows[0].startswith("time,body_a,body_b,status,sliding_fraction,spring_energy,spring_fx")
    assert len(rows) == 1 + 3 and rows[-1].split(",")[3] in ("stick", "slide")


@pytest.mark.slow
def test_fieldgen_build_stores_and_refuses_tangential_constants(tmp_path):
    import trimesh

    from fieldgen.io.asset import read_asset

    cube = tmp_path / "cube.stl"
    trimesh.creation.box(extents=[0.02, 0.02, 0.02]).export(cube)
    out = tmp_path / "box.vtu"
    ok = CliRunner().invoke(main, ["build", str(cube), "--modulus", "1e5", "--bonded", "normal:0,0,-1",
                                   "--tangential-stiffness", "2e3", "--tangential-damping", "12", "-o", str(out),
                                   "--quiet"])
    assert ok.exit_code == 0, ok.output
    meta = read_asset(out).metadata
    assert meta["tangential"] == {"stiffness": 2e3, "damping": 12.0}
    assert meta["units"]["tangential_stiffness"] == "1/m" and meta["units"]["tangential_damping"] == "s/m"
    body = CompliantGeometry.from_asset(out)
    assert (body.tangential_stiffness, body.tangential_damping) == (2e3, 12.0)
    bad = CliRunner().invoke(main, ["build", str(cube), "--modulus", "1e5",
                                    "--tangential-stiffness", "0", "-o", str(tmp_path / "bad.vtu")])
    assert bad.exit_code == 2 and "--tangential-stiffness" in bad.output
