"""Look at an asset: a summary, cut planes coloured by pressure, a ParaView script.

The pictures show the stored field exactly: inside each tet the pressure is linear
(D 5.0.1), so its restriction to a plane is linear on each cut polygon, and Gouraud
shading of the polygon's triangles reproduces it without resampling.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fieldgen.errors import InputError
from fieldgen.io.asset import atomic_output
from fieldgen.io.paraview import asset_script, write_script
from fieldgen.meshing.tetmesh import boundary_faces_of, min_dihedral_angles, tet_volumes
from fieldgen.validate_metadata import metadata_type_problems

AXES = "xyz"
#: Percentiles of the min dihedral angle reported by :func:`summarize` (key -> percent).
QUALITY_PERCENTILES = {"min": 0.0, "p1": 1.0, "p5": 5.0, "p50": 50.0}
COLORMAP = "viridis"


# --------------------------------------------------------------------------- cutting

@dataclass
class PlaneCut:
    """A P1 field restricted to a plane (D 5.0.1): triangles with vertex values, and outline."""

    origin: np.ndarray     # (3,) a point of the plane
    normal: np.ndarray     # (3,) unit normal
    points: np.ndarray     # (k, 3) vertices of the cut triangles (on the plane)
    values: np.ndarray     # (k,) field at those vertices (exact linear interpolation)
    triangles: np.ndarray  # (m, 3) indices into points
    outline: np.ndarray    # (s, 2, 3) segments where the plane meets the boundary surface

    def area(self) -> float:
        """Total area of the cut (m²)."""
        p = self.points[self.triangles]
        return float(0.5 * np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1).sum())


def _sides(points: np.ndarray, origin, normal) -> np.ndarray:
    """Signed distances to the plane; a vertex on the plane counts as below (symbolic shift).

    Treating ``s == 0`` as negative everywhere keeps the cut a partition: a face lying in
    the plane is cut exactly once and no polygon is produced twice.
    """
    return (np.asarray(points, dtype=np.float64) - origin) @ normal


def _edge_points(points, values, s, a, b):
    """Where the plane crosses edges (a, b) with s[a] > 0 >= s[b], and the field there."""
    t = s[a] / (s[a] - s[b])
    where = points[a] + t[:, None] * (points[b] - points[a])
    value = None if values is None else values[a] + t * (values[b] - values[a])
    return where, value


def cut_tets(points: np.ndarray, tets: np.ndarray, values: np.ndarray, origin, normal):
    """Intersect every tet with the plane; return (points (k,3), values (k,), triangles (m,3)).

    A tet with one vertex on one side gives a triangle, two and two a quadrilateral
    (split in two triangles); the field is interpolated along the cut edges, so it is
    exact on the plane.
    """
    origin = np.asarray(origin, dtype=np.float64)
    normal = np.asarray(normal, dtype=np.float64)
    normal = normal / np.linalg.norm(normal)
    s = _sides(points, origin, normal)
    above = s[tets] > 0
    count = above.sum(axis=1)
    # Order each tet's vertices so those above come first (stable, so deterministic).
    order = np.argsort(~above, axis=1, kind="stable")
    v = np.take_along_axis(tets, order, axis=1)
    pieces = []
    one = v[count == 1]        # a above; b, c, d below
    if len(one):
        pieces.append(_cut_piece(points, values, s, [(one[:, 0], one[:, 1]), (one[:, 0], one[:, 2]),
                                                     (one[:, 0], one[:, 3])], [(0, 1, 2)]))
    three = v[count == 3]      # a, b, c above; d below
    if len(three):
        pieces.append(_cut_piece(points, values, s, [(three[:, 0], three[:, 3]), (three[:, 1], three[:, 3]),
                                                     (three[:, 2], three[:, 3])], [(0, 1, 2)]))
    two = v[count == 2]        # a, b above; c, d below: edges ac, ad, bd, bc go round the quad
    if len(two):
        pieces.append(_cut_piece(points, values, s, [(two[:, 0], two[:, 2]), (two[:, 0], two[:, 3]),
                                                     (two[:, 1], two[:, 3]), (two[:, 1], two[:, 2])],
                                 [(0, 1, 2), (0, 2, 3)]))
    if not pieces:
        return np.zeros((0, 3)), np.zeros(0), np.zeros((0, 3), dtype=np.int64)
    offsets = np.cumsum([0] + [len(where) for where, _, _ in pieces[:-1]])
    return (np.concatenate([where for where, _, _ in pieces]), np.concatenate([value for _, value, _ in pieces]),
            np.concatenate([tris + offset for (_, _, tris), offset in zip(pieces, offsets)]).astype(np.int64))


def _cut_piece(points, values, s, edges, triangles):
    """The cut polygons of tets that cross the plane alike: their corners on ``edges`` (pairs
    of vertex arrays), the field there, and ``triangles`` (corner indices) for each tet."""
    corners = [_edge_points(points, values, s, a, b) for a, b in edges]
    m, k = len(edges[0][0]), len(edges)
    where = np.stack([c[0] for c in corners], axis=1).reshape(-1, 3)
    value = np.stack([c[1] for c in corners], axis=1).reshape(-1)
    base = k * np.arange(m)[:, None]
    return where, value, (base[:, None, :] + np.asarray(triangles)[None]).reshape(-1, 3)


def cut_triangles(points: np.ndarray, faces: np.ndarray, origin, normal) -> np.ndarray:
    """Segments (s, 2, 3) where the plane crosses the triangles ``faces``."""
    origin = np.asarray(origin, dtype=np.float64)
    normal = np.asarray(normal, dtype=np.float64)
    normal = normal / np.linalg.norm(normal)
    s = _sides(points, origin, normal)
    above = s[faces] > 0
    count = above.sum(axis=1)
    segments = []
    for lone_above in (True, False):
        pick = count == (1 if lone_above else 2)
        f = faces[pick]
        if not len(f):
            continue
        ab = above[pick] if lone_above else ~above[pick]
        lone = np.argmax(ab, axis=1)       # the vertex alone on its side
        rows = np.arange(len(f))
        a, b, c = f[rows, lone], f[rows, (lone + 1) % 3], f[rows, (lone + 2) % 3]
        if lone_above:
            p, _ = _edge_points(points, None, s, a, b)
            q, _ = _edge_points(points, None, s, a, c)
        else:
            p, _ = _edge_points(points, None, s, b, a)
            q, _ = _edge_points(points, None, s, c, a)
        segments.append(np.stack([p, q], axis=1))
    return np.concatenate(segments) if segments else np.zeros((0, 2, 3))


def cut_plane(points: np.ndarray, tets: np.ndarray, values: np.ndarray, origin, normal,
              boundary_faces: np.ndarray | None = None) -> PlaneCut:
    """The field ``values`` on the plane through ``origin`` with ``normal``, with its outline."""
    origin = np.asarray(origin, dtype=np.float64)
    normal = np.asarray(normal, dtype=np.float64) / np.linalg.norm(normal)
    where, value, triangles = cut_tets(points, tets, values, origin, normal)
    faces = boundary_faces_of(tets) if boundary_faces is None else boundary_faces
    return PlaneCut(origin=origin, normal=normal, points=where, values=value, triangles=triangles,
                    outline=cut_triangles(points, faces, origin, normal))


def mid_planes(points: np.ndarray, tets: np.ndarray, values: np.ndarray) -> list[tuple[int, PlaneCut]]:
    """Three axis-aligned cuts through the bounding-box centre, as (axis, cut).

    An axis whose mid-plane misses the part (a hollow or ring shape) is cut through the
    median vertex coordinate instead.
    """
    low, high = points.min(axis=0), points.max(axis=0)
    centre = 0.5 * (low + high)
    faces = boundary_faces_of(tets)
    cuts = []
    for axis in range(3):
        normal = np.eye(3)[axis]
        cut = cut_plane(points, tets, values, centre, normal, faces)
        if not len(cut.triangles):
            origin = centre.copy()
            origin[axis] = np.median(points[:, axis])
            cut = cut_plane(points, tets, values, origin, normal, faces)
        cuts.append((axis, cut))
    return cuts


# --------------------------------------------------------------------------- summary

def quality_percentiles(min_dihedral_angle: np.ndarray) -> dict[str, float]:
    """Min dihedral angle (deg): minimum and 1 %, 5 %, 50 % percentiles (linear interpolation)."""
    angles = np.asarray(min_dihedral_angle, dtype=np.float64)
    return {key: float(np.percentile(angles, q)) for key, q in QUALITY_PERCENTILES.items()}


def summarize(asset, path=None) -> dict:
    """The numbers a person checks first; arrays give counts/ranges, metadata gives L, χ, law.
    InputError naming ``path`` and the key when a metadata key it shows has the wrong type (an
    edited asset: ``"law": null``, a word for a number), as ``fieldgen validate``'s schema check."""
    meta = asset.metadata
    problems = metadata_type_problems(meta, strict=False)
    if problems:
        problems = "; ".join(problem.removeprefix("metadata ") for problem in problems)
        raise InputError(f"invalid asset, its metadata is wrong: {problems}", path=path,
                         fix="build the asset again with fieldgen build")
    points, tets = asset.points, asset.tets
    with np.errstate(all="ignore"):      # coordinates that overflow: a non-finite summary, which inspect refuses
        angles = (asset.min_dihedral_angle if asset.min_dihedral_angle is not None
                  else min_dihedral_angles(points, tets))
        volume = float(np.sum(tet_volumes(points, tets)))
    law = meta.get("law", {})
    return {
        "path": None if path is None else os.path.abspath(os.fspath(path)),
        "schema": meta.get("schema"),
        "tool": meta.get("tool"),
        "tets": int(len(tets)),
        "vertices": int(len(points)),
        "boundary_faces": int(len(boundary_faces_of(tets))),
        "volume": volume,
        "bounds": [points.min(axis=0).tolist(), points.max(axis=0).tolist()],
        "characteristic_length": meta.get("characteristic_length"),
        "dissipation": meta.get("dissipation"),
        "expansion_rate": meta.get("expansion_rate"),
        "modulus": law.get("modulus"),
        "law": law,
        "friction": meta.get("friction"),
        "pressure_min": float(np.min(asset.pressure)),
        "pressure_max": float(np.max(asset.pressure)),
        "extent_min": float(np.min(asset.extent)),
        "extent_max": float(np.max(asset.extent)),
        "min_dihedral_angle_percentiles": quality_percentiles(angles),
        "max_interpolation_error": meta.get("max_interpolation_error"),
        "boundary": meta.get("boundary"),
        "source": meta.get("source"),
        "error_estimate": meta.get("error_estimate"),
        "skin": meta.get("skin"),
        "warnings": list(meta.get("warnings", [])),
    }


