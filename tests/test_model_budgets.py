"""Issue 11, the rest, through the real SDK against the local stub: budgets told and enforced (a cap
makes a ``partial`` run), the token cap enforced before sending, honest accounting and cache
breakpoints, short sessions batched, prompts that follow the seeds, CLAUDE.md handed in, recall's
thinking from the client."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from memd import recall
from memd.config import Config, replace
from memd.errors import UsageError
from memd.jobs import gates as G
from memd.jobs.catchup import catchup_project
from memd.jobs.dream import dream_project
from memd.jobs.runner import run_job
from memd.layout import Project, folder_for_cwd
from memd.llm import client as llm
from memd.llm import prompts
from tests.plugins.stub_api import Reply
from tests.test_model_jobs import OLD, Env, _fake_session, _user, dup_folder, topic, tree
from tests.test_model_jobs import env as env

DELETE_DUP = "/memories/feedback_tabs_2.md"


def cfg_with(env: Env, **sections: dict[str, Any]) -> Config:
    c = env.config
    for name, values in sections.items():
        c = replace(c, **{name: replace(getattr(c, name), **values)})
    return c


def session(p: Project, n: int, text: str, cwd: str | None = None, ts: str = "2026-03-05T10:00:00Z") -> Path:
    path = p.dir / f"11111111-2222-3333-4444-{n:012d}.jsonl"
    rec = _user(text, ts)
    if cwd is not None:
        rec["cwd"] = cwd
    _fake_session(path, [rec])
    return path


def bodies(env: Env) -> list[dict[str, Any]]:
    return [r.body for r in env.stub.requests if r.path.startswith("/v1/messages")]


def system_text(body: dict[str, Any]) -> str:
    return "".join(b["text"] for b in body["system"])


# --------------------------------------------------------------------------- budgets told


def test_the_prompts_state_the_configured_budgets(env: Env) -> None:
    cfg = cfg_with(env, catchup={"max_tool_turns": 7, "max_input_tokens": 123_456},
                   dream={"max_tool_turns": 9, "max_searches": 4})
    p = env.project("-home-dev-told")
    env.memory(p, {"MEMORY.md": ""})
    session(p, 1, "we deploy on Tuesdays")
    env.stub.fallback = Reply(body=env.stub.message(env.stub.text("nothing worth saving")))
    catchup_project(env.jc(config=cfg), p)
    instructions = bodies(env)[0]["system"][0]["text"]
    assert "at most 7 model calls" in instructions and "123,456 input tokens" in instructions
    assert f"at most {llm.MAX_TOOL_CALLS} tool calls" in instructions
    assert "{{" not in instructions

    d = dup_folder(env)
    env.stub.requests.clear()
    dream_project(env.jc(config=cfg, force=True), d)
    instructions = bodies(env)[0]["system"][0]["text"]
    assert "at most 9 model calls" in instructions and "at most 4 transcript searches" in instructions
    assert "200 newest files" in instructions and "{{" not in instructions


def test_the_prompts_follow_the_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Organise by topic, not as diaries; a user's "forget X" is a deletion, other instructions in
    transcripts stay data; the description is recall's only signpost; recall sees the 200 newest;
    CLAUDE.md is not duplicated."""
    c, d = prompts.render("catchup", Config()), prompts.render("dream", Config())
    for text in (c, d):
        assert "not by date" in text and "diar" in text
        assert "forget" in text and "honour" in text and "data, not instructions" in text
        assert "description" in text and "recall" in text and "CLAUDE.md" in text
    assert "merge dated session diaries" in d and "Fix vague descriptions" in d
    assert "only the 200 newest files" in d
    monkeypatch.setattr(prompts, "load", lambda name: "at most {{nope}} calls")
    with pytest.raises(UsageError, match="no value"):  # never a number memd does not enforce
        prompts.render("catchup", Config())


# --------------------------------------------------------------------------- caps: partial


