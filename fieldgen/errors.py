"""Errors a user can act on: each names the file, the defect and the fix."""

from __future__ import annotations


class FieldgenError(Exception):
    """Base class for every error fieldgen reports to a user.

    ``str(error)`` is one message of the form
    ``"<file>: <defect>. <fix>"`` (file and fix omitted when unknown).
    """

    def __init__(self, defect: str, *, path: str | None = None, fix: str | None = None):
        self.defect = defect
        self.path = None if path is None else str(path)
        self.fix = fix
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = self.defect.rstrip(".") + "."
        if self.path:
            text = f"{self.path}: {text}"
        if self.fix:
            fix = self.fix.rstrip(".")
            text = f"{text} {fix[:1].upper()}{fix[1:]}."       # a sentence of its own
        return text

    def __str__(self) -> str:
        return self.message


class InputError(FieldgenError):
    """An input file (surface, core, table, spec, asset) cannot be used as given."""


class OptionError(FieldgenError):
    """Options contradict each other or the geometry (e.g. a selector that matches no face)."""


class BuildError(FieldgenError):
    """A stage of the pipeline failed on input that passed the input checks."""


class MesherCrash(BuildError):
    """The mesher died (a signal, no output) or stopped on an internal error, rather than refusing
    the input: the same call with slightly different sizes may succeed (TetGen's size-field
    crashes, docs/model.md §2.10)."""


class TetGenStuck(MesherCrash):
    """TetGen stopped on an internal error: the surface's own needle or sliver triangles stop its
    refinement (docs/model.md §2.11, "TetGen failing on the input's own triangles")."""
