"""Benchmark `memd sync` (issue 15) against real remotes on loopback, and run the long fleet campaign.

- a sync with nothing new: one fetch, no push, no model (in-process and as the `memd sync` command),
  over file:// and over dulwich's smart-HTTP server; target well under a second;
- a sync of 200 changed files: one machine sends 200 new topic files, another takes them (through
  the guarded apply pipeline: staging, index rebuild, guards, snapshot, per-file writes);
- the fleet (`--fleet N`): issue 21's model-based test (tests/sync_fleet.py, hypothesis stateful
  testing): three machines, at least N rule steps (edits, corrections, deletions, index edits, resets,
  undos, keyless and model dreams, syncs, offline spells) in examples of `--per-example` steps, each
  ended by a quiet period: convergence, words lost, removals that came back, conflicts surfaced.

Results go to docs/benchmarks.md ("## Sync").

    .venv/bin/python bench/bench_sync.py [--runs N] [--fleet 2000] [--seed S] [--no-write]
    .venv/bin/python bench/bench_sync.py --fleet-only 2000 [--seed S] [--per-example 100]   # the long tier

The fleet's long tier (at least 2,000 steps) checks issue 21's invariants after every step and every
sync and at each example's quiescence; it exits 1 when one broke (the failing program is printed); its
figures are in docs/sync.md ("The fleet test").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
DOC = ROOT / "docs" / "benchmarks.md"

from bench_check import topic_text, write_doc  # noqa: E402

from tests.plugins.sync import HttpRemote, Machine, bare_remote  # noqa: E402
from tests.sync_fleet import run_campaign, summary  # noqa: E402


def _isolate(tmp: Path) -> None:
    """git sees none of the caller's config."""
    (tmp / "gitconfig").write_text("")
    os.environ.update(HOME=str(tmp), GIT_CONFIG_GLOBAL=str(tmp / "gitconfig"), GIT_CONFIG_NOSYSTEM="1")


