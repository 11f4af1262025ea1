"""Hostile input a fourth sweep found: an option given twice with two values (click kept the last
silently), a ``fieldgen simulate -o DIR`` over an older, longer run (its extra frames stayed, and
a reader of the folder saw a mixture of two runs), ``fieldgen batch --report``/``--junit`` paths
whose suffix said another format, and a path given as ``-`` (``simulate -o -`` made a folder
named ``-``). Each is refused with exit 2 and a message naming the option, the problem and the
fix, with no traceback, nothing written and the inputs unchanged; or, for simulate, the folder
holds this run's files and the user's own only (docs/cli.md, ``fieldgen simulate``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fieldgen.cli.build import build_command
from fieldgen.cli.common import check_given_once, options_given
from fieldgen.cli.main import main
from fieldgen.errors import InputError
from test_hostile_input import cube_obj, fingerprint, scene, write
from test_hostile_sweep import _refused

ROOT = Path(__file__).resolve().parents[1]
PAD_SPEC = ROOT / "assets" / "foam_pad.toml"
BUILD = ["--edge-length", "0.01", "-q"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The inputs of every case, in one folder the cases only read."""
    folder = tmp_path_factory.mktemp("inputs")
    write(folder / "cube.obj", "\n".join(cube_obj(0.02)) + "\n")
    write(folder / "scene.toml", scene())
    write(folder / "manifest.toml", '[[asset]]\ninput = "cube.obj"\nmodulus = 1e5\nedge_length = 0.01\n')
    return folder


CASES = [
    # an option given twice: click kept the last silently
    ("build --modulus twice", ["build", "{i}/cube.obj", *BUILD, "--modulus", "1", "--modulus", "2", "-o", "{o}/x.vtu"],
     2, "--modulus given twice (1 and 2): give it once"),
    ("build -o twice", ["build", "{i}/cube.obj", *BUILD, "--modulus", "1e5", "-o", "{o}/a.vtu", "-o", "{o}/b.vtu"],
     2, "-o/--output given twice ({o}/a.vtu and {o}/b.vtu): give it once"),
    ("build -o and --output", ["build", "{i}/cube.obj", *BUILD, "--modulus", "1e5", "-o", "a.vtu", "--output",
                               "b.vtu"], 2, "-o/--output given twice (-o a.vtu and --output b.vtu)"),
    ("build --output= and -o", ["build", "{i}/cube.obj", *BUILD, "--modulus", "1e5", "--output=a.vtu", "-o",
                                "b.vtu"], 2, "-o/--output given twice (--output a.vtu and -o b.vtu)"),
    ("build -qo run together", ["build", "{i}/cube.obj", "--modulus", "1e5", "-qoa.vtu", "-o", "b.vtu"], 2,
     "-o/--output given twice (a.vtu and b.vtu)"),
    ("batch --report= twice", ["batch", "{i}/manifest.toml", "--check", "--report=a.json", "--report", "b.json"], 2,
     "--report given twice (a.json and b.json)"),
    ("simulate --dt twice", ["simulate", "{i}/scene.toml", "-q", "--dt", "1e-3", "--dt=1e-4"], 2,
     "--dt given twice (1e-3 and 1e-4)"),
    ("build --modulus same then other", ["build", "{i}/cube.obj", *BUILD, "--modulus", "1", "--modulus", "1",
                                         "--modulus", "2", "-o", "{o}/x.vtu"], 2, "--modulus given twice (1 and 2)"),
    ("contact --pose-b twice", ["contact", "{i}/cube.obj", "{i}/cube.obj", "--pose-b", "0,0,1,0,0,0", "--pose-b",
                                "0,0,2,0,0,0"], 2, "--pose-b given twice (0,0,1,0,0,0 and 0,0,2,0,0,0)"),
    ("calibrate --units twice", ["calibrate", "--spec", str(PAD_SPEC), "--units", "mm,N", "--units", "m,N",
                                 "--indenter", "plane", "--target", "0.5:1", "-o", "{o}/x.vtu"], 2,
     "--units given twice (mm,N and m,N)"),
    # a report whose suffix names another format than the one written
    ("batch --report .xml", ["batch", "{i}/manifest.toml", "-j", "1", "--report", "{o}/report.xml"], 2,
     "--report {o}/report.xml: the JSON report is written as .json. Name it FILE.json."),
    ("batch --junit .json", ["batch", "{i}/manifest.toml", "-j", "1", "--junit", "{o}/junit.json"], 2,
     "--junit {o}/junit.json: the JUnit report is written as .xml. Name it FILE.xml."),
    # '-' is no stdout or stdin here: it would be a file or folder named '-'
    ("simulate -o -", ["simulate", "{i}/scene.toml", "-q", "-o", "-"], 2,
     "-o is -, which fieldgen does not read as stdin or write as stdout"),
    ("simulate -qo - run together", ["simulate", "{i}/scene.toml", "-qo", "-"], 2,
     "-o is -, which fieldgen does not read as stdin or write as stdout"),
    ("simulate -qo- run together", ["simulate", "{i}/scene.toml", "-qo-"], 2, "-o is -, which fieldgen does not"),
    ("build -qo '' run together", ["build", "{i}/cube.obj", "--modulus", "1e5", "-qo", ""], 2,
     "-o is an empty string, not a path"),
    ("batch --output-dir -", ["batch", "{i}/manifest.toml", "-j", "1", "--output-dir", "-"], 2, "--output-dir is -"),
    ("inspect -", ["inspect", "-"], 2, "an argument of fieldgen inspect is -, which fieldgen does not read"),
]


