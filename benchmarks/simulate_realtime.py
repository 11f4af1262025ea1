"""Real-time factor of the simulator, warm (cached numba kernels) and cold (first run after install).

Run: .venv/bin/python benchmarks/simulate_realtime.py [--scenes coin gripper_full incline coin_first_run]

Rows (one JSON line each):

- ``coin``, ``resting_box``, ``gripper``, ``gripper_full``: ``assets/scenes/NAME.toml`` with the
  velocity-level stepper (M22 IV) at δt = 1 ms for ``--duration`` s (default: the scene's). Wall
  time per step split into stages (contact query, assembly, solve, pose update). A short
  warm-up run first, so the kernels are compiled or loaded from the cache before timing.
- ``incline``: a 1 kg, 0.1 m box resting on the compliant slab of
  ``assets/scenes/compliant_incline.toml`` with gravity tilted 10° instead, 4 s, the continuous
  integrator with ``friction = "compliant"`` (output interval 0.05 s); RHS evaluations and the
  box's drift over the last second (exact statics: < 1e-9 m) are reported.
- ``coin_first_run``: ``fieldgen simulate assets/scenes/coin.toml`` as a child process twice with
  ``NUMBA_CACHE_DIR`` set to a fresh directory: cold (every kernel compiled) then warm (loaded
  from that cache); then, on another fresh directory, ``fieldgen compile-kernels`` (the install
  step) and the first run after it. Wall and CPU seconds of each process, and the pause each
  first run adds to the warm one (docs/design/first-run.md).

``--cold`` also times each in-process scene in a child with a fresh kernel cache.
Report the load (``uptime``) with the figures: on a shared machine they scale with it. The
``realtime_factor_cpu`` columns divide by the process's CPU time instead of the wall time (the
run is single-threaded), which the other processes' load inflates much less.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fieldgen.runtime.dynamics.simulate import simulate
from fieldgen.runtime.scene.load import load_scene

ROOT = Path(__file__).resolve().parent.parent
SCENES = ROOT / "assets" / "scenes"
G = 9.81


def incline_scene(theta_deg: float = 10.0):
    """compliant_incline.toml with gravity tilted ``theta_deg`` about y."""
    scene, _ = load_scene(SCENES / "compliant_incline.toml")
    th = np.radians(theta_deg)
    return dataclasses.replace(scene, gravity=G * np.array([np.sin(th), 0.0, -np.cos(th)]))


def incline_row(duration: float = 4.0) -> dict:
    scene = incline_scene()
    simulate(scene, 0.05, 0.05, "continuous", friction="compliant")          # warm-up
    cpu = time.process_time()
    result = simulate(scene, duration, 0.05, "continuous", friction="compliant", record_every=1)
    cpu = time.process_time() - cpu
    box = [n for n, b in enumerate(scene.bodies) if b.name == "box"][0]
    times, positions = np.asarray(result.times), np.asarray(result.positions)[:, box]
    last = times >= times[-1] - 1.0 - 1e-9
    drift = float(np.linalg.norm(positions[last] - positions[last][0], axis=1).max())
    return {"scene": "incline (10°, compliant friction)", "simulated_seconds": duration,
            "wall_seconds": round(result.wall_seconds, 3), "realtime_factor": round(result.realtime_factor, 3),
            "cpu_seconds": round(cpu, 3), "realtime_factor_cpu": round(duration / cpu, 3),
            "rhs_evaluations": result.rhs_evaluations, "radau_segments": result.steps,
            "drift_last_second_m": drift}


def stepper_row(name: str, duration: float | None) -> dict | None:
    path = SCENES / f"{name}.toml"
    if not path.is_file():
        print(f"{name}: no scene file {path}, skipped")
        return None
    scene, settings = load_scene(path)
    duration = duration or float(settings.get("duration", 0.5))
    simulate(scene, 0.002, 1e-3)                          # warm-up (numba, caches)
    cpu = time.process_time()
    result = simulate(scene, duration, 1e-3)
    cpu = time.process_time() - cpu
    cps = result.contacts_per_step
    return {"scene": name, "steps": result.steps, "wall_seconds": round(result.wall_seconds, 3),
            "realtime_factor": round(result.realtime_factor, 3), "realtime_factor_cpu": round(duration / cpu, 3),
            "contacts_per_step_mean": round(float(cps.mean()), 1), "contacts_per_step_max": int(cps.max()),
            "ms_per_step": round(1e3 * result.wall_seconds / max(result.steps, 1), 3),
            "cpu_ms_per_step": round(1e3 * cpu / max(result.steps, 1), 3),
            **{f"{k}_ms": round(1e3 * v / max(result.steps, 1), 3) for k, v in result.stage_seconds.items()}}


def _timed_child(args: list[str], cache: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run ``args`` with NUMBA_CACHE_DIR=cache: the process, its wall and CPU seconds."""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, NUMBA_CACHE_DIR=cache),
                          cwd=ROOT, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, {"process_seconds": round(time.perf_counter() - start, 2),
                  "cpu_seconds": round(after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime, 2)}


