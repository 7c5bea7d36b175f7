"""Unattended rebuilds (the dream without a model, auto relief) never drop an index wholesale."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memd.config import Config
from memd.core.rebuild import NORMALISE
from memd.layout import Project
from memd.maintenance import dropped_entries, rebuild_project


def _folder(root: Path, entries: int, live: int) -> Project:
    mem = root / "projects" / "-home-me-app" / "memory"
    mem.mkdir(parents=True)
    lines = ["# Memory", ""]
    for i in range(entries):
        lines.append(f"- [Fact {i}](fact_{i}.md) — what fact {i} says")
        if i < live:
            (mem / f"fact_{i}.md").write_text(
                f"---\nname: Fact {i}\ndescription: what fact {i} says\ntype: project\n---\nbody {i}\n")
    (mem / "MEMORY.md").write_text("\n".join(lines) + "\n")
    return Project("-home-me-app", mem.parent, mem)


def test_dropped_entries_counts_targets_no_longer_linked() -> None:
    old = "- [a](a.md) — x\n- [b](b.md) — y\n- [a again](a.md) — x\n"
    assert dropped_entries(old, "- [a](a.md) — x\n") == (1, 3)
    assert dropped_entries(None, "- [a](a.md)\n") == (0, 0)


def test_unattended_rebuild_refuses_to_drop_most_entries(tmp_path: Path) -> None:
    project = _folder(tmp_path, entries=8, live=2)
    before = project.index_path.read_bytes()
    res = rebuild_project(project, Config(), tmp_path / "state", dry_run=False, max_drop_share=0.25, mode=NORMALISE)
    assert res.refused and not res.written
    assert "6 of 8" in res.reasons[-1]
    assert project.index_path.read_bytes() == before
    # a person asking for it gets it (snapshot first)
    res = rebuild_project(project, Config(), tmp_path / "state", dry_run=False, mode=NORMALISE)
    assert res.written and res.snapshot
    assert "fact_7.md" not in project.index_path.read_text()


def test_unattended_rebuild_may_drop_a_few(tmp_path: Path) -> None:
    project = _folder(tmp_path, entries=8, live=7)
    res = rebuild_project(project, Config(), tmp_path / "state", dry_run=False, max_drop_share=0.25, mode=NORMALISE)
    assert res.written and not res.refused
    assert "fact_7.md" not in project.index_path.read_text()


def test_dream_without_a_key_leaves_an_index_of_dangling_links_alone(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    project = _folder(claude, entries=20, live=0)
    before = project.index_path.read_bytes()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "xs"), XDG_CONFIG_HOME=str(tmp_path / "xc"))
    out = subprocess.run([sys.executable, "-m", "memd", "dream", "--claude-dir", str(claude), "-home-me-app",
                          "--force"], capture_output=True, text=True, env=env, timeout=120)
    assert "Traceback" not in out.stderr
    assert project.index_path.read_bytes() == before
    assert "refused" in (out.stdout + out.stderr)
