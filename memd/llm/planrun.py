"""A job's conversations through the user's claude CLI (``model.backend = "claude-plan"``).

``PlanClient`` stands where the jobs hold a ``llm.Client`` (``usage``, ``source``, ``close``,
``remaining``); ``memd.jobs.modelrun.tool_loop`` hands it each conversation (``converse``). The Agent
SDK (``claude_agent_sdk``, the ``plan`` extra) is imported here only, when a conversation starts.
memd's tools become in-process MCP tools (``create_sdk_mcp_server``) whose handlers are memd's own
(``memd.llm.memtool``); the isolation knobs, the accounting and the stops are described in
``memd.llm.plan``'s module doc, which also owns the CLI, its login and the month's spend.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd.llm import client as llm
from memd.llm.plan import BACKEND, CliStatus, cli_env, cli_status, off_reason

if TYPE_CHECKING:
    from memd.config import Config
    from memd.llm.client import LoopResult

Handler = Callable[[Any], tuple[str, bool]]  # a tool's handler: (result text, is_error), as the API loop's
SERVER = "memd"

MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "delete", "rename",
                                                "merge"]},
        "path": {"type": "string", "description": "a path under /memories (view, create, str_replace, insert, "
                                                  "delete)"},
        "view_range": {"type": "array", "items": {"type": "integer"}, "description": "view: [first, last] line"},
        "file_text": {"type": "string", "description": "create: the whole file"},
        "old_str": {"type": "string", "description": "str_replace: the exact text to replace (unique)"},
        "new_str": {"type": "string", "description": "str_replace: its replacement"},
        "insert_line": {"type": "integer", "description": "insert: the line after which to insert (0: the top)"},
        "insert_text": {"type": "string", "description": "insert: the text"},
        "old_path": {"type": "string", "description": "rename: from"},
        "new_path": {"type": "string", "description": "rename: to"},
        # declared forgetting (issue 31): a delete or a merge goes only with its reason
        "reason": {"type": "string", "description": "delete, merge: why this memory is forgotten (required)"},
        "into": {"type": "string", "description": "merge: the memory that absorbs path"},
        "stale": {"type": "array", "description": "merge: sentences of path dropped as stale, each with its reason",
                  "items": {"type": "object", "properties": {"text": {"type": "string"},
                                                             "reason": {"type": "string"}}}},
    },
    "required": ["command"],
}
MEMORY_DESCRIPTION = (
    "The memory folder, mounted at /memories: view a folder or a file (with line numbers), create a file, "
    "str_replace text in a file, insert lines, delete (with a reason) or rename a file, merge one memory "
    "into another (with a reason). Only *.md files are written; "
    "/memories/team/ is read-only; MEMORY.md is the index.")
# The CLI's built-in tools, disallowed by name besides ``tools=[]`` (a belt to the braces).
BUILTINS = ("Agent", "Task", "Bash", "BashOutput", "KillShell", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep",
            "LS", "NotebookEdit", "WebFetch", "WebSearch", "TodoWrite", "Skill", "SlashCommand", "ExitPlanMode")


def job_budget_usd(config: Config, model: str, token_cap: int | None, max_turns: int, max_tokens: int) -> float | None:
    """The per-job ``max_budget_usd``: the run's input-token cap and its calls' output at the model's price."""
    p = llm.price_for(config, model)
    if p is None or token_cap is None:
        return None
    return round((token_cap * p["input"] + max_turns * max_tokens * p["output"]) / 1e6, 4) or None


