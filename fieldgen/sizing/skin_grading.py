"""A cut skin with a rim, refined where its error is (docs/model.md §2.10).

A cut skin's first pass is graded by depth alone (:func:`fieldgen.sizing.size_field.capped_sizes`):
an edge ``near`` the free surface everywhere in the skin. Where a free face meets a bonded one
(a rim: a skinned part on a rigid mount), the extent jumps from 0 to 1 along the rim and the
estimated error gathers near the bonded faces, in a small share of the volume; a finer ``near``
edge everywhere (TetGen's next pass) then spends most of its tets where the field is already
within the accuracy (docs/design/sizing.md, "A skin's graded sizing"). So a skin with a rim is
refined after its first pass as the layer band is: the tets holding a share of the estimated
squared error are bisected (scikit-fem's conforming bisection), pass by pass, within
``SKIN_MAX_TETS``, and with them the tets that hold L's error while it is past the aim
(:func:`marked_by_worst`); the skin's record follows the refined mesh (:func:`fieldgen.skin.cut.refined_skin`).
"""

from __future__ import annotations

import numpy as np

from fieldgen.fe.estimate import ErrorEstimate, tet_error
from fieldgen.meshing import refine
from fieldgen.meshing.tetmesh import FREE
from fieldgen.skin.cut import SkinResult, refined_skin

#: A skin with a rim: the bisection passes after its first mesh, the largest share of the
#: estimated squared error the tets bisected in one pass hold (a smaller share than the band's
#: 0.8 refines closer to where the error is: 1.85% against 2.17% at 183k tets on the idler riser
#: under a 0.1 in skin, docs/design/sizing.md), the error a pass aims at (x the accuracy), and
#: the tet budget they stop at (the last pass can pass it by 2-5%, never ``SKIN_CAP_TETS``:
#: docs/design/sizing.md, "A skin on a mount").
SKIN_BISECTIONS = 12
SKIN_DORFLER = 0.5
SKIN_AIM = 0.85
SKIN_MAX_TETS = 480_000
#: The most tets a bisection pass may leave (a skin's target): a pass whose closure passes it is
#: bisected again from the same mesh with fewer tets marked (:func:`bisected_within`).
SKIN_CAP_TETS = 500_000
#: The share of a tet's part of L's error (:func:`fieldgen.fe.estimate.length_shares`) that
#: bisecting it is counted on to remove when marking for L (:func:`marked_by_worst`).
LENGTH_REMOVED = 0.75


def bisected_share(worst: float, accuracy: float) -> float:
    """The share of the squared error to bisect in a pass whose worst error is ``worst``: at most
    ``SKIN_DORFLER``, and near the accuracy only what brings it to ``SKIN_AIM`` x the accuracy
    (bisecting a tet removes about three quarters of its squared error)."""
    return float(min(SKIN_DORFLER, (1.0 - (SKIN_AIM * accuracy / worst) ** 2) / 0.75))


def _fewest_holding(indicator: np.ndarray, amount: float) -> np.ndarray:
    """Indices of the fewest entries of ``indicator`` (>= 0) whose sum reaches ``amount``, largest
    first (ties by index); every positive one if they do not reach it."""
    order = np.lexsort((np.arange(len(indicator)), -indicator))
    count = int(np.searchsorted(np.cumsum(indicator[order]), amount)) + 1
    return order[:min(count, int(np.count_nonzero(indicator > 0)))]


def marked_by_worst(estimate: ErrorEstimate, volume: np.ndarray, law, accuracy: float,
                    limit: int | None = None) -> np.ndarray:
    """The tets to bisect in a pass, sorted: one set per term of the estimate past ``SKIN_AIM`` x
    the accuracy, their union, at most ``limit`` tets (the sets taken worst term first).

    - e and p0 (by the worse of the two): the fewest tets holding :func:`bisected_share` of their
      squared error (Dörfler marking; per tet the larger of e's and p0's,
      :func:`fieldgen.fe.estimate.tet_error`).
    - L: its error is a sum of signed per-tet shares (:func:`fieldgen.fe.estimate.length_shares`)
      that largely cancel (their magnitudes add up to about five times the sum on a skin on a
      mount), so the tets marked are the fewest whose shares, of the sum's sign, hold what brings
      the sum to ``SKIN_AIM`` x the accuracy, over ``LENGTH_REMOVED``.

    Bisecting by e's and p0's error alone leaves L's where it is (docs/model.md §2.10;
    docs/design/sizing.md, "A skin on a mount")."""
    goal = SKIN_AIM * accuracy
    terms = []
    field_error = max(estimate.extent, estimate.pressure)
    if field_error > goal:
        squared = tet_error(estimate, law) ** 2 * np.asarray(volume, dtype=np.float64)
        terms.append((field_error, _fewest_holding(squared, bisected_share(field_error, accuracy) * squared.sum())))
    shares = estimate.tet_length
    if shares is not None and estimate.characteristic_length > goal:
        net = float(shares.sum())
        terms.append((estimate.characteristic_length,
                      _fewest_holding(np.maximum(np.sign(net) * shares, 0.0), (abs(net) - goal) / LENGTH_REMOVED)))
    if not terms:
        return np.zeros(0, dtype=np.int64)
    terms.sort(key=lambda term: -term[0])          # the worst term's set first (a stable sort)
    merged = np.concatenate([tets for _, tets in terms])
    _, first = np.unique(merged, return_index=True)
    merged = merged[np.sort(first)]
    return np.sort(merged if limit is None else merged[:max(int(limit), 0)])


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


def bisected_within(skin: SkinResult, estimate: ErrorEstimate, volume: np.ndarray, law, accuracy: float,
                    limit: int, cap: int | None, free_surface) -> tuple[SkinResult, int, np.ndarray]:
    """``skin`` bisected at :func:`marked_by_worst`'s tets (at most ``limit``), the tets that split
    (:func:`bisected_skin`) and the tets marked. If that leaves more than ``cap`` tets (the closure
    adds more per marked tet than the limit counted on), ``skin`` is bisected again with fewer
    tets marked, in proportion to the room left, until it does not (or one tet is marked)."""
    marked = marked_by_worst(estimate, volume, law, accuracy, limit)
    while True:
        refined, split = bisected_skin(skin, marked, free_surface)
        added = refined.mesh.n_tets - skin.mesh.n_tets
        if cap is None or refined.mesh.n_tets <= cap or len(marked) <= 1:
            return refined, split, marked
        fewer = int(0.95 * len(marked) * (cap - skin.mesh.n_tets) / max(added, 1))
        marked = marked_by_worst(estimate, volume, law, accuracy, max(min(fewer, len(marked) - 1), 1))
