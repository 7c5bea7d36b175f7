"""Scanning a project's transcripts (the scan consumer) and reading spans (the catch-up consumer).

``scan_project`` advances only the SCAN offsets in the state store: indexing, activity, sessions
touched, memory writes seen. It never moves the catch-up's extract offsets, so a scan can never
make the catch-up skip a span. ``read_span`` reads typed records for the catch-up from its own
offset; the catch-up saves where it got to with ``StateStore.save_extract``.

A file whose size and inode did not change since the last scan is not opened: an incremental
pass over a thousand idle sessions costs a thousand ``stat`` calls and one query.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd import layout
from memd.transcripts import records as rec
from memd.transcripts.reader import LineReader
from memd.transcripts.sessions import (
    MemoryPaths,
    Writes,
    is_subagent,
    memory_project_for,
    session_id_for,
)
from memd.transcripts.usage import Uses

if TYPE_CHECKING:
    from memd.config import Config
    from memd.state import ScanRow, StateStore

log = logging.getLogger("memd.transcripts")
_SUBAGENTS = f"{os.sep}subagents{os.sep}"


@dataclass
class SessionScan:
    file: str  # the transcript's path (a string: thousands are built per pass; ``path`` for a Path)
    session_id: str
    feeds: str  # the projects/ folder whose memory this session feeds
    main: bool  # a main session (not a subagent transcript)
    records: int  # records read by this pass
    bad_lines: int  # unparseable or skipped lines met by this pass
    new_bytes: int  # bytes consumed by this pass
    offset: int  # the scan offset after this pass (just past the last complete line)
    size: int
    active: bool
    replaced: bool = False
    missing: bool = False
    last_record_at: float | None = None
    memory_write_at: float | None = None  # the main agent wrote memory (latest time seen in this pass)

    @property
    def path(self) -> Path:
        return Path(self.file)

    def as_json(self) -> dict[str, Any]:
        return {"path": self.file, "records": self.records, "bad_lines": self.bad_lines,
                "offset": self.offset, "size": self.size, "active": self.active}


@dataclass
class ProjectScan:
    project: layout.Project
    sessions: list[SessionScan] = field(default_factory=list)
    forgotten: list[Path] = field(default_factory=list)  # known transcripts that no longer exist

    @property
    def new_bytes(self) -> int:
        return sum(s.new_bytes for s in self.sessions)

    @property
    def records(self) -> int:
        return sum(s.records for s in self.sessions)

    @property
    def bad_lines(self) -> int:
        return sum(s.bad_lines for s in self.sessions)

    @property
    def active(self) -> list[SessionScan]:
        return [s for s in self.sessions if s.active]

    def as_json(self) -> dict[str, Any]:
        return {"project": self.project.name, "memory_dir": str(self.project.memory_dir),
                "sessions": [s.as_json() for s in self.sessions]}


class _Digest:
    """What the scan keeps of one pass over a transcript: cheap, no typed records."""

    __slots__ = ("cwd", "first_at", "last_at", "session_id", "uses", "writes")

    def __init__(self) -> None:
        self.cwd: str | None = None
        self.session_id: str | None = None
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.writes = Writes()  # file-writing tool uses, and the ones refused (a hook's denial)
        self.uses = Uses()  # the memory uses: index loads, reads, recalls, writes (issue 31)

    def feed(self, obj: dict[str, Any]) -> None:
        ts = rec.parse_time(obj.get("timestamp"))
        if ts is not None:
            if self.first_at is None or ts < self.first_at:
                self.first_at = ts
            if self.last_at is None or ts > self.last_at:
                self.last_at = ts
        if self.cwd is None:
            cwd = obj.get("cwd")
            if isinstance(cwd, str) and cwd:
                self.cwd = cwd
        if self.session_id is None:
            sid = obj.get("sessionId")
            if isinstance(sid, str) and sid:
                self.session_id = sid
        # only the paths: a session with thousands of edits must not hold their bodies
        self.writes.feed(obj, ts)
        self.uses.feed(obj, ts)


def _transcript_paths(folder: str) -> list[str]:
    # layout.session_files + layout.subagent_files in one walk, on plain strings: an incremental
    # pass over a thousand sessions should not walk each folder twice nor build Path objects
    # (the two layout calls cost about 4x this listing, ~8 ms of a ~13 ms pass over 1,000 sessions).
    out: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return out
    for e in entries:
        try:
            if e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False):
                out.append(e.path)
            elif e.name != "memory" and e.is_dir(follow_symlinks=False):
                sub = os.path.join(e.path, "subagents")
                try:
                    out.extend(s.path for s in os.scandir(sub)
                               if s.name.startswith("agent-") and s.name.endswith(".jsonl"))
                except OSError:
                    pass
        except OSError:
            continue
    out.sort()
    return out


class _Scanner:
    """One pass over (some of) a transcript folder: the reading, then one batch of saves."""

    def __init__(self, project: layout.Project, state: StateStore, config: Config, now: float) -> None:
        self.project = project
        self.state = state
        self.config = config
        self.now = now
        self.root = project.dir.parent
        self.claude = self.root.parent
        self.active_s = config.transcripts.active_minutes * 60.0
        self._feeds_cache: dict[str, str] = {}
        self._paths_cache: dict[str, MemoryPaths] = {}
        self._settings: dict[str, Any] | None = None
        self.saves: list[tuple[SessionScan, LineReader, _Digest, ScanRow | None, str]] = []
        self.seen: set[tuple[int, int]] = set()  # (st_dev, st_ino) of the files read in this pass
        self.devs: dict[str, int] = {}

    def one(self, spath: str, prev: ScanRow | None) -> SessionScan | None:
        try:
            st = os.stat(spath)
        except OSError:  # vanished since the listing
            return None
        identity = (st.st_dev, st.st_ino)
        if identity in self.seen:
            return None  # the same file under a second name (a hard link): read once
        self.seen.add(identity)
        self.devs[spath] = st.st_dev
        active = self.now - st.st_mtime < self.active_s
        if prev is not None and prev.inode == st.st_ino and (not prev.dev or prev.dev == st.st_dev) \
                and prev.size == st.st_size and prev.scan_offset <= st.st_size:
            main = not (os.path.basename(spath).startswith("agent-") or _SUBAGENTS in spath)
            return SessionScan(spath, prev.session_id or session_id_for(Path(spath)), prev.project, main, 0, 0, 0,
                               prev.scan_offset, st.st_size, active, last_record_at=prev.last_record_at)
        path = Path(spath)
        reader = LineReader(path, prev.scan_offset if prev else 0,
                            max_line_bytes=self.config.transcripts.max_line_bytes,
                            expect_inode=prev.inode if prev and prev.inode else None)
        digest = _Digest()
        for _off, obj in reader:
            digest.feed(obj)
        if reader.missing:
            return None
        main = not is_subagent(path)
        # The memory folder is decided by the first cwd the records carry; a transcript first seen
        # before any such record (it starts with snapshots and queue operations) is decided again.
        known_cwd = prev.cwd if prev is not None and not reader.replaced else ""
        if known_cwd and prev is not None and prev.project:
            feeds = prev.project
        else:
            feeds = memory_project_for(digest.cwd, self.project.name, self.root, self._feeds_cache)
        cwd = known_cwd or digest.cwd or ""
        mem_at: float | None = None
        writes = digest.writes.effective() if main else []
        if writes:
            mp = self._memory_paths(feeds)
            for ts, fp in writes:
                if mp.contains(fp):
                    when = ts if ts is not None else self.now
                    mem_at = when if mem_at is None else max(mem_at, when)
        sid = session_id_for(path, digest.session_id)
        scan = SessionScan(spath, sid, feeds, main, reader.records, reader.bad_lines, reader.bytes_read,
                           reader.end_offset, max(reader.size, st.st_size), active, reader.replaced,
                           last_record_at=digest.last_at or (prev.last_record_at if prev else None),
                           memory_write_at=mem_at)
        self.saves.append((scan, reader, digest, prev, cwd))
        if reader.bytes_read and log.isEnabledFor(logging.DEBUG):  # the daemon at logging.level = "debug"
            log.debug("transcript.appended", extra={"project": self.project.name, "session": sid,
                                                    "bytes": reader.bytes_read, "records": reader.records,
                                                    "offset": reader.end_offset, "feeds": feeds})
        return scan

    def _memory_paths(self, feeds: str) -> MemoryPaths:
        mp = self._paths_cache.get(feeds)
        if mp is None:
            if self._settings is None:
                self._settings = layout.read_settings(self.claude)
            mem_dir = layout.project_for_folder(self.claude, self.root / feeds, self._settings).memory_dir
            mp = self._paths_cache[feeds] = MemoryPaths(mem_dir, feeds)
        return mp

    def _save_uses(self, scan: SessionScan, digest: _Digest) -> None:
        """The pass's memory uses, as paths relative to the memory folder the session feeds; a path
        outside it is no use of this memory. A subagent's reads count; only main sessions load the index."""
        mp = self._memory_paths(scan.feeds)
        rows: list[tuple[str, str, str, float | None]] = []
        for e in digest.uses.events:
            if e.kind == "load":
                if scan.main:
                    rows.append(("load", "", "", e.at))
            elif e.kind == "weak":
                rows.extend(("weak", f"{e.key}:{rel}", rel, e.at) for rel in mp.named_in(e.path))
            else:
                rel = mp.rel(e.path)
                if rel is not None and rel.endswith(".md") and rel != "MEMORY.md":
                    rows.append((e.kind, e.key, rel, e.at))
        if rows:
            self.state.record_uses(scan.feeds, scan.session_id, rows)

    def save(self, forgotten: list[Path], *, mark: bool) -> None:
        state = self.state
        with state.batch():
            for scan, reader, digest, prev, cwd in self.saves:
                start = prev.scan_offset if prev is not None else 0
                if reader.replaced and prev is not None:
                    if not state.reset_transcript(scan.path, expect_offset=start):
                        continue  # another scanner handled the replacement first
                    start = 0
                # Conditional: if another scanner saved this file meanwhile, this pass's lines
                # were counted there; counting them again would double the session's records.
                # A read that stopped on an I/O error saves size 0, so the next pass tries again
                # instead of taking the file for unchanged.
                size = scan.size if reader.error is None else 0
                if not state.save_scan(scan.path, project=scan.feeds, inode=reader.inode, size=size,
                                       offset=scan.offset, session_id=scan.session_id, records=scan.records,
                                       bad_lines=scan.bad_lines, first_record_at=digest.first_at,
                                       last_record_at=digest.last_at, memory_write_seen_at=scan.memory_write_at,
                                       when=self.now, expect_offset=start, cwd=cwd,
                                       dev=self.devs.get(scan.file, 0)):
                    continue
                if digest.last_at is not None and scan.records:
                    state.touch_session(scan.feeds, scan.session_id, digest.last_at)
                if digest.uses.events:
                    self._save_uses(scan, digest)
            for p in forgotten:
                state.forget_transcript(p)
            if mark:
                state.mark_scanned(self.project.name, self.now)


