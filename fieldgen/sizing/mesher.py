"""The meshers the build and its sizing make meshes with (docs/model.md §2, §2.4, §2.10).

A mesher meshes one part: TetGen (:class:`TetGenMesher`), fTetWild for open or self-intersecting
input (:class:`RobustMesher`), or the layer band over the rounded rigid interior
(:class:`BandMesher`). Each call returns what it made as plain data, with the mesher's
parameters (TetGen's switches, fTetWild's parameters, the band's description) for the asset's
``mesher`` metadata: nothing is recorded anywhere else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Protocol

import numpy as np

from fieldgen.errors import FieldgenError
from fieldgen.options import BuildOptions
from fieldgen.material.levels import balanced_levels
from fieldgen.meshing import ftetwild, refine, tetgen
from fieldgen.meshing.tetgen import MeshingOptions
from fieldgen.meshing.tetmesh import TetMesh
from fieldgen.progress import Progress
from fieldgen.sizing import extrusion, lengthwise, open_section, section_field, sheet, tray
from fieldgen.skin import band as layer_band
from fieldgen.skin import interior as rigid_interior
from fieldgen.skin.cut import cut_skin


#: The layered meshers of thin-walled parts along an axis, tried in turn, with their records.
WALLED = (("layered wall (matched sides, extruded along the axis)", lengthwise.layered_wall),
          ("layered open wall (sides matched between the end caps, extruded)", open_section.layered_open_wall),
          ("layered tray (walls' strip and floor, extruded)", tray.layered_tray),
          ("layered section (MMG2D under the section's own field, extruded along the axis)",
           section_field.layered_field_wall))


@dataclass(frozen=True)
class MeshedPass:
    """One mesh a mesher made: the mesh the extent is solved on (after the skin cut and the
    zero-pressure refinement), the whole part's mesh before the cut, the skin (a SkinResult, or
    None), the tets the zero-pressure refinement split, and the mesher's parameters."""

    mesh: TetMesh
    whole: TetMesh
    skin: Any
    split: int
    parameters: Mapping[str, Any] = field(default_factory=dict)


class Mesher(Protocol):
    """What the sizing loops mesh with (:func:`fieldgen.sizing.accuracy.mesh_by_accuracy`)."""

    def mesh(self, edge: float | None = None, *, background=None, stretch=None,
             cut: bool = True, radius_edge: float | None = None) -> MeshedPass:
        """A mesh at the uniform ``edge`` (m), or under the ``background`` size field, or
        stretched (``stretch``: (axis, factor)); without ``cut``, the whole part's mesh only;
        ``radius_edge``: a looser quality bound than the default, unless one was chosen."""

    @property
    def relaxable(self) -> bool:
        """True when :meth:`mesh` would honour a looser ``radius_edge`` (no bound was chosen)."""

    @property
    def path(self) -> str:
        """The input, named in errors."""


@dataclass(frozen=True)
class PartToMesh:
    """What every mesher meshes: the surface (in m) and its conditions, and the skin to cut."""

    surface: Any                 # fieldgen.surface.stage.Surface
    core: Any                    # the core's Surface, or None
    markers: np.ndarray          # condition of each surface face
    path: str                    # the input, named in errors
    units: str                   # the input's units, for the skin's messages
    scale: float                 # metres per input unit
    skin: float | None           # skin thickness, m (None: no skin)
    free_surface: Any            # (vertices, faces) the skin's depth is measured from; None: the mesh's own
    surface_tolerance: float | None = None   # m, how far a mesher may move the surface (None: the default; 0: not at all)


def cut_and_refined(part: PartToMesh, whole: TetMesh, parameters: Mapping[str, Any], progress: Progress,
                    cut: bool = True) -> MeshedPass:
    """The skin cut (when the part has a skin) and the zero-pressure refinement of ``whole``."""
    if not cut:
        return MeshedPass(mesh=whole, whole=whole, skin=None, split=0, parameters=parameters)
    skin = None
    mesh = whole
    if part.skin is not None:
        with progress.stage("skin"):
            skin = cut_skin(whole, part.skin, free_surface=part.free_surface, path=part.path,
                            units=part.units, scale=part.scale)
            mesh = skin.mesh
    with progress.stage("refine"):
        mesh, count = refine.refine_zero_tets(mesh, path=part.path)
    return MeshedPass(mesh=mesh, whole=whole, skin=skin, split=count, parameters=parameters)


