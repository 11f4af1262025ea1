"""The part a calibration presses: meshed and its extent solved once, by the build's own front
stages (:func:`fieldgen.pipeline.mesh_part`, then the extent, docs/model.md §2.2). The extent does
not depend on the law, so every law the fit tries is integrated over this one mesh, and the build
writes the calibrated asset on it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from fieldgen.errors import BuildError
from fieldgen.fe.extent import solve_extent
from fieldgen.material.modulus import linear_law
from fieldgen.meshing.tetmesh import tet_volumes
from fieldgen.pipeline import make_law, mesh_part
from fieldgen.progress import Progress
from fieldgen.runtime.contact.geometries import CompliantGeometry
from fieldgen.surface.stage import UNIT_SCALE


@dataclass(frozen=True)
class PreparedPart:
    """The part meshed and its extent solved once (the law-independent stages of the build)."""

    mesh: Any                 #: fieldgen.meshing.tetmesh.TetMesh, after the zero-tet refinement
    extent: np.ndarray        #: (n,) P1 extent
    scale: float              #: metres per input unit
    seconds: dict[str, float]
    meshed: Any = None        #: fieldgen.pipeline.MeshedPart: the build writes the asset on this mesh


def sizing_law(options):
    """The law the accuracy sizing estimates the pressure error for: the options' own, or, for a
    law still to be fitted (no values yet), a linear law meanwhile; the build measures the error
    again for the fitted law (docs/model.md §2.10)."""
    kind = options.resolved_law()
    values_missing = (options.table is None if kind == "table"
                      else options.modulus is None or (kind == "hyperbolic" and options.k is None))
    return linear_law(1.0) if values_missing else make_law(options.checked())


def prepare_part(input_path: str, options, progress: Progress | None = None) -> PreparedPart:
    """Mesh ``input_path`` and solve its extent with the build's own front stages
    (:func:`fieldgen.pipeline.mesh_part`: load, TetGen sized as the build sizes it or fTetWild, skin,
    zero-tet refinement), then the extent if the sizing has not solved it already. The build
    writes the asset on this mesh (``PreparedPart.meshed``), so fTetWild's run-to-run
    differences do not come between the fit and the asset."""
    progress = progress or Progress(enabled=False)
    meshed = mesh_part(input_path, options, law=sizing_law(options), progress=progress)
    check_no_flat_tets(meshed.mesh, input_path)
    if meshed.solution is None:
        with progress.stage("extent"):
            meshed = dataclasses.replace(meshed, solution=solve_extent(meshed.mesh))
    return PreparedPart(meshed.mesh, meshed.solution.extent, UNIT_SCALE[options.units],
                        dict(progress.stage_seconds), meshed)


def check_no_flat_tets(mesh, path) -> None:
    """BuildError naming ``path`` when a tet of the mesh the fit integrates over has no volume:
    its surface quadrature's barycentric weights (:func:`fieldgen.meshing.tetmesh.tet_barycentric`)
    would be NaN, and the NaN would run through every force of the fit."""
    flat = np.flatnonzero(~(tet_volumes(mesh.points, mesh.tets) > 0.0))        # NaN volumes too
    if len(flat):
        where = np.round(mesh.points[mesh.tets[flat[0]]].mean(axis=0), 6).tolist()
        raise BuildError(f"the mesh of the part has {len(flat)} tet(s) of zero or negative volume (e.g. tet {int(flat[0])} "
                         f"at {where} m), on which the calibration's force quadrature is undefined",
                         path=str(path), fix="mesh with another edge length (--edge-length) or with --robust")


def geometry_body(mesh, extent: np.ndarray) -> CompliantGeometry:
    """The part as a runtime body for geometry queries (its field is the extent; the force of a
    law is computed from the quadrature, not from this field)."""
    return CompliantGeometry.from_arrays(mesh.points, mesh.tets, extent, extent=extent, modulus=1.0, name="part")
