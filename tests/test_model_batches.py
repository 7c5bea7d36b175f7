"""Message Batches for a run's first call (issue 24, "nightly work at half price"), through the real SDK
against the loopback stub's batches endpoints: a batch that succeeds is used and priced at half; one
that errors, expires, is cancelled or is not done in time falls back to the synchronous call at once
(a timed-out batch is cancelled); a restart picks a pending batch up instead of paying twice; the same
guards apply to a batched reply as to a synchronous one; ``model.batch`` decides where it is used."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memd import history
from memd.config import Config, DaemonConfig, ModelConfig, replace
from memd.jobs import JobContext
from memd.jobs.catchup import catchup_project
from memd.jobs.dream import dream_project
from memd.layout import Project
from memd.llm import batch as lb
from memd.llm import client as llm
from memd.state import StateStore
from tests.plugins.stub_api import BatchScript, Recorded, StubAPI
from tests.test_model_budgets import cfg_with
from tests.test_model_jobs import Env, _fake_session, _user, dup_folder, topic, tree
from tests.test_model_jobs import env as env

__all__ = ["env"]

FAST = {"batch_wait_minutes": 0.01, "batch_poll_s": 0.05}  # a wait of 0.6 s, polled every 50 ms


def batched_cfg(env: Env, **model: Any) -> Config:
    return cfg_with(env, model={**FAST, **model})


def calls(env: Env) -> list[Recorded]:
    """The Messages calls that were answered (batched or not), in order."""
    return [r for r in env.stub.requests if r.path == "/v1/messages" and r.usage is not None]


def expected_cost(cfg: Config, recs: list[Recorded]) -> float:
    total = 0.0
    for r in recs:
        p = llm.price_for(cfg, str(r.body["model"]))
        assert p is not None and r.usage is not None
        u = r.usage
        full = (u["input_tokens"] * p["input"] + u["output_tokens"] * p["output"]
                + u["cache_creation_input_tokens"] * p["cache_write"] + u["cache_read_input_tokens"] * p["cache_read"])
        total += full / 1e6 * (lb.BATCH_RATE if r.batched else 1.0)
    return total


def dream_script(s: StubAPI) -> None:
    s.script(s.message(s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
             s.message(s.text("merged")))


def session_project(env: Env, name: str = "-home-dev-batch") -> tuple[Project, Path]:
    p = env.project(name)
    env.memory(p, {"MEMORY.md": "- [Role](user_role.md) — backend engineer\n",
                   "user_role.md": topic("Role", "backend engineer", "The user is a backend engineer.", "user")})
    sess = p.dir / "11111111-2222-3333-4444-000000000001.jsonl"
    _fake_session(sess, [_user("remember: we deploy on Fridays", "2026-03-05T10:00:00Z")])
    return p, sess


def catchup_script(s: StubAPI, n: int = 1) -> None:
    for i in range(n):
        s.script(s.message(s.memory("create", path=f"/memories/project_deploy_{i}.md",
                                    file_text=topic("Deploy", "deploy on Fridays", "Deploys on Fridays.", "project"))),
                 s.message(s.text("saved")))


# --------------------------------------------------------------------------- succeeded


def test_a_nightly_dream_sends_its_first_call_as_a_batch_at_half_price(env: Env) -> None:
    from memd.jobs.runner import run_job

    p = dup_folder(env)
    dream_script(env.stub)
    cfg = batched_cfg(env)
    result = run_job("dream", env.jc(config=cfg, force=True, unattended=True), [p])
    (out,) = result.outcomes
    assert out.outcome == "changed" and out.deleted == 1, out
    recs = calls(env)
    assert [r.batched for r in recs] == [True, False]  # the first call batched, the loop went on at once
    assert env.stub.creates == 1 and env.stub.cancels == 0
    first = env.stub.batches[out.details["batch"]["id"]].requests[0]
    assert first["params"]["messages"][0]["content"][0]["text"].startswith("Today is")
    assert out.details["batch"]["result"] == "succeeded" and out.details["batched_calls"] == 1
    assert "first call batched (half price)" in out.message
    # accounting: the batched call priced at half, in the outcome and in the run log's row
    assert out.cost_usd == pytest.approx(expected_cost(cfg, recs), abs=1e-6)
    full = expected_cost(cfg, [Recorded("POST", r.path, {}, {}, r.body, b"", r.usage) for r in recs])
    assert out.cost_usd < full and out.details["batch_saved_usd"] == pytest.approx(full - out.cost_usd, abs=1e-6)
    (row,) = env.state.runs(job="dream", project=p.name)
    assert row.cost_usd == pytest.approx(out.cost_usd, abs=1e-6) and "half price" in row.summary
    assert env.state.get(lb.state_key("dream", p.name)) is None  # the record is gone once the result is read


def test_a_scheduled_catchup_batches_its_first_call_and_advances(env: Env) -> None:
    p, sess = session_project(env)
    catchup_script(env.stub)
    out = catchup_project(env.jc(config=batched_cfg(env), unattended=True), p)
    assert out.outcome == "changed" and out.added == 1, out
    assert [r.batched for r in calls(env)] == [True, False]
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == sess.stat().st_size


# --------------------------------------------------------------------------- where model.batch applies


@pytest.mark.parametrize(("mode", "unattended", "batched"), [
    ("auto", True, True), ("auto", False, False), ("on", False, True), ("on", True, True),
    ("off", True, False), ("off", False, False)])
def test_model_batch_decides_where_a_batch_is_used(env: Env, mode: str, unattended: bool, batched: bool) -> None:
    p = dup_folder(env)
    dream_script(env.stub)
    out = dream_project(env.jc(config=batched_cfg(env, batch=mode), force=True, unattended=unattended), p)
    assert out.outcome == "changed", out
    assert env.stub.creates == int(batched)
    assert [r.batched for r in calls(env)] == [batched, False]
    assert ("half price" in out.message) is batched


def test_bedrock_and_vertex_are_never_batched() -> None:
    cfg = Config(model=replace(ModelConfig(), batch="on"))
    assert lb.decide(cfg, unattended=True, source_kind="bedrock") is not None
    assert lb.decide(cfg, unattended=True, source_kind="vertex") is not None
    assert lb.decide(cfg, unattended=False, source_kind="api_key") is None
    assert lb.decide(replace(cfg, model=replace(cfg.model, batch="auto")), unattended=False,
                     source_kind="auth_token") is not None


def test_the_wait_fits_in_the_childs_time_limit() -> None:
    cfg = Config(model=replace(ModelConfig(), batch_wait_minutes=60))
    assert lb.wait_limit(cfg, 3600) == cfg.daemon.job_timeout_s - 3600 - lb.CHILD_MARGIN_S
    assert lb.wait_limit(replace(cfg, daemon=replace(DaemonConfig(), isolate_jobs=False)), 3600) == 3600
    assert lb.wait_limit(cfg, 5000) == 0.0  # no room at all: the call is made at once after one poll
    assert lb.wait_limit(Config(), 3600) == 600  # the default: 10 minutes fit under 4,500 s


# --------------------------------------------------------------------------- fallbacks


@pytest.mark.parametrize("result", ["errored", "expired", "canceled"])
def test_a_batch_that_did_not_succeed_falls_back_to_the_call_at_once(env: Env, result: str) -> None:
    p = dup_folder(env)
    env.stub.batch_script(BatchScript(result=result, polls=1))
    dream_script(env.stub)
    cfg = batched_cfg(env)
    out = dream_project(env.jc(config=cfg, force=True, unattended=True), p)
    assert out.outcome == "changed" and out.deleted == 1, out
    recs = calls(env)
    assert [r.batched for r in recs] == [False, False]  # nothing billed for the batch: only the calls at once
    assert out.details["batch"]["result"] == result and out.details["batch"]["fallback"] is True
    assert f"batch {result}" in out.message and "first call made at once" in out.message
    assert out.cost_usd == pytest.approx(expected_cost(cfg, recs), abs=1e-6)
    assert "batched_calls" not in out.details
    assert env.state.get(lb.state_key("dream", p.name)) is None
    assert lb.pending(env.state) == []  # the endpoint's record is not a pending batch


def test_an_endpoint_without_batches_is_not_asked_again_for_a_week(env: Env) -> None:
    """A proxy without the batches route costs one failed create, not one a run: `auto` remembers it
    for a week, then tries once more; `on` tries every run; a submitted batch clears the record."""
    from datetime import UTC, datetime

    from memd.clock import ManualClock

    clock = ManualClock(datetime(2026, 3, 10, 1, 0, tzinfo=UTC))
    tries: list[str] = []
    original = env.stub._batches

    def no_batches(method: str, path: str, body: Any) -> Any:
        tries.append(path)
        return env.stub.error(404, "no batches here")

    def night(mode: str = "auto") -> Any:
        dream_script(env.stub)
        out = dream_project(env.jc(config=batched_cfg(env, batch=mode), force=True, unattended=True, clock=clock),
                            dup_folder(env))
        assert out.outcome == "changed", out
        return out

    env.stub._batches = no_batches  # type: ignore[method-assign]
    try:
        assert night().details["batch"]["reason"] == "not submitted (HTTP 404)"
        assert len(tries) == 1
        clock.advance(86_400)
        assert "batch" not in night().details and len(tries) == 1  # not asked again: no failed request
        assert night("on").details["batch"]["reason"] == "not submitted (HTTP 404)"  # on tries regardless
        assert len(tries) == 2
        clock.advance(lb.PROBE_EVERY_S + 1)
        assert night().details["batch"]["reason"] == "not submitted (HTTP 404)"  # the week's try
        assert len(tries) == 3
    finally:
        env.stub._batches = original  # type: ignore[method-assign]
    clock.advance(lb.PROBE_EVERY_S + 1)
    env.stub.batch_script(BatchScript())
    assert night().details["batch"]["result"] == "succeeded"  # the endpoint has them now
    assert env.state.items(lb.ENDPOINT_KEY) == {}


def test_a_batch_not_done_in_time_is_cancelled_and_the_call_made_at_once(env: Env) -> None:
    p, sess = session_project(env)
    env.stub.batch_script(BatchScript(polls=10_000))
    catchup_script(env.stub)
    out = catchup_project(env.jc(config=batched_cfg(env), unattended=True), p)
    assert out.outcome == "changed", out
    note = out.details["batch"]
    assert note["result"] == "timeout" and note["cancelled"] == [note["id"]] and note["waited_s"] >= 0.6
    assert env.stub.cancels == 1 and [r.batched for r in calls(env)] == [False, False]
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == sess.stat().st_size
    assert env.state.get(lb.state_key("catchup", p.name)) is None


def test_a_batch_that_ends_as_it_is_cancelled_is_used(env: Env) -> None:
    """A success that lands while memd cancels is billed anyway: it is used, not paid twice."""
    p = dup_folder(env)
    env.stub.batch_script(BatchScript(polls=10_000, on_cancel="succeeded"))
    dream_script(env.stub)
    out = dream_project(env.jc(config=batched_cfg(env), force=True, unattended=True), p)
    assert out.outcome == "changed", out
    assert [r.batched for r in calls(env)] == [True, False] and env.stub.cancels == 1
    assert out.details["batch"]["result"] == "succeeded"


def test_a_batch_that_cannot_be_submitted_falls_back(env: Env) -> None:
    p = dup_folder(env)
    dream_script(env.stub)
    env.stub.batch_script(BatchScript())
    cfg = batched_cfg(env, base_url=env.stub.base_url)
    # the stub's create route answers 400 to a request that is not a list of {custom_id, params}:
    # simulated here by a workspace that has no batches (a 404 from every batches route)
    original = env.stub._batches
    env.stub._batches = lambda method, path, body: env.stub.error(404, "no batches here")  # type: ignore[method-assign]
    try:
        out = dream_project(env.jc(config=cfg, force=True, unattended=True), p)
    finally:
        env.stub._batches = original  # type: ignore[method-assign]
    assert out.outcome == "changed", out
    assert out.details["batch"] == {"id": "", "result": "not submitted", "waited_s": 0.0, "fallback": True,
                                    "reason": "not submitted (HTTP 404)"}
    assert env.state.get(lb.state_key("dream", p.name)) is None


# --------------------------------------------------------------------------- the same guards


def test_a_batched_refusal_fails_the_run_and_applies_nothing(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.enqueue(s.message(s.text("no"), stop_reason="refusal"))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(config=batched_cfg(env), force=True, unattended=True), p)
    assert out.outcome == "failed" and "refused" in (out.error or ""), out
    assert tree(p.memory_dir) == before and env.state.project(p.name).last_consolidation is None
    assert out.details["batched_calls"] == 1 and out.cost_usd > 0  # it was billed, at half


def test_a_batched_reply_cut_at_max_tokens_is_asked_again_at_once(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.text("cut"), stop_reason="max_tokens"))
    dream_script(s)
    out = dream_project(env.jc(config=batched_cfg(env), force=True, unattended=True), p)
    assert out.outcome == "changed", out
    recs = calls(env)
    assert [r.batched for r in recs] == [True, False, False]
    assert recs[1].body["max_tokens"] == 2 * recs[0].body["max_tokens"]


def test_a_malformed_batched_reply_is_counted_and_fails_the_run(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.enqueue(s.message({"type": "tool_use", "id": "t1", "name": "memory"}))  # no input
    before = tree(p.memory_dir)
    out = dream_project(env.jc(config=batched_cfg(env), force=True, unattended=True), p)
    assert out.outcome == "failed" and "malformed" in (out.error or ""), out
    assert tree(p.memory_dir) == before
    assert out.details["batched_calls"] == 1 and out.cost_usd > 0


def test_the_token_cap_is_checked_before_a_batch_is_submitted(env: Env) -> None:
    p = dup_folder(env)
    cfg = cfg_with(env, model=FAST, dream={"max_input_tokens": 1000})
    out = dream_project(env.jc(config=cfg, force=True, unattended=True), p)
    assert out.outcome == "partial" and env.stub.requests == [], out


# --------------------------------------------------------------------------- a restart never pays twice


def test_a_restart_picks_up_the_pending_batch_instead_of_paying_twice(env: Env) -> None:
    p, sess = session_project(env)
    stop = threading.Event()
    env.stub.batch_script(BatchScript(polls=3, before_retrieve=stop.set))
    catchup_script(env.stub)
    cfg = batched_cfg(env)
    first = catchup_project(env.jc(config=cfg, unattended=True, stop=stop), p)
    assert first.outcome == "skipped" and "shutdown" in first.message, first
    assert first.details["batch"]["result"] == "shutdown"
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == 0  # nothing applied, the span unmoved
    assert env.state.get(lb.state_key("catchup", p.name)) is not None  # the batch id is kept
    assert calls(env) == [] and env.stub.creates == 1
    # `memd status` says it is pending, and whose next run picks it up
    from memd.daemon import info

    assert [(b.job, b.project, b.batch_id) for b in lb.pending(env.state)] == [
        ("catchup", p.name, first.details["batch"]["id"])]
    shown = info.daemon_status(env.state_dir, cfg)
    assert [b["project"] for b in shown["batches"]] == [p.name]
    assert f"batch {first.details['batch']['id']} (catchup of {p.name}" in info.render(shown)
    # the daemon restarts; the next scheduled run sends the same request: the batch is picked up
    env.stub.batches[first.details["batch"]["id"]].script.before_retrieve = None
    second = catchup_project(env.jc(config=cfg, unattended=True), p)
    assert second.outcome == "changed", second
    assert env.stub.creates == 1 and env.stub.cancels == 0  # not submitted again
    assert second.details["batch"]["resumed"] is True and "after a restart" in second.message
    assert [r.batched for r in calls(env)] == [True, False]
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == sess.stat().st_size
    assert env.state.get(lb.state_key("catchup", p.name)) is None
    assert lb.pending(env.state) == [] and info.daemon_status(env.state_dir, cfg)["batches"] == []


def test_a_recorded_batch_for_another_request_is_cancelled(env: Env) -> None:
    p, sess = session_project(env)
    stop = threading.Event()
    env.stub.batch_script(BatchScript(polls=10_000, before_retrieve=stop.set))
    cfg = batched_cfg(env)
    first = catchup_project(env.jc(config=cfg, unattended=True, stop=stop), p)
    old = first.details["batch"]["id"]
    # the session went on meanwhile: the next run's first request is another one
    _fake_session(sess, [_user("remember: we deploy on Fridays", "2026-03-05T10:00:00Z"),
                         _user("and the staging host is stg.internal", "2026-03-05T10:10:00Z")])
    catchup_script(env.stub)
    second = catchup_project(env.jc(config=cfg, unattended=True), p)
    assert second.outcome == "changed", second
    assert env.stub.creates == 2 and second.details["batch"]["cancelled"] == [old]
    assert env.stub.batches[old].cancelled and second.details["batch"]["id"] != old


# --------------------------------------------------------------------------- the daemon's runs


def test_the_child_process_carries_unattended_to_the_job() -> None:
    import io
    import json

    from memd.daemon.child import config_to_plain, serve
    from memd.jobs import ProjectOutcome

    seen: list[bool] = []

    def work(jc: JobContext, project: Project) -> ProjectOutcome:
        seen.append(jc.unattended)
        return ProjectOutcome(project.name, "unchanged")

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        hello = {"job": "catchup", "config": config_to_plain(Config()), "claude_dir": tmp, "state_dir": tmp}
        lines = [json.dumps({"project": {"name": n, "dir": tmp, "memory_dir": tmp}, "force": False,
                             "dry_run": False, "wall": 0.0, **({"unattended": u} if u is not None else {})})
                 for n, u in (("a", True), ("b", False), ("c", None))]
        serve(hello, [ln.encode() for ln in lines], io.BytesIO(), threading.Event(), work=work)
    assert seen == [True, False, False]


def test_only_the_daemons_scheduled_requests_are_unattended(tmp_path: Path) -> None:
    from memd.daemon.worker import JobRequest, Worker

    got: list[bool] = []

    class Probe(Worker):
        def _select(self, claude_dir: Path, names: list[str] | None) -> list[Any]:
            return []

    import memd.jobs.runner as runner

    real = runner.run_job

    def spy(job: str, jc: JobContext, *a: Any, **k: Any) -> Any:
        got.append(jc.unattended)
        return real(job, jc, *a, **k)

    runner.run_job = spy  # type: ignore[assignment]
    try:
        w = Probe.__new__(Probe)
        _init_probe(w, tmp_path)
        with StateStore.open(tmp_path / "state") as state:
            for reason in ("schedule", "signal", "auto_relief"):
                w._run_request(JobRequest("catchup", [], reason=reason), state)
    finally:
        runner.run_job = real  # type: ignore[assignment]
    assert got == [True, False, False]


def _init_probe(w: Any, tmp: Path) -> None:
    """A worker without its threads: the fields ``_run_request`` reads."""
    import queue

    from memd.clock import SYSTEM

    w.state_dir = tmp / "state"
    w._settings = (Config(daemon=replace(DaemonConfig(), isolate_jobs=False)), tmp / "claude")
    w.clock = SYSTEM
    w.stop = threading.Event()
    w.log = _Quiet()
    w.outbox = queue.SimpleQueue()
    w._child = None


class _Quiet:
    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


# --------------------------------------------------------------------------- model-based: never twice


class FirstCalls(RuleBasedStateMachine):
    """A run's first call through ``first_call`` against the stub, run after run, with any batch
    outcome, shutdowns and changed requests in between. Whatever happens: a finished run got exactly
    one reply for its first call, paid once (batched or at once, never both); a shutdown keeps the
    batch recorded and the same request picks it up without a new submission; a record never
    outlives its batch's result."""

    def __init__(self) -> None:
        super().__init__()
        import os
        import tempfile

        os.environ.setdefault("ANTHROPIC_API_KEY", "test")
        self.tmp = tempfile.TemporaryDirectory()
        self.stub = StubAPI()
        self.stub.fallback = None
        self.state = StateStore.open(Path(self.tmp.name) / "state")
        self.cfg = Config(model=replace(ModelConfig(), base_url=self.stub.base_url, max_retries=0, timeout_s=5.0,
                                        batch="on", **FAST))
        self.request = 0  # which request the next run sends (a changed span: another one)
        self.pending: str | None = None  # the batch a shutdown left, and for which request
        self.pending_for = -1
        self.paid = 0  # replies billed (batched successes and calls at once)
        self.finished = 0

    def teardown(self) -> None:
        self.state.close()
        self.stub.close()
        self.tmp.cleanup()

    def _run(self, script: BatchScript, *, shutdown: bool) -> tuple[Any, lb.BatchNote]:
        stop = threading.Event()
        if shutdown:
            script.before_retrieve = stop.set
        self.stub.batch_script(script)
        self.stub.enqueue(self.stub.message(self.stub.text(f"reply {self.request}")))
        plan = lb.BatchPlan(wait_s=0.3, poll_s=0.05, key=lb.state_key("catchup", "p"), state=self.state, stop=stop)
        note = lb.BatchNote()
        before = len([r for r in self.stub.requests if r.usage is not None])
        with llm.Client(self.cfg, deadline_s=30) as c:
            msg = lb.first_call(c, plan, note, model="claude-haiku-4-5", betas=[],
                                messages=[{"role": "user", "content": f"span {self.request}"}])
        answered = [r for r in self.stub.requests if r.usage is not None][before:]
        with self.stub._lock:
            self.stub._batch_queue.clear()  # a run that picked a batch up used no new script
        if msg is None:
            assert answered == [] and note.result == "shutdown"
            # what is left queued was not used: take it back (the next run scripts its own)
            with self.stub._lock:
                self.stub._queue.clear()
        else:
            assert len(answered) == 1, answered  # one reply for the first call: never paid twice
            assert answered[0].batched == (note.result == "succeeded")
            assert llm.text_of(msg) == f"reply {self.request}"
            self.paid += 1
            self.finished += 1
        return msg, note

    @rule(result=st.sampled_from(["succeeded", "errored", "expired", "canceled"]), polls=st.integers(0, 2))
    def run(self, result: str, polls: int) -> None:
        creates = self.stub.creates
        msg, note = self._run(BatchScript(result=result, polls=polls), shutdown=False)
        resumed = self.pending is not None and self.pending_for == self.request
        assert note.resumed == resumed
        if resumed:
            assert self.stub.creates == creates  # picked up, not submitted again
        elif self.pending is not None:
            assert self.pending in note.cancelled  # another request: the old batch cancelled
        self.pending = None
        assert msg is not None

    @rule()
    def slow(self) -> None:
        _msg, note = self._run(BatchScript(polls=10_000), shutdown=False)
        assert note.result == "timeout" and note.batch_id in note.cancelled
        self.pending = None

    @precondition(lambda self: self.pending is None)
    @rule()
    def shutdown(self) -> None:
        msg, note = self._run(BatchScript(polls=10_000), shutdown=True)
        assert msg is None
        self.pending, self.pending_for = note.batch_id, self.request

    @rule()
    def span_moves_on(self) -> None:
        self.request += 1

    @invariant()
    def record_matches(self) -> None:
        rec = self.state.get(lb.state_key("catchup", "p"))
        assert (rec is not None) == (self.pending is not None)
        billed = len([r for r in self.stub.requests if r.usage is not None])
        assert billed == self.paid


