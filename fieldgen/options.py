"""The options of ``fieldgen build``, and the spec files that hold them (docs/model.md §1.2).

``BuildOptions`` holds every option of ``fieldgen build`` with the names of its flags
(underscores for dashes). Lengths are in the input's units, as the user wrote them; the build
converts to SI once, at the surface stage. A spec file (TOML) holds the same keys;
``options_from_spec`` reads one and resolves its paths relative to the spec.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from fieldgen.errors import InputError, OptionError
from fieldgen.io.asset import COMPRESSIONS, DEFAULT_COMPRESSION
from fieldgen.material.damping import MAX_DISSIPATION
from fieldgen.material.levels import LayerTolerance, default_layer_tolerance
from fieldgen.material.modulus import MAX_TABLE_PRESSURE, MIN_MODULUS
from fieldgen.option_kinds import (check_not_folder, check_option_type, check_path_value, coerce_option, is_count,
                                   is_number)
from fieldgen.paths import special_file
from fieldgen.tables import TomlValueError, check_keys, not_utf8, parse_toml
from fieldgen.units import length_scale

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LAWS = ("linear", "hyperbolic", "table")
#: How a skin is meshed (``--skin-mesh``): cut out of a whole-part mesh, or a layer band grown out
#: of the rounded rigid interior with tets outside it (docs/model.md §2.4), the default where it
#: applies (``BuildOptions.skin_meshed_by``).
SKIN_MESHES = ("cut", "band")
DEFAULT_FRICTION = 0.5
#: The relative error the mesh is sized for when no size is given (docs/model.md §2.10).
DEFAULT_ACCURACY = 0.01


@dataclass(frozen=True)
class BuildOptions:
    """Every option of ``fieldgen build``; lengths in the input's units (``units``)."""

    units: str = "m"
    core: str | None = None                 #: path of an inner surface carved out with e = 1
    bonded: tuple[str, ...] = ()            #: face selectors glued to a rigid backing (e = 1)
    insulated: tuple[str, ...] = ()         #: face selectors with zero flux
    max_volume: float | None = None         #: largest tet volume, input units cubed
    edge_length: float | None = None        #: target edge length, input units
    radius_edge: float | None = None        #: TetGen radius-edge quality bound (None: 1.414, relaxable)
    law: str | None = None                  #: linear | hyperbolic | table (inferred when None)
    modulus: float | None = None            #: M0, Pa
    k: float | None = None                  #: hyperbolic stiffening, 0 <= k < 1
    table: str | None = None                #: CSV of extent, pressure (Pa)
    layer_tolerance: float | None = None    #: Pa, absolute; default 1% of the local p0 (at most 0.01 x max p0)
    expansion_rate: float | None = None     #: tau, 1/s (D 5.2.1)
    dissipation: float | None = None        #: chi, s/m, given directly
    mu_static: float = DEFAULT_FRICTION
    mu_dynamic: float = DEFAULT_FRICTION
    drake_vtk: str | None = None            #: also write a Drake-loadable legacy .vtk (+ .sdf)
    skin: float | None = None               #: skin thickness over a rigid interior, input units
    robust: bool = False                    #: mesh open/self-intersecting input with fTetWild
    tangential_stiffness: float | None = None   #: K̄, 1/m: friction spring k = K̄ p (D 6.2.3)
    tangential_damping: float | None = None     #: C̄, s/m: friction damper c = C̄ p
    accuracy: float | None = None           #: relative discretisation error the mesh is sized for (None: 1%)
    threads: int | None = None              #: fTetWild's threads with --robust (None/0: every core)
    estimate: bool = False                  #: estimate the error of a mesh sized by hand or by fTetWild too
    skin_mesh: str | None = None            #: "band" (layers, docs/model.md §2.4) or "cut"; None: band where it applies
    compression: str = DEFAULT_COMPRESSION  #: the asset's array encoding: none (raw), zlib or lz4
    surface_tolerance: float | None = None  #: remesh the surface within this distance, input units (None: by the part, 0: never)

    @property
    def skin_meshed_by(self) -> str | None:
        """How the skin is meshed (None without one): ``skin_mesh`` if given, else the layer band
        where it applies (sized by accuracy, every face free, not ``robust``), else the cut."""
        if self.skin is None:
            return None
        if self.skin_mesh is not None:
            return self.skin_mesh
        return "band" if self.sized_by_accuracy and not (self.bonded or self.insulated) else "cut"

    def layer_tolerance_for(self, law) -> LayerTolerance:
        """The layering's interpolation-error tolerance (docs/model.md §2.4): the one given
        (absolute, Pa), else ``default_layer_tolerance(law)``: relative to the local pressure, at
        most (``float()``) 1% of the law's largest pressure."""
        return default_layer_tolerance(law) if self.layer_tolerance is None else LayerTolerance(float(self.layer_tolerance))

    @property
    def sized_by_accuracy(self) -> bool:
        """Whether the accuracy chooses the mesh (docs/model.md §2.10): no size given, and not
        fTetWild under a skin (its passes would remesh with TetGen's size field)."""
        return self.edge_length is None and self.max_volume is None and not (self.robust and self.skin is not None)

    @property
    def sizing_accuracy(self) -> float:
        """The accuracy the mesh is sized for when no size is given (default 1%, docs/model.md §2.10)."""
        return DEFAULT_ACCURACY if self.accuracy is None else float(self.accuracy)

    def checked(self) -> "BuildOptions":
        """Return self after checking values that need no geometry (each of ``CHECKS`` in turn);
        OptionError otherwise."""
        for check in CHECKS:
            check(self)
        return self

    def resolved_law(self) -> str:
        if self.law is not None:
            if self.law not in LAWS:
                raise OptionError(f"unknown law {self.law!r}", fix=f"use one of {', '.join(LAWS)}")
            return self.law
        if self.table is not None:
            return "table"
        if self.k is not None:
            return "hyperbolic"
        return "linear"

    def to_dict(self) -> dict[str, Any]:
        """The options as plain JSON values (paths as given)."""
        out = dataclasses.asdict(self)
        for key in ("bonded", "insulated"):
            out[key] = list(out[key])
        return out


