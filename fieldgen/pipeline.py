"""The build pipeline: surface -> tet mesh -> extent -> pressure -> asset (docs/model.md §2).

:func:`build` reads as the pipeline: the front stages (:func:`mesh_part`: the surface and its
boundary conditions, the mesh, sized by accuracy unless a size is given), then the extent, the
layering, the damping, the metadata, and the asset written and validated. Each stage is a
function from plain data to plain data; the options are :class:`fieldgen.options.BuildOptions`,
with lengths in the input's units, converted to SI once, at the surface stage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from fieldgen import __version__
from fieldgen.errors import FieldgenError, OptionError, TetGenStuck
from fieldgen.fe import extent as extent_solve
from fieldgen.fe.estimate import estimate_error
from fieldgen.heap import kept_heap
from fieldgen.io.asset import Asset, atomic_output, prepare_output, write_asset
from fieldgen.io.drake_vtk import drake_warnings, write_drake_files
from fieldgen.material.tangential import DEFAULT_TANGENTIAL_DAMPING, DEFAULT_TANGENTIAL_STIFFNESS
from fieldgen.material import layering, modulus
from fieldgen.material.damping import characteristic_length, dissipation_from_expansion_rate
from fieldgen.meshing import ftetwild
from fieldgen.meshing.statistics import mesh_counts as asset_mesh_statistics, mesh_statistics
from fieldgen.meshing.tetgen import MeshingOptions, merge_warnings
from fieldgen.meshing.tetmesh import (FREE, INSULATED, RIGID, boundary_faces_of, min_dihedral_angles, p1_geometry,
                                      p1_gradients, tet_volumes)
from fieldgen.options import BuildOptions
from fieldgen.progress import Progress
from fieldgen.sizing import accuracy as sizing, tray
from fieldgen.sizing.band import band_by_accuracy
from fieldgen.sizing.mesher import BandMesher, PartToMesh, RobustMesher, TetGenMesher, meshing_options
from fieldgen.sizing.plate import plate_axis
from fieldgen.sizing.warning import accuracy_warning, budget_warning
from fieldgen.skin.band import BandError
from fieldgen.skin.cut import skin_warnings
from fieldgen.skin.interior import InteriorError
from fieldgen.stages import Damping, ExtentField, LayeredField, MeshedPart, MesherRecord, PartMesh, Quality
from fieldgen.surface.selectors import assign_conditions, parse_selector
from fieldgen.surface.remesh import crash_warning, default_tolerance, tets_per_cost, tolerated_surface
from fieldgen.surface.stage import UNIT_SCALE, check_core_inside, load_surface
from fieldgen.threads import one_blas_thread
from fieldgen.validate import BuiltGeometry, validate_asset


# ------------------------------------------------------------------ the build

@one_blas_thread
@kept_heap
def build(input_path: str | os.PathLike, output_path: str | os.PathLike | None = None,
          options: BuildOptions | None = None, *, progress: Progress | None = None,
          extra_metadata: Mapping[str, Any] | None = None, meshed: MeshedPart | None = None,
          layered: Any = None) -> BuildResult:
    """Build a pressure-field asset from a surface mesh; raise FieldgenError on failure.

    Nothing is written unless every stage succeeds (the asset is written atomically).
    ``meshed``: the front stages already run (:func:`mesh_part`) with these ``options`` except
    perhaps the law; the asset is then built on that very mesh. ``layered``: the layering stage
    already run too (a :class:`fieldgen.material.layering.LayeringResult` of ``meshed.mesh`` and
    its extent, with this law and layer tolerance); the asset is built from it.
    """
    if layered is not None and meshed is None:
        raise TypeError("build(layered=...) needs the meshed part it was layered on (meshed=...)")
    options = (options or BuildOptions()).checked()
    progress = progress or Progress(enabled=False)
    input_path = str(input_path)
    output_path = prepared_outputs(input_path, output_path, options)
    law = make_law(options)
    meshed = mesh_part(input_path, options, progress=progress, law=law) if meshed is None \
        else for_law(meshed, law, progress)
    warnings = mesh_warnings(meshed, options, progress)
    with SecondThread() as second:
        # The mesh's quality overlaps the extent solve when layering will not cut (a linear law).
        early = second.start(_quality, meshed.mesh, True) if modulus.is_linear(law) else None
        extent = extent_stage(meshed, options, law, progress)
        layers = layering_stage(meshed.mesh, extent.solution, law, options, progress, given=layered)
        with progress.stage("damping"):
            quality = layered_quality(layers, meshed.mesh, early, second)
            del early           # its mesh geometry (~80 bytes a tet) is not needed past the gradients
            damped = damping_stage(layers, quality, options)
        warnings += extent.warnings + layers.warnings + damped.warnings
        metadata = asset_metadata(input_path, options, law, meshed, extent, layers, quality, damped, warnings,
                                  extra_metadata)
        drake = write_and_validate(input_path, output_path, options, law, meshed, extent, layers, quality,
                                   metadata, progress)
    return build_result(output_path, options, law, meshed, extent, layers, quality, damped, metadata, drake,
                        progress)


def prepared_outputs(input_path: str, output_path, options: BuildOptions) -> str:
    """The asset's path (``<stem>.vtu`` here by default), checked writable before the work (and
    the Drake file's, when asked for)."""
    output_path = str(output_path or default_output(input_path))
    if not output_path.endswith(".vtu"):
        raise OptionError(f"output {output_path!r} does not end in .vtu", fix="name the asset FILE.vtu")
    prepare_output(output_path)                   # before the work, not after it
    for drake in () if options.drake_vtk is None else (options.drake_vtk, Path(options.drake_vtk).with_suffix(".sdf")):
        prepare_output(drake)                     # the Drake mesh, and its SDF file beside it
    return output_path


