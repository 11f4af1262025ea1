"""Contact warnings during a simulation, kept once per (pair, kind).

A contact query warns (a :class:`~fieldgen.runtime.contact.surface.ContactWarning`, e.g. a body
reaching the rigid core of a compliant one) on every step the condition holds. While a
:class:`ContactWarningLog` is active (:func:`collecting`, which ``simulate`` uses), each query
wrapped in :func:`watched` adds its contact warnings to the log, the first of each (pair, kind)
with its message and simulated time, instead of showing them; other warnings pass through. With
no log active, :func:`watched` changes nothing: warnings reach the caller as usual.
"""

from __future__ import annotations

import re
import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Iterator

from fieldgen.runtime.contact.surface import ContactWarning

_ACTIVE: ContextVar["ContactWarningLog | None"] = ContextVar("fieldgen_contact_warnings", default=None)


def warning_kind(category: type) -> str:
    """``PassThroughWarning`` -> ``"pass_through"``."""
    name = re.sub(r"Warning$", "", category.__name__) or category.__name__
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass
class ContactWarningLog:
    """First occurrence of each (pair, kind): ``{"pair": [a, b], "kind", "message", "first_time"}``."""

    time: float = 0.0
    entries: dict = field(default_factory=dict)

    def add(self, pair: tuple[str, str], category: type, message: str) -> None:
        key = (tuple(pair), warning_kind(category))
        if key not in self.entries:
            self.entries[key] = {"pair": list(pair), "kind": key[1], "message": str(message),
                                 "first_time": float(self.time)}

    def as_list(self) -> list[dict]:
        """Entries in the order they first happened."""
        return [dict(entry) for entry in self.entries.values()]


@contextmanager
def collecting(log: ContactWarningLog) -> Iterator[ContactWarningLog]:
    """Make ``log`` the active log for the calls inside (this thread/context only)."""
    token = _ACTIVE.set(log)
    try:
        yield log
    finally:
        _ACTIVE.reset(token)


def set_time(t: float) -> None:
    """The simulated time the next warnings belong to (no-op without an active log)."""
    log = _ACTIVE.get()
    if log is not None:
        log.time = float(t)


@contextmanager
def watched(pair: tuple[str, str]) -> Iterator[None]:
    """Around one contact query of ``pair`` (body names): see the module docstring."""
    log = _ACTIVE.get()
    if log is None:
        yield
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if issubclass(w.category, ContactWarning):
            log.add(pair, w.category, str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