def _ms(f: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def _nothing_new(tmp: Path, remote: str, label: str, runs: int) -> tuple[float, dict[str, Any]]:
    a = Machine(tmp / label, "ma", remote)
    rng = random.Random(3)
    for i in range(20):
        a.write(f"t{i}.md", topic_text(rng, i))
    a.sync("app")
    a.events.events.clear()
    ms = _ms(lambda: a.sync("app"), runs)
    done = a.events.named("sync.done")
    outs = a.sync("app").outcomes
    return ms, {"fetches": max(d["fetches"] for d in done), "pushes": max(d["pushes"] for d in done),
                "outcome": outs[0].outcome, "message": outs[0].message}


def _cli_nothing_new(tmp: Path, remote: str, runs: int) -> float:
    a = Machine(tmp / "cli", "ma", remote)
    a.write("x.md", topic_text(random.Random(4), 1))
    conf = tmp / "cli.toml"
    conf.write_text(f'[paths]\nstate_dir = "{a.state_dir}"\n[sync]\nremote = "{remote}"\nmachine = "ma"\n')
    cmd = [sys.executable, "-m", "memd", "--claude-dir", str(a.claude), "--config", str(conf), "sync", "--all"]
    subprocess.run(cmd, check=True, capture_output=True)
    return _ms(lambda: subprocess.run(cmd, check=True, capture_output=True), runs)


def _two_hundred(tmp: Path, remote: str) -> dict[str, float]:
    """200 topic files changed on one machine: its sync sends them, the other's takes them."""
    from memd.config import replace
    from memd.core.budget import Limits

    a, b = Machine(tmp / "s200", "ma", remote), Machine(tmp / "s200", "mb", remote)
    for m in (a, b):  # 200 entries do not fit Claude Code's 200-line index: room for them here
        m.config = replace(m.config, budget=Limits(max_lines=400, max_chars=100_000))
    rng = random.Random(5)
    for i in range(200):
        a.write(f"memory_{i:03d}.md", topic_text(rng, i))
    a.sync("app")
    t = time.perf_counter()
    assert b.sync("app").outcomes[0].added >= 200
    new_ms = (time.perf_counter() - t) * 1000
    for i in range(200):
        a.write(f"memory_{i:03d}.md", (a.read(f"memory_{i:03d}.md") or "") + "\nOne more fact.\n")
    t = time.perf_counter()
    out_a = a.sync("app").outcomes[0]
    send = time.perf_counter() - t
    t = time.perf_counter()
    out_b = b.sync("app").outcomes[0]
    take = time.perf_counter() - t
    assert out_b.outcome == "changed" and out_b.changed >= 200, (out_a, out_b)
    assert a.topics() == b.topics()
    return {"send_ms": send * 1000, "take_ms": take * 1000, "new_ms": new_ms}


# The daemon's no-change sync, timed in a process of the regular install (what the daemon's worker runs: one
# StateStore kept open, the job lock, the projects listed, run_sync), each run beside one plain `git fetch` of
# the same remote into a bare repository of its own (the same refspec), in turns.
_DAEMON_LOOP = r"""
import json, subprocess, sys, time
from pathlib import Path
from memd import layout
from memd.config import Config, SyncConfig
from memd.jobs import JobContext
from memd.jobs.runner import job_lock
from memd.state import StateStore
from memd.sync.job import run_sync
claude, state_dir, remote, plain, runs = sys.argv[1:6]
cfg = Config(sync=SyncConfig(remote=remote, machine="ma"))
fetch = ["git", f"--git-dir={plain}", "fetch", "--quiet", "--prune", "--no-tags", remote,
         "+refs/heads/memory/*:refs/remotes/origin/memory/*"]
ts, fs, outs = [], [], set()
with StateStore.open(Path(state_dir)) as state:
    for _ in range(int(runs)):
        t = time.perf_counter()
        subprocess.run(fetch, check=True)
        fs.append(time.perf_counter() - t)
        t = time.perf_counter()
        with job_lock(Path(state_dir)):
            jc = JobContext(config=cfg, claude_dir=Path(claude), state_dir=Path(state_dir), state=state)
            res = run_sync(jc, layout.list_projects(Path(claude)))
        ts.append(time.perf_counter() - t)
        outs |= {o.outcome for o in res.outcomes}
print(json.dumps({"sync": sorted(ts)[len(ts) // 2] * 1000, "fetch": sorted(fs)[len(fs) // 2] * 1000,
                  "outcomes": sorted(outs)}))
"""


def _speed(tmp: Path, bindir: Path, counts: list[int], runs: int) -> list[dict[str, Any]]:
    """A no-change sync against one plain `git fetch`, measured side by side in a regular install: the
    daemon's in-process sync and the `memd sync --all` command, at each number of projects."""
    from tests.plugins import sync as rig

    rows = []
    for n in counts:
        keys = tuple(f"p{i}" for i in range(n))
        for k in keys:
            rig.ORIGINS.setdefault(k, f"git@github.com:me/{k}.git")
        remote = "file://" + str(bare_remote(tmp / f"speed{n}.git"))
        m = Machine(tmp / f"speed{n}", "ma", remote, repos=keys)
        rng = random.Random(n)
        for k in keys:
            for i in range(20):
                m.write(f"t{i}.md", topic_text(rng, i), key=k)
        m.sync()
        m.sync()
        plain = tmp / f"plain{n}.git"
        subprocess.run(["git", "init", "-q", "--bare", str(plain)], check=True)
        conf = tmp / f"speed{n}.toml"
        conf.write_text(f'[paths]\nstate_dir = "{m.state_dir}"\n[sync]\nremote = "{remote}"\nmachine = "ma"\n')
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        out = subprocess.run([str(bindir / "python"), "-c", _DAEMON_LOOP, str(m.claude), str(m.state_dir), remote,
                              str(plain), str(runs)], check=True, capture_output=True, text=True, cwd=tmp, env=env)
        daemon = json.loads(out.stdout)
        cmd = [str(bindir / "memd"), "--claude-dir", str(m.claude), "--config", str(conf), "sync", "--all"]
        fetch = ["git", f"--git-dir={plain}", "fetch", "--quiet", "--prune", "--no-tags", remote,
                 "+refs/heads/memory/*:refs/remotes/origin/memory/*"]
        ct, ft = [], []
        for _ in range(runs):
            t = time.perf_counter()
            subprocess.run(fetch, check=True, env=env, cwd=tmp)
            ft.append(time.perf_counter() - t)
            t = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp)
            ct.append(time.perf_counter() - t)
            assert r.returncode == 0 and "nothing new on either side" in r.stdout, (r.stdout, r.stderr)
        fetch_ms = statistics.median(ft) * 1000
        cmd_ms = statistics.median(ct) * 1000
        rows.append({"projects": n, "daemon_ms": daemon["sync"], "daemon_fetch_ms": daemon["fetch"],
                     "daemon_ratio": daemon["sync"] / daemon["fetch"], "outcomes": daemon["outcomes"],
                     "command_ms": cmd_ms, "fetch_ms": fetch_ms, "command_ratio": cmd_ms / fetch_ms})
    return rows


