"""Build benchmark: seconds per stage, peak memory, wall time / TetGen time.

Each case is one ``fieldgen.pipeline.build`` run in a fresh child process, so its peak memory is
that process's own ``ru_maxrss`` (``getrusage(RUSAGE_SELF)`` at its end; tracemalloc would miss
numpy's and VTK's C allocations). TetGen runs in a grandchild (see ``fieldgen.meshing.tetgen``), whose
peak the child reports from ``RUSAGE_CHILDREN`` (the child holds only the surface meanwhile).

Cases:

- ``box-<size>``: a 0.1 m cube, bottom face bonded (Laplace), linear law, at about 10k / 100k /
  300k / 1M tets (``--sizes``);
- ``flat-box-509k`` (``--flat-box``): a 0.2 x 0.1 x 0.04 m box at ``--max-volume 3e-9``, the same
  options otherwise;
- ``ball-hyperbolic-<size>``: an icosphere of radius 0.05 m (Poisson), hyperbolic law k = 0.9,
  which exercises layering (``--hyperbolic-sizes``, default 100k);
- the real parts of the test corpus ``tests/data/meshes`` that build (``--parts``), with their default meshing.

Usage::

    python benchmarks/build_stages.py                      # 10k, 100k, 1M boxes + 100k ball + parts
    python benchmarks/build_stages.py --sizes 10k,100k --no-parts --json out.json
    python benchmarks/build_stages.py --sizes 100k --profile   # cProfile top functions per case

"other" is wall time not inside a named stage (mesh statistics, metadata). The load average
(``os.getloadavg``) is printed with every case: the machine is shared, so read the figures with it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MESHES = ROOT / "tests" / "data" / "meshes"

#: Target edge length (m) per nominal size (tets from TetGen, before layering), calibrated here
#: with TetGen's default radius-edge bound: TetGen's mean tet is about 1/5 of the volume bound
#: a^3/(6 sqrt 2). The ball (radius 0.05 m) has 0.52 x the cube's volume, hence 0.805 x its edge.
BOX_EDGE = {"10k": 0.0118, "100k": 0.00545, "300k": 0.00378, "1M": 0.00253}
BALL_EDGE = {"10k": 0.0095, "100k": 0.0044, "1M": 0.00204}

#: Real parts (file, units, extra options): the ones test_build.py builds plus other closed parts.
PARTS = [
    ("featuretype.STL", "in", {"modulus": 3e5, "k": 0.5, "dissipation": 2.0}),
    ("plate_holes.STL", "mm", {"bonded": ("normal:0,0,-1",), "modulus": 1e6, "expansion_rate": 5.0}),
    ("fandisk.obj", "m", {"bonded": ("below:z=-0.7",), "modulus": 1e5, "expansion_rate": 10.0}),
    ("torus.STL", "m", {"modulus": 1e5, "dissipation": 1.0}),
    ("unit_sphere.STL", "m", {"modulus": 1e5, "dissipation": 1.0}),
    ("angle_block.STL", "mm", {"modulus": 1e6, "dissipation": 1.0}),
    ("idler_riser.STL", "mm", {"bonded": ("normal:0,0,-1",), "modulus": 1e6, "dissipation": 1.0}),
]

#: The real parts of the accuracy targets (a few centimetres, inch files) built at a given size, so
#: the whole process can be compared with its TetGen stage at 300k tets and up (``--sized-parts``).
SIZED_PARTS = [("angle_block.STL", "in"), ("idler_riser.STL", "in"), ("featuretype.STL", "in")]
SIZED_TETS = {"300k": 300_000, "500k": 500_000, "1M": 1_000_000}

STAGES = ("load", "tetrahedralize", "skin", "refine", "extent", "error estimate", "sizing", "layering", "damping",
          "statistics", "write", "validate")


# --------------------------------------------------------------------------- cases

def synthetic_cases(sizes: list[str], hyperbolic_sizes: list[str], folder: Path, flat_box: bool = False) -> list[dict]:
    """Write the synthetic surfaces into ``folder`` and describe their builds."""
    import trimesh

    box = folder / "box.stl"
    trimesh.creation.box(extents=(0.1, 0.1, 0.1)).export(box)
    ball = folder / "ball.stl"
    trimesh.creation.icosphere(subdivisions=4, radius=0.05).export(ball)
    cases = []
    for size in sizes:
        cases.append({"name": f"box-{size}", "input": str(box), "options": {
            "units": "m", "edge_length": BOX_EDGE[size], "bonded": ["normal:0,0,-1"],
            "law": "linear", "modulus": 1e5, "expansion_rate": 10.0}})
    if flat_box:
        # The box of the real-parts trial: 0.2 x 0.1 x 0.04 m at --max-volume 3e-9 (about 509k tets).
        flat = folder / "flat_box.stl"
        trimesh.creation.box(extents=(0.2, 0.1, 0.04)).export(flat)
        cases.append({"name": "flat-box-509k", "input": str(flat), "options": {
            "units": "m", "max_volume": 3e-9, "bonded": ["normal:0,0,-1"],
            "law": "linear", "modulus": 1e5, "expansion_rate": 10.0}})
    for size in hyperbolic_sizes:
        cases.append({"name": f"ball-hyperbolic-{size}", "input": str(ball), "options": {
            "units": "m", "edge_length": BALL_EDGE[size], "law": "hyperbolic", "modulus": 1e5,
            "k": 0.9, "expansion_rate": 10.0}})
    return cases


def part_cases() -> list[dict]:
    cases = []
    for name, units, extra in PARTS:
        path = MESHES / name
        if path.exists():
            options = {"units": units, **{k: list(v) if isinstance(v, tuple) else v for k, v in extra.items()}}
            cases.append({"name": name, "input": str(path), "options": options})
    return cases


def sized_part_cases(sizes: list[str]) -> list[dict]:
    """The ``SIZED_PARTS`` at the edge length that would give each nominal size in a box of the
    same volume (:func:`fieldgen.sizing.size_field.first_size`). TetGen makes 0.4-0.8 x that many in these
    parts, so the table gives the count."""
    from fieldgen.sizing.size_field import first_size
    from fieldgen.surface.stage import UNIT_SCALE, load_surface

    cases = []
    for name, units in SIZED_PARTS:
        path = MESHES / name
        volume = load_surface(str(path), units).volume           # m³, read as the build reads it
        for size in sizes:
            edge = first_size(volume, SIZED_TETS[size]) / UNIT_SCALE[units]
            cases.append({"name": f"{path.stem}-{size}", "input": str(path), "options": {
                "units": units, "edge_length": round(edge, 6), "modulus": 1e6, "dissipation": 1.0}})
    return cases


# --------------------------------------------------------------------------- child side

def child(case_json: str) -> None:
    """Run one build; print one JSON line with the result, wall time and TetGen's peak memory."""
    import resource

    case = json.loads(case_json)
    from fieldgen.options import BuildOptions
    from fieldgen.pipeline import build
    from fieldgen.progress import Progress

    options = BuildOptions(**{k: tuple(v) if isinstance(v, list) else v for k, v in case["options"].items()})
    progress = Progress(enabled=False)
    profiler = None
    if case.get("profile"):
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    result = build(case["input"], case["output"], options, progress=progress)
    wall = time.perf_counter() - start
    if profiler is not None:
        import io
        import pstats

        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
        print(text.getvalue(), file=sys.stderr)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss            # kB on Linux
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss   # the TetGen process
    from fieldgen.io.asset import read_metadata

    meta = read_metadata(case["output"])
    before = meta["mesh"].get("tets_before_layering", result.tets)
    print(json.dumps({"wall": wall, "tets_before_layering": before, "stage_seconds": result.stage_seconds, "tets": result.tets,
                      "vertices": result.vertices, "size_bytes": os.path.getsize(case["output"]),
                      "maxrss_kb": own, "tetgen_maxrss_kb": children, "warnings": result.warnings,
                      "error_estimate": meta.get("error_estimate")}))


