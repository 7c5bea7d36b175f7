"""`memd ui --open` without the token on a command line.

A process's arguments are readable by every user of the machine (``/proc/PID/cmdline``, ``ps``), so the
browser is never given the URL that carries the token: it is given a page of memd's state folder that
only the user can read (mode 0600, written atomically), which sends it on to the URL (the way Jupyter
opens its own). `memd ui` removes the page when it stops; the daemon's viewer's page (``memd ui`` while
the daemon serves it) stays beside ``ui-url.json``, which holds the same token with the same mode, and is
written again at the next ``--open``.
"""

from __future__ import annotations

import html
from pathlib import Path

OPEN_NAME = "ui-open-{port}.html"
NO_BROWSER = ("memd ui: no browser could be started here; open the URL above (over ssh: "
              "`ssh -L PORT:127.0.0.1:PORT host`, then the same URL)")


def page_path(state_dir: Path, port: int) -> Path:
    return state_dir / OPEN_NAME.format(port=port)


def redirect_page(url: str) -> str:
    u = html.escape(url, quote=True)
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
            f'<meta http-equiv="refresh" content="0;url={u}"><title>memd ui</title></head>\n'
            f'<body><p><a href="{u}">Open memd ui</a></p></body></html>\n')


def open_browser(url: str, state_dir: Path, port: int) -> Path:
    """Write the page that sends the browser to ``url`` and open the browser on it (saying so when no
    browser could be started: a headless machine); the page's path."""
    import webbrowser

    from memd.store import atomic_write

    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = page_path(state_dir, port)
    atomic_write(path, redirect_page(url), mode=0o600)
    if not webbrowser.open(path.as_uri()):
        print(NO_BROWSER, flush=True)
    return path


def remove(path: Path | None) -> None:
    if path is None:
        return
    try:
        path.unlink()
    except OSError:
        pass
