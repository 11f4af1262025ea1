"""The names a scene file or ``fieldgen simulate`` may choose (docs/model.md §5): a module of its
own, with no imports but math, so the command line can offer them without loading the simulator."""

import math

#: Integrators: velocity-level time stepping (M22 IV), or continuous (Radau) for compliant friction.
INTEGRATORS = ("velocity", "continuous")
#: Friction models of the simulator: regularised Coulomb (D 5.3), or compliant (D 6, continuous only).
FRICTION_MODELS = ("regularised", "compliant")


def step_count(duration: float, dt: float) -> int:
    """The steps a run of ``duration`` at ``dt`` takes: the next whole number (a duration a hair
    over a whole number of steps, by rounding, takes no extra one)."""
    return int(math.ceil(duration / dt - 1e-9))
