"""Sync's conflict blocks (issue 21): the other machine's differing lines, kept visible in a memory file.

When two machines changed the same lines of a topic file, sync keeps this machine's text and, after it,
a block holding the other machine's lines that differ::

    <!-- memd sync conflict: the lines below are from desktop (2026-12-01); keep what is right, then ...
    ...their lines...
    <!-- memd sync conflict end -->

(the opening line ends ``... delete this block -->``). The markers are HTML comment lines: Claude
Code strips them when it loads a memory, while the lines
between stay visible to the model (so a session sees the disagreement and can ask the user). A block
is never inside frontmatter (``memd.sync.merge`` puts a frontmatter conflict's block right after it).
``memd check`` reports each unresolved block (MEM090) with its file and line; ``memd status`` counts them.
Pure string work, no regular expression: a line is a marker by its prefix and suffix.
"""

from __future__ import annotations

from typing import NamedTuple

BEGIN = "<!-- memd sync conflict: "
END = "<!-- memd sync conflict end -->"
_CLOSE = "-->"


class Block(NamedTuple):
    line: int  # 1-based line of the opening marker
    end: int | None  # 1-based line of the closing marker (None: never closed)
    machine: str
    date: str


def _clean(name: str) -> str:
    """A machine name that cannot close the comment early or break the line."""
    out = " ".join(name.split()).replace("--", "-").replace("(", "[").replace(")", "]")
    return out or "another machine"


def begin_line(machine: str, date: str) -> str:
    return (f"{BEGIN}the lines below are from {_clean(machine)} ({date}); keep what is right, "
            f"then delete this block {_CLOSE}")


def is_begin(line: str) -> bool:
    s = line.strip()
    return s.startswith(BEGIN) and s.endswith(_CLOSE)


def is_end(line: str) -> bool:
    return line.strip() == END


def is_marker(line: str) -> bool:
    return is_begin(line) or is_end(line)


def _who(line: str) -> tuple[str, str]:
    s = line.strip().removeprefix(BEGIN)
    head = s.split(";", 1)[0].removeprefix("the lines below are from ").strip()
    if head.endswith(")") and " (" in head:
        machine, date = head[:-1].rsplit(" (", 1)
        return machine, date
    return head, ""


def blocks(text: str) -> list[Block]:
    """The conflict blocks of a file, in order (a block opened inside another closes the first there)."""
    out: list[Block] = []
    open_: tuple[int, str, str] | None = None
    for n, line in enumerate(text.split("\n"), 1):
        if is_begin(line):
            if open_ is not None:
                out.append(Block(open_[0], None, open_[1], open_[2]))
            machine, date = _who(line)
            open_ = (n, machine, date)
        elif is_end(line) and open_ is not None:
            out.append(Block(open_[0], n, open_[1], open_[2]))
            open_ = None
    if open_ is not None:
        out.append(Block(open_[0], None, open_[1], open_[2]))
    return out


def count(text: str) -> int:
    return sum(1 for line in text.split("\n") if is_begin(line))


# --------------------------------------------------------------------------- resolving blocks (the dream)
#
# A model run (the dream) resolves a block with an ordinary edit and says what it decided, per block
# (``Resolution``); the guard (``memd.core.guard``) then lets that block's words go, and only that
# block's. A block is named by its file and the line of its opening marker in the file as the run
# found it (the staged baseline): those are the numbers the run was shown.

CHOICES: dict[str, str] = {
    "this": "kept this machine's lines",
    "other": "took the other machine's lines",
    "both": "kept both (they do not contradict)",
    "ask": "kept both with a note to ask the user",
}


class Resolution(NamedTuple):
    file: str  # folder-relative path
    line: int  # the opening marker's 1-based line, in the file as the run found it
    choice: str  # a key of CHOICES
    reason: str


class Span(NamedTuple):
    """A closed block with its text: the opening marker's line (``head``) and the lines between."""

    block: Block
    head: str
    inner: tuple[str, ...]


def spans(text: str) -> list[Span]:
    """The closed blocks of a file with their lines (an unclosed block is left out: ``broken`` names it)."""
    lines = text.split("\n")
    return [Span(b, lines[b.line - 1].strip(), tuple(lines[b.line:b.end - 1]))
            for b in blocks(text) if b.end is not None]


def broken(text: str) -> list[tuple[int, str]]:
    """The markers without their partner, as (1-based line, what is wrong): an opening marker never
    closed (or followed by another opening one first), a closing marker without an opening one."""
    out: list[tuple[int, str]] = []
    open_: int | None = None
    for n, line in enumerate(text.split("\n"), 1):
        if is_begin(line):
            if open_ is not None:
                out.append((open_, "a start marker without its end"))
            open_ = n
        elif is_end(line):
            if open_ is None:
                out.append((n, "an end marker without its start"))
            open_ = None
    if open_ is not None:
        out.append((open_, "a start marker without its end"))
    return out


class Outcome(NamedTuple):
    """What became of one block a run found: resolved (with the run's decision) or left open."""

    file: str
    line: int
    machine: str
    date: str
    choice: str  # a key of CHOICES; "" when the block was left open
    reason: str

    @property
    def resolved(self) -> bool:
        return bool(self.choice)

    def line_text(self) -> str:
        """The report's line: ``db.md:8 (desktop, 2026-12-01): kept this machine's lines: <reason>``."""
        who = f"{self.machine}, {self.date}" if self.date else self.machine
        head = f"{self.file}:{self.line} ({who})"
        if not self.choice:
            return f"{head}: left open"
        reason = " ".join(self.reason.split())
        return f"{head}: {CHOICES.get(self.choice, self.choice)}" + (f": {reason}" if reason else "")


def outcomes(before: dict[str, str], after: dict[str, str], resolved: list[Resolution]) -> list[Outcome]:
    """Per block of ``before`` (file -> text), what the run did: resolved when the run said so and the
    block is gone from the file, else left open. A block is gone when the file holds fewer blocks with
    its opening line than before (blocks of one machine and day in one file are told apart by the
    run's decisions, in line order)."""
    said = {(r.file, r.line): r for r in resolved}
    out: list[Outcome] = []
    for rel in sorted(before):
        found = spans(before[rel])
        if not found:
            continue
        now = [s.head for s in spans(after.get(rel, ""))]
        gone: dict[str, int] = {}
        for head in {s.head for s in found}:
            gone[head] = max(0, sum(1 for s in found if s.head == head) - now.count(head))
        for s in found:
            r = said.get((rel, s.block.line))
            if r is not None and gone.get(s.head, 0) > 0:
                gone[s.head] -= 1
                out.append(Outcome(rel, s.block.line, s.block.machine, s.block.date, r.choice, r.reason))
            else:
                out.append(Outcome(rel, s.block.line, s.block.machine, s.block.date, "", ""))
    return out
