"""What the data determine (docs/model.md §2.3): the standard uncertainty of each fitted
parameter, the warning that names a parameter the data cannot tell, and the calibrate round trip
at the defaults from data that do not come from fieldgen.

The data are the closed form of a rigid sphere pressed into a slab of thickness H bonded at its
base with insulated sides, where the extent is exactly ``e = h/H`` (h the depth below the free
face): at indentation d,

    F(d) = 2π ∫_0^d p0(h/H) (R − d + h) dh

(the projected area of the sphere's cap between heights h and h + dh below its rim is
2π(R − d + h) dh). It is evaluated here by scipy's adaptive quadrature, independently of
fieldgen's contact surfaces and force model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import trimesh
from scipy.integrate import quad
from scipy.optimize import curve_fit

from fieldgen.calibrate.fit import fit_hyperbolic
from fieldgen.calibrate.forces import ForceModel
from fieldgen.calibrate.uncertainty import determine

from calibrate_runs import calibrated_report
from fieldgen.io.asset import read_metadata

ROOT = Path(__file__).resolve().parents[1]
R, H, M0, K = 0.01, 0.01, 3e5, 0.6


def sphere_on_slab(depths, pressure, radius=R, thickness=H) -> np.ndarray:
    """The closed form above (N) for a law ``pressure(e)``."""
    return np.array([2 * math.pi * quad(lambda h: pressure(h / thickness) * (radius - d + h), 0.0, d,
                                        epsabs=0.0, epsrel=1e-12, limit=200)[0] for d in depths])


def hyperbolic(m0, k):
    return lambda e: m0 * e / (1.0 - k * e)


def slab_force_model(depths, nodes=400) -> ForceModel:
    """A force model of the ideal slab: per depth, Gauss–Legendre points in h with weights
    2π(R − d + h) dh, so ``F = Σ w p0(e)`` is the closed form to quadrature precision."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    extent, weight, owner = [], [], []
    for i, d in enumerate(depths):
        h = 0.5 * d * (x + 1.0)
        extent.append(h / H)
        weight.append(0.5 * d * w * 2 * math.pi * (R - d + h))
        owner.append(np.full(nodes, i))
    return ForceModel.from_points(np.asarray(depths, dtype=np.float64), np.concatenate(extent), np.concatenate(weight),
                                  np.concatenate(owner), np.ones(len(depths), dtype=np.int64))


def noisy(forces, level, seed):
    return forces * (1.0 + level * np.random.default_rng(seed).standard_normal(len(forces)))


def test_uncertainty_is_the_least_squares_covariance():
    """The standard uncertainties equal those scipy's curve_fit gives for the same relative
    least-squares problem on the closed form (its own numerical Jacobian, s² (JᵀJ)⁻¹)."""
    depths = np.linspace(0.0002, 0.002, 10)
    data = noisy(sphere_on_slab(depths, hyperbolic(M0, K)), 0.002, 3)
    model = slab_force_model(depths)
    fit = fit_hyperbolic(model, data)
    found = determine("hyperbolic", fit.parameters, fit.law, model, data)

    def relative_force(d, m0, k):        # the residual curve_fit sees is F/data − 1 against 0
        return sphere_on_slab(d, hyperbolic(m0 * 1e5, k)) / data
    values, covariance = curve_fit(relative_force, depths, np.ones_like(depths), p0=(3.0, 0.5))
    np.testing.assert_allclose(found.values, [values[0] * 1e5, values[1]], rtol=1e-4)
    np.testing.assert_allclose(found.uncertainty, np.sqrt(np.diag(covariance)) * [1e5, 1.0], rtol=0.02)
    assert found.dof == 8
    assert 0.01 < found.relative()[1] < 0.1 and found.relative()[0] < 0.01      # 0.2% noise: K to a few %
    assert [w[:38] for w in found.warnings()] == ["the data do not determine k to 1%: k ="]


