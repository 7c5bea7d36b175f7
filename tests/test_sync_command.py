"""Issue 21 (also): `memd sync --dry-run` shows both directions with deletions counted; `memd sync
--forget --all`; the `memd status` line of each held state names what is held and a command that
really resolves it. Local bare remotes, machines with their own HOME."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memd.sync import gitremote, held
from tests.plugins.sync import Machine, bare_remote, topic
from tests.test_sync import fake_key
from tests.test_sync_guards import _add_to_remote, _remote_names
from tests.test_sync_identity import cli, memory, remote_topics, repo, session

BRANCH = "memory/github.com/me/app"


def run(m: Machine, tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str, extra: str = "") -> str:
    from memd.cli import main

    rc = main(cli(m, tmp_path, *args, extra=extra))
    out = capsys.readouterr()
    assert rc == 0, (rc, out.out, out.err)
    return out.out


def test_dry_run_shows_what_would_be_taken_and_sent(machines: Any, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    a, b = machines("ma"), machines("mb")
    for i in range(4):
        a.write(f"s{i}.md", topic(f"s{i}", f"shared {i}\n"))
    a.sync("app")
    b.sync("app")
    b.write("new_b.md", topic("nb", "b new\n"))
    (b.mem() / "s0.md").unlink()
    b.sync("app")
    a.write("mine.md", topic("mine", "a local\n"))
    (a.mem() / "s1.md").unlink()
    a.write("s2.md", topic("s2", "changed here\n"))
    remote, local = _remote_names(a), a.topics()
    text = run(a, tmp_path, capsys, "sync", "--dry-run", str(a.repos["app"]))
    assert "would take from mb: 1 new, 0 changed, 1 deleted (new_b.md; deleted: s0.md)" in text, text
    assert "would send: 1 new, 1 changed, 1 deleted (mine.md, s2.md; deleted: s1.md)" in text, text
    assert _remote_names(a) == remote and a.topics() == local  # nothing written, nothing sent
    # what the sync then does is what the dry run said
    a.sync("app")
    assert remote_topics(a) == {"mine.md", "new_b.md", "s2.md", "s3.md"}
    assert set(a.topics()) == {"mine.md", "new_b.md", "s2.md", "s3.md"}
    assert "would take from ma: nothing; would send: nothing" in run(a, tmp_path, capsys, "sync", "--dry-run",
                                                                      str(a.repos["app"]))


def test_dry_run_says_a_push_would_be_held(machines: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = machines("ma")
    for i in range(6):
        a.write(f"t{i}.md", topic(f"t{i}", f"fact {i} with words enough\n"))
    a.sync("app")
    for p in a.mem().iterdir():
        p.unlink()
    text = run(a, tmp_path, capsys, "sync", "--dry-run", str(a.repos["app"]))
    assert "would send nothing: held, this push deletes every memory (6 of 6)" in text, text
    assert len(remote_topics(a)) == 6 and held.status_lines(a.state_dir) == ""  # a dry run holds nothing


# --------------------------------------------------------------------------- held states


def _held_files(a: Machine, b: Machine, tmp_path: Path) -> Machine:
    a.write("base.md", topic("base", "shared\n"))
    a.sync("app")
    b.sync("app")
    _add_to_remote(a.config.sync.remote, b"leak.md", topic("leak", f"aws key {fake_key()}\n").encode())
    b.sync("app")
    return b


def _held_push(a: Machine, b: Machine, tmp_path: Path) -> Machine:
    for i in range(6):
        a.write(f"t{i}.md", topic(f"t{i}", f"fact {i} with words enough\n"))
    a.sync("app")
    for p in a.mem().iterdir():
        p.unlink()
    a.sync("app")
    return a


def _rewritten(a: Machine, b: Machine, tmp_path: Path, *, delete: bool = False) -> Machine:
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")
    if delete:
        r = gitremote.git(a.state_dir, ["push", a.config.sync.remote, f":refs/heads/{BRANCH}"], timeout=30)
    else:
        from tests.plugins.sync import Machine as M

        c = M(tmp_path, "mc", "file://" + str(bare_remote(tmp_path / "other.git")))
        c.write("y.md", topic("y", "y\n"))
        c.sync("app")
        other = gitremote.open_repo(c.state_dir)
        head = gitremote.heads(other, BRANCH).mine
        other.close()
        r = gitremote.git(c.state_dir, ["push", "--force", a.config.sync.remote, f"{head}:refs/heads/{BRANCH}"],
                          timeout=30)
    assert r.code == 0, r
    a.sync("app")
    return a


def _second_writer(a: Machine, b: Machine, tmp_path: Path) -> Machine:
    c = Machine(tmp_path, "mc", a.config.sync.remote, repos=())
    one, two = repo(c.home / "src" / "app"), repo(c.home / "src" / "app-copy")
    session(c, one)
    session(c, two)
    memory(c, one, {"a1.md": "clone one\n"})
    memory(c, two, {"c2.md": "clone two\n"})
    c.sync()
    return c


STATES: dict[str, tuple[Callable[..., Machine], str, str]] = {
    # state: (make it, what its status line must say, the command in it that resolves it)
    "files": (_held_files, "1 file(s) from the remote held here (leak.md: a secret was written",
              "memd sync --keep-local {p}"),
    "push": (_held_push, "this push deletes every memory (6 of 6) on the remote", "memd sync --push-deletions {p}"),
    "rewritten": (_rewritten, f"the remote's branch {BRANCH} was rewritten (force-pushed)", "memd sync --forget {p}"),
    "gone": (lambda a, b, t: _rewritten(a, b, t, delete=True), f"the remote's branch {BRANCH} is gone",
             "memd sync --forget {p}"),
    "second-writer": (_second_writer, "held, not synced: {w} syncs github.com/me/app on this machine",
                      "memd sync --writer {p}"),
}


@pytest.mark.parametrize("state", list(STATES))
def test_each_held_state_has_a_status_line_whose_command_resolves_it(
        state: str, machines: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make, says, command = STATES[state]
    a, b = machines("ma"), machines("mb")
    m = make(a, b, tmp_path)
    lines = [ln for ln in run(m, tmp_path, capsys, "status").splitlines() if ln.startswith("sync: -")]
    assert len(lines) == 1, lines
    name = lines[0].split(": ", 2)[1]
    others = sorted(p.name for p in m.claude.joinpath("projects").iterdir() if p.name != name)
    assert says.format(w=others[0] if others else "") in lines[0], lines[0]
    assert f"resolve: `{command.format(p=name)}`" in lines[0], lines[0]
    assert held.summary(held.load(m.state_dir, name)) != "-"
    # the command named resolves it: after it (and the next sync), nothing is held and the status is quiet
    args = re.search(r"resolve: `memd ([^`]*)`", lines[0])
    assert args is not None
    run(m, tmp_path, capsys, *args.group(1).split())
    if state == "second-writer":  # the other folder is held now; the line's other way out keeps one local
        assert f'or add "{name}" to sync.exclude' in lines[0]
        m.sync()
        (other,) = [n for n, h in held.load_all(m.state_dir).items() if not h.empty]
        assert other != name
        m.config.sync.exclude.append(other)
    m.sync()
    assert held.status_lines(m.state_dir) == "", held.status_lines(m.state_dir)
    assert not [ln for ln in run(m, tmp_path, capsys, "status").splitlines() if ln.startswith("sync: -")]


def test_a_remote_that_is_not_memds_is_a_status_line(machines: Any, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess

    code = bare_remote(tmp_path / "code.git")  # a code repository, not memd's
    src = repo(tmp_path / "src")
    subprocess.run(["git", "push", "-q", str(code), "HEAD:refs/heads/main"], cwd=src, check=True,
                   capture_output=True)
    m = Machine(tmp_path, "mz", "file://" + str(code))
    m.write("x.md", topic("x", "x\n"))
    assert m.outcome("app").outcome == "refused"
    (line,) = [ln for ln in run(m, tmp_path, capsys, "status").splitlines() if ln.startswith("sync: -")]
    assert "is not memd's: it holds refs/heads/main" in line, line
    assert line.endswith("resolve: point sync.remote at an empty private repository"), line


def test_forget_all_forgets_every_held_project(machines: Any, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    a, b = machines("ma", repos=("app", "lib")), machines("mb", repos=("app", "lib"))
    _held_files(a, b, tmp_path)  # b holds a file of app
    for i in range(6):
        b.write(f"l{i}.md", topic(f"l{i}", f"lib fact {i} with words\n"), key="lib")
    b.sync("lib")
    for p in b.mem("lib").iterdir():
        p.unlink()
    b.sync("lib")  # ... and lib's push
    held.hold_project(b.state_dir, "-gone-folder", "the remote's branch x is gone", "`memd sync --forget -gone-folder`")
    assert len(held.load_all(b.state_dir)) == 3
    text = run(b, tmp_path, capsys, "sync", "--forget", "--all")
    assert "forgot what sync held of 3 project(s)" in text, text
    for key in ("app", "lib"):
        assert f"{b.project(key).name}: forgot what sync held" in text
    assert "-gone-folder: forgot what sync held (the folder is no longer under" in text
    assert held.load_all(b.state_dir) == {} and held.status_lines(b.state_dir) == ""
    assert run(b, tmp_path, capsys, "sync", "--forget", "--all").strip() == "sync holds nothing: nothing to forget"
    # forgotten, not resolved: the next sync judges each anew (and nothing is lost on the remote)
    b.sync()
    assert len(remote_topics(b)) >= 2 and b"leak.md" in _remote_names(b)


def _code_remote_with_marker(tmp_path: Path) -> str:
    """A code repository (a ``main`` branch) that also holds memd's marker branch."""
    import subprocess

    code = bare_remote(tmp_path / "code.git")
    src = repo(tmp_path / "src")
    subprocess.run(["git", "push", "-q", str(code), "HEAD:refs/heads/main", f"HEAD:{gitremote.MARKER_REF}"],
                   cwd=src, check=True, capture_output=True)
    return "file://" + str(code)


