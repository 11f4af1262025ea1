"""fieldgen's pressure-field contact inside a Drake simulation (docs/model.md §5.5, README "Using
the authored field in Drake").

:func:`add_pressure_field_contact` adds a Drake ``LeafSystem`` that reads a ``MultibodyPlant``'s
body poses and spatial velocities, computes the contact wrench of every compliant pair among
the bodies it is given with fieldgen's runtime (the authored field: cores, skins, bonded faces,
nonlinear laws) and feeds them to the plant's applied-spatial-force input. pydrake is the
optional extra ``drake``; it is imported only when the function is called.
"""

from fieldgen.drake.system import add_pressure_field_contact

__all__ = ["add_pressure_field_contact"]
