"""The batch's content-addressed cache: the assets themselves.

Each asset stores the sha256 ``cache_key`` of what it was built from (input bytes and name, the
resolved options with the bytes of the files they name, the versions of fieldgen and of the
libraries its bytes depend on) and, under ``cache``, those components themselves, so a stale
asset says which part changed (:func:`describe_changes`). An item is current when the asset at
its output carries the item's key. The key is computed on the machine that runs the batch, so
whatever builds an item must have the same versions (:func:`version_differences`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterable

from fieldgen import __version__
from fieldgen.batch.manifest import BatchItem
from fieldgen.errors import FieldgenError, InputError
from fieldgen.io import asset
from fieldgen.io.surface_readers import STEP_SUFFIXES
from fieldgen.paths import special_file

CACHE_SCHEMA = "fieldgen.batch.cache/1"
#: Libraries whose version can change an asset's bytes (meshing, solve, file encoding).
BYTE_LIBRARIES = ("tetgen", "vtk", "numpy", "scipy", "scikit-fem", "pyamg", "trimesh")
#: What :func:`fieldgen.io.asset.atomic_output` names its temporary files.
TEMPORARY_FILE = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{32}\.tmp$")


def library_versions(names=BYTE_LIBRARIES) -> dict[str, str]:
    """Installed versions of the libraries an asset's bytes depend on ("absent" if missing)."""
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def build_versions() -> dict[str, str]:
    """fieldgen's version and :func:`library_versions`: what a worker must share with the client."""
    return {"fieldgen": __version__, **library_versions()}


def worker_versions() -> dict[str, str]:
    """:func:`build_versions` as a Dask worker reports it (run there by ``client.run``)."""
    return {"fieldgen": __version__, **library_versions()}


def version_differences(client: dict[str, str], worker: dict[str, str]) -> str:
    """``"numpy 2.4.7 (client 2.4.6), fieldgen 0.2.0 (client 0.1.0)"``, or "" when equal."""
    return ", ".join(f"{name} {worker.get(name, 'absent')} (client {client.get(name, 'absent')})"
                     for name in sorted(set(client) | set(worker)) if client.get(name) != worker.get(name))


def _file_digest(path: str, role: str, item: BatchItem) -> str:
    # lazy: fieldgen.pipeline imports the whole build (meshing, FE); only workers build
    from fieldgen.pipeline import file_sha256

    kind = special_file(path)
    if kind is not None:              # a pipe or a device would be read for ever
        raise InputError(f"{role} is {kind}, not a file ({item.label})", path=path, fix="name a file")
    try:
        return file_sha256(path)
    except FileNotFoundError:
        raise InputError(f"{role} file not found ({item.label})", path=path,
                         fix="check the path; manifest paths are relative to the manifest") from None
    except IsADirectoryError:
        raise InputError(f"{role} is a folder ({item.label})", path=path, fix="name a file") from None
    except OSError as exc:
        raise InputError(f"cannot read the {role} file ({exc.strerror or exc})", path=path,
                         fix="check its permissions") from None


def cache_description(item: BatchItem) -> dict[str, Any]:
    """What an asset's bytes depend on, as JSON values: no paths, no mtimes.

    The input and core file names are kept because the asset records them (metadata ``source``
    and ``boundary.core``); the table's name is not recorded, only its values, so only its
    bytes count.
    """
    options = item.options.to_dict()
    libraries = library_versions()
    if any(Path(p).suffix.lower() in STEP_SUFFIXES for p in (item.input, options.get("core")) if p):
        # A STEP file's triangles are cascadio's (OpenCASCADE's) tessellation.
        libraries.update(library_versions(("cascadio",)))
    if options.get("core") is not None:
        options["core"] = {"name": Path(options["core"]).name,
                           "sha256": _file_digest(options["core"], "core", item)}
    if options.get("table") is not None:
        options["table"] = {"sha256": _file_digest(options["table"], "table", item)}
    return {
        "schema": CACHE_SCHEMA,
        "tool": {"name": "fieldgen", "version": __version__},
        "encoding": asset.ENCODING,
        "libraries": libraries,
        "input": {"name": Path(item.input).name, "sha256": _file_digest(item.input, "input", item)},
        "options": options,
    }


