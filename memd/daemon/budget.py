"""Condense warnings: measure a project's index after memory writes, warn once per crossing.

The wiring only: read and measure here, decide in memd.daemon.policy (pure), record in the state store.

A crossing is a move up the scale ok -> near -> over (the index's loaded view, as Claude Code
loads it). Each crossing is one ``budget.warning`` event and an open warning in the state store
(``memd status`` shows it); staying at a level, or easing from over to near, says nothing new;
coming back to ok closes the warning with ``budget.cleared``. The same for more topic files than
recall scans. The events carry figures and the titles of the entries the session cannot see,
never the text of a memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd.daemon import policy as P
from memd.memfolder.walk import DEFAULT_MAX_BYTES, count_topics

if TYPE_CHECKING:
    from memd.config import Config
    from memd.layout import Project

KIND_INDEX = "budget"
KIND_FILES = "topic_files"
_MAX_TITLES = 50


@dataclass(frozen=True)
class Check:
    project: str
    level: str  # ok | near | over (the index)
    warned: bool  # a budget.warning was issued by this check
    cleared: bool
    relief: bool = False  # the policy asks for automatic relief (memd.daemon.policy.wants_relief)


def count_topic_files(memory_dir: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> int:
    """The topic files recall considers: the one set of ``memd.core.paths.is_topic`` (team/ included)."""
    return count_topics(memory_dir, max_bytes)


def signature(project: Project) -> tuple[int, int, int]:
    """Cheap change detector for the reconcile rescan: MEMORY.md's mtime and size, the folder's mtime."""
    try:
        st = os.stat(project.index_path)
        idx = (st.st_mtime_ns, st.st_size)
    except OSError:
        idx = (0, -1)
    try:
        dmt = os.stat(project.memory_dir).st_mtime_ns
    except OSError:
        dmt = 0
    return (idx[0], idx[1], dmt)


class BudgetMonitor:
    """Holds nothing but the state store: levels live there, so a restart does not re-warn."""

    def __init__(self, config: Config, state: Any, log: Any, clock: Any = None) -> None:
        self.config = config
        self.state = state
        self.log = log
        self.clock = clock  # memd.clock.Clock (the daemon's); None: the system's

    def check(self, project: Project) -> Check:
        from memd.core.index import measure
        from memd.memfolder.read import read_bounded

        b = self.config.budget
        open_levels = {w.kind: w.level for w in self.state.warnings(project.name)}
        text = ""
        measured = False  # an index was read and measured (a sample of its size is kept)
        if project.memory_dir.is_dir():
            res = read_bounded(project.index_path, b.max_file_bytes)
            if res.text is not None:
                text = res.text
                measured = True
            elif res.problem and res.problem != "missing" and res.problem.startswith("too large"):
                text = "\n" * (b.max_lines + 1)  # unreadably large: certainly over
        from memd.core.budget import refdefs_kept
        from memd.inspect import project_limits

        pb = project_limits(project, b, text)  # the loading of the Claude Code version the user runs
        m = measure(text, b.max_lines, b.max_chars, b.warn_ratio, refdefs=refdefs_kept(pb))
        if measured:  # the index-size chart's series (memd ui), measured here anyway
            import time

            now = self.clock.time() if self.clock is not None else time.time()
            self.state.record_index_sample(project.name, now, lines=m.lines, chars=m.chars, max_lines=m.max_lines,
                                           max_chars=m.max_chars)
        action = P.index_action(open_levels.get(KIND_INDEX), m.level)
        if action == "clear":
            self.state.clear_warning(project.name, KIND_INDEX)
            self.log.info("budget.cleared", project=project.name, kind=KIND_INDEX, lines=m.lines, chars=m.chars)
        elif action in ("warn", "hold"):
            details = {"lines": m.lines, "chars": m.chars, "max_lines": m.max_lines, "max_chars": m.max_chars,
                       "hidden": len(m.hidden), "hidden_titles": [e.title for e in m.hidden[:_MAX_TITLES]]}
            self.state.set_warning(project.name, KIND_INDEX, m.level, details)
            if action == "warn":
                self.log.warning("budget.warning", project=project.name, kind=KIND_INDEX, budget_level=m.level,
                                 lines=m.lines, chars=m.chars, max_lines=m.max_lines, max_chars=m.max_chars,
                                 warn_ratio=b.warn_ratio, hidden=len(m.hidden),
                                 hidden_titles=details["hidden_titles"])
        self._check_files(project, open_levels)
        return Check(project.name, m.level, action == "warn", action == "clear",
                     P.wants_relief(action, m.level, self.config.daemon.auto_relief))

    def _check_files(self, project: Project, open_levels: dict[str, str]) -> None:
        limit = self.config.budget.max_topic_files
        n = count_topic_files(project.memory_dir, self.config.budget.max_file_bytes)
        action = P.files_action(KIND_FILES in open_levels, n, limit)
        if action in ("warn", "hold"):
            self.state.set_warning(project.name, KIND_FILES, "over", {"files": n, "limit": limit})
            if action == "warn":
                self.log.warning("budget.warning", project=project.name, kind=KIND_FILES, budget_level="over",
                                 files=n, limit=limit)
        elif action == "clear":
            self.state.clear_warning(project.name, KIND_FILES)
            self.log.info("budget.cleared", project=project.name, kind=KIND_FILES, files=n, limit=limit)