# ------------------------------------------------------------------ the checks
# Each takes the options and raises OptionError naming the flag; ``CHECKS`` runs them in order,
# so the first defect found is the one reported.

def _check_types(o: BuildOptions) -> None:
    """Each option is of its kind (:data:`fieldgen.option_kinds.KINDS`), as a library user may
    build ``BuildOptions`` with any value: a number, not text or a bool; a tuple of selectors,
    not one string; a path; True or False; a whole number of threads."""
    for field in dataclasses.fields(o):
        check_option_type(field.name, getattr(o, field.name), optional=field.default is None)


def _check_units(o: BuildOptions) -> None:
    length_scale(o.units, what="--units")


def _check_law(o: BuildOptions) -> None:
    """The law (docs/model.md §2.3) and what it needs: a modulus, k for the hyperbolic one, a table."""
    law = o.resolved_law()
    if o.k is not None and not (math.isfinite(o.k) and 0.0 <= o.k < 1.0):
        raise OptionError(f"--k must be in [0, 1) (0 <= K < 1), got {o.k}",
                          fix="give the hyperbolic stiffening with 0 <= K < 1 (K -> 1 makes p0(1) = M0/(1-K) unbounded)")
    if law in ("linear", "hyperbolic") and o.modulus is None:
        raise OptionError(f"the {law} law needs a modulus", fix="give --modulus M0 in Pa (e.g. --modulus 1e5)")
    if law == "table" and o.table is None:
        raise OptionError("the table law needs a table", fix="give --table FILE.csv with columns extent, pressure (Pa)")
    if law == "table" and (o.modulus is not None or o.k is not None):
        raise OptionError("--table and --modulus/--k both given", fix="give either a table or a modulus, not both")
    if law == "hyperbolic" and o.k is None:
        raise OptionError("the hyperbolic law needs k", fix="give --k K with 0 <= K < 1")
    if law == "linear" and o.k not in (None, 0.0):
        raise OptionError("--k given with the linear law", fix="drop --k or use --law hyperbolic")


#: Options that must be positive numbers when given.
POSITIVE = ("modulus", "max_volume", "edge_length", "expansion_rate", "layer_tolerance", "skin")


#: Sizes (lengths, volumes) above this cannot be computed with: cubed, they overflow (as
#: coordinates, ``surface_readers.LARGEST_COORDINATE``).
LARGEST_SIZE = 1e100


# ------------------------------------------------------------------ physical bounds
# Magnitudes no material or motion has: a value past one is a unit slip or a typo, and would
# overflow or vanish in the arithmetic (docs/cli.md names each). Checked where options are given.