def sized_options(meshing: MeshingOptions, edge: float | None, stretch=None,
                  radius_edge: float | None = None) -> MeshingOptions:
    """``meshing`` at the uniform ``edge`` (m) when given, stretched by ``stretch`` (axis, factor),
    with the quality bound ``radius_edge`` when given and ``meshing`` has none (a bound the user
    chose, 1.414 included, is kept)."""
    sized = meshing if edge is None else replace(meshing, edge_length=edge)
    if stretch is not None:
        sized = replace(sized, stretch_axis=stretch[0], stretch=stretch[1])
    if radius_edge is not None and meshing.radius_edge is None:
        sized = replace(sized, radius_edge=float(radius_edge))
    return sized


@dataclass(frozen=True)
class TetGenMesher:
    """TetGen at the options' size, or at the sizing's edge or size field."""

    part: PartToMesh
    meshing: MeshingOptions
    progress: Progress

    def mesh(self, edge: float | None = None, *, background=None, stretch=None, cut: bool = True,
             radius_edge: float | None = None) -> MeshedPass:
        meshing = sized_options(self.meshing, edge, stretch, radius_edge)
        switches = self.meshing.switches()
        if edge is not None or background is not None:
            switches = meshing.switches()[:-1] + ("mQ" if background is not None else "Q")
        part = self.part
        with self.progress.stage("tetrahedralize"):
            whole = tetgen.tetrahedralize(
                part.surface.vertices, part.surface.faces, part.markers,
                core_vertices=None if part.core is None else part.core.vertices,
                core_faces=None if part.core is None else part.core.faces,
                options=meshing, while_waiting=warm_imports, background=background,
            )
        if whole.unmerged:          # made again with -M (fieldgen.meshing.tetgen.moved_off)
            switches = switches[:-1] + "MQ"
        parameters = {"mesher": "TetGen", "switches": switches, **tetgen.merge_record(whole)}
        return cut_and_refined(part, whole, parameters, self.progress, cut)

    @property
    def relaxable(self) -> bool:
        return self.meshing.radius_edge is None

    @property
    def path(self) -> str:
        return self.part.path

    def layered(self, axis, max_tets: int | None = None) -> MeshedPass | None:
        """A thin right-prism plate meshed in layers along its thin ``axis``
        (:func:`fieldgen.sizing.extrusion.layered_plate`); None for any other part (or one with a
        core or a skin)."""
        part = self.part
        if part.core is not None or part.skin is not None:
            return None
        with self.progress.stage("tetrahedralize"):
            whole = extrusion.layered_plate(part.surface.vertices, part.surface.faces, part.markers, axis, max_tets)
        if whole is None:
            return None
        parameters = {"mesher": "layered plate (MMG2D section, extruded)", "layers": extrusion.LAYERS}
        return cut_and_refined(part, whole, parameters, self.progress)

    def sheet(self, max_tets: int | None = None) -> MeshedPass | None:
        """A sheet of one thickness meshed in layers across it
        (:func:`fieldgen.sizing.sheet.layered_sheet`), within the part's surface tolerance; None
        for any other part, one with a core or a skin, or a surface to be kept exactly."""
        part = self.part
        if part.core is not None or part.skin is not None or part.surface_tolerance == 0:
            return None
        with self.progress.stage("tetrahedralize"):
            made = sheet.layered_sheet(part.surface.vertices, part.surface.faces, part.markers, max_tets,
                                       part.surface_tolerance)
        if made is None:
            return None
        whole, record = made
        return cut_and_refined(part, whole, {"mesher": "layered sheet (one side remeshed by MMGS, columns across)",
                                             **record}, self.progress)

    def lengthwise(self, max_tets: int | None = None) -> MeshedPass | None:
        """A thin-walled tube or tray meshed in layers along its axis (:data:`WALLED`); None for
        any other part (or one with a core or a skin)."""
        part = self.part
        if part.core is not None or part.skin is not None:
            return None
        whole = None
        with self.progress.stage("tetrahedralize"):
            for across in (lengthwise.LAYERS_ACROSS, *lengthwise.FEWER_ACROSS):   # fewer: a fine section
                for name, layered in WALLED:
                    whole = layered(part.surface.vertices, part.surface.faces, part.markers, max_tets, across)
                    if whole is not None:
                        break
                if whole is not None:
                    break
        if whole is None:
            return None
        parameters = {"mesher": name, "layers_across": across}
        return cut_and_refined(part, whole, parameters, self.progress)


