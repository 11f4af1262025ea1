"""A process-wide setting held while any caller is inside (glibc's malloc thresholds, fieldgen/heap.py).

A setting of the process, not of a call: two builds in two threads of one process share it. :class:`Held` counts the callers inside under a lock:
the first one in applies the setting, the last one out puts back what was there before, so a
caller that ends early never takes the setting from under one still running.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable


class Held:
    """``apply()`` (returning what ``restore(saved)`` needs) on the first entry, ``restore`` on
    the last exit; as a decorator, around each call of the function."""

    def __init__(self, apply: Callable[[], Any], restore: Callable[[Any], None]):
        self.apply, self.restore = apply, restore
        self.lock = threading.Lock()
        self.inside = 0
        self.saved = None

    def __enter__(self):
        with self.lock:
            if self.inside == 0:
                self.saved = self.apply()
            self.inside += 1
        return self

    def __exit__(self, *exc):
        with self.lock:
            self.inside -= 1
            if self.inside == 0:
                self.restore(self.saved)
                self.saved = None
        return False

    def __call__(self, function):
        @functools.wraps(function)
        def held(*args, **kwargs):
            with self:
                return function(*args, **kwargs)
        return held
