"""The asset metadata's schema: the keys it must have and the shape of each value, top-level and
nested. One home for ``fieldgen validate``'s schema check (:func:`schema_problems`) and ``fieldgen
inspect``'s refusal (:func:`metadata_type_problems`, not strict), so the two agree: a value of the
wrong shape that inspect refuses fails validate's ``schema`` check, named the same way."""

from __future__ import annotations

import math

from fieldgen.io.asset import REQUIRED_METADATA, SCHEMA, UNITS

#: Every metadata key the README's asset-format section lists (``expansion_rate`` is optional:
#: only when the dissipation comes from an expansion rate).
DOCUMENTED_METADATA = ("schema", "units", "law", "characteristic_length", "dissipation", "friction",
                       "boundary", "extent_solution", "layer_tolerance", "max_interpolation_error",
                       "mesh", "source", "tool", "deterministic")
#: Metadata keys that hold objects, with the keys each must have; and those that hold numbers.
METADATA_OBJECTS = {"law": ("kind", "modulus"), "friction": ("static", "dynamic"), "source": ("file", "sha256"),
                    "tool": ("name", "version"), "units": tuple(UNITS), "boundary": (), "mesh": (),
                    "extent_solution": (), "tangential": ("stiffness", "damping")}
METADATA_NUMBERS = (("characteristic_length",), ("dissipation",), ("max_interpolation_error",),
                    ("layer_tolerance",), ("expansion_rate",), ("law", "modulus"), ("tangential", "stiffness"),
                    ("tangential", "damping"))


class CheckSkipped(Exception):
    """A check cannot run because something it needs failed earlier."""


def _number(value) -> bool:
    """A JSON number a float holds: not a bool, and not an integer past the floats (``1e400``
    written out as digits, which JSON allows and every computation with it would overflow)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


#: The nested metadata values ``fieldgen inspect``'s summary computes with or lays out (and a
#: reader of the asset would), each with a test and what it must be; a key that is absent is not
#: looked at (the summary leaves its line out).
NESTED_VALUES = (
    (("law", "extent"), lambda v: isinstance(v, list), "a list of extents"),
    (("boundary", "faces"), lambda v: isinstance(v, dict), "an object of face counts"),
    (("boundary", "core"), lambda v: v is None or isinstance(v, dict), "an object"),
    (("boundary", "bonded"), _strings, "a list of selector strings"),
    (("boundary", "insulated"), _strings, "a list of selector strings"),
    (("skin",), lambda v: isinstance(v, dict), "an object"),
    (("skin", "thickness"), lambda v: v is None or _number(v), "a number"),
    (("skin", "skin_volume_fraction"), _number, "a number"),
    (("skin", "cut_depth"), lambda v: isinstance(v, list) and len(v) == 2 and all(map(_number, v)), "two numbers"),
    (("skin", "rounding"), lambda v: v is None or _number(v), "a number"),
    (("skin", "cut_vertices_held"), _number, "a number"),
    (("error_estimate",), lambda v: isinstance(v, dict), "an object"),
    *((("error_estimate", key), _number, "a number") for key in ("extent", "pressure", "characteristic_length")),
    (("error_estimate", "accuracy"), lambda v: v is None or _number(v), "a number"),
)


def short_repr(value) -> str:
    """``repr(value)``, cut to 60 characters (an edited asset's value may be any size)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def metadata_number(meta: dict, *keys) -> float:
    """The finite number at ``keys``; CheckSkipped when absent, ValueError when not a finite number."""
    value = meta
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise CheckSkipped(f"needs metadata {'.'.join(keys)}")
        value = value[key]
    if not _number(value) or not math.isfinite(value):
        raise ValueError(f"metadata {'.'.join(keys)} is {short_repr(value)}, not a finite number")
    return float(value)


def nested_value_problems(meta: dict) -> list[str]:
    """What is wrong with the nested values of :data:`NESTED_VALUES` (an edited asset:
    ``"skin": [1]``, a word for a count)."""
    problems = []
    for keys, test, what in NESTED_VALUES:
        holder = meta
        for key in keys[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if not isinstance(holder, dict) or keys[-1] not in holder or test(holder[keys[-1]]):
            continue
        problems.append(f"{'.'.join(keys)} is {short_repr(holder[keys[-1]])}, not {what}")
    return problems


def metadata_type_problems(meta: dict, *, strict: bool = True) -> list[str]:
    """What is wrong with the metadata keys that are there: an object that is not one (or lacks
    its keys), a number that is not a finite number, a nested value of the wrong shape
    (:func:`nested_value_problems`, in either mode). Missing keys are not looked at (the schema
    check lists them). Not ``strict`` (``fieldgen inspect``'s summary): only what the summary
    cannot show; a null or non-finite number (shown as null) and an object's missing keys pass."""
    problems = []
    for key, inner in METADATA_OBJECTS.items():
        if key not in meta:
            continue
        if not isinstance(meta[key], dict):
            problems.append(f"{key} is not an object")
            continue
        absent = [name for name in inner if name not in meta[key]]
        if absent and strict:
            problems.append(f"{key} lacks {', '.join(absent)}")
    for keys in METADATA_NUMBERS:
        holder = meta if len(keys) == 1 else meta.get(keys[0])
        if not isinstance(holder, dict) or keys[-1] not in holder:
            continue
        if not strict and (holder[keys[-1]] is None or isinstance(holder[keys[-1]], float)):
            continue
        try:
            metadata_number(meta, *keys)
        except ValueError as error:
            problems.append(str(error))
    warnings = meta.get("warnings", [])
    if not (isinstance(warnings, list) and all(isinstance(w, str) for w in warnings)):
        problems.append(f"warnings is {short_repr(warnings)}, not a list of strings")
    return problems + nested_value_problems(meta)


def schema_problems(meta: dict) -> list[str]:
    """What ``fieldgen validate``'s ``schema`` check finds wrong: the schema name, then the
    required keys missing, else every value of the wrong type or shape
    (:func:`metadata_type_problems`), ``deterministic``, ``tool.name`` and the arrays' units."""
    if meta.get("schema") != SCHEMA:
        return [f"schema is {meta.get('schema')!r}, expected {SCHEMA!r}"]
    required = list(dict.fromkeys([*REQUIRED_METADATA, *DOCUMENTED_METADATA]))
    missing = [key for key in required if key not in meta]
    if missing:
        return [f"{len(missing)} required key(s) missing: {', '.join(missing)}"]
    problems = metadata_type_problems(meta)
    if not isinstance(meta["deterministic"], bool):
        problems.append(f"deterministic is {meta['deterministic']!r}, not true or false")
    if isinstance(meta.get("tool"), dict) and meta["tool"].get("name") != "fieldgen":
        problems.append(f"tool.name is {meta['tool'].get('name')!r}")
    if isinstance(meta.get("units"), dict):
        wrong = [f"{name}: {meta['units'][name]!r} (expected {unit!r})"
                 for name, unit in UNITS.items() if meta["units"].get(name, unit) != unit]
        if wrong:
            problems.append("units " + "; ".join(wrong))
    return problems
