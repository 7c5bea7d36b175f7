"""Claude Code's budgets for memory (``Limits``), one plain value the core is given, never reads.

``Limits`` is what is allowed; ``memd.core.index.Budget`` is an index measured against it.
``memd.config`` builds it from the ``[budget]`` section (``memd.config.BudgetConfig`` is this
class); lint, rebuild and the hooks take it as an argument. The defaults are Claude Code's own
values. Each field is a schema key (``memd.record.key``: default, description, bounds), so the
config schema keeps one source of truth without the core importing the config. A
``memd.record.Record``, not a dataclass: the hook path builds one on every memory write.
"""

from __future__ import annotations

from memd.record import Record, key

_VERSION = r"^\s*(\d{1,4})\.(\d{1,4})\.(\d{1,6})\s*$"


class Limits(Record):
    """Claude Code's budgets for memory; defaults are Claude Code's own values."""

    max_lines: int = key(200, "Lines of MEMORY.md that Claude Code loads into a session.", min=1)
    max_chars: int = key(25_000, "Characters (UTF-16 units) of MEMORY.md that Claude Code loads.", min=1)
    warn_ratio: float = key(
        0.8, "Share of either limit at which the index counts as 'near' the budget and a condense "
        "warning is issued.", min=0.1, max=1.0)
    max_index_line: int = key(150, "Longest index line (characters) before it is reported as over-long.", min=20)
    max_topic_files: int = key(200, "Topic files recall scans; files past this (oldest first) are never seen.",
                               min=1)
    max_frontmatter_lines: int = key(30, "Lines of each topic file recall reads for its manifest.", min=1)
    max_file_bytes: int = key(
        4_000_000, "Largest memory file memd reads; bigger files are reported, never loaded whole.", min=1024)
    claude_code_version: str = key(
        "", "The Claude Code version whose loading of MEMORY.md memd follows, as X.Y.Z (its loading moves "
        "between releases); empty: the version found in the project's newest transcript, else the newest "
        "behaviour.")


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """"2.1.328" as (2, 1, 328); None for anything else (unknown: the newest behaviour)."""
    import re

    m = re.match(_VERSION, text or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def refdefs_kept(limits: Limits) -> bool:
    """Whether the Claude Code these limits name keeps link reference definitions (``core.index``)."""
    from memd.core.index import keeps_refdefs

    return keeps_refdefs(version_tuple(limits.claude_code_version))
