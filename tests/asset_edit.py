"""Copies of a built asset changed with plain vtk, independently of fieldgen's writer, for the
tests that feed fieldgen a damaged or tampered asset: :func:`edited_copy` for any change to the
grid, :func:`with_metadata` for a new ``fieldgen_metadata`` text."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from vtkmodules.vtkCommonCore import vtkStringArray
from vtkmodules.vtkIOXML import vtkXMLUnstructuredGridReader, vtkXMLUnstructuredGridWriter

METADATA = "fieldgen_metadata"


def edited_copy(src: Path, dst: Path, edit: Callable) -> Path:
    """Read the asset ``src``, call ``edit`` on its grid (a ``vtkUnstructuredGrid``) and write the
    grid to ``dst`` (vtk's default XML data mode)."""
    reader = vtkXMLUnstructuredGridReader()
    reader.SetFileName(str(src))
    reader.Update()
    grid = reader.GetOutput()
    edit(grid)
    writer = vtkXMLUnstructuredGridWriter()
    writer.SetFileName(str(dst))
    writer.SetInputData(grid)
    writer.Write()
    return dst


def with_metadata(src: Path, dst: Path, replace: Callable[[str], str]) -> Path:
    """A copy of the asset ``src`` at ``dst`` whose metadata text is ``replace(text)`` of the text
    stored (as given: it need not be JSON), stored as a vtk string array."""
    def edit(grid) -> None:
        field = grid.GetFieldData()
        stored = field.GetAbstractArray(METADATA)
        if isinstance(stored, vtkStringArray):
            text = stored.GetValue(0)
        else:                             # characters as a numeric array
            text = bytes(int(stored.GetValue(k)) for k in range(stored.GetNumberOfValues())).decode()
        array = vtkStringArray()
        array.SetName(METADATA)
        array.InsertNextValue(replace(text))
        field.RemoveArray(METADATA)
        field.AddArray(array)

    return edited_copy(src, dst, edit)