def make_law(options: BuildOptions):
    """The modulus law p0 = M(e)·e the options describe (D 5.1.2)."""
    kind = options.resolved_law()
    if kind == "linear":
        return modulus.linear_law(options.modulus)
    if kind == "hyperbolic":
        return modulus.hyperbolic_law(options.modulus, options.k)
    return modulus.table_law(options.table)


def for_law(meshed: MeshedPart, law, progress: Progress) -> MeshedPart:
    """``meshed`` for ``law``: a mesh sized for another law (calibrate fits the law after meshing)
    has its pressure error measured again for this one (the field's errors are the same, and the
    pressure's relative error does not change with the law's scale); its sizing passes keep the
    pressure errors of the law the mesh was sized for, and say which."""
    if meshed.estimate is None or modulus.same_shape(meshed.law, law):
        return meshed
    with progress.stage("error estimate"):
        estimate = estimate_error(meshed.mesh, meshed.solution.extent, law)
    record = dataclasses.replace(meshed.record, sizing={**meshed.record.sizing, "law": meshed.law.to_metadata()})
    return dataclasses.replace(meshed, law=law, estimate=estimate, record=record)


def mesh_warnings(meshed: MeshedPart, options: BuildOptions, progress: Progress) -> tuple[str, ...]:
    """What the front stages warn of: theirs, an estimate above the accuracy, a skin's."""
    warnings = list(meshed.warnings) + merge_warnings(meshed.record.parameters, options.units)
    if meshed.estimate is not None:
        warnings.extend(accuracy_warning(meshed.estimate, options.sizing_accuracy, meshed.record.sizing,
                                         meshed.mesh.n_tets) + budget_warning(meshed.record.sizing, meshed.mesh.n_tets))
    skin = meshed.skin
    if skin is not None:
        warnings.extend(skin_warnings(skin, options.units))
        progress.message(f"skin {options.skin:g} {options.units}: {100 * skin.volume_fraction:.1f}% of the "
                         f"volume is skin, the rest is a rigid interior ({skin.rigid_faces} faces at e = 1, "
                         f"{skin.cut_depth[0]:.3g}-{skin.cut_depth[1]:.3g} x the skin deep)")
    if meshed.split:
        progress.message(f"split {meshed.split} tets whose four vertices were all on the e = 0 surface")
    return tuple(warnings)


