"""The viewer's charts (issue 26): cost per night and the index's size over time.

The pure series (memd.core.series) on values; the index-size samples of the state store (schema 8)
with the migration from schema 7; the daemon keeping a sample when it measures; the snapshot points
measured as `memd status` measures; the vendored uPlot shipped in the wheel; and in a real headless
Chromium: the charts drawn (canvas painted, the number of points), no CSP violation, the night figures
equal to the run log's, a hostile project name in the chart's data running nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import settings
from hypothesis import strategies as st_
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from memd.core import series as S
from memd.state import SCHEMA_VERSION, StateStore
from tests import test_ui
from tests.plugins.memory_folders import ROOT, topic, write_tree
from tests.test_ui import CHROMIUM, DRIVER, _first, _open

home, serve = test_ui.home, test_ui.serve  # the viewer's fixtures, shared (pytest finds them by name here)


# ---- the pure series ---------------------------------------------------------------------------------

def _t(zone: Any, *args: int) -> float:
    return datetime(*args, tzinfo=zone).timestamp()


def test_a_night_runs_from_noon_to_noon_named_by_its_evening() -> None:
    tz = ZoneInfo("Europe/Berlin")
    assert S.night_of(_t(tz, 2026, 12, 1, 11, 59), tz) == date(2026, 11, 30)
    assert S.night_of(_t(tz, 2026, 12, 1, 12, 0), tz) == date(2026, 12, 1)
    assert S.night_of(_t(tz, 2026, 12, 1, 23, 0), tz) == date(2026, 12, 1)  # the evening's catch-up
    assert S.night_of(_t(tz, 2026, 12, 2, 3, 0), tz) == date(2026, 12, 1)  # the dream, in the small hours
    assert S.night_of(_t(tz, 2026, 12, 2, 11, 59, 59), tz) == date(2026, 12, 1)
    assert S.night_start(date(2026, 12, 1), tz) == _t(tz, 2026, 12, 1, 12, 0)
    # across a daylight-saving change the night still ends at 12:00 wall time (25 h long)
    assert S.night_start(date(2026, 10, 25), tz) - S.night_start(date(2026, 10, 24), tz) == 25 * 3600
    assert S.night_of(_t(tz, 2026, 10, 25, 11, 30), tz) == date(2026, 10, 24)
    # last night: yesterday's date, in the morning and late in the evening alike
    assert S.last_night(_t(tz, 2026, 12, 2, 7, 0), tz) == date(2026, 12, 1)
    assert S.last_night(_t(tz, 2026, 12, 2, 23, 0), tz) == date(2026, 12, 1)


def test_nights_sum_each_nights_runs_and_say_none_when_no_model_ran() -> None:
    tz = UTC
    runs = [S.RunCost(_t(tz, 2026, 12, 1, 22, 0), 0.25, 1000),  # the night of 1 Dec
            S.RunCost(_t(tz, 2026, 12, 2, 3, 0), 1.5, 20_000),  # ... its dream
            S.RunCost(_t(tz, 2026, 12, 2, 13, 0), 0.0, 0),  # the night of 2 Dec: a skipped catch-up only
            S.RunCost(_t(tz, 2026, 12, 3, 14, 0), 0.0, 500, cost_unknown=True),  # no price: not "no model run"
            S.RunCost(_t(tz, 2026, 11, 1, 3, 0), 9.0, 9)]  # outside the window
    got = S.nights(runs, through=date(2026, 12, 3), count=3, tz=tz)
    assert [n.label for n in got] == ["2026-12-01", "2026-12-02", "2026-12-03"]
    assert [(n.runs, n.model_runs, n.tokens, n.cost_usd) for n in got] == [
        (2, 2, 21_000, 1.75), (1, 0, 0, None), (1, 1, 500, 0.0)]
    assert got[2].cost_unknown == 1
    assert [n.start for n in got] == [_t(tz, 2026, 12, d, 12) for d in (1, 2, 3)]
    assert [n.cost_usd for n in S.nights([], through=date(2026, 12, 3), count=30, tz=tz)] == [None] * 30


def test_size_series_orders_dedups_and_keeps_the_newest() -> None:
    def p(at: float, lines: int, source: str = "snapshot") -> S.SizePoint:
        return S.SizePoint(at, lines, lines * 10, 200, 25_000, source)

    pts = [p(30, 5), p(10, 1), p(20, 3), p(20, 3, "daemon"), p(20, 4, "daemon")]
    assert [(x.at, x.lines) for x in S.size_series(pts, limit=10)] == [(10, 1), (20, 3), (20, 4), (30, 5)]
    assert [x.at for x in S.size_series(pts, limit=2)] == [20, 30]
    assert S.SizePoint(0, 250, 12_500, 200, 25_000, "daemon").line_pct == 125.0
    assert S.SizePoint(0, 250, 12_500, 200, 25_000, "daemon").char_pct == 50.0


def test_the_first_screens_strip_ends_with_tonight_and_names_last_night(tmp_path: Path) -> None:
    from memd.ui.charts import cost_strips

    tz = UTC
    with StateStore.open(tmp_path) as st:
        for started, cost in ((_t(tz, 2026, 12, 2, 3, 0), 0.5), (_t(tz, 2026, 12, 2, 13, 0), 0.25)):
            rid = st.start_run("dream", "p", started)
            st.finish_run(rid, outcome="changed", ended=started + 9, cost_usd=cost, tokens_in=10)
    morning = cost_strips(["p", "idle"], tmp_path, _t(tz, 2026, 12, 2, 7, 0), tz)
    assert morning["p"].last.label == "2026-12-01" and morning["p"].last.cost_usd == 0.5  # a few hours ago
    assert morning["p"].nights[-1].label == "2026-12-01" and len(morning["p"].costs) == 14
    evening = cost_strips(["p"], tmp_path, _t(tz, 2026, 12, 2, 15, 0), tz)["p"]
    assert evening.last.label == "2026-12-01" and evening.costs[-2:] == [0.5, 0.25]  # tonight's so far last
    assert morning["idle"].last.cost_usd is None and set(morning["idle"].costs) == {None}
    assert cost_strips(["p"], tmp_path / "none", _t(tz, 2026, 12, 2, 7, 0), tz)["p"].last.cost_usd is None
    assert not (tmp_path / "none").exists()  # the viewer creates no state


# ---- the state store's samples ------------------------------------------------------------------------

def test_samples_keep_one_an_hour_unless_the_figures_change(tmp_path: Path) -> None:
    with StateStore.open(tmp_path) as st:
        kw = {"lines": 10, "chars": 300, "max_lines": 200, "max_chars": 25_000}
        assert st.record_index_sample("p", 1000.0, **kw)
        assert not st.record_index_sample("p", 1000.0 + 3599, **kw)  # the same figures within the hour
        assert st.record_index_sample("p", 1000.0 + 60, **(kw | {"lines": 11}))  # changed: kept at once
        assert st.record_index_sample("p", 1060.0 + 3600, **(kw | {"lines": 11}))  # an hour later: kept
        assert st.record_index_sample("q", 1000.0, **kw)  # per project
        got = st.index_samples("p")
        assert [(s.at, s.lines) for s in got] == [(1000.0, 10), (1060.0, 11), (4660.0, 11)]
        assert [s.at for s in st.index_samples("p", since=1060.0, limit=1)] == [4660.0]


def test_samples_are_pruned_like_runs_the_newest_kept(tmp_path: Path) -> None:
    from memd.jobs.checkin import prune_run_log
    from memd.state import SAMPLES_KEEP_S

    now = 10_000_000_000.0
    old = now - SAMPLES_KEEP_S - 10
    kw = {"chars": 300, "max_lines": 200, "max_chars": 25_000}
    with StateStore.open(tmp_path) as st:
        for i in range(5):
            st.record_index_sample("p", old - 10_000 * i, lines=i, **kw)
        st.record_index_sample("p", now - 5, lines=9, **kw)
        for i in range(3):
            st.record_index_sample("idle", old - 10_000 * i, lines=i, **kw)  # no sample since: its newest stays
        assert prune_run_log(st, now) == 0  # (no run-log rows); the samples are pruned beside them
        assert [s.lines for s in st.index_samples("p")] == [9]
        assert [s.at for s in st.index_samples("idle")] == [old]


def test_migration_from_the_schema_before_samples_keeps_the_run_log(tmp_path: Path) -> None:
    from memd import state as st_mod

    # the schema just before index_samples (7 when it came; found by its statement, so a migration merged
    # ahead of it keeps this test true)
    mine = next(i for i, m in enumerate(st_mod.MIGRATIONS) if "CREATE TABLE index_samples" in m)
    assert mine >= 7
    c = sqlite3.connect(tmp_path / st_mod.FILENAME, isolation_level=None)
    for i in range(mine):
        for stmt in st_mod._statements(st_mod.MIGRATIONS[i]):
            c.execute(stmt)
    c.execute(f"PRAGMA user_version = {mine}")
    c.execute("INSERT INTO runs (job, project, started, ended, outcome, cost_usd, tokens_total, cost_unknown) "
              "VALUES ('dream', 'p', 100, 160, 'changed', 0.5, 1234, 0)")
    assert "index_samples" not in {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
    c.close()
    with StateStore.open(tmp_path) as st:
        assert st.schema_version == SCHEMA_VERSION
        (run,) = st.runs(project="p")
        assert (run.job, run.cost_usd, run.tokens_total, run.outcome) == ("dream", 0.5, 1234, "changed")
        assert st.index_samples("p") == []
        assert st.record_index_sample("p", 200.0, lines=1, chars=2, max_lines=200, max_chars=25_000)


def test_the_daemon_keeps_a_sample_when_it_measures_the_index(tmp_path: Path) -> None:
    from memd.config import Config
    from memd.daemon.budget import BudgetMonitor
    from memd.inspect import measure_index
    from memd.layout import Project
    from tests.plugins.daemon import Recorder, over_budget_index

    d = tmp_path / "proj"
    (d / "memory").mkdir(parents=True)
    p = Project("-p", d, d / "memory")

    class Clock:
        now = 5000.0

        def time(self) -> float:
            return self.now

    clock = Clock()
    with StateStore.open(tmp_path / "state") as st:
        mon = BudgetMonitor(Config(), st, Recorder(), clock)
        mon.check(p)  # no MEMORY.md: nothing measured, no sample
        assert st.index_samples("-p") == []
        p.index_path.write_text(over_budget_index(230))
        mon.check(p)
        clock.now += 60
        mon.check(p)  # the same figures a minute later: no second sample
        p.index_path.write_text(over_budget_index(20))
        clock.now += 60
        mon.check(p)
        got = st.index_samples("-p")
    m = measure_index(p, Config().budget).budget  # `memd status`'s figures for the file as it is now
    assert m is not None
    assert [s.at for s in got] == [5000.0, 5120.0]
    assert (got[-1].lines, got[-1].chars, got[-1].max_lines, got[-1].max_chars) == (
        m.lines, m.chars, m.max_lines, m.max_chars)
    assert got[0].lines > got[0].max_lines


def test_snapshot_points_are_measured_as_status_measures(claude_home: Path) -> None:
    from memd import history, layout
    from memd.config import Config
    from memd.inspect import measure_index
    from memd.ui.charts import size_points

    mem = claude_home / "projects" / "-home-u-app" / "memory"
    small = "# Memory\n<!-- stripped -->\n- [A](a.md) — a\n"
    write_tree(mem, {"MEMORY.md": small, "a.md": topic("a", "a", "project")})
    (project,) = layout.list_projects(claude_home)
    state = layout.state_dir("")
    want_small = measure_index(project, Config().budget).budget
    before = history.snapshot_before(state, project.name, mem, "dream", run="dream-1")
    big = small + "".join(f"- [N{i}](n{i}.md) — note {i}\n" for i in range(250))
    (mem / "MEMORY.md").write_text(big)
    history.record_after(state, project.name, before, {"MEMORY.md": big.encode()}, "dream", "dream-1", "dream")
    want_big = measure_index(project, Config().budget).budget
    assert want_small is not None and want_big is not None
    pts = size_points(project, Config(), state)
    assert [(p.lines, p.chars, p.source) for p in pts] == [
        (want_small.lines, want_small.chars, "snapshot"), (want_big.lines, want_big.chars, "snapshot")]
    assert pts[1].line_pct > 100 and pts[1].max_lines == want_big.max_lines
    got = history.file_history(state, project.name, "gone.md")
    assert [e.commit for e, _ in got][-1] == before and {raw for _, raw in got} == {None}


# ---- the vendored library ships ---------------------------------------------------------------------

VENDORED = {"uPlot.iife.min.js": "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f",
            "uPlot.min.css": "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04"}


def test_the_vendored_uplot_is_the_one_docs_name() -> None:
    static = ROOT / "memd" / "ui" / "static"
    doc = (ROOT / "docs" / "ui.md").read_text()
    for name, digest in VENDORED.items():
        assert hashlib.sha256((static / name).read_bytes()).hexdigest() == digest
        assert digest in doc
    assert (static / "uPlot.LICENSE").read_text().startswith("The MIT License")


@pytest.mark.slow
def test_the_wheel_ships_the_charts_static_files(tmp_path: Path) -> None:
    """setuptools builds the checkout's package tree as a wheel holds it (``build_py`` lays out what
    ``bdist_wheel`` zips, package data by pyproject's ``[tool.setuptools.package-data]``), offline: every
    static file and the charts' template are in it, byte for byte."""
    import shutil

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (src / name).write_bytes((ROOT / name).read_bytes())
    shutil.copytree(ROOT / "memd", src / "memd", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "lib"
    proc = subprocess.run([sys.executable, "-c", "import sys, setuptools; "
                           "setuptools.setup(script_args=['-q', 'build_py', '--build-lib', sys.argv[1]])", str(out)],
                          cwd=src, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    static = ROOT / "memd" / "ui" / "static"
    assert {"uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE", "charts.js", "charts.css"} <= {
        f.name for f in static.iterdir()}
    for f in static.iterdir():
        built = out / "memd" / "ui" / "static" / f.name
        assert built.is_file() and built.read_bytes() == f.read_bytes(), f.name
    assert (out / "memd" / "ui" / "templates" / "charts.html").is_file()


# ---- in a real headless browser ---------------------------------------------------------------------

RECORD_CSP = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__csp.push(e.violatedDirective + ' ' + (e.blockedURI || '') + ' ' + (e.sample || ''));
});
"""


@pytest.fixture(scope="module")
def chart_browser() -> Iterator[Any]:
    """Chromium as tests/test_ui.py drives it, with its console log kept and every CSP violation
    recorded from the first byte of each page (a listener added before any page script runs)."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    chromium, driver = _first(CHROMIUM), _first(DRIVER)
    if chromium is None or driver is None:
        pytest.skip("no Chromium with its driver (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--no-first-run", "--disable-extensions", "--window-size=1280,1600"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=opts, service=Service(executable_path=driver))
    d.set_page_load_timeout(60)
    d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_CSP})
    try:
        yield d
    finally:
        d.quit()