@dataclass(frozen=True)
class RobustMesher:
    """fTetWild (``--robust``), at the edge of a regular tet of TetGen's volume bound."""

    part: PartToMesh
    meshing: MeshingOptions
    threads: int | None          # None: every core
    progress: Progress

    def mesh(self, edge: float | None = None, *, background=None, stretch=None, cut: bool = True,
             radius_edge: float | None = None) -> MeshedPass:
        meshing = sized_options(self.meshing, edge, stretch)      # fTetWild has no radius-edge bound
        part = self.part
        with self.progress.stage("tetrahedralize"):
            whole, parameters = ftetwild.robust_tetrahedralize(
                part.surface.vertices, part.surface.faces, part.markers,
                ftetwild.RobustOptions(edge_length=robust_edge_length(meshing),
                                       threads=ftetwild.default_threads() if self.threads is None else int(self.threads)),
                path=part.path, progress=self.progress)
        return cut_and_refined(part, whole, parameters, self.progress, cut)

    @property
    def relaxable(self) -> bool:
        return False                                               # fTetWild has no radius-edge bound

    @property
    def path(self) -> str:
        return self.part.path


def robust_edge_length(meshing: MeshingOptions) -> float | None:
    """fTetWild's target edge length (m) from the TetGen size bounds: a regular tet of the volume bound."""
    volume = meshing.volume_bound()
    return None if volume is None else float((6.0 * math.sqrt(2.0) * volume) ** (1.0 / 3.0))


@dataclass(frozen=True)
class BandPass:
    """The layer band's first mesh (:class:`BandMesher`), after the zero-pressure refinement."""

    mesh: TetMesh
    skin: Any                    # fieldgen.skin.band.BandSkin: describes the skin of a mesh of the band
    split: int
    parameters: Mapping[str, Any]    # TetGen's switches for the tets outside the band
    description: Mapping[str, Any]   # the asset's mesher.band (heights, rounding, columns ...)
    columns: Any                 # the band's columns of vertices, bottom to top
    levels: np.ndarray           # the extent each layer's top is to lie on

    def align(self, mesh: TetMesh, extent: np.ndarray) -> tuple[TetMesh, int]:
        """``mesh`` with the band's layers slid onto the levels of ``extent``, and how many
        columns moved (docs/model.md §2.4)."""
        return layer_band.aligned_columns(mesh, self.columns, extent, self.levels)

    def realign(self, base: TetMesh, mesh: TetMesh, extent: np.ndarray,
                found: layer_band.Descendants | None = None) -> tuple[TetMesh, int, layer_band.Descendants]:
        """``mesh``, a refinement of the aligned ``base`` by splitting, with the band's layers slid
        onto the levels of ``extent`` again and the vertices the refinement added moved with them
        (:func:`fieldgen.skin.band.realigned`); how many columns moved, and where the added vertices
        lie in ``base`` (``found``, when known already)."""
        found = layer_band.descendants(base, mesh) if found is None else found
        moved_mesh, moved = layer_band.realigned(mesh, self.columns, extent, self.levels, base, found)
        return moved_mesh, moved, found


