"""Issue 21: what a sync sends is guarded like what it takes (findings 2 and 6), the remote must be
memd's (finding 8), a file one machine cannot read stays on the remote (finding 7). Real bare git
remotes over file://, machines with their own HOME; no network."""

from __future__ import annotations

import shutil
from typing import Any

from memd.sync import gitremote
from tests.plugins.sync import Machine, topic

BRANCH = "memory/github.com/me/app"


def remote_files(m: Machine) -> dict[str, bytes]:
    """What the remote's branch holds, as m's last fetch saw it."""
    m.sync("app", dry_run=True)  # a fetch
    repo = gitremote.open_repo(m.state_dir)
    try:
        return gitremote.files_of(repo, gitremote.heads(repo, BRANCH).remote, 10**6).files
    finally:
        repo.close()


def shared(a: Machine, b: Machine, n: int = 8) -> None:
    for i in range(n):
        a.write(f"t{i}.md", topic(f"t{i}", f"fact number {i}, with enough words to count as a memory.\n"))
    a.sync("app")
    b.sync("app")
    assert len(b.topics()) == n


def test_an_emptied_folder_is_held_not_pushed(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    shared(a, b)
    for p in a.mem().iterdir():
        p.unlink()
    out = a.outcome("app")
    assert out.outcome == "refused", out
    assert "held" in out.message and "--push-deletions" in out.message and "deletes" in out.message, out
    assert len([k for k in remote_files(b) if k != "MEMORY.md"]) == 8
    b.sync("app")
    assert len(b.topics()) == 8
    # the user says so: the deletion goes out
    out = a.outcome("app", push_deletions=True)
    assert out.outcome in ("unchanged", "changed") and "sent" in out.message, out
    assert [k for k in remote_files(b) if k != "MEMORY.md"] == []


def test_a_push_that_shrinks_most_memories_is_held(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    shared(a, b)
    for i in range(8):
        a.write(f"t{i}.md", topic(f"t{i}", "x\n"))
    out = a.outcome("app")
    assert out.outcome == "refused" and "shrinks" in out.message, out
    assert b"fact number 3" in remote_files(b)["t3.md"]


def test_one_deletion_within_the_share_is_sent(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    shared(a, b)
    (a.mem() / "t0.md").unlink()
    out = a.outcome("app")
    assert "sent" in out.message, out
    assert "t0.md" not in remote_files(b)


def test_a_missing_memory_folder_is_nothing_here_yet(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    shared(a, b)
    shutil.rmtree(a.mem())
    out = a.outcome("app")
    assert out.outcome == "changed", out
    assert len(a.topics()) == 8  # taken back from the remote, not deleted on it
    assert len([k for k in remote_files(b) if k != "MEMORY.md"]) == 8


def test_undo_of_a_first_sync_never_empties_the_remote(machines: Any) -> None:
    """Finding 6: a new machine's first sync undone, then synced again: the undo is kept on this machine
    (tests/test_sync_undo.py), the remote keeps all; `--keep-local` would still be held by the guard."""
    from memd.maintenance import undo_project

    a, b = machines("ma"), machines("mb")
    shared(a, b)
    undo_project(b.project(), b.config, b.state_dir, None, dry_run=False)
    assert b.topics() == {}
    out = b.outcome("app")
    assert out.outcome != "failed" and "undone here kept local" in out.message, out
    assert len([k for k in remote_files(a) if k != "MEMORY.md"]) == 8
    a.sync("app")
    assert len(a.topics()) == 8


def test_the_door_sends_deletions_only_when_told(machines: Any, tmp_path: Any,
                                                  capsys: Any) -> None:
    from memd.cli import main

    a, b = machines("ma"), machines("mb")
    shared(a, b)
    for p in a.mem().iterdir():
        p.unlink()
    conf = tmp_path / "c.toml"
    conf.write_text(f'[paths]\nstate_dir = "{a.state_dir}"\n[sync]\nremote = "{a.config.sync.remote}"\n'
                    'machine = "ma"\n')
    base = ["--claude-dir", str(a.claude), "--config", str(conf)]
    assert main(["sync", *base, "--push-deletions"]) == 2  # names no project
    capsys.readouterr()
    main(["sync", *base, a.project().name])
    out = capsys.readouterr().out
    assert "held" in out and "--push-deletions" in out, out
    main(["sync", *base, "--push-deletions", a.project().name])
    out = capsys.readouterr().out
    assert "sent" in out, out
    assert [k for k in remote_files(b) if k != "MEMORY.md"] == []


def _refs(remote: str) -> dict[str, str]:
    import subprocess

    out = subprocess.run(["git", "ls-remote", remote], capture_output=True, text=True, check=True).stdout
    return {ln.split("\t")[1]: ln.split("\t")[0] for ln in out.splitlines() if "\t" in ln}


def code_repository(tmp_path: Any) -> str:
    """A bare repository with a `main` branch: somebody's code, not memd's."""
    import subprocess

    work = tmp_path / "code-work"
    work.mkdir()
    env_git = ["git", "-C", str(work), "-c", "user.name=u", "-c", "user.email=u@e"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "main.py").write_text("print('hi')\n")
    subprocess.run([*env_git, "add", "."], check=True)
    subprocess.run([*env_git, "commit", "-qm", "code"], check=True)
    bare = tmp_path / "code.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return "file://" + str(bare)


def test_memory_is_never_pushed_into_a_code_repository(machines: Any, tmp_path: Any) -> None:
    """Finding 8: a remote that is neither empty nor memd's is refused with the reason."""
    code = code_repository(tmp_path)
    before = _refs(code)
    a = machines("ma", code)
    a.write("x.md", topic("x", "x\n"))
    out = a.outcome("app")
    assert out.outcome == "refused", out
    assert "refs/heads/main" in out.message and "memd" in out.message and "empty" in out.message, out
    assert _refs(code) == before  # nothing pushed
    assert a.read("x.md") is not None


def test_an_empty_remote_gets_memds_marker_and_stays_usable(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    a.write("x.md", topic("x", "x\n"))
    assert "sent" in a.outcome("app").message
    refs = _refs(a.config.sync.remote)
    assert gitremote.MARKER_REF in refs and f"refs/heads/{BRANCH}" in refs, refs
    assert b.outcome("app").outcome == "changed"


def test_a_remote_of_memory_branches_only_is_memds(machines: Any, tmp_path: Any) -> None:
    """A remote memd used before the marker existed: only memory/* branches, no marker: still memd's."""
    import subprocess

    a, b = machines("ma"), machines("mb")
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")
    remote = a.config.sync.remote
    subprocess.run(["git", "--git-dir", remote.removeprefix("file://"), "update-ref", "-d", gitremote.MARKER_REF],
                   check=True)
    b.write("y.md", topic("y", "y\n"))
    out = b.outcome("app")
    assert out.outcome == "changed" and "sent" in out.message, out


def _add_to_remote(remote: str, name: bytes, data: bytes) -> None:
    """Another memd (another OS, another limit) put a file on the remote's branch: a commit on top."""
    from dulwich.objects import Blob, Commit, Tree
    from dulwich.repo import Repo

    repo = Repo(remote.removeprefix("file://"))
    try:
        ref = f"refs/heads/{BRANCH}".encode()
        head = repo[repo.refs[ref]]
        tree = repo[head.tree]
        blob = Blob.from_string(data)
        repo.object_store.add_object(blob)
        new = Tree()
        for e in tree.items():
            new.add(e.path, e.mode, e.sha)
        new.add(name, 0o100644, blob.id)
        repo.object_store.add_object(new)
        c = Commit()
        c.tree, c.parents = new.id, [head.id]
        c.author = c.committer = b"memd on other <memd@other>"
        c.author_time = c.commit_time = head.commit_time + 1
        c.author_timezone = c.commit_timezone = 0
        c.message = b"sync from other\n\nmemd-machine: other\nmemd-kind: sync\n"
        repo.object_store.add_object(c)
        repo.refs[ref] = c.id
    finally:
        repo.close()


def _remote_names(m: Machine) -> dict[bytes, bytes]:
    """Every file path on the remote's branch (raw bytes) with its content."""
    from dulwich.repo import Repo

    repo = Repo(m.config.sync.remote.removeprefix("file://"))
    out: dict[bytes, bytes] = {}
    try:
        def walk(tree_id: bytes, prefix: bytes) -> None:
            for e in repo[tree_id].items():
                if e.mode == 0o040000:
                    walk(e.sha, prefix + e.path + b"/")
                else:
                    out[prefix + e.path] = bytes(repo[e.sha].data)
        walk(repo[repo.refs[f"refs/heads/{BRANCH}".encode()]].tree, b"")
    finally:
        repo.close()
    return out


def test_a_file_one_machine_cannot_read_stays_on_the_remote(machines: Any) -> None:
    """Finding 7: over this machine's size limit, or a name it cannot decode: left alone, reported once."""
    from memd.config import Config, replace

    a, b = machines("ma"), machines("mb")
    b.config = Config(sync=b.config.sync, budget=replace(b.config.budget, max_file_bytes=4096))
    big = topic("big", "a long memory line\n" * 400)
    a.write("big.md", big)
    a.write("small.md", topic("small", "s\n"))
    a.sync("app")
    _add_to_remote(a.config.sync.remote, "caf\xe9.md".encode("latin-1"), topic("cafe", "c\n").encode())
    first = b.outcome("app")
    assert b.read("small.md") is not None and b.read("big.md") is None, first
    assert any("big.md" in i for i in first.details["ignored"]), first
    b.write("mine.md", topic("mine", "b's own\n"))
    out = b.outcome("app")
    assert "sent" in out.message, out
    names = _remote_names(b)
    assert names[b"big.md"] == big.encode()  # left alone, not deleted
    assert "caf\xe9.md".encode("latin-1") in names
    assert b"mine.md" in names
    assert not any("\ufffd".encode() in n for n in names)  # never pushed back under a mangled name
    assert len(b.events.named("sync.ignored")) == 1  # reported once
    assert "ignored" not in out.details
    a.sync("app")
    assert a.read("big.md") == big and a.read("mine.md") is not None


def test_a_folder_removed_and_made_anew_is_nothing_here_yet(machines: Any) -> None:
    """A reset whose folder Claude Code made again (and wrote into) before the next sync: the remote's
    memory comes back, the new memory goes out, nothing is deleted remotely (not even within the share)."""
    a, b = machines("ma"), machines("mb")
    shared(a, b)
    for i in range(6):
        b.write(f"t{i}.md", (b.read(f"t{i}.md") or "") + f"changed on b {i}\n")
    assert "sent" in b.outcome("app").message
    shutil.rmtree(a.mem())
    a.write("fresh.md", topic("fresh", "written after the reset\n"))
    out = a.outcome("app")
    assert out.outcome == "changed", out
    assert len(a.topics()) == 9 and "changed on b 1" in (a.read("t1.md") or "")
    assert len([k for k in remote_files(b) if k != "MEMORY.md"]) == 9


def test_a_file_only_one_machine_can_read_keeps_its_index_entry_and_nobody_is_refused(machines: Any) -> None:
    """Issue 33 #6: a 5 MB topic file that ma reads (its limit is 10 MB) and mb cannot (4 MB). mb keeps the
    file on the remote untouched, and now its index line too: mb's rebuilt index lacked the entry (no such
    file here), so its push removed the line, ma took that as the user's removal and its run deleted the
    file, which the guard refused at every sync of ma, for good (`--forget` the only way out)."""
    from memd.config import Config, replace

    a, b = machines("ma"), machines("mb")
    a.config = Config(sync=a.config.sync, budget=replace(a.config.budget, max_file_bytes=10_000_000))
    big = topic("big", "a long memory line of text\n" * 200_000)
    a.write("big.md", big)
    a.write("small.md", topic("small", "s\n"))
    a.sync("app")
    for _ in range(2):
        assert b.outcome("app").outcome in ("changed", "unchanged")
        b.write(f"b{_}.md", topic(f"b{_}", "from b\n"))
        assert b.outcome("app").outcome in ("changed", "unchanged")
        out = a.outcome("app")
        assert out.outcome in ("changed", "unchanged"), out.message
    assert a.read("big.md") == big and a.read("b1.md") is not None
    assert "(big.md)" in (a.read("MEMORY.md") or "")
    b.outcome("app")  # mb's rebuilt index has no entry for big.md: its push keeps the remote's line
    assert b"(big.md)" in remote_files(b)["MEMORY.md"]
    assert [a.outcome("app").outcome, b.outcome("app").outcome, a.outcome("app").outcome] == ["unchanged"] * 3
