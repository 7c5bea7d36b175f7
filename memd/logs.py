"""memd's logs: structlog events as JSON lines in ``state_dir/memd.log``, readable lines on a terminal.

One pipeline for everything: memd's own structlog loggers and the stdlib loggers of our
dependencies (APScheduler, watchdog, memd.state) all go through ``ProcessorFormatter``, so
the file holds one JSON object per line whoever logged it. The file handler is a
``WatchedFileHandler``: when logrotate (or a user) moves the file away, the next line goes
to a fresh file instead of the moved one.

Rotation by size (``logging.max_bytes``, ``logging.backups``): the daemon and the commands rotate
``memd.log`` to ``memd.log.1`` … when a line of theirs leaves it past the limit, under a lock on the
state folder so two writers never rotate twice; every other writer (the hooks open the file for each
line) follows the move on its next line. launchd keeps its ``StandardOutPath``/``StandardErrorPath``
files open for good and rotates nothing, so those are copied and truncated in place instead.

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
# The files launchd writes memd's stdout and stderr to (memd.daemon.service_files writes their paths).
SERVICE_LOGS = ("launchd.out.log", "launchd.err.log")
DEFAULT_MAX_BYTES = 10_000_000
DEFAULT_BACKUPS = 5


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


class _DirLock:
    """An exclusive ``flock`` on a folder: rotations of the files in it happen one at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.fd = -1

    def __enter__(self) -> _DirLock:
        import fcntl

        self.fd = os.open(self.folder, os.O_RDONLY)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # releases the lock


def rotate(path: Path, max_bytes: int, backups: int, *, copy_truncate: bool = False) -> bool:
    """Rotate ``path`` to ``path.1`` (older ones to ``.2`` … ``.backups``, the oldest dropped) when it
    holds ``max_bytes`` or more; True when it did. ``copy_truncate``: copy, then empty the file in
    place (for a file another process keeps open, launchd's). Never raises: a log that cannot rotate
    goes on growing rather than stop the writer."""
    if max_bytes <= 0:
        return False
    try:
        if os.stat(path).st_size < max_bytes:
            return False
        with _DirLock(path.parent):
            if os.stat(path).st_size < max_bytes:
                return False  # another writer rotated it while we waited
            for i in range(backups - 1, 0, -1):
                older = Path(f"{path}.{i}")
                if older.exists():
                    os.replace(older, f"{path}.{i + 1}")
            if copy_truncate:
                import shutil

                shutil.copyfile(path, f"{path}.1")
                os.chmod(f"{path}.1", 0o600)
                os.truncate(path, 0)
            else:
                os.replace(path, f"{path}.1")
        return True
    except OSError:
        return False


def rotate_service_logs(state_dir: Path, max_bytes: int, backups: int) -> None:
    """launchd's out and err files, copied and truncated when past the limit; our own descriptors on
    them (memd's stdout and stderr under launchd) are moved back to the start, so a descriptor opened
    without O_APPEND does not go on writing past a hole."""
    for name in SERVICE_LOGS:
        path = state_dir / name
        if not rotate(path, max_bytes, backups, copy_truncate=True):
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
                fd = stream.fileno()
                fst = os.fstat(fd)
                if (fst.st_dev, fst.st_ino) == (st.st_dev, st.st_ino):
                    os.lseek(fd, 0, os.SEEK_SET)
            except (OSError, ValueError, AttributeError):
                pass


