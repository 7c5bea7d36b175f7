"""memd's configuration: one schema (the record classes below) is the single source of truth.

Every key has a type (its annotation), a default and a description (``key(...)``). Loading
reports every problem at once with its key path, and reports unknown keys instead of
ignoring them. ``memd config show`` and the tests over ``config.example.toml`` are built
from the same schema.

Kept import-light: the hook path loads the config on every memory write. The sections are
:class:`memd.record.Record` classes (``class XConfig(Record):`` with ``key(...)`` fields, not
``@dataclass``: importing ``dataclasses`` and building its classes cost ~15 ms there); a flat file (tables
of scalar keys, as most are) is read by ``memd.core.tomlflat``, ``tomllib`` (~25 ms of start-up) only for
anything else, and only the sections a file sets are judged (issue 35: `memd check NAME` with a config
file); neither ``typing`` nor ``pathlib`` is imported here.
On config objects use :func:`replace`, :func:`fields` and :func:`astuple` from this module (the
``dataclasses`` functions do not apply to them).
"""

from __future__ import annotations

import os

from memd.core.budget import Limits
from memd.errors import ConfigError
from memd.record import Record, field
from memd.record import astuple as astuple  # re-exported: the dataclasses functions, for config records
from memd.record import fields as fields
from memd.record import key as key  # re-exported: the schema's field declaration
from memd.record import replace as replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Container, Iterable, Mapping
    from pathlib import Path
    from typing import Any

BudgetConfig = Limits  # the [budget] section: the core's value type (memd.core.budget), built here


class PathsConfig(Record):
    """Where memd looks and keeps its own files."""

    claude_dir: str = key("", "Claude Code's folder (default: $CLAUDE_CONFIG_DIR or ~/.claude).")
    state_dir: str = key("", "memd's state, logs, snapshots and reports (default: $XDG_STATE_HOME/memd).")


class TranscriptsConfig(Record):
    """Reading session transcripts."""

    active_minutes: float = key(
        15.0, "A session written to within this many minutes counts as active (jobs leave it alone).", min=0)
    max_line_bytes: int = key(
        8_000_000, "Transcript lines longer than this are skipped by streaming (memory stays bounded).",
        min=4096)
    render_tool_result_chars: int = key(400, "Characters of each tool result kept when rendering for a model.",
                                        min=0)
    render_thinking_chars: int = key(300, "Characters of each thinking block kept when rendering.", min=0)
    render_max_chars: int = key(120_000, "Most characters of one rendered session span.", min=1000)


class ScheduleConfig(Record):
    """When the daemon's jobs run (local time)."""

    dream_window: str = key("01:00-04:59", "Window in which the nightly dream minute is picked once.")
    checkin_window: str = key("07:00-08:59", "Window in which the morning check-in minute is picked once.")
    catchup_cron: str = key(
        "0 */2 * * *", "Crontab of the catch-up job, as crontab(5) reads it (0 and 7 are Sunday; names, @daily work).")


class DreamConfig(Record):
    """Gates and guards of the nightly consolidation."""

    min_hours: float = key(24.0, "Hours since the project's last consolidation before it may dream again.",
                           min=0)
    min_sessions: int = key(5, "Sessions touched since the last consolidation before a dream runs.", min=0)
    require_idle: bool = key(True, "Skip projects with an active session.")
    honour_lock: bool = key(True, "Honour Claude Code's .consolidate-lock (and take it while dreaming).")
    lock_stale_minutes: float = key(60.0, "Age after which a .consolidate-lock counts as stale.", min=1)
    max_delete_share: float = key(
        0.25, "Largest share of index entries one run may delete or merge away.", min=0, max=1)
    max_shrink_share: float = key(
        0.5, "Largest share of topic-file body text one run may remove (merges shrink text; wipes are refused).",
        min=0, max=1)
    apply: str = key("auto", "'auto' applies guarded runs; 'review' keeps the proposed diff for review.",
                     choices=("auto", "review"))
    max_tool_turns: int = key(25, "Model calls (tool turns) one dream may make.", min=1)
    max_searches: int = key(12, "Transcript searches one dream may run (each returns at most 50 short lines).",
                            min=0)
    max_input_tokens: int = key(
        400_000, "Input-token budget of one dream across all its calls (cache reads included), checked before "
        "every call; a dream that would pass it stops (partial). Sized for a 200-file folder: its orientation "
        "(~25K tokens) re-read by about 15 calls.", min=1000)
    scope: str = key(
        "changed", "What a dream is handed: 'changed' gives the index, the manifest and the text of the files "
        "changed since the last dream (known from memd's history; none of them and a healthy index: the "
        "model is not called); 'all' is the old dream: index and manifest, every file read on request.",
        choices=("changed", "all"))
    changed_max_chars: int = key(
        60_000, "Characters of changed files' text one dream is handed up front (about 15,000 tokens); the "
        "rest are named and read on request.", min=0)
    evidence_max_chars: int = key(
        16_000, "Characters of the evidence memd computes locally (possible duplicates with both files' text, "
        "passed dates, unused memories) that one dream is handed up front (about 4,000 tokens).", min=0)
    unused_after_loads: int = key(
        20, "A memory no session read, recalled or wrote while this many sessions loaded the index is "
        "shown to the dream (and in memd status) as unused: a candidate, never deleted by memd.", min=1)


