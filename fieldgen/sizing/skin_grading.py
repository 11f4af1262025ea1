"""A cut skin with a rim, refined where its error is (docs/model.md §2.10).

A cut skin's first pass is graded by depth alone (:func:`fieldgen.sizing.size_field.capped_sizes`):
an edge ``near`` the free surface everywhere in the skin. Where a free face meets a bonded one
(a rim: a skinned part on a rigid mount), the extent jumps from 0 to 1 along the rim and the
estimated error gathers near the bonded faces, in a small share of the volume; a finer ``near``
edge everywhere (TetGen's next pass) then spends most of its tets where the field is already
within the accuracy (docs/design/sizing.md, "A skin's graded sizing"). So a skin with a rim is
refined after its first pass as the layer band is: the tets holding a share of the estimated
squared error are bisected (scikit-fem's conforming bisection), pass by pass, within
``SKIN_MAX_TETS``; the skin's record follows the refined mesh (:func:`fieldgen.skin.cut.refined_skin`).
"""

from __future__ import annotations

import numpy as np

from fieldgen.meshing import refine
from fieldgen.meshing.tetmesh import FREE
from fieldgen.skin.cut import SkinResult, refined_skin

#: A skin with a rim: the bisection passes after its first mesh, the largest share of the
#: estimated squared error the tets bisected in one pass hold (a smaller share than the band's
#: 0.8 refines closer to where the error is: 1.85% against 2.17% at 183k tets on the idler riser
#: under a 0.1 in skin, docs/design/sizing.md), the error a pass aims at (x the accuracy), and
#: the largest mesh they make (as the layer band's; a skin's target is 500k tets).
SKIN_BISECTIONS = 12
SKIN_DORFLER = 0.5
SKIN_AIM = 0.85
SKIN_MAX_TETS = 400_000


def bisected_share(worst: float, accuracy: float) -> float:
    """The share of the squared error to bisect in a pass whose worst error is ``worst``: at most
    ``SKIN_DORFLER``, and near the accuracy only what brings it to ``SKIN_AIM`` x the accuracy
    (bisecting a tet removes about three quarters of its squared error)."""
    return float(min(SKIN_DORFLER, (1.0 - (SKIN_AIM * accuracy / worst) ** 2) / 0.75))


def skin_on(skin: SkinResult, mesh, free_surface) -> SkinResult:
    """``skin`` for ``mesh``, a refinement of ``skin.mesh`` by splitting (:func:`fieldgen.skin.cut.refined_skin`),
    its depth measured from ``free_surface`` (vertices, faces; None: the skin mesh's own FREE faces)."""
    if mesh is skin.mesh:
        return skin
    if free_surface is None:
        free_surface = (skin.mesh.points, skin.mesh.boundary_faces[np.asarray(skin.mesh.boundary_markers) == FREE])
    return refined_skin(skin, mesh, free_surface)


def bisected_skin(skin: SkinResult, marked: np.ndarray, free_surface) -> tuple[SkinResult, int]:
    """``skin`` with its ``marked`` tets bisected and the zero-pressure tets this makes split
    (:func:`fieldgen.meshing.refine.refine_zero_tets`), and how many tets that split."""
    mesh, split = refine.refine_zero_tets(refine.bisected(skin.mesh, marked))
    return skin_on(skin, mesh, free_surface), int(split)
