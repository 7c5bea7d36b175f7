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


# --------------------------------------------------------------------------- the quick check
# A repeated check answers from folder stamps and file stats without listing folders: each change
# below must still be seen (a stale answer here would be a wrong `memd check`).


def _quick_setup(tmp_path: Path) -> tuple[Project, Path, list[str]]:
    (p,) = projects(tmp_path / "projects", 1)
    sub = p.memory_dir / "sub"
    sub.mkdir()
    (sub / "b.md").write_text("---\nname: b\ndescription: e\ntype: user\n---\nbody b\n")
    past = time.time() - 60
    for f in (sub / "b.md", sub, p.memory_dir):
        os.utime(f, (past, past))
    state = tmp_path / "state"
    from memd.inspect import check_project

    first = check_project(p, BudgetConfig(), cache_dir=state)
    checkcache._OPEN.clear()
    entry = json.loads((state / "cache" / "check.json").read_text())["folders"][str(p.memory_dir)]
    assert entry["quick"][0].split("\0") == ["", "sub"]  # the quick check is offered: both folders
    return p, state, [f.code for f in first.findings]


def _codes(p: Project, state: Path) -> list[str]:
    from memd.inspect import check_project

    checkcache._OPEN.clear()  # as a new process reads it
    return [f.code for f in check_project(p, BudgetConfig(), cache_dir=state).findings]


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    seen: list[bool] = []
    real = checkcache._unchanged
    monkeypatch.setattr(checkcache, "_unchanged", lambda d, e: seen.append(real(d, e)) or seen[-1])
    return seen


def test_quick_check_answers_an_unchanged_folder_without_listing_it(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    p, state, codes = _quick_setup(tmp_path)
    from memd.memfolder import folder

    seen = _spy(monkeypatch)
    monkeypatch.setattr(folder, "fingerprint", lambda *a, **k: pytest.fail("listed an unchanged folder"))
    assert _codes(p, state) == codes and seen == [True]


def test_quick_check_sees_an_edit_in_place_of_the_same_size_and_second(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    p, state, codes = _quick_setup(tmp_path)
    assert "MEM025" not in codes
    b = p.memory_dir / "sub" / "b.md"
    st = b.stat()
    text = b.read_text().replace("type: user", "type: nope")  # same length: MEM025 appears
    with open(b, "r+") as f:  # in place: same inode, the folder untouched
        f.write(text)
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))  # even the same mtime: the ctime still moves
    assert b.stat().st_size == st.st_size and b.stat().st_ino == st.st_ino
    seen = _spy(monkeypatch)
    assert "MEM025" in _codes(p, state) and seen == [False]


def test_quick_check_sees_files_added_removed_and_renamed(tmp_path: Path) -> None:
    p, state, codes = _quick_setup(tmp_path)
    extra = p.memory_dir / "sub" / "c.md"
    extra.write_text("---\nname: c\ndescription: f\ntype: user\n---\nbody c\n")
    assert _codes(p, state).count("MEM010") == codes.count("MEM010") + 1  # a new file, not indexed
    extra.unlink()
    assert _codes(p, state) == codes
    (p.memory_dir / "a.md").rename(p.memory_dir / "a2.md")  # the index now links a file that is gone
    assert "MEM005" in _codes(p, state)


def test_quick_check_sees_a_folder_renamed_or_replaced(tmp_path: Path) -> None:
    p, state, codes = _quick_setup(tmp_path)
    sub = p.memory_dir / "sub"
    sub.rename(p.memory_dir / ".hidden")  # a hidden folder is not memory: b.md is gone from the check
    assert _codes(p, state).count("MEM010") == codes.count("MEM010") - 1
    other = p.memory_dir.parent / "memory.new"
    other.mkdir()
    (other / "MEMORY.md").write_text("# Memory\n")
    old = p.memory_dir.rename(p.memory_dir.parent / "memory.old")
    other.rename(p.memory_dir)  # the same path, another folder (with the same names as before? no matter)
    assert _codes(p, state) == []
    assert old.is_dir()


def test_quick_check_is_not_offered_for_recent_folders_or_symlinks(tmp_path: Path) -> None:
    p, state, _ = _quick_setup(tmp_path)
    (p.memory_dir / "link.md").symlink_to(p.memory_dir / "a.md")
    past = time.time() - 60
    os.utime(p.memory_dir, (past, past))
    os.utime(p.memory_dir / "link.md", (past, past), follow_symlinks=False)
    _codes(p, state)
    entry = json.loads((state / "cache" / "check.json").read_text())["folders"][str(p.memory_dir)]
    assert entry["quick"] is None  # a link's target changes without its folder
    (p.memory_dir / "link.md").unlink()
    os.utime(p.memory_dir, None)  # just now: a coarse clock could hide a second change this second
    _codes(p, state)
    entry = json.loads((state / "cache" / "check.json").read_text())["folders"][str(p.memory_dir)]
    assert entry["quick"] is None


def test_a_non_memory_file_renews_the_stamps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file no check reads (notes.txt) changes the folder's stamp but not the result: the full
    fingerprint agrees, and the entry gets the new stamps so the next run is quick again."""
    p, state, codes = _quick_setup(tmp_path)
    (p.memory_dir / "notes.txt").write_text("x")
    past = time.time() - 60
    os.utime(p.memory_dir, (past - 5, past - 5))
    seen = _spy(monkeypatch)
    assert _codes(p, state) == codes and seen == [False]
    assert _codes(p, state) == codes and seen == [False, True]
