"""The import list of every hook path, pinned: each module is start-up time paid on tool calls or sessions.

Run as a regular install starts (``python -S``: no editable finder, which would load pathlib for every
interpreter and hide it), under ``-X importtime``. memd's own modules are pinned exactly, so a new
import on a hook path fails here and must be argued for; the standard library's slow starters are
kept off every path (pathlib and urllib.parse with ipaddress, sqlite3 with datetime, dataclasses
with inspect/ast/dis, typing, tomllib without a config file, argparse, shutil).
"""

from __future__ import annotations

import re

import pytest

from memd.state import StateStore
from tests.plugins.hooks import HookProject, hook_project, index_text, run_hook, topic  # noqa: F401

COMMON = {"memd", "memd.hooks", "memd.hooks.entry", "memd.hooks.context", "memd.hooks.log"}
TOOL = COMMON | {"memd.hooks.tool_use"}
MEMORY = TOOL | {"memd.ccsettings", "memd.config", "memd.errors", "memd.record", "memd.core", "memd.core.budget",
                 "memd.core.paths"}
READS = {"memd.memfolder", "memd.memfolder.read", "memd.memfolder.walk", "memd.core.signature", "memd.core.index"}
PINNED = {
    "PreToolUse, other file": TOOL,
    "PostToolUse, other file": TOOL,
    "PreToolUse, memory file": MEMORY | {"memd.core.secrets", "memd.core.secret_rules", "memd.core.fastscan",
                                         "memd.core.secret_views"},
    "PostToolUse, memory file": MEMORY | READS | {"memd.core.frontmatter"},
    "SessionStart": MEMORY | READS | {"memd.hooks.session"},
}
# (run_hook starts `python -m memd hook`, whose runpy loads importlib.util: not a hook import)
NEVER = {"pathlib", "urllib", "ipaddress", "sqlite3", "_sqlite3", "datetime", "dataclasses", "inspect", "ast", "dis",
         "typing", "tomllib", "argparse", "shutil", "yaml", "anthropic", "structlog", "watchdog"}


def imported(stderr: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", stderr, re.M)}


@pytest.mark.parametrize("case", list(PINNED))
def test_each_hook_path_imports_exactly_its_list(hook_project: HookProject, case: str) -> None:  # noqa: F811
    (hook_project.memory / "MEMORY.md").write_text(index_text(190))  # near the budget: notes are written
    (hook_project.memory / "feedback_x.md").write_text(topic())
    with StateStore.open(hook_project.state) as st:
        st.set_warning(hook_project.memory.parent.name, "check.findings", "warning", {"message": "2 dangling links"})
    target = hook_project.memory / "feedback_x.md" if "memory" in case else hook_project.work / "x.md"
    name = case.split(",")[0]
    event = (hook_project.event("SessionStart", source="startup") if name == "SessionStart"
             else hook_project.write_event(name, target, "plain text\n"))
    run = run_hook(event, python_flags=("-S", "-X", "importtime"))
    assert run.rc == 0
    if case.startswith(("PostToolUse, memory", "SessionStart")):
        assert run.out  # the path did its work (a note; the daemon's warning)
    if name == "SessionStart":
        assert "2 dangling links" in run.context
    mods = imported(run.err)
    assert {m for m in mods if m.startswith("memd")} == PINNED[case]
    slow = {m for m in mods if m in NEVER or m.split(".")[0] in NEVER}
    assert not slow, slow
