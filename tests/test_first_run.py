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
