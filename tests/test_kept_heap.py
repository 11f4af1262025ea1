"""Freed memory kept in the heap while a build runs, given back after (fieldgen/heap.py).

Measured by the process's minor page faults (getrusage): an array freed to the system and made
again is paged in again; one kept in the heap is not."""

from __future__ import annotations

import resource

import numpy as np
import pytest
import trimesh

import fieldgen.heap as heap
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build

pytestmark = pytest.mark.skipif(heap.LIBC is None, reason="the C library is not glibc: nothing is changed")

SIZE = 200 * 2 ** 20        # an array of the estimate's size at 300k tets


def faults_of_a_second_array() -> int:
    """Minor page faults of making (and filling) an array of SIZE bytes after freeing one."""
    first = np.ones(SIZE // 8)
    del first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    second = np.ones(SIZE // 8)
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
    # The thresholds are glibc's again, and the kept memory went back to the system.
    assert faults_of_a_second_array() > 20
    before = resident_bytes()
    heap.kept_heap(lambda: faults_of_a_second_array())()
    assert resident_bytes() < before + SIZE / 4


def test_nested_calls_keep_the_heap_until_the_outermost_ends():
    def outer():
        heap.kept_heap(lambda: None)()          # an inner call ends first
        return faults_of_a_second_array()

    assert heap.kept_heap(outer)() < faults_of_a_second_array() / 10


def test_the_build_keeps_the_heap_and_puts_the_defaults_back(tmp_path, monkeypatch):
    set_to = []
    monkeypatch.setattr(heap, "_thresholds", set_to.append)
    trimesh.creation.box(extents=(0.04, 0.03, 0.02)).export(tmp_path / "box.stl")
    build(tmp_path / "box.stl", tmp_path / "box.vtu", BuildOptions(modulus=1e5, dissipation=1.0, edge_length=0.01))
    assert set_to == [heap.KEPT_BYTES, heap.DEFAULT_THRESHOLD]
