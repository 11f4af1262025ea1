"""Median contact-query time of fieldgen.runtime against Drake's hydroelastic contact, both face rules.

Run:  .venv/bin/python benchmarks/contact_vs_drake.py [--repeat N] [--keep DIR] [--cases a,b,...]

Drake is pydrake ``drake==1.51.1`` from the project's test extra (``pip install -e '.[test]'``),
run in this process through ``tests/drake_contact.py`` (SceneGraph only, A registered first so
it is Drake's M). Both sides read the same files: legacy ``.vtk`` tet meshes (compliant, Drake's
field p = E·d/max d) and ``.obj`` surfaces (rigid). Times: ours = surface + wrench
(``fieldgen.runtime.contact.wrench.contact``, polygon representation) under each face rule, Drake's =
``QueryObject.ComputeContactSurfaces(kPolygon)`` alone; medians over N queries after one
warm-up, one thread each, the three queries interleaved so they see the same load. "agree" compares our force under ``face_rule="drake"`` with Drake's
(relative 1e-6); faces are ours under each rule and Drake's.

Cases: two 10k-tet balls (r 50 mm, 10 mm overlap); two 10k-tet cubes (100 mm, 10 mm overlap,
side faces coplanar: see docs/model.md §3.5) and the same with B rotated (3°, 5°, 7°) and
three times stiffer; a 10k- and a 100k-tet ball on a rigid box mesh; Drake's pepper mesh against
a rotated copy (half its width deep), on a tilted rigid box and against a stiffer rotated block;
the two grid cubes of the 19.208 N test (2 mm overlap).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODULUS = 1e5
RULES = ("all", "drake")


def tetgen_mesh(vertices, faces, max_volume: float):
    """Quality tet mesh of a closed surface (TetGen 'pq1.414a<vol>', run in a scratch folder)."""
    import tetgen

    from fieldgen.meshing.tetmesh import orient_positive

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)
        try:
            gen = tetgen.TetGen(np.asarray(vertices, float), np.asarray(faces, np.int32))
            points, tets = gen.tetrahedralize(switches=f"pq1.414a{max_volume:.6e}Q")[:2]
        finally:
            os.chdir(cwd)
    points = np.asarray(points, float)
    return points, orient_positive(points, np.asarray(tets, np.int64))


def write_vtk(path: Path, points, tets) -> Path:
    from fieldgen.io.drake_vtk import vtk_text

    path.write_text(vtk_text(points, tets, path.stem))
    return path


def write_obj(path: Path, vertices, faces) -> Path:
    lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in np.asarray(vertices, float).tolist()]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in np.asarray(faces).tolist()]
    path.write_text("\n".join(lines) + "\n")
    return path


def make_meshes(folder: Path) -> dict:
    """The benchmark's files: 10k/100k-tet balls, a 10k-tet cube, a rigid box surface, the
    corpus pepper, a structured block and the two-cube test's grid cube."""
    import shutil

    import trimesh

    sys.path.insert(0, str(ROOT / "tests"))
    from test_runtime_assets import drake_cube_vtk

    from fieldgen.io.drake_vtk import vtk_text
    from fieldgen.meshing.tetmesh import box_grid

    sphere = trimesh.creation.icosphere(subdivisions=4, radius=0.05)
    cube = trimesh.creation.box(extents=[0.1, 0.1, 0.1]).subdivide().subdivide().subdivide()
    box = trimesh.creation.box(extents=[0.2, 0.2, 0.05]).subdivide().subdivide().subdivide()
    out = {}
    for name, mesh, vol in (("ball10k", sphere, 1.25e-7), ("ball100k", sphere, 9.5e-9), ("cube10k", cube, 1.8e-7)):
        points, tets = tetgen_mesh(mesh.vertices, mesh.faces, vol)
        out[name] = (write_vtk(folder / f"{name}.vtk", points, tets), len(tets))
    out["box"] = (write_obj(folder / "box.obj", box.vertices, box.faces), len(box.faces))
    pepper = folder / "pepper.vtk"
    shutil.copyfile(ROOT / "tests" / "data" / "meshes" / "yellow_bell_pepper_no_stem_low.vtk", pepper)
    out["pepper"] = (pepper, 2519)
    points, tets = box_grid(*(np.linspace(-h, h, 9) for h in (0.04, 0.03, 0.02)))
    (folder / "block.vtk").write_text(vtk_text(points, tets, "block"))
    out["block"] = (folder / "block.vtk", len(tets))
    out["grid_cube"] = (drake_cube_vtk(folder / "grid_cube.vtk"), 6 * 12 ** 3)
    return out


def pose(x=0.0, y=0.0, z=0.0, roll=0.0, pitch=0.0, yaw=0.0) -> np.ndarray:
    from fieldgen.runtime.contact.pose import Pose

    return np.array(Pose.from_xyz_rpy(x, y, z, roll, pitch, yaw).matrix)


