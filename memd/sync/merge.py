"""The three-way merge of one memory folder's files: pure values in, values out.

Per file, against the last commit both sides shared (``base``): a change on one side is taken;
changes on both sides merge line-wise through ``merge3`` (the three-way merge library Breezy and
dulwich use) when they do not overlap; a true conflict (issue 21) keeps this machine's lines and, right
after them, a conflict block (``memd.core.conflict``) with the other machine's differing lines, its name
and the date, so both sides' words stay visible in the file on every machine; a conflict inside the
frontmatter keeps this side's frontmatter and puts the block right after it, at the top of the body.
The result is reported as a conflict (the other side kept as evidence too). A file deleted on one
side and changed on the other is kept (the changed side). The one
automatic resolution: a conflict that is only Claude Code's ``modified:`` frontmatter date (it is
rewritten on every memory write, so two machines editing different parts of one file always
disagree about it) takes the later date.

MEMORY.md merges three-way by line against the shared base (``merge_index``, issue 21): edits and
deletions on either side stick, a true conflict keeps both sides' lines; the run's REPAIR rebuild
(``memd.apply.finalize``) then reconciles the entries with the merged topic files, changing nothing else.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import merge3

from memd.core import conflict as cblock
from memd.core import index as mindex

# Linear: a possessive indent, the key, then the rest of the line; the value is stripped in Python (a lazy
# value before ``\s*$`` retried every run of inner spaces: a 40 KB line took 7 s; tests/test_regex_linear.py)
_MODIFIED = re.compile(r"([ \t]*+)modified:(.*)")


@dataclass(frozen=True)
class FileMerge:
    rel: str
    result: bytes | None  # what the file becomes (None: absent)
    how: str  # same | local | remote | merged | conflict | kept
    remote: bytes | None = None  # with how == "conflict": the other side, kept as evidence (and in the block)
    local: bytes | None = None  # with how == "conflict": this side as it was (the result adds the block)


@dataclass
class FolderMerge:
    files: dict[str, bytes] = field(default_factory=dict)  # the merged topic files
    conflicts: list[FileMerge] = field(default_factory=list)
    taken: list[str] = field(default_factory=list)  # files whose result came (in part) from the remote

    def conflict_files(self) -> list[str]:
        return [c.rel for c in self.conflicts]


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _date_only(a: Sequence[bytes], b: Sequence[bytes]) -> Sequence[bytes] | None:
    """The later of two ``modified:`` lines, when the conflict is only that line on each side."""
    if len(a) != 1 or len(b) != 1:
        return None
    ma, mb = _MODIFIED.match(a[0].decode("utf-8", "replace")), _MODIFIED.match(b[0].decode("utf-8", "replace"))
    if ma is None or mb is None or ma.group(1) != mb.group(1):
        return None
    return a if ma.group(2).strip() >= mb.group(2).strip() else b


def merge_text(base: bytes | None, local: bytes, remote: bytes) -> bytes | None:
    """Line-wise three-way merge of one file; None on a true conflict."""
    m = merge3.Merge3(_lines(base or b""), _lines(local), _lines(remote))
    out: list[bytes] = []
    for group in m.merge_groups():
        if group[0] != "conflict":
            out.extend(group[1])
            continue
        later = _date_only(group[2], group[3])
        if later is None:
            return None
        out.extend(later)
    return b"".join(out)


def _frontmatter_end(lines: Sequence[bytes]) -> int:
    """The index of the first line after the frontmatter (0: none; an unclosed one runs to the end)."""
    if not lines or lines[0].strip() != b"---":
        return 0
    for i in range(1, len(lines)):
        if lines[i].strip() == b"---":
            return i + 1
    return len(lines)


def merge_blocks(base: bytes | None, local: bytes, remote: bytes, machine: str, date: str) -> bytes:
    """The three-way merge with every true conflict kept visibly: this side's lines, then a conflict block
    with the other side's lines this side lacks (none: no block). Blocks never go inside the frontmatter:
    one about it goes right after it. ``modified:`` dates and old markers are no words to keep."""
    nl = b"\r\n" if b"\r\n" in local else b"\n"
    m = merge3.Merge3(_lines(base or b""), _lines(local), _lines(remote))
    out: list[bytes] = []
    pending: list[tuple[int, list[bytes]]] = []  # (where in out, their differing lines)
    for group in m.merge_groups():
        if group[0] != "conflict":
            out.extend(group[1])
            continue
        later = _date_only(group[2], group[3])
        if later is not None:
            out.extend(later)
            continue
        mine = list(group[2])
        out.extend(mine)
        have = {ln.strip() for ln in mine}
        extra = [ln for ln in group[3] if ln.strip() not in have
                 and not cblock.is_marker(ln.decode("utf-8", "replace"))
                 and _MODIFIED.match(ln.decode("utf-8", "replace")) is None]
        while extra and not extra[0].strip():
            extra.pop(0)
        while extra and not extra[-1].strip():
            extra.pop()
        if extra:
            pending.append((len(out), extra))
    if not pending:
        return b"".join(out)
    fm_end = _frontmatter_end(out)
    at: dict[int, list[bytes]] = {}
    for where, extra in pending:
        at.setdefault(max(where, fm_end), []).extend(extra)
    head = cblock.begin_line(machine, date).encode() + nl
    for where in sorted(at, reverse=True):
        body = [ln if ln.endswith(b"\n") else ln + nl for ln in at[where]]
        if where > 0 and not out[where - 1].endswith(b"\n"):
            out[where - 1] += nl
        out[where:where] = [head, *body, cblock.END.encode() + nl]
    return b"".join(out)


def merge_file(rel: str, base: bytes | None, local: bytes | None, remote: bytes | None, *,
               machine: str = "", date: str = "") -> FileMerge:
    """One file (see the module doc); ``machine`` and ``date`` name the other side in a conflict block."""
    if local == remote:
        return FileMerge(rel, local, "same")
    if local == base:
        return FileMerge(rel, remote, "remote")
    if remote == base:
        return FileMerge(rel, local, "local")
    if local is None:  # deleted here, changed there: kept
        return FileMerge(rel, remote, "kept")
    if remote is None:  # changed here, deleted there: kept
        return FileMerge(rel, local, "kept")
    merged = merge_text(base, local, remote)
    if merged is None:
        both = merge_blocks(base, local, remote, machine or "another machine",
                            date or time.strftime("%Y-%m-%d"))
        return FileMerge(rel, both, "conflict", remote, local)
    return FileMerge(rel, merged, "merged" if merged != local else "local")


def merge_folder(base: Mapping[str, bytes], local: Mapping[str, bytes], remote: Mapping[str, bytes], *,
                 machine: str = "", date: str = "") -> FolderMerge:
    """Every topic file of the three sides (the caller leaves the index and team/ out)."""
    out = FolderMerge()
    for rel in sorted(set(base) | set(local) | set(remote)):
        fm = merge_file(rel, base.get(rel), local.get(rel), remote.get(rel), machine=machine, date=date)
        if fm.result is not None:
            out.files[rel] = fm.result
        if fm.how == "conflict":
            out.conflicts.append(fm)
        elif fm.how in ("remote", "merged") or (fm.how == "kept" and local.get(rel) is None):
            out.taken.append(rel)
    return out


def prose(text: str) -> list[str]:
    """The index's lines of prose: neither an entry nor blank (headings count: they are the user's)."""
    entries = {e.line for e in mindex.parse(text).entries}
    return [ln.rstrip("\r") for n, ln in enumerate(text.split("\n"), 1) if n not in entries and ln.strip()]


def merge_index(base: str | None, local: str | None, remote: str | None, *, machine: str = "",
                date: str = "") -> str | None:
    """The index to rebuild from (``merge_index_blocks``, its text only)."""
    return merge_index_blocks(base, local, remote, machine=machine, date=date)[0]


def merge_index_blocks(base: str | None, local: str | None, remote: str | None, *, machine: str = "",
                       date: str = "") -> tuple[str | None, bool]:
    """The index to rebuild from: a three-way merge by line against the shared base, and whether it
    holds a conflict block.

    A line edited or removed on one side is edited or removed (corrections stick); lines both sides
    changed differently keep this machine's lines, then the other side's that it lacks (no word
    lost: the user sees both). Entry lines go through the same merge; the run's REPAIR rebuild
    (``memd.apply.finalize``) then reconciles them with the merged topic files (a link to a file
    that is gone, a file without an entry), and touches nothing else.

    With ``machine`` (a sync; issue 33 finding 3), the other side's lines of a region that **both**
    sides edited (a line of the base that neither kept, each side writing its own in its place: the
    same line edited differently) go in a conflict block, as in a topic file (``memd.core.conflict``):
    its markers are HTML comments, which Claude Code strips when it loads the index while the lines
    between stay visible, so every session sees both versions as a disagreement rather than two plain
    facts; ``memd check`` names it (MEM090), the dream gets it as evidence. Lines both sides only
    added (no base line edited) stay plain: both are new, neither contradicts the other. Markers in
    the other side's lines (its own block, made when it merged first) are not copied: the block is made
    anew here from the lines that differ, so both machines end with one block."""
    if remote is None:
        return local, False
    if local is None:
        return remote, False
    nl = "\r\n" if "\r\n" in local else "\n"

    def lines(text: str) -> list[str]:
        return [ln + "\n" for ln in text.replace("\r\n", "\n").split("\n")[:-1]] + (
            [text.replace("\r\n", "\n").rsplit("\n", 1)[-1]] if not text.endswith("\n") and text else [])

    m = merge3.Merge3(lines(base or ""), lines(local), lines(remote))
    out: list[str] = []
    blocked = False
    for group in m.merge_groups():
        if group[0] != "conflict":
            out.extend(group[1])
            continue
        # line by line within the region: a base line the other side dropped goes (its edit or deletion
        # sticks); the other side's new lines this one lacks are added after this side's
        was, mine, theirs = ({ln.strip() for ln in group[1]}, list(group[2]), list(group[3]))
        kept_theirs = {ln.strip() for ln in theirs}
        mine = [ln for ln in mine if ln.strip() not in was or ln.strip() in kept_theirs]
        have = {ln.strip() for ln in mine}
        out.extend(mine)
        extra = [ln for ln in theirs if ln.strip() and ln.strip() not in have and ln.strip() not in was]
        if extra and out and not out[-1].endswith("\n"):
            out[-1] += "\n"
        kept_mine = {ln.strip() for ln in group[2]}
        edited = any(ln not in kept_mine and ln not in kept_theirs for ln in was if ln) \
            and any(ln.strip() and ln.strip() not in was and not cblock.is_marker(ln) for ln in mine)
        words = [ln if ln.endswith("\n") else ln + "\n" for ln in extra if not cblock.is_marker(ln)]
        if machine and words and edited:
            blocked = True  # the other side's block (if it merged first) is made anew here: no nesting
            out.extend([cblock.begin_line(machine, date or time.strftime("%Y-%m-%d")) + "\n", *words,
                        cblock.END + "\n"])
        else:
            out.extend(extra)
    text = "".join(out)
    return (text.replace("\n", nl) if nl != "\n" else text), blocked


def resolved_lines(base: str, theirs: str) -> list[str]:
    """The lines of ``base``'s conflict blocks that ``theirs`` resolved: each run of lines removed
    together with a block's marker (the block's lines, and the lines of this side just before it that
    the user dropped in the same edit), as written. A user who resolves a block keeps what is right and
    deletes the rest; those words went on purpose (issue 33 finding 3)."""
    import difflib

    old = base.replace("\r", "").split("\n")
    new = theirs.replace("\r", "").split("\n")
    marks = {n - 1 for b in cblock.blocks(base) for n in (b.line, b.end) if n is not None}
    if not marks:
        return []
    out: list[str] = []
    for op, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op in ("delete", "replace") and any(i in marks for i in range(i1, i2)):
            out += [ln for ln in old[i1:i2] if ln.strip() and not cblock.is_marker(ln)]
    return out


def index_news(local: str | None, remote: str | None) -> bool:
    """The local index has prose the other side's lacks (so it is worth sending)."""
    if local is None:
        return False
    theirs = set(prose(remote or ""))
    return any(ln not in theirs for ln in prose(local))