def extent_stage(meshed: MeshedPart, options: BuildOptions, law, progress: Progress) -> ExtentField:
    """The extent on the mesh (docs/model.md §2.2), unless the sizing solved it already, and its
    error estimate when asked for on a mesh the accuracy did not size (docs/model.md §2.10)."""
    solution, estimate = meshed.solution, meshed.estimate
    if solution is None:
        with progress.stage("extent"):
            solution = extent_solve.solve_extent(meshed.mesh)
    asked = options.sizing_accuracy if estimate is not None else options.accuracy
    warnings: list[str] = []
    if estimate is None and options.estimate:
        # A mesh of a given size (or fTetWild's), estimated on request as the sizing estimates
        # its passes: the extent solved again on the mesh refined 1:8.
        with progress.stage("error estimate"):
            estimate = estimate_error(meshed.mesh, solution.extent, law)
        if asked is not None:
            sized_by = "size" if options.edge_length is not None or options.max_volume is not None else "skin"
            warnings.extend(accuracy_warning(estimate, asked, None, meshed.mesh.n_tets, sized_by=sized_by))
    warnings.extend(extent_solve.unreached_warnings(solution, options.units))
    if solution.max_violation > 0:   # not expected: the solve upwinds until the bounds hold
        warnings.append(f"discrete maximum principle violated by {solution.max_violation:.3g} "
                        "(extent clipped to [0, 1]); a finer or better-shaped mesh reduces it")
    return ExtentField(solution=solution, estimate=estimate, asked=asked, warnings=tuple(warnings))


def layering_stage(mesh, solution, law, options: BuildOptions, progress: Progress, given=None) -> LayeredField:
    """The mesh cut along the law's levels (docs/model.md §2.4), within the layer tolerance
    (``given``: this stage's result, already made by the caller)."""
    with progress.stage("layering"):
        layered = layering.layer(mesh, solution.extent, law, options.layer_tolerance) if given is None else given
    tolerance = float(options.layer_tolerance_for(law))     # the most it allows anywhere, Pa
    warnings = ()
    if layered.max_interpolation_error > tolerance:
        warnings = (f"measured interpolation error {layered.max_interpolation_error:.4g} Pa exceeds the "
                    f"layer tolerance {tolerance:.4g} Pa; a smaller --edge-length reduces it",)
    return LayeredField(layered=layered, tolerance=tolerance, warnings=warnings)


def layered_quality(layered: LayeredField, mesh, early: Future | None, second: SecondThread) -> Quality:
    """Volumes and the P1 gradients of pressure and extent once, for damping, the asset's
    pressure_gradient, the statistics and the validation of the written file. The ``early``
    quality (of ``mesh``) is used only when layering returned the very arrays it was computed for."""
    result = layered.layered
    quality = early if early is not None and _same_arrays(result.mesh, mesh) else second.start(_quality, result.mesh)
    # The validation's boundary faces, from the tets alone, on the second thread meanwhile.
    faces = second.start(boundary_faces_of, result.mesh.tets)
    # The early quality brings the gradients' mesh geometry (computed during the solve).
    geometry = quality.result()[3] if quality is early else None
    gradients = p1_gradients(result.mesh.points, result.mesh.tets,
                             np.column_stack([result.pressure, result.extent]), geometry=geometry)
    volumes, angles, stats, _ = quality.result()
    return Quality(volumes=volumes, angles=angles, stats=stats, gradients=gradients, faces=faces)


def damping_stage(layered: LayeredField, quality: Quality, options: BuildOptions) -> Damping:
    """The characteristic length L and the dissipation χ (docs/model.md §2.6, §2.7)."""
    result = layered.layered
    length = characteristic_length(result.mesh.points, result.mesh.tets, result.extent,
                                   volumes=quality.volumes, extent_gradient=quality.gradients[:, :, 1])
    warnings = ()
    if options.expansion_rate is not None:
        chi = dissipation_from_expansion_rate(length, options.expansion_rate)
    elif options.dissipation is not None:
        chi = float(options.dissipation)
    else:
        chi = 0.0
        warnings = ("no damping given (--expansion-rate or --dissipation): dissipation is 0",)
    return Damping(length=float(length), chi=float(chi), warnings=warnings)