_PREFIXES = ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"))


def si(value, unit: str, digits: int = 4) -> str:
    """``value`` with an SI prefix, e.g. si(2.5e5, 'Pa') == '250 kPa'."""
    if value is None:
        return "—"
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


def pressure_scale(max_pressure: float) -> tuple[float, str]:
    """(divisor, unit) for a colour bar: Pa, kPa, MPa or GPa, whichever keeps numbers < 1000."""
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if max_pressure >= scale:
            return scale, f"{prefix}Pa"
    return 1.0, "Pa"


def length_scale(size: float) -> tuple[float, str]:
    """(divisor, unit) for plot axes: mm below 1 m, m otherwise."""
    return (1e-3, "mm") if size < 1.0 else (1.0, "m")


def _law_text(law: dict) -> str:
    kind = law.get("kind", "?")
    if kind == "linear":
        return f"linear, p0 = M0·e, M0 = {si(law.get('modulus'), 'Pa')}"
    if kind == "hyperbolic":
        return f"hyperbolic, p0 = M0·e/(1 − k·e), M0 = {si(law.get('modulus'), 'Pa')}, k = {law.get('k')}"
    if kind == "table":
        return (f"table ({len(law.get('extent', []))} rows, {law.get('interpolation', '?')}), "
                f"p0(1) = {si(law.get('modulus'), 'Pa')}")
    return str(law)


