"""Real-parts build benchmark: default (accuracy-sized) builds of the corpus parts.

For each part: tets (before and after layering), seconds per stage, the whole build, the ratio
of the whole process to its TetGen stage, peak memory and the error estimate recorded in the
asset. Each build runs in a fresh child process (``benchmarks/build_stages.py --child``), so the
peak memory is that process's own; TetGen's and fTetWild's children report theirs separately.

Usage::

    python benchmarks/real_parts.py                       # every case below
    python benchmarks/real_parts.py --only angle_block --json out.json
    python benchmarks/real_parts.py --markdown            # the table for benchmarks/README.md

The machine is shared: the load average (``os.getloadavg``) is printed with every case.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_stages import MESHES, run_case  # noqa: E402

#: A 2 mm skin over a rigid interior, in the part's units (inches for the CAD parts here).
SKIN_MM = 2.0
INCH = 25.4

#: (case name, file, units, options). The CAD parts are inch files a few centimetres across.
CASES = [
    ("angle_block", "angle_block.STL", "in", {"modulus": 1e6, "dissipation": 1.0}),
    ("idler_riser", "idler_riser.STL", "in", {"modulus": 1e6, "dissipation": 1.0}),
    ("featuretype", "featuretype.STL", "in", {"modulus": 3e5, "dissipation": 2.0}),
    # The same part from its STEP file (the extra 'step': OpenCASCADE's tessellation, 0.05 mm)
    ("featuretype-step", "featuretype.STEP", "in", {"modulus": 3e5, "dissipation": 2.0}),
    ("fandisk", "fandisk.obj", "m", {"bonded": ["below:z=-0.7"], "modulus": 1e5, "dissipation": 1.0}),
    ("unit_sphere", "unit_sphere.STL", "m", {"modulus": 1e5, "dissipation": 1.0}),
    # Plates (first mesh thin across the plate, docs/model.md §2.10): 203 x 305 x 12.7 mm, 196 mm
    ("plate_holes", "plate_holes.STL", "mm", {"modulus": 1e5, "dissipation": 1.0}),
    ("plate_8in_col", "plate_8in_col.obj", "m", {"modulus": 1e5, "dissipation": 1.0}),
    # A 2 mm skin: by default a layer band over the rounded interior (docs/model.md §2.4) ...
    ("angle_block-skin", "angle_block.STL", "in",
     {"modulus": 1e6, "law": "hyperbolic", "k": 0.8, "skin": SKIN_MM / INCH, "dissipation": 1.0}),
    ("idler_riser-skin", "idler_riser.STL", "in",
     {"modulus": 1e6, "law": "hyperbolic", "k": 0.8, "skin": SKIN_MM / INCH, "dissipation": 1.0}),
    # ... and the same skins cut out of TetGen's mesh of the whole part (--skin-mesh cut).
    ("angle_block-skin-cut", "angle_block.STL", "in",
     {"modulus": 1e6, "law": "hyperbolic", "k": 0.8, "skin": SKIN_MM / INCH, "dissipation": 1.0, "skin_mesh": "cut"}),
    ("idler_riser-skin-cut", "idler_riser.STL", "in",
     {"modulus": 1e6, "law": "hyperbolic", "k": 0.8, "skin": SKIN_MM / INCH, "dissipation": 1.0, "skin_mesh": "cut"}),
    # Inputs TetGen refuses, meshed by fTetWild (--robust, every core; its mesh at its default
    # edge is the sizing's first pass): a robot fingertip and a scan (open surfaces), a teapot
    # whose spout and handle run into its body, and box.STL, whose shells overlap.
    ("pr2_l_finger_tip-robust", "pr2_l_finger_tip.obj", "m",
     {"robust": True, "modulus": 1e5, "dissipation": 1.0}),
    ("bunny-robust", "bunny.ply", "m", {"robust": True, "modulus": 1e5, "dissipation": 1.0}),
    ("teapot-robust", "teapot.stl", "mm", {"robust": True, "modulus": 1e5, "dissipation": 1.0}),
    ("box-robust", "box.STL", "in", {"robust": True, "modulus": 1e5, "dissipation": 1.0}),
    # fTetWild's teapot under a 5 mm skin: the zero-pressure refinement of its thin handle and
    # spout, which did not end on about half of fTetWild's runs (docs/model.md §2.2).
    ("teapot-robust-skin", "teapot.stl", "mm",
     {"robust": True, "skin": 5.0, "modulus": 1e5, "dissipation": 1.0}),
]

STAGES = ("load", "tetrahedralize", "skin", "refine", "extent", "error estimate", "sizing", "layering",
          "damping", "write", "validate")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args()
    wanted = [w for w in args.only.split(",") if w]
    cases = [c for c in CASES if not wanted or c[0] in wanted]
    print(f"# machine: {platform.machine()} {platform.processor() or ''} cpus={os.cpu_count()} "
          f"python {platform.python_version()}", flush=True)
    records = []
    with tempfile.TemporaryDirectory(prefix="fieldgen-real-parts-") as folder:
        for name, file, units, options in cases:
            case = {"name": name, "input": str(MESHES / file), "options": {"units": units, **options}}
            record = run_case(case, Path(folder), profile=False)
            records.append(record)
            print(json.dumps(_summary(record)), flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(records, handle, indent=2)
    if args.markdown:
        print(markdown(records))


def _summary(record: dict) -> dict:
    out = {k: record.get(k) for k in ("case", "load_average_1min", "tets_before_layering", "tets", "wall",
                                      "maxrss_mb", "error_estimate", "error")}
    seconds = record.get("stage_seconds", {})
    out["stages"] = {k: round(v, 2) for k, v in seconds.items()}
    tetgen = seconds.get("tetrahedralize")
    if tetgen:
        out["process_over_tetgen"] = round(record["process_seconds"] / tetgen, 2)
    return out


def markdown(records: list[dict]) -> str:
    head = ("| case | load | tets (solve) | tets (asset) | est. e / p / L (%) | " +
            " | ".join(STAGES) + " | build s | process / TetGen | peak MB |")
    rule = "|" + "---|" * (head.count("|") - 1)
    rows = [head, rule]
    for r in records:
        if "error" in r:
            rows.append(f"| {r['case']} | {r['load_average_1min']} | failed: {r['error']} |")
            continue
        s = r["stage_seconds"]
        est = r.get("error_estimate") or {}
        estimate = " / ".join(f"{100 * est[k]:.2f}" for k in ("extent", "pressure", "characteristic_length")) \
            if est else "-"
        # The layer band (--skin-mesh band) has no whole-part mesh: its rounded interior and its
        # band (TetGen outside it included) are shown in the skin column, its ratio is over the band.
        s = {**s, "skin": s.get("skin", 0.0) + s.get("interior", 0.0) + s.get("band", 0.0)}
        meshing = s.get("tetrahedralize", 0.0) or s.get("band", 0.0)
        rows.append(f"| {r['case']} | {r['load_average_1min']} | {r['tets_before_layering']:,} | {r['tets']:,} | "
                    f"{estimate} | " + " | ".join(f"{s.get(k, 0.0):.2f}" for k in STAGES) +
                    f" | {r['wall']:.1f} | {r['process_seconds'] / max(meshing, 1e-9):.2f} | "
                    f"{r['maxrss_mb']:.0f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