def scan_project(project: layout.Project, state: StateStore, config: Config, *, now: float,
                 dry_run: bool = False) -> ProjectScan:
    """Read every transcript of ``project.dir`` from its scan offset; save the new offsets (unless
    ``dry_run``), the sessions touched and the memory writes seen. Never raises for a file's sake.

    Rows are keyed on resolved paths: the same tree reached through a relative ``--claude-dir`` or a
    symlink is the same rows, read once (rows an earlier memd kept under such another name move to
    the resolved one, offsets kept, so the tree is neither read nor counted twice)."""
    folder = os.path.realpath(project.dir)
    known = state.scan_rows(Path(folder))
    if os.fspath(project.dir) != folder:  # rows an earlier memd kept under the name as typed
        for name, row in state.scan_rows(project.dir).items():
            real = os.path.join(folder, os.path.relpath(name, project.dir))
            known.setdefault(real, row._replace(path=real))
            if not dry_run:
                state.move_transcript(Path(name), Path(real))  # offsets kept: the catch-up's too
    out = ProjectScan(project)
    scanner = _Scanner(project, state, config, now)
    files = _transcript_paths(folder)
    for spath in files:
        scan = scanner.one(spath, known.get(spath))
        if scan is not None:
            out.sessions.append(scan)
    listed = set(files)
    out.forgotten = [Path(p) for p in known if p not in listed and not os.path.exists(p)]
    if not dry_run:
        scanner.save(out.forgotten, mark=True)
    return out


