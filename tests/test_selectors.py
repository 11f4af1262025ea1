"""Tests of face selectors and boundary-condition assignment on a box with OBJ groups.

The box is 2 x 4 x 6 (input units) centred at (1, 2, 3), so it spans x 0..2, y 0..4,
z 0..6; ``g top`` holds the two +z faces, ``g rest`` the other ten.
"""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from fieldgen.errors import OptionError
from fieldgen.meshing.tetmesh import FREE, INSULATED, RIGID
from fieldgen.surface.selectors import Selector, assign_conditions, parse_selector, select_faces
from fieldgen.surface.stage import load_surface


@pytest.fixture
def box_obj(tmp_path):
    box = trimesh.creation.box((2, 4, 6))
    box.apply_translation([1, 2, 3])
    v, f = np.asarray(box.vertices), np.asarray(box.faces)
    top = box.face_normals[:, 2] > 0.5
    lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in v.tolist()]
    lines.append("g top")
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in f[top]]
    lines.append("g rest")
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in f[~top]]
    path = tmp_path / "box.obj"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def box(box_obj):
    return load_surface(box_obj)


def _normals_of(surface, mask):
    return np.unique(np.round(surface.face_normals[mask], 12), axis=0)


def test_normal_selector_default_angle_and_non_unit_direction(box):
    sel = parse_selector("normal:0,0,-5")
    assert sel.kind == "normal" and sel.direction == (0.0, 0.0, -1.0) and sel.angle == 10.0
    mask = select_faces(box, sel)
    assert mask.sum() == 2
    assert np.array_equal(_normals_of(box, mask), [[0, 0, -1]])


def test_normal_selector_angle_is_inclusive_cone(box):
    # (1, 0, 1) is 45 degrees from both +x and +z faces.
    assert select_faces(box, parse_selector("normal:1,0,1:44")).sum() == 0
    assert select_faces(box, parse_selector("normal:1,0,1:45")).sum() == 4
    # +x and +z (2 faces each) and both y sides (2 each), exactly at 90 degrees.
    assert select_faces(box, parse_selector("normal:1,0,1:90")).sum() == 2 + 2 + 4
    assert select_faces(box, parse_selector("normal:1,0,0:180")).sum() == 12


def test_below_and_above_are_inclusive_half_spaces(box):
    below = select_faces(box, parse_selector("below:z=0"))
    assert below.sum() == 2 and np.all(box.vertices[box.faces[below]][:, :, 2] == 0)
    assert select_faces(box, parse_selector("below:z=5.9")).sum() == 2
    assert select_faces(box, parse_selector("below:z=6")).sum() == 12
    above = select_faces(box, parse_selector("above:X=2"))
    assert above.sum() == 2 and np.array_equal(_normals_of(box, above), [[1, 0, 0]])
    # Tolerance relative to the part size: a hair below the face still selects it.
    assert select_faces(box, parse_selector("above:x=2.000001")).sum() == 2
    assert select_faces(box, parse_selector("above:x=2.001")).sum() == 0


def test_box_selector_contains_all_vertices(box):
    mask = select_faces(box, parse_selector("box:-1,-1,-1,3,5,0.5"))
    assert mask.sum() == 2 and np.array_equal(_normals_of(box, mask), [[0, 0, -1]])
    assert select_faces(box, parse_selector("box:-1,-1,-1,3,5,7")).sum() == 12
    # The x = 0 side: every vertex with x in [0, 0].
    assert select_faces(box, parse_selector("box:0,0,0,0,4,6")).sum() == 2


def test_group_selector(box):
    assert box.group_names == ("top", "rest")
    top = select_faces(box, parse_selector("group:top"))
    assert top.sum() == 2 and np.array_equal(_normals_of(box, top), [[0, 0, 1]])
    assert select_faces(box, parse_selector("group:rest")).sum() == 10


def test_lengths_are_scaled_to_metres(box_obj):
    in_mm = load_surface(box_obj, "mm")  # spans z 0..0.006 m
    sel = parse_selector("below:z=3", scale=1e-3)
    assert sel.value == pytest.approx(3e-3)
    assert select_faces(in_mm, sel).sum() == 2  # only the bottom: the sides reach z = 6 mm
    sel = parse_selector("box:0,0,0,2,4,6", scale=1e-3)
    assert sel.lower == (0.0, 0.0, 0.0) and sel.upper == pytest.approx((2e-3, 4e-3, 6e-3))
    assert select_faces(in_mm, sel).sum() == 12


def test_assign_conditions_codes(box):
    codes = assign_conditions(box, bonded=[parse_selector("normal:0,0,-1")],
                              insulated=[parse_selector("normal:1,0,0"),
                                         parse_selector("normal:-1,0,0")])
    assert codes.dtype == np.int64 and codes.shape == (12,)
    assert np.count_nonzero(codes == RIGID) == 2
    assert np.count_nonzero(codes == INSULATED) == 4
    assert np.count_nonzero(codes == FREE) == 6
    bottom = box.face_normals[:, 2] < -0.5
    assert np.all(codes[bottom] == RIGID)
    assert np.all(assign_conditions(box) == FREE)


def test_selector_matching_nothing_says_what_is_there(box_obj):
    surface = load_surface(box_obj, "mm")
    with pytest.raises(OptionError) as info:
        assign_conditions(surface, bonded=[parse_selector("below:z=-5", 1e-3)])
    message = str(info.value)
    assert "box.obj:" in message and "'below:z=-5' matches no face" in message
    assert "x 0..2, y 0..4, z 0..6 mm" in message
    with pytest.raises(OptionError, match="groups in the file are top, rest"):
        assign_conditions(surface, insulated=[parse_selector("group:bottom")])
    with pytest.raises(OptionError, match="closest face normal is 45 degrees away"):
        assign_conditions(surface, bonded=[parse_selector("normal:1,1,0:5")])


def test_face_both_bonded_and_insulated_refused(box):
    with pytest.raises(OptionError, match="2 faces are both bonded and insulated"):
        assign_conditions(box, bonded=[parse_selector("group:top")],
                          insulated=[parse_selector("above:z=6")])


def test_no_free_face_left_refused(box):
    with pytest.raises(OptionError, match="no free face is left: 10 faces bonded and 2 insulated"):
        assign_conditions(box, bonded=[parse_selector("group:rest")],
                          insulated=[parse_selector("group:top")])


@pytest.mark.parametrize("text", [
    "normal", "normal:0,0", "normal:0,0,0", "normal:0,0,1:200", "normal:a,b,c",
    "below:w=1", "below:z", "above:z=abc", "box:0,0,0,1,1", "box:1,0,0,0,1,1",
    "side:top", "group:", "normal:0,0,1:nan",
])
def test_bad_selectors_refused_with_grammar(text):
    with pytest.raises(OptionError) as info:
        parse_selector(text)
    assert repr(text) in str(info.value)
    assert info.value.fix


def test_selector_is_frozen_and_keeps_text():
    sel = parse_selector("above:y=2", scale=0.01)
    assert isinstance(sel, Selector) and sel.text == "above:y=2"
    assert sel.axis == 1 and sel.value == pytest.approx(0.02)
    with pytest.raises(AttributeError):
        sel.value = 1.0
