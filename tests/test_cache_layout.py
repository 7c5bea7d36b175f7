"""Prompt caching only where a read can follow (issue 24), proved with the stub's cache simulation
(breakpoints, the 20-block lookback, the minimum cacheable length): a one-call run writes nothing at
1.25x; a conversation's last allowed call reads the conversation so far; a later conversation of the
run reads the shared system prefix; no breakpoint where the prefix is under the model's minimum."""

from __future__ import annotations

from typing import Any

from memd.config import replace
from memd.jobs import modelrun as mr
from memd.jobs.catchup import catchup_project
from memd.layout import Project
from memd.llm import client as llm
from tests import test_model_jobs
from tests.test_model_jobs import Env, _fake_session, _user, topic

env = test_model_jobs.env  # the model-job tests' fixture, shared


def _project(env: Env, sessions: int, words: int = 400) -> Project:
    p = env.project("-home-dev-cache")
    env.memory(p, {"MEMORY.md": "- [Tabs](feedback_tabs.md) — indent with tabs\n",
                   "feedback_tabs.md": topic("Tabs", "indent with tabs", "Use tabs.")})
    for n in range(sessions):  # long enough (over 8,000 characters) to be a conversation of its own
        text = " ".join(f"we talked about module{n}_{i} and its deploy" for i in range(words))
        _fake_session(p.dir / f"{n:08d}-2222-3333-4444-555555555555.jsonl",
                      [_user(f"session {n}: I prefer tabs. " + text)])
    return p


def _marks(body: Any) -> int:
    blocks = list(body.get("system") or []) + [c for m in body["messages"] for c in m["content"]
                                                if isinstance(m["content"], list)]
    return sum(1 for b in blocks if isinstance(b, dict) and b.get("cache_control"))


def _cfg(env: Env, turns: int) -> Any:
    return replace(env.config, catchup=replace(env.config.catchup, max_tool_turns=turns))


def test_a_one_call_run_pays_no_cache_write(env: Env) -> None:
    p = _project(env, 1)
    env.stub.script(env.stub.message(env.stub.text("nothing worth saving")))
    out = catchup_project(env.jc(config=_cfg(env, 1)), p)
    assert out.outcome == "unchanged", out
    (req,) = env.stub.requests
    assert req.usage is not None and req.usage["cache_creation_input_tokens"] == 0
    assert _marks(req.body) == 0 and out.cache_write == 0


def test_the_last_allowed_call_reads_the_conversation_and_writes_nothing(env: Env) -> None:
    p = _project(env, 1)
    s = env.stub
    s.script(s.message(s.memory("view", path="/memories/feedback_tabs.md")), s.message(s.text("already saved")))
    catchup_project(env.jc(config=_cfg(env, 2)), p)
    first, last = env.stub.requests
    assert first.usage is not None and last.usage is not None
    cached = first.usage["cache_creation_input_tokens"] + first.usage["cache_read_input_tokens"]
    assert cached > 0
    assert last.usage["cache_read_input_tokens"] >= cached  # the whole first request, from the cache
    assert last.usage["cache_creation_input_tokens"] == 0  # nothing written: no read can follow


def test_a_later_conversation_of_the_run_reads_the_shared_prefix(env: Env) -> None:
    p = _project(env, 2)
    s = env.stub
    s.script(s.message(s.text("nothing")), s.message(s.text("nothing either")))
    cfg = _cfg(env, 1)  # a model whose minimum (1,024) the instructions and this manifest reach
    catchup_project(env.jc(config=replace(cfg, model=replace(cfg.model, extract_model="claude-sonnet-5-5"))), p)
    first, second = env.stub.requests
    assert first.usage is not None and second.usage is not None
    assert first.usage["cache_creation_input_tokens"] > 0  # a later conversation follows: written
    assert second.usage["cache_read_input_tokens"] > 0  # instructions + manifest, read
    assert second.usage["cache_creation_input_tokens"] == 0  # the run's last call: nothing more written


def test_no_breakpoint_under_the_models_minimum() -> None:
    tools: list[dict[str, Any]] = [{"type": "memory_20250818", "name": "memory"}]
    system = llm.cached_system("i" * 12_000, "m" * 40_000)  # about 3,000 and 10,000 tokens
    haiku = mr.system_marks(system, tools, "claude-haiku-5-5", read_or_reused=True)
    assert ["cache_control" in b for b in haiku] == [False, True]  # instructions alone: under 4,096
    sonnet = mr.system_marks(system, tools, "claude-sonnet-5-5", read_or_reused=True)
    assert ["cache_control" in b for b in sonnet] == [True, True]
    assert not any("cache_control" in b for b in mr.system_marks(system, tools, "claude-sonnet-5-5",
                                                                  read_or_reused=False))
    assert llm.min_cache_tokens("claude-haiku-4-5-20251001") == 4096
    assert llm.min_cache_tokens("claude-sonnet-5-5") == 1024
