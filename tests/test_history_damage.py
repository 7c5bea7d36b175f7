"""A damaged history (a disk error in memd's own git store: an object that does not parse, or holds other
bytes) never costs a word of memory: a snapshot that needs a damaged object writes it again before
anything relies on it, readers stop at the damage with a clear message (never "unexpected error"), what
is newer than the damage still lists and undoes, and forget refuses to leave a commit it cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest

from memd import history
from memd.cli import main
from memd.config import Config
from memd.core.rebuild import REPAIR
from memd.maintenance import rebuild_project
from tests.test_history import applied_run, cli_state_dir, make, tree


def _object(state: Path, project: str, sha: str) -> Path:
    return history.repo_dir(state, project) / "objects" / sha[:2] / sha[2:]


def _damage(path: Path) -> None:
    path.chmod(0o644)
    path.write_bytes(b"garbage, as a bad disk sector leaves it")


def _blob_id(data: bytes) -> str:
    from dulwich.objects import Blob

    return Blob.from_string(data).id.decode()


def test_a_damaged_object_a_snapshot_needs_is_written_again_so_undo_gets_the_words_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    p = make(tmp_path)
    state = cli_state_dir(tmp_path, monkeypatch)
    index = p.index_path.read_bytes() + b"- [Gone](gone.md) \xe2\x80\x94 the words the user wrote\n"
    p.index_path.write_bytes(index)
    history.snapshot(state, p.name, p.memory_dir, "a snapshot of today")
    blob = _object(state, p.name, _blob_id(index))
    _damage(blob)  # the index's bytes in the history are gone; the live file is intact
    res = rebuild_project(p, Config(), state, dry_run=False, mode=REPAIR)  # the link to a missing file
    assert res.written, res.reasons
    assert p.index_path.read_bytes() != index
    assert blob.read_bytes() != b"garbage, as a bad disk sector leaves it"  # written again from the live bytes
    claude = str(tmp_path / "claude")
    assert main(["undo", "--claude-dir", claude, p.name]) == 0, capsys.readouterr().err
    assert p.index_path.read_bytes() == index  # not a word lost


def test_a_damaged_newest_commit_is_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    p = make(tmp_path)
    state = cli_state_dir(tmp_path, monkeypatch)
    applied_run(state, p)
    live = tree(p.memory_dir)
    head = history.log(state, p.name, limit=1)[0].commit
    _damage(_object(state, p.name, head))
    claude = str(tmp_path / "claude")
    for args in (["history"], ["undo"], ["undo", "--dry-run"]):
        assert main([args[0], "--claude-dir", claude, p.name, *args[1:]]) == 1, args
        err = capsys.readouterr().err
        assert f"the history of {p.name} is damaged" in err and "unexpected error" not in err, err
        assert "move" in err and "aside" in err
    assert tree(p.memory_dir) == live  # nothing was touched


def test_damage_in_older_commits_leaves_the_newer_runs_listed_and_undoable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    p = make(tmp_path)
    state = cli_state_dir(tmp_path, monkeypatch)
    first = history.snapshot(state, p.name, p.memory_dir, "an old snapshot")
    _damage(_object(state, p.name, first))
    before = tree(p.memory_dir)
    run = applied_run(state, p)  # newer commits on top of the damaged one
    entries = history.log(state, p.name)
    assert entries[-1].kind == history.DAMAGED and entries[-1].commit == first
    assert [r.run for r in history.list_runs(state, p.name)] == [run]
    claude = str(tmp_path / "claude")
    assert main(["history", "--claude-dir", claude, p.name]) == 1  # the listing is not whole: said, and not 0
    out = capsys.readouterr().out
    assert run in out and f"commit {first[:10]} is damaged" in out
    assert main(["undo", "--claude-dir", claude, p.name, run]) == 0
    assert tree(p.memory_dir) == before
    # forget rewrites every commit: it refuses one it cannot read, and changes nothing
    (p.memory_dir / "a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\nalpha hunter2\n")
    live = tree(p.memory_dir)
    assert main(["forget", "--claude-dir", claude, p.name, "--string", "hunter2", "--apply"]) == 1
    err = capsys.readouterr().err
    assert "damaged" in err and "forget cannot rewrite what it cannot read" in err, err
    assert tree(p.memory_dir) == live


def test_the_viewer_shows_the_project_and_says_the_history_is_damaged(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jinja2")
    from memd.ui import views
    from memd.ui.charts import charts_view

    p = make(tmp_path)
    state = cli_state_dir(tmp_path, monkeypatch)
    applied_run(state, p)
    _damage(_object(state, p.name, history.log(state, p.name, limit=1)[0].commit))
    page = views.project_page(p, Config(), state)
    assert page.index is not None and page.topics  # the rest of the page is whole
    assert any("is damaged" in x for x in page.timeline.problems), page.timeline.problems
    charts = charts_view(p, Config(), state)
    assert "is damaged" in str(charts)
