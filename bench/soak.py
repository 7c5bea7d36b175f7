"""Soak: the daemon for a long while under a synthetic workload, on a compressed clock.

    nice .venv/bin/python bench/soak.py --minutes 32                # the long tier (issue 12: >= 30 min)
    .venv/bin/python bench/soak.py --minutes 0.4 --projects 100     # about what tests/test_soak.py runs

The daemon (``memd.daemon.server.Daemon``, as ``memd run`` builds it, in its own process) runs on a
wall clock ``--scale`` times faster than real time, starting at midnight (UTC) of the next day: nights,
the catch-up's two-hourly slots and the morning check-in come round in minutes. Its monotonic clock
stays real (debounce, heartbeat and reconcile keep their real periods). The workload writes on that
same compressed timeline (record timestamps and file times), so the daemon's gates see consistent
ages. Model jobs run as configured by default (each in a child process) against the loopback stub of
the Messages API (tests/plugins/stub_api.py), which answers "nothing to add" unless a scripted run
asks for a memory file.

The workload, over ``--projects`` idle projects (each a memory folder with an index and topic files,
as bench_daemon.py makes them; their old sessions count as extracted long ago: a first catch-up over
1,000 unread sessions is the catch-up's own benchmark, not a steady state) and 50 active ones:

- sessions appending: 30 projects (``--sessions``) get user/assistant records every few seconds, a new session now
  and then (5 old sessions each at the start, so the first night's dream gates pass);
- memory writes as Claude Code makes them (a topic file and an index line; direct or atomic saves),
  in those projects, always inside the budget;
- budget crossings: 10 projects flip their index between 230 lines ("over") and 5 lines every few
  seconds: each flip must give exactly one ``budget.warning`` / ``budget.cleared``;
- signals: ``memd trigger dream --project`` (SIGUSR1; a scripted memory write) on 10 other
  projects, ``memd trigger catchup`` (SIGUSR2) and SIGHUP (reload);
- the daemon's own schedule: a nightly dream at 01:00, catch-ups every 2 hours, the check-in at 07:00.

Measured and checked (the report's ``checks``): RSS, open files and threads of the daemon and the run
log's row count sampled every 5 s, with their least-squares slope after warm-up; the run log pruned
(``checks.run_log``: at the end it holds no more rows than the finished runs plus the skipped ones of
the last 48 simulated hours before the last prune, and no skipped row older); every budget flip
warned or cleared exactly once and no other warning; no scheduled slot handled twice; every queued job
ran once and no project twice within one job; every trigger and reload answered; one report per
check-in; no run row left ``running``; no crash or loop error; a graceful stop exits 0. ``--json FILE``
writes the report.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for p in (str(ROOT), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from bench_daemon import LogTail, env_for, make_projects, proc_rss_mb, slope  # noqa: E402

from memd.daemon.budget import KIND_INDEX  # noqa: E402

SAMPLE_S = 5.0
SESSION_PROJECTS = 30
BUDGET_PROJECTS = 10
DREAM_PROJECTS = 10
OVER_LINES, OK_LINES = 230, 5
FLIP_EVERY_S = 4.0  # longer than the debounce's quiet period and its longest wait together


# ----------------------------------------------------------------------------- the daemon's side


class ScaledClock:
    """Wall time ``scale`` times faster than real from (real ``r0``, simulated ``s0``); monotonic real."""

    def __init__(self, r0: float, s0: float, scale: float) -> None:
        self.r0, self.s0, self.scale = r0, s0, scale

    def time(self) -> float:
        return self.s0 + (time.time() - self.r0) * self.scale

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.time()).astimezone()


def serve(r0: float, s0: float, scale: float) -> int:
    """``memd run`` on a scaled clock (the same Daemon the command builds, with another clock)."""
    import logging

    from memd import config as config_mod
    from memd import layout
    from memd.daemon.server import Daemon

    cfg = config_mod.load(None)
    daemon = Daemon(config=cfg, load_config=lambda: config_mod.load(None),
                    claude_dir_for=lambda c: layout.claude_dir(None, c.paths.claude_dir),
                    state_dir=layout.state_dir(cfg.paths.state_dir), console=False,
                    clock=ScaledClock(r0, s0, scale))
    code = daemon.run()
    logging.shutdown()
    if daemon.exit_now:
        os._exit(code)
    return code


# ----------------------------------------------------------------------------- the workload


def proc_status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def index(lines: int, stem: str = "entry") -> str:
    return "".join(f"- [{stem} {i}]({stem}_{i}.md) — hook {i}\n" for i in range(lines))


def topic(name: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {name}\ntype: project\n---\n{body}\n"


class Workload:
    def __init__(self, base: Path, projects: int, r0: float, s0: float, scale: float, seed: int,
                 sessions: int = SESSION_PROJECTS) -> None:
        self.root = base / "claude" / "projects"
        self.r0, self.s0, self.scale = r0, s0, scale
        self.rng = random.Random(seed)
        make_projects(self.root, projects, transcripts=False)  # their sessions extracted long ago
        self.sessions = [f"-home-dev-soak-{i:03d}" for i in range(sessions)]
        self.budget = [f"-home-dev-budget-{i:03d}" for i in range(BUDGET_PROJECTS)]
        self.dreamers = [f"-home-dev-dreamer-{i:03d}" for i in range(DREAM_PROJECTS)]
        self.current: dict[str, str] = {}
        self.appends: Counter[str] = Counter()
        self.over: dict[str, bool] = {}
        self.flips: dict[str, list[str]] = defaultdict(list)  # project -> expected events in order
        self.notes: Counter[str] = Counter()
        for name in self.sessions:
            mem = self._memory(name, index(3))
            for k in range(3):
                (mem / f"entry_{k}.md").write_text(topic(f"entry {k}", f"fact {k}"))
            for k in range(5):  # sessions from the day before: the first night's gates pass
                self._session(name, self.now() - 6 * 3600 + k * 600, fresh=True)
        for name in self.budget:
            self._memory(name, index(OK_LINES))
            self.over[name] = False
        for name in self.dreamers:
            mem = self._memory(name, "- [Note](note.md) — a counter\n")
            (mem / "note.md").write_text(topic("note", "v0"))

    def now(self) -> float:
        """The daemon's wall clock (the same scaled timeline)."""
        return self.s0 + (time.time() - self.r0) * self.scale

    def _touch(self, path: Path, when: float | None = None) -> None:
        t = self.now() if when is None else when
        os.utime(path, (t, t))

    def _memory(self, name: str, idx: str) -> Path:
        mem = self.root / name / "memory"
        mem.mkdir(parents=True, exist_ok=True)
        (mem / "MEMORY.md").write_text(idx)
        return mem

    def _records(self, name: str, session: str, when: float, n: int) -> str:
        cwd = "/home/dev/" + name.removeprefix("-home-dev-")
        out = []
        for k in range(n):
            ts = datetime.fromtimestamp(when + k, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            kind, msg = ("user", {"role": "user", "content": f"please look at item {self.rng.randint(1, 999)}"}) \
                if k % 2 == 0 else ("assistant", {"id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message",
                                                  "role": "assistant", "model": "claude-sonnet-4-5",
                                                  "content": [{"type": "text", "text": "Done: looked at it."}]})
            out.append(json.dumps({"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": cwd,
                                   "sessionId": session, "version": "2.1.328", "type": kind,
                                   "uuid": str(uuid.uuid4()), "timestamp": ts, "message": msg}))
        return "\n".join(out) + "\n"

    def _session(self, name: str, when: float, *, fresh: bool = False) -> None:
        if fresh or name not in self.current:
            self.current[name] = str(uuid.uuid4())
        sid = self.current[name]
        path = self.root / name / f"{sid}.jsonl"
        with open(path, "a", encoding="utf-8") as f:
            f.write(self._records(name, sid, when, 4))
        self._touch(path, when)

    def append_session(self) -> None:
        name = self.rng.choice(self.sessions)
        self.appends[name] += 1
        self._session(name, self.now(), fresh=self.appends[name] % 6 == 0)

    def memory_write(self) -> None:
        """A topic file and its index line, as Claude Code writes them (inside the budget)."""
        name = self.rng.choice(self.sessions)
        mem = self.root / name / "memory"
        self.notes[name] += 1
        n = self.notes[name]
        rel = f"project_note_{n}.md"
        (mem / rel).write_text(topic(f"note {n}", f"learned thing {n}"))
        idx = mem / "MEMORY.md"
        lines = idx.read_text().splitlines(keepends=True)[-60:]  # Claude Code keeps its index short
        text = "".join(lines) + f"- [note {n}]({rel}) — learned thing {n}\n"
        if self.rng.random() < 0.5:
            idx.write_text(text)
        else:  # an editor-style atomic save
            tmp = mem / ".MEMORY.md.tmp-soak"
            tmp.write_text(text)
            tmp.replace(idx)
        self._touch(mem / rel)
        self._touch(idx)

    def flip_budget(self, name: str) -> None:
        over = not self.over[name]
        self.over[name] = over
        (self.root / name / "memory" / "MEMORY.md").write_text(index(OVER_LINES if over else OK_LINES))
        self.flips[name].append("budget.warning" if over else "budget.cleared")


# ----------------------------------------------------------------------------- a run


def next_start() -> float:
    """Midnight UTC of the next day (the first dream is due at 01:00): the simulated clock runs ahead
    of the real one from the start, so the real mtimes of the files the daemon itself writes (the
    consolidate lock) are never newer than its own clock."""
    now = datetime.now(UTC)
    return (now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)).timestamp()


