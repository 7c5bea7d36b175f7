"""`memd ui`: serve the local memory viewer on 127.0.0.1 and print its URL (with this start's token).

The pages read through the owners the CLI reads through (memd.ui.views); the server and its safety
checks are memd.ui.server (docs/ui.md). Jinja2 and the server are imported here only, inside ``run``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memd.cli import Context
    from memd.ui.server import Pages

HELP = ("serve a local viewer of every project's memory, budgets and history on 127.0.0.1 (it changes "
        "nothing but through a confirmed action: undo a run, retry parked catch-up spans, accept held sync files)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=0, metavar="N",
                   help="port on 127.0.0.1 (default: a free one the system picks)")
    p.add_argument("--open", action="store_true", help="open the viewer in the browser")
    p.add_argument("--here", action="store_true",
                   help="serve a viewer of its own even when the daemon serves one ([ui] serve = true)")


def pages(ctx: Context) -> Pages:
    """The viewer's pages, each reading afresh on every request (the page is what is on disk now)."""
    from memd import layout
    from memd.ui import actions, views

    def projects() -> list[layout.Project]:
        return layout.list_projects(ctx.claude_dir)

    def overview(rest: list[str]) -> tuple[str, dict[str, Any]] | None:
        if rest:
            return None
        from memd.ui.charts import first_screen_nights, spark_data

        view = views.overview(projects(), ctx.config, ctx.state_dir)
        names = [p.name for p in view.projects]
        strips = first_screen_nights(names, ctx.state_dir)
        return "overview.html", {"view": view, "nights": strips, "spark": spark_data(strips, names)}

    def project(rest: list[str]) -> tuple[str, dict[str, Any]] | None:
        if len(rest) != 1:
            return None
        found = next((p for p in projects() if p.name == rest[0]), None)
        if found is None:
            return None
        from memd.ui.charts import charts_view

        return "project.html", {"page": views.project_page(found, ctx.config, ctx.state_dir, before=_before()),
                                "charts": charts_view(found, ctx.config, ctx.state_dir),
                                **actions.project_extras(ctx, found)}

    def report(rest: list[str]) -> tuple[str, dict[str, Any]] | None:
        return None if rest else ("report.html", {"report": views.report_page(ctx.state_dir)})

    return {"": overview, "project": project, "report": report, **actions.confirm_pages(ctx)}


def posts(ctx: Context) -> Pages:
    """The actions behind the confirmation pages (memd.ui.actions): what a confirmed POST runs."""
    from memd.ui import actions

    return actions.posts(ctx)


def _daemon_serves(args: argparse.Namespace, ctx: Context) -> bool:
    """The running daemon serves the viewer ([ui] serve = true): print (and open) its URL."""
    from memd.daemon.viewer import live_url

    address = live_url(ctx.state_dir)
    if address is None:
        return False
    print(f"memd ui: {address}\n(served by the running daemon; `memd ui --here` serves one of its own)", flush=True)
    if args.open:  # the token never on the browser's command line (memd.ui.opener)
        from urllib.parse import urlsplit

        from memd.ui.opener import open_browser

        open_browser(address, ctx.state_dir, urlsplit(address).port or 0)
    return True


def _before() -> int | None:
    """The timeline page's ``?before=<run>`` (the older runs), checked."""
    from memd.ui.server import query

    got = query("before")
    if got is None:
        return None
    if not got.isdigit() or len(got) > 18:
        raise ValueError(f"?before={got[:40]!r}: expected a run's number (the timeline's link to older runs)")
    return int(got)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._projects import require_claude_dir
    from memd.errors import UsageError

    require_claude_dir(args, ctx)
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: a port is 0 to 65535")
    if not args.here and _daemon_serves(args, ctx):
        return 0
    try:
        import jinja2  # noqa: F401
    except ImportError:
        from memd import install_hint

        raise UsageError(f"memd ui needs Jinja2: {install_hint('ui')}") from None
    from memd.ui.server import Viewer, make_server, url

    viewer = Viewer(pages(ctx), actions=posts(ctx))
    try:
        server = make_server(viewer, args.port)
    except OSError as e:
        raise UsageError(f"cannot listen on 127.0.0.1:{args.port}: {e.strerror}") from None
    address = url(viewer)
    print(f"memd ui: {address}\n(changes only through confirmed actions; Ctrl-C stops it)", flush=True)
    import signal

    from memd.ui.opener import open_browser, page_path, remove

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM (`kill`, a service manager) stops it as Ctrl-C does: cleaned up

    signal.signal(signal.SIGTERM, stop)
    opened = page_path(ctx.state_dir, viewer.port) if args.open else None  # removed however it stops
    try:
        if args.open:
            open_browser(address, ctx.state_dir, viewer.port)  # no token in the browser's argv
        server.serve_forever()
    except KeyboardInterrupt:
        print("memd ui: stopped")
    finally:
        server.server_close()
        remove(opened)
    return 0
