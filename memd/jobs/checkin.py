"""The morning check-in: a short report of the night, to the log and to ``state_dir/reports/``.

Runs since the previous check-in (or the last 24 hours), what they changed, tokens and cost,
warnings still open, and the projects whose runs keep "succeeding" while changing nothing -- the
way peers' consolidations failed for weeks without anyone noticing. Names and figures only: no
memory content goes into a report. Once the report is written the check-in prunes the run log
(``prune_run_log``; the rules: ``memd.state.SKIPPED_KEEP_S``, ``RUNS_KEEP_S``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memd.jobs import JobContext
    from memd.state import Run, StateStore

REPORTS = "reports"
LAST_KEY = "checkin.last"
IDLE_RUNS = 5  # successful runs in a row without a change before a project is called out
KIND_IDLE = "no_changes"
_MAX_ROWS = 200


@dataclass
class Report:
    markdown: str
    summary: dict[str, Any] = field(default_factory=dict)


def reports_dir(state_dir: Path) -> Path:
    return state_dir / REPORTS


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M")


def _cost(r: Run) -> str:
    """A run's cost as the report shows it: never "$0" for a run of a model memd has no price for."""
    if r.cost_unknown or r.cost_usd is None:
        return "cost unknown" + (f" (≥ ${r.cost_usd:.4f})" if r.cost_usd else "")
    return f"${r.cost_usd:.4f}"


def _safe(text: str, limit: int = 120) -> str:
    from memd.core import secrets

    text = " ".join(text.split())
    if secrets.scan(text):
        return "[redacted]"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def idle_projects(state: StateStore, projects: list[str], n: int = IDLE_RUNS) -> list[str]:
    """Projects whose last ``n`` finished model runs all ran and changed nothing."""
    out: list[str] = []
    for name in projects:
        # filtered by SQLite: an idle project's skipped catch-ups (twelve a day) must not push its
        # finished runs out of a fixed window
        last = state.last_outcomes(name, ("dream", "catchup"), n)
        if len(last) == n and all(o == "unchanged" for o in last):
            out.append(name)
    return out


def forgotten_lines(state_dir: Path, runs: list[Run]) -> list[str]:
    """What the listed runs forgot or merged away, and why, read from their history commits (the run log
    keeps counts, the history the declarations: ``memd.core.declared.forgotten_in``): "project: a.md
    deleted: why (run R)". One read of a project's history for all its runs; a history that cannot be
    read says so in one line."""
    from memd import history
    from memd.core.declared import forgotten_file, forgotten_in
    from memd.errors import MemdError

    wanted: dict[str, list[str]] = {}
    for r in runs:
        if r.project and r.history_run and r.deleted and r.outcome in ("changed", "partial"):
            wanted.setdefault(r.project, []).append(r.history_run)
    out: list[str] = []
    for project, names in wanted.items():
        try:
            msgs = {e.run: e.message for e in history.log(state_dir, project, limit=len(names) * 4 + 40)
                    if e.kind == "after" and e.run in names}
        except MemdError as e:
            out.append(f"{project}: the history cannot be read ({_safe(str(e), 120)})")
            continue
        for name in names:
            out += [f"{project}: {_safe(line, 300)} (run {name}; `memd undo {project} {name} --file "
                    f"{forgotten_file(line)}` brings it back)" for line in forgotten_in(msgs.get(name, ""))]
    return out


