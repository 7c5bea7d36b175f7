"""memd's own deterministic writes (issue 20): a healthy index is never rewritten by an unattended run,
the words after an entry's link are the user's, odd names and unlistable folders lose nothing.

Each test here failed before the fix it names (findings 1, 2 and 5 of issue 20).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memd.config import Config
from memd.core import guard
from memd.core import index as mindex
from memd.core.rebuild import NORMALISE, REPAIR, TopicInfo, plan_rebuild
from memd.layout import Project
from memd.maintenance import rebuild_project
from tests.conftest import ROOT

GOLDEN = Path(__file__).parent / "golden" / "rebuild"
Cli = Callable[..., subprocess.CompletedProcess[str]]


def _tree(folder: Path) -> dict[str, str]:
    """Every file under folder (hidden ones too) -> sha256 of its bytes."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _project(claude: Path, name: str, src: Path) -> Project:
    mem = claude / "projects" / name / "memory"
    shutil.copytree(src, mem)
    return Project(name, mem.parent, mem)


def _keyless(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(extra)
    return env


# ----------------------------------------------------------------------------- finding 1


def test_keyless_dream_leaves_a_healthy_index_with_long_lines_byte_for_byte(claude_home: Path, memd_cli: Cli) -> None:
    """A dream without a model, forced, on an index within its budget whose entry lines run past 150
    characters with the user's words at their ends: nothing is written (it cut them with "…")."""
    p = _project(claude_home, "-home-me-app", GOLDEN / "healthy_real_shaped" / "memory")
    before = _tree(p.memory_dir)
    out = memd_cli("dream", "-home-me-app", "--force", env=_keyless())
    assert "Traceback" not in out.stderr, out.stderr
    assert _tree(p.memory_dir) == before
    assert "(ADR-015 à réviser)" in p.index_path.read_text()
    assert "unchanged" in out.stdout + out.stderr, out.stdout + out.stderr


def test_a_person_rebuilding_is_told_line_by_line_what_a_cut_leaves_out(claude_home: Path, memd_cli: Cli) -> None:
    p = _project(claude_home, "-home-me-app", GOLDEN / "healthy_real_shaped" / "memory")
    before = _tree(p.memory_dir)
    dry = memd_cli("rebuild", "-home-me-app", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert 'leaving out "details (ADR-015 à réviser)"' in dry.stdout
    assert 'leaving out "lines removed)"' in dry.stdout
    assert _tree(p.memory_dir) == before
    minimal = memd_cli("rebuild", "-home-me-app", "--minimal")
    assert "already in order" in minimal.stdout and _tree(p.memory_dir) == before


def test_a_repair_over_budget_cuts_only_lines_whose_words_a_file_keeps() -> None:
    """Over the budget the repair may shorten, but only hooks that repeat their file's description,
    longest first and only until the index fits; a line with the user's own note is left whole."""
    topics = {f"p{i}.md": TopicInfo(f"p{i}.md", f"P{i}", f"description {i} " + "word " * 40, "project")
              for i in range(150)}
    topics["u.md"] = TopicInfo("u.md", "U", "short", "user")
    note = "- [U](u.md) — short; the user's own note: " + "never deploy on Fridays, " * 8
    lines = ["# Memory", note] + [f"- [P{i}](p{i}.md) — {topics[f'p{i}.md'].description}" for i in range(150)]
    text = "\n".join(lines) + "\n"
    assert mindex.measure(text).level == "over"
    plan = plan_rebuild(text, topics, mode=REPAIR)
    assert plan.fits
    assert note in plan.text.splitlines()
    cut = [a for a in plan.actions if a.startswith("shortened")]
    assert 0 < len(cut) < 150  # only until it fits
    assert mindex.measure(plan.text).level != "over"


def test_keyless_dream_of_every_real_project_within_budget_changes_no_byte(claude_data: Path, tmp_path: Path) -> None:
    """On a copy of ../shared/claude-data: `memd dream --force` without a key touches no file of a
    memory folder whose index is within its budget (it rewrote 3 of 4 real folders)."""
    projects = claude_data / "projects"
    healthy = []
    for mem in sorted(projects.glob("*/memory")):
        idx = mem / "MEMORY.md"
        if idx.is_file() and mindex.measure(idx.read_text(encoding="utf-8")).level != "over":
            healthy.append(mem)
    assert healthy, "the shared data holds real memory folders within budget"
    before = {m: _tree(m) for m in healthy}
    env = _keyless(HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "xs"), XDG_CONFIG_HOME=str(tmp_path / "xc"))
    for mem in healthy:
        out = subprocess.run([sys.executable, "-m", "memd", "--claude-dir", str(claude_data), "dream",
                              mem.parent.name, "--force"], capture_output=True, text=True, env=env, timeout=120,
                             cwd=ROOT)
        assert "Traceback" not in out.stderr, out.stderr
        assert _tree(mem) == before[mem], f"{mem.parent.name}: {out.stdout}{out.stderr}"


# ----------------------------------------------------------------------------- finding 2

RUNBOOK = "- [Runbook](https://runbooks.example.com/deploy) — restart order: db, api, web; page #oncall first"


def _files(index: str, **topics: str) -> dict[str, bytes]:
    out = {"MEMORY.md": index.encode()}
    for name, desc in topics.items():
        out[f"{name}.md"] = f"---\nname: {name}\ndescription: {desc}\ntype: project\n---\n\nbody of {name}\n".encode()
    return out


def test_guard_refuses_a_run_that_drops_the_words_after_a_link() -> None:
    before = _files(f"# Memory\n- [A](a.md) — the a file\n{RUNBOOK}\n", a="the a file")
    after = _files("# Memory\n- [A](a.md) — the a file\n", a="the a file")
    res = guard.check(before, after, guard.GuardLimits())
    assert not res.passed
    assert any("restart order: db, api, web; page #oncall first" in r for r in res.reasons), res.reasons
    # kept on the line, or moved into a topic file: allowed
    moved = dict(after)
    moved["a.md"] = after["a.md"] + b"Runbook: restart order: db, api, web; page #oncall first\n"
    assert guard.check(before, moved, guard.GuardLimits()).passed


def test_guard_refuses_a_note_cut_off_a_description_but_allows_a_merge_of_derived_hooks() -> None:
    before = _files("- [A](a.md) — the a file (ADR-015 à réviser)\n- [B](b.md) — the b file\n",
                    a="the a file", b="the b file")
    cut = _files("- [A](a.md) — the a file\n- [B](b.md) — the b file\n", a="the a file", b="the b file")
    res = guard.check(before, cut, guard.GuardLimits())
    assert not res.passed and any("ADR-015 à réviser" in r for r in res.reasons), res.reasons
    # a merge: b.md folded into a.md and deleted, its entry (which only repeated its description) gone
    merged = _files("- [A](a.md) — the a and b files (ADR-015 à réviser)\n", a="the a and b files")
    merged["a.md"] += b"body of b\n"
    assert guard.check(before, merged, guard.GuardLimits()).passed, guard.check(before, merged, guard.GuardLimits())


def test_rebuild_keeps_the_words_of_an_entry_whose_file_is_gone(claude_home: Path, memd_cli: Cli) -> None:
    p = _project(claude_home, "-home-me-app", GOLDEN / "dangling_with_notes" / "memory")
    out = memd_cli("rebuild", "-home-me-app")
    assert out.returncode == 0, out.stdout + out.stderr
    text = p.index_path.read_text()
    assert "- VPN notes — ask Sam for the staging VPN token" in text.splitlines()
    assert "vpn_notes.md" not in text and "deploy_old.md" not in text
    dropped = memd_cli("rebuild", "-home-me-app", "--drop-notes", "--dry-run")
    # the kept line is prose now: --drop-notes has no entry left to drop
    assert "already in order" in dropped.stdout and "ask Sam" in p.index_path.read_text()
    # on a fresh copy, --drop-notes drops it and quotes the words that go
    shutil.rmtree(p.memory_dir)
    p = _project(claude_home, "-home-me-app", GOLDEN / "dangling_with_notes" / "memory")
    dropped = memd_cli("rebuild", "-home-me-app", "--drop-notes")
    assert 'dropped entry \'VPN notes\' at line 4 and its words "ask Sam for the staging VPN token"' in dropped.stdout
    assert "ask Sam" not in p.index_path.read_text()
    # the words are in the snapshot taken before: `memd undo` brings them back
    undo = memd_cli("undo", "-home-me-app")
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert "ask Sam for the staging VPN token" in p.index_path.read_text()


def test_repair_refuses_a_plan_that_would_drop_the_users_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The invariant behind the plan, checked before writing: were a repair ever to drop the user's
    words (a bug), it is refused, not written."""
    from memd.core import rebuild as core_rebuild

    mem = tmp_path / "p" / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text(f"# Memory\n{RUNBOOK}\n")
    def lossy(text: str | None, topics: dict[str, TopicInfo], budget: object = None, **kw: object) -> object:
        return core_rebuild.RebuildPlan("# Memory\n", text, True, [], ["dropped the runbook"])

    monkeypatch.setattr(core_rebuild, "plan_rebuild", lossy)
    res = rebuild_project(Project("p", mem.parent, mem), Config(), tmp_path / "state", dry_run=False, mode=REPAIR)
    assert res.refused and not res.written
    assert "restart order" in res.reasons[-1]
    assert RUNBOOK in (mem / "MEMORY.md").read_text()


# ----------------------------------------------------------------------------- finding 5


def test_a_topic_file_named_with_a_line_break_is_indexed_once(tmp_path: Path) -> None:
    mem = tmp_path / "p" / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("# Memory\n")
    (mem / "odd\nname.md").write_text("---\nname: Odd\ndescription: an odd name\ntype: user\n---\n\nbody\n")
    project = Project("p", mem.parent, mem)
    first = rebuild_project(project, Config(), tmp_path / "state", dry_run=False, mode=REPAIR)
    assert first.written
    text = (mem / "MEMORY.md").read_text()
    entries = mindex.parse(text).entries
    assert [e.file for e in entries] == ["odd\nname.md"]
    assert all(ln.startswith(("#", "- [", "")) for ln in text.splitlines())
    for _ in range(3):  # every later rebuild (and keyless dream) appended another broken entry
        again = rebuild_project(project, Config(), tmp_path / "state", dry_run=False, mode=REPAIR)
        assert not again.changed, again.actions
    assert (mem / "MEMORY.md").read_text() == text


def test_entries_in_a_folder_memd_cannot_list_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unreadable is not missing: entries of a sub-folder the walk cannot list stay (tests run as root,
    whom permissions do not stop, so the listing itself is made to fail)."""
    from memd.memfolder import walk

    mem = tmp_path / "p" / "memory"
    (mem / "private").mkdir(parents=True)
    (mem / "private" / "x.md").write_text("---\nname: X\ndescription: x\ntype: user\n---\n\nbody\n")
    (mem / "MEMORY.md").write_text("# Memory\n- [X](private/x.md) — where the keys live\n- [Y](private/y.md)\n")
    before = (mem / "MEMORY.md").read_bytes()
    real = walk._listed

    def listed(folder: str) -> list[os.DirEntry[str]]:
        if folder.endswith("/private"):
            raise PermissionError(13, "Permission denied", folder)
        return real(folder)

    monkeypatch.setattr(walk, "_listed", listed)
    for mode in (REPAIR, NORMALISE):
        res = rebuild_project(Project("p", mem.parent, mem), Config(), tmp_path / "state", dry_run=False, mode=mode)
        assert not res.changed, res.actions
    assert (mem / "MEMORY.md").read_bytes() == before


def test_the_daemons_keyless_dream_by_trigger_leaves_a_healthy_index_alone(run_daemon: Callable[..., object]) -> None:
    """`memd trigger dream` (and the nightly slot, which runs the same job) without a key: unchanged."""
    d: Any = run_daemon()
    d.wait_for("daemon.ready")
    src = GOLDEN / "healthy_real_shaped" / "memory"
    for f in sorted(src.iterdir()):
        if f.name != "MEMORY.md":
            d.write_memory("-home-u-app", f.name, f.read_text())
    mem = d.write_memory("-home-u-app", "MEMORY.md", (src / "MEMORY.md").read_text()).parent
    before = _tree(mem)
    res = d.memd("trigger", "dream", "--project", "-home-u-app")
    assert res.returncode == 0, res.stderr
    fin = d.wait_for("job.finish", job="dream", project="-home-u-app")
    assert fin["outcome"] == "unchanged", fin
    assert _tree(mem) == before
    assert d.stop() == 0