def _speed_only(counts: list[int], runs: int, venv: Path | None) -> int:
    from regular import build

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        _isolate(tmp)
        bindir = build(venv or tmp / "regular-venv")
        rows = _speed(tmp, bindir, counts, runs)
    print(json.dumps(rows, indent=2))
    return 0 if all(r["daemon_ratio"] <= 3 and r["command_ratio"] <= 8 for r in rows) else 1


def _replay(program: Path) -> int:
    """Run one fleet program as hypothesis printed it (``state.rule(...)`` a line; the long tier's failure
    output), then its quiescence: exit 1 when an invariant breaks, with the report either way."""
    from tests.plugins.stub_api import StubAPI
    from tests.sync_fleet import Fleet, FleetReport

    with tempfile.TemporaryDirectory() as d:
        _isolate(Path(d))

        class Replayed(Fleet):
            report = FleetReport()

        Replayed.stub = StubAPI()
        state = Replayed()
        try:
            try:
                for line in program.read_text().splitlines():
                    line = line.strip()
                    if line.startswith("state.") and not line.startswith("state.teardown"):
                        exec(line, {"state": state})  # a program the fleet printed
                state.stepping = False
            finally:
                state.teardown()
        except AssertionError as e:
            print(f"{type(e).__name__}: {e}", file=sys.stderr)
            return 1
        finally:
            print(json.dumps(summary(Replayed.report), indent=2, default=str))
            Replayed.stub.close()
    return 0


def _fleet(steps: int, seed: int, per_example: int) -> tuple[dict[str, Any], list[str]]:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        _isolate(tmp)
        t = time.perf_counter()
        rep, failures = run_campaign(steps, seed, per_example=per_example)
        fleet = summary(rep) | {"wall_seconds": round(time.perf_counter() - t, 1), "seed": seed,
                                "per_example": per_example, "failures": len(failures)}
    return fleet, failures


def _fleet_only(steps: int, seed: int, per_example: int) -> int:
    fleet, failures = _fleet(steps, seed, per_example)
    for f in failures:
        print(f, file=sys.stderr)
    print(json.dumps(fleet, indent=2, default=str))
    return 1 if failures else 0