@dataclass(frozen=True)
class BandMesher:
    """The skin as a layer band over the rounded interior (docs/model.md §2.4): layers of prisms
    whose heights follow the law's levels, tets outside them."""

    part: PartToMesh
    meshing: MeshingOptions
    law: Any
    tolerance: float             # the layering's tolerance, Pa: sets the layers' heights
    progress: Progress

    def mesh(self) -> BandPass:
        """The band's first mesh; :class:`fieldgen.skin.band.BandError` where the geometry is not
        one the band's steps were made for (the build then cuts the skin instead)."""
        part, progress, surface = self.part, self.progress, self.part.surface
        thickness = part.skin
        heights = layer_band.band_heights(balanced_levels(self.law, self.tolerance), thickness)
        layer_band.check_size(surface.area, thickness, heights)
        try:
            with progress.stage("interior"):
                interior = rigid_interior.rounded_interior(surface.vertices, surface.faces, thickness,
                                                           max_triangles=layer_band.interior_triangles(heights))
            # Coarser outside when the interior's surface is (a thin skin over a large part), not
            # finer when its thin walls needed finer triangles: TetGen grades from those itself.
            outer_edge = layer_band.OUTER_EDGE * thickness * max(interior.coarser, 1.0)
            with progress.stage("band"):
                band = layer_band.band_skin(surface.vertices, surface.faces, part.markers, interior, heights,
                                            outer_edge=outer_edge, surface_tolerance=self.meshing.surface_tolerance)
        except (ValueError, ArithmeticError, IndexError, MemoryError) as error:
            # Geometry the band's steps were not made for (numpy, rtree, MMG): the cut instead.
            raise layer_band.BandError(f"{type(error).__name__}: {error}",
                                       fix="report the part; the build cut the skin instead") from error
        switches = replace(self.meshing, edge_length=outer_edge, radius_edge=layer_band.OUTER_RADIUS_EDGE).switches()
        if band.outer.unmerged:     # its outer TetGen run made again with -M (fieldgen.meshing.tetgen.moved_off)
            switches = switches[:-1] + "MQ"
        description = {"heights": [float(h) for h in heights], "rounding": float(interior.rounding),
                       "interior_triangles": int(len(interior.faces)), "columns_lowered": band.lowered,
                       "prism_tets": band.band_tets, "outer_tets": band.outer_tets,
                       "outer_edge": float(outer_edge)}
        try:
            with progress.stage("refine"):
                mesh, count = refine.refine_zero_tets(band.mesh, path=part.path)
        except FieldgenError as error:
            # e.g. a body whose interior the rounding left out (thinner than 2(T + ρ)) has no rigid
            # face in the band; the cut may keep one.
            raise layer_band.BandError(error.defect, fix=error.fix) from error
        skin = layer_band.BandSkin(thickness=thickness, rounding=interior.rounding, outer_edge=outer_edge,
                                   free_surface=part.free_surface, part_volume=abs(float(surface.volume)),
                                   max_depth=interior.max_depth)
        parameters = {"mesher": "TetGen", "switches": switches, **tetgen.merge_record(band.outer)}
        return BandPass(mesh=mesh, skin=skin, split=count, parameters=parameters,
                        description=description, columns=band.columns, levels=1.0 - band.heights / thickness)


def warm_imports() -> None:
    """Import what the stages after TetGen use (vtk, pyamg, scipy.sparse, scikit-fem), run while
    TetGen works in its own process. Imports only: no state besides ``sys.modules``."""
    # lazy: the point of this function, warming heavy imports while TetGen runs
    import pyamg  # noqa: F401
    import scipy.sparse  # noqa: F401  # lazy: as above
    import scipy.sparse.linalg  # noqa: F401  # lazy: as above
    import skfem  # noqa: F401  # lazy: as above
    import threadpoolctl  # noqa: F401  # lazy: as above
    import vtkmodules.util.numpy_support  # noqa: F401  # lazy: as above
    import vtkmodules.vtkCommonDataModel  # noqa: F401  # lazy: as above
    import vtkmodules.vtkIOXML  # noqa: F401  # lazy: as above


def meshing_options(options: BuildOptions, scale: float, remesh=None) -> MeshingOptions:
    """TetGen's size bounds in m: the size given, and under a skin not sized by accuracy tets
    smaller than the skin (the cut at depth = skin needs them: min(user's, skin/2)); and how far
    TetGen's boundary may lie from the surface it is given (:func:`held_tolerance`, docs/model.md §2.11)."""
    edge_length = None if options.edge_length is None else options.edge_length * scale
    half_skin = None if options.skin is None or options.sized_by_accuracy else 0.5 * options.skin * scale
    capped = half_skin is not None and half_skin < (edge_length or math.inf)
    meshing = MeshingOptions(max_volume=None if options.max_volume is None else options.max_volume * scale**3,
                             edge_length=half_skin if capped else edge_length, radius_edge=options.radius_edge,
                             skin=2.0 * half_skin if capped else None,
                             surface_tolerance=held_tolerance(options, scale, remesh))
    meshing.switches()          # the sizes as TetGen reads them: OptionError now, not mid-way
    return meshing


def held_tolerance(options: BuildOptions, scale: float, remesh) -> float | None:
    """The surface tolerance (m) TetGen's boundary is held to: the one the surface stage used
    (``remesh``, a SurfaceRemesh, or None), else the one given (None: the default)."""
    if remesh is not None:
        return remesh.tolerance
    return None if options.surface_tolerance is None else options.surface_tolerance * scale
