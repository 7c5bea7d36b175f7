"""What `memd check` and `memd rebuild --dry-run` print (issue 13, "At a glance"), option-like project
names on the command line, one line length for check, hook and rebuild, and progress on a terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.memory_folders import ROOT, topic

Run = Callable[..., Any]

# 3 errors (two dangling entries, a secret) among many long-line warnings, which come first in the files
LONG = "- [Long {n}](long_{n}.md) — " + "a long hook that says far too much " * 5
NOISY = {
    "MEMORY.md": "# Memory\n\n" + "".join(LONG.format(n=n) + "\n" for n in range(12))
                 + "- [Gone](gone.md) — deleted\n- [Also gone](also_gone.md) — deleted too\n",
    **{f"long_{n}.md": topic(f"Long {n}", f"long {n}", "project") for n in range(12)},
    "zz_key.md": topic("Key", "a key", "reference", "token ghp_" + "A1b2C3d4E5" * 4 + "\n"),
    "orphan.md": topic("Orphan", "never linked", "user"),
}


def _lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if re.match(r"^\S+:\d+:\d+: MEM\d{3} ", ln)]


def test_errors_come_first_with_line_col_and_fix_marks(make_project: Callable[..., Path], memd_cli: Run,
                                                       claude_home: Path) -> None:
    mem = make_project("-home-u-noisy", NOISY)
    r = memd_cli("check", "-home-u-noisy", cwd=claude_home)
    assert r.returncode == 1, r.stderr
    lines = _lines(r.stdout)
    sev = [ln.split(": ", 2)[1].split()[-1] for ln in lines]  # "MEM005 [*] error" -> "error"
    assert sev == sorted(sev, key=["error", "warning", "info"].index), sev  # errors first, never buried
    assert sev.count("error") == 3 and sev.count("warning") >= 12
    # ruff's shape, the path relative to the current folder (the Claude folder here)
    rel = os.path.relpath(mem / "MEMORY.md", claude_home)
    assert f"{rel}:15:10: MEM005 [*] error: link to gone.md: no such file in the memory folder" in lines
    assert any(ln.startswith(f"{rel}:3:151: MEM004 [*] warning: line is ") for ln in lines)
    assert any(re.match(r"^projects/-home-u-noisy/memory/zz_key\.md:\d+:7: MEM050 error: ", ln) for ln in lines)
    assert any(" MEM010 [*] warning: " in ln for ln in lines)
    fixable = sum("[*]" in ln for ln in lines)
    assert r.stdout.rstrip().endswith(f"[*] {fixable} fixable with `memd rebuild`")
    assert "1 memory folder checked: 3 errors, " in r.stdout
    # from elsewhere, paths are absolute (as ruff shows a file outside the current folder)
    out = memd_cli("check", "-home-u-noisy", cwd=ROOT).stdout
    assert f"{mem}/MEMORY.md:15:10: MEM005 [*] error:" in out


def test_select_ignore_and_statistics(make_project: Callable[..., Path], memd_cli: Run) -> None:
    make_project("-home-u-noisy", NOISY)
    only = memd_cli("check", "-home-u-noisy", "--select", "MEM004")
    assert only.returncode == 0  # the errors were not selected
    assert {ln.split(": ")[1].split()[0] for ln in _lines(only.stdout)} == {"MEM004"}
    # prefixes, comma-separated and repeated; the longer prefix wins, as in ruff
    some = memd_cli("check", "-home-u-noisy", "--select", "MEM0", "--ignore", "MEM00,mem01", "--select", "MEM005")
    codes = {ln.split(": ")[1].split()[0] for ln in _lines(some.stdout)}
    assert codes == {"MEM005", "MEM050"} and some.returncode == 1
    js = json.loads(memd_cli("check", "-home-u-noisy", "--ignore", "MEM004", "--format", "json").stdout)
    assert js[0]["findings"] and all(f["code"] != "MEM004" for f in js[0]["findings"])
    assert {"code", "severity", "path", "line", "col", "fixable", "message"} == set(js[0]["findings"][0])
    bad = memd_cli("check", "-home-u-noisy", "--select", "E501")
    assert bad.returncode == 2 and "--select E501" in bad.stderr
    stats = memd_cli("check", "-home-u-noisy", "--statistics")
    assert stats.returncode == 1
    rows = stats.stdout.splitlines()
    assert rows[0].split("\t") == ["12", "MEM004", "[*] index-line-too-long"]
    assert "2\tMEM005\t[*] dangling-link" in stats.stdout and "1\tMEM050\t[ ] secret" in stats.stdout


def _on_a_terminal(args: list[str], env: dict[str, str], *, stderr_tty: bool = False) -> tuple[int, str, str]:
    """Run memd with stdout (or stderr) on a pseudo-terminal; (exit code, tty text, other stream)."""
    master, slave = pty.openpty()
    out_to, err_to = (subprocess.PIPE, slave) if stderr_tty else (slave, subprocess.PIPE)
    proc = subprocess.Popen([sys.executable, "-m", "memd", *args], stdout=out_to, stderr=err_to, env=env,
                            cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    other = (proc.stdout if stderr_tty else proc.stderr)
    rest = other.read().decode() if other else ""
    rc = proc.wait(timeout=60)
    os.close(master)
    return rc, b"".join(chunks).decode(errors="replace"), rest


def test_colour_on_a_terminal_only(make_project: Callable[..., Path], memd_cli: Run, claude_home: Path) -> None:
    make_project("-home-u-noisy", NOISY)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update(TERM="xterm", PYTHONPATH=str(ROOT))
    args = ["--claude-dir", str(claude_home), "check", "-home-u-noisy"]
    rc, tty, _ = _on_a_terminal(args, env)
    assert rc == 1 and "\x1b[31mMEM005\x1b[0m" in tty and "\x1b[1m" in tty
    rc, tty, _ = _on_a_terminal(args, {**env, "NO_COLOR": "1"})
    assert rc == 1 and "MEM005" in tty and "\x1b[" not in tty
    piped = memd_cli("check", "-home-u-noisy", env={"TERM": "xterm"})
    assert "MEM005" in piped.stdout and "\x1b[" not in piped.stdout


def test_progress_on_a_terminal_only(make_project: Callable[..., Path], memd_cli: Run, claude_home: Path) -> None:
    for n in range(3):
        make_project(f"-home-u-p{n}", {"MEMORY.md": "- [A](a.md) — a\n", "a.md": topic("A", "a", "user")})
    env = {**os.environ, "TERM": "xterm", "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    rc, bar, out = _on_a_terminal(["--claude-dir", str(claude_home), "check", "--all", "--no-cache"], env,
                                  stderr_tty=True)
    assert rc == 0 and "checking" in bar and "3/3" in bar  # rich's bar, on stderr
    assert out.strip().endswith("3 memory folders checked: no findings")
    quiet = memd_cli("check", "--all", "--no-cache")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_progress_reports_each_project_of_a_job() -> None:
    """The door passes a callback into run_job: one step per project, bar or not."""
    import io

    from memd.commands._progress import progress

    seen: list[str] = []
    with progress(3, "dream", stream=io.StringIO()) as step:  # not a terminal: quiet, rich not needed
        for name in ("a", "b", "c"):
            step(name)
            seen.append(name)
    assert seen == ["a", "b", "c"]


def test_rebuild_dry_run_names_the_project_and_says_why_first(make_project: Callable[..., Path],
                                                              memd_cli: Run) -> None:
    # 230 prose lines (rebuild never drops prose) and a dangling entry: the rebuild cannot fit
    mem = make_project("-home-u-big", {"MEMORY.md": "".join(f"note {n}\n" for n in range(230))
                                       + "- [Gone](gone.md) — deleted\n"})
    r = memd_cli("rebuild", "-home-u-big", "--dry-run")
    assert r.returncode == 1, r.stderr
    out = r.stdout
    assert out.startswith(f"# -home-u-big ({mem})\n")
    assert "--- a/-home-u-big/MEMORY.md\n+++ b/-home-u-big/MEMORY.md\n" in out
    reason = out.index("# -home-u-big: ")
    assert "still" in out[reason:].splitlines()[0] or "budget" in out[reason:].splitlines()[0]
    assert reason < out.index("--- a/-home-u-big/MEMORY.md")  # why it cannot fit, before the diff


# --------------------------------------------------------------------------- option-like project names


@pytest.mark.parametrize("name", ["-home", "-nope", "-all-x", "-h"])
def test_project_folders_named_like_options(make_project: Callable[..., Path], memd_cli: Run, name: str) -> None:
    """Any argument that names an existing project folder is a project ("-h" is too short to be one)."""
    make_project(name, {"MEMORY.md": "- [Gone](gone.md) — x\n"})
    check = memd_cli("check", name)
    if name == "-h":
        assert check.returncode == 0 and check.stdout.startswith("usage: memd check")
        return
    assert check.returncode == 1 and "gone.md" in check.stdout, check.stderr  # a project, not -h + "ome"
    hist = memd_cli("history", name)
    assert hist.returncode == 0 and "invalid" not in hist.stderr, hist.stderr  # not -n + "ope"


def test_option_like_tokens_that_are_not_projects_stay_options(memd_cli: Run) -> None:
    r = memd_cli("history", "-nope")  # no such project: -n with "ope", as before
    assert r.returncode == 2 and "-n" in r.stderr
    assert memd_cli("check", "-h").returncode == 0  # help


def test_the_mark_is_layouts() -> None:
    from memd import cli, layout

    assert cli.PROJECT_ARG_MARK == layout.PROJECT_ARG_MARK


# --------------------------------------------------------------------------- one line length


LINE = "- [Emoji](emoji.md) — " + "x" * 124 + "🎉🎉"  # 148 code points, 150 UTF-16 units
LONG_LINE = LINE + "🎉"  # 149 code points, 152 units: over 150 only as Claude Code counts


def test_check_and_the_hook_count_one_line_the_same(tmp_path: Path) -> None:
    from memd.config import Config
    from memd.core import index
    from memd.core.lint import lint
    from memd.hooks.tool_use import long_lines_note
    from memd.memfolder.folder import read_folder

    text = f"# Memory\n{LONG_LINE}\r\n{LINE}\n"
    mem = tmp_path / "memory"
    mem.mkdir()
    (mem / "MEMORY.md").write_bytes(text.encode())
    (mem / "emoji.md").write_text(topic("Emoji", "e", "user"))
    found = [f for f in lint(read_folder(mem, Config().budget)) if f.code == "MEM004"]
    assert [(f.line, f.message.split(" characters")[0]) for f in found] == [(2, "line is 152")]
    note = long_lines_note(text, Config())
    assert note is not None and "line 2 (152 chars)" in note and "line 3" not in note
    assert index.line_length(LONG_LINE + "\r") == index.utf16_len(LONG_LINE) == 152


def test_rebuild_shortens_to_the_limit_in_the_same_units() -> None:
    from memd.core import index
    from memd.core.budget import Limits
    from memd.core.rebuild import NORMALISE, TopicInfo, plan_rebuild

    hook = "word " * 24 + "ab " + "🎉" * 4
    line = f"- [Emoji](emoji.md) — {hook.strip()}"
    assert len(line) <= 150 < index.line_length(line)
    plan = plan_rebuild(f"# Memory\n{line}\n", {"emoji.md": TopicInfo("emoji.md", "Emoji", "e", "user")},
                        Limits(), mode=NORMALISE)
    assert plan.changed and max(index.line_length(ln) for ln in plan.text.splitlines()) <= 150


# --------------------------------------------------------------------------- the quick path agrees


@pytest.mark.parametrize("extra", [[], ["--format", "json"], ["--format=json"], ["--format", "json", "--"]])
def test_the_cached_answer_is_the_full_answer(make_project: Callable[..., Path], memd_cli: Run,
                                              claude_home: Path, extra: list[str]) -> None:
    """`memd check NAME...` answered from the cache (memd.commands._checkquick.quick) prints what the full
    path prints: findings, paths, notes, exit code; also for names like options and memory turned off."""
    import time

    for name in ("-home-u-noisy", "-home"):
        mem = make_project(name, NOISY)
        past = time.time() - 60
        for p in mem.rglob("*"):
            os.utime(p, (past, past))
    (claude_home / "settings.json").write_text('{"autoMemoryEnabled": false}')
    args = ("check", *extra, "-home-u-noisy", "-home")  # "--": names after it, as a user types a leading "-"
    full = memd_cli(args[0], "--no-cache", *args[1:], cwd=claude_home)
    memd_cli(*args, cwd=claude_home)  # stores both results
    quick = memd_cli(*args, cwd=claude_home)
    assert (quick.returncode, quick.stdout, quick.stderr) == (full.returncode, full.stdout, full.stderr)
    assert "auto memory is off" in (full.stdout + full.stderr) and full.returncode == 1


def test_the_quick_path_declines_what_it_cannot_tell(make_project: Callable[..., Path], claude_home: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from memd.commands.check import quick

    make_project("-home-u-app", {"MEMORY.md": "- [A](a.md) — a\n"})
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_home))
    for argv in (["check"], ["check", "."], ["check", "--all"], ["check", "-home-u-app", "--select", "MEM005"],
                 ["check", "-home-u-app", "--no-cache"], ["check", "/tmp"], ["status"], ["check", "-h"],
                 ["check", "-home-u-app", "--format", "yaml"], ["check", "no-such-project"],
                 ["check", "-home-u-app"]):  # the last: not cached yet
        assert quick(argv) is None, argv


def test_the_quick_path_answers_names_after_a_double_dash(make_project: Callable[..., Path], claude_home: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`memd check -- -home-u-app` (how a name starting with "-" is given to most tools) took the full
    path, parser and all, even with every folder cached."""
    import time

    from memd import cli
    from memd.commands.check import quick

    mem = make_project("-home-u-app", {"MEMORY.md": "- [A](a.md) — a\n"})
    past = time.time() - 60
    for p in [mem, *mem.rglob("*")]:
        os.utime(p, (past, past))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_home))
    assert cli.main(["check", "--", "-home-u-app"]) == 1  # a dangling link; stores the result
    full = capsys.readouterr().out
    assert quick(["check", "--", "-home-u-app"]) == 1
    assert capsys.readouterr().out == full
    for argv in (["check", "--", "-home-u-app", "--format", "json"], ["--", "check", "-home-u-app"]):
        assert quick(argv) is None, argv  # "--format" is a name after "--": no such folder, the full path says so


