"""Issue 20, findings 3 and 4: the history writer and the project lock.

3. A kill inside the history library's writes leaves a dulwich ``*.lock`` file in the project's history;
   it is recovered (and logged) the next time memd writes that history, never left to wedge it.
4. No memory file is written before its snapshot is durable, and every applied change is in the
   history: a kill during the first history setup, between a rebuild's write and its "after" commit,
   or half-way through an undo leaves nothing unrecorded and no index link to a missing file; two
   memd processes working on one project wait for each other (``memd.projlock``), never crash.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memd import history
from memd.config import Config
from memd.core import lint
from memd.core.rebuild import NORMALISE
from memd.layout import Project
from memd.maintenance import rebuild_project, undo_project
from memd.memfolder.folder import read_folder
from tests.plugins.memory_folders import topic, write_tree

ROOT = Path(__file__).resolve().parent.parent

# An index that a rebuild rewrites (a dangling link dropped, an orphan indexed), over three topic files.
FILES = {
    "MEMORY.md": "- [A](user_a.md) — first\n- [Gone](gone.md) — gone\n",
    "user_a.md": topic("A", "first", "user"),
    "user_b.md": topic("B", "second", "user"),
    "project_c.md": topic("C", "third", "project"),
}


def project(claude: Path, name: str = "-home-u-app", files: dict[str, str] | None = None) -> Project:
    d = claude / "projects" / name
    write_tree(d / "memory", dict(files or FILES))  # type: ignore[arg-type]
    return Project(name, d, d / "memory")


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def dangling(folder: Path) -> list[str]:
    return [f.message for f in lint.lint(read_folder(folder)) if f.code == "MEM005"]


def locks_in(repo: Path) -> list[str]:
    return sorted(str(p.relative_to(repo)) for p in repo.rglob("*.lock"))


def memd(claude: Path, *args: str, fault: str = "", timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if fault:
        env["MEMD_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "memd", "--claude-dir", str(claude), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def state(claude_home: Path) -> Path:
    return claude_home.parent / ".local" / "state" / "memd"


# --------------------------------------------------------------------------- finding 3: stale dulwich locks


@pytest.mark.parametrize("lock", ["refs/heads/main.lock", "objects/5e/0123456789abcdef0123456789abcdef01234.lock",
                                  "HEAD.lock", "config.lock", "packed-refs.lock"])
def test_a_lock_left_by_a_killed_history_write_is_recovered_and_logged(claude_home: Path, state: Path,
                                                                        lock: str) -> None:
    from structlog.testing import capture_logs

    p = project(claude_home)
    history.snapshot(state, p.name, p.memory_dir, "an earlier snapshot")
    repo = history.repo_dir(state, p.name)
    (repo / lock).parent.mkdir(parents=True, exist_ok=True)
    (repo / lock).write_bytes(b"")  # what a SIGKILL inside dulwich's GitFile leaves
    old = time.time() - 120
    os.utime(repo / lock, (old, old))
    with capture_logs() as logs:
        res = rebuild_project(p, Config(), state, dry_run=False, mode=NORMALISE)
    assert res.written, res
    assert locks_in(repo) == []
    assert [r.job for r in history.list_runs(state, p.name)] == ["rebuild"]
    rec = [e for e in logs if e["event"] == "history.lock_recovered"]
    assert rec and rec[0]["path"].endswith(lock) and rec[0]["age_s"] >= 100, logs
    res2, _ = undo_project(p, Config(), state, None, dry_run=False)  # and undo works again too
    assert res2.restored == ["MEMORY.md"] and p.index_path.read_text() == FILES["MEMORY.md"]


@pytest.mark.slow
def test_a_kill_inside_the_history_library_never_wedges_the_project(claude_home: Path, state: Path) -> None:
    """SIGKILL inside dulwich's own lock-file writes (MEMD_FAULT arms them), then the next run works."""
    p = project(claude_home)
    history.snapshot(state, p.name, p.memory_dir, "the history exists")  # (a kill in its init: elsewhere)
    for point in ("history.gitfile_write@ref:1", "history.gitfile_close@object:2", "history.gitfile_write@object:1"):
        r = memd(claude_home, "rebuild", p.name, fault=f"{point}=kill")
        assert r.returncode == -signal.SIGKILL, (point, r.stdout, r.stderr)
        assert p.index_path.read_text() == FILES["MEMORY.md"]  # killed inside the snapshot: nothing written
        assert locks_in(history.repo_dir(state, p.name)), point  # the kill did leave a lock behind
        r = memd(claude_home, "rebuild", p.name)
        assert r.returncode == 0 and "unexpected error" not in r.stderr, (point, r.stdout, r.stderr)
        assert locks_in(history.repo_dir(state, p.name)) == []
        assert "rebuild" in memd(claude_home, "history", p.name).stdout
        r = memd(claude_home, "undo", p.name)
        assert r.returncode == 0, r.stderr
        assert p.index_path.read_text() == FILES["MEMORY.md"]