def _console(browser: Any) -> list[str]:
    try:
        return [e["message"] for e in browser.get_log("browser")]
    except Exception:  # a driver without the log: the listener's record stands alone
        return []


def _go(browser: Any, url: str, path: str = "/") -> None:
    _console(browser)  # what an earlier test left in the log (reading it empties it)
    _open(browser, url, path)


def _no_csp_violation(browser: Any) -> None:
    assert browser.execute_script("return window.__csp") == []
    bad = [m for m in _console(browser) if "Content Security Policy" in m or "Refused to" in m]
    assert bad == []


def _painted(browser: Any, chart_id: str) -> int:
    """Pixels of the chart's canvas that are not blank."""
    return int(browser.execute_script("""
        const c = document.querySelector('#' + arguments[0] + ' canvas');
        if (!c || !c.width || !c.height) return 0;
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++;
        return n;""", chart_id))


def _wait_drawn(browser: Any, chart_id: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 20).until(
        lambda b: "drawn" in (b.find_element(By.ID, chart_id).get_attribute("class") or ""))
    return browser.find_element(By.ID, chart_id)


TZ = "America/New_York"


def _runs(now: float) -> list[tuple[str, float, str, float, int]]:
    """(job, started, outcome, cost, tokens): nights of a month, in New York time."""
    day = 86400
    out = []
    for k in (1, 2, 4, 9, 20):  # the k-th night back: its catch-up at 23:00 and its dream at 03:00
        out.append(("catchup", now - k * day - 5 * 3600, "changed", 0.01 * k, 1000 * k))
        out.append(("dream", now - k * day + 3600, "changed", 0.1 * k, 10_000 * k))
    out.append(("catchup", now - 3 * day, "skipped", 0.0, 0))  # a night with no model run
    out.append(("dream", now - 45 * day, "changed", 5.0, 1))  # outside the 30 nights
    return out


