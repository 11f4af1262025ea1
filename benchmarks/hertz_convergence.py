"""Hertz and the flat punch from a *built* asset: force error against edge length and layer tolerance.

A 32 x 32 x 10 mm slab, bottom bonded (e = 1), sides insulated (zero flux), top free, is built by
``fieldgen.pipeline.build`` with the halfspace fields of D App. B as modulus laws of the extent
(on this slab e = depth/H exactly):

- Hertz: the ``table`` law p0(e) = (E*/pi) sqrt(H e / R) (``fieldgen.material.halfspace.hertz_table``),
  pressed by a rigid sphere mesh of R = 50 mm at d = 0.5, 1, 2 mm; the reference is the field
  integrated over a true sphere, (4/3) E* R^1/2 d^3/2 (1 - 2d/(5R)) (``sphere_force``);
- flat punch: the ``linear`` law M0 = 2 E* H/(pi a), a rigid punch of a = 5 mm at the same
  depths; the reference is 2 E* a d.

Forces are the runtime's (``fieldgen.calibrate.indenter.Press`` -> ``fieldgen.runtime.contact.wrench.contact``) on
the asset read back from disk. The layer tolerance is given as a fraction of the peak contact
pressure at the shallowest depth, p0(d = 0.5 mm) = (E*/pi) sqrt(d/R): the sqrt law is concave,
its chords under-read it, and what matters is the error against the pressures in contact, not
against max p0 (which is sqrt(H/d) = 4.5 x larger).

``--defaults`` builds instead an 80 x 80 x 50 mm slab with no size or tolerance given (the
accuracy sizing and the default, relative layer tolerance: docs/model.md §2.4) and prints both
forces' errors (docs/design/contact-accuracy.md).

Usage::

    python benchmarks/hertz_convergence.py                 # the table in benchmarks/README.md
    python benchmarks/hertz_convergence.py --edges 4 --tolerances 0.02
    python benchmarks/hertz_convergence.py --defaults
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fieldgen.options import BuildOptions  # noqa: E402
from fieldgen.pipeline import build  # noqa: E402
from fieldgen.material.halfspace import (flat_punch_force, flat_punch_modulus, hertz_pressure, hertz_table,  # noqa: E402
                                sphere_force)
from fieldgen.calibrate.indenter import Press, parse_indenter  # noqa: E402
from fieldgen.runtime.contact.geometries import CompliantGeometry  # noqa: E402

E_STAR = 1.0e6      # Pa
RADIUS = 0.05       # sphere, m
PUNCH = 0.005       # punch radius, m
THICKNESS = 0.01    # H, m
WIDTH = 0.032       # m
DEPTHS = (0.0005, 0.001, 0.002)
SIDES = ("normal:1,0,0", "normal:-1,0,0", "normal:0,1,0", "normal:0,-1,0")


#: The slab of ``--defaults``: 80 x 80 x 50 mm.
DEFAULT_WIDTH, DEFAULT_THICKNESS = 0.08, 0.05


def slab_surface(folder: str, width: float = WIDTH, thickness: float = THICKNESS) -> str:
    import trimesh

    box = trimesh.creation.box(extents=(width, width, thickness))
    box.apply_translation((0.0, 0.0, -thickness / 2))
    path = os.path.join(folder, "slab.stl")
    box.export(path)
    return path


def hertz_case(folder: str, surface: str, edge: float, tolerance_fraction: float | None) -> dict:
    """``tolerance_fraction`` None: no layering (a tolerance above max p0, so no level is cut)."""
    extent, pressure = hertz_table(E_STAR, RADIUS, THICKNESS)
    table = os.path.join(folder, "hertz.csv")
    np.savetxt(table, np.column_stack([extent, pressure]), delimiter=",", fmt="%.17g")
    contact_pressure = float(hertz_pressure(E_STAR, RADIUS, THICKNESS, DEPTHS[0] / THICKNESS))
    tolerance = 10 * pressure[-1] if tolerance_fraction is None else tolerance_fraction * contact_pressure
    options = BuildOptions(bonded=("normal:0,0,-1",), insulated=SIDES, law="table", table=table,
                           edge_length=edge, layer_tolerance=tolerance)
    output = os.path.join(folder, "hertz.vtu")
    start = time.perf_counter()
    result = build(surface, output, options)
    seconds = time.perf_counter() - start
    part = CompliantGeometry.from_asset(output)
    indenter = parse_indenter(f"sphere:{RADIUS}", reach=max(DEPTHS), part_size=WIDTH)
    press = Press(part, indenter, (0.0, 0.0, -1.0), (0.0003, 0.0002, 0.0))
    forces = press.forces(DEPTHS)
    errors = forces / sphere_force(E_STAR, RADIUS, np.array(DEPTHS)) - 1.0
    return {"edge_mm": edge * 1e3, "tolerance_fraction": tolerance_fraction,
            "tolerance_pa": options.layer_tolerance, "tets": result.tets, "levels": result.extra["layer_levels"],
            "build_s": seconds, "errors": errors, "forces": forces}


def punch_case(folder: str, surface: str, edge: float) -> dict:
    options = BuildOptions(bonded=("normal:0,0,-1",), insulated=SIDES, law="linear",
                           modulus=flat_punch_modulus(E_STAR, THICKNESS, PUNCH), edge_length=edge)
    output = os.path.join(folder, "punch.vtu")
    result = build(surface, output, options)
    part = CompliantGeometry.from_asset(output)
    indenter = parse_indenter(f"cylinder:{PUNCH}", reach=max(DEPTHS), part_size=WIDTH)
    press = Press(part, indenter, (0.0, 0.0, -1.0), (0.0011, -0.0007, 0.0))
    forces = press.forces(DEPTHS)
    return {"edge_mm": edge * 1e3, "tets": result.tets,
            "errors": forces / flat_punch_force(E_STAR, PUNCH, np.array(DEPTHS)) - 1.0}


def default_cases() -> None:
    """Hertz and the punch on the 80 x 80 x 50 mm slab, no size or tolerance given."""
    with tempfile.TemporaryDirectory() as folder:
        surface = slab_surface(folder, DEFAULT_WIDTH, DEFAULT_THICKNESS)
        extent, pressure = hertz_table(E_STAR, RADIUS, DEFAULT_THICKNESS)
        table = os.path.join(folder, "hertz.csv")
        np.savetxt(table, np.column_stack([extent, pressure]), delimiter=",", fmt="%.17g")
        print("| case | tets | levels | build s | " + " | ".join(f"d = {d * 1e3:g} mm" for d in DEPTHS) + " | load |")
        print("|---|---|---|---|" + "---|" * len(DEPTHS) + "---|")
        for name, options, indenter, offset, exact in (
                ("hertz", BuildOptions(bonded=("normal:0,0,-1",), insulated=SIDES, law="table", table=table),
                 f"sphere:{RADIUS}", (0.0003, 0.0002, 0.0), sphere_force(E_STAR, RADIUS, np.array(DEPTHS))),
                ("punch", BuildOptions(bonded=("normal:0,0,-1",), insulated=SIDES, law="linear",
                                       modulus=flat_punch_modulus(E_STAR, DEFAULT_THICKNESS, PUNCH)),
                 f"cylinder:{PUNCH}", (0.0011, -0.0007, 0.0), flat_punch_force(E_STAR, PUNCH, np.array(DEPTHS)))):
            output = os.path.join(folder, f"{name}.vtu")
            start = time.perf_counter()
            result = build(surface, output, options)
            seconds = time.perf_counter() - start
            part = CompliantGeometry.from_asset(output)
            press = Press(part, parse_indenter(indenter, reach=max(DEPTHS), part_size=DEFAULT_WIDTH), (0.0, 0.0, -1.0),
                          offset)
            errors = press.forces(DEPTHS) / exact - 1.0
            print(f"| {name} | {result.tets} | {result.extra['layer_levels']} | {seconds:.1f} | "
                  + " | ".join(f"{100 * x:+.2f}%" for x in errors) + f" | {os.getloadavg()[0]:.1f} |", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edges", default="8,4,2,1.5", help="edge lengths in mm, without layering and at the "
                        "reference tolerance")
    parser.add_argument("--tolerances", default="0.08,0.04,0.02,0.01,0.005",
                        help="layer tolerances as fractions of p0(0.5 mm), at the reference edge")
    parser.add_argument("--reference-edge", type=float, default=8.0, help="mm")
    parser.add_argument("--reference-tolerance", type=float, default=0.02)
    parser.add_argument("--defaults", action="store_true", help="the 80 x 80 x 50 mm slab with no size or tolerance given")
    args = parser.parse_args(argv)
    if args.defaults:
        default_cases()
        return
    edges = [float(x) * 1e-3 for x in args.edges.split(",") if x]
    tolerances = [float(x) for x in args.tolerances.split(",") if x]
    cases = [(e, None) for e in edges] + [(e, args.reference_tolerance) for e in edges]
    cases += [(args.reference_edge * 1e-3, t) for t in tolerances
              if t != args.reference_tolerance or args.reference_edge * 1e-3 not in edges]
    print(f"Hertz: E* = {E_STAR:g} Pa, R = {RADIUS * 1e3:g} mm, slab {WIDTH * 1e3:g} x {WIDTH * 1e3:g} x "
          f"{THICKNESS * 1e3:g} mm; error of the runtime force on the built asset against the sphere-exact value")
    print("| edge mm | tolerance (x p0(0.5 mm)) | tolerance Pa | levels | tets | build s | "
          + " | ".join(f"d = {d * 1e3:g} mm" for d in DEPTHS) + " | load |")
    print("|---|---|---|---|---|---|" + "---|" * len(DEPTHS) + "---|")
    with tempfile.TemporaryDirectory() as folder:
        surface = slab_surface(folder)
        for edge, tol in cases:
            row = hertz_case(folder, surface, edge, tol)
            tol_text = "none" if tol is None else f"{tol:g}"
            pa_text = "-" if tol is None else f"{row['tolerance_pa']:.0f}"
            print(f"| {row['edge_mm']:g} | {tol_text} | {pa_text} | {row['levels']} | {row['tets']} | "
                  f"{row['build_s']:.1f} | " + " | ".join(f"{100 * x:+.2f}%" for x in row["errors"])
                  + f" | {os.getloadavg()[0]:.1f} |", flush=True)
        print()
        print(f"Flat punch: a = {PUNCH * 1e3:g} mm, linear law M0 = 2E*H/(pi a); error against 2E*ad")
        print("| edge mm | tets | " + " | ".join(f"d = {d * 1e3:g} mm" for d in DEPTHS) + " |")
        print("|---|---|" + "---|" * len(DEPTHS))
        for edge in edges:
            row = punch_case(folder, surface, edge)
            print(f"| {row['edge_mm']:g} | {row['tets']} | " + " | ".join(f"{x:+.1e}" for x in row["errors"]) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
