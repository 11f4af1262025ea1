"""`fieldgen batch`: build every asset of a manifest, with a content-addressed cache.

A manifest (TOML) has a ``[defaults]`` table of build options and an ``[[asset]]`` array; an
item names its ``input``, ``output``, optionally a ``spec`` file, and any build option.
Precedence: defaults < spec < item keys; paths are relative to the file that names them.

The cache is the assets themselves: each asset stores the sha256 ``cache_key`` of what it was
built from (input bytes and name, the resolved options with the bytes of the files they name,
the versions of fieldgen and of the libraries its bytes depend on) and, under ``cache``, those
components themselves, so a stale asset says which part changed (:func:`describe_changes`).
An item is current when the asset at its output carries the item's key. On Dask, the workers'
versions must equal this machine's (checked before any build, and again by each build), since
the key is computed here.

Each build runs in its own worker process (local pool of persistent workers, or one isolated
process per item on a Dask worker), single-threaded, with its own scratch folder, so workers
share no state and the bytes of an asset do not depend on the executor or the job count.
Assets are written atomically by :func:`fieldgen.io.asset.atomic_output`; an interrupted batch
terminates its workers and removes their temporary files (``.<name>.<hex>.tmp``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from fieldgen import __version__
from fieldgen.meshing.process import child_env, die_with_parent, new_scratch
from fieldgen.errors import FieldgenError, InputError, OptionError
from fieldgen.tables import check_keys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CACHE_SCHEMA = "fieldgen.batch.cache/1"
REPORT_SCHEMA = "fieldgen.batch.report/1"
STATUSES = ("built", "cached", "failed", "stale")
ITEM_KEYS = ("input", "output", "spec")
EXECUTORS = ("local", "dask")
#: Environment of every worker: one thread for BLAS, OpenMP and numba (determinism, no
#: oversubscription when N builds share the machine).
WORKER_THREADS = {name: "1" for name in (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS")}
#: What :func:`fieldgen.io.asset.atomic_output` names its temporary files.
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{32}\.tmp$")
_GRACE_SECONDS = 2.0     # a worker inside TetGen or vtk only sees SIGTERM when it returns


class ManifestError(OptionError):
    """The manifest cannot be used as written (bad TOML, unknown key, missing input, ...)."""


class BatchInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived during a batch; ``signum`` says which."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum


# --------------------------------------------------------------------------- manifest

@dataclass(frozen=True)
class BatchItem:
    """One asset to build: resolved paths and resolved options."""

    index: int            #: 1-based position in the manifest's [[asset]] array
    input: str
    output: str
    options: Any          #: fieldgen.pipeline.BuildOptions, checked

    @property
    def label(self) -> str:
        return f"[[asset]] {self.index} ({Path(self.input).name})"


@dataclass(frozen=True)
class Manifest:
    path: str
    items: tuple[BatchItem, ...]


def _join(folder: Path, value: str) -> str:
    return os.path.normpath(value if os.path.isabs(value) else os.path.join(folder, value))


def read_manifest(path: str | os.PathLike, *, output_dir: str | os.PathLike | None = None) -> Manifest:
    """Read and resolve a manifest; ManifestError naming the manifest and the item otherwise.

    ``output_dir`` puts every asset in that folder under its output's file name (the item's
    ``output``, or the input's stem + ``.vtu`` when the item and its spec give none).
    """
    from fieldgen.pipeline import BuildOptions, options_from_mapping, options_from_spec

    where = os.fspath(path)
    try:
        with open(where, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ManifestError("manifest not found", path=where, fix="check the path given to fieldgen batch") from None
    except IsADirectoryError:
        raise ManifestError("is a folder, not a manifest", path=where, fix="give the manifest's .toml file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"not valid TOML ({exc})", path=where, fix="fix the manifest's syntax") from None
    folder = Path(where).parent
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
    try:
        base = options_from_mapping(defaults, base_dir=folder, origin=f"{where} [defaults]")
    except FieldgenError as exc:
        raise ManifestError(exc.defect, path=f"{where} [defaults]", fix=exc.fix) from None

    items, seen = [], {}
    for index, entry in enumerate(entries, start=1):
        items.append(_read_item(where, folder, index, entry, base, output_dir, BuildOptions,
                                options_from_mapping, options_from_spec))
        key = os.path.abspath(items[-1].output)
        if key in seen:
            raise ManifestError(f"[[asset]] {index} and [[asset]] {seen[key]} both write {items[-1].output}",
                                path=where, fix="give every item its own output")
        seen[key] = index
    return Manifest(path=where, items=tuple(items))


def _read_item(where, folder, index, entry, base, output_dir, BuildOptions, options_from_mapping,
               options_from_spec) -> BatchItem:
    label = f"[[asset]] {index}"
    if "input" in entry and isinstance(entry["input"], str):
        label += f" ({entry['input']})"
    origin = f"{where} {label}"
    for key in ITEM_KEYS:
        if key in entry and not isinstance(entry[key], str):
            raise ManifestError(f"{label}: `{key}` must be a path string, got {entry[key]!r}", path=where,
                                fix=f'write {key} = "..."')
    options, spec_input, spec_output = base, None, None
    try:
        if "spec" in entry:
            spec = _join(folder, entry["spec"])
            if not os.path.isfile(spec):
                raise ManifestError(f"{label}: spec file {spec} not found", path=where,
                                    fix="check the item's `spec` path (relative to the manifest)")
            options, spec_input, spec_output = options_from_spec(spec, base=base)
        given = {k: v for k, v in entry.items() if k not in ITEM_KEYS}
        options = options_from_mapping(given, base_dir=folder, origin=origin, base=options).checked()
    except ManifestError:
        raise
    except FieldgenError as exc:
        # The defect names the item; an error inside a spec keeps the spec's path.
        inner = "" if exc.path in (None, origin) else f" (in {exc.path})"
        raise ManifestError(f"{label}: {exc.defect}{inner}", path=where, fix=exc.fix) from None
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


# --------------------------------------------------------------------------- cache

def _file_digest(path: str, role: str, item: BatchItem) -> str:
    from fieldgen.pipeline import file_sha256

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
    from fieldgen.surface.stage import STEP_SUFFIXES

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
    from fieldgen.io.asset import ENCODING

    return {
        "schema": CACHE_SCHEMA,
        "tool": {"name": "fieldgen", "version": __version__},
        "encoding": ENCODING,
        "libraries": libraries,
        "input": {"name": Path(item.input).name, "sha256": _file_digest(item.input, "input", item)},
        "options": options,
    }


#: Libraries whose version can change an asset's bytes (meshing, solve, file encoding).
BYTE_LIBRARIES = ("tetgen", "vtk", "numpy", "scipy", "scikit-fem", "pyamg", "trimesh")


def library_versions(names=BYTE_LIBRARIES) -> dict[str, str]:
    """Installed versions of the libraries an asset's bytes depend on ("absent" if missing)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def key_of(description: dict[str, Any]) -> str:
    """sha256 hex of a :func:`cache_description` in canonical JSON."""
    text = json.dumps(description, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(item: BatchItem) -> str:
    """sha256 hex of :func:`cache_description` in canonical JSON; InputError if a file is unreadable."""
    return key_of(cache_description(item))


def build_versions() -> dict[str, str]:
    """fieldgen's version and :func:`library_versions`: what a worker must share with the client."""
    return {"fieldgen": __version__, **library_versions()}


def _worker_versions() -> dict[str, str]:
    """:func:`build_versions` as a Dask worker reports it (run there by ``client.run``)."""
    return {"fieldgen": __version__, **library_versions()}


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
    return _cache_state(output, key, description)[0]


def _cache_state(output: str, key: str, description: dict[str, Any] | None = None) -> tuple[str | None, dict]:
    """:func:`stale_reason` and the asset's metadata (empty when it has none), read once."""
    from fieldgen.io.asset import read_metadata

    if not os.path.exists(output):
        return "missing", {}
    try:
        with open(output, "rb") as handle:       # complete: the XML closes (cheap tail check)
            handle.seek(max(0, os.path.getsize(output) - 64))
            complete = b"</VTKFile>" in handle.read()
        metadata = read_metadata(output) if complete else None
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
            match = _TEMPORARY.match(entry)
            if match and match.group("name") in names:
                try:
                    os.remove(os.path.join(folder, entry))
                    removed.append(os.path.join(folder, entry))
                except OSError:
                    pass
    return removed


# --------------------------------------------------------------------------- report

@dataclass
class ItemResult:
    """The outcome of one item, as it appears in the JSON report."""

    index: int
    input: str
    output: str
    status: str                      #: built | cached | failed | stale
    seconds: float
    cache_key: str | None
    error: str | None = None         #: the message, when failed
    reason: str | None = None        #: why an asset is (or was) stale
    warnings: list[str] = dataclasses.field(default_factory=list)   #: the build's (a cached asset's as recorded)

    def warning_lines(self) -> list[str]:
        """The build's warnings as printed on stderr and in JUnit: ``warning: OUTPUT: …``."""
        return [f"warning: {self.output}: {warning}" for warning in self.warnings]

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["name"] = Path(self.output).name
        out["seconds"] = round(self.seconds, 3)
        return out


@dataclass
class BatchReport:
    manifest: str
    results: list[ItemResult]
    seconds: float
    check: bool
    executor: str
    jobs: int

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.results) for s in STATUSES}

    @property
    def ok(self) -> bool:
        return all(r.status in ("built", "cached") for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA, "manifest": self.manifest, "ok": self.ok, "check": self.check,
            "executor": self.executor, "jobs": self.jobs, "seconds": round(self.seconds, 3),
            "counts": self.counts, "tool": {"name": "fieldgen", "version": __version__},
            "items": [r.to_dict() for r in self.results],
        }


