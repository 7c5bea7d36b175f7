"""The project page's charts (issue 26): cost per night over the last 30 nights, and the index's size
over time, gathered through the owners the CLI reads through, summed by the pure core (memd.core.series).

- Cost: the run log (``StateStore.runs``), bucketed by night (``memd.core.series.nights``).
- Index size: MEMORY.md in every history snapshot (``memd.history.log`` and ``top_file_at``), measured
  as `memd status` measures the file (``memd.inspect.measure_index_bytes``), with the samples the daemon
  keeps when it measures the index after a memory write (``StateStore.index_samples``).

The figures go to the page twice: as tables (the page is whole without JavaScript) and as one JSON
block (``chart_data``, rendered with Jinja's ``tojson``) that memd/ui/static/charts.js draws with uPlot.
Every text in them is redacted; escaping is the template's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import Any

from memd.config import Config
from memd.core.secrets import redact
from memd.core.series import Night, RunCost, SizePoint, last_night, night_of, night_start, nights, size_series
from memd.layout import Project

NIGHTS = 30  # nights on the cost chart
MAX_SNAPSHOTS = 400  # history commits read for the size chart (the newest)
MAX_POINTS = 1000  # points on the size chart (the newest)
SNAPSHOT_KINDS = ("snapshot", "before", "after", "undo")  # commits that hold the folder as it was


def local_zone() -> tzinfo:
    """The zone the daemon schedules in (``tzlocal``, as memd.daemon.server): its nights are the chart's."""
    import tzlocal

    return tzlocal.get_localzone()


def _has_state(state_dir: Path) -> bool:
    from memd.state import FILENAME

    return (state_dir / FILENAME).exists()  # the viewer never creates memd's state


def cost_nights(project: str, state_dir: Path, now: float, tz: tzinfo, count: int = NIGHTS) -> list[Night]:
    """The project's last ``count`` nights (through the one ``now`` is in), oldest first."""
    from memd.state import StateStore

    through = night_of(now, tz)
    runs: list[RunCost] = []
    if _has_state(state_dir):
        since = night_start(through, tz) - count * 86400 - 7200  # a day of 25 h (DST) left in
        with StateStore.open(state_dir) as st:
            runs = [RunCost(r.started, r.cost_usd, r.tokens_total, r.cost_unknown)
                    for r in st.runs(project=project, since=since, limit=1_000_000)]
    return nights(runs, through=through, count=count, tz=tz)


def last_nights_cost(names: list[str], state_dir: Path, now: float, tz: tzinfo) -> dict[str, Night]:
    """Each project's "last night" (``memd.core.series.last_night``) for the first screen."""
    from memd.state import StateStore

    d = last_night(now, tz)
    start = night_start(d, tz)
    out: dict[str, Night] = {}
    if not _has_state(state_dir):
        return {n: nights([], through=d, count=1, tz=tz)[0] for n in names}
    with StateStore.open(state_dir) as st:
        for name in names:
            runs = [RunCost(r.started, r.cost_usd, r.tokens_total, r.cost_unknown)
                    for r in st.runs(project=name, since=start - 3600, limit=1_000_000)]
            out[name] = nights(runs, through=d, count=1, tz=tz)[0]
    return out


def first_screen_nights(names: list[str], state_dir: Path) -> dict[str, Night]:
    """``last_nights_cost`` now, in the daemon's zone; an unreadable run log gives none (the first screen
    names the run log's problem already)."""
    from memd.errors import MemdError

    try:
        return last_nights_cost(names, state_dir, time.time(), local_zone())
    except MemdError:
        return {}


def size_points(project: Project, config: Config, state_dir: Path) -> list[SizePoint]:
    """MEMORY.md's size at every history snapshot and every daemon sample, oldest first."""
    from memd import history
    from memd.core.paths import INDEX_NAME
    from memd.inspect import measure_index_bytes
    from memd.state import StateStore

    points: list[SizePoint] = []
    entries = [e for e in history.log(state_dir, project.name, limit=MAX_SNAPSHOTS) if e.kind in SNAPSHOT_KINDS]
    if entries:
        data = history.top_file_at(state_dir, project.name, [e.commit for e in entries], INDEX_NAME)
        measured: dict[bytes, Any] = {}
        for e in entries:
            raw = data.get(e.commit)
            if raw is None:  # no index in that snapshot: its size is no point of the chart
                continue
            if raw not in measured:
                measured[raw] = measure_index_bytes(project, config.budget, raw)
            b = measured[raw]
            points.append(SizePoint(e.time, b.lines, b.chars, b.max_lines, b.max_chars, "snapshot"))
    if _has_state(state_dir):
        with StateStore.open(state_dir) as st:
            points.extend(SizePoint(s.at, s.lines, s.chars, s.max_lines, s.max_chars, "daemon")
                          for s in st.index_samples(project.name, limit=MAX_POINTS))
    return size_series(points, limit=MAX_POINTS)


@dataclass
class ChartsView:
    project: str
    nights: list[Night]
    sizes: list[SizePoint]
    problems: list[str] = field(default_factory=list)  # a series that could not be read, and why

    @property
    def nights_with_runs(self) -> list[Night]:
        return [n for n in self.nights if n.runs]

    @property
    def total_cost(self) -> float | None:
        costs = [n.cost_usd for n in self.nights if n.cost_usd is not None]
        return round(sum(costs), 6) if costs else None

    def chart_data(self) -> dict[str, Any]:
        """What charts.js draws: x in seconds (uPlot's time scale), a missing value None (a gap)."""
        return {
            "project": self.project,
            "cost": {"x": [int(n.start) for n in self.nights], "labels": [n.label for n in self.nights],
                     "cost": [n.cost_usd for n in self.nights],
                     "tokens": [n.tokens if n.model_runs else None for n in self.nights]},
            "size": {"x": [round(p.at, 3) for p in self.sizes], "lines": [p.line_pct for p in self.sizes],
                     "chars": [p.char_pct for p in self.sizes], "source": [p.source for p in self.sizes]},
        }


def charts_view(project: Project, config: Config, state_dir: Path, *, now: float | None = None,
                tz: tzinfo | None = None) -> ChartsView:
    """Both series of one project; one that cannot be read is named in ``problems``, the other shown."""
    from memd.errors import MemdError

    now = time.time() if now is None else now
    tz = local_zone() if tz is None else tz
    view = ChartsView(redact(project.name), nights([], through=night_of(now, tz), count=NIGHTS, tz=tz), [])
    try:
        view.nights = cost_nights(project.name, state_dir, now, tz)
    except MemdError as e:
        view.problems.append(redact(f"the run log cannot be read: {e}"))
    try:
        view.sizes = size_points(project, config, state_dir)
    except MemdError as e:
        view.problems.append(redact(f"the index's history cannot be read: {e}"))
    return view
