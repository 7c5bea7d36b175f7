"""`check --all` over many projects in forked worker processes (memd.inspect.check_projects, jobs > 1):
the same answers as one process, the workers' cache entries kept by the parent, a repeated run answered
without forking, and one process when workers cannot be had."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memd import checkcache, inspect
from memd.config import Config
from memd.inspect import check_projects, parallel_jobs
from memd.layout import Project

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    checkcache._OPEN.clear()
    monkeypatch.setattr(inspect, "PARALLEL_MIN", 4)
    yield
    checkcache._OPEN.clear()


def make(root: Path, n: int) -> list[Project]:
    """n projects, each with its own findings: a missing link in every third, a secret in every fifth,
    a relative date in every seventh, no memory folder in every eleventh."""
    out = []
    past = time.time() - 60
    for i in range(n):
        pdir = root / f"-p{i:03d}"
        mem = pdir / "memory"
        if i % 11 == 10:
            pdir.mkdir(parents=True)
            out.append(Project(pdir.name, pdir, mem))
            continue
        mem.mkdir(parents=True)
        links = "- [A](a.md) — a\n" + ("- [Gone](gone.md) — missing\n" if i % 3 == 0 else "")
        (mem / "MEMORY.md").write_text(f"# Memory {i}\n\n{links}")
        body = f"body {i}\n"
        if i % 5 == 0:
            body += "the key is AKIA" + "Q3ZZMPLEZ7Y4BQWA\n"  # (AWS's docs key ...EXAMPLE is no secret)
        if i % 7 == 0:
            body += "We changed it yesterday.\n"
        (mem / "a.md").write_text(f"---\nname: a{i}\ndescription: d\ntype: user\n---\n{body}")
        for p in (mem / "MEMORY.md", mem / "a.md", mem):
            os.utime(p, (past, past))
        out.append(Project(pdir.name, pdir, mem))
    return out


def answers(report: inspect.CheckReport) -> list[tuple[str, bool, int, list[object]]]:
    return [(r.project.name, r.exists, r.lines, [tuple(f) for f in r.findings]) for r in report.results]


def test_workers_give_the_answers_of_one_process(tmp_path: Path) -> None:
    ps = make(tmp_path / "projects", 40)
    one = check_projects(ps, Config(), skip_missing=True)
    steps: list[str] = []
    many = check_projects(ps, Config(), skip_missing=True, jobs=3, step=steps.append)
    assert answers(many) == answers(one) and many.skipped == one.skipped == 3
    assert sorted(steps) == sorted(p.name for p in ps)  # every project told to the progress bar once
    codes = {f.code for r in many.results for f in r.findings}
    assert {"MEM005", "MEM050", "MEM040"} <= codes, codes  # the fixture's findings are really there


def test_work_really_happens_in_other_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ps = make(tmp_path / "projects", 24)
    pids = multiprocessing.get_context("fork").Manager().list()  # shared across the forks
    real = inspect.check_snapshot

    def spy(*a: object, **k: object) -> inspect.ProjectCheck:
        pids.append(os.getpid())
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(inspect, "check_snapshot", spy)
    check_projects(ps, Config(), jobs=2)
    seen = list(pids)
    assert len(seen) == 24 and os.getpid() not in seen  # (how the chunks fall to the two is up to the pool)


def test_the_workers_cache_entries_are_written_once_by_the_parent(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ps = make(tmp_path / "projects", 30)
    state = tmp_path / "state"
    writes: list[tuple[int, int]] = []
    real = checkcache._write
    monkeypatch.setattr(checkcache, "_write", lambda c, **kw: (writes.append((os.getpid(), len(c.changed))),
                                                              real(c, **kw)))
    first = check_projects(ps, Config(), cache_dir=state, skip_missing=True, jobs=2)
    assert writes == [(os.getpid(), 30)]  # one write, by this process, of every folder
    folders = json.loads((state / "cache" / "check.json").read_text())["folders"]
    assert len(folders) == 30
    # a new process: every folder answered by the quick check, in this process, nothing read, no fork
    checkcache._OPEN.clear()
    from memd.memfolder import folder

    monkeypatch.setattr(folder, "read_folder", lambda *a, **k: pytest.fail("read an unchanged folder"))
    monkeypatch.setattr(multiprocessing, "get_context", lambda *a: pytest.fail("forked for a repeated run"))
    again = check_projects(ps, Config(), cache_dir=state, skip_missing=True, jobs=2)
    assert answers(again) == answers(first) and writes == [(os.getpid(), 30)]


def test_a_changed_folder_is_checked_again_by_the_workers(tmp_path: Path) -> None:
    ps = make(tmp_path / "projects", 30)
    state = tmp_path / "state"
    check_projects(ps, Config(), cache_dir=state, skip_missing=True, jobs=2)
    # every other folder gains a broken link, in place, with the same size, times kept
    for p in ps[::2]:
        idx = p.memory_dir / "MEMORY.md"
        if idx.exists():
            st = idx.stat()
            idx.write_text(idx.read_text().replace("(a.md)", "(b.md)"))
            os.utime(idx, ns=(st.st_atime_ns, st.st_mtime_ns))
    checkcache._OPEN.clear()
    again = check_projects(ps, Config(), cache_dir=state, skip_missing=True, jobs=2)
    checkcache._OPEN.clear()
    fresh = check_projects(ps, Config(), skip_missing=True)
    assert answers(again) == answers(fresh)
    broken = {r.project.name for r in again.results for f in r.findings if "b.md" in f.message}
    assert broken == {p.name for p in ps[::2] if p.memory_dir.exists()}


def test_no_workers_to_be_had_means_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ps = make(tmp_path / "projects", 12)
    one = check_projects(ps, Config())

    class NoFork:
        def Pool(self, n: int) -> None:
            raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(multiprocessing, "get_context", lambda *a: NoFork())
    assert answers(check_projects(ps, Config(), jobs=2)) == answers(one)


def test_how_many_processes() -> None:
    assert parallel_jobs(1, 10_000) == 1
    assert parallel_jobs(4, 3) == 1  # below PARALLEL_MIN (4 in these tests)
    assert parallel_jobs(4, 100) == 4
    assert 1 <= parallel_jobs(None, 100) <= 8


def test_jobs_option(tmp_path: Path) -> None:
    claude = tmp_path / ".claude"
    make(claude / "projects", 6)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "st"),
           "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    memd = [sys.executable, "-m", "memd", "--claude-dir", str(claude), "check", "--all"]
    outs = [subprocess.run([*memd, *extra], capture_output=True, text=True, env=env, check=False)
            for extra in (["-j", "1", "--no-cache"], ["--jobs", "2", "--no-cache"])]
    assert outs[0].returncode == outs[1].returncode == 1  # the fixture has errors
    assert outs[0].stdout == outs[1].stdout and "MEM005" in outs[0].stdout
    for bad in ("0", "-3", "two"):
        r = subprocess.run([*memd, "--jobs", bad], capture_output=True, text=True, env=env, check=False)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert f"expected a whole number of processes, 1 or more, not {bad!r}" in r.stderr
