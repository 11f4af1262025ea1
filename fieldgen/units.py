"""The length units fieldgen accepts, in one table shared by ``fieldgen build`` (``--units``,
``units`` in specs and manifests), ``fieldgen contact`` (``--units-a``/``--units-b`` for rigid
surface meshes) and scene files (``{mesh = ..., units = ...}``). Assets and the runtime are SI."""

from __future__ import annotations

from fieldgen.errors import OptionError

#: metres per unit
LENGTH_UNITS: dict[str, float] = {"m": 1.0, "cm": 0.01, "mm": 0.001, "in": 0.0254}


def length_scale(units: str, *, path=None, what: str = "units") -> float:
    """Metres per ``units``; OptionError naming the accepted names otherwise."""
    if isinstance(units, str) and units in LENGTH_UNITS:
        return LENGTH_UNITS[units]
    raise OptionError(f"unknown {what} {units!r}", path=path,
                      fix=f"use one of {', '.join(LENGTH_UNITS)} (metres, centimetres, millimetres, inches)")
