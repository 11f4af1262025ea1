"""Running ``fieldgen calibrate`` as a user does, for the calibration tests: the data written
as the press CSV, the installed command run on a starting spec with a sphere indenter, the
``--json`` report returned."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

FIELDGEN = str(Path(sys.executable).parent / "fieldgen")


def calibrated_report(folder: Path, depths, forces, spec: str, indenter: str = "sphere:0.01") -> dict:
    """Write ``press.csv`` (depth_m, force_N) and ``start.toml`` (``spec``) into ``folder``, run
    ``fieldgen calibrate --law hyperbolic`` writing ``out.vtu`` there, and return its ``--json``
    report (asserting it exits 0)."""
    np.savetxt(folder / "press.csv", np.column_stack([depths, forces]), delimiter=",", fmt="%.17g",
               header="depth_m,force_N", comments="")
    (folder / "start.toml").write_text(spec)
    run = subprocess.run([FIELDGEN, "calibrate", "--spec", str(folder / "start.toml"), "--indenter", indenter,
                          "--data", str(folder / "press.csv"), "--law", "hyperbolic",
                          "-o", str(folder / "out.vtu"), "--json", "-q"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)
