"""The checks :func:`fieldgen.validate.validate_asset` runs on an asset, in order (``CHECKS``),
and what they share: the raw file and what earlier checks established (:class:`CheckState`).

Each check returns what it found, raises ValueError naming what is wrong (:class:`NotFinite` when
what it measured is NaN or infinite), or :class:`CheckSkipped` when something it needs failed
earlier (docs/model.md §2; D 5.0.1, 5.1, 5.2.1).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from fieldgen.errors import FieldgenError
from fieldgen.io.asset import (CELL_ARRAYS, FIELD_NUMBERS, METADATA_ARRAY, POINT_ARRAYS, SCHEMA,
                               UNITS, VTK_TETRA, RawVtu)
from fieldgen.material.damping import MAX_DISSIPATION
from fieldgen.material.modulus import law_from_metadata
from fieldgen.meshing.tetmesh import boundary_faces_of as boundary_faces
from fieldgen.meshing.tetmesh import min_dihedral_angles, p1_gradients, tet_volumes
from fieldgen.options import LARGEST_SIZE, MAX_TANGENTIAL_STIFFNESS
from fieldgen.validate_metadata import CheckSkipped, metadata_number, schema_problems

GRADIENT_RTOL = 1e-6          # of max |grad p| (the contract)
LENGTH_RTOL = 1e-6            # characteristic length and dissipation (the contract)
ANGLE_ATOL = 1e-6             # degrees
LAW_RTOL = 1e-9               # of max pressure: the builder applies the same law to the same e
#: The least 6V/l³ of a tet (volume V, longest edge l; regular: 1/√2; the demo's layered assets: 4e-7): below,
#: it is flat to within rounding (~1e4 float64 epsilons of l³): its P1 gradients and forces are noise.
FLAT_TET = 1e-12


@dataclass
class BuiltGeometry:
    """Per-tet quantities the builder computed from the arrays it wrote (one build, passed
    explicitly): validate uses them only for a file whose points, tets, pressure and extent are
    bit-identical to these, where recomputing would give the same bits (same functions). Every
    stored array is still compared with them, so writer bugs are caught; boundary faces are
    taken from ``boundary_faces`` (``boundary_faces_of(tets)``) when given, else recomputed.
    """

    points: np.ndarray
    tets: np.ndarray
    pressure: np.ndarray
    extent: np.ndarray
    volumes: np.ndarray             # tet_volumes(points, tets)
    min_dihedral_angle: np.ndarray  # min_dihedral_angles(points, tets)
    gradients: np.ndarray           # p1_gradients(points, tets, column_stack([pressure, extent]))
    boundary_faces: np.ndarray | None = None   # boundary_faces_of(tets)


class NotFinite(ValueError):
    """What a check measured is NaN or infinite (the asset's numbers overflow float64, or a 0/0):
    the check fails on it, where a comparison with NaN or inf could pass (docs/model.md §2)."""


def finite(values, what: str) -> np.ndarray:
    """``values`` as float64 when every one is finite; else :class:`NotFinite` counting them."""
    values = np.asarray(values, dtype=np.float64)
    bad = int(np.count_nonzero(~np.isfinite(values)))
    if bad:
        raise NotFinite(f"{what} is NaN or infinite ({bad} of {values.size} values; the asset's numbers "
                        "overflow float64)")
    return values


@dataclass
class CheckState:
    """What the checks share: the raw file and what earlier checks established."""

    path: str
    raw: RawVtu
    metadata: dict | None = None
    tets: np.ndarray | None = None
    arrays_ok: bool = False
    finite_ok: bool = False
    volumes: np.ndarray | None = None
    built: BuiltGeometry | None = None
    _cache: dict = field(default_factory=dict)

    def cached(self, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """Geometry shared by several checks, computed once (or the builder's, see BuiltGeometry)."""
        if key not in self._cache:
            known = {"angles": "min_dihedral_angle", "gradients": "gradients", "volumes": "volumes",
                     "boundary_faces": "boundary_faces"}
            if key in known and getattr(self.built, known[key], None) is not None and self._matches_built():
                self._cache[key] = getattr(self.built, known[key])
            else:
                self._cache[key] = compute()
        return self._cache[key]

    def _matches_built(self) -> bool:
        """True when the file's points, tets, pressure and extent equal the builder's bit for bit."""
        if "matches_built" not in self._cache:
            b, raw = self.built, self.raw
            self._cache["matches_built"] = bool(
                b is not None and self.tets is not None
                and np.array_equal(raw.points, b.points) and np.array_equal(self.tets, b.tets)
                and all(isinstance(raw.point_data.get(k), np.ndarray)
                        and raw.point_data[k].shape == v.shape and np.array_equal(raw.point_data[k], v)
                        for k, v in (("pressure", b.pressure), ("extent", b.extent))))
        return self._cache["matches_built"]

    def boundary_faces(self) -> np.ndarray:
        return self.cached("boundary_faces", lambda: boundary_faces(self.need_tets()))

    def dihedral_angles(self) -> np.ndarray:
        return self.cached("angles", lambda: min_dihedral_angles(self.raw.points, self.need_tets()))

    def gradients(self) -> tuple[np.ndarray, np.ndarray]:
        """Gradients (t, 3) of the P1 pressure and extent, computed together once."""
        both = self.cached("gradients", lambda: p1_gradients(
            self.raw.points, self.need_tets(),
            np.column_stack([self.array("pressure"), self.array("extent")])))
        return both[:, :, 0], both[:, :, 1]

    def need_metadata(self) -> dict:
        if self.metadata is None:
            raise CheckSkipped("needs the metadata")
        return self.metadata

    def need_tets(self) -> np.ndarray:
        if self.tets is None:
            raise CheckSkipped("needs a tetrahedra-only mesh")
        return self.tets

    def need_arrays(self) -> None:
        if not (self.arrays_ok and self.finite_ok):
            raise CheckSkipped("needs the arrays present and finite")

    def array(self, name: str) -> np.ndarray:
        data = self.raw.point_data if name in POINT_ARRAYS else self.raw.cell_data
        return np.asarray(data[name], dtype=np.float64)


# --------------------------------------------------------------------------- checks

def check_metadata(s: CheckState) -> str:
    """The JSON string ``fieldgen_metadata`` is present and is a JSON object."""
    text = s.raw.field_data.get(METADATA_ARRAY)
    if text is None:
        raise ValueError(f"no field-data array {METADATA_ARRAY!r}: not a fieldgen asset "
                         "(rebuild it with fieldgen build)")
    if not isinstance(text, list) or len(text) != 1:
        raise ValueError(f"{METADATA_ARRAY} is not one string")
    try:
        metadata = json.loads(text[0])
    except (ValueError, RecursionError) as error:      # RecursionError: arrays nested thousands deep
        raise ValueError(f"{METADATA_ARRAY} ({len(text[0])} characters) is not JSON: {error}") from None
    if not isinstance(metadata, dict):
        raise ValueError(f"{METADATA_ARRAY} is a JSON {type(metadata).__name__}, not an object")
    s.metadata = metadata
    return f"{len(text[0])} characters of JSON"


def check_schema(s: CheckState) -> str:
    """Schema name, required keys and their shapes, nested too, and units for every array
    (:func:`fieldgen.validate_metadata.schema_problems`, whose shapes ``fieldgen inspect`` refuses)."""
    meta = s.need_metadata()
    problems = schema_problems(meta)
    if problems:
        raise ValueError("; ".join(problems))
    return f"schema {SCHEMA}, {len(meta)} keys"


def check_arrays(s: CheckState) -> str:
    """Point/cell/field arrays named and shaped as contracted; pressure is the active scalars."""
    raw = s.raw
    n, c = len(raw.points), len(raw.cell_types)
    problems = []
    for kind, specs, data, count in (("point", POINT_ARRAYS, raw.point_data, n),
                                     ("cell", CELL_ARRAYS, raw.cell_data, c)):
        for name, k in specs.items():
            array = data.get(name)
            shape = (count,) if k == 1 else (count, k)
            if array is None:
                problems.append(f"{kind} array {name!r} missing")
            elif not isinstance(array, np.ndarray) or array.shape != shape:
                problems.append(f"{kind} array {name!r} has shape {np.shape(array)}, "
                                f"expected {shape}")
    for name in FIELD_NUMBERS:
        array = raw.field_data.get(name)
        if not isinstance(array, np.ndarray) or array.size != 1:
            problems.append(f"field-data number {name!r} missing")
    if raw.active_scalars != "pressure":
        problems.append(f"active point scalars are {raw.active_scalars!r}, not 'pressure'")
    if problems:
        raise ValueError("; ".join(problems))
    s.arrays_ok = True
    return f"{n} points, {c} cells, arrays as contracted"


def check_cell_types(s: CheckState) -> str:
    """Tetrahedra only (VTK_TETRA), 4 valid vertex indices each."""
    raw = s.raw
    if len(raw.cell_types) == 0:
        raise ValueError("the mesh has no cells")
    other = raw.cell_types != VTK_TETRA
    if np.any(other):
        kinds = sorted(set(raw.cell_types[other].tolist()))
        raise ValueError(f"{int(other.sum())} of {len(other)} cells are not tetrahedra "
                         f"(VTK types {kinds}, expected only {VTK_TETRA})")
    tets = raw.tets()
    if tets is None:
        raise ValueError("cells of type tetra do not have 4 vertices each")
    if tets.min() < 0 or tets.max() >= len(raw.points):
        raise ValueError(f"vertex indices span {tets.min()}..{tets.max()} but there are "
                         f"{len(raw.points)} points")
    s.tets = tets
    return f"{len(tets)} tetrahedra"


def check_finite(s: CheckState) -> str:
    """Points, every point/cell array and the field-data numbers are finite; no coordinate is
    so large (above :data:`~fieldgen.options.LARGEST_SIZE`) that volumes overflow."""
    bad = []
    named = {"points": s.raw.points, **s.raw.point_data, **s.raw.cell_data,
             **{k: v for k, v in s.raw.field_data.items() if isinstance(v, np.ndarray)}}
    for name, values in named.items():
        count = int(np.sum(~np.isfinite(np.asarray(values, dtype=np.float64))))
        if count:
            bad.append(f"{name}: {count} non-finite of {np.size(values)}")
    points = np.asarray(s.raw.points, dtype=np.float64)
    huge = int(np.sum(np.isfinite(points) & (np.abs(points) > LARGEST_SIZE)))
    if huge:
        bad.append(f"points: {huge} coordinates above {LARGEST_SIZE:g} m in size (volumes and areas overflow)")
    if bad:
        raise ValueError("; ".join(bad))
    s.finite_ok = True
    return f"{len(named)} arrays finite"


def check_volumes(s: CheckState) -> str:
    """Every tet has positive (VTK-orientation) volume and is not flat to within rounding:
    ``6V/l³ >= FLAT_TET`` (``l`` its longest edge; a regular tet has 1/√2)."""
    tets = s.need_tets()
    volumes = finite(s.cached("volumes", lambda: tet_volumes(s.raw.points, tets)), "the tets' volumes")
    bad = np.flatnonzero(~(volumes > 0))
    if bad.size:
        worst = bad[np.argmin(volumes[bad])]
        raise ValueError(f"{bad.size} of {len(tets)} tets have volume <= 0 (smallest {volumes[worst]:.3g} m³ at tet {worst})")
    corners = np.asarray(s.raw.points, dtype=np.float64)[tets]
    edges = corners[:, [1, 2, 3, 2, 3, 3]] - corners[:, [0, 0, 0, 1, 1, 2]]
    shape = finite(6.0 * volumes / np.einsum("tek,tek->te", edges, edges).max(axis=1) ** 1.5, "6V/l³ of the tets")
    flat = np.flatnonzero(~(shape >= FLAT_TET))
    if flat.size:
        worst = flat[np.argmin(shape[flat])]
        raise ValueError(f"{flat.size} of {len(tets)} tets are flat to within rounding (6V/l³ below {FLAT_TET:g}, "
                         f"l the longest edge): tet {worst} has {shape[worst]:.3g}, its gradients are noise")
    s.volumes = volumes
    return f"all {len(tets)} volumes > 0 (smallest {volumes.min():.3g} m³; 6V/l³ >= {shape.min():.3g})"


def check_extent_range(s: CheckState) -> str:
    """0 <= e <= 1 at every vertex (D 5.1)."""
    s.need_arrays()
    e = s.array("extent")
    bad = (e < 0) | (e > 1)
    if np.any(bad):
        raise ValueError(f"{int(bad.sum())} of {e.size} vertices have extent outside [0, 1] "
                         f"(range {e.min():.6g}..{e.max():.6g})")
    return f"extent in [{e.min():.6g}, {e.max():.6g}]"


def check_pressure_sign(s: CheckState) -> str:
    """p >= 0 at every vertex."""
    s.need_arrays()
    p = s.array("pressure")
    bad = p < 0
    if np.any(bad):
        raise ValueError(f"{int(bad.sum())} of {p.size} vertices have negative pressure "
                         f"(smallest {p.min():.6g} Pa)")
    return f"pressure in [{p.min():.6g}, {p.max():.6g}] Pa"


def check_zero_pressure_surface(s: CheckState) -> str:
    """Boundary vertices with e = 0 exist (the contact surface) and have p exactly 0 (D 5.1)."""
    s.need_arrays()
    s.need_tets()
    boundary = np.unique(s.boundary_faces().ravel())
    e, p = s.array("extent"), s.array("pressure")
    surface = boundary[e[boundary] == 0.0]
    if surface.size == 0:
        raise ValueError(f"none of the {boundary.size} boundary vertices has extent 0: "
                         "there is no contact surface")
    bad = surface[p[surface] != 0.0]
    if bad.size:
        raise ValueError(f"{bad.size} of {surface.size} boundary vertices with extent 0 have "
                         f"pressure != 0 (largest |p| {np.abs(p[bad]).max():.6g} Pa at vertex "
                         f"{bad[np.argmax(np.abs(p[bad]))]})")
    return f"{surface.size} of {boundary.size} boundary vertices have e = 0 and p = 0"


def check_no_flat_zero_tets(s: CheckState) -> str:
    """No tet has e = 0 at all four vertices: its pressure would be 0 throughout, with no
    gradient, a flat wedge of the contact surface that carries no force. Such a tet lies on the
    e = 0 boundary, or holds an interior vertex cut off from the rest of the field (the builder
    splits both kinds, docs/model.md §2.2)."""
    s.need_arrays()
    tets = s.need_tets()
    e = s.array("extent")
    zero = e == 0.0
    flat = np.flatnonzero(zero[tets].all(axis=1))
    if flat.size:
        raise ValueError(f"{flat.size} of {len(tets)} tets have e = 0 at all four vertices "
                         f"(first: tet {flat[0]}, vertices {tets[flat[0]].tolist()}): zero pressure throughout; "
                         "rebuild the asset (fieldgen build splits them)")
    return f"no tet has e = 0 at all four vertices ({int(zero.sum())} vertices at e = 0)"


def check_interpolation_error(s: CheckState) -> str:
    """The layering met its tolerance: max_interpolation_error <= layer_tolerance (Pa, both >= 0)."""
    meta = s.need_metadata()
    error, tolerance = metadata_number(meta, "max_interpolation_error"), metadata_number(meta, "layer_tolerance")
    if error < 0 or tolerance <= 0:
        raise ValueError(f"max_interpolation_error {error:.6g} Pa must be >= 0 and layer_tolerance "
                         f"{tolerance:.6g} Pa > 0")
    if error > tolerance:
        raise ValueError(f"max_interpolation_error {error:.6g} Pa exceeds layer_tolerance {tolerance:.6g} Pa: "
                         "the pressure is not represented to the stated tolerance")
    return f"max interpolation error {error:.4g} Pa <= layer tolerance {tolerance:.4g} Pa"


def check_friction(s: CheckState) -> str:
    """Friction coefficients are >= 0 and the dynamic one does not exceed the static one."""
    meta = s.need_metadata()
    static, dynamic = metadata_number(meta, "friction", "static"), metadata_number(meta, "friction", "dynamic")
    if static < 0 or dynamic < 0:
        raise ValueError(f"friction static {static:g} and dynamic {dynamic:g} must be >= 0")
    if dynamic > static:
        raise ValueError(f"friction dynamic {dynamic:g} exceeds static {static:g} (mu_dynamic <= mu_static)")
    return f"mu_static {static:g} >= mu_dynamic {dynamic:g}"


def check_tangential(s: CheckState) -> str:
    """The friction spring's K̄ (1/m) and C̄ (s/m), when the asset has them, are > 0 (D 6.2.3: the
    compliant friction model divides by them) and within the bounds fieldgen build gives them."""
    meta = s.need_metadata()
    if "tangential" not in meta:
        return "not given (the defaults apply)"
    stiffness, damping = metadata_number(meta, "tangential", "stiffness"), metadata_number(meta, "tangential", "damping")
    if stiffness <= 0 or damping <= 0:
        raise ValueError(f"tangential stiffness {stiffness:g} 1/m and damping {damping:g} s/m must be > 0")
    if stiffness > MAX_TANGENTIAL_STIFFNESS or damping > MAX_DISSIPATION:
        raise ValueError(f"tangential stiffness {stiffness:g} 1/m and damping {damping:g} s/m must be at most "
                         f"{MAX_TANGENTIAL_STIFFNESS:g} 1/m and {MAX_DISSIPATION:g} s/m (fieldgen build's bounds)")
    return f"K̄ {stiffness:g} 1/m, C̄ {damping:g} s/m"


def check_pressure_gradient(s: CheckState) -> str:
    """Stored gradient = gradient of the linear interpolant of the vertex pressures (D 5.0.1)."""
    s.need_arrays()
    tets = s.need_tets()
    expected = finite(s.gradients()[0], "the gradient of the vertex pressures")
    stored = s.array("pressure_gradient")
    # Compared in units of the largest component, so the norms cannot overflow (a component of
    # 1e160 Pa/m squares past float64).
    unit = float(np.max(np.abs(expected))) or 1.0
    scale_units = float(np.max(np.linalg.norm(expected / unit, axis=1)))
    error_units = np.linalg.norm(stored / unit - expected / unit, axis=1)
    bad = np.flatnonzero(~(error_units <= GRADIENT_RTOL * scale_units))
    scale, error, tolerance = scale_units * unit, error_units * unit, GRADIENT_RTOL * scale_units * unit
    if bad.size:
        worst = bad[np.argmax(error[bad])]
        raise ValueError(f"{bad.size} of {len(tets)} tets have a pressure_gradient off by more than {tolerance:.3g} Pa/m "
                         f"({GRADIENT_RTOL:g} of max |grad p| {scale:.6g}); worst {error[worst]:.6g} Pa/m at tet {worst}")
    return f"max deviation {error.max():.3g} Pa/m (tolerance {tolerance:.3g})"


def check_min_dihedral_angle(s: CheckState) -> str:
    """Stored min_dihedral_angle matches the geometry (degrees)."""
    s.need_arrays()
    tets = s.need_tets()
    expected = finite(s.dihedral_angles(), "the tets' smallest dihedral angles")
    error = np.abs(s.array("min_dihedral_angle") - expected)
    bad = np.flatnonzero(~(error <= ANGLE_ATOL))
    if bad.size:
        worst = bad[np.argmax(error[bad])]
        raise ValueError(f"{bad.size} of {len(tets)} tets have min_dihedral_angle off by more "
                         f"than {ANGLE_ATOL:g}°; worst {error[worst]:.6g}° at tet {worst}")
    return f"min {expected.min():.4g}°, max deviation {error.max():.3g}°"


def check_characteristic_length(s: CheckState) -> str:
    """Metadata L equals V / ∫|∇e| dV recomputed from the mesh (D 5.2.1, docs/model.md §2.6)."""
    s.need_arrays()
    tets = s.need_tets()
    meta = s.need_metadata()
    stored = metadata_number(meta, "characteristic_length")
    volumes = s.volumes if s.volumes is not None else tet_volumes(s.raw.points, tets)
    gradient = finite(s.gradients()[1], "the gradient of the extent")
    weight = float(finite(np.sum(np.linalg.norm(gradient, axis=1) * np.abs(volumes)), "∫|∇e| dV"))
    if weight <= 0:
        raise ValueError("∫|∇e| dV is 0 (constant extent): L is undefined")
    length = float(finite(np.sum(np.abs(volumes)) / weight, "V/∫|∇e| dV"))
    if not math.isclose(stored, length, rel_tol=LENGTH_RTOL, abs_tol=0.0):
        raise ValueError(f"metadata characteristic_length {stored:.9g} m differs from "
                         f"V/∫|∇e|dV = {length:.9g} m (relative {abs(stored - length) / length:.3g},"
                         f" tolerance {LENGTH_RTOL:g})")
    return f"L = {length:.9g} m"


def check_mesh_statistics(s: CheckState) -> str:
    """The counts, volume and smallest angle in metadata['mesh'] match the file."""
    tets = s.need_tets()
    meta = s.need_metadata()
    mesh = meta.get("mesh")
    if not isinstance(mesh, dict):
        raise CheckSkipped("needs metadata mesh")
    actual = {"n_points": len(s.raw.points), "n_tets": len(tets),
              "n_boundary_faces": len(s.boundary_faces())}
    problems = [f"{key} is {mesh.get(key)!r}, the file has {value}"
                for key, value in actual.items() if mesh.get(key) != value]
    volume = float(finite(np.sum(s.volumes if s.volumes is not None else tet_volumes(s.raw.points, tets)),
                          "the mesh's volume"))
    stored_volume = metadata_number(meta, "mesh", "volume")
    if not math.isclose(stored_volume, volume, rel_tol=1e-9, abs_tol=0.0):
        problems.append(f"volume is {stored_volume:.9g} m³, the mesh has {volume:.9g} m³")
    if "min_dihedral_angle" in mesh:
        smallest = float(np.min(s.dihedral_angles()))
        if abs(metadata_number(meta, "mesh", "min_dihedral_angle") - smallest) > ANGLE_ATOL:
            problems.append(f"min_dihedral_angle is {mesh['min_dihedral_angle']!r}°, the mesh "
                            f"has {smallest:.9g}°")
    if problems:
        raise ValueError("; ".join(problems))
    return ", ".join(f"{k} {v}" for k, v in actual.items()) + f", volume {volume:.6g} m³"


def check_dissipation(s: CheckState) -> str:
    """dissipation >= 0, and = 1/(L·τ) when the expansion rate τ is given (D 5.2.1)."""
    meta = s.need_metadata()
    chi = metadata_number(meta, "dissipation")
    if chi < 0:
        raise ValueError(f"dissipation is {chi:.6g} s/m, negative")
    if "expansion_rate" not in meta:
        # 0: none given (the build warned) or --dissipation 0; either way the asset has no damping.
        return f"dissipation {chi:.6g} s/m ({'no damping' if chi == 0 else 'given directly'})"
    rate = metadata_number(meta, "expansion_rate")
    length = metadata_number(meta, "characteristic_length")
    if rate <= 0 or length <= 0:
        raise ValueError(f"expansion_rate {rate:.6g} 1/s and characteristic_length {length:.6g} m "
                         "must be positive")
    expected = 1.0 / (length * rate)
    if not math.isclose(chi, expected, rel_tol=LENGTH_RTOL, abs_tol=0.0):
        raise ValueError(f"dissipation {chi:.9g} s/m differs from 1/(L·τ) = {expected:.9g} s/m")
    return f"dissipation {chi:.6g} s/m = 1/(L·τ)"


def check_field_data(s: CheckState) -> str:
    """The numeric field-data arrays equal their JSON values; units labels as contracted."""
    meta = s.need_metadata()
    problems = []
    for name in FIELD_NUMBERS:
        array = s.raw.field_data.get(name)
        if not isinstance(array, np.ndarray) or array.size != 1:
            problems.append(f"{name} missing")
            continue
        json_value = metadata_number(meta, "law", "modulus") if name == "modulus" else metadata_number(meta, name)
        if float(array.ravel()[0]) != json_value:
            problems.append(f"{name} is {float(array.ravel()[0])!r} in field data but "
                            f"{json_value!r} in the metadata")
    for key, unit in s.raw.units.items():
        name = key.split(":", 1)[1]
        expected = UNITS["points"] if name == "Points" else UNITS.get(name)
        if expected is not None and unit != expected:
            problems.append(f"{key} has unit {unit!r}, expected {expected!r}")
    if problems:
        raise ValueError("; ".join(problems))
    return ", ".join(f"{n} {float(s.raw.field_data[n].ravel()[0]):.6g}" for n in FIELD_NUMBERS)


def check_pressure_law(s: CheckState) -> str:
    """Vertex pressure = the metadata's law applied to the extent, p0 = M(e)·e (D 5.1.2)."""
    s.need_arrays()
    meta = s.need_metadata()
    if not isinstance(meta.get("law"), dict):
        raise CheckSkipped("needs metadata law")
    try:
        law = law_from_metadata(meta["law"], path=s.path)
    except FieldgenError as error:
        raise ValueError(f"the law cannot be used: {error.defect}") from None
    e, p = s.array("extent"), s.array("pressure")
    expected = finite(law.pressure(e) if hasattr(law, "pressure") else law(e), "the law's pressure at the extents")
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    error = np.abs(p - expected)
    tolerance = LAW_RTOL * scale
    bad = np.flatnonzero(~(error <= tolerance))
    if bad.size:
        worst = bad[np.argmax(np.where(np.isfinite(error[bad]), error[bad], np.inf))]
        raise ValueError(f"{bad.size} of {p.size} vertices have pressure off the "
                         f"{meta['law'].get('kind')} law by more than {tolerance:.3g} Pa; worst "
                         f"vertex {worst}: p {p[worst]:.9g} Pa, law {expected[worst]:.9g} Pa "
                         f"at e {e[worst]:.9g}")
    return f"{meta['law'].get('kind')} law, max deviation {error.max():.3g} Pa"


CHECKS: tuple[tuple[str, Callable[[CheckState], str]], ...] = (
    ("metadata", check_metadata), ("schema", check_schema),
    ("arrays", check_arrays), ("cell_types", check_cell_types),
    ("finite", check_finite), ("volumes", check_volumes),
    ("extent_range", check_extent_range), ("pressure_nonnegative", check_pressure_sign),
    ("zero_pressure_surface", check_zero_pressure_surface), ("no_flat_zero_tets", check_no_flat_zero_tets),
    ("pressure_gradient", check_pressure_gradient), ("min_dihedral_angle", check_min_dihedral_angle),
    ("characteristic_length", check_characteristic_length), ("mesh_statistics", check_mesh_statistics),
    ("dissipation", check_dissipation), ("field_data", check_field_data),
    ("pressure_law", check_pressure_law), ("interpolation_error", check_interpolation_error),
    ("friction", check_friction), ("tangential", check_tangential),
)
