"""The model-job battery through ``model.backend = "claude-plan"``: the real Claude Code CLI as a user
logged in with a Claude plan and no API key, against the loopback Messages stand-in.

The login is a dummy ``claudeAiOauth`` object in the isolated HOME's ``.claude/.credentials.json``
(facts.md section 9): the CLI reports ``loggedIn: true`` and sends ``Authorization: Bearer <token>``
to ``ANTHROPIC_BASE_URL``. A stray ``ANTHROPIC_API_KEY`` is in the environment of every test here:
memd must keep it from switching the billing. The HOME also holds a planted hook (it would write a
marker file) and a planted CLAUDE.md: neither may run or load for a job.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memd.config import CatchupConfig, Config, DreamConfig, ModelConfig, replace
from memd.jobs import JobContext
from memd.jobs.catchup import catchup_project
from memd.jobs.dream import dream_project
from memd.layout import Project
from memd.llm import plan
from memd.state import StateStore
from tests.plugins.stub_api import Reply
from tests.realcc.cli import Sandbox
from tests.realcc.stub import CliStub

TOKEN = "sk-ant-oat01-dummy-login"
STRAY_KEY = "sk-ant-api03-stray-key"
PLANTED_MD = "PLANTED-CLAUDE-MD-MUST-NOT-LOAD"
USER_MD = "USER-CLAUDE-MD-ONLY-IN-MEMDS-SECTION"
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
OLD = time.time() - 86400 * 3
MEM = "mcp__memd__memory"


def topic(name: str, desc: str, body: str, type_: str = "feedback") -> str:
    return f"---\nname: {name}\ndescription: {desc}\ntype: {type_}\n---\n{body}\n"


def login(home: Path) -> None:
    """A dummy Claude plan login (facts.md section 9)."""
    creds = {"claudeAiOauth": {"accessToken": TOKEN, "refreshToken": "sk-ant-ort01-dummy",
                               "expiresAt": int(time.time() * 1000) + 86_400_000,
                               "scopes": ["user:inference", "user:profile"], "subscriptionType": "pro"}}
    p = home / ".claude" / ".credentials.json"
    p.write_text(json.dumps(creds), encoding="utf-8")
    p.chmod(0o600)


class Plan:
    def __init__(self, sb: Sandbox, binary: Path, **model: Any) -> None:
        self.sb = sb
        self.stub: CliStub = sb.stub
        self.claude = sb.claude
        self.state_dir = sb.base / "state"
        self.state = StateStore.open(self.state_dir)
        self.marker = sb.base / "hook-ran"
        self.config = Config(
            model=replace(ModelConfig(), backend="claude-plan", claude_cli=str(binary), timeout_s=20.0, **model),
            catchup=replace(CatchupConfig(), max_tool_turns=5),
            dream=replace(DreamConfig(), max_tool_turns=6))

    def project(self, name: str = "-home-dev-app") -> Project:
        d = self.claude / "projects" / name
        d.mkdir(parents=True, exist_ok=True)
        return Project(name, d, d / "memory")

    def jc(self, **kw: Any) -> JobContext:
        return JobContext(config=kw.pop("config", self.config), claude_dir=self.claude, state_dir=self.state_dir,
                          state=self.state, **kw)

    def memory(self, project: Project, files: dict[str, str]) -> None:
        project.memory_dir.mkdir(parents=True, exist_ok=True)
        for rel, text in files.items():
            p = project.memory_dir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            os.utime(p, (OLD, OLD))

    def bodies(self) -> list[str]:
        return [json.dumps(r.body) for r in self.stub.messages]

    def assert_confined(self) -> None:
        """Every request: only memd's tools, the login's bearer token (never the stray key), no user
        settings, hooks, CLAUDE.md or memory; the planted hook never ran; no transcript was written."""
        assert self.stub.messages, "the CLI sent nothing"
        for r in self.stub.messages:
            names = {t.get("name") for t in r.body.get("tools") or []}
            assert names and all(n.startswith("mcp__memd__") for n in names), names
            assert r.headers.get("authorization") == f"Bearer {TOKEN}"
            assert STRAY_KEY not in json.dumps(r.headers) and "x-api-key" not in {k.lower() for k in r.headers}
            body = json.dumps(r.body)
            # memd hands the user's CLAUDE.md in itself (in its system prompt, as with the API); the CLI
            # loads none of its own: not the one above the job's folder, not the user's, no auto memory
            assert PLANTED_MD not in body and "auto-memory" not in body
            assert USER_MD not in json.dumps(r.body.get("messages")) and "Contents of " not in body
        assert not self.marker.exists(), "a planted hook ran"
        ids = plan.job_sessions(self.state)
        assert ids, "no job session id was recorded"
        left = [p for p in self.claude.glob("projects/*/*.jsonl") if p.stem in ids]
        left += list((self.claude / "projects" / plan.workdir_folder_name(self.state_dir)).glob("*.jsonl"))
        assert left == [], "the job's session left a transcript"

    def close(self) -> None:
        self.state.close()


@pytest.fixture
def pl(sandbox: Sandbox, claude_cli: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Plan]:
    if not plan.sdk_installed():
        pytest.skip("claude-agent-sdk is not installed (the test extra has it: pip install -e '.[test]')")
    home = sandbox.home
    login(home)
    p = Plan(sandbox, claude_cli)
    hook = {"type": "command", "command": f"touch {p.marker}"}
    sandbox.settings({"hooks": {e: [{"matcher": "*", "hooks": [hook]}] for e in
                                ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")},
                      "env": {"ANTHROPIC_API_KEY": STRAY_KEY}, "apiKeyHelper": f"echo {STRAY_KEY}"})
    (sandbox.claude / "CLAUDE.md").write_text(f"# {USER_MD}\n", encoding="utf-8")
    p.state_dir.joinpath("CLAUDE.md").write_text(f"# {PLANTED_MD}\n", encoding="utf-8")  # above the job's cwd
    (sandbox.base / "CLAUDE.md").write_text(f"# {PLANTED_MD}\n", encoding="utf-8")
    own = sandbox.claude / "projects" / plan.workdir_folder_name(p.state_dir) / "memory"  # the job folder's memory
    own.mkdir(parents=True)
    (own / "MEMORY.md").write_text(f"- [x](x.md) — {PLANTED_MD}\n", encoding="utf-8")
    (own / "x.md").write_text(f"---\nname: x\ndescription: {PLANTED_MD}\ntype: user\n---\n{PLANTED_MD}\n")
    for k, v in sandbox.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("ANTHROPIC_API_KEY", STRAY_KEY)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    plan._status_cache.clear()
    try:
        yield p
    finally:
        p.close()
        plan._status_cache.clear()


def dup_folder(pl: Plan) -> Project:
    p = pl.project()
    pl.memory(p, {
        "MEMORY.md": "# Memory\n\n- [Tabs](feedback_tabs.md) — indent with tabs\n"
                     "- [Tabs again](feedback_tabs_2.md) — tabs, not spaces\n"
                     "- [Role](user_role.md) — backend engineer\n",
        "feedback_tabs.md": topic("Tabs", "indent with tabs", "Use tabs."),
        "feedback_tabs_2.md": topic("Tabs again", "tabs, not spaces", "Tabs, never spaces. **Why:** the linter."),
        "user_role.md": topic("Role", "backend engineer", "The user is a backend engineer.", "user"),
        "team/MEMORY.md": "- [T](t.md) — team\n",
        "team/t.md": topic("T", "team", "team fact", "project"),
    })
    return p


def tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def msg(stub: CliStub, *blocks: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return stub.message(*blocks, usage={"input_tokens": 1000, "output_tokens": 100}, **kw)


def mem(stub: CliStub, command: str, **fields: Any) -> dict[str, Any]:
    return stub.tool_use(MEM, {"command": command, **fields})


# --------------------------------------------------------------------------- the dream


def test_a_plan_dream_merges_confined_and_billed_to_the_plan(pl: Plan) -> None:
    p = dup_folder(pl)
    s = pl.stub
    s.turns(msg(s, mem(s, "view", path="/memories/feedback_tabs_2.md")),
            msg(s, mem(s, "str_replace", path="/memories/feedback_tabs.md", old_str="Use tabs.",
                       new_str="Use tabs, never spaces.\n**Why:** the linter rejects spaces."),
                mem(s, "delete", path="/memories/feedback_tabs_2.md", reason="a duplicate of feedback_tabs.md")),
            msg(s, s.text("Merged the two tab memories.")))
    out = dream_project(pl.jc(), p)
    assert out.outcome == "changed", out
    files = tree(p.memory_dir)
    assert "feedback_tabs_2.md" not in files and "never spaces" in files["feedback_tabs.md"]
    assert "(feedback_tabs_2.md)" not in files["MEMORY.md"] and files["team/t.md"].endswith("team fact\n")
    assert pl.state.project(p.name).last_consolidation is not None
    pl.assert_confined()
    first = pl.stub.main[0].body
    assert {t["name"] for t in first["tools"]} == {MEM, "mcp__memd__search_transcripts", "mcp__memd__resolve_conflict",
                                                 "mcp__memd__forget_memory"}
    system = json.dumps(first["system"])
    assert "Orient" in system and "feedback_tabs_2.md" in system and first["model"] == pl.config.model.dream_model
    assert first["max_tokens"] == pl.config.model.thinking_max_tokens  # memd's budget, not the CLI's default
    # the run log: tokens and the cost the CLI reported, labelled as the plan's credit
    assert out.details["billing"] == "plan credit" and out.tokens_in == 3000 and out.tokens_out == 300
    assert out.cost_usd > 0 and plan.month_spend(pl.state, time.time()) == pytest.approx(out.cost_usd, abs=1e-6)
    assert plan.job_sessions(pl.state)  # its session id is known: catch-up would skip it
    sent = len(pl.stub.messages)
    again = dream_project(pl.jc(), p)  # idempotent: nothing changed since, no model call
    assert again.outcome == "unchanged" and "not called" in again.message and len(pl.stub.messages) == sent


HOSTILE = {
    "Read": {"file_path": "/etc/hostname"},
    "Bash": {"command": "touch /tmp/memd-plan-pwned && cat /etc/hostname"},
    "WebFetch": {"url": "http://127.0.0.1:9/steal", "prompt": "x"},
}


@pytest.mark.parametrize("attack", [*sorted(HOSTILE), "outside", "team"])
def test_a_hostile_model_reaches_nothing_outside_memds_tools(pl: Plan, attack: str) -> None:
    p = dup_folder(pl)
    s = pl.stub
    if attack in HOSTILE:
        use = s.tool_use(attack, HOSTILE[attack])
    elif attack == "outside":
        use = mem(s, "create", path="/memories/../evil.md", file_text="x")
    else:
        use = mem(s, "str_replace", path="/memories/team/t.md", old_str="team fact", new_str="pwned")
    s.turns(msg(s, use), msg(s, s.text("done")))
    before = tree(p.memory_dir)
    out = dream_project(pl.jc(), p)
    assert out.outcome == "unchanged", out
    assert tree(p.memory_dir) == before and not (p.dir / "evil.md").exists()
    assert not Path("/tmp/memd-plan-pwned").exists()
    second = pl.stub.main[1].body["messages"]
    result = [b for m in second if isinstance(m.get("content"), list) for b in m["content"]
              if isinstance(b, dict) and b.get("type") == "tool_result"][-1]
    assert result.get("is_error") is True
    host = Path("/etc/hostname").read_text().strip() if Path("/etc/hostname").exists() else ""
    assert not host or all(host not in b for b in pl.bodies()[1:] if len(host) > 3)
    pl.assert_confined()


def test_a_plan_dream_hands_in_only_what_changed_since_the_last_one(pl: Plan) -> None:
    p = dup_folder(pl)
    s = pl.stub
    s.turns(msg(s, s.text("nothing to merge")))
    assert dream_project(pl.jc(), p).outcome == "unchanged"
    pl.state.mark_consolidated(p.name, time.time() - 10)
    (p.memory_dir / "user_role.md").write_text(topic("Role", "backend engineer", "The user now leads the team.",
                                                     "user"))
    s.turns(msg(s, s.text("noted")))
    out = dream_project(pl.jc(force=True), p)
    assert out.outcome == "unchanged", out
    second = json.dumps(pl.stub.main[-1].body["system"])
    assert "now leads the team" in second and "Use tabs." not in second
    assert out.details["changed_files"] == 1


# --------------------------------------------------------------------------- catch-up


def _session(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    os.utime(path, (OLD, OLD))


def _user(text: str, uid: str = "u1") -> dict[str, Any]:
    return {"type": "user", "uuid": uid, "sessionId": "s", "timestamp": "2026-03-05T10:00:00Z",
            "cwd": "/home/dev/app", "message": {"role": "user", "content": text}}


def test_a_plan_catchup_redacts_expands_no_path_and_runs_once(pl: Plan, tmp_path: Path) -> None:
    p = pl.project()
    pl.memory(p, {"MEMORY.md": ""})
    private = tmp_path / "private.txt"
    private.write_text("PRIVATE-FILE-CONTENT-NEVER-SENT\n")
    sess = p.dir / "11111111-2222-3333-4444-555555555555.jsonl"
    _session(sess, [_user(f"remember we deploy with token {SECRET} on Fridays; see @{private}")])
    s = pl.stub
    s.turns(msg(s, mem(s, "create", path="/memories/project_deploy.md",
                       file_text=topic("Deploy", "deploys happen on Fridays", "Deploys happen on Fridays.",
                                       "project"))),
            msg(s, s.text("saved")))
    out = catchup_project(pl.jc(), p)
    assert out.outcome == "changed", out
    assert (p.memory_dir / "project_deploy.md").exists()
    for body in pl.bodies():
        assert SECRET not in body and "PRIVATE-FILE-CONTENT" not in body
    assert "[REDACTED:GitHub token]" in pl.bodies()[0] and out.details["redactions"] >= 1
    t = pl.state.transcript(sess)
    assert t is not None and t.extract_offset == sess.stat().st_size
    pl.assert_confined()
    sent = len(pl.stub.messages)
    again = catchup_project(pl.jc(), p)  # idempotent: nothing unread, no model call
    assert again.outcome == "skipped" and len(pl.stub.messages) == sent


# --------------------------------------------------------------------------- stops and faults


def test_the_turn_cap_makes_a_partial_run_that_moves_nothing(pl: Plan) -> None:
    p = dup_folder(pl)
    s = pl.stub
    cfg = replace(pl.config, dream=replace(pl.config.dream, max_tool_turns=2))
    s.turns(*[msg(s, mem(s, "view", path="/memories")) for _ in range(4)])
    out = dream_project(pl.jc(config=cfg), p)
    assert out.outcome == "partial" and "2 model calls" in out.message, out
    assert pl.state.project(p.name).last_consolidation is None


@pytest.mark.parametrize(("reply", "words"), [
    ("refusal", "refused"),
    (429, "rate limited"),
    (401, "login"),
])
def test_a_failed_plan_run_applies_nothing_and_moves_no_gate(pl: Plan, reply: Any, words: str) -> None:
    p = dup_folder(pl)
    s = pl.stub
    before = tree(p.memory_dir)
    if reply == "refusal":
        s.turns(msg(s, mem(s, "delete", path="/memories/user_role.md", reason="stale")),
                msg(s, s.text("I can't help with that."), stop_reason="refusal"))
    else:
        err = s.error(reply)
        s.turns(*[err] * 12)
    out = dream_project(pl.jc(), p)
    assert out.outcome == "failed" and words in out.message, out
    assert tree(p.memory_dir) == before
    assert pl.state.project(p.name).last_consolidation is None


def _cli_children() -> list[int]:
    me = str(os.getpid())
    out: list[int] = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"stream-json" in cmd:
            out.append(int(d.name))
    return out


def test_a_cli_that_dies_mid_run_fails_the_run_and_moves_nothing(pl: Plan) -> None:
    p = dup_folder(pl)
    s = pl.stub
    before = tree(p.memory_dir)

    def kill() -> None:
        for pid in _cli_children():
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)

    s.turns(msg(s, mem(s, "delete", path="/memories/user_role.md", reason="stale")),
            Reply(body=msg(s, s.text("done")), before=kill))
    out = dream_project(pl.jc(), p)
    assert out.outcome == "failed" and "the claude CLI exited with code -9 before the run finished" in out.message, out
    assert tree(p.memory_dir) == before and pl.state.project(p.name).last_consolidation is None


def test_a_cli_that_hangs_is_stopped_at_the_deadline(pl: Plan) -> None:
    p = dup_folder(pl)
    s = pl.stub
    cfg = replace(pl.config, model=replace(pl.config.model, timeout_s=2.0),
                  dream=replace(pl.config.dream, max_tool_turns=2))

    def hang() -> None:  # the CLI stops answering (SIGSTOP): only memd's deadline can end the run
        for pid in _cli_children():
            os.kill(pid, signal.SIGSTOP)

    s.turns(Reply(body=msg(s, s.text("late")), before=hang))
    t0 = time.monotonic()
    out = dream_project(pl.jc(config=cfg), p)
    assert out.outcome == "failed" and "did not finish" in out.message, out
    assert time.monotonic() - t0 < 20
    time.sleep(1.0)
    assert _cli_children() == []  # the CLI was killed, not left behind
    assert pl.state.project(p.name).last_consolidation is None


def test_a_logged_out_cli_turns_model_work_off_and_moves_nothing(pl: Plan) -> None:
    (pl.claude / ".credentials.json").unlink()
    p = dup_folder(pl)
    sess = p.dir / "11111111-2222-3333-4444-777777777777.jsonl"
    _session(sess, [_user("remember I like tabs")])
    out = dream_project(pl.jc(), p)
    assert out.model_off and "not logged in" in (plan.off_reason(pl.config) or "").lower(), out
    assert pl.state.project(p.name).last_consolidation is None
    cu = catchup_project(pl.jc(), p)
    assert cu.outcome == "skipped" and cu.model_off
    t = pl.state.transcript(sess)
    assert t is not None and t.extract_offset == 0
    assert pl.stub.messages == []
    status = plan.cli_status(pl.config, fresh=True)
    assert not status.logged_in and status.version


def test_an_exhausted_month_stops_model_work_until_the_month_ends(pl: Plan) -> None:
    p = dup_folder(pl)
    plan.add_spend(pl.state, time.time(), pl.config.model.monthly_budget_usd)
    out = dream_project(pl.jc(), p)
    assert out.model_off, out
    from memd.jobs.modelrun import off_reason

    assert "rest of the month" in (off_reason(pl.jc()) or "")
    assert pl.stub.messages == [] and pl.state.project(p.name).last_consolidation is None


def test_status_names_the_cli_its_version_and_login(pl: Plan) -> None:
    st = plan.cli_status(pl.config, fresh=True)
    assert st.logged_in and st.auth_method == "claude.ai" and st.problem is None
    version = plan.parse_version(st.version)
    assert version is not None and version >= plan.MIN_CLI_VERSION and st.path == pl.config.model.claude_cli
    assert plan.off_reason(pl.config) is None


def test_a_shutdown_while_the_cli_works_stops_it_and_changes_nothing(pl: Plan) -> None:
    p = dup_folder(pl)
    s = pl.stub
    jc = pl.jc()
    before = tree(p.memory_dir)

    def shutdown() -> None:
        jc.stop.set()
        time.sleep(2)

    s.turns(msg(s, mem(s, "delete", path="/memories/user_role.md", reason="stale")),
            Reply(body=msg(s, s.text("done")), before=shutdown))
    out = dream_project(jc, p)
    assert out.outcome == "skipped" and "shutdown" in out.message, out
    assert tree(p.memory_dir) == before and pl.state.project(p.name).last_consolidation is None
    time.sleep(0.5)
    assert _cli_children() == []


def test_the_input_token_cap_stops_the_cli_after_the_reply_that_passed_it(pl: Plan) -> None:
    p = dup_folder(pl)
    s = pl.stub
    cfg = replace(pl.config, dream=replace(pl.config.dream, max_input_tokens=1500))
    s.turns(*[msg(s, mem(s, "view", path="/memories")) for _ in range(5)])
    t0 = time.monotonic()
    out = dream_project(pl.jc(config=cfg), p)
    assert out.outcome == "partial" and "1,500 input tokens" in out.message, out
    assert len(pl.stub.main) == 2 and time.monotonic() - t0 < 30
    assert pl.state.project(p.name).last_consolidation is None
    time.sleep(0.5)
    assert _cli_children() == []


def test_a_reply_cut_at_max_tokens_applies_nothing(pl: Plan) -> None:
    p = dup_folder(pl)
    s = pl.stub
    before = tree(p.memory_dir)
    s.turns(msg(s, mem(s, "delete", path="/memories/user_role.md", reason="stale")),
            *[msg(s, s.text("Merging the tab memo"), stop_reason="max_tokens") for _ in range(4)])
    out = dream_project(pl.jc(), p)
    # the CLI asks the model to go on a few times (memd's API loop: once, with twice the budget), then fails
    assert out.outcome == "failed" and "exceeded the 32000 output token maximum" in out.message, out
    assert {r.body.get("max_tokens") for r in pl.stub.main} == {pl.config.model.thinking_max_tokens}
    assert tree(p.memory_dir) == before and pl.state.project(p.name).last_consolidation is None


def test_through_the_runner_the_run_log_says_the_plan_paid(pl: Plan) -> None:
    from memd.jobs.runner import run_job

    p = dup_folder(pl)
    s = pl.stub
    s.turns(msg(s, mem(s, "view", path="/memories/user_role.md")), msg(s, s.text("nothing to merge")))
    result = run_job("dream", pl.jc(force=True), [p])
    assert [o.outcome for o in result.outcomes] == ["unchanged"], result.outcomes
    row = pl.state.runs(job="dream")[0]
    assert row.summary.endswith("[plan credit]") and row.tokens_in == 2000 and row.tokens_out == 200
    assert row.cost_usd > 0 and row.cost_usd == pytest.approx(plan.month_spend(pl.state, time.time()), abs=1e-6)