#: The largest friction coefficient (``--mu-*``): no pair of solids grips this hard (rubber on
#: glass about 3).
MAX_FRICTION = 10.0
#: The slowest expansion rate τ (1/s): the dissipation 1/(L·τ) would pass MAX_DISSIPATION
#: (:mod:`fieldgen.material.damping`) for any part under 1 m across; a faster one may still pass
#: it on a thin part, which the damping stage refuses once L is known.
MIN_EXPANSION_RATE = 1e-6
#: The stiffest friction spring K̄ (1/m): it slides after μ/K̄, 1e-10 m (an atom) per unit μ.
MAX_TANGENTIAL_STIFFNESS = 1e10
#: The thinnest skin (m, after --units): meshed at half its thickness, its tets would pass the
#: 2e7 a build holds (docs/design/limits.md) on any part over 0.14 mm across.
MIN_SKIN = 1e-6
#: More threads than any machine has cores (fTetWild's binding takes a 32-bit count, and a
#: larger one failed only after the surface was read, as a mesher error).
MAX_THREADS = 4096
#: No speed reaches the speed of light (m/s); no spin moves a point 1 µm off its axis faster.
SPEED_OF_LIGHT = 299_792_458.0
MAX_SPIN = SPEED_OF_LIGHT / 1e-6


def check_modulus_bounds(modulus: float | None, *, flag: str = "--modulus", path: str | None = None) -> None:
    """OptionError for a modulus given below :data:`MIN_MODULUS` or above the stiffest solid's
    (:data:`~fieldgen.material.modulus.MAX_TABLE_PRESSURE`), for ``flag`` or, in the file
    ``path``, its key as written there (``modulus = ...``). Non-numbers are left to the positivity
    checks."""
    if not (is_number(modulus) and math.isfinite(modulus)) or modulus <= 0:
        return
    given = f"{flag} {modulus:g}" if path is None else f"{flag.lstrip('-').replace('-', '_')} = {modulus:g}"
    if modulus > MAX_TABLE_PRESSURE:
        raise OptionError(f"{given} Pa is above {MAX_TABLE_PRESSURE:g} Pa, stiffer than any solid",
                          path=path, fix="give M0 in Pa (foams 1e4-1e6, rubbers 1e6-1e8)")
    if modulus < MIN_MODULUS:
        raise OptionError(f"{given} Pa is below {MIN_MODULUS:g} Pa, softer than any gel",
                          path=path, fix="give M0 in Pa (gels 1e2-1e4, foams 1e4-1e6, rubbers 1e6-1e8)")


