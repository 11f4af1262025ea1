"""Modulus laws p0 = M(e)·e (docs/model.md §2.3, D 5.1.2) against closed forms, and table refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.interpolate import CubicSpline

from fieldgen.errors import InputError, OptionError
from fieldgen.material.modulus import (hyperbolic_law, law_from_metadata, linear_law, table_law,
                              table_law_from_points)

E = np.linspace(0.0, 1.0, 1001)


def test_linear_law_is_modulus_times_extent():
    law = linear_law(2.5e5)
    np.testing.assert_array_equal(law.pressure(E), 2.5e5 * E)
    assert law.max_pressure == 2.5e5
    assert law.to_metadata() == {"kind": "linear", "modulus": 2.5e5, "unit": "Pa"}


def test_hyperbolic_law_matches_eq_5_4():
    m0, k = 1.0e5, 0.9
    law = hyperbolic_law(m0, k)
    expected = (m0 / (1.0 - k * E)) * E           # M(e)·e with M = M0/(1 - k e)
    np.testing.assert_allclose(law.pressure(E), expected, rtol=1e-15, atol=0)
    assert law.max_pressure == pytest.approx(m0 / (1 - k), rel=1e-15)
    assert law.pressure(np.array([1.0]))[0] == pytest.approx(1.0e6, rel=1e-14)
    # k = 0 is the linear law
    np.testing.assert_allclose(hyperbolic_law(m0, 0.0).pressure(E), m0 * E, rtol=1e-15)


@pytest.mark.parametrize("modulus", [0.0, -1.0, float("nan"), float("inf"), "abc"])
def test_bad_modulus_is_refused(modulus):
    with pytest.raises(OptionError, match="modulus"):
        linear_law(modulus)


@pytest.mark.parametrize("k", [-0.1, 1.0, 1.5, float("nan")])
def test_hyperbolic_k_outside_0_1_is_refused(k):
    with pytest.raises(OptionError, match="k"):
        hyperbolic_law(1e5, k)


def test_table_interpolates_through_points_and_never_overshoots():
    # A step-like monotone curve: a cubic spline overshoots it, PCHIP must not.
    e = np.array([0.0, 0.3, 0.5, 0.55, 0.6, 1.0])
    p = np.array([0.0, 0.0, 10.0, 900.0, 1000.0, 1000.0])
    law = table_law_from_points(e, p)
    np.testing.assert_allclose(law.pressure(e), p, rtol=1e-14, atol=1e-9)
    x = np.linspace(0, 1, 20001)
    y = law.pressure(x)
    assert np.all(np.diff(y) >= -1e-9), "interpolant must be monotone"
    seg = np.searchsorted(e, x, side="right") - 1
    seg = np.clip(seg, 0, len(e) - 2)
    assert np.all(y >= p[seg] - 1e-9) and np.all(y <= p[seg + 1] + 1e-9)
    # the same test catches an overshooting interpolant (so it can fail)
    spline = CubicSpline(e, p)(x)
    assert np.any(spline > p[seg + 1] + 1e-6) or np.any(spline < p[seg] - 1e-6)
    assert law.max_pressure == 1000.0 and law.modulus == 1000.0


def test_table_from_csv_with_header_and_comments(tmp_path):
    path = tmp_path / "foam.csv"
    path.write_text("# foam, characterised\nextent,pressure\n0,0\n0.5, 2000\n1.0,10000\n")
    law = table_law(path)
    assert law.table_extent == (0.0, 0.5, 1.0)
    assert law.table_pressure == (0.0, 2000.0, 10000.0)
    assert law.pressure(np.array([0.5]))[0] == pytest.approx(2000.0, rel=1e-14)
    # header is optional
    bare = tmp_path / "bare.csv"
    bare.write_text("0,0\n0.5,2000\n1,10000\n")
    assert table_law(bare) == law


def _refusal(tmp_path, text):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        table_law(path)
    message = str(info.value)
    assert str(path) in message and info.value.fix
    return message


def test_table_refuses_decreasing_pressure_naming_the_row(tmp_path):
    message = _refusal(tmp_path, "extent,pressure\n0,0\n0.4,500\n0.7,400\n1,900\n")
    assert "row 4" in message and "400" in message and "decrease" in message


def test_table_refuses_repeated_extent(tmp_path):
    message = _refusal(tmp_path, "0,0\n0.5,1\n0.5,2\n1,3\n")
    assert "row 3" in message and "strictly increasing" in message


def test_table_refuses_nonzero_pressure_at_zero_extent(tmp_path):
    message = _refusal(tmp_path, "extent,pressure\n0,10\n1,100\n")
    assert "row 2" in message and "p0(0)" in message


def test_table_refuses_garbage_naming_the_row(tmp_path):
    message = _refusal(tmp_path, "extent,pressure\n0,0\n0.5,abc\n1,100\n")
    assert "row 3" in message and "abc" in message
    message = _refusal(tmp_path, "0,0\n0.5,1,2\n1,100\n")
    assert "row 2" in message


def test_table_refuses_extent_not_spanning_0_1(tmp_path):
    assert "end at extent 1" in _refusal(tmp_path, "0,0\n0.5,100\n")
    assert "start at extent 0" in _refusal(tmp_path, "0.1,0\n1,100\n")


def test_table_refuses_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        table_law(tmp_path / "missing.csv")


def test_metadata_round_trip_through_json():
    laws = [linear_law(1e6), hyperbolic_law(3e4, 0.75),
            table_law_from_points(np.linspace(0, 1, 11), np.linspace(0, 1, 11) ** 2 * 5e4)]
    for law in laws:
        meta = json.loads(json.dumps(law.to_metadata()))
        assert meta["unit"] == "Pa" and meta["modulus"] == law.modulus
        assert all(type(v) in (str, float, list) for v in meta.values())
        back = law_from_metadata(meta)
        assert back == law
        np.testing.assert_array_equal(back.pressure(E), law.pressure(E))
    assert laws[2].to_metadata()["interpolation"] == "pchip"


def test_metadata_refusals():
    with pytest.raises(InputError, match="kind"):
        law_from_metadata({"kind": "cubic", "modulus": 1.0}, path="asset.vtu")
    with pytest.raises(InputError, match="k"):
        law_from_metadata({"kind": "hyperbolic", "modulus": 1.0})
    with pytest.raises(InputError, match="asset.vtu"):
        law_from_metadata({"kind": "hyperbolic", "modulus": 1.0, "k": 2.0}, path="asset.vtu")
    with pytest.raises(InputError, match="decrease"):
        law_from_metadata({"kind": "table", "modulus": 1.0, "extent": [0, 0.5, 1],
                           "pressure": [0, 2, 1], "interpolation": "pchip"})


def test_a_linear_or_hyperbolic_law_does_not_import_scipy_interpolate():
    """The build makes its law before TetGen starts, where an import overlaps nothing: PCHIP
    (0.5 s to import) is loaded only for a table law."""
    import subprocess
    import sys

    code = ("import sys; from fieldgen.material.modulus import hyperbolic_law, linear_law, table_law_from_points; "
            "linear_law(1e5).pressure([0.5]); hyperbolic_law(1e5, 0.8).pressure([0.5]); "
            "print('scipy.interpolate' in sys.modules); "
            "table_law_from_points([0, 1], [0, 1e5]).pressure([0.5]); print('scipy.interpolate' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
