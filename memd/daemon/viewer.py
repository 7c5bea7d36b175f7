"""The viewer the daemon serves (``[ui] serve = true``): its URL file and what `memd status` says of it.

The daemon stays wiring: the viewer itself (Jinja2, the HTTP server, the pages) belongs to the door
(``memd.ui``) and is handed to the daemon as a callable by `memd run` (``Daemon.serve_viewer``), so
nothing of it is imported while ``[ui] serve`` is off. This module holds only what the daemon, `memd ui`
and `memd status` share, none of which imports the viewer's stack:

- the URL file ``<state_dir>/ui-url.json`` (``{"pid", "port", "url", "started"}``; the URL carries this
  start's token): written atomically with mode 0600 once the viewer listens, removed when it stops; never
  in a memory folder and never in a log line (the log names the port only);
- ``live_url``: the URL of a viewer the running daemon serves, or None. A file left by a daemon that died
  (SIGKILL, a power cut) is not believed: its pid must be the one holding memd's pid file, and the port
  must answer that token (the token is the proof: another process on a recycled port cannot know it);
- the heartbeat's ``viewer`` entry (``{"served": true, "port": N}`` or ``{"served": false, "reason": ...}``),
  which `memd status` turns into ``viewer: http://127.0.0.1:N/`` (without the token) or why it is not served.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

from memd.daemon import pidfile

URL_NAME = "ui-url.json"
PROBE_TIMEOUT_S = 2.0


def url_path(state_dir: Path) -> Path:
    return state_dir / URL_NAME


def write_url(state_dir: Path, *, pid: int, port: int, url: str, started: float) -> Path:
    """Record the served viewer's URL (with its token): atomic, mode 0600, in memd's state folder."""
    from memd.store import atomic_write

    path = url_path(state_dir)
    atomic_write(path, json.dumps({"pid": pid, "port": port, "url": url, "started": started}) + "\n", mode=0o600)
    return path


def remove_url(state_dir: Path, pid: int) -> None:
    """Remove the URL file if it is this process's (a newer daemon's file is left alone)."""
    data = read_url(state_dir)
    if data is not None and data.get("pid") != pid:
        return
    try:
        os.unlink(url_path(state_dir))
    except OSError:
        pass


def read_url(state_dir: Path) -> dict[str, Any] | None:
    """The URL file's record as written, or None (absent, unreadable, not memd's JSON)."""
    try:
        data = json.loads(url_path(state_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(data, dict) and isinstance(data.get("url"), str) and isinstance(data.get("port"), int)
            and isinstance(data.get("pid"), int)):
        return None
    return data


def live_url(state_dir: Path, *, probe: bool = True) -> str | None:
    """The URL of the viewer the running daemon serves; None when no live daemon serves one (no file, a
    file whose pid does not hold memd's pid file, or, with ``probe``, a port that does not answer its token)."""
    data = read_url(state_dir)
    if data is None or pidfile.running_pid(state_dir) != data["pid"]:
        return None
    url = str(data["url"])
    if probe and not answers(url, int(data["port"])):
        return None
    return url


def answers(url: str, port: int) -> bool:
    """The viewer at ``url`` takes its token: a HEAD with it is answered by the token's redirect (303)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.hostname != "127.0.0.1" or parts.port != port:
        return False
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=PROBE_TIMEOUT_S)
    try:
        conn.request("HEAD", f"/?{parts.query}", headers={"Host": f"127.0.0.1:{port}"})
        return conn.getresponse().status == 303
    except OSError:
        return False
    finally:
        conn.close()


def status_line(beat: dict[str, Any]) -> str | None:
    """`memd status`'s line for the viewer, from the live daemon's heartbeat; None when it is not asked to serve."""
    v = beat.get("viewer")
    if not isinstance(v, dict):
        return None
    if v.get("served") and isinstance(v.get("port"), int):
        return f"viewer: http://127.0.0.1:{v['port']}/ (`memd ui` prints the URL with its token)"
    return f"viewer: not served: {v.get('reason') or 'unknown reason'}"


class Slot:
    """The daemon's viewer: started at the daemon's start when ``[ui] serve`` is on, stopped at its stop.

    ``serve`` is `memd run`'s ``memd.ui.service.serve`` (None: this daemon cannot serve one). A viewer that
    cannot start (no Jinja2, the port taken) is logged (``ui.not_served``) and said by `memd status`; the
    daemon runs on without it. ``state`` is the heartbeat's ``viewer`` entry (None: not asked to serve).
    """

    def __init__(self, serve: Any, state_dir: Path, log: Any) -> None:
        self.serve, self.state_dir, self.log = serve, state_dir, log
        self.served: Any = None
        self.state: dict[str, Any] | None = None

    def start(self, config: Any, current_config: Any, claude_dir: Any) -> None:
        if not config.ui.serve:
            self.state = None
            return
        reason = None
        if self.serve is None:
            reason = "this daemon was started without the viewer (memd run serves it)"
        else:
            try:
                self.served = self.serve(current_config, claude_dir, self.state_dir, config.ui.port)
            except ImportError:
                from memd import install_hint

                reason = f"Jinja2 is not installed: {install_hint('ui')}"
            except OSError as e:
                port = config.ui.port
                taken = e.errno == errno.EADDRINUSE
                reason = (f"port {port} on 127.0.0.1 is taken" if taken else
                          f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}") + " ([ui] port)"
            except Exception as e:  # the daemon runs on whatever the viewer does
                reason = f"{type(e).__name__}: {e}"
        if reason is not None:
            self.state = {"served": False, "reason": reason}
            self.log.warning("ui.not_served", reason=reason)
            return
        self.state = {"served": True, "port": self.served.port}
        self.log.info("ui.served", port=self.served.port, url_file=str(url_path(self.state_dir)))

    def stop(self) -> None:
        if self.served is not None:
            served, self.served = self.served, None
            try:
                served.stop()
            except Exception as e:
                self.log.warning("ui.stop_failed", error=f"{type(e).__name__}: {e}")
            else:
                self.log.info("ui.stopped", port=served.port)
        self.state = None