@dataclass
class PlanClient:
    """A job's model work through the CLI (the module doc); the jobs hold it where they hold a ``llm.Client``."""

    config: Config
    deadline_s: float
    workdir: Path
    on_spend: Callable[[float, str], None] | None = None  # (usd, session id) after each conversation
    budget_left: Callable[[], float | None] = lambda: None  # what the month's cap leaves (None: no cap)
    usage: llm.Usage = field(default_factory=llm.Usage)
    backend: str = BACKEND
    cli: CliStatus = field(default_factory=CliStatus)
    source: llm.Source = field(default_factory=lambda: llm.Source("claude_plan", "the claude CLI's login"))
    key_source: str = ""  # the CLI's apiKeySource (init message): "none" under a plan login
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        reason = off_reason(self.config)
        if reason is not None:
            raise llm.ModelOff(reason)
        self.cli = cli_status(self.config)
        self.source = llm.Source("claude_plan", f"the claude CLI {self.cli.path} ({self.cli.auth_method or 'login'})")
        self.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)

    def remaining(self) -> float:
        return self.deadline_s - (time.monotonic() - self.started)

    def close(self) -> None:
        return None

    def converse(self, res: LoopResult, *, model: str, system: list[dict[str, Any]], user: str,
                 tools: list[dict[str, Any]], handlers: dict[str, Handler], max_turns: int, stop: Any = None,
                 token_cap: int | None = None) -> LoopResult:
        """One conversation into ``res`` (``memd.jobs.modelrun.tool_loop`` hands it a fresh ``LoopResult``),
        as the tool loop has one with the API."""
        import asyncio

        left = self.remaining()
        if left <= 0.5:
            raise llm.ModelError(f"run deadline reached after {self.usage.calls} call(s)")
        run = _Conversation(self, res, model=model, system=system, user=user, tools=tools, handlers=handlers,
                            max_turns=max_turns, stop=stop, token_cap=token_cap)
        try:
            asyncio.run(run.go(left))
        finally:
            run.account()
        return res


