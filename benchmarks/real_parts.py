"""Real-parts build benchmark: default (accuracy-sized) builds of the corpus parts.

For each part: tets (before and after layering), seconds per stage, the whole build, the ratio
of the whole process to its TetGen stage, peak memory and the error estimate recorded in the
asset, the surface triangles the build starts from (and after a surface remeshing, when the asset
records one) and the build's warnings. Each build runs in a fresh child process (``benchmarks/build_stages.py --child``), so the
peak memory is that process's own; TetGen's and fTetWild's children report theirs separately.

Usage::

    python benchmarks/real_parts.py                       # every case below
    python benchmarks/real_parts.py --only angle_block --json out.json
    python benchmarks/real_parts.py --markdown            # the table for benchmarks/README.md
    python benchmarks/real_parts.py --only xyz_cube,round_tube --markdown   # parts outside the corpus

The machine is shared: the load average (``os.getloadavg``) is printed with every case.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_stages import MESHES, run_case  # noqa: E402

from fieldgen.errors import FieldgenError  # noqa: E402
from fieldgen.io.asset import read_metadata  # noqa: E402
from fieldgen.surface.stage import load_surface  # noqa: E402

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
    # The 305 mm self-intersecting counter part at the size it failed at (issue's flags: fTetWild,
    # then tets left at e = 0): bonded at its pegs' feet, fTetWild's defaults (docs/model.md §2.2).
    ("counter-robust-edge6", "counter.unitsmm.STL", "mm",
     {"robust": True, "bonded": ["below:z=256.5"], "edge_length": 6.0, "modulus": 1e5, "dissipation": 1.0}),
]

#: A 2 mm skin with K 0.8 over a robot finger's rigid link (metre files), as in the -skin cases.
FINGER_SKIN = {"modulus": 1e6, "law": "hyperbolic", "k": 0.8, "skin": SKIN_MM / 1000, "dissipation": 1.0}

#: Parts outside the development corpus (tests/data/meshes/SOURCES.md): the options a user would
#: give (units, a bonded bottom on plates, trays and counters, a finger's skin), never a size flag.
OUTSIDE_CASES = [
    # CAD with embossed text; a small scanned-looking part (11 mm)
    ("xyz_cube", "20mm-xyz-cube.stl", "mm", {"modulus": 1e6, "dissipation": 1.0}),
    ("busted", "busted.STL", "mm", {"modulus": 1e6, "dissipation": 1.0}),
    # threads: a square nut (5 mm thread) and a bolt (3 mm shaft) made for 3D printing
    ("threaded_nut", "SQNutO8T5P1.stl", "mm", {"modulus": 1e6, "dissipation": 1.0}),
    ("threaded_bolt", "Sqr3H5L3D3P1.stl", "mm", {"modulus": 1e6, "dissipation": 1.0}),
    # a thin-walled tube, 5.08 mm across, 61 mm long, ~0.3 mm wall
    ("round_tube", "round.stl", "mm", {"modulus": 1e6, "dissipation": 1.0}),
    # a 355 x 355 x 3.2 mm tray bottom and a 229 x 165 x 16 mm plate with a pocket, bottoms bonded
    ("tray_bottom", "1002_tray_bottom.STL", "mm",
     {"bonded": ["normal:0,-1,0"], "modulus": 1e6, "dissipation": 1.0}),
    ("octagonal_pocket", "octagonal_pocket.stl", "m",
     {"bonded": ["normal:0,0,-1"], "modulus": 1e6, "dissipation": 1.0}),
    # a 47 mm sensor housing with 7 um edges; a 75 mm sensor coupling plate (bonded) and a
    # 75 mm gripper coupling with screw holes (edges down to 11 um)
    ("adis16480", "ADIS16480.STL", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("robotiq_ft300_coupling", "robotiq_ft300_coupling.STL", "m",
     {"bonded": ["normal:0,0,-1"], "modulus": 1e6, "dissipation": 1.0}),
    ("robotiq_coupling", "robotiq_arg2f_coupling.stl", "mm", {"modulus": 1e6, "dissipation": 1.0}),
    # robot fingers' links under a 2 mm skin, K 0.8
    ("robotiq_140_inner_finger-skin", "robotiq_arg2f_140_inner_finger.stl", "m", FINGER_SKIN),
    ("robotiq_140_outer_finger-skin", "robotiq_arg2f_140_outer_finger.stl", "m", FINGER_SKIN),
    ("robotiq_3f_link_1-skin", "robotiq_3f_link_1.STL", "m", FINGER_SKIN),
    ("robotiq_3f_link_3-skin", "robotiq_3f_link_3.STL", "m", FINGER_SKIN),
    # open or self-intersecting: a force-torque sensor's visual mesh and a 305 mm counter part
    ("robotiq_fts150-robust", "robotiq_fts150.stl", "m", {"robust": True, "modulus": 1e6, "dissipation": 1.0}),
    ("counter-robust", "counter.unitsmm.STL", "mm",
     {"robust": True, "bonded": ["normal:0,0,-1"], "modulus": 1e6, "dissipation": 1.0}),
    # robot arms' visual meshes: a forearm link (3 % of its edges below 0.1 % of its size) and a
    # distal finger; a printed housing with ~1.8 mm walls; a bent-sheet lidar bracket; a 350 mm
    # base plate with holes (free)
    ("kinova_forearm", "kinova_forearm.STL", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("kinova_finger_distal", "kinova_finger_distal.STL", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("xamla_rpi_bottom", "xamla_mount_rpi_bottom.stl", "mm", {"modulus": 1e6, "dissipation": 1.0}),
    ("clearpath_lidar_mount", "clearpath_a200_lidar_mount.stl", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("omx_plate", "omx_plate.stl", "mm", {"modulus": 1e6, "dissipation": 1.0}),
    # a gripper finger with 2 um edges (the sliver moves alone), a bent 2.9 mm sheet bracket, a
    # 1.9 mm wall ring
    ("kortex_lite_finger", "kortex_lite_left_finger_dist.STL", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("j100_sick_bracket", "j100_sick_inverted_bracket.stl", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("kinova_ring", "kinova_ring_small.STL", "m", {"modulus": 1e6, "dissipation": 1.0}),
    # assemblies saved as crossing solids: a mobile manipulator's arm link (a tube through its
    # end cap) and a gripper knuckle with its pins
    ("stretch_arm_link-robust", "stretch_link_arm_l1.STL", "m", {"robust": True, "modulus": 1e6, "dissipation": 1.0}),
    ("interbotix_knuckle-robust", "interbotix_uxarm_left_inner_knuckle.stl", "m",
     {"robust": True, "modulus": 1e6, "dissipation": 1.0}),
    # bent sheet-metal brackets of mobile robots: round bends (the layered sheet) and sharp folds
    ("jackal_upright_bracket", "jackal_sick_lms1xx_upright_bracket.stl", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("jackal_camera_bracket", "jackal_camera_bracket.stl", "mm", {"modulus": 1e6, "dissipation": 1.0}),
    ("rbkairos_box_handle", "rbkairos_box_handle.stl", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("summit_xl_servo_bracket", "summit_xl_fr07_s101.stl", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("summit_xl_camera_base", "summit_xl_steel_camera_base.stl", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("summit_xl_axis_holder", "summit_xl_tecnalia_axis_holder.stl", "m", {"modulus": 1e6, "dissipation": 1.0}),
    # parts the default build failed or missed on (2026-11-28): a 184 mm finger link, one closed
    # shell, refused as "a hollow part" (TetGen lists an inner face twice); a 1.1 mm LED cover with
    # holes and a 3 mm-walled bowl, left at 2.8 % and 3.5 % by the tet budget
    ("trifinger_lower_link", "trifinger_lower_link.STL", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("solo12_neo_pixel_cover", "solo12_neo_pixel_cover.STL", "mm", {"modulus": 1e6, "dissipation": 1.0}),
    ("evo_bowl", "evo_bowl_col.obj", "m", {"modulus": 1e6, "dissipation": 1.0}),
    # a 215 mm bottle under the 2 mm, K 0.8 skin: too big for the layer band, cut instead and
    # layered to 7.9M tets (a 632 MB asset, 7.4 GB peak); a model of 119 crossing shells, on which
    # fTetWild had not finished after 300 s (its limit is 7200 s: this case can hold the run)
    ("fuze-skin", "fuze.obj", "m", FINGER_SKIN),
    ("cycloidal-robust", "cycloidal.ply", "in", {"robust": True, "modulus": 1e6, "dissipation": 1.0}),
    # a second search (2026-11-29): a robot hand's printed fingertip with needle triangles, under
    # the skin TetGen stopped within `split_segment` at every size tried (--surface-tolerance 0.3 mm
    # meshes it); its thin-walled thumb link, left at 5.8 % by the tet budget; a Rhino OBJ of
    # non-convex polygons continued over lines (open: --robust); a STEP box of six crossing plates
    # left at 6.6 % by the tet budget
    ("leap_fingertip-skin", "leap_fingertip.stl", "m", FINGER_SKIN),
    ("leap_thumb_pip", "leap_thumb_pip.stl", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("wallhole-robust", "wallhole.obj", "mm", {"robust": True, "modulus": 1e6, "dissipation": 1.0}),
    ("box_sides-robust", "box_sides.STEP", "m", {"robust": True, "modulus": 1e6, "dissipation": 1.0}),
    # a third search (2026-11-29): a gripper body with four sealed cavities; an open, self-crossing
    # hand palm and a holder of six crossing solids (--robust), both over 30 s
    ("schunk_pg70", "schunk_pg70.stl", "m", {"modulus": 1e6, "dissipation": 1.0}),
    ("shadow_palm-robust", "shadow_palm.stl", "mm", {"robust": True, "modulus": 1e6, "dissipation": 1.0}),
    ("schunk_pw70_holder-robust", "schunk_pw70_square_holder.stl", "m",
     {"robust": True, "modulus": 1e6, "dissipation": 1.0}),
]
CASES = CASES + OUTSIDE_CASES

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
            cpu_before = _children_cpu_seconds()
            record = run_case(case, Path(folder), profile=False)
            record["cpu_seconds"] = round(_children_cpu_seconds() - cpu_before, 1)
            record.update(surface_triangles(case, Path(folder)))
            records.append(record)
            print(json.dumps(_summary(record)), flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(records, handle, indent=2)
    if args.markdown:
        print(markdown(records))


def _children_cpu_seconds() -> float:
    """User + system CPU seconds of the finished child processes (the build and its mesher's
    children): less inflated by a shared machine's load than the wall-clock stage times."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def surface_triangles(case: dict, folder: Path) -> dict:
    """Triangles of the surface the build starts from (read as the build reads it) and, when the
    asset records a surface remeshing (metadata ``surface.remesh``), its record."""
    options = case["options"]
    out = {}
    try:
        surface = load_surface(case["input"], options["units"], require_closed=not options.get("robust"))
        out["surface_triangles_input"] = int(len(surface.faces))
    except FieldgenError:
        out["surface_triangles_input"] = None
    asset = folder / f"{case['name'].replace('.', '_')}.vtu"
    if asset.exists():
        out["surface_remesh"] = (read_metadata(asset).get("surface") or {}).get("remesh")
    return out


