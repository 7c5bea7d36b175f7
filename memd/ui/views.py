"""What the viewer's pages show, gathered through the owners the CLI reads through.

The first screen is `memd status`'s rows (``memd.inspect.status_rows``: the index measured as the
SessionStart hook measures it) with the last catch-up and dream from the run log (``memd.state``) and
what sync holds (``memd.sync.held``). A project page is MEMORY.md as Claude Code loads it
(``memd.core.index.loaded_view``, read as ``memd.inspect.measure_index`` reads it), the topic files
(``memd.memfolder``) and the timeline of its runs (``memd.ui.timeline``: the run log's rows, each
applied one opening to its diff from ``memd.history``). Every text that reaches a page passes
``memd.core.secrets.redact`` first; escaping is the templates' (autoescape).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memd.config import Config
from memd.core.secrets import redact
from memd.layout import Project

JOBS = ("catchup", "dream")
_MAX_DIFF_LINES = 4000  # a run's diff shown at most this long (the rest is named, not dropped silently)


@dataclass
class LastRun:
    job: str
    when: float
    outcome: str
    summary: str
    cost_usd: float | None  # None: unknown
    cost_unknown: bool = False  # a model memd has no price for: cost_usd is only the priced part


@dataclass(frozen=True)
class Gauge:
    """One of the first screen's gauges (an index's lines or characters against their limit), drawn as a
    ``<meter>`` whose regions are set so its colour is its level's: ``ok`` the optimum region, ``near`` the
    suboptimal one, ``over`` (past the limit: Claude Code cuts there) the even-less-good one. A meter's value
    is clamped to its max, so with the high boundary at the limit an over-budget value sat at the limit, in
    the near-budget colour; over, the high boundary is moved below it."""

    value: int
    limit: int
    level: str  # "ok" | "near" | "over", as memd.core.index.measure names the index's
    low: float
    high: float


def gauge(value: int, limit: int, warn_ratio: float) -> Gauge:
    limit = max(limit, 1)
    level = "over" if value > limit else "near" if value >= warn_ratio * limit else "ok"
    low = max(0.0, warn_ratio * limit - 0.5)  # counts are whole: ``value >= warn * limit`` is ``value > low``
    return Gauge(value, limit, level, low, low if level == "over" else float(limit))


@dataclass
class ProjectRow:
    """One project on the first screen: `memd status`'s row (``row``, its JSON form) and the rest."""

    name: str
    status: dict[str, Any]
    line_pct: float
    char_pct: float
    last: dict[str, LastRun | None]
    held: list[str]  # `memd status`'s sync lines for this project
    conflict_blocks: int
    week_cost: float = 0.0  # the run log's cost of this project's runs over the last 7 days
    week_model_runs: int = 0  # of those runs, the ones that called a model (none: the cost shows "-", not $0)
    gauges: dict[str, Gauge] = field(default_factory=dict)  # "lines", "chars"
    week_unknown: int = 0  # of the week's runs, those of unknown cost: week_cost is a lower bound ("≥ $X")


@dataclass
class Overview:
    projects: list[ProjectRow]
    without_memory: int
    state_problem: str | None = None


def _pct(n: int, of: int) -> float:
    return round(100.0 * n / of, 1) if of > 0 else 0.0


def overview(projects: list[Project], config: Config, state_dir: Path) -> Overview:
    from memd.errors import MemdError
    from memd.inspect import status_rows
    from memd.sync.held import status_lines

    rows = status_rows(projects, config, state_dir)
    last: dict[str, dict[str, LastRun | None]] = {}
    costs: dict[str, float] = {}
    model_runs: dict[str, int] = {}
    unknown: dict[str, int] = {}
    problem: str | None = None
    try:
        last, costs, model_runs, unknown = _last_runs([r.project for r in rows if r.has_memory], state_dir, time.time())
    except MemdError as e:  # an unreadable run log loses that column only
        problem = f"the run log cannot be read: {e}"
    out: list[ProjectRow] = []
    for r in rows:
        if not r.has_memory:
            continue
        held = [line.removeprefix(f"sync: {r.project}: ")
                for line in status_lines(state_dir, [r.project]).splitlines()]
        out.append(ProjectRow(
            r.project, r.as_json(), _pct(r.index_lines, r.max_lines), _pct(r.index_chars, r.max_chars),
            last.get(r.project, dict.fromkeys(JOBS)), [redact(h) for h in held],
            int(r.extra.get("sync_conflicts", 0)), costs.get(r.project, 0.0), model_runs.get(r.project, 0),
            {"lines": gauge(r.index_lines, r.max_lines, config.budget.warn_ratio),
             "chars": gauge(r.index_chars, r.max_chars, config.budget.warn_ratio)},
            unknown.get(r.project, 0)))
    return Overview(out, sum(1 for r in rows if not r.has_memory), problem)


