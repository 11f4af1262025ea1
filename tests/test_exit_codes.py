"""Every option a command refuses before doing work is a usage error: exit 2, a message naming
the option, no work started (no progress line, no output file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
BALL = ROOT / "assets" / "foam_ball.obj"
SCENE = ROOT / "assets" / "scenes" / "resting_box.toml"
MANIFEST = ROOT / "assets" / "manifest.toml"

BUILD = [
    (["--k", "1.5"], "--k must be in [0, 1)"),
    (["--modulus", "1e5", "--k", "-0.2"], "--k must be in [0, 1)"),
    (["--modulus", "1e5", "--k", "1"], "--k must be in [0, 1)"),
    (["--modulus", "0"], "--modulus must be a positive number"),
    (["--modulus", "1e5", "--edge-length", "-1"], "--edge-length must be a positive number"),
    (["--modulus", "1e5", "--units", "furlong"], "--units"),
    (["--modulus", "1e5", "--mu-static", "0.4", "--mu-dynamic", "0.5"], "--mu-dynamic (0.5) exceeds --mu-static (0.4)"),
    (["--modulus", "1e5", "--radius-edge", "0.5"], "--radius-edge must be at least 1.0"),
    (["--modulus", "1e5", "--bonded", "nonsense"], "--bonded: selector 'nonsense'"),
    (["--modulus", "1e5", "--drake-vtk", "x.stl"], "--drake-vtk 'x.stl' does not end in .vtk"),
    (["--modulus", "1e5", "--dissipation", "1", "--expansion-rate", "2"], "--dissipation and --expansion-rate"),
    (["--modulus", "1e5", "--skin", "1", "--core", "core.stl"], "--skin and --core"),
]


@pytest.mark.parametrize("flags, words", BUILD, ids=[" ".join(f) for f, _ in BUILD])
def test_build_refuses_before_work(tmp_path, flags, words):
    out = tmp_path / "ball.vtu"
    result = CliRunner().invoke(main, ["build", str(BALL), *flags, "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert words in result.stderr
    assert "load" not in result.stderr            # no stage started
    assert list(tmp_path.iterdir()) == []


def test_build_output_suffix(tmp_path):
    result = CliRunner().invoke(main, ["build", str(BALL), "--modulus", "1e5", "-o", str(tmp_path / "ball.stl")])
    assert result.exit_code == 2 and "does not end in .vtu" in result.stderr and "load" not in result.stderr


SIMULATE = [
    (["--dt", "0"], "--dt must be a positive number"),
    (["--duration", "-1"], "--duration must be a positive number"),
    (["--duration", "nan"], "--duration must be a positive number"),
    (["--record-every", "0"], "--record-every must be >= 1"),
    (["--integrator", "euler"], "Invalid value for '--integrator'"),
]


@pytest.mark.parametrize("flags, words", SIMULATE, ids=[" ".join(f) for f, _ in SIMULATE])
def test_simulate_refuses_before_work(flags, words):
    result = CliRunner().invoke(main, ["simulate", str(SCENE), *flags])
    assert result.exit_code == 2, result.output
    assert words in result.stderr and "steps" not in result.output


BATCH = [
    (["-j", "0"], "0 is not in the range"),
    (["--check", "--force"], "--check and --force both given"),
    (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler given without --executor dask"),
    (["--executor", "dask"], "--executor dask needs --scheduler"),
]


@pytest.mark.parametrize("flags, words", BATCH, ids=[" ".join(f) for f, _ in BATCH])
def test_batch_refuses_before_work(tmp_path, flags, words):
    result = CliRunner().invoke(main, ["batch", str(MANIFEST), "--output-dir", str(tmp_path), *flags])
    assert result.exit_code == 2, result.output
    assert words in result.stderr and list(tmp_path.iterdir()) == []


def test_validate_and_inspect_usage(tmp_path):
    assert CliRunner().invoke(main, ["validate"]).exit_code == 2
    assert CliRunner().invoke(main, ["inspect"]).exit_code == 2
    missing = CliRunner().invoke(main, ["inspect", str(tmp_path / "none.vtu")])
    assert missing.exit_code == 1 and "none.vtu" in missing.stderr      # a bad input file: the work failed
