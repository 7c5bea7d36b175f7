"""Issue 11, findings 2 and 7 (accounting), through the real SDK against the local stub: stop
reasons, thinking per model, the run's deadline, and the run log's four token kinds."""

from __future__ import annotations

import json
import math
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memd import state as st
from memd.config import Config, ModelConfig, replace
from memd.jobs import gates as G
from memd.jobs.catchup import catchup_project
from memd.jobs.dream import dream_project
from memd.jobs.runner import run_job
from memd.llm import client as llm
from memd.state import StateStore
from tests.plugins.stub_api import Reply
from tests.test_model_jobs import OLD, Env, dup_folder, real_session_project, topic, tree
from tests.test_model_jobs import env as env

DELETE_DUP = "/memories/feedback_tabs_2.md"


def with_model(env: Env, **kw: Any) -> Config:
    return replace(env.config, model=replace(env.config.model, **kw))


# --------------------------------------------------------------------------- stop reasons


def test_dream_cut_at_max_tokens_is_asked_again_with_a_larger_budget(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.text("I will now merge the two tab fil"), stop_reason="max_tokens"),
             s.message(s.memory("delete", path=DELETE_DUP, reason="dup")),
             s.message(s.text("merged the duplicates")))
    out = dream_project(env.jc(force=True), p)
    assert out.outcome == "changed" and out.deleted == 1, out  # not "noop: nothing to change"
    budgets = [r.body["max_tokens"] for r in s.requests]
    assert budgets[1] == 2 * budgets[0] and budgets[2] == budgets[1]
    assert s.requests[1].body["messages"] == s.requests[0].body["messages"]  # the cut reply is dropped
    assert out.details["stop_reasons"] == ["max_tokens", "tool_use", "end_turn"]
    assert env.state.project(p.name).last_consolidation is not None


def test_dream_cut_twice_fails_and_moves_no_lock_and_no_gate(env: Env) -> None:
    p = dup_folder(env)
    lock = p.memory_dir / G.LOCK_NAME
    lock.write_text("999999")  # a dead holder; its mtime is Claude Code's "last consolidation"
    os.utime(lock, (OLD, OLD))
    s = env.stub
    s.script(s.message(s.memory("delete", path=DELETE_DUP, reason="dup")),
             s.message(s.text("Merging no"), stop_reason="max_tokens"),
             s.message(s.text("Merging now, fil"), stop_reason="max_tokens"))
    before = {k: v for k, v in tree(p.memory_dir).items() if k != G.LOCK_NAME}
    (out,) = run_job("dream", env.jc(force=True), [p]).outcomes
    assert out.outcome == "failed" and "max_tokens" in (out.error or ""), out
    assert {k: v for k, v in tree(p.memory_dir).items() if k != G.LOCK_NAME} == before
    assert lock.stat().st_mtime == pytest.approx(OLD)  # rolled back, not "consolidated now"
    assert env.state.project(p.name).last_consolidation is None
    assert s.pending == 0 and len(s.requests) == 3


@pytest.mark.parametrize("reason", ["refusal", "stop_sequence", "model_context_window_exceeded", "weird"])
def test_catchup_reply_that_did_not_finish_fails_and_keeps_offsets(env: Env, claude_data: Path,
                                                                   reason: str) -> None:
    p, session = real_session_project(env, claude_data)
    s = env.stub
    s.script(s.message(s.memory("create", path="/memories/user_x.md", file_text=topic("X", "x", "x", "user"))),
             s.message(s.text("I can't help with that."), stop_reason=reason))
    before = tree(p.memory_dir)
    out = catchup_project(env.jc(), p)
    assert out.outcome == "failed" and reason[:20] in (out.error or ""), out
    assert tree(p.memory_dir) == before
    t = env.state.transcript(session)
    assert t is not None and t.extract_offset == 0
    assert env.state.project(p.name).last_catchup is None


