"""One folder with every awkward shape: every part of memd sees the same topic files (issue 9).

The set is the one rule of ``memd.core.paths`` (Claude Code 2.1.328's recall manifest: ``*.md`` at any
depth, no ``MEMORY.md`` anywhere, nothing hidden but ``team/<file>``, nothing in the top-level
``logs/``, ``sessions/``, ``proposals/`` nor below team/'s first level; symlinked folders inside
adding nothing; less memd's deviation: no symlink leaving the folder, nothing memd cannot read whole), and check,
status, the daemon's count, recall's manifest, the model jobs' manifest, staging and the history
must all answer with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memd import apply as ap
from memd import history
from memd.config import BudgetConfig, Config
from memd.core.paths import is_index
from memd.core.rebuild import NORMALISE
from memd.daemon.budget import count_topic_files
from memd.layout import Project
from memd.memfolder.folder import read_folder
from memd.memfolder.manifest import build, for_model
from memd.memfolder.walk import DEFAULT_MAX_BYTES, list_files
from tests.plugins.memory_folders import topic, write_tree

EXPECTED = {"a.md", "link.md", "team/t.md", "team/.th.md", "sub/nested.md", "sub/deeper/d.md", "dir.md/inner.md"}
# named like memory, not topic files by the rule: an index entry linking one stays, none is added for one
NOT_TOPICS = {"sub/MEMORY.md", "team/sub/s.md", "logs/l.md", "Sessions./s.md", "proposals/p.md", ".hidden.md",
              "sub/.hidden.md"}


def awkward(mem: Path, outside: Path) -> None:
    write_tree(mem, {
        "MEMORY.md": "- [A](a.md) — a\n- [Big](big.md) — too large to read\n",
        "a.md": topic("A", "a plain topic file", "user"),
        "team/MEMORY.md": "- [T](t.md) — team\n",  # team/'s own index: not a topic
        "team/t.md": topic("T", "a team memory", "project"),
        "team/.th.md": topic("TH", "a hidden team memory: listed by Claude Code", "project"),
        "team/sub/s.md": topic("TS", "below team's first level", "project"),
        "sub/MEMORY.md": "- [N](nested.md)\n",
        "logs/l.md": topic("L", "in logs/", "project"),
        "Sessions./s.md": topic("S", "in Sessions./", "project"),
        "proposals/p.md": topic("P", "in proposals/", "project"),
        "sub/nested.md": topic("N", "in a sub-folder", "reference"),
        "sub/deeper/d.md": topic("D", "two levels down", "feedback"),
        "sub/.hidden.md": topic("H", "a hidden file in a sub-folder", "user"),
        "dir.md/inner.md": topic("I", "in a folder named like a file", "user"),
        ".hidden.md": topic("H", "a hidden file", "user"),
        ".hidden/x.md": topic("X", "in a hidden folder", "user"),
        "notes.txt": "not markdown\n",
        ".memd-a.md.12345.0123abcd.tmp": "a temp file memd left mid-write\n",
        ".consolidate-lock": "1\n",
    })
    write_tree(outside, {"secret.md": topic("S", "outside the folder", "user"),
                         "folder/o.md": topic("O", "in a folder outside", "user")})
    os.symlink("a.md", mem / "link.md")  # a symlink to a file inside: counts
    os.symlink(outside / "secret.md", mem / "out.md")  # leaves the folder: never followed
    os.symlink(mem / "nowhere.md", mem / "broken.md")
    os.symlink(mem / "sub", mem / "linked")  # a symlinked folder inside adds nothing (Claude Code walks it once)
    os.symlink(mem / ".hidden", mem / "peek")  # nor one to a hidden folder
    os.symlink(outside / "folder", mem / "ext")  # a symlinked folder outside: never entered
    os.mkfifo(mem / "fifo.md")
    with open(mem / "big.md", "wb") as f:  # over the size cap (sparse: costs nothing)
        f.truncate(DEFAULT_MAX_BYTES + 1)
    if os.geteuid() != 0:  # root reads whatever the mode: the case needs a plain user
        (mem / "locked.md").write_text(topic("L", "unreadable", "user"))
        (mem / "locked.md").chmod(0)


@pytest.fixture
def folder(make_project: Callable[..., Path], tmp_path: Path) -> Iterator[Path]:
    mem = make_project("-home-u-awkward")
    awkward(mem, tmp_path / "outside")
    yield mem
    if (mem / "locked.md").exists():
        (mem / "locked.md").chmod(0o644)


def test_every_reader_sees_the_same_topic_files(folder: Path, tmp_path: Path,
                                                memd_cli: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    budget = BudgetConfig()
    project = Project("-home-u-awkward", folder.parent, folder)
    state = tmp_path / "state"

    # the owner's own listing
    assert {f.rel for f in list_files(folder).topics()} == EXPECTED
    # check (and rebuild, which reads the same snapshot)
    assert {f.rel for f in read_folder(folder, budget, signatures=False).topics()} == EXPECTED
    # status (the real command: its count, through check and its cache, twice)
    for _ in range(2):
        out = memd_cli("status", "--format", "json")
        assert out.returncode == 0, out.stderr
        (row,) = json.loads(out.stdout)["projects"]
        assert row["topic_files"] == len(EXPECTED)
    # the daemon's count for the "more topic files than recall scans" warning
    assert count_topic_files(folder, budget.max_file_bytes) == len(EXPECTED)
    # recall's manifest, and the model jobs' manifest (the same builder)
    assert {e.name for e in build(folder, max_files=1000).entries} == EXPECTED
    rows = for_model(folder, budget).splitlines()
    assert {r.split()[1].removeprefix("/memories/") for r in rows} == EXPECTED
    # staging: what the memory tool sees is the staged copy
    st = ap.stage(state, project, "agree", ap.new_run_id("agree", time.time()), max_file_bytes=budget.max_file_bytes)
    try:
        staged = {p.relative_to(st.root).as_posix() for p in st.root.rglob("*") if p.is_file()}
        assert {r for r in staged if not is_index(r)} == EXPECTED
        assert set(st.baseline) == staged
    finally:
        st.cleanup()
    # snapshots: the history commit holds the same files
    commit = history.snapshot(state, project.name, folder, "agreement")
    assert {r for r in history.files_at(state, project.name, commit) if not is_index(r)} == EXPECTED


def test_the_link_inside_is_read_at_its_target_and_nothing_outside_is_read(folder: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    commit = history.snapshot(state, "-p", folder, "x")
    files = history.files_at(state, "-p", commit)
    assert files["link.md"] == (folder / "a.md").read_bytes()
    assert not any(b"outside the folder" in data or b"in a folder outside" in data for data in files.values())
    entries = {e.name: e for e in build(folder).entries}
    assert entries["link.md"].path == (folder / "a.md").resolve()


def test_the_model_manifest_carries_the_live_folders_mtimes(folder: Path, tmp_path: Path) -> None:
    project = Project("-home-u-awkward", folder.parent, folder)
    old = 1_600_000_000.0  # 2020-09-13
    os.utime(folder / "a.md", (old, old))
    st = ap.stage(tmp_path / "state", project, "agree", ap.new_run_id("agree", time.time()))
    try:
        live = {r.split()[1]: r.split()[3] for r in for_model(st.root, Config().budget, live=folder).splitlines()}
        copy = {r.split()[1]: r.split()[3] for r in for_model(st.root, Config().budget).splitlines()}
    finally:
        st.cleanup()
    assert live["/memories/a.md"] == "2020-09-13"  # the memory's own date, not the day it was staged
    assert copy["/memories/a.md"] != "2020-09-13"


def test_rebuild_indexes_only_topic_files_and_drops_no_entry_of_a_file_that_is_there(folder: Path) -> None:
    """A ``*.md`` file that is there but no topic file by the rule (``logs/l.md``, ``sub/MEMORY.md``, ...)
    keeps the entry that links it and gets none added; a symlink leaving the folder is read by Claude
    Code, so its entry stays too. Only topic files are indexed."""
    from memd.core.rebuild import plan_rebuild, topics_of

    kept = sorted(NOT_TOPICS | {"out.md", "team/t.md"})
    index_text = "".join(f"- [K{i}]({rel}) — kept\n" for i, rel in enumerate(kept)) + "- [Gone](gone.md)\n"
    plan = plan_rebuild(index_text, topics_of(read_folder(folder, BudgetConfig(), signatures=False)), mode=NORMALISE)
    assert [a for a in plan.actions if a.startswith("dropped")] == [
        "dropped entry 'Gone' at line 10: gone.md does not exist"]
    added = {a.split()[1] for a in plan.actions if a.startswith("indexed")}
    assert added == EXPECTED - {"team/t.md", "team/.th.md"}  # team/ is never indexed in the project's index
