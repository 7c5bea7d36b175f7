"""Crash consistency of the history writer (issue 20): rebuilds, undos and dreams SIGKILLed at random
moments and at named points inside the history's writes, dulwich's own lock-file writes included.

Each trial copies one of the real memory folders of ../shared/claude-data and runs one operation in a
child process (forkserver: memd, dulwich and the SDK already imported) that is SIGKILLed either at a
random moment (uniform over 1.5 times what the uninterrupted operation takes) or at a named fault point
(``MEMD_FAULT``: ``history.init``, ``history.after_objects:2``, ``history.gitfile_write@object:3`` (inside
dulwich, its ``.lock`` file just created), ``store.after_rename@MEMORY.md``, ...):

- ``rebuild``: ``memd rebuild`` (normalise) of an index given a dangling link (a quarter of them, and
  every one killed at an init point, with no history yet: its first setup is what gets killed);
- ``undo``: ``memd undo`` of a dream the trial applied first;
- ``dream``: a scripted consolidation through the loopback stub (files appended to, created, deleted).

After each trial it checks:
- every file is as before or as after the operation (never a third state); the index links no missing
  file that it did not already link; the history is readable commit by commit;
- ``memd history`` lists every applied change: a folder the killed operation changed has a new run;
- ``memd undo`` restores exactly: the new run undone gives back the folder as before the operation (for
  a killed undo: the next undo finishes it, and the folder is as before the dream);
- the next run succeeds (never ``FileLocked``, never "no history yet"), as an uninterrupted one, and
  no ``*.lock`` and no half-made repository is left in the history.

Run: ``nice -n 5 .venv/bin/python bench/crash_history.py --trials 500`` (figures in docs/reliability.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import campaign as C
from memd import history
from memd.jobs.runner import run_job
from memd.layout import Project
from memd.state import StateStore
from tests.plugins.stub_api import StubAPI

OPS = ("rebuild", "undo", "dream")
# Named points, per operation. The history's own: init (the temp repository made), init_renamed (moved
# into place), after_objects:n / after_ref:n (the n-th commit's objects written / its ref moved); inside
# dulwich: gitfile_write (a .lock created, empty) and gitfile_close (written, not renamed) of the n-th
# object or ref file; the store's: a memory file half written, renamed, ...
HISTORY_POINTS = ("history.after_objects:1", "history.after_objects:2", "history.after_objects:3",
                  "history.after_ref:1", "history.after_ref:2", "history.after_ref:3",
                  "history.gitfile_write@object:1", "history.gitfile_write@object:3",
                  "history.gitfile_close@object:2", "history.gitfile_close@object:4",
                  "history.gitfile_write@ref:1", "history.gitfile_write@ref:2", "history.gitfile_write@ref:3",
                  "history.gitfile_close@ref:1", "history.gitfile_close@ref:3")
INIT_POINTS = ("history.init", "history.init_renamed", "history.gitfile_write@ref:1",
               "history.gitfile_close@config:1")
POINTS: dict[str, tuple[str, ...]] = {
    "rebuild": (*HISTORY_POINTS, *INIT_POINTS, "store.write@MEMORY.md", "store.before_rename@MEMORY.md",
                "store.after_rename@MEMORY.md"),
    "undo": (*HISTORY_POINTS, "store.after_rename:1", "store.after_rename:2", "store.after_rename:3",
             "store.before_rename:2", "history.after_objects:4", "history.after_ref:4"),
    "dream": (*HISTORY_POINTS, "apply.after_snapshot", "apply.after_rename:1", "apply.before_index",
              "apply.after_delete", "store.after_rename:2"),
}
DANGLING = "- [Gone for trial](gone_trial.md) — a file that is not there\n"


@dataclass
class Case:
    name: str
    seed: int
    before: dict[str, bytes]  # the copy of the real folder
    dreamt: dict[str, bytes]  # after the uninterrupted scripted dream
    broken: dict[str, bytes]  # before, its index given a dangling link: what a rebuild starts from
    rebuilt: dict[str, bytes]  # after the uninterrupted rebuild of ``broken``
    took: dict[str, float]  # how long each operation takes uninterrupted (in this process)


class Campaign:
    def __init__(self, work: Path, stub: StubAPI, folders: list[Path], seed: int, *, scripts: int,
                 named_share: float, fresh_share: float) -> None:
        self.work, self.stub, self.rng = work, stub, random.Random(seed)
        self.named_share, self.fresh_share = named_share, fresh_share
        self.claude = work / "claude"
        self.state_dir = work / "state"
        self.ctx = C.forkserver()
        self.cfg = C.config(stub.base_url)
        self.stats: Counter[str] = Counter()
        self.kills: Counter[str] = Counter()
        self.violations: list[str] = []
        self.cases: list[Case] = []
        warm = C.tree(C.copy_project(folders[0], self.claude, "-warm-up").memory_dir)
        self._dream("-warm-up", warm, 0)  # imports the SDK once, so the timings below are the runs' own
        for f_i, src in enumerate(folders):
            for s in range(scripts):
                name = f"-hist-{f_i}-{s}"
                seed_s = f_i * 1000 + s
                before = C.tree(C.copy_project(src, self.claude, name).memory_dir)
                took: dict[str, float] = {}
                t0 = time.monotonic()
                if self._dream(name, before, seed_s) != "changed":
                    raise SystemExit(f"the uninterrupted dream {seed_s} on {src} did not change the folder")
                took["dream"] = time.monotonic() - t0
                dreamt = C.tree(self._mem(name))
                t0 = time.monotonic()
                self._undo(name)
                took["undo"] = time.monotonic() - t0
                if C.tree(self._mem(name)) != before:
                    raise SystemExit(f"the uninterrupted undo of dream {seed_s} on {src} did not restore it")
                broken = dict(before)
                broken[C.INDEX_NAME] = before.get(C.INDEX_NAME, b"") + DANGLING.encode()
                C.write_tree(self._mem(name), broken)
                t0 = time.monotonic()
                if not self._rebuild(name).written:
                    raise SystemExit(f"the uninterrupted rebuild of {src} wrote nothing")
                took["rebuild"] = time.monotonic() - t0
                rebuilt = C.tree(self._mem(name))
                self.cases.append(Case(name, seed_s, before, dreamt, broken, rebuilt, took))

    # ------------------------------------------------------------------ the operations, in this process

    def _mem(self, name: str) -> Path:
        return self.claude / "projects" / name / "memory"

    def _project(self, name: str) -> Project:
        d = self.claude / "projects" / name
        return Project(name, d, d / "memory")

    def _dream(self, name: str, before: dict[str, bytes], seed: int) -> str:
        C.write_tree(self._mem(name), before)
        self._script(before, seed)
        with StateStore.open(self.state_dir) as state:
            res = run_job("dream", C.job_context(self.cfg, self.claude, self.state_dir, state), [self._project(name)])
        return res.outcomes[0].outcome if res.outcomes else "skipped: " + json.dumps(res.skipped)

    def _script(self, before: dict[str, bytes], seed: int) -> None:
        C.clear(self.stub)
        self.stub.script(*C.dream_script(self.stub, before, seed))

    def _rebuild(self, name: str) -> Any:
        from memd.core.rebuild import NORMALISE
        from memd.maintenance import rebuild_project

        return rebuild_project(self._project(name), self.cfg, self.state_dir, dry_run=False, mode=NORMALISE)

    def _undo(self, name: str, run: str | None = None) -> Any:
        from memd.maintenance import undo_project

        return undo_project(self._project(name), self.cfg, self.state_dir, run, dry_run=False)

    # ------------------------------------------------------------------ one trial

    def trial(self, n: int) -> None:
        op = OPS[n % len(OPS)]
        case = self.rng.choice(self.cases)
        name, mem = case.name, self._mem(case.name)
        named = self.rng.random() < self.named_share
        spec = self.rng.choice(POINTS[op]) if named else ""
        fresh = op == "rebuild" and (spec in INIT_POINTS or (not named and self.rng.random() < self.fresh_share))
        if op == "rebuild":
            start, end = case.broken, case.rebuilt
            C.write_tree(mem, start)
            if fresh:  # no history yet: the kill lands in its first setup
                shutil.rmtree(history.repo_dir(self.state_dir, name), ignore_errors=True)
                self.stats["rebuilds with no history yet"] += 1
        elif op == "undo":
            if self._dream(name, case.before, case.seed) != "changed" or C.tree(mem) != case.dreamt:
                self.violations.append(f"trial {n}: the dream before the undo was not as an uninterrupted one")
                return
            start, end = case.dreamt, case.before
        else:
            start, end = case.before, case.dreamt
            C.write_tree(mem, start)
            self._script(start, case.seed)
        where = f"trial {n} {op} ({spec or 'random'})"
        known = {r.run for r in history.list_runs(self.state_dir, name, limit=1000)}
        killed = self._run_child(op, name, spec + "=kill" if spec else "", case.took[op], where)
        self.stats[f"{op} {'killed' if killed else 'completed'}"] += 1
        self.kills[(spec or "random") if killed else "(not killed)"] += 1
        self._check(n, op, where, name, mem, start, end, known, killed)

    def _run_child(self, op: str, name: str, spec: str, took: float, where: str) -> bool:
        if op == "dream":
            target: Any = C.dream_child
            args: tuple[Any, ...] = (self.stub.base_url, str(self.claude), str(self.state_dir), name, spec)
        else:
            target = C.history_child
            args = (op, str(self.claude), str(self.state_dir), name, spec)
        p = self.ctx.Process(target=target, args=args)
        p.start()
        if not spec:
            time.sleep(self.rng.uniform(0.0, took * 1.5))
            p.kill()
        p.join(90)
        if p.is_alive():
            p.kill()
            p.join()
            self.violations.append(f"{where}: the run hung")
        if p.exitcode not in (0, 1, -9):
            self.violations.append(f"{where}: the run ended with exit status {p.exitcode}")
        return p.exitcode == -9

    def _check(self, n: int, op: str, where: str, name: str, mem: Path, start: dict[str, bytes],
               end: dict[str, bytes], known: set[str], killed: bool) -> None:
        left = set(C.temps(mem))
        live = {k: v for k, v in C.tree(mem).items() if k not in left}
        for rel in sorted(set(live) | set(start) | set(end)):
            self.stats["files checked"] += 1
            if live.get(rel) not in (start.get(rel), end.get(rel)):
                self.violations.append(f"{where}: {rel} is neither before nor after")
        state = "before" if live == start else ("after" if live == end else "mixed")
        self.stats[f"{op} left {state}"] += 1
        allowed = set(_dangling_of(self.work, start)) | set(_dangling_of(self.work, end))
        extra = [d for d in C.dangling(mem) if d not in allowed]
        if extra:
            self.violations.append(f"{where}: the index links a missing file: {extra[:2]}")
        try:
            C.history_readable(self.state_dir, name)
        except Exception as e:  # any error reading the history back is a violation
            self.violations.append(f"{where}: the history cannot be read: {type(e).__name__}: {e}")
        repo = history.repo_dir(self.state_dir, name)
        self.stats["dulwich locks left by the kill"] += len(_locks(repo))
        new = [r for r in history.list_runs(self.state_dir, name, limit=1000) if r.run not in known]
        if state != "before" and not new:
            self.violations.append(f"{where}: the folder changed ({state}) and `memd history` lists no new run")
        try:
            if op == "undo":
                # the next run is the undo again: it finishes the job, and the folder is as before the dream
                self.stats["next runs (undo)"] += 1
                self._undo(name)
                if C.tree(mem) != end:
                    self.violations.append(f"{where}: the next undo did not give back the folder before the dream: "
                                           f"{_differ(C.tree(mem), end)}")
            else:
                if new:
                    self.stats["killed runs undone"] += 1
                    self._undo(name, new[0].run)
                    if C.tree(mem) != start:
                        self.violations.append(f"{where}: undo of the killed run did not restore it exactly: "
                                               f"{_differ(C.tree(mem), start)}")
                    C.write_tree(mem, start)
                self._next(n, op, where, name, mem, start, end)
        except Exception as e:  # the next run must succeed, whatever the kill left
            self.violations.append(f"{where}: the next run failed: {type(e).__name__}: {e}")
        try:  # whatever the next run wrote, the history can be written now, and holds no lock after
            history.snapshot(self.state_dir, name, mem, "campaign: the history can be written")
        except Exception as e:
            self.violations.append(f"{where}: the history cannot be written: {type(e).__name__}: {e}")
        if _locks(repo):
            self.violations.append(f"{where}: dulwich locks left after the next run: {_locks(repo)[:3]}")
        prefix = getattr(history, "INIT_PREFIX", ".memd-init.")  # (getattr: the campaign also runs on older code)
        if repo.parent.is_dir() and any(p.name.startswith(prefix) for p in repo.parent.iterdir()):
            self.violations.append(f"{where}: a half-made repository left in {repo.parent}")
        if C.temps(mem):
            self.violations.append(f"{where}: temp files left after the next run: {C.temps(mem)}")

    def _next(self, n: int, op: str, where: str, name: str, mem: Path, start: dict[str, bytes],
              end: dict[str, bytes]) -> None:
        """The next run, from where the operation started: exactly as an uninterrupted one."""
        C.write_tree(mem, start)
        if op == "rebuild" or n % 2:
            self.stats["next runs (rebuild)"] += 1
            r = self._rebuild(name)
            want = self.cases_by_name(name).rebuilt if op == "rebuild" else None
            if r.error or r.conflict or (want is not None and C.tree(mem) != want):
                self.violations.append(f"{where}: the next rebuild was not as an uninterrupted one: {r.reasons}")
            elif r.written and history.list_runs(self.state_dir, name, limit=1)[0].job != "rebuild":
                self.violations.append(f"{where}: the next rebuild is not in the history")
            return
        self.stats["next runs (dream)"] += 1
        seed = self.cases_by_name(name).seed
        out = self._dream(name, start, seed)
        if out != "changed" or C.tree(mem) != end:
            self.violations.append(f"{where}: the next dream was {out}, "
                                   f"{'as' if C.tree(mem) == end else 'not as'} an uninterrupted one")

    def cases_by_name(self, name: str) -> Case:
        return next(c for c in self.cases if c.name == name)


@contextlib.contextmanager
def _counted_logs(events: Counter[str]) -> Iterator[None]:
    """This process's structlog events counted by name, not printed (the next runs log each recovered
    lock); the configuration before is put back."""
    import structlog

    def count(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        events[str(event.get("event", ""))] += 1
        raise structlog.DropEvent

    old = structlog.get_config()
    structlog.configure(processors=[count])
    try:
        yield
    finally:
        structlog.configure(**old)


def _locks(repo: Path) -> list[str]:
    return [str(p.relative_to(repo)) for p in repo.rglob("*.lock")] if repo.is_dir() else []


def _differ(a: dict[str, bytes], b: dict[str, bytes]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))[:3]


_dangling_cache: dict[int, list[str]] = {}


def _dangling_of(work: Path, files: dict[str, bytes]) -> list[str]:
    """The index's links to missing files in a folder holding exactly files (cached)."""
    key = hash(tuple(sorted(files.items())))
    if key not in _dangling_cache:
        d = work / "dangling-probe"
        C.write_tree(d, files)
        _dangling_cache[key] = C.dangling(d)
    return _dangling_cache[key]


