"""Mesh size from a stated accuracy: the sizing passes (docs/model.md §2.10).

Each pass meshes (or refines), solves the extent, estimates its error
(:func:`fieldgen.fe.estimate.estimate_error`) and, until the worst of the three relative errors
is within the accuracy, refines again within a tet budget (the standard adaptive FEM loop).

Without a skin (:func:`_refine_locally`), the first mesh is TetGen's at about
:data:`fieldgen.sizing.size_field.FIRST_TETS` tets (more where the surface has small features)
and each pass refines locally: the edges with the most estimated error removed per tet added are
split (:func:`marked_edges`), so tets thin across thin walls and re-entrant edges, where the
error gathers on CAD parts; a part with a rim has the tets holding ``DORFLER`` of the estimated
squared error bisected instead (docs/design/sizing.md). With a skin (:func:`_grade_by_depth`) the
mesh is graded by depth below the free surface (TetGen's -m with a background size field,
:mod:`fieldgen.sizing.size_field`), each pass asking for the edge near the surface that brings
the worst error to ``AIM`` x the accuracy (error ∝ h^rate). The layer band has its own loop
(:mod:`fieldgen.sizing.band`).

The loops make their meshes through a mesher (:class:`fieldgen.sizing.mesher.Mesher`): an object
whose ``mesh(edge, background=None, stretch=None, cut=True)`` returns a
:class:`fieldgen.sizing.mesher.MeshedPass`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from fieldgen.errors import BuildError, MesherCrash
from fieldgen.fe.estimate import ErrorEstimate, error_percent, estimate_error, worst_error
from fieldgen.fe import extent as extent_solve
from fieldgen.meshing import refine
from fieldgen.meshing.tetmesh import FREE, RIGID, TetMesh, tet_volumes
from fieldgen.progress import Progress
from fieldgen.sizing.plate import PLATE_FIRST_TETS, PLATE_STRETCH, stretch_fits
from fieldgen.sizing import adapt, extrusion, lengthwise, sheet, skin_grading, tray
from fieldgen.sizing.thickness import face_thickness, has_thin_walls, vertex_thickness
from fieldgen.sizing.size_field import (capped_sizes, first_near_edge, first_size, mesh_with_size_field,
                                        next_near_edge)
from fieldgen.skin.cut import free_surface_depth
from fieldgen.surface.remesh import TETS_PER_COST, surface_cost
from fieldgen.surface.topology import face_areas, signed_volume

#: Fraction of the accuracy the sizing aims at (the rest is margin for the estimate itself).
AIM = 0.7
MAX_PASSES = 3
#: Without a skin: passes of local refinement after the first mesh, and the share of the estimated
#: squared error the tets refined in each pass hold (Dörfler marking; docs/design/sizing.md).
ADAPTIVE_PASSES = 8
DORFLER = 0.8
#: The share of the edges' estimated error split in each steepest-edge pass (:func:`marked_edges`;
#: docs/design/sizing.md, "Refinement by edges").
EDGE_DORFLER = 0.6
#: Tets added per marked tet by one bisection pass with its closure (docs/design/sizing.md).
TETS_PER_MARKED = 3.0
#: The share of the budget left to a steepest-edge pass that it is given: an edge adds a little
#: more than the tets around it when it shares a tet with another chosen edge, and the split of
#: zero-pressure tets follows.
EDGE_ROOM = 0.95
#: A part with thin walls: edges across each wall in its first adapted mesh (a parabola across
#: needs about 9 P1 elements for 1%: docs/design/sizing.md, "Thin walls"), and the passes adapted
#: to the solved extent after it.
WALL_ACROSS = 10.0
#: ... and their edges along a wall, in first edges (the Hessian's passes refine along it where
#: the field bends: near a wall's end).
WALL_ALONG = 2.0
THIN_PASSES = 2
#: The most tets a first mesh may hold: the estimate solves on its red refinement, 8 times as many
#: (about 4.4 kB a tet of the mesh: 5.9 GB at 1.33 M on a threaded bolt; a 30 mm thread plate's
#: 4.1 M passed 13 GB). Past it the build stops naming the fixes (:func:`_check_within_reach`).
MAX_ESTIMATED_TETS = 2_000_000
#: Off: MMG3D's anisotropic passes took minutes of CPU on a 20 mm tube (a 30 s budget is the
#: target), so thin walls are refined by steepest edges as any part until that is met
#: (docs/design/sizing.md, "Thin walls").
THIN_WALL_ADAPTATION = False
#: Largest mesh the sizing asks for (tets before layering).
MAX_TETS = 280_000
#: TetGen's radius-edge bound for the first mesh of a surface whose triangles alone would cost
#: the default bound (1.414) more tets than the budget (``TETS_PER_COST`` a unit of
#: :func:`fieldgen.surface.remesh.surface_cost`; a threaded nut's 214k made 4.0 M tets, 16.7 GB):
#: at 10 the nut's first mesh is 0.84 M, 3.8 GB, the estimate the same (docs/design/sizing.md,
#: "Surfaces too fine for the budget").
RELAXED_RADIUS_EDGE = 10.0
#: A first mesh at the default bound that alone holds more than this share of the budget is made
#: again at ``RELAXED_RADIUS_EDGE`` (kept if smaller): the passes need the rest of the budget
#: where the error is (docs/design/sizing.md, "A first mesh past half the budget").
RELAX_SHARE = 0.5
#: A plate or tray (not only a wall thin against the uniform first edge) is meshed in layers when
#: its walls are thinner than ``THIN_EDGES`` x this many edges of a uniform mesh of the whole tet
#: budget (about six): the parabola across such a wall needs more tets across than TetGen's passes
#: can give it within the budget (docs/design/sizing.md, "Plates thick against the first edge").
LAYER_BUDGET_EDGES = 8.0
#: The share of the tet budget a plate's stretched first mesh may be predicted to take
#: (:func:`fieldgen.sizing.plate.stretch_fits`), as a layered first mesh's.
FIRST_SHARE = extrusion.BUDGET_SHARE
#: Why a sizing loop stopped (``SizedMesh.stopped``, the asset's ``mesher.sizing.stopped``).
STOP_REASONS = ("accuracy met", "tet budget", "pass limit")


@dataclass(frozen=True)
class SizedMesh:
    """The mesh chosen for an accuracy, its extent solution and error estimate, and the passes."""

    mesh: TetMesh
    skin: object            # SkinResult or None
    split: int              # tets split by the zero-pressure refinement of the final mesh
    solution: object        # ExtentSolution on ``mesh``
    estimate: ErrorEstimate
    accuracy: float
    history: list = field(default_factory=list)
    stopped: str = "accuracy met"   #: why the sizing stopped: one of STOP_REASONS
    refinement: str = ""            #: how passes refined: "steepest edge" or "bisection" ("" if none ran)
    kept: int = 0                   #: the pass (0-based) whose mesh this is: the one of least error
    stretch: dict | None = None     #: a plate's first mesh: {"axis": unit thin axis, "factor"}
    parameters: Mapping[str, Any] = field(default_factory=dict)   #: the mesher's, for the kept mesh
    band: Mapping[str, Any] | None = None   #: a layer band's description (the asset's mesher.band)
    thin_walls: dict | None = None  #: thin walls adapted by MMG3D: {"thinnest", "hausdorff"} (m)

    @property
    def passes(self) -> int:
        return len(self.history)

    def report(self) -> dict:
        return {"accuracy": float(self.accuracy), "stopped": self.stopped,
                **({"refinement": self.refinement} if self.refinement else {}),
                **({"stretch": self.stretch} if self.stretch else {}),
                **({"thin_walls": self.thin_walls} if self.thin_walls else {}),
                "kept_pass": int(self.kept) + 1, "passes": list(self.history)}


@dataclass(frozen=True)
class SizingPass:
    """One sizing pass's mesh and results, kept while it is the best so far."""

    index: int
    worst: float
    mesh: TetMesh
    skin: object
    split: int
    solution: object
    estimate: ErrorEstimate
    parameters: Mapping[str, Any] = field(default_factory=dict)   #: the mesher's, for this mesh


