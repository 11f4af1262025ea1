"""Real-time factor of the velocity-level stepper (M22 IV) at δt = 1 ms.

Run: .venv/bin/python benchmarks/simulate_realtime.py [--duration 0.5]
Prints, per scene, simulated seconds per wall second, contact constraints per step and the
wall time per step split into stages (contact query: contact surfaces and point contacts;
assembly: mass matrix, free velocity, contact frames and Jacobians; solve: the convex
Newton step or Lemke; pose_update: integrating the poses); the rest is recording.
The first step of the first scene includes numba compilation (cached afterwards), so a
short warm-up run is made first.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fieldgen.runtime.scene.load import load_scene
from fieldgen.runtime.dynamics.simulate import simulate

SCENES = Path(__file__).resolve().parent.parent / "assets" / "scenes"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=0.5)
    parser.add_argument("--scenes", nargs="*", default=["coin", "resting_box", "gripper", "gripper_full"])
    args = parser.parse_args()
    rows = []
    for name in args.scenes:
        path = SCENES / f"{name}.toml"
        if not path.is_file():
            print(f"{name}: no scene file {path}, skipped")
            continue
        scene, _ = load_scene(path)
        simulate(scene, 0.002, 1e-3)                          # warm-up (numba, caches)
        result = simulate(scene, args.duration, 1e-3)
        cps = result.contacts_per_step
        rows.append({"scene": name, "steps": result.steps, "wall_seconds": round(result.wall_seconds, 3),
                     "realtime_factor": round(result.realtime_factor, 3),
                     "contacts_per_step_mean": round(float(cps.mean()), 1), "contacts_per_step_max": int(cps.max()),
                     "ms_per_step": round(1e3 * result.wall_seconds / max(result.steps, 1), 3),
                     **{f"{k}_ms": round(1e3 * v / max(result.steps, 1), 3) for k, v in result.stage_seconds.items()}})
        print(json.dumps(rows[-1]))


if __name__ == "__main__":
    main()
