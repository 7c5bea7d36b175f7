"""The door's start-up (issue 14, "Also"): what `memd --version`, `memd check PROJECT` and every other
command import, held like the hook's import list in tests/test_hooks.py.

Run with ``python -S`` and PYTHONPATH: the editable install's finder imports pathlib at every start
(a regular install does not), so only without site does the list show what memd itself imports.
(``-X importtime`` would miss what ``importlib.import_module`` loads: the list is ``sys.modules``.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from memd.cli import COMMANDS
from tests.plugins.memory_folders import ROOT, topic

# slow starters no hot path of the door may import: dataclasses (inspect, ast, dis under it), typing,
# pathlib (urllib.parse, ipaddress), shutil (bz2, lzma), and anything heavy
SLOW = {"dataclasses", "inspect", "typing", "pathlib", "shutil", "argparse", "rich", "yaml", "sqlite3",
        "structlog", "anthropic", "apscheduler", "watchdog", "dulwich", "memd.layout", "memd.core.lint"}


# the viewer's (issue 26): its server and templates, imported by `memd ui` only, inside its run
UI_STACK = {"jinja2", "markupsafe", "http.server", "socketserver", "memd.ui", "memd.ui.server", "memd.ui.views",
            "memd.ui.service"}


_RUN = ("import sys\nfrom memd.__main__ import main\nsys.argv[1:] = sys.argv[2:]\n"
        "try:\n    rc = main()\nexcept SystemExit as e:\n    rc = e.code\n"
        "print('\\n#modules ' + ' '.join(sorted(sys.modules)), file=sys.stderr)\nraise SystemExit(rc)\n")


def _imported(args: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run memd as its console script does (``from memd.__main__ import main``); the modules loaded at the end."""
    e = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-S", "-c", _RUN, "memd", *args], capture_output=True,
                          text=True, env=e, cwd=ROOT, timeout=60, check=False)
    head, _, tail = proc.stderr.rpartition("\n#modules ")
    proc.stderr = head
    return proc, set(tail.split())


def test_version_imports_no_command_and_no_argparse() -> None:
    proc, mods = _imported(["--version"])
    assert proc.returncode == 0 and proc.stdout.strip().startswith("memd ")
    assert {m for m in mods if m.startswith("memd")} == {"memd", "memd.__main__", "memd.cli"}
    assert not SLOW & mods, SLOW & mods


def _age(folder: Path) -> None:
    import time

    past = time.time() - 60
    for p in folder.rglob("*"):
        os.utime(p, (past, past), follow_symlinks=False)


def test_cached_check_of_a_project_is_light(make_project: Callable[..., Path], claude_home: Path) -> None:
    mem = make_project("-home-u-app", {"MEMORY.md": "- [A](a.md) — a\n- [Gone](gone.md) — x\n",
                                       "a.md": topic("A", "a", "user")})
    _age(mem)
    args = ["--claude-dir", str(claude_home), "check", "-home-u-app"]
    first, cold = _imported(args)
    assert first.returncode == 1 and "gone.md" in first.stdout
    assert "memd.core.lint" in cold  # a miss: the full path checked and stored the result
    again, warm = _imported(args)
    assert (again.returncode, again.stdout) == (first.returncode, first.stdout)
    assert not SLOW & warm, SLOW & warm  # answered from the cache before argparse, layout or pathlib
    # the quick path has one owner and reaches no command module (nor memd.cli's argparse)
    assert {m for m in warm if m.startswith("memd.commands.")} == {"memd.commands._checkquick",
                                                                   "memd.commands._checkreport"}
    # the cache file is read with json's C scanner alone: json compiles its patterns at import; without a
    # config file its defaults, without the schema (issue 25)
    assert "json" not in warm and "memd.config" not in warm, {"json", "memd.config"} & warm
    dashed, warm_dashed = _imported(["--claude-dir", str(claude_home), "check", "--", "-home-u-app"])
    assert (dashed.returncode, dashed.stdout) == (first.returncode, first.stdout)
    assert not (SLOW | {"json"}) & warm_dashed, (SLOW | {"json"}) & warm_dashed  # `--` too: the quick path
    # with a config file of a few keys (issue 35): read without tomllib (memd.core.tomlflat), judged without
    # the scheduler's parsers (no [schedule] set)
    conf = claude_home.parent / "config.toml"
    conf.write_text('[budget]\nwarn_ratio = 0.8\n\n[model]\ndream_model = "claude-sonnet-5-5"  # stronger\n'
                    '[sync]\nremote = "git@github.com:me/memory.git"\n', encoding="utf-8")
    configured, warm_configured = _imported(["--config", str(conf), *args])
    assert (configured.returncode, configured.stdout) == (first.returncode, first.stdout)
    slow = (SLOW | {"tomllib", "memd.schedule_windows"}) & warm_configured
    assert not slow and "memd.config" in warm_configured, slow
    js, warm_js = _imported([*args, "--format", "json"])
    assert json.loads(js.stdout)[0]["project"] == "-home-u-app" and not SLOW & warm_js


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_imports_only_its_own_module(command: str) -> None:
    if command == "hook":
        return  # routed before the CLI (tests/test_hooks.py holds its list)
    proc, mods = _imported([command, "--help"], env={"COLUMNS": "100"})
    assert proc.returncode == 0 and proc.stdout.startswith(f"usage: memd {command}"), proc.stderr
    commands = {m.rpartition(".")[2] for m in mods if m.startswith("memd.commands.")}
    assert commands - {c for c in commands if c.startswith("_")} == {command}
    if command != "ui":  # the viewer's stack is imported by `memd ui` only, and only when it runs
        assert not UI_STACK & mods, UI_STACK & mods
    if command in ("check", "rebuild"):  # (the other commands' modules import typing for TYPE_CHECKING)
        assert not {"shutil", "dataclasses", "typing", "pathlib"} & mods  # argparse's help, told the width


def test_help_lists_every_command() -> None:
    proc, _ = _imported(["--help"], env={"COLUMNS": "100"})
    assert proc.returncode == 0
    listed = set(re.findall(r"^    (\w+)\s", proc.stdout, re.MULTILINE))
    assert listed == set(COMMANDS)


def test_the_quick_paths_defaults_are_the_schemas() -> None:
    """`memd check NAME` without a config file reads its defaults without memd.config: the same values."""
    from types import SimpleNamespace

    from memd.commands.check import _config
    from memd.config import Config

    cfg = _config(None)  # the test's HOME has no config file
    assert isinstance(cfg, SimpleNamespace)
    full = Config()
    assert cfg.budget == full.budget
    assert (cfg.paths.claude_dir, cfg.paths.state_dir, cfg.hooks.team_pii) == (
        full.paths.claude_dir, full.paths.state_dir, full.hooks.team_pii)
