"""Findings of `memd check`: the stable codes, their severities, and one finding's shape.

Import-light (no regexes, no YAML, named tuples rather than dataclasses) so that cached results can be
shown without loading the linter.
"""

from __future__ import annotations

from memd.core.paths import INDEX_NAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, NamedTuple

    class _Code(NamedTuple):
        severity: str
        name: str
        summary: str

    class _Finding(NamedTuple):
        code: str
        severity: str
        path: str
        line: int
        message: str
        col: int = 1  # 1-based, in characters of the line (1 when the finding is about the whole line or file)
        fixable: bool = False  # `memd rebuild` fixes it (when the rebuilt index fits the budget)
else:
    # The same tuples built by collections.namedtuple: typing.NamedTuple would import typing (~4 ms),
    # and `memd check` shows cached findings through this module.
    from collections import namedtuple

    _Code = namedtuple("Code", "severity name summary")
    _Finding = namedtuple("Finding", "code severity path line message col fixable", defaults=(1, False))

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)


class Code(_Code):
    __slots__ = ()


CODES: dict[str, Code] = {
    "MEM001": Code(ERROR, "index-over-budget",
                   "MEMORY.md is longer than Claude Code loads; entries past the cut are never seen."),
    "MEM002": Code(WARNING, "index-near-budget", "MEMORY.md is near its line or character budget."),
    "MEM003": Code(ERROR, "hidden-entry", "An index entry lies past the cut and never reaches a session."),
    "MEM004": Code(WARNING, "index-line-too-long",
                   "An index line is longer than an index line should be (150 characters)."),
    "MEM005": Code(ERROR, "dangling-link", "The index links to a file that does not exist."),
    "MEM006": Code(WARNING, "dangling-topic-link", "A topic file links to a file that does not exist."),
    "MEM007": Code(WARNING, "link-leaves-folder", "A link points outside the memory folder."),
    "MEM008": Code(ERROR, "symlink-leaves-folder", "A symlink in the memory folder points outside it."),
    "MEM009": Code(WARNING, "link-case-mismatch",
                   "A link matches a file only when case or Unicode normalization is ignored."),
    "MEM010": Code(WARNING, "orphan-topic", "A topic file is not linked from MEMORY.md."),
    "MEM011": Code(WARNING, "duplicate-entry", "Two index entries link to the same file."),
    "MEM012": Code(WARNING, "duplicate-name", "Two topic files have the same name."),
    "MEM013": Code(WARNING, "duplicate-description", "Two topic files have the same description."),
    "MEM014": Code(WARNING, "duplicate-body", "Two topic files have identical or near-identical bodies."),
    "MEM015": Code(WARNING, "orphan-not-memory",
                   "An unlinked file that is no memory (no frontmatter, binary, encrypted, *.secret.*)."),
    "MEM020": Code(WARNING, "no-frontmatter", "A topic file has no frontmatter (recall sees no description)."),
    "MEM021": Code(ERROR, "invalid-frontmatter", "A topic file's frontmatter cannot be read at all."),
    "MEM022": Code(WARNING, "lenient-frontmatter", "Frontmatter is not valid YAML; its keys were read line by line."),
    "MEM023": Code(WARNING, "missing-description", "A topic file has no description, the only signpost recall sees."),
    "MEM024": Code(WARNING, "missing-type", "A topic file has no type."),
    "MEM025": Code(WARNING, "unknown-type", "A topic file's type is not user, feedback, project or reference."),
    "MEM026": Code(INFO, "missing-name", "A topic file's frontmatter has no name."),
    "MEM027": Code(WARNING, "frontmatter-too-long", "Frontmatter is longer than the lines recall reads (30)."),
    "MEM030": Code(WARNING, "too-many-topics", "More topic files than recall scans (200)."),
    "MEM031": Code(WARNING, "unseen-by-recall", "A topic file recall never sees (the oldest past the scan limit)."),
    "MEM040": Code(WARNING, "relative-date", "A relative date (yesterday, next Thursday, 昨天) with no absolute date."),
    "MEM041": Code(INFO, "relative-date-anchored", "A relative date in a file that is dated elsewhere (name, title)."),
    "MEM050": Code(ERROR, "secret", "Something that looks like a secret (API key, token, private key, password)."),
    "MEM060": Code(ERROR, "not-utf8", "A memory file is not valid UTF-8."),
    "MEM061": Code(ERROR, "file-too-large", "A memory file is larger than memd reads."),
    "MEM062": Code(ERROR, "unreadable", "A memory file cannot be read (permissions, not a regular file, broken link)."),
    "MEM070": Code(WARNING, "no-index", "Topic files exist but MEMORY.md does not."),
    "MEM071": Code(ERROR, "folder-unreadable", "The memory folder cannot be listed."),
    "MEM072": Code(WARNING, "folder-too-big", "The memory folder has more entries than memd walks."),
    "MEM081": Code(ERROR, "entries-in-frontmatter",
                   "Index entries lie between two '---' lines at the top of MEMORY.md: Claude Code reads them "
                   "as frontmatter and never loads them."),
    "MEM080": Code(WARNING, "unclosed-comment",
                   "An HTML comment in MEMORY.md is never closed: sessions load it, and all after it, as text."),
    "MEM090": Code(WARNING, "sync-conflict",
                   "A sync conflict block (another machine's differing lines) is waiting to be resolved."),
}


class Finding(_Finding):
    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return self._asdict()

    def render(self) -> str:
        return f"{self.path}:{self.line}: {self.code} {self.severity}: {self.message}"


def finding(code: str, path: str, line: int, message: str, col: int = 1, *, fixable: bool = False) -> Finding:
    """A finding of code, with the severity the code has."""
    return Finding(code, CODES[code].severity, path, line, message, col, fixable)


def sort_key(f: Finding) -> tuple[int, str, int, str]:
    return (0 if f.path in (".", INDEX_NAME) else 1, f.path, f.line, f.code)


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    c = dict.fromkeys(SEVERITIES, 0)
    for f in findings:
        c[f.severity] += 1
    return c
