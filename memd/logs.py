"""memd's logs: structlog events as JSON lines in ``state_dir/memd.log``, readable lines on a terminal.

One pipeline for everything: memd's own structlog loggers and the stdlib loggers of our
dependencies (APScheduler, watchdog, memd.state) all go through ``ProcessorFormatter``, so
the file holds one JSON object per line whoever logged it. The file handler is a
``WatchedFileHandler``: when logrotate (or a user) moves the file away, the next line goes
to a fresh file instead of the moved one.

Logs carry names, counts, levels and times, never memory content, never secrets: a last
processor drops any string value the secret scanner flags, and cuts long strings, so a
careless call cannot leak a memory body or a key into a file that lives for months.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

LOG_NAME = "memd.log"
_MAX_VALUE_CHARS = 500


def log_path(state_dir: Path) -> Path:
    return state_dir / LOG_NAME


def _clean(v: str) -> str:
    from memd.core import secrets

    if secrets.scan(v):
        return "[redacted: looks like a secret]"
    if len(v) > _MAX_VALUE_CHARS:
        return v[:_MAX_VALUE_CHARS] + f"... [{len(v) - _MAX_VALUE_CHARS} more characters]"
    return v


def _scrub(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    for k, v in list(event.items()):
        if k in ("timestamp", "level", "logger"):
            continue
        if isinstance(v, str):
            event[k] = _clean(v)
        elif isinstance(v, (list, tuple)) and any(isinstance(x, str) for x in v):
            event[k] = [_clean(x) if isinstance(x, str) else x for x in v]  # e.g. hidden_titles
    return event


def console_wanted(stream: Any = None) -> bool:
    """A readable console stream on a terminal or under journald (which reads our stderr)."""
    s = sys.stderr if stream is None else stream
    if os.environ.get("JOURNAL_STREAM"):
        return True
    return _isatty(s)


def console_stream() -> Any:
    """Where readable lines go: stderr on a terminal or under journald, else stdout (launchd's
    ``StandardOutPath``, a redirect), so the lines are where a service manager's out log is."""
    if os.environ.get("JOURNAL_STREAM") or _isatty(sys.stderr):
        return sys.stderr
    return sys.stdout


def setup(state_dir: Path | None, *, level: str = "info", console: bool | None = None) -> None:
    """Configure structlog and the stdlib root logger (idempotent: a second call reconfigures).

    ``state_dir`` None logs to the console only (foreground commands without a state folder).
    ``console``: readable lines too (None: only on a terminal or under journald), on ``console_stream()``.
    """
    import structlog

    lvl = getattr(logging, level.upper(), logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        _add_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _scrub,
    ]
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *shared,
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    reset()
    root = logging.getLogger()
    root.setLevel(lvl)
    # Our dependencies are chatty at INFO (every job added, every run); keep their warnings.
    for noisy in ("apscheduler", "watchdog"):
        logging.getLogger(noisy).setLevel(max(lvl, logging.WARNING))

    foreign: list[Any] = [*shared, structlog.stdlib.ExtraAdder()]
    if state_dir is not None:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = log_path(state_dir)
        fh = logging.handlers.WatchedFileHandler(path, encoding="utf-8")
        try:
            os.chmod(path, 0o600)
        except OSError:
            pass
        fh.setFormatter(structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                        structlog.processors.format_exc_info, _order,
                        structlog.processors.JSONRenderer(sort_keys=False)],
            foreign_pre_chain=foreign))
        fh._memd = True  # type: ignore[attr-defined]
        root.addHandler(fh)
    if console if console is not None else console_wanted():
        journald = bool(os.environ.get("JOURNAL_STREAM"))
        ch = logging.StreamHandler(console_stream())
        procs: list[Any] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
        if journald:
            procs.append(_drop_timestamp)  # journald stamps each line itself
        procs.append(structlog.dev.ConsoleRenderer(colors=not journald and _isatty(sys.stderr)))
        ch.setFormatter(structlog.stdlib.ProcessorFormatter(processors=procs, foreign_pre_chain=foreign))
        ch._memd = True  # type: ignore[attr-defined]
        root.addHandler(ch)


def reset() -> None:
    """Remove memd's handlers from the root logger (tests; a command that is done logging)."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_memd", False):
            root.removeHandler(h)
            h.close()


_FIRST = ("timestamp", "level", "event")


def _order(logger: Any, method: str, event: MutableMapping[str, Any]) -> dict[str, Any]:
    # time, severity and name first: the file reads well with `tail` and `jq -c`
    out = {k: event[k] for k in _FIRST if k in event}
    out.update((k, v) for k, v in event.items() if k not in out)
    return out


def _add_level(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    # One key for severity everywhere, structlog's "level" (the hooks write it too), so
    # `jq 'select(.level == "error")'` finds every error. An event's own figure named "level" (a
    # caller's slip: budget.warning says budget_level) is kept beside it, never over it.
    own = event.pop("level", None)
    if own is not None:
        event["event_level"] = own
    event["level"] = "warning" if method == "warn" else ("critical" if method == "fatal" else method)
    return event


def _drop_timestamp(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    event.pop("timestamp", None)
    return event


def _isatty(s: Any) -> bool:
    try:
        return bool(s.isatty())
    except (AttributeError, ValueError):
        return False


def get_logger(name: str = "memd") -> Any:
    """A structlog logger (``log.info("event.name", key=value)``); silent until ``setup`` ran."""
    import structlog

    return structlog.get_logger(name)


def render_line(line: str) -> str:
    """One JSON log line as a readable line (``memd logs``); non-JSON lines come back as they are."""
    import json

    try:
        ev = json.loads(line)
    except ValueError:
        return line.rstrip("\n")
    if not isinstance(ev, dict):
        return line.rstrip("\n")
    ts = str(ev.pop("timestamp", ""))
    old = ev.pop("severity", "")  # logs written before the one "level" key
    level = str(ev.pop("level", None) or old).upper()
    name = str(ev.pop("event", ""))
    ev.pop("logger", None)
    rest = " ".join(f"{k}={_short(v)}" for k, v in ev.items())
    return f"{ts[:19].replace('T', ' ')} {level:<7} {name} {rest}".rstrip()


def _short(v: Any) -> str:
    import json

    if isinstance(v, str):
        return v if v and " " not in v else json.dumps(v)
    return json.dumps(v, default=str)
