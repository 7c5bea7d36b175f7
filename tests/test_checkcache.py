"""One cache file for every memory folder: written once per `check --all`, merged, pruned."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memd import checkcache
from memd.config import BudgetConfig, Config
from memd.inspect import check_projects
from memd.layout import Project


@pytest.fixture(autouse=True)
def fresh_process() -> Iterator[None]:
    checkcache._OPEN.clear()
    yield
    checkcache._OPEN.clear()


def projects(root: Path, n: int) -> list[Project]:
    out = []
    past = time.time() - 60
    for i in range(n):
        mem = root / f"-p{i}" / "memory"
        mem.mkdir(parents=True)
        (mem / "MEMORY.md").write_text(f"# Memory\n\n- [A](a.md) — a {i}\n")
        (mem / "a.md").write_text("---\nname: a\ndescription: d\ntype: user\n---\nbody\n")
        for p in (mem, mem / "MEMORY.md", mem / "a.md"):
            os.utime(p, (past, past))
        out.append(Project(f"-p{i}", mem.parent, mem))
    return out


def test_check_all_writes_one_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ps = projects(tmp_path / "projects", 30)
    state = tmp_path / "state"
    writes: list[int] = []
    real = checkcache._write
    monkeypatch.setattr(checkcache, "_write", lambda c, **kw: (writes.append(len(c.changed)), real(c, **kw)))
    first = check_projects(ps, Config(), cache_dir=state)
    assert writes == [30]  # one write for the whole run
    files = [p for p in state.rglob("*") if p.is_file()]
    assert [p.name for p in files] == ["check.json"]
    assert len(json.loads(files[0].read_text())["folders"]) == 30
    checkcache._OPEN.clear()
    again = check_projects(ps, Config(), cache_dir=state)
    assert writes == [30]  # everything from the cache: nothing to write
    assert [r.findings for r in again.results] == [r.findings for r in first.results]


def test_a_single_check_writes_now_and_keeps_the_others(tmp_path: Path) -> None:
    ps = projects(tmp_path / "projects", 3)
    state = tmp_path / "state"
    check_projects(ps[:2], Config(), cache_dir=state)
    checkcache._OPEN.clear()
    from memd.inspect import check_project

    check_project(ps[2], BudgetConfig(), cache_dir=state)
    data = json.loads((state / "cache" / "check.json").read_text())
    assert sorted(data["folders"]) == sorted(str(p.memory_dir) for p in ps)


def test_another_process_entries_are_merged_and_gone_folders_pruned(tmp_path: Path) -> None:
    ps = projects(tmp_path / "projects", 3)
    state = tmp_path / "state"
    check_projects(ps[:1], Config(), cache_dir=state)  # this process has read the file (one entry)
    other = checkcache._OPEN.pop(str(state))
    check_projects(ps[1:2], Config(), cache_dir=state)  # "another process" adds its entry meanwhile
    checkcache._OPEN[str(state)] = other
    (ps[0].memory_dir / "MEMORY.md").unlink()
    for f in ps[0].memory_dir.iterdir():
        f.unlink()
    ps[0].memory_dir.rmdir()
    check_projects(ps[2:], Config(), cache_dir=state)
    data = json.loads((state / "cache" / "check.json").read_text())
    assert sorted(data["folders"]) == sorted(str(p.memory_dir) for p in ps[1:])  # merged; the gone one pruned


def test_another_memd_invalidates_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ps = projects(tmp_path / "projects", 2)
    state = tmp_path / "state"
    check_projects(ps, Config(), cache_dir=state)
    checkcache._OPEN.clear()
    monkeypatch.setattr(checkcache, "_CODE_KEY", "another memd")
    assert checkcache.lookup(state, ps[0].memory_dir, BudgetConfig(), True)[1] is None