def check_friction(value: float | None, flag: str) -> None:
    """OptionError for a friction coefficient ``flag`` that is negative, not finite or above
    :data:`MAX_FRICTION`."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise OptionError(f"{flag} must be >= 0, got {value}", fix="give a friction coefficient")
    if value is not None and value > MAX_FRICTION:
        raise OptionError(f"{flag} {value:g} is above {MAX_FRICTION:g}: no pair of solids grips so hard",
                          fix="give a friction coefficient, e.g. 0.5 (rubber on glass is about 3)")


def check_velocity(linear, angular, flag: str) -> None:
    """OptionError for a velocity ``flag`` (m/s, rad/s) faster than light, or spinning a point
    1 µm off its axis faster than light (:data:`MAX_SPIN`)."""
    speed, spin = math.hypot(*map(float, linear)), math.hypot(*map(float, angular))
    if not math.isfinite(speed) or speed > SPEED_OF_LIGHT:
        raise OptionError(f"{flag}: a speed of {speed:g} m/s is faster than light ({SPEED_OF_LIGHT:g} m/s)",
                          fix="give vx,vy,vz in m/s (e.g. 0,0,0.1)")
    if not math.isfinite(spin) or spin > MAX_SPIN:
        raise OptionError(f"{flag}: a spin of {spin:g} rad/s moves a point 1 µm off its axis faster than "
                          f"light (above {MAX_SPIN:g} rad/s)", fix="give wx,wy,wz in rad/s (e.g. 0,0,1)")


def _check_magnitudes(o: BuildOptions) -> None:
    """The physical bounds above, on options checked positive or >= 0 by the checks before."""
    check_modulus_bounds(o.modulus)         # a library's BuildOptions too, not only flags and files
    if o.skin is not None and o.skin * length_scale(o.units, what="--units") < MIN_SKIN:
        raise OptionError(f"--skin {o.skin:g} {o.units} is thinner than {MIN_SKIN * 1e6:g} µm: meshed at half "
                          "its thickness, its tets would pass what a build can hold on any part over 0.14 mm",
                          fix=f"give a skin of at least {MIN_SKIN / length_scale(o.units, what='--units'):g} "
                              f"{o.units} (its thickness in --units), or drop --skin for a part compliant throughout")
    if o.expansion_rate is not None and o.expansion_rate < MIN_EXPANSION_RATE:
        raise OptionError(f"--expansion-rate {o.expansion_rate:g} 1/s is below {MIN_EXPANSION_RATE:g} 1/s: the "
                          f"dissipation 1/(L·τ) would pass {MAX_DISSIPATION:g} s/m",
                          fix="give τ in 1/s (foams about 1-100), or --dissipation directly")
    for name, effect in (("dissipation", "a speed of 1 µm/s would double the force"),
                         ("tangential_damping", "sliding at 1 µm/s would drag with a traction as large as the pressure")):
        value = getattr(o, name)
        if value is not None and value > MAX_DISSIPATION:
            raise OptionError(f"--{name.replace('_', '-')} {value:g} s/m is above {MAX_DISSIPATION:g} s/m: {effect}",
                              fix="give it in s/m (lossy foams about 1-100)")
    if o.tangential_stiffness is not None and o.tangential_stiffness > MAX_TANGENTIAL_STIFFNESS:
        raise OptionError(f"--tangential-stiffness {o.tangential_stiffness:g} 1/m is above "
                          f"{MAX_TANGENTIAL_STIFFNESS:g} 1/m: the friction spring would slide after less than an "
                          "atom's width", fix="give K̄ in 1/m (e.g. 1e4: slides after μ/K̄ = 50 µm at μ = 0.5)")


def _check_positive(o: BuildOptions) -> None:
    for name in POSITIVE:
        value = getattr(o, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise OptionError(f"--{name.replace('_', '-')} must be a positive number, got {value}",
                              fix="give a finite value greater than zero")
        if value is not None and name in ("max_volume", "edge_length", "skin") and float(value) > LARGEST_SIZE:
            raise OptionError(f"--{name.replace('_', '-')} {value:g} is too large to compute with (above "
                              f"{LARGEST_SIZE:g})", fix="give it in the input's units (--units), smaller than the part")


def _check_kinds(o: BuildOptions) -> None:
    """The accuracy is a relative error, threads a whole number, estimate a flag."""
    if o.accuracy is not None and not (
            is_number(o.accuracy) and math.isfinite(o.accuracy) and 0 < o.accuracy <= 0.5):
        raise OptionError(f"--accuracy must be a relative error in (0, 0.5], got {o.accuracy}",
                          fix="give e.g. --accuracy 0.01 for 1%")
    if o.threads is not None and (not is_count(o.threads) or o.threads < 0):
        raise OptionError(f"--threads must be a whole number >= 0, got {o.threads!r}",
                          fix="give e.g. --threads 2 (0 = every core)")
    if o.threads is not None and o.threads > MAX_THREADS:
        raise OptionError(f"--threads {o.threads} is more than any machine has cores (above {MAX_THREADS})",
                          fix="give e.g. --threads 2 (0 = every core)")
    if not isinstance(o.estimate, bool):
        raise OptionError(f"--estimate must be true or false, got {o.estimate!r}", fix="write estimate = true")


def _check_accuracy_used(o: BuildOptions) -> None:
    """An accuracy would be ignored beside a size, or under fTetWild with a skin (docs/model.md
    §2.10), unless the mesh's error is to be estimated (from flags, a spec or a manifest alike)."""
    if o.accuracy is None or o.estimate:
        return
    for name, given in (("edge_length", o.edge_length is not None), ("max_volume", o.max_volume is not None)):
        if given:
            flag = name.replace("_", "-")
            raise OptionError(
                f"--accuracy and --{flag} both given: the accuracy sizes the mesh only when no size is given",
                fix=f"drop accuracy, or drop {name} (--{flag}) to let the accuracy choose the mesh, "
                    "or add --estimate (estimate = true) to have this mesh's error estimated and "
                    "compared with it")
    if o.robust and o.skin is not None:
        raise OptionError(
            "--accuracy with --robust and --skin: a skin's sizing remeshes every pass with TetGen's "
            "size field, which fTetWild does not take",
            fix="drop accuracy (fTetWild then meshes at half the skin, or at --edge-length), or repair "
                "the surface and drop --robust, or add --estimate to have the mesh's error estimated and "
                "compared with it")