def better_pass(best: SizingPass | None, candidate: SizingPass) -> SizingPass:
    """The pass of smaller worst error (the earlier one on a tie). A pass can come out worse
    than the one before it (TetGen's next mesh under a skin, or edge splits that leave flat tets
    in a plate a few tets thick: docs/design/sizing.md, "The pass kept"); the sizing then keeps
    the better mesh rather than the last."""
    return candidate if best is None or candidate.worst < best.worst else best


def stop_reason(worst: float, accuracy: float, mesh: TetMesh, max_tets: int) -> str | None:
    """Why a sizing loop stops after a pass with error ``worst``: the accuracy is met, or less than
    3% of the mesh is left of the budget; None to go on."""
    if worst <= accuracy:
        return "accuracy met"
    if max_tets - mesh.n_tets < 0.03 * mesh.n_tets:
        return "tet budget"
    return None


def solved_pass(mesh: TetMesh, law, progress):
    """The extent on ``mesh``, its error estimate and the worst of its errors: each sizing pass."""
    with progress.stage("extent"):
        solution = extent_solve.solve_extent(mesh)
    with progress.stage("error estimate"):
        estimate = estimate_error(mesh, solution.extent, law)
    return solution, estimate, worst_error(estimate)


def sized_mesh(best: SizingPass, accuracy: float, history: list, stopped: str, refinement: str = "",
               stretch: dict | None = None, band: Mapping[str, Any] | None = None,
               thin_walls: dict | None = None) -> SizedMesh:
    return SizedMesh(mesh=best.mesh, skin=best.skin, split=int(best.split), solution=best.solution,
                     estimate=best.estimate, accuracy=float(accuracy), history=history, stopped=stopped,
                     refinement=refinement, kept=best.index, stretch=stretch, parameters=best.parameters,
                     band=band, thin_walls=thin_walls)


