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
    (["--modulus", "1e5", "--radius-edge", "nan"], "--radius-edge must be at least 1.0 (and finite), got nan"),
    (["--modulus", "1e5", "--bonded", "nonsense"], "--bonded: selector 'nonsense'"),
    (["--modulus", "1e5", "--drake-vtk", "x.stl"], "--drake-vtk 'x.stl' does not end in .vtk"),
    (["--modulus", "1e5", "--dissipation", "1", "--expansion-rate", "2"], "--dissipation and --expansion-rate"),
    (["--modulus", "1e5", "--skin", "1", "--core", "core.stl"], "--skin and --core"),
    # flags that would be ignored beside others
    (["--modulus", "1e5", "--edge-length", "0.01", "--accuracy", "0.02"], "--accuracy and --edge-length both given"),
    (["--modulus", "1e5", "--max-volume", "1e-6", "--accuracy", "0.02"], "--accuracy and --max-volume both given"),
    (["--modulus", "1e5", "--robust", "--skin", "0.01", "--accuracy", "0.02"], "--accuracy with --robust and --skin"),
    (["--modulus", "1e5", "--threads", "2"], "--threads given without --robust"),
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


# ---------------------------------------------------------------------------------------------
# Outputs that cannot be written are found before the work (exit 1), not after it with a trace.

def _blocked(tmp_path: Path) -> Path:
    """A folder path that cannot be made: its parent is a file."""
    (tmp_path / "file").write_text("not a folder\n")
    return tmp_path / "file" / "out"


def _asset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("asset") / "ball.vtu"
    result = CliRunner().invoke(main, ["build", str(BALL), "--modulus", "1e5", "--edge-length", "0.02",
                                       "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def ball_asset(tmp_path_factory) -> Path:
    return _asset(tmp_path_factory)


def _commands(asset: Path, blocked: Path) -> dict[str, list[str]]:
    return {
        "build -o": ["build", str(BALL), "--modulus", "1e5", "-o", str(blocked / "ball.vtu")],
        "build --drake-vtk": ["build", str(BALL), "--modulus", "1e5", "-o", str(blocked.parent.parent / "new" / "b.vtu"),
                              "--drake-vtk", str(blocked / "ball.vtk")],
        "batch --report": ["batch", str(MANIFEST), "--check", "--report", str(blocked / "r.json")],
        "batch --junit": ["batch", str(MANIFEST), "--check", "--junit", str(blocked / "j.xml")],
        "simulate -o": ["simulate", str(SCENE), "--duration", "0.01", "-o", str(blocked)],
        "inspect --png": ["inspect", str(asset), "--png", str(blocked / "a.png")],
        "inspect --paraview": ["inspect", str(asset), "--paraview", str(blocked / "v.py")],
        "contact -o": ["contact", str(asset), str(BALL), "--pose-b", "0,0,0.09,0,0,0", "-o", str(blocked / "s.vtp")],
        "contact --paraview": ["contact", str(asset), str(BALL), "--pose-b", "0,0,0.09,0,0,0",
                               "-o", str(blocked.parent.parent / "new" / "s.vtp"), "--paraview", str(blocked / "v.py")],
        "calibrate -o": ["calibrate", "--spec", str(ROOT / "assets" / "foam_pad.toml"), "--indenter", "plane",
                         "--target", "0.002:20", "-o", str(blocked / "c.vtu")],
        "calibrate --png": ["calibrate", "--spec", str(ROOT / "assets" / "foam_pad.toml"), "--indenter", "plane",
                            "--target", "0.002:20", "-o", str(blocked.parent.parent / "new" / "c.vtu"),
                            "--png", str(blocked / "fit.png")],
    }


COMMANDS = list(_commands(Path("a"), Path("b")))


@pytest.mark.parametrize("name", COMMANDS)
def test_an_output_that_cannot_be_written_is_refused_before_work(tmp_path, ball_asset, name):
    blocked = _blocked(tmp_path)
    result = CliRunner().invoke(main, _commands(ball_asset, blocked)[name])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "file" in result.stderr and "is a file, not a folder" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    for stage in ("load", "tetrahedralize", "steps", "fit"):       # nothing was started
        assert f"{stage} " not in result.stderr.lower().split("error:")[0], result.stderr
    # and nothing else was written, not even the folder of the command's other output ("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_prepare_output_creates_folders_and_refuses_what_it_cannot_write(tmp_path):
    import os

    from fieldgen.io.asset import prepare_output
    from fieldgen.errors import InputError

    made = prepare_output(tmp_path / "a" / "b" / "x.vtu")
    assert made == str(tmp_path / "a" / "b" / "x.vtu")
    assert list(tmp_path.iterdir()) == []          # nothing made: folders come with the write; probe gone
    prepare_output(tmp_path / "c" / "d", directory=True)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "a").mkdir()
    (tmp_path / "f").write_text("")
    with pytest.raises(InputError, match="is a folder, not a file"):
        prepare_output(tmp_path / "a")
    with pytest.raises(InputError, match="is a file, not a folder"):
        prepare_output(tmp_path / "f", directory=True)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o555)
    target = read_only / "x.vtu"
    if os.access(read_only, os.W_OK):          # root ignores mode bits: a read-only file system then
        target = Path("/proc/fieldgen-test/x.vtu")
    with pytest.raises(InputError, match="cannot write in"):
        prepare_output(target)


