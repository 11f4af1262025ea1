"""Sealed cavities of a hollow part: a point in each, for the mesher to carve it out (docs/model.md §2.2).

A hollow part's surface is several closed shells, one inside another: the outer skin, the wall
of each sealed cavity, and any solid piece inside a cavity. A point is in the part's material
when an odd number of shells enclose it (each shell's winding number there is ±1, whatever the
shell's orientation: a CAD export may wind a cavity's wall either way), and in a void when an
even number do. A cavity's wall is a shell just inside which the count is even (two or more):
:func:`cavity_points` steps inward from one of its large faces and checks that count.
TetGen fills everything a surface encloses unless a hole point marks a region as empty; the
cavity's wall keeps the condition the user gave its faces (free by default: a sealed air gap
carries no pressure).

The parity rule holds for shells that do not cross. A self-intersecting surface (two overlapping
boxes exported as one mesh, meshed with --robust) has shells that cross one another: just inside
one, inside the other too, the count is two, yet that is material both overlap, not a void. A
shell that crosses another is therefore no cavity's wall.
"""

from __future__ import annotations

import numpy as np

from fieldgen.surface.components import face_pieces
from fieldgen.surface.intersections import intersecting_face_pairs
from fieldgen.surface.topology import signed_volume, winding_numbers
from fieldgen.units import length_scale

#: Inward steps tried from a face's centroid, as fractions of its shell's bounding-box diagonal.
STEPS = (1e-3, 1e-4, 1e-5)
#: Faces of a shell tried (its largest first).
FACES_TRIED = 8


def enclosing_count(vertices: np.ndarray, shells: list[np.ndarray], points: np.ndarray) -> np.ndarray:
    """(k,) how many of the closed ``shells`` (face arrays) enclose each of ``points``."""
    count = np.zeros(len(points), dtype=np.int64)
    for shell in shells:
        count += np.abs(winding_numbers(vertices, shell, points)) > 0.5
    return count


def cavities(vertices: np.ndarray, faces: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The sealed cavities of the closed surface ``faces``, as (a point in it, its wall's faces),
    in the order of the walls' lowest vertex; none for a part of one shell, of shells side by side,
    or of shells that cross one another (a self-intersecting surface: :func:`_crosses_another`)."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    pieces = face_pieces(faces, len(vertices))
    if len(pieces) < 2:
        return []
    shells = [faces[piece] for piece in pieces]
    found = [(point, index) for index, shell in enumerate(shells)
             if (point := _void_just_inside(vertices, shell, shells)) is not None]
    return [(point, shells[index]) for point, index in found if not _crosses_another(vertices, shells, index)]


def _crosses_another(vertices: np.ndarray, shells: list[np.ndarray], index: int) -> bool:
    """Whether shell ``index`` crosses or touches another of ``shells``: then it bounds no sealed
    cavity, and the even count just inside it is two overlapping solids, not a void."""
    others = [shell for k, shell in enumerate(shells) if k != index]
    return len(intersecting_face_pairs(vertices, shells[index], np.concatenate(others))) > 0


def cavity_points(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """(k, 3) a point in each sealed cavity of ``faces`` (:func:`cavities`): TetGen's hole points."""
    return np.array([point for point, _ in cavities(vertices, faces)], dtype=np.float64).reshape(-1, 3)


def cavity_warnings(vertices: np.ndarray, faces: np.ndarray, units: str) -> tuple[str, ...]:
    """What a hollow part's build tells its user (``vertices`` in m, volumes given in ``units``):
    the cavities stay empty with free walls, and how to make an inner shell a rigid core instead."""
    found = cavities(vertices, faces)
    if not found:
        return ()
    volume = sum(abs(signed_volume(vertices, shell)) for _, shell in found) / length_scale(units) ** 3
    count = f"{len(found)} sealed cavit{'y' if len(found) == 1 else 'ies'}"
    return (f"the part is hollow: {count} ({volume:.4g} {units}^3 in all) left empty, its wall free (e = 0); "
            "to make an inner shell a rigid core instead, give it in its own file as --core",)


def _void_just_inside(vertices: np.ndarray, shell: np.ndarray, shells: list[np.ndarray]):
    """A point just inside ``shell`` that an even number of ``shells`` enclose, or None (the
    shell bounds material from inside: it is an outer skin or a solid in a cavity)."""
    corners = vertices[shell]
    normal = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    twice_area = np.linalg.norm(normal, axis=1)
    size = float(np.linalg.norm(np.ptp(vertices[np.unique(shell)], axis=0)))
    for face in np.argsort(-twice_area, kind="stable")[:FACES_TRIED]:
        if twice_area[face] <= 0.0:
            continue
        centre, unit = corners[face].mean(axis=0), normal[face] / twice_area[face]
        candidates = np.array([centre + sign * step * size * unit for step in STEPS for sign in (-1.0, 1.0)])
        inside = np.abs(winding_numbers(vertices, shell, candidates)) > 0.5
        if not inside.any():
            continue
        candidates = candidates[inside]
        even = enclosing_count(vertices, shells, candidates) % 2 == 0
        # parity alone says a point is void, so any even one serves (a step through a thin wall
        # into another cavity included)
        return candidates[int(np.argmax(even))] if even.any() else None
    return None
