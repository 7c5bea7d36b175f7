"""The ``claude-plan`` backend: catch-up and dream through the user's own Claude Code CLI and its login.

A Claude plan (Pro, Max, Team) can pay for Agent SDK work out of a monthly credit the user claims
once (facts.md section 9). memd never reads, copies, stores or asks for a credential: it runs the
user's ``claude`` with the login the user already made, through the ``claude-agent-sdk`` package
(the ``plan`` extra, imported only by ``memd.llm.planrun``, only when a job runs).

API::

    from memd.llm import plan
    plan.off_reason(config)              # None, or why model work is off with this backend (said in words)
    plan.cli_status(config)              # the CLI memd would run: path, version, auth method (for `memd status`)
    plan.budget_reason(config, state, now)  # the month's cap (model.monthly_budget_usd) spent: why
    # a job's conversations: memd.llm.planrun.PlanClient (the Agent SDK, imported there only)

Which CLI (``find_cli``): ``model.claude_cli``; else ``claude`` on PATH; else Claude Code's usual
install places; else the SDK's bundled one. Its version must be at least ``MIN_CLI_VERSION`` (the
oldest the real-client tier runs: tests/realcc). ``claude auth status`` (JSON, exit 1 when logged
out) says whether it is logged in and how; it runs with the same environment as a job and without
settings (``--setting-sources=``), so a stray key or an ``apiKeyHelper`` does not make a CLI look
logged in with a login a job would not use. Results are kept ``STATUS_TTL_S`` per process.

Confinement (each knob measured with the real CLI, facts.md section 9; tests/realcc/test_plan_jobs.py):
no built-in tool (``tools=[]``, the built-ins also disallowed, ``permission_mode="dontAsk"``); only
memd's tools, served in-process (``create_sdk_mcp_server("memd")``: the model sees
``mcp__memd__memory`` ...) by memd's own handlers (``memd.llm.memtool``: the validator in front of
the staging copy that ``memd.apply`` guards); ``strict_mcp_config``; no settings, hooks or CLAUDE.md
(``setting_sources=[]``, ``CLAUDE_CODE_DISABLE_CLAUDE_MDS``); no auto memory
(``CLAUDE_CODE_DISABLE_AUTO_MEMORY=1``); no transcript (``--no-session-persistence``); no tool
search placeholder (``ENABLE_TOOL_SEARCH=false``); the prompt delivered verbatim (no ``@path``
expansion of transcript text: ``verbatim_prompts``); an empty working folder memd owns
(``WORKDIR`` under memd's state folder); and the variables that would switch billing to a key or a
cloud (``SCRUBBED_ENV``) set empty for the CLI, so a stray ``ANTHROPIC_API_KEY`` cannot win over the
login. memd's system prompt, model, effort, output budget (``CLAUDE_CODE_MAX_OUTPUT_TOKENS``), max
turns, a per-job ``max_budget_usd``, retries (``CLAUDE_CODE_MAX_RETRIES``) and per-call timeout
(``API_TIMEOUT_MS``) are passed explicitly; a refusal is not retried (``CLAUDE_CODE_DISABLE_REFUSAL_*``).
What the CLI does on its own: it adds a
one-line system block of its own, sends adaptive thinking whatever it is asked (2.1.332 has no way to
turn it off), puts 1-hour cache breakpoints of its own, and writes ``~/.claude.json`` (+ a backup)
and an MCP log under ``~/.cache/claude-cli-nodejs/``.

Accounting: tokens and cost come from the CLI's ``ResultMessage`` (``usage``, ``total_cost_usd``,
which is what the credit is charged); a run cut short before its result is priced by memd from the
replies seen (``model.prices``). ``Usage.billing`` says "plan credit" when the CLI reported no API
key source (``apiKeySource: "none"``), else the key source it used.

Stops: ``success`` with stop reason ``end_turn`` finishes; ``error_max_turns`` and
``error_max_budget_usd`` are caps (a partial run, as in ``memd.jobs.modelrun``); a refusal, a reply cut
at max_tokens, an API error (not logged in, the credit used up or rate limited: HTTP 401/402/429), a
CLI that dies or passes the run's deadline (it is killed) raise ``llm.ModelError``: nothing applied,
no offset, gate or lock moved.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memd.config import Config

BACKEND = "claude-plan"
MIN_CLI_VERSION = (2, 1, 328)
WORKDIR = "claude-plan-cwd"  # under memd's state folder: the jobs' empty working folder
STATUS_TTL_S = 60.0
CLI_TIMEOUT_S = 20.0
SDK_MODULE = "claude_agent_sdk"
# Set empty for the CLI: each would make it bill a key or a cloud account instead of the login.
SCRUBBED_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX",
                "CLAUDE_CODE_USE_FOUNDRY")
JOB_ENV = {
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
    "ENABLE_TOOL_SEARCH": "false",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    # a refusal ends the run, as with the API (the CLI would retry it, or ask a fallback model)
    "CLAUDE_CODE_DISABLE_REFUSAL_RETRY": "1",
    "CLAUDE_CODE_DISABLE_REFUSAL_FALLBACK": "1",
}
USUAL_PLACES = ("~/.local/bin/claude", "~/.claude/local/claude", "~/.npm-global/bin/claude", "/usr/local/bin/claude",
                "/opt/homebrew/bin/claude", "~/node_modules/.bin/claude", "~/.yarn/bin/claude")
SESSIONS_KEY = "claude_plan.sessions"  # the job sessions' ids (state): catch-up never reads them
SPEND_KEY = "claude_plan.spend."  # + "YYYY-MM": what the month's jobs cost, as the CLI reported it
MAX_SESSIONS_KEPT = 500
DOCS = "docs/plan.md"

# --------------------------------------------------------------------------- the CLI and its login


@dataclass(frozen=True)
class CliStatus:
    """The CLI memd would run, as ``memd status`` shows it; ``problem`` set when model work is off."""

    path: str | None = None
    version: str = ""
    bundled: bool = False
    logged_in: bool = False
    auth_method: str = ""
    subscription: str = ""
    problem: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"cli": self.path, "version": self.version or None, "bundled": self.bundled,
                "logged_in": self.logged_in, "auth_method": self.auth_method or None,
                "subscription": self.subscription or None, "problem": self.problem}


_status_cache: dict[str, tuple[float, CliStatus]] = {}


def sdk_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(SDK_MODULE) is not None
    except (ImportError, ValueError):
        return False


def bundled_cli() -> Path | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec(SDK_MODULE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(next(iter(spec.submodule_search_locations))) / "_bundled" / "claude"
    return p if p.is_file() else None


def find_cli(config: Config) -> tuple[Path | None, bool]:
    """The claude executable (see the module doc) and whether it is the SDK's bundled one."""
    given = config.model.claude_cli.strip()
    if given:
        return Path(given).expanduser(), False
    found = shutil.which("claude")
    if found:
        return Path(found), False
    for place in USUAL_PLACES:
        p = Path(place).expanduser()
        if p.is_file() and os.access(p, os.X_OK):
            return p, False
    b = bundled_cli()
    return (b, True) if b is not None else (None, False)


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What memd hands the CLI over the inherited environment (``ClaudeAgentOptions.env`` merges it over
    ``os.environ``): the billing switches emptied, the job's isolation switches on."""
    env = dict.fromkeys(SCRUBBED_ENV, "")
    env.update(JOB_ENV)
    env.update(extra or {})
    return env


