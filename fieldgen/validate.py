"""Check that a .vtu file is a fieldgen pressure-field asset and that every invariant holds.

Each invariant is one named :class:`Check` (docs/model.md §2; D 5.0.1, 5.1, 5.2.1).
Nothing here raises on a bad file: an unreadable file, a non-VTU or a missing array is a
failed check with a message, and checks that need what is missing say "not checked".
The checks themselves, in order, are ``CHECKS`` in fieldgen/validate_checks.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fieldgen.errors import FieldgenError, InputError
from fieldgen.io.asset import read_vtu
from fieldgen.validate_checks import CHECKS, BuiltGeometry, CheckSkipped, CheckState, NotFinite
from fieldgen.validate_metadata import DOCUMENTED_METADATA  # noqa: F401 — kept importable from here


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class ValidationReport:
    path: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(check.ok for check in self.checks)

    def to_dict(self) -> dict:
        return {"path": self.path, "valid": self.ok,
                "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks]}

    def text_lines(self, *, quiet: bool = False) -> list[str]:
        """The report as `fieldgen validate` prints it: one line for a valid asset (none when
        ``quiet``); for an invalid one, a line and every failed check, whatever ``quiet`` says."""
        failed = [c for c in self.checks if not c.ok]
        if not failed:
            return [] if quiet else [f"{self.path}: valid ({len(self.checks)} checks)"]
        return [f"{self.path}: INVALID", *(f"  {check.name}: {check.detail}" for check in failed)]


def reports_to_dict(reports: list[ValidationReport]) -> dict:
    """Several reports as one JSON object: ``valid`` when every asset is."""
    return {"valid": all(r.ok for r in reports), "assets": [r.to_dict() for r in reports]}


def validate_asset(path, *, built: BuiltGeometry | None = None) -> ValidationReport:
    """Read ``path`` with vtk and run every check; never raises on a bad file.

    ``built``: the builder's per-tet quantities, reused when the file's arrays equal its own.
    """
    report = ValidationReport(path=str(path))
    try:
        raw = read_vtu(path)
    except FieldgenError as error:
        report.checks.append(Check("readable", False, error.message))
        return report
    except Exception as error:  # noqa: BLE001 — a report, never a traceback
        report.checks.append(Check("readable", False, f"{type(error).__name__}: {error}"))
        return report
    report.checks.append(Check("readable", True, "VTK XML UnstructuredGrid read by vtk"))
    state = CheckState(path=str(path), raw=raw, built=built)
    for name, check in CHECKS:
        try:
            # numpy's overflow notes are no message for a user (a hostile asset would print
            # screenfuls); what overflowed, each check measures with `finite` and fails by name.
            with np.errstate(all="ignore"):
                report.checks.append(Check(name, True, check(state)))
        except CheckSkipped as reason:
            report.checks.append(Check(name, False, f"not checked: {reason}"))
        except NotFinite as error:
            report.checks.append(Check(name, False, f"{name} fails on what it measured: {error}"))
        except Exception as error:  # noqa: BLE001 — every failure becomes a failed check
            detail = str(error) if isinstance(error, ValueError) else \
                f"{type(error).__name__}: {error}"
            report.checks.append(Check(name, False, detail))
    return report


def require_valid(path, *, use: str) -> None:
    """Refuse (InputError, exit 1) an asset that fails :func:`validate_asset`, before ``use`` reads
    its field or metadata (a negative dissipation or modulus would give results of the wrong sign)."""
    failed = [check for check in validate_asset(path).checks if not check.ok]
    if failed and failed[0].name == "readable":     # its message names the file and the fix already
        raise InputError(failed[0].detail)
    if failed:
        detail = "; ".join(f"{check.name}: {check.detail}" for check in failed[:3])
        raise InputError(f"is not a valid fieldgen asset ({detail})", path=str(path),
                         fix=f"build it again with fieldgen build (fieldgen validate {path} lists every "
                             f"failed check) before {use}")
