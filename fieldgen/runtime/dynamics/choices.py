"""The names a scene file or ``fieldgen simulate`` may choose (docs/model.md §5): a module of its
own, with no imports, so the command line can offer them without loading the simulator."""

#: Integrators: velocity-level time stepping (M22 IV), or continuous (Radau) for compliant friction.
INTEGRATORS = ("velocity", "continuous")
#: Friction models of the simulator: regularised Coulomb (D 5.3), or compliant (D 6, continuous only).
FRICTION_MODELS = ("regularised", "compliant")
