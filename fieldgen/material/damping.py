"""Characteristic thickness and Hunt-Crossley-style dissipation of a compliant object (D 5.2.1, C.3)."""

from __future__ import annotations

import numpy as np

from fieldgen.errors import BuildError, OptionError
from fieldgen.meshing.tetmesh import p1_gradients, tet_volumes

#: The largest Hunt-Crossley dissipation, and friction damper C̄ (s/m): at 1e6 s/m a speed of
#: 1 µm/s would double the force; the lossiest foams are about 100 s/m.
MAX_DISSIPATION = 1e6


def characteristic_length(points, tets, extent, *, volumes=None, extent_gradient=None) -> float:
    """L = V / ∫|∇e| dV over the P1 extent field (D 5.2.1, C.3), in metres.

    Equal to the |∇e|·V-weighted mean of the per-tet thickness 1/|∇e|; exactly h for a flat
    layer of thickness h bonded to a rigid back. ``volumes`` (signed tet volumes) and
    ``extent_gradient`` (t, 3) may be passed when the caller has them (the build does).
    """
    points = np.asarray(points, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)
    extent = np.asarray(extent, dtype=np.float64)
    if extent.shape != (len(points),):
        raise OptionError(f"extent has shape {extent.shape} but there are {len(points)} vertices",
                          fix="pass one extent value per vertex")
    volumes = np.abs(tet_volumes(points, tets) if volumes is None else volumes)
    gradient = p1_gradients(points, tets, extent) if extent_gradient is None else extent_gradient
    slope = np.linalg.norm(gradient, axis=1)
    weight = float(np.sum(slope * volumes))
    if not (np.isfinite(weight) and weight > 0):
        raise BuildError(f"the extent field has ∫|∇e| dV = {weight:.3g}, so the thickness is undefined",
                         fix="check that the extent varies (a free and a rigid or interior region exist)")
    return float(np.sum(volumes)) / weight


def dissipation_from_expansion_rate(characteristic_length: float, expansion_rate: float) -> float:
    """Dissipation χ = 1/(L·τ) in s/m from the maximum expansion rate τ in 1/s (D 5.2.1)."""
    length, rate = float(characteristic_length), float(expansion_rate)
    if not (np.isfinite(length) and length > 0):
        raise OptionError(f"characteristic length {length!r} m is not positive",
                          fix="compute it with characteristic_length from a solved extent")
    if not (np.isfinite(rate) and rate > 0):
        raise OptionError(f"expansion rate {rate!r} 1/s is not positive",
                          fix="give the material's maximum expansion rate in 1/s (> 0)")
    dissipation = 1.0 / (length * rate)
    if dissipation > MAX_DISSIPATION:
        raise OptionError(f"--expansion-rate {rate:g} 1/s gives this part (characteristic length {length:.3g} m) a "
                          f"dissipation 1/(L·τ) of {dissipation:.3g} s/m, above {MAX_DISSIPATION:g} s/m: a speed of "
                          f"1 µm/s would double the force", fix="give τ in 1/s (foams about 1-100), or --dissipation "
                                                                 "directly")
    return dissipation