CONFIG = """\
[daemon]
debounce_quiet_s = 0.5
debounce_max_s = 3.0
reconcile_interval_s = 5
stop_timeout_s = 20
[schedule]
dream_window = "01:00-01:00"
checkin_window = "07:00-07:00"
catchup_cron = "0 */2 * * *"
[dream]
max_searches = 0
"""


def run(minutes: float, projects: int, scale: float, seed: int = 1, warmup: float = 0.25,
        sessions: int = SESSION_PROJECTS, config_extra: str = "", keep_log: Path | None = None) -> dict[str, Any]:
    from memd.daemon import control
    from tests.plugins.stub_api import Reply, StubAPI

    with tempfile.TemporaryDirectory(prefix="memd-soak-") as d, StubAPI() as stub:
        base = Path(d)
        r0, s0 = time.time(), next_start()
        work = Workload(base, projects, r0, s0, scale, seed, sessions)
        stub.fallback = Reply(body=stub.message(stub.text("Nothing to add.")))
        env = env_for(base)
        env.update(ANTHROPIC_API_KEY="soak-key", ANTHROPIC_BASE_URL=stub.base_url, TZ="UTC")
        cfg = Path(env["XDG_CONFIG_HOME"]) / "memd" / "config.toml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(CONFIG + config_extra)
        state_dir = Path(env["XDG_STATE_HOME"]) / "memd"
        # the daemon's clock starts at s0 now: r0 is passed on, so both sides share the timeline
        work.r0 = r0 = time.time()
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve", str(r0), str(s0),
                                 str(scale)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        log = LogTail(state_dir / "memd.log")
        samples: list[tuple[float, float, int, int, int]] = []  # (t, rss MB, open files, threads, run rows)
        db: sqlite3.Connection | None = None
        sent: Counter[str] = Counter()
        try:
            log.wait("daemon.ready", 1, timeout=600)
            db = sqlite3.connect(state_dir / "state.sqlite3", timeout=10)  # reads only (WAL: beside the writer)
            t0 = time.monotonic()
            end = t0 + minutes * 60
            nxt = dict.fromkeys(("sample", "append", "write", "flip", "dream", "catchup", "hup"), t0)
            flip_i = 0
            while time.monotonic() < end:
                now = time.monotonic()
                if now >= nxt["sample"]:
                    nxt["sample"] = now + SAMPLE_S
                    samples.append((now - t0, proc_rss_mb(proc.pid), open_files(proc.pid),
                                    proc_status(proc.pid, "Threads"), run_rows(db)))
                if now >= nxt["append"]:
                    nxt["append"] = now + 0.5
                    work.append_session()
                if now >= nxt["write"]:
                    nxt["write"] = now + 3.0
                    work.memory_write()
                if now >= nxt["flip"]:
                    nxt["flip"] = now + FLIP_EVERY_S / 2
                    work.flip_budget(work.budget[flip_i % BUDGET_PROJECTS])  # each one every 20 s
                    flip_i += 1
                if now >= nxt["dream"]:
                    nxt["dream"] = now + 20.0
                    name = work.rng.choice(work.dreamers)
                    n = sent["dream"]
                    stub.script(stub.message(stub.memory("create", path=f"/memories/project_soak_{n}.md",
                                                         file_text=topic(f"soak {n}", f"fact {n}"))),
                                stub.message(stub.text("Added one memory.")))
                    control.send(state_dir, "dream", [name])
                    sent["dream"] += 1
                if now >= nxt["catchup"] and now > t0:
                    control.send(state_dir, "catchup")
                    sent["catchup"] += 1
                if now >= nxt["catchup"]:
                    nxt["catchup"] = now + 90.0
                if now >= nxt["hup"]:
                    if now > t0:
                        os.kill(proc.pid, signal.SIGHUP)
                        sent["hup"] += 1
                    nxt["hup"] = now + 60.0
                time.sleep(0.05)
            # let the last flips settle and the last jobs finish, then stop as a service manager does
            time.sleep(FLIP_EVERY_S)
            idle_by = time.monotonic() + 300
            while time.monotonic() < idle_by and not jobs_done(log):
                time.sleep(0.5)
            wall_s = time.monotonic() - t0
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(120)
            log.poll()
        finally:
            if db is not None:
                db.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
            stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            if keep_log is not None and (state_dir / "memd.log").exists():
                keep_log.write_bytes((state_dir / "memd.log").read_bytes())
        return report(work, log.seen, samples, sent, state_dir, code, stderr, wall_s, scale, warmup,
                      model_calls=len(stub.requests), timeline=(r0, s0))