def pass_record(mesh, estimate, edge, marked=None, split_edges=None) -> dict:
    """One pass of ``mesher.sizing.passes``: the mesh, the edge length asked, what the previous
    pass refined (``refined_tets`` bisected, or ``split_edges``) and the estimates."""
    return {"tets": int(mesh.n_tets), "edge_length": float(edge),
            **({"refined_tets": int(len(marked))} if marked is not None else {}),
            **({"split_edges": int(len(split_edges))} if split_edges is not None else {}),
            "extent": float(estimate.extent), "pressure": float(estimate.pressure),
            "characteristic_length": float(estimate.characteristic_length)}


def report_pass(progress, index, mesh, estimate, accuracy) -> None:
    progress.message(f"sizing pass {index + 1}: {mesh.n_tets:,} tets, estimated error e "
                     f"{error_percent(estimate.extent, accuracy)}, p {error_percent(estimate.pressure, accuracy)}, "
                     f"L {error_percent(estimate.characteristic_length, accuracy)} (asked {100 * accuracy:g}%)")


# ------------------------------------------------------------------ marking

def marked_tets(estimate: ErrorEstimate, volume: np.ndarray, law, share: float = DORFLER,
                limit: int | None = None) -> np.ndarray:
    """The fewest tets that hold ``share`` of the estimated squared error (Dörfler marking), at
    most ``limit`` of the worst, sorted; a tet's error is the larger of its e and p0 errors
    (relative)."""
    density = np.maximum(estimate.tet_rms_extent, estimate.tet_rms_pressure / law.max_pressure)
    return _doerfler(density ** 2 * np.asarray(volume, dtype=np.float64), share, limit)


def marked_edges(estimate: ErrorEstimate, volume: np.ndarray, room: int,
                 share: float = EDGE_DORFLER) -> tuple[np.ndarray, np.ndarray]:
    """The edges to split in a steepest-edge pass, as (k, 2) vertex pairs and their priorities.

    Splitting edge E (in every tet around it) removes about its surplus s_E
    (``ErrorEstimate.edge_surplus``) over the tets around it, a gain of s_E² V_E (V_E their
    volume), and adds about one tet per tet around it, c_E (a little more when two chosen edges
    share a tet: the second is then split in both halves, so the caller passes ``EDGE_ROOM`` of
    what is left of its budget). Edges are taken by gain per added tet, s_E² V_E / c_E (the
    priority; ties by edge index), until they hold ``share`` of the total gain or their tets
    would pass ``room``; at least one. Where the field bends across a thin wall only, the chosen
    edges run across it (Dörfler marking over edges, with a cost)."""
    m = len(estimate.edges)
    around = estimate.tet_edges.ravel()
    count = np.bincount(around, minlength=m).astype(np.float64)
    patch = np.bincount(around, weights=np.repeat(np.asarray(volume, dtype=np.float64), 6), minlength=m)
    gain = estimate.edge_surplus ** 2 * patch
    priority = gain / count
    order = np.lexsort((np.arange(m), -priority))
    by_share = int(np.searchsorted(np.cumsum(gain[order]), share * gain.sum())) + 1
    by_room = int(np.searchsorted(np.cumsum(count[order]), room, side="right"))
    chosen = np.sort(order[:max(1, min(by_share, by_room, m))])
    return estimate.edges[chosen], priority[chosen]


