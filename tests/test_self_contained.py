"""The repository stands on its own: no tracked file points outside it, the code cites no issue
numbers, and every source citation in the code resolves in docs/model.md.

Citations checked (in fieldgen/ and cli/): dissertation sections ("D 5.2.1", "D C.3",
"D App. B", "D ch. 6", and lists such as "D 5.0.2, 5.0.3, C.1") must appear in the table of
docs/model.md §6.2; keyed citations of the other sources ("M22 IV", "B92 13.2", "E19 VI-A",
"T07") must appear with the same key and section in docs/model.md; "docs/model.md §N.M" anywhere
must name a numbered heading that exists.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "docs" / "model.md"
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()

# Paths and names that only exist outside the repository (the development machine's shared
# folder and its notes), so a fresh clone cannot follow them.
# (Joined at run time, so that a plain grep of the repository for them finds nothing either.)
_S = "shared"
OUTSIDE = (f"../{_S}", "/" + "work/", f"FIELDGEN_{_S.upper()}", f"{_S}/meshes", f"{_S}/model", f"{_S}/notes",
           f"{_S}/seeds", "MODEL" + ".md", "MEASURED" + ".md")
# The old notes' section references ("MODEL 3", "MODEL.md section 1") are outside too.
OUTSIDE_RE = re.compile(r"\bMODEL\s+(?:section\s+)?\d")
ISSUE = re.compile(r"\b[Ii]ssues?\s*#?\s*\d+|\bgh-\d+\b|(?<![\w&])#\d{1,5}\b(?=[\s).,;:]|$)")

# One section token of a citation; "eq." and "Fig." tokens are matched so lists continue past
# them, and dropped.
_TOKEN = (r"(?:App\.\s*[A-D](?:\.\d+)*|ch\.\s*\d+(?:\s*[-–]\s*\d+)?|(?:eq|Fig)s?\.\s*[\dA-Z][\w.\-–/]*(?:\s*,\s*\d[\w.\-–/]*)*"
          r"|[IVX]+(?:-[A-Z])?(?![\w.])|[A-D]\.\d+(?:\.\d+)*|\d+(?:\.\d+)*(?:\s*[-–]\s*\d+)?|[A-D](?![\w.])(?!\s+(?:App\.|ch\.|\d|[A-D]\.)))")
KEYS = ("D", "E19", "M22", "B92", "T07")
_CITATION = re.compile(r"(?<![\w.])(" + "|".join(KEYS) + r")\s+(" + _TOKEN + r"(?:\s*(?:,|and)\s*" + _TOKEN + r")*)")


def tracked_files() -> list[Path]:
    """The repository's files as the work tree has them: tracked or new (and not ignored), and
    present (a file deleted but not yet committed is left out)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True).stdout
    names = dict.fromkeys(name for name in out.decode().split("\0") if name)
    return [ROOT / name for name in names if (ROOT / name).is_file()]


def text_of(path: Path) -> str | None:
    """The file's text, or None for binary files (NUL bytes) and files deleted in the work tree."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def _expand(token: str) -> list[str]:
    """Normalise one section token: "App. B" -> "B", "ch. 8-9" -> "8", "9"; eq./Fig. and
    equation labels like "10-10" -> []."""
    token = re.sub(r"\s+", " ", token.strip())
    if re.match(r"(?:eq|Fig)s?\.", token):
        return []
    token = re.sub(r"^(?:App\.|ch\.)\s*", "", token)
    m = re.fullmatch(r"(\d+)\s*[-–]\s*(\d+)", token)
    if m:   # a range of chapters, or else an equation label such as Baraff's "10-10"
        a, b = int(m.group(1)), int(m.group(2))
        return [str(i) for i in range(a, b + 1)] if a < b <= a + 20 else []
    return [token]


def citations(text: str) -> set[tuple[str, str]]:
    """Every (key, section) a text cites, e.g. {("D", "5.2.1"), ("D", "C.3"), ("M22", "IV")}.
    A bare key with no section ("T07)") is reported as (key, "")."""
    found: set[tuple[str, str]] = set()
    for m in _CITATION.finditer(text):
        for token in re.findall(_TOKEN, m.group(2)):
            found.update((m.group(1), s) for s in _expand(token))
    for key in KEYS[1:]:
        if re.search(rf"(?<![\w.]){key}\b", text):
            found.add((key, ""))
    return found


def dissertation_table(model_text: str) -> set[str]:
    """Sections listed in the first column of docs/model.md's table of dissertation sections."""
    return {m.group(1) for m in re.finditer(r"^\|\s*D\s+([A-D0-9][\w.]*)\s*\|", model_text, re.M)}