class DaemonConfig(Record):
    """The long-running process."""

    debounce_quiet_s: float = key(0.5, "Quiet period after the last event on a path before it is handled.",
                                  min=0)
    debounce_max_s: float = key(3.0, "Longest a busy path waits before it is handled anyway.", min=0)
    reconcile_interval_s: float = key(300.0, "Seconds between rescans that catch events the watcher dropped.",
                                      min=5)
    stop_timeout_s: float = key(
        20.0, "Bound on a graceful stop (shorter than the service manager's stop timeout).", min=1)
    auto_relief: bool = key(
        False, "After an 'over' warning, once the project is idle, rebuild the index (and queue a dream).")
    isolate_jobs: bool = key(
        True, "Run each dream and catch-up in a child process: the daemon's memory stays small whatever "
        "the jobs did, and a crash, hang or leak is confined to one run.")
    job_timeout_s: float = key(
        4500.0, "Hard limit on one project's dream or catch-up in its child process (keep it above "
        "model.run_deadline_s); past it the child is killed and the run recorded as failed.", min=5)


class ModelConfig(Record):
    """The model behind catch-up, dream and recall."""

    backend: str = key(
        "api", "Who runs catch-up and dream: 'api' calls the Messages API with memd's client (an API key, "
        "apiKeyHelper, Bedrock or Vertex); 'claude-plan' runs them through your own Claude Code CLI and the login "
        "you made there (a Claude plan's Agent SDK credit; needs the plan extra; docs/plan.md). Recall stays on 'api'.",
        choices=("api", "claude-plan"))
    claude_cli: str = key("", "With backend = 'claude-plan': the claude executable to run ('' = the one on PATH, "
                          "else Claude Code's usual install places, else the Agent SDK's bundled one).")
    monthly_budget_usd: float = key(
        5.0, "With backend = 'claude-plan': the most memd's jobs may spend in a calendar month (UTC), as the CLI "
        "reports it; past it model work stops until the month ends (memd status says so). 0 = no cap.", min=0)
    api_key_file: str = key("", "File holding the API key (default: the ANTHROPIC_API_KEY variable).")
    base_url: str = key("", "Messages API endpoint (default: ANTHROPIC_BASE_URL, else Anthropic's).")
    # Both defaults are Haiku 5.5 (docs/model-jobs.md, "Default models"): a tenth of Haiku 4.5's list
    # price, a twentieth of Sonnet 5.5's; the guards bound what any model's run can do to a folder.
    extract_model: str = key("claude-haiku-5-5", "Cheap model for catch-up extraction and recall selection.")
    # claude-sonnet-4-5 reaches end-of-life on 2026-11-30 (the SDK's deprecation table).
    dream_model: str = key("claude-haiku-5-5", "Model for nightly dreams (claude-sonnet-5-5 for a stronger, "
                           "about twenty times dearer one).")
    max_tokens: int = key(4096, "max_tokens of one model call without thinking.", min=64)
    thinking: str = key(
        "auto", "Thinking in catch-up and dream calls: 'auto' sends adaptive thinking (with "
        "thinking_max_tokens) to models that think by default (claude-sonnet-5-5, claude-haiku-5-5) and "
        "nothing to others; 'adaptive' sends it to every model; 'off' disables it. Small side queries "
        "(recall's selection) never think.", choices=("auto", "off", "adaptive"))
    thinking_max_tokens: int = key(
        32_000, "max_tokens of one call with thinking on (thinking counts toward it).", min=1024)
    effort: str = key("", "output_config.effort sent with thinking on ('' = the model's default).",
                      choices=("", "low", "medium", "high", "xhigh", "max"))
    timeout_s: float = key(300.0, "Timeout of one model call (a thinking reply may take minutes).", min=1)
    run_deadline_s: float = key(
        3600.0, "Bound on one job run's deadline across all its calls and retries; the deadline is the "
        "run's call cap times timeout_s, at most this.", min=5)
    max_retries: int = key(2, "Retries of one call (rate limits, overload, 5xx) within the deadline.", min=0)
    batch: str = key(
        "auto", "Message Batches (half the list price) for the first call of a dream and of each catch-up "
        "conversation: 'auto' only where no one waits on the run (the daemon's scheduled catch-ups and nightly "
        "dreams; never a command's run), 'on' for every catch-up and dream run, 'off' never. A batch that errors, "
        "expires or is not done within batch_wait_minutes is cancelled and the call made at once at the full price "
        "(docs/model-jobs.md).", choices=("auto", "on", "off"))
    batch_wait_minutes: float = key(
        10.0, "Longest a run waits for its batched first calls, in all, before it cancels a pending batch and calls "
        "at once; the wait does not count toward run_deadline_s, and in a child process it is cut to what "
        "daemon.job_timeout_s leaves after run_deadline_s.", min=0)
    batch_poll_s: float = key(30.0, "Seconds between two polls of a pending batch.", min=0.05)
    tool_max_file_bytes: int = key(32_000, "Largest memory file the model may write through the memory tool.",
                                   min=1024)
    tool_max_run_bytes: int = key(1_000_000, "Bytes the model may write through the memory tool in one run.",
                                  min=4096)
    prices: dict[str, dict[str, float]] = key(
        {
            "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.1},
            "claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3},
            "claude-sonnet-4-6": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3},
            # cache reads cut from 0.20 to 0.10 on 2026-10-07
            "claude-sonnet-5-5": {"input": 2.0, "output": 10.0, "cache_write": 2.5, "cache_read": 0.1},
            # prompts up to 100K tokens (input + cache); a longer prompt is billed 5x (llm.LONG_PROMPT)
            "claude-haiku-5-5": {"input": 0.1, "output": 0.5, "cache_write": 0.125, "cache_read": 0.01},
            "claude-opus-4-5": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.5},
        },
        "US dollars per million tokens, per model: input, output, cache_write (5-minute), cache_read; checked "
        "against Anthropic's published prices on 2026-12-01. A model without a price has its runs' cost "
        "unknown (never $0); config validate and the daemon's start warn about it.")


