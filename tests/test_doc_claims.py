"""Claims of the docs held against what memd does (issue 25, "Docs that hold").

A sandbox day with the real daemon and the commands a user runs: the state folder then holds exactly
the files docs/daemon.md lists ("Files in the state folder"), and the log holds no memory file's text
(docs/daemon.md, "Logs": names, counts, times, the titles of hidden entries and a refusal's bounded
quote, never a topic file's words and never a secret). The backup claims of docs/hooks.md are held
by tests/test_settings_merge.py (install then uninstall gives the exact bytes back; the first backup
is kept for good); docs/status.md's reasons by tests/test_status_wording.py and tests/test_status.py.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import ROOT
from tests.plugins.daemon import DaemonProc, over_budget_index

BODY = "Zebra-quartz-canary: the staging database moves to the blue cluster on Thursdays"
SECRET = "sk-ant-api03-" + "Q" * 40 + "-AAAAAA"  # a key-shaped value in a memory file
# What a sandbox run cannot make on Linux, with why: each still documented.
NOT_MADE_HERE = {
    "launchd.out.log": "launchd only", "launchd.err.log": "launchd only",
    "memd.log.1": "only after the log passes logging.max_bytes (tests/test_log_rotation.py)",
    "sync/": "only with [sync] remote set (tests/test_sync*.py)",
    "reviews/": "only with dream.apply = \"review\" and a model run (tests/test_model_jobs.py)",
    "staging/": "removed when each run ends",
    "said-on.json": "only after a catch-up with a model wrote memory (tests/test_model_costs.py, MEM040)",
    "reports/": "the daemon's morning check-in writes it",
    "recall/": "only with hooks.recall = true and a key (tests/test_recall.py)",
    "claude-plan-cwd/": "only with model.backend = \"claude-plan\" and a model run (tests/realcc/test_plan_jobs.py)",
    "ui-url.json": "only with [ui] serve = true, while the daemon serves the viewer (tests/test_ui_daemon.py)",
    "forget/": "only while `memd forget --apply` runs (tests/test_forget_kills.py)",
    "state.sqlite3-wal": "SQLite's, while the database is open", "state.sqlite3-shm": "SQLite's, while open",
}


def documented_state_files() -> set[str]:
    """The first column of docs/daemon.md's "Files in the state folder" table, one name a cell item."""
    text = (ROOT / "docs" / "daemon.md").read_text(encoding="utf-8")
    table = text.split("## Files in the state folder", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        for token in re.findall(r"`([^`]+)`", cell):
            if token.startswith("-"):  # `-wal`, `-shm` beside state.sqlite3
                names.add("state.sqlite3" + token)
            elif not token.startswith("."):  # `.1` after the launchd logs: their rotated files
                names.add(token)
    return names


def _written(state: Path) -> set[str]:
    out = set()
    for p in state.iterdir():
        if p.is_dir():
            out.add(p.name + "/")
            if p.name == "cache":  # listed by its file
                out.discard("cache/")
                out |= {f"cache/{q.name}" for q in p.iterdir()}
        else:
            out.add(p.name)
    return out


def _day(d: DaemonProc, work: Path) -> set[str]:
    """What a user's day does to the state folder: the daemon watching, a budget warning, a triggered
    dream of one project (keyless: the repair), the commands of README's "Using it" block. What the
    state folder held while the daemon ran."""
    from memd import layout

    name = layout.folder_for_cwd(work)
    d.write_memory(name, "a.md", f"---\nname: A\ndescription: the a memory\ntype: user\n---\n\n{BODY}\n"
                                 f"token: {SECRET}\n")
    d.write_memory(name, "b.md", "---\nname: B\ndescription: the b memory\ntype: user\n---\n\nbody\n")
    # b.md is not indexed: the keyless dream repairs the index (a change: the history is written)
    d.write_memory(name, "MEMORY.md", "# Memory\n- [A](a.md) — the a memory\n")
    d.write_memory("-home-u-long", "MEMORY.md", over_budget_index(260, "standup_rota"))
    (d.claude / "settings.json").write_text('{\n  "model": "opus"\n}\n')
    d.wait_for("daemon.ready")
    d.wait_for("budget.warning", project="-home-u-long")
    for args in (("trigger", "dream", "--project", name), ):
        r = d.memd(*args)
        assert r.returncode == 0, r.stderr
    d.wait_for("job.end", job="dream")
    past = time.time() - 3600  # an hour old, as real memory is: a file changed within 2 s is never cached
    for f in d.claude.rglob("*"):
        os.utime(f, (past, past))
    for args in (("check", "--all"), ("status",), ("hooks", "install"), ("hooks", "uninstall"),
                 ("report", "--now"), ("rebuild", name, "--dry-run"), ("history", name), ("logs", "-n", "5")):
        r = d.memd(*args)
        assert r.returncode in (0, 1), (args, r.stdout[-400:], r.stderr[-400:])
        assert "Traceback" not in r.stderr, args
    running = _written(d.state_dir)
    assert d.stop() == 0
    return running


def test_the_state_folder_holds_what_the_docs_list(run_daemon: Callable[..., DaemonProc], tmp_path: Path) -> None:
    d = run_daemon(start=False)
    work = d.home / "src" / "app"
    work.mkdir(parents=True)
    d.start()
    written = _day(d, work) | _written(d.state_dir)
    docs = documented_state_files()
    assert written - docs == set(), f"memd wrote what docs/daemon.md does not list: {written - docs}"
    missing = docs - written - set(NOT_MADE_HERE)
    assert missing == set(), f"docs/daemon.md lists what the day did not make, with no reason here: {missing}"
    assert set(NOT_MADE_HERE) <= docs  # each one still documented
    # nothing of memd's in a memory folder
    for mem in d.claude.glob("projects/*/memory"):
        assert {p.name for p in mem.iterdir()} <= {"MEMORY.md", "a.md", "b.md"}, list(mem.iterdir())


def test_the_log_holds_no_memory_text(run_daemon: Callable[..., DaemonProc]) -> None:
    d = run_daemon(start=False)
    work = d.home / "src" / "app"
    work.mkdir(parents=True)
    d.start()
    _day(d, work)
    log = "".join(p.read_text(encoding="utf-8") for p in d.state_dir.glob("memd.log*"))
    assert "job.finish" in log and "budget.warning" in log
    assert "Zebra-quartz" not in log and "blue cluster" not in log  # a topic file's words
    assert SECRET not in log and "sk-ant-" not in log
    assert "standup_rota 200" in log  # the titles of hidden entries are named (docs/daemon.md says so)
