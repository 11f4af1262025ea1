"""Where a batch's builds run: a local pool of persistent worker processes, or an existing Dask
cluster (one isolated worker process per item on a Dask worker).

Both yield one answer per payload, as the builds finish (:func:`run_local`, :func:`run_dask`).
A worker is :mod:`fieldgen.batch.worker` in a process of its own; an interrupted batch
terminates its workers and removes their scratch folders. On Dask, the workers' versions must
equal this machine's (checked before any build, and again by each build), since the cache key
is computed here.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Iterator, Sequence

from fieldgen.batch.cache import build_versions, version_differences, worker_versions
from fieldgen.errors import OptionError
from fieldgen.install import install_hint
from fieldgen.meshing.process import child_env, new_scratch

EXECUTORS = ("local", "dask")
#: Environment of every worker: one thread for BLAS, OpenMP and numba (determinism, no
#: oversubscription when N builds share the machine).
WORKER_THREADS = {name: "1" for name in (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS")}
_GRACE_SECONDS = 2.0     # a worker inside TetGen or vtk only sees SIGTERM when it returns
_WORKER_COMMAND = "from fieldgen.batch.worker import worker_main; worker_main()"


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


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

    def death_answer(self) -> dict[str, Any]:
        """The answer of the item the worker was building when it died."""
        return {"index": self.current["index"], "seconds": 0.0, "error": self.death_notice()}

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


def _started(scratch: str, answers: queue.Queue, payload: dict) -> _Worker:
    worker = _Worker(scratch, answers)
    worker.send(payload)
    return worker


def run_local(payloads: Sequence[dict], jobs: int) -> Iterator[dict[str, Any]]:
    """Run payloads on ``jobs`` persistent worker processes, yielding each answer as it comes;
    stop them all on any exception (or when the caller closes this generator)."""
    answers: "queue.Queue[tuple[_Worker, dict | None]]" = queue.Queue()
    todo = list(payloads)
    root = new_scratch("fieldgen-batch-")
    workers: list[_Worker] = []
    try:
        for n in range(jobs):
            scratch = os.path.join(root, f"worker{n}")
            os.mkdir(scratch)
            workers.append(_started(scratch, answers, todo.pop(0)))
        busy = len(workers)
        while busy:
            try:
                worker, answer = answers.get(timeout=0.2)
            except queue.Empty:
                continue
            if answer is None:                       # died (or closed after its last item)
                if worker.current is not None:
                    yield worker.death_answer()
                    worker.current = None
                    busy -= 1
                    scratch = worker.scratch         # what a killed worker left (TetGen's folder)
                    worker.reap(time.monotonic())
                    workers.remove(worker)
                    shutil.rmtree(scratch, ignore_errors=True)
                    if todo:                         # replace it
                        os.makedirs(scratch)         # the worker may have removed the batch's folder
                        workers.append(_started(scratch, answers, todo.pop(0)))
                        busy += 1
                continue
            worker.current = None
            yield answer
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


def _import_distributed():
    try:
        import distributed  # lazy: optional extra 'dask'
    except ImportError:
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
                return worker.death_answer()
            return answer
    finally:
        worker.stop()
        worker.reap(time.monotonic() + _GRACE_SECONDS)
        shutil.rmtree(scratch, ignore_errors=True)


def check_scheduler(executor: str, scheduler: str | None) -> None:
    """OptionError for a scheduler address given to an executor that has no scheduler."""
    if scheduler is not None and executor != "dask":
        raise OptionError("--scheduler given without --executor dask",
                          fix="add --executor dask, or drop --scheduler to build locally")


def dask_requirements(scheduler: str | None):
    """dask.distributed and a scheduler address, or OptionError saying what is missing."""
    distributed = _import_distributed()
    if not scheduler:
        raise OptionError("--executor dask needs --scheduler tcp://HOST:PORT",
                          fix="start a cluster (dask scheduler; dask worker tcp://HOST:8786) "
                              "or use --executor local on one machine")
    _check_address(distributed, scheduler)
    return distributed


def _check_address(distributed, scheduler: str) -> None:
    """OptionError for a ``--scheduler`` that is no address a Dask client connects to (no port,
    an unknown scheme such as http://): Dask's client raised a ValueError from inside its event
    loop, and waited 40 s more to close itself, instead of saying so."""
    try:
        _, port = distributed.comm.addressing.get_address_host_port(scheduler)
        problem = None if 0 < int(port) < 65536 else f"port {port} is outside 1..65535"
    except ValueError as error:
        problem = str(error)
    if problem is not None:
        raise OptionError(f"--scheduler {scheduler!r} is not a Dask scheduler address ({problem})",
                          fix="give the scheduler's address as tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786 "
                              "(dask scheduler prints it)")


def check_worker_versions(client: dict[str, str], workers: dict[str, dict[str, str]]) -> None:
    """OptionError naming each worker whose versions differ from the client's."""
    wrong = [f"{address} has {differ}" for address, versions in sorted(workers.items())
             if (differ := version_differences(client, versions))]
    if wrong:
        raise OptionError("Dask workers run other versions than this client, so the cache keys computed here "
                          "would not describe the assets they build: " + "; ".join(wrong),
                          fix="install the same fieldgen and library versions on every worker as here "
                              "(pip freeze on both sides), or use --executor local")


def _dask_client(distributed, scheduler: str):
    """A client of the cluster at ``scheduler`` whose workers run this machine's versions."""
    try:
        client = distributed.Client(scheduler, timeout="20s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise OptionError(f"cannot connect to the Dask scheduler at {scheduler} ({exc})",
                          fix="check the address and that the scheduler is running") from None
    try:
        check_worker_versions(build_versions(), client.run(worker_versions))
    except BaseException:
        client.close()
        raise
    return client


def run_dask(payloads: Sequence[dict], scheduler: str | None) -> Iterator[dict[str, Any]]:
    """Run payloads on an existing Dask distributed cluster (files on a shared filesystem),
    yielding each answer as it comes."""
    distributed = dask_requirements(scheduler)
    client = _dask_client(distributed, scheduler)
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
            yield answer
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