class CatchupConfig(Record):
    """The two-hourly extraction of memories sessions missed."""

    max_sessions: int = key(10, "Most sessions one catch-up run sends to the model.", min=0)
    max_input_tokens: int = key(200_000, "Input-token budget of one catch-up run across all calls.", min=1000)
    max_tool_turns: int = key(5, "Tool turns the model gets per session span.", min=1)
    max_tries: int = key(
        5, "Tries of a span whose run failed after a model call, was refused or stopped at a cap, before "
        "it is parked (shown by memd status and memd report; `memd catchup --retry PROJECT` tries again).", min=1)
    retry_hours: float = key(
        24.0, "After a span's third try, hours between its further tries (the first three follow the "
        "catch-up's schedule).", min=0)


class HooksConfig(Record):
    """What memd says inside Claude Code sessions."""

    near_ratio: float = key(0.8, "Share of the index budget at which PostToolUse asks the model to condense.",
                            min=0.1, max=1.0)
    cc_budget_notes: str = key(
        "auto", "Whether Claude Code gives its own near/over note after a MEMORY.md write, so memd adds only the "
        "hidden entries: 'auto' decides from the session's Claude Code version (2.1.210 and later), 'yes' or "
        "'no' forces it.", choices=("auto", "yes", "no"))
    team_pii: bool = key(True, "In team/ memory also deny personal data (e-mail addresses, phone numbers).")
    guard_max_chars: int = key(
        1_000_000, "Largest memory write (characters of new text, or of the edited file) the PreToolUse guard "
        "checks; a larger one is denied with the reason, never let through unchecked. The default is checked in "
        "about 1-2 s even when dense with secrets, well within the hook's 10 s.", min=10_000)
    recall: bool = key(False, "UserPromptSubmit recall: select relevant memories with the model (opt-in).")
    recall_max_files: int = key(5, "Memories recall injects per prompt.", min=1, max=20)
    recall_file_bytes: int = key(4096, "Bytes of each recalled file.", min=256)
    recall_session_bytes: int = key(61_440, "Bytes recall injects per session in all.", min=1024)
    recall_timeout_s: float = key(8.0, "Time recall may take before the prompt goes on untouched.", min=0.5)