def write_and_validate(input_path: str, output_path: str, options: BuildOptions, law, meshed: MeshedPart,
                       extent: ExtentField, layered: LayeredField, quality: Quality, metadata: dict,
                       progress: Progress) -> dict | None:
    """All or nothing: the asset is validated (and the Drake files written) while it is still a
    temporary file; only then is it renamed onto the output path. Returns what the Drake export
    wrote (None without one)."""
    result = layered.layered
    asset = Asset(points=result.mesh.points, tets=result.mesh.tets, extent=result.extent,
                  pressure=result.pressure, metadata=metadata, min_dihedral_angle=quality.angles,
                  pressure_gradient=quality.gradients[:, :, 0])
    statistics = asset_mesh_statistics(
        result.mesh.points, result.mesh.tets, quality.angles, volumes=quality.volumes,
        n_boundary_faces=len(result.mesh.boundary_faces))   # the validation recounts from the file
    drake = None
    with atomic_output(output_path) as temporary:
        with progress.stage("write"):
            write_asset(temporary, asset, statistics=statistics, compression=options.compression)
            built = BuiltGeometry(points=result.mesh.points, tets=result.mesh.tets, pressure=result.pressure,
                                  extent=result.extent, volumes=quality.volumes, min_dihedral_angle=quality.angles,
                                  gradients=quality.gradients, boundary_faces=quality.faces.result())
        with progress.stage("validate"):
            report = validate_asset(temporary, built=built)
        if not report.ok:
            failed = "; ".join(f"{c.name}: {c.detail}" for c in report.checks if not c.ok)
            raise FieldgenError(f"the built asset failed validation ({failed})", path=input_path,
                                fix="this is a fieldgen bug; please report it with the input file")
        if options.drake_vtk is not None:
            with progress.stage("drake"):
                # Drake computes its own linear field from the geometry, so it gets the mesh
                # before layering: the layer cuts serve only our nonlinear law and leave tets too
                # small for Drake's absolute volume test (docs/model.md §2.9).
                unlayered = Asset(points=meshed.mesh.points, tets=meshed.mesh.tets, extent=extent.solution.extent,
                                  pressure=law.pressure(extent.solution.extent), metadata=metadata)
                drake = write_drake_files(unlayered, options.drake_vtk)
    return drake