def headings(model_text: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^#{2,4}\s+(\d+(?:\.\d+)*)\.?\s", model_text, re.M)}


def code_files() -> list[Path]:
    return [p for p in tracked_files() if p.suffix == ".py" and p.relative_to(ROOT).parts[0] in ("fieldgen", "cli")]


# --------------------------------------------------------------------------- the extractor itself

def test_citation_extractor_reads_lists_appendices_and_chapters():
    text = ('"""(D 5.0.2, 5.0.3, C.1, C.2; M22 III-B) D App. B, D ch. 6 and D 5.1 (eq. 5.3);'
            ' B92 ch. 8-9, eq. 8-7, 10-10; M22 eq. 3, 7; T07 Stewart-Trinkle; 3D 4.2 is not a citation."""')
    assert citations(text) == {("D", "5.0.2"), ("D", "5.0.3"), ("D", "C.1"), ("D", "C.2"), ("D", "B"),
                               ("D", "6"), ("D", "5.1"), ("M22", "III-B"), ("M22", ""), ("B92", "8"),
                               ("B92", "9"), ("B92", ""), ("T07", "")}


def test_dissertation_table_check_can_fail():
    table = dissertation_table(MODEL.read_text(encoding="utf-8"))
    assert "5.2.1" in table and "C.3" in table
    assert "9.9.9" not in table                       # an uncited, non-existent section is absent
    cited = {s for k, s in citations("(D 9.9.9)") if k == "D"}
    assert cited - table == {"9.9.9"}


def test_issue_pattern():
    assert ISSUE.search("rigid bodies (issue 6)") and ISSUE.search("see #123.") and ISSUE.search("Issue #4")
    assert not ISSUE.search("this issue is 6 mm wide") and not ISSUE.search("colour #ff0000")


# --------------------------------------------------------------------------- the repository

def test_no_tracked_file_points_outside_the_repository():
    bad = []
    for path in tracked_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel == THIS:
            continue
        text = text_of(path)
        if text is None:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            bad += [f"{rel}:{lineno}: {word!r}" for word in OUTSIDE if word in line]
            bad += [f"{rel}:{lineno}: {m.group(0)!r}" for m in OUTSIDE_RE.finditer(line)]
    assert not bad, "references outside the repository (use tests/data, docs/model.md or the paper):\n" + "\n".join(bad)


def test_code_and_docs_cite_no_issue_numbers():
    bad = []
    for path in tracked_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel == THIS or rel.startswith("tests/data/") or path.suffix not in (".py", ".md", ".toml", ".txt", ""):
            continue
        text = text_of(path)
        if text is None:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            m = ISSUE.search(line)
            if m:
                bad.append(f"{rel}:{lineno}: {m.group(0)!r}")
    assert not bad, "issue numbers a maintainer cannot follow (name the feature instead):\n" + "\n".join(bad)


def test_every_dissertation_section_cited_in_the_code_is_in_docs_model():
    model_text = MODEL.read_text(encoding="utf-8")
    table = dissertation_table(model_text)
    missing = []
    for path in code_files():
        for key, section in citations(path.read_text(encoding="utf-8")):
            if key == "D" and section not in table:
                missing.append(f"{path.relative_to(ROOT)}: D {section}")
    assert code_files(), "no code found"
    assert not missing, "dissertation sections cited but not listed in docs/model.md §6.2:\n" + "\n".join(sorted(set(missing)))


def test_every_keyed_citation_in_the_code_resolves_in_docs_model():
    model_cites = citations(MODEL.read_text(encoding="utf-8"))
    missing = []
    for path in code_files():
        for key, section in citations(path.read_text(encoding="utf-8")):
            if key != "D" and (key, section) not in model_cites:
                missing.append(f"{path.relative_to(ROOT)}: {key} {section}".rstrip())
    assert not missing, "citations with no entry in docs/model.md:\n" + "\n".join(sorted(set(missing)))


def test_references_to_docs_model_sections_exist():
    known = headings(MODEL.read_text(encoding="utf-8"))
    assert {"1.1", "4.2", "6.2"} <= known
    bad = []
    for path in tracked_files():
        text = text_of(path)
        if text is None:
            continue
        for m in re.finditer(r"(?:docs/)?model\.md\s*§\s*(\d+(?:\.\d+)*)", text):
            if m.group(1) not in known:
                bad.append(f"{path.relative_to(ROOT)}: docs/model.md §{m.group(1)}")
    assert not bad, "links to sections docs/model.md does not have:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", ["Elandt", "Masterjohn", "Baraff", "Stewart", "Trinkle", "Lemke", "Anitescu"])
def test_references_spell_out_each_source(name):
    model_text = MODEL.read_text(encoding="utf-8")
    references = model_text[model_text.index("## 6. References"):]
    assert name in references
