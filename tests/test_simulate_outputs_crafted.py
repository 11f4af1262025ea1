"""``fieldgen simulate -o DIR`` over a folder whose ``.pvd`` series were crafted to name files
outside it: the run removes only the files an older run's series listed that are fieldgen's own
names inside DIR (fieldgen.runtime.scene.outputs, module docstring), so nothing outside DIR is
removed or changed, whether named by a relative path out of DIR, by an absolute path, or reached
through a symlink in DIR."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.runtime.scene.outputs import RUN_FILES
from test_hostile_input import scene, write

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")


def _pvd(frames: list[str], run_files: list[str]) -> str:
    """A series in the form ParaView reads, written by hand: ``frames`` as its DataSets, the
    ``RUN_FILES`` comment naming ``run_files``."""
    lines = ['<?xml version="1.0"?>', '<VTKFile type="Collection" version="0.1">',
             f"  <!-- {RUN_FILES} {' '.join(run_files)} -->", "  <Collection>"]
    lines += [f'    <DataSet timestep="{k}" part="0" file="{name}"/>' for k, name in enumerate(frames)]
    return "\n".join(lines + ["  </Collection>", "</VTKFile>", ""])


def _state(root: Path, skip: Path) -> dict[str, tuple[str, str]]:
    """Every file and link under ``root`` but in ``skip``: its kind and content hash (a link: its target)."""
    found = {}
    for path in sorted(root.rglob("*")):
        if skip == path or skip in path.parents:
            continue
        if path.is_symlink():
            found[str(path.relative_to(root))] = ("link", os.readlink(path))
        elif path.is_file():
            found[str(path.relative_to(root))] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def _simulate(tmp_path: Path, out: Path):
    return CliRunner().invoke(main, ["simulate", str(tmp_path / "scene.toml"), "--duration", "0.002", "--dt", "1e-3",
                                     "--record-every", "1", "-q", "-o", str(out)])


@pytest.fixture
def outside(tmp_path) -> Path:
    """Files beside the output folder (tmp_path/run) that a crafted series names or links to."""
    write(tmp_path / "scene.toml", scene())
    folder = tmp_path / "elsewhere"
    (folder / "frames").mkdir(parents=True)
    write(tmp_path / "outside.vtp", "one folder up from DIR")
    write(tmp_path / "outside.csv", "one folder up from DIR, in the run-files comment")
    for name in ("absolute.vtp", "absolute.csv", "linked_frame.vtp", "linked_written.vtp", "linked_view.py",
                 "linked_tangential.csv", "frames/bodies_000009.vtp"):
        write(folder / name, f"the user's {name}, outside DIR")
    return folder


def test_series_naming_files_outside_the_folder_remove_nothing_outside_it(tmp_path, outside):
    """A series naming ``../outside.vtp``, ``frames/../../outside.vtp`` and absolute paths (as
    frames and in the run-files comment): all outside DIR, all kept; the file of fieldgen's name
    inside DIR that the series listed is removed (the clean-up did run)."""
    out = tmp_path / "run"
    (out / "frames").mkdir(parents=True)
    write(out / "frames" / "bodies_000007.vtp", "an older run's frame")
    frames = ["../outside.vtp", "frames/../../outside.vtp", str(outside / "absolute.vtp"),
              str(outside / "frames" / "bodies_000009.vtp"), "frames/bodies_000007.vtp"]
    run_files = ["../outside.csv", str(outside / "absolute.csv"), "trajectories.csv"]
    write(out / "bodies.pvd", _pvd(frames, run_files))
    write(out / "contact_surfaces.pvd", _pvd(frames[::-1], run_files))
    before = _state(tmp_path, out)
    result = _simulate(tmp_path, out)
    assert result.exit_code == 0, result.output
    assert _state(tmp_path, out) == before
    assert not (out / "frames" / "bodies_000007.vtp").exists()
    assert (out / "bodies.pvd").read_text().count("<DataSet") == 3


def test_frames_that_are_symlinks_to_files_outside_leave_those_files_as_they_were(tmp_path, outside):
    """Outputs in DIR that are symlinks to files outside it: a listed frame this run does not
    write, one it does, tangential.csv (listed, not written) and view.py. Their targets keep
    their content; this run's files are regular files in DIR."""
    out = tmp_path / "run"
    (out / "frames").mkdir(parents=True)
    links = {"frames/bodies_000009.vtp": "linked_frame.vtp", "frames/bodies_000000.vtp": "linked_written.vtp",
             "tangential.csv": "linked_tangential.csv", "view.py": "linked_view.py"}
    for name, target in links.items():
        os.symlink(outside / target, out / name)
    write(out / "bodies.pvd", _pvd(["frames/bodies_000000.vtp", "frames/bodies_000009.vtp"],
                                   ["tangential.csv", "view.py", "trajectories.csv"]))
    before = _state(tmp_path, out)
    result = _simulate(tmp_path, out)
    assert result.exit_code == 0, result.output
    assert _state(tmp_path, out) == before
    for target in links.values():
        assert (outside / target).read_text() == f"the user's {target}, outside DIR"
    for name in ("frames/bodies_000000.vtp", "view.py"):
        assert (out / name).is_file() and not (out / name).is_symlink()


def test_a_frames_folder_that_is_a_symlink_out_of_the_folder_is_refused_and_left_alone(tmp_path, outside):
    """DIR/frames a symlink to a folder outside, holding a frame of fieldgen's name the series
    lists: the run is refused before anything is moved, and that folder is as it was."""
    out = tmp_path / "run"
    out.mkdir()
    os.symlink(outside / "frames", out / "frames", target_is_directory=True)
    write(out / "bodies.pvd", _pvd(["frames/bodies_000009.vtp"], ["trajectories.csv"]))
    before, inside = _state(tmp_path, out), _state(out, out / "frames")
    result = _simulate(tmp_path, out)
    assert result.exit_code == 1 and "is in the way of an output file" in result.stderr, result.output
    assert _state(tmp_path, out) == before and _state(out, out / "frames") == inside
    assert sorted(p.name for p in (outside / "frames").iterdir()) == ["bodies_000009.vtp"]