class _RotatingFileHandler(logging.handlers.WatchedFileHandler):
    """memd.log: reopened when moved away (logrotate, another memd writer's rotation), rotated when a
    line of ours takes it past ``max_bytes``."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        super().__init__(path, encoding="utf-8")
        self.max_bytes = max_bytes
        self.backups = backups

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if self.max_bytes <= 0 or self.stream is None:
            return
        try:
            big = os.fstat(self.stream.fileno()).st_size >= self.max_bytes
        except (OSError, ValueError):
            return
        if big:
            rotate(Path(self.baseFilename), self.max_bytes, self.backups)  # the next line reopens


class _ServiceLogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Readable lines on stdout or stderr; where those are launchd's files, they are kept in bounds."""

    def __init__(self, stream: Any, state_dir: Path | None, max_bytes: int, backups: int) -> None:
        super().__init__(stream)
        self.state_dir = state_dir
        self.max_bytes = max_bytes
        self.backups = backups

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if self.state_dir is None or self.max_bytes <= 0:
            return
        try:
            st = os.fstat(self.stream.fileno())
        except (OSError, ValueError, AttributeError):
            return
        import stat

        if stat.S_ISREG(st.st_mode) and st.st_size >= self.max_bytes:
            rotate_service_logs(self.state_dir, self.max_bytes, self.backups)


_light = False  # set by setup(light=True): get_logger() gives a LightLogger, structlog is never imported


def setup(state_dir: Path | None, *, level: str = "info", console: bool | None = None,
          max_bytes: int = DEFAULT_MAX_BYTES, backups: int = DEFAULT_BACKUPS, light: bool = False) -> None:
    """Configure structlog and the stdlib root logger (idempotent: a second call reconfigures).

    ``state_dir`` None logs to the console only (foreground commands without a state folder).
    ``console``: readable lines too (None: only on a terminal or under journald), on ``console_stream()``.
    ``max_bytes``, ``backups``: rotation (``logging.max_bytes``, ``logging.backups``; 0 bytes never rotates).
    ``light``: the same JSON lines and readable lines without structlog (a short command such as `memd sync`:
    importing structlog brings rich, pygments, asyncio and ssl, several times the command's own work).
    """
    global _light
    _light = light
    if light:
        _setup_light(state_dir, level, console, max_bytes, backups)
        return
    import structlog

    lvl = getattr(logging, level.upper(), logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        _add_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _exception_text,
        _scrub,
    ]
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *shared,
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    root = _root(lvl)
    foreign: list[Any] = [*shared, structlog.stdlib.ExtraAdder()]
    if state_dir is not None:
        _add_file_handler(root, state_dir, max_bytes, backups, structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                        structlog.processors.format_exc_info, _order,
                        structlog.processors.JSONRenderer(sort_keys=False)],
            foreign_pre_chain=foreign))
    if console if console is not None else console_wanted():
        journald = bool(os.environ.get("JOURNAL_STREAM"))
        ch = _ServiceLogHandler(console_stream(), state_dir, max_bytes, backups)
        procs: list[Any] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
        if journald:
            procs.append(_drop_timestamp)  # journald stamps each line itself
        procs.append(structlog.dev.ConsoleRenderer(colors=not journald and _isatty(sys.stderr)))
        ch.setFormatter(structlog.stdlib.ProcessorFormatter(processors=procs, foreign_pre_chain=foreign))
        ch._memd = True  # type: ignore[attr-defined]
        root.addHandler(ch)


def _root(lvl: int) -> logging.Logger:
    """The root logger at ``lvl``, memd's old handlers gone (both set-ups)."""
    reset()
    root = logging.getLogger()
    root.setLevel(lvl)
    # Our dependencies are chatty at INFO (every job added, every run); keep their warnings.
    for noisy in ("apscheduler", "watchdog"):
        logging.getLogger(noisy).setLevel(max(lvl, logging.WARNING))
    return root


