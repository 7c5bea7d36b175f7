"""The jobs: catch-up, dream, check-in. The daemon and the CLI run them through one contract.

A job runs over projects; each project yields a ProjectOutcome that goes to the run log.
``memd.jobs.runner`` (daemon side) wraps a job with logging, gates and the run log;
``memd.jobs.dream.dream_project`` and ``memd.jobs.catchup.catchup_project`` do one project's work.
Time is read only through ``JobContext.clock`` (``memd.clock``), so tests move it by hand.

Layer: jobs may import ``memd.apply``, ``memd.llm``, the I/O edge and the core; never the daemon
or the door.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from memd.clock import SYSTEM, Clock

if TYPE_CHECKING:
    from memd.config import Config
    from memd.layout import Project

Outcome = Literal["changed", "unchanged", "proposed", "refused", "partial", "skipped", "failed"]
"""How one project's run ended; the run log keeps exactly these strings ("running" until then).

- ``changed``: files changed (the counts say how many);
- ``unchanged``: it ran and had nothing to change: the folder is byte for byte as before;
- ``proposed``: a dry run or a review: a diff was made, nothing was written;
- ``refused``: a guard refused the run, or a safe rebuild cannot fit; the message says why;
- ``partial``: a cap was hit; what passed the guards was applied only if the run reached a
  consistent state;
- ``skipped``: not run (a gate, the lock, model work off with nothing to do, shutdown);
- ``failed``: an error; the message says which.
"""
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
SUCCESS: frozenset[Outcome] = frozenset(("changed", "unchanged", "proposed"))  # the run did its work
# A consolidation: the work was done and its result is in the folder. A review proposed changes and
# applied none: the folder is as unconsolidated as before, so the next dream may not wait 24 h.
CONSOLIDATED: frozenset[Outcome] = SUCCESS - {"proposed"}
# Outcomes a command reports with a non-zero exit (1): the run did not do what was asked.
UNSUCCESSFUL: frozenset[Outcome] = frozenset(("refused", "partial", "failed"))
# Run-log rows written before the outcome names said what happened (state schema < 4).
LEGACY_OUTCOMES = {"ok": "changed", "noop": "unchanged", "rejected": "refused", "review": "proposed"}


def counts_as_consolidation(job: str, outcome: str, *, dry_run: bool, model_off: bool = False,
                            looked: bool = True) -> bool:
    """The one rule for "this project was consolidated now" (memd's last_consolidation and Claude
    Code's ``.consolidate-lock`` mtime): a dream that did its work, for real, with the model, and
    applied it. A dream skipped (shutdown), refused, failed, partial or only proposed did not
    consolidate; a dry run changed nothing; with model work off only the index was rebuilt.

    ``looked`` False: the model ended its turn without one tool call and nothing changed (an empty
    ``end_turn``). It read no file and searched no transcript, so the sessions since the last
    consolidation were never gathered from (facts §6, phase 2): they must still count toward the next
    dream, and Claude Code, reading the lock's mtime as the last consolidation (§1), must not wait 24 h
    for nothing. A dream that looked (read or searched) and found nothing to change did consolidate."""
    return job == "dream" and outcome in CONSOLIDATED and not dry_run and not model_off and looked


def consolidated(job: str, jc: JobContext, out: ProjectOutcome) -> bool:
    """``counts_as_consolidation`` of one project's outcome."""
    return counts_as_consolidation(job, out.outcome, dry_run=jc.dry_run, model_off=out.model_off,
                                   looked=not out.empty_turn)


def note_consolidation(jc: JobContext, job: str, out: ProjectOutcome) -> bool:
    """Record "consolidated now" in the state when the rule above says so; True when recorded."""
    if jc.state is None or not consolidated(job, jc, out):
        return False
    jc.state.mark_consolidated(out.project, jc.clock.time())
    return True


@dataclass
class JobContext:
    config: Config
    claude_dir: Path
    state_dir: Path
    state: Any  # memd.state.StateStore
    clock: Clock = SYSTEM  # the one clock: wall time, monotonic time, local "now"
    force: bool = False  # waive the cheap gates (hours, sessions); never the lock or active sessions
    dry_run: bool = False  # compute and report, change nothing
    stop: threading.Event = field(default_factory=threading.Event)  # set on shutdown: abandon cleanly
    log: Any = None  # a structlog-style logger (memd.logs.get_logger()), or None for silence
    # no one waits on this run (the daemon's scheduled catch-ups and nightly dreams): model.batch = auto
    # may send its first call as a Message Batch (memd.llm.batch); a command's run is never unattended
    unattended: bool = False
    # what a job found once and its gates read again (a project's session cwds, by name: sync's identities
    # read them for every folder, then the memory_off gate for each project it runs)
    memo: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProjectOutcome:
    project: str
    outcome: Outcome
    message: str = ""
    added: int = 0
    changed: int = 0
    deleted: int = 0
    tokens_in: int = 0  # uncached input only (the API's input_tokens)
    tokens_out: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_usd: float = 0.0  # priced over all four kinds (model.prices)
    cost_unknown: bool = False  # a call's model has no price: cost_usd is only the priced part (never "$0")
    error: str | None = None
    run_id: str | None = None  # history snapshot / run identifier, when one was made
    details: dict[str, Any] = field(default_factory=dict)
    model_called: bool = False  # the model was asked at least once (an idle streak counts only these)
    model_off: bool = False  # no API key: ``message`` starts with the sentence saying so
    empty_turn: bool = False  # the model ended its turn without a tool call, nothing changed: no consolidation
    detail: str = ""  # with model_off: the message without that sentence (a CLI says it once)

    @property
    def tokens_total(self) -> int:
        """Every token of the run: input, output, cache writes and cache reads."""
        return self.tokens_in + self.tokens_out + self.cache_read + self.cache_write

    @classmethod
    def without_model(cls, project: str, outcome: Outcome, off: str, detail: str, *, sep: str = "; ",
                      **kw: Any) -> ProjectOutcome:
        """The outcome of a run whose model work was off (``off`` is the sentence that says so). The full
        sentence (about 300 characters: how to turn model work on) is said once, where the run starts and in
        `memd status`; each run's message refers to it in a few words (every run row and log line repeated
        it before)."""
        short = MODEL_OFF_SHORT if len(off) > len(MODEL_OFF_SHORT) + 20 else off
        return cls(project, outcome, f"{short}{sep}{detail}", model_off=True, detail=detail, **kw)


ProjectJob = Callable[[JobContext, "Project"], ProjectOutcome]
MODEL_OFF_SHORT = "model work is off (why and how to turn it on: `memd status`)"