def _triangles(record: dict) -> str:
    """"input → remeshed" surface triangles, or the input's count when the build kept its surface."""
    before = record.get("surface_triangles_input")
    remesh = record.get("surface_remesh") or {}
    counts = [v for k, v in sorted(remesh.items()) if "triangle" in k and isinstance(v, int)]
    text = f"{before:,}" if before is not None else "-"
    if remesh:
        after = remesh.get("triangles_after", counts[-1] if counts else "?")
        text += f" → {after:,}" if isinstance(after, int) else f" → {after}"
    return text


def _summary(record: dict) -> dict:
    out = {k: record.get(k) for k in ("case", "load_average_1min", "tets_before_layering", "tets", "wall",
                                      "cpu_seconds", "maxrss_mb", "error_estimate", "error", "warnings",
                                      "surface_triangles_input", "surface_remesh")}
    seconds = record.get("stage_seconds", {})
    out["stages"] = {k: round(v, 2) for k, v in seconds.items()}
    tetgen = seconds.get("tetrahedralize")
    if tetgen:
        out["process_over_tetgen"] = round(record["process_seconds"] / tetgen, 2)
    return out


def _clause(warning: str) -> str:
    """A warning's first clause for the table (the full text is in --json)."""
    head = warning.split(": ")[0]
    return (head if len(head) >= 20 else warning[:110]).replace("|", "/")