def _boundary_text(boundary: dict) -> str:
    faces = boundary.get("faces") or {}
    text = ", ".join(f"{k} {v}" for k, v in sorted(faces.items())) or "—"
    if boundary.get("core"):
        text += f"; core {boundary['core'].get('file', '?')}"
    if boundary.get("bonded"):
        text += f"; bonded {', '.join(boundary['bonded'])}"
    if boundary.get("insulated"):
        text += f"; insulated {', '.join(boundary['insulated'])}"
    return "input faces " + text   # the surface's faces by condition, not the mesh's


def _skin_text(skin: dict) -> str:
    text = (f"{si(skin.get('thickness'), 'm')} over a rigid interior, "
            f"{100 * skin.get('skin_volume_fraction', 0):.1f}% of the part")
    if skin.get("cut_depth"):        # recorded since the cut is moved onto the exact depth
        low, high = skin["cut_depth"]
        text += f"; interior {low:.3g}–{high:.3g} × the thickness below the free faces "
        text += (f"(rounded, radius {si(skin.get('rounding'), 'm')}; layer band)" if skin.get("mesh") == "band"
                 else f"({skin.get('cut_vertices_held', 0):,} of its vertices short of it)")
    return text


def _accuracy_text(estimate: dict) -> str:
    return (f"estimated error e {100 * estimate.get('extent', 0):.2f}%, "
            f"p {100 * estimate.get('pressure', 0):.2f}%, L {100 * estimate.get('characteristic_length', 0):.2f}%"
            + (f" (asked {100 * estimate['accuracy']:g}%)" if estimate.get("accuracy") is not None else ""))


