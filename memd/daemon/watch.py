"""Watching the projects root with watchdog: the handler only classifies and enqueues.

An exception inside a watchdog handler kills the observer thread silently, so ``on_any_event``
catches everything. The handler does no I/O: it maps a path to a piece of work (a project's
memory folder changed, a transcript grew, a project folder appeared, the root went away) and
hands it to ``sink``; the daemon's main loop debounces and acts.

What the watcher cannot promise (dropped events on queue overflow or at the inotify watch limit,
a deleted root that stops silently) is covered by the daemon's reconcile rescan and root checks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler

from memd.core.paths import TEAM_DIR
from memd.store import is_memd_temp

LOCK_NAME = ".consolidate-lock"

# (kind, project folder name): "memory" (a write in its memory folder), "transcript" (a transcript
# grew or appeared), "project" (a new project folder), or ("root", "") (the root went away).
Work = tuple[str, str]
Sink = Callable[[Work], None]


def classify(root: Path, path: str, is_dir: bool) -> Work | None:
    """What an event at ``path`` means for memd, or None when it means nothing."""
    try:
        rel = Path(path).relative_to(root)
    except ValueError:
        return None
    parts = rel.parts
    if not parts:
        return ("root", "")
    project = parts[0]
    name = parts[-1]
    if is_memd_temp(name):
        return None  # our own atomic writes in progress
    if len(parts) == 1:
        return ("project", project) if is_dir else None
    if parts[1] == "memory":
        if len(parts) >= 3 and parts[2] == TEAM_DIR:
            return None  # synced from a server: not ours to warn about
        if name == LOCK_NAME or (name.startswith(".") and not is_dir):
            return None
        if is_dir or name.endswith(".md") or len(parts) == 2:
            return ("memory", project)
        return None
    if not is_dir and name.endswith(".jsonl"):
        return ("transcript", project)  # scanned per transcript folder
    return None


class _Handler(FileSystemEventHandler):
    def __init__(self, root: Path, sink: Sink) -> None:
        super().__init__()
        self.root = root
        self.sink = sink

    def dispatch(self, event: FileSystemEvent) -> None:
        try:
            for attr in ("src_path", "dest_path"):
                p = getattr(event, attr, "")
                if not p:
                    continue
                path = p.decode("utf-8", "surrogateescape") if isinstance(p, bytes) else str(p)
                work = classify(self.root, path, bool(event.is_directory))
                if work is not None:
                    if work[0] == "root" and event.event_type != "deleted":
                        continue
                    self.sink(work)
        except Exception:  # an exception here would kill the observer thread
            pass


def event_types() -> list[Any]:
    # Only what changes content: no opened/closed-no-write events, so memd reading a file
    # (its own reconcile, or Claude Code loading memory) never wakes it.
    from watchdog import events as e

    return [e.FileCreatedEvent, e.FileModifiedEvent, e.FileMovedEvent, e.FileDeletedEvent,
            e.FileClosedEvent, e.DirCreatedEvent, e.DirMovedEvent, e.DirDeletedEvent]


class Watcher:
    """One recursive watchdog observer on the projects root (start/stop/alive)."""

    def __init__(self, root: Path, sink: Sink) -> None:
        self.root = root
        self.sink = sink
        self._observer: Any = None
        self._handler = _Handler(root, sink)
        self.inode: int | None = None
        self._lock = threading.Lock()

    def start(self) -> bool:
        """Start watching; False when the root does not exist (the daemon polls until it does)."""
        from watchdog.observers import Observer

        with self._lock:
            if self._observer is not None:
                return True
            try:
                self.inode = self.root.stat().st_ino
            except OSError:
                return False
            obs = Observer()
            try:
                obs.schedule(self._handler, str(self.root), recursive=True, event_filter=event_types())
                obs.start()
            except OSError:
                # the root vanished between the stat and the watch, or the watch limit was hit
                try:
                    obs.stop()
                except Exception:
                    pass
                return False
            self._observer = obs
            return True

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            obs, self._observer = self._observer, None
        if obs is None:
            return
        try:
            obs.stop()
            obs.join(timeout)
        except Exception:
            pass

    def alive(self) -> bool:
        """Watching, and still watching the same root folder (not one deleted and recreated)."""
        with self._lock:
            obs = self._observer
        if obs is None or not obs.is_alive():
            return False
        try:
            # a deleted root stops its emitter silently while the observer lives on
            if not all(e.is_alive() for e in obs.emitters):
                return False
        except Exception:
            return False
        try:
            return self.root.stat().st_ino == self.inode
        except OSError:
            return False
