"""Issue 21 (stalls): one refused change holds that file, never the project; what is held is in
`memd status` and `memd sync --list` with the command that resolves it. Local bare remotes only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memd.sync import held
from tests.plugins.sync import topic
from tests.test_sync import fake_key
from tests.test_sync_guards import _add_to_remote, _remote_names


def _cli(m: Any, tmp_path: Path, *args: str) -> list[str]:
    conf = tmp_path / f"{m.name}.toml"
    conf.write_text(f'[paths]\nstate_dir = "{m.state_dir}"\n[sync]\nremote = "{m.config.sync.remote}"\n'
                    f'machine = "{m.name}"\n')
    return [*args, "--claude-dir", str(m.claude), "--config", str(conf)]


def test_one_refused_file_is_held_and_the_rest_flows(machines: Any, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from memd.cli import main

    a, b = machines("ma"), machines("mb")
    a.write("base.md", topic("base", "shared\n"))
    a.sync("app")
    b.sync("app")
    # another machine's memd (older, other rules) put a secret on the remote, next to a good change
    a.write("ok.md", topic("ok", "a good memory\n"))
    a.sync("app")
    leak = topic("leak", f"aws key {fake_key()}\n").encode()
    _add_to_remote(a.config.sync.remote, b"leak.md", leak)
    b.write("mine.md", topic("mine", "b's own\n"))
    out = b.outcome("app")
    assert out.outcome != "refused", out
    assert b.read("ok.md") is not None  # the rest came in
    assert b.read("leak.md") is None  # the refused file did not
    assert "held" in out.message and "leak.md" in out.message, out
    names = _remote_names(b)
    assert b"mine.md" in names  # ... and the rest went out
    assert names[b"leak.md"] == leak  # the remote keeps its version of the held file
    # said in status and in --list, with the command that resolves it
    h = held.load(b.state_dir, b.project().name)
    assert set(h.files) == {"leak.md"} and "secret" in h.files["leak.md"]["reason"]
    assert main(_cli(b, tmp_path, "status")) == 0
    text = capsys.readouterr().out
    assert "leak.md" in text and f"--keep-local {b.project().name}" in text, text
    import json

    assert main(_cli(b, tmp_path, "status", "--format", "json")) == 0
    doc = json.loads(capsys.readouterr().out)["sync"]  # the same, as values
    assert list(doc["held"]) == [b.project().name]
    assert list(doc["held"][b.project().name]["files"]) == ["leak.md"]
    assert "secret" in doc["held"][b.project().name]["files"]["leak.md"]
    assert any("leak.md" in line and "--keep-local" in line for line in doc["lines"]), doc
    assert main(_cli(b, tmp_path, "sync", "--list")) == 0
    assert "1 file(s)" in capsys.readouterr().out
    # held across syncs: a later sync neither takes it nor drops it from the remote
    b.write("mine2.md", topic("mine2", "more\n"))
    b.sync("app")
    assert b.read("leak.md") is None and _remote_names(b)[b"leak.md"] == leak
    # resolved by the user: this machine's version (no such file) goes out
    assert main(_cli(b, tmp_path, "sync", "--keep-local", b.project().name)) == 0
    capsys.readouterr()
    assert b"leak.md" not in _remote_names(b)
    assert held.load(b.state_dir, b.project().name).empty
    assert held.status_lines(b.state_dir) == ""


def test_a_held_push_is_a_status_line(machines: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memd.cli import main

    a = machines("ma")
    for i in range(6):
        a.write(f"t{i}.md", topic(f"t{i}", f"fact {i} with words enough\n"))
    a.sync("app")
    for p in a.mem().iterdir():
        p.unlink()
    assert a.outcome("app").outcome == "refused"
    assert main(_cli(a, tmp_path, "status")) == 0
    text = capsys.readouterr().out
    assert f"--push-deletions {a.project().name}" in text and "deletes every memory" in text, text
    a.sync("app", push_deletions=True)
    assert held.status_lines(a.state_dir) == ""



def _save_many(state_dir: str, project: str) -> None:
    for i in range(300):
        held.save(Path(state_dir), project, held.Held({f"f{i}.md": {"remote": "absent", "why": "x"}}, {}, {}))


def test_saves_of_several_projects_at_once_keep_every_row(tmp_path: Path) -> None:
    """held.json holds every project's row; a sync of one project and an undo of another (each under its
    own project's lock only) may write it at once: none loses another's newest row (without the file's
    own lock, 5 of 5 such runs lost one)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_save_many, args=(str(tmp_path), f"p{n}")) for n in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert all(p.exitcode == 0 for p in procs)
    rows = held.load_all(tmp_path)
    assert sorted(rows) == ["p0", "p1", "p2"]
    assert all(set(r.files) == {"f299.md"} for r in rows.values()), {k: list(r.files) for k, r in rows.items()}
