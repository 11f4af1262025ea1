"""Cost of tangentially compliant friction (D 6) against regularised friction, continuous integrator.

Run: .venv/bin/python benchmarks/tangential_cost.py [--duration 1.0] [--scene compliant_incline]
Prints, for the scene (default assets/scenes/compliant_incline.toml):

- per right-hand-side evaluation: the contact wrenches of all bodies
  (``dynamics.contact_wrenches.contact_wrenches``) with regularised friction and with friction
  springs, in ms, from the scene's initial state (best of several runs);
- per run of ``--duration`` simulated seconds: wall time, Radau calls (one per output interval
  and schedule break), right-hand-side evaluations and wall ms per evaluation, for both models,
  and the box's drift after the first half (regularised friction creeps; compliant does not).

The machine is shared: the 1-minute load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from fieldgen.runtime.scene.load import load_scene
from fieldgen.runtime.dynamics.contact_wrenches import contact_pairs, contact_wrenches
from fieldgen.runtime.dynamics.simulate import simulate

SCENES = Path(__file__).resolve().parent.parent / "assets" / "scenes"


def best_ms(fn, repeat=50):
    fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - start) / repeat)
    return 1e3 * best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=1.0)
    parser.add_argument("--scene", default="compliant_incline")
    args = parser.parse_args()
    scene, settings = load_scene(SCENES / f"{args.scene}.toml")
    dt = float(settings.get("dt", 0.05))
    states = [b.state for b in scene.bodies]
    pairs = contact_pairs(scene)
    springs = np.zeros((len(pairs), 6))
    print(f"scene {args.scene}: {len(scene.bodies)} bodies, {len(pairs)} friction springs, load {os.getloadavg()[0]:.2f}")
    reg = best_ms(lambda: contact_wrenches(scene, states, pairs))
    com = best_ms(lambda: contact_wrenches(scene, states, pairs, springs))
    print(f"per RHS evaluation: regularised {reg:.3f} ms, compliant {com:.3f} ms ({com / reg:.2f} x)")
    print("| friction | wall s | Radau calls | RHS evaluations | ms per RHS | drift after t/2 (m) | load |")
    print("|---|---|---|---|---|---|---|")
    for friction in ("regularised", "compliant"):
        start = time.perf_counter()
        res = simulate(scene, args.duration, dt, "continuous", friction=friction)
        wall = time.perf_counter() - start
        half = np.searchsorted(res.times, res.times[-1] / 2)
        box = len(scene.bodies) - 1
        drift = float(np.linalg.norm(res.positions[-1, box] - res.positions[half, box]))
        n = res.rhs_evaluations
        print(f"| {friction} | {wall:.2f} | {res.steps} | {n} | {1e3 * wall / max(n, 1):.3f} | {drift:.3e} | "
              f"{os.getloadavg()[0]:.2f} |")


if __name__ == "__main__":
    main()
