"""Progress on long work, on a terminal only: `check --all`, `scan` and `dream`/`catchup` over many projects.

``progress(total, what)`` is a context manager giving a ``step(name)`` callable, called once per
project as it starts. On a terminal (stderr is a tty and ``TERM`` is not ``dumb``) with enough
projects to be worth it, it draws a transient bar with rich (gone when the work ends, so the
command's own output reads as before); otherwise ``step`` does nothing and rich is never imported:
the hook, a single project's check, status and ``--version`` never pay for it.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import TextIO

MIN_TOTAL = 2  # a single project is quick: no bar for it


def _quiet(_name: str) -> None:
    return None


def on_terminal(stream: TextIO | None = None) -> bool:
    s = sys.stderr if stream is None else stream
    try:
        return s.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress(total: int, what: str, stream: TextIO | None = None,
             *, threaded: bool = True) -> Iterator[Callable[[str], None]]:
    """A bar for ``total`` steps labelled ``what`` (e.g. "checking"), on ``stream`` (default stderr).
    ``threaded=False``: no refresh thread, the bar is redrawn by the steps (at most ten times a second) —
    for work that forks (`check --all`'s workers): a child forked while the refresh thread held a lock
    of the stream would wait for it for ever when it flushes at its exit."""
    s = sys.stderr if stream is None else stream
    if total < MIN_TOTAL or not on_terminal(s):
        yield _quiet
        return
    import time

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[name]}", style="dim"))
    with Progress(*columns, console=Console(file=s), transient=True, auto_refresh=threaded) as bar:
        task = bar.add_task(what, total=total, name="")
        started = [False]
        drawn = [0.0]

        def step(name: str) -> None:
            if started[0]:
                bar.advance(task)
            started[0] = True
            bar.update(task, name=name)
            if not threaded and time.monotonic() - drawn[0] >= 0.1:
                drawn[0] = time.monotonic()
                bar.refresh()

        yield step
        if started[0]:
            bar.advance(task)
