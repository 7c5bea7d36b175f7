"""What a file was when read: a plain value of the core (the I/O edge makes it and compares it).

Kept in a module of its own, importing only ``memd.record``, because the hooks' reader
(``memd.memfolder.read``) uses it on every memory write and must not pull in more."""

from __future__ import annotations

from memd.record import Record


class Signature(Record):
    """Enough to tell whether a file changed since it was read (checked before every write)."""

    size: int
    mtime_ns: int
    inode: int
    sha256: str
