"""How long `fieldgen calibrate` takes: a linear fit on a ~50k-tet part, seconds per stage.

The foam pad of ``assets/foam_pad.toml`` meshed finer (``--edge`` mm, default 1.4 -> 43k
tets), the bundled ``assets/press.csv`` (10 depths), a 10 mm sphere, ``--law linear``; and the
same with ``--law table`` (which adds the layered defect-correction rounds). Stages are those
of ``fieldgen.calibrate.calibration.calibrate``: meshing and extent once, the first contact, the contact
surfaces at the data's depths, the fit, the layered checks (nonlinear laws), the measurement of
the layered mesh, the final ``fieldgen build`` of the asset, the re-measurement of the written
asset. The load average is printed with each row: the machine is shared.

Usage::

    python benchmarks/calibrate_time.py
    python benchmarks/calibrate_time.py --edge 2.5 --laws linear
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fieldgen.options import options_from_spec  # noqa: E402
from fieldgen.calibrate.calibration import calibrate  # noqa: E402
from fieldgen.calibrate.data import read_data  # noqa: E402
from fieldgen.progress import Progress  # noqa: E402

STAGES = ("tetrahedralize", "extent", "indenter", "contact surfaces", "fit", "layered check", "measure", "build",
          "verify")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edge", type=float, default=1.4, help="edge length, mm")
    parser.add_argument("--laws", default="linear,table")
    args = parser.parse_args(argv)
    options, surface, _ = options_from_spec(ROOT / "assets" / "foam_pad.toml")
    options = dataclasses.replace(options, edge_length=args.edge)
    data = read_data(ROOT / "assets" / "press.csv", "mm,N")
    print("| law | tets (asset) | " + " | ".join(STAGES) + " | total s | load |")
    print("|---|---|" + "---|" * len(STAGES) + "---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for law in args.laws.split(","):
            progress = Progress(enabled=False)
            start = time.perf_counter()
            result = calibrate(surface, os.path.join(folder, "pad.vtu"), options, indenter_text="sphere:10",
                               direction=(0, 0, -1), data=data, law_kind=law, length_scale=1e-3, progress=progress)
            total = time.perf_counter() - start
            seconds = progress.stage_seconds
            print(f"| {law} | {result.tets} | " + " | ".join(f"{seconds.get(s, 0.0):.2f}" for s in STAGES)
                  + f" | {total:.1f} | {os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
