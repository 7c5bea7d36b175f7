"""Issue 21, finding 6, "undo is local": `memd undo` of a sync (or of any run) in a synced project stays on
this machine until the user says which side wins: the next sync neither sends what the undo changed nor
takes the remote's version back into it; `memd status` names it with the commands that resolve it
(`memd sync --keep-local PROJECT` sends it, `memd sync --take-remote PROJECT` takes the remote's back).
Real bare git remotes over file://, machines with their own HOME; no network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memd.maintenance import undo_project
from memd.sync import held
from tests.plugins.sync import Machine, topic
from tests.test_sync_guards import remote_files, shared
from tests.test_sync_held import _cli


def _incoming(a: Machine, b: Machine) -> None:
    """a adds one memory and corrects another; b's sync takes both (the run b will undo)."""
    a.write("x.md", topic("x", "a new memory written on ma, enough words to count.\n"))
    a.write("t1.md", topic("t1", "fact number 1, corrected on ma.\n"))
    a.sync("app")
    assert b.outcome("app").outcome == "changed"
    assert b.read("x.md") is not None

def _undone_here(machines: Any) -> tuple[Machine, Machine]:
    """Two machines sharing the project; b took a's run (``_incoming``) and undid it."""
    a, b = machines("ma"), machines("mb")
    shared(a, b)
    _incoming(a, b)
    undo_project(b.project(), b.config, b.state_dir, None, dry_run=False)
    return a, b



def test_undo_of_a_sync_is_not_sent(machines: Any) -> None:
    """Before: b's next sync pushed the undo (one deletion and one edit, inside the guard's share): a lost
    x.md and its correction of t1.md."""
    a, b = _undone_here(machines)
    assert b.read("x.md") is None and "corrected" not in (b.read("t1.md") or "")
    out = b.outcome("app")
    assert out.outcome != "failed", out
    assert "undone here kept local" in out.message and "--take-remote" in out.message, out
    rf = remote_files(a)
    assert "x.md" in rf and b"corrected on ma" in rf["t1.md"]
    a.sync("app")
    assert a.read("x.md") is not None and "corrected on ma" in (a.read("t1.md") or "")
    # nor does the remote put back what the undo reverted, sync after sync
    for _ in range(2):
        b.sync("app")
        assert b.read("x.md") is None and "corrected" not in (b.read("t1.md") or "")
    lines = held.status_lines(b.state_dir)
    assert b.project().name in lines and "--keep-local" in lines and "--take-remote" in lines, lines


def test_other_changes_still_flow_both_ways(machines: Any) -> None:
    a, b = _undone_here(machines)
    b.write("y.md", topic("y", "written on mb after the undo.\n"))
    a.write("z.md", topic("z", "written on ma after the undo.\n"))
    a.write("x.md", topic("x", "a new memory written on ma, enough words to count, and more.\n"))
    a.sync("app")
    b.sync("app")
    a.sync("app")
    assert a.read("y.md") is not None and b.read("z.md") is not None
    assert b.read("x.md") is None  # still undone here: the remote's newer x.md waits too
    assert "and more" in (a.read("x.md") or "")


def test_keep_local_sends_the_undo(machines: Any) -> None:
    a, b = _undone_here(machines)
    b.sync("app")
    out = b.outcome("app", keep_local=True)
    assert "sent" in out.message, out
    assert held.status_lines(b.state_dir) == ""
    a.sync("app")
    assert a.read("x.md") is None and "corrected" not in (a.read("t1.md") or "")


def test_take_remote_brings_the_remote_version_back(machines: Any) -> None:
    _a, b = _undone_here(machines)
    b.sync("app")
    out = b.outcome("app", take_remote=True)
    assert out.outcome == "changed", out
    assert b.read("x.md") is not None and "corrected on ma" in (b.read("t1.md") or "")
    assert held.status_lines(b.state_dir) == ""
    assert b.outcome("app").outcome == "unchanged"