def junit_tree(report: BatchReport) -> ElementTree.ElementTree:
    """JUnit XML: one <testcase> per item; failed and stale items carry a <failure>, a built or
    cached item's warnings are its <system-err> (one ``warning: OUTPUT: …`` line each, as on
    stderr)."""
    counts = report.counts
    suites = ElementTree.Element("testsuites", name="fieldgen batch", tests=str(len(report.results)),
                                 failures=str(counts["failed"] + counts["stale"]), errors="0",
                                 time=f"{report.seconds:.3f}")
    suite = ElementTree.SubElement(suites, "testsuite", name=f"fieldgen batch {report.manifest}",
                                   tests=str(len(report.results)),
                                   failures=str(counts["failed"] + counts["stale"]), errors="0",
                                   skipped="0", time=f"{report.seconds:.3f}")
    classname = "fieldgen.batch." + re.sub(r"\W", "_", Path(report.manifest).stem)
    for result in report.results:
        case = ElementTree.SubElement(suite, "testcase", classname=classname, name=result.output,
                                      time=f"{result.seconds:.3f}")
        if result.status == "failed":
            failure = ElementTree.SubElement(case, "failure", message=result.error or "failed", type="BuildFailed")
            failure.text = f"{result.input} -> {result.output}\n{result.error}"
        elif result.status == "stale":
            message = f"{result.output} is stale ({result.reason})"
            failure = ElementTree.SubElement(case, "failure", message=message, type="StaleAsset")
            failure.text = f"{message}; rebuild it with fieldgen batch {report.manifest}"
        else:
            ElementTree.SubElement(case, "system-out").text = f"{result.status} (cache key {result.cache_key})"
        if result.warnings:
            ElementTree.SubElement(case, "system-err").text = "\n".join(result.warning_lines())
    ElementTree.indent(suites)
    return ElementTree.ElementTree(suites)