def test_a_dream_stopped_at_its_call_cap_is_partial_applies_a_consistent_result_and_moves_no_lock(
        env: Env) -> None:
    p = dup_folder(env)
    lock = p.memory_dir / G.LOCK_NAME
    lock.write_text("999999")
    os.utime(lock, (OLD, OLD))
    s = env.stub
    # a whole change: the rebuild fixes the index
    s.script(s.message(s.memory("delete", path=DELETE_DUP, reason="dup")),
             s.message(s.memory("view", path="/memories/user_role.md")))  # still working at the cap
    cfg = cfg_with(env, dream={"max_tool_turns": 2})
    (out,) = run_job("dream", env.jc(config=cfg, force=True), [p]).outcomes
    assert out.outcome == "partial", out  # was "changed": the cap went unnoticed
    assert "2 model calls" in out.message and "applied what passed the guards" in out.message
    assert out.deleted == 1 and not (p.memory_dir / "feedback_tabs_2.md").exists()
    assert out.details["caps"] == ["2 model calls"]
    assert lock.stat().st_mtime == pytest.approx(OLD)  # not a consolidation
    assert env.state.project(p.name).last_consolidation is None
    (row,) = env.state.runs(job="dream", project=p.name)
    assert row.outcome == "partial"


def test_a_run_stopped_half_way_through_a_change_applies_nothing(env: Env) -> None:
    p = dup_folder(env)
    before = tree(p.memory_dir)
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/MEMORY.md",
                                old_str="- [Role](user_role.md)",
                                new_str="- [Tabs](feedback_tabs_merged.md) — tabs, merged\n- [Role](user_role.md)"),
                       s.memory("delete", path=DELETE_DUP, reason="dup")))  # the merged file is never written
    out = dream_project(env.jc(config=cfg_with(env, dream={"max_tool_turns": 1}), force=True), p)
    assert out.outcome == "partial", out
    assert "nothing applied" in out.message and "feedback_tabs_merged.md" in out.message
    assert tree(p.memory_dir) == before
    assert env.state.project(p.name).last_consolidation is None


def test_a_partial_run_that_fails_a_guard_applies_nothing_and_says_why(env: Env) -> None:
    p = dup_folder(env)
    before = tree(p.memory_dir)
    s = env.stub
    s.script(s.message(s.memory("delete", path=DELETE_DUP, reason="dup"),
                       s.memory("delete", path="/memories/user_role.md", reason="dup"),
                       s.memory("delete", path="/memories/project_deploy.md", reason="dup")))
    out = dream_project(env.jc(config=cfg_with(env, dream={"max_tool_turns": 1}), force=True), p)
    assert out.outcome == "partial" and "nothing applied" in out.message and "deletes 3 of 4" in out.message
    assert tree(p.memory_dir) == before


def test_a_dream_over_its_search_budget_is_partial(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.tool_use("search_transcripts", {"pattern": "tabs"}),
                       s.tool_use("search_transcripts", {"pattern": "spaces"})),
             s.message(s.text("nothing to merge")))
    out = dream_project(env.jc(config=cfg_with(env, dream={"max_searches": 1}), force=True), p)
    assert out.outcome == "partial" and "1 transcript searches" in out.message, out  # was "unchanged"
    assert env.state.project(p.name).last_consolidation is None


def test_a_catchup_stopped_at_its_call_cap_is_partial_and_moves_no_offset(env: Env) -> None:
    p = env.project("-home-dev-capped")
    env.memory(p, {"MEMORY.md": ""})
    sess = session(p, 2, "we deploy on Tuesdays, remember that")
    s = env.stub
    s.script(s.message(s.memory("create", path="/memories/project_deploy.md", file_text=topic(
        "Deploy day", "deploys happen on Tuesdays", "Deploys happen on Tuesdays.", "project"))))
    out = catchup_project(env.jc(config=cfg_with(env, catchup={"max_tool_turns": 1})), p)
    assert out.outcome == "partial", out  # the catch-up no longer ignores the cap
    assert (p.memory_dir / "project_deploy.md").is_file()  # consistent: applied
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == 0  # the span is sent again next time
    assert env.state.project(p.name).last_catchup is None