@pytest.mark.slow
def test_the_project_page_draws_cost_per_night_and_index_size(claude_home: Path, home: Path, serve: Any,
                                                              chart_browser: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from selenium.webdriver.common.by import By

    from memd import history, layout
    from memd.ui import charts

    tz = ZoneInfo(TZ)  # the viewer's zone (tzlocal caches the first zone it finds: set it, not TZ)
    monkeypatch.setattr(charts, "local_zone", lambda: tz)
    mem = claude_home / "projects" / "-home-u-app" / "memory"
    write_tree(mem, {"MEMORY.md": "# Memory\n- [A](a.md) — a\n", "a.md": topic("a", "a", "project")})
    state = layout.state_dir("")
    # now: 02:00 New York, so each night's dream (03:00) lies an hour after a whole number of days back
    now_local = datetime.now(tz).replace(hour=2, minute=0, second=0, microsecond=0)
    now = now_local.timestamp() if now_local.timestamp() <= time.time() else now_local.timestamp() - 86400
    now = min(now, time.time())
    with StateStore.open(state) as st:
        for job, started, outcome, cost, tokens in _runs(now):
            rid = st.start_run(job, "-home-u-app", started)
            st.finish_run(rid, outcome=outcome, ended=started + 30, cost_usd=cost, tokens_in=tokens,
                          summary=f"{job} {outcome}")
        for i in range(3):  # the daemon's samples
            st.record_index_sample("-home-u-app", now - (3 - i) * 3600, lines=150 + 40 * i, chars=5000 * (i + 1),
                                   max_lines=200, max_chars=25_000)
    before = history.snapshot_before(state, "-home-u-app", mem, "dream", run="dream-a")
    grown = "# Memory\n" + "".join(f"- [N{i}](n{i}.md) — note {i}\n" for i in range(60))
    (mem / "MEMORY.md").write_text(grown)
    history.record_after(state, "-home-u-app", before, {"MEMORY.md": grown.encode()}, "dream", "dream-a", "dream")

    # the run log read back independently: each run's night by the rule docs/ui.md states
    with StateStore.open(state) as st:
        logged = st.runs(project="-home-u-app", limit=1000)
    want: dict[str, list[float]] = {}
    first_night = (datetime.fromtimestamp(time.time(), tz).replace(tzinfo=None) - timedelta(hours=12)).date()
    for r in logged:
        local = datetime.fromtimestamp(r.started, tz).replace(tzinfo=None)
        night = (local - timedelta(hours=12)).date()
        if (first_night - night).days < 30 and r.tokens_total:
            want.setdefault(night.isoformat(), []).append(r.cost_usd)

    url = serve(claude_home)
    _go(chart_browser, url, "/project/-home-u-app")
    cost = _wait_drawn(chart_browser, "cost-chart")
    size = _wait_drawn(chart_browser, "size-chart")
    _no_csp_violation(chart_browser)
    assert _painted(chart_browser, "cost-chart") > 500 and _painted(chart_browser, "size-chart") > 500
    assert cost.get_attribute("data-points") == "30"  # one per night
    assert cost.get_attribute("data-values") == str(len(want))  # a bar per night a model ran
    assert size.get_attribute("data-points") == "5"  # 3 samples + the run's before and after
    rows = chart_browser.find_elements(By.CSS_SELECTOR, "#cost-table tr.night")
    shown = {r.get_attribute("data-night"): r for r in rows}
    assert set(k for k, r in shown.items() if r.get_attribute("data-cost")) == set(want)
    for night, costs in want.items():
        assert float(shown[night].get_attribute("data-cost")) == pytest.approx(sum(costs), abs=1e-6)
        assert f"${sum(costs):.4f}" in shown[night].text
    skipped = [r for k, r in shown.items() if not r.get_attribute("data-cost")]
    assert len(skipped) == 1 and skipped[0].text.split()[-1] == "-"  # "-", never "$0.0000"
    # the chart's own figures are the table's
    data = json.loads(chart_browser.find_element(By.ID, "chart-data").get_attribute("textContent"))
    assert {lbl: c for lbl, c in zip(data["cost"]["labels"], data["cost"]["cost"], strict=True)
            if c is not None} == pytest.approx({k: sum(v) for k, v in want.items()})
    assert data["size"]["lines"][:3] == [75.0, 95.0, 115.0] and max(data["size"]["chars"]) == 60.0
    # the first screen: last night's cost and the link to the chart
    _go(chart_browser, url)
    cell = chart_browser.find_element(By.CSS_SELECTOR, "tr.project[data-project='-home-u-app'] td.last-night")
    yesterday = (datetime.fromtimestamp(time.time(), tz).date() - timedelta(days=1)).isoformat()
    assert cell.get_attribute("data-night") == yesterday
    if yesterday in want:
        assert cell.text.startswith(f"${sum(want[yesterday]):.4f}")
    else:
        assert cell.text.startswith("-")
    assert cell.find_element(By.TAG_NAME, "a").get_attribute("href").endswith("/project/-home-u-app#cost")
    # its sparkline: the last 14 nights, a bar for each a model ran
    spark = cell.find_element(By.CSS_SELECTOR, ".spark")
    assert "drawn" in spark.get_attribute("class") and spark.get_attribute("data-points") == "14"
    recent = {(first_night - timedelta(days=i)).isoformat() for i in range(14)}
    assert spark.get_attribute("data-values") == str(len(recent & set(want)))
    assert int(chart_browser.execute_script("""
        const c = document.querySelector('td.last-night .spark canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++; return n;""")) > 50
    _no_csp_violation(chart_browser)


@pytest.mark.slow
def test_the_csp_recorder_sees_a_violation(claude_home: Path, home: Path, serve: Any, chart_browser: Any) -> None:
    """The check above can fail: an inline style attribute put on the page is refused and recorded."""
    write_tree(claude_home / "projects" / "-home-u-app" / "memory", {"MEMORY.md": "# Memory\n"})
    _go(chart_browser, serve(claude_home), "/project/-home-u-app")
    chart_browser.execute_script("document.body.insertAdjacentHTML('beforeend', '<p style=\"color: red\">x</p>')")
    time.sleep(0.3)
    assert chart_browser.execute_script("return window.__csp.length") >= 1


HOSTILE_NAME = "-home-u-<img src=x onerror=window.__pwned=1>'\"<script>window.__pwned=2<\\script>"


@pytest.mark.slow
def test_a_hostile_project_name_in_the_charts_data_runs_nothing(claude_home: Path, home: Path, serve: Any,
                                                                chart_browser: Any) -> None:
    from urllib.parse import quote

    from selenium.webdriver.common.by import By

    from memd import layout

    name = HOSTILE_NAME
    mem = claude_home / "projects" / name / "memory"
    write_tree(mem, {"MEMORY.md": "# Memory\n- [</script><script>window.__pwned=3</script>](a.md) — x\n",
                     "a.md": topic("</script><b>x", "<img src=y onerror=window.__pwned=4>", "project")})
    state = layout.state_dir("")
    now = time.time()
    with StateStore.open(state) as st:
        rid = st.start_run("dream", name, now - 3600)
        st.finish_run(rid, outcome="changed", ended=now - 3500, cost_usd=0.5, tokens_in=100,
                      summary="</script><script>window.__pwned=5</script>")
        st.record_index_sample(name, now - 60, lines=3, chars=80, max_lines=200, max_chars=25_000)
    url = serve(claude_home)
    _go(chart_browser, url, "/project/" + quote(name, safe=""))
    _wait_drawn(chart_browser, "cost-chart")
    _wait_drawn(chart_browser, "size-chart")
    assert chart_browser.execute_script("return window.__pwned") is None
    scripts = chart_browser.execute_script(
        "return Array.from(document.querySelectorAll('script')).map(s => s.id || s.getAttribute('src'))")
    assert scripts == ["chart-data", "/static/uPlot.iife.min.js", "/static/charts.js"]
    assert chart_browser.execute_script("return document.querySelectorAll('img, [onerror]').length") == 0
    data = json.loads(chart_browser.find_element(By.ID, "chart-data").get_attribute("textContent"))
    assert data["project"] == name  # the name, whole, as data
    title = chart_browser.find_element(By.CSS_SELECTOR, "#size-chart .u-title").text
    assert name in title  # drawn as text
    _no_csp_violation(chart_browser)
    # the first screen, its sparkline fed from the same run log
    _go(chart_browser, url)
    row = chart_browser.find_element(By.CSS_SELECTOR, "tr.project")
    assert row.get_attribute("data-project") == name
    assert "drawn" in row.find_element(By.CSS_SELECTOR, ".spark").get_attribute("class")
    assert chart_browser.execute_script("return window.__pwned") is None
    assert chart_browser.execute_script("return document.querySelectorAll('img, [onerror]').length") == 0
    _no_csp_violation(chart_browser)


def test_hostile_data_cannot_close_the_json_block() -> None:
    """The template's JSON block holds a name with </script> and quotes, escaped by tojson."""
    from memd.core.series import SizePoint
    from memd.ui.charts import ChartsView
    from memd.ui.server import Viewer

    view = ChartsView(HOSTILE_NAME, S.nights([], through=date(2026, 12, 1), count=2, tz=UTC),
                      [SizePoint(1.0, 1, 2, 200, 25_000, "daemon")])
    html = Viewer({}).env.get_template("charts.html").render(charts=view).split('id="chart-data">', 1)[1]
    block = html.split("</script>", 1)[0]
    assert "<" not in block and "'" not in block
    assert json.loads(block)["project"] == HOSTILE_NAME


def test_the_pages_import_nothing_of_the_charts_outside_memd_ui() -> None:
    code = ("import sys, memd.inspect, memd.state, memd.history, memd.daemon.budget; "
            "print(sorted(m for m in sys.modules if m.startswith(('memd.ui', 'jinja2', 'memd.core.series'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env=dict(os.environ)).stdout
    assert out.strip() == "[]"


# ---- the samples against a model (hypothesis, stateful) ---------------------------------------------

class SamplesMachine(RuleBasedStateMachine):
    """The store's index samples against a model of their rules: keep a sample unless the project's
    newest is under an hour old with the same figures; prune what is older than the run log's
    retention, each project's newest kept (in batches of two, to cross batch edges)."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.dir = Path(tempfile.mkdtemp(prefix="memd-samples-"))
        self.st = StateStore.open(self.dir)
        self.now = 1_000_000.0
        self.model: dict[str, list[tuple[float, tuple[int, int]]]] = {}

    @rule(project=st_.sampled_from(["a", "b", "<c>"]), step=st_.sampled_from([1.0, 600.0, 3599.0, 3600.0, 86_400.0,
                                                                             90 * 86_400.0]),
          lines=st_.integers(0, 3), chars=st_.integers(0, 2))
    def record(self, project: str, step: float, lines: int, chars: int) -> None:
        self.now += step
        kept = self.st.record_index_sample(project, self.now, lines=lines, chars=chars, max_lines=200,
                                           max_chars=25_000)
        mine = self.model.setdefault(project, [])
        want = not (mine and self.now - mine[-1][0] < 3600 and mine[-1][1] == (lines, chars))
        assert kept == want
        if want:
            mine.append((self.now, (lines, chars)))

    @rule(ahead=st_.sampled_from([0.0, 200 * 86_400.0, 400 * 86_400.0, 800 * 86_400.0]))
    def prune(self, ahead: float) -> None:
        from memd.state import SAMPLES_KEEP_S

        cutoff = self.now + ahead - SAMPLES_KEEP_S
        n = self.st.prune_index_samples(self.now + ahead, batch=2)
        gone = 0
        for project, mine in self.model.items():
            keep = [s for i, s in enumerate(mine) if s[0] >= cutoff or i == len(mine) - 1]
            gone += len(mine) - len(keep)
            self.model[project] = keep
        assert n == gone

    @invariant()
    def agrees(self) -> None:
        for project, mine in self.model.items():
            assert [(s.at, (s.lines, s.chars)) for s in self.st.index_samples(project)] == mine

    def teardown(self) -> None:
        import shutil

        self.st.close()
        shutil.rmtree(self.dir, ignore_errors=True)


TestSamplesMachine = SamplesMachine.TestCase
TestSamplesMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None, database=None)



def _page(url: str, path: str) -> str:
    """A page's HTML through plain HTTP with this start's token as the cookie (no JavaScript runs)."""
    import http.client
    from urllib.parse import urlsplit

    from memd.ui.server import COOKIE

    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=30)
    conn.request("GET", path, headers={"Host": u.netloc, "Cookie": f"{COOKIE}_{u.port}={url.split('token=')[1]}"})
    resp = conn.getresponse()
    body = resp.read().decode()
    conn.close()
    assert resp.status == 200
    return body


def test_the_first_screen_says_dash_where_no_model_ran(claude_home: Path, home: Path, serve: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Without JavaScript: last night's cost and the week's, "-" (never "$0.0000") where no run called a
    model; the project page's tables hold the figures."""
    import re

    from memd import layout
    from memd.ui import charts

    tz = ZoneInfo("Europe/Berlin")
    monkeypatch.setattr(charts, "local_zone", lambda: tz)
    for name in ("-home-u-idle", "-home-u-busy"):
        write_tree(claude_home / "projects" / name / "memory", {"MEMORY.md": "# Memory\n"})
    now = time.time()
    dream_at = S.night_start(S.last_night(now, tz), tz) + 15 * 3600  # last night's 03:00
    with StateStore.open(layout.state_dir("")) as st:
        rid = st.start_run("catchup", "-home-u-idle", now - 3600)
        st.finish_run(rid, outcome="skipped", ended=now - 3590)  # no model call
        if dream_at <= now:
            rid = st.start_run("dream", "-home-u-busy", dream_at)
            st.finish_run(rid, outcome="changed", ended=dream_at + 60, cost_usd=0.0421, tokens_in=5000)
    url = serve(claude_home)
    html = _page(url, "/")

    def cell(project: str, cls: str) -> str:
        row = html.split(f'data-project="{project}"', 1)[1].split("</tr>", 1)[0]
        got = re.search(f'<td class="{cls}"[^>]*>(.*?)</td>', row, re.S)
        assert got is not None
        return re.sub(r"<[^>]+>", " ", got.group(1)).split()[0]

    assert cell("-home-u-idle", "week-cost") == "-" and cell("-home-u-idle", "last-night") == "-"
    if dream_at <= now:  # (before 03:00 local, last night's dream is still to come)
        assert cell("-home-u-busy", "week-cost") == "$0.0421" and cell("-home-u-busy", "last-night") == "$0.0421"
    assert "$0.0000" not in html
    page = _page(url, "/project/-home-u-idle")
    assert 'data-model-runs="0"' in page and "no run called a model" in page and "$0.0000" not in page


@pytest.mark.slow
def test_a_project_with_one_run_gets_a_sane_size_chart_with_its_limit(claude_home: Path, home: Path, serve: Any,
                                                                      chart_browser: Any) -> None:
    """Hole: with one run (its before and after snapshots, seconds apart) uPlot's own time range spanned
    2026 to 2029, and the limit was a series of one point: no 100 % line at all. Now the x range is the
    points' span padded (at least an hour each side) and the limit is drawn across the whole plot."""
    from memd import history, layout

    mem = claude_home / "projects" / "-home-u-one" / "memory"
    write_tree(mem, {"MEMORY.md": "# Memory\n- [A](a.md) — a\n", "a.md": topic("a", "a", "project")})
    state = layout.state_dir("")
    before = history.snapshot_before(state, "-home-u-one", mem, "dream", run="dream-one")
    grown = "# Memory\n" + "".join(f"- [N{i}](n{i}.md) — note {i}\n" for i in range(150))
    (mem / "MEMORY.md").write_text(grown)
    history.record_after(state, "-home-u-one", before, {"MEMORY.md": grown.encode()}, "dream", "dream-one", "dream")
    url = serve(claude_home)
    _go(chart_browser, url, "/project/-home-u-one")
    size = _wait_drawn(chart_browser, "size-chart")
    _no_csp_violation(chart_browser)
    xs = json.loads(chart_browser.find_element("id", "chart-data").get_attribute("textContent"))["size"]["x"]
    assert 1 <= len(xs) <= 2 and max(xs) - min(xs) < 60
    lo, hi = float(size.get_attribute("data-x-min")), float(size.get_attribute("data-x-max"))
    assert lo < min(xs) and hi > max(xs)  # every point inside
    assert hi - lo <= 3 * 86400  # hours, not years
    y = int(float(size.get_attribute("data-limit-y")))
    # the 100 % line: red pixels across most of the plot's width on its row
    red, width = chart_browser.execute_script("""
        const c = document.querySelector('#size-chart canvas');
        const d = c.getContext('2d').getImageData(0, arguments[0], c.width, 1).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] > 150 && d[i + 1] < 80 && d[i + 2] < 80 && d[i + 3] > 100) n++;
        return [n, c.width];""", y)
    assert red > width * 0.4, (red, width)  # dashed (6 on, 4 off) over the plot's width
