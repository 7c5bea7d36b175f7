"""Sync through a git remote (issue 15): real remotes started by the test (a bare repository over
file:// and dulwich's smart-HTTP server on loopback), machines with their own HOME, Claude folder
and memd state, the same repository at a different path on each. No network."""

from __future__ import annotations

import random
import shutil
import string
from pathlib import Path
from typing import Any

import pytest

from memd import history
from memd.sync import evidence, gitremote
from tests.plugins.sync import HttpRemote, Machine, bare_remote, topic

LINES = "".join(f"line {i}\n" for i in range(1, 11))


def fake_key() -> str:
    rng = random.Random(7)
    return "AKIA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))


def conflict(a: Machine, b: Machine, theirs: str, mine: str) -> Any:
    """db.md shared, then changed on both; a syncs first, b meets the conflict: b's outcome."""
    a.write("db.md", topic("db", "The database is Postgres 15.\n"))
    a.sync("app")
    b.sync("app")
    a.write("db.md", topic("db", theirs))
    b.write("db.md", topic("db", mine))
    a.sync("app")
    return b.outcome("app")


def test_two_machines_share_a_project_through_a_file_remote(machines: Any) -> None:
    a: Machine = machines("ma")
    b: Machine = machines("mb")
    assert a.project().name != b.project().name  # different paths, different folder names
    a.write("deploy.md", topic("deploy", "Deploys go through the staging box first.\n"))
    out = a.outcome("app")
    assert out.outcome == "unchanged" and "sent" in out.message, out
    out = b.outcome("app")
    assert out.outcome == "changed", out
    assert b.read("deploy.md") == a.read("deploy.md")
    assert "deploy.md" in (b.read("MEMORY.md") or "")  # the index rebuilt from the merged topic files
    again = b.outcome("app")
    assert again.outcome == "unchanged" and again.message == "nothing new on either side", again
    b.write("x.md", topic("x", "later\n"))  # a change after the last sync is never mistaken for nothing new
    assert "sent" in b.outcome("app").message
    log = history.log(b.state_dir, b.project().name)
    assert any(e.kind == "after" and e.job == "sync" for e in log)  # a run like the others


def test_a_smart_http_remote_on_loopback(tmp_path: Path, git_env: Path, machines: Any) -> None:
    srv = HttpRemote(bare_remote(tmp_path / "h.git"))
    try:
        a, b = machines("ma", srv.url), machines("mb", srv.url)
        a.write("x.md", topic("x", "from a\n"))
        assert a.outcome("app").outcome == "unchanged"
        assert b.outcome("app").outcome == "changed"
        assert b.read("x.md") == a.read("x.md")
    finally:
        srv.close()


def test_https_with_the_users_credential_helper(tmp_path: Path, git_env: Path, machines: Any) -> None:
    srv = HttpRemote(bare_remote(tmp_path / "auth.git"), auth=("me", "s3cret-pass"))
    try:
        a = machines("ma", srv.url)
        a.write("x.md", topic("x", "body\n"))
        out = a.outcome("app")
        assert out.outcome == "failed" and out.error == "auth", out
        assert "credentials" in out.message and "untouched" in out.message
        assert a.read("x.md") is not None
        # the user's own credential helper (git's `store`), as their global git config names it
        store = tmp_path / "creds"
        store.write_text(srv.url.replace("http://", "http://me:s3cret-pass@").rstrip("/") + "\n")
        git_env.write_text(f"[credential]\n\thelper = store --file={store}\n")
        out = a.outcome("app")
        assert out.outcome == "unchanged" and "sent" in out.message, out
    finally:
        srv.close()


