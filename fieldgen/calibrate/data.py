"""The measured indentation a calibration fits: a loading curve (depth, force) read from a CSV, or
design targets ``DEPTH:FORCE``, checked and converted to SI (docs/model.md §1.2)."""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from fieldgen.errors import InputError, OptionError
from fieldgen.tables import header_unit, read_number_pairs
from fieldgen.units import LENGTH_UNITS

FORCE_UNITS = {"N": 1.0, "mN": 1e-3, "kN": 1e3, "lbf": 4.4482216152605}
MIN_DATA_ROWS = 3
#: The most depths a fit takes: each is a contact query (2–3 s a depth for the bundled pad
#: pressed 4 mm, more for a larger contact), so an instrument's log of thousands of samples would
#: take hours; a hundred depths determine every parameter a law can have (as many as ``--knots``'
#: hundred table points). A longer ``--data`` log is thinned to this many depths
#: (:func:`thinned`); more ``--target``s are refused (each was typed: the user chooses which to
#: drop).
MAX_DATA_ROWS = 100


@dataclass
class Data:
    """A loading curve in SI: depth (m) from first contact, force (N) pushing back."""

    depth: np.ndarray
    force: np.ndarray
    rows: list[str]
    source: str | None = None        #: file path, or None for targets
    sha256: str | None = None
    units: str = "m,N"
    rows_read: int | None = None     #: the log's rows when it was thinned (:func:`thinned`), else None

    @property
    def fitted(self) -> np.ndarray:
        """Rows that take part in the fit (depth > 0)."""
        return self.depth > 0


def parse_units(text: str | None) -> tuple[float, float, str]:
    """``LENGTH[,FORCE]`` (e.g. ``mm`` or ``mm,N``) -> (metres per length unit, newtons per force unit, text)."""
    text = (text or "m,N").strip()
    parts = [p.strip() for p in text.split(",")]
    if len(parts) == 1:
        parts.append("N")
    if len(parts) != 2 or parts[0] not in LENGTH_UNITS or parts[1] not in FORCE_UNITS:
        raise OptionError(f"units {text!r} are not LENGTH[,FORCE]",
                          fix=f"give e.g. --units mm,N with LENGTH one of {', '.join(LENGTH_UNITS)} and FORCE one of "
                              f"{', '.join(FORCE_UNITS)}")
    return LENGTH_UNITS[parts[0]], FORCE_UNITS[parts[1]], f"{parts[0]},{parts[1]}"


def check_curve(depth: np.ndarray, force: np.ndarray, rows: Sequence[str], path: str | None) -> None:
    """A loading branch: finite, depth >= 0 strictly increasing, force >= 0 non-decreasing and
    positive once the indenter is in (depth > 0). InputError naming the row otherwise."""
    where = None if path is None else str(path)
    for i, (d, f) in enumerate(zip(depth, force)):
        if not (math.isfinite(d) and math.isfinite(f)):
            raise InputError(f"{rows[i]} is not finite (depth {d}, force {f})", path=where,
                             fix="give finite numbers in every row")
        if d < 0:
            raise InputError(f"{rows[i]} has a negative depth ({d:g} m)", path=where,
                             fix="measure depth from first contact, positive into the part")
        if f < 0:
            raise InputError(f"{rows[i]} has a negative force ({f:g} N)", path=where,
                             fix="give the force pushing back on the indenter as a positive number")
        if d > 0 and not f > 0:
            raise InputError(f"{rows[i]} has no force at depth {d:g} m", path=where,
                             fix="measure depth from the first contact (where the force starts to rise); "
                                 "drop the rows before it")
        if i and not d > depth[i - 1]:
            raise InputError(f"{rows[i]} has depth {d:g} m, not greater than {depth[i - 1]:g} m in {rows[i - 1]}",
                             path=where, fix="give the loading branch only, depth increasing (drop the unloading rows)")
        if i and f < force[i - 1]:
            raise InputError(f"{rows[i]} has force {f:g} N, less than {force[i - 1]:g} N in {rows[i - 1]}",
                             path=where, fix="give the loading branch only, force non-decreasing with depth")


