"""The one key check of every TOML table fieldgen reads (manifests, build specs, scenes).

A key that is not in the table's allowed set is an error naming the file, the table, the key
and the nearest allowed key (difflib's ratio ≥ 0.6), never silently ignored: a misspelt key
would otherwise change what is built or simulated without a word.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Mapping

from .errors import FieldgenError, OptionError


def nearest_key(key: str, allowed: Iterable[str]) -> str | None:
    """The allowed key closest to ``key`` (difflib), or None when nothing is close."""
    close = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.6)
    return close[0] if close else None


def check_keys(table: Mapping, allowed: Iterable[str], *, path=None, where: str | None = None,
               noun: str = "key", error: type[FieldgenError] = OptionError) -> None:
    """Raise ``error`` for the first key of ``table`` not in ``allowed``.

    The message reads ``"<path>: <where>: unknown <noun> 'x'. did you mean 'y'? valid keys: ..."``.
    """
    allowed = tuple(allowed)
    for key in table:
        if key in allowed:
            continue
        near = nearest_key(key, allowed)
        hint = f"did you mean {near!r}? " if near else ""
        prefix = f"{where}: " if where else ""
        raise error(f"{prefix}unknown {noun} {key!r}", path=path,
                    fix=f"{hint}valid {noun}s here: {', '.join(sorted(allowed))}")