# --------------------------------------------------------------------------- finding 4: writes with no snapshot


def _half_made(repo: Path, kind: str) -> None:
    repo.mkdir(parents=True)
    if kind == "empty":
        return
    for d in ("branches", "info", "objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags"):
        (repo / d).mkdir(exist_ok=True)


@pytest.mark.parametrize("kind", ["empty", "no HEAD"])
def test_a_half_made_history_is_repaired_and_the_rebuild_recorded(claude_home: Path, state: Path, kind: str) -> None:
    """What a kill during the first history setup (dulwich's init) leaves: the next rebuild takes its
    snapshot, writes, and records the run; never "no history yet" after MEMORY.md was rewritten."""
    p = project(claude_home)
    _half_made(history.repo_dir(state, p.name), kind)
    res = rebuild_project(p, Config(), state, dry_run=False, mode=NORMALISE)
    assert res.written
    runs = history.list_runs(state, p.name)
    assert [r.job for r in runs] == ["rebuild"] and runs[0].complete
    assert history.files_at(state, p.name, runs[0].before)["MEMORY.md"].decode() == FILES["MEMORY.md"]
    history.undo_run(state, p.name, p.memory_dir)
    assert p.index_path.read_text() == FILES["MEMORY.md"]


def test_commits_made_into_a_history_without_head_are_kept(claude_home: Path, state: Path) -> None:
    """An older memd committed into a repository whose HEAD a kill never wrote: the commits stay."""
    p = project(claude_home)
    first = history.snapshot(state, p.name, p.memory_dir, "kept")
    (history.repo_dir(state, p.name) / "HEAD").unlink()
    res = rebuild_project(p, Config(), state, dry_run=False, mode=NORMALISE)
    assert res.written
    assert first in [e.commit for e in history.log(state, p.name)]
    assert [r.job for r in history.list_runs(state, p.name)] == ["rebuild"]


@pytest.mark.slow
@pytest.mark.parametrize("point", ["history.init", "history.init_renamed", "history.after_objects:1",
                                   "history.after_ref:1", "store.after_rename@MEMORY.md"])
def test_a_killed_rebuild_is_in_the_history_and_undoable(claude_home: Path, state: Path, point: str) -> None:
    p = project(claude_home)
    r = memd(claude_home, "rebuild", p.name, fault=f"{point}=kill")
    assert r.returncode == -signal.SIGKILL, (r.stdout, r.stderr)
    written = p.index_path.read_text() != FILES["MEMORY.md"]
    shown = memd(claude_home, "history", p.name)
    assert shown.returncode == 0, shown.stderr
    if written:  # an applied change is listed (interrupted), and undo brings the index back exactly
        assert "rebuild" in shown.stdout, shown.stdout
        u = memd(claude_home, "undo", p.name)
        assert u.returncode == 0, u.stderr
        assert p.index_path.read_text() == FILES["MEMORY.md"]
    r = memd(claude_home, "rebuild", p.name)  # the next run succeeds, and is recorded
    assert r.returncode == 0 and "no history" not in r.stdout + r.stderr, (r.stdout, r.stderr)
    assert "MEMORY.md written" in r.stdout
    assert history.list_runs(state, p.name)[0].job == "rebuild"