def fleet_line(fleet: dict[str, Any], command: str) -> str:
    """The fleet's figures in one paragraph (docs/benchmarks.md and docs/sync.md)."""
    return (f"Fleet (`{command} --seed {fleet['seed']}`, hypothesis stateful testing, three machines, one "
            f"remote): {fleet['steps']} steps in {fleet['examples']} examples of up to {fleet['per_example']}, "
            f"{fleet['syncs']} syncs ({fleet['failed_syncs']} offline), {fleet['words']} words written, "
            f"{fleet['words_removed']} removed on purpose ({fleet['armed_removals']} checked to stick), "
            f"{fleet['model_dreams']} model dreams, {fleet['undos_kept_local']} undos kept local, "
            f"{fleet.get('writer_switches', 0)} clone writer switches ({fleet.get('writer_refusals', 0)} refused by "
            f"design: a folder with no memory that never synced; {fleet.get('clone_words', 0)} words written in "
            f"the held clone), {fleet.get('forgets', 0)} forgets; converged "
            f"{fleet['converged']} of {fleet['examples']}; examples still committing at quiescence "
            f"{fleet.get('still_committing', 0)}; words lost {fleet['lost']}; removals that came back "
            f"{fleet['came_back']}; pushes past the outgoing guard {fleet['guard_breaches']}; live words gone "
            f"from the remote {fleet['lost_on_remote']}; holds without a status line {fleet['silent_holds']}; "
            f"held-clone races {fleet.get('clone_races', 0)}; forgotten words left {fleet.get('forgotten_left', 0)}; "
            f"conflicts {fleet['conflicts']} (each surfaced once: {fleet['duplicates']} twice), "
            f"{fleet['open_blocks']} blocks left for the user; failures {fleet['failures']}; "
            f"{fleet['wall_seconds']} s.")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--fleet", type=int, default=0, help="operations of the fleet campaign (0: skip it)")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--fleet-only", type=int, default=0, help="run only the fleet campaign of at least this many "
                    "steps and print its figures (JSON); exit 1 when an invariant broke")
    ap.add_argument("--per-example", type=int, default=100, help="the fleet's steps per example (each example "
                    "ends with a quiet period and the checks at quiescence)")
    ap.add_argument("--speed-only", default="", help="only the no-change sync against one `git fetch` in a "
                    "regular install, at these numbers of projects (e.g. 1,10,50); exit 1 past 3x (daemon) or 8x "
                    "(command)")
    ap.add_argument("--venv", type=Path, help="a regular venv to reuse for --speed-only (memd is reinstalled)")
    ap.add_argument("--replay", type=Path, help="run one fleet program as the long tier printed it (a file of "
                    "state.rule(...) lines) and its quiescence; exit 1 when an invariant breaks")
    args = ap.parse_args()
    if args.replay:
        return _replay(args.replay)
    if args.speed_only:
        return _speed_only([int(n) for n in args.speed_only.split(",")], args.runs, args.venv)
    if args.fleet_only:
        return _fleet_only(args.fleet_only, args.seed, args.per_example)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        _isolate(tmp)
        file_url = "file://" + str(bare_remote(tmp / "remote.git"))
        srv = HttpRemote(bare_remote(tmp / "http.git"))
        try:
            f_ms, f_info = _nothing_new(tmp, file_url, "f", args.runs)
            h_ms, h_info = _nothing_new(tmp, srv.url, "h", args.runs)
            cli_ms = _cli_nothing_new(tmp, file_url, max(3, args.runs // 2))
            big = _two_hundred(tmp, "file://" + str(bare_remote(tmp / "big.git")))
            big_http = _two_hundred(tmp / "hb", srv.url.rstrip("/") + "/")
        finally:
            srv.close()
        fleet: dict[str, Any] | None = None
        if args.fleet:
            fleet, failures = _fleet(args.fleet, args.seed, args.per_example)
            for f in failures:
                print(f, file=sys.stderr)
    results = {"nothing_new_file_ms": f_ms, "nothing_new_http_ms": h_ms, "nothing_new_cli_ms": cli_ms,
               "file": f_info, "http": h_info, "200_file": big, "200_http": big_http, "fleet": fleet}
    print(json.dumps(results, indent=2, default=str))
    if args.no_write:
        return 0
    lines = [
        "## Sync", "",
        f"Command: `.venv/bin/python bench/bench_sync.py --fleet {args.fleet or 500}` (median of {args.runs} "
        f"runs; real remotes on loopback started by the benchmark). Run on {time.strftime('%Y-%m-%d')}, "
        f"Python {platform.python_version()}, {os.cpu_count()} cores (shared with other work).", "",
        "| what | time | git round trips | target |", "| --- | --- | --- | --- |",
        f"| a sync with nothing new, one project of 20 files, file:// (in-process) | {f_ms:.0f} ms | "
        f"{f_info['fetches']} fetch, {f_info['pushes']} push | well under 1 s |",
        f"| the same over smart HTTP on loopback (dulwich's server) | {h_ms:.0f} ms | "
        f"{h_info['fetches']} fetch, {h_info['pushes']} push | well under 1 s |",
        f"| `memd sync --all` as a command (interpreter start included), file:// | {cli_ms:.0f} ms | 1 fetch | |",
        f"| 200 changed topic files: the sending machine, file:// | {big['send_ms']:.0f} ms | 1 fetch, 1 push | |",
        f"| 200 changed topic files: the receiving machine (staged, merged, rebuilt, guarded, snapshotted, "
        f"written) | {big['take_ms']:.0f} ms | 1 fetch | |",
        f"| 200 new topic files: the receiving machine | {big['new_ms']:.0f} ms | 1 fetch, 1 push (its index) | |",
        f"| 200 changed files over smart HTTP: send / take | {big_http['send_ms']:.0f} / "
        f"{big_http['take_ms']:.0f} ms | | |", "",
        "The 200-file cases raise the index budget to 400 lines: 200 entries do not fit Claude Code's",
        "200-line index, and with the default budget the guard refuses such a sync until a dream condenses.", "",
        "A sync with nothing new runs no model, reads no file and writes nothing: one `git fetch` (git",
        "itself finds the refs unchanged), then the fetched head is the one last shared and the folder's",
        "metadata (sizes, times, inodes) is as the last sync left it. Most of its time is the `git` process.",
        "Sending and taking 200 files is dominated by durable writes: each file taken is written",
        "atomically with an fsync (the apply pipeline's no-clobber write), and the history records the",
        "folder before and after; on this shared disk an fsync costs 5-20 ms.",
    ]
    if fleet:
        lines += ["", fleet_line(fleet, f"--fleet {args.fleet}")]
    write_doc("\n".join(lines) + "\n", head="## Sync")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
