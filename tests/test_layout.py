"""Claude Code's layout: folder names, project resolution, git roots, transcripts, team/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memd import layout
from memd.cli import protect_folder_names
from memd.errors import UsageError


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/Users/foo/my-project", "-Users-foo-my-project"),
        ("/home/dev/app_v2.1", "-home-dev-app-v2-1"),
        ("C:\\Users\\x", "C--Users-x"),
        ("/tmp/café", "-tmp-caf-"),
    ],
)
def test_sanitize(path: str, name: str) -> None:
    assert layout.sanitize(path) == name


def test_long_names_are_cut_and_matched_by_prefix(tmp_path: Path) -> None:
    long = "/" + "a" * 250
    name = layout.sanitize(long)
    assert name.startswith("-" + "a" * 199 + "-")
    assert len(name) > 200
    # a folder made by another client (different hash) is still found by its 200-char prefix
    other = tmp_path / (name[:200] + "-zzz")
    other.mkdir()
    assert layout.find_folder(tmp_path, name) == other


def test_git_root_maps_worktrees_and_subfolders(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (repo / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    (repo / "src" / "deep").mkdir(parents=True)
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {repo / '.git' / 'worktrees' / 'wt'}\n")
    assert layout.git_root(repo / "src" / "deep") == repo.resolve()
    assert layout.git_root(wt) == repo.resolve()
    assert layout.folder_for_cwd(wt) == layout.sanitize(str(repo.resolve()))


def test_resolve_project_accepts_three_spellings(claude_home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    name = layout.sanitize(str(work.resolve()))
    mem = claude_home / "projects" / name / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("# x\n")
    by_cwd = layout.resolve_project(".", claude_home, cwd=work)
    by_name = layout.resolve_project(name, claude_home)
    by_marked = layout.resolve_project(layout.PROJECT_ARG_MARK + name, claude_home)
    by_mem = layout.resolve_project(str(mem), claude_home)
    assert by_cwd == by_name == by_marked == by_mem
    assert by_cwd.memory_dir == mem
    with pytest.raises(UsageError, match="no such project"):
        layout.resolve_project("/no/such/folder", claude_home)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    with pytest.raises(UsageError, match="is a file, not a project"):
        layout.resolve_project(str(a_file), claude_home)


def test_a_memory_folder_that_is_a_symlink_is_resolved_as_all_finds_it(claude_home: Path, tmp_path: Path) -> None:
    """Issue 10 #7: `memd check <projects/N/memory -> elsewhere>` names the same project `--all` lists, and
    check measures it (no CLI)."""
    from memd.config import BudgetConfig
    from memd.inspect import check_project

    real = tmp_path / "dotfiles" / "mem"
    real.mkdir(parents=True)
    (real / "MEMORY.md").write_text("- [A](a.md) — a\n" * 3)
    (real / "a.md").write_text("---\nname: a\ndescription: a\ntype: user\n---\nx\n")
    proj = claude_home / "projects" / "-home-u-linked"
    proj.mkdir()
    os.symlink(real, proj / "memory")
    (listed,) = layout.list_projects(claude_home)
    for arg in (str(proj / "memory"), str(proj / "memory") + "/", "-home-u-linked"):
        assert layout.resolve_project(arg, claude_home) == listed, arg
    assert listed.memory_dir == proj / "memory"
    res = check_project(listed, BudgetConfig())
    assert res.exists and (res.lines, res.topic_files) == (3, 1)


def test_scan_all_without_a_claude_folder_says_so(tmp_path: Path) -> None:
    # no Claude folder yet where memd looks by default: friendly; one given explicitly is an error (issue 13)
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "memd", "scan", "--all"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "no Claude Code folder" in out.stdout
    out = subprocess.run([sys.executable, "-m", "memd", "--claude-dir", str(tmp_path / "none"), "scan", "--all"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "(given by --claude-dir)" in out.stderr


def test_memory_override_and_disable(claude_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (claude_home / "projects" / "-p").mkdir()
    assert layout.memory_disabled(claude_home) is None
    (claude_home / "settings.json").write_text(json.dumps({"autoMemoryDirectory": str(tmp_path / "m")}))
    assert layout.list_projects(claude_home)[0].memory_dir == tmp_path / "m"
    (claude_home / "settings.json").write_text(json.dumps({"autoMemoryEnabled": False}))
    assert "autoMemoryEnabled" in (layout.memory_disabled(claude_home) or "")
    (claude_home / "settings.json").write_text("{not json")
    assert layout.memory_disabled(claude_home) is None
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")
    assert layout.memory_disabled(claude_home) is not None


def test_sessions_and_subagents_both_layouts(tmp_path: Path) -> None:
    p = tmp_path / "-proj"
    sid = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
    (p / sid / "subagents").mkdir(parents=True)
    (p / f"{sid}.jsonl").write_text("")
    (p / "agent-abc.jsonl").write_text("")  # old layout
    (p / sid / "subagents" / "agent-a1.jsonl").write_text("")
    (p / "memory").mkdir()
    sessions = layout.session_files(p)
    assert [s.name for s in sessions] == ["8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", "agent-abc.jsonl"]
    assert [layout.is_uuid_session(s) for s in sessions] == [True, False]
    assert [s.name for s in layout.subagent_files(p)] == ["agent-a1.jsonl"]


def test_team_paths(tmp_path: Path) -> None:
    mem = tmp_path / "memory"
    assert layout.is_team_path(mem, mem / "team" / "x.md")
    assert not layout.is_team_path(mem, mem / "teams.md")
    assert not layout.is_team_path(mem, tmp_path / "team" / "x.md")


def test_folder_names_are_not_options() -> None:
    known = {"--all", "-h", "--format", "-f", "-n"}
    m = layout.PROJECT_ARG_MARK
    out = protect_folder_names(["check", "-home-dev-app", "-tmp", "--all", "-f", "-n50", "--", "-x-y"], known)
    assert out == ["check", m + "-home-dev-app", m + "-tmp", "--all", "-f", "-n50", "--", "-x-y"]


def test_single_segment_folder_names_through_the_cli(claude_home: Path) -> None:
    mem = claude_home / "projects" / "-tmp" / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("- [A](a.md) — a\n")
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(claude_home)}
    out = subprocess.run([sys.executable, "-m", "memd", "check", "-tmp"], capture_output=True, text=True, env=env)
    assert out.returncode == 1 and "a.md" in out.stdout  # the dangling link is found: -tmp was a project
    # the mark never leaks into arguments that are not PROJECT
    out = subprocess.run([sys.executable, "-m", "memd", "prompts", "-a-b"], capture_output=True, text=True, env=env)
    assert "\x00" not in out.stderr and "-a-b" in out.stderr


def test_unexpected_errors_are_one_line_not_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = {**os.environ, "XDG_STATE_HOME": str(blocker), "HOME": str(tmp_path),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
    env.pop("MEMD_DEBUG", None)
    out = subprocess.run([sys.executable, "-m", "memd", "catchup"], capture_output=True, text=True, env=env)
    assert out.returncode != 0 and "Traceback" not in out.stderr and out.stderr.startswith("memd catchup: ")


def test_cli_version_and_help_run() -> None:
    env = {**os.environ}
    out = subprocess.run([sys.executable, "-m", "memd", "--version"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.startswith("memd ")


# the one bounded read (memd.memfolder.read: the I/O edge for the files this layout names)


def test_read_bounded_without_hash_reads_the_same_and_skips_the_signature(tmp_path: Path) -> None:
    import hashlib

    from memd.memfolder import read as store

    f = tmp_path / "a.md"
    f.write_bytes("caf\u00e9\n".encode())
    full = store.read_bounded(f, 100)
    plain = store.read_bounded(f, 100, hash=False)
    assert full.signature is not None and full.signature.sha256 == hashlib.sha256(f.read_bytes()).hexdigest()
    assert plain.signature is None
    assert (plain.data, plain.text, plain.problem) == (full.data, full.text, full.problem) == (
        f.read_bytes(), "caf\u00e9\n", None)
    # the same bound and the same problems
    assert store.read_bounded(f, 3, hash=False).problem == store.read_bounded(f, 3).problem
    assert store.read_bounded(f, 3, hash=False).data is None
    (tmp_path / "bad.md").write_bytes(b"\xff")
    bad = store.read_bounded(tmp_path / "bad.md", 100, hash=False)
    assert (bad.data, bad.problem, bad.signature, bad.text) == (b"\xff", "not valid UTF-8", None, None)
    assert store.read_bounded(tmp_path / "missing.md", 100, hash=False).problem == "missing"
    # a reader that never writes back does not pay for hashlib
    code = ("import sys, pathlib; from memd.memfolder import read as store; "
            f"r = store.read_bounded(pathlib.Path({str(f)!r}), 100, hash=False); "
            "print(r.text is not None, 'hashlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]