def cases(files: dict) -> list[dict]:
    def compliant(name, X, modulus=MODULUS):
        return {"path": str(files[name][0]), "kind": "compliant", "modulus": modulus, "pose": X, "tets": files[name][1]}

    def rigid(X):
        return {"path": str(files["box"][0]), "kind": "rigid", "pose": X, "faces": files["box"][1]}

    box_below = pose(z=-0.05 - 0.025 + 0.01)   # box top 10 mm into the ball
    pepper_b = pose(0.04, 0.012, 0.006, 20, -15, 40)
    return [
        {"name": "two 10k-tet balls", "a": compliant("ball10k", pose()), "b": compliant("ball10k", pose(x=0.09))},
        {"name": "two 10k-tet cubes", "a": compliant("cube10k", pose()), "b": compliant("cube10k", pose(x=0.09))},
        {"name": "cubes, B rotated, 3E", "a": compliant("cube10k", pose()),
         "b": compliant("cube10k", pose(0.09, 0.003, -0.002, 3, 5, 7), 3 * MODULUS)},
        {"name": "10k-tet ball / rigid box", "a": compliant("ball10k", pose()), "b": rigid(box_below)},
        {"name": "100k-tet ball / rigid box", "a": compliant("ball100k", pose()), "b": rigid(box_below)},
        {"name": "pepper / rotated pepper", "a": compliant("pepper", pose()), "b": compliant("pepper", pepper_b)},
        {"name": "pepper / tilted rigid box", "a": compliant("pepper", pose()),
         "b": rigid(pose(0.004, -0.003, 0.009 - 0.025, 4, -3, 10))},
        {"name": "pepper / rotated block 3.5E", "a": compliant("pepper", pose()),
         "b": compliant("block", pose(0.01, -0.005, 0.085, 25, 10, -30), 3.5 * MODULUS)},
        {"name": "two grid cubes (19.208 N)", "a": compliant("grid_cube", pose()),
         "b": compliant("grid_cube", pose(x=0.098))},
    ]


def load(spec: dict):
    from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry

    if spec["kind"] == "compliant":
        return CompliantGeometry.from_drake_vtk(spec["path"], spec["modulus"])
    return RigidGeometry.from_mesh(spec["path"])


def prepare_ours(case: dict, face_rule: str):
    """A callable running one query of ours under ``face_rule``: (surface, wrench)."""
    from fieldgen.runtime.contact.wrench import contact

    a, b = load(case["a"]), load(case["b"])
    XA, XB = case["a"]["pose"], case["b"]["pose"]
    return lambda: contact(a, XA, b, XB, face_rule=face_rule)


def prepare_theirs(case: dict):
    """(callable running Drake's ComputeContactSurfaces(kPolygon), Drake's result, objects to keep)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from drake_contact import DrakeBody, drake_contact, query_object
    from pydrake.geometry import HydroelasticContactRepresentation

    def spec(side):
        return DrakeBody(side["path"], side["kind"], side["pose"], side.get("modulus", 0.0))

    a, b = spec(case["a"]), spec(case["b"])
    result = drake_contact(a, b)
    query, _, keep = query_object(a, b)
    rep = HydroelasticContactRepresentation.kPolygon
    return (lambda: query.ComputeContactSurfaces(rep)), result, keep


def measure(case: dict, repeat: int) -> dict:
    """Medians of the three queries, interleaved (all, drake, Drake, all, ...) after one warm-up
    each, so that all three see the same load from other processes; one thread."""
    from threadpoolctl import threadpool_limits

    runs = {rule: prepare_ours(case, rule) for rule in RULES}
    runs["Drake"], drake, keep = prepare_theirs(case)
    results = {name: run() for name, run in runs.items()}
    times = {name: [] for name in runs}
    with threadpool_limits(1):
        for _ in range(repeat):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    del keep
    out = {name: statistics.median(t) for name, t in times.items()}
    out["wrench"] = {rule: results[rule][1] for rule in RULES}
    out["Drake result"] = drake
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="write the meshes here (default: a temporary folder)")
    parser.add_argument("--cases", help="comma-separated substrings of case names to run (default: all)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        files = make_meshes(folder)
        print(f"load average {os.getloadavg()[0]:.2f} at the start; {args.repeat} queries per median", flush=True)
        header = (f"| {'case':<28} | tets A | all ms | drake ms | Drake ms | all/Drake | drake/Drake "
                  f"| faces all / drake / Drake | force all N | force Drake N | agree 1e-6 |")
        print(header)
        print("|---" * 11 + "|")
        selected = [c for c in cases(files)
                    if not args.cases or any(k.strip() in c["name"] for k in args.cases.split(","))]
        for case in selected:
            m = measure(case, args.repeat)
            fd = m["Drake result"].force
            fr, fa = m["wrench"]["drake"].force, m["wrench"]["all"].force
            agree = bool(np.linalg.norm(fr - fd) <= 1e-6 * max(np.linalg.norm(fd), 1e-300))
            t_all, t_drake, t_theirs = m["all"], m["drake"], m["Drake"]
            print(f"| {case['name']:<28} | {case['a']['tets']} | {1e3 * t_all:.3f} | {1e3 * t_drake:.3f} "
                  f"| {1e3 * t_theirs:.3f} | {t_all / t_theirs:.2f} | {t_drake / t_theirs:.2f} "
                  f"| {m['wrench']['all'].n_faces} / {m['wrench']['drake'].n_faces} / {m['Drake result'].faces} "
                  f"| {np.linalg.norm(fa):.9g} | {np.linalg.norm(fd):.9g} "
                  f"| {'yes' if agree else 'no (%.1e)' % (np.linalg.norm(fr - fd) / np.linalg.norm(fd))} |",
                  flush=True)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
