"""Hostile names and files a sweep found: file names that are not UTF-8 (Linux allows any byte),
an asset cache folder that cannot be made, assets whose metadata was edited (a null law, a word
for a number, arrays nested 100,000 deep), a legacy .vtk tet mesh whose tet points past its
points, and scene geometry keys naming a file of another type. Each is refused with its exit
code and a message naming the file, the problem and the fix, with no traceback and nothing
written; a batch output with unreadable metadata is stale and built again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.errors import OptionError
from fieldgen.io.asset import prepare_output
from asset_edit import with_metadata
from test_hostile_input import BALL, built_ball, scene, tampered, write
from test_hostile_sweep import _refused

ROOT = Path(__file__).resolve().parents[1]
PEPPER = ROOT / "tests" / "data" / "meshes" / "yellow_bell_pepper_no_stem_low.vtk"
BUILD = ["--modulus", "1e5", "--edge-length", "0.01", "-q"]
BAD = "bad\udcff"            # how Python gives a file name holding the byte 0xff
DEEP = 100_000


def _deep_metadata(src: Path, dst: Path) -> Path:
    """A copy of the asset ``src`` whose metadata holds a list nested :data:`DEEP` deep (written as
    text: no JSON library writes it)."""
    return with_metadata(src, dst, lambda text: '{"deep": ' + "[" * DEEP + "]" * DEEP + ", " + text[1:])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The inputs of every case, in one folder the cases only read."""
    import meshio  # lazy: only the damaged .vtk needs it

    folder = tmp_path_factory.mktemp("inputs")
    asset = built_ball(folder)
    (folder / f"{BAD}.vtu").write_bytes(asset.read_bytes())
    (folder / "ball.obj").write_bytes(BALL.read_bytes())
    write(folder / "manifest.toml", '[[asset]]\ninput = "ball.obj"\noutput = "ball.vtu"\nmodulus = 1e5\n'
                                    'edge_length = 0.01\n')
    tampered(asset, folder / "law_null.vtu", law=None)
    tampered(asset, folder / "length_word.vtu", characteristic_length="x")
    tampered(asset, folder / "dissipation_word.vtu", dissipation="x")
    _deep_metadata(asset, folder / "deep.vtu")
    pepper = meshio.read(PEPPER)
    pepper.cells[0].data[0, 0] = 1_000_000
    meshio.write(folder / "pep_past.vtk", pepper, binary=False)
    write(folder / "scene.toml", scene())
    for name, geometry in (("mesh_vtu", '{mesh = "asset.vtu"}'), ("vtk_stl", '{vtk = "ball.obj", modulus = 1e5}'),
                           ("vtk_vtu", '{vtk = "asset.vtu", modulus = 1e5}'), ("asset_obj", '{asset = "ball.obj"}'),
                           ("mesh_folder", '{mesh = ".."}'),
                           ("vtk_past", '{vtk = "pep_past.vtk", modulus = 1e5}')):
        write(folder / f"{name}.toml", scene(geometry=geometry))
    write(folder / "spec.toml", f'input = "{BALL}"\nmodulus = 1e5\nedge_length = 0.01\n')
    write(folder / "no_input_spec.toml", 'input = "missing.obj"\nmodulus = 1e5\nedge_length = 0.01\n')
    write(folder / "built.toml", scene(floor="", name="part", geometry='{build = "spec.toml"}'))
    write(folder / "built_missing.toml", scene(floor="", name="part", geometry='{build = "no_input_spec.toml"}'))
    return folder


NOT_UTF8 = "the name is not valid UTF-8"
NAMES = [
    ("build -o", ["build", str(BALL), *BUILD, "-o", f"{{o}}/{BAD}.vtu"], f"-o '{{o}}/bad\ufffd.vtu': {NOT_UTF8}"),
    ("build --output=", ["build", str(BALL), *BUILD, f"--output={{o}}/{BAD}.vtu"], f"--output '{{o}}/bad\ufffd"),
    ("contact -o", ["contact", "{i}/asset.vtu", str(BALL), "-o", f"{{o}}/{BAD}.vtp"], NOT_UTF8),
    ("simulate -o", ["simulate", "{i}/scene.toml", "-o", f"{{o}}/{BAD}"], f"-o '{{o}}/bad\ufffd'"),
    ("batch --output-dir", ["batch", "{i}/manifest.toml", "--output-dir", f"{{o}}/{BAD}"], "--output-dir"),
    ("inspect", ["inspect", f"{{i}}/{BAD}.vtu"], f"the argument '{{i}}/bad\ufffd.vtu': {NOT_UTF8}"),
    ("validate", ["validate", "{i}/asset.vtu", f"{{i}}/{BAD}.vtu"], NOT_UTF8),
    ("contact input", ["contact", f"{{i}}/{BAD}.vtu", str(BALL)], NOT_UTF8),
]


@pytest.mark.parametrize("args, words", [c[1:] for c in NAMES], ids=[c[0] for c in NAMES])
def test_a_name_that_is_not_utf8_is_refused_before_any_work(inputs, tmp_path, monkeypatch, args, words):
    """Exit 2 before any work (VTK opens UTF-8 names only), naming the path and the fix; nothing
    written (no empty folder either), and with --json one JSON answer."""
    out = str(tmp_path / "out")
    result = _refused(inputs, tmp_path, monkeypatch, args + ["--json"], 2,
                      words.replace("{i}", str(inputs)).replace("{o}", out))
    assert "Rename the file or folder" in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 2