def write_report(report: BatchReport, path: str | os.PathLike) -> None:
    _write_text(path, json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n")


def write_junit(report: BatchReport, path: str | os.PathLike) -> None:
    tree = junit_tree(report)
    _write_text(path, ElementTree.tostring(tree.getroot(), encoding="unicode", xml_declaration=True) + "\n")


def _write_text(path, text: str) -> None:
    from fieldgen.io.asset import atomic_output

    with atomic_output(path) as temporary:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)


# --------------------------------------------------------------------------- running

def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _payload(item: BatchItem, key: str, description: dict[str, Any]) -> dict[str, Any]:
    """What a worker needs, with absolute paths (workers run in their own scratch folders), the
    key's components (stored in the asset) and the versions the key assumes."""
    options = item.options.to_dict()
    for name in ("core", "table"):
        if options.get(name) is not None:
            options[name] = os.path.abspath(options[name])
    return {"index": item.index, "input": os.path.abspath(item.input), "output": os.path.abspath(item.output),
            "options": options, "cache_key": key, "cache": description,
            "versions": {"fieldgen": description["tool"]["version"], **description["libraries"]}}


def run_batch(manifest: Manifest, *, jobs: int | None = None, force: bool = False, check: bool = False,
              executor: str = "local", scheduler: str | None = None,
              on_result: Callable[[ItemResult], None] | None = None) -> BatchReport:
    """Build (or, with ``check``, only inspect) every item; one failure never stops the others.

    ``on_result`` is called with each item's result as it is known (for a progress display).
    OptionError for an unusable executor (before anything is built). KeyboardInterrupt
    (and :class:`BatchInterrupted`) propagate after the workers are stopped and their
    temporary files removed.
    """
    if executor not in EXECUTORS:
        raise OptionError(f"unknown executor {executor!r}", fix=f"use one of {', '.join(EXECUTORS)}")
    if check and force:
        raise OptionError("--check and --force both given", fix="--check builds nothing; drop one of them")
    jobs = default_jobs() if jobs is None else int(jobs)
    if jobs < 1:
        raise OptionError(f"-j must be at least 1, got {jobs}", fix="give the number of parallel builds")
    if executor == "dask" and not check:
        _dask_requirements(scheduler)
    notify = on_result or (lambda result: None)
    start = time.perf_counter()
    outputs = [item.output for item in manifest.items]
    if not check:
        remove_stale_temporaries(outputs)

    results: dict[int, ItemResult] = {}
    pending: list[tuple[BatchItem, str, str, dict]] = []
    for item in manifest.items:
        began = time.perf_counter()
        try:
            description = cache_description(item)
            key = key_of(description)
        except FieldgenError as exc:
            results[item.index] = ItemResult(item.index, item.input, item.output, "failed",
                                             time.perf_counter() - began, None, str(exc))
            notify(results[item.index])
            continue
        reason, metadata = ("forced (--force)", {}) if force else _cache_state(item.output, key, description)
        if reason is None:
            # A current asset still says what its build warned of (recorded in its metadata).
            results[item.index] = ItemResult(item.index, item.input, item.output, "cached",
                                             time.perf_counter() - began, key,
                                             warnings=[str(w) for w in metadata.get("warnings", [])])
            notify(results[item.index])
        elif check:
            results[item.index] = ItemResult(item.index, item.input, item.output, "stale",
                                             time.perf_counter() - began, key, reason=reason)
            notify(results[item.index])
        else:
            pending.append((item, key, reason, description))

    if pending:
        by_index = {item.index: (item, key, reason) for item, key, reason, _ in pending}

        def finished(answer: dict[str, Any]) -> None:
            item, key, reason = by_index[answer["index"]]
            status = "built" if answer.get("error") is None else "failed"
            results[item.index] = ItemResult(item.index, item.input, item.output, status,
                                             float(answer.get("seconds", 0.0)), key, answer.get("error"), reason,
                                             warnings=list(answer.get("warnings", [])))
            notify(results[item.index])

        payloads = [_payload(item, key, description) for item, key, _, description in pending]
        try:
            if executor == "local":
                _run_local(payloads, min(jobs, len(payloads)), finished)
            else:
                _run_dask(payloads, scheduler, finished)
        finally:
            remove_stale_temporaries(outputs)
    return BatchReport(manifest=manifest.path, results=[results[i.index] for i in manifest.items],
                       seconds=time.perf_counter() - start, check=check, executor=executor, jobs=jobs)


