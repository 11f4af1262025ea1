"""Hostile input a sixth sweep found: TOML integers outside TOML's 64 bits and arrays nested
hundreds deep in specs, manifests and scenes (Python's OverflowError, ValueError or
RecursionError tracebacks), ``--threads`` past any machine's cores (refused by fTetWild's binding
after the surface was read, as a mesher error), a spec's string option of the wrong type whose
fix named ``units``, assets whose nested metadata has the wrong shape (``"skin": [1]``, a word for
a count: tracebacks in ``inspect``), a .vtu whose header declares 1e11 points (vtk's
``std::bad_alloc`` ended the process: ``inspect``, ``validate``, ``contact`` and a whole ``batch``
over a damaged output), a pipe at a batch item's output (``--check`` waited for a writer for
ever), a NUL character in a spec's or manifest's path (a ValueError traceback), a manifest item's
spec that is a folder or a pipe (called "not found"), and empty GLB, PLY and OFF files (named by their readers' own words: "index 0 is out of bounds").
Each is refused with its exit code and a message naming the file or option, the problem and the
fix, with no traceback, nothing written and the inputs unchanged; a batch builds a damaged output
again."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from test_hostile_input import built_ball, cube_obj, tampered, write
from test_hostile_sweep import FIELDGEN, _refused

BIG = "1" + "0" * 400                      # 1e400: an integer no float holds
HUGE = "9" * 5000                          # past the 4300 digits Python's int() reads
DEEP = "[" * 1000 + "]" * 1000             # tomllib recurses once a level
SPEC = "edge_length = 0.01\n"
SCENE = ('[[body]]\nname = "box"\ngeometry = {shape = "box", size = [0.02, 0.02, 0.02]}\nmass = 0.1\n'
         'position = [0, 0, 0.06]\n')


def _damaged_header(src: Path, dst: Path, points: int = 10**11) -> Path:
    """A copy of the asset ``src`` whose <Piece> declares ``points`` points (the data unchanged)."""
    data = re.sub(rb'NumberOfPoints="\d+"', f'NumberOfPoints="{points}"'.encode(), src.read_bytes(), count=1)
    return write(dst, data)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The inputs of every case, in one folder the cases only read."""
    folder = tmp_path_factory.mktemp("inputs")
    asset = built_ball(folder)
    write(folder / "cube.obj", "\n".join(cube_obj(0.02)) + "\n")
    write(folder / "big.toml", f"modulus = {BIG}\n{SPEC}")
    write(folder / "huge.toml", f"modulus = {HUGE}\n{SPEC}")
    write(folder / "deep.toml", f"modulus = 1e5\n{SPEC}bonded = {DEEP}\n")
    write(folder / "big_manifest.toml", f'[defaults]\nmodulus = {BIG}\n[[asset]]\ninput = "cube.obj"\n')
    write(folder / "deep_manifest.toml", f'[defaults]\nmodulus = 1e5\n[[asset]]\ninput = "cube.obj"\nx = {DEEP}\n')
    write(folder / "big_scene.toml", f"[simulate]\nduration = {BIG}\n{SCENE}")
    write(folder / "deep_scene.toml", f"[simulate]\nduration = 0.01\n{SCENE}inertia = {DEEP}\n")
    write(folder / "threads.toml", f"modulus = 1e5\n{SPEC}robust = true\nthreads = 100000000000\n")
    write(folder / "compression.toml", f'modulus = 1e5\n{SPEC}compression = ["none"]\n')
    tampered(asset, folder / "skin_list.vtu", skin=[1])
    tampered(asset, folder / "skin_cut_depth.vtu", skin={"thickness": 0.001, "skin_volume_fraction": 0.5,
                                                            "cut_depth": [1.0, 1.0, 1.0]})
    tampered(asset, folder / "estimate_word.vtu", error_estimate={"extent": "x", "pressure": 0.01,
                                                                  "characteristic_length": 0.01})
    tampered(asset, folder / "faces_list.vtu", **{"boundary.faces": [1]})
    tampered(asset, folder / "core_word.vtu", **{"boundary.core": "core.obj"})
    tampered(asset, folder / "bonded_number.vtu", **{"boundary.bonded": 5})
    tampered(asset, folder / "extent_number.vtu", law={"kind": "table", "modulus": 1e5, "extent": 5,
                                                       "pressure": [0.0, 1e5]})
    write(folder / "nul_output.toml", f'[defaults]\nmodulus = 1e5\n{SPEC}[[asset]]\ninput = "cube.obj"\n'
                                      'output = "a\\u0000b.vtu"\n')
    write(folder / "nul_input.toml", f'input = "cube\\u0000.obj"\nmodulus = 1e5\n{SPEC}')
    write(folder / "nul_core.toml", f'core = "core\\u0000.obj"\nmodulus = 1e5\n{SPEC}')
    (folder / "spec_folder").mkdir()
    write(folder / "spec_folder.toml", '[[asset]]\ninput = "cube.obj"\nspec = "spec_folder"\nmodulus = 1e5\n')
    os.mkfifo(folder / "pipe.toml")
    write(folder / "spec_pipe.toml", '[[asset]]\ninput = "cube.obj"\nspec = "pipe.toml"\nmodulus = 1e5\n')
    for name in ("empty.glb", "empty.ply", "empty.off"):
        write(folder / name, b"")
    return folder