def _mesh_rows(summary: dict) -> list[tuple[str, str]]:
    low, high = summary["bounds"]
    return [
        ("mesh", f"{summary['tets']:,} tets, {summary['vertices']:,} vertices, "
                 f"{summary['boundary_faces']:,} boundary faces"),
        ("volume", f"{summary['volume']:.6g} m³"),
        ("bounds", "  ".join(f"{a} [{lo:.6g}, {hi:.6g}]" for a, lo, hi in zip(AXES, low, high)) + " m"),
        ("size", " × ".join(si(hi - lo, "m") for lo, hi in zip(low, high))),
    ]


def _summary_rows(summary: dict) -> list[tuple[str, str]]:
    """(label, text) for each line of :func:`format_summary` after its title."""
    rows = []
    source = summary.get("source") or {}
    if source:
        digest = str(source.get("sha256") or "")
        rows.append(("source", f"{source.get('file', '?')}" + (f"  sha256 {digest[:12]}…" if digest else "")))
    rows += _mesh_rows(summary)
    rows.append(("law", _law_text(summary.get("law") or {})))
    rows.append(("L", si(summary.get("characteristic_length"), "m") + "  (characteristic length, D 5.2.1)"))
    damping = si(summary.get("dissipation"), "s/m")
    if summary.get("expansion_rate") is not None:
        damping += f"  (= 1/(L·τ), τ = {summary['expansion_rate']:g} 1/s)"
    rows.append(("dissipation χ", damping))
    friction = summary.get("friction") or {}
    if friction:
        rows.append(("friction", f"static {friction.get('static')}, dynamic {friction.get('dynamic')}"))
    rows.append(("pressure", f"{si(summary['pressure_min'], 'Pa')} … {si(summary['pressure_max'], 'Pa')}"))
    rows.append(("extent", f"{summary['extent_min']:.6g} … {summary['extent_max']:.6g}"))
    q = summary["min_dihedral_angle_percentiles"]
    rows.append(("quality", f"min dihedral angle: min {q['min']:.2f}°, 1% {q['p1']:.2f}°, "
                            f"5% {q['p5']:.2f}°, median {q['p50']:.2f}°"))
    rows.append(("interpolation", f"max error {si(summary.get('max_interpolation_error'), 'Pa')}"))
    if summary.get("boundary"):
        rows.append(("boundary", _boundary_text(summary["boundary"])))
    if summary.get("skin"):
        rows.append(("skin", _skin_text(summary["skin"])))
    if summary.get("error_estimate"):
        rows.append(("accuracy", _accuracy_text(summary["error_estimate"])))
    rows += [("warning", warning) for warning in summary.get("warnings") or []]
    return rows


def summary_row(label: str, text: str) -> str:
    """One line of :func:`format_summary`: an indented label column, then the text."""
    return f"  {label:<15}{text}"


def format_summary(summary: dict) -> str:
    """The summary as readable text (one fact per line)."""
    name = Path(summary["path"]).name if summary.get("path") else "asset"
    tool = summary.get("tool") or {}
    title = (f"{name}  ({summary.get('schema')}, written by {tool.get('name', '?')} "
             f"{tool.get('version', '?')})")
    return "\n".join([title, *(summary_row(label, text) for label, text in _summary_rows(summary))])


# --------------------------------------------------------------------------- picture