class _Conversation:
    def __init__(self, client: PlanClient, res: LoopResult, *, model: str, system: list[dict[str, Any]], user: str,
                 tools: list[dict[str, Any]], handlers: dict[str, Handler], max_turns: int, stop: Any,
                 token_cap: int | None) -> None:
        self.c = client
        self.res = res
        self.model = model
        self.system = "\n\n".join(str(b.get("text", "")) for b in system if b.get("text"))
        self.user = user
        self.tools = tools
        self.handlers = handlers
        self.max_turns = max_turns
        self.stop = stop
        self.token_cap = token_cap
        self.replies: dict[str, dict[str, Any]] = {}  # message id -> usage (the CLI splits a reply over messages)
        self.result: Any = None
        self.session_id = ""
        self.stderr: list[str] = []
        self.error: str = ""  # an API error the CLI reported on a reply
        self.base_input = client.usage.total_input

    # ------------------------------------------------------------------ the tools

    def _server(self, sdk: Any) -> Any:
        from memd.llm.memtool import MEMORY_TOOL

        made = []
        for t in self.tools:
            name = str(t.get("name"))
            handler = self.handlers.get(name)
            if handler is None:
                continue
            if t.get("type") == MEMORY_TOOL["type"]:
                desc, schema = MEMORY_DESCRIPTION, MEMORY_SCHEMA
            else:
                desc, schema = str(t.get("description", "")), dict(t.get("input_schema") or {"type": "object",
                                                                                             "properties": {}})
            made.append(sdk.tool(name, desc, schema)(self._wrap(handler)))
        return sdk.create_sdk_mcp_server(SERVER, tools=made), [f"mcp__{SERVER}__{t.name}" for t in made]

    def _wrap(self, handler: Handler) -> Callable[[Any], Any]:
        async def run(args: Any) -> dict[str, Any]:
            res = self.res
            res.tool_calls += 1
            if res.tool_calls > llm.MAX_TOOL_CALLS:
                text, err = f"Error: at most {llm.MAX_TOOL_CALLS} tool calls per run; finish now.", True
                cap = f"the run's {llm.MAX_TOOL_CALLS} tool calls"
                if cap not in res.caps:
                    res.caps.append(cap)
            else:
                text, err = handler(args)
            res.refused += int(err)
            return {"content": [{"type": "text", "text": text}], "is_error": err}

        return run

    # ------------------------------------------------------------------ the run

    def options(self, sdk: Any) -> Any:
        cfg = self.c.config
        server, allowed = self._server(sdk)
        budget, extra = llm.thinking_params(cfg, self.model)
        thinking = extra.get("thinking") or {"type": "disabled"}
        effort = cfg.model.effort or ("low" if thinking.get("type") == "disabled" else "medium")
        per_job = job_budget_usd(cfg, self.model, self.token_cap, self.max_turns, budget)
        left = self.c.budget_left()
        if left is not None:
            per_job = min(per_job, left) if per_job is not None else left
        return sdk.ClaudeAgentOptions(
            tools=[], allowed_tools=allowed, disallowed_tools=list(BUILTINS), permission_mode="dontAsk",
            mcp_servers={SERVER: server}, strict_mcp_config=True, setting_sources=[],
            system_prompt=self.system, model=self.model, max_turns=self.max_turns,
            max_budget_usd=max(0.0001, round(per_job, 4)) if per_job is not None else None,
            thinking=thinking, effort=effort, cwd=str(self.c.workdir), cli_path=self.c.cli.path,
            env=cli_env({"CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(budget),
                         # memd's retries and per-call timeout (the CLI's own: 10 retries, 10 minutes)
                         "CLAUDE_CODE_MAX_RETRIES": str(cfg.model.max_retries),
                         "API_TIMEOUT_MS": str(int(cfg.model.timeout_s * 1000))}),
            extra_args={"no-session-persistence": None}, verbatim_prompts=True,
            stderr=self._stderr)

    def _stderr(self, line: str) -> None:
        self.stderr = [*self.stderr[-4:], line.strip()[:300]]

    async def go(self, seconds: float) -> None:
        import asyncio

        import claude_agent_sdk as sdk

        opts = self.options(sdk)
        before = _live_clis()
        gen = sdk.query(prompt=self.user, options=opts)
        reader = asyncio.ensure_future(self._read(gen, sdk))
        watch = asyncio.ensure_future(self._watch_stop())
        try:
            done, _ = await asyncio.wait({reader, watch}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
            if reader in done:
                reader.result()  # what the run raised, if anything
            elif watch in done:
                self.res.notes.append("stopped (shutdown)")
            else:
                raise llm.ModelError(f"the claude CLI did not finish within {seconds:.0f} s (stopped; nothing "
                                     "applied)")
        except sdk.CLINotFoundError:
            raise llm.ModelError(f"the claude CLI was not found at {self.c.cli.path}") from None
        except sdk.ClaudeSDKError as e:
            raise llm.ModelError(self._failure(e)) from None
        finally:
            watch.cancel()
            if self.result is None:  # a deadline, a shutdown, a cap or a failure: no grace for the CLI
                await _kill_left(before)
            if not reader.done():
                reader.cancel()
                with contextlib.suppress(BaseException):
                    await reader
            with contextlib.suppress(Exception):
                await getattr(gen, "aclose")()  # noqa: B009 (an async generator; typed as an iterator)
            await _kill_left(before)

    async def _watch_stop(self) -> None:
        import asyncio

        while self.stop is None or not self.stop.is_set():
            await asyncio.sleep(0.2)

    async def _read(self, gen: Any, sdk: Any) -> None:
        res = self.res
        async for m in gen:
            if isinstance(m, sdk.SystemMessage) and m.subtype == "init":
                self.c.key_source = str(m.data.get("apiKeySource") or "")
                self.session_id = str(m.data.get("session_id") or "")
            elif isinstance(m, sdk.AssistantMessage):
                if m.parent_tool_use_id:
                    continue
                if m.error:
                    self.error = str(m.error)
                mid = m.message_id or f"anon{len(self.replies)}"
                if mid not in self.replies:
                    res.turns += 1
                self.replies[mid] = dict(m.usage or {})
                text = "".join(getattr(b, "text", "") for b in m.content if type(b).__name__ == "TextBlock")
                if text:
                    res.final_text = text
                if self.token_cap is not None and self._input_seen() > self.token_cap:
                    res.caps.append(f"the run's {self.token_cap:,} input tokens")
                    res.notes.append(f"stopped after a reply: the run's input-token cap ({self.token_cap:,}) "
                                     "was passed")
                    return
            elif isinstance(m, sdk.ResultMessage):
                self.result = m
                self.session_id = m.session_id or self.session_id
                self._finish(m)
                return

    def _input_seen(self) -> int:
        return self.base_input + sum(_n(u, "input_tokens") + _n(u, "cache_creation_input_tokens")
                                     + _n(u, "cache_read_input_tokens") for u in self.replies.values())

    def _finish(self, m: Any) -> None:
        res = self.res
        reason = str(m.stop_reason or "")
        res.stop_reason = reason
        res.stop_reasons.append(reason or m.subtype)
        if m.result and not m.is_error:
            res.final_text = str(m.result)
        if m.subtype == "error_max_turns":
            res.hit_turn_cap = True
            res.caps.append(f"{self.max_turns} model calls")
            res.notes.append(f"stopped at the cap of {self.max_turns} model calls")
            return
        if m.subtype == "error_max_budget_usd":
            res.caps.append("the run's budget in dollars")
            res.notes.append("stopped at the run's max_budget_usd")
            return
        if reason == llm.STOP_REFUSAL:  # the CLI reports it as an error result
            raise llm.StopError("the model refused (stop_reason refusal); nothing applied")
        if reason == llm.STOP_MAX_TOKENS:
            raise llm.StopError("reply cut at max_tokens; nothing applied")
        if m.is_error or m.subtype != "success":
            raise llm.ModelError(self._api_error(m.api_error_status, m.subtype, m), status=m.api_error_status)
        if reason not in ("", llm.STOP_END_TURN, "stop_sequence"):
            raise llm.StopError(f"unexpected stop_reason {reason[:40]!r}; nothing applied")

    def _api_error(self, status: int | None, subtype: str, m: Any = None) -> str:
        words = {401: "the CLI's login was refused (Not logged in or expired: run `claude` to log in again)",
                 402: "the plan's Agent SDK credit is used up (HTTP 402)",
                 403: "the CLI's login may not use this model (HTTP 403)",
                 429: "rate limited, or the plan's Agent SDK credit is used up (HTTP 429)"}
        if status in words:
            return f"claude CLI: {words[status]}"
        kinds = {"authentication_failed": words[401], "billing_error": "the plan's credit is used up (billing error)",
                 "rate_limit": words[429]}
        if self.error in kinds:
            return f"claude CLI: {kinds[self.error]}"
        from memd.core import secrets

        why = [subtype]
        if status:
            why.append(f"HTTP {status}")
        for name in ("terminal_reason", "stop_reason"):
            v = getattr(m, name, None)
            if isinstance(v, str) and v and v not in why:
                why.append(f"{name} {v[:40]}")
        errors = getattr(m, "errors", None) or ([m.result] if isinstance(getattr(m, "result", None), str) else [])
        if errors:  # the CLI's own words (e.g. "API Error: ..."), bounded and redacted
            why.append(secrets.redact(" ".join(str(errors[0]).split()))[:160])
        return f"claude CLI: the run ended with an error ({'; '.join(why)})"

    def _failure(self, e: Exception) -> str:
        from memd.core import secrets

        if self.result is not None and getattr(self.result, "is_error", False):
            return self._api_error(self.result.api_error_status, self.result.subtype)
        code = getattr(e, "exit_code", None)
        tail = secrets.redact(" | ".join(s for s in self.stderr if s))[:200]
        if self.error:
            return self._api_error(None, "error")
        if tail and "not logged in" in tail.lower():
            return "claude CLI: Not logged in (run `claude` to log in)"
        what = f"exited with code {code}" if code is not None else f"failed ({type(e).__name__})"
        return f"the claude CLI {what} before the run finished{': ' + tail if tail else ''}"

    def account(self) -> None:
        """The conversation's usage into the client's: the CLI's result when it came, else the replies seen,
        priced by memd."""
        c, u = self.c, self.c.usage
        m = self.result
        if m is not None and isinstance(m.usage, dict):
            got = m.usage
            u.calls += max(len(self.replies), 1)
            u.input_tokens += _n(got, "input_tokens")
            u.output_tokens += _n(got, "output_tokens")
            u.cache_write += _n(got, "cache_creation_input_tokens")
            u.cache_read += _n(got, "cache_read_input_tokens")
            cost = m.total_cost_usd
            if isinstance(cost, (int, float)) and 0 <= cost < 1e6:
                u.cost_usd += float(cost)
                spent = float(cost)
            else:
                u.unpriced.add(self.model)
                spent = 0.0
        else:
            before = u.cost_usd
            for usage in self.replies.values():
                u.add(c.config, self.model, usage)
            spent = u.cost_usd - before
        u.billing = "plan credit" if c.key_source == "none" else (
            f"claude CLI ({c.key_source})" if c.key_source else "claude CLI")
        if c.on_spend is not None and (spent > 0 or self.session_id):
            c.on_spend(spent, self.session_id)


def _live_clis() -> set[Any]:
    """The CLI processes the SDK has started and not reaped (its own registry, read defensively)."""
    try:
        from claude_agent_sdk._internal.transport import subprocess_cli
    except ImportError:
        return set()
    return set(getattr(subprocess_cli, "_ACTIVE_CHILDREN", ()))


async def _kill_left(before: set[Any]) -> None:
    """Kill a CLI of this conversation the SDK left running: its close escalates to SIGKILL only when not
    cancelled, and a stopped or hung CLI ignores SIGTERM (a leaked model process costs; facts.md section 8)."""
    import asyncio

    for p in _live_clis() - before:
        if getattr(p, "returncode", 0) is None:
            with contextlib.suppress(Exception):
                p.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(p.wait(), 5)


def _n(usage: Mapping[str, Any], name: str) -> int:
    return llm.usage_count(usage.get(name), name)
