"""fieldgen: pressure-field contact assets from surface meshes, and the runtime that uses them.

Data flows one way (the model and its equations: docs/model.md):
surface -> tet mesh -> extent -> pressure -> asset -> runtime.
"""

__version__ = "0.1.0"
