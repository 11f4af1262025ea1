"""The pip command that installs an optional extra (``robust``, ``dask``, ...) for the way
fieldgen itself was installed.

``pip install 'fieldgen[robust]'`` only works when fieldgen comes from a package index. From a
checkout (``pip install -e .`` or running in the source tree) the extra must come from that
checkout; after ``pip install /path/to/fieldgen`` from that folder. Every hint also names the
extra's packages themselves, which installs them whatever the origin.
"""

from __future__ import annotations

import json
import re
import shlex
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10
    import tomli as tomllib

DISTRIBUTION = "fieldgen"


def _quote(text: str) -> str:
    """Shell-quoted, always in single quotes when it holds brackets or comparisons (zsh globs them)."""
    quoted = shlex.quote(text)
    return quoted if quoted.startswith("'") or not any(c in text for c in "[]<>=") else f"'{text}'"


def extra_command(extra: str, *, source_root: str | Path | None = None, direct_url: dict | None = None,
                  requirements: list[str] | tuple[str, ...] = ()) -> str:
    """The hint for ``extra`` given how fieldgen was found (pure; see :func:`install_hint`).

    ``source_root``: the checkout fieldgen is imported from (editable or source tree), else None.
    ``direct_url``: the installed distribution's PEP 610 record (``pip install <dir>``), else None.
    ``requirements``: the extra's requirement strings (e.g. ``pytetwild>=0.4``).
    """
    if source_root is not None:
        command = f"pip install -e {_quote(f'{source_root}[{extra}]')}"
    else:
        folder = None
        if direct_url and str(direct_url.get("url", "")).startswith("file:") and "dir_info" in direct_url:
            folder = Path(unquote(urlparse(direct_url["url"]).path))
        if folder is not None and (folder / "pyproject.toml").is_file():
            command = f"pip install {_quote(f'{folder}[{extra}]')}"
        else:
            command = f"pip install {_quote(f'{DISTRIBUTION}[{extra}]')}"
    text = f"`{command}`"
    if requirements:
        text += f" (or the packages alone: `pip install {' '.join(_quote(r) for r in requirements)}`)"
    return text


def source_root() -> Path | None:
    """The checkout fieldgen is imported from (its pyproject.toml names fieldgen), else None."""
    root = Path(__file__).resolve().parents[1]
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return root if project.get("name") == DISTRIBUTION else None


def extra_requirements(extra: str, root: Path | None = None) -> list[str]:
    """The requirement strings of ``extra`` from pyproject.toml (checkout) or the installed metadata."""
    if root is not None:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        return list(project.get("optional-dependencies", {}).get(extra, []))
    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []
    out = []
    for requirement in requires:
        name, _, marker = requirement.partition(";")
        if marker.replace(" ", "").replace("'", '"') == f'extra=="{extra}"':
            out.append(name.strip())
    return out


def _direct_url() -> dict | None:
    for distribution in metadata.distributions(name=DISTRIBUTION):
        text = distribution.read_text("direct_url.json")
        if text:
            try:
                return json.loads(text)
            except ValueError:
                return None
    return None


def extra_installed(extra: str) -> bool:
    """Whether every distribution ``extra`` requires is installed (by its name, versions unchecked)."""
    requirements = extra_requirements(extra, source_root())
    for requirement in requirements:
        name = re.split(r"[\s<>=!~\[;(]", requirement.strip(), maxsplit=1)[0]
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            return False
    return bool(requirements)


def install_hint(extra: str) -> str:
    """E.g. ``install_hint("robust")`` -> "`pip install -e '/src/fieldgen[robust]'` (or the packages
    alone: `pip install 'pytetwild>=0.4' 'pyvista>=0.43'`)" from a checkout."""
    root = source_root()
    return extra_command(extra, source_root=root, direct_url=None if root else _direct_url(),
                         requirements=extra_requirements(extra, root))
