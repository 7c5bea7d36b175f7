"""The model client against the local stub, through the real SDK."""

from __future__ import annotations

from pathlib import Path

import pytest

from memd.config import Config, ModelConfig, replace
from memd.llm import client as llm
from tests.plugins.stub_api import StubAPI


def cfg(stub: StubAPI, **model: object) -> Config:
    return Config(model=replace(ModelConfig(), base_url=stub.base_url, **model))


def test_no_key_means_model_work_is_off(claude_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert llm.model_off_reason(Config()) == llm.MODEL_OFF
    with pytest.raises(llm.ModelOff, match="model work is off"):
        llm.Client(Config())


def test_key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    f = tmp_path / "env"
    f.write_text("# memd\nANTHROPIC_API_KEY='sk-test'\n")
    c = Config(model=replace(ModelConfig(), api_key_file=str(f)))
    assert llm.api_key(c) == "sk-test"
    assert llm.model_off_reason(c) is None
    missing = Config(model=replace(ModelConfig(), api_key_file=str(tmp_path / "nope")))
    assert "key file" in (llm.model_off_reason(missing) or "")


def test_call_usage_cost_and_beta_endpoint(stub_api: StubAPI) -> None:
    stub_api.enqueue(stub_api.message(stub_api.text("hi"), usage={
        "input_tokens": 1000, "output_tokens": 100, "cache_creation_input_tokens": 2000,
        "cache_read_input_tokens": 10000}))
    c = llm.Client(cfg(stub_api), api_key_value="test")
    msg = c.create(model="claude-haiku-4-5-20251001", system=llm.cached_system("rules", "manifest"),
                   messages=[{"role": "user", "content": "x"}], betas=[llm.MEMORY_BETA])
    assert llm.text_of(msg) == "hi"
    req = stub_api.requests[0]
    assert llm.MEMORY_BETA in req.headers["anthropic-beta"]
    assert req.body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    u = c.usage
    assert (u.input_tokens, u.output_tokens, u.cache_write, u.cache_read) == (1000, 100, 2000, 10000)
    # haiku prices by prefix: 1000*1 + 100*5 + 2000*1.25 + 10000*0.1 = 5000 per million
    assert u.cost_usd == pytest.approx(0.005)


def test_plain_endpoint(stub_api: StubAPI) -> None:
    stub_api.enqueue(stub_api.message(stub_api.text("ok")))
    c = llm.Client(cfg(stub_api), api_key_value="test")
    c.create(model="claude-haiku-4-5", messages=[{"role": "user", "content": "x"}], beta=False)
    assert "anthropic-beta" not in stub_api.requests[0].headers
    assert c.usage.calls == 1 and c.usage.input_tokens > 0


@pytest.mark.parametrize("status", [429, 529, 500])
def test_retries_then_succeeds(stub_api: StubAPI, status: int) -> None:
    stub_api.script(stub_api.error(status, retry_after=0), stub_api.message(stub_api.text("ok")))
    slept: list[float] = []
    c = llm.Client(cfg(stub_api), api_key_value="test", sleep=slept.append)
    assert llm.text_of(c.create(model="m", messages=[{"role": "user", "content": "x"}])) == "ok"
    assert len(stub_api.requests) == 2 and slept == [0.0]


def test_retries_exhausted(stub_api: StubAPI) -> None:
    stub_api.script(*[stub_api.error(529, retry_after=0) for _ in range(3)])
    c = llm.Client(cfg(stub_api, max_retries=2), api_key_value="test", sleep=lambda s: None)
    with pytest.raises(llm.ModelError, match="HTTP 529 overloaded_error") as ei:
        c.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert ei.value.status == 529 and len(stub_api.requests) == 3


def test_retry_after_past_deadline_fails_at_once(stub_api: StubAPI) -> None:
    stub_api.script(stub_api.error(429, retry_after=3600))
    slept: list[float] = []
    c = llm.Client(cfg(stub_api), api_key_value="test", deadline_s=30, sleep=slept.append)
    with pytest.raises(llm.ModelError, match="run deadline"):
        c.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert slept == [] and len(stub_api.requests) == 1


def test_bad_request_is_not_retried(stub_api: StubAPI) -> None:
    stub_api.script(stub_api.error(400, "bad"))
    c = llm.Client(cfg(stub_api), api_key_value="test", sleep=lambda s: None)
    with pytest.raises(llm.ModelError, match="HTTP 400"):
        c.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert len(stub_api.requests) == 1


def test_timeout(stub_api: StubAPI) -> None:
    from tests.plugins.stub_api import Reply

    stub_api.script(Reply(body=stub_api.message(stub_api.text("late")), delay=3))
    c = llm.Client(cfg(stub_api, max_retries=0, timeout_s=1.0), api_key_value="test")
    with pytest.raises(llm.ModelError, match="timed out"):
        c.create(model="m", messages=[{"role": "user", "content": "x"}])


@pytest.mark.parametrize("raw", [b"{not json", b'{"type": "message", "content": "nope"}',
                                 b'{"type": "message", "content": [{"type": "tool_use"}]}'])
def test_malformed(stub_api: StubAPI, raw: bytes) -> None:
    from tests.plugins.stub_api import Reply

    stub_api.script(Reply(raw=raw))
    c = llm.Client(cfg(stub_api), api_key_value="test", sleep=lambda s: None)
    with pytest.raises(llm.ModelError, match="malformed"):
        c.create(model="m", messages=[{"role": "user", "content": "x"}])


def test_stub_simulates_cache(stub_api: StubAPI) -> None:
    big = "x" * 20_000
    for _ in range(2):
        stub_api.enqueue(stub_api.message(stub_api.text("ok")))
    c = llm.Client(cfg(stub_api), api_key_value="test")
    for _ in range(2):
        c.create(model="claude-haiku-4-5", system=llm.cached_system(big),
                 messages=[{"role": "user", "content": "q"}])
    assert c.usage.cache_write > 4000 and c.usage.cache_read == c.usage.cache_write


def test_unscripted_call_fails_loudly(stub_api: StubAPI) -> None:
    c = llm.Client(cfg(stub_api), api_key_value="test", sleep=lambda s: None)
    with pytest.raises(llm.ModelError, match="HTTP 500"):
        c.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert len(stub_api.requests) == 1


def test_endpoint_from_anthropic_base_url(stub_api: StubAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub_api.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    stub_api.enqueue(stub_api.message(stub_api.text("ok")))
    c = llm.Client(Config())
    assert llm.text_of(c.create(model="m", messages=[{"role": "user", "content": "x"}])) == "ok"
    assert stub_api.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_stub_serves_the_beta_query_endpoint(stub_api: StubAPI) -> None:
    import json
    import urllib.request

    stub_api.enqueue(stub_api.message(stub_api.text("beta ok")))
    req = urllib.request.Request(f"{stub_api.base_url}/v1/messages?beta=true", method="POST",
                                 data=json.dumps({"model": "m", "max_tokens": 5, "messages": []}).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        body = json.loads(r.read())
    assert body["content"][0]["text"] == "beta ok" and stub_api.requests[0].beta
