"""MEMORY.md: its entries, and the view Claude Code loads into a session (facts.md section 2).

Pure functions of text, stdlib only (the hooks measure the index on every memory write).

Loading, as Claude Code does it: strip YAML frontmatter and block-level HTML comments, trim,
keep the first ``max_lines`` lines, then, if the text is longer than ``max_chars`` UTF-16
units, cut it at the last newline before the limit and append a warning line. Whatever lies
past the cut is invisible to the model: entries there are "hidden".
"""

from __future__ import annotations

import re

from memd.record import Record, field

ENTRY = re.compile(
    r"^(?P<indent>[ \t]*)[-*+][ \t]+\[(?P<title>(?:[^\]\\]|\\.)*)\]\((?P<target><[^>]*>|[^)\s]*)"
    r"(?:[ \t]+\"[^\"]*\")?\)(?P<rest>.*)$")
_HOOK_SEP = re.compile(r"^\s*(?:[—–:]|-{1,2})\s*")
_COMMENT_START = re.compile(r"^ {0,3}<!--")


def split_lines(text: str) -> list[str]:
    """Lines as Claude Code sees them: split on "\n" only (a CRLF's "\r" dropped), unlike
    ``str.splitlines``, which also splits on form feeds, U+2028 and other separators."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit Claude Code counts in."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class Entry(Record):
    line: int  # 1-based line in the file
    title: str
    target: str  # link target as written (may be URL-encoded or in <>)
    hook: str  # the text after the link, separator removed
    text: str  # the whole line, without its newline

    @property
    def file(self) -> str:
        """The link target as a relative path, decoded (what it points to on disk)."""
        t = self.target
        if t.startswith("<") and t.endswith(">"):
            t = t[1:-1]
        t = t.split("#", 1)[0]
        from urllib.parse import unquote

        return unquote(t)

    @property
    def is_local(self) -> bool:
        t = self.file
        return bool(t) and not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t)


class Index(Record):
    text: str
    lines: list[str]  # the file's lines without their endings
    entries: list[Entry]
    masked: frozenset[int] = field(default_factory=frozenset)  # 1-based lines in frontmatter/comments
    fenced: frozenset[int] = field(default_factory=frozenset)  # 1-based lines of fenced code (loaded, not entries)
    open_fence: bool = False  # the text ends inside a code fence that is never closed
    open_comment: bool = False  # the text ends inside an HTML comment that is never closed

    @property
    def open_at_end(self) -> bool:
        return self.open_fence or self.open_comment

    def inside_block(self, n: int) -> bool:
        """True when a line inserted after line n would land inside fenced code or a comment."""
        last = n == len(self.lines)
        if n in self.fenced and (n + 1 in self.fenced or (last and self.open_fence)):
            return True
        return n in self.masked and (n + 1 in self.masked or (last and self.open_comment))


def _masked(lines: list[str]) -> tuple[set[int], bool]:
    """1-based line numbers that Claude Code strips (frontmatter and block-level HTML comments), and
    whether the last comment is left open (it then runs to the end)."""
    masked: set[int] = set()
    open_comment = False
    i = 0
    if lines and re.match(r"^(?:\ufeff)?---[ \t]*$", lines[0]):
        for j in range(1, len(lines)):
            if re.match(r"^---[ \t]*$", lines[j]):
                masked.update(range(1, j + 2))
                i = j + 1
                break
    while i < len(lines):
        if _COMMENT_START.match(lines[i]):
            j = i
            while j < len(lines) and "-->" not in lines[j][lines[j].find("<!--") + 4 if j == i else 0:]:
                j += 1
            open_comment = j >= len(lines)
            end = min(j, len(lines) - 1)
            masked.update(range(i + 1, end + 2))
            i = end + 1
            continue
        i += 1
    return masked, open_comment


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _fenced_lines(lines: list[str], masked: set[int]) -> tuple[set[int], bool]:
    """1-based lines of fenced code blocks, fences included (a list item there is an example, not an
    entry), and whether the last block is left open."""
    fenced: set[int] = set()
    fence: str | None = None
    for n, ln in enumerate(lines, 1):
        if n in masked:
            continue
        m = _FENCE.match(ln) if ("`" in ln[:4] or "~" in ln[:4]) else None
        if fence is not None:
            fenced.add(n)
            if m and m.group(1).startswith(fence) and not ln[m.end():].strip():
                fence = None
        elif m:
            fence = m.group(1)[0] * len(m.group(1))
            fenced.add(n)
    return fenced, fence is not None


def parse(text: str) -> Index:
    lines = split_lines(text)
    masked, open_comment = _masked(lines)
    fenced, open_fence = _fenced_lines(lines, masked) if "``" in text or "~~" in text else (set(), False)
    entries: list[Entry] = []
    for n, ln in enumerate(lines, 1):
        if n in masked or n in fenced:
            continue
        m = ENTRY.match(ln)
        if m:
            hook = _HOOK_SEP.sub("", m.group("rest"), count=1).strip()
            title = m.group("title").replace("\\]", "]").replace("\\[", "[")
            entries.append(Entry(n, title, m.group("target"), hook, ln))
    return Index(text, lines, entries, frozenset(masked), frozenset(fenced), open_fence, open_comment)


class LoadedView(Record):
    text: str  # exactly what the session sees
    lines: int  # lines of the stripped, trimmed index (before any cut)
    chars: int  # UTF-16 units of the stripped, trimmed index (before any cut)
    visible: frozenset[int]  # 1-based file lines that reach the session
    cut_by: str | None  # None, "lines" or "chars"
    max_lines: int
    max_chars: int

    @property
    def truncated(self) -> bool:
        return self.cut_by is not None


def warning_line(chars: int, max_chars: int) -> str:
    # Only the prefix and the "(limit: 24.4KB)" figure are known from analyses of Claude Code;
    # the rest of the wording is ours.
    return (f"> WARNING: MEMORY.md is {chars / 1024:.1f}KB (limit: {max_chars / 1024:.1f}KB) "
            "- index entries past this point were not loaded. Keep index entries to one short line; "
            "move detail into topic files.")


def loaded_view(text: str, max_lines: int = 200, max_chars: int = 25_000, *, idx: Index | None = None) -> LoadedView:
    """The index as a session sees it (``idx``: the text already parsed, to save parsing it again)."""
    if idx is not None:
        src, masked = idx.lines, set(idx.masked)
    else:
        src = split_lines(text)
        masked = _masked(src)[0]
    kept = [(n, ln) for n, ln in enumerate(src, 1) if n not in masked]
    # trim: drop leading/trailing blank lines, and surrounding whitespace of the whole text
    while kept and not kept[0][1].strip():
        kept.pop(0)
    while kept and not kept[-1][1].strip():
        kept.pop()
    if kept:
        kept[0] = (kept[0][0], kept[0][1].lstrip())
        kept[-1] = (kept[-1][0], kept[-1][1].rstrip())
    full = "\n".join(ln for _, ln in kept)
    total_lines, total_chars = len(kept), utf16_len(full)
    cut_by: str | None = None
    if len(kept) > max_lines:
        kept = kept[:max_lines]
        cut_by = "lines"
    body = "\n".join(ln for _, ln in kept)
    if utf16_len(body) > max_chars:
        cut_by = "chars"
        acc, keep = 0, 0
        for i, (_, ln) in enumerate(kept):
            # a line fits if the text up to and including its newline stays within the limit
            add = utf16_len(ln) + (1 if i else 0)
            if acc + add > max_chars:
                break
            acc += add
            keep = i + 1
        kept = kept[:keep]
        body = "\n".join(ln for _, ln in kept)
    if cut_by == "chars":
        body = body + "\n\n" + warning_line(total_chars, max_chars)
    elif cut_by == "lines":
        body = body + "\n\n" + (f"> WARNING: MEMORY.md is {total_lines} lines (limit: {max_lines}) "
                                "- only part of it was loaded.")
    return LoadedView(body, total_lines, total_chars, frozenset(n for n, _ in kept), cut_by,
                      max_lines, max_chars)


class Budget(Record):
    lines: int
    chars: int
    max_lines: int
    max_chars: int
    hidden: list[Entry]
    level: str  # "ok", "near" or "over"

    @property
    def line_ratio(self) -> float:
        return self.lines / self.max_lines

    @property
    def char_ratio(self) -> float:
        return self.chars / self.max_chars


def measure(text: str, max_lines: int = 200, max_chars: int = 25_000, warn_ratio: float = 0.8,
            *, idx: Index | None = None) -> Budget:
    """Measure an index against its budget: figures, level and the entries that are hidden."""
    idx = idx if idx is not None else parse(text)
    view = loaded_view(text, max_lines, max_chars, idx=idx)
    hidden = [e for e in idx.entries if e.line not in view.visible]
    if view.truncated:
        level = "over"
    elif view.lines >= warn_ratio * max_lines or view.chars >= warn_ratio * max_chars:
        level = "near"
    else:
        level = "ok"
    return Budget(view.lines, view.chars, max_lines, max_chars, hidden, level)
