"""The one bounded reader of memory files (and of memd's other small inputs).

``read_bounded`` never loads more than its cap: a file over it is refused with its problem, or,
with ``cut=True``, read up to the cap and marked ``cut`` (recall's manifest reads heads; the hooks
read an index however long it is). It opens with ``O_NOFOLLOW`` (the caller resolves a symlink it
means to follow: ``memd.memfolder.walk.locate``) and ``O_NONBLOCK`` (a FIFO named like a memory file
never hangs a reader), and never raises for the file's sake.

Lean on purpose (``os``, ``stat``, ``memd.record``): the PreToolUse and PostToolUse hooks read
through it, and ``hashlib`` is imported only when a signature is asked for.
"""

from __future__ import annotations

import os
import stat

from memd.core.signature import Signature as Signature  # re-exported: readers and writers import it here
from memd.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

_CHUNK = 1 << 20


def signature_of(data: bytes, st: os.stat_result) -> Signature:
    """The Signature of bytes just read from a file with stat st."""
    import hashlib  # not at import: read_bounded(hash=False) readers never need it

    return Signature(st.st_size, st.st_mtime_ns, st.st_ino, hashlib.sha256(data).hexdigest())


class ReadResult(Record):
    path: str | Path
    data: bytes | None  # None when unreadable, too large (and not cut), or not a regular file
    problem: str | None  # why data is None, or "not valid UTF-8"
    signature: Signature | None  # None also when read with hash=False, or cut
    text: str | None  # decoded text when data is valid UTF-8
    mtime: float | None = None  # of the file read (seconds since the epoch)
    cut: bool = False  # only the first max_bytes were read (cut=True and the file is longer)


def read_bounded(path: str | Path, max_bytes: int, *, hash: bool = True, cut: bool = False) -> ReadResult:
    """Read a file without ever loading more than max_bytes; never raises for the file's sake.

    hash=False: no SHA-256 (``signature`` is None), for readers that never write back.
    cut=True: a longer file gives its first max_bytes (``cut`` set) instead of a problem."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return ReadResult(path, None, "missing", None, None)
    except (OSError, ValueError) as e:
        if getattr(e, "errno", None) == 40:  # ELOOP: a symlink, refused by O_NOFOLLOW
            return ReadResult(path, None, "is a symlink", None, None)
        return ReadResult(path, None, f"unreadable ({getattr(e, 'strerror', None) or e})", None, None)
    was_cut = False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ReadResult(path, None, "not a regular file", None, None)
        if st.st_size > max_bytes and not cut:
            return ReadResult(path, None, f"too large ({st.st_size} bytes, limit {max_bytes})", None, None,
                              st.st_mtime)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                if not cut:
                    return ReadResult(path, None, f"too large (over {max_bytes} bytes)", None, None, st.st_mtime)
                was_cut = True
                break
        data = b"".join(chunks)[:max_bytes]
    except OSError as e:
        return ReadResult(path, None, f"unreadable ({e.strerror})", None, None)
    finally:
        os.close(fd)
    sig = signature_of(data, st) if hash and not was_cut else None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ReadResult(path, data, "not valid UTF-8", sig, None, st.st_mtime, was_cut)
    return ReadResult(path, data, None, sig, text, st.st_mtime, was_cut)


def decode(r: ReadResult) -> str:
    """The text read, undecodable bytes replaced (a cut file may end inside a character: dropped)."""
    if r.text is not None:
        return r.text
    return (r.data or b"").decode("utf-8", errors="ignore" if r.cut else "replace")