TestFirstCalls = FirstCalls.TestCase
TestFirstCalls.settings = settings(max_examples=15, stateful_step_count=6, deadline=None,
                                   suppress_health_check=[HealthCheck.too_slow])


def test_history_is_untouched_by_a_shutdown_batch(env: Env) -> None:
    p = dup_folder(env)
    stop = threading.Event()
    env.stub.batch_script(BatchScript(polls=10_000, before_retrieve=stop.set))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(config=batched_cfg(env), force=True, unattended=True, stop=stop), p)
    assert out.outcome == "skipped", out
    assert tree(p.memory_dir) == before and history.list_runs(env.state_dir, p.name) == []
    assert env.state.project(p.name).last_consolidation is None


def test_each_conversation_of_a_catchup_batches_its_first_call_within_one_wait(env: Env) -> None:
    """Two long sessions: two conversations, each first call a batch; the first one's wait uses the
    run's whole wait, so the second is made at once (the run never waits longer than its bound)."""
    p = env.project("-home-dev-two")
    env.memory(p, {"MEMORY.md": ""})
    for n in (1, 2):
        _fake_session(p.dir / f"11111111-2222-3333-4444-00000000000{n}.jsonl",
                      [_user(f"session {n}: " + "we talk about the deploy pipeline at length. " * 300)])
    catchup_script(env.stub, 2)
    out = catchup_project(env.jc(config=batched_cfg(env), unattended=True), p)
    assert out.outcome == "changed" and out.details["conversations"] == 2, out
    assert [r.batched for r in calls(env)] == [True, False, True, False]
    assert out.details["batched_calls"] == 2 and "2 of 2 first calls batched" in out.message
    assert len(out.details["batches"]) == 2
    # the same day with the first batch late: its wait uses the run's whole wait, the second goes at once
    env.stub.requests.clear()
    q = env.project("-home-dev-two-late")
    env.memory(q, {"MEMORY.md": ""})
    for n in (1, 2):
        _fake_session(q.dir / f"11111111-2222-3333-4444-00000000001{n}.jsonl",
                      [_user(f"session {n}: " + "we talk about the deploy pipeline at length. " * 300)])
    env.stub.batch_script(BatchScript(polls=10_000))
    catchup_script(env.stub, 2)
    creates = env.stub.creates
    late = catchup_project(env.jc(config=batched_cfg(env), unattended=True), q)
    assert late.outcome == "changed", late
    assert env.stub.creates == creates + 1 and [r.batched for r in calls(env)] == [False] * 4
    assert late.details["batch"]["result"] == "timeout" and "batches" not in late.details