def has_rim(mesh: TetMesh) -> bool:
    """Whether a vertex lies on both a FREE and a RIGID boundary face (where the Dirichlet data
    jump)."""
    return bool(np.intersect1d(mesh.vertices_with(FREE), mesh.vertices_with(RIGID)).size)


def _doerfler(squared: np.ndarray, share: float, limit: int | None) -> np.ndarray:
    """The fewest tets holding ``share`` of Σ ``squared``, at most ``limit``, sorted."""
    order = np.argsort(-squared, kind="stable")
    count = int(np.searchsorted(np.cumsum(squared[order]), share * squared.sum())) + 1
    count = min(count, len(order), len(order) if limit is None else max(int(limit), 0))
    return np.sort(order[:count])


# ------------------------------------------------------------------ the loops

def mesh_by_accuracy(mesher, law, accuracy: float, volume: float, *,
                     progress=None, skin: float | None = None, free_surface=None,
                     max_passes: int = MAX_PASSES, max_tets: int = MAX_TETS,
                     plate: np.ndarray | None = None, first_edge: float | None = None,
                     surface: tuple[np.ndarray, np.ndarray] | None = None,
                     tets_per_cost: float = TETS_PER_COST) -> SizedMesh:
    """Mesh, solve, estimate and refine until the estimated relative errors of e, p0 and L are
    all within ``accuracy``.

    ``mesher.mesh(edge_length, background=None, cut=True, stretch=None)`` meshes the part with
    TetGen (a uniform edge length in m, a ``background`` size field, or a ``stretch`` (axis,
    factor) for thin tets) and returns a :class:`fieldgen.sizing.mesher.MeshedPass`: the mesh the
    extent is solved on, the whole part's mesh (before a skin cut), the skin (or None), the
    number of zero-pressure tets split and the mesher's parameters. ``volume`` is the part's (m³).

    Without a skin: :func:`_refine_locally`, whose first mesh is stretched along ``plate`` (the
    thin axis of a plate-like part, :func:`fieldgen.sizing.plate.plate_axis`) if given, and has
    edge ``first_edge`` (m) if given (fTetWild's default edge with --robust), and is sized from the
    local thickness of ``surface`` (vertices, faces; m) if given, it has thin walls and
    ``THIN_WALL_ADAPTATION`` is on (:func:`_adapt_thin_walls`), at a looser quality bound if the
    surface would cost more than the budget at ``tets_per_cost`` tets a unit of its cost
    (:func:`first_radius_edge`); with a ``skin``
    thickness (m), whose depth is measured from ``free_surface`` (vertices, faces):
    :func:`_grade_by_depth`.
    """
    progress = progress or Progress(enabled=False)
    if skin is None:
        return _refine_locally(mesher, law, accuracy, volume, progress=progress, max_tets=max_tets,
                               plate=plate, first_edge=first_edge, surface=surface, tets_per_cost=tets_per_cost)
    return _grade_by_depth(mesher, law, accuracy, volume, progress=progress, skin=skin,
                           free_surface=free_surface, max_passes=max_passes, max_tets=max_tets)


def _layered_first_mesh(mesher, plate, surface, volume: float, max_tets: int):
    """A first mesh in layers for a thin right prism: a plate across its thin ``plate`` axis
    (:mod:`fieldgen.sizing.extrusion`) or a thin-walled tube or tray along its axis
    (:mod:`fieldgen.sizing.lengthwise`, :mod:`fieldgen.sizing.tray`), or else a sheet of one
    thickness, flat or bent (:func:`_sheet_first_mesh`); None for any other part, or one whose
    walls are thin neither against the uniform first edge nor against ``LAYER_BUDGET_EDGES``
    edges of a uniform mesh of the budget. A right prism whose section is
    thin by its own measure (:func:`fieldgen.sizing.lengthwise.thin_section`) is layered whatever
    the first edge: a tee with 3 mm walls, not thin against a 3.4 mm first edge, stopped at the
    budget at 1.9 % under TetGen's passes (docs/design/sizing.md, "Thin walls")."""
    prism = plate is None and lengthwise.thin_section(*surface) is not None
    if plate is None and not prism and tray.tray_section(*surface) is None:
        return _sheet_first_mesh(mesher, surface, volume, max_tets)
    wall_edge = max(first_size(volume), LAYER_BUDGET_EDGES * first_size(volume, max_tets))
    if not prism and not has_thin_walls(*surface, face_thickness(*surface), wall_edge):
        return None
    made = mesher.layered(plate, max_tets) if plate is not None else None
    if made is None:
        made = mesher.lengthwise(max_tets)        # a tube, or a tray (plate-like when shallow)
    if made is None and not prism:
        return _sheet_first_mesh(mesher, surface, volume, max_tets)       # a plate bent, or not a prism
    return made if made is not None and made.mesh.n_tets <= max_tets else None


