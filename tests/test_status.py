"""`memd status` says what is true: it measures each index itself (as the SessionStart hook does),
shows an unreadable or oversize index as an error row with the reason, lists projects with a memory
folder first, and works with a bad config. Also: an explicit Claude folder that does not exist, and a
current folder that is no project, are errors; `memd logs` works with a bad config."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from memd import cli
from memd.config import Config
from memd.hooks.tool_use import budget_message, read_text


def memd(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _index(n: int, width: int = 40) -> str:
    return "".join(f"- [Entry {i}](e{i}.md) — {'x' * width}\n" for i in range(n))


@pytest.fixture
def projects(claude_home: Path) -> Path:
    root = claude_home / "projects"
    for name in ("-home-u-a-nomem", "-home-u-b-nomem"):
        (root / name).mkdir(parents=True)
    big = root / "-home-u-big" / "memory"
    big.mkdir(parents=True)
    (big / "MEMORY.md").write_text(_index(1500, 60))  # ~140 KB, over the config's max_file_bytes (64 KB)
    cfg = Path(os.environ["XDG_CONFIG_HOME"]) / "memd" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[budget]\nmax_file_bytes = 65536\n")  # what the default does to a 5 MB index, quicker
    long = root / "-home-u-long" / "memory"
    long.mkdir(parents=True)
    (long / "MEMORY.md").write_text(_index(249))
    weird = root / "-home-u-weird" / "memory"
    (weird / "MEMORY.md").mkdir(parents=True)  # not a file: cannot be read
    ok = root / "-home-u-ok" / "memory"
    ok.mkdir(parents=True)
    (ok / "MEMORY.md").write_text(_index(3))
    return root


def test_an_oversize_index_is_an_error_row_agreeing_with_the_hook(projects: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A 5 MB MEMORY.md showed `0/200 … ok` while the SessionStart hook said it was far over budget."""
    (Path(os.environ["XDG_CONFIG_HOME"]) / "memd" / "config.toml").unlink()  # the default 4 MB limit
    (projects / "-home-u-big" / "memory" / "MEMORY.md").write_text(_index(60_000, 60))  # ~5.5 MB
    code, out, err = memd(capsys, "status", "--format", "json")
    assert code == 1, err  # an ERROR row: not measured whole
    rows = {r["project"]: r for r in json.loads(out)["projects"]}
    big = rows["-home-u-big"]["index"]
    assert big["level"] == "error" and big["problem"].startswith("MEMORY.md too large to read whole (5,")
    assert big["measured_level"] == "over" and big["lines"] > 200
    # the hook's measure of the same file, the same figures
    from memd.core import index

    cfg = Config()
    text = read_text(str(projects / "-home-u-big" / "memory"), "MEMORY.md", cfg.budget.max_file_bytes)
    assert text is not None
    hook = index.measure(text, cfg.budget.max_lines, cfg.budget.max_chars, cfg.hooks.near_ratio)
    assert (big["lines"], big["chars"]) == (hook.lines, hook.chars)
    code, out, _ = memd(capsys, "status")
    msg = budget_message(hook, cfg, "MEMORY.md")
    assert msg is not None
    share = re.search(r"\((\d+%) of what Claude Code loads", msg)
    assert share and f"{share.group(1)} of what Claude Code loads" in out
    row = next(line for line in out.splitlines() if line.startswith("-home-u-big "))
    assert " ERROR " in row and " ok " not in row