def build_report(state: StateStore, *, now: float, since: float, state_dir: Path | None = None) -> Report:
    # the sums in SQLite, and only the rows the report lists as objects (a day of catch-ups over a
    # thousand projects is over ten thousand rows)
    totals = state.run_totals(since=since, exclude_job="checkin")
    n_runs: int = totals["runs"]
    runs: list[Run] = state.first_runs(since=since, exclude_job="checkin", limit=_MAX_ROWS)
    warnings = state.warnings()
    names = sorted(set(totals["projects"]) | {p.name for p in state.projects()})
    idle = idle_projects(state, names)
    outcomes = Counter(totals["outcomes"])
    tok_in, tok_out = totals["tokens_in"], totals["tokens_out"]
    cache_r, cache_w = totals["cache_read"], totals["cache_write"]
    cost, changes = totals["cost_usd"], totals["changes"]
    unknown = int(totals.get("cost_unknown_runs", 0))

    lines = [f"# memd check-in, {_when(now)}", "",
             f"Since {_when(since)}: {n_runs} project runs"
             + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) + ")" if n_runs else "")
             + f"; {changes} changes; {tok_in + tok_out + cache_r + cache_w:,} tokens ({tok_in:,} uncached in,"
             + f" {tok_out:,} out, cache {cache_r:,} read, {cache_w:,} written); "
             + (f"≥ ${cost:.4f}, {unknown} run(s) of unknown cost (no price for their model in model.prices)"
                if unknown else f"${cost:.4f}") + ".", ""]
    lines += ["## Runs", ""]
    if runs:
        lines += ["| started | job | project | outcome | +added ~changed -deleted | tokens in/out | cost | note |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in runs:
            # a run that did not do what was asked says why in full (the refusal reason is the point)
            said = [x for x in (r.summary, r.error) if x]
            if len(said) == 2 and (said[1] in said[0]):
                said = said[:1]
            bad = r.outcome in ("refused", "failed", "partial")
            note = _safe("; ".join(said) if bad else (r.error or r.summary or ""), 400 if bad else 120)
            lines.append(f"| {_when(r.started)} | {r.job} | {r.project or '-'} | {r.outcome} | "
                         f"+{r.added} ~{r.changed} -{r.deleted} | {r.tokens_total - r.tokens_out}/{r.tokens_out} | "
                         f"{_cost(r)} | {note} |")
        if n_runs > len(runs):
            lines.append(f"\n… and {n_runs - len(runs)} more runs (`memd status`, the run log).")
    else:
        lines.append("No runs.")
    if state_dir is not None:
        # each memory a model run forgot or merged away, with the run's reason (issue 31): the reason is
        # the model's one sentence, secret-scanned like every note here
        forgot = forgotten_lines(state_dir, runs)
        lines += ["", "## Memories forgotten", ""]
        lines += [f"- {f}" for f in forgot] if forgot else ["None."]
    lines += ["", "## Warnings still open", ""]
    open_w = [w for w in warnings if w.kind != KIND_IDLE]
    if open_w:
        for w in open_w:
            fig = ", ".join(f"{k} {w.details[k]}" for k in ("lines", "chars", "files", "hidden") if k in w.details)
            lines.append(f"- {w.project}: {w.kind} {w.level}" + (f" ({fig})" if fig else "")
                         + f", since {_when(w.since)}" + (f": {_safe(str(w.details['reason']), 400)}"
                                                          if w.details.get("reason") else ""))
    else:
        lines.append("None.")
    lines += ["", "## Runs that change nothing", ""]
    if idle:
        lines.append(f"The last {IDLE_RUNS} runs of these projects all reported success and changed nothing; "
                     "check that the job still does its work (`memd history`, `memd logs`):")
        lines += [f"- {n}" for n in idle]
    else:
        lines.append("None.")
    summary = {"runs": n_runs, "outcomes": dict(outcomes), "changes": changes, "tokens_in": tok_in,
               "tokens_out": tok_out, "cache_read": cache_r, "cache_write": cache_w, "cost_usd": round(cost, 6),
               "cost_unknown_runs": unknown, "open_warnings": len(open_w), "idle_projects": idle}
    return Report("\n".join(lines) + "\n", summary)


def write_report(state_dir: Path, report: Report, now: float) -> Path:
    from memd.store import atomic_write, ensure_private_dir

    folder = ensure_private_dir(reports_dir(state_dir))
    stamp = datetime.fromtimestamp(now).astimezone().strftime("%Y-%m-%d-%H%M%S")
    path = folder / f"checkin-{stamp}.md"
    atomic_write(path, report.markdown, mode=0o600)
    return path


def latest_report(state_dir: Path) -> Path | None:
    try:
        names = sorted(e.name for e in os.scandir(reports_dir(state_dir))
                       if e.name.startswith("checkin-") and e.name.endswith(".md"))
    except OSError:
        return None
    return reports_dir(state_dir) / names[-1] if names else None


def since_last(state: StateStore, now: float) -> float:
    """When the previous check-in ran (24 hours before ``now`` when none did)."""
    last = state.get(LAST_KEY)
    try:
        return float(last) if last else now - 86_400
    except ValueError:
        return now - 86_400


def run_checkin(jc: JobContext) -> Path | None:
    """Write the report of the night; returns its path (None in a dry run, which only logs)."""
    now = jc.clock.time()
    state = jc.state
    since = max(since_last(state, now), now - 7 * 86_400)
    t0 = jc.clock.monotonic()
    report = build_report(state, now=now, since=since, state_dir=jc.state_dir)
    idle = report.summary["idle_projects"]
    path: Path | None = None
    if not jc.dry_run:
        for w in state.warnings():
            if w.kind == KIND_IDLE and w.project not in idle:
                state.clear_warning(w.project, KIND_IDLE)
        for name in idle:
            state.set_warning(name, KIND_IDLE, "near", {"runs": IDLE_RUNS})
        path = write_report(jc.state_dir, report, now)
        state.set(LAST_KEY, repr(now))
        state.set("job.checkin.last", json.dumps({
            "ended": jc.clock.time(), "duration_s": round(jc.clock.monotonic() - t0, 3), "report": str(path),
            "counts": {"unchanged": 1}, "runs": report.summary["runs"]}))
    if jc.log is not None:
        jc.log.info("checkin.report", path=str(path) if path else None, duration_s=round(jc.clock.monotonic() - t0, 3),
                    **{k: v for k, v in report.summary.items() if k != "idle_projects"},
                    idle_projects=len(idle))
        for name in idle:
            jc.log.warning("checkin.no_changes", project=name, runs=IDLE_RUNS)
    if not jc.dry_run:
        # after the report: it has read (and counted) the rows the prune lets go
        prune_run_log(state, now, jc.log)
    return path


def prune_run_log(state: StateStore, now: float, log: Any = None) -> int:
    """``StateStore.prune_runs`` for the check-in and the daemon's start: the rows deleted, logged as
    ``state.pruned`` (with ``more=True`` when the call's cap, ``PRUNE_MAX_ROWS``, left some for the next
    one); a prune that fails (the state file busy, locked, full) is logged as ``state.prune_failed`` with
    the reason and returns 0, never raises: old rows can wait a day."""
    from memd.state import PRUNE_MAX_ROWS

    try:
        n = state.prune_runs(now, max_rows=PRUNE_MAX_ROWS)
        samples = state.prune_index_samples(now, max_rows=PRUNE_MAX_ROWS)  # the index-size chart's, alike
        samples += state.prune_memory_use(now, max_rows=PRUNE_MAX_ROWS)  # issue 31's use counts, alike
    except Exception as e:  # whatever it is, the check-in and the daemon go on
        if log is not None:
            log.warning("state.prune_failed", reason=f"{type(e).__name__}: {e}"[:500])
        return 0
    if n and log is not None:
        log.info("state.pruned", rows=n, **({"more": True} if n >= PRUNE_MAX_ROWS else {}))
    if samples and log is not None:
        log.info("state.pruned", index_samples=samples)
    return n