@pytest.mark.parametrize("deepest, level, expect_k_determined", [(0.002, 0.0002, True), (0.0005, 0.005, False)])
def test_uncertainty_covers_the_truth_as_often_as_it_says(deepest, level, expect_k_determined):
    """Over 300 noisy data sets (Gaussian noise of ``level``), |K − K_true| <= u_K in about 65% of
    them and <= 2 u_K in about 92% (Student's t with 8 degrees of freedom); 0.02% noise on
    indentations to e = 0.2 tells K to 1%, 0.5% noise to e = 0.05 does not."""
    depths = np.linspace(deepest / 10, deepest, 10)
    clean = sphere_on_slab(depths, hyperbolic(M0, K))
    model = slab_force_model(depths, nodes=100)
    inside, inside2, relative = [], [], []
    for seed in range(300):
        data = noisy(clean, level, seed)
        fit = fit_hyperbolic(model, data)
        found = determine("hyperbolic", fit.parameters, fit.law, model, data)
        error = abs(found.values[1] - K)
        inside.append(error <= found.uncertainty[1])
        inside2.append(error <= 2 * found.uncertainty[1])
        relative.append(found.relative()[1])
    assert 0.58 <= np.mean(inside) <= 0.73, np.mean(inside)
    assert 0.87 <= np.mean(inside2) <= 0.97, np.mean(inside2)
    assert (np.median(relative) < 0.01) == expect_k_determined, np.median(relative)


def test_shallow_indentations_warn_that_k_is_not_determined():
    """Indentations to e = 0.05 with 0.5% noise: M0 is told to 1%, K is not; the warning names K
    (and not M0), and the truth is within two standard uncertainties."""
    depths = np.linspace(0.00005, 0.0005, 10)
    data = noisy(sphere_on_slab(depths, hyperbolic(M0, K)), 0.005, 7)
    model = slab_force_model(depths)
    fit = fit_hyperbolic(model, data)
    found = determine("hyperbolic", fit.parameters, fit.law, model, data)
    warnings = found.warnings()
    assert len(warnings) == 1 and "do not determine k to 1%" in warnings[0], warnings
    assert found.relative()[0] < 0.01 < found.relative()[1]
    assert abs(found.values[1] - K) <= 2 * found.uncertainty[1]
    record = found.to_metadata()["parameters"]
    assert record["k"]["standard_uncertainty"] == pytest.approx(found.uncertainty[1])
    assert record["k"]["force_change_per_percent"] < 0.001      # a 1% change of K: < 0.1% of force


def test_one_depth_per_parameter_gives_no_uncertainty():
    """As many points as parameters (design targets): the law through them, no uncertainty to
    estimate (None, JSON-able) and no warning."""
    depths = np.array([0.001, 0.002])
    data = sphere_on_slab(depths, hyperbolic(M0, K))
    model = slab_force_model(depths)
    fit = fit_hyperbolic(model, data)
    found = determine("hyperbolic", fit.parameters, fit.law, model, data)
    assert found.dof == 0 and np.all(np.isinf(found.uncertainty))
    record = found.to_metadata()
    assert record["parameters"]["k"]["standard_uncertainty"] is None and record["residual"] is None
    json.dumps(record, allow_nan=False)
    assert found.warnings() == []
    np.testing.assert_allclose(found.values, [M0, K], rtol=1e-3)


@pytest.mark.slow
def test_round_trip_at_the_defaults(tmp_path):
    """`fieldgen calibrate --law hyperbolic` from a spec 10x off, with no size or tolerance flags,
    on the closed-form forces of a sphere (R 10 mm) pressed 0.2-2 mm into a 10 mm slab
    (e up to 0.2) of the law M0 3e5 Pa, K 0.6: the law the data determine is within 1% of the
    truth in both parameters, each with a standard uncertainty below 1% (so no warning names
    either), in --json and in the asset's metadata."""
    box = trimesh.creation.box(extents=(0.032, 0.032, H))
    box.apply_translation((0.0, 0.0, -H / 2))
    box.export(tmp_path / "slab.stl")
    depths = np.linspace(0.0002, 0.002, 10)
    forces = sphere_on_slab(depths, hyperbolic(M0, K))
    report = calibrated_report(tmp_path, depths, forces,
                               'input = "slab.stl"\nbonded = ["normal:0,0,-1"]\n'
                               'insulated = ["normal:1,0,0", "normal:-1,0,0", "normal:0,1,0", "normal:0,-1,0"]\n'
                               'law = "hyperbolic"\nmodulus = 3.0e6\nk = 0.06\n')
    determined = report["determined"]["parameters"]
    assert determined["modulus"]["value"] == pytest.approx(M0, rel=0.01)
    assert determined["k"]["value"] == pytest.approx(K, rel=0.01)
    for name in ("modulus", "k"):
        assert 0 < determined[name]["relative_uncertainty"] < 0.01
        assert not [w for w in report["warnings"] if f"determine {name} " in w]
    assert read_metadata(tmp_path / "out.vtu")["calibration"]["determined"] == report["determined"]
    assert report["rms_relative_residual"] < 0.01             # the layered asset reproduces the data