def test_fix_marks_are_what_rebuild_does(claude_data: Path) -> None:
    """[*] only where `memd rebuild` acts: on the real folders, the over-long lines check marks are the
    entries rebuild shortens (a long prose line is reported, unmarked, and left alone by both)."""
    from memd.core.budget import Limits
    from memd.core.lint import lint
    from memd.core.rebuild import NORMALISE, plan_rebuild, topics_of
    from memd.memfolder.folder import read_folder

    marked_total = 0
    for mem in sorted(claude_data.glob("projects/*/memory")):
        snap = read_folder(mem, Limits())
        if snap.index is None or snap.index.text is None:
            continue
        long = [f for f in lint(snap) if f.code == "MEM004"]
        plan = plan_rebuild(snap.index.text, topics_of(snap), Limits(), mode=NORMALISE)
        shortened = sorted(int(m.group(1)) for a in plan.actions if (m := re.search(r"^shortened .* at line (\d+)", a)))
        assert sorted(f.line for f in long if f.fixable) == shortened, mem
        marked_total += len(shortened)
        assert all(not f.fixable for f in long if f.line not in shortened)
    assert marked_total >= 30


def test_progress_with_workers_draws_the_bar_without_a_thread(make_project: Callable[..., Path],
                                                               claude_home: Path) -> None:
    """`check --all` over enough folders forks workers: its bar is redrawn by the steps, never by rich's
    refresh thread (a child forked while that thread held the stream's lock would hang at its exit)."""
    import io
    import threading

    from memd.commands._progress import progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream, before = Tty(), threading.active_count()
    with progress(3, "checking", stream=stream, threaded=False) as step:
        for name in ("a", "b", "c"):
            step(name)
            assert threading.active_count() == before
    assert "checking" in stream.getvalue()
    for n in range(130):  # past PARALLEL_MIN (128): two workers
        make_project(f"-home-u-p{n:03d}", {"MEMORY.md": "- [A](a.md) — a\n", "a.md": topic("A", "a", "user")})
    env = {**os.environ, "TERM": "xterm", "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    rc, bar, out = _on_a_terminal(["--claude-dir", str(claude_home), "check", "--all", "--no-cache", "-j", "2"], env,
                                  stderr_tty=True)
    assert rc == 0 and "checking" in bar and "/130" in bar
    assert out.strip().endswith("130 memory folders checked: no findings")