def test_a_code_repository_with_the_marker_is_refused_in_true_words_dry_run_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], git_env: Path) -> None:
    """Issue 33 #5: the refusal of a code repository that holds memd's marker branch said "and no memd
    marker"; `--dry-run` against it said "would send" and exited 0."""
    from memd.cli import main

    m = Machine(tmp_path, "mz", _code_remote_with_marker(tmp_path))
    m.write("x.md", topic("x", "x\n"))
    rc = main(cli(m, tmp_path, "sync", "--all", "--dry-run"))
    out = capsys.readouterr().out
    assert rc == 1 and "refused" in out and "would send:" not in out, (rc, out)
    assert "is not memd's: it holds refs/heads/main beside memd's marker" in out, out
    assert "no memd marker" not in out
    assert not held.status_lines(m.state_dir)  # a dry run holds nothing
    rc = main(cli(m, tmp_path, "sync", "--all"))
    out = capsys.readouterr().out
    assert rc == 1 and "beside memd's marker" in out and "no memd marker" not in out, out


def test_a_failed_sync_prints_its_sentence_not_one_word(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         git_env: Path) -> None:
    """Issue 33 #5: the terminal showed `failed (+0 ~0 -0): unreachable`; the sentence was only in the log."""
    from memd.cli import main

    m = Machine(tmp_path, "mz", "file://" + str(tmp_path / "no-such-remote.git"))
    m.write("x.md", topic("x", "x\n"))
    rc = main(cli(m, tmp_path, "sync", "--all"))
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ": failed" in ln]
    assert rc == 1 and "the remote cannot be reached" in line and "(git: " in line and "[unreachable]" in line, out