def test_pause_turn_continues_the_turn(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.text("Let me look at the duplicates first."), stop_reason="pause_turn"),
             s.message(s.memory("delete", path=DELETE_DUP, reason="dup")),
             s.message(s.text("merged")))
    out = dream_project(env.jc(force=True), p)
    assert out.outcome == "changed" and out.deleted == 1, out
    assert s.pending == 0 and len(s.requests) == 3
    resumed = s.requests[1].body["messages"]
    assert resumed[-1]["role"] == "assistant"  # the paused turn is sent back as-is
    assert resumed[-1]["content"][0]["text"] == "Let me look at the duplicates first."
    assert "cache_control" not in resumed[-1]["content"][-1]  # the breakpoint stays on a user turn


# --------------------------------------------------------------------------- thinking and deadline


@pytest.mark.parametrize(("mode", "model", "effort", "want_thinking", "want_max", "want_effort"), [
    ("auto", "claude-sonnet-5-5", "", {"type": "adaptive"}, 32_000, None),
    ("auto", "claude-haiku-5-5-20261001", "", {"type": "adaptive"}, 32_000, None),
    ("auto", "claude-haiku-4-5", "", None, 4096, None),
    ("off", "claude-sonnet-5-5", "", {"type": "disabled"}, 4096, None),
    ("adaptive", "claude-haiku-4-5", "medium", {"type": "adaptive"}, 32_000, {"effort": "medium"}),
])
def test_thinking_is_configured_per_model(env: Env, mode: str, model: str, effort: str, want_thinking: Any,
                                          want_max: int, want_effort: Any) -> None:
    p = dup_folder(env)
    s = env.stub
    s.enqueue(s.message(s.text("nothing to merge")))
    cfg = with_model(env, thinking=mode, dream_model=model, effort=effort)
    dream_project(env.jc(config=cfg, force=True), p)
    (req,) = s.requests
    assert req.body.get("thinking") == want_thinking
    assert req.body["max_tokens"] == want_max
    assert req.body.get("output_config") == want_effort


def test_recall_side_query_never_thinks() -> None:
    cfg = Config(model=replace(ModelConfig(), thinking="adaptive"))
    assert llm.thinking_params(cfg, "claude-sonnet-5-5", side=True) == (4096, {"thinking": {"type": "disabled"}})


