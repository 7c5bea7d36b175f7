"""The project page's charts (issue 26): cost per night over the last 30 nights, and the index's size
over time, gathered through the owners the CLI reads through, summed by the pure core (memd.core.series).

- Cost: the run log (``StateStore.runs``), bucketed by night (``memd.core.series.nights``).
- Index size: MEMORY.md in every history snapshot (``memd.history.file_history``), measured
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


SPARK_NIGHTS = 14  # nights on the first screen's sparkline


@dataclass(frozen=True)
class CostStrip:
    """A project's cost on the first screen: last night's, and the last nights' for a sparkline."""

    last: Night  # the night ``memd.core.series.last_night`` names
    nights: list[Night]  # the last SPARK_NIGHTS, through the night ``now`` is in, oldest first

    @property
    def costs(self) -> list[float | None]:
        return [n.cost_usd for n in self.nights]


def cost_strips(names: list[str], state_dir: Path, now: float, tz: tzinfo,
                count: int = SPARK_NIGHTS) -> dict[str, CostStrip]:
    """Each project's ``CostStrip``, from one open of the run log."""
    from memd.state import StateStore

    through = night_of(now, tz)  # yesterday's night before noon, today's after: last night is in
    last = last_night(now, tz)
    since = night_start(through, tz) - count * 86400 - 7200
    out: dict[str, CostStrip] = {}
    st = StateStore.open(state_dir) if _has_state(state_dir) else None
    try:
        for name in names:
            runs = [] if st is None else [RunCost(r.started, r.cost_usd, r.tokens_total, r.cost_unknown)
                                          for r in st.runs(project=name, since=since, limit=1_000_000)]
            strip = nights(runs, through=through, count=count, tz=tz)
            out[name] = CostStrip(next(n for n in strip if n.night == last), strip)
    finally:
        if st is not None:
            st.close()
    return out


def first_screen_nights(names: list[str], state_dir: Path) -> dict[str, CostStrip]:
    """``cost_strips`` now, in the daemon's zone; an unreadable run log gives none (the first screen
    names the run log's problem already)."""
    from memd.errors import MemdError

    try:
        return cost_strips(names, state_dir, time.time(), local_zone())
    except MemdError:
        return {}


def spark_data(strips: dict[str, CostStrip], names: list[str]) -> dict[str, Any]:
    """The first screen's sparklines for charts.js: the nights' x and, per row (in ``names``' order),
    its costs (None: no model run that night)."""
    first = next(iter(strips.values()), None)
    return {"x": [int(n.start) for n in first.nights] if first else [],
            "labels": [n.label for n in first.nights] if first else [],
            "rows": [strips[n].costs if n in strips else [] for n in names]}


def size_points(project: Project, config: Config, state_dir: Path) -> list[SizePoint]:
    """MEMORY.md's size at every history snapshot and every daemon sample, oldest first."""
    from memd import history
    from memd.core.paths import INDEX_NAME
    from memd.inspect import measure_index_bytes
    from memd.state import StateStore

    points: list[SizePoint] = []
    measured: dict[bytes, Any] = {}
    for e, raw in history.file_history(state_dir, project.name, INDEX_NAME, limit=MAX_SNAPSHOTS):
        if e.kind not in SNAPSHOT_KINDS or raw is None:  # a plan, or no index then: no point of the chart
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
    def unknown_runs(self) -> int:
        """Runs of the nights whose cost is unknown (no price for their model): the total is a lower bound."""
        return sum(n.cost_unknown for n in self.nights)

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
    """Both series of one project; one that cannot be read is named in ``problems`` and the rest of the
    page (the other chart, the index, the history) is shown as ever."""
    now = time.time() if now is None else now
    tz = local_zone() if tz is None else tz
    view = ChartsView(redact(project.name), nights([], through=night_of(now, tz), count=NIGHTS, tz=tz), [])
    try:
        view.nights = cost_nights(project.name, state_dir, now, tz)
    except Exception as e:  # any: a chart's failure is that chart's, with its reason
        view.problems.append(redact(f"the cost chart cannot be drawn: the run log {_why(e)}"))
    try:
        view.sizes = size_points(project, config, state_dir)
    except Exception as e:
        view.problems.append(redact(f"the index-size chart cannot be drawn: the history {_why(e)}"))
    return view


def _why(e: Exception) -> str:
    from memd.errors import MemdError

    if isinstance(e, MemdError | OSError | ValueError):
        return f"cannot be read: {e}"
    return f"gave {type(e).__name__}: {e} (a bug in memd ui)"
