"""`memd forget` reaching the sync remote and the other machines (issue 22): real git remotes (a bare
repository over file://), machines with their own HOME and memd state, as in tests/test_sync.py.

What is forgotten here is a literal the secret rules do not know (a vault phrase), so sync carried it
to the remote and to the other machine like any text: exactly the case forget is for."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memd import history
from memd.core import secrets
from memd.forget import forget_project
from memd.sync import forget as sync_forget
from memd.sync import gitremote
from tests.plugins.sync import Machine, topic

PHRASE = "velvet-otter-" + "quarry-4471"  # built at run time, like the other secrets of the tests
BRANCH = "memory/github.com/me/app"


def _vault(extra: str = "") -> str:
    return topic("vault", f"The vault phrase is {PHRASE} (rotate yearly).\n{extra}")


def _git(remote: Path, *args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(["git", f"--git-dir={remote}", *args], input=input, capture_output=True, check=True).stdout


def remote_holds(remote: Path, text: str, *, host_gc: bool = False) -> int:
    """How many objects of the bare remote that a ref reaches hold text (`git log -p --all` agrees). With
    ``host_gc``: every object it has, after the host's own clean-up (its reflogs expired, `git gc
    --prune=now`): this remote keeps reflogs (core.logAllRefUpdates), as hosts keep their own."""
    if host_gc:
        _git(remote, "reflog", "expire", "--expire=now", "--all")
        _git(remote, "gc", "--quiet", "--prune=now")
        shas = _git(remote, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").decode().split()
    else:
        shas = [ln.split()[0] for ln in _git(remote, "rev-list", "--all", "--objects").decode().splitlines() if ln]
    count = _git(remote, "cat-file", "--batch", input="\n".join(shas).encode() + b"\n").count(text.encode())
    assert (text.encode() in _git(remote, "log", "-p", "--all")) == bool(count) or host_gc
    return count


def objects_holding(repo_dir: Path, text: str) -> int:
    from dulwich.repo import Repo

    repo = Repo(str(repo_dir))
    try:
        n = 0
        for sha in repo.object_store:
            obj = repo[sha]
            if text.encode() in getattr(obj, "data", b"") + getattr(obj, "message", b""):
                n += 1
        return n
    finally:
        repo.close()


def forget_on(m: Machine, what: sync_forget.What, *, apply: bool,
              before_push: Callable[[], Any] | None = None) -> tuple[Any, sync_forget.RemoteResult]:
    """What `memd forget` does on machine m (the command's two calls)."""
    p = m.project()
    local = forget_project(p, m.config, m.state_dir, what.matcher(), apply=apply)
    remote = sync_forget.forget_remote(p, m.config, m.state_dir, what, apply=apply, before_push=before_push)
    return local, remote


def shared_phrase(a: Machine, b: Machine) -> None:
    """The phrase in a topic file, in three commits of a's sync (and history), taken by b."""
    assert not secrets.scan(_vault()), "the phrase must be something the secret rules let through"
    for rel, text in (("deploy.md", topic("deploy", "CI on Buildkite.\n")), ("vault.md", _vault()),
                      ("vault.md", _vault("Ask Dana for the second factor.\n")),
                      ("notes.md", topic("notes", "Nothing secret here.\n"))):
        a.write(rel, text)
        history.snapshot(a.state_dir, a.project().name, a.mem(), f"snapshot with {rel}")  # as a run's would
        a.sync("app")
    assert b.outcome("app").outcome == "changed"
    assert PHRASE in (b.read("vault.md") or "")


def test_forget_rewrites_the_remote_and_the_other_machine_drops_it(machines: Any, file_remote: str) -> None:
    a, b = machines("ma"), machines("mb")
    remote = Path(file_remote.removeprefix("file://"))
    shared_phrase(a, b)
    pa, pb = a.project(), b.project()
    what = sync_forget.What("literal", PHRASE)
    held_in = [e for e in history.log(a.state_dir, pa.name) if PHRASE.encode() in b"".join(
        history.files_at(a.state_dir, pa.name, e.commit).values())]
    assert len(held_in) >= 3, "the phrase must be in at least three history commits"
    assert remote_holds(remote, PHRASE) > 0
    head_before = _git(remote, "rev-parse", f"refs/heads/{BRANCH}")

    local, rem = forget_on(a, what, apply=False)  # the dry run says what would change remotely too
    assert local.files == {"vault.md": 1} and local.commits >= 3
    assert rem.status == "proposed" and "would be rewritten and force-pushed" in rem.message, rem
    assert rem.commits >= 2 and rem.total >= rem.commits
    assert _git(remote, "rev-parse", f"refs/heads/{BRANCH}") == head_before  # nothing pushed
    assert PHRASE in (a.read("vault.md") or "")

    local, rem = forget_on(a, what, apply=True)
    assert rem.status == "changed" and rem.left == 0 and local.left == 0, rem
    assert PHRASE not in (a.read("vault.md") or "") and "[forgotten] (rotate yearly)" in (a.read("vault.md") or "")
    assert objects_holding(history.repo_dir(a.state_dir, pa.name), PHRASE) == 0
    assert objects_holding(gitremote.repo_path(a.state_dir), PHRASE) == 0
    assert remote_holds(remote, PHRASE) == 0  # no ref of the remote reaches it
    assert remote_holds(remote, PHRASE, host_gc=True) == 0  # and no object is left once the host cleans up
    log = _git(remote, "log", "--format=%B", f"refs/heads/{BRANCH}").decode()
    assert "memd-forget: v1" in log and "kind=literal" in log and PHRASE not in log
    assert [e for e in history.log(a.state_dir, pa.name) if e.kind == "rewrite"], "the rewrite is recorded"

    # b, at its next sync: drops it from its files and history, takes the rewritten branch, sends nothing back
    assert objects_holding(history.repo_dir(b.state_dir, pb.name), PHRASE) > 0
    runs_before = [r.run for r in history.list_runs(b.state_dir, pb.name)]
    dry = b.outcome("app", dry_run=True)
    assert dry.outcome == "proposed" and "would take it out of the files and history here" in dry.message, dry
    assert PHRASE in (b.read("vault.md") or "")
    out = b.outcome("app")
    assert out.outcome in ("changed", "unchanged") and "ma forgot a string of" in out.message, out
    assert "taken out here too" in out.message and out.details["forgot"], out
    assert PHRASE not in (b.read("vault.md") or "") and "[forgotten]" in (b.read("vault.md") or "")
    assert objects_holding(history.repo_dir(b.state_dir, pb.name), PHRASE) == 0
    assert objects_holding(gitremote.repo_path(b.state_dir), PHRASE) == 0
    assert remote_holds(remote, PHRASE) == 0
    assert [e for e in b.events.named("sync.forgot")] and b.events.named("sync.forgot")[0]["found"]
    assert [e for e in history.log(b.state_dir, pb.name) if e.kind == "rewrite"]
    # the rewrite did not break b's shared base: the next syncs converge without conflicts
    assert b.outcome("app").outcome == "unchanged"
    a.sync("app")
    b.sync("app")
    assert a.topics() == b.topics()
    assert not a.events.named("sync.conflict") and not b.events.named("sync.conflict")
    # undo of an older run still works on b's rewritten history
    assert runs_before and [r.run for r in history.list_runs(b.state_dir, pb.name)][-len(runs_before):] == runs_before
    undone = history.undo_run(b.state_dir, pb.name, pb.memory_dir, runs_before[-1], dry_run=True)
    assert undone.run == runs_before[-1]
    # applied once: the record is not honoured again
    assert "forgot" not in b.outcome("app").message


def test_a_file_written_again_with_what_was_forgotten_is_not_sent(machines: Any, file_remote: str) -> None:
    from memd.sync.held import status_lines

    a, b = machines("ma"), machines("mb")
    remote = Path(file_remote.removeprefix("file://"))
    shared_phrase(a, b)
    forget_on(a, sync_forget.What("literal", PHRASE), apply=True)
    b.sync("app")
    assert remote_holds(remote, PHRASE) == 0
    # a session on b writes it again (it was still in a transcript): sync keeps it here and says so
    b.write("again.md", topic("again", f"Reminder: the phrase {PHRASE}.\n"))
    b.write("deploy.md", topic("deploy", "CI on Buildkite, then staging.\n"))
    out = b.outcome("app")
    assert "what `memd forget` took out not sent" in out.message, out
    assert remote_holds(remote, PHRASE) == 0
    assert b"staging" in _git(remote, "show", f"refs/heads/{BRANCH}:deploy.md")  # the rest flows
    line = sync_forget.status_lines(b.state_dir)
    assert "again.md" in line and "`memd forget`" in line and "not sent" in line, line
    assert status_lines(b.state_dir) == ""  # not a hold of the remote's files
    assert list(sync_forget.held_files(b.state_dir)[b.project().name]) == ["again.md"]  # status --format json
    a.sync("app")
    assert "staging" in (a.read("deploy.md") or "") and a.read("again.md") is None
    b.write("again.md", topic("again", "Reminder: ask Dana for the phrase.\n"))
    b.sync("app")
    assert sync_forget.status_lines(b.state_dir) == ""
    a.sync("app")
    assert "ask Dana" in (a.read("again.md") or "")


def test_a_machine_whose_files_no_longer_hold_it_finds_it_in_its_history(machines: Any, file_remote: str) -> None:
    """Found by the sync fleet (issue 21): the other machine's live files no longer hold the forgotten text (it
    removed it, or its folder was reset), only its memd history and sync repository do. Looking there read the
    history's head with a refs API dulwich does not have: the honouring sync failed (an AttributeError, an
    empty message) at every sync, the project never synced again and the text stayed in that history."""
    a, b = machines("ma"), machines("mb")
    remote = Path(file_remote.removeprefix("file://"))
    shared_phrase(a, b)
    b.write("vault.md", topic("vault", "The vault phrase is with Dana now.\n"))  # not synced yet
    pb = b.project()
    assert objects_holding(history.repo_dir(b.state_dir, pb.name), PHRASE) > 0
    forget_on(a, sync_forget.What("literal", PHRASE), apply=True)
    out = b.outcome("app")
    assert out.outcome in ("changed", "unchanged") and "taken out here too" in out.message, out
    assert "history commit(s) rewritten" in out.message, out
    assert objects_holding(history.repo_dir(b.state_dir, pb.name), PHRASE) == 0
    assert objects_holding(gitremote.repo_path(b.state_dir), PHRASE) == 0
    assert remote_holds(remote, PHRASE) == 0
    a.sync("app")
    assert "with Dana now" in (a.read("vault.md") or "")  # b's own change flows as usual


def test_forget_with_a_moved_remote_is_refused_with_the_reason(machines: Any, file_remote: str) -> None:
    a, b = machines("ma"), machines("mb")
    remote = Path(file_remote.removeprefix("file://"))
    shared_phrase(a, b)
    what = sync_forget.What("literal", PHRASE)

    def b_pushes() -> None:  # another machine pushes between forget's fetch and its push
        b.write("late.md", topic("late", "Written on mb meanwhile.\n"))
        assert "sent" in b.outcome("app").message

    _local, rem = forget_on(a, what, apply=True, before_push=b_pushes)
    assert rem.status == "refused" and "moved since it was fetched" in rem.message and "again" in rem.message, rem
    assert remote_holds(remote, PHRASE) > 0  # the remote is as b left it: nothing forced over b's push
    assert b"late.md" in _git(remote, "ls-tree", "-r", "--name-only", f"refs/heads/{BRANCH}")
    # run again: the local side is clean already, the remote is rewritten now, b's late file kept
    local, rem = forget_on(a, what, apply=True)
    assert not local.files and rem.status == "changed", rem
    assert remote_holds(remote, PHRASE) == 0
    assert b"late.md" in _git(remote, "ls-tree", "-r", "--name-only", f"refs/heads/{BRANCH}")
    b.sync("app")
    assert PHRASE not in (b.read("vault.md") or "") and b.read("late.md") is not None
    assert remote_holds(remote, PHRASE) == 0


def test_a_machine_that_cannot_find_it_holds_the_file_and_says_so(machines: Any, file_remote: str,
                                                                  monkeypatch: Any) -> None:
    """`--secrets` forgotten on a, whose rules know the shape; b's rules do not (an older rule set, played
    by rules that find nothing): b cannot take it out, so it must not send its file back as a change."""
    from memd.core import secrets as rules

    token = "ghp_" + "Zq8RkT2mLw9XcV4bN7pQ1sJ6hY3uE5aD0fGi"
    real = rules.spans

    def blind(text: str, **kw: Any) -> list[Any]:
        return []

    a, b = machines("ma"), machines("mb")
    remote = Path(file_remote.removeprefix("file://"))
    monkeypatch.setattr(rules, "spans", blind)  # before the rules knew the shape: it was synced everywhere
    a.write("ci.md", topic("ci", f"CI pushes with {token} (rotate yearly).\n"))
    a.sync("app")
    b.sync("app")
    assert token in (b.read("ci.md") or "") and remote_holds(remote, token) > 0
    monkeypatch.setattr(rules, "spans", real)  # a has rules that know it
    _local, rem = forget_on(a, sync_forget.What("secrets"), apply=True)
    assert rem.status == "changed" and remote_holds(remote, token) == 0, rem
    monkeypatch.setattr(rules, "spans", blind)  # b's do not
    b.write("deploy.md", topic("deploy", "Deploys on Fridays.\n"))
    out = b.outcome("app")
    assert "ma forgot every finding of the secret rules" in out.message and "found it nowhere" in out.message, out
    assert "ci.md held here, never sent" in out.message, out
    assert token in (b.read("ci.md") or "")  # b could not find it
    assert remote_holds(remote, token) == 0  # and did not send it back
    assert b"Fridays" in _git(remote, "show", f"refs/heads/{BRANCH}:deploy.md")  # the rest flows
    line = sync_forget.status_lines(b.state_dir)
    assert "ci.md" in line and "could not find here what was taken out" in line, line
    b.sync("app")
    assert remote_holds(remote, token) == 0 and "ci.md" in sync_forget.status_lines(b.state_dir)
    # b gets the rules and forgets it itself: the file changed, the hold ends, the clean file is sent
    monkeypatch.setattr(rules, "spans", real)
    forget_on(b, sync_forget.What("secrets"), apply=True)
    assert token not in (b.read("ci.md") or "")
    b.sync("app")
    assert sync_forget.status_lines(b.state_dir) == "" and remote_holds(remote, token) == 0
    a.sync("app")
    assert a.read("ci.md") == b.read("ci.md")


def test_the_command_says_what_would_change_remotely_then_does_it(machines: Any, file_remote: str) -> None:
    import os
    import sys

    a, b = machines("ma"), machines("mb")
    remote = Path(file_remote.removeprefix("file://"))
    shared_phrase(a, b)
    cfg = a.home / "memd.toml"
    cfg.write_text(f'[sync]\nremote = "{file_remote}"\nmachine = "ma"\n')
    env = {**os.environ, "HOME": str(a.home), "XDG_STATE_HOME": str(a.home / ".local" / "state"),
           "XDG_CONFIG_HOME": str(a.home / ".config")}

    def memd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memd", "--claude-dir", str(a.claude), "--config", str(cfg),
                               "forget", a.project().name, *args], env=env, capture_output=True, text=True,
                              timeout=120, check=False)

    dry = memd("--string", PHRASE)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "1 match(es) would be taken out of vault.md" in dry.stdout
    assert f"sync remote: 4 of 5 commit(s) of {BRANCH} hold it; would be rewritten and force-pushed" in dry.stdout
    assert "dry run: nothing changed" in dry.stdout and PHRASE not in dry.stdout + dry.stderr
    assert remote_holds(remote, PHRASE) > 0
    done = memd("--string", PHRASE, "--apply")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"sync remote: 4 of 5 commit(s) of {BRANCH} rewritten and force-pushed" in done.stdout, done.stdout
    assert remote_holds(remote, PHRASE) == 0 and PHRASE not in done.stdout + done.stderr
    again = memd("--string", PHRASE)
    assert again.returncode == 0 and "nothing to forget" in again.stdout, again.stdout
    assert "the record telling the other machines is there already" in again.stdout


def test_a_machine_that_never_synced_the_project_can_forget_then_sync(machines: Any) -> None:
    """Found by tests/test_forget_fleet.py: the forgetting machine took the new head as what it shared,
    though it never merged the remote's files; its next sync then read them as deleted here (refused)."""
    a, b = machines("ma"), machines("mb")
    a.write("a.md", topic("a", "Note from ma.\n"))
    a.sync("app")
    _local, rem = forget_on(b, sync_forget.What("literal", PHRASE), apply=True)
    assert rem.status == "changed" and rem.commits == 0 and "a record" in rem.message, rem
    out = b.outcome("app")
    assert out.outcome == "changed" and b.read("a.md") == a.read("a.md"), out


def test_a_held_clone_made_the_writer_after_a_forget_does_not_send_it_back(machines: Any, file_remote: str,
                                                                          tmp_path: Path) -> None:
    """Found while adding `memd forget` and the second clone to the sync fleet (issue 21): a second clone of the
    repository on one machine, held while the first syncs, still holds what another machine forgot (memd never
    touches a held folder). Made the writer (`memd sync --writer`), it merges with the branch as a newcomer;
    the forget record is behind what this machine shares, and the records it applied were the first clone's:
    the newcomer must apply them too, not send the forgotten text back to the remote."""
    from memd.cli import main as memd
    from tests.test_sync_identity import cli, memory, outcomes, repo, session

    b = machines("mb")
    remote = Path(file_remote.removeprefix("file://"))
    b.write("vault.md", _vault())
    b.sync("app")
    a: Machine = machines("ma", repos=())
    one, two = repo(a.home / "src" / "app"), repo(a.home / "src" / "app-copy")
    session(a, one)
    session(a, two)
    mem1 = memory(a, one, {"a1.md": "clone one's memory\n"})
    mem2 = memory(a, two, {"c2.md": f"clone two noted the phrase {PHRASE} too\n"})
    out = outcomes(a)
    assert out[mem2.parent.name].outcome == "refused" and PHRASE in (mem1 / "vault.md").read_text()
    _local, rem = forget_on(b, sync_forget.What("literal", PHRASE), apply=True)
    assert rem.status == "changed", rem
    out = outcomes(a)  # clone one honours the record; clone two is held, left as it is
    assert "taken out here too" in out[mem1.parent.name].message, out
    assert PHRASE not in (mem1 / "vault.md").read_text() and PHRASE in (mem2 / "c2.md").read_text()
    assert remote_holds(remote, PHRASE) == 0
    assert memd(cli(a, tmp_path, "sync", "--writer", mem2.parent.name)) == 0
    out = outcomes(a)
    assert out[mem2.parent.name].outcome in ("changed", "unchanged"), out
    assert remote_holds(remote, PHRASE) == 0, out[mem2.parent.name].message
    assert PHRASE not in (mem2 / "c2.md").read_text(), out[mem2.parent.name].message
    assert objects_holding(history.repo_dir(a.state_dir, mem2.parent.name), PHRASE) == 0
    b.sync("app")
    assert "clone two noted the phrase" in (b.read("c2.md") or "")  # the rest of its memory flows
