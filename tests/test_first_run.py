"""The first run after install: numba compiles the runtime's kernels once, says so on stderr, and
caches them where the user can write (docs/model.md §5; fieldgen/runtime/contact/kernels.py).

Each run is a child process with ``NUMBA_CACHE_DIR`` pointing at a fresh directory, so the first
run really compiles (a cold cache) and the second loads what the first cached."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fieldgen.runtime.contact.kernels import COMPILING_MESSAGE

ROOT = Path(__file__).resolve().parent.parent
FIELDGEN = [sys.executable, "-m", "fieldgen.cli.main"]
COIN = ROOT / "assets" / "scenes" / "coin.toml"


def _simulate(cache_dir: Path, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    start = time.perf_counter()
    done = subprocess.run(FIELDGEN + ["simulate", str(COIN), "--duration", "0.003", "--json", *extra],
                          capture_output=True, text=True, timeout=1200, env=env, cwd=ROOT)
    return done, time.perf_counter() - start


@pytest.mark.slow
def test_a_cold_cache_says_it_compiles_on_stderr_once_and_a_warm_one_is_silent(tmp_path):
    cache = tmp_path / "numba_cache"
    cache.mkdir()
    cold, cold_seconds = _simulate(cache)
    assert cold.returncode == 0, cold.stderr
    assert COMPILING_MESSAGE in cold.stderr and cold.stderr.count(COMPILING_MESSAGE) == 1
    assert COMPILING_MESSAGE not in cold.stdout
    assert json.loads(cold.stdout)["steps"] == 3                 # stdout stays clean JSON
    assert any(cache.rglob("*.nbi")), "the kernels were not cached in NUMBA_CACHE_DIR"

    warm, warm_seconds = _simulate(cache)
    assert warm.returncode == 0, warm.stderr
    assert COMPILING_MESSAGE not in warm.stderr
    assert json.loads(warm.stdout)["steps"] == 3
    print(f"first run {cold_seconds:.1f} s, second run {warm_seconds:.1f} s (load {os.getloadavg()[0]:.1f})")


@pytest.mark.slow
def test_quiet_keeps_the_compile_message_off_stderr(tmp_path):
    quiet, _ = _simulate(tmp_path, "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert COMPILING_MESSAGE not in quiet.stderr
    assert json.loads(quiet.stdout)["steps"] == 3


# After `fieldgen compile-kernels` a fresh process compiles nothing: every kernel it calls comes
# from numba's cache. The child counts numba's compile events (one per compiled signature, none
# for a cache load) and the cache loads of the kernels it called, over the velocity step (coin)
# and the continuous integrator with compliant friction (the incline), both face rules.
COUNT_COMPILES = """
import json, sys
from numba.core import event
from fieldgen.runtime.compile_kernels import entry_kernels, runtime_kernels
from fieldgen.runtime.dynamics.simulate import simulate
from fieldgen.runtime.scene.load import load_scene
import dataclasses
compiled = []
with event.install_recorder("numba:compile") as recorder:
    for name, integrator, friction, rule in (("coin", "velocity", None, "drake"),
                                             ("compliant_incline", "continuous", "compliant", "all")):
        scene, _ = load_scene(sys.argv[1] + "/" + name + ".toml")
        simulate(dataclasses.replace(scene, face_rule=rule), 0.003, 1e-3, integrator, friction=friction)
loads = sum(sum(k.stats.cache_hits.values()) for _, k in entry_kernels(runtime_kernels()))
print(json.dumps({"compiles": sum(1 for _, ev in recorder.buffer if ev.is_start), "cache_loads": loads}))
"""


@pytest.mark.slow
def test_after_compile_kernels_a_fresh_process_compiles_nothing_and_says_nothing(tmp_path):
    cache = tmp_path / "numba_cache"
    cache.mkdir()
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    step = subprocess.run(FIELDGEN + ["compile-kernels", "--json"], capture_output=True, text=True, timeout=1800,
                          env=env, cwd=ROOT)
    assert step.returncode == 0, step.stderr
    done = json.loads(step.stdout)
    assert done["compiled"] == done["signatures"] > 0 and done["loaded"] == 0, done
    assert str(cache) in done["cache_dirs"][0]
    # only a kernel for CPUs without fused multiply-add may be left (drake_arithmetic.relative_transform)
    assert set(done["not_reached"]) <= {"fieldgen.runtime.contact.drake_arithmetic._relative_transform"}, done

    child = subprocess.run([sys.executable, "-c", COUNT_COMPILES, str(ROOT / "assets" / "scenes")],
                           capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert child.returncode == 0, child.stderr
    counts = json.loads(child.stdout)
    assert counts["compiles"] == 0 and counts["cache_loads"] > 0, counts

    first, seconds = _simulate(cache)
    assert first.returncode == 0, first.stderr
    assert COMPILING_MESSAGE not in first.stderr
    assert json.loads(first.stdout)["steps"] == 3
    again = subprocess.run(FIELDGEN + ["compile-kernels", "--json"], capture_output=True, text=True, timeout=600,
                           env=env, cwd=ROOT)
    assert json.loads(again.stdout)["compiled"] == 0                 # a second install step loads, not compiles
    print(f"first run after compile-kernels {seconds:.1f} s (load {os.getloadavg()[0]:.1f})")


def test_entry_kernels_are_the_ones_python_calls():
    """A kernel called only from other kernels is compiled into them (its caller's cache holds it),
    so compile-kernels counts and checks only the kernels Python calls."""
    from fieldgen.runtime.compile_kernels import entry_kernels, runtime_kernels

    every = dict(runtime_kernels())
    entries = dict(entry_kernels(list(every.items())))
    contact = "fieldgen.runtime.contact."
    for name in ("clip.tri_tet_polygons", "clip.tet_tet_polygons", "bvh._traverse", "drake_distance._distances",
                 "tangential._tractions", "wrench._integrate"):
        assert contact + name in entries, name
    for name in ("polygon_output.trimmed_faces", "drake_distance._triangle_distance2", "bvh._pad", "bvh._overlap"):
        assert contact + name in every and contact + name not in entries, name
    assert "fieldgen.runtime.dynamics.convex_step._solve_convex" in entries
    assert "fieldgen.runtime.dynamics.convex_step._cost" not in entries


@pytest.mark.slow
def test_a_build_that_compiles_the_sliver_moves_says_so(tmp_path):
    """The surface stage's sliver moves are numba kernels too (fieldgen/surface/slivers.py): a
    build on a cold cache that runs them says what the pause is, once, on stderr."""
    from test_surface_tolerance import sliver_box       # lazy: its module's meshes, for this test only

    sliver_box((20.0, 10.0, 8.0)).export(tmp_path / "box.stl")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba_cache"))
    done = subprocess.run(FIELDGEN + ["build", str(tmp_path / "box.stl"), "--units", "mm", "--modulus", "1e5",
                                      "--dissipation", "1", "--surface-tolerance", "0.05", "--edge-length", "3",
                                      "-o", str(tmp_path / "box.vtu"), "--json"],
                          capture_output=True, text=True, timeout=1200, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(COMPILING_MESSAGE) == 1 and COMPILING_MESSAGE not in done.stdout
    assert json.loads(done.stdout)["tets"] > 0
