"""The build pipeline: surface -> tet mesh -> extent -> pressure -> asset (docs/model.md §2).

``BuildOptions`` holds every option of ``fieldgen build`` with the names of its flags
(underscores for dashes). Lengths are in the input's units, as the user wrote them;
``build`` converts to SI once, at the surface stage. A spec file (TOML) holds the same
keys; ``options_from_spec`` reads one and resolves its paths relative to the spec.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from fieldgen import __version__
from fieldgen.errors import FieldgenError, InputError, OptionError
from fieldgen.progress import Progress

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


@dataclass(frozen=True)
class BuildOptions:
    """Every option of ``fieldgen build``; lengths in the input's units (``units``)."""

    units: str = "m"
    core: str | None = None                 #: path of an inner surface carved out with e = 1
    bonded: tuple[str, ...] = ()            #: face selectors glued to a rigid backing (e = 1)
    insulated: tuple[str, ...] = ()         #: face selectors with zero flux
    max_volume: float | None = None         #: largest tet volume, input units cubed
    edge_length: float | None = None        #: target edge length, input units
    radius_edge: float = 1.414              #: TetGen radius-edge quality bound
    law: str | None = None                  #: linear | hyperbolic | table (inferred when None)
    modulus: float | None = None            #: M0, Pa
    k: float | None = None                  #: hyperbolic stiffening, 0 <= k < 1
    table: str | None = None                #: CSV of extent, pressure (Pa)
    layer_tolerance: float | None = None    #: Pa; default 0.01 x max p0
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

    @property
    def skin_meshed_by(self) -> str | None:
        """How the skin is meshed (None without one): ``skin_mesh`` if given, else the layer band
        where it applies (sized by accuracy, every face free, not ``robust``), else the cut."""
        if self.skin is None:
            return None
        if self.skin_mesh is not None:
            return self.skin_mesh
        return "band" if self.sized_by_accuracy and not (self.bonded or self.insulated) else "cut"

    def layer_tolerance_for(self, law) -> float:
        """The layering's interpolation-error tolerance in Pa (docs/model.md §2.4): the one given,
        else 1% of the law's largest pressure."""
        return 0.01 * law.max_pressure if self.layer_tolerance is None else float(self.layer_tolerance)

    @property
    def sized_by_accuracy(self) -> bool:
        """Whether the accuracy chooses the mesh (docs/model.md §2.10): no size given, and not
        fTetWild under a skin (its passes would remesh with TetGen's size field)."""
        return self.edge_length is None and self.max_volume is None and not (self.robust and self.skin is not None)

    def _check_band(self) -> None:
        """The layer band (docs/model.md §2.4) is one way to mesh a skin sized by accuracy."""
        given = [flag for flag, value in (("--edge-length", self.edge_length), ("--max-volume", self.max_volume))
                 if value is not None]
        if given or self.robust:
            raise OptionError(f"--skin-mesh band with {' and '.join(given + (['--robust'] if self.robust else []))}: "
                              "the band is sized by accuracy, on TetGen's mesh",
                              fix="drop the size (the accuracy sizes the band) or --robust, or drop --skin-mesh band")
        if self.bonded or self.insulated:
            raise OptionError("--skin-mesh band with bonded or insulated faces: the band is grown under free faces only",
                              fix="drop --skin-mesh band (the skin is then cut out of a whole-part mesh)")

    @property
    def sizing_accuracy(self) -> float:
        """The accuracy the mesh is sized for when no size is given (default 1%, docs/model.md §2.10)."""
        from fieldgen.sizing.loops import DEFAULT_ACCURACY

        return DEFAULT_ACCURACY if self.accuracy is None else float(self.accuracy)

    # ----------------------------------------------------------------- checks
    def checked(self) -> "BuildOptions":
        """Return self after checking values that need no geometry; OptionError otherwise."""
        from fieldgen.units import length_scale

        length_scale(self.units, what="--units")
        law = self.resolved_law()
        if self.k is not None and not (math.isfinite(self.k) and 0.0 <= self.k < 1.0):
            raise OptionError(f"--k must be in [0, 1) (0 <= K < 1), got {self.k}",
                              fix="give the hyperbolic stiffening with 0 <= K < 1 (K -> 1 makes p0(1) = M0/(1-K) unbounded)")
        if law in ("linear", "hyperbolic") and self.modulus is None:
            raise OptionError(f"the {law} law needs a modulus", fix="give --modulus M0 in Pa (e.g. --modulus 1e5)")
        if law == "table" and self.table is None:
            raise OptionError("the table law needs a table", fix="give --table FILE.csv with columns extent, pressure (Pa)")
        if law == "table" and (self.modulus is not None or self.k is not None):
            raise OptionError("--table and --modulus/--k both given", fix="give either a table or a modulus, not both")
        if law == "hyperbolic" and self.k is None:
            raise OptionError("the hyperbolic law needs k", fix="give --k K with 0 <= K < 1")
        if law == "linear" and self.k not in (None, 0.0):
            raise OptionError("--k given with the linear law", fix="drop --k or use --law hyperbolic")
        positive = {
            "modulus": self.modulus, "max_volume": self.max_volume, "edge_length": self.edge_length,
            "expansion_rate": self.expansion_rate, "layer_tolerance": self.layer_tolerance,
            "skin": self.skin,
        }
        for name, value in positive.items():
            if value is not None and not (math.isfinite(value) and value > 0):
                raise OptionError(f"--{name.replace('_', '-')} must be a positive number, got {value}",
                                  fix="give a finite value greater than zero")
        if self.accuracy is not None and not (
                isinstance(self.accuracy, (int, float)) and not isinstance(self.accuracy, bool)
                and math.isfinite(self.accuracy) and 0 < self.accuracy <= 0.5):
            raise OptionError(f"--accuracy must be a relative error in (0, 0.5], got {self.accuracy}",
                              fix="give e.g. --accuracy 0.01 for 1%")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 0):
            raise OptionError(f"--threads must be a whole number >= 0, got {self.threads!r}",
                              fix="give e.g. --threads 2 (0 = every core)")
        if not isinstance(self.estimate, bool):
            raise OptionError(f"--estimate must be true or false, got {self.estimate!r}", fix="write estimate = true")
        # Options that would be ignored beside others (from flags, a spec or a manifest alike).
        if self.accuracy is not None and not self.estimate:
            for name, given in (("edge_length", self.edge_length is not None),
                                ("max_volume", self.max_volume is not None)):
                if given:
                    flag = name.replace("_", "-")
                    raise OptionError(
                        f"--accuracy and --{flag} both given: the accuracy sizes the mesh only when no size is given",
                        fix=f"drop accuracy, or drop {name} (--{flag}) to let the accuracy choose the mesh, "
                            "or add --estimate (estimate = true) to have this mesh's error estimated and "
                            "compared with it")
            if self.robust and self.skin is not None:
                raise OptionError(
                    "--accuracy with --robust and --skin: a skin's sizing remeshes every pass with TetGen's "
                    "size field, which fTetWild does not take",
                    fix="drop accuracy (fTetWild then meshes at half the skin, or at --edge-length), or repair "
                        "the surface and drop --robust, or add --estimate to have the mesh's error estimated and "
                        "compared with it")
        if self.threads is not None and not self.robust:
            raise OptionError("--threads given without --robust: it sets fTetWild's threads, and TetGen runs on one",
                              fix="add --robust (robust = true), or drop threads")
        if self.skin_mesh is not None and self.skin_mesh not in SKIN_MESHES:
            raise OptionError(f"--skin-mesh must be one of {', '.join(SKIN_MESHES)}, got {self.skin_mesh!r}",
                              fix='write e.g. skin_mesh = "band"')
        if self.skin_mesh is not None and self.skin is None:
            raise OptionError(f"--skin-mesh {self.skin_mesh} without --skin", fix="give --skin THICKNESS, or drop --skin-mesh")
        if self.skin_mesh == "band":
            self._check_band()
        if self.skin is not None and self.core is not None:
            raise OptionError("--skin and --core both given",
                              fix="give one: --skin makes everything deeper than THICKNESS a rigid interior, "
                                  "--core carves out a given rigid core")
        if self.robust and self.core is not None:
            raise OptionError("--robust and --core both given (fTetWild is not used to carve a core)",
                              fix="repair the surfaces and drop --robust, or drop --core (--skin gives a rigid "
                                  "interior at a set depth)")
        if not isinstance(self.robust, bool):
            raise OptionError(f"--robust must be true or false, got {self.robust!r}", fix="write robust = true")
        if self.radius_edge < 1.0:
            raise OptionError(f"--radius-edge must be at least 1.0, got {self.radius_edge}",
                              fix="use TetGen's usual bound, e.g. 1.414")
        if self.dissipation is not None and not (math.isfinite(self.dissipation) and self.dissipation >= 0):
            raise OptionError(f"--dissipation must be >= 0 s/m, got {self.dissipation}", fix="give a non-negative value")
        if self.dissipation is not None and self.expansion_rate is not None:
            raise OptionError("--dissipation and --expansion-rate both given",
                              fix="give one: the dissipation follows from the expansion rate as 1/(L*tau)")
        for name in ("mu_static", "mu_dynamic"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise OptionError(f"--{name.replace('_', '-')} must be >= 0, got {value}", fix="give a friction coefficient")
        if self.drake_vtk is not None and not str(self.drake_vtk).lower().endswith(".vtk"):
            raise OptionError(f"--drake-vtk {self.drake_vtk!r} does not end in .vtk (Drake reads compliant tet "
                              "meshes only from legacy .vtk files)", fix="name it FILE.vtk")
        from fieldgen.surface.selectors import parse_selector

        for flag, selectors in (("--bonded", self.bonded), ("--insulated", self.insulated)):
            for text in selectors:
                try:
                    parse_selector(str(text))
                except OptionError as exc:
                    raise OptionError(f"{flag}: {exc.defect}", fix=exc.fix) from None
        for name in ("tangential_stiffness", "tangential_damping"):      # D 6.2.3
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise OptionError(f"--{name.replace('_', '-')} must be a positive number, got {value}",
                                  fix="give K̄ in 1/m (e.g. 1e4) and C̄ in s/m (e.g. 10): k = K̄·p, c = C̄·p")
        if self.mu_dynamic > self.mu_static:
            raise OptionError(f"--mu-dynamic ({self.mu_dynamic}) exceeds --mu-static ({self.mu_static})",
                              fix="kinetic friction cannot exceed static friction; swap or lower them")
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


OPTION_NAMES = tuple(f.name for f in dataclasses.fields(BuildOptions))
PATH_OPTIONS = ("core", "table", "drake_vtk")
LIST_OPTIONS = ("bonded", "insulated")


def _tangential_metadata(options: BuildOptions) -> dict[str, Any]:
    """``{"tangential": {"stiffness": K̄, "damping": C̄}}`` when either was given (D 6.2.3), else
    nothing (assets without it use the runtime's defaults)."""
    if options.tangential_stiffness is None and options.tangential_damping is None:
        return {}
    from fieldgen.runtime.contact.geometries import DEFAULT_TANGENTIAL_DAMPING, DEFAULT_TANGENTIAL_STIFFNESS

    k = DEFAULT_TANGENTIAL_STIFFNESS if options.tangential_stiffness is None else options.tangential_stiffness
    c = DEFAULT_TANGENTIAL_DAMPING if options.tangential_damping is None else options.tangential_damping
    return {"tangential": {"stiffness": float(k), "damping": float(c)}}


def options_from_mapping(values: Mapping[str, Any], *, base_dir: str | os.PathLike | None = None,
                         origin: str = "options", base: BuildOptions | None = None) -> BuildOptions:
    """Merge ``values`` (flag names with underscores) over ``base``; resolve paths against ``base_dir``.

    Unknown keys and wrongly typed values raise OptionError naming ``origin``.
    """
    merged = dataclasses.asdict(base or BuildOptions())
    from fieldgen.tables import check_keys

    check_keys(values, OPTION_NAMES, path=origin, noun="option")
    for key, value in values.items():
        merged[key] = _coerce(key, value, origin, base_dir)
    return BuildOptions(**merged)


def _coerce(key: str, value: Any, origin: str, base_dir) -> Any:
    default = getattr(BuildOptions(), key)
    if key in LIST_OPTIONS:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise OptionError(f"option {key!r} must be a list of selector strings, got {value!r}", path=origin,
                              fix='write e.g. bonded = ["normal:0,0,-1"]')
        return tuple(value)
    if key in PATH_OPTIONS:
        if value is None:
            return None
        if not isinstance(value, str):
            raise OptionError(f"option {key!r} must be a path string, got {value!r}", path=origin, fix="quote the path")
        return str(Path(base_dir) / value) if base_dir is not None and not os.path.isabs(value) else value
    if key in ("robust", "estimate"):
        if not isinstance(value, bool):
            raise OptionError(f"option {key!r} must be true or false, got {value!r}", path=origin,
                              fix=f"write {key} = true")
        return value
    if key == "threads":
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise OptionError(f"option 'threads' must be a whole number, got {value!r}", path=origin,
                              fix="write e.g. threads = 2")
        return value
    if key in ("units", "law", "skin_mesh"):
        if value is not None and not isinstance(value, str):
            raise OptionError(f"option {key!r} must be a string, got {value!r}", path=origin, fix='write e.g. units = "mm"')
        return value
    # numbers
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise OptionError(f"option {key!r} must be a number, got {value!r}", path=origin,
                              fix="write a plain number, e.g. 1e5") from None
    return float(value) if default is None or isinstance(default, float) else value


def read_spec(path: str | os.PathLike) -> tuple[dict[str, Any], Path]:
    """Read a build spec (TOML); return its table and its folder. InputError if unreadable."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise InputError("spec file not found", path=str(path), fix="check the path given to --spec") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML ({exc})", path=str(path), fix="fix the syntax of the spec file") from None
    return data, path.parent


def options_from_spec(path: str | os.PathLike, base: BuildOptions | None = None) -> tuple[BuildOptions, str | None, str | None]:
    """Options from a spec file, plus its optional ``input`` and ``output`` paths (resolved)."""
    data, folder = read_spec(path)
    data = dict(data)
    extra = {}
    for key in ("input", "output"):
        value = data.pop(key, None)
        if value is not None:
            extra[key] = str(folder / value) if not os.path.isabs(value) else value
    options = options_from_mapping(data, base_dir=folder, origin=str(path), base=base)
    return options, extra.get("input"), extra.get("output")


# ------------------------------------------------------------------ the build

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


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def default_output(input_path: str | os.PathLike) -> str:
    """``<stem>.vtu`` in the current folder (inputs may live in read-only places)."""
    return Path(input_path).stem + ".vtu"


def make_law(options: BuildOptions):
    """The modulus law p0 = M(e)·e the options describe (D 5.1.2)."""
    from fieldgen.material import modulus as modulus

    kind = options.resolved_law()
    if kind == "linear":
        return modulus.linear_law(options.modulus)
    if kind == "hyperbolic":
        return modulus.hyperbolic_law(options.modulus, options.k)
    return modulus.table_law(options.table)


@dataclass(frozen=True)
class MeshedPart:
    """What the front stages of ``fieldgen build`` give (:func:`mesh_part`): the surface and its
    boundary conditions, the mesh the extent is solved on (after the skin cut and the zero-tet
    refinement), and, when the mesh was sized by accuracy, the extent and its error estimate."""

    surface: Any                # fieldgen.surface.stage.Surface, in m
    core: Any                   # the core's Surface, or None
    markers: np.ndarray         # condition of each surface face
    mesh: Any                   # TetMesh
    skin: Any                   # SkinResult or None
    split: int                  # tets split by the zero-pressure refinement
    solution: Any               # ExtentSolution, or None when not solved yet
    estimate: Any               # ErrorEstimate (accuracy sizing) or None
    mesher: dict               # the mesher's parameters; "sizing" holds the accuracy sizing's passes
    law: Any                    # the law the sizing estimated the pressure error for
    warnings: list


def mesh_part(input_path: str | os.PathLike, options: BuildOptions, *, law,
              progress: Progress | None = None) -> MeshedPart:
    """The front stages of ``fieldgen build`` (docs/model.md §2): load the surface (and core),
    assign the boundary conditions, mesh with TetGen (or fTetWild with ``robust``), sized by
    ``accuracy`` unless a size is given, cut the skin and refine the zero-pressure tets.
    ``options`` are checked by the caller; ``law`` serves the accuracy sizing's pressure estimate
    (the options' own law in a build). ``fieldgen calibrate`` meshes with this too, so the asset
    it writes is built on the mesh it fitted."""
    from fieldgen.meshing.tetmesh import FREE
    from fieldgen.surface.selectors import assign_conditions, parse_selector
    from fieldgen.surface.stage import UNIT_SCALE, check_core_inside, load_surface
    from fieldgen.meshing.tetgen import MeshingOptions, refine_zero_tets, tetrahedralize

    progress = progress or Progress(enabled=False)
    input_path = str(input_path)
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
    for repair in surface.repairs:
        progress.message(f"repaired {input_path}: {repair}")

    edge_length = None if options.edge_length is None else options.edge_length * scale
    # With --robust too (fTetWild's mesh is the first pass, refined locally), except under a skin.
    by_accuracy = options.sized_by_accuracy
    if options.skin is not None and not by_accuracy:
        # The cut at depth = skin needs tets smaller than the skin: min(user's, skin/2).
        edge_length = min(edge_length or math.inf, 0.5 * options.skin * scale)
    meshing = MeshingOptions(
        max_volume=None if options.max_volume is None else options.max_volume * scale**3,
        edge_length=edge_length,
        radius_edge=options.radius_edge,
    )
    mesher: dict[str, Any] = {"mesher": "TetGen", "switches": meshing.switches()}
    # TetGen keeps the input's FREE faces in place, so the skin's depth is measured from them;
    # fTetWild moves them, so there from its own.
    exposed = None if options.robust else (surface.vertices, surface.faces[markers == FREE])

    made: list[tuple[Any, Any]] = []    # each mesh (TetMesh) make_mesh returned, with its TetGen switches

    def make_mesh(sized_edge=None, background=None, cut=True, stretch=None):
        """TetGen (or fTetWild), the skin cut and the zero-pressure refinement: the mesh the extent
        is solved on, the whole part's mesh before the skin cut, the skin and the split count.
        ``sized_edge`` (m), ``background`` (a size field) and ``stretch`` ((axis, factor): a
        plate's anisotropic first mesh) come from the accuracy sizing."""
        meshing_now = meshing if sized_edge is None else dataclasses.replace(meshing, edge_length=sized_edge)
        if stretch is not None:
            meshing_now = dataclasses.replace(meshing_now, stretch_axis=stretch[0], stretch=stretch[1])
        if sized_edge is not None or background is not None:
            mesher["switches"] = meshing_now.switches()[:-1] + ("mQ" if background is not None else "Q")
        with progress.stage("tetrahedralize"):
            if options.robust:
                from fieldgen.meshing.ftetwild import RobustOptions, default_threads, robust_tetrahedralize

                whole, parameters = robust_tetrahedralize(
                    surface.vertices, surface.faces, markers,
                    RobustOptions(edge_length=_robust_edge_length(meshing_now), threads=default_threads() if options.threads is None else int(options.threads)),
                    path=input_path, progress=progress)
                mesher.clear()
                mesher.update(parameters)
            else:
                whole = tetrahedralize(
                    surface.vertices, surface.faces, markers,
                    core_vertices=None if core is None else core.vertices,
                    core_faces=None if core is None else core.faces,
                    options=meshing_now, while_waiting=warm_imports, background=background,
                )
        skin_cut = None
        part = whole
        if not cut:
            return part, whole, None, 0
        if options.skin is not None:
            from fieldgen.skin.cut import cut_skin

            with progress.stage("skin"):
                skin_cut = cut_skin(whole, options.skin * scale, free_surface=exposed, path=input_path,
                                    units=options.units, scale=scale)
                part = skin_cut.mesh
        with progress.stage("refine"):
            part, count = refine_zero_tets(part, path=input_path)
        made.append((part, mesher.get("switches")))
        return part, whole, skin_cut, count

    def make_band():
        """The skin as a layer band over the rounded interior (docs/model.md §2.4): its mesh after
        the zero-pressure refinement, what describes its skin (:class:`fieldgen.skin.band.BandSkin`),
        and the split count."""
        from fieldgen.skin.band import (OUTER_EDGE, OUTER_RADIUS_EDGE, BandError, BandSkin, aligned_columns, band_heights,
                           band_skin, check_size, interior_triangles)
        from fieldgen.skin.interior import rounded_interior
        from fieldgen.material.layering import balanced_levels
        from fieldgen.meshing.tetgen import refine_zero_tets

        thickness = options.skin * scale
        tolerance = options.layer_tolerance_for(law)
        heights = band_heights(balanced_levels(law, tolerance), thickness)
        check_size(surface.area, thickness, heights)
        try:
            with progress.stage("interior"):
                interior = rounded_interior(surface.vertices, surface.faces, thickness,
                                            max_triangles=interior_triangles(heights))
            # Coarser outside when the interior's surface is (a thin skin over a large part), not
            # finer when its thin walls needed finer triangles: TetGen grades from those itself.
            outer_edge = OUTER_EDGE * thickness * max(interior.coarser, 1.0)
            with progress.stage("band"):
                band = band_skin(surface.vertices, surface.faces, markers, interior, heights, outer_edge=outer_edge)
        except (ValueError, ArithmeticError, IndexError, MemoryError) as error:
            # Geometry the band's steps were not made for (numpy, rtree, MMG): the cut instead.
            raise BandError(f"{type(error).__name__}: {error}",
                            fix="report the part; the build cut the skin instead") from error
        mesher["switches"] = dataclasses.replace(meshing, edge_length=outer_edge,
                                                 radius_edge=OUTER_RADIUS_EDGE).switches()
        mesher["band"] = {"heights": [float(h) for h in heights], "rounding": float(interior.rounding),
                          "interior_triangles": int(len(interior.faces)), "columns_lowered": band.lowered,
                          "prism_tets": band.band_tets, "outer_tets": band.outer_tets,
                          "outer_edge": float(outer_edge)}
        try:
            with progress.stage("refine"):
                part, count = refine_zero_tets(band.mesh, path=input_path)
        except FieldgenError as error:
            # e.g. a body whose interior the rounding left out (thinner than 2(T + ρ)) has no rigid
            # face in the band; the cut may keep one.
            raise BandError(error.defect, fix=error.fix) from error
        made.append((part, mesher.get("switches")))

        def align(mesh, extent):
            aligned, moved = aligned_columns(mesh, band.columns, extent, 1.0 - band.heights / thickness)
            mesher["band"]["columns_aligned"] = moved
            return aligned, moved

        return part, BandSkin(thickness=thickness, rounding=interior.rounding, outer_edge=outer_edge,
                              free_surface=exposed, part_volume=abs(float(surface.volume)),
                              max_depth=interior.max_depth), count, align

    solution = None
    estimate = None
    band_warnings: list[str] = []
    try:
        sized = None
        if by_accuracy and options.skin_meshed_by == "band":
            from fieldgen.skin.band import BandError
            from fieldgen.skin.interior import InteriorError
            from fieldgen.sizing.loops import band_by_accuracy

            try:
                sized = band_by_accuracy(make_band, law, options.sizing_accuracy, progress=progress)
            except (BandError, InteriorError) as error:
                mesher.pop("band", None)
                band_warnings.append(f"the layer band could not be made ({error.defect}); the skin was cut out of "
                                     "a whole-part mesh instead (as --skin-mesh cut)")
        if sized is not None:
            mesh, skin, split, solution, estimate = sized.mesh, sized.skin, sized.split, sized.solution, sized.estimate
            mesher["sizing"] = sized.report()
            kept = mesher["sizing"]["passes"][mesher["sizing"]["kept_pass"] - 1]
            if "band" in mesher and not kept.get("aligned", True):
                mesher["band"].pop("columns_aligned", None)     # the kept mesh's columns were not moved
        elif by_accuracy:
            from fieldgen.sizing.loops import mesh_by_accuracy, plate_axis

            first_edge = None
            if options.robust:
                # fTetWild's own default edge: the surface's volume (which sets TetGen's first
                # edge) means little for open or self-overlapping input, and no plate stretch.
                from fieldgen.meshing.ftetwild import RobustOptions

                diagonal = float(np.linalg.norm(np.ptp(surface.vertices, axis=0)))
                first_edge = RobustOptions().resolved(diagonal)[0]
            sized = mesh_by_accuracy(make_mesh, law, options.sizing_accuracy, abs(surface.volume),
                                     progress=progress,
                                     skin=None if options.skin is None else options.skin * scale,
                                     free_surface=exposed, first_edge=first_edge,
                                     plate=None if options.skin is not None or options.robust
                                     else plate_axis(surface.vertices, surface.faces))
            mesh, skin, split, solution, estimate = sized.mesh, sized.skin, sized.split, sized.solution, sized.estimate
            kept = [switches for part, switches in made if part is mesh and switches is not None]
            if kept:
                mesher["switches"] = kept[0]   # the kept pass's, not the last mesh made
            mesher["sizing"] = sized.report()
        else:
            mesh, _, skin, split = make_mesh()
    except FieldgenError as error:
        if error.path is None:     # the mesher's and the sizing's errors name no file themselves
            error.path = input_path
        raise
    warnings: list[str] = list(band_warnings)
    if options.robust:
        from fieldgen.meshing.ftetwild import NONDETERMINISTIC_WARNING

        warnings.append(NONDETERMINISTIC_WARNING)
    return MeshedPart(surface=surface, core=core, markers=markers, mesh=mesh, skin=skin, split=int(split),
                      solution=solution, estimate=estimate, mesher=mesher,
                      law=law, warnings=warnings)


def build(input_path: str | os.PathLike, output_path: str | os.PathLike | None = None,
          options: BuildOptions | None = None, *, progress: Progress | None = None,
          extra_metadata: Mapping[str, Any] | None = None, meshed: "MeshedPart | None" = None) -> BuildResult:
    """Build a pressure-field asset from a surface mesh; raise FieldgenError on failure.

    Nothing is written unless every stage succeeds (the asset is written atomically).
    ``meshed``: the front stages already run (:func:`mesh_part`) with these ``options`` except
    perhaps the law; the asset is then built on that very mesh.
    """
    from fieldgen.io.asset import Asset, atomic_output, prepare_output, write_asset
    from fieldgen.io.asset import mesh_statistics as asset_mesh_statistics
    from concurrent.futures import ThreadPoolExecutor

    from fieldgen.meshing.tetmesh import boundary_faces_of, p1_gradients
    from fieldgen.material.damping import characteristic_length, dissipation_from_expansion_rate
    from fieldgen.fe.extent import solve_extent
    from fieldgen.material.layering import layer
    from fieldgen.material.modulus import same_shape
    from fieldgen.sizing.loops import accuracy_warning
    from fieldgen.skin.cut import skin_warnings
    from fieldgen.validate import BuiltGeometry, validate_asset

    options = (options or BuildOptions()).checked()
    progress = progress or Progress(enabled=False)
    input_path = str(input_path)
    output_path = str(output_path or default_output(input_path))
    if not output_path.endswith(".vtu"):
        raise OptionError(f"output {output_path!r} does not end in .vtu", fix="name the asset FILE.vtu")
    prepare_output(output_path)                   # before the work, not after it
    if options.drake_vtk is not None:
        prepare_output(options.drake_vtk)
    law = make_law(options)

    if meshed is None:
        meshed = mesh_part(input_path, options, progress=progress, law=law)
    elif meshed.estimate is not None and not same_shape(meshed.law, law):
        # The mesh was sized for another law (calibrate fits the law after meshing): the field's
        # errors are the same, the pressure's is measured again for this law (its relative error
        # does not change with the law's scale).
        from fieldgen.sizing.loops import estimate_error

        with progress.stage("error estimate"):
            estimate = estimate_error(meshed.mesh, meshed.solution.extent, law)
        # The passes' pressure errors stay those of the law the mesh was sized for: say which.
        sized_for = {**meshed.mesher["sizing"], "law": meshed.law.to_metadata()}
        meshed = dataclasses.replace(meshed, law=law, estimate=estimate, mesher={**meshed.mesher, "sizing": sized_for})
    surface, core, markers = meshed.surface, meshed.core, meshed.markers
    mesh, skin, split, solution, estimate = meshed.mesh, meshed.skin, meshed.split, meshed.solution, meshed.estimate
    mesher = dict(meshed.mesher)
    sizing_report = mesher.get("sizing")
    warnings: list[str] = list(meshed.warnings)
    if estimate is not None:
        warnings.extend(accuracy_warning(estimate, options.sizing_accuracy, sizing_report, mesh.n_tets))

    if skin is not None:
        warnings.extend(skin_warnings(skin, options.units))
        progress.message(f"skin {options.skin:g} {options.units}: {100 * skin.volume_fraction:.1f}% of the "
                         f"volume is skin, the rest is a rigid interior ({skin.rigid_faces} faces at e = 1, "
                         f"{skin.cut_depth[0]:.3g}-{skin.cut_depth[1]:.3g} x the skin deep)")
    if split:
        progress.message(f"split {split} tets whose four vertices were all on the e = 0 surface")

    # Pure numpy work on a second thread (numpy and vtk's writer release the GIL; the results
    # are the same whichever thread computes them): the mesh quality (volumes, dihedral angles,
    # statistics) and the gradients' mesh geometry overlap the extent solve when layering will
    # not cut (a linear law), else the quality overlaps damping; the boundary faces the
    # validation needs overlap damping and the write.
    pool = ThreadPoolExecutor(max_workers=1)
    early = pool.submit(_quality, mesh, True) if law.kind == "linear" else None
    if solution is None:
        with progress.stage("extent"):
            solution = solve_extent(mesh)
    asked = options.sizing_accuracy if estimate is not None else options.accuracy
    if estimate is None and options.estimate:
        # A mesh of a given size (or fTetWild's), estimated on request as the sizing estimates
        # its passes (docs/model.md §2.10): the extent solved again on the mesh refined 1:8.
        from fieldgen.sizing.loops import estimate_error

        with progress.stage("error estimate"):
            estimate = estimate_error(mesh, solution.extent, law)
        if asked is not None:
            sized_by = "size" if options.edge_length is not None or options.max_volume is not None else "skin"
            warnings.extend(accuracy_warning(estimate, asked, None, mesh.n_tets, sized_by=sized_by))
    if solution.max_violation > 0:   # not expected: the solve upwinds until the bounds hold
        warnings.append(f"discrete maximum principle violated by {solution.max_violation:.3g} "
                        "(extent clipped to [0, 1]); a finer or better-shaped mesh reduces it")

    with progress.stage("layering"):
        layered = layer(mesh, solution.extent, law, options.layer_tolerance)

    tolerance = options.layer_tolerance_for(law)
    if layered.max_interpolation_error > tolerance:
        warnings.append(f"measured interpolation error {layered.max_interpolation_error:.4g} Pa exceeds the "
                        f"layer tolerance {tolerance:.4g} Pa; a smaller --edge-length reduces it")

    with progress.stage("damping"):
        # Volumes and the P1 gradients of pressure and extent once, for damping, the asset's
        # pressure_gradient, the statistics and the validation of the written file. The early
        # quality is used only when layering returned the very arrays it was computed for.
        quality = early if early is not None and _same_arrays(layered.mesh, mesh) else pool.submit(_quality, layered.mesh)
        # The validation's boundary faces, from the tets alone, on the second thread meanwhile.
        faces = pool.submit(boundary_faces_of, layered.mesh.tets)
        pool.shutdown(wait=False)
        # The early quality brings the gradients' mesh geometry (computed during the solve).
        geometry = quality.result()[3] if quality is early else None
        gradients = p1_gradients(layered.mesh.points, layered.mesh.tets,
                                 np.column_stack([layered.pressure, layered.extent]), geometry=geometry)
        volumes, angles, stats, _ = quality.result()
        del early, quality, geometry      # the geometry (~80 bytes a tet) is not needed past here
        length = characteristic_length(layered.mesh.points, layered.mesh.tets, layered.extent,
                                       volumes=volumes, extent_gradient=gradients[:, :, 1])
        if options.expansion_rate is not None:
            chi = dissipation_from_expansion_rate(length, options.expansion_rate)
        elif options.dissipation is not None:
            chi = float(options.dissipation)
        else:
            chi = 0.0
            warnings.append("no damping given (--expansion-rate or --dissipation): dissipation is 0")

    stats.update({
        "tets_before_layering": mesh.n_tets,
        "tets_added_by_layering": int(layered.tets_added),
        "tets_split_zero_pressure": int(split),
        "layer_levels": int(len(layered.levels)),
    })
    metadata: dict[str, Any] = {
        "schema": "fieldgen.pressure_field/1",
        "units": {"length": "m", "extent": "1", "pressure": "Pa", "pressure_gradient": "Pa/m",
                  "characteristic_length": "m", "dissipation": "s/m", "expansion_rate": "1/s",
                  "modulus": "Pa", "min_dihedral_angle": "deg", "max_interpolation_error": "Pa"},
        "law": law.to_metadata(),
        "characteristic_length": float(length),
        "dissipation": float(chi),
        "friction": {"static": float(options.mu_static), "dynamic": float(options.mu_dynamic)},
        **_tangential_metadata(options),
        "boundary": boundary_description(options, surface, core, markers),
        "extent_solution": {"problem": solution.problem, "solver": solution.solver,
                            "iterations": int(solution.iterations),
                            "relative_residual": float(solution.relative_residual),
                            "max_violation": float(solution.max_violation),
                            "rounds": int(solution.rounds),
                            "upwinded_edges": int(solution.upwinded_edges),
                            "positive_edges": int(solution.positive_edges),
                            "rounding": float(solution.rounding)},
        "layer_tolerance": float(tolerance),
        "max_interpolation_error": float(layered.max_interpolation_error),
        "mesh": stats,
        "source": {"file": Path(input_path).name, "sha256": surface.sha256, "units": options.units,
                   "repairs": list(surface.repairs)},
        "tool": {"name": "fieldgen", "version": __version__},
        "deterministic": not options.robust,  # fTetWild's output differs from run to run
        "mesher": mesher,
    }
    if "tangential" in metadata:      # D 6.2.3: units of the friction spring's material constants
        metadata["units"].update({"tangential_stiffness": "1/m", "tangential_damping": "s/m"})
    if skin is not None:
        metadata["skin"] = skin_description(skin)
        metadata["boundary"]["problem"] = "laplace"  # the interior under the skin is rigid, e = 1
    if options.expansion_rate is not None:
        metadata["expansion_rate"] = float(options.expansion_rate)
    if estimate is not None:
        metadata["error_estimate"] = {**estimate.to_metadata(), **({"accuracy": asked} if asked is not None else {})}
        metadata["units"]["error_estimate"] = "1 (relative)"
    if extra_metadata:
        metadata.update(extra_metadata)
    if options.drake_vtk is not None:
        from fieldgen.io.drake_vtk import drake_warnings

        # What the Drake export cannot carry follows from the metadata alone.
        warnings.extend(drake_warnings(metadata))
    # What the build warned of, so a later look (a cached batch item, inspect) still says it.
    metadata["warnings"] = list(warnings)

    asset = Asset(points=layered.mesh.points, tets=layered.mesh.tets, extent=layered.extent,
                  pressure=layered.pressure, metadata=metadata, min_dihedral_angle=angles,
                  pressure_gradient=gradients[:, :, 0])
    asset_statistics = asset_mesh_statistics(
        layered.mesh.points, layered.mesh.tets, angles, volumes=volumes,
        n_boundary_faces=len(layered.mesh.boundary_faces))   # the validation recounts from the file
    built = BuiltGeometry(points=layered.mesh.points, tets=layered.mesh.tets,
                          pressure=layered.pressure, extent=layered.extent, volumes=volumes,
                          min_dihedral_angle=angles, gradients=gradients)
    # All or nothing: the asset is validated (and the Drake files written) while it is still a
    # temporary file; only then is it renamed onto the output path.
    drake = None
    with atomic_output(output_path) as temporary:
        with progress.stage("write"):
            write_asset(temporary, asset, statistics=asset_statistics)
            built.boundary_faces = faces.result()
        with progress.stage("validate"):
            report = validate_asset(temporary, built=built)
        if not report.ok:
            failed = "; ".join(f"{c.name}: {c.detail}" for c in report.checks if not c.ok)
            raise FieldgenError(f"the built asset failed validation ({failed})", path=input_path,
                                fix="this is a fieldgen bug; please report it with the input file")
        if options.drake_vtk is not None:
            from fieldgen.io.drake_vtk import write_drake_files

            with progress.stage("drake"):
                # Drake computes its own linear field from the geometry, so it gets the mesh
                # before layering: the layer cuts serve only our nonlinear law and leave tets too
                # small for Drake's absolute volume test.
                unlayered = Asset(points=mesh.points, tets=mesh.tets, extent=solution.extent,
                                  pressure=law.pressure(solution.extent), metadata=metadata)
                drake = write_drake_files(unlayered, options.drake_vtk)

    return BuildResult(
        output=output_path, tets=layered.mesh.n_tets, vertices=layered.mesh.n_points,
        characteristic_length=float(length), dissipation=float(chi),
        max_interpolation_error=float(layered.max_interpolation_error),
        stage_seconds={k: round(v, 6) for k, v in progress.stage_seconds.items()},
        volume=float(stats.get("volume", 0.0)), pressure_max=float(np.max(layered.pressure)),
        repairs=list(surface.repairs), warnings=warnings,
        extra={"layer_levels": int(len(layered.levels)), "tets_added_by_layering": int(layered.tets_added),
               "law": law.kind,
               "deterministic": not options.robust,
               **({"error_estimate": metadata["error_estimate"]} if estimate is not None else {}),
               **({"sizing": sizing_report} if sizing_report is not None else {}),
               **({"skin_volume_fraction": float(skin.volume_fraction)} if skin is not None else {}),
               **({"drake": drake} if drake is not None else {})},
    )


def _same_arrays(a, b) -> bool:
    """True when two TetMeshes hold the very same array objects (identity, not equality)."""
    return all(getattr(a, name) is getattr(b, name)
               for name in ("points", "tets", "boundary_faces", "boundary_markers"))


def _quality(mesh, geometry: bool = False):
    """Signed tet volumes, smallest dihedral angles and the mesh statistics (shared by damping,
    the asset's cell data, its metadata and the validation); with ``geometry`` also the mesh's
    :func:`~fieldgen.meshing.tetmesh.p1_geometry` for the gradients (else None)."""
    from fieldgen.meshing.tetmesh import min_dihedral_angles, p1_geometry, tet_volumes
    from fieldgen.meshing.tetgen import mesh_statistics

    shared = p1_geometry(mesh.points, mesh.tets) if geometry else None
    # det / 6 is tet_volumes to the bit (the same products in the same order).
    volumes = tet_volumes(mesh.points, mesh.tets) if shared is None else shared[3] / 6.0
    angles = min_dihedral_angles(mesh.points, mesh.tets)
    return volumes, angles, mesh_statistics(mesh, min_dihedral=angles, volumes=volumes), shared


def warm_imports() -> None:
    """Import what the stages after TetGen use (vtk, pyamg, scipy.sparse, scikit-fem: ~0.5-0.8 s),
    run while TetGen works in its own process. Imports only: no state besides ``sys.modules``."""
    import pyamg  # noqa: F401
    import scipy.sparse  # noqa: F401
    import scipy.sparse.linalg  # noqa: F401
    import skfem  # noqa: F401
    import vtkmodules.util.numpy_support  # noqa: F401
    import vtkmodules.vtkCommonDataModel  # noqa: F401
    import vtkmodules.vtkIOXML  # noqa: F401
    import threadpoolctl  # noqa: F401

    from fieldgen.material import modulus  # noqa: F401


def _robust_edge_length(meshing) -> float | None:
    """fTetWild's target edge length (m) from the TetGen size bounds: a regular tet of the volume bound."""
    volume = meshing.volume_bound()
    return None if volume is None else float((6.0 * math.sqrt(2.0) * volume) ** (1.0 / 3.0))


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
    from fieldgen.meshing.tetmesh import FREE, INSULATED, RIGID

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


def report_json(result: BuildResult) -> str:
    return json.dumps(result.to_dict(), indent=2, sort_keys=True)
