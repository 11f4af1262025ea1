"""Child processes that do not outlive the process that started them (Linux).

TetGen and fTetWild run in child processes (a crash must not take the build with it) and batch
builds run in worker processes. If the parent is killed (SIGKILL, the OOM killer) nothing can
stop those children from outside, so each asks the kernel, at its start, for a signal when its
parent dies (``prctl(PR_SET_PDEATHSIG)``).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGKILL, parent: int | None = None) -> bool:
    """Have ``signum`` sent to this process when its parent dies; False if ``parent`` is gone already.

    ``parent`` is the pid the caller was started by: a parent that died before the request took
    effect has left this process to another parent, and no signal will come. Elsewhere than on
    Linux this does nothing and returns True.
    """
    try:
        import ctypes

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
    package_root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env[PARENT_VARIABLE] = str(os.getpid())
    return env


def die_with_starter() -> None:
    """In a child started with :func:`child_env`: be killed when the starter dies (or exit now)."""
    parent = os.environ.get(PARENT_VARIABLE)
    if not die_with_parent(signal.SIGKILL, None if parent is None else int(parent)):
        os._exit(1)                   # the starter is gone already; nobody wants the result
