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