def test_an_unreadable_index_is_an_error_row_with_the_reason(projects: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = memd(capsys, "status", "--format", "json")
    weird = {r["project"]: r for r in json.loads(out)["projects"]}["-home-u-weird"]["index"]
    assert weird["level"] == "error" and "is a folder, not a file" in weird["problem"]
    code, out, _ = memd(capsys, "status")
    assert code == 1 and "-home-u-weird: MEMORY.md is a folder, not a file" in out  # not measured: not whole
    assert re.search(r"^-home-u-weird +\S+ +\S+ +\S+ +ERROR", out, re.M)


def test_status_measures_instead_of_repeating_the_daemon(projects: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """"open warnings: none" while an index was 249/200 lines, because the daemon had not run yet."""
    code, out, _ = memd(capsys, "status")
    assert "open warnings: none" not in out
    assert re.search(r"^  -home-u-long: MEMORY.md over the budget \(249/200 lines, .*; 49 entries hidden$",
                     out, re.M)
    code, out, _ = memd(capsys, "status", "--format", "json")
    assert code == 1  # two indexes could not be measured whole
    got = {(w["project"], w["level"]) for w in json.loads(out)["warnings"]}
    assert got == {("-home-u-big", "error"), ("-home-u-long", "over"), ("-home-u-weird", "error")}


def test_projects_with_memory_first_the_others_in_one_line(projects: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = memd(capsys, "status")
    table = [line.split()[0] for line in out.split("daemon:")[0].splitlines()[1:] if line.startswith("-")]
    assert table == ["-home-u-big", "-home-u-long", "-home-u-ok", "-home-u-weird"]
    assert "+ 2 projects with no memory folder (`memd status --all` lists them)" in out
    assert "model work: off" in out  # the credential line stays
    code, out, _ = memd(capsys, "status", "--all")
    table = [line.split()[0] for line in out.split("daemon:")[0].splitlines()[1:] if line.startswith("-")]
    assert table == ["-home-u-big", "-home-u-long", "-home-u-ok", "-home-u-weird", "-home-u-a-nomem",
                     "-home-u-b-nomem"]
    assert "with no memory folder" not in out
    code, out, _ = memd(capsys, "status", "--format", "json")
    assert code == 1  # the fixture's -home-u-weird index is a folder
    names = [r["project"] for r in json.loads(out)["projects"]]
    assert names[-2:] == ["-home-u-a-nomem", "-home-u-b-nomem"] and len(names) == 6


def test_a_bad_config_does_not_lock_out_status_and_logs(projects: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = Path(os.environ["XDG_CONFIG_HOME"]) / "memd" / "config.toml"
    cfg.write_text("[budget]\nmax_lines = 300\nwarn_ration = 0.7\n")
    code, out, err = memd(capsys, "status")
    assert code == 2 and "PROJECT" in out and "daemon: not running" in out
    assert "budget.warn_ration: unknown key (did you mean warn_ratio?)" in err and "going on" in err
    assert "249/300" in out  # its valid keys still count
    code, out, err = memd(capsys, "status", "--format", "json")
    assert code == 2 and json.loads(out)["config"]["problems"]
    sd = Path(os.environ["XDG_STATE_HOME"]) / "memd"
    sd.mkdir(parents=True, exist_ok=True)
    (sd / "memd.log").write_text(json.dumps({"timestamp": "2026-11-30T01:02:03Z", "level": "error",
                                             "event": "config.reload.failed"}) + "\n")
    code, out, err = memd(capsys, "logs")
    assert code == 0 and "config.reload.failed" in out and "warn_ration" in err
    cfg.write_text("[budget\n")  # not even TOML
    code, out, err = memd(capsys, "logs")
    assert code == 0 and "config.reload.failed" in out and "not valid TOML" in err


def test_an_explicit_claude_folder_that_does_not_exist_is_an_error(tmp_path: Path, claude_home: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "nonexistent")
    for args in (("check", "--all"), ("rebuild", "--all"), ("status",), ("scan", "--all"), ("history", "-home-u-x"),
                 ("dream", "--dry-run"), ("catchup", "--dry-run"), ("sync", "--dry-run"), ("sync", "--list")):
        code, _, err = memd(capsys, "--claude-dir", missing, *args)
        assert code == 2 and f"no Claude Code folder at {missing} (given by --claude-dir)" in err, args
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[paths]\nclaude_dir = '{missing}'\n")
    code, _, err = memd(capsys, "--config", str(cfg), "check", "--all")
    assert code == 2 and "(given by paths.claude_dir in the config)" in err
    # the default folder not there yet (a fresh machine): friendly, as before
    claude_home.joinpath("projects").rmdir()
    claude_home.rmdir()
    code, out, _ = memd(capsys, "check", "--all")
    assert code == 0 and "no Claude Code folder" in out


def test_the_current_folder_that_is_no_project_says_so(tmp_path: Path, claude_home: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`memd history` in a folder with no project said "no runs yet"."""
    here = tmp_path / "not-a-project"
    here.mkdir()
    monkeypatch.chdir(here)
    for args in (("history",), ("undo", "--dry-run"), ("check",), ("rebuild", "--dry-run"), ("scan",),
                 ("history", ".")):
        code, out, err = memd(capsys, *args)
        assert code == 2 and "no Claude Code project here" in err and "no runs yet" not in out, args
    from memd.layout import folder_for_cwd

    (claude_home / "projects" / folder_for_cwd(here)).mkdir()
    code, out, _ = memd(capsys, "history")
    assert code == 0 and "no runs yet" in out  # a project, just no runs


def test_exit_code_says_whether_every_project_was_measured(projects: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """0 with an index over its budget (measured, warned); 1 only while an index cannot be measured."""
    code, _, _ = memd(capsys, "status", "-home-u-long")
    assert code == 0
    code, _, _ = memd(capsys, "status", "-home-u-long", "-home-u-weird")
    assert code == 1
    code, out, _ = memd(capsys, "status", "-home-u-weird", "--format", "json")
    assert code == 1 and json.loads(out)["projects"][0]["index"]["level"] == "error"
