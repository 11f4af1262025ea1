"""The sliver moves' numba kernels (fieldgen/surface/slivers.py) against the plain Python loops
they replaced (tests/slivers_reference.py): the same surface, bit for bit — the same vertices,
faces and labels in the same order — on sliver-rich surfaces made here and on corpus parts with
micron slivers (docs/model.md §2.11).

The reference is independent of the kernels' data structures (dicts and sets, numpy's own
arithmetic on each move), so a difference in the order of moves, a tie-break, a check or the
arithmetic of a length, normal or distance shows up as a different surface.
"""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

import slivers_reference as reference
from fieldgen.surface.remesh import default_tolerance
from fieldgen.surface.slivers import collapses, face_shapes, flip_caps, without_slivers
from fieldgen.surface.stage import load_surface
from test_surface_tolerance import chamfered_cylinder, sliver_box

MM = 1e-3


def assert_same(vertices, faces, labels, width, **held):
    """Both implementations on one surface: identical arrays (values, dtypes, shapes)."""
    expected = reference.without_slivers(vertices, faces, labels, width, **held)
    got = without_slivers(vertices, faces, labels, width, **held)
    for name, want, have in zip(("vertices", "faces", "labels"), expected, got):
        assert have.dtype == want.dtype and have.shape == want.shape, name
        rows = np.flatnonzero((have != want).reshape(len(have), -1).any(axis=1)) if have.shape == want.shape else ()
        assert np.array_equal(have, want), f"{name} differ at rows {rows[:10]}"
    return expected


def moves_made(faces, result_faces, vertices, width) -> tuple[int, int]:
    """(faces removed, collapses the input offered): the comparison is not of an untouched surface."""
    return len(faces) - len(result_faces), len(collapses(vertices, np.asarray(faces, dtype=np.int64), width))


def octant_labels(vertices, faces) -> np.ndarray:
    """A label per face from the octant of its centroid about the middle: borders between labels
    run across the slivers, so the label rules (a move only within a label, a collapse only onto
    a vertex with all the moving one's labels) decide many moves."""
    centroid = vertices[faces].mean(axis=1)
    middle = 0.5 * (vertices.min(axis=0) + vertices.max(axis=0))
    return ((centroid > middle) * np.array([1, 2, 4])).sum(axis=1).astype(np.int64)


def jittered(mesh: trimesh.Trimesh, amount: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The mesh's vertices moved at random by up to ``amount`` (a fixed seed): no exact ties, caps
    that are not axis-aligned."""
    rng = np.random.default_rng(seed)
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    return vertices + rng.uniform(-amount, amount, vertices.shape), np.asarray(mesh.faces, dtype=np.int64)


@pytest.mark.parametrize("jitter", [0.0, 0.001])
def test_a_sliver_box_gives_the_reference_surface(jitter):
    vertices, faces = jittered(sliver_box(), jitter, seed=3)
    labels = octant_labels(vertices, faces)
    bottom = vertices[faces][:, :, 2].max(axis=1) < 1e-9
    labels[bottom] = 8                                   # a bonded bottom, as a selection gives it
    width = 0.02                                         # mm: the 5 µm strips are slivers
    result = assert_same(vertices, faces, labels, width)
    removed, offered = moves_made(faces, result[1], vertices, width)
    assert removed > 0.5 * len(faces) and offered > 1000


def test_a_chamfered_cylinder_gives_the_reference_surface():
    vertices, faces = jittered(chamfered_cylinder(), 0.0005, seed=5)
    labels = octant_labels(vertices, faces)
    result = assert_same(vertices, faces, labels, 0.02)
    assert len(result[1]) < len(faces)


def test_caps_alone_are_flipped_as_the_reference_flips_them():
    """A fine sphere whose vertices are pushed onto their neighbours' edges: caps (a corner near
    the opposite edge) with no short edge, so the flips decide the result."""
    sphere = trimesh.creation.icosphere(subdivisions=4, radius=10.0)
    vertices, faces = np.array(sphere.vertices), np.array(sphere.faces, dtype=np.int64)
    rng = np.random.default_rng(11)
    for f in rng.choice(len(faces), 300, replace=False):
        a, b, p = faces[f]
        vertices[p] = 0.5 * (vertices[a] + vertices[b]) + rng.uniform(-1e-3, 1e-3, 3)
    labels = octant_labels(vertices, faces)
    lengths, height = face_shapes(vertices, faces)
    width = 0.01
    assert ((height < width) & (lengths.min(axis=1) >= width)).sum() > 100
    assert_same(vertices, faces, labels, width)


def test_a_flip_never_makes_an_edge_an_earlier_flip_made():
    """A bipyramid over a 10 x 0.01 rectangle, apexes 0.1 above and below its middle: its two long
    top faces are caps (height 0.1 < 0.5), each flipped with the bottom face across its long edge
    would make the edge between the apexes; the first flip makes it, the second must not make it
    again (the surface would no longer be a 2-manifold)."""
    vertices = np.array([[0, 0, 0], [10, 0, 0], [10, 0.01, 0], [0, 0.01, 0], [5, 0.005, 0.1], [5, 0.005, -0.1]],
                        dtype=float)
    a, b, a2, b2, p, q = range(6)
    faces = np.array([[a, b, p], [b, a2, p], [a2, b2, p], [b2, a, p], [b, a, q], [a2, b, q], [b2, a2, q], [a, b2, q]])
    labels = np.zeros(len(faces), dtype=np.int64)
    flipped = faces.copy()
    assert flip_caps(vertices, flipped, labels, 0.5) == 1
    edges = np.sort(np.concatenate([flipped[:, [0, 1]], flipped[:, [1, 2]], flipped[:, [2, 0]]]), axis=1)
    assert (np.all(edges == [p, q], axis=1)).sum() == 2          # one edge p q, in two faces
    assert_same(vertices, faces, labels, 0.5)


@pytest.mark.parametrize("name", ["ADIS16480.STL", "robotiq_arg2f_140_outer_finger.stl"])
def test_corpus_parts_with_micron_slivers_give_the_reference_surface(meshes, name):
    surface = load_surface(meshes / name, "m")
    vertices, faces = np.asarray(surface.vertices), np.asarray(surface.faces)
    labels = octant_labels(vertices, faces)
    width = default_tolerance(vertices)
    result = assert_same(vertices, faces, labels, width)
    assert len(result[1]) < len(faces)


def test_needles_held_to_a_deviation_give_the_reference_surface(meshes):
    """The threaded nut with each needle's collapse held to half the width (the stage's second
    try, docs/model.md §2.11): the reference's surface, and not the one with needles unheld."""
    surface = load_surface(meshes / "SQNutO8T5P1.stl", "mm")
    vertices, faces = np.asarray(surface.vertices), np.asarray(surface.faces)
    labels = octant_labels(vertices, faces)
    width = default_tolerance(vertices)
    held = assert_same(vertices, faces, labels, width, needle_deviation=0.5)
    unheld = without_slivers(vertices, faces, labels, width)
    assert len(unheld[1]) < len(held[1]) < len(faces)


@pytest.mark.slow
def test_the_self_intersecting_counter_gives_the_reference_surface(meshes):
    """83,750 triangles: about a minute in the reference, two seconds in the kernels."""
    surface = load_surface(meshes / "counter.unitsmm.STL", "mm", require_closed=False)
    vertices, faces = np.asarray(surface.vertices), np.asarray(surface.faces)
    labels = octant_labels(vertices, faces)
    result = assert_same(vertices, faces, labels, default_tolerance(vertices))
    assert len(result[1]) < 0.5 * len(faces)