@pytest.mark.parametrize("args, code, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_is_refused(inputs, tmp_path, monkeypatch, args, code, words):
    words = words.replace("{o}", str(tmp_path / "out"))
    _refused(inputs, tmp_path, monkeypatch, args, code, words)


def test_repeatable_options_and_flags_may_repeat():
    """--bonded (multiple by design) and flags given twice pass; a value that looks like an option
    (a negative number) is a value, and nothing after -- is an option."""
    check_given_once(build_command, ["x.obj", "--bonded", "below:z=0", "--bonded", "above:z=1", "-q", "--quiet",
                                     "--json", "--json", "--k", "-1", "--", "--k", "2"])
    given = [(spelling, value) for spelling, _, value in options_given(build_command, [
        "-qo", "a.vtu", "--modulus=1", "--k", "-o", "--robust", "--units", "mm", "--", "-o", "b.vtu"])]
    assert given == [("-o", "a.vtu"), ("--modulus", "1"), ("--k", "-o"), ("--units", "mm")]


def test_the_same_value_given_twice_passes():
    """A repeat with the very same characters cannot be ambiguous: it passes (and only then)."""
    check_given_once(build_command, ["x.obj", "--modulus", "1", "--modulus", "1", "-o", "a.vtu", "--output=a.vtu",
                                     "-qoa.vtu"])
    with pytest.raises(SystemExit):
        check_given_once(build_command, ["x.obj", "--modulus", "1", "--modulus", "1.0"])


def simulate(inputs: Path, out: Path, duration: float, *extra: str):
    result = CliRunner().invoke(main, ["simulate", str(inputs / "scene.toml"), "--duration", str(duration),
                                       "--dt", "1e-3", "--record-every", "1", "-q", "-o", str(out), *extra])
    return result


def test_a_shorter_simulate_run_replaces_a_longer_one_and_keeps_the_users_files(inputs, tmp_path):
    """Frames 0..10 of a first (compliant) run, then 0..3 of a second (regularised) into the same
    folder: only the second run's frames are left (the .pvd series and any reader globbing frames/
    see one run), its tangential.csv is gone too, and the user's own files in the folder and in
    frames/ are kept, byte for byte."""
    out = tmp_path / "run"
    assert simulate(inputs, out, 0.01, "--friction", "compliant").exit_code == 0
    assert len(list((out / "frames").glob("bodies_*.vtp"))) == 11 and (out / "tangential.csv").is_file()
    write(out / "notes.txt", "mine")
    write(out / "frames" / "mine.vtp", "mine too")
    write(out / "frames" / "bodies_12.vtp", "not fieldgen's name (six digits)")
    result = simulate(inputs, out, 0.003)
    assert result.exit_code == 0, result.output
    frames = sorted(p.name for p in (out / "frames").iterdir())
    assert frames == ["bodies_000000.vtp", "bodies_000001.vtp", "bodies_000002.vtp", "bodies_000003.vtp",
                      "bodies_12.vtp", "contact_000000.vtp", "contact_000001.vtp", "contact_000002.vtp",
                      "contact_000003.vtp", "mine.vtp"]
    assert sorted(p.name for p in out.iterdir()) == ["bodies.pvd", "contact_surfaces.pvd", "frames", "notes.txt",
                                                     "trajectories.csv", "view.py"]
    assert (out / "notes.txt").read_text() == "mine" and (out / "frames" / "mine.vtp").read_text() == "mine too"
    assert (out / "bodies.pvd").read_text().count("<DataSet") == 4
    assert len((out / "trajectories.csv").read_text().splitlines()) == 1 + 4 * 2     # header, 4 times x 2 bodies
    assert str(out / "bodies.pvd") in (out / "view.py").read_text()       # the script names DIR, not a temporary


def test_a_simulate_run_that_fails_while_writing_leaves_the_older_run_as_it_was(inputs, tmp_path, monkeypatch):
    """The run is written into a temporary folder and moved in only when whole: a failure after
    the frames are written (here the ParaView script) leaves DIR byte for byte as the older run
    left it, and no temporary folder behind."""
    import fieldgen.runtime.scene.outputs as outputs

    out = tmp_path / "run"
    assert simulate(inputs, out, 0.01).exit_code == 0
    before = fingerprint(out)

    def fails(*_args, **_kwargs):
        raise InputError("could not write the ParaView script", path="view.py", fix="free some space")

    monkeypatch.setattr(outputs, "write_view_script", fails)
    result = simulate(inputs, out, 0.003)
    assert result.exit_code == 1 and "could not write the ParaView script" in result.stderr, result.output
    assert fingerprint(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert sorted(p.name for p in out.iterdir()) == ["bodies.pvd", "contact_surfaces.pvd", "frames",
                                                     "trajectories.csv", "view.py"]


def test_a_simulate_output_blocked_by_a_folder_leaves_the_older_run_as_it_was(inputs, tmp_path):
    """An output's place in DIR taken by a folder (here view.py) is found before any file is moved:
    the older run stays whole, byte for byte (the move used to replace the frames and series first,
    then fail on view.py, leaving a mix of two runs)."""
    out = tmp_path / "run"
    assert simulate(inputs, out, 0.01).exit_code == 0
    (out / "view.py").unlink()
    (out / "view.py").mkdir()
    before = fingerprint(out)
    result = simulate(inputs, out, 0.003)
    assert result.exit_code == 1 and "view.py is in the way of an output file" in result.stderr, result.output
    assert fingerprint(out) == before


def test_help_is_shown_whatever_options_are_repeated():
    """--help answers before the repeated-option check (a user asking how to use a command)."""
    result = CliRunner().invoke(main, ["contact", "a.vtu", "b.vtu", "--modulus-a", "1", "--modulus-a", "2", "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output, result.output


def test_a_first_simulate_run_makes_its_folder_whole(inputs, tmp_path):
    """A missing DIR (and its missing parent) is made by renaming the finished run onto it."""
    out = tmp_path / "new" / "run"
    result = simulate(inputs, out, 0.002)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["run"]
    assert len(list((out / "frames").iterdir())) == 6


def test_the_same_dt_given_twice_runs(inputs, tmp_path):
    """--dt 1e-3 --dt=1e-3 (the helper gives the first) is one time step, not a refusal."""
    result = simulate(inputs, tmp_path / "run", 0.002, "--dt=1e-3")
    assert result.exit_code == 0, result.output
    assert len(list((tmp_path / "run" / "frames").glob("bodies_*.vtp"))) == 3


def test_a_simulate_run_removes_only_what_the_older_run_listed(inputs, tmp_path):
    """After an older (regularised, 11 frames) run, a user's own files with fieldgen's names that
    its series did not list (frames/bodies_000999.vtp, contact_000011.vtp, tangential.csv) are
    kept, byte for byte, by a shorter run; the older run's listed frames past the new last are gone."""
    out = tmp_path / "run"
    assert simulate(inputs, out, 0.01).exit_code == 0
    assert not (out / "tangential.csv").exists()
    mine = {"tangential.csv": "my friction notes", "frames/bodies_000999.vtp": "mine",
            "frames/contact_000011.vtp": "mine too"}
    for name, text in mine.items():
        write(out / name, text)
    result = simulate(inputs, out, 0.003)
    assert result.exit_code == 0, result.output
    assert {name: (out / name).read_text() for name in mine} == mine
    assert sorted(p.name for p in (out / "frames").glob("bodies_0000*.vtp")) == [
        f"bodies_{k:06d}.vtp" for k in range(4)]
    assert sorted(p.name for p in (out / "frames").glob("contact_0000*.vtp")) == [
        f"contact_{k:06d}.vtp" for k in range(4)] + ["contact_000011.vtp"]


def test_a_series_that_is_not_fieldgens_removes_nothing(inputs, tmp_path):
    """A bodies.pvd and contact_surfaces.pvd in DIR that are not a run's series (here torn XML)
    list nothing: the frames beside them are the user's, and stay."""
    out = tmp_path / "run"
    assert simulate(inputs, out, 0.005).exit_code == 0
    for series in ("bodies.pvd", "contact_surfaces.pvd"):
        write(out / series, '<?xml version="1.0"?><VTKFile><Collection><DataSet file="frames/bodies_000005.vtp"')
    result = simulate(inputs, out, 0.002)
    assert result.exit_code == 0, result.output
    assert len(list((out / "frames").glob("bodies_*.vtp"))) == 6
    assert (out / "bodies.pvd").read_text().count("<DataSet") == 3


def test_a_symlinked_frames_folder_is_refused_and_not_followed(inputs, tmp_path):
    """A frames in DIR that links elsewhere is refused before any move: DIR and the folder it
    points at (holding a file of a frame's name) stay as they were."""
    out = tmp_path / "run"
    assert simulate(inputs, out, 0.005).exit_code == 0
    elsewhere = tmp_path / "elsewhere"
    (out / "frames").rename(elsewhere)
    (out / "frames").symlink_to(elsewhere, target_is_directory=True)
    before, outside = fingerprint(out), fingerprint(elsewhere)
    result = simulate(inputs, out, 0.002)
    assert result.exit_code == 1 and "is in the way of an output file" in result.stderr, result.output
    assert fingerprint(out) == before and fingerprint(elsewhere) == outside
    assert len(list(elsewhere.glob("bodies_*.vtp"))) == 6
