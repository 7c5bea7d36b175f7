"""A bounded, read-only text search over transcripts (the dream's ``search_transcripts`` tool).

Plain case-insensitive substrings, never regexes (no pattern can make it slow), over the text
blocks of user and assistant records (not meta records, tool calls or tool results). Files are
read through ``LineReader`` (complete lines only, over-long lines streamed past) newest first, and
the search stops at ``limit`` matches or once ``max_bytes`` have been read in all. A match is one
short snippet around the first hit, with secrets redacted: never a whole record.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memd.transcripts.reader import LineReader


@dataclass(frozen=True)
class Match:
    session: str  # the first 8 characters of the session id
    when: str  # "YYYY-MM-DD HH:MM" as recorded (UTC)
    role: str  # "user" or "assistant"
    snippet: str  # about snippet_chars characters around the hit, on one line, secrets redacted
    redacted: int = 0  # secrets replaced in the record's text


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def search(files: Iterable[Path], needles: Sequence[str], *, limit: int, max_bytes: int,
           max_line_bytes: int, snippet_chars: int = 200) -> tuple[list[Match], bool]:
    """Matches of any of ``needles`` (already case-folded), newest file first; and whether a bound
    (bytes read) cut the search short."""
    raw = [n.encode("utf-8") for n in needles]
    ascii_only = all(n.isascii() for n in raw)
    hits: list[Match] = []
    scanned = 0
    for path in sorted(files, key=_mtime, reverse=True):
        reader = LineReader(path, max_line_bytes=max_line_bytes, max_bytes=max_bytes - scanned)
        for _, line in reader.lines():
            # a cheap test on the raw bytes first (exact for ASCII needles; others need decoding)
            if ascii_only and not any(n in line.lower() for n in raw):
                continue
            m = _match(line, needles, snippet_chars, path)
            if m is not None:
                hits.append(m)
                if len(hits) >= limit:
                    return hits, False
        scanned += reader.bytes_read
        if scanned >= max_bytes:
            return hits, True
    return hits, False


def _texts(rec: dict[str, Any]) -> list[str]:
    msg = rec.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [b["text"] for b in content
                if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    return []


def _match(line: bytes, needles: Sequence[str], width: int, path: Path) -> Match | None:
    from memd.transcripts.render import redact_sent

    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested past the interpreter's limit
        return None
    if not isinstance(rec, dict) or rec.get("type") not in ("user", "assistant") or rec.get("isMeta"):
        return None
    for raw in _texts(rec):
        folded = raw.casefold()
        if not any(n in folded for n in needles):
            continue
        # the whole text is redacted, then cut: a secret cut by the snippet's edge would no longer
        # match its rule; a needle found only inside a secret shows the snippet around its marker
        text, counts = redact_sent(raw)
        shown = text.casefold() if counts else folded
        for n in needles:
            i = folded.find(n)
            if i < 0:
                continue
            j = shown.find(n)
            i = j if j >= 0 else min(i, len(text))
            a = max(0, i - width // 2)
            snippet = " ".join(text[a:a + width].split())
            return Match(str(rec.get("sessionId") or path.stem)[:8],
                         str(rec.get("timestamp") or "")[:16].replace("T", " "), str(rec.get("type")), snippet,
                         sum(counts.values()))
    return None