# --------------------------------------------------------------------------- parent side

def run_case(case: dict, folder: Path, profile: bool) -> dict:
    """Run ``case`` in a child process; its figures plus the child's own peak memory."""
    case = dict(case, output=str(folder / f"{case['name'].replace('.', '_')}.vtu"), profile=profile)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(case)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=None if profile else subprocess.PIPE, text=True)
    out, err = proc.communicate()
    elapsed = time.perf_counter() - start
    record = {"case": case["name"], "load_average_1min": round(load_before, 2), "process_seconds": elapsed}
    if proc.returncode != 0:
        record["error"] = (err or "").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return record
    figures = json.loads(out.strip().splitlines()[-1])
    record.update(figures)
    record["maxrss_mb"] = figures["maxrss_kb"] / 1024
    record["tetgen_maxrss_mb"] = figures["tetgen_maxrss_kb"] / 1024
    stages = figures["stage_seconds"]
    record["other_seconds"] = figures["wall"] - sum(stages.values())
    tetgen = stages.get("tetrahedralize", 0.0)
    record["wall_over_tetgen"] = figures["wall"] / tetgen if tetgen > 0 else None
    rest = {k: v for k, v in stages.items() if k != "tetrahedralize"}
    rest["other"] = record["other_seconds"]
    record["dominant_non_tetgen_stage"] = max(rest, key=rest.get)
    record["dominant_stage"] = max({**rest, "tetrahedralize": tetgen}.items(), key=lambda kv: kv[1])[0]
    return record


