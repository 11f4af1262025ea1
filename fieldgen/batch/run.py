"""`fieldgen batch`: build every asset of a manifest, with a content-addressed cache.

The manifest gives the items (:mod:`fieldgen.batch.manifest`); an item whose asset carries its
cache key is current and is not built again (:mod:`fieldgen.batch.cache`); the others are built
by worker processes (:mod:`fieldgen.batch.executors`), and each item's outcome is reported
(:mod:`fieldgen.batch.report`). Assets are written atomically by
:func:`fieldgen.io.asset.atomic_output`; an interrupted batch terminates its workers and removes
their temporary files (``.<name>.<hex>.tmp``).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from fieldgen.batch.cache import cache_description, cache_state, key_of, remove_stale_temporaries
from fieldgen.batch.executors import EXECUTORS, default_jobs, dask_requirements, run_dask, run_local
from fieldgen.batch.manifest import BatchItem, Manifest
from fieldgen.batch.report import BatchReport, ItemResult
from fieldgen.errors import FieldgenError, OptionError


class BatchInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived during a batch; ``signum`` says which."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum


@dataclass(frozen=True)
class PendingBuild:
    """An item that must be built: its cache key, why, and the key's components."""

    item: BatchItem
    key: str
    reason: str
    description: dict[str, Any]


def item_payload(item: BatchItem, key: str, description: dict[str, Any]) -> dict[str, Any]:
    """What a worker needs, with absolute paths (workers run in their own scratch folders), the
    key's components (stored in the asset) and the versions the key assumes."""
    options = item.options.to_dict()
    for name in ("core", "table"):
        if options.get(name) is not None:
            options[name] = os.path.abspath(options[name])
    return {"index": item.index, "input": os.path.abspath(item.input), "output": os.path.abspath(item.output),
            "options": options, "cache_key": key, "cache": description,
            "versions": {"fieldgen": description["tool"]["version"], **description["libraries"]}}


def triage(item: BatchItem, *, force: bool, check: bool) -> ItemResult | PendingBuild:
    """The item's result when it needs no build (failed to read, cached, or stale under
    ``check``); else what its build needs."""
    began = time.perf_counter()
    try:
        description = cache_description(item)
        key = key_of(description)
    except FieldgenError as exc:
        return ItemResult(item.index, item.input, item.output, "failed", time.perf_counter() - began, None, str(exc))
    reason, metadata = ("forced (--force)", {}) if force else cache_state(item.output, key, description)
    if reason is None:
        # A current asset still says what its build warned of (recorded in its metadata).
        return ItemResult(item.index, item.input, item.output, "cached", time.perf_counter() - began, key,
                          warnings=[str(w) for w in metadata.get("warnings", [])])
    if check:
        return ItemResult(item.index, item.input, item.output, "stale", time.perf_counter() - began, key,
                          reason=reason)
    return PendingBuild(item, key, reason, description)


def _built(pending: Sequence[PendingBuild], executor: str, jobs: int, scheduler: str | None
           ) -> Iterator[ItemResult]:
    """Build the pending items on ``executor``, yielding each item's result as it finishes."""
    by_index = {build.item.index: build for build in pending}
    payloads = [item_payload(build.item, build.key, build.description) for build in pending]
    answers = run_local(payloads, min(jobs, len(payloads))) if executor == "local" else run_dask(payloads, scheduler)
    try:
        for answer in answers:
            build = by_index[answer["index"]]
            status = "built" if answer.get("error") is None else "failed"
            yield ItemResult(build.item.index, build.item.input, build.item.output, status,
                             float(answer.get("seconds", 0.0)), build.key, answer.get("error"), build.reason,
                             warnings=list(answer.get("warnings", [])))
    finally:
        answers.close()


def _checked_jobs(jobs: int | None, *, executor: str, check: bool, force: bool, scheduler: str | None) -> int:
    """The number of parallel builds; OptionError for an unusable request."""
    if executor not in EXECUTORS:
        raise OptionError(f"unknown executor {executor!r}", fix=f"use one of {', '.join(EXECUTORS)}")
    if check and force:
        raise OptionError("--check and --force both given", fix="--check builds nothing; drop one of them")
    jobs = default_jobs() if jobs is None else int(jobs)
    if jobs < 1:
        raise OptionError(f"-j must be at least 1, got {jobs}", fix="give the number of parallel builds")
    if executor == "dask" and not check:
        dask_requirements(scheduler)
    return jobs


def run_batch(manifest: Manifest, *, jobs: int | None = None, force: bool = False, check: bool = False,
              executor: str = "local", scheduler: str | None = None,
              on_result: Callable[[ItemResult], None] | None = None) -> BatchReport:
    """Build (or, with ``check``, only inspect) every item; one failure never stops the others.

    ``on_result`` is called with each item's result as it is known (for a progress display).
    OptionError for an unusable executor (before anything is built). KeyboardInterrupt
    (and :class:`BatchInterrupted`) propagate after the workers are stopped and their
    temporary files removed.
    """
    jobs = _checked_jobs(jobs, executor=executor, check=check, force=force, scheduler=scheduler)
    notify = on_result or (lambda result: None)
    start = time.perf_counter()
    outputs = [item.output for item in manifest.items]
    if not check:
        remove_stale_temporaries(outputs)

    results: dict[int, ItemResult] = {}
    pending: list[PendingBuild] = []
    for item in manifest.items:
        outcome = triage(item, force=force, check=check)
        if isinstance(outcome, PendingBuild):
            pending.append(outcome)
        else:
            results[item.index] = outcome
            notify(outcome)
    if pending:
        built = _built(pending, executor, jobs, scheduler)
        try:
            for result in built:
                results[result.index] = result
                notify(result)
        finally:
            built.close()
            remove_stale_temporaries(outputs)
    return BatchReport(manifest=manifest.path, results=[results[i.index] for i in manifest.items],
                       seconds=time.perf_counter() - start, check=check, executor=executor, jobs=jobs)