def _check_meshing(o: BuildOptions) -> None:
    """One size, fTetWild's threads, and how a skin is meshed (docs/model.md §2.4)."""
    if o.edge_length is not None and o.max_volume is not None:
        raise OptionError("--edge-length and --max-volume both given: the mesh takes one size",
                          fix="drop one of them (edge_length or max_volume)")
    if o.threads is not None and not o.robust:
        raise OptionError("--threads given without --robust: it sets fTetWild's threads, and TetGen runs on one",
                          fix="add --robust (robust = true), or drop threads")
    if o.skin_mesh is not None and o.skin_mesh not in SKIN_MESHES:
        raise OptionError(f"--skin-mesh must be one of {', '.join(SKIN_MESHES)}, got {o.skin_mesh!r}",
                          fix='write e.g. skin_mesh = "band"')
    if o.skin_mesh is not None and o.skin is None:
        raise OptionError(f"--skin-mesh {o.skin_mesh} without --skin", fix="give --skin THICKNESS, or drop --skin-mesh")
    if o.skin_mesh == "band":
        _check_band(o)


def _check_band(o: BuildOptions) -> None:
    """The layer band (docs/model.md §2.4) is one way to mesh a skin sized by accuracy."""
    given = [flag for flag, value in (("--edge-length", o.edge_length), ("--max-volume", o.max_volume))
             if value is not None]
    if given or o.robust:
        raise OptionError(f"--skin-mesh band with {' and '.join(given + (['--robust'] if o.robust else []))}: "
                          "the band is sized by accuracy, on TetGen's mesh",
                          fix="drop the size (the accuracy sizes the band) or --robust, or drop --skin-mesh band")
    if o.bonded or o.insulated:
        raise OptionError("--skin-mesh band with bonded or insulated faces: the band is grown under free faces only",
                          fix="drop --skin-mesh band (the skin is then cut out of a whole-part mesh)")


def _check_interior(o: BuildOptions) -> None:
    """One rigid interior at most: a skin's or a core's, and fTetWild carves no core."""
    if o.skin is not None and o.core is not None:
        raise OptionError("--skin and --core both given",
                          fix="give one: --skin makes everything deeper than THICKNESS a rigid interior, "
                              "--core carves out a given rigid core")
    if o.robust and o.core is not None:
        raise OptionError("--robust and --core both given (fTetWild is not used to carve a core)",
                          fix="repair the surfaces and drop --robust, or drop --core (--skin gives a rigid "
                              "interior at a set depth)")
    if not isinstance(o.robust, bool):
        raise OptionError(f"--robust must be true or false, got {o.robust!r}", fix="write robust = true")
    if o.radius_edge is not None and not (math.isfinite(o.radius_edge) and o.radius_edge >= 1.0):
        raise OptionError(f"--radius-edge must be at least 1.0 (and finite), got {o.radius_edge}",
                          fix="use TetGen's usual bound, e.g. 1.414")


def _check_damping(o: BuildOptions) -> None:
    """The dissipation (docs/model.md §2.7) is given, or follows from the expansion rate."""
    if o.dissipation is not None and not (math.isfinite(o.dissipation) and o.dissipation >= 0):
        raise OptionError(f"--dissipation must be >= 0 s/m, got {o.dissipation}", fix="give a non-negative value")
    if o.dissipation is not None and o.expansion_rate is not None:
        raise OptionError("--dissipation and --expansion-rate both given",
                          fix="give one: the dissipation follows from the expansion rate as 1/(L*tau)")
    for name in ("mu_static", "mu_dynamic"):
        check_friction(getattr(o, name), f"--{name.replace('_', '-')}")


def _check_drake_vtk(o: BuildOptions) -> None:
    """A FILE.vtk: Drake reads its suffix; a name that is the suffix alone (``.vtk``, a hidden
    file) has none, and would be refused by the writer after the whole build."""
    if o.drake_vtk is not None and not str(o.drake_vtk).lower().endswith(".vtk"):
        raise OptionError(f"--drake-vtk {o.drake_vtk!r} does not end in .vtk (Drake reads compliant tet "
                          "meshes only from legacy .vtk files)", fix="name it FILE.vtk")
    if o.drake_vtk is not None and Path(o.drake_vtk).suffix.lower() != ".vtk":
        raise OptionError(f"--drake-vtk {o.drake_vtk!r} is named .vtk alone: a file of that name has no suffix "
                          "for Drake to read", fix="name it FILE.vtk, e.g. part.vtk")