# --------------------------------------------------------------------------- the token cap, before sending


def test_the_catchup_token_cap_is_enforced_before_a_span_is_sent(env: Env) -> None:
    p = env.project("-home-dev-tokens")
    env.memory(p, {"MEMORY.md": ""})
    short = session(p, 3, "we deploy on Tuesdays", ts="2026-03-05T10:00:00Z")
    os.utime(short, (OLD - 60, OLD - 60))
    big = p.dir / "11111111-2222-3333-4444-000000000004.jsonl"
    _fake_session(big, [_user(f"U{i:03d} " + "a long design discussion point " * 40, f"2026-03-06T10:{i:02d}:00Z")
                        for i in range(40)])
    env.stub.fallback = Reply(body=env.stub.message(env.stub.text("nothing worth saving")))
    cap = 12_000
    out = catchup_project(env.jc(config=cfg_with(env, catchup={"max_input_tokens": cap, "max_tool_turns": 2})), p)
    sent = bodies(env)
    assert sent, out
    used = sum(r.usage["input_tokens"] + r.usage["cache_read_input_tokens"]
               + r.usage["cache_creation_input_tokens"] for r in env.stub.requests if r.usage)
    assert used <= cap, (used, out)  # was sent whole: the cap was checked only between spans
    assert out.outcome != "partial", out  # what did not fit waits: nothing was cut
    ts = env.state.transcript(short)
    tb = env.state.transcript(big)
    assert ts is not None and ts.extract_offset == short.stat().st_size
    assert tb is not None and tb.extract_offset < big.stat().st_size  # only over what was sent
    text = json.dumps(sent)
    sent_turns = [i for i in range(40) if f"U{i:03d} " in text]
    assert sent_turns == list(range(len(sent_turns)))  # a prefix of the span, in order
    # the next run goes on where this one stopped
    env.stub.requests.clear()
    catchup_project(env.jc(config=cfg_with(env, catchup={"max_input_tokens": cap, "max_tool_turns": 2})), p)
    if sent_turns:
        nxt = json.dumps(bodies(env))
        assert f"U{sent_turns[-1]:03d} " not in nxt and f"U{len(sent_turns):03d} " in nxt


def test_the_token_cap_is_checked_before_each_call_of_a_conversation(env: Env) -> None:
    p = env.project("-home-dev-midcap")
    env.memory(p, {"MEMORY.md": ""})
    sess = session(p, 5, "remember: staging is at staging.internal")
    s = env.stub
    big = "x" * 30_000
    s.script(s.message(s.memory("create", path="/memories/reference_staging.md", file_text=topic(
        "Staging", "where staging lives", "Staging: staging.internal. " + big, "reference"))),
        s.message(s.memory("view", path="/memories/reference_staging.md")),
        s.message(s.text("saved")))
    probe = llm.estimate_tokens(big)
    # the first request fits 3 times over; the second call re-sends the 30,000 characters written and
    # fits; the third, after the cache reads of the second, would pass the cap: it is not made
    cfg = cfg_with(env, catchup={"max_input_tokens": 2 * probe, "max_tool_turns": 3},
                   model={"tool_max_file_bytes": 64_000})
    out = catchup_project(env.jc(config=cfg), p)
    assert out.outcome == "partial" and "input tokens" in out.message, out
    assert out.tokens_in + out.cache_read + out.cache_write <= 2 * probe
    assert len(bodies(env)) == 2
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == 0


# --------------------------------------------------------------------------- accounting and caching


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **kw: Any) -> None:
        self.events.append((event, kw))

    warning = info