SCENE_FILES = [
    ("x = [\n", "not valid TOML"),
    ("duraton = 1\n", "unknown key 'duraton'"),
    ("[simulate]\nduraton = 1\n", "Did you mean 'duration'"),       # named even without a body
]


@pytest.mark.parametrize("text, words", SCENE_FILES, ids=["syntax", "top-level typo", "[simulate] typo"])
def test_a_scene_file_refused_as_written_is_a_usage_error(tmp_path, text, words):
    scene = tmp_path / "scene.toml"
    scene.write_text(text)
    result = CliRunner().invoke(main, ["simulate", str(scene)])
    assert result.exit_code == 2, result.output           # as a spec (build) or a manifest (batch)
    assert words in result.stderr and str(scene) in result.stderr


def test_calibrate_target_needs_a_spec_law(tmp_path):
    """--target rescales a spec's law; calibrate has no --modulus, so the message must not ask for it."""
    pad = ROOT / "assets" / "foam_pad.stl"
    alone = CliRunner().invoke(main, ["calibrate", str(pad), "--indenter", "plane", "--target", "0.002:20",
                                      "-o", str(tmp_path / "c.vtu")])
    assert alone.exit_code == 2 and "no --spec was given" in alone.stderr and "--modulus" not in alone.stderr
    spec = tmp_path / "nolaw.toml"
    spec.write_text(f'input = "{pad.as_posix()}"\nunits = "mm"\n')
    lawless = CliRunner().invoke(main, ["calibrate", "--spec", str(spec), "--indenter", "plane", "--target",
                                        "0.002:20", "-o", str(tmp_path / "c.vtu")])
    assert lawless.exit_code == 2 and "spec's law cannot be rescaled" in lawless.stderr
    assert "Set modulus" in lawless.stderr and "--modulus" not in lawless.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nolaw.toml"]


SUFFIXES = [
    (["inspect", "{asset}", "--png", "{tmp}/a.jpg"], "--png"),
    (["inspect", "{asset}", "--paraview", "{tmp}/v.txt"], "--paraview"),
    (["contact", "{asset}", str(BALL), "-o", "{tmp}/s.vtp", "--paraview", "{tmp}/v.txt"], "--paraview"),
    (["calibrate", "--spec", str(ROOT / "assets" / "foam_pad.toml"), "--indenter", "plane", "--target", "0.002:20",
      "-o", "{tmp}/c.vtu", "--png", "{tmp}/fit.jpg"], "--png"),
]