class LoggingConfig(Record):
    """memd's own logs (never memory content, never secrets)."""

    level: str = key("info", "Lowest level logged.", choices=("debug", "info", "warning", "error"))
    max_bytes: int = key(
        10_000_000, "Size at which memd.log (and, under launchd, launchd.out.log and launchd.err.log) is rotated "
        "to .1, .2, ...; 0 never rotates (leave it to logrotate).", min=0)
    backups: int = key(5, "Rotated files kept beside each log (memd.log.1 is the newest).", min=1, max=100)


class SyncConfig(Record):
    """Memory that follows you across machines through a private git remote of yours (docs/sync.md)."""

    remote: str = key("", "The git remote memory is synced through (ssh or https, as `git` reaches it with your own "
                      "ssh config and credential helpers); '' turns sync off.")
    interval_minutes: float = key(30.0, "Minutes between the daemon's syncs (it also syncs after every applied run).",
                                  min=1)
    machine: str = key("", "This machine's name in sync commits (default: the hostname).")
    exclude: list[str] = key([], "Projects never synced: folder names under projects/ or identities.")
    identities: dict[str, str] = key(
        {}, "Explicit identities: folder name under projects/ -> a name the same on every machine (for projects "
        "without an origin URL, or to join two).")
    timeout_s: float = key(60.0, "Bound on one git fetch or push.", min=1)
    push_attempts: int = key(3, "Fetch-merge-push rounds when someone else pushed first.", min=1, max=10)


class UiConfig(Record):
    """The local memory viewer (`memd ui`, docs/ui.md), served by the daemon when asked."""

    serve: bool = key(False, "The daemon serves the viewer on 127.0.0.1 (needs the ui extra: pip install "
                      "'memd-claude[ui]'); its URL, with the token of this start, is in the state folder's "
                      "ui-url.json, and `memd ui` prints it.")
    port: int = key(0, "The daemon's viewer port on 127.0.0.1 (0: a free one the system picks at each start).",
                    min=0, max=65535)


