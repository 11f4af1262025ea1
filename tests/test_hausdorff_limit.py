"""The surface stage refuses a result past its tolerance on a first measure of the distance
(fieldgen/surface/remesh.py: ``hausdorff_distance``'s ``limit``, and the distance checked before
the closed-and-unintersected check in ``_first_within``). The decisions are the same: a result
is kept when it is usable, within the tolerance and sound, whatever the order of the checks."""

from __future__ import annotations

import numpy as np
import trimesh

import fieldgen.surface.remesh as remesh_module
from fieldgen.meshing.tetmesh import FREE
from fieldgen.surface.remesh import hausdorff_distance
from fieldgen.surface.stage import load_surface


def box_and_bumped(height: float):
    """A 10 mm cube and the same cube with one corner pulled out by ``height`` along x."""
    box = trimesh.creation.box(extents=(0.01, 0.01, 0.01))
    bumped = box.vertices.copy()
    bumped[0, 0] += np.sign(bumped[0, 0]) * height
    return box.vertices, box.faces, bumped, box.faces


def test_a_limit_returns_a_first_measure_above_it_and_the_whole_measure_within_it(monkeypatch):
    vertices, faces, bumped, _ = box_and_bumped(1e-3)
    full = hausdorff_distance(vertices, faces, bumped, faces)
    # The exact distance: the pulled corner to the cube (1 mm along x), the only point that far.
    assert abs(full - 1e-3) < 1e-9
    assert hausdorff_distance(vertices, faces, bumped, faces, limit=full) == full
    assert hausdorff_distance(vertices, faces, bumped, faces, limit=2 * full) == full
    bounds = []
    monkeypatch.setattr(remesh_module, "distance_bounds", lambda *args: bounds.append(1) or np.zeros(0))
    first = hausdorff_distance(vertices, faces, bumped, faces, limit=1e-4)
    assert 1e-4 < first <= full and bounds == []          # returned before the bounds were made


def test_a_limit_equal_to_the_first_measure_measures_the_rest(monkeypatch):
    """The first stride's largest distance is only a lower bound: at a limit equal to it the
    whole measure is made (returned early, a candidate whose farthest point lies outside the
    first stride would pass a tolerance it does not meet)."""
    box = trimesh.creation.box(extents=(0.01, 0.01, 0.01))
    bumped = box.vertices.copy()
    bumped[1] += np.sign(bumped[1]) * 1e-3          # not sample 0: outside the first stride
    full = hausdorff_distance(box.vertices, box.faces, bumped, box.faces)
    first = hausdorff_distance(box.vertices, box.faces, bumped, box.faces, limit=0.0)
    assert 0.0 < first < full
    assert hausdorff_distance(box.vertices, box.faces, bumped, box.faces, limit=first) == full


def _first_within(tmp_path, bump: float, tolerance: float, monkeypatch, sound: bool = True):
    """``_first_within`` on a 10 mm cube and, as the candidate, the cube with a corner pulled out by
    ``bump``; the closed-and-unintersected check reports ``sound``. (kept, problems, checks made)."""
    trimesh.creation.box(extents=(0.01, 0.01, 0.01)).export(tmp_path / "box.stl")
    surface = load_surface(tmp_path / "box.stl", "m")
    bumped = surface.vertices.copy()
    corner = int(np.argmax(bumped[:, 0]))
    bumped[corner, 0] += bump
    checked = []

    class Defects:
        ok = sound

    monkeypatch.setattr(remesh_module, "surface_defects", lambda *args, **kwargs: checked.append(1) or Defects())
    labels, table = remesh_module.face_labels(np.full(len(surface.faces), FREE), surface.face_groups)
    problems: list[str] = []
    kept = remesh_module._first_within(surface, [((bumped, surface.faces, labels), None)], table, tolerance,
                                       False, remesh_module.LEFT_COST, problems)
    return kept, problems, checked


def test_a_result_past_the_tolerance_is_refused_without_the_slower_check(tmp_path, monkeypatch):
    kept, problems, checked = _first_within(tmp_path, 1e-3, 1e-4, monkeypatch)
    assert kept is None and checked == []
    assert "Hausdorff distance" in problems[0] and "exceeds it" in problems[0]


def test_a_result_within_the_tolerance_is_still_checked_and_kept_or_refused_by_it(tmp_path, monkeypatch):
    kept, problems, checked = _first_within(tmp_path, 1e-5, 1e-4, monkeypatch)
    assert kept is not None and checked == [1] and problems == []
    assert abs(kept.remesh.hausdorff - 1e-5) < 1e-10
    kept, problems, checked = _first_within(tmp_path, 1e-5, 1e-4, monkeypatch, sound=False)
    assert kept is None and checked == [1] and "self-intersections" in problems[0]
