"""The viewer as the daemon serves it (``[ui] serve = true``): `memd ui`'s pages and server in a thread.

`memd run` hands ``serve`` to the daemon (``Daemon.serve_viewer``) without importing it; the daemon calls
it at start only when ``[ui] serve`` is on, so Jinja2 and the HTTP server are imported then and only
then. The pages are `memd ui`'s own (``memd.commands.ui.pages``), read through the daemon's current
config and Claude folder (a SIGHUP's new ones included); the safety checks are the server's (docs/ui.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memd.config import Config


class _Live:
    """What `memd ui`'s pages read from a Context, read from the daemon at each request."""

    def __init__(self, config: Callable[[], Config], claude_dir: Callable[[], Path], state_dir: Path) -> None:
        self._config, self._claude_dir, self.state_dir = config, claude_dir, state_dir

    @property
    def config(self) -> Config:
        return self._config()

    @property
    def claude_dir(self) -> Path:
        return self._claude_dir()


class Served:
    """A viewer listening in a thread, with its URL file written; ``stop()`` ends both."""

    def __init__(self, running: Any, state_dir: Path, port: int, url: str) -> None:
        self.running, self.state_dir, self.port, self.url = running, state_dir, port, url
        self._stopped = False

    def stop(self) -> None:
        from memd.daemon.viewer import remove_url

        if self._stopped:
            return
        self._stopped = True
        remove_url(self.state_dir, os.getpid())  # first: no one is sent to a viewer that is going
        self.running.__exit__(None, None, None)


def serve(config: Callable[[], Config], claude_dir: Callable[[], Path], state_dir: Path, port: int) -> Served:
    """Start the viewer on 127.0.0.1:``port`` (0: a free one) in a thread and write its URL file.
    Raises ``ImportError`` without Jinja2 and ``OSError`` when the port cannot be had; nothing is left
    running then."""
    import jinja2  # noqa: F401  (the clear ImportError, before anything starts)

    from memd.commands.ui import pages, posts
    from memd.daemon.viewer import write_url
    from memd.ui.server import Running, Viewer

    live = _Live(config, claude_dir, state_dir)
    viewer = Viewer(pages(live), actions=posts(live))  # type: ignore[arg-type]
    running = Running(viewer, port)
    url = running.__enter__()
    try:
        write_url(state_dir, pid=os.getpid(), port=viewer.port, url=url, started=time.time())
    except BaseException:
        running.__exit__(None, None, None)
        raise
    return Served(running, state_dir, viewer.port, url)
