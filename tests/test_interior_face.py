"""TetGen's face list may hold an interior face twice, once in each orientation (the face of two
tets, not of the surface): it is dropped, and a filled cavity is still refused as a hollow part."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.errors import BuildError
from fieldgen.meshing.tetgen import _tet_mesh
from fieldgen.meshing.tetmesh import FREE, boundary_faces_of

MESHES = Path(__file__).parent / "data" / "meshes"

#: Two tets on the face (0, 1, 2): a bipyramid with apexes 3 (above) and 4 (below).
NODES = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.3, 0.3, 1], [0.3, 0.3, -1]], dtype=np.float64)
TETS = np.array([[0, 1, 2, 3], [0, 2, 1, 4]], dtype=np.int64)


def test_interior_face_listed_in_both_orientations_is_dropped():
    surface = boundary_faces_of(TETS)
    trifaces = np.vstack([surface, [[0, 1, 2], [0, 2, 1]]])
    mesh = _tet_mesh(NODES, TETS, trifaces, np.full(len(trifaces), FREE), has_core=False)
    assert len(mesh.boundary_faces) == 6
    assert np.all(mesh.boundary_markers == FREE)


def test_interior_face_listed_once_is_still_a_hollow_part():
    trifaces = np.vstack([boundary_faces_of(TETS), [[0, 1, 2]]])
    with pytest.raises(BuildError, match="hollow part"):
        _tet_mesh(NODES, TETS, trifaces, np.full(len(trifaces), FREE), has_core=False)


@pytest.mark.slow
def test_trifinger_lower_link_builds(tmp_path):
    """A closed single shell TetGen gave such a pair: it builds, and its asset validates."""
    out = tmp_path / "link.vtu"
    result = CliRunner().invoke(main, ["build", str(MESHES / "trifinger_lower_link.STL"), "--modulus", "1e6",
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert CliRunner().invoke(main, ["validate", str(out)]).exit_code == 0