def _add_file_handler(root: logging.Logger, state_dir: Path, max_bytes: int, backups: int,
                      formatter: logging.Formatter) -> None:
    """The JSON log file in the state folder (0600, rotated), with ``formatter`` (both set-ups)."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = log_path(state_dir)
    rotate(path, max_bytes, backups)
    rotate_service_logs(state_dir, max_bytes, backups)
    fh = _RotatingFileHandler(path, max_bytes, backups)
    try:
        os.chmod(path, 0o600)
    except OSError:
        pass
    fh.setFormatter(formatter)
    fh._memd = True  # type: ignore[attr-defined]
    root.addHandler(fh)


def _setup_light(state_dir: Path | None, level: str, console: bool | None, max_bytes: int, backups: int) -> None:
    root = _root(getattr(logging, level.upper(), logging.INFO))
    if state_dir is not None:
        _add_file_handler(root, state_dir, max_bytes, backups, _JsonFormatter())
    if console if console is not None else console_wanted():
        ch = _ServiceLogHandler(console_stream(), state_dir, max_bytes, backups)
        ch.setFormatter(_LineFormatter())
        ch._memd = True  # type: ignore[attr-defined]
        root.addHandler(ch)


def _now_iso() -> str:
    import time

    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def _event_of(record: logging.LogRecord) -> dict[str, Any]:
    """A record's event as structlog's pipeline makes it: a LightLogger's as it built it, a stdlib logger's
    (a dependency's, memd.state's) from its message, level, name and exception."""
    ev = getattr(record, "memd_event", None)
    if isinstance(ev, dict):
        return ev
    out: dict[str, Any] = {"event": record.getMessage(), "logger": record.name}
    _add_level(None, record.levelname.lower(), out)
    out["timestamp"] = _now_iso()
    if record.exc_info:
        out["exc_info"] = record.exc_info
    return _scrub(None, "", _exception_text(None, "", out))


class _JsonFormatter(logging.Formatter):
    """The JSON line structlog's JSONRenderer writes (timestamp, level, event first), without structlog."""

    def format(self, record: logging.LogRecord) -> str:
        import json

        return json.dumps(_order(None, "", _event_of(record)), default=str)


class _LineFormatter(logging.Formatter):
    """A readable line (``memd logs``'s) for the console."""

    def format(self, record: logging.LogRecord) -> str:
        import json

        return render_line(json.dumps(_order(None, "", _event_of(record)), default=str))


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
           "error": logging.ERROR, "exception": logging.ERROR, "critical": logging.CRITICAL,
           "fatal": logging.CRITICAL}


class LightLogger:
    """structlog's logger API (``log.info("event.name", key=value)``) over the stdlib logger of that name,
    with the processors of ``setup`` (level, logger, timestamp, exception text, scrubbing) applied here."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._log = logging.getLogger(name)

    def _emit(self, method: str, event: str, fields: dict[str, Any]) -> None:
        lvl = _LEVELS[method]
        if not self._log.isEnabledFor(lvl):
            return
        ev: dict[str, Any] = {"event": event, **fields}
        _add_level(None, method, ev)
        ev["logger"] = self.name
        ev["timestamp"] = _now_iso()
        if method == "exception":
            ev.setdefault("exc_info", True)
        ev = _scrub(None, method, _exception_text(None, method, ev))
        self._log.log(lvl, event, extra={"memd_event": ev})

    def __getattr__(self, method: str) -> Any:
        if method not in _LEVELS:
            raise AttributeError(method)
        return lambda event, **fields: self._emit(method, event, fields)


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
    # log.exception() is an error with a traceback: "error", so the documented filter finds crashes too
    event["level"] = {"warn": "warning", "fatal": "critical", "exception": "error"}.get(method, method)
    return event


MAX_TRACEBACK_CHARS = 8000


def _exception_text(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    """A crash's traceback as plain text (file, line, code: never the frames' local variables, which the
    console renderer's rich traceback would print, memory text and keys included), bounded, and made
    before ``_scrub`` so the scrubber sees it like any other field."""
    exc = event.pop("exc_info", None)
    if not exc:
        return event
    import traceback

    if exc is True:
        exc = sys.exc_info()
    elif isinstance(exc, BaseException):
        exc = (type(exc), exc, exc.__traceback__)
    if isinstance(exc, tuple) and len(exc) == 3 and exc[0] is not None:
        text = "".join(traceback.format_exception(*exc))
        event["exception"] = text if len(text) <= MAX_TRACEBACK_CHARS else "…" + text[-MAX_TRACEBACK_CHARS:]
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
    """A structlog logger (``log.info("event.name", key=value)``); silent until ``setup`` ran. After a
    light ``setup``, a LightLogger (the same calls, the same lines)."""
    if _light:
        return LightLogger(name)
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
