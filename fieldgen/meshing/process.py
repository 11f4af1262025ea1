"""Child processes that do not outlive the process that started them (Linux), and the scratch
folders they work in.

TetGen and fTetWild run in child processes (a crash must not take the build with it) and batch
builds run in worker processes. If the parent is killed (SIGKILL, the OOM killer) nothing can
stop those children from outside, so each asks the kernel, at its start, for a signal when its
parent dies (``prctl(PR_SET_PDEATHSIG)``). A killed parent cannot remove its scratch folder
either; :func:`scratch_folder` names each folder after its process, and removes those of dead
processes before making a new one.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGKILL, parent: int | None = None) -> bool:
    """Have ``signum`` sent to this process when its parent dies; False if ``parent`` is gone already.

    ``parent`` is the pid the caller was started by: a parent that died before the request took
    effect has left this process to another parent, and no signal will come. Elsewhere than on
    Linux this does nothing and returns True.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signum))
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return True
    return parent is None or os.getppid() == parent


#: The environment variable through which a parent gives its pid to the child it starts.
PARENT_VARIABLE = "FIELDGEN_PARENT_PID"


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a fieldgen child process: ``env`` (default this process's) with this
    fieldgen first on ``PYTHONPATH`` (the child imports the same code, installed or not) and this
    process's pid, for :func:`die_with_starter` in the child."""
    env = dict(os.environ if env is None else env)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env[PARENT_VARIABLE] = str(os.getpid())
    return env


def die_with_starter() -> None:
    """In a child started with :func:`child_env`: be killed when the starter dies (or exit now)."""
    parent = os.environ.get(PARENT_VARIABLE)
    if not die_with_parent(signal.SIGKILL, None if parent is None else int(parent)):
        os._exit(1)                   # the starter is gone already; nobody wants the result


#: The largest pid Linux gives (``/proc/sys/kernel/pid_max`` is at most 2**22).
PID_MAX = 4_194_304

def _machine() -> str | None:
    """Where a pid names a process: this boot of this machine and this pid namespace, as
    ``<boot id>-<namespace inode>``, or None off Linux. The namespace inode alone is the same on
    every host (4026531836 outside containers), and hosts may share a temporary folder (NFS)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip().replace("-", "")[:16]
        return f"{boot}-{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:           # another user's process
        return True
    return True


def remove_abandoned(prefix: str, root: str | None = None) -> list[str]:
    """Remove the folders ``<prefix><machine>-<pid>-*`` in ``root`` (default the temporary folder)
    that belong to this user and to a process of this machine, boot and pid namespace
    (:func:`_machine`) that no longer runs (a killed build's); return their paths. A reused pid
    only keeps a folder longer; a folder of another user, host or container, a symlink or a name
    that does not parse is left alone; off Linux, nothing is removed."""
    machine = _machine()
    if machine is None:
        return []
    head = f"{prefix}{machine}-"
    removed = []
    try:
        entries = list(os.scandir(root or tempfile.gettempdir()))
    except OSError:
        return []
    for entry in entries:
        try:
            if not entry.name.startswith(head):
                continue
            pid = entry.name[len(head):].split("-", 1)[0]
            if not (pid.isascii() and pid.isdigit()) or not 0 < int(pid) <= PID_MAX or int(pid) == os.getpid():
                continue
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            if _alive(int(pid)):
                continue
            shutil.rmtree(entry.path)
            removed.append(entry.path)
        except (OSError, ValueError, OverflowError):
            continue                  # not ours to judge, or gone already: leave it
    return removed


def new_scratch(prefix: str) -> str:
    """A new temporary folder ``<prefix><machine>-<pid>-<random>`` (the caller removes it), made
    after removing the ones with this prefix that killed processes left (:func:`remove_abandoned`)."""
    remove_abandoned(prefix)          # one scan of the folder: milliseconds beside a TetGen run
    return tempfile.mkdtemp(prefix=f"{prefix}{_machine() or 0}-{os.getpid()}-")


@contextmanager
def scratch_folder(prefix: str) -> Iterator[str]:
    """:func:`new_scratch`, removed with its contents on exit."""
    folder = new_scratch(prefix)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_child(module: str, folder: str, *, timeout: float, env: dict[str, str] | None = None,
              log: str | None = None, on_line: Callable[[str], None] | None = None,
              while_waiting: Callable[[], None] | None = None, label: str | None = None) -> int:
    """Run ``python -m module folder`` in ``folder`` (a mesher's child process, which reads its
    input from there and writes its output there) and return its exit code.

    Its standard output and error go to the file ``log``, or, with ``on_line``, line by line
    (unbuffered) to ``on_line``. ``while_waiting()`` runs in this process meanwhile. After
    ``timeout`` seconds (with ``on_line``: checked as each line arrives) the child is killed and
    ``subprocess.TimeoutExpired`` raised; on any exception here the child is killed first.
    With ``label`` (and no ``on_line``), a progress line goes to stderr every
    :data:`PROGRESS_SECONDS` while the child runs, with the time left before its limit.
    """
    env = child_env() if env is None else env
    if on_line is None:
        with open(log or os.devnull, "wb") as sink:
            child = subprocess.Popen([sys.executable, "-m", module, folder], cwd=folder, env=env,
                                     stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
            return _waited(child, timeout, while_waiting, label=label)
    child = subprocess.Popen([sys.executable, "-u", "-m", module, folder], cwd=folder, env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, errors="replace")
    return _waited(child, timeout, while_waiting, on_line)


#: Seconds between the progress lines of a long child run (:func:`run_child` with ``label``).
PROGRESS_SECONDS = 30.0


def _waited_with_progress(child: subprocess.Popen, timeout: float, start: float, label: str | None) -> int:
    """``child.wait(timeout)``, with a line on stderr every :data:`PROGRESS_SECONDS` if ``label``."""
    while True:
        left = timeout - (time.monotonic() - start)
        try:
            return child.wait(timeout=max(0.0, min(left, PROGRESS_SECONDS if label else left)))
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - start
            if elapsed >= timeout:
                raise subprocess.TimeoutExpired(child.args, timeout) from None
            print(f"{label}: still running after {elapsed:.0f} s (stopped at {timeout:.0f} s)",
                  file=sys.stderr, flush=True)


def _waited(child: subprocess.Popen, timeout: float, while_waiting=None, on_line=None,
            label: str | None = None) -> int:
    """``child``'s exit code, its lines (if piped) given to ``on_line``; killed on any exception."""
    start = time.monotonic()
    try:
        if while_waiting is not None:
            while_waiting()
        if on_line is None:
            return _waited_with_progress(child, timeout, start, label)
        for line in child.stdout:
            on_line(line)
            if time.monotonic() - start > timeout:
                raise subprocess.TimeoutExpired(child.args, timeout)
        return child.wait()
    except BaseException:
        child.kill()
        child.wait()
        raise
