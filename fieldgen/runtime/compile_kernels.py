"""Compiling the runtime's kernels once per installation (docs/design/first-run.md).

``fieldgen compile-kernels`` (run by ``make install``) calls :func:`compile_kernels`: it runs
every path of the runtime that calls a numba kernel on small scenes of the primitives (a rigid
coin and a compliant ball on a compliant slab; the velocity step, the continuous integrator
with regularised and with compliant friction; both face rules; both surface representations;
Drake's distance field), so each kernel is compiled for exactly the argument types a run gives
it, and numba's cache (``cache=True``) keeps it where the user can write
(fieldgen/runtime/contact/kernels.py). A later run, in any process, loads every kernel from
that cache and compiles nothing.

Running the kernels, not listing their signatures, is what keeps the two in step: a kernel that
changes its arguments is compiled for the new ones the next time this runs.
"""

from __future__ import annotations

import importlib
import pkgutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba.core.registry import CPUDispatcher

from fieldgen.progress import Progress
from fieldgen.runtime import contact as contact_room
from fieldgen.runtime import dynamics as dynamics_room
from fieldgen.runtime.contact.drake_distance import distance_field
from fieldgen.runtime.contact.wrench import contact
from fieldgen.runtime.dynamics.bodies import Scene
from fieldgen.runtime.dynamics.simulate import simulate
from fieldgen.runtime.scene.load import body_from_table
from fieldgen.surface import slivers

#: A fixed slab fine enough that a small body touches under a quarter of its tets (the posed
#: subset of surface.py), with the friction spring's constants (compliant friction).
SLAB = {"name": "slab", "kind": "fixed", "mu_static": 0.5, "tangential_stiffness": 1e3, "tangential_damping": 20.0,
        "geometry": {"shape": "slab", "size": [0.2, 0.2, 0.02], "modulus": 1e6, "cells": [8, 8], "layers": 1,
                     "dissipation": 5.0}}
COIN = {"name": "coin", "mass": 0.005, "mu_static": 0.5, "position": [0.0, 0.0, 0.00099], "velocity": [0.1, 0.0, 0.0],
        "geometry": {"shape": "cylinder", "radius": 0.01, "height": 0.002, "segments": 12}}
BALL = {"name": "ball", "mass": 0.05, "mu_static": 0.5, "position": [0.0, 0.0, 0.0199],
        "geometry": {"shape": "ball", "radius": 0.02, "modulus": 1e6, "subdivisions": 1}}

#: (top body, face rule, integrator, friction): every way a run reaches the kernels.
RUNS = tuple((body, rule, integrator, friction)
             for body in (COIN, BALL) for rule in ("all", "drake")
             for integrator, friction in (("velocity", None), ("continuous", "regularised"),
                                          ("continuous", "compliant")))
STEPS = 3          #: steps of 1 ms per run: enough to reach every kernel of a step


@dataclass(frozen=True)
class KernelCompile:
    """What :func:`compile_kernels` did: the entry kernels (:func:`entry_kernels`) it reached,
    ``signatures`` in all, of which ``compiled`` were compiled now and ``loaded`` came from the
    cache; the entry kernels it did not reach (``not_reached``: on this machine no run calls
    them); where the cache is; seconds."""

    kernels: int
    signatures: int
    compiled: int
    loaded: int
    not_reached: tuple[str, ...]
    cache_dirs: tuple[str, ...]
    seconds: float

    def as_dict(self) -> dict:
        return {"kernels": self.kernels, "signatures": self.signatures, "compiled": self.compiled,
                "loaded": self.loaded, "not_reached": list(self.not_reached), "cache_dirs": list(self.cache_dirs),
                "seconds": round(self.seconds, 2)}


def runtime_kernels() -> list[tuple[str, CPUDispatcher]]:
    """Every numba kernel defined in the runtime's contact and dynamics modules, and the build's
    (the surface stage's sliver moves, docs/model.md §2.11), by name."""
    found = []
    modules = [importlib.import_module(f"{room.__name__}.{info.name}")
               for room in (contact_room, dynamics_room) for info in pkgutil.iter_modules(room.__path__)]
    for module in modules + [slivers]:
        for name, value in sorted(vars(module).items()):
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__:
                found.append((f"{module.__name__}.{name}", value))
    return found


def entry_kernels(kernels: list[tuple[str, CPUDispatcher]]) -> list[tuple[str, CPUDispatcher]]:
    """The kernels called from Python, not from another kernel: a kernel another calls is compiled
    into its caller, and the caller's cached code holds it (a warm run never loads it alone)."""
    called = {id(value) for _, k in kernels for name in k.py_func.__code__.co_names
              if isinstance(value := k.py_func.__globals__.get(name), CPUDispatcher)}
    return [(name, k) for name, k in kernels if id(k) not in called]


def _scene(top: dict, face_rule: str) -> Scene:
    here = Path.cwd()
    return Scene([body_from_table(SLAB, base_dir=here), body_from_table(top, base_dir=here)], face_rule=face_rule)


def _run_every_path() -> None:
    """Each run of :data:`RUNS` for :data:`STEPS` steps, recording its surfaces, and the contact
    query alone in both representations."""
    for top, face_rule, integrator, friction in RUNS:
        scene = _scene(top, face_rule)
        slab, body = scene.bodies
        X_WB = np.eye(4)
        X_WB[:3, :3] = body.state.rotation
        X_WB[:3, 3] = body.state.position
        for representation in ("polygon", "triangle"):
            contact(slab.geometry, np.eye(4), body.geometry, X_WB, representation=representation,
                    face_rule=face_rule)
        simulate(scene, STEPS * 1e-3, 1e-3, integrator, friction=friction, record_surfaces=True)
    ball = _scene(BALL, "all").bodies[1].geometry
    distance_field(ball.points, ball.tets)          # a legacy .vtk body's field (a mesh with inner vertices)
    # The build's sliver moves: every face of a unit octahedron is a cap at width 1.3 (height
    # 1.22, edges 1.41), so both the flips and the collapses run.
    octahedron = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=float)
    faces = np.array([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4], [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])
    slivers.without_slivers(octahedron, faces, np.zeros(len(faces), dtype=np.int64), 1.3)


def compile_kernels(progress: Progress | None = None) -> KernelCompile:
    """Compile (or load from the cache) every kernel a run can call; see the module docstring."""
    progress = progress or Progress(enabled=False)
    start = time.perf_counter()
    with progress.stage("compile kernels"):
        _run_every_path()
    entries = entry_kernels(runtime_kernels())
    reached = [(name, k) for name, k in entries if k.signatures]
    not_reached = tuple(name for name, k in entries if not k.signatures and k.targetoptions.get("inline") != "always")
    stats = [k.stats for _, k in reached]
    return KernelCompile(
        kernels=len(reached), signatures=sum(len(k.signatures) for _, k in reached),
        compiled=sum(sum(s.cache_misses.values()) for s in stats), loaded=sum(sum(s.cache_hits.values()) for s in stats),
        not_reached=not_reached, cache_dirs=tuple(sorted({str(s.cache_path) for s in stats})),
        seconds=time.perf_counter() - start)
