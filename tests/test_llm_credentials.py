"""Model credentials as Claude Code's: one function picks the source (memd.llm.client.credential_source),
the client uses it through the real SDK against the loopback stub, and status names it, never the secret."""

from __future__ import annotations

import json
import logging
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memd import cli
from memd.config import Config, ModelConfig, replace
from memd.llm import client as llm
from tests.plugins.stub_api import StubAPI

HELPER_KEY = "sk-ant-fake.helper.0123456789"
TOKEN = "tok-bearer-0123456789secret"
KEY = "sk-ant-fake.env.0123456789"


@pytest.fixture(autouse=True)
def _fresh_helper_cache() -> Iterator[None]:
    llm._helper_cache.clear()
    yield
    llm._helper_cache.clear()


def helper(tmp_path: Path, body: str) -> str:
    """A helper command (a Python script, run through the shell as Claude Code runs it)."""
    script = tmp_path / f"helper{len(list(tmp_path.glob('helper*')))}.py"
    script.write_text(body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def printing(tmp_path: Path, key: str = HELPER_KEY) -> str:
    return helper(tmp_path, f"print({key!r})\n")


def src(env: dict[str, str], settings: dict[str, Any] | None = None, config: Config | None = None,
        **kw: float) -> llm.Source:
    return llm.credential_source(config or Config(), env, settings or {}, **kw)


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm, "_missing", lambda module: False)  # as if boto3 and google-auth were installed
    monkeypatch.setattr(llm, "_aws_credentials", lambda: True)  # ... and AWS credentials configured
    h = {"apiKeyHelper": printing(tmp_path)}
    bedrock = {"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "eu-west-1"}
    vertex = {"CLAUDE_CODE_USE_VERTEX": "true", "CLOUD_ML_REGION": "us-east5", "ANTHROPIC_VERTEX_PROJECT_ID": "p1"}
    every = {**bedrock, **vertex, "ANTHROPIC_AUTH_TOKEN": TOKEN, "ANTHROPIC_API_KEY": KEY}

    none = src({})
    assert (none.kind, none.off_reason) == ("none", llm.MODEL_OFF)
    assert src(every, h).kind == "bedrock"
    assert src({k: v for k, v in every.items() if k not in bedrock}, h).kind == "vertex"
    s = src({"ANTHROPIC_AUTH_TOKEN": TOKEN, "ANTHROPIC_API_KEY": KEY}, h)
    assert (s.kind, s.secret, s.on) == ("auth_token", TOKEN, True)
    s = src({"ANTHROPIC_API_KEY": KEY}, h)
    assert (s.kind, s.secret) == ("api_key", KEY)
    s = src({}, h)
    assert (s.kind, s.secret, s.on) == ("api_key_helper", HELPER_KEY, True)
    # a falsy switch is off; memd's own key file comes before everything
    assert src({"CLAUDE_CODE_USE_BEDROCK": "0", "ANTHROPIC_API_KEY": KEY}).kind == "api_key"
    f = tmp_path / "key"
    f.write_text("sk-file\n")
    s = src(every, h, Config(model=replace(ModelConfig(), api_key_file=str(f))))
    assert (s.kind, s.secret) == ("api_key", "sk-file") and str(f) in s.description
    # regions and endpoints
    b = src({**bedrock, "ANTHROPIC_BEDROCK_BASE_URL": "http://gw/bedrock"})
    assert b.options == {"region": "eu-west-1", "base_url": "http://gw/bedrock"} and b.on
    assert src({"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_DEFAULT_REGION": "ap-south-1"}).options["region"] == "ap-south-1"
    v = src(vertex)
    assert v.options == {"region": "us-east5", "project_id": "p1"} and v.on
    nov = src({"CLAUDE_CODE_USE_VERTEX": "1", "CLOUD_ML_REGION": "us-east5"})
    assert not nov.on and "ANTHROPIC_VERTEX_PROJECT_ID" in (nov.off_reason or "")


def test_settings_env_block_counts_like_the_environment() -> None:
    s = src({}, {"env": {"ANTHROPIC_AUTH_TOKEN": TOKEN}})
    assert (s.kind, s.secret) == ("auth_token", TOKEN)
    # the settings' env is applied over the process environment, as Claude Code applies it
    s = src({"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "us-west-2", "AWS_BEARER_TOKEN_BEDROCK": "b"},
            {"env": {"AWS_REGION": "eu-central-1"}})
    assert s.options["region"] == "eu-central-1"


def test_missing_extras_turn_model_work_off_naming_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm, "_missing", lambda module: True)
    b = src({"CLAUDE_CODE_USE_BEDROCK": "1"})
    assert b.kind == "bedrock" and not b.on and "boto3" in (b.off_reason or "")
    # a Bedrock API key needs no boto3
    assert src({"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_BEARER_TOKEN_BEDROCK": "bk"}).on
    v = src({"CLAUDE_CODE_USE_VERTEX": "1", "CLOUD_ML_REGION": "r", "ANTHROPIC_VERTEX_PROJECT_ID": "p"})
    assert v.kind == "vertex" and not v.on and "google-auth" in (v.off_reason or "")


def test_the_real_sdk_classes_exist() -> None:
    import anthropic

    assert callable(anthropic.AnthropicBedrock) and callable(anthropic.AnthropicVertex)


def test_failing_and_slow_helpers_turn_model_work_off(tmp_path: Path) -> None:
    bad = src({}, {"apiKeyHelper": helper(tmp_path, f"import sys\nprint({HELPER_KEY!r})\nsys.exit(3)\n")})
    assert bad.kind == "api_key_helper" and not bad.on and bad.secret is None
    assert "exited with status 3" in (bad.off_reason or "") and HELPER_KEY not in (bad.off_reason or "")
    empty = src({}, {"apiKeyHelper": helper(tmp_path, "pass\n")})
    assert "printed no key" in (empty.off_reason or "")
    slow = src({}, {"apiKeyHelper": helper(tmp_path, "import time\ntime.sleep(5)\n")}, helper_timeout_s=0.5)
    assert "did not finish within 0.5 s" in (slow.off_reason or "")
    missing = src({}, {"apiKeyHelper": "/nonexistent/helper-cmd"})
    assert not missing.on and "apiKeyHelper" in (missing.off_reason or "")


def test_failing_helper_raises_model_off_from_the_client(claude_home: Path, tmp_path: Path) -> None:
    (claude_home / "settings.json").write_text(json.dumps({"apiKeyHelper": helper(tmp_path, "raise SystemExit(1)\n")}))
    reason = llm.model_off_reason(Config())
    assert reason and "apiKeyHelper exited with status 1" in reason
    with pytest.raises(llm.ModelOff, match="apiKeyHelper"):
        llm.Client(Config())


def call(stub: StubAPI) -> llm.Client:
    stub.enqueue(stub.message(stub.text("ok")))
    c = llm.Client(Config(model=replace(ModelConfig(), base_url=stub.base_url)))
    c.create(model="claude-haiku-4-5", messages=[{"role": "user", "content": "x"}], beta=False)
    return c


def sent_keys(headers: dict[str, str]) -> list[str]:
    out = [headers["x-api-key"]] if "x-api-key" in headers else []
    auth = headers.get("authorization", "")
    return out + ([auth.removeprefix("Bearer ")] if auth.startswith("Bearer ") else [])


def test_helper_key_reaches_the_api_as_x_api_key(claude_home: Path, tmp_path: Path, stub_api: StubAPI,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    (claude_home / "settings.json").write_text(json.dumps({"apiKeyHelper": printing(tmp_path)}))
    c = call(stub_api)
    assert c.source.kind == "api_key_helper"
    # SDK 2.14 sends an api_key as "Authorization: Bearer" (older SDKs: x-api-key); either way the key
    # the helper printed is what reaches the API, once
    h = stub_api.requests[0].headers
    assert sent_keys(h) == [HELPER_KEY]
    assert HELPER_KEY not in caplog.text and HELPER_KEY not in repr(c.source)


def test_auth_token_is_sent_as_bearer_alone(claude_home: Path, stub_api: StubAPI,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", TOKEN)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)  # Claude Code's order: the token wins
    call(stub_api)
    h = stub_api.requests[0].headers
    assert h["authorization"] == f"Bearer {TOKEN}" and sent_keys(h) == [TOKEN]


def test_bedrock_client_is_the_sdks_own(claude_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import anthropic

    monkeypatch.setenv("CLAUDE_CODE_USE_BEDROCK", "1")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-key")
    monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", "http://127.0.0.1:9/bedrock")
    c = llm.Client(Config())
    assert isinstance(c.sdk, anthropic.AnthropicBedrock)
    assert c.sdk.aws_region == "eu-west-3" and str(c.sdk.base_url).startswith("http://127.0.0.1:9/bedrock")
    c.close()


def test_vertex_without_google_auth_is_off_not_a_traceback(claude_home: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(llm, "_missing", lambda module: module == "google.auth")
    monkeypatch.setenv("CLAUDE_CODE_USE_VERTEX", "1")
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "proj")
    with pytest.raises(llm.ModelOff, match="google-auth"):
        llm.Client(Config())
    assert cli.main(["status", "--format", "json"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    assert model["kind"] == "vertex" and model["model_work"] is False and "google-auth" in model["off_reason"]


def test_status_names_the_source_never_the_secret(claude_home: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  caplog: pytest.LogCaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.DEBUG)
    (claude_home / "settings.json").write_text(json.dumps({"apiKeyHelper": printing(tmp_path)}))
    assert cli.main(["status"]) == 0
    out, err = capsys.readouterr()
    assert "model work: on (api_key_helper: apiKeyHelper" in out
    assert cli.main(["status", "--format", "json"]) == 0
    jout, jerr = capsys.readouterr()
    model = json.loads(jout)["model"]
    assert model == {"backend": "api", "kind": "api_key_helper",
                     "description": "apiKeyHelper in Claude Code's settings.json", "model_work": True,
                     "off_reason": None}
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", TOKEN)
    assert cli.main(["status"]) == 0
    tout, terr = capsys.readouterr()
    assert "model work: on (auth_token: ANTHROPIC_AUTH_TOKEN" in tout
    for text in (out, err, jout, jerr, tout, terr, caplog.text):
        assert HELPER_KEY not in text and TOKEN not in text
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN")
    (claude_home / "settings.json").write_text("{}")
    assert cli.main(["status"]) == 0
    assert "model work: off (none: no credential)" in capsys.readouterr().out


def test_vertex_client_is_the_sdks_own(claude_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import anthropic

    monkeypatch.setattr(llm, "_missing", lambda module: False)  # as if google-auth were installed
    (claude_home / "settings.json").write_text(json.dumps({"env": {
        "CLAUDE_CODE_USE_VERTEX": "1", "CLOUD_ML_REGION": "europe-west4", "ANTHROPIC_VERTEX_PROJECT_ID": "proj",
        "ANTHROPIC_VERTEX_BASE_URL": "http://127.0.0.1:9/vertex/v1"}}))
    c = llm.Client(Config())
    assert c.source.kind == "vertex" and isinstance(c.sdk, anthropic.AnthropicVertex)
    assert (c.sdk.region, c.sdk.project_id) == ("europe-west4", "proj")
    assert str(c.sdk.base_url).startswith("http://127.0.0.1:9/vertex/v1")
    c.close()


def test_status_reads_the_claude_dir_it_is_given(claude_home: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other-claude"
    (other / "projects").mkdir(parents=True)
    (other / "settings.json").write_text(json.dumps({"env": {"ANTHROPIC_AUTH_TOKEN": TOKEN}}))
    assert cli.main(["--claude-dir", str(other), "status", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["model"]["kind"] == "auth_token" and TOKEN not in out


def test_bedrock_without_aws_credentials_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    fake = types.ModuleType("boto3")

    class Session:
        def __init__(self, creds: object) -> None:
            self.creds = creds

        def get_credentials(self) -> object:
            return self.creds

    monkeypatch.setattr(llm, "_missing", lambda module: False)
    monkeypatch.setitem(sys.modules, "boto3", fake)
    fake.Session = lambda: Session(None)  # type: ignore[attr-defined]
    s = src({"CLAUDE_CODE_USE_BEDROCK": "1"})
    assert not s.on and "no AWS credentials" in (s.off_reason or "")
    fake.Session = lambda: Session(object())  # type: ignore[attr-defined]
    assert src({"CLAUDE_CODE_USE_BEDROCK": "1"}).on