def scan_file(project: layout.Project, path: Path, state: StateStore, config: Config, *, now: float,
              dry_run: bool = False) -> SessionScan | None:
    """Scan one transcript of ``project.dir`` (a watcher event); None when it does not exist."""
    spath = os.path.realpath(path)  # rows are keyed on resolved paths (scan_project)
    prev = state.scan_rows(Path(os.path.dirname(spath))).get(spath)
    scanner = _Scanner(project, state, config, now)
    scan = scanner.one(spath, prev)
    if scan is None and prev is not None and not os.path.exists(spath) and not dry_run:
        state.forget_transcript(Path(spath))
    if scan is not None and not dry_run:
        scanner.save([], mark=False)
    return scan


def scan_all(claude: Path, state: StateStore, config: Config, *, now: float,
             dry_run: bool = False) -> list[ProjectScan]:
    return [scan_project(p, state, config, now=now, dry_run=dry_run) for p in layout.list_projects(claude)]


# ---------------------------------------------------------------------- spans for the catch-up


@dataclass
class Span:
    path: Path
    start_offset: int  # where reading began (0 when the file was replaced or truncated)
    end_offset: int  # just past the last complete line read: save this as the extract offset
    inode: int
    size: int
    records: list[rec.Record]
    bad_lines: int
    replaced: bool
    missing: bool
    wrote_memory: bool  # the main agent wrote into the memory folder within this span
    session_id: str
    cwd: str | None
    first_at: float | None
    last_at: float | None
    # where the line of the main agent's last (successful) memory write starts; -1: none in the span
    memory_write_offset: int = -1

    @property
    def empty(self) -> bool:
        return self.end_offset <= self.start_offset

    @property
    def pending_bytes(self) -> int:
        return max(0, self.size - self.end_offset)

    def after_own_write(self) -> Span:
        """The span without the turns up to and including the one where the session last wrote
        memory itself (a turn: a user prompt and what followed until the next prompt); the span as
        it is when the session wrote none. What the session saved after a prompt, it judged; a
        correction the user gave later is new, and the catch-up extracts it."""
        if self.memory_write_offset < 0:
            return self
        rest = next((i for i, r in enumerate(self.records)
                     if r.offset > self.memory_write_offset and is_prompt(r)), len(self.records))
        return dataclasses.replace(self, records=self.records[rest:])