def test_resolving_keeps_what_was_written_since(machines: Any) -> None:
    """Either way the user resolves, words written after the undo survive: --keep-local merges from the
    version the undo reverted (another machine's later edit of an undone file stays), --take-remote from
    the version the undo wrote (this machine's later edit of an undone file stays)."""
    a, b = _undone_here(machines)
    a.write("x.md", (a.read("x.md") or "") + "ma's later line about x.\n")
    a.sync("app")
    b.write("t1.md", (b.read("t1.md") or "") + "\n\n\n\nmb's last line about t1.\n")
    c = Machine(b.home.parent.parent, "mc", a.config.sync.remote)
    out = b.outcome("app", take_remote=True)
    assert out.outcome == "changed", out
    t1 = b.read("t1.md") or ""
    assert "mb's last line" in t1 and "corrected on ma" in t1, t1
    assert "ma's later line" in (b.read("x.md") or "")
    c.sync("app")
    assert "mb's last line" in (c.read("t1.md") or "")


def test_keep_local_keeps_the_other_machines_later_words(machines: Any) -> None:
    a, b = _undone_here(machines)
    a.write("x.md", (a.read("x.md") or "") + "ma's later line about x.\n")
    a.sync("app")
    out = b.outcome("app", keep_local=True)
    assert "sent" in out.message, out
    a.sync("app")
    assert "corrected" not in (a.read("t1.md") or "")  # the undo went out
    assert "ma's later line" in (a.read("x.md") or "")  # deleted here, changed there: kept
    assert "ma's later line" in (b.read("x.md") or "")


def test_undo_of_a_first_sync_is_kept_here(machines: Any) -> None:
    """A new machine's first sync undone: its folder is empty, nothing is sent (not even held as a mass
    deletion: the undo is simply not sent), the remote keeps all, the other machines too."""
    a, b = machines("ma"), machines("mb")
    shared(a, b)
    undo_project(b.project(), b.config, b.state_dir, None, dry_run=False)
    assert b.topics() == {}
    out = b.outcome("app")
    assert "undone here kept local" in out.message, out
    assert len([k for k in remote_files(a) if k != "MEMORY.md"]) == 8
    a.sync("app")
    assert len(a.topics()) == 8
    # --keep-local is still judged by the outgoing guard: deleting every memory needs --push-deletions
    out = b.outcome("app", keep_local=True)
    assert out.outcome == "refused" and "--push-deletions" in out.message, out
    assert len([k for k in remote_files(a) if k != "MEMORY.md"]) == 8


def test_an_undo_made_good_again_is_released(machines: Any) -> None:
    """Undo of a local run that never left (a correction here, undone before any sync): the folder is
    the remote's again, nothing is kept apart and no status line stays."""
    a, b = machines("ma"), machines("mb")
    shared(a, b)
    from memd import apply as ap

    def edit(ws: ap.Workspace) -> ap.Edits:
        (ws.get().root / "t2.md").write_text(topic("t2", "fact number 2, rewritten by a dream.\n"))
        return ap.Edits(note="a dream")

    res = ap.run(b.project(), edit, state_dir=b.state_dir, job="dream", run_id=ap.new_run_id("dream", 0.0),
                 config=b.config, review=False)
    assert res.verdict == ap.Verdict.APPLIED
    undo_project(b.project(), b.config, b.state_dir, None, dry_run=False)
    assert held.load(b.state_dir, b.project().name).undone  # kept until a sync sees it agrees
    b.sync("app")
    assert held.status_lines(b.state_dir) == ""


def test_undo_without_sync_is_as_before(tmp_path: Path, file_remote: str) -> None:
    from memd.config import Config

    m = Machine(tmp_path, "ma", file_remote)
    m.config = Config()  # sync off
    m.write("t.md", topic("t", "a fact\n"))
    from memd import apply as ap

    def edit(ws: ap.Workspace) -> ap.Edits:
        (ws.get().root / "t.md").write_text(topic("t", "a changed fact\n"))
        return ap.Edits(note="x")

    ap.run(m.project(), edit, state_dir=m.state_dir, job="dream", run_id=ap.new_run_id("dream", 0.0),
           config=m.config, review=False)
    res, _ = undo_project(m.project(), m.config, m.state_dir, None, dry_run=False)
    assert res.restored == ["t.md"] and res.kept_local == []
    assert "a fact" in (m.read("t.md") or "") and held.status_lines(m.state_dir) == ""