def test_a_history_that_cannot_be_written_fails_the_project_and_writes_nothing(
        claude_home: Path, state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from memd import store
    from memd.cli import main

    monkeypatch.setenv("XDG_STATE_HOME", str(state.parent))
    one = project(claude_home, "-home-u-one")
    two = project(claude_home, "-home-u-two")
    store.set_faults("history.after_objects@-home-u-one=ENOSPC")
    try:
        code = main(["--claude-dir", str(claude_home), "rebuild", "--all"])
    finally:
        store.set_faults("")
    out = capsys.readouterr()
    assert code == 1
    assert one.index_path.read_text() == FILES["MEMORY.md"]  # its snapshot failed: not written
    assert "no space left on device" in out.out + out.err
    assert two.index_path.read_text() != FILES["MEMORY.md"]  # the other project went on
    assert [r.job for r in history.list_runs(state, two.name)] == ["rebuild"]


# --------------------------------------------------------------------------- undo: kill-safe order


def _dream_run(state: Path, p: Project) -> None:
    """A run that changes user_a.md, deletes user_b.md, adds user_d.md and rewrites the index."""
    from memd import apply as ap

    st = ap.stage(state, p, "dream", "dream-test-1")
    (st.root / "user_a.md").write_text(topic("A", "first", "user", "merged with B\n"))
    (st.root / "user_b.md").unlink()
    (st.root / "user_d.md").write_text(topic("D", "fourth", "user"))
    ap.finalize(st, Config())
    chs = ap.changes(st)
    assert ap.guard(st, chs, Config()) == []
    ap.apply(st, chs, "dream dream-test-1: +1 ~2 -1")
    st.cleanup()


@pytest.mark.slow
@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_killed_undo_never_leaves_the_index_linking_a_missing_file(claude_home: Path, state: Path,
                                                                     nth: int) -> None:
    files = {**FILES, "MEMORY.md": "- [A](user_a.md) — first\n- [B](user_b.md) — second\n- [C](project_c.md) — third\n"}
    p = project(claude_home, files=files)
    before = tree(p.memory_dir)
    _dream_run(state, p)
    assert "user_b.md" not in tree(p.memory_dir) and dangling(p.memory_dir) == []
    r = memd(claude_home, "undo", p.name, fault=f"store.after_rename:{nth}=kill")
    assert r.returncode == -signal.SIGKILL, (r.stdout, r.stderr)
    assert dangling(p.memory_dir) == [], tree(p.memory_dir).get("MEMORY.md")
    assert "undo" in memd(claude_home, "history", p.name).stdout  # the interrupted undo is listed
    r = memd(claude_home, "undo", p.name)  # the next undo finishes the job exactly
    assert r.returncode == 0, r.stderr
    assert tree(p.memory_dir) == before


# --------------------------------------------------------------------------- two memd processes, one project


def _reset(projects: list[Project]) -> None:
    for p in projects:
        p.index_path.write_text(FILES["MEMORY.md"])


def _both(claude: Path, a: list[str], b: list[str]) -> list[subprocess.CompletedProcess[str]]:
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "-m", "memd", "--claude-dir", str(claude), *args], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args in (a, b)]
    out = []
    for pr in procs:
        o, e = pr.communicate(timeout=120)
        out.append(subprocess.CompletedProcess(pr.args, pr.returncode, o, e))
    return out


@pytest.mark.slow
def test_two_rebuild_all_at_once_wait_for_each_other(claude_home: Path, state: Path) -> None:
    projects = [project(claude_home, f"-home-u-p{i}") for i in range(4)]
    for rnd in range(4):
        _reset(projects)
        known = {p.name: len(history.list_runs(state, p.name, limit=100)) for p in projects}
        res = _both(claude_home, ["rebuild", "--all"], ["rebuild", "--all"])
        for r in res:
            assert r.returncode == 0, (rnd, r.stdout, r.stderr)
            assert "unexpected error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
        for p in projects:
            assert p.index_path.read_text() != FILES["MEMORY.md"]
            runs = history.list_runs(state, p.name, limit=100)
            assert len(runs) == known[p.name] + 1 and runs[0].complete, (rnd, p.name, runs)
            assert history.files_at(state, p.name, runs[0].after)["MEMORY.md"] == p.index_path.read_bytes()


@pytest.mark.slow
def test_a_rebuild_and_an_undo_at_once_wait_for_each_other(claude_home: Path, state: Path) -> None:
    p = project(claude_home)
    for rnd in range(3):
        assert memd(claude_home, "rebuild", p.name).returncode == 0
        p.index_path.write_text(FILES["MEMORY.md"].replace("first", f"first {rnd}"))
        res = _both(claude_home, ["undo", p.name], ["rebuild", p.name])
        for r in res:
            assert "unexpected error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
            assert r.returncode in (0, 1), (r.stdout, r.stderr)
        # (an undo that ran after the rebuild gives back the user's own link to gone.md: that one may stay)
        assert [d for d in dangling(p.memory_dir) if "gone.md" not in d] == []
        newest = history.log(state, p.name, limit=1)[0]
        assert newest.kind in ("after", "undo"), newest  # the last write is recorded, not left half-done
        assert history.files_at(state, p.name, newest.commit)["MEMORY.md"] == p.index_path.read_bytes()


