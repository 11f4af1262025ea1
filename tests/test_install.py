"""The pip command in "install the extra" messages fits how fieldgen was installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fieldgen import install
from fieldgen.install import extra_command, extra_requirements, install_hint

ROOT = Path(__file__).resolve().parents[1]
ROBUST = ["pytetwild>=0.4", "pyvista>=0.43"]


def test_checkout_gets_an_editable_install_of_the_checkout():
    assert extra_command("robust", source_root="/src/fieldgen", requirements=ROBUST) == (
        "`pip install -e '/src/fieldgen[robust]'` (or the packages alone: "
        "`pip install 'pytetwild>=0.4' 'pyvista>=0.43'`)")


def test_paths_with_spaces_and_quotes_stay_one_shell_word():
    text = extra_command("dask", source_root="/my src/it's")
    assert text == """`pip install -e '/my src/it'"'"'s[dask]'`"""


def test_installed_from_a_folder_that_still_exists(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'fieldgen'\n")
    record = {"url": tmp_path.as_uri(), "dir_info": {}}
    assert extra_command("robust", direct_url=record) == f"`pip install '{tmp_path}[robust]'`"


def test_installed_from_an_index_wheel_or_vanished_folder(tmp_path):
    expected = "`pip install 'fieldgen[robust]'` (or the packages alone: `pip install 'pytetwild>=0.4' 'pyvista>=0.43'`)"
    assert extra_command("robust", requirements=ROBUST) == expected
    gone = {"url": (tmp_path / "gone").as_uri(), "dir_info": {}}
    assert extra_command("robust", direct_url=gone, requirements=ROBUST) == expected
    wheel = {"url": "https://example.org/fieldgen-0.1.0-py3-none-any.whl", "archive_info": {}}
    assert extra_command("robust", direct_url=wheel, requirements=ROBUST) == expected


def test_requirements_come_from_pyproject_or_the_installed_metadata(monkeypatch):
    assert extra_requirements("robust", ROOT) == ROBUST
    assert extra_requirements("dask", ROOT) == ["dask[distributed]>=2024.1"]
    from importlib import metadata

    monkeypatch.setattr(metadata, "requires", lambda name: [
        "numpy>=1.24", 'pytetwild>=0.4; extra == "robust"', "pyvista>=0.43 ; extra == 'robust'",
        'pytest>=7; extra == "test"'])
    assert extra_requirements("robust") == ROBUST


def test_this_checkout_and_an_installed_copy(monkeypatch):
    """Run from this checkout (the tests' venv is editable): the hint names the checkout. Installed
    elsewhere (no pyproject beside the package, no PEP 610 record): the index name."""
    assert install_hint("robust").startswith(f"`pip install -e '{ROOT}[robust]'`")
    monkeypatch.setattr(install, "source_root", lambda: None)
    monkeypatch.setattr(install, "_direct_url", lambda: None)
    assert install_hint("robust").startswith("`pip install 'fieldgen[robust]'`")


def test_messages_use_the_hint(monkeypatch):
    from fieldgen.errors import OptionError
    from fieldgen.meshing.ftetwild import import_pytetwild

    monkeypatch.setitem(sys.modules, "pytetwild", None)
    with pytest.raises(OptionError) as info:
        import_pytetwild("part.stl")
    assert f"pip install -e '{ROOT}[robust]'" in str(info.value)
    monkeypatch.setattr(install, "source_root", lambda: None)
    monkeypatch.setattr(install, "_direct_url", lambda: None)
    with pytest.raises(OptionError) as info:
        import_pytetwild("part.stl")
    assert "`pip install 'fieldgen[robust]'`" in str(info.value)
