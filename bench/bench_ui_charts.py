"""Benchmark the viewer's charts (issue 26) and the index-size sample the daemon now keeps.

Both in a regular install built from this checkout (``bench/regular.py``): this file runs again in that
venv with ``--child`` (memd imported from its site-packages), on a generated project:

1. The charts' data for a project page (``memd.ui.charts.charts_view``: 30 nights of the run log, every
   history snapshot's MEMORY.md measured, the daemon's samples) against the rest of the page's data
   (``memd.ui.views.project_page``: the loaded index, the topic files, the check, the runs' diffs), the
   baseline, in the same run. The project: ``--runs`` applied runs in its history (each a before and an
   after snapshot of a growing MEMORY.md and --topics topic files), 30 nights of a catch-up every 2 hours
   and a dream, a month of hourly samples.
2. The daemon's measure after a memory write (``BudgetMonitor.check``) keeping its sample (every write
   changes the index: a sample each time, the worst case) against the same check with the sample not
   kept (the check as it was), interleaved.

    .venv/bin/python bench/bench_ui_charts.py [--runs 200] [--topics 40] [--repeat 15] [--venv DIR] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HEAD = "## memd ui charts"


def _child(root: Path, runs: int, topics: int, repeat: int) -> dict[str, Any]:
    os.environ["HOME"] = str(root / "home")
    os.environ["XDG_STATE_HOME"] = str(root / "home" / ".local" / "state")
    os.environ["XDG_CONFIG_HOME"] = str(root / "home" / ".config")
    import memd
    from memd import history, layout
    from memd.config import Config
    from memd.daemon.budget import BudgetMonitor
    from memd.state import StateStore
    from memd.ui import charts, views

    claude = root / "home" / ".claude"
    mem = claude / "projects" / "-home-u-bench" / "memory"
    mem.mkdir(parents=True)
    for i in range(topics):
        (mem / f"t{i}.md").write_text(f"---\nname: t{i}\ndescription: topic {i}\ntype: project\n---\n\nBody {i}.\n")

    def index(n: int) -> str:
        return "# Memory\n" + "".join(f"- [T{i % topics}](t{i % topics}.md) — entry {i}\n" for i in range(n))

    (mem / "MEMORY.md").write_text(index(20))
    (project,) = layout.list_projects(claude)
    state = layout.state_dir("")
    config = Config()
    for r in range(runs):
        run = f"dream-{r}"
        before = history.snapshot_before(state, project.name, mem, "dream", run=run)
        text = index(20 + r % 230).encode()
        (mem / "MEMORY.md").write_bytes(text)
        history.record_after(state, project.name, before, {"MEMORY.md": text}, "dream", run, "dream")
    now = time.time()
    with StateStore.open(state) as st:
        for k in range(30 * 12):
            rid = st.start_run("dream" if k % 12 == 0 else "catchup", project.name, now - k * 7200)
            st.finish_run(rid, outcome="changed", ended=now - k * 7200 + 20, cost_usd=0.01, tokens_in=1000)
        for h in range(30 * 24):
            st.record_index_sample(project.name, now - h * 3600, lines=20 + h % 200, chars=900 + h,
                                   max_lines=200, max_chars=25_000)

    page_s: list[float] = []
    charts_s: list[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        views.project_page(project, config, state)
        t1 = time.perf_counter()
        view = charts.charts_view(project, config, state)
        t2 = time.perf_counter()
        page_s.append(t1 - t0)
        charts_s.append(t2 - t1)
    points = len(view.sizes)

    class Null:
        def info(self, *a: Any, **k: Any) -> None: ...
        def warning(self, *a: Any, **k: Any) -> None: ...

    class NoSample:  # the state store as the check used it before: no sample kept
        def __init__(self, st: Any) -> None:
            self.st = st

        def __getattr__(self, name: str) -> Any:
            return getattr(self.st, name)

        def record_index_sample(self, *a: Any, **k: Any) -> bool:
            return False

    with_s: list[float] = []
    without_s: list[float] = []
    with StateStore.open(state) as st:
        for i in range(repeat * 20):
            (mem / "MEMORY.md").write_text(index(30 + i % 150))  # the figures change: a sample each time
            for kept, out in ((True, with_s), (False, without_s)):
                mon = BudgetMonitor(config, st if kept else NoSample(st), Null())
                t0 = time.perf_counter()
                mon.check(project)
                out.append(time.perf_counter() - t0)
    return {"version": memd.__version__, "runs": runs, "topics": topics, "points": points,
            "page_ms": statistics.median(page_s) * 1000, "charts_ms": statistics.median(charts_s) * 1000,
            "check_ms": statistics.median(with_s) * 1000, "check_base_ms": statistics.median(without_s) * 1000,
            "repeat": repeat}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--topics", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--venv", type=Path, help="a regular venv to reuse (memd is reinstalled into it)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(_child(a.child, a.runs, a.topics, a.repeat)))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_check import write_doc
    from regular import build

    with tempfile.TemporaryDirectory() as tmp:
        bindir = build(a.venv or Path(tmp) / "regular-venv")
        out = subprocess.run([str(bindir / "python"), __file__, "--child", str(Path(tmp) / "data"), "--runs",
                              str(a.runs), "--topics", str(a.topics), "--repeat", str(a.repeat)],
                             cwd=tmp, capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    page, chart, check, base = r["page_ms"], r["charts_ms"], r["check_ms"], r["check_base_ms"]
    print(f"project page data {page:.1f} ms, charts' data {chart:.1f} ms ({chart / page:.2f}x); "
          f"daemon check {check:.2f} ms with the sample, {base:.2f} ms without ({check / base:.2f}x)")
    load = os.getloadavg()[0]
    section = (
        f"{HEAD}\n\n"
        f"Command: `.venv/bin/python bench/bench_ui_charts.py --runs {a.runs} --topics {a.topics} --repeat "
        f"{a.repeat}` (a regular install, `bench/regular.py`; 2-core shared machine, load average {load:.1f}; "
        f"medians). One project: {a.runs} applied runs in its history (each a before and an after snapshot of "
        f"a MEMORY.md of 20 to 250 entries, {a.topics} topic files), 30 nights of the run log (a catch-up every "
        "2 hours, a dream a night), 720 hourly samples.\n\n"
        "| | time | ratio to its baseline |\n|---|---|---|\n"
        f"| the project page's data without the charts (`views.project_page`), baseline | {page:.1f} ms | 1.00x |\n"
        f"| the charts' data (`charts.charts_view`: 30 nights, {r['points']:,} size points) | {chart:.1f} ms | "
        f"**{chart / page:.2f}x** |\n"
        f"| the daemon's measure after a memory write, no sample kept (as before), baseline | {base:.2f} ms | "
        "1.00x |\n"
        f"| the same, keeping its index-size sample (the figures changed: a row each time) | {check:.2f} ms | "
        f"**{check / base:.2f}x** |\n")
    if not a.no_write:
        write_doc(section, HEAD)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