def is_prompt(r: rec.Record) -> bool:
    """Words the user typed in the main conversation (not a tool result, meta or sidechain record)."""
    return isinstance(r, rec.UserTurn) and not r.is_meta and not r.sidechain and bool(r.text.strip())


def read_span(path: Path, start_offset: int, config: Config, *, memory_dir: Path | None = None,
              project_name: str | None = None, inode: int | None = None, max_bytes: int | None = None,
              include_sidechain: bool = False) -> Span:
    """Typed records of ``path`` from ``start_offset`` to the last complete line (or to about
    ``max_bytes`` past the start). ``inode`` is the one the offset belongs to: another inode (or a
    shorter file) means the file was replaced and the span starts at 0. ``wrote_memory`` needs
    ``memory_dir`` (and ``project_name``, to recognise the folder under another Claude folder)."""
    reader = LineReader(path, start_offset, max_line_bytes=config.transcripts.max_line_bytes,
                        expect_inode=inode or None, max_bytes=max_bytes)
    # Texts are cut when parsed: a span's memory stays small whatever the session holds. Tool
    # results, thinking and tool inputs keep a few times what rendering shows of them.
    t = config.transcripts
    parser = rec.Parser(text_cap=t.render_max_chars,
                        result_cap=max(4096, 4 * max(t.render_tool_result_chars, t.render_thinking_chars)),
                        include_sidechain=include_sidechain)
    mp = MemoryPaths(memory_dir, project_name or "") if memory_dir is not None else None
    writes = Writes() if mp is not None and not is_subagent(path) else None
    for off, obj in reader:
        parser.feed(off, obj)
        if writes is not None:
            writes.feed(obj, offset=off)
    # a write a hook denied (an is_error tool_result follows it) is not the session writing memory
    own = [off for off, fp in writes.effective_at() if mp.contains(fp)] if writes is not None and mp is not None else []
    return Span(path, reader.start, reader.end_offset, reader.inode, reader.size, parser.out,
                reader.bad_lines, reader.replaced, reader.missing, bool(own),
                session_id_for(path, parser.session_id), parser.cwd, parser.first_at, parser.last_at,
                max(own, default=-1))


def span_excerpt(path: Path, start_offset: int, config: Config, *, chars: int = 400,
                 max_bytes: int = 256 * 1024) -> str:
    """The first words of the span from ``start_offset``, as the catch-up renders it for the model
    (the user's words, redacted), cut to about ``chars``: what `memd ui` shows of a parked span."""
    from memd.transcripts.render import Budgets, render

    span = read_span(path, start_offset, config, max_bytes=max_bytes)
    if span.missing:
        return ""
    text = render(span.records, Budgets(max_chars=max(chars * 4, 1000), words_only=True)) if span.records else ""
    return text if len(text) <= chars else text[:chars].rstrip() + " …"


def find_session(claude: Path, session: str) -> Path | None:
    """A session given as a path to a .jsonl or as its UUID (searched under projects/)."""
    p = Path(session).expanduser()
    if p.suffix == ".jsonl" and p.is_file():
        return p
    name = session if session.endswith(".jsonl") else f"{session}.jsonl"
    root = layout.projects_root(claude)
    try:
        folders = sorted(e.path for e in os.scandir(root) if e.is_dir(follow_symlinks=False))
    except OSError:
        return None
    for folder in folders:
        cand = Path(folder) / name
        if cand.is_file():
            return cand
    for folder in folders:  # a subagent transcript: <session>/subagents/agent-x.jsonl
        for cand in Path(folder).glob(f"*/subagents/{name}"):
            if cand.is_file():
                return cand
    return None
