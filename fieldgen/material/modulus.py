"""Modulus laws: the pressure ``p0 = M(e)·e`` of a compliant object as a function of extent.

docs/model.md §2.3, D 5.1 (eq. 5.3) and D 5.1.2 (eq. 5.4):

- ``linear``: ``M = M0``;
- ``hyperbolic`` stiffening (foam, rubber): ``M = M0/(1 − k e)``, ``0 <= k < 1``;
- ``table``: a characterised material, a monotone curve ``p0(e)`` given as points, with
  ``p0(0) = 0`` and extent spanning ``[0, 1]``, interpolated monotonically (PCHIP) so the
  interpolant never overshoots between points.

The extent is defined on ``[0, 1]``; :meth:`ModulusLaw.pressure` clips to that domain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fieldgen.errors import InputError, OptionError
from fieldgen.tables import header_unit, read_number_pairs

KINDS = ("linear", "hyperbolic", "table")
UNIT = "Pa"
#: Units other than Pa a table's header may name its pressure in (``pressure_kPa``, ``stress
#: (N/mm2)``: N): refused, since a table's pressures are read in Pa. Any other word says nothing.
OTHER_PRESSURE_UNITS = frozenset({"kpa", "mpa", "gpa", "hpa", "bar", "mbar", "psi", "ksi", "atm", "torr", "mmhg",
                                  "n", "kn", "kgf", "lbf", "kp"})


@dataclass(frozen=True)
class ModulusLaw:
    """A modulus law ``p0(e)`` (D 5.1.2). Build it with the ``*_law`` functions, which validate."""

    kind: str                       # "linear" | "hyperbolic" | "table"
    modulus: float                  # M0 in Pa (table: p0(1), the max pressure, the modulus scale)
    k: float = 0.0
    table_extent: tuple[float, ...] = ()
    table_pressure: tuple[float, ...] = ()

    def pressure(self, extent: np.ndarray) -> np.ndarray:
        """``p0(e)`` in Pa at each extent (clipped to [0, 1]), vectorised (D 5.1, eq. 5.3)."""
        e = np.clip(np.asarray(extent, dtype=np.float64), 0.0, 1.0)
        if self.kind == "linear":
            return self.modulus * e
        if self.kind == "hyperbolic":
            return self.modulus * e / (1.0 - self.k * e)
        if self.kind == "table":
            return self.interpolator()(e)
        raise OptionError(f"unknown modulus law kind {self.kind!r}",
                          fix=f"use one of {', '.join(KINDS)}")

    def interpolator(self):
        """The monotone piecewise-cubic (PCHIP) interpolant of a table law (scipy's
        ``PchipInterpolator``)."""
        if self.kind != "table":
            raise OptionError(f"a {self.kind} law has no table to interpolate",
                              fix="call interpolator() only on a table law")
        from scipy.interpolate import PchipInterpolator  # lazy: slow to import, and only a table law needs it

        return PchipInterpolator(np.asarray(self.table_extent), np.asarray(self.table_pressure),
                                 extrapolate=False)

    @property
    def max_pressure(self) -> float:
        """``p0(1)``, the largest pressure of a monotone law, in Pa."""
        if self.kind == "linear":
            return float(self.modulus)
        if self.kind == "hyperbolic":
            return float(self.modulus / (1.0 - self.k))
        return float(self.table_pressure[-1])

    def to_metadata(self) -> dict:
        """Plain-float description stored in an asset; :func:`law_from_metadata` inverts it."""
        if self.kind == "linear":
            return {"kind": "linear", "modulus": float(self.modulus), "unit": UNIT}
        if self.kind == "hyperbolic":
            return {"kind": "hyperbolic", "modulus": float(self.modulus), "k": float(self.k),
                    "unit": UNIT}
        return {"kind": "table", "modulus": float(self.max_pressure),
                "extent": [float(x) for x in self.table_extent],
                "pressure": [float(x) for x in self.table_pressure],
                "interpolation": "pchip", "unit": UNIT}


def is_linear(law: ModulusLaw) -> bool:
    """Whether ``p0`` is linear in the extent (``linear``, or ``hyperbolic`` with ``k = 0``): the
    runtime's linear interpolation then reproduces it exactly and layering has nothing to do
    (docs/model.md §2.4)."""
    return law.kind == "linear" or (law.kind == "hyperbolic" and law.k == 0.0)


def _finite_number(value, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise OptionError(f"{what} is {value!r}, not a number",
                          fix=f"give {what} as a number") from None
    if not math.isfinite(number):
        raise OptionError(f"{what} is {number}, not finite", fix=f"give {what} as a finite number")
    return number


def linear_law(modulus: float) -> ModulusLaw:
    """``p0 = M0·e`` (docs/model.md §2.3). OptionError unless ``M0`` is finite and positive."""
    m0 = _finite_number(modulus, "the modulus")
    if m0 <= 0:
        raise OptionError(f"the modulus is {m0:g} Pa, but it must be positive",
                          fix="give the modulus M0 in Pa, e.g. --modulus 1e6")
    return ModulusLaw(kind="linear", modulus=m0)


def hyperbolic_law(modulus: float, k: float) -> ModulusLaw:
    """``p0 = M0·e/(1 − k e)`` (D 5.1.2, eq. 5.4). OptionError unless ``M0 > 0`` and ``0 <= k < 1``."""
    m0 = linear_law(modulus).modulus
    kk = _finite_number(k, "the stiffening k")
    if not 0.0 <= kk < 1.0:
        raise OptionError(f"the stiffening k is {kk:g}, outside [0, 1)",
                          fix="give k with 0 <= k < 1 (k -> 1 makes p0(1) = M0/(1-k) unbounded)")
    return ModulusLaw(kind="hyperbolic", modulus=m0, k=kk)


#: The largest pressure a table may give (Pa): above any solid's modulus (diamond's is ~1.2e12).
MAX_TABLE_PRESSURE = 1e13
#: The softest modulus scale M0, and the smallest p0(1) of a table (Pa): below any gel (the
#: softest hydrogels are about 10 Pa), a field so weak its forces would underflow.
MIN_MODULUS = 1.0


def _check_table(extent: np.ndarray, pressure: np.ndarray, rows: list, source: str) -> None:
    """Validate a table; ``rows[i]`` names point ``i`` in messages (a file line or an index)."""
    path = str(source)
    n = len(extent)
    if n < 2:
        raise InputError(f"the table has {n} point(s), at least 2 are needed", path=path,
                         fix="give rows 'extent, pressure' from extent 0 to extent 1")
    for i in range(n):
        if not (math.isfinite(extent[i]) and math.isfinite(pressure[i])):
            raise InputError(f"{rows[i]} is not finite (extent {extent[i]}, pressure {pressure[i]})",
                             path=path, fix="give finite numbers in every row")
        if abs(pressure[i]) > MAX_TABLE_PRESSURE:     # beyond any solid; its slopes would overflow
            raise InputError(f"{rows[i]} has pressure {pressure[i]:g} Pa, above {MAX_TABLE_PRESSURE:g} Pa "
                             "(stiffer than diamond)", path=path, fix="give pressures in Pa (e.g. 2e5)")
    if extent[0] != 0.0:
        raise InputError(f"{rows[0]} has extent {extent[0]:g}, but the table must start at extent 0",
                         path=path, fix="add a first row '0, 0'")
    if pressure[0] != 0.0:
        raise InputError(f"{rows[0]} has pressure p0(0) = {pressure[0]:g} Pa, but p0(0) must be 0",
                         path=path, fix="make the first row '0, 0' (no pressure at the surface)")
    for i in range(1, n):
        if not extent[i] > extent[i - 1]:
            raise InputError(
                f"{rows[i]} has extent {extent[i]:g}, not greater than {extent[i - 1]:g} in "
                f"{rows[i - 1]}; extent must be strictly increasing", path=path,
                fix="sort the rows by extent and remove duplicate extents")
        if pressure[i] < pressure[i - 1]:
            raise InputError(
                f"{rows[i]} has pressure {pressure[i]:g} Pa, less than {pressure[i - 1]:g} Pa in "
                f"{rows[i - 1]}; pressure must not decrease with extent", path=path,
                fix="give a monotone (non-decreasing) pressure curve")
    if extent[-1] != 1.0:
        raise InputError(f"{rows[-1]} has extent {extent[-1]:g}, but the table must end at extent 1",
                         path=path, fix="extend the table to extent 1 (full compression)")
    if not pressure[-1] > 0.0:
        raise InputError("the table's pressure is 0 everywhere", path=path,
                         fix="give the pressures in Pa; p0(1) must be positive")
    if pressure[-1] < MIN_MODULUS:
        raise InputError(f"{rows[-1]} gives p0(1) = {pressure[-1]:g} Pa, below {MIN_MODULUS:g} Pa: softer than any "
                         "gel", path=path, fix="give the pressures in Pa (gels 1e2-1e4, foams 1e4-1e6)")


def table_law_from_points(extent, pressure, source="table") -> ModulusLaw:
    """A table law from points (D 5.1.2: a characterised material); InputError on a bad table.

    ``source`` names the table in messages; points are named by their index.
    """
    e = np.asarray(extent, dtype=np.float64).ravel()
    p = np.asarray(pressure, dtype=np.float64).ravel()
    if e.shape != p.shape:
        raise InputError(f"the table has {e.size} extents but {p.size} pressures", path=str(source),
                         fix="give one pressure per extent")
    _check_table(e, p, [f"point {i}" for i in range(e.size)], str(source))
    return ModulusLaw(kind="table", modulus=float(p[-1]), table_extent=tuple(map(float, e)),
                      table_pressure=tuple(map(float, p)))


def table_law(path) -> ModulusLaw:
    """Read a CSV table ``extent, pressure`` (Pa), header optional, '#' comments allowed.

    InputError naming the file, the row (line number) and the fix on any defect.
    """
    pairs, rows, raw = read_number_pairs(path, "extent, pressure",
                                         fix="make every data row two numbers: extent (0..1), pressure in Pa")
    named = header_unit(raw, "pressure")
    if named is not None and named[0].lower() in OTHER_PRESSURE_UNITS:   # kPa read as Pa: a law 1000 times too soft
        raise InputError(f"its header names the pressure in {named[0]} ({named[1]!r}), but a table's pressures "
                         f"are read in {UNIT}", path=str(path),
                         fix=f"give the pressures in {UNIT} (100 kPa as 1e5) and name the column pressure or "
                             f"pressure_{UNIT}")
    extent, pressure = pairs[:, 0], pairs[:, 1]
    if not len(extent):
        raise InputError("the table has no data rows", path=str(path),
                         fix="give rows 'extent, pressure' from extent 0 to extent 1")
    e, p = extent, pressure
    _check_table(e, p, rows, str(path))
    return ModulusLaw(kind="table", modulus=float(p[-1]), table_extent=tuple(map(float, e)),
                      table_pressure=tuple(map(float, p)))



def law_from_metadata(meta: dict, *, path=None) -> ModulusLaw:
    """Inverse of :meth:`ModulusLaw.to_metadata`; InputError (naming ``path``) on bad metadata."""
    where = None if path is None else str(path)
    if not isinstance(meta, dict) or meta.get("kind") not in KINDS:
        kind = meta.get("kind") if isinstance(meta, dict) else meta
        raise InputError(f"the modulus law kind is {kind!r}", path=where,
                         fix=f"store a law whose kind is one of {', '.join(KINDS)}")
    if meta.get("unit", UNIT) != UNIT:
        raise InputError(f"the modulus law unit is {meta.get('unit')!r}", path=where,
                         fix=f"store pressures in {UNIT}")
    try:
        if meta["kind"] == "linear":
            return linear_law(meta["modulus"])
        if meta["kind"] == "hyperbolic":
            return hyperbolic_law(meta["modulus"], meta["k"])
        if meta.get("interpolation", "pchip") != "pchip":
            raise InputError(f"the table interpolation is {meta.get('interpolation')!r}", path=where,
                             fix="store interpolation 'pchip'")
        law = table_law_from_points(meta["extent"], meta["pressure"], source=where or "table")
    except KeyError as missing:
        raise InputError(f"the {meta['kind']} modulus law lacks the field {missing}", path=where,
                         fix="rewrite the asset with fieldgen build") from None
    except OptionError as error:
        raise InputError(error.defect, path=where, fix=error.fix) from None
    if "modulus" in meta and not math.isclose(float(meta["modulus"]), law.modulus,
                                               rel_tol=1e-12, abs_tol=0.0):
        raise InputError(f"the table's modulus {meta['modulus']} Pa differs from its p0(1) = "
                         f"{law.modulus} Pa", path=where, fix="store modulus = the last pressure")
    return law


def scaled_law(law: ModulusLaw, s: float) -> ModulusLaw:
    """``law`` with every pressure times ``s`` (its shape kept)."""
    if law.kind == "linear":
        return linear_law(law.modulus * s)
    if law.kind == "hyperbolic":
        return hyperbolic_law(law.modulus * s, law.k)
    return table_law_from_points(law.table_extent, np.asarray(law.table_pressure) * s)


def same_shape(a, b) -> bool:
    """Whether two modulus laws differ at most by a factor (``p0_b = c p0_a``), so every error
    relative to the law's maximum is the same for both."""
    e = np.linspace(0.0, 1.0, 257)
    if a.kind == "table" or b.kind == "table":
        e = np.union1d(e, np.concatenate([np.asarray(law.table_extent, dtype=np.float64)
                                          for law in (a, b) if law.kind == "table"]))
    pa, pb = a.pressure(e) / a.max_pressure, b.pressure(e) / b.max_pressure
    return bool(np.allclose(pa, pb, rtol=1e-12, atol=1e-12))
