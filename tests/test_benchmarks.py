"""The build benchmark still runs: a small box end to end, and its real-part cases point at files
kept in the repository (benchmarks/README.md says how its figures are taken)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "build_stages.py"


def _module():
    spec = importlib.util.spec_from_file_location("build_stages", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_stages_runs_a_box_and_reports_every_stage(tmp_path):
    out = tmp_path / "bench.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--sizes", "10k", "--hyperbolic-sizes", "none",
                          "--no-parts", "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "box-10k" in run.stdout and "wall/TetGen" in run.stdout
    (case,) = json.loads(out.read_text())["cases"]
    assert case["case"] == "box-10k" and "error" not in case
    assert 5_000 < case["tets"] < 20_000
    stages = case["stage_seconds"]
    assert {"tetrahedralize", "extent", "damping", "write", "validate"} <= set(stages)
    # The whole build includes its TetGen stage, so the ratio is above 1.
    assert case["wall"] >= sum(stages.values()) and case["wall_over_tetgen"] > 1.0


def test_sized_parts_are_the_corpus_cad_parts_at_shrinking_edges():
    module = _module()
    cases = module.sized_part_cases(["300k", "1M"])
    names = {Path(case["input"]).name for case in cases}
    assert names == {"angle_block.STL", "idler_riser.STL", "featuretype.STL"}
    for case in cases:
        assert Path(case["input"]).is_file()
    by_part = {}
    for case in cases:
        by_part.setdefault(case["input"], []).append(case["options"]["edge_length"])
    # Three times as many tets: an edge shorter by the cube root of the ratio.
    for edges in by_part.values():
        assert abs(edges[0] / edges[1] - (1_000_000 / 300_000) ** (1 / 3)) < 1e-3


def test_an_unknown_sized_parts_size_is_refused_by_name():
    run = subprocess.run([sys.executable, str(SCRIPT), "--sizes", "none", "--hyperbolic-sizes", "none",
                          "--no-parts", "--sized-parts", "2k"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "--sized-parts" in run.stderr and "2k" in run.stderr and "300k" in run.stderr
