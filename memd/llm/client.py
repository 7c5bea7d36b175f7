"""One client for every model call memd makes: key, endpoint, deadline, retries, usage and cost.

API (also used by the hooks' recall)::

    from memd.llm import client as llm
    reason = llm.model_off_reason(config)          # None, or why model work is off (no credential)
    src = llm.credential_source(config)            # which credential: kind, description, off_reason
    c = llm.Client(config, deadline_s=60)          # raises llm.ModelOff without a credential
    msg = c.create(model=config.model.extract_model, system=[...], messages=[...], tools=[...])
    llm.text_of(msg); llm.tool_uses(msg)           # reading a reply
    c.usage.input_tokens, c.usage.cost_usd         # what the calls cost so far
    llm.cached_system("instructions", "manifest")  # system blocks, a cache breakpoint on each
    llm.estimate_tokens(system, tools, messages)   # an upper estimate, before sending

Errors: ``ModelError`` (with ``.reason``, a short text safe for logs) for any failure that ends a
call: HTTP errors after retries, timeouts, connection errors, malformed replies, the deadline.

Why memd retries itself instead of the SDK: the SDK obeys a server's ``retry-after`` without a cap
(facts.md section 7), so one 429 could park a job for hours. The SDK client is built with
``max_retries=0``; ``Client.create`` retries the same statuses (408, 409, 429, 5xx, 529, timeouts,
connection errors) up to ``model.max_retries`` times, and never sleeps or waits past the run's
deadline (``model.run_deadline_s`` or the ``deadline_s`` given): a wait that would cross it ends
the call at once with a ModelError naming the reason.

Thinking (``thinking_params``): ``model.thinking`` decides what a model loop sends. ``auto`` sends
``thinking={"type": "adaptive"}`` and ``max_tokens = model.thinking_max_tokens`` to models that think
by default (``THINKS_BY_DEFAULT``; thinking counts toward max_tokens, so 4,096 would leave the answer
no room), and nothing to the others; ``adaptive`` does that for every model; ``off`` sends
``{"type": "disabled"}``. Side queries (``side=True``) always send ``{"type": "disabled"}``.

Stop reasons (``STOP_*``, ``stop_reason``): only ``end_turn`` and ``tool_use`` mean the model
finished its turn; the loop (``memd.jobs.modelrun.tool_loop``) retries ``max_tokens`` once with a
larger budget, continues ``pause_turn`` and fails on anything else (``StopError``).

Usage (``Usage.add``): the four token kinds of every reply are validated first (non-negative finite
integers at most ``USAGE_CAP``); a bad number counts as 0 and its reason is kept in
``Usage.rejected`` and logged, never a crash. A reply rejected as malformed is counted before it is
rejected (it was billed). A model without a price in ``model.prices`` makes the cost unknown
(``Usage.unpriced``, ``Usage.cost_known``), never $0; ``unpriced_models`` names the configured ones.

``anthropic`` is imported lazily (it takes about a second): only ``Client()`` imports it.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd.errors import MemdError

if TYPE_CHECKING:
    from memd.config import Config

MEMORY_BETA = "context-management-2025-06-27"  # the memory tool's beta flag
CACHE = {"type": "ephemeral"}
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
MODEL_OFF = ("model work is off: no API key or other credential (set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN, "
             "Claude Code's apiKeyHelper, CLAUDE_CODE_USE_BEDROCK or CLAUDE_CODE_USE_VERTEX, or model.api_key_file "
             "in the config); only the deterministic parts run")


# The shortest prefix each model caches (tokens), as Anthropic documents it: a shorter one is neither
# written nor read, with no error. Matched as prefixes of the model id; the longest match wins. Haiku 5.5's
# and Sonnet 5.5's own figures were not found (checked 2026-12-02): taken as Haiku 4.5's and Sonnet 5's.
MIN_CACHE_TOKENS = {"claude-haiku-4-5": 4096, "claude-haiku-5": 4096, "claude-opus-4-5": 4096,
                    "claude-opus-4-6": 4096, "claude-sonnet-4-6": 2048, "claude-sonnet-4-5": 1024,
                    "claude-sonnet-5": 1024}
MIN_CACHE_DEFAULT = 1024


def min_cache_tokens(model: str) -> int:
    best = max((k for k in MIN_CACHE_TOKENS if model.startswith(k)), key=len, default=None)
    return MIN_CACHE_TOKENS[best] if best else MIN_CACHE_DEFAULT


# Prompt-length price bands: a request whose prompt (input, cache writes and cache reads) passes the
# threshold is billed at the factor times every rate of ``model.prices``, output included (Anthropic's
# Claude Haiku 5.5 page: $0.50 / $2.50 over 100,000 tokens; checked 2026-12-02). Prefixes of the model id.
LONG_PROMPT = {"claude-haiku-5-5": (100_000, 5.0)}


def long_prompt_factor(model: str, prompt_tokens: int) -> float:
    best = max((k for k in LONG_PROMPT if model.startswith(k)), key=len, default=None)
    if best is None:
        return 1.0
    threshold, factor = LONG_PROMPT[best]
    return factor if prompt_tokens > threshold else 1.0


# Models that think when no ``thinking`` is sent (facts.md section 7); matched as prefixes (dated ids).
THINKS_BY_DEFAULT = ("claude-sonnet-5-5", "claude-haiku-5-5")
MAX_TOKENS_CEILING = 128_000  # a retry after max_tokens doubles the budget up to this
MAX_TOOL_CALLS = 200  # tool calls per run: a model looping on tool calls is refused past this (a cap)
USAGE_CAP = 10_000_000  # tokens of one kind in one reply: more is not a real count

STOP_END_TURN = "end_turn"
STOP_TOOL_USE = "tool_use"
STOP_MAX_TOKENS = "max_tokens"
STOP_PAUSE_TURN = "pause_turn"
STOP_REFUSAL = "refusal"

log = logging.getLogger("memd.llm")


class ModelOff(MemdError):
    """No API key: model work is off (the jobs run their deterministic parts only)."""


class ModelError(MemdError):
    """A model call that could not finish; ``reason`` is short and safe to log (no content)."""

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class StopError(ModelError):
    """A reply whose ``stop_reason`` ends the run: a refusal, a reply cut at max_tokens twice, or a
    stop reason memd does not know. Nothing of the run is applied."""


# --------------------------------------------------------------------------- key and endpoint


def api_key(config: Config) -> str | None:
    """The API key: the file named by model.api_key_file when set, else $ANTHROPIC_API_KEY."""
    path = config.model.api_key_file
    if path:
        return _key_file(path)
    key = os.environ.get("ANTHROPIC_API_KEY", "").strip()
    return key or None


def _key_file(path: str) -> str | None:
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    # a key file may be an env file ("ANTHROPIC_API_KEY=...")
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return line.split("=", 1)[1].strip().strip("'\"") if "=" in line else line
    return None


# --------------------------------------------------------------------------- credential source

HELPER_TIMEOUT_S = 10.0
HELPER_TTL_S = 300.0  # Claude Code's default (CLAUDE_CODE_API_KEY_HELPER_TTL_MS): 5 minutes
_TRUTHY = frozenset({"1", "true", "yes", "on"})
KINDS = ("api_key", "auth_token", "api_key_helper", "bedrock", "vertex", "none")
_helper_cache: dict[str, tuple[float, str]] = {}


@dataclass(frozen=True)
class Source:
    """Where memd's model credential comes from. ``description`` never holds the secret; ``secret``
    is kept out of repr. ``off_reason`` is set when model work is off with this source."""

    kind: str  # one of KINDS
    description: str
    off_reason: str | None = None
    secret: str | None = field(default=None, repr=False)
    options: dict[str, str] = field(default_factory=dict)  # region, project_id, base_url

    @property
    def on(self) -> bool:
        return self.off_reason is None

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "description": self.description, "model_work": self.on,
                "off_reason": self.off_reason}


def user_settings(config: Config) -> dict[str, Any]:
    """Claude Code's settings memd's credentials come from: the user's settings.json and the managed
    file, merged (``memd.layout.read_settings`` without a repository)."""
    from memd import layout

    return layout.read_settings(layout.claude_dir(None, config.paths.claude_dir))


def with_settings_env(env: Mapping[str, str], settings: dict[str, Any]) -> dict[str, str]:
    """The environment Claude Code's sessions see: ``env`` with the settings' ``env`` block applied
    over it (Claude Code applies it at start)."""
    out = dict(env)
    block = settings.get("env")
    if isinstance(block, dict):
        out.update({str(k): str(v) for k, v in block.items() if isinstance(v, (str, int, float))})
    return out


def credential_source(config: Config, env: Mapping[str, str] | None = None,
                      settings: dict[str, Any] | None = None, *,
                      helper_timeout_s: float = HELPER_TIMEOUT_S) -> Source:
    """The one place that decides memd's model credential. Precedence (Claude Code's own order, with
    memd's explicit key file first):

    1. ``model.api_key_file`` in memd's config (a missing or empty file turns model work off);
    2. ``CLAUDE_CODE_USE_BEDROCK`` (``anthropic.AnthropicBedrock``; region ``AWS_REGION``, else
       ``AWS_DEFAULT_REGION``, else us-east-1; ``ANTHROPIC_BEDROCK_BASE_URL``; needs boto3 unless
       ``AWS_BEARER_TOKEN_BEDROCK`` is set);
    3. ``CLAUDE_CODE_USE_VERTEX`` (``anthropic.AnthropicVertex``; ``CLOUD_ML_REGION``,
       ``ANTHROPIC_VERTEX_PROJECT_ID``, ``ANTHROPIC_VERTEX_BASE_URL``; needs google-auth);
    4. ``ANTHROPIC_AUTH_TOKEN`` (sent as ``Authorization: Bearer``);
    5. ``ANTHROPIC_API_KEY`` (sent as ``x-api-key``);
    6. ``apiKeyHelper`` in Claude Code's settings: a shell command run with a timeout whose stdout is
       the key (sent as ``x-api-key``); it fails or times out: model work is off, with the reason.

    ``env`` defaults to the process environment; the settings' ``env`` block is applied over it as
    Claude Code does. ``settings`` defaults to the user's (and managed) settings.json."""
    if settings is None:
        settings = user_settings(config)
    e = with_settings_env(os.environ if env is None else env, settings)

    def val(name: str) -> str:
        return (e.get(name) or "").strip()

    path = config.model.api_key_file
    if path:
        key = _key_file(path)
        if key:
            return Source("api_key", f"the key file {path} (model.api_key_file)", secret=key)
        return Source("api_key", f"the key file {path} (model.api_key_file)",
                      off_reason=f"model work is off: the key file {path} is missing, unreadable or empty; "
                                 "only the deterministic parts run")
    if val("CLAUDE_CODE_USE_BEDROCK").lower() in _TRUTHY:
        return _bedrock(val)
    if val("CLAUDE_CODE_USE_VERTEX").lower() in _TRUTHY:
        return _vertex(val)
    if val("ANTHROPIC_AUTH_TOKEN"):
        return Source("auth_token", "ANTHROPIC_AUTH_TOKEN (bearer token)", secret=val("ANTHROPIC_AUTH_TOKEN"))
    if val("ANTHROPIC_API_KEY"):
        return Source("api_key", "ANTHROPIC_API_KEY", secret=val("ANTHROPIC_API_KEY"))
    helper = settings.get("apiKeyHelper")
    if isinstance(helper, str) and helper.strip():
        return _run_helper(helper.strip(), e, helper_timeout_s)
    return Source("none", "no credential", off_reason=MODEL_OFF)