def run(trials: int, seed: int = 1, folders: list[Path] | None = None, work: Path | None = None, *,
        scripts: int = 2, named_share: float = 0.6, fresh_share: float = 0.25, progress: bool = False,
        minutes: float = 0.0) -> dict[str, Any]:
    """Run the campaign; returns its figures (``violations`` empty when nothing was lost or wedged).
    Trials cycle through rebuild, undo and dream; ``named_share`` of them are killed at a named point."""
    os.environ.setdefault("ANTHROPIC_API_KEY", "test")
    os.environ.pop("ANTHROPIC_BASE_URL", None)
    srcs = folders if folders is not None else C.real_memory_folders()
    if not srcs:
        raise SystemExit("no real memory folder (../shared/claude-data is absent)")
    stub = StubAPI()
    t0 = time.monotonic()
    events: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="memd-crash-history-", dir=work) as tmp, _counted_logs(events):
        c = Campaign(Path(tmp), stub, srcs, seed, scripts=scripts, named_share=named_share, fresh_share=fresh_share)
        done = C.run_trials(c, trials, t0, minutes=minutes, progress=progress)
    stub.close()
    c.stats.update({f"logged {k}": v for k, v in events.items() if k.startswith("history.")})
    killed = sum(v for k, v in c.kills.items() if k != "(not killed)")
    return {"trials": done, "trials_asked": trials, "folders": [s.parent.name for s in srcs], "killed": killed,
            "kills_by_point": dict(sorted(c.kills.items())), "stats": dict(sorted(c.stats.items())),
            "violations": c.violations, "seconds": round(time.monotonic() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scripts", type=int, default=2, help="consolidations scripted per folder")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop after this long (0: no limit)")
    args = ap.parse_args()
    print(json.dumps(run(args.trials, args.seed, scripts=args.scripts, progress=True, minutes=args.minutes),
                     indent=2))


if __name__ == "__main__":
    main()