def test_an_output_in_a_folder_whose_name_is_not_utf8_is_refused(tmp_path):
    """An output named relative to a folder that is not UTF-8 (the current one): refused at
    prepare_output, before the work, not by VTK after it."""
    with pytest.raises(OptionError, match=NOT_UTF8):
        prepare_output(tmp_path / BAD / "x.vtu")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("env", [{"FIELDGEN_CACHE": "/proc/fieldgen-cache"}, {"HOME": "{file}"},
                                 {"HOME": "/proc/nonexistent"}], ids=["under /proc", "HOME a file", "HOME missing"])
def test_a_cache_folder_that_cannot_be_made_is_named(inputs, tmp_path, env):
    home = write(tmp_path / "home", "a file")
    env = {key: value.replace("{file}", str(home)) for key, value in env.items()}
    env = {"FIELDGEN_CACHE": None, "XDG_CACHE_HOME": None, **env}
    result = CliRunner().invoke(main, ["simulate", str(inputs / "built.toml"), "-q"], env=env)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "cannot make the asset cache" in result.stderr and "Point FIELDGEN_CACHE at a folder" in result.stderr
    assert str(inputs / "spec.toml") in result.stderr


def test_a_build_spec_whose_input_is_missing_is_named(inputs, tmp_path):
    result = CliRunner().invoke(main, ["simulate", str(inputs / "built_missing.toml"), "-q"],
                                env={"FIELDGEN_CACHE": str(tmp_path / "cache")})
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert f"no_input_spec.toml: its input {inputs / 'missing.obj'} is not found" in result.stderr


TAMPERED = [
    ("law null", "law_null.vtu", "invalid asset, its metadata is wrong: law is not an object"),
    ("length a word", "length_word.vtu", "wrong: characteristic_length is 'x', not a finite number"),
    ("dissipation a word", "dissipation_word.vtu", "wrong: dissipation is 'x', not a finite number"),
    ("nested 100,000 deep", "deep.vtu", "fieldgen_metadata (201"),
]


@pytest.mark.parametrize("name, words", [c[1:] for c in TAMPERED], ids=[c[0] for c in TAMPERED])
@pytest.mark.parametrize("extra", [[], ["--json"], ["--png", "{o}/x.png"]], ids=["text", "json", "png"])
def test_inspect_refuses_an_asset_with_bad_metadata(inputs, tmp_path, monkeypatch, name, words, extra):
    """Exit 1 as for an invalid asset, naming the file and the key; no summary, no picture."""
    result = _refused(inputs, tmp_path, monkeypatch, ["inspect", f"{{i}}/{name}", *extra], 1, words)
    assert f"{inputs / name}: " in result.stderr and "with fieldgen build" in result.stderr


def test_batch_treats_an_output_with_deep_metadata_as_stale(inputs, tmp_path):
    folder = tmp_path / "chk"
    folder.mkdir()
    manifest = write(tmp_path / "m.toml", f'[[asset]]\ninput = "{BALL}"\noutput = "ball.vtu"\n'
                                          'modulus = 1e5\nedge_length = 0.01\n')
    _deep_metadata(inputs / "asset.vtu", folder / "ball.vtu")
    check = CliRunner().invoke(main, ["batch", str(manifest), "--check", "--output-dir", str(folder)])
    assert check.exit_code == 1, check.output
    assert isinstance(check.exception, SystemExit)
    assert "ball.vtu (not a readable asset)" in check.stderr
    built = CliRunner().invoke(main, ["batch", str(manifest), "--output-dir", str(folder), "-q"])
    assert built.exit_code == 0, built.output
    assert CliRunner().invoke(main, ["validate", str(folder / "ball.vtu"), "-q"]).exit_code == 0


PAST = "pep_past.vtk: its tets refer to points 0..1000000, but it has 667 points"
FILES = [
    ("contact: .vtk tet past the points", ["contact", "{i}/pep_past.vtk", str(BALL), "--modulus-a", "1e5"], 1, PAST),
    ("scene: .vtk tet past the points", ["simulate", "{i}/vtk_past.toml"], 1, PAST),
    ("scene: mesh = a .vtu", ["simulate", "{i}/mesh_vtu.toml"], 2,
     "mesh_vtu.toml: [[body]] 2 (box) geometry: mesh = 'asset.vtu' names a .vtu file, but mesh takes a rigid "
     "surface mesh"),
    ("scene: vtk = an .obj", ["simulate", "{i}/vtk_stl.toml"], 2,
     "vtk = 'ball.obj' names a .obj file, but vtk takes a legacy .vtk tet mesh. For a rigid surface mesh"),
    ("scene: vtk = a .vtu", ["simulate", "{i}/vtk_vtu.toml"], 2,
     "For a fieldgen asset (.vtu) write asset = 'asset.vtu'"),
    ("scene: asset = an .obj", ["simulate", "{i}/asset_obj.toml"], 2,
     "asset = 'ball.obj' names a .obj file, but asset takes a fieldgen asset (.vtu)"),
    ("scene: mesh = a folder", ["simulate", "{i}/mesh_folder.toml"], 1, "..: is a folder, not a file"),
]


@pytest.mark.parametrize("args, code, words", [c[1:] for c in FILES], ids=[c[0] for c in FILES])
def test_a_file_of_the_wrong_kind_is_refused(inputs, tmp_path, monkeypatch, args, code, words):
    _refused(inputs, tmp_path, monkeypatch, args, code, words)