WEEK_S = 7 * 86400


def _last_runs(names: list[str], state_dir: Path, now: float) -> tuple[
        dict[str, dict[str, LastRun | None]], dict[str, float], dict[str, int], dict[str, int]]:
    """Each project's last catch-up and dream that ran (as `memd status`'s idle rule counts them:
    ``StateStore.last_runs``), the known cost of its runs over the last 7 days, how many of them called a
    model and how many of those have an unknown cost (no price for their model)."""
    from memd.state import StateStore

    if not (state_dir / "state.sqlite3").exists():  # the viewer never creates memd's state
        return {}, {}, {}, {}
    out: dict[str, dict[str, LastRun | None]] = {}
    costs: dict[str, float] = {}
    model_runs: dict[str, int] = {}
    unknown: dict[str, int] = {}
    with StateStore.open(state_dir) as st:
        for name in names:
            week = st.runs(project=name, since=now - WEEK_S, limit=100_000)
            costs[name] = sum(r.cost_usd or 0.0 for r in week)
            model_runs[name] = sum(1 for r in week if r.tokens_total > 0 or r.cost_usd or r.cost_unknown)
            unknown[name] = sum(1 for r in week if r.cost_unknown or r.cost_usd is None)
            got: dict[str, LastRun | None] = {}
            for job in JOBS:
                runs = st.last_runs(name, (job,), 1)
                got[job] = (LastRun(job, runs[0].started, runs[0].outcome, redact(runs[0].summary),
                                    runs[0].cost_usd, runs[0].cost_unknown) if runs else None)
            out[name] = got
    return out, costs, model_runs, unknown


@dataclass
class IndexLine:
    n: int  # 1-based line of MEMORY.md
    text: str
    state: str  # "loaded" | "stripped" (frontmatter, comment: never loaded) | "cut" (past the cut)
    hidden_entry: bool  # an index entry past the cut (`memd check` MEM003)


@dataclass
class IndexView:
    lines: list[IndexLine]
    loaded_text: str
    cut_after: int | None  # the cut is drawn after this file line (None: nothing is cut)
    cut_by: str | None
    figures: dict[str, int]
    problem: str | None


@dataclass
class TopicView:
    rel: str
    frontmatter: str | None
    body: str
    problem: str | None


@dataclass
class ConflictView:
    path: str
    line: int
    message: str


@dataclass
class ProjectPage:
    name: str
    memory_dir: str
    index: IndexView | None
    topics: list[TopicView]
    timeline: Any = None  # memd.ui.timeline.Timeline: every run of the run log, each opening to its diff
    conflicts: list[ConflictView] = field(default_factory=list)  # `memd check`'s MEM090, where each block is
    held: list[str] = field(default_factory=list)  # `memd status`'s sync lines: what is held, why, how to resolve
    evidence: dict[str, Any] = field(default_factory=dict)  # `memd status`'s evidence (memd.jobs.evidence.summary)