def first_run_row(scene: str = "coin", duration: float = 0.6) -> dict:
    """The CLI on a fresh kernel cache: cold, then warm; and on another fresh cache after
    ``fieldgen compile-kernels`` (what ``make install`` runs): the first run after install."""
    simulate_args = [sys.executable, "-m", "fieldgen.cli.main", "simulate", str(SCENES / f"{scene}.toml"),
                     "--duration", str(duration), "--json"]

    def run(cache: str) -> dict:
        done, times = _timed_child(simulate_args, cache)
        return {**times, "realtime_factor": round(json.loads(done.stdout)["realtime_factor"], 3),
                "compile_message": "compiling fieldgen's contact kernels" in done.stderr}

    with tempfile.TemporaryDirectory() as cache:
        cold, warm = run(cache), run(cache)
    with tempfile.TemporaryDirectory() as cache:
        _, install_step = _timed_child([sys.executable, "-m", "fieldgen.cli.main", "compile-kernels", "-q"], cache)
        after_install = run(cache)
    return {"scene": f"{scene}_first_run", "cold": cold, "warm": warm, "compile_kernels": install_step,
            "first_run_after_compile_kernels": after_install,
            "pause_seconds": round(cold["process_seconds"] - warm["process_seconds"], 2),
            "pause_after_compile_kernels_seconds": round(after_install["process_seconds"] - warm["process_seconds"], 2)}


def cold_row(name: str, duration: float | None) -> dict:
    """This script's own row for ``name`` in a child with a fresh kernel cache (no warm-up benefit)."""
    with tempfile.TemporaryDirectory() as cache:
        args = [sys.executable, __file__, "--scenes", name, "--no-warm-up-report"]
        if duration:
            args += ["--duration", str(duration)]
        start = time.perf_counter()
        subprocess.run(args, env=dict(os.environ, NUMBA_CACHE_DIR=cache), check=True, capture_output=True)
        return {"scene": name, "cold_process_seconds": round(time.perf_counter() - start, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=None, help="simulated seconds of the stepper scenes")
    parser.add_argument("--scenes", nargs="*", default=["coin", "gripper_full", "incline", "coin_first_run"])
    parser.add_argument("--cold", action="store_true", help="also time each scene in a child with a fresh cache")
    parser.add_argument("--no-warm-up-report", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    print(json.dumps({"load": os.getloadavg()}))
    for name in args.scenes:
        if name == "coin_first_run":
            row = first_run_row()
        elif name == "incline":
            row = incline_row()
        else:
            row = stepper_row(name, args.duration)
        if row is not None:
            print(json.dumps(row), flush=True)
        if args.cold and name != "coin_first_run":
            print(json.dumps(cold_row(name, args.duration)), flush=True)
    print(json.dumps({"load": os.getloadavg()}))


if __name__ == "__main__":
    main()
