"""Model jobs in a child process (memd.daemon.child): the same outcomes as in-process, a hard time
limit, a crash confined to one run, the daemon's stop reaching the child, and no SDK in the daemon.

Real child processes (``python -m memd.daemon.child``) against the loopback stub of the Messages API.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memd import config as config_mod
from memd.config import DaemonConfig, ModelConfig, replace
from memd.daemon.child import ChildJob, config_to_plain
from memd.jobs.runner import run_job
from memd.layout import Project
from tests.plugins.daemon import Recorder
from tests.plugins.stub_api import Reply
from tests.test_model_jobs import Env, dup_folder, topic, tree
from tests.test_model_jobs import env as env

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def child_for(env: Env, job: str = "dream", timeout_s: float = 120.0) -> ChildJob:
    return ChildJob(job, env.config, env.claude, env.state_dir, log=Recorder(), timeout_s=timeout_s)


def gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_config_travels_as_plain_data() -> None:
    cfg = config_mod.Config(daemon=replace(DaemonConfig(), job_timeout_s=7.0, isolate_jobs=False),
                            model=replace(ModelConfig(), base_url="http://127.0.0.1:9", max_retries=0))
    plain = json.loads(json.dumps(config_to_plain(cfg)))
    assert config_mod.from_mapping(plain) == cfg


def test_a_dream_in_a_child_is_applied_and_recorded_as_in_process(env: Env) -> None:
    p = dup_folder(env)
    (p.memory_dir / ".memd-user_role.md.99999999.abcdef01.tmp").write_text("a crashed writer's leftover")
    s = env.stub
    s.script(s.message(s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
             s.message(s.text("merged")))
    child = child_for(env)
    log = child.log
    result = run_job("dream", env.jc(force=True), [p], child)
    pid_seen = child.started
    child.close()
    (out,) = result.outcomes
    assert out.deleted == 1 and out.error is None and out.model_called and out.tokens_out > 0
    assert "feedback_tabs_2.md" not in tree(p.memory_dir)
    (row,) = env.state.runs(job="dream", project=p.name)
    assert row.outcome == out.outcome and row.deleted == 1 and row.cost_usd > 0
    assert env.state.project(p.name).last_consolidation is not None
    # the lock is the daemon's (taken and kept by its runner), not the child's
    assert (p.memory_dir / ".consolidate-lock").read_text() == str(os.getpid())
    assert pid_seen == 1 and child.pid is None
    # the child's log events reach the daemon's log (one writer)
    swept = log.named("apply.swept_temps")
    assert swept and swept[0]["project"] == p.name


def test_a_hung_child_is_killed_at_the_limit_and_its_run_fails_with_the_reason(env: Env) -> None:
    env.config = replace(env.config, model=replace(env.config.model, timeout_s=60.0))
    p = dup_folder(env)
    before = tree(p.memory_dir)
    env.stub.fallback = Reply(200, env.stub.message(env.stub.text("late")), delay=60.0)
    child = child_for(env, timeout_s=6.0)
    pids: list[int] = []

    def watch() -> None:
        while not pids:
            if child.pid:
                pids.append(child.pid)
            time.sleep(0.01)

    threading.Thread(target=watch, daemon=True).start()
    t0 = time.monotonic()
    result = run_job("dream", env.jc(force=True), [p], child)
    took = time.monotonic() - t0
    child.close()
    (out,) = result.outcomes
    assert out.outcome == "failed" and out.error == "timed out after 6 s"
    assert took < 30  # bounded by the limit (plus the child's start), not by the 60 s model call
    (row,) = env.state.runs(job="dream", project=p.name)
    assert (row.outcome, row.error) == ("failed", "timed out after 6 s")
    assert tree(p.memory_dir) == before  # the lock rolled back (removed: there was none), nothing written
    assert not list((env.state_dir / "staging").glob(f"{p.name}/*"))
    assert pids and pids[0] and gone(pids[0])
    assert env.state.project(p.name).last_consolidation is None


def test_a_child_that_dies_fails_its_run_only_and_the_next_project_gets_a_fresh_child(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    first = dup_folder(env)
    second = env.project("-home-dev-other")
    env.memory(second, {"MEMORY.md": "- [Role](user_role.md) — role\n",
                        "user_role.md": topic("Role", "role", "Backend.", "user")})
    s = env.stub
    for old in ("a backend engineer.", "Backend."):
        s.script(s.message(s.memory("str_replace", path="/memories/user_role.md", old_str=old,
                                    new_str=old[:-1] + " (Go).")), s.message(s.text("noted")))
    monkeypatch.setenv("MEMD_FAULT", "apply.mid")  # the first child is SIGKILLed in the middle of applying

    def before(p: Project) -> None:
        if p.name == second.name:
            os.environ.pop("MEMD_FAULT", None)  # the second child starts without the fault

    child = child_for(env)
    result = run_job("dream", env.jc(force=True), [first, second], child, before_project=before)
    child.close()
    a, b = result.outcomes
    assert (a.outcome, a.error) == ("failed", "the job's process died (killed by SIGKILL)")
    assert b.outcome != "failed" and "(Go)" in (second.memory_dir / "user_role.md").read_text()
    assert child.started == 2
    runs = {r.project: r for r in env.state.runs(job="dream")}
    assert runs[first.name].outcome == "failed" and runs[second.name].outcome == b.outcome
    # the crashed apply left each file before or after, and no temp file of memd's
    assert not [f for f in first.memory_dir.iterdir() if f.name.startswith(".memd-")]


def test_the_daemons_stop_reaches_the_child_and_the_run_is_skipped(env: Env) -> None:
    p = dup_folder(env)
    before = tree(p.memory_dir)
    s = env.stub
    jc = env.jc(force=True)
    # the stop comes while the model works; the child must abandon before applying anything
    s.script(Reply(body=s.message(s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
                   before=jc.stop.set, delay=2.0),
             s.message(s.text("merged")))
    child = child_for(env)
    result = run_job("dream", jc, [p], child)
    child.close()
    (out,) = result.outcomes
    assert out.outcome == "skipped" and "shutdown" in out.message
    assert tree(p.memory_dir) == before
    (row,) = env.state.runs(job="dream", project=p.name)
    assert row.outcome == "skipped"


def test_the_daemon_never_imports_the_sdk(env: Env, tmp_path: Path) -> None:
    """The worker runs a dream (its child calls the model) in a fresh interpreter that must end without
    ``anthropic`` (or its pydantic) among its modules."""
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
             s.message(s.text("merged")))
    script = f"""
