"""Markdown links in memory files: where they point, relative to the memory folder (pure)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Mapping

from memd.core import index

# A link's text stops at a "[" where another link could start (not after "!", not escaped): the
# match that would have run over it is found from there, with the same target, instead of every
# "[" rescanning to the same far "]" (a line of "[" was quadratic). A target holds no "]", and a
# <target> no "<", for the same reason.
LINK = re.compile(r"(?<!!)\[(?:[^\[\]\\]|\\[^\[\n]|(?<=!)\[)*\]\((<[^<>]*>|[^)\s\]]*)(?:\s+\"[^\"]*\")?\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")


def link_target(raw: str, base_dir: str) -> tuple[str | None, bool]:
    """(path relative to the memory folder, leaves_folder) of a local link; (None, False) otherwise."""
    t = raw[1:-1] if raw.startswith("<") and raw.endswith(">") else raw
    t = t.split("#", 1)[0].split("?", 1)[0]
    if not t or _SCHEME.match(t):
        return None, False
    t = index.unquote(t)
    if t.startswith(("/", "~")):
        return t, True
    joined = posixpath.normpath(posixpath.join(base_dir, t))
    if joined == ".." or joined.startswith("../"):
        return joined, True
    return joined, False


def index_links(idx: index.Index) -> list[tuple[int, str, str | None, bool]]:
    """Every markdown link of the index outside frontmatter and comments:
    (line, raw target, path relative to the memory folder, leaves_folder)."""
    out: list[tuple[int, str, str | None, bool]] = []
    for n, ln in enumerate(idx.lines, 1):
        if n in idx.masked or n in idx.fenced or "](" not in ln:
            continue
        for m in LINK.finditer(mask_code(ln)):
            rel, leaves = link_target(m.group(1), "")
            out.append((n, m.group(1), rel, leaves))
    return out


def fold_path(rel: str) -> str:
    """A path as a case-insensitive, normalization-insensitive file system (macOS) compares it."""
    import unicodedata

    return unicodedata.normalize("NFC", rel).casefold()


def resolve_link(rel: str, exact: Collection[str], folded: Mapping[str, str]) -> tuple[str | None, bool]:
    """(the file rel names, whether only a case or normalization-insensitive match found it)."""
    if rel in exact:
        return rel, False
    other = folded.get(fold_path(rel))
    return (other, True) if other is not None else (None, False)


def is_folder(rel: str, existing: Collection[str]) -> bool:
    prefix = rel.rstrip("/") + "/"
    return any(e.startswith(prefix) for e in existing)


def code_spans(line: str) -> list[tuple[int, int]]:
    """The (start, end) of each inline code span of line, left to right: exactly the matches of
    ``(`+)(?:(?!\\1).)+?\\1`` (a run of backticks, at least one other character, the same run
    again, on one line), found by a scan over the backtick runs instead of that regex, which
    backtracks catastrophically on runs of backticks (1.5 KB took ~50 s).

    Why this is the same: at a start inside a run with ``rem`` backticks left, the regex tries
    every length ``k`` from ``rem`` down; ``k`` works when the text after the first ``k`` backticks
    does not itself start with ``k`` of them (``k == rem`` or ``k > rem / 2``) and a later run on the
    line has at least ``k`` backticks (the span closes at the first such run, on its first ``k``).
    With ``most`` the longest later run, the first start that works is ``rem < 2 * most``, and its
    ``k`` is ``min(rem, most)``; the scan goes on after the closing ``k`` backticks, which may
    leave the rest of the closing run as the next start."""
    if "`" not in line:
        return []
    # the backtick runs, with a "\n" (which "." does not match) as a run of length 0 ending a line
    toks = [(m.start(), m.end(1) - m.start(1)) for m in _TICKS.finditer(line)]  # "\n": -1 - -1
    n = len(toks)
    most = [0] * (n + 1)  # most[j]: the longest run after token j on its line
    for j in range(n - 1, 0, -1):
        most[j - 1] = 0 if toks[j][1] == 0 else max(most[j], toks[j][1])
    out: list[tuple[int, int]] = []
    j = 0
    start, rem = toks[0] if n else (0, 0)
    while j < n:
        later = most[j]
        if later == 0 or rem == 0:  # a line end, or no later run on the line: no start here works
            j += 1
            if j < n:
                start, rem = toks[j]
            continue
        start += max(0, rem - 2 * later + 1)
        rem = min(rem, 2 * later - 1)
        k = min(rem, later)
        t = j + 1
        while toks[t][1] < k:
            t += 1
        out.append((start, toks[t][0] + k))
        j, start, rem = t, toks[t][0] + k, toks[t][1] - k
    return out


_TICKS = re.compile(r"(`+)|\n")


def mask_code(line: str) -> str:
    """line with its inline code spans blanked out (same length): examples there are not links or dates."""
    if "`" not in line:
        return line
    spans = code_spans(line)
    if not spans:
        return line
    parts: list[str] = []
    at = 0
    for a, b in spans:
        parts.append(line[at:a])
        parts.append(" " * (b - a))
        at = b
    parts.append(line[at:])
    return "".join(parts)