def test_the_door_says_it(machines: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memd.cli import main

    a, b = machines("ma"), machines("mb")
    shared(a, b)
    _incoming(a, b)
    name = b.project().name
    assert main(_cli(b, tmp_path, "undo", name)) == 0
    out = capsys.readouterr().out
    assert "kept local" in out and f"memd sync --take-remote {name}" in out, out
    assert main(_cli(b, tmp_path, "status")) == 0
    out = capsys.readouterr().out
    assert f"sync: {name}: 3 file(s) undone here kept local" in out, out  # MEMORY.md, t1.md, x.md
    assert main(_cli(b, tmp_path, "sync", "--list")) == 0
    assert "undone" in capsys.readouterr().out
    assert main(_cli(b, tmp_path, "sync", "--keep-local", "--take-remote", name)) == 2
    capsys.readouterr()
    assert main(_cli(b, tmp_path, "sync", "--take-remote", name)) == 0
    assert b.read("x.md") is not None


def test_take_remote_keeps_a_line_written_here_before_the_undo(machines: Any) -> None:
    """Found by the fleet: an index line written here and never sent, then `memd undo` (whose index
    repair rewrote MEMORY.md), then `--take-remote`: the line stays (the undo's change is taken back out
    of this side, then merged against the shared base; the version the undo wrote is no common base)."""
    a, b = machines("ma"), machines("mb")
    shared(a, b)
    _incoming(a, b)
    b.write("MEMORY.md", (b.read("MEMORY.md") or "") + "Note: a line of mb's, never sent.\n")
    undo_project(b.project(), b.config, b.state_dir, None, dry_run=False)
    assert "never sent" in (b.read("MEMORY.md") or "")
    b.outcome("app", take_remote=True)
    assert "never sent" in (b.read("MEMORY.md") or "")
    assert b.read("x.md") is not None
    a.sync("app")
    assert "never sent" in (a.read("MEMORY.md") or "")


def test_a_folder_removed_after_an_undo_takes_the_remote_back(machines: Any) -> None:
    """What an undo kept here went with the folder (a reset): nothing is kept apart any more, the
    remote's memory comes back and no status line stays."""
    import shutil

    _a, b = _undone_here(machines)
    shutil.rmtree(b.mem())
    b.sync("app")
    assert b.read("x.md") is not None and held.status_lines(b.state_dir) == ""


@pytest.mark.parametrize("resolve", ["keep_local", "take_remote"])
def test_resolving_after_syncs_in_between_keeps_the_other_machines_words(machines: Any, resolve: str) -> None:
    """Found by the fleet: while an undone file is kept apart, syncs move the shared base on (each push
    carries the remote's version of it); the resolution merges from the version shared when the undo was
    made, else another machine's words written in between read as deleted here and leave the remote."""
    a, b = _undone_here(machines)
    b.sync("app")
    a.write("t1.md", (a.read("t1.md") or "") + "\n\n\nma's later line about t1.\n")
    a.sync("app")
    b.sync("app")  # kept apart still; the shared base now holds ma's later line
    b.outcome("app", **{resolve: True})
    a.sync("app")
    for m in (a, b):
        assert "ma's later line" in (m.read("t1.md") or ""), (m.name, m.read("t1.md"))


def test_take_remote_after_two_undos_keeps_what_was_written_between(machines: Any) -> None:
    """Found by the fleet: a file undone twice, a word written here between the two undos: --take-remote
    takes each undo back out in turn, newest first, and the word stays."""
    from memd import apply as ap

    a, b = machines("ma"), machines("mb")
    shared(a, b)
    a.write("t1.md", topic("t1", "fact number 1, corrected on ma.\n\n\n\n\n\n"))
    a.sync("app")
    took = b.outcome("app")
    undo_project(b.project(), b.config, b.state_dir, took.run_id, dry_run=False)
    b.write("t1.md", (b.read("t1.md") or "") + "\n\n\n\nmb's word between the undos.\n")

    def edit(ws: ap.Workspace) -> ap.Edits:
        path = ws.get().root / "t1.md"
        path.write_text(path.read_text() + "\n\n\n\na dream's line.\n")
        return ap.Edits(note="a dream")

    run = ap.new_run_id("dream", 0.0)
    assert ap.run(b.project(), edit, state_dir=b.state_dir, job="dream", run_id=run, config=b.config,
                  review=False).verdict == ap.Verdict.APPLIED
    undo_project(b.project(), b.config, b.state_dir, run, dry_run=False)
    assert len(held.load(b.state_dir, b.project().name).undone["t1.md"]["undos"]) == 2
    b.outcome("app", take_remote=True)
    t1 = b.read("t1.md") or ""
    assert "between the undos" in t1 and "corrected on ma" in t1, t1