def _run(cmd: list[str], timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CLAUDECODE"}
    env.update(cli_env())
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env=env, check=False)


def parse_version(text: str) -> tuple[int, int, int] | None:
    m = re.search(r"(\d{1,6})\.(\d{1,6})\.(\d{1,6})", text)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def cli_status(config: Config, *, fresh: bool = False) -> CliStatus:
    """The CLI, its version and its login (``claude --version``, ``claude auth status``; never a
    credential file). Kept ``STATUS_TTL_S`` per process (the jobs ask once per project)."""
    path, bundled = find_cli(config)
    key = f"{path}|{bundled}"
    hit = _status_cache.get(key)
    now = time.monotonic()
    if hit is not None and not fresh and now - hit[0] < STATUS_TTL_S:
        return hit[1]
    status = _probe(path, bundled)
    _status_cache[key] = (now, status)
    return status


def _probe(path: Path | None, bundled: bool) -> CliStatus:
    if path is None:
        return CliStatus(problem=("no claude CLI found (not on PATH, not in ~/.local/bin or Claude Code's other "
                                  "install places; set model.claude_cli)"))
    shown = str(path)
    if not path.is_file() or not os.access(path, os.X_OK):
        return CliStatus(shown, bundled=bundled, problem=f"the claude CLI {shown} is missing or not executable")
    try:
        v = _run([shown, "--version"])
    except (OSError, subprocess.SubprocessError) as e:
        return CliStatus(shown, bundled=bundled, problem=f"the claude CLI {shown} does not run ({type(e).__name__})")
    version = parse_version(v.stdout)
    vtext = ".".join(map(str, version)) if version else ""
    if version is None:
        return CliStatus(shown, bundled=bundled, problem=f"the claude CLI {shown} does not say its version")
    if version < MIN_CLI_VERSION:
        least = ".".join(map(str, MIN_CLI_VERSION))
        return CliStatus(shown, vtext, bundled, problem=(f"Claude Code {vtext} at {shown} is older than {least}, "
                                                         "the oldest memd runs its jobs with (`claude update`)"))
    try:  # without settings, as a job runs: an apiKeyHelper there is not the login a job uses
        a = _run([shown, "--setting-sources=", "auth", "status"])
    except (OSError, subprocess.SubprocessError) as e:
        return CliStatus(shown, vtext, bundled, problem=f"`claude auth status` failed ({type(e).__name__})")
    info = _auth_json(a.stdout)
    logged = bool(info.get("loggedIn")) and a.returncode == 0
    method = str(info.get("authMethod") or "")[:40]
    sub = str(info.get("subscriptionType") or "")[:40]
    if not logged:
        return CliStatus(shown, vtext, bundled, False, method, sub,
                         problem=(f"Claude Code at {shown} is not logged in (Not logged in: run `claude` and log "
                                  "in with your Claude plan, or `claude auth login`)"))
    return CliStatus(shown, vtext, bundled, True, method, sub)


