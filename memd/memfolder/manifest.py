"""The one memory manifest: one row per topic file, for recall's selector and for the model jobs.

As Claude Code's recall builds its own (facts.md sections 3 and 6): the topic files of the folder
(``memd.core.paths.is_topic``), newest first by mtime, at most ``max_files`` of them, each read only
for its first ``max_lines`` lines (the head, through the one bounded reader), giving its type,
description, name and first line. Every row carries the file's real mtime: a caller working on a
staging copy passes the live folder's (``mtimes``, e.g. from ``live_mtimes``), since a copy's own
mtimes are the time it was copied.

Dates. Claude Code writes ``metadata.modified`` into a topic file on every memory Write/Edit (facts.md
section 3), and hand-written files often state ``modified``/``updated``/``date`` themselves. Each row
keeps both signals (``mtime``, ``modified``) and dates itself by the newer of the two (``when``): the
age recall shows ("This memory is N days old") and the day the model jobs see. Neither signal alone is
trusted: an edit by hand or by a tool that does not know the key moves only the mtime, while a file
copied, synced or restored with its old mtime (``rsync -t``, an unpacked backup, a dream's staging
copy) keeps a ``modified`` newer than its mtime. A ``modified`` more than a day in the future is a
broken clock and is ignored. The ORDER stays by mtime alone, newest first, as Claude Code 2.1.328's
own recall orders its manifest (``tests/realcc/test_recall_manifest.py``): choosing the same files
Claude Code would choose matters more than a better date, and ordering by ``modified`` would mean
reading the head of every file instead of the newest ``max_files``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from memd.core.paths import is_team
from memd.memfolder.read import decode, read_bounded
from memd.memfolder.walk import DEFAULT_MAX_BYTES, list_files
from memd.record import Record

if TYPE_CHECKING:
    from memd.config import BudgetConfig

HEAD_BYTES = 32_768  # enough for 30 lines of any sane topic file
MODEL_DESC_CHARS = 150


class ManifestEntry(Record):
    name: str  # path relative to the memory folder, "/"-separated: what a model answers with
    path: Path  # where to read it (a symlink inside the folder: its target)
    mtime: float
    type: str | None
    description: str | None
    size: int = 0
    title: str | None = None  # the frontmatter's name, else the first line of the body
    modified: float | None = None  # the frontmatter's own "last changed" date (see the module doc)

    @property
    def when(self) -> float:
        """The row's date: the newer of the mtime and the frontmatter's ``modified``."""
        return self.mtime if self.modified is None else max(self.mtime, self.modified)


class Manifest(Record):
    entries: list[ManifestEntry]
    total: int  # topic files in the folder (entries holds the newest max_files of them)


def live_mtimes(memory_dir: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, float]:
    """rel -> mtime of every topic file of a (live) folder."""
    return {f.rel: f.mtime for f in list_files(memory_dir, max_bytes).topics() if f.mtime is not None}


def build(memory_dir: str | os.PathLike[str], *, max_files: int = 200, max_lines: int = 30,
          max_bytes: int = DEFAULT_MAX_BYTES, exclude: Collection[str] = frozenset(),
          mtimes: Mapping[str, float] | None = None) -> Manifest:
    """The manifest of memory_dir's topic files (see the module doc); exclude: names left out."""
    rows: list[tuple[float, str, str, int]] = []
    for f in list_files(memory_dir, max_bytes).topics():
        if f.rel in exclude:
            continue
        mtime = (mtimes or {}).get(f.rel, f.mtime or 0.0)
        rows.append((mtime, f.rel, f.path, f.size or 0))
    rows.sort(key=lambda r: (-r[0], r[1]))
    out: list[ManifestEntry] = []
    for mtime, rel, path, size in rows[:max_files]:
        head = read_bounded(path, HEAD_BYTES, hash=False, cut=True)
        text = "".join(decode(head).splitlines(keepends=True)[:max_lines])
        mtype, desc, title, modified = head_fields(text)
        if modified is not None and modified > time.time() + _FUTURE_SLACK_S:
            modified = None
        out.append(ManifestEntry(rel, Path(path), mtime, mtype, desc, size, title, modified))
    return Manifest(out, len(rows))


_FUTURE_SLACK_S = 86_400.0


def head_fields(head: str) -> tuple[str | None, str | None, str | None, float | None]:
    """(type, description, title, modified) of a topic file's head; both frontmatter shapes, broken YAML
    too; modified is the frontmatter's newest date (``frontmatter.modified_time``)."""
    from memd.core import frontmatter

    tf = frontmatter.parse(head)
    if not tf.has_frontmatter:
        return None, None, _first_line(head), None
    data = tf.data if tf.data else frontmatter.parse_lenient(tf.frontmatter_text)
    desc = data.get("description")
    mtype = data.get("type")
    meta = data.get("metadata")
    if mtype is None and isinstance(meta, dict):
        mtype = meta.get("type")
    name = data.get("name")
    d = " ".join(str(desc).split()) if desc is not None and str(desc).strip() else None
    t = str(mtype).strip() if mtype is not None and str(mtype).strip() else None
    title = " ".join(str(name).split()) if name is not None and str(name).strip() else _first_line(tf.body)
    return t, d, title, frontmatter.modified_time(data)


def _first_line(text: str) -> str | None:
    for line in text.splitlines():
        if line.strip():
            return line.strip("# ").strip()
    return None


def render_for_model(m: Manifest, prefix: str = "/memories/", uses: Mapping[str, str] | None = None) -> str:
    """The manifest as the model jobs show it: path, type, date, size, description (or name, or first
    line); team/ files marked read-only; a note when older files were left out. ``uses``: a row's use
    figures by name (the dream's, ``memd.jobs.evidence``), after its description."""
    if not m.entries:
        return "(no memory files yet)"
    rows = []
    for e in m.entries:
        desc = " ".join((e.description or e.title or "").split())[:MODEL_DESC_CHARS]
        day = time.strftime("%Y-%m-%d", time.localtime(e.when))
        ro = " (read-only)" if is_team(e.name) else ""
        use = (uses or {}).get(e.name)
        rows.append(f"- {prefix}{e.name} [{e.type or '?'}] {day} {e.size}B{ro}: {desc}" + (f" ({use})" if use else ""))
    text = "\n".join(rows)
    if m.total > len(m.entries):
        text += f"\n({m.total - len(m.entries)} older files not listed; view {prefix.rstrip('/')} to see them)"
    return text


def for_model(root: str | os.PathLike[str], budget: BudgetConfig, *, exclude: Collection[str] = frozenset(),
              live: str | os.PathLike[str] | None = None) -> str:
    """The model jobs' manifest of a staging copy at root, dated by the live folder's mtimes."""
    mtimes = live_mtimes(live, budget.max_file_bytes) if live is not None else None
    return render_for_model(build(root, max_files=budget.max_topic_files, max_lines=budget.max_frontmatter_lines,
                                  max_bytes=budget.max_file_bytes, exclude=exclude, mtimes=mtimes))
