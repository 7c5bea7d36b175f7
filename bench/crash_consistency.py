"""Crash consistency: a dream killed at random moments and at named fault points inside the apply window.

Each trial copies one of the real memory folders of ../shared/claude-data (a fresh copy every trial),
scripts a consolidation (lines appended to topic files, new files, one deletion) through the loopback
stub, and runs the dream in a child process that is SIGKILLed either at a random moment (uniform over
the time an uninterrupted run takes, so some land in the model call, some in the apply window) or at a
named fault point (``MEMD_FAULT``: between two renames, before the index, with a temp file half written,
...). Then it checks:

- every file is byte for byte as before the run or as the uninterrupted run leaves it;
- the index never links a missing file (no MEM005 that was not there before);
- the history is readable, commit by commit, and ``memd undo`` of the killed run gives back the folder
  exactly as it was;
- the next run completes: it changes the folder exactly as the uninterrupted run does, and leaves no
  temp file and no staging copy behind.

Run: ``.venv/bin/python bench/crash_consistency.py --trials 500`` (figures in docs/reliability.md).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import campaign as C
from memd import history
from memd.core.rebuild import NORMALISE
from memd.jobs.runner import run_job
from memd.state import StateStore
from tests.plugins.stub_api import StubAPI

POINTS = ("apply.after_snapshot", "apply.after_rename:1", "apply.after_rename:2", "apply.after_rename:3",
          "apply.after_delete", "apply.before_index", "store.write:1", "store.write:3", "store.before_rename:1",
          "store.before_rename:3", "store.before_rename:5", "store.after_rename:2", "store.after_rename:5")


class Campaign:
    def __init__(self, work: Path, stub: StubAPI, folders: list[Path], seed: int, *, scripts: int,
                 points: tuple[str, ...], named_share: float) -> None:
        self.work, self.stub, self.rng = work, stub, random.Random(seed)
        self.points, self.named_share = points, named_share
        self.claude = work / "claude"
        self.state_dir = work / "state"
        self.ctx = C.forkserver()
        self.cfg = C.config(stub.base_url)
        self.cases: list[tuple[str, Path, int, dict[str, bytes], dict[str, bytes], float]] = []
        warm = C.tree(C.copy_project(folders[0], self.claude, "-warm-up").memory_dir)
        self._in_process("-warm-up", warm, 0)  # imports the SDK once, so the timings below are the run's own
        for f_i, src in enumerate(folders):
            for s in range(scripts):
                name = f"-crash-{f_i}"
                seed_s = f_i * 1000 + s
                before = C.tree(C.copy_project(src, self.claude, name).memory_dir)
                t0 = time.monotonic()
                outcome = self._in_process(name, before, seed_s)
                took = time.monotonic() - t0
                if outcome != "changed":
                    raise SystemExit(f"the uninterrupted run of script {seed_s} on {src} was {outcome}")
                after = C.tree(self._mem(name))
                self.cases.append((name, src, seed_s, before, after, took))
        self.stats: Counter[str] = Counter()
        self.violations: list[str] = []
        self.files_checked = 0

    def _mem(self, name: str) -> Path:
        return self.claude / "projects" / name / "memory"

    def _in_process(self, name: str, before: dict[str, bytes], seed: int) -> str:
        C.write_tree(self._mem(name), before)
        return self._dream(name, before, seed)

    def _dream(self, name: str, before: dict[str, bytes], seed: int) -> str:
        """The scripted dream in this process, on the folder as it is; its outcome."""
        from memd.layout import Project

        C.clear(self.stub)
        self.stub.script(*C.dream_script(self.stub, before, seed))
        d = self.claude / "projects" / name
        with StateStore.open(self.state_dir) as state:
            res = run_job("dream", C.job_context(self.cfg, self.claude, self.state_dir, state),
                          [Project(name, d, d / "memory")])
        return res.outcomes[0].outcome if res.outcomes else "skipped: " + json.dumps(res.skipped)

    def trial(self, n: int) -> None:
        name, _src, seed, before, after, took = self.rng.choice(self.cases)
        mem = self._mem(name)
        C.write_tree(mem, before)
        known = {r.run for r in history.list_runs(self.state_dir, name, limit=1000)}
        C.clear(self.stub)
        self.stub.script(*C.dream_script(self.stub, before, seed))
        named = self.rng.random() < self.named_share
        spec = self.rng.choice(self.points) + "=kill" if named else ""
        p = self.ctx.Process(target=C.dream_child, args=(self.stub.base_url, str(self.claude),
                                                         str(self.state_dir), name, spec))
        p.start()
        if not named:
            time.sleep(self.rng.uniform(0.0, took * 1.5))
            p.kill()
        p.join(60)
        if p.is_alive():
            p.kill()
            p.join()
            self.violations.append(f"trial {n}: the run hung ({spec or 'random'})")
        killed = p.exitcode == -9
        self.stats["killed" if killed else "completed"] += 1
        self.stats["named" if named else "random"] += 1
        live = C.tree(mem)
        left = C.temps(mem)
        self.stats["temp files left by the kill"] += len(left)
        mixed = False
        for rel in sorted(set(live) | set(before) | set(after)):
            if rel in left:
                continue
            self.files_checked += 1
            now = live.get(rel)
            if now not in (before.get(rel), after.get(rel)):
                self.violations.append(f"trial {n} ({spec or 'random'}): {rel} is neither before nor after")
            mixed = mixed or (before.get(rel) != after.get(rel) and now == after.get(rel))
        state = "before" if {k: v for k, v in live.items() if k not in left} == before else (
            "after" if {k: v for k, v in live.items() if k not in left} == after else "mixed")
        self.stats[f"left {state}"] += 1
        if state == "mixed":
            self.stats["inside the apply window"] += 1
        if C.dangling(mem):
            self.violations.append(f"trial {n} ({spec or 'random'}): the index links a missing file: "
                                   f"{C.dangling(mem)[:2]}")
        try:
            self.stats["history commits read"] = C.history_readable(self.state_dir, name)
        except Exception as e:  # a history that cannot be read back is a violation, whatever the error
            self.violations.append(f"trial {n}: the history cannot be read: {type(e).__name__}: {e}")
        new = [r for r in history.list_runs(self.state_dir, name, limit=1000) if r.run not in known]
        if new:
            history.undo_run(self.state_dir, name, mem, new[0].run)
            undone = {k: v for k, v in C.tree(mem).items() if k not in C.temps(mem)}
            if undone != before:
                differ = sorted(k for k in set(undone) | set(before) if undone.get(k) != before.get(k))
                self.violations.append(f"trial {n} ({spec or 'random'}): undo did not give back {differ[:3]}")
                C.write_tree(mem, before)
            self.stats["undone"] += 1
        # the next run completes and leaves nothing behind: a dream, exactly as an uninterrupted one, after
        # every third kill that left a trace (a history run, a changed file, a temp file) and every tenth
        # other one; a rebuild of the index (which sweeps memd's temp files too) after the other traces
        trace = bool(new or state != "before" or left)
        if trace and n % 3:
            self._next_rebuild(n, name, mem)
            return
        if not trace and n % 10:
            return
        self.stats["next runs (dream)"] += 1
        out = self._dream(name, before, seed)
        if out != "changed" or C.tree(mem) != after:
            self.violations.append(f"trial {n} ({spec or 'random'}): the next run was {out}, "
                                   f"{'as' if C.tree(mem) == after else 'not as'} an uninterrupted one")
        if C.temps(mem):
            self.violations.append(f"trial {n}: temp files after the next run: {C.temps(mem)}")
        staging = self.state_dir / "staging" / name
        if staging.is_dir() and any(staging.iterdir()):
            self.violations.append(f"trial {n}: a staging copy was left behind")


    def _next_rebuild(self, n: int, name: str, mem: Path) -> None:
        from memd.layout import Project
        from memd.maintenance import rebuild_project

        self.stats["next runs (rebuild)"] += 1
        d = self.claude / "projects" / name
        r = rebuild_project(Project(name, d, mem), self.cfg, self.state_dir, dry_run=False, mode=NORMALISE)
        if r.error or r.conflict or C.temps(mem) or C.dangling(mem):
            self.violations.append(f"trial {n}: the next rebuild left {r.reasons} {C.temps(mem)} {C.dangling(mem)}")


def run(trials: int, seed: int = 1, folders: list[Path] | None = None, work: Path | None = None, *,
        scripts: int = 4, points: tuple[str, ...] = POINTS, named_share: float = 0.5,
        progress: bool = False, minutes: float = 0.0) -> dict[str, Any]:
    """Run the campaign; returns its figures (``violations`` empty when nothing was lost). ``scripts``
    consolidations per folder (each one's uninterrupted result measured once), ``named_share`` of the
    trials killed at one of ``points``, the rest at a random moment."""
    import os

    os.environ.setdefault("ANTHROPIC_API_KEY", "test")
    os.environ.pop("ANTHROPIC_BASE_URL", None)
    srcs = folders if folders is not None else C.real_memory_folders()
    if not srcs:
        raise SystemExit("no real memory folder (../shared/claude-data is absent)")
    stub = StubAPI()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="memd-crash-", dir=work) as tmp:
        c = Campaign(Path(tmp), stub, srcs, seed, scripts=scripts, points=points, named_share=named_share)
        done = C.run_trials(c, trials, t0, minutes=minutes, progress=progress)
    stub.close()
    return {"trials": done, "trials_asked": trials, "folders": [s.parent.name for s in srcs],
            "files_checked": c.files_checked,
            "stats": dict(c.stats), "violations": c.violations, "seconds": round(time.monotonic() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scripts", type=int, default=4, help="consolidations scripted per folder")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop after this long (0: no limit)")
    args = ap.parse_args()
    print(json.dumps(run(args.trials, args.seed, scripts=args.scripts, progress=True, minutes=args.minutes),
                     indent=2))


if __name__ == "__main__":
    main()
