"""Progress reporting on stderr: stage names with their times, and bars for long loops.

A ``Progress`` is passed explicitly to whatever reports progress; there is no global
reporter. ``Progress(enabled=False)`` is silent (``--quiet`` or library use).
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, TextIO


@dataclass
class Progress:
    """Stage-by-stage progress on a text stream (stderr by default)."""

    enabled: bool = True
    stream: TextIO | None = None
    prefix: str = ""
    stage_seconds: dict[str, float] = field(default_factory=dict)

    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def message(self, text: str) -> None:
        """One line of information (suppressed when disabled)."""
        if self.enabled:
            print(f"{self.prefix}{text}", file=self._out(), flush=True)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a pipeline stage; report its name on entry and its duration on exit.

        Durations accumulate in ``stage_seconds`` (a stage entered twice adds up).
        """
        if self.enabled:
            print(f"{self.prefix}{name} ...", file=self._out(), flush=True)
        start = time.perf_counter()
        ended = "done in"
        try:
            yield
        except BaseException:
            ended = "stopped after"          # the error that follows says why; it was not done
            raise
        finally:
            seconds = time.perf_counter() - start
            self.stage_seconds[name] = self.stage_seconds.get(name, 0.0) + seconds
            if self.enabled:
                print(f"{self.prefix}{name} {ended} {seconds:.2f} s", file=self._out(), flush=True)

    def bar(self, total: int, label: str) -> "Bar":
        """A text progress bar for ``total`` items (drawn only on an interactive stream)."""
        return Bar(self if self.enabled else None, total, label)


@dataclass
class Bar:
    """A minimal progress bar: redraws in place on a terminal, prints milestones otherwise."""

    progress: Progress | None
    total: int
    label: str
    done: int = 0
    _last_percent: int = -1

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done += n
        if self.progress is None or self.total <= 0:
            return
        out = self.progress._out()
        percent = int(100 * self.done / self.total)
        width = 30
        filled = int(width * self.done / self.total)
        line = f"{self.progress.prefix}{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {note}"
        if getattr(out, "isatty", lambda: False)():
            end = "\n" if self.done >= self.total else ""
            print("\r" + line.ljust(100), end=end, file=out, flush=True)
        elif percent // 10 != self._last_percent // 10 or self.done >= self.total or note:
            print(line, file=out, flush=True)
        self._last_percent = percent
