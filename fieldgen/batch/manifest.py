"""A batch manifest: read, check and resolve it into the items to build.

A manifest (TOML) has a ``[defaults]`` table of build options and an ``[[asset]]`` array; an
item names its ``input``, ``output``, optionally a ``spec`` file, and any build option.
Precedence: defaults < spec < item keys; paths are relative to the file that names them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fieldgen.errors import FieldgenError, OptionError
from fieldgen.option_kinds import check_not_folder, check_path_value
from fieldgen.options import BuildOptions, checked_in_layers, options_from_mapping, options_from_spec
from fieldgen.paths import special_file
from fieldgen.tables import TomlValueError, check_keys, not_utf8, parse_toml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ITEM_KEYS = ("input", "output", "spec")


class ManifestError(OptionError):
    """The manifest cannot be used as written (bad TOML, unknown key, missing input, ...)."""


@dataclass(frozen=True)
class BatchItem:
    """One asset to build: resolved paths and resolved options."""

    index: int            #: 1-based position in the manifest's [[asset]] array
    input: str
    output: str
    options: Any          #: fieldgen.options.BuildOptions, checked

    @property
    def label(self) -> str:
        return f"[[asset]] {self.index} ({Path(self.input).name})"


@dataclass(frozen=True)
class Manifest:
    path: str
    items: tuple[BatchItem, ...]


def _join(folder: Path, value: str) -> str:
    return os.path.normpath(value if os.path.isabs(value) else os.path.join(folder, value))


def _load_toml(where: str) -> dict[str, Any]:
    kind = special_file(where)
    if kind is not None and kind != "a folder":       # a pipe or a device would be read for ever
        raise ManifestError(f"is {kind}, not a manifest", path=where, fix="give the manifest's .toml file")
    try:
        with open(where, "rb") as handle:
            return parse_toml(handle.read().decode("utf-8-sig"))     # a byte-order mark is allowed
    except FileNotFoundError:
        raise ManifestError("manifest not found", path=where, fix="check the path given to fieldgen batch") from None
    except IsADirectoryError:
        raise ManifestError("is a folder, not a manifest", path=where, fix="give the manifest's .toml file") from None
    except (tomllib.TOMLDecodeError, TomlValueError) as exc:
        raise ManifestError(f"not valid TOML ({exc})", path=where, fix="fix the manifest's syntax") from None
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{not_utf8(exc)}, so not a TOML manifest", path=where,
                            fix="save the manifest as UTF-8 text") from None


def _defaults_and_entries(data: dict[str, Any], where: str) -> tuple[dict, list[dict]]:
    """The manifest's [defaults] table and its [[asset]] tables, checked for shape."""
    check_keys(data, ("defaults", "asset"), path=where, where="top level", error=ManifestError)
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ManifestError("[defaults] is not a table", path=where, fix="write [defaults] followed by key = value lines")
    entries = data.get("asset", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ManifestError("`asset` is not an array of tables", path=where,
                            fix="write each item as an [[asset]] table with input = ... and output = ...")
    if not entries:
        raise ManifestError("the manifest has no [[asset]] items", path=where,
                            fix='add items: [[asset]] input = "part.stl" output = "part.vtu"')
    return defaults, entries


def read_manifest(path: str | os.PathLike, *, output_dir: str | os.PathLike | None = None) -> Manifest:
    """Read and resolve a manifest; ManifestError naming the manifest and the item otherwise.

    ``output_dir`` puts every asset in that folder under its output's file name (the item's
    ``output``, or the input's stem + ``.vtu`` when the item and its spec give none).
    """
    where = os.fspath(path)
    defaults, entries = _defaults_and_entries(_load_toml(where), where)
    folder = Path(where).parent
    try:
        base = options_from_mapping(defaults, base_dir=folder, origin=f"{where} [defaults]")
    except FieldgenError as exc:
        raise ManifestError(exc.defect, path=f"{where} [defaults]", fix=exc.fix) from None

    items, seen = [], {}
    for index, entry in enumerate(entries, start=1):
        items.append(_read_item(where, folder, index, entry, (base, list(defaults)), output_dir))
        key = os.path.abspath(items[-1].output)
        if key in seen:
            raise ManifestError(f"[[asset]] {index} and [[asset]] {seen[key]} both write {items[-1].output}",
                                path=where, fix="give every item its own output")
        seen[key] = index
    return Manifest(path=where, items=tuple(items))


def _item_options(where: str, folder: Path, label: str, entry: dict, defaults: tuple[BuildOptions, list]
                  ) -> tuple[BuildOptions, str | None, str | None]:
    """The item's checked options (``defaults``: the [defaults]' options and their keys), and the
    input and output its spec names (or None). A bad option is named where it was set: the item,
    its spec or the manifest's [defaults]."""
    origin = f"{where} {label}"
    (options, default_keys), spec_input, spec_output = defaults, None, None
    layers = [(f"{where} [defaults]", default_keys)]
    try:
        if "spec" in entry:
            spec = _join(folder, entry["spec"])
            kind = special_file(spec)
            if kind is not None:          # there, but no file: "not found" would send the user looking for it
                raise ManifestError(f"{label}: spec {spec} is {kind}, not a spec file", path=where,
                                    fix="give the item's spec .toml file (relative to the manifest)")
            if not os.path.isfile(spec):
                raise ManifestError(f"{label}: spec file {spec} not found", path=where,
                                    fix="check the item's `spec` path (relative to the manifest)")
            options, spec_input, spec_output = options_from_spec(spec, base=options)
            layers.append((spec, list(_load_toml(spec))))
        given = {k: v for k, v in entry.items() if k not in ITEM_KEYS}
        layers.append((origin, list(given)))
        options = checked_in_layers(options_from_mapping(given, base_dir=folder, origin=origin, base=options), layers)
    except ManifestError:
        raise
    except FieldgenError as exc:
        # The defect names the item; an error inside a spec keeps the spec's path.
        inner = "" if exc.path in (None, origin) else f" (in {exc.path})"
        raise ManifestError(f"{label}: {exc.defect}{inner}", path=where, fix=exc.fix) from None
    return options, spec_input, spec_output


def _read_item(where: str, folder: Path, index: int, entry: dict, defaults: tuple[BuildOptions, list],
               output_dir: str | os.PathLike | None) -> BatchItem:
    label = f"[[asset]] {index}"
    if isinstance(entry.get("input"), str) and entry["input"].strip() and "\0" not in entry["input"]:
        label += f" ({entry['input']})"
    for key in (key for key in ITEM_KEYS if key in entry):
        try:
            check_path_value(key, entry[key], where, f'write {key} = "..."')
            if key == "input":
                check_not_folder(key, entry[key], _join(folder, entry[key]), where,
                                 'write input = "part.stl": the surface mesh file itself, relative to the manifest')
        except OptionError as exc:
            raise ManifestError(f"{label}: {exc.defect}", path=where, fix=exc.fix) from None
    options, spec_input, spec_output = _item_options(where, folder, label, entry, defaults)
    input_path = _join(folder, entry["input"]) if "input" in entry else spec_input
    if input_path is None:
        raise ManifestError(f"{label} has no `input`", path=where,
                            fix='add input = "part.stl" (relative to the manifest), or name it in the spec')
    output = _join(folder, entry["output"]) if "output" in entry else spec_output
    if output is None:
        output = os.path.normpath(os.path.join(str(folder), Path(input_path).stem + ".vtu"))
    if output_dir is not None:
        output = os.path.normpath(os.path.join(os.fspath(output_dir), Path(output).name))
    if not output.endswith(".vtu"):
        raise ManifestError(f"{label}: output {output!r} does not end in .vtu", path=where,
                            fix="name each asset FILE.vtu")
    return BatchItem(index=index, input=input_path, output=output, options=options)