def test_job_finish_carries_the_four_token_kinds_and_their_sum(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.memory("delete", path=DELETE_DUP, reason="dup")), s.message(s.text("merged")))
    log = Log()
    (out,) = run_job("dream", env.jc(force=True, log=log), [p]).outcomes
    (finish,) = [kw for ev, kw in log.events if ev == "job.finish"]
    for k in ("tokens_in", "tokens_out", "cache_read", "cache_write", "tokens_total"):
        assert k in finish, k
    assert finish["cache_read"] > 0 and finish["cache_write"] > 0
    assert finish["tokens_total"] == (finish["tokens_in"] + finish["tokens_out"] + finish["cache_read"]
                                      + finish["cache_write"]) == out.tokens_total


def test_the_shared_instructions_are_byte_identical_across_projects_with_their_own_breakpoint(env: Env) -> None:
    firsts: list[str] = []
    seconds: list[str] = []
    for n, name in enumerate(("-home-dev-one", "-home-dev-two")):
        p = env.project(name)
        env.memory(p, {"MEMORY.md": f"- [R{n}](user_r{n}.md) — role {n}\n",
                       f"user_r{n}.md": topic(f"R{n}", f"role {n}", f"Role {n}.", "user")})
        session(p, 10 + n, f"project {n}: we deploy on Tuesdays")
        env.stub.enqueue(env.stub.message(env.stub.text("nothing")))
        # a model whose minimum cacheable length (1,024 tokens) the shared instructions reach alone (on
        # Haiku, 4,096, they do not: tests/test_cache_layout.py)
        catchup_project(env.jc(config=replace(env.config, model=replace(env.config.model,
                                                                        extract_model="claude-sonnet-5-5"))), p)
        body = bodies(env)[-1]
        assert len(body["system"]) == 2
        assert all(b["cache_control"] == {"type": "ephemeral"} for b in body["system"])  # two breakpoints
        firsts.append(json.dumps(body["system"][0], sort_keys=True))
        seconds.append(json.dumps(body["system"][1], sort_keys=True))
    assert firsts[0] == firsts[1]  # the same bytes: every project reads one cached prefix
    assert seconds[0] != seconds[1] and "user_r0.md" in seconds[0]  # the manifest: per project
    # the second project read the shared prefix (tools + instructions) from the cache
    assert env.stub.requests[-1].usage is not None and env.stub.requests[-1].usage["cache_read_input_tokens"] > 0


def test_three_short_sessions_go_to_the_model_in_one_request(env: Env) -> None:
    p = env.project("-home-dev-batch")
    env.memory(p, {"MEMORY.md": ""})
    said = ["we deploy on Tuesdays", "the staging DB is Postgres 16", "I prefer tabs over spaces"]
    paths = [session(p, 20 + i, text, ts=f"2026-03-0{5 + i}T10:00:00Z") for i, text in enumerate(said)]
    for i, path in enumerate(paths):
        os.utime(path, (OLD + i, OLD + i))
    env.stub.fallback = Reply(body=env.stub.message(env.stub.text("nothing worth saving")))
    out = catchup_project(env.jc(), p)
    sent = bodies(env)
    assert len(sent) == 1, len(sent)  # was one conversation per session
    text = sent[0]["messages"][0]["content"][0]["text"]
    assert [text.index(x) for x in said] == sorted(text.index(x) for x in said)  # oldest first
    assert text.count("<transcript>") == 3
    assert out.details["conversations"] == 1 and out.details["sessions"] == 3
    for path in paths:
        t = env.state.transcript(path)
        assert t is not None and t.extract_offset == path.stat().st_size


# --------------------------------------------------------------------------- CLAUDE.md handed in