def markdown(records: list[dict]) -> str:
    head = ("| case | load avg | surface triangles | tets (solve) | tets (asset) | est. e / p / L (%) | " +
            " | ".join(STAGES) + " | build s | CPU s | process / TetGen | peak MB | warnings |")
    rule = "|" + "---|" * (head.count("|") - 1)
    rows = [head, rule]
    for r in records:
        if "error" in r:
            rows.append(f"| {r['case']} | {r['load_average_1min']} | {_triangles(r)} | failed: {r['error']} |")
            continue
        s = r["stage_seconds"]
        est = r.get("error_estimate") or {}
        estimate = " / ".join(f"{100 * est[k]:.2f}" for k in ("extent", "pressure", "characteristic_length")) \
            if est else "-"
        # The layer band (--skin-mesh band) has no whole-part mesh: its rounded interior and its
        # band (TetGen outside it included) are shown in the skin column, its ratio is over the band.
        s = {**s, "skin": s.get("skin", 0.0) + s.get("interior", 0.0) + s.get("band", 0.0)}
        meshing = s.get("tetrahedralize", 0.0) or s.get("band", 0.0)
        warnings = "; ".join(_clause(w) for w in r.get("warnings") or ()) or "-"
        rows.append(f"| {r['case']} | {r['load_average_1min']} | {_triangles(r)} | {r['tets_before_layering']:,} | "
                    f"{r['tets']:,} | "
                    f"{estimate} | " + " | ".join(f"{s.get(k, 0.0):.2f}" for k in STAGES) +
                    f" | {r['wall']:.1f} | {r.get('cpu_seconds', '-')} | {r['process_seconds'] / max(meshing, 1e-9):.2f} | "
                    f"{r['maxrss_mb']:.0f} | {warnings} |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
