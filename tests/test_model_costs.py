"""Issue 24 through the real SDK against the local stub: a catch-up that never stalls (a huge paste is
elided, not waited on forever), never pays twice (bounded tries, then parked), a dream with a token
cap, prices you can trust, and cache breakpoints that hit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memd.jobs.catchup import catchup_project
from memd.layout import Project
from tests.plugins.stub_api import Reply
from tests.test_model_budgets import bodies, cfg_with
from tests.test_model_jobs import Env, _fake_session, _user
from tests.test_model_jobs import env as env

__all__ = ["env"]


def _session(p: Project, n: int, records: list[dict[str, Any]]) -> Path:
    path = p.dir / f"11111111-2222-3333-4444-{n:012d}.jsonl"
    _fake_session(path, records)
    return path


def paste(chars: int) -> str:
    line = "2026-03-05 10:00:01 INFO worker[17] processed batch ok in 12 ms\n"
    return (line * (chars // len(line) + 1))[:chars]


# --------------------------------------------------------------------------- never stalls


def test_a_huge_paste_is_sent_with_its_middle_elided_and_the_span_advances(env: Env) -> None:
    p = env.project("-home-dev-paste")
    env.memory(p, {"MEMORY.md": ""})
    big = "Look at this log, HEADWORDS matter:\n" + paste(160_000) + "\nTAILWORDS: we deploy on Fridays."
    sess = _session(p, 1, [_user(big, "2026-03-05T10:00:00Z"),
                           _user("also: the staging host is stg.internal", "2026-03-05T10:05:00Z")])
    env.stub.fallback = Reply(body=env.stub.message(env.stub.text("nothing worth saving")))
    out = catchup_project(env.jc(config=cfg_with(env, catchup={"max_tool_turns": 5})), p)
    sent = json.dumps(bodies(env))
    assert sent, out  # was: "session waits: it does not fit the run's token cap", every run, for good
    assert "HEADWORDS" in sent and "TAILWORDS" in sent and "stg.internal" in sent
    assert "elided by memd" in sent
    assert out.details.get("elided_chars", 0) > 40_000, out.details
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == sess.stat().st_size, out  # the span advanced


def test_render_elides_only_a_user_turn_no_piece_could_hold() -> None:
    from memd.transcripts import records as rec
    from memd.transcripts.render import Budgets, render_pieces

    words = "HEAD words of the user\n" + paste(300_000) + "\nTAIL words of the user"
    recs = rec.parse([(0, _user(words)), (1, _user("short and whole " * 10))], text_cap=120_000)
    for max_chars in (120_000, 30_000, 5_000):
        pcs = render_pieces(recs, Budgets(max_chars=max_chars))
        assert all(len(pc.text) <= max_chars for pc in pcs), max_chars
        text = "".join(pc.text for pc in pcs)
        assert "HEAD words" in text and "TAIL words" in text and ("short and whole " * 10).strip() in text
        assert sum(pc.elided for pc in pcs) >= len(words) - max_chars
    small = rec.parse([(0, _user("HEAD " + paste(3_000) + " TAIL"))])
    (pc,) = render_pieces(small, Budgets(max_chars=120_000))
    assert pc.elided == 0 and pc.text.count("processed batch") == paste(3_000).count("processed batch")


# --------------------------------------------------------------------------- never pays twice


def test_a_span_refused_again_and_again_is_tried_a_bounded_number_of_times_then_parked(
        env: Env, capsys: Any) -> None:
    from datetime import UTC, datetime

    from memd import cli
    from memd.clock import ManualClock
    from memd.daemon import info
    from memd.jobs import checkin
    from memd.jobs.catchup import PARKED_WARNING

    p = env.project("-home-dev-stuck")
    env.memory(p, {"MEMORY.md": ""})
    sess = _session(p, 7, [_user("remember: we deploy on Fridays")])
    s = env.stub
    s.fallback = Reply(body=s.message(s.text("I can't help with that."), stop_reason="refusal"))
    clock = ManualClock(datetime.now(UTC))
    calls: list[int] = []
    outs = []
    # every two hours for four days: 3 tries at the catch-up's pace, then one a day, then parked
    for _ in range(4 * 12):
        before = len(bodies(env))
        outs.append(catchup_project(env.jc(clock=clock), p))
        calls.append(len(bodies(env)) - before)
        clock.advance(2 * 3600)
    assert sum(calls) == env.config.catchup.max_tries == 5, calls  # was 48: one charge every run
    assert [i for i, n in enumerate(calls) if n] == [0, 1, 2, 14, 26], calls  # a day after the last try
    assert outs[0].outcome == "failed" and outs[0].details["tries_noted"] == 1
    assert outs[-1].outcome == "skipped" and "parked after 5 tries" in outs[-1].message, outs[-1]
    (w,) = [w for w in env.state.warnings(p.name) if w.kind == PARKED_WARNING]
    assert "refus" in w.details["reason"] and "--retry" in w.details["reason"]
    lines = info.warning_lines(info.daemon_status(env.state_dir, env.config)["warnings"])
    assert any(PARKED_WARNING in x and "refus" in x for x in lines), lines  # what memd status prints
    report = checkin.build_report(env.state, now=clock.time(), since=clock.time() - 86_400).markdown
    assert PARKED_WARNING in report and "--retry" in report
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == 0  # nothing saved: the span is kept, not dropped

    # the user's retry: tried again at once, and a success clears the warning
    s.fallback = Reply(body=s.message(s.text("nothing worth saving")))
    cfg_file = env.state_dir.parent / "memd.toml"
    cfg_file.write_text(f'[paths]\nstate_dir = "{env.state_dir}"\n[model]\nbase_url = "{s.base_url}"\n'
                        "max_retries = 1\n")
    before = len(bodies(env))
    code = cli.main(["--config", str(cfg_file), "--claude-dir", str(env.claude), "catchup", "--retry", p.name])
    out = capsys.readouterr().out
    assert code == 0 and len(bodies(env)) == before + 1, out
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == sess.stat().st_size
    assert not [w for w in env.state.warnings(p.name) if w.kind == PARKED_WARNING]
    assert env.state.span_tries(p.name) == {}


# --------------------------------------------------------------------------- a dream with a token cap


def test_a_dream_stops_before_a_call_would_pass_its_input_token_cap(env: Env) -> None:
    from memd.jobs.dream import dream_project
    from tests.test_model_jobs import dup_folder, topic

    p = dup_folder(env)
    env.memory(p, {"reference_big.md": topic("Big", "a big reference", "fact " * 4_000, "reference")})
    s = env.stub
    s.fallback = Reply(body=s.message(s.memory("view", path="/memories/reference_big.md")))  # a greedy model
    cap = 40_000
    out = dream_project(env.jc(config=cfg_with(env, dream={"max_tool_turns": 25, "max_input_tokens": cap}),
                               force=True), p)
    used = sum(r.usage["input_tokens"] + r.usage["cache_read_input_tokens"]
               + r.usage["cache_creation_input_tokens"] for r in s.requests if r.usage)
    assert out.outcome == "partial" and "input tokens" in out.message, out  # was: 25 calls, no token cap
    assert used <= cap and len(bodies(env)) < 25, (used, len(bodies(env)))
    assert "40,000 input tokens" in bodies(env)[0]["system"][0]["text"]  # the prompt states the cap
    assert env.state.project(p.name).last_consolidation is None


# --------------------------------------------------------------------------- prices you can trust


def test_a_model_without_a_price_is_warned_about_and_its_runs_cost_unknown_never_zero(
        env: Env, capsys: Any, tmp_path: Path) -> None:
    from memd import cli
    from memd.jobs import checkin
    from memd.jobs.runner import run_job
    from memd.llm import client as llm

    cfg = cfg_with(env, model={"extract_model": "claude-future-9"})
    assert llm.unpriced_models(cfg) == ["claude-future-9"]
    assert llm.unpriced_models(env.config) == []  # the defaults are priced
    f = tmp_path / "c.toml"
    f.write_text('[model]\nextract_model = "claude-future-9"\n')
    code = cli.main(["config", "validate", str(f)])
    cap = capsys.readouterr()
    assert code == 0 and "claude-future-9" in cap.err and "no price" in cap.err, cap  # was: "valid", silent

    p = env.project("-home-dev-unpriced")
    env.memory(p, {"MEMORY.md": ""})
    _session(p, 9, [_user("we deploy on Fridays")])
    env.stub.fallback = Reply(body=env.stub.message(env.stub.text("nothing worth saving")))
    (out,) = run_job("catchup", env.jc(config=cfg), [p]).outcomes
    assert out.model_called and out.details.get("cost_unknown") is True, out.details
    (row,) = env.state.runs(job="catchup", project=p.name)
    assert row.cost_unknown, row  # was: $0, as if the run had been free
    report = checkin.build_report(env.state, now=row.started + 60, since=row.started - 60).markdown
    assert "cost unknown" in report, report
    # stored as unknown (NULL), not as 0.0 (issue 34: sums counted the run as free)
    assert row.cost_usd is None, row
    import sqlite3

    with sqlite3.connect(env.state_dir / "state.sqlite3") as c:  # the file as another reader sees it
        assert c.execute("SELECT cost_usd FROM runs WHERE id = ?", (row.id,)).fetchone()[0] is None
    # beside a priced run, every sum is a lower bound that names the unknown runs
    rid = env.state.start_run("dream", p.name, row.started + 1)
    env.state.finish_run(rid, outcome="changed", ended=row.started + 2, cost_usd=0.25, tokens_in=100)
    report = checkin.build_report(env.state, now=row.started + 60, since=row.started - 60).markdown
    assert "≥ $0.2500, 1 run(s) of unknown cost" in report, report  # was: "$0.2500 (and 1 run(s) whose ..."
    from memd.ui.charts import charts_view
    from memd.ui.views import overview

    (prow,) = overview([p], env.config, env.state_dir).projects
    assert (prow.week_cost, prow.week_unknown, prow.week_model_runs) == (0.25, 1, 2)
    last = prow.last["catchup"]
    assert last is not None and last.cost_usd is None
    chart = charts_view(p, env.config, env.state_dir, now=row.started + 60)
    assert chart.total_cost == 0.25 and chart.unknown_runs == 1


def test_a_reply_rejected_as_malformed_still_has_its_usage_counted(env: Env) -> None:
    from tests.test_llm_client import cfg as client_cfg

    s = env.stub
    s.script(Reply(raw=json.dumps({"type": "message", "role": "assistant", "content": "not a list",
                                   "model": "claude-haiku-4-5", "stop_reason": "end_turn",
                                   "usage": {"input_tokens": 1234, "output_tokens": 56}}).encode()))
    from memd.llm import client as llm

    c = llm.Client(client_cfg(s), api_key_value="test", sleep=lambda _: None)
    try:
        c.create(model="claude-haiku-4-5", messages=[{"role": "user", "content": "x"}])
    except llm.ModelError as e:
        assert "malformed" in e.reason
    else:
        raise AssertionError("a malformed reply was accepted")
    assert (c.usage.calls, c.usage.input_tokens, c.usage.output_tokens) == (1, 1234, 56)  # was: 0, 0, 0
    assert c.usage.cost_usd > 0


# --------------------------------------------------------------------------- caching that hits


def test_a_turn_of_more_than_ten_tool_calls_still_reads_the_previous_turns_cache(env: Env) -> None:
    from memd.jobs.dream import dream_project
    from tests.test_model_jobs import dup_folder

    p = dup_folder(env)
    s = env.stub
    views = [s.memory("view", path="/memories/feedback_tabs.md") for _ in range(12)]
    s.script(s.message(*views), s.message(*[s.memory("view", path="/memories/feedback_tabs.md")
                                           for _ in range(12)]), s.message(s.text("nothing to merge")))
    out = dream_project(env.jc(force=True), p)
    assert out.outcome in ("unchanged", "changed"), out
    u = [r.usage for r in s.requests if r.usage]
    assert len(u) == 3
    # the third call's prefix holds all of the second call's request: read, not written again
    assert u[2]["cache_read_input_tokens"] >= u[1]["cache_read_input_tokens"] + u[1]["cache_creation_input_tokens"], u
    for body in bodies(env):  # at most 4 breakpoints, never on an assistant turn
        marks = [b for m in body["messages"] for b in m["content"] if isinstance(b, dict) and "cache_control" in b]
        assert len(marks) + sum(1 for b in body["system"] if "cache_control" in b) <= 4
        assert all(m["role"] == "user" for m in body["messages"]
                   if any(isinstance(b, dict) and "cache_control" in b for b in m["content"]))


def test_the_last_call_a_conversation_may_make_writes_nothing_and_reads_the_rest(env: Env) -> None:
    p = env.project("-home-dev-lastcall")
    env.memory(p, {"MEMORY.md": ""})
    _session(p, 11, [_user("we deploy on Fridays")])
    s = env.stub
    s.script(s.message(s.memory("view", path="/memories/MEMORY.md")), s.message(s.text("nothing worth saving")))
    catchup_project(env.jc(config=cfg_with(env, catchup={"max_tool_turns": 2})), p)
    first, last = bodies(env)
    assert any("cache_control" in b for m in first["messages"] for b in m["content"])
    # no read can follow the conversation's last allowed call: a write there costs 1.25x for nothing, so
    # its one moving breakpoint is where the first call wrote (the first user message): read, not written
    marked = [m for m in last["messages"] if any("cache_control" in b for b in m["content"])]
    assert marked == [last["messages"][0]] and len(last["messages"]) == 3
    assert "cache_control" not in last["messages"][-1]["content"][-1]


def test_the_migration_makes_an_unknown_cost_null_and_keeps_every_row(tmp_path: Path) -> None:
    """Rows written before: an unpriced run's cost was 0.0 with ``cost_unknown``; after the migration it is
    NULL, a partly priced run keeps its priced part, the others are as they were, ids and all."""
    import sqlite3

    from memd import state as st_mod
    from memd.state import SCHEMA_VERSION, StateStore

    mine = next(i for i, m in enumerate(st_mod.MIGRATIONS) if "CREATE TABLE runs_v10" in m)
    c = sqlite3.connect(tmp_path / st_mod.FILENAME, isolation_level=None)
    for i in range(mine):
        for stmt in st_mod._statements(st_mod.MIGRATIONS[i]):
            c.execute(stmt)
    c.execute(f"PRAGMA user_version = {mine}")
    rows = [("catchup", 0.0, 1, 500), ("dream", 0.125, 1, 900), ("dream", 0.5, 0, 1000), ("catchup", 0.0, 0, 0)]
    for job, cost, unknown, tokens in rows:
        c.execute("INSERT INTO runs (job, project, started, ended, outcome, cost_usd, cost_unknown, tokens_total, "
                  "history_run) VALUES (?, 'p', 100, 160, 'changed', ?, ?, ?, 'r')", (job, cost, unknown, tokens))
    c.execute("DELETE FROM runs WHERE id = 4")  # AUTOINCREMENT: 4 is never given again
    c.close()
    with StateStore.open(tmp_path) as st:
        assert st.schema_version == SCHEMA_VERSION
        got = sorted(st.runs(project="p"), key=lambda r: r.id)
        assert [(r.id, r.cost_usd, r.cost_unknown, r.tokens_total, r.history_run) for r in got] == [
            (1, None, True, 500, "r"), (2, 0.125, True, 900, "r"), (3, 0.5, False, 1000, "r")]
        assert st.start_run("dream", "p", 200.0) == 5
        names = {r[0] for r in st._conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'runs'")}
        assert {"runs", "runs_job_started", "runs_project_started"} <= names and "runs_v10" not in names


def test_mem040_proposes_the_day_of_the_session_a_catchup_wrote_from(env: Env) -> None:
    """Hole: a relative date a catch-up wrote ("yesterday", from a session of 2026-03-05 read days later)
    got MEM040's hint with the file's date (the catch-up's day). The session's day is known: the hint
    proposes it while the file is as the catch-up left it, and the file's date again once it changes."""
    import os
    import time
    from datetime import datetime

    from memd.inspect import check_project

    p = env.project("-home-dev-dates")
    env.memory(p, {"MEMORY.md": ""})
    _session(p, 7, [_user("the deploy moved to tomorrow", ts="2026-03-05T10:00:00Z")])
    s = env.stub
    s.script(s.message(s.memory("create", path="/memories/project_deploy.md",
                                file_text="---\nname: Deploy\ndescription: when deploys happen\ntype: project\n"
                                          "---\nThe deploy moved to tomorrow.\n")),
             s.message(s.text("Saved the deploy date.")))
    out = catchup_project(env.jc(), p)
    assert out.outcome == "changed", out
    written = p.memory_dir / "project_deploy.md"
    session_day = datetime.fromisoformat("2026-03-05T10:00:00+00:00").astimezone().strftime("%Y-%m-%d")
    file_day = time.strftime("%Y-%m-%d", time.localtime(written.stat().st_mtime))
    assert session_day != file_day

    def hint() -> str:
        found = [f for f in check_project(p, env.config.budget, cache_dir=env.state_dir).findings
                 if f.code == "MEM040" and f.path == "project_deploy.md"]
        assert len(found) == 1, found
        return found[0].message

    assert f"write e.g. {session_day}, the day of the session a catch-up wrote this from" in hint()  # was file_day
    from memd.inspect import check_projects  # `memd check --no-cache`: no cache, the state folder still read

    (nocache,) = check_projects([p], env.config, state_dir=env.state_dir).results
    assert any(f.code == "MEM040" and session_day in f.message for f in nocache.findings)
    assert not list(p.memory_dir.glob("said-on*"))  # memd's record is in its state folder, not in memory
    # the user edits the file: the catch-up's words are no longer all there is; the file's date again
    written.write_text(written.read_text().replace("The deploy", "Our deploy"))
    later = time.time() + 86400 * 3
    os.utime(written, (later, later))
    assert f"write e.g. {time.strftime('%Y-%m-%d', time.localtime(later))}, the day the file last changed" in hint()