def _draw_cuts(figure, axes, points, tets, pressure) -> None:
    """Three mid-plane cuts coloured by pressure, the part's outline on each, one colour bar."""
    from matplotlib.collections import LineCollection  # lazy: matplotlib is heavy, only for --png
    from matplotlib.tri import Triangulation  # lazy: matplotlib is heavy, only for --png

    p_max = float(np.max(pressure)) if len(pressure) else 0.0
    p_min = min(0.0, float(np.min(pressure)))
    divisor, p_unit = pressure_scale(max(abs(p_max), abs(p_min)))
    size = float(np.max(points.max(axis=0) - points.min(axis=0)))
    l_div, l_unit = length_scale(size)
    vmax = p_max / divisor if p_max > p_min else p_min / divisor + 1.0
    mappable = None
    for (axis, cut), ax in zip(mid_planes(points, tets, pressure), axes):
        u, v = [a for a in range(3) if a != axis]
        centred = cut.origin[axis] == 0.5 * (points[:, axis].min() + points[:, axis].max())
        ax.set_title(f"cut {AXES[axis]} = {cut.origin[axis] / l_div:.4g} {l_unit} "
                     f"({'bounding-box centre' if centred else 'median vertex'})")
        ax.set_xlabel(f"{AXES[u]} [{l_unit}]")
        ax.set_ylabel(f"{AXES[v]} [{l_unit}]")
        ax.set_aspect("equal")
        if len(cut.triangles):
            p = cut.points / l_div
            tri = cut.triangles
            a, b = p[tri[:, 1]] - p[tri[:, 0]], p[tri[:, 2]] - p[tri[:, 0]]
            area = np.abs(a[:, u] * b[:, v] - a[:, v] * b[:, u])
            tri = tri[area > 1e-14 * max(size / l_div, 1e-300) ** 2]
            triangulation = Triangulation(p[:, u], p[:, v], tri)
            mappable = ax.tripcolor(triangulation, cut.values / divisor, shading="gouraud",
                                    cmap=COLORMAP, vmin=p_min / divisor, vmax=vmax)
        else:
            ax.text(0.5, 0.5, "the plane misses the part", transform=ax.transAxes, ha="center")
        if len(cut.outline):
            segments = cut.outline[:, :, [u, v]] / l_div
            ax.add_collection(LineCollection(segments, colors="black", linewidths=0.9))
            ax.autoscale_view()
    if mappable is not None:
        bar = figure.colorbar(mappable, ax=list(axes), shrink=0.9)
        bar.set_label(f"pressure p0 [{p_unit}]")


def _draw_quality(hist, angles: np.ndarray, tets: np.ndarray) -> None:
    """The histogram of the tets' min dihedral angles, with its percentiles marked."""
    hist.hist(angles, bins=np.linspace(0.0, 75.0, 76), color="tab:blue")
    q = quality_percentiles(angles)
    for (key, value), colour in zip(q.items(), ("tab:red", "tab:orange", "tab:olive", "tab:green")):
        label = "min" if key == "min" else f"{key[1:]}%"
        hist.axvline(value, color=colour, linestyle="--", label=f"{label}: {value:.1f}°")
    hist.set_yscale("log")
    hist.set_ylim(bottom=0.7)
    hist.set_xlabel("min dihedral angle of a tet [deg]")
    hist.set_ylabel("tets")
    hist.set_title(f"element quality ({len(tets):,} tets)")
    hist.legend(loc="upper right", framealpha=0.9)


def plot_asset(asset, png_path, *, title: str | None = None, dpi: int = 110) -> None:
    """PNG: three mid-plane cuts coloured by pressure with the part outline, and a histogram
    of the min dihedral angle. Written atomically."""
    import matplotlib  # lazy: matplotlib is heavy, only for --png

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure  # lazy: matplotlib is heavy, only for --png

    points, tets = asset.points, asset.tets
    pressure = np.asarray(asset.pressure, dtype=np.float64)
    figure = Figure(figsize=(12, 9.5), dpi=dpi, layout="constrained")
    grid = figure.subplots(2, 2)
    _draw_cuts(figure, grid.ravel()[:3], points, tets, pressure)
    angles = (asset.min_dihedral_angle if asset.min_dihedral_angle is not None
              else min_dihedral_angles(points, tets))
    _draw_quality(grid[1, 1], angles, tets)
    p_max = float(np.max(pressure)) if len(pressure) else 0.0
    meta = asset.metadata or {}
    figure.suptitle(title or f"{(meta.get('source') or {}).get('file', 'asset')}: pressure p0 "
                              f"(max {si(p_max, 'Pa')}), L = {si(meta.get('characteristic_length'), 'm')}")
    with atomic_output(png_path) as temporary:
        figure.savefig(temporary, format="png", metadata={"Software": None})


# --------------------------------------------------------------------------- ParaView

def paraview_script(asset_path, asset=None, *, cut: str = "x") -> str:
    """A pvpython script showing the asset's cut face head-on (see :mod:`fieldgen.io.paraview`)."""
    return asset_script(asset_path, asset, cut=cut)


def write_paraview_script(script_path, asset_path, asset=None, *, cut: str = "x") -> str:
    """Write :func:`paraview_script` to ``script_path`` atomically; return the path."""
    return write_script(script_path, paraview_script(asset_path, asset, cut=cut))
