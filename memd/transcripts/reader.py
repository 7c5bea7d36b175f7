"""Incremental, exact reading of Claude Code transcripts (JSONL, append-only).

The contract (facts.md section 4 and 8):
- Read from a saved offset to the last complete newline only. A torn last line (still being
  written, or a crash) is left for the next pass and read once it is complete; the offset a
  reader returns is always 0 or just past a newline, so no line is ever skipped or read twice.
- A file that was replaced (other inode) or truncated (smaller than the offset) starts over.
- A file deleted before or during the read is survived: what was read counts, nothing raises.
- Two records joined on one line are recovered; a line that cannot be parsed (or is JSON but not
  an object) is counted and logged with its file and offset, never raised.
- A line longer than ``max_line_bytes`` is skipped by streaming past it: memory stays bounded by
  about one chunk plus ``max_line_bytes`` whatever the file holds.

Speed: large binary reads, ``bytes.split(b"\\n")`` and stdlib ``json.loads`` on the bytes.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("memd.transcripts")

CHUNK_BYTES = 1 << 20
_MAX_LOGGED_BAD = 5  # bad lines logged one by one per file and pass; the rest are summed up
_MAX_SALVAGE_BYTES = 4 << 20  # recovery of a bad line is attempted only below this size
_MAX_SALVAGE_TRIES = 200
_decoder = json.JSONDecoder()
_WS = " \t\r\n"


@dataclass(frozen=True)
class Identity:
    """What a transcript file is right now."""

    inode: int
    size: int
    mtime: float


def identity(path: Path) -> Identity | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return Identity(st.st_ino, st.st_size, st.st_mtime)


class LineReader:
    """Iterate ``(offset, record)`` over the complete lines of ``path`` from ``start``.

    After (or during) iteration the attributes tell what happened: ``end_offset`` (just past the
    last complete line consumed), ``records``, ``bad_lines``, ``oversize_lines``, ``inode``,
    ``size``, ``mtime``, ``replaced`` (started over at 0), ``missing`` (no such file),
    ``error`` (an I/O error that stopped the read early). ``max_bytes`` stops after the first
    line that brings the consumed bytes to at least that many (a span in pieces).
    """

    def __init__(self, path: Path, start: int = 0, *, max_line_bytes: int = 8_000_000,
                 expect_inode: int | None = None, chunk_bytes: int = CHUNK_BYTES,
                 max_bytes: int | None = None) -> None:
        self.path = path
        self.start = max(0, start)
        self.max_line_bytes = max_line_bytes
        self.expect_inode = expect_inode
        self.chunk_bytes = chunk_bytes
        self.max_bytes = max_bytes
        self.end_offset = self.start
        self.records = 0
        self.bad_lines = 0
        self.oversize_lines = 0
        self.inode = 0
        self.size = 0
        self.mtime = 0.0
        self.replaced = False
        self.missing = False
        self.error: str | None = None
        self._logged = 0

    @property
    def bytes_read(self) -> int:
        """Bytes consumed by this pass (complete lines only)."""
        return self.end_offset - self.start

    @property
    def pending_bytes(self) -> int:
        """Bytes past ``end_offset`` left for a later pass (a torn or unfinished last line)."""
        return max(0, self.size - self.end_offset)

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for off, line in self.lines():
            yield from self._decode(off, line)
        if self._logged > _MAX_LOGGED_BAD:
            log.warning("transcript %s: %d more unparseable lines not logged one by one", self.path,
                        self._logged - _MAX_LOGGED_BAD)

    # ------------------------------------------------------------------ raw lines

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """``(offset, line)`` for each complete line (without its newline), oversize lines skipped."""
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            self.missing = True
            return
        except OSError as e:
            self.error = f"cannot open: {e.strerror}"
            log.warning("transcript %s: %s", self.path, self.error)
            return
        with os.fdopen(fd, "rb", buffering=0) as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.error = "not a regular file"
                return
            self.inode, self.size, self.mtime = st.st_ino, st.st_size, st.st_mtime
            start = self.start
            if (self.expect_inode and st.st_ino != self.expect_inode) or st.st_size < start:
                why = "replaced" if self.expect_inode and st.st_ino != self.expect_inode else "truncated"
                log.info("transcript %s was %s: reading it again from the start", self.path, why)
                self.replaced = True
                start = self.start = self.end_offset = 0
            yield from self._split(f, start)
            try:
                self.size = max(self.size, os.fstat(fd).st_size)
            except OSError:
                pass

    def _split(self, f: Any, start: int) -> Iterator[tuple[int, bytes]]:
        limit = self.max_line_bytes
        line_start = start  # offset of the first byte of the line being assembled
        pending: list[bytes] = []  # pieces of the unfinished line (dropped when skipping)
        pending_len = 0
        skipping = False
        budget = self.max_bytes
        try:
            f.seek(start)
        except OSError as e:
            self.error = f"cannot seek: {e.strerror}"
            return
        while True:
            try:
                chunk = f.read(self.chunk_bytes)
            except OSError as e:
                self.error = f"read failed: {e.strerror}"
                log.warning("transcript %s: %s at offset %d", self.path, self.error, line_start)
                return
            if not chunk:
                return
            parts = chunk.split(b"\n")
            if len(parts) == 1:  # no newline: the current line goes on
                pending_len += len(chunk)
                if not skipping:
                    pending.append(chunk)
                    if pending_len > limit:
                        skipping, pending = True, []
                continue
            # The first piece completes the line in progress.
            first = parts[0]
            total = pending_len + len(first)
            if skipping or total > limit:
                self._oversize(line_start, total)
            else:
                line = b"".join((*pending, first)) if pending else first
                yield line_start, line
            line_start += total + 1
            self.end_offset = line_start
            skipping, pending, pending_len = False, [], 0
            if budget is not None and line_start - self.start >= budget:
                return
            last = len(parts) - 1
            for i in range(1, last):
                line = parts[i]
                n = len(line)
                if n > limit:
                    self._oversize(line_start, n)
                else:
                    yield line_start, line
                line_start += n + 1
                self.end_offset = line_start
                if budget is not None and line_start - self.start >= budget:
                    return
            tail = parts[last]
            if tail:
                pending_len = len(tail)
                if pending_len > limit:
                    skipping = True
                else:
                    pending = [tail]

    def _oversize(self, off: int, n: int) -> None:
        self.oversize_lines += 1
        self.bad_lines += 1
        log.warning("transcript %s: skipped a %d-byte line at offset %d (over transcripts.max_line_bytes)",
                    self.path, n, off)

    # ------------------------------------------------------------------ decoding

    def _decode(self, off: int, line: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
        try:
            obj = json.loads(line)
        except RecursionError:
            # a record nested past the interpreter's limit (about 1,000 deep): one bad line, not a
            # failed scan (of every project, on every run)
            self._bad(off, line, "nested too deep")
            return
        except ValueError:
            if not line.strip():
                return
            objs = _salvage(line)
            if not objs:
                self._bad(off, line, "not valid JSON")
                return
            if None in objs:
                self._bad(off, line, "partly unparseable (recovered what could be)")
            for o in objs:
                if o is not None:
                    self.records += 1
                    yield off, o
            return
        if isinstance(obj, dict):
            self.records += 1
            yield off, obj
        else:
            self._bad(off, line, f"JSON {type(obj).__name__}, not a record")

    def _bad(self, off: int, line: bytes, why: str) -> None:
        self.bad_lines += 1
        self._logged += 1
        if self._logged <= _MAX_LOGGED_BAD:
            # Only the position and size: the line itself may hold anything (secrets included).
            log.warning("transcript %s: bad line at offset %d (%d bytes): %s", self.path, off, len(line), why)


def _salvage(line: bytes) -> list[dict[str, Any] | None]:
    """Records from a line that json.loads refused: joined records, or a torn record followed by
    a whole one. Returns the objects found, with None marking an unparseable stretch."""
    if len(line) > _MAX_SALVAGE_BYTES:
        return []
    try:
        text = line.decode("utf-8", errors="replace")
    except Exception:  # pragma: no cover - errors="replace" does not raise
        return []
    out: list[dict[str, Any] | None] = []
    pos, n, tries = 0, len(text), 0
    while pos < n:
        while pos < n and text[pos] in _WS:
            pos += 1
        if pos >= n:
            break
        obj, end = _decode_record_at(text, pos)
        if obj is not None:
            out.append(obj)
            pos = end
            continue
        # Unparseable from here: look for the next top-level record start. A candidate counts
        # only when it is followed by the end of the line or by another object, which inner
        # objects of a torn record (followed by ',' or ']') are not.
        out.append(None)
        found = False
        nxt = text.find('{"', pos + 1)
        while nxt >= 0 and tries < _MAX_SALVAGE_TRIES:
            tries += 1
            obj, end = _decode_record_at(text, nxt)
            if obj is not None:
                out.append(obj)
                pos, found = end, True
                break
            nxt = text.find('{"', nxt + 1)
        if not found:
            break
    if not any(o is not None for o in out):
        return []
    return out


def _decode_record_at(text: str, pos: int) -> tuple[dict[str, Any] | None, int]:
    try:
        obj, end = _decoder.raw_decode(text, pos)
    except ValueError:
        return None, pos
    if not isinstance(obj, dict):
        return None, pos
    rest = end
    while rest < len(text) and text[rest] in _WS:
        rest += 1
    if rest < len(text) and text[rest] != "{":
        return None, pos
    return obj, end


def read_all(path: Path, start: int = 0, **kwargs: Any) -> tuple[list[tuple[int, dict[str, Any]]], LineReader]:
    """Every complete record from ``start`` (tests and small files); the reader holds the counts."""
    reader = LineReader(path, start, **kwargs)
    return list(reader), reader


def next_line_start(path: Path, offset: int, chunk_bytes: int = 65536) -> int:
    """``offset`` if a line starts there, else the offset just past the next newline (or the file size).
    For offsets a user gives (``memd render --from``); saved offsets are always line starts."""
    if offset <= 0:
        return 0
    try:
        with open(path, "rb") as f:
            f.seek(offset - 1)
            pos = offset - 1
            while True:
                chunk = f.read(chunk_bytes)
                if not chunk:
                    return pos
                i = chunk.find(b"\n")
                if i >= 0:
                    return pos + i + 1
                pos += len(chunk)
    except OSError:
        return offset


def is_active(path: Path, now: float, minutes: float) -> bool:
    """A session written to within the last ``minutes`` (its mtime); a missing file is not active."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return False
    return now - mtime < minutes * 60.0
