"""Markdown links in memory files: where they point, relative to the memory folder (pure)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Mapping

from memd.core import index

LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\((<[^>]*>|[^)\s]*)(?:\s+\"[^\"]*\")?\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")


def link_target(raw: str, base_dir: str) -> tuple[str | None, bool]:
    """(path relative to the memory folder, leaves_folder) of a local link; (None, False) otherwise."""
    t = raw[1:-1] if raw.startswith("<") and raw.endswith(">") else raw
    t = t.split("#", 1)[0].split("?", 1)[0]
    if not t or _SCHEME.match(t):
        return None, False
    from urllib.parse import unquote

    t = unquote(t)
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


_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def mask_code(line: str) -> str:
    """line with its inline code spans blanked out (same length): examples there are not links or dates."""
    if "`" not in line:
        return line
    return _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
