"""The jobs: catch-up, dream, check-in. The daemon and the CLI run them through one contract.

A job runs over projects; each project yields a ProjectOutcome that goes to the run log.
``memd.jobs.runner`` (daemon side) wraps a job with logging, gates and the run log;
``memd.jobs.dream.dream_project`` and ``memd.jobs.catchup.catchup_project`` do one project's work.

Layer: jobs may import ``memd.apply``, ``memd.llm``, the I/O edge and the core; never the daemon
or the door.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memd.config import Config
    from memd.layout import Project

OUTCOMES = ("ok", "noop", "skipped", "failed", "rejected", "review")


@dataclass
class JobContext:
    config: Config
    claude_dir: Path
    state_dir: Path
    state: Any  # memd.state.StateStore
    now: Callable[[], datetime] = field(default=lambda: datetime.now().astimezone())
    force: bool = False  # waive the cheap gates (hours, sessions); never the lock or active sessions
    dry_run: bool = False  # compute and report, change nothing
    stop: threading.Event = field(default_factory=threading.Event)  # set on shutdown: abandon cleanly
    log: Any = None  # a structlog-style logger (memd.logs.get_logger()), or None for silence


@dataclass
class ProjectOutcome:
    project: str
    outcome: str  # one of OUTCOMES
    message: str = ""
    added: int = 0
    changed: int = 0
    deleted: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    run_id: str | None = None  # history snapshot / run identifier, when one was made
    details: dict[str, Any] = field(default_factory=dict)


ProjectJob = Callable[[JobContext, "Project"], ProjectOutcome]
