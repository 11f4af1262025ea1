"""Median contact-query time of fieldgen.runtime against Drake's hydroelastic contact.

Run:  .venv/bin/python benchmarks/contact_vs_drake.py [--repeat N] [--keep DIR]

Drake (pydrake ``drake==1.51.1``) lives in its own virtual environment ``benchmarks/.drake-venv``
(git-ignored, not a project dependency), created here with ``python3 -m venv`` + pip when absent;
it runs in a subprocess (``_drake_contact.py``) that prints JSON. Both sides read the same files:
TetGen tet meshes written as legacy ``.vtk`` (compliant, Drake's field p = E·d/max d, E = 1e5 Pa)
and ``.obj`` surfaces (rigid). Times: ours = surface + wrench (``fieldgen.runtime.wrench.contact``,
polygon representation), Drake's = ``ComputeContactSurfaces(kPolygon)`` alone; medians over N
queries after one warm-up, single thread. Forces: ours from the wrench, Drake's Σ p(centroid)·A·n̂;
"agree" compares Drake's with ours restricted to the polygons Drake keeps (its 5π/8 gradient
rule, :func:`drake_rule_force`): fieldgen keeps every polygon on purpose (continuity, D A.1).

Cases (bodies overlap by 10 mm): two 10k-tet balls (r 50 mm); two 10k-tet cubes (100 mm);
a 10k-tet ball against a rigid box mesh; a 100k-tet ball against the rigid box mesh.

Measured on the 2-core development machine (see the README section "Benchmark against Drake"):
the table printed by the last run is pasted there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
VENV = HERE / ".drake-venv"
DRAKE = "drake==1.51.1"
MODULUS = 1e5


def drake_python() -> Path:
    """The venv's python, creating the venv with pydrake when absent."""
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {VENV} with {DRAKE} (once, about 20 s and 400 MB)", file=sys.stderr)
        subprocess.run(["python3", "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", DRAKE], check=True)
    return python


def tetgen_mesh(vertices, faces, max_volume: float):
    """Quality tet mesh of a closed surface (TetGen 'pq1.414a<vol>', run in a scratch folder)."""
    import tetgen

    from fieldgen.mesh import orient_positive

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
    from fieldgen.drake import vtk_text

    path.write_text(vtk_text(points, tets, path.stem))
    return path


def write_obj(path: Path, vertices, faces) -> Path:
    lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in np.asarray(vertices, float).tolist()]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in np.asarray(faces).tolist()]
    path.write_text("\n".join(lines) + "\n")
    return path


def make_meshes(folder: Path) -> dict:
    """The benchmark's files: 10k/100k-tet balls, a 10k-tet cube, a rigid box surface."""
    import trimesh

    sphere = trimesh.creation.icosphere(subdivisions=4, radius=0.05)
    cube = trimesh.creation.box(extents=[0.1, 0.1, 0.1]).subdivide().subdivide().subdivide()
    box = trimesh.creation.box(extents=[0.2, 0.2, 0.05]).subdivide().subdivide().subdivide()
    out = {}
    for name, mesh, vol in (("ball10k", sphere, 1.25e-7), ("ball100k", sphere, 9.5e-9), ("cube10k", cube, 1.8e-7)):
        points, tets = tetgen_mesh(mesh.vertices, mesh.faces, vol)
        out[name] = (write_vtk(folder / f"{name}.vtk", points, tets), len(tets))
    out["box"] = (write_obj(folder / "box.obj", box.vertices, box.faces), len(box.faces))
    return out


def pose(x=0.0, y=0.0, z=0.0) -> np.ndarray:
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


def cases(files: dict) -> list[dict]:
    def compliant(name, X):
        return {"path": str(files[name][0]), "kind": "compliant", "modulus": MODULUS, "pose": X.tolist(),
                "tets": files[name][1]}

    def rigid(X):
        return {"path": str(files["box"][0]), "kind": "rigid", "pose": X.tolist(), "faces": files["box"][1]}

    box_below = pose(z=-0.05 - 0.025 + 0.01)   # box top 10 mm into the ball
    return [
        {"name": "two 10k-tet balls", "a": compliant("ball10k", pose()), "b": compliant("ball10k", pose(x=0.09))},
        {"name": "two 10k-tet cubes", "a": compliant("cube10k", pose()), "b": compliant("cube10k", pose(x=0.09))},
        {"name": "10k-tet ball / rigid box", "a": compliant("ball10k", pose()), "b": rigid(box_below)},
        {"name": "100k-tet ball / rigid box", "a": compliant("ball100k", pose()), "b": rigid(box_below)},
    ]