# --------------------------------------------------------------------------- local executor

def _worker_env(scratch: str) -> dict[str, str]:
    env = child_env()                                # so the worker imports this fieldgen
    env.update(WORKER_THREADS)
    env["FIELDGEN_BATCH_PARENT"] = str(os.getpid())
    # Temporary files (TetGen's, fTetWild's) go into the worker's scratch folder, which the
    # batch removes when it ends, whatever state a killed worker left it in.
    env["FIELDGEN_BATCH_SCRATCH"] = scratch
    for name in ("TMPDIR", "TEMP", "TMP"):
        env[name] = scratch
    return env


_WORKER_COMMAND = "from fieldgen.batch.manifest import worker_main; worker_main()"


class _Worker:
    """One worker process: JSON payload lines in on stdin, JSON result lines out on stdout."""

    def __init__(self, scratch: str, answers: "queue.Queue[tuple[_Worker, dict | None]]"):
        self.scratch = scratch
        self.log = open(os.path.join(scratch, "worker.log"), "w+b")
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER_COMMAND], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, cwd=scratch, env=_worker_env(scratch), start_new_session=True)
        self.current: dict | None = None
        self._answers = answers
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            self._answers.put((self, answer))
        self._answers.put((self, None))       # the worker has exited

    def send(self, payload: dict) -> None:
        self.current = payload
        self.process.stdin.write((json.dumps(payload) + "\n").encode("utf-8"))
        self.process.stdin.flush()

    def death_notice(self) -> str:
        """Why the worker died, for the item it was building."""
        code = self.process.wait()
        self.log.seek(0)
        tail = self.log.read().decode("utf-8", "replace").strip().splitlines()[-5:]
        how = (f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}")
        detail = f": {' | '.join(tail)}" if tail else ""
        return (f"{self.current['input']}: the build worker {how}{detail}. "
                "Too little memory is the usual cause; try -j 1 or a coarser --edge-length.")

    def close(self) -> None:
        try:
            self.process.stdin.close()
        except OSError:
            pass

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()

    def reap(self, deadline: float) -> None:
        try:
            self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def _run_local(payloads: Sequence[dict], jobs: int, finished: Callable[[dict], None]) -> None:
    """Run payloads on ``jobs`` persistent worker processes; stop them all on any exception."""
    answers: "queue.Queue[tuple[_Worker, dict | None]]" = queue.Queue()
    todo = list(payloads)
    root = new_scratch("fieldgen-batch-")
    workers: list[_Worker] = []
    try:
        for n in range(jobs):
            scratch = os.path.join(root, f"worker{n}")
            os.mkdir(scratch)
            worker = _Worker(scratch, answers)
            workers.append(worker)
            worker.send(todo.pop(0))
        busy = len(workers)
        while busy:
            try:
                worker, answer = answers.get(timeout=0.2)
            except queue.Empty:
                continue
            if answer is None:                       # died (or closed after its last item)
                if worker.current is not None:
                    finished({"index": worker.current["index"], "seconds": 0.0, "error": worker.death_notice()})
                    worker.current = None
                    busy -= 1
                    scratch = worker.scratch         # what a killed worker left (TetGen's folder)
                    worker.reap(time.monotonic())
                    workers.remove(worker)
                    shutil.rmtree(scratch, ignore_errors=True)
                    if todo:                         # replace it
                        os.makedirs(scratch)         # the worker may have removed the batch's folder
                        worker = _Worker(scratch, answers)
                        workers.append(worker)
                        worker.send(todo.pop(0))
                        busy += 1
                continue
            worker.current = None
            finished(answer)
            if todo:
                worker.send(todo.pop(0))
            else:
                worker.close()
                busy -= 1
    except BaseException:
        for worker in workers:
            worker.stop()
        raise
    finally:
        deadline = time.monotonic() + _GRACE_SECONDS
        for worker in workers:
            worker.close()
            worker.reap(deadline)
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- worker side

