"""What type each option of ``fieldgen build`` has (:data:`KINDS`), in one place for both ways
options arrive: read from a spec or manifest file (:func:`coerce_option`, which reads text as a
number and one selector as a list of one), or built as a ``BuildOptions`` by a library user
(:func:`check_option_type`, which takes each value as it is and names the option by its flag).
"""

from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import Any

from fieldgen.errors import OptionError

NUMBER = "number"        #: int or float (numpy's too), not bool
PATH = "path"            #: a file's path
SELECTORS = "selectors"  #: a list of face selector strings
FLAG = "flag"            #: true or false
COUNT = "count"          #: a whole number
TEXT = "text"            #: a name out of a few (units, law, ...)

#: Each option's kind, by its name (``BuildOptions``'s field, the flag with underscores).
KINDS = {
    "units": TEXT, "core": PATH, "bonded": SELECTORS, "insulated": SELECTORS, "max_volume": NUMBER,
    "edge_length": NUMBER, "radius_edge": NUMBER, "law": TEXT, "modulus": NUMBER, "k": NUMBER, "table": PATH,
    "layer_tolerance": NUMBER, "expansion_rate": NUMBER, "dissipation": NUMBER, "mu_static": NUMBER,
    "mu_dynamic": NUMBER, "drake_vtk": PATH, "skin": NUMBER, "robust": FLAG, "tangential_stiffness": NUMBER,
    "tangential_damping": NUMBER, "accuracy": NUMBER, "threads": COUNT, "estimate": FLAG, "skin_mesh": TEXT,
    "compression": TEXT, "surface_tolerance": NUMBER,
}
PATH_OPTIONS = tuple(key for key, kind in KINDS.items() if kind == PATH)
#: Those that name a file read (a folder there is refused by its key).
READ_PATH_OPTIONS = ("core", "table")
LIST_OPTIONS = tuple(key for key, kind in KINDS.items() if kind == SELECTORS)
#: A value of each text option, for the fix of a wrong one.
TEXT_EXAMPLES = {"units": "mm", "law": "linear", "skin_mesh": "band", "compression": "zlib"}
PATH_EXAMPLES = {"core": "core.stl", "table": "law.csv", "drake_vtk": "part.vtk"}
NUMBER_EXAMPLES = {"modulus": "1e5", "accuracy": "0.01", "radius_edge": "1.414", "layer_tolerance": "100"}


def is_number(value: Any) -> bool:
    """A real number (Python's or numpy's), not a bool (True is no modulus)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_count(value: Any) -> bool:
    """A whole number (Python's or numpy's), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_selectors(value: Any) -> bool:
    """A list or tuple of strings."""
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


#: Whether a value given (not None) is of each kind, and what that kind is called in an error.
IS_KIND = {
    NUMBER: (is_number, "a number"),
    PATH: (lambda value: isinstance(value, (str, os.PathLike)), "a path (a string or os.PathLike)"),
    SELECTORS: (is_selectors, "a tuple of selector strings"),
    FLAG: (lambda value: isinstance(value, bool), "True or False"),
    COUNT: (is_count, "a whole number"),
    TEXT: (lambda value: isinstance(value, str), "a string"),
}


def check_option_type(key: str, value: Any, optional: bool) -> None:
    """OptionError naming ``key`` by its flag (``--modulus``) for a ``BuildOptions`` value that is
    not of its kind (:data:`KINDS`); None passes only for an ``optional`` option (one whose
    default is None). Values are taken as given: text is no number here, nor one string a tuple
    of selectors (reading a file makes those, :func:`coerce_option`)."""
    if value is None and optional:
        return
    kind = KINDS[key]
    test, noun = IS_KIND[kind]
    if test(value):
        return
    flag = f"--{key.replace('_', '-')}"
    number = NUMBER_EXAMPLES.get(key, "0.5")
    if kind == SELECTORS and isinstance(value, str):
        raise OptionError(f"{flag} must be a tuple of selector strings, got the single string {value!r}",
                          fix=f"give a tuple, e.g. {key}=({value!r},)")
    if kind == NUMBER and isinstance(value, str):
        raise OptionError(f"{flag} must be a number, got the string {value!r}",
                          fix=f"give a number, not text, e.g. {key}={number} (text is read as a number only "
                              "in spec and manifest files)")
    example = {NUMBER: number, PATH: f'"{PATH_EXAMPLES.get(key, "FILE")}"', SELECTORS: '("normal:0,0,-1",)',
               FLAG: "True", COUNT: "2", TEXT: f'"{TEXT_EXAMPLES.get(key, "")}"'}[kind]
    raise OptionError(f"{flag} must be {noun}, got {value!r} ({type(value).__name__})",
                      fix=f"give e.g. {key}={example}")