def _check_selectors(o: BuildOptions) -> None:
    """Each --bonded and --insulated face selector parses (docs/model.md §2.2)."""
    # lazy: the selectors' module loads the surface stage (scipy), which reading options does not need
    from fieldgen.surface.selectors import parse_selector

    for flag, selectors in (("--bonded", o.bonded), ("--insulated", o.insulated)):
        for text in selectors:
            try:
                parse_selector(str(text))
            except OptionError as exc:
                raise OptionError(f"{flag}: {exc.defect}", fix=exc.fix) from None


def _check_friction(o: BuildOptions) -> None:
    """The friction spring's constants (D 6.2.3, docs/model.md §4.7) and the two coefficients."""
    for name in ("tangential_stiffness", "tangential_damping"):
        value = getattr(o, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise OptionError(f"--{name.replace('_', '-')} must be a positive number, got {value}",
                              fix="give K̄ in 1/m (e.g. 1e4) and C̄ in s/m (e.g. 10): k = K̄·p, c = C̄·p")
    if o.mu_dynamic > o.mu_static:
        raise OptionError(f"--mu-dynamic ({o.mu_dynamic}) exceeds --mu-static ({o.mu_static})",
                          fix="kinetic friction cannot exceed static friction; swap or lower them")


def _check_compression(o: BuildOptions) -> None:
    """The asset's array encoding is one the writer knows (fieldgen/io/asset.py)."""
    if o.compression not in COMPRESSIONS:
        raise OptionError(f"--compression must be one of {', '.join(COMPRESSIONS)}, got {o.compression!r}",
                          fix='write e.g. compression = "none" (raw, the default) or "zlib"')


def _check_surface_tolerance(o: BuildOptions) -> None:
    """The surface tolerance (docs/model.md §2.11) is a length >= 0 (0 keeps the input's triangles)."""
    value = o.surface_tolerance
    if value is not None and not (is_number(value) and math.isfinite(value) and value >= 0):
        raise OptionError(f"--surface-tolerance must be a length >= 0 in the input's units, got {value}",
                          fix="give e.g. --surface-tolerance 0.05 (with --units mm: 50 µm), 0 to keep the "
                              "input's triangles, or leave it out for the default (0.1% of the part's diagonal)")
    if value is not None and float(value) > LARGEST_SIZE:       # its square overflows in the remesher's patch areas
        raise OptionError(f"--surface-tolerance {value:g} is too large to compute with (above {LARGEST_SIZE:g})",
                          fix="give it in the input's units (--units), smaller than the part")


#: What :meth:`BuildOptions.checked` checks, in order (the first defect found is reported).
CHECKS: tuple[Callable[[BuildOptions], None], ...] = (
    _check_types, _check_units, _check_law, _check_positive, _check_kinds, _check_accuracy_used, _check_meshing,
    _check_compression, _check_interior, _check_damping, _check_drake_vtk, _check_selectors, _check_friction,
    _check_surface_tolerance, _check_magnitudes,
)


OPTION_NAMES = tuple(f.name for f in dataclasses.fields(BuildOptions))
#: The origins of options given as flags, not written in a file (the command line, the library's default).
COMMAND_LINE = "command line"
FLAG_ORIGINS = (COMMAND_LINE, "options")


def options_from_mapping(values: Mapping[str, Any], *, base_dir: str | os.PathLike | None = None,
                         origin: str = "options", base: BuildOptions | None = None) -> BuildOptions:
    """Merge ``values`` (flag names with underscores) over ``base``; resolve paths against ``base_dir``.

    Unknown keys, wrongly typed values and a modulus stiffer than any solid or softer than any gel
    (:func:`check_modulus_bounds`) raise OptionError naming ``origin``;
    an ``origin`` other than :data:`FLAG_ORIGINS` is a file, and the modulus is named as its key.
    """
    merged = dataclasses.asdict(base or BuildOptions())
    check_keys(values, OPTION_NAMES, path=origin, noun="option")
    for key, value in values.items():
        merged[key] = coerce_option(key, value, origin, base_dir)
    if "modulus" in values:        # a base's modulus was checked where it was given
        check_modulus_bounds(merged["modulus"], path=None if origin in FLAG_ORIGINS else origin)
    return BuildOptions(**merged)


def checked_from(options: BuildOptions, spec: str | os.PathLike | None, flags: Iterable[str] = (),
                 keys: Iterable[str] | None = None) -> BuildOptions:
    """``options.checked()``, where ``options`` were read from the build spec ``spec`` (then
    ``flags``, the keys given on the command line, laid over them): an OptionError about an option
    the spec set names the spec and the key as written there (``s.toml: modulus must be ...``),
    not the flag (``--modulus``) the user never typed. ``keys``: those the spec set, when known
    (else every option off its default not in ``flags``)."""
    if keys is None:          # every option off its default
        keys = [key for key in OPTION_NAMES if getattr(options, key) != getattr(BuildOptions(), key)]
    given = [] if spec is None else [(str(spec), [key for key in keys if key not in set(flags)])]
    try:
        return checked_in_layers(options, given, flags)
    except OptionError as error:
        if spec is None or error.path is not None or options.modulus is not None \
                or "needs a modulus" not in error.defect:
            raise
        raise OptionError(f"{error.defect}, and the spec gives none", path=str(spec),
                          fix="add modulus = M0 in Pa to the spec (e.g. modulus = 1e5), or give --modulus") from None


def checked_in_layers(options: BuildOptions, layers, flags: Iterable[str] = ()) -> BuildOptions:
    """``options.checked()``, where ``options`` were laid together from ``layers``, (where, keys)
    pairs from the lowest precedence to the highest (a manifest's [defaults], an item's spec, the
    item), then ``flags``, the keys given on the command line (none for a manifest): an
    OptionError about an option names the last layer that set it, and every option it names as
    the key written in a file (``table and modulus/k both given``) rather than its flag, but for
    the ``flags``. A key no layer set (a flag) keeps the error as it is."""
    try:
        return options.checked()
    except OptionError as error:
        named = re.search(r"--([a-z][a-z-]*)|^unknown (law) ", error.defect)
        key = (named.group(1) or named.group(2)).replace("-", "_") if named else None
        source = next((where for where, keys in reversed(list(layers)) if key in set(keys)), None)
        if source is None or error.path is not None or key not in OPTION_NAMES:
            raise
        typed = set(flags)

        def as_key(flag: re.Match) -> str:
            name = flag.group(1).replace("-", "_")
            return name if name in OPTION_NAMES and name not in typed else flag.group(0)

        raise OptionError(re.sub(r"--([a-z][a-z-]*)", as_key, error.defect), path=source, fix=error.fix) from None


def read_spec(path: str | os.PathLike) -> tuple[dict[str, Any], Path]:
    """Read a build spec (TOML); return its table and its folder. InputError if unreadable."""
    path = Path(path)
    kind = special_file(path)
    if kind is not None:              # a pipe or a device would be read for ever
        raise InputError(f"is {kind}, not a spec file", path=str(path), fix="give the spec's .toml file to --spec")
    try:
        with open(path, "rb") as handle:
            data = parse_toml(handle.read().decode("utf-8-sig"))     # a byte-order mark is allowed
    except FileNotFoundError:
        raise InputError("spec file not found", path=str(path), fix="check the path given to --spec") from None
    except (tomllib.TOMLDecodeError, TomlValueError) as exc:
        raise InputError(f"not valid TOML ({exc})", path=str(path), fix="fix the syntax of the spec file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{not_utf8(exc)}, so not a TOML spec", path=str(path),
                         fix="save the spec as UTF-8 text") from None
    return data, path.parent


def options_from_spec(path: str | os.PathLike, base: BuildOptions | None = None) -> tuple[BuildOptions, str | None, str | None]:
    """Options from a spec file, plus its optional ``input`` and ``output`` paths (resolved)."""
    data, folder = read_spec(path)
    data = dict(data)
    extra = {}
    for key in ("input", "output"):
        value = data.pop(key, None)
        if value is not None:
            check_path_value(key, value, str(path), f'write {key} = "..." (relative to the spec)')
            extra[key] = str(folder / value) if not os.path.isabs(value) else value
            if key == "input":
                check_not_folder(key, value, extra[key], str(path),
                                 'write input = "part.stl": the surface mesh file itself, relative to the spec')
    options = options_from_mapping(data, base_dir=folder, origin=str(path), base=base)
    return options, extra.get("input"), extra.get("output")