def _sheet_first_mesh(mesher, surface, volume: float, max_tets: int):
    """A first mesh in layers for a sheet of one thickness, flat or bent
    (:mod:`fieldgen.sizing.sheet`); None for any other part. Only a part thin on average
    (:func:`fieldgen.sizing.sheet.thin_on_average`) casts the thickness rays."""
    if not hasattr(mesher, "sheet") or not sheet.thin_on_average(*surface, volume):
        return None
    made = mesher.sheet(max_tets)
    return made if made is not None and made.mesh.n_tets <= max_tets else None


def _refine_locally(mesher, law, accuracy: float, volume: float, *, progress, max_tets: int,
                    plate: np.ndarray | None = None, first_edge: float | None = None,
                    surface: tuple[np.ndarray, np.ndarray] | None = None,
                    tets_per_cost: float = TETS_PER_COST) -> SizedMesh:
    """Adaptive refinement without a skin (the standard solve-estimate-mark-refine loop).

    A first, uniform TetGen mesh of about ``FIRST_TETS`` tets in ``volume`` (more where the
    surface has small features), then up to ``ADAPTIVE_PASSES`` passes, never past about
    ``max_tets`` tets. Each pass splits the edges of :func:`marked_edges`
    (:func:`fieldgen.meshing.refine.split_edges`): in a thin wall the field bends across the wall
    only, and these edges run across it. A ``plate`` (:func:`fieldgen.sizing.plate.plate_axis`)
    starts from anisotropic tets instead (``PLATE_STRETCH``, ``PLATE_FIRST_TETS``): split edges
    cannot make a plate meshed one tet thick into good thin tets. A part with a rim
    (:func:`has_rim`) has its tets holding ``DORFLER`` of the squared error (:func:`marked_tets`)
    bisected instead (:func:`fieldgen.meshing.refine.bisected`): at the rim ∇e is singular in
    every direction across it (docs/design/sizing.md, "Parts with a rim").
    """
    edge = first_size(volume) if first_edge is None else float(first_edge)
    stretch = None
    if plate is not None and (surface is None or stretch_fits(*surface, plate, FIRST_SHARE * max_tets)):
        stretch = (tuple(float(x) for x in plate), PLATE_STRETCH)
        # TetGen's edge in the stretched part (PLATE_STRETCH x the volume): along the plate;
        # across it the tets are PLATE_STRETCH times thinner.
        edge = first_size(volume * PLATE_STRETCH, PLATE_FIRST_TETS)
    history: list[dict] = []
    mesh, marked, steepest, edges, priority, parameters = None, None, None, None, None, {}
    best = None
    passes = 1 + ADAPTIVE_PASSES
    stopped = "pass limit"
    if THIN_WALL_ADAPTATION and surface is not None and stretch is None:
        per_face = face_thickness(*surface)
        if has_thin_walls(*surface, per_face, edge):
            return _adapt_thin_walls(mesher, law, accuracy, surface, per_face, edge, progress=progress,
                                     max_tets=max_tets)
    layered = None
    if surface is not None and hasattr(mesher, "layered"):
        layered = _layered_first_mesh(mesher, plate, surface, volume, max_tets)
    for index in range(passes):
        if mesh is None and layered is not None:
            made, stretch = layered, None
            mesh, split, parameters = made.mesh, made.split, made.parameters
        elif mesh is None:
            _check_walls_within_reach(mesher, surface)
            radius_edge = first_radius_edge(surface, max_tets, tets_per_cost)
            made = _first_mesh(mesher, edge, stretch, radius_edge)
            if radius_edge is None and surface is not None:          # (None: fTetWild's surface)
                made = _relaxed_if_over(mesher, made, edge, stretch, max_tets)
            _check_within_reach(mesher, made.mesh.n_tets, max_tets)
            mesh, split, parameters = made.mesh, made.split, made.parameters
        else:
            with progress.stage("refine"):
                if steepest:
                    mesh, more = refine.refine_zero_tets(refine.split_edges(mesh, edges, priority))
                else:
                    mesh, more = refine.refine_zero_tets(refine.bisected(mesh, marked))
            split += more
        solution, estimate, worst = solved_pass(mesh, law, progress)
        history.append(pass_record(mesh, estimate, edge, marked, edges))
        report_pass(progress, index, mesh, estimate, accuracy)
        best = better_pass(best, SizingPass(index, worst, mesh, None, split, solution, estimate, parameters))
        reason = stop_reason(worst, accuracy, mesh, max_tets)
        if reason:
            stopped = reason
            break   # met, or the tet budget is spent: the estimate says how far it is
        left = max_tets - mesh.n_tets
        if index == passes - 1:
            break
        volumes = np.abs(tet_volumes(mesh.points, mesh.tets))
        if steepest is None:
            steepest = not has_rim(mesh)
        if steepest:
            edges, priority = marked_edges(estimate, volumes, int(EDGE_ROOM * left))
        else:
            marked = marked_tets(estimate, volumes, law, limit=int(left / TETS_PER_MARKED))
    return sized_mesh(best, accuracy, history, stopped,
                      refinement="" if steepest is None else "steepest edge" if steepest else "bisection",
                      stretch=None if stretch is None else {"axis": list(stretch[0]), "factor": float(stretch[1])})


