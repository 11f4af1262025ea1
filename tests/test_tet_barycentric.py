"""Barycentric coordinates of points in tets (fieldgen.meshing.tetmesh.tet_barycentric), checked
against points built from known weights and against ratios of signed volumes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fieldgen.meshing.tetmesh import tet_barycentric


def _tets(rng, n):
    """n random tets (n, 4, 3), well away from flat."""
    corners = rng.uniform(-1.0, 1.0, (4 * n, 4, 3))
    volume = np.linalg.det(corners[:, 1:] - corners[:, :1])
    return corners[np.abs(volume) > 0.05][:n]


def _volume_weights(corners, q):
    """λ_i = signed volume of the tet with corner i replaced by q, over the tet's (Cramer's rule)."""
    full = np.linalg.det(corners[:, 1:] - corners[:, :1])
    out = np.empty(q.shape[:-1] + (4,))
    for i in range(4):
        swapped = np.broadcast_to(corners[:, None], q.shape[:-1] + (4, 3)).copy()
        swapped[..., i, :] = q
        out[..., i] = np.linalg.det(swapped[..., 1:, :] - swapped[..., :1, :]) / full[:, None]
    return out


def test_weights_rebuild_the_points_they_were_made_from_and_match_the_volume_ratios():
    rng = np.random.default_rng(7)
    corners = _tets(rng, 200)
    # Weights summing to 1, some negative (points outside their tet).
    weights = rng.uniform(-0.5, 1.0, (len(corners), 5, 4))
    weights /= weights.sum(axis=-1, keepdims=True)
    q = np.einsum("tmi,tik->tmk", weights, corners)
    lam = tet_barycentric(corners, q)
    assert lam.shape == (len(corners), 5, 4)
    scale = np.abs(weights).max()
    assert np.abs(lam - weights).max() < 1e-9 * scale
    assert np.abs(lam - _volume_weights(corners, q)).max() < 1e-9 * scale
    assert np.abs(lam.sum(axis=-1) - 1.0).max() < 1e-12 * scale
    assert np.abs(np.einsum("tmi,tik->tmk", lam, corners) - q).max() < 1e-12 * scale


def test_a_tets_corners_have_the_identity_as_weights():
    rng = np.random.default_rng(8)
    corners = _tets(rng, 50)
    lam = tet_barycentric(corners, corners)                  # each tet's own four corners
    assert np.abs(lam - np.eye(4)).max() < 1e-12


def test_indexed_tets_give_the_gathered_tets_weights_bit_for_bit():
    rng = np.random.default_rng(9)
    corners = _tets(rng, 40)
    index = rng.integers(0, len(corners), (30, 7))
    q = rng.uniform(-1.0, 1.0, (30, 1, 1, 3))
    assert np.array_equal(tet_barycentric(corners, q, index), tet_barycentric(corners[index], q))
    expected = _volume_weights(corners[index].reshape(-1, 4, 3), np.broadcast_to(q, (30, 7, 1, 3)).reshape(-1, 1, 3))
    assert np.abs(tet_barycentric(corners, q, index).reshape(-1, 1, 4) - expected).max() < 1e-9


def test_a_flat_tet_gives_nan_weights_and_no_warning_and_leaves_the_others_alone():
    rng = np.random.default_rng(10)
    corners = _tets(rng, 6)
    flat = corners.copy()
    flat[2, :, 2] = 0.3                                      # all four corners in one plane
    flat[4, 1] = flat[4, 0]                                  # a repeated corner
    q = rng.uniform(-1.0, 1.0, (6, 3, 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lam = tet_barycentric(flat, q)
    assert not caught
    assert np.isnan(lam[[2, 4]]).all() and np.isfinite(lam[[0, 1, 3, 5]]).all()
    np.testing.assert_allclose(lam[[0, 1, 3, 5]], _volume_weights(corners[[0, 1, 3, 5]], q[[0, 1, 3, 5]]),
                               atol=1e-9)


@pytest.mark.parametrize("index", [2, np.int64(2), np.array(2), np.array([2, 0])])
def test_the_callers_corners_are_never_written(index):
    """With ``index`` a scalar (basic indexing gives a view) as with an array, the corners passed
    in are unchanged and the weights are those of the tets gathered first."""
    rng = np.random.default_rng(11)
    corners = rng.random((3, 4, 3))
    before = corners.copy()
    query = rng.random((2, 3)) if np.ndim(index) == 0 else rng.random((2, 1, 3))
    lam = tet_barycentric(corners, query, index)
    assert np.array_equal(corners, before)
    assert np.array_equal(lam, tet_barycentric(corners[index], query))