BUILD = ["--modulus", "1e5", "--edge-length", "0.01", "-q"]
TOML_RANGE = "is an integer outside TOML's 64-bit range (±9.2e+18); write a large number with an exponent"
CASES = [
    # TOML integers past 64 bits: an OverflowError traceback (float() of the int) or, past 4300
    # digits, a ValueError one inside tomllib; arrays nested deep: a RecursionError one
    ("spec integer of 401 digits", ["build", "{i}/cube.obj", "--spec", "{i}/big.toml", "-o", "{o}/x.vtu"], 2,
     f"big.toml: not valid TOML (modulus {TOML_RANGE}"),
    ("spec integer of 5000 digits", ["build", "{i}/cube.obj", "--spec", "{i}/huge.toml", "-o", "{o}/x.vtu"], 2,
     "huge.toml: not valid TOML (an integer of thousands of digits is outside TOML's 64-bit range"),
    ("spec array nested 1000 deep", ["build", "{i}/cube.obj", "--spec", "{i}/deep.toml", "-o", "{o}/x.vtu"], 2,
     "deep.toml: not valid TOML (arrays or inline tables nested deeper than a TOML reader follows)"),
    ("manifest integer of 401 digits", ["batch", "{i}/big_manifest.toml", "--output-dir", "{o}"], 2,
     f"big_manifest.toml: not valid TOML (defaults.modulus {TOML_RANGE}"),
    ("manifest array nested 1000 deep", ["batch", "{i}/deep_manifest.toml", "--output-dir", "{o}"], 2,
     "deep_manifest.toml: not valid TOML (arrays or inline tables nested deeper"),
    ("scene integer of 401 digits", ["simulate", "{i}/big_scene.toml"], 2,
     f"big_scene.toml: not valid TOML (simulate.duration {TOML_RANGE}"),
    ("scene array nested 1000 deep", ["simulate", "{i}/deep_scene.toml"], 2,
     "deep_scene.toml: not valid TOML (arrays or inline tables nested deeper"),
    # --threads past 32 bits: exit 1 after the surface was read, fTetWild's "incompatible function arguments"
    ("--threads 1e11", ["build", "{i}/cube.obj", *BUILD, "--robust", "--threads", "100000000000", "-o", "{o}/x.vtu"],
     2, "--threads 100000000000 is more than any machine has cores (above 4096)"),
    ("spec threads = 1e11", ["build", "{i}/cube.obj", "--spec", "{i}/threads.toml", "-o", "{o}/x.vtu"], 2,
     "threads.toml: threads 100000000000 is more than any machine has cores"),
    # the fix named another key
    ("spec compression a list", ["build", "{i}/cube.obj", "--spec", "{i}/compression.toml", "-o", "{o}/x.vtu"], 2,
     "option 'compression' must be a string, got ['none']. Write e.g. compression = \"zlib\""),
    # nested metadata of the wrong shape: an AttributeError, TypeError or ValueError traceback
    ("inspect: skin a list", ["inspect", "{i}/skin_list.vtu"], 1, "its metadata is wrong: skin is [1], not an object"),
    ("inspect: skin.cut_depth of three", ["inspect", "{i}/skin_cut_depth.vtu", "--json"], 1,
     "skin.cut_depth is [1.0, 1.0, 1.0], not two numbers"),
    ("inspect: error_estimate.extent a word", ["inspect", "{i}/estimate_word.vtu"], 1,
     "error_estimate.extent is 'x', not a number"),
    ("inspect: boundary.faces a list", ["inspect", "{i}/faces_list.vtu"], 1,
     "boundary.faces is [1], not an object of face counts"),
    ("inspect: boundary.core a word", ["inspect", "{i}/core_word.vtu"], 1, "boundary.core is 'core.obj', not an object"),
    ("inspect: boundary.bonded a number", ["inspect", "{i}/bonded_number.vtu"], 1,
     "boundary.bonded is 5, not a list of selector strings"),
    ("inspect: law.extent a number", ["inspect", "{i}/extent_number.vtu"], 1, "law.extent is 5, not a list of extents"),
    # a NUL in a path key: a ValueError traceback ("embedded null byte") from the first os call
    ("manifest output with a NUL", ["batch", "{i}/nul_output.toml", "-j", "1"], 2,
     "[[asset]] 1 (cube.obj): option 'output' = 'a\\x00b.vtu' holds a NUL character (\\u0000), which no file name"),
    ("spec input with a NUL", ["build", "--spec", "{i}/nul_input.toml", "-o", "{o}/x.vtu"], 2,
     "nul_input.toml: option 'input' = 'cube\\x00.obj' holds a NUL character"),
    ("spec core with a NUL", ["build", "{i}/cube.obj", "--spec", "{i}/nul_core.toml", "-o", "{o}/x.vtu"], 2,
     "nul_core.toml: option 'core' = 'core\\x00.obj' holds a NUL character"),
    # a spec that is there but no file was "not found"
    ("manifest spec a folder", ["batch", "{i}/spec_folder.toml", "--output-dir", "{o}"], 2,
     "[[asset]] 1 (cube.obj): spec {i}/spec_folder is a folder, not a spec file"),
    ("manifest spec a pipe", ["batch", "{i}/spec_pipe.toml", "--output-dir", "{o}"], 2,
     "spec {i}/pipe.toml is a named pipe (FIFO), not a spec file"),
    # empty files: "index 0 is out of bounds", "Not a ply file!", "not enough values to unpack"
    ("build an empty GLB", ["build", "{i}/empty.glb", *BUILD, "-o", "{o}/x.vtu"], 1,
     "empty.glb: no mesh could be read from the surface file (0 vertices, 0 faces): it is empty"),
    ("build an empty PLY", ["build", "{i}/empty.ply", *BUILD, "-o", "{o}/x.vtu"], 1, "it is empty, cut short or not .ply"),
    ("contact an empty OFF", ["contact", "{i}/asset.vtu", "{i}/empty.off"], 1,
     "empty.off: the file holds no triangles (0 faces)"),
]


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("args, code, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_is_refused(inputs, tmp_path, monkeypatch, args, code, words):
    _refused(inputs, tmp_path, monkeypatch, args, code, words.replace("{i}", str(inputs)))


@pytest.mark.parametrize("command", [["inspect", "{a}"], ["validate", "{a}"], ["contact", "{a}", "{i}/cube.obj"]],
                         ids=["inspect", "validate", "contact"])
def test_an_asset_whose_header_declares_1e11_points_is_refused(inputs, tmp_path, command):
    """Before: vtk allocated the declared arrays, could not, and ended the process (SIGABRT, a C++
    std::bad_alloc). Run in a child process: before the fix it would take pytest with it."""
    damaged = _damaged_header(inputs / "asset.vtu", tmp_path / "damaged.vtu")
    args = [a.replace("{a}", str(damaged)).replace("{i}", str(inputs)) for a in command]
    done = subprocess.run([*FIELDGEN, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    message = "damaged.vtu: its header declares 600,000,0"
    assert message in (done.stdout if command[0] == "validate" else done.stderr), done.stdout + done.stderr
    assert "more than its" in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.vtu"]


def test_a_batch_builds_an_output_with_a_damaged_header_again(inputs, tmp_path):
    """Before: reading the output's cache key ended the whole batch (SIGABRT), no report, no item
    built. Now it is an unreadable output, stale, and built again."""
    write(tmp_path / "cube.obj", (inputs / "cube.obj").read_bytes())
    _damaged_header(inputs / "asset.vtu", tmp_path / "cube.vtu")
    write(tmp_path / "m.toml", '[defaults]\nmodulus = 1e5\nedge_length = 0.01\n[[asset]]\ninput = "cube.obj"\n')
    done = subprocess.run([*FIELDGEN, "batch", "m.toml", "-j", "1", "--json", "-q"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [item["status"] for item in json.loads(done.stdout)["items"]] == ["built"]
    assert CliRunner().invoke(main, ["validate", str(tmp_path / "cube.vtu"), "-q"]).exit_code == 0


def test_a_batch_over_a_pipe_at_an_output_ends(inputs, tmp_path):
    """Before: ``--check`` opened the pipe to read its cache key and waited for a writer for ever.
    Now it is stale (named so); the build writes the asset in its place, as ``build -o`` does."""
    write(tmp_path / "cube.obj", (inputs / "cube.obj").read_bytes())
    os.mkfifo(tmp_path / "cube.vtu")
    write(tmp_path / "m.toml", '[defaults]\nmodulus = 1e5\nedge_length = 0.01\n[[asset]]\ninput = "cube.obj"\n')
    check = subprocess.run([*FIELDGEN, "batch", "m.toml", "-j", "1", "--check"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 1, check.stderr
    assert "would rebuild cube.vtu (not a readable asset: it is a named pipe (FIFO))" in check.stderr
    built = subprocess.run([*FIELDGEN, "batch", "m.toml", "-j", "1", "-q"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "cube.vtu").is_file()


def test_an_asset_whose_counts_fit_its_bytes_is_read(inputs, tmp_path):
    """The bound is the file's bytes (a value a byte at least uncompressed, deflate's and LZ4's
    largest ratios compressed): the assets as built pass it in every encoding."""
    for compression in ("none", "zlib", "lz4"):
        asset = tmp_path / f"{compression}.vtu"
        built = CliRunner().invoke(main, ["build", str(inputs / "cube.obj"), *BUILD, "--compression", compression,
                                          "-o", str(asset)])
        assert built.exit_code == 0, built.output
        assert CliRunner().invoke(main, ["validate", str(asset), "-q"]).exit_code == 0, compression