def table(records: list[dict]) -> str:
    """The figures as a fixed-width text table."""
    head = ["case", "TetGen tets", "tets", *STAGES, "other", "wall", "wall/TetGen", "peak MB", "TetGen MB",
            "loadavg", "dominant (non-TetGen)"]
    rows = [head]
    for r in records:
        if "error" in r:
            rows.append([r["case"], "failed"] + [""] * (len(head) - 2))
            continue
        s = r["stage_seconds"]
        rows.append([r["case"], str(r["tets_before_layering"]), str(r["tets"]), *[f"{s.get(k, 0.0):.2f}" for k in STAGES],
                     f"{r['other_seconds']:.2f}", f"{r['wall']:.2f}",
                     f"{r['wall_over_tetgen']:.2f}" if r["wall_over_tetgen"] else "-",
                     f"{r['maxrss_mb']:.0f}", f"{r['tetgen_maxrss_mb']:.0f}",
                     f"{r['load_average_1min']:.2f}", r["dominant_non_tetgen_stage"]])
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(head))]
    lines = []
    for row in rows:
        lines.append("  ".join(cell.rjust(widths[i]) if i else cell.ljust(widths[i]) for i, cell in enumerate(row)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10k,100k,1M", help="box sizes, from 10k,100k,300k,1M (or 'none')")
    parser.add_argument("--flat-box", action="store_true",
                        help="also the 0.2 x 0.1 x 0.04 m box at --max-volume 3e-9 (about 509k tets)")
    parser.add_argument("--hyperbolic-sizes", default="100k", help="layered ball sizes (or 'none')")
    parser.add_argument("--parts", dest="parts", action="store_true", default=True, help="real parts too (default)")
    parser.add_argument("--no-parts", dest="parts", action="store_false")
    parser.add_argument("--sized-parts", default="none",
                        help="the CAD parts at a given size too, from 300k,500k,1M (default none)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case (the fastest is reported)")
    parser.add_argument("--json", metavar="FILE", help="also dump every figure as JSON to FILE")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions per case")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0

    def sizes(text, known=BOX_EDGE, flag="size"):
        """The comma-separated sizes of an option ('none': none), each one of ``known``."""
        chosen = [] if text.strip().lower() == "none" else [s.strip() for s in text.split(",") if s.strip()]
        unknown = [s for s in chosen if s not in known]
        if unknown:
            parser.error(f"unknown {flag}(s) {unknown}; choose from {', '.join(known)}")
        return chosen

    box_sizes, ball_sizes = sizes(args.sizes), sizes(args.hyperbolic_sizes)
    sized = sizes(args.sized_parts, SIZED_TETS, "--sized-parts size")
    records = []
    with tempfile.TemporaryDirectory(prefix="fieldgen-bench-") as name:
        folder = Path(name)
        cases = synthetic_cases(box_sizes, ball_sizes, folder, flat_box=args.flat_box)
        if args.parts:
            cases += part_cases()
        cases += sized_part_cases(sized)
        for case in cases:
            runs = [run_case(case, folder, args.profile) for _ in range(max(1, args.repeat))]
            ok = [r for r in runs if "error" not in r]
            best = min(ok, key=lambda r: r["wall"]) if ok else runs[0]
            records.append(best)
            print(f"# {best['case']}: " + (f"{best['wall']:.2f} s, {best.get('tets')} tets, "
                  f"load {best['load_average_1min']}" if "error" not in best else "FAILED"),
                  file=sys.stderr, flush=True)
    print(table(records))
    for r in records:
        if "error" in r:
            print(f"{r['case']} failed: {' '.join(r['error'])}")
    done = [r for r in records if "error" not in r]
    if done:
        big = max(done, key=lambda r: r["tets"])
        print(f"\nLargest case {big['case']} ({big['tets']} tets): wall {big['wall']:.1f} s = "
              f"{big['wall_over_tetgen']:.2f} x TetGen; peak {big['maxrss_mb']:.0f} MB; dominant stage "
              f"{big['dominant_stage']}, dominant non-TetGen stage {big['dominant_non_tetgen_stage']}.")
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average now {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                                   "load_average_end": os.getloadavg()}, "cases": records}, handle, indent=2)
    return 0 if len(done) == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
