"""The generated MEMORY.md battery: one case per file, each with the issue-10 disagreement it shows (if any).

``CASES`` maps a case id to ``(text, xfail)``: ``xfail`` names, per oracle test kind (``view``: the
loaded text; ``hidden``: the entries memd calls hidden; ``warning``: the line appended when cut), the
reason the test is marked strict-xfail with (``"issue 10 #1: ..."``) because memd disagrees with
Claude Code 2.1.328 today. A kind not named must pass.
"""

from __future__ import annotations

from typing import NamedTuple


class Case(NamedTuple):
    text: str
    # Where memd disagrees today: test kind ("view", "hidden", "warning") -> the strict-xfail reason.
    xfail: dict[str, str] = {}  # noqa: RUF012 (never mutated)


def entry(i: int, width: int = 0) -> str:
    line = f"- [Note {i}](note_{i}.md) — hook {i}"
    return line + " " + "x" * max(0, width - len(line) - 1) if width else line


def entries(n: int, width: int = 0, start: int = 1) -> str:
    return "\n".join(entry(i, width) for i in range(start, start + n)) + "\n"


def _size(total: int, width: int = 120) -> str:
    """Entries of ``width`` characters adding up to about ``total`` UTF-16 units."""
    return entries(total // (width + 1), width)


CRLF = "issue 10 #1: CRLF line ends are counted raw (the \\r counts) unless the file contains <!--"
BOM = "issue 10 #1: a leading BOM does not count"
HUGE = "issue 10 #1: a single line over 25,000 units loads its first 25,000 units"
AFTER = "issue 10 #1: text after --> on the same line stays"
UNCLOSED = "issue 10 #1: an unclosed <!-- is kept as text"
FENCE = "issue 10 #1: a comment inside a fenced code block is kept"
INDENT = "issue 10 #1: a comment indented under a list item is kept"
FM = "issue 10 #1: frontmatter closes at the first --- anywhere"
ZW = ("loaded view (not in issue 10's list; facts 2): Claude Code removes invisible format characters "
      "(U+200B, U+2060, U+FEFF, U+00AD, U+200E, U+202A) but keeps U+200C/U+200D")
WARN = ("loaded view (not in issue 10's list): the truncation warning reads '... is N lines (limit: 200). Only part "
        "of it was loaded: K of N lines were cut off, starting at line L (\"...\"). Keep index entries ...'")

_E = "\U0001F600"  # one emoji, two UTF-16 units
_CJK = "\u8a18\u61b6"  # two CJK characters, one unit each


def _cut_at(char: str) -> str:
    # A file whose 25,000-unit cut falls right inside/after a non-ASCII character.
    body = _size(24_880)
    pad = 25_000 - len(body) - 60
    return body + "- [Tail](tail.md) — " + "y" * pad + char * 30 + "\n" + entries(3, start=900)


CASES: dict[str, Case] = {
    "plain-3": Case(entries(3)),
    "lines-199": Case(entries(199)),
    "lines-200": Case(entries(200)),
    "lines-201": Case(entries(201)),
    "lines-250": Case(entries(250)),
    "size-24990": Case(_size(24_990)),
    "size-25000": Case(_size(25_000, 99)),
    "size-25100": Case(_size(25_100)),
    "size-30000": Case(_size(30_000)),
    "size-only-129": Case(_size(26_000, 200)),  # 129 lines: cut by size alone
    "lines-and-size": Case(entries(210, 140)),
    "leading-blank-lines": Case("\n\n\n  \n" + entries(5) + "\n\n\n"),
    "whitespace-only": Case("   \n\n \t\n"),
    "crlf-small": Case(entries(5).replace("\n", "\r\n")),
    # 124 lines of 200 characters: 24,924 units with LF, 25,048 with CRLF.
    "crlf-24924": Case(_size(24_924, 200).replace("\n", "\r\n")),
    "crlf-24924-with-comment": Case(("<!-- c -->\n" + _size(24_924, 200)).replace("\n", "\r\n")),
    "crlf-201-lines": Case(entries(201).replace("\n", "\r\n")),
    "bom-small": Case("\ufeff" + entries(3)),
    "bom-at-limit": Case("\ufeff" + _size(25_000, 99)),
    "emoji-at-cut": Case(_cut_at(_E)),
    "cjk-at-cut": Case(_cut_at(_CJK)),
    "emoji-lines": Case(("- [" + _E * 3 + "](e.md) — " + _E * 40 + "\n") * 150),
    "huge-line": Case("- [Huge](huge.md) — " + "z" * 30_000 + "\n"),
    "huge-line-then-entries": Case("- [Huge](huge.md) — " + "z" * 30_000 + "\n" + entries(3)),
    "huge-line-emoji-split": Case("- [H](h.md) — " + "a" * 24_985 + _E * 20 + "\n"),
    "comment-top": Case("<!-- header comment -->\n" + entries(3)),
    "comment-multiline": Case("<!--\nline a\nline b\n-->\n" + entries(3)),
    "comment-middle": Case(entries(2) + "<!-- mid -->\n" + entries(2, start=10)),
    "comment-end": Case(entries(3) + "<!-- trailing -->\n"),
    "comment-inline-in-entry": Case("- [A](a.md) — hook <!-- inline --> more\n" + entries(2)),
    "comment-then-text-same-line": Case("<!-- c --> after the comment\n" + entries(3)),
    "comment-multiline-then-text": Case("<!--\nx\n--> tail text\n" + entries(3)),
    "comment-unclosed": Case(entries(2) + "<!-- never closed\n" + entries(3, start=10)),
    "comment-in-fence": Case("```\n<!-- in fence -->\n```\n" + entries(3)),
    "comment-indented-under-list": Case("- [A](a.md) — a\n  <!-- indented -->\n" + entries(2, start=5)),
    "comment-indented-4": Case("    <!-- code block -->\n" + entries(2)),
    "comment-many-over-limit": Case("".join(f"<!-- c{i} -->\n" for i in range(50)) + entries(199)),
    "comments-hide-lines": Case("<!--\n" + entries(30) + "-->\n" + entries(195, start=100)),
    "frontmatter-flat": Case("---\nname: idx\ndescription: d\n---\n" + entries(3)),
    "frontmatter-nested": Case("---\nname: ''\nmetadata:\n  node_type: memory\n  title: x\n---\n\n" + entries(3)),
    "frontmatter-value-dashes": Case("---\nname: idx\ndescription: a --- b\n---\n" + entries(3)),
    "frontmatter-unclosed": Case("---\nname: idx\n" + entries(3)),
    "frontmatter-not-first": Case("\n---\nname: idx\n---\n" + entries(3)),
    "frontmatter-then-201": Case("---\nname: idx\n---\n" + entries(201)),
    "heading-and-sections": Case("# Memory index\n\n## People\n" + entries(3) + "\n## Projects\n"
                                 + entries(3, start=4)),
    "zero-width-space": Case("- [A](a.md) — a\u200bb\n" + entries(2)),
    "zero-width-joiners": Case("- [A](a.md) — a\u200cb\u200dc\u2060d\n" + entries(2)),
    "tabs-and-trailing-space": Case("\t- [A](a.md) — a   \n" + entries(2) + "   \n"),
    # Version-dependent (issue 23 item 5): before 2.1.330 a file holding a comment lost its top-level link
    # reference definitions; memd follows the version (tests use the tier's own, keeps_refdefs).
    "refdefs-with-comment": Case("<!-- refs -->\n" + "".join(f'[r{i}]: https://x.example/{i} "t{i}"\n'
                                                            for i in range(3)) + entries(2)),
    "refdefs-without-comment": Case("".join(f"[r{i}]: https://x.example/{i}\n" for i in range(3)) + entries(2)),
    "refdefs-later-in-list-and-paragraph": Case(entries(1) + "  [r0]: https://x.example/0\n\ntext\n"
                                                "[r1]: https://x.example/1\n\n[r2]: <https://x.example/2> 'x'\n"
                                                "<!-- c -->\n" + entries(1, start=2)),
    # issue 23 #2: entries between two leading "---" lines are read as frontmatter and never load
    "dashes-pair-hides-entries": Case("---\n" + entries(2) + "---\n" + entries(2, start=3)),
    # the case: a comment and ten definitions at the top of a 205-line index (2.1.328: none hidden)
    "refdefs-push-past-200": Case("<!-- links -->\n" + "".join(f"[l{i}]: https://x.example/{i}\n" for i in range(10))
                                  + entries(194)),
}
