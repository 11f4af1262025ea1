"""A ``--data`` log longer than the depths a fit takes is thinned to 100 rows: the rows nearest to
100 depths spread evenly over its range, then, where several of those depths fell nearest the same
row (a log dense in places), rows nearest the middles of the widest gaps left, until 100 are
kept (fieldgen/calibrate/data.py, ``thinned``)."""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.calibrate.calibration import thinned_note
from fieldgen.calibrate.data import MAX_DATA_ROWS, read_data


def write_log(path, depth_mm, zero_row=False):
    """A CSV log (mm, N) of ``depth_mm`` with a force rising with depth; row k of the file is
    ``row k + 2`` (row 1 the header)."""
    depth_mm = np.concatenate([[0.0], depth_mm]) if zero_row else np.asarray(depth_mm)
    lines = ["depth_mm,force_N"] + [f"{float(d)!r},{float((0.5 + d) * d)!r}" for d in depth_mm]
    path.write_text("\n".join(lines) + "\n")
    return depth_mm


def test_a_log_dense_near_the_surface_keeps_a_hundred_rows_and_every_sparse_one(tmp_path):
    """1000 rows in (0, 1] mm, 20 in (1, 10] mm: the 100 depths spread evenly over 0.001-10 mm
    found only 31 distinct rows (11 shallow, the 20 deep ones), 69 of the fit's depths unused. Now
    exactly 100 are kept: every deep row, the first and the last, sorted by depth, the rest spread
    over the dense first millimetre (no gap there wider than twice the mean), and the same rows
    on every read."""
    shallow = np.arange(1, 1001) / 1000.0
    deep = 1.0 + 9.0 * np.arange(1, 21) / 20.0
    depth_mm = write_log(tmp_path / "dense.csv", np.concatenate([shallow, deep]))
    data = read_data(tmp_path / "dense.csv", "mm,N")
    kept_mm = data.depth * 1e3
    assert data.rows_read == 1020 and len(data.depth) == MAX_DATA_ROWS == 100
    assert np.all(np.diff(data.depth) > 0)
    assert kept_mm[0] == pytest.approx(0.001, rel=1e-12) and kept_mm[-1] == pytest.approx(10.0, rel=1e-12)
    assert np.allclose(kept_mm[-20:], deep, rtol=1e-12, atol=0)          # every deep row
    index = [int(r.split()[1]) - 2 for r in data.rows]                   # rows named as read
    assert np.allclose(depth_mm[index], kept_mm, rtol=1e-12, atol=0)
    gaps = np.diff(kept_mm[:80])
    assert gaps.max() <= 2 * (kept_mm[79] - kept_mm[0]) / 79
    again = read_data(tmp_path / "dense.csv", "mm,N")
    assert again.rows == data.rows
    note = thinned_note(data)
    assert len(note) == 1 and "has 1020 rows" in note[0] and "used 100 rows" in note[0], note


@pytest.mark.parametrize("rows", [101, 150, 400, 1000, 2500])
def test_an_even_log_keeps_the_rows_nearest_to_evenly_spread_depths(tmp_path, rows):
    """An evenly sampled log (and its row at depth 0) keeps what it kept before the gaps were
    filled: the row nearest each of 100 depths spread evenly over its range (computed here from
    the file's own numbers), 100 distinct rows, so nothing is added."""
    depth_mm = 0.2 + np.arange(rows) * (1.0 / rows)
    write_log(tmp_path / "even.csv", depth_mm, zero_row=True)
    data = read_data(tmp_path / "even.csv", "mm,N")
    wanted = np.linspace(depth_mm[0], depth_mm[-1], 100)
    nearest = sorted({int(np.argmin(np.abs(depth_mm - w))) for w in wanted})
    assert len(nearest) == 100 and data.rows_read == rows + 1
    assert data.rows == ["row 2"] + [f"row {i + 3}" for i in nearest]     # the depth-0 row, then those
    assert np.allclose(data.depth[1:] * 1e3, depth_mm[nearest], rtol=1e-12, atol=0)