# --------------------------------------------------------------------------- batching only where it pays


def test_observe_judges_a_batched_call_by_the_next_calls_cache() -> None:
    u = {"input_tokens": 10, "output_tokens": 5}
    assert lb.observe({**u, "cache_creation_input_tokens": 5000}, {**u, "cache_read_input_tokens": 5000}) == "hit"
    assert lb.observe({**u, "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 1000},
                      {**u, "cache_read_input_tokens": 5200, "cache_creation_input_tokens": 300}) == "hit"
    # the batch left nothing in the cache: the next call had to write the prefix itself
    assert lb.observe({**u, "input_tokens": 5000}, {**u, "cache_creation_input_tokens": 5300}) == "miss"
    assert lb.observe({**u, "cache_creation_input_tokens": 5000},
                      {**u, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 4300}) == "miss"
    assert lb.observe({**u, "input_tokens": 900}, {**u, "input_tokens": 950}) is None  # nothing cacheable


def test_auto_stops_batching_a_model_whose_batches_miss_the_cache_and_probes_once_a_week(env: Env) -> None:
    from datetime import UTC, datetime

    from memd.clock import ManualClock

    clock = ManualClock(datetime(2026, 3, 10, 1, 0, tzinfo=UTC))
    p = dup_folder(env)
    s = env.stub
    s.batch_caches = False  # Anthropic's best effort at its worst: batched requests are not cached

    def night(mode: str = "auto") -> Any:
        s.script(s.message(s.memory("view", path="/memories/MEMORY.md")), s.message(s.text("done")))
        out = dream_project(env.jc(config=batched_cfg(env, batch=mode), force=True, unattended=True, clock=clock), p)
        assert out.outcome in ("changed", "unchanged"), out
        return out

    for _ in range(lb.MISSES_TO_STOP):
        assert night().details["batch"]["cache"] == "miss"
    assert s.creates == lb.MISSES_TO_STOP
    out = night()  # three misses in a row: a batch costs more than it saves here
    assert s.creates == lb.MISSES_TO_STOP and "batch" not in out.details
    clock.advance(lb.PROBE_EVERY_S + 1)
    assert night().details["batch"]["cache"] == "miss"  # the week's probe
    clock.advance(lb.PROBE_EVERY_S / 2)
    night()
    assert s.creates == lb.MISSES_TO_STOP + 1  # then not again that week
    assert night("on").details["batch"]["cache"] == "miss"  # model.batch = on batches regardless
    # Anthropic caches batched requests again: the next week's probe sees it and batching resumes
    s.batch_caches = True
    clock.advance(lb.PROBE_EVERY_S + 1)
    assert night().details["batch"]["cache"] == "hit"
    assert night().details["batch"]["cache"] == "hit"
    assert s.creates == lb.MISSES_TO_STOP + 4  # the probe, the `on` run, the next probe, and after it