class _Stop(BaseException):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_stop(signum, _frame):
    raise _Stop(signum)


def _die_with_parent() -> None:
    """SIGTERM this worker when the batch process dies, even by SIGKILL (Linux)."""
    parent = os.environ.get("FIELDGEN_BATCH_PARENT")
    if not die_with_parent(signal.SIGTERM, None if parent is None else int(parent)):
        raise _Stop(signal.SIGTERM)                  # died before the request took effect


def _remove_scratch(last_out: bool) -> None:
    """Remove this worker's scratch folder, and with ``last_out`` the batch's folder if now empty.

    The workers' temporary files (TetGen's and fTetWild's folders among them) live in the
    scratch folder (``TMPDIR``). The batch process removes every folder when it ends; killed, it
    cannot. A local batch's worker is stopped (SIGTERM) only when the batch is interrupted or its
    process has died, so a stopped worker also tries the batch's folder: the last one out removes
    it. (Whether the batch process has died cannot be told reliably at that moment: the kernel
    signals when the thread that started the worker exits, and the process may not be gone yet.)
    A worker of a Dask item (:func:`isolated_build`) has no batch folder and leaves its scratch to
    the item's own cleanup.
    """
    scratch = os.environ.get("FIELDGEN_BATCH_SCRATCH")
    if not scratch or not os.path.basename(os.path.dirname(scratch)).startswith("fieldgen-batch-"):
        return
    shutil.rmtree(scratch, ignore_errors=True)
    if last_out:
        try:
            os.rmdir(os.path.dirname(scratch))
        except OSError:
            pass