def _auth_json(text: str) -> dict[str, Any]:
    start = text.find("{")
    if start < 0:
        return {}
    try:
        data = json.loads(text[start:])
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def off_reason(config: Config) -> str | None:
    """None when the claude-plan backend can run a job; else the sentence saying why model work is off."""
    head = 'model work is off: model.backend = "claude-plan" but '
    tail = f" ({DOCS}); only the deterministic parts run"
    if not sdk_installed():
        return (head + "the claude-agent-sdk package is not installed (the plan extra: pip install "
                "claude-agent-sdk in memd's environment)" + tail)
    status = cli_status(config)
    if status.problem:
        return head + status.problem + tail
    return None


def logged_in_hint(config: Config) -> str | None:
    """For the ``api`` backend with no credential: a sentence naming the setting when the user's CLI is
    logged in (memd never switches on its own), else None."""
    path, _ = find_cli(config)
    if path is None or (config.model.claude_cli == "" and _is_bundled(path)):
        return None
    status = cli_status(config)
    if not status.logged_in:
        return None
    sub = f" ({status.subscription} plan)" if status.subscription else ""
    return (f"your Claude Code CLI is logged in{sub}: set model.backend = \"claude-plan\" to run catch-up and dream "
            f"on your plan's Agent SDK credit ({DOCS})")


def _is_bundled(path: Path) -> bool:
    b = bundled_cli()
    return b is not None and b == path


# --------------------------------------------------------------------------- the month's spend and job sessions


def month_key(now: float) -> str:
    return SPEND_KEY + time.strftime("%Y-%m", time.gmtime(now))


def month_spend(state: Any, now: float) -> float:
    try:
        return float(state.get(month_key(now)) or 0.0)
    except (TypeError, ValueError):
        return 0.0


def add_spend(state: Any, now: float, usd: float) -> None:
    if usd > 0:
        state.set(month_key(now), repr(round(month_spend(state, now) + usd, 6)))


def budget_reason(config: Config, state: Any, now: float) -> str | None:
    """Why the month's cap stops model work (None: there is room)."""
    cap = config.model.monthly_budget_usd
    if cap <= 0 or state is None:
        return None
    spent = month_spend(state, now)
    if spent < cap:
        return None
    return (f"model work is off for the rest of the month: memd's jobs spent ${spent:.2f} of "
            f"model.monthly_budget_usd ${cap:.2f} this month (raise it, or 0 for no cap; {DOCS}); only the "
            "deterministic parts run")


def remember_session(state: Any, session_id: str) -> None:
    if not session_id or state is None:
        return
    ids = job_sessions(state)
    if session_id not in ids:
        ids.append(session_id)
    state.set(SESSIONS_KEY, json.dumps(ids[-MAX_SESSIONS_KEPT:]))


def job_sessions(state: Any) -> list[str]:
    try:
        data = json.loads(state.get(SESSIONS_KEY) or "[]")
    except ValueError:
        return []
    return [str(x) for x in data] if isinstance(data, list) else []


def workdir_folder_name(state_dir: Path) -> str:
    """The folder under ``projects/`` a job session's transcript would go to (none is written)."""
    from memd.layout import sanitize

    return sanitize(os.path.realpath(state_dir / WORKDIR))