def run_rows(db: sqlite3.Connection) -> int:
    """The run log's rows now (-1 when the state file cannot be read at this instant)."""
    try:
        return int(db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    except sqlite3.Error:
        return -1


def run_log_check(events: list[dict[str, Any]], state_dir: Path, r0: float, s0: float, scale: float) -> dict[str, Any]:
    """The run log's retention at the end (memd.state.prune_runs): the bound on its rows is the finished
    runs it keeps (all but the skipped ones that called no model) plus the skipped runs logged since 48
    simulated hours before the last prune (the daemon's start, or the last check-in). Event times are real
    (the log's timestamps) and mapped onto the daemon's scaled clock; each is a little after the moment
    it stands for, so the bound errs on the generous side, never the tight one."""
    from memd.state import SKIPPED_KEEP_S

    def sim(e: dict[str, Any]) -> float:
        real = datetime.fromisoformat(str(e["timestamp"]).replace("Z", "+00:00")).timestamp()
        return s0 + (real - r0) * scale

    prunes = [sim(e) for e in events if e.get("event") == "daemon.start"
              or (e.get("event") == "job.start" and e.get("job") == "checkin")]
    cutoff = (max(prunes) if prunes else s0) - SKIPPED_KEEP_S
    recent = sum(1 for e in events if e.get("event") == "job.finish" and e.get("outcome") == "skipped"
                 and not e.get("tokens_total") and not e.get("cost_usd") and sim(e) >= cutoff)
    idle = ("outcome = 'skipped' AND tokens_in + tokens_out + cache_read + cache_write = 0 AND cost_usd = 0")
    with sqlite3.connect(state_dir / "state.sqlite3") as db:
        rows = int(db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        kept = int(db.execute(f"SELECT COUNT(*) FROM runs WHERE NOT ({idle})").fetchone()[0])
        stale = int(db.execute(f"SELECT COUNT(*) FROM runs WHERE {idle} AND ended < ?", (cutoff,)).fetchone()[0])
    db.close()
    pruned = [e for e in events if e.get("event") == "state.pruned"]
    return {"rows_end": rows, "bound": kept + recent,
            "bound_rule": "finished rows kept (all but skipped ones without a model call) + skipped runs logged "
                          "since 48 simulated hours before the last prune (start or check-in)",
            "finished_kept": kept, "skipped_recent": recent, "skipped_older_than_kept": stale,
            "prunes": len(prunes), "pruned_rows": sum(int(e.get("rows", 0)) for e in pruned),
            "prune_failed": sum(1 for e in events if e.get("event") == "state.prune_failed"),
            "ok": rows <= kept + recent and stale == 0}


def jobs_done(log: LogTail) -> bool:
    """Every queued job has begun and ended (the check-in, a whole-user job, logs start/finish only)."""
    log.poll()
    whole = [e for e in log.seen if e.get("event") in ("job.start", "job.finish") and e.get("project") is None]
    begun = log.count("job.begin") + sum(1 for e in whole if e["event"] == "job.start")
    ended = log.count("job.end") + sum(1 for e in whole if e["event"] == "job.finish")
    return begun == ended == log.count("job.queued")


def report(work: Workload, events: list[dict[str, Any]], samples: list[tuple[float, float, int, int]],
           sent: Counter[str], state_dir: Path, code: int, stderr: str, wall_s: float, scale: float,
           warmup: float, *, model_calls: int, timeline: tuple[float, float]) -> dict[str, Any]:
    def named(name: str) -> list[dict[str, Any]]:
        return [e for e in events if e.get("event") == name]

    checks: dict[str, Any] = {}
    # warnings: each flip answered exactly once, in order; nothing on the projects that stay in budget
    seen: dict[str, list[str]] = defaultdict(list)
    for e in events:
        if e.get("event") in ("budget.warning", "budget.cleared") and e.get("kind") == KIND_INDEX:
            seen[str(e.get("project"))].append(str(e["event"]))
    missed = doubled = 0
    for name, expected in work.flips.items():
        got = seen.get(name, [])
        missed += max(0, len(expected) - len(got))
        doubled += max(0, len(got) - len(expected))
        if got != expected[:len(got)]:
            doubled += 1  # out of order: a warning where a clear was due, or twice in a row
    unexpected = sum(len(v) for k, v in seen.items() if k not in work.flips)
    checks["warnings"] = {"flips": sum(len(v) for v in work.flips.values()), "answered": sum(
        len(seen.get(k, [])) for k in work.flips), "missed": missed, "doubled": doubled, "unexpected": unexpected}
    # the schedule: no slot twice; jobs: each queued job ran once, no project twice within a job
    due = Counter((e.get("job"), e.get("slot")) for e in named("schedule.due"))
    per_job: list[Counter[str]] = []
    for e in events:
        if e.get("event") == "job.begin":
            per_job.append(Counter())
        elif e.get("event") == "job.start" and per_job and e.get("project"):
            per_job[-1][str(e["project"])] += 1
    twice = sum(1 for c in per_job for n in c.values() if n > 1)
    queued = len(named("job.queued"))
    began = len(named("job.begin")) + len([e for e in named("job.start") if e.get("project") is None])
    checks["jobs"] = {
        "scheduled": {j: sum(1 for (job, _), _n in due.items() if job == j) for j in ("dream", "catchup", "checkin")},
        "slots_twice": sum(1 for n in due.values() if n > 1), "queued": queued, "ran": began,
        "project_twice_in_a_job": twice,
        "dream_projects_per_night": _dreams_per_night(events, work),
        "crashed": len(named("job.crashed")), "loop_errors": len(named("daemon.error")),
        "timeouts": len(named("job.timeout"))}
    def answered(job: str) -> int:
        return sum(1 for e in events if e.get("event") in ("job.queued", "job.already_queued")
                   and e.get("job") == job and e.get("reason") == "signal")

    answered_dreams, answered_catchups = answered("dream"), answered("catchup")
    checks["signals"] = {"dream_triggers": sent["dream"], "answered": answered_dreams,
                         "catchup_triggers": sent["catchup"], "catchups_answered": answered_catchups,
                         "reloads": sent["hup"], "reloaded": len(named("config.reloaded"))}
    reports = sorted((state_dir / "reports").glob("checkin-*.md"))
    checks["checkins"] = {"due": checks["jobs"]["scheduled"]["checkin"], "reports": len(named("checkin.report")),
                          "files": len(reports)}
    from memd.state import StateStore

    with StateStore.open(state_dir) as st:
        outcomes = Counter(r.outcome for r in st.runs(limit=1_000_000))
    checks["runs"] = dict(outcomes)
    checks["run_log"] = run_log_check(events, state_dir, timeline[0], timeline[1], scale)
    checks["exit_code"] = code
    # resources after warm-up
    cut = wall_s * warmup
    after = [s for s in samples if s[0] >= cut] or samples
    xs = [s[0] / 3600 for s in after]
    res: dict[str, Any] = {"samples": len(samples), "warmup_s": round(cut)}
    for i, key in ((1, "rss_mb"), (2, "open_files"), (3, "threads"), (4, "run_rows")):
        ys = [float(s[i]) for s in after]
        half = len(xs) // 2
        res[key] = {"first": ys[0], "last": ys[-1], "min": min(ys), "max": max(ys),
                    "slope_per_hour": round(slope(xs, ys), 3) if len(xs) > 1 else 0.0,
                    # growth that levels off (caches filling) against growth that goes on (a leak)
                    "slope_per_hour_second_half": round(slope(xs[half:], ys[half:]), 3) if len(xs) > 3 else 0.0}
    res["rss_mb"]["peak_all"] = max(s[1] for s in samples)
    res["series"] = [[round(t), round(rss, 2), fds, threads, rows] for t, rss, fds, threads, rows in samples]
    res["series_columns"] = ["t_s", "rss_mb", "open_files", "threads", "run_rows"]
    ok = (missed == 0 and doubled == 0 and unexpected == 0 and checks["jobs"]["slots_twice"] == 0
          and twice == 0 and queued == began and checks["jobs"]["crashed"] == 0
          and checks["jobs"]["loop_errors"] == 0 and checks["jobs"]["dream_projects_per_night"]["twice"] == 0
          and answered_dreams == sent["dream"] and answered_catchups == sent["catchup"]
          and checks["signals"]["reloaded"] == sent["hup"]
          and checks["checkins"]["reports"] == checks["checkins"]["due"] and "running" not in outcomes
          and code == 0 and res["rss_mb"]["peak_all"] < 80 and checks["run_log"]["ok"]
          and checks["run_log"]["prune_failed"] == 0)
    return {"ok": ok, "minutes": round(wall_s / 60, 1), "scale": scale,
            "simulated_hours": round(wall_s * scale / 3600, 1), "projects": sum(1 for _ in work.root.iterdir()),
            "appends": sum(work.appends.values()), "memory_writes": sum(work.notes.values()),
            "model_calls": model_calls, "resources": res, "checks": checks,
            "stderr_tail": stderr[-2000:]}


def _dreams_per_night(events: list[dict[str, Any]], work: Workload) -> dict[str, int]:
    """Scheduled dreams: how many nights, projects dreamed, and any project dreamed twice in a night.
    The worker runs its queue in order, so the n-th job to begin is the n-th queued."""
    queue: list[tuple[str, str]] = []
    current = ("", "")
    night = ""
    nights = 0
    seen: Counter[str] = Counter()
    for e in events:
        ev = e.get("event")
        whole = ev == "job.start" and e.get("project") is None
        if ev == "schedule.due" and e.get("job") == "dream":
            nights += 1
            night = str(e.get("slot"))[:10]
        elif ev == "job.queued":
            queue.append((str(e.get("job")), str(e.get("reason"))))
        elif (ev == "job.begin" or whole) and queue:
            current = queue.pop(0)
        elif ev == "job.finish" and e.get("project") and current == ("dream", "schedule"):
            seen[f"{night} {e['project']}"] += 1
    return {"nights": nights, "project_runs": sum(seen.values()), "twice": sum(1 for n in seen.values() if n > 1)}


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        return serve(float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=32.0, help="how long the workload runs (real minutes)")
    ap.add_argument("--projects", type=int, default=1000, help="idle projects besides the active ones")
    ap.add_argument("--scale", type=float, default=120.0, help="simulated seconds per real second")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sessions", type=int, default=SESSION_PROJECTS, help="projects whose sessions append")
    ap.add_argument("--json", type=Path, help="write the report here too")
    ap.add_argument("--keep-log", type=Path, help="copy the daemon's JSON log here")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the daemon is stopped on the way out
    rep = run(args.minutes, args.projects, args.scale, args.seed, sessions=args.sessions, keep_log=args.keep_log)
    text = json.dumps(rep, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if rep["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