def index_view(project: Project, config: Config) -> IndexView | None:
    """MEMORY.md line by line as Claude Code loads it: read as `memd status` measures it (bounded,
    undecodable bytes replaced), parsed and cut by the core (``loaded_view``, ``measure``)."""
    from memd.core import index
    from memd.core.budget import refdefs_kept
    from memd.core.paths import INDEX_NAME
    from memd.inspect import measure_index, project_limits
    from memd.memfolder.read import read_bounded
    from memd.memfolder.walk import locate

    path = locate(project.memory_dir, INDEX_NAME, None)
    if path is None:
        return None
    r = read_bounded(path, config.budget.max_file_bytes, hash=False, cut=True)
    if r.data is None:
        m = measure_index(project, config.budget)
        return IndexView([], "", None, None, {}, f"MEMORY.md {m.problem or 'cannot be read'}")
    text = r.data.decode("utf-8", errors="replace")
    b = project_limits(project, config.budget, text)
    refdefs = refdefs_kept(b)
    idx = index.parse(text, refdefs=refdefs)
    view = index.loaded_view(text, b.max_lines, b.max_chars, idx=idx, refdefs=refdefs)
    budget = index.measure(text, b.max_lines, b.max_chars, b.warn_ratio, idx=idx, refdefs=refdefs)
    hidden = {e.line for e in budget.hidden}
    last_visible = max(view.visible) if view.visible else 0
    lines: list[IndexLine] = []
    for n, ln in enumerate(idx.lines, 1):
        if n in view.visible:
            state = "loaded"
        elif view.truncated and n > last_visible:
            state = "cut"
        else:
            state = "stripped"
        lines.append(IndexLine(n, redact(ln), state, n in hidden))
    figures = {"lines": budget.lines, "max_lines": budget.max_lines, "chars": budget.chars,
               "max_chars": budget.max_chars, "hidden": len(budget.hidden)}
    problem = measure_index(project, config.budget).problem if r.cut or r.problem else None
    return IndexView(lines, redact(view.text), last_visible if view.truncated else None, view.cut_by, figures,
                     None if problem is None else f"MEMORY.md {problem}")


def topic_views(project: Project, config: Config) -> list[TopicView]:
    from memd.core.frontmatter import split
    from memd.memfolder.read import decode, read_bounded
    from memd.memfolder.walk import list_files

    out: list[TopicView] = []
    for f in sorted(list_files(project.memory_dir, config.budget.max_file_bytes).topics(), key=lambda f: f.rel):
        r = read_bounded(f.path, config.budget.max_file_bytes, hash=False)
        if r.data is None:
            out.append(TopicView(redact(f.rel), None, "", r.problem or "cannot be read"))
            continue
        text = decode(r)
        has, yaml_text, body_start, _ = split(text)
        out.append(TopicView(redact(f.rel), redact(yaml_text) if has else None,  # a file's name is text too
                             redact(text[body_start:] if has else text), r.problem))
    return out


def project_page(project: Project, config: Config, state_dir: Path, *, before: int | None = None) -> ProjectPage:
    from memd.inspect import check_project
    from memd.sync.held import status_lines

    page = ProjectPage(project.name, str(project.memory_dir), index_view(project, config),
                       topic_views(project, config))
    checked = check_project(project, config.budget, team_pii=config.hooks.team_pii, cache_dir=state_dir)
    page.conflicts = [ConflictView(redact(f.path), f.line, redact(f.message))
                      for f in checked.findings if f.code == "MEM090"]
    page.held = [redact(line.removeprefix(f"sync: {project.name}: "))
                 for line in status_lines(state_dir, [project.name]).splitlines()]
    from memd.ui.timeline import timeline

    page.timeline = timeline(project.name, state_dir, before=before)
    page.evidence = _evidence(project, config, state_dir)
    return page


def _evidence(project: Project, config: Config, state_dir: Path) -> dict[str, Any]:
    """What the next dream will be shown (issue 31), names redacted; {} when it cannot be computed (the
    page shows the rest)."""
    from memd.jobs.evidence import summary
    from memd.state import StateStore

    if not project.memory_dir.is_dir():
        return {}
    try:
        with StateStore.open(state_dir, timeout=2.0) as state:
            s = summary(project.memory_dir, config, state, project.name, time.time())
    except Exception:  # the evidence is an extra: never the page's failure
        return {}
    return {"unused": [redact(r) for r in s["unused"]], "unused_after": s["unused_after"], "loads": s["loads"],
            "pairs": [[redact(a), redact(b), sc] for a, b, sc in s["pairs"]],
            "dated": [[redact(r), d] for r, d in s["dated"]], "past_cut": [redact(r) for r in s["past_cut"]]}


@dataclass
class ReportPage:
    path: str | None
    text: str


def report_page(state_dir: Path) -> ReportPage:
    """The latest morning check-in, as `memd report` prints it (``memd.jobs.checkin.latest_report``)."""
    from memd.jobs.checkin import latest_report

    path = latest_report(state_dir)
    if path is None:
        return ReportPage(None, "")
    return ReportPage(str(path), redact(path.read_text(encoding="utf-8", errors="replace")))