class SecondThread:
    """The build's one concurrency: pure numpy work on one other thread (numpy and vtk's writer
    release the GIL; the results are the same whichever thread computes them): the mesh quality
    and the gradients' geometry during the extent solve, the validation's boundary faces during
    damping and the write. Leaving the block does not wait for work still running."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1)

    def start(self, function, *args) -> Future:
        return self._pool.submit(function, *args)

    def __enter__(self) -> SecondThread:
        return self

    def __exit__(self, *exc) -> None:
        self._pool.shutdown(wait=False)


def _same_arrays(a, b) -> bool:
    """True when two TetMeshes hold the very same array objects (identity, not equality)."""
    return all(getattr(a, name) is getattr(b, name)
               for name in ("points", "tets", "boundary_faces", "boundary_markers"))


def _quality(mesh, geometry: bool = False):
    """Signed tet volumes, smallest dihedral angles and the mesh statistics (shared by damping,
    the asset's cell data, its metadata and the validation); with ``geometry`` also the mesh's
    :func:`~fieldgen.meshing.tetmesh.p1_geometry` for the gradients (else None)."""
    shared = p1_geometry(mesh.points, mesh.tets) if geometry else None
    # det / 6 is tet_volumes to the bit (the same products in the same order).
    volumes = tet_volumes(mesh.points, mesh.tets) if shared is None else shared[3] / 6.0
    angles = min_dihedral_angles(mesh.points, mesh.tets)
    return volumes, angles, mesh_statistics(mesh, min_dihedral=angles, volumes=volumes), shared


# ------------------------------------------------------------------ the front stages

def mesh_part(input_path: str | os.PathLike, options: BuildOptions, *, law,
              progress: Progress | None = None) -> MeshedPart:
    """The front stages of ``fieldgen build`` (docs/model.md §2): load the surface (and core),
    assign the boundary conditions, mesh with TetGen (or fTetWild with ``robust``), sized by
    ``accuracy`` unless a size is given, cut the skin and refine the zero-pressure tets.
    ``options`` are checked by the caller; ``law`` serves the accuracy sizing's pressure estimate
    (the options' own law in a build). ``fieldgen calibrate`` meshes with this too, so the asset
    it writes is built on the mesh it fitted."""
    progress = progress or Progress(enabled=False)
    part = load_part(str(input_path), options, progress)
    meshing = meshing_options(options, part.scale, part.surface.remesh)
    try:
        made = mesh_stage(part, meshing, options, law, progress)
    except FieldgenError as error:
        if isinstance(error, TetGenStuck) and options.surface_tolerance is None and part.surface.remesh is None \
                and not options.robust:     # TetGen's internal error on the input's needles (§2.11): remeshed, once
            tolerance = default_tolerance(part.surface.vertices) / part.scale
            meshed = mesh_part(input_path, dataclasses.replace(options, surface_tolerance=tolerance), law=law,
                               progress=progress)
            return dataclasses.replace(meshed, warnings=(crash_warning(tolerance, options.units, error.defect),)
                                       + meshed.warnings)
        if error.path is None:     # the mesher's and the sizing's errors name no file themselves
            error.path = part.path
        raise
    warnings = part.surface.warnings + (part.core.warnings if part.core is not None else ()) + made.warnings \
        + ((ftetwild.NONDETERMINISTIC_WARNING,) if options.robust else ())
    return MeshedPart(surface=part.surface, core=part.core, markers=part.markers, mesh=made.mesh, skin=made.skin,
                      split=int(made.split), solution=made.solution, estimate=made.estimate, record=made.record,
                      law=law, warnings=warnings)


def load_part(input_path: str, options: BuildOptions, progress: Progress) -> PartToMesh:
    """The surface in m (and the core), its faces' boundary conditions (docs/model.md §2.2), and
    the skin to cut, with the faces its depth is measured from."""
    scale = UNIT_SCALE[options.units]
    with progress.stage("load"):
        # --robust: open, non-manifold or self-intersecting input is kept for fTetWild.
        surface = load_surface(input_path, options.units, require_closed=not options.robust)
        core = None
        if options.core is not None:
            core = load_surface(options.core, options.units, role="core")
            check_core_inside(surface, core)
        bonded = [parse_selector(text, scale) for text in options.bonded]
        insulated = [parse_selector(text, scale) for text in options.insulated]
        markers = assign_conditions(surface, bonded, insulated)
    with progress.stage("surface"):
        surface, markers, core = surface_stage(surface, markers, core, options, scale)
    for repair in surface.repairs:
        progress.message(f"repaired {input_path}: {repair}")
    if surface.remesh is not None:
        progress.message(surface.remesh.message(input_path, options.units, scale))
    # TetGen keeps the input's FREE faces in place, so the skin's depth is measured from them;
    # fTetWild moves them, so there from its own.
    exposed = None if options.robust else (surface.vertices, surface.faces[markers == FREE])
    return PartToMesh(surface=surface, core=core, markers=markers, path=input_path, units=options.units,
                      scale=scale, skin=None if options.skin is None else options.skin * scale, free_surface=exposed,
                      surface_tolerance=None if options.surface_tolerance is None else options.surface_tolerance * scale)


def surface_stage(surface, markers, core, options: BuildOptions, scale: float):
    """The surface (and core) remeshed within the surface tolerance where it applies
    (docs/model.md §2.11), the faces' conditions carried to the new faces; under ``robust`` by the
    slivers' moves alone (fTetWild inserts fewer triangles)."""
    tolerance = None if options.surface_tolerance is None else options.surface_tolerance * scale
    if tolerance is None and core is None and options.skin is None and not options.robust \
            and tray.layered_along_axis(surface.vertices, surface.faces):
        tolerance = 0.0     # a thin-walled tube or tray is layered from its own faces (§2.10): kept
    outer = tolerated_surface(surface, markers, tolerance, robust=options.robust, units=options.units)
    surface = dataclasses.replace(outer.surface, warnings=outer.surface.warnings + outer.warnings)
    if core is not None:
        inner = tolerated_surface(core, np.full(len(core.faces), RIGID, dtype=np.int64), tolerance, units=options.units)
        if inner.remesh is not None or inner.warnings:
            core = dataclasses.replace(inner.surface, warnings=inner.surface.warnings + inner.warnings)
            check_core_inside(surface, core)
        elif outer.remesh is not None:
            check_core_inside(surface, core)
    return surface, outer.markers, core


def mesh_stage(part: PartToMesh, meshing: MeshingOptions, options: BuildOptions, law,
               progress: Progress) -> PartMesh:
    """The mesh: at the size given, or sized by accuracy (docs/model.md §2.10) as a layer band
    where it applies (docs/model.md §2.4; the cut, with a warning, where the band cannot be
    made), else by local refinement or, under a skin, by depth grading."""
    if options.robust:
        mesher = RobustMesher(part, meshing, options.threads, progress)
    else:
        mesher = TetGenMesher(part, meshing, progress)
    if not options.sized_by_accuracy:
        made = mesher.mesh()
        return PartMesh(mesh=made.mesh, skin=made.skin, split=made.split, record=MesherRecord(made.parameters))
    warnings: tuple[str, ...] = ()
    if options.skin_meshed_by == "band":
        band_mesher = BandMesher(part, meshing, law, options.layer_tolerance_for(law), progress)
        try:
            return sized_part(band_by_accuracy(band_mesher, law, options.sizing_accuracy, progress=progress))
        except (BandError, InteriorError) as error:
            warnings = (f"the layer band could not be made ({error.defect}); the skin was cut out of "
                        "a whole-part mesh instead (as --skin-mesh cut)",)
    first_edge = None
    if options.robust:
        # fTetWild's own default edge: the surface's volume (which sets TetGen's first edge)
        # means little for open or self-overlapping input, and no plate stretch.
        diagonal = float(np.linalg.norm(np.ptp(part.surface.vertices, axis=0)))
        first_edge = ftetwild.RobustOptions().resolved(diagonal)[0]
    plate = None if options.skin is not None or options.robust else plate_axis(part.surface.vertices,
                                                                                part.surface.faces)
    sized = sizing.mesh_by_accuracy(mesher, law, options.sizing_accuracy, abs(part.surface.volume),
                                    progress=progress, skin=part.skin, free_surface=part.free_surface,
                                    first_edge=first_edge, plate=plate,
                                    surface=None if options.robust else (part.surface.vertices, part.surface.faces),
                                    tets_per_cost=tets_per_cost(part.surface.remesh))
    return sized_part(sized, warnings)


def sized_part(sized: sizing.SizedMesh, warnings: tuple[str, ...] = ()) -> PartMesh:
    """The mesh stage's result from the accuracy sizing's."""
    record = MesherRecord(parameters=sized.parameters, band=sized.band, sizing=sized.report())
    return PartMesh(mesh=sized.mesh, skin=sized.skin, split=sized.split, solution=sized.solution,
                    estimate=sized.estimate, record=record, warnings=warnings)


# ------------------------------------------------------------------ the metadata and the result

def asset_metadata(input_path: str, options: BuildOptions, law, meshed: MeshedPart, extent: ExtentField,
                   layered: LayeredField, quality: Quality, damped: Damping, warnings: tuple[str, ...],
                   extra_metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The asset's metadata (docs/model.md §2): what was built, from what, how, and what the build
    warned of (so a later look, a cached batch item or ``inspect``, still says it)."""
    solution, result = extent.solution, layered.layered
    metadata: dict[str, Any] = {
        "schema": "fieldgen.pressure_field/1",
        "units": {"length": "m", "extent": "1", "pressure": "Pa", "pressure_gradient": "Pa/m",
                  "characteristic_length": "m", "dissipation": "s/m", "expansion_rate": "1/s",
                  "modulus": "Pa", "min_dihedral_angle": "deg", "max_interpolation_error": "Pa"},
        "law": law.to_metadata(),
        "characteristic_length": float(damped.length),
        "dissipation": float(damped.chi),
        "friction": {"static": float(options.mu_static), "dynamic": float(options.mu_dynamic)},
        **_tangential_metadata(options),
        "boundary": boundary_description(options, meshed.surface, meshed.core, meshed.markers),
        "extent_solution": extent_description(solution),
        "layer_tolerance": float(layered.tolerance),
        "max_interpolation_error": float(result.max_interpolation_error),
        "mesh": {**quality.stats, **layering_statistics(meshed, layered)},
        "source": {"file": Path(input_path).name, "sha256": meshed.surface.sha256, "units": options.units,
                   "repairs": list(meshed.surface.repairs)},
        "tool": {"name": "fieldgen", "version": __version__},
        "deterministic": not options.robust,  # fTetWild's output differs from run to run
        "mesher": meshed.mesher,
    }
    if "tangential" in metadata:      # D 6.2.3: units of the friction spring's material constants
        metadata["units"].update({"tangential_stiffness": "1/m", "tangential_damping": "s/m"})
    if meshed.skin is not None:
        metadata["skin"] = skin_description(meshed.skin)
        metadata["boundary"]["problem"] = "laplace"  # the interior under the skin is rigid, e = 1
    surface_record = surface_description(meshed.surface, meshed.core)
    if surface_record:
        metadata["surface"] = surface_record
    if options.expansion_rate is not None:
        metadata["expansion_rate"] = float(options.expansion_rate)
    if extent.estimate is not None:
        metadata["error_estimate"] = {**extent.estimate.to_metadata(),
                                      **({"accuracy": extent.asked} if extent.asked is not None else {})}
        metadata["units"]["error_estimate"] = "1 (relative)"
    if extra_metadata:
        metadata.update(extra_metadata)
    # What the Drake export cannot carry follows from the metadata alone.
    metadata["warnings"] = list(warnings) + (drake_warnings(metadata) if options.drake_vtk is not None else [])
    return metadata


def surface_description(surface, core) -> dict[str, Any]:
    """What the surface tolerance did to the surface and the core (docs/model.md §2.11); empty
    when both are the input's own triangles."""
    record = {}
    for key, which in (("remesh", surface), ("core_remesh", core)):
        if which is not None and which.remesh is not None:
            record[key] = which.remesh.to_metadata()
    return record


def layering_statistics(meshed: MeshedPart, layered: LayeredField) -> dict[str, int]:
    """The mesh statistics the layering and the zero-tet refinement add."""
    return {"tets_before_layering": meshed.mesh.n_tets,
            "tets_added_by_layering": int(layered.layered.tets_added),
            "tets_split_zero_pressure": int(meshed.split),
            "layer_levels": int(len(layered.layered.levels))}


def extent_description(solution) -> dict[str, Any]:
    """How the extent was solved (docs/model.md §2.2), as the asset records it."""
    return {"problem": solution.problem, "solver": solution.solver,
            "iterations": int(solution.iterations),
            "relative_residual": float(solution.relative_residual),
            "max_violation": float(solution.max_violation),
            "rounds": int(solution.rounds),
            "upwinded_edges": int(solution.upwinded_edges),
            "positive_edges": int(solution.positive_edges),
            "rounding": float(solution.rounding)}


def _tangential_metadata(options: BuildOptions) -> dict[str, Any]:
    """``{"tangential": {"stiffness": K̄, "damping": C̄}}`` when either was given (D 6.2.3), else
    nothing (assets without it use the runtime's defaults)."""
    if options.tangential_stiffness is None and options.tangential_damping is None:
        return {}
    k = DEFAULT_TANGENTIAL_STIFFNESS if options.tangential_stiffness is None else options.tangential_stiffness
    c = DEFAULT_TANGENTIAL_DAMPING if options.tangential_damping is None else options.tangential_damping
    return {"tangential": {"stiffness": float(k), "damping": float(c)}}


def skin_description(skin) -> dict[str, Any]:
    """The skin recorded in the asset: depth is measured from the FREE (exposed) faces only."""
    return {"thickness": float(skin.thickness), "skin_volume_fraction": float(skin.volume_fraction),
            "max_depth": float(skin.max_depth), "part_volume": float(skin.part_volume),
            "interior_faces": int(skin.rigid_faces), "depth_from": "free faces",
            "cut_depth": [float(v) for v in skin.cut_depth], "cut_vertices_held": int(skin.held_vertices),
            "mesh": "band" if skin.rounding > 0 else "cut",
            **({"rounding": float(skin.rounding)} if skin.rounding > 0 else {}), "units": "m"}


def boundary_description(options: BuildOptions, surface, core, markers) -> dict[str, Any]:
    """The boundary specification recorded in the asset (docs/model.md §2.2)."""
    out: dict[str, Any] = {
        "bonded": list(options.bonded),
        "insulated": list(options.insulated),
        "faces": {"free": int(np.sum(markers == FREE)), "rigid": int(np.sum(markers == RIGID)),
                  "insulated": int(np.sum(markers == INSULATED))},
        "problem": "laplace" if (core is not None or np.any(markers == RIGID)) else "poisson",
    }
    if core is not None:
        out["core"] = {"file": Path(core.path).name, "sha256": core.sha256}
    return out


@dataclass
class BuildResult:
    """What a build produced, as reported by ``fieldgen build --json``."""

    output: str
    tets: int
    vertices: int
    characteristic_length: float
    dissipation: float
    max_interpolation_error: float
    stage_seconds: dict[str, float]
    volume: float
    pressure_max: float
    repairs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        extra = out.pop("extra")
        out.update(extra)
        return out


def build_result(output_path: str, options: BuildOptions, law, meshed: MeshedPart, extent: ExtentField,
                 layered: LayeredField, quality: Quality, damped: Damping, metadata: dict, drake: dict | None,
                 progress: Progress) -> BuildResult:
    """What ``fieldgen build --json`` reports of a build."""
    result = layered.layered
    sizing_report = meshed.record.sizing
    return BuildResult(
        output=output_path, tets=result.mesh.n_tets, vertices=result.mesh.n_points,
        characteristic_length=float(damped.length), dissipation=float(damped.chi),
        max_interpolation_error=float(result.max_interpolation_error),
        stage_seconds={k: round(v, 6) for k, v in progress.stage_seconds.items()},
        volume=float(quality.stats.get("volume", 0.0)), pressure_max=float(np.max(result.pressure)),
        repairs=list(meshed.surface.repairs), warnings=list(metadata["warnings"]),
        extra={"layer_levels": int(len(result.levels)), "tets_added_by_layering": int(result.tets_added),
               "law": law.kind, "deterministic": not options.robust,
               **({"error_estimate": metadata["error_estimate"]} if extent.estimate is not None else {}),
               **({"sizing": sizing_report} if sizing_report is not None else {}),
               **({"skin_volume_fraction": float(meshed.skin.volume_fraction)} if meshed.skin is not None else {}),
               **({"surface_remesh": meshed.surface.remesh.to_metadata()} if meshed.surface.remesh is not None else {}),
               **({"drake": drake} if drake is not None else {})},
    )


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def default_output(input_path: str | os.PathLike) -> str:
    """``<stem>.vtu`` in the current folder (inputs may live in read-only places)."""
    return Path(input_path).stem + ".vtu"


def report_json(result: BuildResult) -> str:
    return json.dumps(result.to_dict(), indent=2, sort_keys=True)