def first_radius_edge(surface, max_tets: int, tets_per_cost: float = TETS_PER_COST) -> float | None:
    """``RELAXED_RADIUS_EDGE`` when the ``surface`` (vertices, faces) alone would cost TetGen's
    default quality bound more than ``max_tets`` (``tets_per_cost`` a unit of its cost:
    :func:`fieldgen.surface.remesh.tets_per_cost`); None (the bound asked) otherwise."""
    if surface is None or tets_per_cost * surface_cost(*surface) <= max_tets:
        return None
    return RELAXED_RADIUS_EDGE


def _relaxed_if_over(mesher, made, edge: float, stretch, max_tets: int):
    """``made``, the first mesh at the default quality bound, or, when it alone holds more than
    ``RELAX_SHARE`` of the tet budget (the surface's small triangles set it, not the volume: 5-9
    tets a unit of cost on CAD with micron edges), the first mesh again at ``RELAXED_RADIUS_EDGE``
    if that holds fewer tets. Not when the ``mesher`` keeps its bound (the user chose one, or
    fTetWild has none); a crash at the relaxed bound keeps ``made``."""
    if not mesher.relaxable or made.mesh.n_tets <= RELAX_SHARE * max_tets:
        return made
    try:
        again = mesher.mesh(edge, stretch=stretch, radius_edge=RELAXED_RADIUS_EDGE)
    except MesherCrash:
        return made
    return again if again.mesh.n_tets < made.mesh.n_tets else made


def _check_within_reach(mesher, tets: int, max_tets: int) -> None:
    """BuildError when a first mesh holds more than ``MAX_ESTIMATED_TETS`` (the surface's own
    triangles set it even at the looser bound): solving and estimating on it would run out of
    memory, so the error names the fixes instead."""
    if tets <= MAX_ESTIMATED_TETS:
        return
    raise BuildError(f"TetGen's first mesh holds {tets:,} tets, more than the sizing solves and estimates on "
                     f"({MAX_ESTIMATED_TETS:,}; its budget is {max_tets:,}): the surface's own triangles "
                     "(threads, text, slivers) set it", path=mesher.path,
                     fix="remesh the surface coarser (--surface-tolerance LENGTH, above the default 0.1 % of "
                         "its diagonal), or choose the mesh's size yourself (--edge-length)")