def test_run_deadline_is_sized_to_the_call_cap(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = with_model(env, timeout_s=30.0, run_deadline_s=3600.0)
    assert llm.run_deadline(cfg, 4) == 120.0
    assert llm.run_deadline(cfg, 500) == 3600.0  # bounded
    seen: list[float | None] = []
    real = llm.Client

    class Spy(real):  # type: ignore[misc, valid-type]
        def __init__(self, config: Config, **kw: Any) -> None:
            seen.append(kw.get("deadline_s"))
            super().__init__(config, **kw)

    monkeypatch.setattr(llm, "Client", Spy)
    p = dup_folder(env)
    env.stub.enqueue(env.stub.message(env.stub.text("nothing to merge")))
    dream_project(env.jc(config=cfg, force=True), p)
    assert seen == [(env.config.dream.max_tool_turns + 1) * 30.0]


# --------------------------------------------------------------------------- accounting


def test_run_log_records_four_token_kinds_their_sum_and_the_cost_of_all_four(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.min_cache_tokens = 50  # the folder is small: let the stub cache it
    s.script(s.message(s.memory("view", path="/memories/feedback_tabs.md")),
             s.message(s.memory("delete", path=DELETE_DUP, reason="dup")), s.message(s.text("merged")))
    (out,) = run_job("dream", env.jc(force=True), [p]).outcomes
    (row,) = env.state.runs(job="dream", project=p.name)
    usages = [r.usage or {} for r in s.requests]
    want = {k: sum(u[k] for u in usages) for k in ("input_tokens", "output_tokens",
                                                     "cache_creation_input_tokens", "cache_read_input_tokens")}
    assert (row.tokens_in, row.tokens_out, row.cache_write, row.cache_read) == (
        want["input_tokens"], want["output_tokens"], want["cache_creation_input_tokens"],
        want["cache_read_input_tokens"])
    assert row.cache_read > 0 and row.cache_write > 0
    assert row.tokens_total == sum(want.values()) == out.tokens_total == out.details["tokens_total"]
    price = env.config.model.prices[env.config.model.dream_model]
    cost = (want["input_tokens"] * price["input"] + want["output_tokens"] * price["output"]
            + want["cache_creation_input_tokens"] * price["cache_write"]
            + want["cache_read_input_tokens"] * price["cache_read"]) / 1e6
    assert row.cost_usd == pytest.approx(cost, abs=1e-6)


@pytest.mark.parametrize("bad", [1e308, math.inf, -5, "12", True])
def test_absurd_usage_is_rejected_with_a_reason_not_a_crash(env: Env, bad: Any) -> None:
    p = dup_folder(env)
    s = env.stub
    body = s.message(s.memory("delete", path=DELETE_DUP, reason="dup"))
    body["usage"] = {"input_tokens": 100, "output_tokens": bad, "cache_creation_input_tokens": 0,
                     "cache_read_input_tokens": 7}
    s.script(Reply(raw=json.dumps(body).encode()), s.message(s.text("merged")))
    (out,) = run_job("dream", env.jc(force=True), [p]).outcomes
    assert out.outcome == "changed" and out.deleted == 1, out
    assert any("usage.output_tokens" in r for r in out.details["usage_rejected"])
    (row,) = env.state.runs(job="dream", project=p.name)
    assert 0 <= row.tokens_out < 10_000 and row.tokens_in >= 100 and row.cache_read >= 7
    assert math.isfinite(row.cost_usd) and row.tokens_total < 100_000


def test_usage_count_bounds() -> None:
    rejected: list[str] = []
    assert [llm.usage_count(v, "x", rejected) for v in (None, 0, 12, 12.0, 10_000_000)] == [0, 0, 12, 12, 10_000_000]
    assert [llm.usage_count(v, "x", rejected) for v in (-1, math.nan, 1e308, 10_000_001, "5", [])] == [0] * 6
    assert len(rejected) == 5 and all(r.startswith("usage.x ") for r in rejected)  # one line per reason


def test_finish_run_stores_sane_counts_whatever_it_is_given(tmp_path: Path) -> None:
    with StateStore.open(tmp_path) as s:
        rid = s.start_run("dream", "p", 1.0)
        s.finish_run(rid, outcome="changed", ended=2.0, tokens_in=10, tokens_out=int(1e308), cache_read=5,
                     cache_write=-3, cost_usd=math.nan)
        (row,) = s.runs()
        assert (row.tokens_in, row.tokens_out, row.cache_read, row.cache_write, row.tokens_total) == (10, 0, 5, 0, 15)
        assert row.cost_usd == 0.0


def test_old_state_database_gains_tokens_total_from_its_columns(tmp_path: Path) -> None:
    f = tmp_path / "state.sqlite3"
    c = sqlite3.connect(f, isolation_level=None)
    for i in range(2):
        for stmt in st._statements(st.MIGRATIONS[i]):
            c.execute(stmt)
    c.execute("PRAGMA user_version = 2")
    c.execute("INSERT INTO runs (job, project, started, outcome, tokens_in, tokens_out, cache_read, cache_write) "
              "VALUES ('dream', 'p', 1.0, 'ok', 0, 900, 400000, 42000)")
    c.close()
    with StateStore.open(tmp_path) as s:
        assert s.schema_version == st.SCHEMA_VERSION >= 3
        (row,) = s.runs()
        assert (row.tokens_in, row.tokens_total) == (0, 442_900)


def test_checkin_report_shows_every_token_of_a_cached_dream(tmp_path: Path) -> None:
    from memd.jobs.checkin import build_report

    with StateStore.open(tmp_path) as s:
        rid = s.start_run("dream", "p", 100.0)
        s.finish_run(rid, outcome="changed", ended=200.0, tokens_in=0, tokens_out=900, cache_read=400_000,
                     cache_write=42_000, cost_usd=0.1)
        text = build_report(s, now=300.0, since=0.0).markdown
    # input counts cache reads and writes too (it read "0/900" before)
    assert "| 442000/900 |" in text and "442,900 tokens (0 uncached in, 900 out" in text


def test_thinking_blocks_go_back_intact_and_never_carry_the_breakpoint(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    thought = {"type": "thinking", "thinking": "Two tab files say the same.", "signature": "sig-abc"}
    s.script(s.message(thought, s.memory("delete", path=DELETE_DUP, reason="dup")), s.message(s.text("merged")))
    out = dream_project(env.jc(force=True), p)
    assert out.outcome == "changed" and out.deleted == 1, out
    sent = s.requests[1].body["messages"]
    assert sent[1]["role"] == "assistant" and sent[1]["content"][0] == thought
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert "cache_control" in sent[2]["content"][-1]
    assert all("cache_control" not in b for b in sent[1]["content"])


def test_checkin_report_counts_every_run_and_lists_the_first(tmp_path: Path) -> None:
    """A day of catch-ups over many projects is more than 10,000 rows: the report said "10000 project
    runs" (it loaded at most 10,000 rows as objects to add them up, megabytes in the daemon each
    morning). The sums come from SQLite now; only the listed rows are loaded."""
    from memd.jobs import checkin

    with StateStore.open(tmp_path) as s:
        with s.batch():
            for k in range(10_250):
                rid = s.start_run("catchup", f"p{k % 500}", 1000.0 + k)
                s.finish_run(rid, outcome="changed" if k % 1000 == 0 else "skipped", ended=1000.5 + k,
                             added=1 if k % 1000 == 0 else 0, tokens_out=2, cost_usd=0.001)
            rid = s.start_run("checkin", None, 5000.0)  # the check-in's own rows are not counted
            s.finish_run(rid, outcome="changed", ended=5001.0)
        rep = checkin.build_report(s, now=20_000.0, since=0.0)
    assert rep.summary["runs"] == 10_250 and rep.summary["outcomes"] == {"changed": 11, "skipped": 10_239}
    assert rep.summary["changes"] == 11 and rep.summary["tokens_out"] == 20_500
    assert abs(rep.summary["cost_usd"] - 10.25) < 1e-6
    assert "10250 project runs (changed 11, skipped 10239)" in rep.markdown
    listed = [line for line in rep.markdown.splitlines() if line.startswith("| 19") or "| catchup |" in line]
    assert len(listed) == checkin._MAX_ROWS and f"… and {10_250 - checkin._MAX_ROWS} more runs" in rep.markdown
    assert "| p0 | changed |" in listed[0]  # the oldest first


def test_a_project_that_keeps_changing_nothing_is_called_out_past_its_skipped_catchups(tmp_path: Path) -> None:
    """Five finished runs that changed nothing, then 30 catch-ups with nothing to read (two and a half
    days of them): the project was no longer called out, its finished runs out of a 20-row window."""
    from memd.jobs import checkin

    with StateStore.open(tmp_path) as s:
        for k in range(5):
            rid = s.start_run("dream", "p", 100.0 + k)
            s.finish_run(rid, outcome="unchanged", ended=100.5 + k)
        for k in range(30):
            rid = s.start_run("catchup", "p", 200.0 + k)
            s.finish_run(rid, outcome="skipped", ended=200.5 + k)
        assert checkin.idle_projects(s, ["p"]) == ["p"]
        rid = s.start_run("catchup", "p", 300.0)
        s.finish_run(rid, outcome="changed", ended=300.5, added=1)
        assert checkin.idle_projects(s, ["p"]) == []


def test_the_morning_report_shows_why_a_run_was_refused(tmp_path: Path) -> None:
    """Issue 25: a refused run's reason was cut to 120 characters, or hidden behind its error code."""
    from memd.jobs.checkin import build_report
    from memd.state import StateStore

    reason = ("refused: the run drops the words the user wrote after an entry's link (1 entry) that are in no "
              "file after it, first: \"restart order: db, api, web; page #oncall first\"")
    with StateStore.open(tmp_path) as s:
        rid = s.start_run("dream", "-home-u-app", 100.0)
        s.finish_run(rid, outcome="refused", ended=200.0, error="rejected", summary=reason)
        text = build_report(s, now=300.0, since=0.0).markdown
    assert "page #oncall first" in text and "rejected" in text
