"""Mesh statistics, one home for them: counts, volume and quality of a tet mesh as plain
JSON-able numbers, recorded in an asset's ``metadata['mesh']``.

:func:`mesh_counts` is the part the asset file itself is checked against (the keys of
:data:`fieldgen.io.asset.MESH_STATISTICS`, recomputed by the validation from the file);
:func:`mesh_statistics` is every statistic of a mesh with its boundary conditions, the counts
included, each statistic under one key.
"""

from __future__ import annotations

import numpy as np

from fieldgen.meshing.tetmesh import (
    CONDITION_NAMES,
    TetMesh,
    boundary_faces_of,
    min_dihedral_angles,
    tet_volumes,
    zero_tets,
)


def mesh_counts(points: np.ndarray, tets: np.ndarray, min_dihedral_angle: np.ndarray, *,
                volumes: np.ndarray | None = None, n_boundary_faces: int | None = None) -> dict:
    """Counts, volume (m³) and smallest dihedral angle (deg) of a tet mesh, as the asset records them.

    ``volumes`` (signed, per tet) and ``n_boundary_faces`` when the caller has them (the build).
    """
    if n_boundary_faces is None:
        n_boundary_faces = len(boundary_faces_of(tets))
    return {
        "n_points": int(len(points)),
        "n_tets": int(len(tets)),
        "n_boundary_faces": int(n_boundary_faces),
        "volume": float(np.sum(tet_volumes(points, tets) if volumes is None else volumes)),
        "min_dihedral_angle": float(np.min(min_dihedral_angle)) if len(tets) else 0.0,
    }


def radius_edge_ratios(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Circumradius over shortest edge of each tet (TetGen's quality measure; 0.612 for a regular tet)."""
    p = points[tets]
    a, b, c = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0], p[:, 3] - p[:, 0]
    bc, ca, ab = np.cross(b, c), np.cross(c, a), np.cross(a, b)
    aa, bb, cc = (np.einsum("ij,ij->i", x, x) for x in (a, b, c))
    numerator = aa[:, None] * bc + bb[:, None] * ca + cc[:, None] * ab
    det = 2.0 * np.einsum("ij,ij->i", a, bc)
    radius = np.linalg.norm(numerator, axis=1) / np.abs(det)
    # The three edges at vertex 0 are a, b, c; the other three are their differences.
    squared = np.minimum(np.minimum(aa, bb), cc)
    for u, v in ((b, a), (c, a), (c, b)):
        d = u - v
        np.minimum(squared, np.einsum("ij,ij->i", d, d), out=squared)
    return radius / np.sqrt(squared)


def mesh_statistics(mesh: TetMesh, *, min_dihedral: np.ndarray | None = None,
                    volumes: np.ndarray | None = None) -> dict:
    """Every statistic of a TetMesh: :func:`mesh_counts` and the quality, as plain JSON-able numbers.

    ``min_dihedral``: the per-tet smallest dihedral angles (degrees) when the caller already
    has them (the asset stores them), so they are not computed twice; ``volumes`` likewise.
    """
    volumes = tet_volumes(mesh.points, mesh.tets) if volumes is None else np.asarray(volumes)
    dihedral = min_dihedral_angles(mesh.points, mesh.tets) if min_dihedral is None else np.asarray(min_dihedral)
    ratio = radius_edge_ratios(mesh.points, mesh.tets)
    faces_by = {CONDITION_NAMES[c]: int(np.sum(mesh.boundary_markers == c)) for c in sorted(CONDITION_NAMES)}
    p1, p5 = np.percentile(dihedral, [1, 5])
    return {
        **mesh_counts(mesh.points, mesh.tets, dihedral, volumes=volumes,
                      n_boundary_faces=len(mesh.boundary_faces)),
        "boundary_faces_by_condition": faces_by,
        "min_tet_volume": float(volumes.min()),
        "dihedral_p1_deg": float(p1),
        "dihedral_p5_deg": float(p5),
        "dihedral_median_deg": float(np.median(dihedral)),
        "radius_edge_max": float(ratio.max()),
        "radius_edge_p99": float(np.percentile(ratio, 99)),
        "radius_edge_median": float(np.median(ratio)),
        "zero_pressure_tets": int(len(zero_tets(mesh))),
    }