def key_of(description: dict[str, Any]) -> str:
    """sha256 hex of a :func:`cache_description` in canonical JSON."""
    text = json.dumps(description, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(item: BatchItem) -> str:
    """sha256 hex of :func:`cache_description` in canonical JSON; InputError if a file is unreadable."""
    return key_of(cache_description(item))


def _short(value: Any) -> str:
    if isinstance(value, dict) and "sha256" in value:
        return f"{value.get('name', '')} sha256 {str(value['sha256'])[:12]}".strip()
    return json.dumps(value, sort_keys=True)


def describe_changes(stored: dict[str, Any] | None, current: dict[str, Any]) -> str:
    """Which components of the cache key differ between ``stored`` (the asset's ``cache``
    metadata) and ``current`` (:func:`cache_description`), e.g. ``"numpy 2.4.6 -> 2.4.7"``."""
    if not isinstance(stored, dict):
        return "input, options or versions changed (the asset does not record its cache components)"
    changes = []
    if stored.get("schema") != current.get("schema"):
        changes.append(f"cache schema {stored.get('schema')} -> {current.get('schema')}")
    old_tool, new_tool = stored.get("tool") or {}, current.get("tool") or {}
    if old_tool.get("version") != new_tool.get("version"):
        changes.append(f"fieldgen {old_tool.get('version')} -> {new_tool.get('version')}")
    if stored.get("encoding") != current.get("encoding"):
        changes.append(f"asset encoding {stored.get('encoding', 'not recorded')} -> {current.get('encoding')}")
    old_libs, new_libs = stored.get("libraries") or {}, current.get("libraries") or {}
    for name in sorted(set(old_libs) | set(new_libs)):
        if old_libs.get(name) != new_libs.get(name):
            changes.append(f"{name} {old_libs.get(name, 'not recorded')} -> {new_libs.get(name, 'not recorded')}")
    old_in, new_in = stored.get("input") or {}, current.get("input") or {}
    if old_in.get("name") != new_in.get("name"):
        changes.append(f"input name {old_in.get('name')} -> {new_in.get('name')}")
    if old_in.get("sha256") != new_in.get("sha256"):
        changes.append(f"input bytes changed (sha256 {str(old_in.get('sha256'))[:12]} -> "
                       f"{str(new_in.get('sha256'))[:12]})")
    old_opt, new_opt = stored.get("options") or {}, current.get("options") or {}
    for name in sorted(set(old_opt) | set(new_opt)):
        if old_opt.get(name) != new_opt.get(name):
            changes.append(f"option {name} {_short(old_opt.get(name))} -> {_short(new_opt.get(name))}")
    return "; ".join(changes) or "the cache key differs (its recorded components are equal: the asset was edited)"


def stale_reason(output: str, key: str, description: dict[str, Any] | None = None) -> str | None:
    """None when the asset at ``output`` is complete and carries ``key``; else why it is stale
    (with ``description``, the components that changed: :func:`describe_changes`)."""
    return cache_state(output, key, description)[0]


def cache_state(output: str, key: str, description: dict[str, Any] | None = None) -> tuple[str | None, dict]:
    """:func:`stale_reason` and the asset's metadata (empty when it has none), read once."""
    if not os.path.exists(output):
        return "missing", {}
    kind = special_file(output)
    if kind is not None:                         # opening a pipe to read it would wait for ever
        return f"not a readable asset: it is {kind}", {}
    try:
        with open(output, "rb") as handle:       # complete: the XML closes (cheap tail check)
            handle.seek(max(0, os.path.getsize(output) - 64))
            complete = b"</VTKFile>" in handle.read()
        metadata = asset.read_metadata(output) if complete else None
    except (FieldgenError, OSError, ValueError):
        metadata = None
    if metadata is None:
        return "not a readable asset", {}
    stored = metadata.get("cache_key")
    if stored is None:
        return "built without a cache key", metadata
    if stored != key:
        if description is None:
            return "input, options or versions changed", metadata
        return describe_changes(metadata.get("cache"), description), metadata
    return None, metadata


def remove_stale_temporaries(outputs: Iterable[str]) -> list[str]:
    """Remove the temporary files a killed build left next to ``outputs``; return their paths."""
    removed = []
    by_folder: dict[str, set[str]] = {}
    for output in outputs:
        folder, name = os.path.split(os.path.abspath(output))
        by_folder.setdefault(folder, set()).add(name)
    for folder, names in sorted(by_folder.items()):
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in entries:
            match = TEMPORARY_FILE.match(entry)
            if match and match.group("name") in names:
                try:
                    os.remove(os.path.join(folder, entry))
                    removed.append(os.path.join(folder, entry))
                except OSError:
                    pass
    return removed
