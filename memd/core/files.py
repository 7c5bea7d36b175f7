"""What a memory folder holds, as plain values (read by ``memd.memfolder``, judged by the core).

The I/O edge (``memd.memfolder.folder.read_folder``) fills these in; lint and rebuild only look at them,
so both can be tested with folders made of strings.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from memd.core.paths import FILE, INDEX_NAME, is_index, is_team, is_topic
from memd.core.signature import Signature as Signature  # re-exported
from memd.record import Record

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from memd.core import frontmatter

__all__ = ["INDEX_NAME", "FileRecord", "FolderSnapshot"]  # INDEX_NAME: lint, rebuild and maintenance import it here


class FileRecord(Record):
    """One ``*.md`` file (or symlink named like one) of a memory folder (a ``Record``: creating
    dataclasses cost ~2 ms at import, paid by every cold ``memd check``)."""

    rel: str  # POSIX path relative to the memory folder
    text: str | None = None  # decoded text; None when the file could not be read as UTF-8 text
    problem: str | None = None  # "not valid UTF-8", "too large (...)", "unreadable (...)", ...
    size: int | None = None
    mtime: float | None = None  # seconds since the epoch
    symlink: str | None = None  # the link's target as written, when the file is a symlink
    leaves_folder: bool = False  # a symlink whose target lies outside the memory folder
    signature: Signature | None = None  # not compared: two reads of the same files are equal
    kind: str = FILE  # what memd.memfolder.walk found at rel (memd.core.paths: FILE, LINK, LARGE, ...)

    def _compared(self) -> tuple[object, ...]:
        d = self.__dict__
        return (d["rel"], d["text"], d["problem"], d["size"], d["mtime"], d["symlink"], d["leaves_folder"],
                d["kind"])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, FileRecord)
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    @property
    def team(self) -> bool:
        return is_team(self.rel)

    @property
    def is_index(self) -> bool:
        return is_index(self.rel)

    @property
    def is_topic(self) -> bool:
        """A topic file by the one rule (``memd.core.paths.is_topic``)."""
        return is_topic(self.rel, self.kind)

    @functools.cached_property
    def topic(self) -> frontmatter.TopicFile | None:
        """The parsed topic file (None when there is no text)."""
        from memd.core import frontmatter

        return frontmatter.parse(self.text) if self.text is not None else None


class FolderSnapshot(Record):
    """A memory folder as read at one moment. A missing or empty folder is a valid snapshot."""

    memory_dir: Path
    exists: bool = True
    problem: str | None = None  # the folder itself could not be listed (not a folder, unreadable)
    files: tuple[FileRecord, ...] = ()  # sorted by rel
    truncated: bool = False  # the walk stopped at its bound (too many files or too deep)

    @functools.cached_property
    def by_rel(self) -> dict[str, FileRecord]:
        return {f.rel: f for f in self.files}

    @functools.cached_property
    def folded(self) -> dict[str, str]:
        """Every rel keyed by ``links.fold_path`` (how a case-insensitive file system finds it)."""
        from memd.core.links import fold_path

        return {fold_path(r): r for r in sorted(self.by_rel)}

    def get(self, rel: str) -> FileRecord | None:
        return self.by_rel.get(rel)

    @property
    def index(self) -> FileRecord | None:
        return self.by_rel.get(INDEX_NAME)

    def topics(self) -> Iterator[FileRecord]:
        """Every topic file by the one rule (``memd.core.paths.is_topic``; team/ included)."""
        return iter(self._topics)

    @functools.cached_property
    def _topics(self) -> tuple[FileRecord, ...]:  # the lint asks for them five times per folder
        return tuple(f for f in self.files if f.is_topic)

    @classmethod
    def from_texts(cls, texts: dict[str, str], memory_dir: Path | None = None,
                   mtimes: dict[str, float] | None = None) -> FolderSnapshot:
        """A snapshot built from strings (tests, golden files, callers holding proposed text)."""
        mt = mtimes or {}
        files = tuple(FileRecord(rel, text, None, len(text.encode("utf-8")), mt.get(rel))
                      for rel, text in sorted(texts.items()))
        if memory_dir is None:
            from pathlib import Path

            memory_dir = Path("memory")
        return cls(memory_dir, True, None, files)