def _missing(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def _bedrock(val: Callable[[str], str]) -> Source:
    region = val("AWS_REGION") or val("AWS_DEFAULT_REGION") or "us-east-1"
    opts = {"region": region}
    if val("ANTHROPIC_BEDROCK_BASE_URL"):
        opts["base_url"] = val("ANTHROPIC_BEDROCK_BASE_URL")
    desc = f"Amazon Bedrock (CLAUDE_CODE_USE_BEDROCK, region {region})"
    token = val("AWS_BEARER_TOKEN_BEDROCK") or None
    if token is None and _missing("boto3"):
        return Source("bedrock", desc, options=opts, off_reason=(
            "model work is off: CLAUDE_CODE_USE_BEDROCK is set but the boto3 package is not installed "
            "(pip install 'anthropic[bedrock]' in memd's environment); only the deterministic parts run"))
    if token is None and not _aws_credentials():
        return Source("bedrock", desc, options=opts, off_reason=(
            "model work is off: CLAUDE_CODE_USE_BEDROCK is set but boto3 finds no AWS credentials "
            "(environment, ~/.aws, SSO or instance role); only the deterministic parts run"))
    return Source("bedrock", desc, secret=token, options=opts)


def _aws_credentials() -> bool:
    """Whether boto3's usual chain finds AWS credentials (the SDK signs Bedrock calls with them)."""
    import importlib

    try:
        boto3: Any = importlib.import_module("boto3")
        return boto3.Session().get_credentials() is not None
    except Exception:  # a broken AWS config: no credentials memd can use
        return False


def _vertex(val: Callable[[str], str]) -> Source:
    region = val("CLOUD_ML_REGION")
    project = val("ANTHROPIC_VERTEX_PROJECT_ID")
    opts = {"region": region, "project_id": project}
    if val("ANTHROPIC_VERTEX_BASE_URL"):
        opts["base_url"] = val("ANTHROPIC_VERTEX_BASE_URL")
    desc = f"Google Vertex AI (CLAUDE_CODE_USE_VERTEX, region {region or '-'}, project {project or '-'})"
    missing = [n for n, v in (("CLOUD_ML_REGION", region), ("ANTHROPIC_VERTEX_PROJECT_ID", project)) if not v]
    if missing:
        return Source("vertex", desc, options=opts, off_reason=(
            f"model work is off: CLAUDE_CODE_USE_VERTEX is set but {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not; only the deterministic parts run"))
    if _missing("google.auth"):
        return Source("vertex", desc, options=opts, off_reason=(
            "model work is off: CLAUDE_CODE_USE_VERTEX is set but the google-auth package is not installed "
            "(pip install 'anthropic[vertex]' in memd's environment); only the deterministic parts run"))
    return Source("vertex", desc, options=opts)


def _run_helper(command: str, env: Mapping[str, str], timeout_s: float) -> Source:
    """Run Claude Code's apiKeyHelper (``sh -c``); its stdout's last non-empty line is the key. The key
    is cached for HELPER_TTL_S per command; neither the key nor the helper's output is ever logged."""
    import subprocess

    desc = "apiKeyHelper in Claude Code's settings.json"
    now = time.monotonic()
    hit = _helper_cache.get(command)
    if hit is not None and now - hit[0] < HELPER_TTL_S:
        return Source("api_key_helper", desc, secret=hit[1])
    why = ""
    try:
        proc = subprocess.run(command, shell=True, env=dict(env), capture_output=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        why = f"did not finish within {timeout_s:g} s"
    except OSError as e:
        why = f"could not be run ({type(e).__name__})"
    else:
        lines = [ln.strip() for ln in proc.stdout.decode("utf-8", "replace").splitlines() if ln.strip()]
        if proc.returncode != 0:
            why = f"exited with status {proc.returncode}"
        elif not lines:
            why = "printed no key"
        else:
            _helper_cache[command] = (now, lines[-1])
            return Source("api_key_helper", desc, secret=lines[-1])
    return Source("api_key_helper", desc, off_reason=f"model work is off: apiKeyHelper {why}; "
                                                     "only the deterministic parts run")


def model_off_reason(config: Config) -> str | None:
    """None when a credential is there; else the one sentence that says model work is off (the
    ``api`` backend's: recall always calls the API)."""
    return credential_source(config).off_reason


def jobs_off_reason(config: Config) -> str | None:
    """Why catch-up and dream cannot reach a model with ``model.backend`` (None: they can). With the
    ``api`` backend and no credential, a logged-in Claude Code CLI is named, with the setting that would
    use it (``memd.llm.plan.logged_in_hint``): memd never switches backends on its own."""
    if config.model.backend == "claude-plan":
        from memd.llm import plan

        return plan.off_reason(config)
    source = credential_source(config)
    if source.off_reason is None or source.kind != "none":
        return source.off_reason
    from memd.llm import plan

    hint = plan.logged_in_hint(config)
    return source.off_reason + (f"; {hint}" if hint else "")


# --------------------------------------------------------------------------- usage and cost


def price_for(config: Config, model: str) -> dict[str, float] | None:
    """Prices of model: an exact entry, else the longest entry that prefixes it (dated ids)."""
    prices = config.model.prices
    if model in prices:
        return prices[model]
    best = max((k for k in prices if model.startswith(k)), key=len, default=None)
    return prices[best] if best else None


def unpriced_models(config: Config) -> list[str]:
    """The configured models (``model.extract_model``, ``model.dream_model``) ``model.prices`` has no
    price for: their runs' cost is unknown (never $0), and ``memd config validate`` and the daemon's
    start warn about them."""
    models = dict.fromkeys((config.model.extract_model, config.model.dream_model))
    return [m for m in models if m and price_for(config, m) is None]


def usage_count(value: Any, name: str, rejected: list[str] | None = None) -> int:
    """A token count from the API as a sane int: a non-negative finite number at most USAGE_CAP.
    Anything else counts as 0, with the reason appended to ``rejected`` and logged (never raised).
    A missing field (None) is 0 without a reason."""
    if value is None:
        return 0
    why = ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        why = f"not a number ({type(value).__name__})"
    elif isinstance(value, float) and not math.isfinite(value):
        why = "not finite"
    elif value < 0:
        why = "negative"
    elif value > USAGE_CAP:
        why = f"over the cap of {USAGE_CAP:,}"
    if why:
        reason = f"usage.{name} {why}: counted as 0"
        log.warning("model usage rejected: %s", reason)
        if rejected is not None and reason not in rejected:
            rejected.append(reason)
        return 0
    return int(value)


@dataclass
class Usage:
    """Tokens and cost of a run's calls. The four kinds are kept apart, as the API reports them:
    ``input_tokens`` is the uncached input only; ``total`` is the sum of all four."""

    calls: int = 0
    input_tokens: int = 0  # uncached input
    output_tokens: int = 0
    cache_write: int = 0
    cache_read: int = 0
    cost_usd: float = 0.0
    unpriced: set[str] = field(default_factory=set)  # models missing from model.prices: cost unknown
    rejected: list[str] = field(default_factory=list)  # usage numbers that failed validation (why)
    batched_calls: int = 0  # replies that came through Message Batches (priced at the batch rate)
    batch_saved_usd: float = 0.0  # what those replies would have cost more at the list price
    billing: str = ""  # the claude-plan backend: "plan credit" when the CLI used the plan's login

    @property
    def cost_known(self) -> bool:
        """False when a call's model has no price: ``cost_usd`` is then only the priced calls' part."""
        return not self.unpriced

    @property
    def total_input(self) -> int:
        return self.input_tokens + self.cache_write + self.cache_read

    @property
    def total(self) -> int:
        return self.total_input + self.output_tokens

    def add(self, config: Config, model: str, usage: Any, *, rate: float = 1.0) -> None:
        """Count one reply's usage; ``rate``: the share of the list price it is billed at (a Message
        Batches reply: ``memd.llm.batch.BATCH_RATE``, half)."""
        def n(name: str) -> int:
            v = getattr(usage, name, None) if not isinstance(usage, dict) else usage.get(name)
            return usage_count(v, name, self.rejected)

        i, o = n("input_tokens"), n("output_tokens")
        w, r = n("cache_creation_input_tokens"), n("cache_read_input_tokens")
        self.calls += 1
        if rate != 1.0:
            self.batched_calls += 1
        self.input_tokens += i
        self.output_tokens += o
        self.cache_write += w
        self.cache_read += r
        p = price_for(config, model)
        if p is None:
            self.unpriced.add(model)
            return
        full = (i * p["input"] + o * p["output"] + w * p["cache_write"] + r * p["cache_read"]) / 1e6
        full *= long_prompt_factor(model, i + w + r)
        self.cost_usd += full * rate
        self.batch_saved_usd += full - full * rate

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_write": self.cache_write, "cache_read": self.cache_read, "total_tokens": self.total,
                "cost_usd": round(self.cost_usd, 6), "unpriced": sorted(self.unpriced),
                "batched_calls": self.batched_calls}


# --------------------------------------------------------------------------- thinking and deadlines


def thinks_by_default(model: str) -> bool:
    return model.startswith(THINKS_BY_DEFAULT)


def thinking_params(config: Config, model: str, *, side: bool = False) -> tuple[int, dict[str, Any]]:
    """``(max_tokens, extra request params)`` for one call of ``model`` (see the module doc)."""
    m = config.model
    if side or m.thinking == "off":
        return m.max_tokens, {"thinking": {"type": "disabled"}}
    if m.thinking == "adaptive" or thinks_by_default(model):
        extra: dict[str, Any] = {"thinking": {"type": "adaptive"}}
        if m.effort:
            extra["output_config"] = {"effort": m.effort}
        return max(m.thinking_max_tokens, m.max_tokens), extra
    return m.max_tokens, {}


def run_deadline(config: Config, calls: int) -> float:
    """A run's deadline in seconds: its call cap times the per-call timeout, at most
    ``model.run_deadline_s``."""
    return min(config.model.run_deadline_s, max(1, calls) * config.model.timeout_s)


def stop_reason(message: Any) -> str:
    return str(getattr(message, "stop_reason", "") or "")


# --------------------------------------------------------------------------- reading replies


def blocks(message: Any) -> list[Any]:
    content = getattr(message, "content", None)
    return list(content) if isinstance(content, list) else []


def text_of(message: Any) -> str:
    return "".join(getattr(b, "text", "") or "" for b in blocks(message) if getattr(b, "type", None) == "text")


def tool_uses(message: Any) -> list[Any]:
    return [b for b in blocks(message) if getattr(b, "type", None) == "tool_use"]


def cached_system(*parts: str) -> list[dict[str, Any]]:
    """System blocks, each with its own cache breakpoint. The jobs pass two: the shared instructions
    (the same bytes for every project, so tools + instructions are one prefix every project's runs
    read from the cache) and the project's material (the manifest, CLAUDE.md), cached per project.
    With the moving breakpoint on the newest user turn that is three of the API's four."""
    return [{"type": "text", "text": p, "cache_control": dict(CACHE)} for p in parts if p]


def estimate_tokens(*parts: Any) -> int:
    """A cheap upper estimate of the tokens of ``parts`` (strings, or JSON-able request pieces), made
    before a request is sent (the token caps are enforced before sending; nothing is asked of the API).
    English text and code run at about 4 characters per token; this counts 3, and every byte a
    character takes past the first as half a token more (a CJK character, 3 bytes, counts 1.33), so
    it errs high: a cap enforced with it is not passed."""
    import json

    n = 0
    for p in parts:
        text = p if isinstance(p, str) else json.dumps(p, ensure_ascii=False, default=str)
        chars = len(text)
        extra = len(text.encode("utf-8", "surrogatepass")) - chars
        n += -(-chars // 3) + extra // 2
    return n


# --------------------------------------------------------------------------- the client


def _sdk_client(anthropic: Any, config: Config, source: Source, base_url: str | None) -> Any:
    """The SDK client for a source that is on: Anthropic with the key or bearer token, or the SDK's
    own AnthropicBedrock / AnthropicVertex. A constructor error becomes ModelOff (never a traceback)."""
    kwargs: dict[str, Any] = {"max_retries": 0, "timeout": config.model.timeout_s}
    url = base_url or source.options.get("base_url") or (
        config.model.base_url if source.kind not in ("bedrock", "vertex") else "")
    if url:  # else the SDK reads ANTHROPIC_BASE_URL (or its provider's variable) itself
        kwargs["base_url"] = url
    try:
        if source.kind == "bedrock":
            if source.secret:
                kwargs["api_key"] = source.secret
            return anthropic.AnthropicBedrock(aws_region=source.options["region"], **kwargs)
        if source.kind == "vertex":
            return anthropic.AnthropicVertex(region=source.options["region"],
                                             project_id=source.options["project_id"], **kwargs)
        key = "auth_token" if source.kind == "auth_token" else "api_key"
        return anthropic.Anthropic(**{key: source.secret}, **kwargs)
    except Exception as e:  # e.g. a provider's missing dependency or bad setting
        raise ModelOff(f"model work is off: {source.description}: the SDK client could not be built "
                       f"({type(e).__name__}); only the deterministic parts run") from None


class Client:
    """A Messages API client with memd's deadline, retries and usage accounting."""

    def __init__(self, config: Config, *, deadline_s: float | None = None, api_key_value: str | None = None,
                 base_url: str | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        source = (Source("api_key", "given", secret=api_key_value) if api_key_value
                  else credential_source(config))
        if not source.on:
            raise ModelOff(source.off_reason or MODEL_OFF)
        import anthropic

        self.config = config
        self.source = source
        self._anthropic = anthropic
        self._sleep = sleep
        self._clock = clock
        self.deadline = clock() + (deadline_s if deadline_s is not None else config.model.run_deadline_s)
        self.usage = Usage()
        self.sdk = _sdk_client(anthropic, config, source, base_url)

    def remaining(self) -> float:
        return self.deadline - self._clock()

    def close(self) -> None:
        self.sdk.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def params(self, *, model: str, messages: Sequence[dict[str, Any]], system: Any = None,
               tools: Iterable[dict[str, Any]] = (), max_tokens: int | None = None, **extra: Any) -> dict[str, Any]:
        """The body of one Messages request (what ``create`` sends, and a Message Batches request holds)."""
        params: dict[str, Any] = {"model": model, "max_tokens": max_tokens or self.config.model.max_tokens,
                                  "messages": list(messages)}
        if system:
            params["system"] = system
        tool_list = list(tools)
        if tool_list:
            params["tools"] = tool_list
        params.update(extra)
        return params

    def account(self, model: str, msg: Any, *, rate: float = 1.0) -> Any:
        """A reply, counted then validated: one memd rejects as malformed was still billed, so its
        usage counts first (``rate``: the share of the list price it is billed at). Raises ModelError
        for a malformed reply."""
        self.usage.add(self.config, model, getattr(msg, "usage", None), rate=rate)
        _validate(msg)
        return msg

    def create(self, *, model: str, messages: Sequence[dict[str, Any]], system: Any = None,
               tools: Iterable[dict[str, Any]] = (), max_tokens: int | None = None,
               betas: Sequence[str] = (), beta: bool = True, timeout: float | None = None,
               **extra: Any) -> Any:
        """One Messages call (the beta endpoint unless beta=False), retried within the deadline."""
        params = self.params(model=model, messages=messages, system=system, tools=tools, max_tokens=max_tokens,
                             **extra)
        if beta and betas:
            params["betas"] = list(betas)
        attempt = 0
        while True:
            left = self.remaining()
            if left <= 0.5:
                raise ModelError(f"run deadline reached after {self.usage.calls} call(s)")
            per_call = min(timeout or self.config.model.timeout_s, left)
            try:
                endpoint = self.sdk.beta.messages if beta else self.sdk.messages
                msg = endpoint.create(timeout=per_call, **params)
            except self._anthropic.APIStatusError as e:
                err = ModelError(_status_reason(e), status=e.status_code)
                retry_after = _retry_after(getattr(e, "response", None))
                retryable = e.status_code in RETRY_STATUSES and _should_retry(getattr(e, "response", None))
            except self._anthropic.APITimeoutError:
                err, retry_after, retryable = ModelError(f"timed out after {per_call:.0f} s"), None, True
            except self._anthropic.APIConnectionError as e:
                err, retry_after, retryable = ModelError(f"connection failed ({_first_line(e)})"), None, True
            except (self._anthropic.APIError, ValueError, TypeError) as e:
                # a reply the SDK could not read (not JSON, wrong shape): not worth retrying
                raise ModelError(f"malformed reply ({type(e).__name__})") from None
            else:
                return self.account(model, msg)
            if not retryable or attempt >= self.config.model.max_retries:
                raise err
            wait = retry_after if retry_after is not None else min(8.0, 0.5 * 2 ** attempt) * (
                1 - 0.25 * random.random())
            if wait >= self.remaining() - 0.5:
                raise ModelError(f"{err.reason}; retrying after {wait:.0f} s would pass the run deadline",
                                 status=err.status)
            self._sleep(max(0.0, wait))
            attempt += 1


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0][:200] if s else type(e).__name__


def _status_reason(e: Any) -> str:
    kind = ""
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("type"), str):
            kind = f" {err['type'][:60]}"
    return f"HTTP {e.status_code}{kind}"


def _retry_after(response: Any) -> float | None:
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        v = headers.get(name)
        if v is None:
            continue
        try:
            return max(0.0, float(v) / scale)
        except ValueError:
            continue
    return None


def _should_retry(response: Any) -> bool:
    headers = getattr(response, "headers", None)
    return headers is None or headers.get("x-should-retry") != "false"


def _validate(msg: Any) -> None:
    content = getattr(msg, "content", None)
    if not isinstance(content, list):
        raise ModelError("malformed reply (no content list)")
    for b in content:
        t = getattr(b, "type", None)
        if not isinstance(t, str):
            raise ModelError("malformed reply (a content block without a type)")
        if t == "tool_use" and not (isinstance(getattr(b, "name", None), str)
                                    and isinstance(getattr(b, "input", None), dict)):
            raise ModelError("malformed reply (a tool_use block without name or input)")


@dataclass
class LoopResult:
    """What one conversation of a job came to (``memd.jobs.modelrun.tool_loop`` with the API, the plan
    client's ``converse`` through the CLI). Here, below both, so neither imports the other."""

    final_text: str = ""
    turns: int = 0  # model calls made, a max_tokens retry included
    stop_reason: str = ""
    stop_reasons: list[str] = field(default_factory=list)  # of every reply, in order
    max_tokens_retries: int = 0
    hit_turn_cap: bool = False
    tool_calls: int = 0
    refused: int = 0
    notes: list[str] = field(default_factory=list)
    caps: list[str] = field(default_factory=list)  # the caps the conversation hit (a partial run)
