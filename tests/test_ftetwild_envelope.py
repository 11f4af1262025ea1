"""fTetWild's envelope (fieldgen/meshing/ftetwild.py; docs/design/meshing.md, "fTetWild"): edge / 5.5
below the default edge, up to the default edge's envelope; the default edge and coarser ones keep
the envelope they had before (edge / 20), so no build gets a narrower envelope and builds sized by
accuracy (which start at the default edge) are unchanged; never below fTetWild's own 1e-3."""

from __future__ import annotations

import pytest

from fieldgen.meshing.ftetwild import RobustOptions

DIAGONAL = 0.432          # m: the counter part's


def envelope(edge):
    return RobustOptions(edge_length=edge).resolved(DIAGONAL)[1]


def before(edge):
    """The rule this one replaced: edge / 20 of the diagonal, clipped to [1e-3, 1e-2]."""
    return min(max(edge / 20.0 / DIAGONAL, 1e-3), 1e-2)


@pytest.mark.parametrize("fraction", [0.05, 0.08, 0.1, 0.2, 0.5])
def test_the_default_edge_and_coarser_keep_their_envelope(fraction):
    assert envelope(fraction * DIAGONAL) == pytest.approx(before(fraction * DIAGONAL), rel=1e-12)
    assert RobustOptions().resolved(DIAGONAL)[1] == pytest.approx(0.05 / 20.0, rel=1e-12)


def test_the_issue_edge_gets_two_and_a_half_times_ftetwild_default():
    assert envelope(0.006) == pytest.approx(2.5e-3, rel=1e-12)          # 1.08 mm = 6 mm / 5.5
    assert before(0.006) == pytest.approx(1e-3)


@pytest.mark.parametrize("edge", [0.0005, 0.002, 0.003, 0.004, 0.006, 0.01, 0.015, 0.02])
def test_finer_edges_get_edge_over_five_and_a_half_within_the_bounds(edge):
    expected = min(max(edge / 5.5 / DIAGONAL, 1e-3), 2.5e-3)
    assert envelope(edge) == pytest.approx(max(expected, before(edge)), rel=1e-12)
    assert envelope(edge) >= before(edge)
    assert envelope(edge) * DIAGONAL <= max(edge / 5.5, 1e-3 * DIAGONAL) * (1 + 1e-12)