@contextlib.contextmanager
def held_elsewhere(state: Path, name: str, what: str = "rebuild") -> Iterator[int]:
    """The project's lock held by another process for the block; yields its pid."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from memd.projlock import project_lock\n"
         f"with project_lock(Path({str(state)!r}), {name!r}, {what!r}):\n"
         "    print('held', flush=True); sys.stdin.read()"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)


def test_a_busy_project_waits_then_says_who_writes_and_the_others_go_on(
        claude_home: Path, state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from memd import projlock
    from memd.cli import main

    monkeypatch.setenv("XDG_STATE_HOME", str(state.parent))
    busy = project(claude_home, "-home-u-busy")
    free = project(claude_home, "-home-u-free")
    monkeypatch.setattr(projlock, "WAIT_S", 0.6)
    with held_elsewhere(state, busy.name) as pid:
        t0 = time.monotonic()
        code = main(["--claude-dir", str(claude_home), "rebuild", "--all"])
        waited = time.monotonic() - t0
    out = capsys.readouterr().out
    assert code == 1 and waited >= 0.6
    assert f"project {busy.name} is being written by another memd (pid {pid}, rebuild, for " in out, out
    assert "not changed, try again" in out
    assert busy.index_path.read_text() == FILES["MEMORY.md"]
    assert free.index_path.read_text() != FILES["MEMORY.md"]


def test_a_busy_project_in_a_job_is_that_projects_failed_outcome(claude_home: Path, state: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The dream without a model (the deterministic rebuild) on two projects, one of them busy."""
    from memd import projlock
    from memd.jobs import JobContext
    from memd.jobs.runner import run_job

    orphans = {**FILES, "MEMORY.md": "- [A](user_a.md) — first\n"}  # an unattended rebuild indexes them
    busy = project(claude_home, "-home-u-busy", orphans)
    free = project(claude_home, "-home-u-free", orphans)
    monkeypatch.setattr(projlock, "WAIT_S", 0.4)
    jc = JobContext(config=Config(), claude_dir=claude_home, state_dir=state, state=None, force=True)
    with held_elsewhere(state, busy.name, "sync") as pid:
        res = run_job("dream", jc, [busy, free])
    by = {o.project: o for o in res.outcomes}
    assert by[busy.name].outcome == "failed", by
    assert f"is being written by another memd (pid {pid}, sync, for" in (by[busy.name].error or ""), by
    assert by[free.name].outcome == "changed", by
    assert busy.index_path.read_text() == orphans["MEMORY.md"]


def test_the_project_lock_is_reentrant_and_excludes_other_threads(tmp_path: Path) -> None:
    from memd.projlock import ProjectBusyError, project_lock

    name = "-odd/name-\udcff-" + "x" * 300  # any character, even undecodable bytes and a long name
    order: list[str] = []
    with project_lock(tmp_path, name, "outer"):
        with project_lock(tmp_path, name, "inner", timeout_s=0.1):  # nested in one thread: no deadlock
            order.append("nested")

        def other() -> None:
            try:
                with project_lock(tmp_path, name, "thread", timeout_s=0.2):
                    order.append("thread got it")
            except ProjectBusyError as e:
                order.append(f"busy: {e}")

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert order[0] == "nested" and order[1].startswith("busy: project ") and "outer" in order[1], order
    files = list((tmp_path / "locks").iterdir())
    assert len(files) == 1 and len(files[0].name) < 100 and files[0].name.isascii()
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert order[-1] == "thread got it"


def test_nothing_is_created_inside_a_memory_folder(claude_home: Path, state: Path) -> None:
    p = project(claude_home)
    before = set(tree(p.memory_dir))
    rebuild_project(p, Config(), state, dry_run=False, mode=NORMALISE)
    assert set(tree(p.memory_dir)) == before and not any(n.startswith(".") for n in os.listdir(p.memory_dir))



def test_stale_locks_are_looked_for_once_per_hold_of_the_project_lock(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk of the repository for a dead writer's lock files runs once per hold of the project lock,
    not before every commit inside it (a run makes three: before, planned, after)."""
    from memd import history
    from memd.projlock import project_lock

    walks: list[Path] = []
    real = history._recover_locks
    monkeypatch.setattr(history, "_recover_locks", lambda path: (walks.append(path), real(path)))
    state = tmp_path / "state"
    with project_lock(state, "p", "test"):
        for i in range(3):
            history.commit_files(state, "p", {"a.md": f"{i}\n".encode()}, f"c{i}")
    assert len(walks) == 1
    history.commit_files(state, "p", {"a.md": b"again\n"}, "a commit on its own takes the lock anew")
    assert len(walks) == 2