def build_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """Build one item in this process (single-threaded); the answer has ``error`` None or a message."""
    from threadpoolctl import threadpool_limits

    from fieldgen.pipeline import build, options_from_mapping

    began = time.perf_counter()
    answer: dict[str, Any] = {"index": payload["index"], "error": None}
    try:
        wanted = payload.get("versions") or build_versions()
        # This process's versions of the same libraries (a STEP item's include cascadio's).
        mine = {**build_versions(), **library_versions(tuple(name for name in wanted if name != "fieldgen"))}
        differ = version_differences(wanted, mine)
        if differ:
            raise OptionError(f"this worker has {differ}; the cache key was computed with the client's versions",
                              path=payload["input"],
                              fix="install the same versions on every Dask worker as on the client")
        options = options_from_mapping(payload["options"], origin="batch payload")
        metadata = {"cache_key": payload["cache_key"]}
        if payload.get("cache") is not None:
            metadata["cache"] = payload["cache"]
        # An asset reaches its output path only validated (build renames it there last), so a
        # worker stopped at any point leaves the previous asset or the new one, never a part.
        with threadpool_limits(1):
            result = build(payload["input"], payload["output"], options, extra_metadata=metadata)
        answer["warnings"] = list(result.warnings)
        answer["tets"] = int(result.tets)
    except FieldgenError as exc:
        answer["error"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - reported per item, never stops the batch
        where = traceback.extract_tb(exc.__traceback__)[-1]
        answer["error"] = (f"{payload['input']}: internal error {type(exc).__name__}: {exc} "
                           f"(at {Path(where.filename).name}:{where.lineno}). "
                           "This is a fieldgen bug; please report it with the input file.")
    answer["seconds"] = time.perf_counter() - began
    return answer


def worker_main() -> None:
    """A worker process: read payload lines on stdin, write one answer line per payload."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _raise_stop)
    try:
        _die_with_parent()
        answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
        os.dup2(2, 1)                 # anything a library prints goes to the log, not the answers
        sys.stdout = sys.stderr
        for line in sys.stdin:
            if not line.strip():
                continue
            answers.write(json.dumps(build_payload(json.loads(line))) + "\n")
            answers.flush()
        _remove_scratch(last_out=False)        # no more work
    except _Stop as stop:             # atomic_output has removed its temporary file by now
        _remove_scratch(last_out=True)
        os._exit(128 + stop.signum)


# --------------------------------------------------------------------------- dask executor

def _import_distributed():
    try:
        import distributed
    except ImportError:
        from fieldgen.install import install_hint

        raise OptionError("the dask executor needs dask.distributed, which is not installed",
                          fix=f"install it with {install_hint('dask')}, or use --executor local") from None
    return distributed


def isolated_build(payload: dict[str, Any], cancel_event: str | None = None) -> dict[str, Any]:
    """Run one payload in a fresh worker process (the Dask task); stop it if ``cancel_event`` is set.

    A fresh process per item keeps the builds of one multi-threaded Dask worker apart.
    """
    scratch = new_scratch("fieldgen-task-")
    answers: "queue.Queue[tuple[_Worker, dict | None]]" = queue.Queue()
    event = None
    if cancel_event is not None:
        distributed = _import_distributed()
        event = distributed.Event(cancel_event)
    worker = _Worker(scratch, answers)
    try:
        worker.send(payload)
        worker.close()
        while True:
            try:
                _, answer = answers.get(timeout=0.5)
            except queue.Empty:
                if event is not None and event.is_set():
                    worker.stop()
                continue
            if answer is None:
                return {"index": payload["index"], "seconds": 0.0, "error": worker.death_notice()}
            return answer
    finally:
        worker.stop()
        worker.reap(time.monotonic() + _GRACE_SECONDS)
        shutil.rmtree(scratch, ignore_errors=True)


def _dask_requirements(scheduler: str | None):
    """dask.distributed and a scheduler address, or OptionError saying what is missing."""
    distributed = _import_distributed()
    if not scheduler:
        raise OptionError("--executor dask needs --scheduler tcp://HOST:PORT",
                          fix="start a cluster (dask scheduler; dask worker tcp://HOST:8786) "
                              "or use --executor local on one machine")
    return distributed


def version_differences(client: dict[str, str], worker: dict[str, str]) -> str:
    """``"numpy 2.4.7 (client 2.4.6), fieldgen 0.2.0 (client 0.1.0)"``, or "" when equal."""
    return ", ".join(f"{name} {worker.get(name, 'absent')} (client {client.get(name, 'absent')})"
                     for name in sorted(set(client) | set(worker)) if client.get(name) != worker.get(name))


def check_worker_versions(client: dict[str, str], workers: dict[str, dict[str, str]]) -> None:
    """OptionError naming each worker whose versions differ from the client's."""
    wrong = [f"{address} has {differ}" for address, versions in sorted(workers.items())
             if (differ := version_differences(client, versions))]
    if wrong:
        raise OptionError("Dask workers run other versions than this client, so the cache keys computed here "
                          "would not describe the assets they build: " + "; ".join(wrong),
                          fix="install the same fieldgen and library versions on every worker as here "
                              "(pip freeze on both sides), or use --executor local")


def _run_dask(payloads: Sequence[dict], scheduler: str | None, finished: Callable[[dict], None]) -> None:
    """Run payloads on an existing Dask distributed cluster (files on a shared filesystem)."""
    distributed = _dask_requirements(scheduler)
    try:
        client = distributed.Client(scheduler, timeout="20s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise OptionError(f"cannot connect to the Dask scheduler at {scheduler} ({exc})",
                          fix="check the address and that the scheduler is running") from None
    try:
        check_worker_versions(build_versions(), client.run(_worker_versions))
    except BaseException:
        client.close()
        raise
    name = f"fieldgen-batch-cancel-{os.getpid()}-{time.time_ns()}"
    futures, event = [], None
    try:
        event = distributed.Event(name, client=client)
        futures = [client.submit(isolated_build, payload, name, pure=False, retries=0,
                                 key=f"fieldgen-build-{payload['index']}-{payload['cache_key'][:12]}-{time.time_ns()}")
                   for payload in payloads]
        by_key = {future.key: payload for future, payload in zip(futures, payloads)}
        for future in distributed.as_completed(futures, loop=client.loop):
            try:
                answer = future.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker fails its item only
                payload = by_key[future.key]
                answer = {"index": payload["index"], "seconds": 0.0,
                          "error": f"{payload['input']}: the Dask task failed ({type(exc).__name__}: {exc})"}
            finished(answer)
    except BaseException:
        try:
            if event is not None:
                event.set()               # running tasks stop their build process
            client.cancel(futures)
        except Exception:  # noqa: BLE001
            pass
        raise
    finally:
        client.close()
