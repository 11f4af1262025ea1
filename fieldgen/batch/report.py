"""What a batch reports: each item's outcome, as JSON and as JUnit XML."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fieldgen import __version__
from fieldgen.io.asset import atomic_output

REPORT_SCHEMA = "fieldgen.batch.report/1"
STATUSES = ("built", "cached", "failed", "stale")


@dataclass
class ItemResult:
    """The outcome of one item, as it appears in the JSON report."""

    index: int
    input: str
    output: str
    status: str                      #: built | cached | failed | stale
    seconds: float
    cache_key: str | None
    error: str | None = None         #: the message, when failed
    reason: str | None = None        #: why an asset is (or was) stale
    warnings: list[str] = dataclasses.field(default_factory=list)   #: the build's (a cached asset's as recorded)

    def warning_lines(self) -> list[str]:
        """The build's warnings as printed on stderr and in JUnit: ``warning: OUTPUT: …``."""
        return [f"warning: {self.output}: {warning}" for warning in self.warnings]

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["name"] = Path(self.output).name
        out["seconds"] = round(self.seconds, 3)
        return out


@dataclass
class BatchReport:
    manifest: str
    results: list[ItemResult]
    seconds: float
    check: bool
    executor: str
    jobs: int

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.results) for s in STATUSES}

    @property
    def ok(self) -> bool:
        return all(r.status in ("built", "cached") for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA, "manifest": self.manifest, "ok": self.ok, "check": self.check,
            "executor": self.executor, "jobs": self.jobs, "seconds": round(self.seconds, 3),
            "counts": self.counts, "tool": {"name": "fieldgen", "version": __version__},
            "items": [r.to_dict() for r in self.results],
        }


#: Characters XML 1.0 cannot hold, even escaped (C0 controls but tab, newline and return;
#: surrogates; U+FFFE, U+FFFF): a file name or message holding one would make the report unreadable.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` with each character XML cannot hold written as its Python escape (``\\x01``), so
    the JUnit report stays well-formed whatever a manifest's names or an error message hold."""
    return _NOT_XML.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


def _testcase(suite: ElementTree.Element, classname: str, result: ItemResult, manifest: str) -> None:
    case = ElementTree.SubElement(suite, "testcase", classname=classname, name=xml_text(result.output),
                                  time=f"{result.seconds:.3f}")
    if result.status == "failed":
        failure = ElementTree.SubElement(case, "failure", message=xml_text(result.error or "failed"),
                                         type="BuildFailed")
        failure.text = xml_text(f"{result.input} -> {result.output}\n{result.error}")
    elif result.status == "stale":
        message = xml_text(f"{result.output} is stale ({result.reason})")
        failure = ElementTree.SubElement(case, "failure", message=message, type="StaleAsset")
        failure.text = f"{message}; rebuild it with fieldgen batch {xml_text(manifest)}"
    else:
        ElementTree.SubElement(case, "system-out").text = f"{result.status} (cache key {result.cache_key})"
    if result.warnings:
        ElementTree.SubElement(case, "system-err").text = xml_text("\n".join(result.warning_lines()))


def junit_tree(report: BatchReport) -> ElementTree.ElementTree:
    """JUnit XML: one <testcase> per item; failed and stale items carry a <failure>, a built or
    cached item's warnings are its <system-err> (one ``warning: OUTPUT: …`` line each, as on
    stderr)."""
    counts = report.counts
    suites = ElementTree.Element("testsuites", name="fieldgen batch", tests=str(len(report.results)),
                                 failures=str(counts["failed"] + counts["stale"]), errors="0",
                                 time=f"{report.seconds:.3f}")
    suite = ElementTree.SubElement(suites, "testsuite", name=xml_text(f"fieldgen batch {report.manifest}"),
                                   tests=str(len(report.results)),
                                   failures=str(counts["failed"] + counts["stale"]), errors="0",
                                   skipped="0", time=f"{report.seconds:.3f}")
    classname = "fieldgen.batch." + re.sub(r"\W", "_", Path(report.manifest).stem)
    for result in report.results:
        _testcase(suite, classname, result, report.manifest)
    ElementTree.indent(suites)
    return ElementTree.ElementTree(suites)


def write_report(report: BatchReport, path: str | os.PathLike) -> None:
    _write_text(path, json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n")


def write_junit(report: BatchReport, path: str | os.PathLike) -> None:
    tree = junit_tree(report)
    _write_text(path, ElementTree.tostring(tree.getroot(), encoding="unicode", xml_declaration=True) + "\n")


def _write_text(path, text: str) -> None:
    with atomic_output(path) as temporary:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)


def stderr_lines(result: ItemResult) -> list[str]:
    """What a batch prints on stderr for one item, whatever --quiet or --json say (docs/model.md
    §1.5): its warnings, and why it failed or would be rebuilt."""
    lines = result.warning_lines()
    if result.status == "failed":
        lines.append(f"failed: {result.output}: {result.error}")
    elif result.status == "stale":
        lines.append(f"would rebuild {result.output} ({result.reason})")
    return lines


def summary_line(report: BatchReport) -> str:
    """``"4 assets: 3 built, 1 cached in 2.0 s"``."""
    counts = ", ".join(f"{n} {s}" for s, n in report.counts.items() if n)
    return f"{len(report.results)} assets: {counts} in {report.seconds:.1f} s"