class Config(Record):
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    transcripts: TranscriptsConfig = field(default_factory=TranscriptsConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    dream: DreamConfig = field(default_factory=DreamConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    catchup: CatchupConfig = field(default_factory=CatchupConfig)
    hooks: HooksConfig = field(default_factory=HooksConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    sync: SyncConfig = field(default_factory=SyncConfig)
    ui: UiConfig = field(default_factory=UiConfig)


# --------------------------------------------------------------------------- schema walking


class KeyInfo(Record):
    path: str
    type: Any
    default: Any
    doc: str
    min: float | None
    max: float | None
    choices: tuple[str, ...] | None


_SIMPLE: dict[str, Any] = {"int": int, "float": float, "str": str, "bool": bool}


def _hints(cls: type[Record]) -> dict[str, Any]:
    """The field types of a section: its annotations (strings, see the __future__ import) evaluated
    here, as typing.get_type_hints would, without importing typing. A plain name (``int``, a section's
    class) is looked up, not evaluated: start-up paths read the schema of every section a file sets."""
    ns = globals()
    out: dict[str, Any] = {}
    for f in fields(cls):
        tp = cls.__annotations__[f.name]
        if isinstance(tp, str):
            tp = _SIMPLE.get(tp) or (ns[tp] if tp.isidentifier() else eval(tp, ns))  # our own annotations
        out[f.name] = tp
    return out


def sections() -> list[tuple[str, type[Any]]]:
    hints = _hints(Config)
    return [(f.name, hints[f.name]) for f in fields(Config)]


def schema() -> list[KeyInfo]:
    """Every key of the schema, in order."""
    return [info for name, cls in sections() for info in _section_schema(name, cls)]


def _section_schema(name: str, cls: type[Any]) -> list[KeyInfo]:
    """The keys of one section, in order."""
    hints = _hints(cls)
    inst = cls()
    out: list[KeyInfo] = []
    for f in fields(cls):
        m = f.metadata
        out.append(KeyInfo(f"{name}.{f.name}", hints[f.name], getattr(inst, f.name), m["doc"],
                           m["min"], m["max"], m["choices"]))
    return out


def _type_name(tp: Any) -> str:
    origin = getattr(tp, "__origin__", None)  # dict[...] and list[...] (typing.get_origin, without typing)
    if origin is dict:
        return "table"
    if origin is list:
        return "list"
    return getattr(tp, "__name__", str(tp))


def _check(info: KeyInfo, value: Any) -> tuple[Any, list[str]]:
    tp = info.type
    p = info.path
    if tp is bool:
        if not isinstance(value, bool):
            return None, [f"{p}: expected true or false, got {value!r}"]
        return value, []
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return None, [f"{p}: expected an integer, got {value!r}"]
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, [f"{p}: expected a number, got {value!r}"]
        value = float(value)
    elif tp is str:
        if not isinstance(value, str):
            return None, [f"{p}: expected a string, got {value!r}"]
        if info.choices and value not in info.choices:
            return None, [f"{p}: expected one of {', '.join(info.choices)}, got {value!r}"]
        return value, []
    elif getattr(tp, "__origin__", None) is dict:  # dict[...] (typing.get_origin without typing)
        if tp.__args__[1] is str:
            return _check_strings(p, value, table=True)
        return _check_prices(p, value)
    elif getattr(tp, "__origin__", None) is list:
        return _check_strings(p, value, table=False)
    if info.min is not None and value < info.min:
        return None, [f"{p}: must be at least {info.min:g}, got {value!r}"]
    if info.max is not None and value > info.max:
        return None, [f"{p}: must be at most {info.max:g}, got {value!r}"]
    return value, []


def _check_strings(p: str, value: Any, *, table: bool) -> tuple[Any, list[str]]:
    """A list of strings, or a table of strings (string keys, string values)."""
    items = value.items() if table and isinstance(value, dict) else enumerate(value) \
        if not table and isinstance(value, list) else None
    if items is None:
        return None, [f"{p}: expected a {'table' if table else 'list'} of strings, got {value!r}"]
    bad = [f"{p}.{k}" if table else f"{p}[{k}]" for k, v in items if not isinstance(v, str) or not v.strip()]
    if bad:
        return None, [f"{b}: expected a non-empty string" for b in bad]
    return (dict(value) if table else list(value)), []


_PRICE_KEYS = ("input", "output", "cache_write", "cache_read")


def _check_prices(p: str, value: Any) -> tuple[Any, list[str]]:
    if not isinstance(value, dict):
        return None, [f"{p}: expected a table of models, got {value!r}"]
    errors: list[str] = []
    out: dict[str, dict[str, float]] = {}
    for model, row in value.items():
        if not isinstance(row, dict):
            errors.append(f"{p}.{model}: expected a table with {', '.join(_PRICE_KEYS)}")
            continue
        for k in row:
            if k not in _PRICE_KEYS:
                errors.append(f"{p}.{model}.{k}: unknown key (expected {', '.join(_PRICE_KEYS)})")
        prices: dict[str, float] = {}
        for k in _PRICE_KEYS:
            v = row.get(k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                errors.append(f"{p}.{model}.{k}: expected a non-negative number, got {v!r}")
            else:
                prices[k] = float(v)
        out[model] = prices
    return out, errors


def from_mapping(data: Mapping[str, Any], *, source: str | None = None) -> Config:
    """Build a Config from parsed TOML; raises ConfigError listing every problem."""
    cfg, errors = _build(data)
    if errors:
        raise ConfigError(errors, path=source)
    return cfg


def _nearest(name: str, known: Iterable[str]) -> str:
    """" (did you mean X?)" for a typo of a known name (``warn_ration`` -> ``warn_ratio``), else ""."""
    import difflib  # only with an unknown key: never on a good config's path

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _build(data: Mapping[str, Any]) -> tuple[Config, list[str]]:
    """The config with every key that passed its checks (the others keep their defaults), and the problems.
    Only the sections the file sets are walked and cross-checked: the others are their defaults, which pass
    every check (tests/test_config.py), so a file of three keys is judged without the whole schema."""
    errors: list[str] = []
    known = dict(sections())
    built: dict[str, Any] = {}
    infos: dict[str, dict[str, KeyInfo]] = {}
    for sect, value in data.items():
        if sect not in known:
            errors.append(f"{sect}: unknown section{_nearest(sect, known)} (known: {', '.join(known)})")
        elif not isinstance(value, dict):
            errors.append(f"{sect}: expected a table, got {value!r}")
        else:
            infos[sect] = {i.path.split(".", 1)[1]: i for i in _section_schema(sect, known[sect])}
    for sect, cls in known.items():
        raw = data.get(sect)
        if sect not in infos or not isinstance(raw, dict):
            continue
        kwargs: dict[str, Any] = {}
        for k, v in raw.items():
            info = infos[sect].get(k)
            if info is None:
                errors.append(f"{sect}.{k}: unknown key{_nearest(k, infos[sect])}")
                continue
            checked, errs = _check(info, v)
            errors.extend(errs)
            if not errs:
                kwargs[k] = checked
        built[sect] = cls(**kwargs)
    # keys that failed their own check kept their defaults, so the cross-checks can still run:
    # every problem is reported at once
    cfg = Config(**built)
    crossed = _cross_checks(cfg, infos)
    for problem in crossed:  # a key that fails a cross-check is set back to its default too
        sect, _, name = problem.split(":", 1)[0].partition(".")
        section = getattr(cfg, sect, None)
        if section is not None and name in {f.name for f in fields(section)}:
            default = infos[sect][name].default
            cfg = replace(cfg, **{sect: replace(section, **{name: default})})
    return cfg, errors + crossed


def _cross_checks(cfg: Config, sections: Container[str] = ("schedule", "daemon", "sync")) -> list[str]:
    """The checks of keys against each other, of the ``sections`` given (those a file sets)."""
    errors: list[str] = []
    if "schedule" in sections:
        from memd import schedule_windows  # stdlib-only parsers shared with the scheduler

        for name in ("dream_window", "checkin_window"):
            try:
                schedule_windows.parse_window(getattr(cfg.schedule, name))
            except ValueError as e:
                errors.append(f"schedule.{name}: {e}")
        try:
            schedule_windows.parse_crontab(cfg.schedule.catchup_cron)
        except ValueError as e:
            errors.append(f"schedule.catchup_cron: {e} in {cfg.schedule.catchup_cron!r}")
    if "daemon" in sections and cfg.daemon.debounce_max_s < cfg.daemon.debounce_quiet_s:
        errors.append("daemon.debounce_max_s: must be at least daemon.debounce_quiet_s")
    if "sync" in sections:
        errors.extend(_sync_checks(cfg.sync))
    return errors


_GIT_SCHEMES = ("ssh", "git+ssh", "http", "https", "git", "file")


def _sync_checks(sc: SyncConfig) -> list[str]:
    """What a sync needs of its keys: a remote git can reach, a machine name fit for one commit line."""
    errors: list[str] = []
    remote = sc.remote.strip()
    if remote and not _git_url(remote):
        errors.append(f"sync.remote: expected a git URL (git@host:me/memory.git, ssh://..., https://..., "
                      f"file:///path or /path), got {sc.remote!r}")
    if any(c < " " or c in "<>" for c in sc.machine):
        errors.append(f"sync.machine: no control characters or <>, got {sc.machine!r}")
    return errors


def _git_url(remote: str) -> bool:
    """A remote in one of the shapes git reaches: ``scheme://...`` (ssh, git+ssh, http(s), git, file),
    ``user@host:path``, ``host:path`` (scp-like: no blank; no ``/`` before the colon, none right after it
    without a user) or ``/path``. Read with str methods, not ``re``: compiling the patterns cost a start-up
    with a ``[sync]`` section 3 ms (tests/test_config.py holds this to the patterns over generated text)."""
    if remote.startswith("/"):
        return True
    if any(c.isspace() for c in remote):
        return False
    scheme, sep, rest = remote.partition("://")
    if sep and scheme in _GIT_SCHEMES and rest:
        return True
    colon, at = remote.find(":"), remote.find("@")
    if colon < 1 or colon == len(remote) - 1 or "/" in remote[:colon]:
        return False
    return 0 < at < colon - 1 or remote[colon + 1] != "/"  # user@host:path, or host:path


def _default_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "memd", "config.toml")


def default_path() -> Path:
    from pathlib import Path

    return Path(_default_path())


def load(path: str | os.PathLike[str] | None = None) -> Config:
    """Load the config file (explicit path must exist; the default path may be absent)."""
    cfg, error = load_tolerant(path)
    if error is not None:
        raise error
    return cfg


def load_tolerant(path: str | os.PathLike[str] | None = None) -> tuple[Config, ConfigError | None]:
    """The config and what is wrong with it, never raising: a bad file gives its valid keys (the
    others, and everything when it cannot be read or parsed, at their defaults) and the error. For the
    commands a user needs to debug a bad config (`memd status`, `memd logs`)."""
    data, error = _read(path)
    if error is not None or data is None:
        return Config(), error
    cfg, problems = _build(data)
    return cfg, ConfigError(problems, path=_where(path)) if problems else None


def file_keys(path: str | os.PathLike[str] | None = None) -> set[str]:
    """The key paths ("budget.warn_ratio") the config file sets itself (empty without a readable file)."""
    data, _ = _read(path)
    out: set[str] = set()
    for sect, value in (data or {}).items():
        if isinstance(value, dict):
            out.update(f"{sect}.{k}" for k in value)
    return out


def _where(path: str | os.PathLike[str] | None) -> str:
    return os.fspath(path) if path is not None else _default_path()


def _read(path: str | os.PathLike[str] | None) -> tuple[dict[str, Any] | None, ConfigError | None]:
    """The parsed TOML of the config file (None without a file) or why it cannot be had."""
    explicit = path is not None
    p = _where(path)
    try:
        with open(p, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None, ConfigError(["file not found"], path=str(p)) if explicit else None
    except OSError as e:
        return None, ConfigError([f"cannot read: {e.strerror}"], path=str(p))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, ConfigError(["not valid UTF-8"], path=str(p))
    from memd.core import tomlflat  # a flat file without tomllib: its import is most of a quick start-up's cost

    flat = tomlflat.parse(text)
    if flat is not None:
        return flat, None
    import tomllib

    try:
        return tomllib.loads(text), None
    except tomllib.TOMLDecodeError as e:
        return None, ConfigError([f"not valid TOML: {e}"], path=str(p))


# --------------------------------------------------------------------------- rendering


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(v)


def render_toml(cfg: Config, *, comments: bool = True, from_file: set[str] | None = None,
                file_label: str = "the config file") -> str:
    """The effective config as TOML, each key preceded by its description; a key in ``from_file``
    (key paths, ``file_keys``) is marked ``# set in <file_label>``, every other one is a default."""
    marked = from_file or set()
    out: list[str] = []
    by_section: dict[str, list[KeyInfo]] = {}
    for info in schema():
        by_section.setdefault(info.path.split(".", 1)[0], []).append(info)
    for sect, cls in sections():
        sect_val = getattr(cfg, sect)
        if comments and cls.__doc__:
            out.append(f"# {cls.__doc__.strip()}")
        out.append(f"[{sect}]")
        tables: list[str] = []
        for info in by_section[sect]:
            name = info.path.split(".", 1)[1]
            value = getattr(sect_val, name)
            if isinstance(value, dict):
                if comments:
                    tables.append(f"# {info.doc}")
                if info.path in marked:
                    tables.append(f"# set in {file_label}")
                if all(isinstance(x, str) for x in value.values()):  # a table of strings
                    tables.append(f"[{info.path}]")
                    tables.extend(f"{_toml_value(k)} = {_toml_value(x)}" for k, x in value.items())
                    continue
                for model, row in value.items():
                    tables.append(f'[{info.path}."{model}"]')
                    tables.extend(f"{k} = {_toml_value(x)}" for k, x in row.items())
                continue
            if comments:
                out.append(f"# {info.doc} ({_type_name(info.type)}, default {_toml_value(info.default)})")
            mark = f"  # set in {file_label}" if info.path in marked else ""
            out.append(f"{name} = {_toml_value(value)}{mark}")
        out.extend(tables)
        out.append("")
    return "\n".join(out)
