"""The same bytes whatever the BLAS thread count (fieldgen/threads.py).

A BLAS dot product over more than about ten thousand values is split among OpenBLAS's threads
and its last bits follow their number; a CAD part's estimate sums over that many free faces, so
before every command ran on one BLAS thread a build's metadata differed between a one-core and a
two-core machine (featuretype.STL: ``error_estimate.surface_gradient`` 0.1902624499510571 against
0.19026244995105712).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner
from threadpoolctl import threadpool_info, threadpool_limits

import fieldgen.cli.validate as validate_command_module
import fieldgen.sizing.accuracy as accuracy
from fieldgen.cli.main import main
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build

ROOT = Path(__file__).resolve().parents[1]


def blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_a_dot_product_this_long_depends_on_the_thread_count():
    """The premise, checked where it runs: without one thread, the bits differ."""
    rng = np.random.default_rng(0)
    x, y = rng.random(100_000), rng.random(100_000)
    with threadpool_limits(1):
        one = float(x @ y)
    with threadpool_limits(2):
        two = float(x @ y)
    if one == two:
        pytest.skip("this machine's BLAS does not split a dot product of 100,000 values")
    assert one != two


def test_the_build_runs_on_one_blas_thread_and_gives_the_callers_back(tmp_path, monkeypatch):
    seen = []

    def recording(mesh, extent, law, original=accuracy.estimate_error):
        seen.append(blas_threads())
        return original(mesh, extent, law)

    monkeypatch.setattr(accuracy, "estimate_error", recording)
    trimesh.creation.box(extents=(0.04, 0.03, 0.02)).export(tmp_path / "box.stl")
    with threadpool_limits(2):
        before = blas_threads()
        build(tmp_path / "box.stl", tmp_path / "box.vtu", BuildOptions(modulus=1e5, dissipation=1.0))
        assert blas_threads() == before
    assert seen and all(threads == {1} for threads in seen)


def test_every_command_runs_on_one_blas_thread(tmp_path, monkeypatch):
    seen = []

    def recording(path):
        seen.append(blas_threads())
        raise FileNotFoundError(path)

    monkeypatch.setattr(validate_command_module, "validate_asset", recording)
    (tmp_path / "a.vtu").write_text("")
    with threadpool_limits(2):
        CliRunner().invoke(main, ["validate", str(tmp_path / "a.vtu")])
    assert seen == [{1}]


@pytest.mark.slow
def test_a_cad_part_builds_to_the_same_bytes_with_one_and_two_blas_threads(tmp_path):
    """featuretype.STL (127 mm, 3.3k triangles), built by default in fresh processes."""
    blobs = []
    for threads in ("1", "2"):
        out = tmp_path / f"part{threads}.vtu"
        env = dict(os.environ, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads)
        proc = subprocess.run([sys.executable, "-m", "fieldgen.cli.main", "build",
                               str(ROOT / "tests" / "data" / "meshes" / "featuretype.STL"), "--units", "in",
                               "--modulus", "3e5", "--dissipation", "2", "-o", str(out), "--quiet"],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        blobs.append(out.read_bytes())
    assert blobs[0] == blobs[1]


ISOLATED = """
import json
from threadpoolctl import threadpool_info
from fieldgen.threads import one_blas_thread

@one_blas_thread
def command():
    import scipy.linalg  # noqa: F401  (loads scipy's own OpenBLAS, as a command's imports do)
    return sorted({(pool["prefix"], pool["num_threads"]) for pool in threadpool_info() if pool["user_api"] == "blas"})

print(json.dumps(command()))
"""


def test_a_blas_a_command_loads_later_runs_on_one_thread_too():
    """In a fresh process only numpy's OpenBLAS is loaded when a command starts; scipy's is loaded
    by the command's own imports and was left at one thread per core."""
    import json

    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")
    done = subprocess.run([sys.executable, "-c", ISOLATED], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True)
    pools = json.loads(done.stdout)
    assert pools and all(threads == 1 for _, threads in pools), pools
