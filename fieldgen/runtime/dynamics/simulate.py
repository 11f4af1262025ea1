"""Rigid-body dynamics driven by pressure-field contact: a run's settings and its integrator
(docs/model.md §5; M22 IV; D 5.3, 7.1).

Two integrators over a :class:`~fieldgen.runtime.dynamics.bodies.Scene`:

- ``"velocity"`` (docs/model.md §5.3-5.4; M22 IV), fixed step δt, compliant point contacts
  solved by a convex minimisation and rigid contacts by the Stewart–Trinkle LCP:
  :mod:`fieldgen.runtime.dynamics.velocity_integrator`;
- ``"continuous"`` (docs/model.md §5.2; D 5.3, E19 VIII): the pressure-field wrench as a force
  in the Newton–Euler equations, integrated by Radau with error control:
  :mod:`fieldgen.runtime.dynamics.continuous_integrator`, or with tangentially compliant
  friction (D 6) :mod:`fieldgen.runtime.dynamics.compliant_friction`.

:func:`simulate` checks the settings and the scene, then runs one of them with the contact
warnings kept once per (pair, kind) (:mod:`fieldgen.runtime.dynamics.warnings`).
"""

from __future__ import annotations

import numpy as np

from fieldgen.errors import BuildError, OptionError
from fieldgen.progress import Progress
from fieldgen.runtime.contact.geometries import RigidGeometry
from fieldgen.runtime.dynamics.bodies import Scene
from fieldgen.runtime.dynamics.compliant_friction import check_pairs, run_compliant
from fieldgen.runtime.dynamics.choices import FRICTION_MODELS, INTEGRATORS, step_count
from fieldgen.runtime.dynamics.contact_wrenches import contact_pairs
from fieldgen.runtime.dynamics.continuous_integrator import run_continuous
from fieldgen.runtime.dynamics.convex_step import DEFAULT_STICTION_VELOCITY
from fieldgen.runtime.dynamics.recording import SimulationResult
from fieldgen.runtime.dynamics.velocity_integrator import run_velocity
from fieldgen.runtime.dynamics.warnings import ContactWarningLog, collecting
from fieldgen.threads import blas_held



def run_settings(friction: str | None = None, integrator: str | None = None, *, path=None) -> tuple[str, str]:
    """The friction model and integrator of a run, defaults filled in: regularised friction
    (D 5.3) unless asked; the continuous integrator for compliant friction (its friction
    springs, D 6, are states of the ODE), the velocity integrator otherwise. OptionError for an
    unknown name or compliant friction with the velocity integrator (naming ``path``, the scene)."""
    friction = friction or "regularised"
    if friction not in FRICTION_MODELS:
        raise OptionError(f"unknown friction model {friction!r}", path=path, fix=f"use one of {FRICTION_MODELS}")
    integrator = integrator or ("continuous" if friction == "compliant" else "velocity")
    if integrator not in INTEGRATORS:
        raise OptionError(f"unknown integrator {integrator!r}", path=path, fix=f"use one of {INTEGRATORS}")
    if friction == "compliant" and integrator != "continuous":
        raise OptionError("compliant friction integrates a friction spring per contact and runs only in the "
                          "continuous integrator", path=path,
                          fix="use --integrator continuous (the default with --friction compliant)")
    return friction, integrator


def check_integrator(scene: Scene, integrator: str, *, path=None) -> None:
    """OptionError unless ``integrator`` can step every contact ``scene`` may contain.

    The continuous integrator integrates pressure-field wrenches (D 5.3): a pair of rigid
    geometries has no pressure field, so it has no force there and would pass through. Such
    a scene is refused before the first step, naming the pair, rather than run with the
    contact dropped; the velocity integrator steps rigid pairs with the LCP."""
    if integrator not in INTEGRATORS:
        raise OptionError(f"unknown integrator {integrator!r}", path=path, fix=f"use one of {INTEGRATORS}")
    if integrator != "continuous":
        return
    for i, b in enumerate(scene.bodies):
        for c in scene.bodies[i + 1:]:
            if isinstance(b.geometry, RigidGeometry) and isinstance(c.geometry, RigidGeometry) and \
                    "dynamic" in (b.kind, c.kind):
                raise OptionError(
                    f"the continuous integrator has no contact between two rigid geometries, and bodies "
                    f"{b.name!r} and {c.name!r} are both rigid (one of them dynamic): their contact would be "
                    f"dropped", path=path,
                    fix="use --integrator velocity (rigid contacts by the Stewart–Trinkle LCP), or give one of "
                        "the two a compliant geometry")


def simulate(scene: Scene, duration: float, dt: float = 1e-3, integrator: str | None = None, *,
             record_every: int = 1, record_surfaces: bool = False, progress: Progress | None = None,
             stiction_velocity: float = DEFAULT_STICTION_VELOCITY, rtol: float = 1e-6, atol: float = 1e-9,
             stop=None, friction: str | None = None, path=None) -> SimulationResult:
    """Simulate ``scene`` for ``duration`` seconds.

    ``dt``: the fixed step (velocity) or the output interval (continuous). Every
    ``record_every``-th step is recorded (always the first and last). ``stop(t, states)``
    may end the run early by returning True. ``rtol``/``atol`` are Radau's tolerances.
    ``friction="compliant"`` (continuous only): tangentially compliant Coulomb friction (D 6).
    Unset ``integrator``/``friction`` take the defaults of :func:`run_settings`. ``path``: the scene
    file an error names.
    """
    friction, integrator = run_settings(friction, integrator)
    check_integrator(scene, integrator)
    if not (duration > 0 and dt > 0 and np.isfinite(duration) and np.isfinite(dt)):
        raise OptionError(f"duration {duration} s and dt {dt} s must be positive", fix="use e.g. --duration 1 --dt 1e-3")
    n_steps = step_count(duration, dt)
    progress = progress or Progress(enabled=False)
    # A state that overflows is reported by its divergence check (recording), naming the body,
    # not by numpy's RuntimeWarnings on the way there.
    with blas_held(), collecting(ContactWarningLog()) as log, np.errstate(over="ignore", invalid="ignore"):
        try:
            if integrator == "velocity":
                result = run_velocity(scene, n_steps, dt, record_every, record_surfaces, progress, stiction_velocity,
                                      stop)
            elif friction == "compliant":      # tangential compliance (D 6): friction springs in the ODE
                try:
                    check_pairs(scene, contact_pairs(scene))
                except ValueError as exc:
                    raise OptionError(str(exc), fix="set tangential_stiffness and tangential_damping > 0") from None
                result = run_compliant(scene, n_steps, dt, record_every, record_surfaces, progress, rtol, atol, stop)
            else:
                result = run_continuous(scene, n_steps, dt, record_every, record_surfaces, progress, rtol, atol, stop)
        except np.linalg.LinAlgError as error:    # a step's system: inertias of no scale next to the contact's
            raise BuildError(f"a step's linear system could not be solved ({error})", path=path, fix=(
                "check the bodies' masses and inertias: a moment far smaller than the mass times the body's "
                "size squared (inertia = [1e-30, ...] for a 5 cm box of 1 kg) is spun without bound by any "
                "contact; leave inertia out to take it from the geometry")) from None
    result.warnings = log.as_list()
    return result