def read_data(path: str | os.PathLike, units: str | None = None) -> Data:
    """Read a CSV of depth, force (header row optional, '#' comments); InputError naming the row."""
    length, force_unit, units_text = parse_units(units)
    path = Path(path)
    pairs, rows, raw = read_number_pairs(path, "depth, force",
                                         fix=f"make every data row two numbers: depth, force (in {units_text})")
    check_header_units(raw, units_text, str(path))
    depths, forces = pairs[:, 0] * length, pairs[:, 1] * force_unit
    if not len(depths):
        raise InputError("the data has no rows", path=str(path),
                         fix="give rows 'depth, force' of the loading curve (a header row is optional)")
    depth, force = depths, forces
    check_curve(depth, force, rows, str(path))
    if int(np.sum(depth > 0)) < MIN_DATA_ROWS:
        raise InputError(f"the data has {int(np.sum(depth > 0))} rows with positive depth; at least "
                         f"{MIN_DATA_ROWS} are needed", path=str(path),
                         fix="give more points of the loading curve (or use --target for design points)")
    kept = thinned(depth)
    read = None if len(kept) == len(depth) else len(depth)
    return Data(depth[kept], force[kept], [rows[i] for i in kept], str(path), hashlib.sha256(raw).hexdigest(),
                units_text, read)


def thinned(depth: np.ndarray, limit: int = MAX_DATA_ROWS) -> np.ndarray:
    """The rows a fit takes of a loading curve (``depth`` increasing), in depth order: all of them
    when at most ``limit`` have a positive depth, else ``limit`` of those: the row nearest to each
    of ``limit`` depths spread evenly from the shallowest to the deepest (both kept; an
    instrument's log is dense where it moved slowly, and the fit should weigh the curve, not the
    sampling), then, while fewer are kept (a log dense in places gives the same row to several
    depths), the row nearest the middle of the widest gap between kept rows that has rows in it
    (:func:`gaps_filled`). A row at depth 0 (first contact) is kept besides."""
    inside = np.flatnonzero(depth > 0)
    if len(inside) <= limit:
        return np.arange(len(depth))
    d = depth[inside]
    wanted = np.linspace(d[0], d[-1], limit)
    at = np.clip(np.searchsorted(d, wanted), 1, len(d) - 1)
    nearer_below = wanted - d[at - 1] <= d[at] - wanted
    kept = gaps_filled(d, np.unique(np.where(nearer_below, at - 1, at)), limit)
    return np.concatenate([np.flatnonzero(depth <= 0), inside[kept]])


def gaps_filled(depth: np.ndarray, kept: np.ndarray, limit: int) -> np.ndarray:
    """``kept`` (sorted indices into ``depth``, increasing; the first and last rows among them)
    with rows added until there are ``limit`` or none is left: each time the row nearest the
    middle of the widest gap in depth between consecutive kept rows that has a row between them
    (of equally wide gaps the shallowest; of two rows equally near the middle the shallower)."""
    kept = [int(i) for i in kept]
    while len(kept) < limit:
        below, above = np.array(kept[:-1], dtype=np.int64), np.array(kept[1:], dtype=np.int64)
        width = np.where(above - below > 1, depth[above] - depth[below], -np.inf)
        if not len(width) or width.max() == -np.inf:
            break                                   # every row is kept
        gap = int(np.argmax(width))
        lo, hi = kept[gap], kept[gap + 1]
        middle = 0.5 * (depth[lo] + depth[hi])
        at = int(np.clip(np.searchsorted(depth, middle), lo + 1, hi - 1))   # the first row past the middle
        nearer_below = at - 1 > lo and middle - depth[at - 1] <= depth[at] - middle
        kept.insert(gap + 1, at - 1 if nearer_below else at)
    return np.array(kept, dtype=np.int64)