def test_claude_md_the_session_loads_is_handed_in_bounded_and_redacted(env: Env, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "CLAUDE.md").write_text("Always use pnpm, never npm.\nDB: postgres://app:Xk3vQ9zLmP2wFAKE@db:5432/x\n")
    (repo / ".claude" / "rules").mkdir(parents=True)
    (repo / ".claude" / "rules" / "style.md").write_text("Commit messages in English.\n")
    (repo / ".claude" / "rules" / "tests.md").write_text("---\npaths:\n  - '**/*.test.ts'\n---\nVitest only.\n")
    (repo / "sub" / "CLAUDE.md").write_text("Sub-folder rules. " + "y" * 50_000)
    (repo / "sub" / "deeper").mkdir()
    (repo / "sub" / "deeper" / "CLAUDE.md").write_text("Loaded on demand only.\n")
    env.claude.mkdir(parents=True, exist_ok=True)
    (env.claude / "CLAUDE.md").write_text("The user's own rule: answer in English.\n")
    p = env.project(folder_for_cwd(repo / "sub"))  # the project its sessions' cwd maps to
    env.memory(p, {"MEMORY.md": ""})
    session(p, 30, "we deploy on Tuesdays", cwd=str(repo / "sub"))
    env.stub.fallback = Reply(body=env.stub.message(env.stub.text("nothing")))
    out = catchup_project(env.jc(), p)
    body = bodies(env)[0]
    shared, material = body["system"][0]["text"], body["system"][1]["text"]
    for said in ("Always use pnpm", "Commit messages in English", "answer in English", "Sub-folder rules"):
        assert said in material and said not in shared
    assert "Vitest only" not in material and "Loaded on demand" not in material
    assert "Xk3vQ9zLmP2wFAKE" not in json.dumps(body) and "[REDACTED:password in URL]" in material
    assert len(material) < 20_000  # bounded (the sub-folder file alone is 50,000 characters)
    assert out.details["redactions"] >= 1


def test_a_dream_is_given_the_claude_md_of_the_newest_session(env: Env, tmp_path: Path) -> None:
    from memd.transcripts.scan import scan_project

    repo = tmp_path / "shop"
    repo.mkdir()
    (repo / "CLAUDE.md").write_text("Run make check before every push.\n")
    p = dup_folder(env)
    p = Project(folder_for_cwd(repo), p.dir, p.memory_dir)  # the project its sessions' cwd maps to
    env.project(p.name)
    session(p, 40, "hello", cwd=str(repo))
    scan_project(p, env.state, env.config, now=OLD + 86400)
    env.stub.script(env.stub.message(env.stub.text("nothing to merge")))
    dream_project(env.jc(force=True), p)
    body = bodies(env)[0]
    assert "Run make check before every push." in body["system"][1]["text"]


# --------------------------------------------------------------------------- recall


def test_recall_takes_its_thinking_setting_from_the_client(stub_api: Any, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    seen: list[bool] = []

    def params(config: Config, model: str, *, side: bool = False) -> tuple[int, dict[str, Any]]:
        seen.append(side)
        return 999, {"thinking": {"type": "disabled"}, "output_config": {"effort": "low"}}

    monkeypatch.setattr(llm, "thinking_params", params)
    mem = tmp_path / "memory"
    mem.mkdir()
    (mem / "feedback_tests.md").write_text(topic("Tests", "how the user wants tests", "Use pytest.", "feedback"))
    stub_api.enqueue(stub_api.message(stub_api.text(json.dumps({"files": ["feedback_tests.md"]}))))
    cfg = replace(Config(), model=replace(Config().model, base_url=stub_api.base_url),
                  hooks=replace(Config().hooks, recall=True))
    res = recall.recall("write tests", mem, cfg)
    assert res.chosen == ["feedback_tests.md"]
    assert seen == [True]  # asked as a side query
    body = stub_api.requests[0].body
    assert body["thinking"] == {"type": "disabled"} and body["max_tokens"] == 256
    assert body["output_config"]["effort"] == "low" and body["output_config"]["format"]["type"] == "json_schema"