def test_the_sync_command_logs_its_lines_without_structlog(machines: Any, tmp_path: Path, git_env: Path) -> None:
    """Issue 33, speed: `memd sync` no longer imports structlog (which brings rich, pygments, asyncio and ssl:
    several times the command's own work for a sync with nothing new), nor, with nothing new, the merge, the
    apply pipeline, the history or the forget records; memd.log gets the same JSON lines."""
    import json
    import subprocess
    import sys

    a = machines("ma")
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")
    args = cli(a, tmp_path, "sync", "--all")
    code = ("import sys\nfrom memd.cli import main\nrc = main(sys.argv[1:])\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'structlog', 'rich', 'pygments', 'asyncio', "
            "'ssl'})\nheavy += sorted({'memd.apply', 'memd.history', 'memd.sync.merge', 'memd.sync.forget'} "
            "& set(sys.modules))\nprint('HEAVY', heavy)\nsys.exit(rc)\n")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert r.returncode == 0 and "nothing new on either side" in r.stdout, (r.stdout, r.stderr)
    assert "HEAVY []" in r.stdout, r.stdout
    lines = [json.loads(ln) for ln in (a.state_dir / "memd.log").read_text().splitlines() if ln.startswith("{")]
    fin = [ev for ev in lines if ev.get("event") == "job.finish" and ev.get("job") == "sync"]
    assert fin and list(fin[-1])[:3] == ["timestamp", "level", "event"], fin[-1:]
    assert fin[-1]["level"] == "info" and fin[-1]["logger"] == "memd.sync" and fin[-1]["outcome"] == "unchanged"
    assert fin[-1]["timestamp"].endswith("Z")


def test_status_has_a_sync_line_while_the_remote_cannot_be_fetched(machines: Any, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 33 #5: while a machine was offline, `memd status` had no sync line (the reason only in the log)."""
    a = machines("ma")
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")
    real = a.config.sync.remote
    away = "file://" + str(tmp_path / "unplugged.git")
    for _ in range(2):
        assert a.outcome("app", remote=away).outcome == "failed"
    (line,) = [ln for ln in run(a, tmp_path, capsys, "status", extra="").splitlines()
               if ln.startswith("sync: every project")]
    assert "(2 sync(s) in a row could not fetch): fetch from " in line and "cannot be reached" in line, line
    assert a.config.sync.remote == real and a.outcome("app").outcome == "unchanged"
    assert "sync: every project" not in run(a, tmp_path, capsys, "status")


def test_a_binary_md_pushed_by_another_machine_is_a_status_line(machines: Any, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 33 #5: a binary `*.md` another machine put on the remote was left alone here silently (said once
    in the log): `memd status` now names it while the remote holds it."""
    a, b = machines("ma"), machines("mb")
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")
    _add_to_remote(a.config.sync.remote, b"blob.md", b"\x89PNG\r\n\x1a\n\x00\xff binary")
    b.sync("app")
    b.sync("app")  # reported once in the log, but still there: still said in status
    (line,) = [ln for ln in run(b, tmp_path, capsys, "status").splitlines() if "left alone here" in ln]
    assert "1 file(s) of the remote left alone here" in line and "blob.md: not UTF-8 text" in line, line