def test_changes_on_both_sides_merge_line_wise(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    a.write("notes.md", topic("notes", LINES))
    a.sync("app")
    b.sync("app")
    a.write("notes.md", topic("notes", LINES.replace("line 2\n", "line 2 (a)\n")))
    b.write("notes.md", topic("notes", LINES.replace("line 9\n", "line 9 (b)\n")))
    b.write("other.md", topic("other", "b's own\n"))
    assert a.outcome("app").outcome in ("changed", "unchanged")  # b's first index may come in
    out = b.outcome("app")
    assert out.outcome == "changed" and out.details["conflicts"] == [], out
    a.sync("app")
    for m in (a, b):
        text = m.read("notes.md") or ""
        assert "line 2 (a)" in text and "line 9 (b)" in text
    assert a.topics() == b.topics()


def test_claude_codes_modified_date_is_no_conflict() -> None:
    from memd.sync.merge import merge_text

    def f(date: str, body: str) -> bytes:
        return (f"---\nname: n\nmetadata:\n  type: project\n  modified: {date}\n---\n\n{body}").encode()

    base = f("2026-11-01", LINES)
    a = f("2026-11-20", LINES.replace("line 1\n", "line 1 (a)\n"))
    b = f("2026-11-25", LINES.replace("line 10\n", "line 10 (b)\n"))
    merged = merge_text(base, a, b)
    assert merged is not None
    assert b"modified: 2026-11-25" in merged and b"line 1 (a)" in merged and b"line 10 (b)" in merged


def test_a_true_conflict_keeps_local_and_is_surfaced_once(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    out = conflict(a, b, "The database is Postgres 16.\n", "The database is MySQL now.\n")
    assert out.details["conflicts"] == ["db.md"], out
    text = b.read("db.md") or ""
    assert "MySQL" in text and "Postgres 16" in text  # local kept, the other side's words in a block after it
    events = b.events.named("sync.conflict")
    assert [e["file"] for e in events] == ["db.md"] and events[0]["machine"] == "ma"
    rows = evidence.open_conflicts(b.state_dir, b.project().name)
    assert len(rows) == 1 and "Postgres 16" in rows[0].remote and "MySQL" in rows[0].local
    assert any(e.kind == "theirs" for e in history.log(b.state_dir, b.project().name))
    text, ids = evidence.for_dream(b.state_dir, b.project().name)
    assert "Postgres 16" in text and "MySQL" in text and ids == [rows[0].id]
    assert "1 conflict" in evidence.status_line(b.state_dir)
    # the other machine takes the kept side; nobody surfaces it again
    a.sync("app")
    b.sync("app")
    a.sync("app")
    assert a.read("db.md") == b.read("db.md")
    assert not a.events.named("sync.conflict") and len(b.events.named("sync.conflict")) == 1
    assert evidence.settle(b.state_dir, b.project().name, ids) == 1
    assert evidence.status_line(b.state_dir) == ""


def test_a_conflict_keeps_both_sides_words_in_the_file_on_every_machine(machines: Any) -> None:
    """Issue 21 #3: this machine's text, then a marked block with the other machine's differing lines
    (its name, the date); the same file on both machines; `memd check` reports the block."""
    from memd.core import conflict as cblock
    from memd.core import frontmatter
    from memd.core.files import FolderSnapshot
    from memd.core.lint import lint

    a, b = machines("ma"), machines("mb")
    conflict(a, b, "The database is Postgres 16.\n", "The database is MySQL now.\n")
    a.sync("app")  # a takes b's merged file: its own words come back to it inside the block
    for m in (a, b):
        text = m.read("db.md") or ""
        lines = text.splitlines()
        begin = next(i for i, ln in enumerate(lines) if cblock.is_begin(ln))
        end = next(i for i, ln in enumerate(lines) if cblock.is_end(ln))
        assert lines.index("The database is MySQL now.") < begin < lines.index("The database is Postgres 16.") < end
        assert "from ma (" in lines[begin] and lines[end] == cblock.END, lines
        assert frontmatter.parse(text).data.get("name") == "db"  # the frontmatter untouched
        found = [f for f in lint(FolderSnapshot.from_texts({"db.md": text, "MEMORY.md": m.read("MEMORY.md") or ""}))
                 if f.code == "MEM090"]
        assert [(f.path, f.line, f.severity) for f in found] == [("db.md", begin + 1, "warning")], found
        assert "ma's" in found[0].message
    assert a.read("db.md") == b.read("db.md")
    # resolved by hand on one machine: the resolution reaches the other, no block is left anywhere
    b.write("db.md", topic("db", "The database is Postgres 16.\n"))
    b.sync("app")
    a.sync("app")
    assert a.read("db.md") == b.read("db.md") and cblock.count(a.read("db.md") or "") == 0


def test_a_frontmatter_conflict_keeps_this_sides_frontmatter_and_puts_the_block_after_it() -> None:
    from memd.core import conflict as cblock
    from memd.core import frontmatter
    from memd.sync.merge import merge_file

    def f(desc: str, date: str, body: str) -> bytes:
        return (f"---\nname: db\ndescription: {desc}\nmetadata:\n  type: project\n  modified: {date}\n---\n\n"
                f"{body}").encode()

    base = f("Which database", "2026-11-01", LINES)
    mine = f("The app's database", "2026-11-20", LINES.replace("line 5\n", "line 5 (mine)\n"))
    theirs = f("Database and version", "2026-11-25", LINES.replace("line 5\n", "line 5 (theirs)\n"))
    fm = merge_file("db.md", base, mine, theirs, machine="desk", date="2026-12-01")
    assert fm.how == "conflict" and fm.local == mine and fm.remote == theirs
    text = (fm.result or b"").decode()
    parsed = frontmatter.parse(text)
    assert parsed.data.get("description") == "The app's database" and parsed.yaml_error is None, text
    lines = text.splitlines()
    close = lines.index("---", 1)
    assert cblock.is_begin(lines[close + 1]) and "desk (2026-12-01)" in lines[close + 1], text
    assert lines[close + 2] == "description: Database and version" and cblock.is_end(lines[close + 3]), text
    assert lines[:close].count("  modified: 2026-11-25") == 1  # the date: the later one, never in a block
    assert "line 5 (mine)\n" + cblock.begin_line("desk", "2026-12-01") + "\nline 5 (theirs)\n" + cblock.END in text
    assert [b.line for b in cblock.blocks(text)] == [close + 2, lines.index("line 5 (mine)") + 2]
    # merged again with the block on one side (the other machine met it first): no markers nested
    again = merge_file("db.md", base, mine.replace(b"line 9\n", b"line 9 (mine)\n"), fm.result or b"",
                       machine="desk", date="2026-12-02")
    assert cblock.count((again.result or b"").decode()) == cblock.count(text)


def test_deleted_on_one_side_changed_on_the_other_is_kept(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    a.write("k.md", topic("k", "v1\n"))
    a.write("keep.md", topic("keep", "stay\n"))
    for m in (a, b):
        m.sync("app")
    (a.mem() / "k.md").unlink()
    b.write("k.md", topic("k", "v2\n"))
    a.sync("app")
    b.sync("app")
    a.sync("app")
    assert a.read("k.md") == b.read("k.md") and "v2" in (a.read("k.md") or "")


def test_memory_md_is_rebuilt_keeping_both_sides_prose(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    a.write("x.md", topic("x", "x\n"))
    a.write("MEMORY.md", "# Memory\n\nRead the deploy notes first.\n\n- [x](x.md) — about x\n")
    a.sync("app")
    b.sync("app")
    b.write("y.md", topic("y", "y\n"))
    b.write("MEMORY.md", (b.read("MEMORY.md") or "") + "\nAsk before touching prod.\n")
    a.write("MEMORY.md", (a.read("MEMORY.md") or "") + "\nThe wiki is stale.\n")
    b.sync("app")
    a.sync("app")
    idx = a.read("MEMORY.md") or ""
    for line in ("Read the deploy notes first.", "Ask before touching prod.", "The wiki is stale.", "(y.md)"):
        assert line in idx, idx


def test_a_remote_that_would_delete_most_entries_is_refused(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    for i in range(8):
        a.write(f"t{i}.md", topic(f"t{i}", f"fact {i}\n"))
    a.sync("app")
    b.sync("app")
    for i in range(7):
        (a.mem() / f"t{i}.md").unlink()
    assert a.outcome("app").outcome == "refused"  # held by a's outgoing guard (issue 21)
    a.sync("app", push_deletions=True)  # the user insisted: b's incoming guard still refuses it
    before = b.topics()
    out = b.outcome("app")
    # issue 21: the deletions are held here, file by file, and said; the rest would flow
    assert out.details["held"] == [f"t{i}.md" for i in range(7)] and "held 7 file(s)" in out.message, out
    assert "deletes 7 of 8" in out.message, out
    assert b.topics() == before


def test_no_secret_is_pushed_and_team_is_never_synced(machines: Any, tmp_path: Path) -> None:
    a, b = machines("ma"), machines("mb")
    a.write("aws.md", topic("aws", f"aws key {fake_key()}\n"))
    a.write("ok.md", topic("ok", "fine\n"))
    a.write("team/shared.md", topic("shared", "the team's\n"))
    out = a.outcome("app")
    assert "1 file(s) with a secret not sent" in out.message, out
    assert a.events.named("sync.withheld")
    b.sync("app")
    assert b.read("ok.md") is not None
    assert b.read("aws.md") is None and b.read("team/shared.md") is None
    remote = gitremote.open_repo(a.state_dir)
    try:
        h = gitremote.heads(remote, "memory/github.com/me/app")
        files = gitremote.files_of(remote, h.remote, 10**6).files
    finally:
        remote.close()
    assert set(files) == {"ok.md"}  # what a sent (no index: a had none)
    assert fake_key() not in "".join(v.decode() for v in files.values())


def test_offline_then_back(machines: Any, tmp_path: Path) -> None:
    a = machines("ma")
    a.write("x.md", topic("x", "x\n"))
    before = a.topics()
    out = a.outcome("app", remote="file://" + str(tmp_path / "nowhere.git"))
    assert out.outcome == "failed" and out.error == "unreachable" and "untouched" in out.message, out
    assert a.topics() == before
    assert a.outcome("app").outcome == "unchanged"


def test_a_push_that_lost_the_race_is_merged_and_retried(machines: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from memd.sync import job

    a, b = machines("ma"), machines("mb")
    a.write("n.md", topic("n", LINES))
    a.sync("app")
    b.sync("app")
    a.write("n.md", topic("n", LINES.replace("line 1\n", "line 1 (a)\n")))
    b.write("n.md", topic("n", LINES.replace("line 10\n", "line 10 (b)\n")))
    real = job.Session.fetch
    calls = {"n": 0}

    def fetch_then_b_pushes(self: job.Session) -> bool:
        ok = real(self)
        calls["n"] += 1
        if calls["n"] == 1:
            monkeypatch.setattr(job.Session, "fetch", real)
            b.sync("app")  # another machine pushes between a's fetch and a's push
        return ok

    monkeypatch.setattr(job.Session, "fetch", fetch_then_b_pushes)
    out = a.outcome("app")
    assert out.outcome in ("changed", "unchanged") and "sent" in out.message, out
    assert len(a.events.named("sync.push_rejected")) == 1
    b.sync("app")
    assert a.topics() == b.topics()
    text = a.read("n.md") or ""
    assert "line 1 (a)" in text and "line 10 (b)" in text


def test_a_force_pushed_remote_is_refused_until_forgotten(machines: Any, tmp_path: Path) -> None:
    a, b = machines("ma"), machines("mb")
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")
    # someone rewrites the branch with an unrelated history
    c = machines("mc", "file://" + str(bare_remote(tmp_path / "other.git")))
    c.write("y.md", topic("y", "y\n"))
    c.sync("app")
    other = gitremote.open_repo(c.state_dir)
    head = gitremote.heads(other, "memory/github.com/me/app").mine
    other.close()
    assert head is not None
    r = gitremote.git(c.state_dir, ["push", "--force", a.config.sync.remote,
                                    f"{head}:refs/heads/memory/github.com/me/app"], timeout=30)
    assert r.code == 0, r
    before = a.topics()
    out = a.outcome("app")
    assert out.outcome == "refused" and "rewritten" in out.message and "--forget" in out.message, out
    assert a.topics() == before
    repo = gitremote.open_repo(a.state_dir)
    assert gitremote.forget(repo, "memory/github.com/me/app")
    repo.close()
    out = a.outcome("app")
    assert out.outcome == "changed", out
    assert a.read("x.md") is not None and a.read("y.md") is not None
    assert b.outcome("app").outcome == "changed"


def test_a_damaged_remote_is_reported_and_nothing_changes(machines: Any, tmp_path: Path) -> None:
    a, b = machines("ma"), machines("mb")
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")
    remote_dir = Path(a.config.sync.remote.removeprefix("file://"))
    for obj in (remote_dir / "objects").glob("??/*"):
        obj.write_bytes(b"garbage")  # every loose object broken
    b.write("mine.md", topic("mine", "b\n"))
    before = b.topics()
    out = b.outcome("app")
    assert out.outcome == "failed" and "untouched" in out.message, out
    assert out.error in ("corrupt", "git"), out
    assert b.topics() == before


def test_a_sync_is_undone_like_any_run(machines: Any) -> None:
    from memd.maintenance import undo_project

    a, b = machines("ma"), machines("mb")
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")
    assert b.outcome("app").outcome == "changed"
    undo_project(b.project(), b.config, b.state_dir, None, dry_run=False)
    assert b.read("x.md") is None


def test_dry_run_writes_and_sends_nothing(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")
    b.write("y.md", topic("y", "y\n"))
    out = b.outcome("app", dry_run=True)
    assert out.outcome == "proposed" and "x.md" in out.details["diff"], out
    assert b.read("x.md") is None
    a.sync("app")
    assert a.read("y.md") is None


def test_identities() -> None:
    from memd.sync.identity import branch_of, normalise_url

    same = {"git@GitHub.com:Me/App.git", "https://github.com/me/app", "https://u:p@github.com/me/app.git/",
            "ssh://git@github.com:22/me/app", "ssh://git@github.com/me/app.git", "git+ssh://github.com/me/app"}
    assert {normalise_url(u) for u in same} == {"github.com/me/app"}
    assert normalise_url("ssh://git@host:2222/x/y") == "host:2222/x/y"
    for local in ("/srv/git/app.git", "file:///srv/git/app", "../app", ""):
        assert normalise_url(local) is None
    assert branch_of("github.com/me/app") == "memory/github.com/me/app"
    assert branch_of("host:2222/a..b/.x.lock") == "memory/host-2222/a-b/x"


def test_a_project_without_origin_is_synced_only_when_mapped(machines: Any, tmp_path: Path) -> None:
    from memd.config import Config, SyncConfig, replace
    from memd.sync.identity import identify

    a = machines("ma")
    (a.repos["app"] / ".git" / "config").write_text("")
    assert identify(a.project(), a.config).identity is None
    assert a.sync().outcomes == []  # --all: only projects with an identity
    named = a.outcome("app")
    assert named.outcome == "skipped" and "sync.identities" in named.message
    cfg = Config(sync=replace(a.config.sync, identities={a.project().name: "my-app"}))
    assert identify(a.project(), cfg).identity == "my-app"
    assert identify(a.project(), Config(sync=SyncConfig(exclude=[a.project().name]))).excluded


def test_config_rejects_a_bad_remote() -> None:
    from memd.config import from_mapping
    from memd.errors import ConfigError

    for ok in ("git@github.com:me/m.git", "https://github.com/me/m", "ssh://git@h/m", "/srv/m.git",
               "file:///srv/m.git", "host:me/m"):
        assert from_mapping({"sync": {"remote": ok}}).sync.remote == ok
    with pytest.raises(ConfigError) as e:
        from_mapping({"sync": {"remote": "not a url", "exclude": "x", "identities": {"a": 1}, "interval_minutes": 0}})
    text = str(e.value)
    for key in ("sync.remote", "sync.exclude", "sync.identities.a", "sync.interval_minutes"):
        assert key in text, text


def test_the_door(machines: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memd.cli import main

    a = machines("ma")
    a.write("x.md", topic("x", "x\n"))
    conf = tmp_path / "c.toml"
    conf.write_text(f'[paths]\nstate_dir = "{a.state_dir}"\n[sync]\nremote = "{a.config.sync.remote}"\n'
                    'machine = "ma"\n')
    base = ["--claude-dir", str(a.claude), "--config", str(conf)]
    assert main(["sync", *base, "--all"]) == 0
    out = capsys.readouterr().out
    assert "unchanged" in out and "sent" in out, out
    assert main(["sync", *base, "--list"]) == 0
    out = capsys.readouterr().out
    assert "github.com/me/app" in out and "memory/github.com/me/app" in out, out
    off = tmp_path / "off.toml"
    off.write_text(f'[paths]\nstate_dir = "{a.state_dir}"\n')
    assert main(["sync", "--claude-dir", str(a.claude), "--config", str(off), "--all"]) == 2


def test_trigger_sync_reaches_the_daemon_as_its_own_request(tmp_path: Path) -> None:
    from memd.daemon import control

    control.write_request(tmp_path, "sync", ["p"])
    req = control.take_requests(tmp_path, "sync")
    assert req.found and req.projects == ["p"]
    assert not control.take_requests(tmp_path, "catchup").found
    assert control.SIGNALS["sync"] == control.SIGNALS["catchup"]


def test_copying_a_state_folder_does_not_leak_into_memory(machines: Any) -> None:
    a = machines("ma")
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")
    assert gitremote.repo_path(a.state_dir).is_dir()
    assert not any(p.name.endswith(".git") for p in a.mem().rglob("*"))
    shutil.rmtree(gitremote.repo_path(a.state_dir))  # a lost sync repository is made again
    assert a.outcome("app").outcome in ("unchanged", "changed")


def test_status_names_open_conflicts(machines: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memd.cli import main

    a, b = machines("ma"), machines("mb")
    conflict(a, b, "two\n", "three\n")
    conf = tmp_path / "s.toml"
    conf.write_text(f'[paths]\nstate_dir = "{b.state_dir}"\n')
    assert main(["status", "--claude-dir", str(b.claude), "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    assert f"sync: 1 conflict(s) between machines kept for the next dream: {b.project().name} (1)" in out, out
    assert f"sync: 1 conflict block(s) in memory files to resolve (`memd check` shows where): {b.project().name} (1)" \
        in out, out


def test_a_file_without_frontmatter_stays_where_it_was_written(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    a.write("scratch.md", "just my notes, no frontmatter\n")
    a.write("ok.md", topic("ok", "fine\n"))
    out = a.outcome("app")
    assert "1 file(s) with no frontmatter not sent" in out.message, out
    got = b.outcome("app")
    assert got.outcome == "changed", got  # not refused by b's guards
    assert b.read("ok.md") is not None and b.read("scratch.md") is None


def test_a_project_whose_memory_claude_code_switched_off_is_not_synced(machines: Any) -> None:
    """Issue 23 #3: autoMemoryEnabled false in the repository's own settings: sync leaves it alone."""
    a: Machine = machines("ma")
    a.write("deploy.md", topic("deploy", "Deploys go through the staging box first.\n"))
    (a.repos["app"] / ".claude").mkdir()
    (a.repos["app"] / ".claude" / "settings.local.json").write_text('{"autoMemoryEnabled": false}')
    res = a.sync("app")
    assert not res.outcomes and any("memory_off" in why and "auto memory is off" in why
                                    for why in res.skipped.values()), res
    (a.repos["app"] / ".claude" / "settings.local.json").write_text("{}")
    assert "sent" in a.outcome("app").message
