"""Regenerate the example input meshes in this folder (the three objects of D Fig. 5.2).

Run: python assets/make_examples.py. The outputs are committed; this script documents
how they were made. Sizes are those of small robot parts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh

HERE = Path(__file__).resolve().parent


def foam_pad() -> trimesh.Trimesh:
    """A gripper pad in mm: 40 x 20 footprint, 6 mm sides, a 2 mm dome on top; bonded bottom."""
    pad = trimesh.creation.box(extents=(40.0, 20.0, 6.0))
    for _ in range(4):
        pad = pad.subdivide()
    pad.merge_vertices()
    v = pad.vertices.copy()
    top = v[:, 2] > 2.999
    v[top, 2] += 2.0 * (1 - (v[top, 0] / 20.0) ** 2) * (1 - (v[top, 1] / 10.0) ** 2)
    v[:, 2] += 3.0  # bottom face at z = 0
    return trimesh.Trimesh(v, pad.faces, process=True)


def foam_ball() -> trimesh.Trimesh:
    """A solid foam capsule in metres (no core): 30 mm diameter, 70 mm long."""
    return trimesh.creation.capsule(height=0.04, radius=0.015, count=[24, 24])


def paddle() -> tuple[trimesh.Trimesh, trimesh.Trimesh]:
    """A foam paddle (flattened ellipsoid) around a metal core (a thinner ellipsoid), metres."""
    outer = trimesh.creation.icosphere(subdivisions=4)
    outer.apply_scale((0.06, 0.03, 0.012))
    core = trimesh.creation.icosphere(subdivisions=3)
    core.apply_scale((0.045, 0.018, 0.005))
    return outer, core


def main() -> None:
    foam_pad().export(HERE / "foam_pad.stl")
    foam_ball().export(HERE / "foam_ball.obj")
    outer, core = paddle()
    outer.export(HERE / "paddle.ply")
    core.export(HERE / "paddle_core.off")


if __name__ == "__main__":
    main()