def _check_walls_within_reach(mesher, surface) -> None:
    """BuildError, before TetGen runs, for a part whose walls are so thin over so much surface
    that TetGen's tets (about as small as the walls are thin, even at the relaxed bound) would
    number more than ``MAX_ESTIMATED_TETS``: about ``A / t²`` with ``t = 2V / A`` the mean wall
    thickness, i.e. ``A³ / (4 V²)`` (dimensionless; a sphere 28, a 3 mm tray 25k, a 0.5 mm
    bellows 330 mm long 2.4 M). Such a first mesh took TetGen many minutes and gigabytes before
    the same limit stopped the build (docs/design/sizing.md, "Surfaces too fine for the budget")."""
    if surface is None:
        return
    area = float(face_areas(*surface).sum())
    volume = abs(signed_volume(*surface))
    if volume <= 0 or area ** 3 / (4.0 * volume ** 2) <= MAX_ESTIMATED_TETS:
        return
    thickness = 2.0 * volume / area
    raise BuildError(f"its walls are about {thickness * 1e3:.3g} mm thick (twice its volume over its area) over "
                     f"{area:.3g} m^2 of surface: TetGen's tets would be about as small as the walls are thin, "
                     f"some {area ** 3 / (4.0 * volume ** 2):,.0f} of them, more than the sizing solves and "
                     f"estimates on ({MAX_ESTIMATED_TETS:,})", path=mesher.path,
                     fix="choose the mesh yourself (--edge-length, with --radius-edge 10 for fewer tets across "
                         "thin walls), or thicken the part's walls")


def _first_mesh(mesher, edge: float, stretch, radius_edge: float | None):
    """``mesher``'s first mesh; a crash under the relaxed ``radius_edge`` says why that bound was
    used and what meshes such a surface."""
    try:
        return mesher.mesh(edge, stretch=stretch, radius_edge=radius_edge)
    except MesherCrash as error:
        if radius_edge is None:
            raise
        raise type(error)(f"{error.defect} (at radius-edge {radius_edge:g}: the surface's triangles alone would "
                          "cost the default bound more tets than the budget)", path=error.path,
                          fix="mesh it with fTetWild (--robust), or remesh the surface coarser "
                              "(--surface-tolerance LENGTH)") from None


def _adapt_thin_walls(mesher, law, accuracy: float, surface, per_face: np.ndarray, edge: float, *,
                      progress, max_tets: int) -> SizedMesh:
    """A part with thin walls (:func:`fieldgen.sizing.thickness.has_thin_walls`): MMG3D adapts
    the uniform first mesh at ``edge`` to the walls (:func:`fieldgen.sizing.adapt.wall_metric`,
    ``WALL_ACROSS`` edges across each, ``WALL_ALONG`` first edges along), then, pass by pass, to
    the solved extent's Hessian (:func:`fieldgen.sizing.adapt.hessian_metric`), each metric
    fitted to ``max_tets``; the pass of least estimated error is kept. Off by default
    (``THIN_WALL_ADAPTATION``)."""
    made = mesher.mesh(edge, cut=False)    # MMG's input only: its zero tets are not split
    vertices, faces = surface
    thickness = vertex_thickness(vertices, faces, per_face)
    hausdorff = adapt.HAUSDORFF_SHARE * float(np.min(per_face))
    metric = adapt.wall_metric(made.mesh.points, vertices, faces, thickness, WALL_ALONG * edge, WALL_ACROSS)
    mesh, history, best, stopped = made.mesh, [], None, "pass limit"
    for index in range(1 + THIN_PASSES):
        with progress.stage("adapt"):
            mesh, split = refine.refine_zero_tets(adapt.remeshed(mesh, adapt.fitted_metric(mesh, metric, max_tets),
                                                                 hausdorff))
        solution, estimate, worst = solved_pass(mesh, law, progress)
        history.append({**pass_record(mesh, estimate, edge), "meshed_by": "MMG3D"})
        report_pass(progress, index, mesh, estimate, accuracy)
        best = better_pass(best, SizingPass(index, worst, mesh, None, split, solution, estimate, made.parameters))
        if worst <= accuracy:
            stopped = "accuracy met"
            break
        metric = adapt.hessian_metric(mesh, solution.extent, AIM * accuracy, hausdorff, edge)
    return sized_mesh(best, accuracy, history, stopped, refinement="anisotropic (MMG3D)",
                      thin_walls={"thinnest": float(np.min(per_face)), "hausdorff": hausdorff})


