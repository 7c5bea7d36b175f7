"""The import list of every hook path, pinned: each module is start-up time paid on tool calls or sessions.

Run as Claude Code starts it after `memd hooks install`: ``python -I -S .../memd/hooks/start.py`` (no
site, so neither its .pth files nor the editable finder, which would load pathlib and hide it), under
``-X importtime``. memd's own modules are pinned exactly, so a new import on a hook path fails here and
must be argued for; the standard library's slow starters are kept off every path (site, json, pathlib
and urllib.parse with ipaddress, sqlite3 with datetime, dataclasses with inspect/ast/dis, typing,
tomllib without a config file, argparse, shutil), and a write outside memory does without ``re``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from memd.state import StateStore
from tests.plugins.hooks import ROOT, HookProject, HookRun, hook_project, index_text, run_hook, topic  # noqa: F401

COMMON = {"memd", "memd.hooks", "memd.hooks.entry", "memd.hooks.context", "memd.hooks.log", "memd.core",
          "memd.core.jsonfast"}
TOOL = COMMON | {"memd.hooks.tool_use"}
# a memory file: the Claude folder's settings, the path rules; no config file, so its defaults without the schema
MEMORY = TOOL | {"memd.ccsettings", "memd.record", "memd.core.paths", "memd.hooks.defaults"}
READS = {"memd.memfolder", "memd.memfolder.read", "memd.memfolder.walk", "memd.core.signature", "memd.core.index"}
PINNED = {
    "PreToolUse, other file": TOOL,
    "PostToolUse, other file": TOOL,
    "PreToolUse, memory file": MEMORY | {"memd.core.secrets", "memd.core.secret_rules", "memd.core.fastscan",
                                         "memd.core.secret_views"},
    "PostToolUse, memory file": MEMORY | READS | {"memd.core.frontmatter"},
    "SessionStart": MEMORY | READS | {"memd.hooks.session"},
}
# over the budget, the hidden entries are listed (each entry's link decoded): still no urllib.parse
PINNED["PostToolUse, memory file, index over budget"] = PINNED["PostToolUse, memory file"]
PINNED["SessionStart, index over budget"] = PINNED["SessionStart"]
NEVER = {"pathlib", "urllib", "ipaddress", "sqlite3", "_sqlite3", "datetime", "dataclasses", "inspect", "ast", "dis",
         "typing", "tomllib", "argparse", "shutil", "yaml", "anthropic", "structlog", "watchdog",
         # the lean start: no site (nor what it loads), no json (its C accelerator is enough), no config schema
         "site", "_sitebuiltins", "sitecustomize", "json", "memd.config", "memd.core.budget", "importlib",
         # the viewer's stack (`memd ui`, issue 26): its server, templates and pages never reach a hook
         *("jinja2", "markupsafe", "http", "http.server", "socketserver", "memd.ui", "memd.ui.server",
           "memd.ui.views", "memd.ui.service", "memd.commands.ui")}
# A write outside memory (a Claude Code that ignores `if` still starts the hook for it) needs no regex at all:
# re brings enum, functools and collections, about half an interpreter start.
NOT_FOR_OTHER_FILES = {"re", "enum", "functools", "collections", "memd.config", "memd.ccsettings"}


START = ROOT / "memd" / "hooks" / "start.py"


def run_lean(event: dict[str, object], hp: HookProject) -> HookRun:
    """The hook as `memd hooks install` writes it (``python -I -S .../memd/hooks/start.py``), timed by import.
    -I ignores PYTHON* variables, so the run's isolated HOME comes through the environment as it is."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-I", "-S", str(START)],
                          input=json.dumps(event).encode(), capture_output=True, timeout=60, check=False, cwd=hp.work)
    return HookRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def imported(stderr: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", stderr, re.M)}


@pytest.mark.parametrize("case", list(PINNED))
def test_each_hook_path_imports_exactly_its_list(hook_project: HookProject, case: str) -> None:  # noqa: F811
    # near the budget (notes are written), or over it (the hidden entries are named)
    (hook_project.memory / "MEMORY.md").write_text(index_text(250 if "over budget" in case else 190))
    (hook_project.memory / "feedback_x.md").write_text(topic())
    with StateStore.open(hook_project.state) as st:
        st.set_warning(hook_project.memory.parent.name, "check.findings", "warning", {"message": "2 dangling links"})
    target = hook_project.memory / "feedback_x.md" if "memory" in case else hook_project.work / "x.md"
    name = case.split(",")[0]
    event = (hook_project.event("SessionStart", source="startup") if name == "SessionStart"
             else hook_project.write_event(name, target, "plain text\n"))
    run = run_lean(event, hook_project)
    assert run.rc == 0
    if case.startswith(("PostToolUse, memory", "SessionStart")):
        assert run.out  # the path did its work (a note; the daemon's warning)
    if name == "SessionStart":
        assert "2 dangling links" in run.context
    mods = imported(run.err)
    assert {m for m in mods if m.startswith("memd")} == PINNED[case]
    slow = {m for m in mods if m in NEVER or m.split(".")[0] in NEVER}
    assert not slow, slow
    if "other file" in case:
        assert not mods & NOT_FOR_OTHER_FILES, mods & NOT_FOR_OTHER_FILES


@pytest.mark.parametrize("case", ["PreToolUse, memory file", "PostToolUse, memory file", "SessionStart"])
def test_the_lean_start_imports_less_than_the_console_script(hook_project: HookProject, case: str) -> None:  # noqa: F811
    """The same event through `python -m memd hook` with site (what the memd-hook script and older installs
    run) loads site, its .pth files and more: the lean start loads a strict subset of it."""
    (hook_project.memory / "MEMORY.md").write_text(index_text(190))
    name = case.split(",")[0]
    event = (hook_project.event("SessionStart", source="startup") if name == "SessionStart"
             else hook_project.write_event(name, hook_project.memory / "feedback_x.md", "plain text\n"))
    lean = run_lean(event, hook_project)
    full = run_hook(event, python_flags=("-X", "importtime"))
    assert (lean.rc, lean.out) == (full.rc, full.out)
    lean_mods, full_mods = imported(lean.err), imported(full.err)
    assert "site" in full_mods and "site" not in lean_mods
    assert lean_mods < full_mods, lean_mods - full_mods