def load(spec: dict):
    from fieldgen.runtime.bodies import CompliantBody, RigidBody

    if spec["kind"] == "compliant":
        return CompliantBody.from_drake_vtk(spec["path"], spec["modulus"])
    return RigidBody.from_mesh(spec["path"])


def ours(case: dict, repeat: int) -> dict:
    from threadpoolctl import threadpool_limits

    from fieldgen.runtime.wrench import contact

    a, b = load(case["a"]), load(case["b"])
    XA, XB = np.array(case["a"]["pose"]), np.array(case["b"]["pose"])
    with threadpool_limits(1):
        surface, wrench = contact(a, XA, b, XB)
        drake_rule = drake_rule_force(surface)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            _, wrench = contact(a, XA, b, XB)
            times.append(time.perf_counter() - start)
    return {"median_seconds": statistics.median(times), "force": wrench.force.tolist(), "faces": wrench.n_faces,
            "force_drake_rule": drake_rule[0].tolist(), "faces_drake_rule": drake_rule[1]}


def drake_rule_force(surface) -> tuple[np.ndarray, int]:
    """Σ A·p0(centroid)·n̂ over the polygons Drake keeps: Drake drops a compliant–compliant polygon
    unless n̂ is within 5π/8 of ∇p_B and −n̂ within 5π/8 of ∇p_A (its IsPlaneNormalAlongPressureGradient;
    fieldgen keeps every polygon, see fieldgen.runtime.contact_surface). Returns (force, faces kept)."""
    n = surface.normals
    keep = np.ones(surface.n_faces, bool)
    cos_alpha = np.cos(5 * np.pi / 8)
    for grad, sign in ((surface.grad_b, 1.0), (surface.grad_a, -1.0)):
        norm = np.linalg.norm(grad, axis=1)
        compliant = np.isfinite(norm)
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = sign * np.sum(n * grad, axis=1) / norm
        keep &= ~compliant | ((norm > 0) & (cos > cos_alpha))
    weight = surface.areas[keep] * surface.centroid_pressure[keep]
    return np.sum(weight[:, None] * n[keep], axis=0), int(keep.sum())


def theirs(case: dict, repeat: int, python: Path, folder: Path) -> dict:
    spec = folder / "case.json"
    spec.write_text(json.dumps({"a": case["a"], "b": case["b"], "repeat": repeat}))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([str(python), str(HERE / "_drake_contact.py"), str(spec)], check=True,
                          capture_output=True, text=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="write the meshes here (default: a temporary folder)")
    args = parser.parse_args(argv)
    python = drake_python()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        files = make_meshes(folder)
        header = (f"{'case':<28}{'tets':>8}{'ours ms':>10}{'Drake ms':>10}{'ratio':>8}"
                  f"{'force ours N':>16}{'force Drake N':>16}{'agree 1e-6':>12}")
        print(header)
        for case in cases(files):
            mine = ours(case, args.repeat)
            drake = theirs(case, args.repeat, python, folder)
            fa, fd = np.array(mine["force"]), np.array(drake["force"])
            fr = np.array(mine["force_drake_rule"])
            agree = bool(np.linalg.norm(fr - fd) <= 1e-6 * max(np.linalg.norm(fd), 1e-300))
            ratio = mine["median_seconds"] / drake["median_seconds"]
            tets = case["a"]["tets"]
            print(f"{case['name']:<28}{tets:>8}{1e3 * mine['median_seconds']:>10.3f}"
                  f"{1e3 * drake['median_seconds']:>10.3f}{ratio:>8.2f}{np.linalg.norm(fa):>16.9g}"
                  f"{np.linalg.norm(fd):>16.9g}{'yes' if agree else 'NO':>12}", flush=True)
            if mine["faces_drake_rule"] != mine["faces"] or not agree:
                print(f"    ours {mine['faces']} faces, {mine['faces_drake_rule']} under Drake's 5π/8 rule "
                      f"(force {np.linalg.norm(fr):.9g} N, relative to Drake {np.linalg.norm(fr - fd) / np.linalg.norm(fd):.2g}); "
                      f"Drake {drake['faces']} faces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
