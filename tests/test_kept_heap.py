"""Freed memory kept in the heap while a build runs, given back after (fieldgen/heap.py).

Measured by the process's minor page faults (getrusage): an array freed to the system and made
again is paged in again; one kept in the heap is not."""

from __future__ import annotations

import resource
import subprocess
import sys

import numpy as np
import pytest
import trimesh

import fieldgen.calibrate.calibration as calibration
import fieldgen.heap as heap
import fieldgen.sizing.accuracy as accuracy
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build
from test_one_blas_thread import blas_threads

pytestmark = pytest.mark.skipif(heap.LIBC is None, reason="the C library is not glibc: nothing is changed")

SIZE = 200 * 2 ** 20        # an array of the estimate's size at 300k tets


def faults_of_a_second_array(size: int = SIZE) -> int:
    """Minor page faults of making (and filling) an array of ``size`` bytes after freeing one."""
    first = np.ones(size // 8)
    del first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    second = np.ones(size // 8)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del second
    return faults


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def test_an_array_freed_in_a_build_is_not_paged_in_again_and_is_given_back_after():
    outside = faults_of_a_second_array()
    inside = heap.kept_heap(faults_of_a_second_array)()
    assert outside > 20 and inside < outside / 10, (outside, inside)
    assert faults_of_a_second_array() > 20          # past the threshold after: paged in again
    before = resident_bytes()
    heap.kept_heap(lambda: faults_of_a_second_array())()
    assert resident_bytes() < before + SIZE / 4     # the kept memory went back to the system


def test_nested_calls_keep_the_heap_until_the_outermost_ends():
    def outer():
        heap.kept_heap(lambda: None)()          # an inner call ends first
        return faults_of_a_second_array()

    assert heap.kept_heap(outer)() < faults_of_a_second_array() / 10


CHURN = """
import resource, sys
import numpy as np
sys.path.insert(0, {root!r})
import fieldgen.heap as heap

def churn():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        a = np.ones(2 ** 20)        # 8 MiB: under glibc's dynamic threshold once it has risen
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

churn()
print(churn(), end=" ")
heap.kept_heap(lambda: None)()
churn()
print(churn())
"""


def test_arrays_under_the_dynamic_threshold_stay_in_the_heap_after_a_build(tmp_path):
    """glibc's dynamic mmap threshold rises to an 8 MiB array once one is freed; setting it back
    to 128 KiB after a build would page every later one in again (10k faults for 20 arrays)."""
    script = tmp_path / "churn.py"
    script.write_text(CHURN.format(root=str(__import__("pathlib").Path(heap.__file__).parents[1])))
    before, after = map(int, subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                                            check=True).stdout.split())
    assert after <= before + 50, (before, after)


def test_the_build_and_calibrate_run_inside_both_settings(tmp_path, monkeypatch):
    seen = []

    def recording(mesh, extent, law, original=accuracy.estimate_error):
        seen.append((heap.kept_heap.inside, blas_threads()))
        return original(mesh, extent, law)

    monkeypatch.setattr(accuracy, "estimate_error", recording)
    trimesh.creation.box(extents=(0.04, 0.03, 0.02)).export(tmp_path / "box.stl")
    build(tmp_path / "box.stl", tmp_path / "box.vtu", BuildOptions(modulus=1e5, dissipation=1.0))
    assert seen and all(inside == (1, {1}) for inside in seen)
    assert heap.kept_heap.inside == 0

    class Stop(Exception):
        pass

    def first_step(*args):
        seen.append((heap.kept_heap.inside, blas_threads()))
        raise Stop

    monkeypatch.setattr(calibration, "_check_outputs", first_step)
    with pytest.raises(Stop):
        calibration.calibrate("part.stl", "out.vtu", BuildOptions(), indenter_text="sphere:0.01",
                              direction=(0, 0, -1), data=None)
    assert seen[-1] == (1, {1}) and heap.kept_heap.inside == 0