#: Units a header may name that ``--units`` does not take (lower case): read as the unit --units
#: gives, every number would be off by their ratio (100 µm read as 100 mm).
OTHER_UNITS = {"depth": ("um", "µm", "μm", "micron", "microns", "nm", "dm", "km", "ft", "feet", "mil", "mils",
                         "thou"),
               "force": ("kgf", "gf", "kp", "g", "kg", "lb", "lbs", "ozf", "oz", "dn", "dan", "dyn", "kip", "kips")}


def check_header_units(raw: bytes, units_text: str, path: str) -> None:
    """InputError when the CSV's header row names a unit (``depth_mm``, ``force (N)``,
    ``Displacement (µm)``) other than ``units_text`` (--units, ``m,N`` by default) says, or one
    --units does not take (:data:`OTHER_UNITS`): every number would be read in the wrong unit, a fit
    off by that factor and no error. A header naming no unit, or a word that is no unit, says
    nothing here (the header is read by :func:`fieldgen.tables.header_unit`)."""
    given = dict(zip(("depth", "force"), units_text.split(",")))
    known = {"depth": LENGTH_UNITS, "force": FORCE_UNITS}
    for quantity in ("depth", "force"):
        named = header_unit(raw, quantity)
        if named is not None and named[0].lower() in OTHER_UNITS[quantity]:
            raise InputError(f"its header names {quantity} in {named[0]} ({named[1]!r}), a unit --units does not "
                             f"take: every {quantity} would be read in {given[quantity]} ({units_text})", path=path,
                             fix=f"convert the column to one of {', '.join(known[quantity])} and give that unit "
                                 "with --units (LENGTH,FORCE)")
        unit = {u.lower(): u for u in known[quantity]}.get(named[0].lower()) if named else None   # MM is mm
        if unit is not None and unit != given[quantity]:
            meant = ",".join(unit if q == quantity else given[q] for q in ("depth", "force"))
            raise InputError(f"its header names {quantity} in {unit} ({named[1]!r}), but --units gives "
                             f"{given[quantity]} ({units_text}): every {quantity} would be read in {given[quantity]}",
                             path=path, fix=f"give --units in the file's units (e.g. --units {meant}), "
                                            "or correct the header")


def parse_targets(texts: Sequence[str], units: str | None = None) -> Data:
    """``DEPTH:FORCE`` design points -> Data (OptionError on malformed ones)."""
    length, force_unit, units_text = parse_units(units)
    pairs = []
    for text in texts:
        d, sep, f = str(text).partition(":")
        try:
            pair = (float(d) * length, float(f) * force_unit)
        except ValueError:
            pair = None
        if not sep or pair is None or not all(map(math.isfinite, pair)) or pair[0] <= 0 or pair[1] <= 0:
            raise OptionError(f"target {text!r} is not DEPTH:FORCE with both positive",
                              fix=f"give e.g. --target 0.002:20 (depth and force in {units_text})")
        pairs.append((*pair, f"target {text}"))
    pairs.sort()                    # by depth, each with its own text to name it by
    depth = np.array([p[0] for p in pairs])
    force = np.array([p[1] for p in pairs])
    rows = [p[2] for p in pairs]
    if len(depth) > MAX_DATA_ROWS:
        raise OptionError(f"the curve has {len(depth)} points, more than the {MAX_DATA_ROWS} depths a fit takes "
                          "(each is a contact query)",
                          fix=f"give at most {MAX_DATA_ROWS} --target points, or the curve as --data (a longer "
                              f"log is thinned to {MAX_DATA_ROWS} depths)")
    try:
        check_curve(depth, force, rows, None)
    except InputError as error:
        raise OptionError(error.defect, fix=error.fix) from None
    return Data(depth, force, rows, None, None, units_text)


def length_unit_name(scale: float) -> str:
    """The name of the length unit of ``scale`` metres (``m`` when none matches)."""
    for name, value in LENGTH_UNITS.items():
        if value == scale:
            return name
    return "m"
