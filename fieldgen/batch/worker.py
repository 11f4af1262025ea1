"""A batch's build worker: a process that builds the items sent to it, one at a time.

Each build runs single-threaded in its own worker process with its own scratch folder, so
workers share no state and the bytes of an asset do not depend on the executor or the job
count. Payloads arrive as JSON lines on stdin; one JSON answer line per payload leaves on
stdout (:func:`worker_main`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any


from fieldgen.batch.cache import build_versions, library_versions, version_differences
from fieldgen.errors import FieldgenError, OptionError
from fieldgen.meshing.process import die_with_parent
from fieldgen.options import options_from_mapping
from fieldgen.pipeline import build


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
    A worker of a Dask item (:func:`fieldgen.batch.executors.isolated_build`) has no batch folder
    and leaves its scratch to the item's own cleanup.
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


def _check_versions(payload: dict[str, Any]) -> None:
    """OptionError when this process's versions differ from those the payload's key assumes."""
    wanted = payload.get("versions") or build_versions()
    # This process's versions of the same libraries (a STEP item's include cascadio's).
    mine = {**build_versions(), **library_versions(tuple(name for name in wanted if name != "fieldgen"))}
    differ = version_differences(wanted, mine)
    if differ:
        raise OptionError(f"this worker has {differ}; the cache key was computed with the client's versions",
                          path=payload["input"],
                          fix="install the same versions on every Dask worker as on the client")


def build_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """Build one item in this process (single-threaded); the answer has ``error`` None or a message."""
    began = time.perf_counter()
    answer: dict[str, Any] = {"index": payload["index"], "error": None}
    try:
        _check_versions(payload)
        options = options_from_mapping(payload["options"], origin="batch payload")
        metadata = {"cache_key": payload["cache_key"]}
        if payload.get("cache") is not None:
            metadata["cache"] = payload["cache"]
        # An asset reaches its output path only validated (build renames it there last), so a
        # worker stopped at any point leaves the previous asset or the new one, never a part.
        result = build(payload["input"], payload["output"], options, extra_metadata=metadata)   # one BLAS thread
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