def check_path_value(key: str, value: Any, origin: str, fix: str) -> None:
    """Refuse (OptionError) a path key of a spec or manifest that is no string, an empty one
    (which would name the file's own folder) or one holding a NUL character."""
    if not isinstance(value, str):
        raise OptionError(f"option {key!r} must be a path string, got {value!r}", path=origin, fix=fix)
    if not value.strip():
        raise OptionError(f"option {key!r} is an empty string, not a path", path=origin, fix=fix)
    if "\0" in value:                    # os calls raise ValueError on it; the command line cannot pass one
        raise OptionError(f"option {key!r} = {value!r} holds a NUL character (\\u0000), which no file name can",
                          path=origin, fix=fix)


def check_not_folder(key: str, value: str, resolved: str, origin: str, fix: str) -> None:
    """Refuse (OptionError) a path key of a spec or manifest naming a folder (``input = "."``)
    where a file is read: named by its key and value, not by the bare folder it resolves to."""
    if os.path.isdir(resolved):
        raise OptionError(f"option {key!r} = {value!r} is a folder ({os.path.abspath(resolved)}), not a file",
                          path=origin, fix=fix)


def coerce_option(key: str, value: Any, origin: str, base_dir) -> Any:
    """``value`` of the option ``key`` as read from the file ``origin`` (or given as flags), as
    ``BuildOptions`` holds it: a selector string as a list of one, a path resolved against
    ``base_dir``, a number (text too) as a float. OptionError naming ``origin`` and the key when
    it is of another kind (:data:`KINDS`)."""
    kind = KINDS[key]
    if kind == SELECTORS:
        if isinstance(value, str):
            value = [value]
        if not is_selectors(value):
            raise OptionError(f"option {key!r} must be a list of selector strings, got {value!r}", path=origin,
                              fix='write e.g. bonded = ["normal:0,0,-1"]')
        return tuple(value)
    if kind == PATH:
        if value is None:
            return None
        check_path_value(key, value, origin, f'write {key} = "FILE" (quoted, relative to this file)')
        resolved = str(Path(base_dir) / value) if base_dir is not None and not os.path.isabs(value) else value
        if key in READ_PATH_OPTIONS:
            check_not_folder(key, value, resolved, origin, f'write {key} = "FILE": the {key} file itself, relative '
                                                           'to this file')
        return resolved
    if kind == FLAG:
        if not isinstance(value, bool):
            raise OptionError(f"option {key!r} must be true or false, got {value!r}", path=origin,
                              fix=f"write {key} = true")
        return value
    if kind == COUNT:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise OptionError(f"option {key!r} must be a whole number, got {value!r}", path=origin,
                              fix="write e.g. threads = 2")
        return value
    if kind == TEXT:
        if value is not None and not isinstance(value, str):
            raise OptionError(f"option {key!r} must be a string, got {value!r}", path=origin,
                              fix=f'write e.g. {key} = "{TEXT_EXAMPLES[key]}"')
        return value
    return None if value is None else _coerce_number(key, value, origin)


def _coerce_number(key: str, value: Any, origin: str) -> float:
    if isinstance(value, bool):         # TOML's true is no number (it would pass as 1.0)
        raise OptionError(f"option {key!r} must be a number, got {str(value).lower()}", path=origin,
                          fix="write a plain number, e.g. 1e5")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise OptionError(f"option {key!r} must be a number, got {value!r}", path=origin,
                          fix="write a plain number, e.g. 1e5") from None
