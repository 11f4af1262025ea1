"""MMG (``mmgpy``: MMGS for surfaces, MMG3D for tet meshes) run the one way: the remeshing
called with its options, and a failure, raised or reported by its return code, turned into one
exception the caller words for its own stage (docs/model.md §2.4, §2.10, §2.11).

MMG's return codes: 0 success, 1 stopped early with a valid mesh (the caller's own checks judge
it), 2 failed with no usable mesh.
"""

from __future__ import annotations


class MmgFailure(RuntimeError):
    """MMG failed: its message, or the return code it reported."""


def remesh(mesh, **options) -> None:
    """``mesh.remesh(**options)`` (an ``mmgpy.MmgMeshS`` or ``MmgMesh3D``, its arrays set), in
    place; MmgFailure when MMG raises or returns 2 or more."""
    try:
        done = mesh.remesh(**options)
    except RuntimeError as error:
        raise MmgFailure(str(error)) from None
    if isinstance(done, dict) and int(done.get("return_code", 0)) >= 2:
        raise MmgFailure(f"return code {done['return_code']}")
