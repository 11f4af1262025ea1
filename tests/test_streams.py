"""The streams convention (docs/model.md §1.5): stdout holds only the report, everything else goes
to stderr, and every command takes ``-q``/``--quiet``, which silences progress, status lines and
the text report but never a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
BALL = ROOT / "assets" / "foam_ball.obj"
COMMANDS = ["build", "validate", "inspect", "batch", "contact", "simulate", "calibrate", "compile-kernels"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_quiet_and_json(command):
    text = invoke(command, "--help").stdout
    assert "-q, --quiet" in text and "--json" in text


@pytest.fixture(scope="module")
def undamped_ball(tmp_path_factory) -> Path:
    """A coarse ball built without damping (so its build warns) and without -q."""
    out = tmp_path_factory.mktemp("streams") / "ball.vtu"
    result = invoke("build", BALL, "--modulus", "1e5", "--edge-length", "0.03", "-o", out)
    assert result.exit_code == 0, result.output
    assert "tetrahedralize ..." in result.stderr and "warning: no damping given" in result.stderr
    assert result.stdout == ""                   # the result is the file; the status line is on stderr
    return out


@pytest.mark.parametrize("flags", [["-q"], ["-q", "--json"], ["--json"]])
def test_build_warnings_reach_stderr_whatever_quiet_and_json_say(tmp_path, flags):
    result = invoke("build", BALL, "--modulus", "1e5", "--edge-length", "0.03", "-o", tmp_path / "b.vtu", *flags)
    assert result.exit_code == 0, result.output
    assert "warning: no damping given" in result.stderr
    assert ("tetrahedralize ..." in result.stderr) == ("-q" not in flags)
    if "--json" in flags:
        report = json.loads(result.stdout)
        assert any(w.startswith("no damping given") for w in report["warnings"])
    else:
        assert result.stdout == ""


def test_inspect_quiet_prints_nothing_but_json_keeps_the_report(undamped_ball, tmp_path):
    loud = invoke("inspect", undamped_ball)
    assert loud.exit_code == 0 and "ball.vtu" in loud.stdout
    assert f"read {undamped_ball} ..." in loud.stderr and "summary done in" in loud.stderr
    quiet = invoke("inspect", undamped_ball, "-q", "--png", tmp_path / "b.png")
    assert quiet.exit_code == 0 and quiet.stdout == "" and quiet.stderr == ""
    assert (tmp_path / "b.png").stat().st_size > 0          # the work is done, only silently
    data = json.loads(invoke("inspect", undamped_ball, "-q", "--json").stdout)
    assert data["tets"] > 0 and any(w.startswith("no damping given") for w in data["warnings"])


def test_contact_quiet_silences_progress_and_report_but_not_its_warning(undamped_ball, plate):
    """A sliding plate without a friction coefficient: the pair has none, and the warning says so
    even with -q."""
    from fieldgen.runtime.contact.geometries import load_body

    bottom = float(load_body(undamped_ball).points[:, 2].min())
    pose = f"0,0,{bottom + 0.003},0,0,0"
    loud = invoke("contact", undamped_ball, plate, "--pose-b", pose, "--velocity-b", "0.1,0,0,0,0,0")
    assert loud.exit_code == 0, loud.output
    assert "force on B" in loud.stdout and "contact ..." in loud.stderr
    quiet = invoke("contact", undamped_ball, plate, "--pose-b", pose, "--velocity-b", "0.1,0,0,0,0,0", "-q")
    assert quiet.exit_code == 0 and quiet.stdout == ""
    assert quiet.stderr.startswith("warning: ") and "friction coefficient 0" in quiet.stderr
    assert "contact ..." not in quiet.stderr
    data = json.loads(invoke("contact", undamped_ball, plate, "--pose-b", pose, "--velocity-b",
                             "0.1,0,0,0,0,0", "-q", "--json").stdout)
    assert data["faces"] > 0 and data["force"][2] < 0 and data["friction"] == 0.0
    assert any("friction coefficient 0" in w for w in data["warnings"])


def test_a_stage_that_fails_is_reported_stopped_not_done(tmp_path):
    junk = tmp_path / "junk.vtu"
    junk.write_text("not an asset\n")
    result = invoke("inspect", junk)
    assert result.exit_code == 1 and result.stdout == ""
    assert f"read {junk} stopped after" in result.stderr and "done in" not in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith(f"error: {junk}: ")
    assert "Give a .vtu asset written by fieldgen build." in result.stderr     # the fix, as a sentence


def test_validate_reports_on_stdout_and_progress_on_stderr(undamped_ball):
    loud = invoke("validate", undamped_ball)
    assert loud.exit_code == 0 and loud.stdout.startswith(f"{undamped_ball}: valid (")
    assert f"validate {undamped_ball} done in" in loud.stderr
    quiet = invoke("validate", undamped_ball, "-q")
    assert quiet.exit_code == 0 and quiet.stdout == "" and quiet.stderr == ""


def test_a_refused_flag_is_the_last_word_and_no_load_starts(undamped_ball, plate):
    result = invoke("contact", undamped_ball, plate, "--units-a", "mm")
    assert result.exit_code == 2 and "load " not in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith(f"error: {undamped_ball}: --units-a applies")


def test_validate_lists_failures_on_stdout_even_when_quiet(undamped_ball, tmp_path):
    junk = tmp_path / "junk.vtu"
    junk.write_text("not an asset\n")
    result = invoke("validate", undamped_ball, junk, "-q")
    assert result.exit_code == 1 and result.stderr == ""
    assert result.stdout.startswith(f"{junk}: INVALID\n  readable: ") and str(undamped_ball) not in result.stdout