def _grade_by_depth(mesher, law, accuracy: float, volume: float, *, progress, skin: float,
                    free_surface, max_passes: int, max_tets: int) -> SizedMesh:
    """With a skin: the mesh is graded by depth below ``free_surface`` (vertices, faces): an edge
    ``near`` the surface down to 1.25 x the skin, coarser deeper down, where the rigid interior
    is cut away (TetGen's -m with a background size field over a first coarse mesh of the part,
    :func:`fieldgen.sizing.size_field.depth_graded_sizes`). Each pass asks for the ``near`` edge
    that brings the worst error to ``AIM`` x the accuracy (error ∝ h^rate, the rate measured from
    two passes). A skin with a rim (:func:`has_rim`: on a mount) is bisected after its first pass
    instead, where its error is, within ``skin_grading.SKIN_MAX_TETS``
    (:mod:`fieldgen.sizing.skin_grading`)."""
    first = first_size(volume)
    history: list[dict] = []
    goal = AIM * accuracy
    coarse = mesher.mesh(min(first, 4.0 * skin), cut=False).whole
    with progress.stage("sizing"):
        depth = free_surface_depth(coarse, free_surface=free_surface)
    sizes = functools.partial(capped_sizes, depth, skin, first)
    near = first_near_edge(coarse, sizes, 0.5 * skin, max_tets)
    previous = None
    best = None
    stopped, refinement = "pass limit", ""
    # A uniform edge meshes where TetGen fails on the size field, if one within the budget is
    # no longer than half the skin (the cut needs tets smaller than the skin, as with --edge-length).
    budget_edge = first_size(volume, max_tets)
    for index in range(max_passes):
        uniform = max(near, budget_edge)
        made, meshed_by, edge = mesh_with_size_field(
            mesher, coarse.points, sizes(near), near=near,
            uniform_edge=uniform if uniform <= 0.5 * skin else None, progress=progress)
        if meshed_by != "uniform edge":
            near = edge     # a scaled field's near edge: the next pass starts from it
        # (A uniform mesh is not: TetGen makes several times the tets for a uniform edge that it
        # makes for a size field with that edge near the surface, so the next field starts from
        # the near edge it would have had: docs/design/sizing.md.)
        solution, estimate, worst = solved_pass(made.mesh, law, progress)
        history.append({**pass_record(made.mesh, estimate, edge), "meshed_by": meshed_by})
        report_pass(progress, index, made.mesh, estimate, accuracy)
        best = better_pass(best, SizingPass(index, worst, made.mesh, made.skin, made.split, solution, estimate,
                                            made.parameters))
        if worst <= accuracy:
            stopped = "accuracy met"
            break
        if index == 0 and has_rim(made.mesh):
            # A skin on a mount: bisected where its error is (fieldgen.sizing.skin_grading).
            cut = skin_grading.skin_on(made.skin, made.mesh, free_surface)
            split, refinement = made.split, "bisection"
            budget = skin_grading.SKIN_MAX_TETS if max_tets == MAX_TETS else max_tets
            cap = skin_grading.SKIN_CAP_TETS if max_tets == MAX_TETS else None
            per_marked = TETS_PER_MARKED     # then as the last pass measured (closure, zero tets)
            for more in range(1, 1 + skin_grading.SKIN_BISECTIONS):
                if stop_reason(worst, accuracy, cut.mesh, budget):
                    break
                volumes = np.abs(tet_volumes(cut.mesh.points, cut.mesh.tets))
                before = cut.mesh.n_tets
                with progress.stage("refine"):
                    cut, added, marked = skin_grading.bisected_within(
                        cut, estimate, volumes, law, accuracy, int((budget - before) / per_marked), cap, free_surface)
                per_marked = max(TETS_PER_MARKED, (cut.mesh.n_tets - before) / max(len(marked), 1))
                split += added
                solution, estimate, worst = solved_pass(cut.mesh, law, progress)
                history.append({**pass_record(cut.mesh, estimate, edge, marked), "meshed_by": "bisection"})
                report_pass(progress, more, cut.mesh, estimate, accuracy)
                best = better_pass(best, SizingPass(more, worst, cut.mesh, cut, split, solution, estimate,
                                                    made.parameters))
            stopped = stop_reason(worst, accuracy, cut.mesh, budget) or "pass limit"
            break
        if index == max_passes - 1:
            break
        new = next_near_edge(near, worst, previous, goal, made.mesh.n_tets, max_tets)
        if new is None:
            stopped = "tet budget"
            break   # the tet budget allows no mesh much finer: the estimate says how far it is
        previous = (near, worst)
        near = new
    return sized_mesh(best, accuracy, history, stopped, refinement=refinement)

