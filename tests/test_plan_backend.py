"""The claude-plan backend's faults without the real CLI: the extra missing, the CLI missing or too old,
the month's cap, the hint for a logged-in CLI, `memd status`, and catch-up never reading memd's own
job sessions. (The battery through the real CLI: tests/realcc/test_plan_jobs.py.)

A stand-in ``claude`` here is a real executable (a shell script) that answers ``--version`` and
``auth status`` as the CLI does (facts.md section 9); nothing of memd is mocked.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memd import cli
from memd.config import Config, ModelConfig, replace
from memd.jobs.catchup import catchup_project
from memd.jobs.dream import dream_project
from memd.jobs.modelrun import off_reason
from memd.llm import client as llm
from memd.llm import plan
from memd.llm.planrun import PlanClient
from tests.plugins.stub_api import StubAPI
from tests.test_model_jobs import Env, _fake_session, _user, dup_folder


def fake_cli(folder: Path, version: str = "2.1.332", *, logged_in: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    status = {"loggedIn": logged_in, "authMethod": "claude.ai" if logged_in else "none", "apiProvider": "firstParty",
              "subscriptionType": "max" if logged_in else None}
    p = folder / "claude"
    p.write_text("#!/bin/sh\n"
                 f'if [ "$1" = "--version" ]; then echo "{version} (Claude Code)"; exit 0; fi\n'
                 f"echo '{json.dumps(status)}'\n"
                 f"exit {0 if logged_in else 1}\n")
    p.chmod(0o755)
    return p


pytestmark = pytest.mark.skipif(not plan.sdk_installed(), reason="claude-agent-sdk is not installed (the test "
                                "extra has it: pip install -e '.[test]')")


@pytest.fixture(autouse=True)
def _fresh_status() -> Iterator[None]:
    plan._status_cache.clear()
    yield
    plan._status_cache.clear()


@pytest.fixture
def env(tmp_path: Path, stub_api: StubAPI, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    e = Env(tmp_path, stub_api, tmp_path / "claude")
    try:
        yield e
    finally:
        e.state.close()


def plan_config(env: Env, cli_path: Path | str) -> Config:
    return replace(env.config, model=replace(env.config.model, backend="claude-plan", claude_cli=str(cli_path)))


def test_a_missing_cli_turns_model_work_off_and_moves_nothing(env: Env) -> None:
    cfg = plan_config(env, env.state_dir.parent / "nowhere" / "claude")
    p = dup_folder(env)
    sess = p.dir / "11111111-2222-3333-4444-888888888888.jsonl"
    _fake_session(sess, [_user("remember that I like tabs")])
    why = off_reason(env.jc(config=cfg)) or ""
    assert "missing or not executable" in why and "model.backend" in why
    out = dream_project(env.jc(config=cfg), p)
    assert out.model_off and env.state.project(p.name).last_consolidation is None
    cu = catchup_project(env.jc(config=cfg), p)
    assert cu.outcome == "skipped" and cu.model_off
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == 0 and env.stub.requests == []


def test_a_cli_older_than_supported_is_named_with_its_version(env: Env, tmp_path: Path) -> None:
    why = plan.off_reason(plan_config(env, fake_cli(tmp_path / "bin", "2.0.5"))) or ""
    assert "Claude Code 2.0.5" in why and "older than 2.1.328" in why


def test_without_the_extra_the_off_reason_says_how_to_install_it(env: Env, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "claude_agent_sdk", None)  # what importlib sees when it is not installed
    cfg = plan_config(env, fake_cli(tmp_path / "bin"))
    why = plan.off_reason(cfg) or ""
    assert "claude-agent-sdk package is not installed" in why
    assert "pip install claude-agent-sdk in memd's environment" in why
    with pytest.raises(llm.ModelOff):
        PlanClient(cfg, 60.0, tmp_path / "cwd")


def test_a_logged_out_cli_says_not_logged_in(env: Env, tmp_path: Path) -> None:
    why = plan.off_reason(plan_config(env, fake_cli(tmp_path / "bin", logged_in=False))) or ""
    assert "not logged in" in why.lower()


def test_the_months_cap_stops_model_work_and_a_new_month_starts_it(env: Env, tmp_path: Path) -> None:
    cfg = plan_config(env, fake_cli(tmp_path / "bin"))
    jc = env.jc(config=cfg)
    assert off_reason(jc) is None
    now = time.time()
    plan.add_spend(env.state, now, 3.0)
    plan.add_spend(env.state, now, 2.5)
    why = off_reason(jc) or ""
    assert "rest of the month" in why and "$5.50" in why
    p = dup_folder(env)
    out = dream_project(jc, p)
    assert out.model_off and env.stub.requests == []
    assert plan.budget_reason(cfg, env.state, now + 40 * 86400) is None  # next month: spent nothing yet
    uncapped = replace(cfg, model=replace(cfg.model, monthly_budget_usd=0.0))
    assert plan.budget_reason(uncapped, env.state, now) is None


def test_with_no_credential_a_logged_in_cli_is_named_never_switched_to(env: Env, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    bin_dir = tmp_path / "bin"
    fake_cli(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    cfg = Config(model=ModelConfig())
    why = llm.jobs_off_reason(cfg) or ""
    assert why.startswith("model work is off") and 'model.backend = "claude-plan"' in why and "max plan" in why
    assert llm.model_off_reason(cfg) == llm.MODEL_OFF  # recall's API reason is unchanged
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "model work: off (none: no credential)" in out and 'set model.backend = "claude-plan"' in out
    plan._status_cache.clear()
    fake_cli(bin_dir, logged_in=False)
    assert llm.jobs_off_reason(cfg) == llm.MODEL_OFF  # logged out: nothing to suggest


def test_status_names_the_backend_cli_login_and_the_months_spend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    exe = fake_cli(tmp_path / "bin")
    conf = tmp_path / "config.toml"
    conf.write_text(f'[model]\nbackend = "claude-plan"\nclaude_cli = "{exe}"\nmonthly_budget_usd = 4.0\n')
    assert cli.main(["--config", str(conf), "status"]) == 0
    out = capsys.readouterr().out
    assert f"model work: on (claude_plan: the claude CLI {exe} 2.1.332 (claude.ai, max plan))" in out
    assert "model spend this month (claude-plan, as the CLI reports it): $0.00 of model.monthly_budget_usd $4.00" \
        in out
    assert cli.main(["--config", str(conf), "status", "--format", "json"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    assert model["backend"] == "claude-plan" and model["cli"]["version"] == "2.1.332"
    assert model["cli"]["auth_method"] == "claude.ai" and model["month_spend_usd"] == 0.0


def test_catchup_never_reads_memds_own_job_sessions(env: Env) -> None:
    """A job's CLI session writes no transcript (--no-session-persistence, proved with the real CLI in
    tests/realcc/test_plan_jobs.py); were one there anyway, by its folder or by its session id, catch-up
    does not send it."""
    own = env.project(plan.workdir_folder_name(env.state_dir))
    own.memory_dir.mkdir(parents=True)
    _fake_session(own.dir / "aaaaaaaa-2222-3333-4444-555555555555.jsonl", [_user("a job's own prompt")])
    p = env.project("-home-dev-mixed")
    p.memory_dir.mkdir(parents=True)
    job = "bbbbbbbb-2222-3333-4444-555555555555"
    plan.remember_session(env.state, job)
    _fake_session(p.dir / f"{job}.jsonl", [_user("the job session's text")])
    _fake_session(p.dir / "cccccccc-2222-3333-4444-555555555555.jsonl", [_user("the user's own session")])
    s = env.stub
    s.script(s.message(s.text("nothing to save")))
    assert catchup_project(env.jc(), own).outcome == "skipped" and s.requests == []
    out = catchup_project(env.jc(), p)
    assert out.details["pending_sessions"] == 1, out
    sent = json.dumps([r.body for r in s.requests])
    assert "the user's own session" in sent and "the job session's text" not in sent


def test_memd_dream_says_the_months_cap_stopped_model_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memd.state import StateStore

    exe = fake_cli(tmp_path / "bin")
    conf = tmp_path / "config.toml"
    state_dir = tmp_path / "state"
    conf.write_text(f'[model]\nbackend = "claude-plan"\nclaude_cli = "{exe}"\nmonthly_budget_usd = 1.0\n'
                    f'[paths]\nstate_dir = "{state_dir}"\n')
    claude = tmp_path / "claude"
    mem = claude / "projects" / "-home-dev-app" / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("- [Role](user_role.md) — backend engineer\n")
    (mem / "user_role.md").write_text("---\nname: Role\ndescription: backend engineer\ntype: user\n---\nx\n")
    with StateStore.open(state_dir) as st:
        plan.add_spend(st, time.time(), 1.25)
    assert cli.main(["--config", str(conf), "--claude-dir", str(claude), "dream", "--force"]) == 0
    out = capsys.readouterr().out
    assert "Model work is off for the rest of the month: memd's jobs spent $1.25 of model.monthly_budget_usd $1.00" \
        in out
    assert "-home-dev-app: " in out