@pytest.mark.parametrize("args, flag", SUFFIXES, ids=["inspect --png", "inspect --paraview", "contact --paraview",
                                                      "calibrate --png"])
def test_an_output_of_the_wrong_kind_is_refused(tmp_path, ball_asset, args, flag):
    result = CliRunner().invoke(main, [a.format(asset=ball_asset, tmp=tmp_path) for a in args])
    assert result.exit_code == 2 and flag in result.stderr and "Name it FILE." in result.stderr, result.output
    assert list(tmp_path.iterdir()) == []


def test_a_command_that_fails_after_the_check_makes_no_folder(tmp_path):
    """The output's missing folders are made when it is written, so a failure before leaves none."""
    result = CliRunner().invoke(main, ["build", str(tmp_path / "missing.stl"), "--modulus", "1e5",
                                       "-o", str(tmp_path / "new" / "sub" / "x.vtu")])
    assert result.exit_code == 1 and "missing.stl" in result.stderr
    assert list(tmp_path.iterdir()) == []
    made = CliRunner().invoke(main, ["build", str(BALL), "--modulus", "1e5", "--edge-length", "0.03", "-q",
                                     "-o", str(tmp_path / "new" / "sub" / "x.vtu")])
    assert made.exit_code == 0 and (tmp_path / "new" / "sub" / "x.vtu").is_file()


def test_batch_refuses_an_unwritable_report_before_building(tmp_path, meshes):
    """Not with --check (which builds nothing anyway): the report's path is checked first."""
    import shutil

    shutil.copyfile(meshes / "unit_sphere.STL", tmp_path / "sphere.STL")
    manifest = tmp_path / "m.toml"
    manifest.write_text('[defaults]\nmodulus = 1e5\nedge_length = 0.5\n\n'
                        '[[asset]]\ninput = "sphere.STL"\noutput = "out/sphere.vtu"\n')
    blocked = _blocked(tmp_path)
    result = CliRunner().invoke(main, ["batch", str(manifest), "--report", str(blocked / "r.json"), "-q"])
    assert result.exit_code == 1 and "is a file, not a folder" in result.stderr, result.output
    assert not (tmp_path / "out").exists()                  # nothing was built


def test_options_that_would_be_ignored_are_refused_from_a_spec_and_a_manifest(tmp_path):
    """Not only on the command line: a spec's size beside --accuracy, and a manifest item with
    threads but no robust, are refused before any work (exit 2), naming both."""
    spec = tmp_path / "ball.toml"
    spec.write_text(f'input = "{BALL.as_posix()}"\nmodulus = 1e5\nedge_length = 0.01\n')
    result = CliRunner().invoke(main, ["build", "--spec", str(spec), "--accuracy", "0.02",
                                       "-o", str(tmp_path / "out" / "ball.vtu")])
    assert result.exit_code == 2 and "--accuracy and --edge-length both given" in result.stderr
    manifest = tmp_path / "m.toml"
    manifest.write_text(f'[[asset]]\ninput = "{BALL.as_posix()}"\noutput = "out/ball.vtu"\nmodulus = 1e5\n'
                        'threads = 2\n')
    result = CliRunner().invoke(main, ["batch", str(manifest), "-q"])
    assert result.exit_code == 2 and "): threads given without robust" in result.stderr, result.output   # keys as written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ball.toml", "m.toml"]


def test_a_spec_typo_names_the_near_key_in_a_sentence(tmp_path):
    """A misspelt spec key: exit 2, the near key suggested, and the list that follows starts a
    sentence of its own."""
    spec = tmp_path / "part.toml"
    spec.write_text("modulos = 1e5\n")
    result = CliRunner().invoke(main, ["build", str(ROOT / "assets" / "foam_pad.stl"), "--spec", str(spec),
                                       "-o", str(tmp_path / "x.vtu")])
    assert result.exit_code == 2, result.output
    assert "unknown option 'modulos'. Did you mean 'modulus'? Valid options here: accuracy," in result.stderr
    assert not (tmp_path / "x.vtu").exists()
