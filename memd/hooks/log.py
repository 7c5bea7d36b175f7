"""One JSON line appended to memd's log, with the standard library only.

The hook runs on every tool call, so it cannot afford structlog (or even ``logging``). It writes
the same shape of line the daemon's structlog JSON renderer writes (``timestamp``, ``level``,
``event``, ``logger`` and fields) to the same file, ``<state>/memd.log``: one ``os.write`` of one
line on an ``O_APPEND`` descriptor, so lines from concurrent hooks and the daemon never interleave.
Logging never raises and never records memory text or secrets: callers pass kinds, counts, paths.
"""

from __future__ import annotations

import os
import sys
import time

from memd.core import jsonfast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LOG_NAME = "memd.log"
_MAX_FIELD = 2000  # characters of one string field (an exception message, a path)


def default_state_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "memd")


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _MAX_FIELD:
        return value[:_MAX_FIELD] + "…"
    return value


def append(state_dir: str | None, level: str, event: str, **fields: Any) -> None:
    """Append one line to ``<state_dir>/memd.log``; silent on every failure."""
    try:
        folder = state_dir or default_state_dir()
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
        record: dict[str, Any] = {"timestamp": stamp, "level": level, "event": event, "logger": "memd.hook",
                                  "pid": os.getpid()}
        record.update({k: _clip(v) for k, v in fields.items()})
        line = (jsonfast.dumps(record, default=str) + "\n").encode("utf-8", "replace")
        path = os.path.join(folder, LOG_NAME)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except FileNotFoundError:  # the first line ever: the folder first (not a mkdir on every line)
            os.makedirs(folder, mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except Exception:  # a log line is never worth breaking a session for
        if os.environ.get("MEMD_HOOK_DEBUG"):
            print("memd hook: could not write the log", file=sys.stderr)


def describe_exception(exc: BaseException) -> dict[str, str]:
    """Type, message (secrets redacted when the scanner is at hand) and the innermost frame."""
    msg = str(exc)
    try:
        from memd.core import secrets

        msg = secrets.redact(msg)
    except Exception:  # the message as it is, cut short
        msg = msg[:200]
    where = ""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        where = f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
    return {"error": f"{type(exc).__name__}: {msg}", "where": where}
