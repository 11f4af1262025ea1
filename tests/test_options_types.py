"""A library user's ``BuildOptions`` of the wrong types: ``checked()`` (and so ``build()``)
refuses each with an OptionError naming the option's flag, the value given and a fix, before any
other check can trip over it (a bare TypeError, a bool taken as 1 Pa, a string read as selectors
one letter at a time). Values of the right kinds, numpy's numbers among them, still pass."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest

from fieldgen.errors import OptionError
from fieldgen.option_kinds import KINDS
from fieldgen.options import OPTION_NAMES, BuildOptions, check_modulus_bounds, checked_in_layers, options_from_mapping
from fieldgen.pipeline import build

#: A valid base: the linear law needs a modulus.
BASE = {"modulus": 1e5}

#: (changes over BASE, the flag named, words the message holds)
WRONG = [
    ({"modulus": "1e5"}, "--modulus", ("must be a number", "'1e5'")),
    ({"modulus": True}, "--modulus", ("must be a number", "True")),
    ({"modulus": np.True_}, "--modulus", ("must be a number",)),
    ({"modulus": [1e5]}, "--modulus", ("must be a number", "[100000.0]")),
    ({"k": "0.3", "law": "hyperbolic"}, "--k", ("must be a number", "'0.3'")),
    ({"edge_length": (0.1,)}, "--edge-length", ("must be a number",)),
    ({"mu_static": None}, "--mu-static", ("must be a number", "None")),
    ({"accuracy": "1%"}, "--accuracy", ("must be a number",)),
    ({"bonded": "normal:0,0,-1"}, "--bonded", ("tuple", "'normal:0,0,-1'")),
    ({"insulated": "normal:0,0,1"}, "--insulated", ("tuple", "'normal:0,0,1'")),
    ({"bonded": ("normal:0,0,-1", 3)}, "--bonded", ("tuple of selector strings",)),
    ({"insulated": 5}, "--insulated", ("tuple of selector strings",)),
    ({"core": 3}, "--core", ("must be a path", "3")),
    ({"table": 1.5, "modulus": None}, "--table", ("must be a path", "1.5")),
    ({"drake_vtk": ["part.vtk"]}, "--drake-vtk", ("must be a path",)),
    ({"robust": "yes"}, "--robust", ("True or False", "'yes'")),
    ({"robust": 1}, "--robust", ("True or False",)),
    ({"estimate": "no"}, "--estimate", ("True or False", "'no'")),
    ({"threads": 2.5, "robust": True}, "--threads", ("whole number", "2.5")),
    ({"threads": "2", "robust": True}, "--threads", ("whole number", "'2'")),
    ({"threads": True, "robust": True}, "--threads", ("whole number",)),
    ({"units": 1000}, "--units", ("must be a string", "1000")),
    ({"units": None}, "--units", ("must be a string",)),
    ({"law": 1}, "--law", ("must be a string",)),
    ({"skin_mesh": b"band", "skin": 1.0}, "--skin-mesh", ("must be a string",)),
    ({"compression": None}, "--compression", ("must be a string",)),
]


def ids(case) -> str:
    return ",".join(f"{key}={value!r}" for key, value in case[0].items())


@pytest.mark.parametrize("changes, flag, words", WRONG, ids=[ids(case) for case in WRONG])
def test_a_wrong_type_is_refused_by_its_flag(changes, flag, words):
    with pytest.raises(OptionError) as caught:
        BuildOptions(**{**BASE, **changes}).checked()
    error = caught.value
    assert error.defect.startswith(f"{flag} must be"), error.defect
    for word in words:
        assert word in error.defect, error.defect
    assert error.fix and f"{flag[2:].replace('-', '_')}=" in error.fix, error.fix


def test_a_string_for_selectors_is_told_to_be_a_tuple():
    with pytest.raises(OptionError) as caught:
        BuildOptions(modulus=1e5, bonded="normal:0,0,-1").checked()
    assert "selector 'n'" not in str(caught.value)
    assert "bonded=('normal:0,0,-1',)" in caught.value.fix


def test_a_string_number_says_only_files_read_text():
    with pytest.raises(OptionError) as caught:
        BuildOptions(modulus="1e5").checked()
    assert "must be real number" not in str(caught.value)
    assert "spec and manifest files" in caught.value.fix


def test_nan_is_refused_by_the_positivity_check():
    with pytest.raises(OptionError, match="--modulus must be a positive number, got nan"):
        BuildOptions(modulus=math.nan).checked()


#: The cases ``build()`` is run with: one of each kind.
BUILT = [case for case in WRONG if ids(case) in ("modulus='1e5'", "modulus=True", "bonded='normal:0,0,-1'",
                                                  "robust='yes'", "threads=2.5,robust=True", "core=3")]


@pytest.mark.parametrize("changes, flag, words", BUILT, ids=[ids(case) for case in BUILT])
def test_build_refuses_a_wrong_type_before_any_work(tmp_path, changes, flag, words):
    with pytest.raises(OptionError) as caught:
        build(tmp_path / "missing.stl", tmp_path / "out.vtu", BuildOptions(**{**BASE, **changes}))
    assert caught.value.defect.startswith(f"{flag} must be") and all(w in caught.value.defect for w in words)
    assert list(tmp_path.iterdir()) == []


VALID = [
    {"modulus": 100000},
    {"modulus": np.float64(1e5)},
    {"modulus": np.float32(1e5), "edge_length": np.int64(2), "mu_static": np.float64(0.6)},
    {"modulus": np.int64(100000), "accuracy": np.float32(0.02), "surface_tolerance": np.float32(0.1)},
    {"law": "hyperbolic", "k": np.float64(0.3)},
    {"bonded": ["normal:0,0,-1"], "insulated": ("normal:0,0,1",)},
    {"core": Path("core.stl")},
    {"core": "core.stl", "drake_vtk": Path("part.vtk")},
    {"modulus": None, "table": Path("law.csv")},
    {"robust": True, "threads": 2},
    {"robust": True, "threads": np.int64(0)},
    {"estimate": True, "accuracy": 0.05, "edge_length": 1.0},
    {"units": "mm", "skin": 1.0, "skin_mesh": "cut", "compression": "zlib"},
]


@pytest.mark.parametrize("changes", VALID, ids=[ids((case,)) for case in VALID])
def test_values_of_every_kind_pass(changes):
    options = BuildOptions(**{**BASE, **changes})
    assert options.checked() is options


@pytest.mark.parametrize("modulus", [np.int64(10**14), np.float32(1e14), np.float64(1e14), np.float32(0.5)], ids=repr)
def test_the_modulus_bounds_hold_for_numpy_numbers(modulus):
    with pytest.raises(OptionError, match="--modulus .*(stiffer than any solid|softer than any gel)"):
        check_modulus_bounds(modulus)


def test_every_option_has_one_kind():
    assert set(KINDS) == set(OPTION_NAMES)
    assert [field.name for field in dataclasses.fields(BuildOptions)] == list(OPTION_NAMES)


def test_files_still_read_text_as_numbers_and_one_selector_as_a_list():
    options = options_from_mapping({"modulus": "1e5", "bonded": "normal:0,0,-1", "threads": 2, "robust": True})
    assert options.modulus == 1e5 and options.bonded == ("normal:0,0,-1",)
    assert options.checked() is options


def test_a_type_error_from_a_layer_is_named_by_its_key():
    options = BuildOptions(modulus=1e5, robust="yes")
    with pytest.raises(OptionError) as caught:
        checked_in_layers(options, [("m.toml", ["robust"])])
    assert caught.value.path == "m.toml" and caught.value.defect.startswith("robust must be True or False")


@pytest.mark.parametrize("modulus, words", [(1e14, "above"), (1e-3, "below")])
def test_a_library_modulus_past_any_material_is_refused_as_flags_and_files_are(modulus, words):
    """Before: only the command line and spec files applied the bounds; BuildOptions(modulus=1e14)
    passed checked() and built."""
    with pytest.raises(OptionError, match=re.escape(f"--modulus {modulus:g} Pa is {words}")):
        BuildOptions(modulus=modulus).checked()
