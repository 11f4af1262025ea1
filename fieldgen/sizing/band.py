"""The layer band's sizing by accuracy (docs/model.md §2.4 and §2.10).

A skin meshed as a layer band (:mod:`fieldgen.skin.band`) is refined by bisection, which splits a
flat prism tet across its long edges and so keeps it in its layer; after the first pass the
band's layers are slid onto the levels of the solved extent.
"""

from __future__ import annotations

import numpy as np

from fieldgen.fe import extent as extent_solve
from fieldgen.fe.estimate import estimate_error, worst_error
from fieldgen.meshing import refine
from fieldgen.meshing.tetmesh import tet_volumes
from fieldgen.progress import Progress
from fieldgen.sizing.accuracy import (TETS_PER_MARKED, SizedMesh, SizingPass, better_pass, marked_tets,
                                      pass_record, report_pass, sized_mesh, solved_pass, stop_reason)

#: The layer band's sizing (:func:`band_by_accuracy`): the largest share of the squared error the
#: tets bisected in a pass may hold (a pass near the accuracy takes only what the goal needs), the
#: passes after the first mesh, and the largest mesh it asks for (docs/model.md §2.4).
BAND_DORFLER = 0.8
#: The error a band's last pass aims at, x the accuracy.
AIM_BAND = 0.85
BAND_PASSES = 6
BAND_MAX_TETS = 400_000
#: The kept pass's layers are slid onto its own solution's levels this many times (each solved
#: again), and kept if its estimate meets the accuracy where the pass's did, else is within
#: REALIGN_SLACK x the pass's (docs/design/skin.md, "The layer band").
REALIGN_ROUNDS = 2
REALIGN_SLACK = 1.01


def band_by_accuracy(mesher, law, accuracy: float, *, progress=None,
                     max_tets: int = BAND_MAX_TETS) -> SizedMesh:
    """A skin meshed as a layer band, refined until the estimated errors are within ``accuracy``:
    ``mesher.mesh()`` makes the first mesh (a :class:`fieldgen.sizing.mesher.BandPass`), whose
    layers its ``align(mesh, extent) -> (mesh, moved)`` slides onto the levels of its solution
    (after the first pass, before its marked tets are bisected: moving vertices keeps the tets);
    each pass bisects the tets holding ``BAND_DORFLER`` of the estimated squared error, or what
    the goal needs near it (scikit-fem's conforming bisection), while the mesh is under
    ``max_tets``. The band's ``skin(mesh)`` gives the kept mesh's
    :class:`fieldgen.skin.cut.SkinResult`; the result's ``band`` is the band's description, with
    ``columns_aligned``, how many columns the alignment moved, when the kept mesh is aligned, and
    ``columns_realigned``, how many the alignment of the kept mesh to its own solution moved
    (:func:`_realigned`), when that was kept."""
    progress = progress or Progress(enabled=False)
    first = mesher.mesh()
    mesh, split = first.mesh, first.split
    history: list[dict] = []
    best = None
    marked = None
    stopped = "pass limit"
    aligned, moved, base = False, None, None
    for index in range(1 + BAND_PASSES):
        if index:
            with progress.stage("refine"):
                mesh, more = refine.refine_zero_tets(refine.bisected(mesh, marked))
            split += more
        solution, estimate, worst = solved_pass(mesh, law, progress)
        history.append({**pass_record(mesh, estimate, first.skin.outer_edge, marked), "meshed_by": "band",
                        "aligned": aligned})
        report_pass(progress, index, mesh, estimate, accuracy)
        best = better_pass(best, SizingPass(index, worst, mesh, None, split, solution, estimate, first.parameters))
        if worst <= accuracy and not aligned:
            # Met on the first mesh: align it still (fewer tets to layer), solve and estimate it.
            with progress.stage("band"):
                mesh, moved = first.align(mesh, solution.extent)
            aligned, base = True, mesh
            solution, estimate, _ = solved_pass(mesh, law, progress)
            history.append({**pass_record(mesh, estimate, first.skin.outer_edge), "meshed_by": "band",
                            "aligned": True})
            report_pass(progress, index + 1, mesh, estimate, accuracy)
            if worst_error(estimate) <= accuracy:
                best = SizingPass(index + 1, worst_error(estimate), mesh, None, split, solution, estimate,
                                  first.parameters)
        reason = stop_reason(worst, accuracy, mesh, max_tets)
        if reason:
            stopped = reason
            break
        left = max_tets - mesh.n_tets
        if index == BAND_PASSES:
            break
        volumes = np.abs(tet_volumes(mesh.points, mesh.tets))
        # Near the accuracy, mark only what the goal needs: bisecting a tet removes about three
        # quarters of its squared error, and the error is to fall from `worst` to AIM x accuracy.
        share = min(BAND_DORFLER, (1.0 - (AIM_BAND * accuracy / worst) ** 2) / 0.75)
        marked = marked_tets(estimate, volumes, law, share=share, limit=int(left / TETS_PER_MARKED))
        if not aligned:
            with progress.stage("band"):
                mesh, moved = first.align(mesh, solution.extent)    # the layers onto the levels of e as solved
            aligned, base = True, mesh
    kept_aligned = history[best.index].get("aligned", True)
    # The kept mesh's layers onto its own solution's levels: a refinement of the aligned mesh, or
    # the first mesh itself when the budget stopped the loop before any alignment.
    best, realigned = _realigned(best, first, base if kept_aligned else best.mesh, law, accuracy, progress, history)
    best = SizingPass(best.index, best.worst, best.mesh, first.skin(best.mesh), best.split, best.solution,
                      best.estimate, best.parameters)
    band = {**first.description, **({"columns_aligned": moved} if kept_aligned else {}),
            **({"columns_realigned": realigned} if realigned else {})}
    return sized_mesh(best, accuracy, history, stopped, refinement="bisection", band=band)


def _realigned(best: SizingPass, first, base, law, accuracy: float, progress, history: list) -> tuple[SizingPass, int]:
    """The kept pass with the band's layers slid again onto the levels of its own solution
    (``REALIGN_ROUNDS`` times, solving after each) and estimated, and how many columns the last
    round moved; the pass as it was if nothing moved, or if the estimate came out above the
    accuracy where the pass met it, or above ``REALIGN_SLACK`` x the pass's where it did not. The
    bisection after the first alignment moves the solution off the layers
    (docs/design/contact-accuracy.md, "Where a skinned part's added tets are"): the layering then
    cuts tets that cross a level by a hair."""
    mesh, solution, found, moved = best.mesh, best.solution, None, 0
    for _ in range(REALIGN_ROUNDS):
        with progress.stage("band"):
            mesh, rounds_moved, found = first.realign(base, mesh, solution.extent, found)
        if not rounds_moved:
            break
        moved = rounds_moved
        with progress.stage("extent"):
            solution = extent_solve.solve_extent(mesh)
    if mesh is best.mesh or not moved:
        return best, 0
    with progress.stage("error estimate"):
        estimate = estimate_error(mesh, solution.extent, law)
    worst = worst_error(estimate)
    # A pass that met the accuracy is replaced only by one that meets it too.
    if worst > (accuracy if best.worst <= accuracy else REALIGN_SLACK * best.worst):
        return best, 0
    history.append({**pass_record(mesh, estimate, first.skin.outer_edge), "meshed_by": "band", "aligned": True,
                    "realigned": True, "from_pass": best.index + 1})
    report_pass(progress, len(history) - 1, mesh, estimate, accuracy)
    return SizingPass(len(history) - 1, worst, mesh, None, best.split, solution, estimate, best.parameters), moved
