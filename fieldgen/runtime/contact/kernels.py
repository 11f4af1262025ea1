"""The first run: saying so while numba compiles the runtime's kernels (docs/model.md §5).

Every kernel of ``runtime/contact`` and ``runtime/dynamics`` (and the build's sliver moves,
``surface/slivers.py``) is ``@nb.njit(cache=True)``: it is
compiled on its first call and kept on disk where the user can write, chosen by numba's cache
locators in order: ``NUMBA_CACHE_DIR`` when set, else the ``__pycache__`` beside the module when
that is writable (an editable install, or any install into a virtualenv the user owns), else the
user-wide cache directory (``~/.cache/numba`` on Linux; an install in a site-packages the user
cannot write). Later runs load the compiled code from there. ``fieldgen compile-kernels`` (run by
``make install``; fieldgen/runtime/compile_kernels.py) compiles them all ahead, so that even the
first run loads them (docs/design/first-run.md).

numba broadcasts a ``numba:compile`` event only when a kernel is really compiled, never when it
is loaded from the cache; a cold cache is therefore detected exactly by the first such event, and
:func:`announce_compiling` says once, on the progress stream (stderr), what the pause is.
"""

from __future__ import annotations

from numba.core import event

from fieldgen.progress import Progress

COMPILING_MESSAGE = ("compiling fieldgen's kernels (up to a minute, once: cached for later runs; "
                     "`fieldgen compile-kernels` does it ahead) ...")


class CompileNotice(event.Listener):
    """Prints :data:`COMPILING_MESSAGE` on the first compilation it hears of, then stays silent."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.announced = False

    def on_start(self, ev) -> None:
        if not self.announced:
            self.announced = True
            self.progress.message(COMPILING_MESSAGE)

    def on_end(self, ev) -> None:
        pass


def announce_compiling(progress: Progress):
    """Listen for numba compiling a kernel and say so once, until the returned function is
    called (a command calls it when it ends, so nothing is said on a later command's streams).

    Silent (nothing installed) when ``progress`` is disabled (``--quiet``).
    """
    if not progress.enabled:
        return lambda: None
    notice = CompileNotice(progress)
    event.register("numba:compile", notice)
    return lambda: event.unregister("numba:compile", notice)
