"""Daemon benchmarks: watch-to-warning latency and idle cost, on the real `memd run` process.

    .venv/bin/python bench/bench_daemon.py [--minutes M] [--projects N] [--writes W]

1. Latency: a MEMORY.md write that crosses into "over" -> the `budget.warning` line in the JSON log
   (the event's own timestamp minus the moment before the write). Alternating over/ok writes make
   every write a crossing. Baseline: the debounce quiet period (the floor by design); the target is
   quiet period + 100 ms.
2. Idle: N projects (memory folder, index, topic files, one transcript each); after start-up and the
   first reconcile, CPU seconds (utime+stime from /proc/<pid>/stat) over M minutes, scaled to 10
   minutes; peak RSS (VmHWM); inotify watches (/proc/<pid>/fdinfo). Baseline: a bare Python process
   that imports the same modules and sleeps, measured the same way in the same run.
3. Memory over model runs (``--dreams N``, N >= 100 for the issue's figure): 1,000 idle projects plus
   10 that dream; N dreams triggered one after the other (``memd trigger dream --project``), each a
   two-call model run through the loopback stub of the Messages API (tests/plugins/stub_api.py: a
   memory-tool edit, then "done"), applied and snapshotted. The daemon's RSS (VmRSS) after each dream:
   idle before the first, after warm-up (10 dreams), at the end, its peak, and the least-squares slope
   over dreams 11..N in MB per dream. ``--mode child`` (the default: each job in a child process) and
   ``--mode inline`` (the jobs on the daemon's own thread: the behaviour before) in one run with
   ``--mode both``.

    .venv/bin/python bench/bench_daemon.py --dreams 120 --mode both
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
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def env_for(base: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "CLAUDE_", "XDG_", "NOTIFY_SOCKET", "WATCHDOG_", "JOURNAL_"))}
    home = base / "home"
    env.update(HOME=str(home), XDG_STATE_HOME=str(home / ".local/state"), XDG_CONFIG_HOME=str(home / ".config"),
               CLAUDE_CONFIG_DIR=str(base / "claude"), PYTHONPATH=str(ROOT))
    return env


def start(base: Path, config: str) -> tuple[subprocess.Popen[bytes], Path]:
    env = env_for(base)
    cfg = Path(env["XDG_CONFIG_HOME"]) / "memd" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(config)
    (base / "claude" / "projects").mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "memd", "run", "--console", "no"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, Path(env["XDG_STATE_HOME"]) / "memd" / "memd.log"


def events(log: Path, name: str) -> list[dict[str, object]]:
    try:
        lines = log.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == name:
            out.append(ev)
    return out


def wait_event(log: Path, name: str, count: int, timeout: float = 120.0, **match: object) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        evs = [e for e in events(log, name) if all(e.get(k) == v for k, v in match.items())]
        if len(evs) >= count:
            return evs[count - 1]
        time.sleep(0.005)
    raise SystemExit(f"timed out waiting for {name} #{count}")


def index(lines: int) -> str:
    return "".join(f"- [entry {i}](entry_{i}.md) — hook {i}\n" for i in range(lines))


def ts(ev: dict[str, object]) -> float:
    return datetime.fromisoformat(str(ev["timestamp"]).replace("Z", "+00:00")).timestamp()


def bench_latency(writes: int, quiet: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        base = Path(d)
        proc, log = start(base, f"[daemon]\ndebounce_quiet_s = {quiet}\ndebounce_max_s = 3.0\n")
        try:
            wait_event(log, "daemon.ready", 1)
            mem = base / "claude" / "projects" / "-bench-p" / "memory"
            mem.mkdir(parents=True)
            (mem / "MEMORY.md").write_text(index(5))
            time.sleep(1.0)
            lat = []
            for i in range(writes):
                t0 = time.time()
                (mem / "MEMORY.md").write_text(index(230))
                ev = wait_event(log, "budget.warning", i + 1, project="-bench-p")
                lat.append(ts(ev) - t0)
                (mem / "MEMORY.md").write_text(index(5))
                wait_event(log, "budget.cleared", i + 1, project="-bench-p")
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(60)
    lat.sort()
    p95 = lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]
    return {"median_s": statistics.median(lat), "p95_s": p95, "min_s": lat[0], "max_s": lat[-1]}


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def proc_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def inotify_watches(pid: int) -> int:
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            n += sum(1 for x in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines()
                     if x.startswith("inotify wd:"))
        except OSError:
            continue
    return n


def make_projects(root: Path, n: int, *, transcripts: bool = True) -> None:
    for i in range(n):
        d = root / f"-home-dev-project-{i:04d}"
        mem = d / "memory"
        mem.mkdir(parents=True)
        (mem / "MEMORY.md").write_text(index(20))
        for j in range(5):
            (mem / f"entry_{j}.md").write_text(f"---\nname: e{j}\ndescription: d\ntype: project\n---\nbody {j}\n")
        if transcripts:
            (d / f"0b5c3f4e-1111-2222-3333-{i:012d}.jsonl").write_text(
                json.dumps({"type": "user", "cwd": f"/home/dev/project-{i}", "sessionId": "s",
                            "timestamp": "2026-11-01T00:00:00Z", "message": {"role": "user", "content": "hi"}}) + "\n")


def bench_idle(minutes: float, projects: int, reconcile_s: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        base = Path(d)
        make_projects(base / "claude" / "projects", projects)
        # Idle means no job: the catch-up cron is moved out of the window (a catch-up over 1,000
        # projects is work, measured by the jobs' own benchmarks); dream and check-in minutes are
        # picked in their night and morning windows.
        proc, log = start(base, f"[daemon]\nreconcile_interval_s = {reconcile_s}\n"
                                '[schedule]\ncatchup_cron = "0 0 1 1 *"\n')
        baseline = subprocess.Popen(
            [sys.executable, "-c", "import memd.daemon.server, memd.state, watchdog.observers, structlog, "
             "apscheduler.schedulers.background, time; time.sleep(1e6)"], env=env_for(base))
        try:
            wait_event(log, "daemon.ready", 1, timeout=600)
            time.sleep(20)  # first scans of the transcripts and first measures settle
            c0, b0 = proc_cpu(proc.pid), proc_cpu(baseline.pid)
            t0 = time.monotonic()
            time.sleep(minutes * 60)
            wall = time.monotonic() - t0
            cpu, bcpu = proc_cpu(proc.pid) - c0, proc_cpu(baseline.pid) - b0
            jobs = len(events(log, "job.begin"))
            res = {"minutes": wall / 60, "jobs": jobs, "cpu_s": cpu, "cpu_s_per_10min": cpu * 600 / wall,
                   "baseline_cpu_s_per_10min": bcpu * 600 / wall, "rss_peak_mb": proc_hwm_mb(proc.pid),
                   "baseline_rss_peak_mb": proc_hwm_mb(baseline.pid), "inotify_watches": inotify_watches(proc.pid),
                   "startup_cpu_s": c0}
        finally:
            proc.terminate()
            baseline.kill()
            proc.wait(60)
            baseline.wait(10)
    return res


def proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


class LogTail:
    """The daemon's JSON log read incrementally (a long run's log is re-read from where it was)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.seen: list[dict[str, object]] = []

    def poll(self) -> list[dict[str, object]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        new = []
        for line in data[:end].splitlines():
            try:
                new.append(json.loads(line))
            except ValueError:
                continue
        self.seen.extend(new)
        return new

    def count(self, name: str, **match: object) -> int:
        self.poll()
        return sum(1 for e in self.seen if e.get("event") == name and all(e.get(k) == v for k, v in match.items()))

    def wait(self, name: str, count: int, timeout: float = 300.0, **match: object) -> None:
        deadline = time.monotonic() + timeout
        while self.count(name, **match) < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {name} #{count} {match}")
            time.sleep(0.02)


def bench_dreams(dreams: int, projects: int, mode: str) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from memd.daemon import control
    from tests.plugins.stub_api import StubAPI

    with tempfile.TemporaryDirectory() as d, StubAPI() as stub:
        base = Path(d)
        root = base / "claude" / "projects"
        make_projects(root, projects)
        names = [f"-bench-dream-{k}" for k in range(10)]
        for name in names:
            mem = root / name / "memory"
            mem.mkdir(parents=True)
            (mem / "note.md").write_text("---\nname: note\ndescription: a counter\ntype: project\n---\nv0\n")
            (mem / "MEMORY.md").write_text("- [Note](note.md) — a counter\n")
        config = (f"[daemon]\nisolate_jobs = {'true' if mode == 'child' else 'false'}\n"
                  '[schedule]\ncatchup_cron = "0 0 1 1 *"\n[dream]\nmax_searches = 0\n')
        env = env_for(base)
        env.update(ANTHROPIC_API_KEY="bench-key", ANTHROPIC_BASE_URL=stub.base_url)
        cfg = Path(env["XDG_CONFIG_HOME"]) / "memd" / "config.toml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(config)
        state_dir = Path(env["XDG_STATE_HOME"]) / "memd"
        proc = subprocess.Popen([sys.executable, "-m", "memd", "run", "--console", "no"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log = LogTail(state_dir / "memd.log")
        rss: list[float] = []
        outcomes: dict[str, int] = {}
        try:
            log.wait("daemon.ready", 1, timeout=600)
            time.sleep(10)  # first scans and measures settle
            idle = proc_rss_mb(proc.pid)
            counter = dict.fromkeys(names, 0)
            for i in range(dreams):
                name = names[i % len(names)]
                k = counter[name]
                stub.script(stub.message(stub.memory("str_replace", path="/memories/note.md", old_str=f"v{k}\n",
                                                     new_str=f"v{k + 1}\n")),
                            stub.message(stub.text(f"Counted to {k + 1}.")))
                counter[name] = k + 1
                control.send(state_dir, "dream", [name])
                log.wait("job.end", i + 1, job="dream")
                rss.append(proc_rss_mb(proc.pid))
            for e in log.seen:
                if e.get("event") == "job.finish" and e.get("job") == "dream":
                    outcomes[str(e.get("outcome"))] = outcomes.get(str(e.get("outcome")), 0) + 1
            hwm = proc_hwm_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(60)
    warm = min(10, len(rss))
    xs = [float(i + 1) for i in range(warm, len(rss))]
    return {"mode": mode, "dreams": dreams, "idle_mb": idle, "first_mb": rss[0], "warm_mb": rss[warm - 1],
            "end_mb": rss[-1], "max_mb": max(rss), "hwm_mb": hwm,
            "slope_mb_per_dream": slope(xs, rss[warm:]) if len(xs) > 1 else 0.0, "outcomes": outcomes,
            "model_calls": len(stub.requests)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0, help="idle window (the issue asks for 10)")
    ap.add_argument("--projects", type=int, default=1000)
    ap.add_argument("--writes", type=int, default=20)
    ap.add_argument("--quiet", type=float, default=0.5, help="debounce quiet period (the default)")
    ap.add_argument("--reconcile", type=float, default=60.0,
                    help="reconcile interval during the idle run (default 60 s: several rescans in the window)")
    ap.add_argument("--skip-idle", action="store_true")
    ap.add_argument("--dreams", type=int, default=0,
                    help="measure the daemon's memory over this many scripted dreams (and nothing else)")
    ap.add_argument("--mode", choices=("child", "inline", "both"), default="both",
                    help="with --dreams: jobs in a child process, on the daemon's thread, or both")
    args = ap.parse_args()
    if args.dreams:
        for mode in ("inline", "child") if args.mode == "both" else (args.mode,):
            r = bench_dreams(args.dreams, args.projects, mode)
            print(f"{mode}: {r['dreams']} dreams, {args.projects} idle projects: RSS idle {r['idle_mb']:.1f} MB, "
                  f"after the first dream {r['first_mb']:.1f} MB, after 10 {r['warm_mb']:.1f} MB, "
                  f"at the end {r['end_mb']:.1f} MB (max {r['max_mb']:.1f}, peak VmHWM {r['hwm_mb']:.1f}); "
                  f"slope over dreams 11..{r['dreams']}: {r['slope_mb_per_dream'] * 1000:+.1f} KB per dream; "
                  f"outcomes {r['outcomes']}; model calls {r['model_calls']}", flush=True)
        return 0
    lat = bench_latency(args.writes, args.quiet)
    print(f"latency over {args.writes} writes (debounce quiet {args.quiet:g} s): median {lat['median_s']:.3f} s, "
          f"p95 {lat['p95_s']:.3f} s (min {lat['min_s']:.3f}, max {lat['max_s']:.3f}); "
          f"median / quiet = {lat['median_s'] / args.quiet:.2f}; "
          f"overhead over the quiet period: median {1000 * (lat['median_s'] - args.quiet):.0f} ms, "
          f"p95 {1000 * (lat['p95_s'] - args.quiet):.0f} ms (target <= 100 ms)")
    if not args.skip_idle:
        idle = bench_idle(args.minutes, args.projects, args.reconcile)
        print(f"idle {idle['minutes']:.1f} min with {args.projects} projects: CPU {idle['cpu_s']:.2f} s "
              f"= {idle['cpu_s_per_10min']:.2f} s per 10 min (bare-Python baseline "
              f"{idle['baseline_cpu_s_per_10min']:.2f} s); peak RSS {idle['rss_peak_mb']:.1f} MB (baseline "
              f"{idle['baseline_rss_peak_mb']:.1f} MB, "
              f"ratio {idle['rss_peak_mb'] / idle['baseline_rss_peak_mb']:.2f}); "
              f"inotify watches {idle['inotify_watches']}; start-up CPU {idle['startup_cpu_s']:.2f} s; "
              f"jobs run in the window: {idle['jobs']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