import json, queue, sys, threading
from pathlib import Path
from memd.clock import SYSTEM
from memd.config import Config, ModelConfig, replace
from memd.daemon.worker import JobRequest, Worker
from memd.state import StateStore
cfg = Config(model=replace(ModelConfig(), base_url={s.base_url!r}, max_retries=0))
state_dir = Path({str(tmp_path / "daemon-state")!r})
out = queue.SimpleQueue()
class Log:
    def __getattr__(self, level):
        return lambda event, **kw: None
w = Worker(cfg, Path({str(env.claude)!r}), state_dir, SYSTEM, out, Log(), threading.Event())
w.submit(JobRequest("dream", [{p.name!r}], force=True))
with StateStore.open(state_dir) as st:
    w.run_queued(st)
    runs = [(r.job, r.outcome, r.deleted) for r in st.runs()]
mods = sorted(m for m in sys.modules if m.split(".")[0] in ("anthropic", "pydantic", "httpx2", "memd.llm"))
print(json.dumps({{"runs": runs, "mods": mods}}))
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.splitlines()[-1])
    assert [tuple(r) for r in got["runs"]] == [("dream", got["runs"][0][1], 1)]
    assert got["runs"][0][1] not in ("failed", "running")
    assert got["mods"] == []


def test_the_orphan_of_a_dead_daemon_stops_itself(tmp_path: Path) -> None:
    """A child whose daemon died (reparented) stops on its own: it never writes on after memd is gone."""
    hello = json.dumps({"job": "dream", "config": {}, "claude_dir": str(tmp_path), "state_dir": str(tmp_path),
                        "parent": 1})  # a parent it does not have: as if the daemon had died
    proc = subprocess.Popen([sys.executable, "-m", "memd.daemon.child"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            start_new_session=True)
    assert proc.stdin is not None
    proc.stdin.write(hello.encode() + b"\n")
    proc.stdin.flush()  # stdin stays open: only the orphan watch can end it
    try:
        assert proc.wait(30) == 3
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdin.close()
        assert proc.stdout is not None
        proc.stdout.close()


def test_inline_jobs_stay_available(env: Env) -> None:
    """``daemon.isolate_jobs = false`` runs the work on the worker's thread (the foreground commands
    always do): the worker makes no child then."""
    import queue

    from memd.clock import SYSTEM
    from memd.daemon.worker import Worker

    cfg = replace(env.config, daemon=replace(DaemonConfig(), isolate_jobs=False))
    w = Worker(cfg, env.claude, env.state_dir, SYSTEM, queue.SimpleQueue(), Recorder(), threading.Event())
    assert w._child_for("dream", cfg, env.claude) is None
    made = w._child_for("catchup", replace(env.config, daemon=replace(DaemonConfig(), job_timeout_s=42.0)),
                        env.claude)
    assert made is not None and made.job == "catchup" and made.timeout_s == 42.0
    assert w._child_for("checkin", env.config, env.claude) is None
