"""What flows between the build's stages (:mod:`fieldgen.pipeline`, docs/model.md §2): plain,
frozen data, one dataclass per stage's result."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np


@dataclass(frozen=True)
class MesherRecord:
    """The mesher's parameters as the asset records them (its ``mesher`` metadata): TetGen's
    switches or fTetWild's parameters, the layer band's description, the accuracy sizing's passes."""

    parameters: Mapping[str, Any]
    band: Mapping[str, Any] | None = None
    sizing: Mapping[str, Any] | None = None

    def to_metadata(self) -> dict[str, Any]:
        return {**self.parameters, **({"band": dict(self.band)} if self.band is not None else {}),
                **({"sizing": dict(self.sizing)} if self.sizing is not None else {})}


@dataclass(frozen=True)
class PartMesh:
    """The mesh stage's result: the mesh the extent is solved on (after the skin cut and the
    zero-tet refinement), and, when it was sized by accuracy, its extent and error estimate."""

    mesh: Any                   # TetMesh
    skin: Any                   # SkinResult or None
    split: int                  # tets split by the zero-pressure refinement
    solution: Any = None        # ExtentSolution, or None when not solved yet
    estimate: Any = None        # ErrorEstimate (accuracy sizing) or None
    record: MesherRecord = field(default_factory=lambda: MesherRecord({}))
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class MeshedPart:
    """What the front stages of ``fieldgen build`` give (:func:`mesh_part`): the surface and its
    boundary conditions, the mesh the extent is solved on (after the skin cut and the zero-pressure
    refinement), and, when the mesh was sized by accuracy, the extent and its error estimate."""

    surface: Any                # fieldgen.surface.stage.Surface, in m
    core: Any                   # the core's Surface, or None
    markers: np.ndarray         # condition of each surface face
    mesh: Any                   # TetMesh
    skin: Any                   # SkinResult or None
    split: int                  # tets split by the zero-pressure refinement
    solution: Any               # ExtentSolution, or None when not solved yet
    estimate: Any               # ErrorEstimate (accuracy sizing) or None
    record: MesherRecord        # the mesher's parameters; ``sizing`` holds the accuracy sizing's passes
    law: Any                    # the law the sizing estimated the pressure error for
    warnings: tuple[str, ...]

    @property
    def mesher(self) -> dict[str, Any]:
        """The asset's ``mesher`` metadata (a fresh dict)."""
        return self.record.to_metadata()


@dataclass(frozen=True)
class ExtentField:
    """The extent stage's result: the solution, its error estimate (or None), the accuracy that
    estimate is compared with (or None) and what the stage warns of."""

    solution: Any
    estimate: Any
    asked: float | None
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class LayeredField:
    """The layering stage's result (:func:`fieldgen.material.layering.layer`) and its tolerance, Pa."""

    layered: Any
    tolerance: float
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Quality:
    """The layered mesh's tet volumes, smallest dihedral angles and statistics, the P1 gradients of
    pressure and extent, and its boundary faces (for the validation), still being computed on the
    second thread."""

    volumes: np.ndarray
    angles: np.ndarray
    stats: dict
    gradients: np.ndarray
    faces: Future


@dataclass(frozen=True)
class Damping:
    """The damping stage's result: L and χ (docs/model.md §2.6, §2.7)."""

    length: float
    chi: float
    warnings: tuple[str, ...]
